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

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from ...anatomy import Anatomy, anatomy
from ...backbones import OURS, Backbone, load_backbone
from ...config import Scale


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
    """A masked LM for prompting: ``"ours-mlm"`` (notebook 01's: ``pretraining.ensure`` it first) or
    a Hugging Face masked LM (``roberta-large`` … on the Hub)."""
    bb = load_backbone(name, scale, kind=None if name in OURS else "masked")
    if bb.kind != "masked":
        raise PromptError(f"{name!r} is a {bb.kind} model; prompting with [MASK] needs a masked LM")
    return bb


def fresh_copy(lm: Backbone, trainable_layers: int | None = None) -> Backbone:
    """A private copy of ``lm`` (its network copied, tokenizer shared), so runs never share the
    weights they train; every parameter of the copy trains until frozen.

    ``trainable_layers``: the copy is for a run that trains only the top ``trainable_layers``
    decoder layers and the final norm (:func:`freeze_below`, called next): it copies only those and
    *shares* every other weight with ``lm`` — weights the run freezes and never changes, so the
    runs of notebook 09 cost a few percent of the LM each instead of a whole copy."""
    memo: dict[int, object] = {}
    parts = _decoder_anatomy(lm.encoder) if trainable_layers is not None else None
    if parts is not None:
        n = len(parts.blocks)
        trained = [*list(parts.blocks)[n - trainable_layers:], parts.final_norm]
        own = {id(p) for m in trained for p in m.parameters()}
        memo = {id(p): p for p in lm.lm.parameters() if id(p) not in own}
    copied = copy.deepcopy(lm.lm, memo)
    for p in copied.parameters():
        if id(p) not in memo:
            p.requires_grad_(True)
    return dataclasses.replace(lm, lm=copied, encoder=None)


def _decoder_anatomy(encoder: nn.Module) -> Anatomy | None:
    """The anatomy of a Hugging Face decoder (Llama-like: ``layers`` + ``norm``), else None."""
    try:
        parts = anatomy(encoder)
    except TypeError:
        return None
    return parts if parts.family == "llama" else None


def freeze_below(lm: Backbone, trainable_layers: int | None) -> None:
    """Freeze everything but the top ``trainable_layers`` decoder layers and the final norm of a
    causal LM (None: train all). The word embeddings stay frozen: they are the tied LM head,
    whose label rows are the classifier. On a CPU this is what makes a 135M model trainable."""
    if trainable_layers is None:
        return
    parts = _decoder_anatomy(lm.encoder)
    if lm.answer_slot != "next" or parts is None:
        raise PromptError("freeze_below is for a causal LM's decoder layers")
    for p in lm.lm.parameters():
        p.requires_grad_(False)
    layers = parts.blocks
    keep = list(layers)[len(layers) - trainable_layers:] + [parts.final_norm]
    for module in keep:
        for p in module.parameters():
            p.requires_grad_(True)


class FrozenStates:
    """The states a causal LM's frozen lower layers give each input, computed once.

    Below the top ``trainable_layers`` (:func:`freeze_below`) nothing trains and a causal LM has no
    dropout, so the input of the first trained layer is a fixed function of the token ids: every
    run, split and evaluation that sees the same ids would recompute the same states. One
    ``FrozenStates`` per frozen LM keeps them (keyed by the ids; a real token never attends to the
    right padding after it, so a row's states do not depend on its batch) and :class:`TopLayers`
    runs only the trained layers on them. The runs of notebook 09 read each example up to 10 times.
    """

    def __init__(self, trainable_layers: int) -> None:
        self.trainable_layers = trainable_layers
        self.states: dict[tuple[int, ...], torch.Tensor] = {}

    def lower(self, decoder: nn.Module, input_ids: torch.Tensor,
              attention_mask: torch.Tensor) -> torch.Tensor:
        """[B, T, D]: the input of layer ``len(decoder.layers) - trainable_layers`` (zeros at pads)."""
        keys = [tuple(ids[m.bool()].tolist()) for ids, m in zip(input_ids, attention_mask)]
        missing = [i for i, k in enumerate(keys) if k not in self.states]
        if missing:
            below = self.below(decoder)
            with torch.no_grad():
                h = below(input_ids=input_ids[missing], attention_mask=attention_mask[missing],
                          use_cache=False).last_hidden_state
            for j, i in enumerate(missing):  # a copy: a view would keep the padded batch alive
                self.states[keys[i]] = h[j, : len(keys[i])].detach().clone()
        first = self.states[keys[0]]
        out = first.new_zeros(*input_ids.shape, first.size(-1))
        for i, k in enumerate(keys):
            out[i, : len(k)] = self.states[k]
        return out


    def below(self, decoder: nn.Module) -> nn.Module:
        """The decoder's frozen layers only, ending in the last frozen layer's output (no final
        norm): what every frozen state here is computed with."""
        view = _truncated(decoder, 0, len(decoder.layers) - self.trainable_layers)
        view.norm = nn.Identity()
        return view


def _truncated(decoder: nn.Module, start: int, stop: int) -> nn.Module:
    """A view of a Hugging Face decoder (Llama family) with only ``layers[start:stop]``: the same
    modules (shared parameters), the same rotary embedding, mask and final norm."""
    view = copy.copy(decoder)
    view._modules = dict(decoder._modules)
    view.layers = nn.ModuleList(list(decoder.layers)[start:stop])
    return view


class TopLayers(nn.Module):
    """A causal LM's decoder that runs only its trained top layers, on :class:`FrozenStates`."""

    def __init__(self, decoder: nn.Module, frozen: FrozenStates) -> None:
        super().__init__()
        if getattr(decoder.config, "attention_dropout", 0.0) or _decoder_anatomy(decoder) is None:
            raise PromptError("frozen states need a Hugging Face decoder without dropout")
        self.decoder, self.frozen = decoder, frozen
        self.config = decoder.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_):
        h = self.frozen.lower(self.decoder, input_ids, attention_mask)
        n = len(self.decoder.layers)
        top = _truncated(self.decoder, n - self.frozen.trainable_layers, n)
        return top(inputs_embeds=h, attention_mask=attention_mask, use_cache=False)


class FrozenPrefix(FrozenStates):
    """The frozen lower layers' work on the part of each input *before* its first trainable
    input vector (DART's template vectors, ids ≥ the base vocabulary), computed once.

    A causal LM's token attends only to what comes before it, so the states of an input's first
    tokens do not depend on trainable vectors placed after them. With the template after the text,
    the text's frozen states and each frozen layer's keys and values (a KV cache) are computed once
    per text; every step then runs only the few template tokens through the frozen layers,
    attending to the cached keys and values (their positions continue the text's, so RoPE sees the
    same input as in a whole pass), and the trained top layers on the whole row."""

    def __init__(self, trainable_layers: int) -> None:
        super().__init__(trainable_layers)
        # prefix ids → (states [T, D], keys and values [frozen layers, kv heads, T, head dim])
        self.cache: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def prefixes(self, decoder: nn.Module, prefixes: list[tuple[int, ...]]) -> None:
        """Compute (and keep) the states, keys and values of the prefixes not seen yet."""
        todo = list(dict.fromkeys(p for p in prefixes if p not in self.cache and p))
        if not todo:
            return
        width = max(map(len, todo))
        ids = torch.zeros(len(todo), width, dtype=torch.long, device=decoder.norm.weight.device)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(todo):
            ids[i, : len(p)] = torch.as_tensor(p)
            mask[i, : len(p)] = 1
        kv = DynamicCache()
        with torch.no_grad():
            h = self.below(decoder)(input_ids=ids, attention_mask=mask, past_key_values=kv,
                                    use_cache=True).last_hidden_state
        keys = torch.stack([layer.keys for layer in kv.layers], 1)  # [B, L, heads, T, head dim]
        values = torch.stack([layer.values for layer in kv.layers], 1)
        for i, p in enumerate(todo):  # copies: views would keep the whole padded batch alive
            n = len(p)
            self.cache[p] = (h[i, :n].clone(), keys[i, :, :, :n].clone(),
                             values[i, :, :, :n].clone())


class PromptOnFrozen(TopLayers):
    """A causal LM's decoder for inputs with trainable input vectors (ids ≥ ``embed_tokens
    .num_base``) after a fixed prefix: the prefix from a :class:`FrozenPrefix`, the rest of each
    row through the frozen layers on its cached keys and values, then the trained top layers on
    the whole row — the same states as one pass of the whole decoder
    (tests/methods/prompts/test_prompt_lms.py),
    with gradients for the trainable vectors."""

    frozen: FrozenPrefix

    def __init__(self, decoder: nn.Module, frozen: FrozenPrefix) -> None:
        super().__init__(decoder, frozen)
        if frozen.trainable_layers >= len(decoder.layers):
            raise PromptError(
                f"frozen states cache what the frozen layers compute, but all {len(decoder.layers)} "
                f"layers train (trainable_layers = {frozen.trainable_layers}): train fewer layers, "
                "or set frozen_states=False")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_):
        decoder, dev = self.decoder, input_ids.device
        first_trainable = getattr(decoder.embed_tokens, "num_base", None)
        if first_trainable is None:
            raise PromptError("PromptOnFrozen needs trainable input vectors (DART's embedding)")
        lengths = attention_mask.sum(1).tolist()
        trainable = (input_ids >= first_trainable) & attention_mask.bool()
        starts = [int(t.nonzero()[0]) if t.any() else n for t, n in zip(trainable, lengths)]
        prefixes = [tuple(ids[:s].tolist()) for ids, s in zip(input_ids, starts)]
        self.frozen.prefixes(decoder, prefixes)
        # the rest of each row (right-padded), its positions continuing the prefix's
        rest = [n - s for n, s in zip(lengths, starts)]
        B, width, S = input_ids.size(0), max(starts), max(rest)
        ids = torch.zeros(B, S, dtype=torch.long, device=dev)
        for i, (s, r) in enumerate(zip(starts, rest)):
            ids[i, :r] = input_ids[i, s: s + r]
        emb = decoder.embed_tokens(ids)
        dtype = (torch.get_autocast_dtype(dev.type) if torch.is_autocast_enabled(dev.type)
                 else emb.dtype)
        # the batch's KV cache of the frozen layers: each row's prefix, right-padded (masked)
        cached = [self.frozen.cache[p] for p in prefixes if p]
        L, heads, _, head_dim = cached[0][1].shape if cached else (0, 0, 0, 0)
        keys = torch.zeros(L, B, heads, width, head_dim, dtype=dtype, device=dev)
        values = torch.zeros_like(keys)
        mask = torch.zeros(B, width + S, dtype=attention_mask.dtype, device=dev)
        for i, (p, s, r) in enumerate(zip(prefixes, starts, rest)):
            if p:
                keys[:, i, :, :s] = self.frozen.cache[p][1]
                values[:, i, :, :s] = self.frozen.cache[p][2]
            mask[i, :s] = 1
            mask[i, width: width + r] = 1
        kv = DynamicCache()
        for layer in range(L):
            kv.update(keys[layer], values[layer], layer)
        positions = torch.tensor(starts, device=dev)[:, None] + torch.arange(S, device=dev)
        tail = self.frozen.below(decoder)(inputs_embeds=emb, attention_mask=mask,
                                          position_ids=positions, past_key_values=kv,
                                          use_cache=True).last_hidden_state
        # the input of the first trained layer, row by row: cached prefix, then the rest
        rows = []
        for i, (s, r) in enumerate(zip(starts, rest)):
            parts = ([self.frozen.cache[prefixes[i]][0].to(tail.dtype)] if s else []) + [tail[i, :r]]
            row = torch.cat(parts)
            rows.append(F.pad(row, (0, 0, 0, input_ids.size(1) - row.size(0))))
        n = len(decoder.layers)
        top = _truncated(decoder, n - self.frozen.trainable_layers, n)
        return top(inputs_embeds=torch.stack(rows), attention_mask=attention_mask, use_cache=False)


def on_frozen_states(lm: Backbone, frozen: FrozenStates | None) -> Backbone:
    """``lm`` reading its frozen lower layers from ``frozen`` (None: unchanged; a
    :class:`FrozenPrefix`: inputs with trainable vectors, :class:`PromptOnFrozen`). Call after
    :func:`freeze_below` with the same number of trained layers."""
    if frozen is None:
        return lm
    wrapper = PromptOnFrozen if isinstance(frozen, FrozenPrefix) else TopLayers
    return dataclasses.replace(lm, encoder=wrapper(lm.encoder, frozen))


__all__ = ["FrozenPrefix", "FrozenStates", "PromptError", "PromptOnFrozen", "TopLayers",
           "fresh_copy", "freeze_below", "load_mlm", "load_prompt_lm", "on_frozen_states"]
