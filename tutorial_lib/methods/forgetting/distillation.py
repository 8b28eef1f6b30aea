"""Ensembling and knowledge distillation (notebook 13).

* **Ensemble**: average the class probabilities of several fine-tuned models,
  p̄(y|x) = 1/M Σ_m p_m(y|x) (:func:`ensemble_probabilities`).
* **Knowledge distillation** (Hinton, Vinyals & Dean 2015): a small *student* learns from a
  teacher's distribution softened by a temperature T, q_T = softmax(z/T):

      L = (1 − a) · CE(softmax(z_s), y) + a · T² · KL(q_T(teacher) ‖ q_T(z_s))

  (:func:`kd_loss`). The T² keeps the soft term's gradients on the scale of the hard term's
  as T grows: ∂/∂z_s of T² · KL is T · (q_T(z_s) − q_T(teacher)), which for large T tends to
  (z_s − z_t)/C for zero-mean logits — Hinton et al.'s logit matching. For an ensemble teacher
  the "logits" are log p̄. Rows without a label (``IGNORE_INDEX``, e.g. unlabelled transfer text
  labelled by the teacher) add only the soft term.
* **The student** here is the teacher's own encoder cut to its first k layers
  (:func:`truncated_backbone`), so that it starts from pretrained weights and shares the tokenizer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from ... import data
from ...anatomy import truncated
from ...backbones import Backbone
from ...finetuning import Recipe, Run, run
from ...models import IGNORE_INDEX, count_parameters
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...stats import compare_items
from ...tasks import Task
from ...training import Batch, Method, eval_loader, pad_collate

# --- predictions and ensembles ------------------------------------------------------------


@torch.no_grad()
def probabilities(model: nn.Module, loader: DataLoader) -> torch.Tensor:
    """softmax of ``model``'s logits for every row of ``loader``, in the loader's order, [N, C]."""
    dev = device()
    model.to(dev).eval()
    out = []
    for batch in loader:
        with autocast(dev, autocast_dtype(dev)):
            logits = model(batch["input_ids"].to(dev), batch["attention_mask"].to(dev)).logits
        out.append(F.softmax(logits.float(), -1).cpu())
    return torch.cat(out)


def row_probabilities(model: nn.Module, rows: Sequence[Mapping], pad_id: int,
                      batch_size: int = 128) -> torch.Tensor:
    """:func:`probabilities` for ``rows`` in *their* order, computed shortest first (each padded
    batch nearly as long as its rows: about half the tokens of the given order on sentences)."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
    loader = eval_loader([rows[i] for i in order], batch_size, pad_collate(pad_id), by_length=False)
    probs = probabilities(model, loader)
    out = torch.empty_like(probs)
    out[torch.tensor(order, dtype=torch.long)] = probs
    return out


def row_labels(rows: Sequence[Mapping]) -> torch.Tensor:
    """The ``labels`` of ``rows``, in their order."""
    return torch.tensor([int(r["labels"]) for r in rows])


def ensemble_probabilities(members: Sequence[torch.Tensor]) -> torch.Tensor:
    """p̄ = the mean of the members' probabilities ([N, C] each)."""
    return torch.stack(list(members)).mean(0)


def labels_of(loader: DataLoader) -> torch.Tensor:
    """The ``labels`` of every row of ``loader``, in its order."""
    return torch.cat([b["labels"].reshape(-1) for b in loader])


def accuracy(probs: torch.Tensor, labels: torch.Tensor) -> float:
    return float((probs.argmax(-1) == labels).float().mean())


def items_comparison(correct: Mapping[str, Sequence[bool]], baseline: str,
                     floor_correct: Sequence[bool] | None = None) -> pd.DataFrame:
    """Classifiers scored on the *same* test items (one ensemble, single models), each against
    ``baseline`` item by item (McNemar, ``stats.compare_items``), as a table shaped like
    ``stats.compare``'s (accuracy in points, higher is better); ``floor_correct``: the majority
    class on the same items, which the baseline must beat (the learned-baseline guard)."""
    base = np.asarray(correct[baseline], dtype=bool)
    row0 = {"method": baseline, "mean (points)": 100 * base.mean(), "Δ (points)": 0.0,
            "95% CI": "", "effect size": math.nan, "test": "", "p": math.nan,
            "verdict": "(baseline)", "n": len(base), "df": math.nan}
    if floor_correct is not None:
        check = compare_items(base, floor_correct)
        row0.update({"floor": 100 * float(np.mean(floor_correct)), "floor p": check.p})
        if check.raw_verdict(True) != "better":
            row0["verdict"] = "(baseline) at its floor: majority class"
    rows = [row0]
    for name, values in correct.items():
        if name == baseline:
            continue
        c = compare_items(values, base, floor_correct)
        rows.append({"method": name, "mean (points)": 100 * float(np.mean(values)),
                     "Δ (points)": 100 * c.delta, "95% CI": f"[{100 * c.low:+.2f}, {100 * c.high:+.2f}]",
                     "effect size": c.effect_size, "test": c.test, "p": c.p,
                     "verdict": c.verdict(True), "n": c.n, "df": math.nan})
    return pd.DataFrame(rows).set_index("method")


# --- the distillation loss ----------------------------------------------------------------


def soften(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """q_T = softmax(z / T)."""
    return F.softmax(logits.float() / temperature, -1)


def soft_target_loss(student_logits: torch.Tensor, teacher_probs: torch.Tensor,
                     temperature: float) -> torch.Tensor:
    """T² · KL(teacher_probs ‖ softmax(z_s / T)), per example (summed over classes), averaged
    over the batch; ``teacher_probs`` already softened by the same T. With a one-hot teacher at
    T = 1 it is the cross-entropy."""
    log_q = F.log_softmax(student_logits.float() / temperature, -1)
    kl = (torch.xlogy(teacher_probs, teacher_probs) - teacher_probs * log_q).sum(-1)
    return temperature ** 2 * kl.mean()


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, labels: torch.Tensor,
            temperature: float = 2.0, soft_weight: float = 0.5) -> torch.Tensor:
    """Hinton et al.'s (1 − a) · CE(z_s, y) + a · T² · KL(q_T(z_t) ‖ q_T(z_s)), a = ``soft_weight``;
    rows whose label is ``IGNORE_INDEX`` add only the soft term; a = 0 is plain cross-entropy."""
    labelled = labels != IGNORE_INDEX
    hard = (F.cross_entropy(student_logits[labelled].float(), labels[labelled])
            if labelled.any() else student_logits.sum() * 0.0)
    if soft_weight == 0:
        return hard
    soft = soft_target_loss(student_logits, soften(teacher_logits, temperature), temperature)
    return (1 - soft_weight) * hard + soft_weight * soft


def distillation(temperature: float = 2.0, soft_weight: float = 0.5) -> Method:
    """:func:`kd_loss` as a :class:`~tutorial_lib.training.Method` (batches need a ``teacher``
    entry of logits: :func:`teacher_collate`)."""

    def loss_fn(model: nn.Module, batch: Batch) -> torch.Tensor:
        logits = model(batch["input_ids"], batch["attention_mask"]).logits
        return kd_loss(logits, batch["teacher"], batch["labels"], temperature, soft_weight)

    return Method(loss_fn=loss_fn)


def teacher_collate(pad_id: int) -> Callable[[list[dict]], Batch]:
    """``pad_collate`` that also stacks each row's ``teacher`` logits into ``batch["teacher"]``."""
    base = pad_collate(pad_id)

    def collate(rows: list[dict]) -> Batch:
        batch = base(rows)
        batch["teacher"] = torch.tensor([r["teacher"] for r in rows], dtype=torch.float32)
        return batch

    return collate


def teacher_rows(rows: Sequence[Mapping], teacher_probs: torch.Tensor,
                 keep_labels: bool = True) -> list[dict]:
    """``rows`` with the teacher's logits (log p̄) attached; ``keep_labels=False``: unlabelled
    transfer text (its label is replaced by ``IGNORE_INDEX``: the teacher's is the only signal)."""
    logits = teacher_probs.clamp_min(1e-8).log()
    return [{"input_ids": r["input_ids"], "labels": r["labels"] if keep_labels else IGNORE_INDEX,
             "teacher": z.tolist()} for r, z in zip(rows, logits)]


def transfer_text(task: Task, n: int | None, seed: int = 1) -> list[str]:
    """``n`` texts of ``task``'s labelled pool that are in neither its train nor its validation
    split (a fixed random choice by ``seed``), to be used *without* their labels: unlabelled
    transfer text for the teacher to label."""
    used = set(data.column(task.train, "text")) | set(data.column(task.validation, "text"))
    pool = data.column(task.pool.shuffle(seed=seed), "text")
    out = []
    for text in pool:
        if n is not None and len(out) >= n:
            break
        if text not in used:
            out.append(text)
            used.add(text)
    return out


# --- the student ------------------------------------------------------------------------------


def truncated_backbone(backbone: Backbone, layers: int) -> Backbone:
    """A copy of a Hugging Face ``backbone`` keeping only its first ``layers`` Transformer layers
    (embeddings and tokenizer as they are): a pretrained student ``layers / n_layers`` as deep."""
    if not 1 <= layers <= backbone.n_layers:
        raise ValueError(f"a student of {layers} layers: choose 1 to {backbone.n_layers}")
    encoder = truncated(backbone.encoder, layers)
    return Backbone(f"{backbone.name}[:{layers}]", backbone.kind, backbone.tokenizer, encoder,
                    backbone.max_len, encoder)


def train_student(student: Backbone, rows: Sequence[Mapping], num_labels: int, *, method: Method,
                  steps: int, lr: float, budget: Budget, seed: int,
                  pool: str | None = None) -> Run:
    """A fresh classifier on ``student`` (its head seeded by ``seed``) trained for exactly
    ``steps`` batches of ``rows`` (teacher-labelled: :func:`teacher_rows`) with ``method``: the
    one runner, :func:`tutorial_lib.finetuning.run`, on a copy of ``student``.
    ``pool``: where its head reads (None: the backbone's default). Returns its
    :class:`~tutorial_lib.finetuning.Run` with the trained model (``run.model``; the notebook
    tests it itself) and its training seconds."""
    return run(Recipe(build=lambda b: b.classifier(num_labels, pool=pool), backbone=student,
                      budget=budget.replace(lr=lr), method=method, steps=steps,
                      rows=lambda _: list(rows), collate=teacher_collate), seed, keep_model=True)


def student_name(layers: int) -> str:
    """How the tables and figures name a student: "student (2 layers)"."""
    return f"student ({layers} layer{'' if layers == 1 else 's'})"


def size_row(model: nn.Module, loader: DataLoader) -> dict:
    """A model's parameters (all, and without the word embeddings) and its inference speed on
    ``loader`` (examples per second, one pass, after one warm-up batch)."""
    words = model.encoder.get_input_embeddings().weight.numel()
    first = next(iter(loader))
    probabilities(model, [first])
    start = time.perf_counter()
    n = len(labels_of(loader)) if hasattr(loader, "dataset") else 0
    probabilities(model, loader)
    seconds = time.perf_counter() - start
    total = count_parameters(model)
    return {"parameters": total, "parameters without word embeddings": total - words,
            "examples / s": n / seconds if seconds else float("nan")}
