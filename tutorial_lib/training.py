"""Training on PyTorch-Ignite: the update step, schedules, evaluators, checkpoints, history.

The pieces are small so that each notebook can show (and change) one of them:

* :func:`create_trainer` — an Ignite ``Engine`` whose update step does gradient accumulation,
  clipping and bf16 autocast, or fp16 autocast with a gradient scaler (Ignite's
  ``create_supervised_trainer`` has no clipping and its AMP path is CUDA-only, so we write the
  step ourselves, as the 2019 tutorial did);
* :func:`attach_schedule` — warm-up then cosine (pretraining) or warm-up then linear decay
  (fine-tuning), built from Ignite's param schedulers;
* :func:`create_lm_evaluator` / :func:`create_classifier_evaluator` — Ignite metrics
  (token-weighted loss, perplexity, accuracy, confusion matrix);
* :func:`attach_checkpointing` — Ignite ``Checkpoint`` with an atomic ``DiskSaver``; rerunning a
  killed run resumes from the last checkpoint;
* :class:`History` — a list of dicts for plots.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ignite.distributed as idist
import torch
import torch.nn.functional as F
from ignite.engine import Engine, Events
from ignite.handlers import (
    Checkpoint,
    CosineAnnealingScheduler,
    DiskSaver,
    PiecewiseLinear,
    ProgressBar,
    create_lr_scheduler_with_warmup,
)
from ignite.metrics import Accuracy, ConfusionMatrix, Loss, MetricsLambda, RunningAverage
from torch import nn

from .models import IGNORE_INDEX
from .runtime import autocast, grad_scaler

Batch = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def default_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Models in this package return ``Output(logits, loss)`` when given ``labels``."""
    return model(**batch).loss


def to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


# --- data collation --------------------------------------------------------------------------


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (Devlin et al. 2019, Sec. 3.1): choose ``probability`` of the non-special
    tokens as targets; replace 80% of them by [MASK], 10% by a random token, keep 10%.

    Returns ``(inputs, labels)`` with labels = IGNORE_INDEX at positions that are not targets.
    """
    labels = input_ids.clone()
    inputs = input_ids.clone()
    special = torch.isin(input_ids, torch.tensor(list(special_ids), device=input_ids.device))
    probs = torch.full(input_ids.shape, probability, device=input_ids.device)
    probs.masked_fill_(special, 0.0)
    targets = torch.bernoulli(probs, generator=generator).bool()
    labels[~targets] = IGNORE_INDEX
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = targets & (u < 0.8)
    to_random = targets & (u >= 0.8) & (u < 0.9)
    inputs[to_mask] = mask_id
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    inputs[to_random] = random_ids.to(input_ids.device)[to_random]
    return inputs, labels


def pad_collate(pad_id: int) -> Callable[[list[dict]], Batch]:
    """Collate ``{"input_ids": list[int], "labels": int}`` rows into right-padded tensors."""

    def collate(rows: list[dict]) -> Batch:
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r["input_ids"])] = torch.as_tensor(r["input_ids"])
            mask[i, : len(r["input_ids"])] = 1
        batch = {"input_ids": ids, "attention_mask": mask}
        if "labels" in rows[0]:
            batch["labels"] = torch.as_tensor([r["labels"] for r in rows])
        return batch

    return collate


# --- the trainer -------------------------------------------------------------------------------


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

    The engine's output is the (un-divided) loss of the batch, as a float. With
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
        return loss.item()

    engine = Engine(update)
    engine.grad_scaler = scaler
    return engine


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
    if os.environ.get("TUTORIAL_PROGRESS", "1") == "0":
        return None
    pbar = ProgressBar(persist=False, desc=description)
    pbar.attach(trainer, metric_names=["loss"])
    return pbar


# --- evaluators ------------------------------------------------------------------------------


def create_lm_evaluator(
    model: nn.Module,
    *,
    device: torch.device,
    amp_dtype: torch.dtype | None = None,
    words_per_token: float | None = None,
) -> Engine:
    """Evaluator with token-weighted ``loss`` (nats per sub-word token) and ``ppl`` = exp(loss).

    With ``words_per_token`` = n_words / n_tokens of the evaluated text it also reports
    ``word_ppl`` = exp(loss · n_tokens / n_words), the 2019 tutorial's conversion from sub-word
    to word-level perplexity (comparable with word-level LMs on WikiText).
    """

    @torch.no_grad()
    def step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        batch = to_device(batch, device)
        with autocast(device, amp_dtype):
            logits = model(**batch).logits
        labels = batch["labels"]
        if logits.dim() == 3:  # causal: logits for positions 0..T-2 predict labels 1..T-1
            labels = labels[:, 1:]
            logits = logits.flatten(0, 1)
            labels = labels.flatten()
        else:  # masked LM: logits already restricted to the masked positions
            labels = labels[labels != IGNORE_INDEX]
        keep = labels != IGNORE_INDEX
        return logits[keep].float(), labels[keep]

    evaluator = Engine(step)
    loss = Loss(F.cross_entropy)
    loss.attach(evaluator, "loss")
    MetricsLambda(math.exp, loss).attach(evaluator, "ppl")
    if words_per_token:
        MetricsLambda(lambda nll: math.exp(nll / words_per_token), loss).attach(
            evaluator, "word_ppl"
        )
    return evaluator


def create_classifier_evaluator(
    model: nn.Module,
    *,
    device: torch.device,
    num_labels: int,
    amp_dtype: torch.dtype | None = None,
) -> Engine:
    """Evaluator with ``accuracy``, ``error`` (= 1 − accuracy), ``loss`` and ``confusion``."""

    @torch.no_grad()
    def step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        batch = to_device(batch, device)
        labels = batch.pop("labels")
        with autocast(device, amp_dtype):
            logits = model(**batch).logits
        return logits.float(), labels

    evaluator = Engine(step)
    acc = Accuracy()
    acc.attach(evaluator, "accuracy")
    MetricsLambda(lambda a: 1.0 - a, acc).attach(evaluator, "error")
    Loss(F.cross_entropy).attach(evaluator, "loss")
    ConfusionMatrix(num_classes=num_labels).attach(evaluator, "confusion")
    return evaluator


# --- checkpoints and history ---------------------------------------------------------------------


def attach_checkpointing(
    trainer: Engine, to_save: dict, directory: str | Path, every: int
) -> Checkpoint:
    """Save ``to_save`` (model, optimizer, scheduler, trainer...) every ``every`` iterations and at
    the end. Files are written atomically (temp file + rename), the last one is kept."""
    saver = DiskSaver(str(directory), atomic=True, require_empty=False, create_dir=True)
    handler = Checkpoint(to_save, saver, filename_prefix="training", n_saved=1)
    trainer.add_event_handler(Events.ITERATION_COMPLETED(every=every), handler)
    trainer.add_event_handler(Events.COMPLETED, handler)
    return handler


def resume_if_possible(to_load: dict, directory: str | Path) -> Path | None:
    """Load the newest ``training_checkpoint_*.pt`` in ``directory`` into ``to_load``; return its path."""
    directory = Path(directory)
    files = sorted(directory.glob("training_checkpoint_*.pt"), key=lambda p: p.stat().st_mtime)
    if not files:
        return None
    state = torch.load(files[-1], map_location="cpu", weights_only=False)
    Checkpoint.load_objects(to_load=to_load, checkpoint=state)
    return files[-1]


@dataclass
class History:
    """Per-iteration training records and per-evaluation metrics, ready for plotting."""

    train: list[dict] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)

    def attach(self, trainer: Engine, optimizer: torch.optim.Optimizer, every: int = 1) -> None:
        @trainer.on(Events.ITERATION_COMPLETED(every=every))
        def _record(engine: Engine) -> None:
            row = {"step": engine.state.iteration, "loss": engine.state.output}
            for i, group in enumerate(optimizer.param_groups):
                row["lr" if i == 0 else f"lr_{i}"] = group["lr"]
            self.train.append(row)

    def log_eval(self, step: int, split: str, metrics: dict) -> dict:
        row = {"step": step, "split": split}
        row.update({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
        self.evals.append(row)
        return row


def is_main_process() -> bool:
    return idist.get_rank() == 0
