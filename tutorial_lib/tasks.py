"""Every labelled task of the notebooks: one table, one split protocol, one metric function.

A :class:`Task` has three labelled splits with the same two columns, ``text`` and ``label``
(a sentence pair becomes one text ``"s1 [SEP] s2"``: for BERT tokenizers exactly the
``[CLS] s1 [SEP] s2 [SEP]`` input less the segment ids; our tokenizer knows ``[SEP]`` too).

**The split protocol.** Nothing is ever selected on ``test``. Splits are carved once with a fixed
seed (:data:`SPLIT_SEED`, independent of the training seeds), so every run of every method is
scored on the same examples:

================  ==================================  ========================================
protocol          tasks                               train / validation / test
================  ==================================  ========================================
``official``      TREC, MR, CR, MPQA, SUBJ, SST-5     the dataset's train and test; validation
                                                      = its own (SentEval, SST-5) or 10 % of
                                                      train (TREC)
``glue-dev``      SST-2, CoLA, MRPC, RTE, WNLI,       GLUE hides its test labels: test = the
                  STS-B                               labelled GLUE dev set, validation = 10 %
                                                      of train (stratified)
``train-only``    QQP (the local copy: a 20k subset)  80 % / 10 % / 10 % of train
``dev-only``      QNLI, MNLI (local copy: dev only)   70 % / 10 % / 20 % of GLUE dev
================  ==================================  ========================================

Then each split may be cut to a fixed random subset (``train_examples`` …, same seed).

**Few-shot splits** (LM-BFF, Gao, Fisch & Chen 2021; used by DART in notebook 09): for a seed,
K examples *per class* for training and another K per class for dev, both drawn from the
labelled pool the train split comes from (disjoint), and the task's test split; five splits,
seeds 13, 21, 42, 87, 100 (:data:`LMBFF_SEEDS`). SST-2's pool is LM-BFF's: the 6,920 whole
training sentences (:func:`few_shot_pool`), not GLUE's train, which is mostly phrases.

**Metrics** follow GLUE: Matthews correlation for CoLA, F1 and accuracy for MRPC/QQP, Pearson and
Spearman correlation for STS-B, accuracy otherwise; a task's **score** is their mean.
"""

from __future__ import annotations

import functools
import hashlib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from . import config, data
from .runtime import atomic_write

SPLIT_SEED = 0
SEP = " [SEP] "
LMBFF_SEEDS = (13, 21, 42, 87, 100)
PROTOCOLS = ("official", "glue-dev", "train-only", "dev-only")


class TaskError(ValueError):
    """An unknown task or an impossible split, with what to do in the message."""


@dataclass(frozen=True)
class TaskSpec:
    """Where a task's data is and how it is split and scored."""

    name: str
    dataset: str  # a tutorial_lib.data registry name
    columns: tuple[str, ...]  # one text column, or two for a sentence pair
    label: str = "label"
    metrics: tuple[str, ...] = ("accuracy",)
    protocol: str = "official"

    @property
    def is_regression(self) -> bool:
        return "pearson" in self.metrics


TASKS: dict[str, TaskSpec] = {s.name: s for s in (
    TaskSpec("trec", "trec", ("text",), "coarse_label"),
    TaskSpec("trec-fine", "trec", ("text",), "fine_label"),
    TaskSpec("mr", "mr", ("text",)),
    TaskSpec("cr", "cr", ("text",)),
    TaskSpec("mpqa", "mpqa", ("text",)),
    TaskSpec("subj", "subj", ("text",)),
    TaskSpec("sst5", "sst5", ("text",)),
    TaskSpec("sst2", "sst2", ("sentence",), protocol="glue-dev"),
    TaskSpec("cola", "cola", ("sentence",), metrics=("mcc",), protocol="glue-dev"),
    TaskSpec("mrpc", "mrpc", ("sentence1", "sentence2"), metrics=("f1", "accuracy"),
             protocol="glue-dev"),
    TaskSpec("rte", "rte", ("sentence1", "sentence2"), protocol="glue-dev"),
    TaskSpec("wnli", "wnli", ("sentence1", "sentence2"), protocol="glue-dev"),
    TaskSpec("stsb", "stsb", ("sentence1", "sentence2"), metrics=("pearson", "spearman"),
             protocol="glue-dev"),
    TaskSpec("qqp", "qqp", ("question1", "question2"), metrics=("f1", "accuracy"),
             protocol="train-only"),
    TaskSpec("qnli", "qnli", ("question", "sentence"), protocol="dev-only"),
    TaskSpec("mnli", "mnli", ("premise", "hypothesis"), protocol="dev-only"),
)}
GLUE_TASKS = ("sst2", "cola", "mrpc", "rte", "wnli", "stsb", "qqp", "qnli", "mnli")


def spec(name: str) -> TaskSpec:
    """The :class:`TaskSpec` of ``name`` (an error listing the tasks otherwise)."""
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}: choose one of {sorted(TASKS)}")
    return TASKS[name]


@dataclass
class Task:
    """Three labelled splits with columns ``text`` and ``label``, plus the pool they came from."""

    spec: TaskSpec
    train: Dataset
    validation: Dataset
    test: Dataset
    label_names: list[str]  # [] for regression (STS-B)
    pool: Dataset = field(repr=False)  # labelled data train/validation were drawn from

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def num_labels(self) -> int:
        """Number of classes (1 = regression: one output)."""
        return len(self.label_names) or 1

    @property
    def is_regression(self) -> bool:
        return self.spec.is_regression

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "validation": len(self.validation), "test": len(self.test)}

    def metrics(self, predictions: Sequence, labels: Sequence) -> dict[str, float]:
        return compute_metrics(self.name, predictions, labels)

    def majority_baseline(self, split: str = "test") -> dict[str, float]:
        """The metrics of always predicting the most frequent training label (regression: the
        training mean) on ``split``: the floor every table states."""
        labels = np.asarray(data.column(getattr(self, split), "label"))
        train = np.asarray(data.column(self.train, "label"))
        guess = train.mean() if self.is_regression else np.bincount(train).argmax()
        return self.metrics(np.full(len(labels), guess), labels)


def _split(ds: Dataset, fraction: float, stratify: bool) -> tuple[Dataset, Dataset]:
    """``datasets``' ``train_test_split`` (stratified by label when ``stratify``; the same rows
    from :func:`data.split_indices`, which reads the labels at once). Its row indices
    depend only on the number of rows, the labels (when stratified), ``fraction`` and the seed, so
    they are kept in the cache under a digest of those and read back by every later process: a
    stratified split of MNLI's 393k rows takes seconds, and each notebook kernel and test process
    would pay it again. A missing or unreadable entry is computed as before."""
    labels = np.asarray(data.column(ds, "label")) if stratify else np.zeros(0)
    key = hashlib.sha256(b"|".join([str((len(ds), fraction, stratify, SPLIT_SEED)).encode(),
                                    labels.tobytes(), str(labels.dtype).encode()])).hexdigest()[:24]
    path = config.cache_dir("splits") / f"{key}.npz"
    try:
        with np.load(path) as saved:
            return ds.select(saved["train"]), ds.select(saved["test"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        pass
    train, test = (np.asarray(i, dtype=np.int64) for i in data.split_indices(
        ds, fraction, SPLIT_SEED, "label" if stratify else None))

    def save(tmp: Path) -> None:
        with tmp.open("wb") as f:
            np.savez(f, train=train, test=test)

    atomic_write(path, save)
    return ds.select(train), ds.select(test)


def subsample(ds: Dataset, n: int | None) -> Dataset:
    """A fixed random subset of ``n`` rows (``None`` or more than there are: all of them)."""
    if n is None or n >= len(ds):
        return ds
    return ds.shuffle(seed=SPLIT_SEED).select(range(n))


def held_out(ds: Dataset, taken: int | None, n: int | None) -> Dataset:
    """``n`` rows that ``subsample(ds, taken)`` did not take: the next ones in its fixed order
    (``None``: all the rest; none when ``taken`` took them all). A dev set disjoint from a
    subsampled test set of the same split."""
    if taken is None or taken >= len(ds):
        return ds.select([])
    end = len(ds) if n is None else min(len(ds), taken + n)
    return ds.shuffle(seed=SPLIT_SEED).select(range(taken, end))


def _normalise(ds: Dataset, s: TaskSpec) -> Dataset:
    """Columns ``text`` (pairs joined with [SEP]) and ``label``; nothing else."""
    def to_text(batch: dict) -> dict:
        if len(s.columns) == 1:
            return {"text": batch[s.columns[0]], "label": batch[s.label]}
        a, b = s.columns
        return {"text": [x + SEP + y for x, y in zip(batch[a], batch[b])], "label": batch[s.label]}

    keep = ds.features[s.label]
    out = ds.map(to_text, batched=True, remove_columns=ds.column_names)
    return out.cast_column("label", keep)


def _carve(s: TaskSpec) -> tuple[Dataset, Dataset, Dataset, Dataset]:
    """(pool, train, validation, test) of the raw dataset, by the spec's protocol."""
    strat = not s.is_regression
    if s.protocol == "official":
        carved = data.load(s.dataset, validation_fraction=0.1, seed=SPLIT_SEED)
        pool = data.load(s.dataset, validation_fraction=0.0)["train"]
        return pool, carved["train"], carved["validation"], carved["test"]
    raw = data.load(s.dataset, validation_fraction=0.0)
    if s.protocol == "glue-dev":
        train, validation = _split(raw["train"], 0.1, strat)
        return raw["train"], train, validation, raw["validation"]
    if s.protocol == "train-only":
        rest, test = _split(raw["train"], 0.1, strat)
        train, validation = _split(rest, 1 / 9, strat)
        return rest, train, validation, test
    rest, test = _split(raw["validation"], 0.2, strat)  # dev-only
    train, validation = _split(rest, 0.125, strat)
    return rest, train, validation, test


def load_task(
    name: str,
    *,
    train_examples: int | None = None,
    validation_examples: int | None = None,
    test_examples: int | None = None,
) -> Task:
    """Load ``name`` with the split protocol of the module docstring; each split cut to a fixed
    random subset of at most the given size (``None``: whole)."""
    s = spec(name)
    pool, train, validation, test = _carve(s)
    label = pool.features[s.label]
    names = [] if s.is_regression else list(label.names)
    sizes = (train_examples, validation_examples, test_examples)
    splits = [_normalise(subsample(ds, n), s) for ds, n in zip((train, validation, test), sizes)]
    return Task(s, *splits, names, _normalise(pool, s))


def with_train_subset(task: Task, n: int | None) -> Task:
    """The task with a fixed random subset of ``n`` training examples (``None``: unchanged)."""
    return Task(task.spec, subsample(task.train, n), task.validation, task.test, task.label_names,
                task.pool)


# --- metrics --------------------------------------------------------------------------------------


def compute_metrics(name: str, predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """The GLUE metrics of task ``name`` (fractions, not percent) plus ``score`` = their mean.

    ``predictions`` are class ids, or real numbers for regression.
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
    """Class ids (argmax), or the single regression output."""
    return logits.squeeze(-1).float() if spec(name).is_regression else logits.argmax(-1)


# --- few-shot splits (LM-BFF) ----------------------------------------------------------------------


@dataclass
class FewShotSplit:
    """One LM-BFF split: lists of ``{"text", "label"}`` rows."""

    task: str
    k: int | None
    seed: int
    train: list[dict]
    dev: list[dict]
    test: list[dict]
    label_names: list[str]

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def require(self, *parts: str) -> None:
        """Raise :class:`TaskError` if any of ``parts`` ("train", "dev", "test") is empty."""
        empty = [part for part in parts if not getattr(self, part)]
        if empty:
            raise TaskError(
                f"the few-shot split of {self.task} (K={self.k}, seed={self.seed}) has an empty "
                f"{' and '.join(empty)} set: nothing to train or select on. Load it again with "
                "tasks.few_shot (every class gets K examples), or filter it less.")

    def sizes(self) -> dict:
        return {"task": self.task, "K": self.k if self.k else "full", "seed": self.seed,
                "train": len(self.train), "dev": len(self.dev), "test": len(self.test),
                "classes": self.num_labels}


def sample_indices(
    labels: Sequence[int], k: int | None, seed: int, dev_k: int | None = None
) -> tuple[list[int], list[int]]:
    """Indices of K-per-class train and a disjoint ``dev_k``-per-class dev set (default K).

    Reproducible for a seed; every class gets exactly K (and ``dev_k``); with ``k=None`` train
    takes every example not in dev. A class with fewer than K + dev_k examples is an error.
    """
    labels = np.asarray(labels)
    dev_k = dev_k if dev_k is not None else k
    if dev_k is None:
        raise TaskError("k=None (the full training set) needs an explicit dev_k")
    if (k is not None and k < 1) or dev_k < 1:
        raise TaskError(f"K and dev_k must be ≥ 1, got K={k}, dev_k={dev_k}")
    rng = np.random.default_rng(seed)
    train, dev = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        need = dev_k + (k or 0)
        if len(idx) < need:
            raise TaskError(
                f"class {int(c)} has only {len(idx)} training examples: K={k} per class for "
                f"train plus {dev_k} for dev needs {need}. Choose a smaller K."
            )
        perm = rng.permutation(idx)
        dev += perm[:dev_k].tolist()
        train += (perm[dev_k:] if k is None else perm[dev_k: dev_k + k]).tolist()
    return sorted(train), sorted(dev)


def few_shot_pool(task: Task) -> Dataset:
    """The labelled rows few-shot splits are drawn from: the task's pool, except for SST-2.

    LM-BFF's SST-2 train is the 6,920 whole training sentences (its Table B.1; the authors in
    princeton-nlp/LM-BFF#47), the set its test sentences (GLUE's dev) come with. GLUE's SST-2
    train — 67,349 rows, mostly the labelled phrases of those sentences' parse trees ("hide new
    secretions from the parental units") — is another distribution: K = 16 drawn from it are
    mostly fragments. The sentence-level set is SST-5's train without its neutral sentences
    (1-2 stars negative, 4-5 positive: 6,920 rows, none of them in the test set), spelled as
    GLUE spells its sentences (parentheses and slashes, a trailing space)."""
    return _sst2_sentences() if task.name == "sst2" else task.pool


@functools.cache
def _sst2_sentences() -> Dataset:
    sst5 = load_task("sst5").pool
    pairs = [(t, y) for t, y in zip(data.column(sst5, "text"), data.column(sst5, "label")) if y != 2]
    glue = {"-lrb-": "(", "-rrb-": ")", "\\/": "/"}

    def spelled(text: str) -> str:
        for a, b in glue.items():
            text = text.replace(a, b)
        return text + " "

    return Dataset.from_dict({"text": [spelled(t) for t, _ in pairs],
                              "label": [int(y >= 3) for _, y in pairs]})


def few_shot(
    task: str | Task, k: int | None = 16, seed: int = 13, *, dev_k: int | None = None,
    test_examples: int | None = None,
) -> FewShotSplit:
    """The LM-BFF split of ``task`` for ``k`` and ``seed`` (``test_examples``: a fixed subset of
    the test split); train and dev drawn from :func:`few_shot_pool`."""
    task = load_task(task) if isinstance(task, str) else task
    if task.is_regression:
        raise TaskError(f"few-shot splits need classes; {task.name} is a regression task")
    pool = few_shot_pool(task)
    labels, texts = data.column(pool, "label"), data.column(pool, "text")
    train_idx, dev_idx = sample_indices(labels, k, seed, dev_k if dev_k else k or 16)
    test = subsample(task.test, test_examples)

    def rows(indices: Sequence[int]) -> list[dict]:
        return [{"text": texts[i], "label": int(labels[i])} for i in indices]

    test_rows = [{"text": t, "label": int(y)}
                 for t, y in zip(data.column(test, "text"), data.column(test, "label"))]
    return FewShotSplit(task.name, k, seed, rows(train_idx), rows(dev_idx), test_rows,
                        task.label_names)
