"""Anatomy: where each family of network keeps its parts — the one place in the library that knows.

Every method that walks a network (gradual unfreezing and discriminative rates, GradTS's heads, a
truncated student, R3F's embedding noise, a causal LM's frozen lower layers) asks :func:`anatomy`
instead of probing attributes:

======  =====================  ==============  ====================  ===============================
family  blocks (bottom first)  final norm      embeddings            keys and values of a block
======  =====================  ==============  ====================  ===============================
ours    ``blocks``             ``ln_f``        ``tok_emb, pos_emb``  rows d:2d, 2d:3d of ``attn.qkv``
bert    ``encoder.layer``      none (post-LN)  ``embeddings``        ``attention.self.key / value``
llama   ``layers``             ``norm``        ``embed_tokens``      (not needed by any method yet)
======  =====================  ==============  ====================  ===============================

Decoding (:attr:`Anatomy.cached_decoding`): a llama-family LM has Hugging Face's ``generate`` and a
key/value cache; ours re-reads its history at every step.

Adapters (:func:`adapter_sites`) go into our blocks' two slots, and around BERT's
``attention.output.dense`` and ``output.dense``.

"bert" is every BERT-like Hugging Face encoder (BERT, RoBERTa, MiniLM …), "llama" every Hugging
Face decoder that keeps its layers as ``layers`` and its final norm as ``norm`` (Llama, SmolLM2,
Mistral, Qwen …). Layers are numbered as :data:`LAYER_NUMBERING` says, everywhere.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import NamedTuple

from torch import nn

from .models import Transformer

LAYER_NUMBERING = ("layer 0 is the embedding output; layer i (1 … L) is the output of the i-th "
                   "Transformer block, as in Hugging Face's hidden_states and ELMo's h_j")


@dataclass(frozen=True)
class Anatomy:
    """The parts of one encoder (a base model: ours, or a Hugging Face one without its head)."""

    family: str  # "ours", "bert" or "llama"
    blocks: nn.ModuleList  # bottom first: block i is layer i + 1
    final_norm: nn.Module | None  # the norm the top block's output goes through (pre-LN)
    embeddings: tuple[nn.Module, ...]  # the embedding layer's parameters
    embedding_output: nn.Module  # the module whose output is the embedding layer's output e
    names: tuple[str, str]  # what the tutorial calls a layer and the final norm

    @property
    def cached_decoding(self) -> bool:
        """Whether the family's LM decodes with Hugging Face's ``generate`` and a key/value cache
        (llama); ours has neither: a decoder re-reads its history at every step."""
        return self.family == "llama"


def anatomy(network: nn.Module) -> Anatomy:
    """The :class:`Anatomy` of ``network``'s encoder: ``network`` is an encoder or a model that
    holds one as ``encoder`` (a classifier) or ``base_model`` (an LM). Unknown: TypeError."""
    enc = getattr(network, "encoder", None)
    enc = enc if isinstance(enc, nn.Module) and not _is_bert_stack(network) else network
    enc = getattr(enc, "base_model", enc)
    if isinstance(enc, Transformer):  # pre-LN blocks and a final norm
        return Anatomy("ours", enc.blocks, enc.ln_f, (enc.tok_emb, enc.pos_emb), enc.drop,
                       ("block", "ln_f"))
    if _is_bert_stack(enc):  # post-LN layers, no final norm
        return Anatomy("bert", enc.encoder.layer, None, (enc.embeddings,), enc.embeddings,
                       ("layer", ""))
    if isinstance(getattr(enc, "layers", None), nn.ModuleList) and hasattr(enc, "norm"):
        return Anatomy("llama", enc.layers, enc.norm, (enc.embed_tokens,), enc.embed_tokens,
                       ("layer", "norm"))
    raise TypeError(f"no known anatomy for {type(network).__name__}: supported are our "
                    "Transformer, BERT-like encoders (encoder.layer) and Llama-like decoders "
                    "(layers + norm), on their own or as a model's .encoder / .base_model")


def _is_bert_stack(module: nn.Module) -> bool:
    """A BERT-like encoder: its ``encoder`` is a layer stack (``encoder.layer``), not a network."""
    return isinstance(getattr(getattr(module, "encoder", None), "layer", None), nn.ModuleList)


# --- what methods do with it -------------------------------------------------------------------


class KeyValue(NamedTuple):
    """Where one block's attention keys and values come from: rows of two linear layers."""

    key: nn.Linear
    key_rows: slice
    value: nn.Linear
    value_rows: slice
    n_heads: int


def key_values(network: nn.Module) -> list[KeyValue]:
    """Every block's :class:`KeyValue`, bottom first (ours and BERT-like encoders)."""
    parts = anatomy(network)
    if parts.family == "ours":
        d = parts.blocks[0].attn.qkv.in_features
        return [KeyValue(b.attn.qkv, slice(d, 2 * d), b.attn.qkv, slice(2 * d, 3 * d), b.attn.n_head)
                for b in parts.blocks]
    if parts.family == "bert":
        out = []
        for layer in parts.blocks:
            attn = layer.attention.self
            out.append(KeyValue(attn.key, slice(0, attn.key.out_features), attn.value,
                                slice(0, attn.value.out_features), int(attn.num_attention_heads)))
        return out
    raise TypeError(f"the keys and values of a {parts.family} model are not mapped yet")


class AdapterSite(NamedTuple):
    """Where one Houlsby adapter goes: ``owner.attribute`` is an empty slot (``nn.Identity``,
    ours) or the linear layer that ends a sublayer (BERT-like: the adapter wraps it)."""

    owner: nn.Module
    attribute: str
    width: int


def adapter_sites(network: nn.Module) -> list[AdapterSite]:
    """Two per block, bottom first: after the attention sublayer and after the feed-forward one,
    before the residual addition (ours and BERT-like encoders)."""
    parts = anatomy(network)
    if parts.family == "ours":
        return [AdapterSite(b, slot, b.ln1.normalized_shape[0]) for b in parts.blocks
                for slot in ("adapter_attn", "adapter_ff")]
    if parts.family == "bert":  # BertSelfOutput.dense and BertOutput.dense
        return [AdapterSite(owner, "dense", owner.dense.out_features) for layer in parts.blocks
                for owner in (layer.attention.output, layer.output)]
    raise TypeError(f"adapters are not mapped for a {parts.family} model")


def truncated(encoder: nn.Module, layers: int) -> nn.Module:
    """A copy of a Hugging Face ``encoder`` keeping only its first ``layers`` blocks (embeddings,
    and a final norm if it has one, as they are)."""
    encoder = copy.deepcopy(encoder)
    parts = anatomy(encoder)
    if parts.family == "ours":
        raise TypeError("truncating layers is implemented for Hugging Face encoders")
    kept = nn.ModuleList(list(parts.blocks)[:layers])
    if parts.family == "bert":
        encoder.encoder.layer = kept
    else:
        encoder.layers = kept
    encoder.config.num_hidden_layers = layers
    return encoder


class Layer(NamedTuple):
    """One unit of unfreezing / discriminative learning rates: a name and its modules."""

    name: str
    modules: tuple[nn.Module, ...]

    def parameters(self) -> list[nn.Parameter]:
        seen: dict[int, nn.Parameter] = {}
        for m in self.modules:
            seen.update((id(p), p) for p in m.parameters())
        return list(seen.values())


def layer_groups(model: nn.Module, merge_final_norm: bool = False) -> list[Layer]:
    """The layers of a classifier (a ``head`` on an ``encoder``; or a language model, whose head
    is its output layer) from the top down: head, [final
    norm,] layer N … layer 1, embeddings — numbered as :data:`LAYER_NUMBERING` says.

    Ours: ``head, ln_f, block N … block 1, embeddings`` (token and position embeddings; a tied
    ``lm_head`` is the token embedding); BERT-like: no final norm; Llama-like: ``norm``.
    ``merge_final_norm`` puts the final norm together with the top layer (the norm that layer's
    output goes through), which is what gradual unfreezing and discriminative rates use.
    """
    try:  # a classifier's encoder, or a language model's base (its head: the output layer)
        encoder = model.encoder if hasattr(model, "encoder") else model.base_model
        head = model.head if hasattr(model, "head") else model.get_output_embeddings()
        parts = anatomy(encoder)
    except (AttributeError, TypeError) as err:
        raise TypeError(f"layer_groups does not know the layers of {type(model).__name__}") from err
    word, norm_name = parts.names
    layers = [Layer(f"{word} {i}", (b,)) for i, b in enumerate(parts.blocks, start=1)][::-1]
    norm = parts.final_norm
    top = [] if norm is None else [Layer(norm_name, (norm,))]
    if norm is not None and merge_final_norm:
        layers[0] = Layer(f"{layers[0].name} + {norm_name}", (*layers[0].modules, norm))
        top = []
    return [Layer("head", (head,)), *top, *layers, Layer("embeddings", parts.embeddings)]
