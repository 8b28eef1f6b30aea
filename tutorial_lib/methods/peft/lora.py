"""Our own LoRA (Hu et al. 2021) in a few lines, and He et al. (2022)'s unified view.

:class:`LoRALinear` is the layer the notebook reads beside its equation; :func:`add_lora` puts it
on a classifier's encoder, :func:`merge_lora` folds it into the weights, and
:func:`copy_lora_from_peft` gives it the factors of 🤗 peft's LoRA so that both can be compared on
the same input (the tests do; ``peft_methods.LoRA(ours=True)`` applies it as a method).
:data:`UNIFIED_VIEW` and :func:`modified_output`: adapters and LoRA as sequential vs parallel
modifications of the same sublayer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from peft.tuners.lora import LoraLayer
from torch import nn

from ...params import freeze, unfreeze


class LoRAError(ValueError):
    """LoRA targets that match no layer."""


# --- our own LoRA: the code the notebook shows -----------------------------------------------------


class LoRALinear(nn.Module):
    """``y = W x + b + (α/r)·B A x`` (Hu et al. 2021): W, b frozen; A (r × d_in) random,
    B (d_out × r) zero, so an untrained LoRA computes exactly what the base layer computes."""

    def __init__(self, base: nn.Linear, r: int, alpha: float):
        super().__init__()
        self.base, self.scale = base, alpha / r
        w = base.weight
        self.A = nn.Parameter(torch.empty(r, base.in_features, device=w.device, dtype=w.dtype))
        self.B = nn.Parameter(torch.zeros(base.out_features, r, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear (and peft) initialise A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * (x @ self.A.T @ self.B.T)

    def merged(self) -> nn.Linear:
        """A plain Linear with W + (α/r)·BA: the same function, no extra cost at inference."""
        out = nn.Linear(self.base.in_features, self.base.out_features, self.base.bias is not None)
        out = out.to(self.base.weight.device, self.base.weight.dtype)
        with torch.no_grad():
            out.weight.copy_(self.base.weight + self.scale * self.B @ self.A)
            if self.base.bias is not None:
                out.bias.copy_(self.base.bias)
        return out


def _replace(root: nn.Module, names: list[str], make: Callable[[nn.Module], nn.Module]) -> int:
    """Replace the submodules ``names`` of ``root`` by ``make(submodule)``."""
    for name in names:
        parent, _, child = name.rpartition(".")
        owner = root.get_submodule(parent)
        setattr(owner, child, make(getattr(owner, child)))
    return len(names)


def add_lora(model: nn.Module, r: int, alpha: float, pattern: str) -> list[LoRALinear]:
    """Wrap every encoder Linear whose name matches ``pattern`` in a :class:`LoRALinear`;
    freeze everything but the LoRA factors and the head."""
    freeze(model)
    names = [n for n, m in model.encoder.named_modules()
             if isinstance(m, nn.Linear) and re.fullmatch(pattern, n)]
    if not names:
        raise LoRAError(f"target pattern {pattern!r} matches no linear layer of the encoder")
    _replace(model.encoder, names, lambda lin: LoRALinear(lin, r, alpha))
    layers = [m for m in model.encoder.modules() if isinstance(m, LoRALinear)]
    unfreeze(model, *[p for m in layers for p in (m.A, m.B)], model.head)
    return layers


def merge_lora(model: nn.Module) -> int:
    """Replace each :class:`LoRALinear` by its merged Linear; return how many were merged."""
    names = [n for n, m in model.named_modules() if isinstance(m, LoRALinear)]
    return _replace(model, names, lambda m: m.merged())


def copy_lora_from_peft(ours: nn.Module, theirs: nn.Module) -> int:
    """Give our :class:`LoRALinear` layers (in ``ours``) the A and B of peft's LoRA layers at the
    same places in ``theirs`` (both classifiers from the same base); return how many matched."""
    n = 0
    for name, layer in theirs.encoder.named_modules():
        if isinstance(layer, LoraLayer):  # named base_model.model.<the base model's name>
            mine = ours.encoder.get_submodule(name.removeprefix("base_model.model."))
            with torch.no_grad():
                mine.A.copy_(layer.lora_A["default"].weight)
                mine.B.copy_(layer.lora_B["default"].weight)
                mine.scale = layer.scaling["default"]
            n += 1
    return n


# --- He et al. (2022): a unified view -------------------------------------------------------------


@dataclass(frozen=True)
class UnifiedRow:
    method: str
    delta_h: str  # the modification Δh
    insertion: str  # sequential: Δh computed from the sublayer's output h; parallel: from its input x
    modifies: str  # which representation
    composition: str  # how Δh joins h


UNIFIED_VIEW = (  # He et al. 2022, Table 1 (transcribed from memory: VERIFY against the paper)
    UnifiedRow("prefix tuning", "softmax(x W_q P_kᵀ) P_v", "parallel", "attention heads",
               "h ← (1 − λ) h + λ Δh"),
    UnifiedRow("adapter", "ReLU(h W_down) W_up", "sequential", "attention / FFN output",
               "h ← h + Δh"),
    UnifiedRow("LoRA", "x W_down W_up", "parallel", "attention key / value", "h ← h + s·Δh"),
)


def modified_output(sublayer: nn.Module, x: torch.Tensor, down: torch.Tensor, up: torch.Tensor, *,
                    insertion: str, scale: float = 1.0,
                    act: Callable[[torch.Tensor], torch.Tensor] = F.gelu) -> torch.Tensor:
    """h + s·f(g W_downᵀ) W_upᵀ with h = sublayer(x) and g = h ("sequential", an adapter) or
    g = x ("parallel", LoRA with f = identity): one formula, two places to read from."""
    h = sublayer(x)
    source = {"sequential": h, "parallel": x}[insertion]
    return h + scale * act(source @ down.T) @ up.T
