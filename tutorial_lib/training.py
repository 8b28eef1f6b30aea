"""Training on PyTorch-Ignite: the update step, schedules, history and the one recipe, ``fit``.

The pieces are small so that each notebook can show (and change) one of them:

* :func:`create_trainer` — an Ignite ``Engine`` whose update step does gradient accumulation,
  clipping and bf16 autocast, or fp16 autocast with a gradient scaler (Ignite's
  ``create_supervised_trainer`` has no clipping and its AMP path is CUDA-only, so we write the
  step ourselves, as the 2019 tutorial did);
* :func:`attach_schedule` — warm-up then cosine (pretraining) or warm-up then linear decay
  (fine-tuning), built from Ignite's param schedulers;
* :func:`resumable_loader` (in :mod:`tutorial_lib.batches`, with the collation, re-exported
  here) — a ``DataLoader`` whose order is a function of (seed, pass over the data) only, so that
  a resumed run continues the data stream where it was interrupted;
* checkpoints that resume exactly (:mod:`tutorial_lib.checkpoints`);
* :class:`History` — a list of dicts for plots (checkpointed with the rest);
* :func:`fit` — **the one training recipe** every notebook's training goes through: optimizer
  over parameter groups, trainer, schedule, periodic evaluation, a method's handlers, checkpoints
  and exact resume, in that fixed order; :class:`Method` is what a method changes in it.

Scoring a model is :mod:`tutorial_lib.evaluation`'s.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from ignite.engine import Engine, Events
from ignite.handlers import (
    CosineAnnealingScheduler,
    PiecewiseLinear,
    ProgressBar,
    create_lr_scheduler_with_warmup,
)
from ignite.metrics import RunningAverage
from torch import nn
from torch.utils.data import DataLoader

from . import integrity
from .batches import (  # re-exported: the collation and data-stream names of this module's API
    Batch,
    ResumableBatchSampler,
    eval_loader,
    input_lengths,
    mask_tokens,
    pad_collate,
    pad_ids,
    resumable_loader,
)
from .checkpoints import checkpoint_and_resume, run_to_completion
from .config import PROGRESS_ENV_VAR
from .models import IGNORE_INDEX  # re-exported: notebook 01 imports it from here
from .params import make_optimizer
from .runtime import autocast, autocast_dtype, grad_scaler
from .runtime import device as default_device

LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def default_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Models in this package return ``Output(logits, loss)`` when given ``labels``."""
    return model(**batch).loss


def to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


# --- the trainer -------------------------------------------------------------------------------


class TrainingOutOfMemory(torch.OutOfMemoryError):
    """The accelerator ran out of memory in a training step; the message says what to lower."""


def out_of_memory_message(device: torch.device, batch: Batch, grad_accum: int) -> str:
    shape = next((tuple(v.shape) for v in batch.values() if torch.is_tensor(v)), ())
    size = "×".join(map(str, shape)) or "?"
    return (f"{device.type.upper()} out of memory in a training step (batch of {size} tokens, "
            f"gradient accumulation {grad_accum}). Lower the batch size (the scale's "
            "pretrain.batch_size / finetune.batch_size; raise grad_accum to keep the effective "
            "batch) or max_len, or choose a smaller scale (TUTORIAL_SCALE=classroom). Checkpoints "
            "already written are kept: re-running resumes from the last one.")


def create_trainer(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    device: torch.device,
    amp_dtype: torch.dtype | None = None,
    grad_accum: int = 1,
    max_norm: float | None = 1.0,
    loss_fn: LossFn = default_loss,
) -> Engine:
    """An Ignite trainer: forward under autocast, backward, every ``grad_accum`` steps clip and step.

    The engine's output is the (un-divided) loss of the batch, as a float. When a run starts (or
    resumes) on a :func:`resumable_loader`, the loader is moved to the trainer's iteration, so a
    resumed run sees the batches the interrupted one had not yet seen. Running out of
    accelerator memory raises :class:`TrainingOutOfMemory`, which says what to lower. With
    ``amp_dtype=torch.float16`` the step scales the loss (``torch.amp.GradScaler``), unscales the
    gradients before clipping and skips a step whose gradients overflowed; the scaler is
    ``engine.grad_scaler`` (None otherwise), to be checkpointed with the optimizer.
    """
    if device.type == "cpu":
        torch.set_flush_denormal(True)  # tiny Adam moments must not fall onto the slow path
    scaler = grad_scaler(device, amp_dtype)

    def update(engine: Engine, batch: Batch) -> float:
        model.train()
        batch = to_device(batch, device)
        try:
            with autocast(device, amp_dtype):
                loss = loss_fn(model, batch)
            scaled = loss / grad_accum
            (scaler.scale(scaled) if scaler else scaled).backward()
            if engine.state.iteration % grad_accum == 0:
                if scaler:
                    scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
                if max_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                if scaler:
                    scaler.step(optimizer)  # skipped when a gradient is inf/nan
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as err:
            if isinstance(err, TrainingOutOfMemory):
                raise
            raise TrainingOutOfMemory(out_of_memory_message(device, batch, grad_accum)) from err
        return loss.item()

    trainer = Engine(update)
    trainer.grad_scaler = scaler
    trainer.add_event_handler(Events.STARTED, seek_data_stream)
    return trainer


def seek_data_stream(engine: Engine) -> None:
    """At the start of a run: the next batch of a resumable loader is batch ``iteration`` of its
    stream (0 for a new run, the checkpoint's iteration for a resumed one)."""
    sampler = getattr(engine.state.dataloader, "batch_sampler", None)
    if isinstance(sampler, ResumableBatchSampler):
        sampler.seek(engine.state.iteration)
    elif engine.state.iteration > 0 and isinstance(engine.state.dataloader, DataLoader):
        integrity.logger.warning(
            f"resuming at iteration {engine.state.iteration} on a DataLoader that cannot seek: it "
            "starts its data over, so the resumed run will differ (use training.resumable_loader).")


def attach_schedule(
    trainer: Engine,
    optimizer: torch.optim.Optimizer,
    *,
    kind: str,
    lr: float,
    warmup: int,
    total: int,
    min_lr: float = 0.0,
) -> object:
    """Warm-up then ``"cosine"`` (pretraining) or ``"linear"`` decay (fine-tuning), per iteration.

    ``lr`` may be scaled per parameter group by the group's ``"lr_scale"`` entry (see
    :func:`attach_lr_scales`): the schedule is computed for the base rate and never compounds.
    """
    warmup = max(2, min(warmup, total - 1))  # Ignite needs warmup_duration >= 2
    if kind == "cosine":
        # one cosine half-period over the remaining steps; +1 so that the last step does not
        # wrap round into a second cycle (Ignite's cosine restarts after ``cycle_size`` events)
        cosine = CosineAnnealingScheduler(
            optimizer, "lr", start_value=lr, end_value=min_lr, cycle_size=total - warmup + 1
        )
        scheduler = create_lr_scheduler_with_warmup(
            cosine, warmup_start_value=0.0, warmup_end_value=lr, warmup_duration=warmup
        )
    elif kind == "linear":
        scheduler = PiecewiseLinear(
            optimizer, "lr", milestones_values=[(0, 0.0), (warmup, lr), (total, min_lr)]
        )
    else:
        raise ValueError(f"unknown schedule {kind!r}: use 'cosine' or 'linear'")
    trainer.add_event_handler(Events.ITERATION_STARTED, scheduler)
    attach_lr_scales(trainer, optimizer)
    return scheduler


def attach_lr_scales(trainer: Engine, optimizer: torch.optim.Optimizer) -> None:
    """Multiply each param group's scheduled lr by its ``"lr_scale"`` (default 1), every iteration.

    Must be attached *after* the scheduler: Ignite schedulers write the same absolute value into
    every group at ``ITERATION_STARTED``; this handler then rescales it once. Because the schedule
    value is recomputed from scratch each step, the scales never compound — unlike the 2019
    slides' discriminative fine-tuning, which divided each group's *current* lr every iteration.
    """
    if not any("lr_scale" in g for g in optimizer.param_groups):
        return

    @trainer.on(Events.ITERATION_STARTED)
    def _scale(_: Engine) -> None:
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * group.get("lr_scale", 1.0)


def attach_progress(trainer: Engine, description: str = "train") -> ProgressBar | None:
    """A running-average loss (``trainer.state.metrics["loss"]``) shown in a progress bar.

    ``TUTORIAL_PROGRESS=0`` (set by the main job) keeps the bar out of saved notebook outputs.
    """
    RunningAverage(output_transform=lambda loss: loss).attach(trainer, "loss")
    if os.environ.get(PROGRESS_ENV_VAR, "1") == "0":
        return None
    pbar = ProgressBar(persist=False, desc=description)
    pbar.attach(trainer, metric_names=["loss"])
    return pbar


# --- history ------------------------------------------------------------------------------------


@dataclass
class History:
    """Per-iteration training records and per-evaluation metrics, ready for plotting.

    ``state_dict``/``load_state_dict`` let Ignite's ``Checkpoint`` save it with the model, so a
    resumed run keeps the records written before the interruption.
    """

    train: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)

    def attach(self, trainer: Engine, optimizer: torch.optim.Optimizer, every: int = 1,
               grad_accum: int = 1) -> None:
        """Record loss and learning rates every ``every`` iterations. ``step`` counts optimizer
        steps (with ``grad_accum`` > 1 several iterations share one, as evaluations count them)."""

        @trainer.on(Events.ITERATION_COMPLETED(every=every))
        def _record(engine: Engine) -> None:
            row = {"step": math.ceil(engine.state.iteration / grad_accum),
                   "loss": engine.state.output}
            for i, group in enumerate(optimizer.param_groups):
                row["lr" if i == 0 else f"lr_{i}"] = group["lr"]
            self.train.append(row)

    def log_eval(self, step: int, split: str, metrics: dict) -> dict:
        row = {"step": step, "split": split}
        row.update({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        self.evals.append(row)
        return row

    def state_dict(self) -> dict:
        return {"train": [dict(r) for r in self.train], "evals": [dict(r) for r in self.evals]}

    def load_state_dict(self, state: Mapping) -> None:
        self.train[:] = [dict(r) for r in state["train"]]
        self.evals[:] = [dict(r) for r in state["evals"]]


# --- the one training recipe ------------------------------------------------------------------

ParamGroups = Callable[[nn.Module, float, float], list[dict]]  # (model, lr, weight_decay) → groups
Schedule = Callable[..., object]  # (trainer, optimizer, *, lr, total) → the scheduler (or None)
Handlers = Callable[[Engine, nn.Module, torch.optim.Optimizer], None]


@dataclass(frozen=True)
class Method:
    """What a method changes in the one training recipe (:func:`fit`); ``Method()`` is plain
    fine-tuning. Every notebook's method is one of these (adapters, unfreezing, discriminative
    rates, STLR, an auxiliary loss, R-Drop, TDT …).

    * ``prepare(model)`` — before training: freeze, add adapters or heads;
    * ``param_groups(model, lr, weight_decay)`` — the optimizer's groups (default: decay /
      no-decay groups of the trainable parameters); a group's ``lr_scale`` scales the schedule;
    * ``on_trainer(trainer, model, optimizer)`` — extra Ignite handlers (e.g. unfreezing);
    * ``schedule(trainer, optimizer, lr=, total=)`` — replaces warm-up + linear decay; it must
      honour the groups' ``lr_scale`` (:func:`attach_lr_scales`);
    * ``loss_fn(model, batch)`` — replaces the training loss (evaluation uses the plain forward);
    * ``lr`` — the method's own learning rate (e.g. adapters'), else the budget's.
    """

    prepare: Callable[[nn.Module], None] | None = None
    param_groups: ParamGroups | None = None
    on_trainer: Handlers | None = None
    schedule: Schedule | None = None
    loss_fn: LossFn | None = None
    lr: float | None = None

    @property
    def is_plain(self) -> bool:
        """Plain fine-tuning (perhaps at another rate): nothing but ``lr`` is set."""
        return self == Method(lr=self.lr)

    def with_handlers(self, *more: Handlers | None) -> Method:
        """This method with more ``on_trainer`` handlers, run after its own."""
        hooks = [h for h in (self.on_trainer, *more) if h is not None]

        def on_trainer(trainer: Engine, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
            for hook in hooks:
                hook(trainer, model, optimizer)

        return dataclasses.replace(self, on_trainer=on_trainer if hooks else None)


PLAIN = Method()  # plain fine-tuning


@dataclass
class FitResult:
    """What :func:`fit` leaves: the trainer (its state: iterations, last output), the optimizer,
    the history of losses, learning rates and evaluations, and the training time."""

    trainer: Engine
    optimizer: torch.optim.Optimizer
    history: History
    seconds: float


def fit(
    model: nn.Module,
    loader: object,
    *,
    lr: float,
    weight_decay: float = 0.01,
    epochs: int = 1,
    steps: int | None = None,
    method: Method = PLAIN,
    warmup: int = 0,
    max_norm: float | None = 1.0,
    schedule: str | None = "linear",
    evaluate: Callable[[Engine], None] | None = None,
    evaluate_every: int | None = None,
    history: History | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_objects: Mapping[str, object] | None = None,
    progress: str | None = None,
    device: torch.device | None = None,
    amp_dtype: torch.dtype | None | str = "auto",
) -> FitResult:
    """Train ``model`` on ``loader`` — the one recipe, in a fixed order (``model`` first moved to
    ``device``, default :func:`tutorial_lib.runtime.device`, where the trainer puts each batch):

    1. optimizer: AdamW over ``method.param_groups(model, lr, weight_decay)`` (default: decay /
       no-decay groups of the trainable parameters) — ``method.prepare`` has run already (the
       caller builds the model; see :func:`tutorial_lib.finetuning.finetune`);
    2. trainer (:func:`create_trainer`: autocast, clipping at ``max_norm``, ``method.loss_fn``);
    3. schedule over ``total`` = ``steps`` or ``epochs · len(loader)`` iterations:
       ``method.schedule``, else ``"linear"`` (or ``"cosine"``) with ``warmup`` steps, or None
       (a constant rate);
    4. progress bar (``progress``: its label), ``history`` (loss and rates per iteration);
    5. ``evaluate(trainer)`` every ``evaluate_every`` iterations and at the end (once per step);
    6. ``method.on_trainer`` handlers;
    7. with ``checkpoint_dir``: a checkpoint every ``evaluate_every`` iterations (model, optimizer,
       trainer, schedule, history, ``checkpoint_objects`` and every RNG), resumed from if there;
    8. run: ``epochs`` passes, or exactly ``steps`` iterations (passes restart as needed).

    ``loader`` should be a :func:`resumable_loader` (or a loader of them): then a killed run,
    re-run, ends with the weights of an uninterrupted one. ``amp_dtype="auto"``: the machine's
    (:func:`tutorial_lib.runtime.autocast_dtype`); None: fp32.
    """
    dev = device or default_device()
    amp = autocast_dtype(dev) if amp_dtype == "auto" else amp_dtype
    model.to(dev)  # the trainer moves each batch there (on a GPU, a model left behind crashes)
    groups = method.param_groups(model, lr, weight_decay) if method.param_groups else None
    optimizer = make_optimizer(model, lr, weight_decay, groups)
    trainer = create_trainer(model, optimizer, device=dev, amp_dtype=amp, max_norm=max_norm,
                             loss_fn=method.loss_fn or default_loss)
    per_pass = len(loader)
    total = steps if steps is not None else epochs * per_pass
    scheduler = None
    if method.schedule:
        scheduler = method.schedule(trainer, optimizer, lr=lr, total=total)
    elif schedule is not None:
        scheduler = attach_schedule(trainer, optimizer, kind=schedule, lr=lr, warmup=warmup,
                                    total=total)
    if progress:
        attach_progress(trainer, progress)
    history = history if history is not None else History()
    history.attach(trainer, optimizer)
    if evaluate is not None:
        every = Events.ITERATION_COMPLETED(every=evaluate_every) if evaluate_every else None
        done: list[int] = []

        def _evaluate(engine: Engine) -> None:
            if done and done[-1] == engine.state.iteration:
                return  # the end of the run fell on an evaluation step
            done.append(engine.state.iteration)
            evaluate(engine)

        trainer.add_event_handler(every | Events.COMPLETED if every else Events.COMPLETED, _evaluate)
    if method.on_trainer:
        method.on_trainer(trainer, model, optimizer)
    max_epochs = epochs if steps is None else math.ceil(steps / per_pass)
    if steps is not None and steps < max_epochs * per_pass:
        @trainer.on(Events.ITERATION_COMPLETED(once=steps))
        def _stop(engine: Engine) -> None:
            engine.terminate()
    if checkpoint_dir is not None:  # last: the evaluation of a step belongs in its checkpoint
        checkpoint_and_resume(trainer, {"model": model, "optimizer": optimizer, "trainer": trainer,
                                        "scheduler": scheduler, "history": history,
                                        **(checkpoint_objects or {})},
                              checkpoint_dir, every=evaluate_every or per_pass)
    start = time.perf_counter()
    if not (steps is not None and trainer.state.iteration >= steps):
        run_to_completion(trainer, loader, max_epochs=max_epochs)
    return FitResult(trainer, optimizer, history, time.perf_counter() - start)



__all__ = [  # the names of tutorial_lib.batches (and models.IGNORE_INDEX) stay importable here
    "IGNORE_INDEX", "Batch", "ResumableBatchSampler", "eval_loader", "input_lengths", "mask_tokens",
    "pad_collate", "pad_ids", "resumable_loader",
]
