"""The language models a prompt runs on, and how much of them trains (notebook 09).

Any :class:`~tutorial_lib.backbones.Backbone` with an LM head is a prompt's LM: its
``answer_slot`` says where it answers (``"mask"``: a masked LM, at a [MASK] token; ``"next"``: a
causal LM, as the next token), and it gives what prompting (:mod:`.prompting`) and DART
(:mod:`.dart`) need, the same for ours and Hugging Face's: ``features`` (what the head's output
matrix reads), ``decoder_weight``/``decoder_bias``, the token-embedding module (DART swaps in an
extended one), ``literal_ids``/``piece_ids``/``special_wrap`` (how text becomes ids).
:func:`load_prompt_lm` loads one; :func:`freeze_below` is the CPU budget: only the top layers of a
causal LM train.
"""

from __future__ import annotations

import copy
import dataclasses

from ..backbones import OURS, Backbone, load_backbone
from ..config import Scale


class PromptError(ValueError):
    """A template, verbalizer or backbone that cannot make a prompt classifier."""


def load_prompt_lm(name: str, scale: Scale) -> Backbone:
    """An LM with its pretrained head for prompting: a masked LM (``"ours-mlm"``, a Hub masked LM
    such as ``roberta-large``) or a causal LM (``"smollm2"``, a Hub causal LM such as ``gpt2``)."""
    if name in OURS:
        return load_mlm(name, scale)
    bb = load_backbone(name, scale)
    return bb if bb.kind == "causal" else load_mlm(name, scale)


def load_mlm(name: str, scale: Scale) -> Backbone:
    """A masked LM for prompting: ``"ours-mlm"`` (notebook 01's, pretrained now if not cached) or
    a Hugging Face masked LM (``roberta-large`` … on the Hub)."""
    bb = load_backbone(name, scale, kind=None if name in OURS else "masked")
    if bb.kind != "masked":
        raise PromptError(f"{name!r} is a {bb.kind} model; prompting with [MASK] needs a masked LM")
    return bb


def fresh_copy(lm: Backbone) -> Backbone:
    """A private copy of ``lm`` (its network copied, tokenizer shared), so runs never share weights."""
    return dataclasses.replace(lm, lm=copy.deepcopy(lm.lm), encoder=None)


def freeze_below(lm: Backbone, trainable_layers: int | None) -> None:
    """Freeze everything but the top ``trainable_layers`` decoder layers and the final norm of a
    causal LM (None: train all). The word embeddings stay frozen: they are the tied LM head,
    whose label rows are the classifier. On a CPU this is what makes a 135M model trainable."""
    if trainable_layers is None:
        return
    layers = getattr(lm.encoder, "layers", None)
    if lm.answer_slot != "next" or layers is None:
        raise PromptError("freeze_below is for a causal LM's decoder layers")
    for p in lm.lm.parameters():
        p.requires_grad_(False)
    keep = list(layers)[len(layers) - trainable_layers:] + [lm.encoder.norm]
    for module in keep:
        for p in module.parameters():
            p.requires_grad_(True)


__all__ = ["PromptError", "fresh_copy", "freeze_below", "load_mlm", "load_prompt_lm"]
