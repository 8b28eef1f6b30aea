"""Which parameters train, how many there are, and the one optimizer every run uses.

* :func:`freeze` / :func:`unfreeze` by module, parameter or regular expression on parameter
  names. A pattern that matches no parameter is an error: the 2019 slides' gradual unfreezing had
  a malformed pattern that silently froze nothing. Names are matched *with* tied duplicates, so
  ``"lm_head"`` finds the tied embedding matrix;
* :func:`trainable_summary` — trained vs total parameters, tied tensors counted once;
* :func:`decay_groups` and :func:`make_optimizer` — AdamW (Loshchilov & Hutter 2019) with no
  weight decay on biases, LayerNorms and embeddings, the setting of every run in the tutorial;
* :func:`optimizer_state_mib` — what the trained parameters cost in gradient + AdamW memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .models import count_parameters

ADAM_BETAS, ADAM_EPS = (0.9, 0.98), 1e-6  # one AdamW setting for every run in the tutorial
ADAMW_DEFAULTS = {"betas": ADAM_BETAS, "eps": ADAM_EPS}

Target = str | nn.Module | nn.Parameter


class FreezingError(ValueError):
    """A freeze pattern that is not a valid regex or matches no parameter."""


def _named_params(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    # remove_duplicate=False: a tied tensor is listed under every name it has
    return list(model.named_parameters(remove_duplicate=False))


def select_parameters(model: nn.Module, *targets: Target) -> list[nn.Parameter]:
    """Parameters of ``model`` picked by name regexes (``re.search``), modules or parameters.

    No target means every parameter. Each regex must be valid and match at least one name.
    Tied tensors are returned once.
    """
    if not targets:
        return list(model.parameters())
    named = _named_params(model)
    chosen: dict[int, nn.Parameter] = {}
    for target in targets:
        if isinstance(target, nn.Parameter):
            found = [target]
        elif isinstance(target, nn.Module):
            found = list(target.parameters())
        elif isinstance(target, str):
            try:
                regex = re.compile(target)
            except re.error as err:
                raise FreezingError(f"invalid parameter-name pattern {target!r}: {err}") from err
            found = [p for name, p in named if regex.search(name)]
            if not found:
                examples = ", ".join(n for n, _ in named[:4])
                raise FreezingError(
                    f"pattern {target!r} matches no parameter name (names look like: {examples}, …)"
                )
        else:
            raise TypeError(f"cannot select parameters with {type(target).__name__}")
        chosen.update((id(p), p) for p in found)
    return list(chosen.values())


def set_trainable(model: nn.Module, trainable: bool, *targets: Target) -> int:
    """Set ``requires_grad`` of the selected parameters; return how many tensors were set."""
    params = select_parameters(model, *targets)
    for p in params:
        p.requires_grad_(trainable)
    return len(params)


def freeze(model: nn.Module, *targets: Target) -> int:
    """Freeze the selected parameters (all of them if no target is given)."""
    return set_trainable(model, False, *targets)


def unfreeze(model: nn.Module, *targets: Target) -> int:
    """Unfreeze the selected parameters (all of them if no target is given)."""
    return set_trainable(model, True, *targets)


@dataclass(frozen=True)
class TrainableSummary:
    trainable: int
    total: int

    @property
    def fraction(self) -> float:
        return self.trainable / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.trainable:,} of {self.total:,} parameters trained ({100 * self.fraction:.2f} %)"


def trainable_summary(model: nn.Module) -> TrainableSummary:
    """Trained vs total parameters, tied tensors counted once."""
    return TrainableSummary(count_parameters(model, trainable_only=True), count_parameters(model))


def optimizer_state_mib(n_trainable: int, bytes_per_value: int = 4) -> float:
    """Gradients + AdamW's two moments of ``n_trainable`` fp32 parameters, in MiB (exact)."""
    return 3 * bytes_per_value * n_trainable / 2**20


# --- weight decay and the optimizer -------------------------------------------------------------


def no_decay(name: str, p: nn.Parameter) -> bool:
    """Biases, LayerNorm gains (every 1-D tensor) and embeddings are not decayed."""
    return p.dim() < 2 or "emb" in name


def decay_groups(
    model: nn.Module,
    weight_decay: float,
    params: Iterable[nn.Parameter] | None = None,
    exclude: Sequence[nn.Parameter] = (),
    include_frozen: bool = False,
    **extra: object,
) -> list[dict]:
    """AdamW groups ``[decay, no decay]`` (empty ones dropped) of ``params`` (default: every
    parameter of ``model``), each parameter once, ``exclude`` left out; ``extra`` keys (``lr_scale``,
    ``name`` …) are copied into both groups. Frozen parameters are skipped unless
    ``include_frozen`` (so that they can be unfrozen later without a new optimizer)."""
    # every name of a tied tensor counts: the tied lm_head is the token embedding (not decayed)
    names: dict[int, list[str]] = {}
    for n, p in _named_params(model):
        names.setdefault(id(p), []).append(n)
    wanted = None if params is None else {id(p) for p in params}
    skip = {id(p) for p in exclude}
    decay, plain, seen = [], [], set()
    for p in model.parameters():
        if id(p) in seen or id(p) in skip or (wanted is not None and id(p) not in wanted):
            continue
        if not (p.requires_grad or include_frozen):
            continue
        seen.add(id(p))
        exempt = any(no_decay(n, p) for n in names.get(id(p), [""]))
        (plain if exempt else decay).append(p)
    groups = ({"params": decay, "weight_decay": weight_decay, **extra},
              {"params": plain, "weight_decay": 0.0, **extra})
    return [g for g in groups if g["params"]]


def make_optimizer(
    model: nn.Module, lr: float, weight_decay: float, groups: list[dict] | None = None
) -> torch.optim.AdamW:
    """AdamW over ``groups`` (default: :func:`decay_groups` of the trainable parameters)."""
    groups = groups if groups is not None else decay_groups(model, weight_decay)
    return torch.optim.AdamW(groups, lr=lr, **ADAMW_DEFAULTS)
