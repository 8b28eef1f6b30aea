"""Floors: the trivial scores a baseline must beat before its comparisons mean anything.

:mod:`tutorial_lib.stats` re-exports every name here; its verdict rule tests a baseline against
its :class:`Floor` (the learned-baseline guard). A floor is the majority-class rate (or error), a
task's chance metric, or one value per seed; runs tables carry it in a ``<column>_floor`` column
(:func:`floor_column`) so that :func:`floor_from_table` finds it without a hand-written number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Floor:
    """A trivial score a run must beat, in the metric's own units (fractions, like the runs table).

    ``value``: one number, or ``{seed or split: number}`` when each run has its own floor (then
    the check is paired by key). ``what`` names it in sentences (``"majority class"``,
    ``"chance (1/17)"``, ``"zero-shot start"``). Passing a plain float where a Floor is expected
    means ``Floor(value)``.
    """

    value: float | Mapping[object, float]
    what: str = "majority class"

    @property
    def mean(self) -> float:
        v = self.value
        return float(np.mean(list(v.values()))) if isinstance(v, Mapping) else float(v)


def majority_floor(train_labels: Sequence[int], eval_labels: Sequence[int], *, error: bool = False,
                   what: str | None = None) -> Floor:
    """The majority-class floor: the rate at which always predicting the most frequent *training*
    label is right on ``eval_labels`` (``error=True``: the rate at which it is wrong — the floor of
    an error metric). A task's own ``tasks.Task.majority_baseline()`` gives the same number."""
    train = np.asarray(train_labels)
    guess = np.bincount(train).argmax()
    rate = float(np.mean(np.asarray(eval_labels) == guess))
    name = what or ("majority-class error" if error else "majority class")
    return Floor(1.0 - rate if error else rate, name)


FLOOR_SUFFIX = "_floor"


def floor_column(column: str) -> str:
    """The column of a runs table that holds ``column``'s trivial floor, one value per run
    (``"test_error"`` → ``"test_error_floor"``), written by the library functions that know the
    task (``finetuning.compare_methods``, ``regularized.transfer_columns``, …) so that
    :func:`compare` guards every comparison without a hand-written floor."""
    return column + FLOOR_SUFFIX


def floor_from_table(table: pd.DataFrame, baseline: str, *, by: str = "method",
                     column: str = "test_error", pair_on: str | None = "seed") -> Floor | None:
    """The baseline's floor from ``table``'s :func:`floor_column` (None when the table has no such
    column or the baseline's rows have no value): one number when the baseline's runs share it,
    else one per ``pair_on`` key. Named "majority-class error" for an error column, else
    "majority class"."""
    name = floor_column(column)
    if name not in table:
        return None
    rows = table[table[by] == baseline]
    values = rows[name].dropna()
    if values.empty:
        return None
    what = "majority-class error" if "error" in column else "majority class"
    if values.nunique() == 1 or pair_on is None or pair_on not in rows:
        return Floor(float(values.mean()), what)
    keyed = rows.dropna(subset=[name])
    return Floor({k: float(v) for k, v in zip(keyed[pair_on], keyed[name])}, what)


def _as_floor(floor: Floor | float | None, what: str) -> Floor | None:
    if floor is None or isinstance(floor, Floor):
        return floor
    return Floor(float(floor), what)
