"""Checkpoints that resume a run exactly: Ignite's ``Checkpoint`` of the model, optimizer, schedule,
trainer (its iteration is the position in the data stream), history and every random number
generator (:class:`RNGState`), written atomically with an integrity record. A killed run, re-run,
ends with the same weights, bit for bit on a CPU, as a run never killed. :func:`tutorial_lib.training.fit`
attaches them; notebook 01's pretraining too.
"""

from __future__ import annotations

import copy
import errno
import random
import re
from collections.abc import Mapping
from pathlib import Path

import ignite.distributed as idist
import numpy as np
import torch
from ignite.engine import Engine, Events
from ignite.engine.events import CallableEventWithFilter
from ignite.handlers import Checkpoint
from ignite.handlers.checkpoint import BaseSaveHandler
from torch import nn

from . import integrity
from .models import ModelError


class RNGState:
    """Every random number generator a training step may draw from, as one checkpointable object:
    torch (CPU), CUDA (every device, when present), numpy and Python's ``random``.

    Saved with the model it makes dropout and masking after a resume continue exactly where the
    interrupted run was (Ignite's ``Checkpoint`` saves anything with ``state_dict``).
    """

    def state_dict(self) -> dict:
        state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                 "python": random.getstate()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state: Mapping) -> None:
        torch.set_rng_state(state["torch"])
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


CHECKPOINT_PREFIX = "training"
_CHECKPOINT_NAME = re.compile(rf"{CHECKPOINT_PREFIX}_checkpoint_(\d+)\.pt")


class SafeDiskSaver(BaseSaveHandler):
    """Ignite save handler: atomic writes with an integrity record (:mod:`tutorial_lib.integrity`).

    Ignite's ``Checkpoint`` removes the checkpoint it replaces *before* it writes the new one, so
    with ``n_saved=1`` a full disk would leave no checkpoint at all. Here a removal only takes
    effect after the next checkpoint is safely on disk.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._to_remove: list[str] = []

    def __call__(self, checkpoint: Mapping, filename: str, metadata: Mapping | None = None) -> None:
        if idist.get_rank() != 0:
            return
        path = self.directory / filename
        try:
            integrity.save_torch(checkpoint, path)
        except integrity.CacheWriteError as err:
            kept = [n for n in self._to_remove if (self.directory / n).exists()]
            note = (f"The previous checkpoint {self.directory / kept[-1]} is kept: running again "
                    "resumes from it." if kept else "No earlier checkpoint of this run existed.")
            raise integrity.CacheWriteError(
                errno.ENOSPC, integrity.disk_full_message(path, note)) from err
        for name in self._to_remove:
            if name != filename:
                integrity.discard(self.directory / name)
        self._to_remove.clear()

    def remove(self, filename: str) -> None:
        self._to_remove.append(filename)


def _with_rng(objects: Mapping) -> dict:
    if not any(isinstance(v, Engine) for v in objects.values()):
        raise ValueError("checkpoints need the trainer (its iteration is the position in the data "
                         "stream): add it to the objects to save")
    return {**objects, "rng": objects.get("rng", RNGState())}


def attach_checkpointing(
    trainer: Engine,
    to_save: Mapping,
    directory: str | Path,
    every: int | None = None,
    *,
    event: CallableEventWithFilter | None = None,
) -> Checkpoint:
    """Save ``to_save`` (model, optimizer, scheduler, trainer, history ...) and the state of every
    random number generator every ``every`` iterations — or on ``event`` — and at the end.

    Attach it *after* the handlers whose work belongs in the checkpoint (an evaluation logged at
    the same event). Files are named by the trainer's iteration, written atomically with an
    integrity record; the last one is kept (the one before it until the new one is complete).
    ``every`` must be a multiple of the gradient-accumulation steps (a checkpoint between two
    micro-batches would lose the accumulated gradient).
    """
    if (every is None) == (event is None):
        raise ValueError("give exactly one of every= (iterations) or event=")
    saver = SafeDiskSaver(directory)
    handler = Checkpoint(
        _with_rng(to_save), saver, filename_prefix=CHECKPOINT_PREFIX, n_saved=1,
        global_step_transform=lambda engine, _: engine.state.iteration,
    )
    trainer.add_event_handler(event or Events.ITERATION_COMPLETED(every=every), handler)

    @trainer.on(Events.COMPLETED)
    def _final(engine: Engine) -> None:  # the end of the run, unless that was just saved
        last = handler.last_checkpoint
        match = _CHECKPOINT_NAME.fullmatch(Path(str(last)).name) if last else None
        if not match or int(match.group(1)) != engine.state.iteration:
            handler(engine)

    return handler


def checkpoints(directory: str | Path) -> list[Path]:
    """The ``training_checkpoint_<iteration>.pt`` files of ``directory``, newest first."""
    found = [(int(m.group(1)), p) for p in Path(directory).glob(f"{CHECKPOINT_PREFIX}_checkpoint_*.pt")
             if (m := _CHECKPOINT_NAME.fullmatch(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def resume_if_possible(to_load: Mapping, directory: str | Path) -> Path | None:
    """Load the newest intact checkpoint of ``directory`` into ``to_load`` (plus the RNG states);
    return its path, or None to start afresh.

    A checkpoint that does not match its integrity record is reported in one warning line and
    deleted (an older one is tried, else training starts again). One that does not fit the objects
    (another model size or recipe in the same directory) raises :class:`ModelError` and is left
    untouched.
    """
    for path in checkpoints(directory):
        if not integrity.check(path, "checkpoint"):
            continue
        state = torch.load(path, map_location="cpu", weights_only=False)
        try:
            Checkpoint.load_objects(to_load=_with_rng(to_load), checkpoint=state)
        except (RuntimeError, ValueError, KeyError) as err:
            first = " ".join(str(err).split())[:300]
            raise ModelError(
                f"checkpoint {path} does not fit this run ({first}). It belongs to another model "
                "size or recipe: use another directory, or delete it to start this run afresh. "
                "It was left untouched.") from err
        return path
    return None


def checkpoint_and_resume(
    trainer: Engine,
    to_save: Mapping,
    directory: str | Path,
    every: int | None = None,
    *,
    event: CallableEventWithFilter | None = None,
) -> Path | None:
    """:func:`attach_checkpointing` + :func:`resume_if_possible` with the same objects (None values,
    e.g. a schedule hook that returned nothing, are left out). Returns the checkpoint resumed from."""
    objects = {k: v for k, v in to_save.items() if v is not None}
    attach_checkpointing(trainer, objects, directory, every, event=event)
    return resume_if_possible(objects, directory)


def run_to_completion(
    trainer: Engine, data: object, *, max_epochs: int, epoch_length: int | None = None
) -> object:
    """``trainer.run(data, ...)`` — unless the run resumed from its final checkpoint: Ignite treats
    a finished state as the start of a new run (iteration 0, training again on top of the final
    weights); here a finished run stays finished. Returns the trainer's state."""
    state = trainer.state
    if state.epoch_length and state.iteration >= state.epoch_length * max_epochs:
        return state
    return trainer.run(data, max_epochs=max_epochs, epoch_length=epoch_length)


# --- the best checkpoint on validation, in memory (runs that select on dev: few-shot) --------------


class InMemorySaver(BaseSaveHandler):
    """An Ignite save handler that keeps checkpoints in memory: a run's best model lives only as
    long as the run, so ``Checkpoint(score_function=...)`` needs no file."""

    def __init__(self) -> None:
        self.saved: dict[str, tuple[dict, float]] = {}

    def __call__(self, checkpoint: Mapping, filename: str, metadata: Mapping | None = None) -> None:
        # a state_dict holds the live tensors: copy them, or the "best" would follow training
        self.saved[filename] = copy.deepcopy(dict(checkpoint)), (metadata or {}).get("priority")

    def remove(self, filename: str) -> None:
        self.saved.pop(filename, None)

    @property
    def best(self) -> tuple[dict, float]:
        """The one checkpoint an ``n_saved=1`` handler keeps, and its score."""
        (checkpoint, score), = self.saved.values()
        return checkpoint, score


class TrainedWeights:
    """What a checkpoint of a partly frozen model must hold: the parameters that train (a frozen
    weight never changes, so copying it at every new best would only cost time — a 135M-parameter
    LM with its top layers trained copies a few percent of itself). Ignite's ``Checkpoint`` saves
    and loads it like a module."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {n: p.detach() for n, p in self.model.named_parameters() if p.requires_grad}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, value in state.items():
                params[name].copy_(value)


class BestCheckpoint:
    """Keep the trained weights of the evaluation whose ``"score"`` (the history's last
    evaluation) is highest — strictly better only, so the first best is kept — and
    :meth:`restore` them at the end. Called after each evaluation with the trainer."""

    def __init__(self, model: nn.Module, history) -> None:
        self.model, self.history = model, history
        self.saver, self.weights = InMemorySaver(), TrainedWeights(model)
        self.checkpoint = Checkpoint({"model": self.weights}, self.saver, n_saved=1,
                                     score_function=lambda _: history.evals[-1]["score"],
                                     global_step_transform=lambda engine, _: engine.state.iteration)

    def __call__(self, trainer: Engine) -> None:
        self.checkpoint(trainer)

    def restore(self) -> int:
        """Load the best weights into the model; return the step they were saved at. The saved copy
        is dropped (a kept run would otherwise hold its weights twice; the runner drops the
        gradients and the optimizer state of every run)."""
        checkpoint, score = self.saver.best
        Checkpoint.load_objects({"model": self.weights}, checkpoint)
        self.saver.saved.clear()
        return next(h for h in self.history.evals if h["score"] == score)["step"]
