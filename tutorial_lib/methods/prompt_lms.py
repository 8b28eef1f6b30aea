"""The language models a prompt runs on: their heads, their tokens, and how much of them trains.

:class:`PromptLM` is what prompting (:mod:`.prompting`) and DART (:mod:`.dart`) need from a
pretrained LM with its head, the same for ours and Hugging Face's: the features the LM head reads,
the head's weights, the token-embedding module (DART swaps in an extended one) and how text
becomes ids. :class:`OurMaskedLM` and :class:`HFMaskedLM` answer at a ``[MASK]``;
:class:`HFCausalLM` answers with the next token. :func:`freeze_below` is the CPU budget: only the
top layers of a causal LM train.
"""

from __future__ import annotations

import torch
from torch import nn

from ..backbones import OURS, load_backbone
from ..config import Scale
from ..models import TransformerLM


class PromptError(ValueError):
    """A template, verbalizer or backbone that cannot make a prompt classifier."""


# --- language models with their heads -----------------------------------------------------------


class PromptLM(nn.Module):
    """The pieces of a pretrained LM that prompting needs, the same for ours and Hugging Face's.

    ``features(ids, mask)`` gives the vectors the decoder reads ([B, T, D]); the LM logits are
    ``features @ decoder_weight.T + decoder_bias``. ``input_embeddings``/``set_input_embeddings``
    expose the token-embedding module (DART swaps in an extended one).
    """

    tokenizer: object
    is_ours: bool = False
    is_causal: bool = False

    @property
    def vocab_size(self) -> int:
        return self.decoder_weight.shape[0]

    @property
    def mask_id(self) -> int:
        return self.tokenizer.mask_token_id

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id

    def piece_ids(self, text: str, first: bool = False) -> list[int]:
        """Word-piece ids of ``text`` without special tokens; a leading space unless ``first``
        (byte-level BPE such as RoBERTa's has different ids for "great" and " great")."""
        text = text.strip()
        if not text:
            return []
        return self.tokenizer(text if first else " " + text, add_special_tokens=False)["input_ids"]

    def literal_ids(self, text: str, first: bool = False) -> list[int]:
        """Ids of a template's literal part: a masked LM's like :meth:`piece_ids`; a causal LM's
        exactly as written (its whitespace and newlines are part of the prompt)."""
        if not self.is_causal:
            return self.piece_ids(text, first)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def special_wrap(self) -> tuple[list[int], list[int]]:
        """Special ids before and after a sequence."""
        raise NotImplementedError


class OurMaskedLM(PromptLM):
    """Our ``TransformerLM`` (``config.causal=False``). Inputs end with [SEP], no [CLS]: the MLM was
    pretrained on WikiText lines each followed by [SEP]. The head is the tied embedding matrix."""

    is_ours = True

    def __init__(self, lm: TransformerLM, tokenizer):
        super().__init__()
        if lm.config.causal:
            raise PromptError("prompting needs a masked LM: load_mlm('ours-mlm', scale)")
        self.lm, self.tokenizer = lm, tokenizer
        self.max_len = lm.config.max_len

    def input_embeddings(self) -> nn.Module:
        return self.lm.get_input_embeddings()

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.lm.set_input_embeddings(module)

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.lm.lm_head.weight

    @property
    def decoder_bias(self) -> torch.Tensor | None:
        return None

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.lm.base_model(input_ids, attention_mask).last_hidden_state

    def special_wrap(self) -> tuple[list[int], list[int]]:
        return [], [self.tokenizer.sep_token_id]


class HFPromptLM(PromptLM):
    """A Hugging Face model with an LM head (``self.model``): the embeddings and the head's
    weights through the library's own accessors, the same for masked and causal LMs."""

    model: nn.Module

    def input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, module: nn.Module) -> None:
        self.model.set_input_embeddings(module)

    @property
    def decoder_weight(self) -> torch.Tensor:
        return self.model.get_output_embeddings().weight

    @property
    def decoder_bias(self) -> torch.Tensor | None:
        return getattr(self.model.get_output_embeddings(), "bias", None)


class HFMaskedLM(HFPromptLM):
    """Any Hugging Face ``*ForMaskedLM`` (BERT, RoBERTa, ALBERT ...). The features are the input of
    its output-embedding (decoder) layer, captured with a forward hook, so the architecture's own
    head transform (dense + activation + LayerNorm) is applied exactly as in pretraining."""

    def __init__(self, model: nn.Module, tokenizer, max_len: int = 256):
        super().__init__()
        if model.get_output_embeddings() is None:
            raise PromptError(f"{type(model).__name__} has no MLM head: use AutoModelForMaskedLM")
        if tokenizer.mask_token_id is None:
            raise PromptError("the tokenizer has no mask token")
        self.model, self.tokenizer = model, tokenizer
        self.max_len = min(max_len, getattr(model.config, "max_position_embeddings", max_len))
        self._captured: list[torch.Tensor] = []
        # a bound method (not a closure), so that a deep copy hooks into its own copy
        model.get_output_embeddings().register_forward_hook(self._capture)

    def _capture(self, _module: nn.Module, inputs: tuple, _output: torch.Tensor) -> None:
        self._captured.append(inputs[0])

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self._captured.clear()
        self.model(input_ids=input_ids, attention_mask=attention_mask)
        return self._captured.pop()

    def special_wrap(self) -> tuple[list[int], list[int]]:
        # where the tokenizer puts its special tokens around a probe word
        plain = self.tokenizer("a", add_special_tokens=False)["input_ids"]
        full = self.tokenizer("a")["input_ids"]
        at = next(i for i in range(len(full)) if full[i: i + len(plain)] == plain)
        return full[:at], full[at + len(plain):]


class HFCausalLM(HFPromptLM):
    """Any Hugging Face ``*ForCausalLM`` (SmolLM2, GPT-2, Llama …): the answer is the next token.
    The features are the base model's last hidden states (after its final norm), which the LM
    head (``get_output_embeddings``, tied to the input embeddings in SmolLM2) turns into logits."""

    is_causal = True

    def __init__(self, model: nn.Module, tokenizer, max_len: int = 256):
        super().__init__()
        if model.get_output_embeddings() is None:
            raise PromptError(f"{type(model).__name__} has no LM head: use AutoModelForCausalLM")
        self.model, self.tokenizer = model, tokenizer
        self.max_len = min(max_len, getattr(model.config, "max_position_embeddings", max_len))

    @property
    def mask_id(self) -> int:
        raise PromptError("a causal LM has no mask token: its answer slot is the next token")

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def special_wrap(self) -> tuple[list[int], list[int]]:
        return [], []

    def transformer_layers(self) -> list[nn.Module]:
        """The decoder layers, bottom to top (for training only the top few on a CPU)."""
        return list(self.model.base_model.layers)


def load_prompt_lm(name: str, scale: Scale) -> PromptLM:
    """An LM with its pretrained head for prompting: a masked LM (``"ours-mlm"``, a Hub masked LM
    such as ``roberta-large``) or a causal LM (``"smollm2"``, a Hub causal LM such as ``gpt2``)."""
    if name in OURS:
        return load_mlm(name, scale)
    bb = load_backbone(name, scale)
    if bb.kind == "causal":
        return HFCausalLM(bb.lm, bb.tokenizer, bb.max_len)
    return load_mlm(name, scale)


def freeze_below(lm: PromptLM, trainable_layers: int | None) -> None:
    """Freeze everything but the top ``trainable_layers`` decoder layers and the final norm of a
    causal LM (None: train all). The word embeddings stay frozen: they are the tied LM head,
    whose label rows are the classifier. On a CPU this is what makes a 135M model trainable."""
    if trainable_layers is None:
        return
    if not isinstance(lm, HFCausalLM):
        raise PromptError("freeze_below is for a causal LM's decoder layers")
    for p in lm.parameters():
        p.requires_grad_(False)
    layers = lm.transformer_layers()
    keep = layers[len(layers) - trainable_layers:] + [lm.model.base_model.norm]
    for module in keep:
        for p in module.parameters():
            p.requires_grad_(True)


def load_mlm(name: str, scale: Scale) -> PromptLM:
    """A masked LM for prompting: ``"ours-mlm"`` (notebook 01's, pretrained now if not cached) or
    a Hugging Face masked LM (``roberta-large`` … on the Hub)."""
    bb = load_backbone(name, scale, kind=None if name in OURS else "masked")
    if bb.kind != "masked":
        raise PromptError(f"{name!r} is a {bb.kind} model; prompting with [MASK] needs a masked LM")
    if bb.is_ours:
        return OurMaskedLM(bb.lm, bb.tokenizer)
    return HFMaskedLM(bb.lm, bb.tokenizer, bb.max_len)
