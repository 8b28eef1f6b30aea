"""Discriminative fine-tuning and slanted triangular learning rates (Howard & Ruder 2018, ULMFiT).

**Discriminative fine-tuning** (ULMFiT, Sec. 3.2): every layer l gets its own rate,
``η_l = η · ξ^-(depth of l from the top)`` with ξ = 2.6 — the head learns at η, the layer below
at η/2.6, and so on down to the embeddings. Lower layers hold the most general features and
should move least. We express it as one optimizer group per layer with an ``"lr_scale"`` entry;
``training.attach_lr_scales`` multiplies the *scheduled* rate by it at every step. The rate is
recomputed from the schedule each step, so the ratios hold through warm-up and decay. (The 2019
slides divided each group's *current* rate every iteration instead, so the rates compounded
towards zero — :func:`compounding_lrs` reproduces that for the plot.)

**Slanted triangular learning rates** (ULMFiT, Eq. 3): a short linear increase for the first
``cut_frac`` of the T steps, then a long linear decay, from η/ratio up to η and back:

    cut = ⌊T · cut_frac⌋,   p = t/cut if t < cut else 1 − (t − cut)/(cut · (1/cut_frac − 1)),
    η_t = η · (1 + p · (ratio − 1)) / ratio                 (cut_frac = 0.1, ratio = 32).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from ignite.engine import Engine, Events
from ignite.handlers import PiecewiseLinear
from torch import nn

from ...anatomy import Layer, layer_groups
from ...params import ADAMW_DEFAULTS, decay_groups
from ...training import attach_lr_scales

ULMFIT_FACTOR = 2.6


def layer_param_groups(
    model: nn.Module,
    *,
    weight_decay: float,
    factor: float = 1.0,
    layers: Sequence[Layer] | None = None,
    include_frozen: bool = True,
) -> list[dict]:
    """AdamW parameter groups, two per layer (decay / no decay), top layer first.

    Each group has ``"name"`` (the layer), ``"depth"`` (0 = head) and ``"lr_scale"`` =
    ``factor ** -depth``; ``factor=1`` gives plain fine-tuning's optimizer. ``include_frozen``
    keeps parameters with ``requires_grad=False`` in the groups (AdamW skips a parameter whose
    grad is None), so that they can be unfrozen later without rebuilding the optimizer.
    Parameters in none of the layers go into a last group ``"other"`` at scale 1.
    """
    layers = list(layers) if layers is not None else layer_groups(model, merge_final_norm=True)
    groups: list[dict] = []
    seen: list[nn.Parameter] = []  # a parameter in two layers (tied) belongs to the first
    named = [*((layer.name, depth, factor ** -depth, layer.parameters())
               for depth, layer in enumerate(layers)), ("other", 0, 1.0, list(model.parameters()))]
    for name, depth, scale, params in named:
        # the AdamW settings repeated in each group, so that a method's optimizer differs from
        # the plain fine-tuning baseline's only where it means to
        new = decay_groups(model, weight_decay, params=params, exclude=seen,
                           include_frozen=include_frozen, name=name, depth=depth, lr_scale=scale,
                           **ADAMW_DEFAULTS)
        seen += [p for g in new for p in g["params"]]
        groups += new
    return groups


def discriminative_groups(factor: float = ULMFIT_FACTOR, weight_decay: float = 0.01) -> Callable:
    """A :class:`~tutorial_lib.training.Method`'s ``param_groups``: one lr scale per layer
    (``weight_decay`` here is the decayed groups'; the run's rate and decay are not needed)."""
    return lambda model, lr=None, wd=None: layer_param_groups(model, weight_decay=weight_decay,
                                                              factor=factor)


def group_names(groups: Sequence[dict]) -> list[str]:
    """The layer name of each group, in the order of the History's ``lr``, ``lr_1``, … columns."""
    return [g.get("name", f"group {i}") for i, g in enumerate(groups)]


# --- slanted triangular learning rates ---------------------------------------------------------


def stlr(t: int, total: int, lr: float, cut_frac: float = 0.1, ratio: float = 32.0) -> float:
    """ULMFiT's slanted triangular rate (Howard & Ruder 2018, Eq. 3) at step ``t`` (0-based) of
    ``total``: up linearly from η/ratio to η over the first cut = ⌊T·cut_frac⌋ steps, then down
    linearly to η/ratio at step T.

    Eq. 3 writes the decay as p = 1 − (t − cut) / (cut · (1/cut_frac − 1)); its denominator equals
    T − cut only when T·cut_frac is a whole number. Otherwise it is shorter, p goes negative
    before the end and the rate drops *below zero* (T = 158, cut_frac = 0.1: −1.9e-5 at t = 157).
    We decay over T − cut, which is the paper's intent and never leaves [η/ratio, η].
    """
    cut = max(1, math.floor(total * cut_frac))
    if t < cut:
        p = t / cut
    else:
        p = max(0.0, 1 - (t - cut) / max(1, total - cut))
    return lr * (1 + p * (ratio - 1)) / ratio


def stlr_as_printed(t: int, total: int, lr: float, cut_frac: float = 0.1, ratio: float = 32.0) -> float:
    """Eq. 3 exactly as the ULMFiT paper prints it, for comparison with :func:`stlr`: its decay
    lasts cut · (1/cut_frac − 1) steps, shorter than T − cut when T·cut_frac is not whole, so the
    rate falls below its floor lr/ratio before the end — and below zero when the shortfall is
    large enough (T = 158, cut_frac = 0.1, lr = 1e-3: −1.9e-5 at the last step)."""
    cut = max(1, math.floor(total * cut_frac))
    p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
    return lr * (1 + p * (ratio - 1)) / ratio


def attach_stlr(
    trainer: Engine,
    optimizer: torch.optim.Optimizer,
    *,
    lr: float,
    total: int,
    cut_frac: float = 0.1,
    ratio: float = 32.0,
) -> PiecewiseLinear:
    """Slanted triangular rates as an Ignite scheduler (per iteration), composed with each
    group's ``"lr_scale"``. :func:`stlr` is piecewise linear, so ``PiecewiseLinear`` with its three
    milestones (0, η/ratio), (cut, η), (T, η/ratio) is exactly the schedule :func:`stlr` plots."""
    cut = max(1, math.floor(total * cut_frac))
    scheduler = PiecewiseLinear(
        optimizer, "lr",
        milestones_values=[(0, lr / ratio), (cut, lr), (max(cut + 1, total), lr / ratio)],
    )
    trainer.add_event_handler(Events.ITERATION_STARTED, scheduler)
    attach_lr_scales(trainer, optimizer)
    return scheduler


def stlr_schedule(cut_frac: float = 0.1, ratio: float = 32.0) -> Callable:
    """A ``schedule`` hook for ``finetuning.finetune`` (called with trainer, optimizer, lr, total)."""

    def schedule(trainer: Engine, optimizer: torch.optim.Optimizer, *, lr: float, total: int) -> object:
        return attach_stlr(trainer, optimizer, lr=lr, total=total, cut_frac=cut_frac, ratio=ratio)

    return schedule


# --- what the slides did -----------------------------------------------------------------------


def compounding_lrs(schedule: Sequence[float], factor: float, depth: int) -> list[float]:
    """The 2019 slides' bug, for comparison: each step divides the group's *current* rate by
    ``factor ** depth`` on top of the schedule's own movement, so the divisions compound:
    ``lr_t = schedule_t · factor^-(depth · (t + 1))`` — after a few steps every lower layer's
    rate is numerically zero."""
    return [value * factor ** (-depth * (t + 1)) for t, value in enumerate(schedule)]


def warmup_linear(t: int, total: int, lr: float, warmup_frac: float = 0.1) -> float:
    """The default fine-tuning schedule of ``finetuning.finetune`` at step ``t`` (0-based), for
    plots: linear from 0 to ``lr`` over ``int(warmup_frac·total)`` steps, then linear to 0."""
    warmup = max(2, min(int(warmup_frac * total), total - 1))
    return lr * t / warmup if t <= warmup else lr * (total - t) / (total - warmup)
