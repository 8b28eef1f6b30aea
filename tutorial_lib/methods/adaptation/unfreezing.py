"""Gradual unfreezing (Howard & Ruder 2018, ULMFiT Sec. 3.2) and chain-thaw (Felbo et al. 2017).

Fine-tuning every layer at once from the first step can overwrite what pretraining learnt
("catastrophic forgetting") while the new head is still random. **Gradual unfreezing** starts
with only the new head trainable and unfreezes one more layer from the top every ``k`` iterations
(ULMFiT: every epoch) until the whole network trains. **Chain-thaw** trains the head first, then
each layer *on its own* from the bottom up, then everything.

The mechanism is an Ignite handler, :class:`UnfreezingHandler`. Every parameter is in the
optimizer from the start; a frozen one has ``requires_grad=False``, so its ``grad`` stays
``None`` and AdamW skips it (no update, no weight decay, no moment). Unfreezing is then just
``requires_grad_(True)`` — which works with any optimizer and schedule. (The 2019 slides wrote
``param.require_grad = True``: a typo that sets an unused attribute, so nothing was ever
unfrozen. ``tests/methods/adaptation/test_unfreezing.py`` guards exactly that.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from ignite.engine import Engine, Events
from torch import nn

from ...anatomy import Layer, layer_groups
from ...training import Method
from .discriminative import layer_param_groups

MODES = ("gradual", "chain-thaw")


def gradual_stages(layers: Sequence[Layer]) -> list[list[Layer]]:
    """Stage i trains the top i+1 layers: [head], [head, top block], …, [all]."""
    return [list(layers[: i + 1]) for i in range(len(layers))]


def chain_thaw_stages(layers: Sequence[Layer]) -> list[list[Layer]]:
    """[head], then each other layer alone from the bottom (embeddings) up, then [all]."""
    return [[layers[0]], *([layer] for layer in reversed(layers[1:])), list(layers)]


class UnfreezingHandler:
    """Moves through ``stages`` (lists of trainable layers) every ``every`` iterations or epochs.

    At ``STARTED`` stage 0 is applied (only its layers trainable, all other layers frozen); after
    every ``every``-th iteration (``event="iteration"``) or epoch (``"epoch"``) the next stage is
    applied. ``timeline`` has one row per iteration: ``{"step", "stage", <layer name>: bool}``.
    """

    def __init__(self, model: nn.Module, stages: Sequence[Sequence[Layer]], every: int,
                 event: str = "iteration", layers: Sequence[Layer] | None = None):
        if event not in ("iteration", "epoch"):
            raise ValueError(f"event must be 'iteration' or 'epoch', not {event!r}")
        if every < 1:
            raise ValueError("every must be >= 1")
        self.model, self.stages, self.every, self.event = model, [list(s) for s in stages], every, event
        self.layers = list(layers) if layers is not None else _union(self.stages)
        self.stage = 0
        self.timeline: list[dict] = []

    @property
    def layer_names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def apply(self, stage: int) -> None:
        """Make exactly the layers of ``stage`` trainable (the other layers frozen)."""
        self.stage = stage
        trainable = {id(p) for layer in self.stages[stage] for p in layer.parameters()}
        for layer in self.layers:
            for p in layer.parameters():
                p.requires_grad_(id(p) in trainable)

    def trainable_layers(self) -> list[str]:
        return [layer.name for layer in self.layers
                if all(p.requires_grad for p in layer.parameters())]

    def _advance(self, _: Engine) -> None:
        if self.stage + 1 < len(self.stages):
            self.apply(self.stage + 1)

    def _record(self, engine: Engine) -> None:
        on = set(self.trainable_layers())
        row = {"step": engine.state.iteration, "stage": self.stage}
        row.update({name: name in on for name in self.layer_names})
        self.timeline.append(row)

    def attach(self, trainer: Engine) -> UnfreezingHandler:
        trainer.add_event_handler(Events.STARTED, lambda _: self.apply(0))
        event = Events.ITERATION_COMPLETED if self.event == "iteration" else Events.EPOCH_COMPLETED
        trainer.add_event_handler(event(every=self.every), self._advance)
        trainer.add_event_handler(Events.ITERATION_STARTED, self._record)
        return self


def _union(stages: Sequence[Sequence[Layer]]) -> list[Layer]:
    out: list[Layer] = []
    for stage in stages:
        for layer in stage:
            if all(layer.name != seen.name for seen in out):
                out.append(layer)
    return out


class Unfreezing:
    """The three ``finetuning.finetune`` hooks for gradual unfreezing or chain-thaw.

    ``Unfreezing(every=20).method()`` → ``finetune(..., method=...)``. Each run's handler is kept in
    ``handlers`` (its ``timeline`` feeds the timeline plot). ``factor`` > 1 adds discriminative
    learning rates (ULMFiT uses both).
    """

    def __init__(self, every: int, *, mode: str = "gradual", event: str = "iteration",
                 weight_decay: float = 0.01, factor: float = 1.0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: choose one of {MODES}")
        self.every, self.mode, self.event = every, mode, event
        self.weight_decay, self.factor = weight_decay, factor
        self.handlers: list[UnfreezingHandler] = []

    def stages(self, model: nn.Module) -> list[list[Layer]]:
        layers = layer_groups(model, merge_final_norm=True)
        return gradual_stages(layers) if self.mode == "gradual" else chain_thaw_stages(layers)

    def n_stages(self, model: nn.Module) -> int:
        return len(self.stages(model))

    def prepare(self, model: nn.Module) -> None:
        stages = self.stages(model)
        UnfreezingHandler(model, stages, self.every).apply(0)

    def param_groups(self, model: nn.Module, lr: float | None = None,
                     weight_decay: float | None = None) -> list[dict]:
        """Every layer's group (frozen ones too, so that they can thaw), at ``self.weight_decay``."""
        return layer_param_groups(model, weight_decay=self.weight_decay, factor=self.factor,
                                  include_frozen=True)

    def on_trainer(self, trainer: Engine, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        handler = UnfreezingHandler(model, self.stages(model), self.every, self.event)
        self.handlers.append(handler.attach(trainer))

    def method(self) -> Method:
        """Gradual unfreezing / chain-thaw as a :class:`~tutorial_lib.training.Method`."""
        return Method(prepare=self.prepare, param_groups=self.param_groups,
                      on_trainer=self.on_trainer)
