"""GLUE tasks for multi-task learning (notebooks 06 and 07): reproducible splits and metrics.

GLUE hides its test labels, and the local copy lacks some splits, so every task gets three
*labelled* splits, carved once with a fixed seed (:data:`SPLIT_SEED`, independent of the training
seeds, so every run of every method is scored on the same examples):

=========  =====================================  ===========================================
task       local copy                             our train / dev / test
=========  =====================================  ===========================================
SST-2,     GLUE train + labelled dev              train = 90% of GLUE train, dev = the other
CoLA,                                             10% (stratified), test = GLUE dev
MRPC, RTE,
WNLI,
STS-B
QQP        a 20k subset of GLUE train only        80% / 10% / 10% of the subset
QNLI       GLUE dev only (test unlabelled)        70% / 10% / 20% of GLUE dev
MNLI       GLUE dev-matched only                  70% / 10% / 20% of dev-matched
=========  =====================================  ===========================================

``dev`` is for every choice (GradTS-trial's subset, thresholds); ``test`` is read once per run.
Each scale then subsamples train/dev/test (see ``config.METHODS["multitask"]``).

Metrics follow GLUE: Matthews correlation for CoLA, F1 and accuracy for MRPC and QQP, Pearson and
Spearman correlation for STS-B, accuracy otherwise. A task's **score** is the mean of its metrics
(GLUE's convention), in percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from . import data

SPLIT_SEED = 0
SEP = " [SEP] "  # our tokenizer and BERT's both treat [SEP] as a special token


@dataclass(frozen=True)
class GlueSpec:
    """Columns, label count and metrics of one GLUE task."""

    name: str
    columns: tuple[str, ...]  # one text column, or two for a sentence pair
    num_labels: int  # 1 = regression (STS-B)
    metrics: tuple[str, ...]
    carve: str  # "train+dev" (test = GLUE dev), "train-only", or "dev-only"

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1


GLUE: dict[str, GlueSpec] = {
    s.name: s
    for s in (
        GlueSpec("sst2", ("sentence",), 2, ("accuracy",), "train+dev"),
        GlueSpec("cola", ("sentence",), 2, ("mcc",), "train+dev"),
        GlueSpec("mrpc", ("sentence1", "sentence2"), 2, ("f1", "accuracy"), "train+dev"),
        GlueSpec("rte", ("sentence1", "sentence2"), 2, ("accuracy",), "train+dev"),
        GlueSpec("wnli", ("sentence1", "sentence2"), 2, ("accuracy",), "train+dev"),
        GlueSpec("stsb", ("sentence1", "sentence2"), 1, ("pearson", "spearman"), "train+dev"),
        GlueSpec("qqp", ("question1", "question2"), 2, ("f1", "accuracy"), "train-only"),
        GlueSpec("qnli", ("question", "sentence"), 2, ("accuracy",), "dev-only"),
        GlueSpec("mnli", ("premise", "hypothesis"), 3, ("accuracy",), "dev-only"),
    )
}


@dataclass
class GlueTask:
    """One GLUE task as three labelled splits with a ``text`` and a ``label`` column."""

    spec: GlueSpec
    train: object  # datasets.Dataset
    dev: object
    test: object

    @property
    def name(self) -> str:
        return self.spec.name

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "dev": len(self.dev), "test": len(self.test)}


def spec(name: str) -> GlueSpec:
    """The :class:`GlueSpec` of ``name`` (a clear error listing the tasks otherwise)."""
    if name not in GLUE:
        raise ValueError(f"unknown GLUE task {name!r}: choose one of {sorted(GLUE)}")
    return GLUE[name]


def _split(ds, fraction: float, stratify: bool):
    kwargs = {"stratify_by_column": "label"} if stratify else {}
    parts = ds.train_test_split(test_size=fraction, seed=SPLIT_SEED, **kwargs)
    return parts["train"], parts["test"]


def _subsample(ds, n: int | None):
    if n is None or n >= len(ds):
        return ds
    return ds.shuffle(seed=SPLIT_SEED).select(range(n))


def load_glue_task(
    name: str,
    *,
    train_examples: int | None = None,
    dev_examples: int | None = None,
    test_examples: int | None = None,
) -> GlueTask:
    """Load ``name`` from the local copy (or the Hub) with the splits of the module docstring,
    each subsampled (fixed seed) to at most the given number of examples."""
    s = spec(name)
    strat = not s.is_regression
    if s.carve == "train+dev":
        raw = data.load(name, validation_fraction=0.0)
        train, dev = _split(raw["train"], 0.1, strat)
        test = raw["validation"]
    elif s.carve == "train-only":
        raw = data.load(name, validation_fraction=0.0)
        rest, test = _split(raw["train"], 0.1, strat)
        train, dev = _split(rest, 1 / 9, strat)
    else:
        raw = data.load(name, validation_fraction=0.0)
        rest, test = _split(raw["validation"], 0.2, strat)
        train, dev = _split(rest, 0.125, strat)

    def to_text(batch: dict) -> dict:
        if len(s.columns) == 1:
            return {"text": batch[s.columns[0]]}
        a, b = s.columns
        return {"text": [x + SEP + y for x, y in zip(batch[a], batch[b])]}

    splits = []
    for ds, n in ((train, train_examples), (dev, dev_examples), (test, test_examples)):
        ds = _subsample(ds, n)
        splits.append(ds.map(to_text, batched=True, remove_columns=[
            c for c in ds.column_names if c not in ("label",)]))
    return GlueTask(s, *splits)


# --- metrics --------------------------------------------------------------------------------


def compute_metrics(name: str, predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """GLUE metrics of ``name`` (fractions, not percent) plus ``score`` = their mean.

    ``predictions`` are class ids, or real numbers for STS-B.
    """
    s = spec(name)
    y_pred, y_true = np.asarray(predictions), np.asarray(labels)
    out: dict[str, float] = {}
    for metric in s.metrics:
        if metric == "accuracy":
            out[metric] = float(accuracy_score(y_true, y_pred))
        elif metric == "f1":
            out[metric] = float(f1_score(y_true, y_pred, zero_division=0.0))
        elif metric == "mcc":
            out[metric] = float(matthews_corrcoef(y_true, y_pred))
        elif metric in ("pearson", "spearman"):
            fn = stats.pearsonr if metric == "pearson" else stats.spearmanr
            value = fn(y_pred, y_true)[0] if np.std(y_pred) > 0 else 0.0  # constant → undefined
            out[metric] = float(value)
    out["score"] = float(np.mean([out[m] for m in s.metrics]))
    return out


def predictions_from_logits(name: str, logits: torch.Tensor) -> torch.Tensor:
    """Class ids (argmax), or the single regression output for STS-B."""
    return logits.squeeze(-1).float() if spec(name).is_regression else logits.argmax(-1)
