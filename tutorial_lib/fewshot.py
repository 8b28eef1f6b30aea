"""Few-shot splits following the LM-BFF protocol (Gao, Fisch & Chen 2021), used by DART (09).

For a task and a seed:

* **train**: K examples *per class*, drawn from the original training set;
* **dev**: another K per class from the training set, disjoint from train (the only data any
  hyperparameter or checkpoint may be chosen on);
* **test**: the original validation set for GLUE tasks (SST-2's 872 sentences) and the original
  test set otherwise (TREC; MR/CR use our fixed 80/10/10 split's test part, see ``data``);
* five splits, seeds 13, 21, 42, 87 and 100; the reported number is mean (std) over them.

``k=None`` ("full") trains on every remaining training example (with a K-per-class dev set of
``dev_k`` examples still held out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import data

LMBFF_SEEDS = (13, 21, 42, 87, 100)

# (text column, label column, split used as the few-shot *test* set)
FEWSHOT_TASKS: dict[str, tuple[str, str, str]] = {
    "sst2": ("sentence", "label", "validation"),  # GLUE: the original dev set is the test set
    "cola": ("sentence", "label", "validation"),
    "mr": ("text", "label", "test"),
    "cr": ("text", "label", "test"),
    "mpqa": ("text", "label", "test"),
    "subj": ("text", "label", "test"),
    "sst5": ("text", "label", "test"),
    "trec": ("text", "coarse_label", "test"),
}


class FewShotError(ValueError):
    """An impossible few-shot split (unknown task, K too large for a class)."""


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
        """Raise :class:`FewShotError` if any of ``parts`` ("train", "dev", "test") is empty."""
        empty = [part for part in parts if not getattr(self, part)]
        if empty:
            raise FewShotError(
                f"the few-shot split of {self.task} (K={self.k}, seed={self.seed}) has an empty "
                f"{' and '.join(empty)} set: nothing to train or select on. Load it again with "
                "load_fewshot (every class gets K examples), or filter it less.")

    def sizes(self) -> dict:
        return {"task": self.task, "K": self.k if self.k else "full", "seed": self.seed,
                "train": len(self.train), "dev": len(self.dev), "test": len(self.test),
                "classes": self.num_labels}


def sample_indices(
    labels: Sequence[int], k: int | None, seed: int, dev_k: int | None = None
) -> tuple[list[int], list[int]]:
    """Indices of K-per-class train and a disjoint ``dev_k``-per-class dev set (default K).

    Reproducible for a seed; every class gets exactly K (and ``dev_k``); with ``k=None`` train
    takes every example not in dev. Raises :class:`FewShotError` when a class has fewer than
    K + dev_k examples.
    """
    labels = np.asarray(labels)
    dev_k = dev_k if dev_k is not None else k
    if dev_k is None:
        raise FewShotError("k=None (the full training set) needs an explicit dev_k")
    if (k is not None and k < 1) or dev_k < 1:
        raise FewShotError(f"K and dev_k must be ≥ 1, got K={k}, dev_k={dev_k}")
    rng = np.random.default_rng(seed)
    train, dev = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        need = dev_k + (k or 0)
        if len(idx) < need:
            raise FewShotError(
                f"class {int(c)} has only {len(idx)} training examples: K={k} per class for "
                f"train plus {dev_k} for dev needs {need}. Choose a smaller K."
            )
        perm = rng.permutation(idx)
        dev += perm[:dev_k].tolist()
        train += (perm[dev_k:] if k is None else perm[dev_k: dev_k + k]).tolist()
    return sorted(train), sorted(dev)


def load_fewshot(
    task: str,
    k: int | None = 16,
    seed: int = 13,
    *,
    dev_k: int | None = None,
    max_test: int | None = None,
) -> FewShotSplit:
    """The LM-BFF split of ``task`` for ``k`` and ``seed`` (``max_test``: smoke scale only)."""
    if task not in FEWSHOT_TASKS:
        raise FewShotError(f"unknown few-shot task {task!r}: choose one of {sorted(FEWSHOT_TASKS)}")
    text_col, label_col, test_split = FEWSHOT_TASKS[task]
    ds = data.load(task, validation_fraction=0.0)
    pool, test = ds["train"], ds[test_split]
    train_idx, dev_idx = sample_indices(pool[label_col], k, seed, dev_k if dev_k else k or 16)
    texts, labels = pool[text_col], pool[label_col]

    def rows(indices: Sequence[int]) -> list[dict]:
        return [{"text": texts[i], "label": int(labels[i])} for i in indices]

    test_rows = [{"text": t, "label": int(y)} for t, y in zip(test[text_col], test[label_col])]
    if max_test:
        test_rows = test_rows[:max_test]
    names = list(pool.features[label_col].names)
    return FewShotSplit(task, k, seed, rows(train_idx), rows(dev_idx), test_rows, names)
