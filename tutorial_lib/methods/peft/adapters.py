"""Houlsby adapters (Houlsby et al. 2019): a few new parameters per block, the backbone frozen.

An adapter is a bottleneck with a skip connection,

    adapter(h) = h + W_up · GELU(W_down · h + b_down) + b_up,     W_down: d→m, W_up: m→d,

inserted after the attention sublayer and after the feed-forward sublayer of every block, before
the residual addition. Its up-projection starts near zero, so at initialisation each adapter is
(almost) the identity and the pretrained network computes what it computed before; training then
only moves the adapters, the LayerNorms and the new head — about 2·(2·d·m) parameters per block.

Our ``models.Block`` has the two slots (``adapter_attn``, ``adapter_ff``; ``nn.Identity`` until
filled). A Hugging Face BERT encoder (e.g. MiniLM) has no slots, so there we wrap the output
projections ``BertSelfOutput.dense`` and ``BertOutput.dense``, which is the same place: after the
sublayer, before dropout, the residual addition and the LayerNorm.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ...anatomy import adapter_sites
from ...params import freeze, unfreeze


class Adapter(nn.Module):
    """Bottleneck ``d → m → d`` with GELU and a skip connection; near-identity at init."""

    def __init__(self, d_model: int, bottleneck: int, init_std: float = 1e-3):
        super().__init__()
        self.down = nn.Linear(d_model, bottleneck)
        self.up = nn.Linear(bottleneck, d_model)
        nn.init.normal_(self.down.weight, std=0.02)
        nn.init.zeros_(self.down.bias)
        nn.init.normal_(self.up.weight, std=init_std)  # ~0: the adapter starts as the identity
        nn.init.zeros_(self.up.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.up(F.gelu(self.down(h)))


class _AfterLinear(nn.Module):
    """A Linear followed by an adapter (used where a model has no adapter slots)."""

    def __init__(self, linear: nn.Linear, adapter: Adapter):
        super().__init__()
        self.linear, self.adapter = linear, adapter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.adapter(self.linear(x))


def add_adapters(model: nn.Module, bottleneck: int, init_std: float = 1e-3) -> list[Adapter]:
    """Insert two adapters per block (after attention and after feed-forward); return them.

    Where they go is the anatomy's (:func:`tutorial_lib.anatomy.adapter_sites`): our blocks' two
    slots, or around a BERT layer's ``attention.output.dense`` and ``output.dense``. New adapters
    are trainable; call :func:`freeze_for_adapters` to freeze the rest.
    """

    added: list[Adapter] = []
    try:
        sites = adapter_sites(model)
    except (TypeError, AttributeError):
        sites = []
    for site in sites:
        current = getattr(site.owner, site.attribute)
        if isinstance(current, nn.Linear):  # the layer that ends the sublayer: the adapter follows it
            ref = current.weight
            adapter = Adapter(site.width, bottleneck, init_std).to(ref.device, ref.dtype)
            setattr(site.owner, site.attribute, _AfterLinear(current, adapter))
        else:  # a slot of ours (nn.Identity until filled)
            adapter = Adapter(site.width, bottleneck, init_std)
            setattr(site.owner, site.attribute, adapter)
        added.append(adapter)
    if not added:
        raise TypeError(f"found no Transformer blocks in {type(model).__name__} to add adapters to")
    return added


def adapter_modules(model: nn.Module) -> list[Adapter]:
    return [m for m in model.modules() if isinstance(m, Adapter)]


def freeze_for_adapters(
    model: nn.Module, *, train_layer_norms: bool = True, train_embeddings: bool = False
) -> None:
    """Freeze everything except the adapters, the classification head and (optionally) every
    LayerNorm (Houlsby et al. train them too) and the embeddings."""
    freeze(model)
    unfreeze(model, *adapter_modules(model), model.head)
    if train_layer_norms:
        norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
        unfreeze(model, *norms)
    if train_embeddings:
        unfreeze(model, r"(tok_emb|pos_emb|embeddings)")


def prepare_adapters(bottleneck: int, **kwargs: bool) -> Callable[[nn.Module], None]:
    """A ``prepare`` hook for ``finetuning.finetune``: add adapters, then freeze the backbone."""

    def prepare(model: nn.Module) -> None:
        add_adapters(model, bottleneck)
        freeze_for_adapters(model, **kwargs)

    return prepare
