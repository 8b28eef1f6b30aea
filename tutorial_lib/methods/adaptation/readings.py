"""Notebook 03's "What this run shows", computed from its own tables (issue 61: no number a run
produced is typed by hand).

:func:`what_to_train` reads the summary (mean ± std, % trained, optimizer state), the comparison
against full fine-tuning, the scalar mix against the top layer and the runs table, and says per
method what this run found: the Δ with its CI and p, the verdict with what a null could have seen
(:func:`tutorial_lib.stats.null_text`), whether an adapter is inside the notebook's bar (judged on
the CI, :data:`BAR_POINTS` and :data:`BAR_TRAINED_PCT`), the optimizer state, whether the times
were measured side by side, and where the scalar mix puts its weight. Every number is formatted
by :func:`tutorial_lib.rounding.shown` (half to even), the rule ``tests/test_numbers.py`` reads
the prose by.
"""

from __future__ import annotations

import math

import pandas as pd

from ... import rounding, stats

BAR_POINTS = 2.0  # "within 2 points of full fine-tuning …"
BAR_TRAINED_PCT = 5.0  # "… with < 5 % of the parameters trained" (Houlsby et al.'s regime)
BASELINE, TOP, MIX = "full fine-tuning", "features: top layer", "features: scalar mix"
ERROR = "test_error (mean ± std)"


def _row_text(row: pd.Series) -> str:
    """``+0.40 points (95 % CI [-1.09, +1.89], p = 0.368): within noise (MDE 1.96 points; …)``."""
    return (f"{rounding.shown(row['Δ (points)'], 2, signed=True)} points of error (95 % CI "
            f"{row['95% CI']}, p = {rounding.shown(row['p'], 3)}): {row['verdict']}{stats.null_text(row)}")


def inside_bar(row: pd.Series, trained_pct: float) -> bool:
    """Inside the notebook's bar: the whole CI within ±:data:`BAR_POINTS` and fewer than
    :data:`BAR_TRAINED_PCT` % of the parameters trained (the CI, not the point estimate)."""
    low, high = stats.parse_ci(row["95% CI"])
    return (not math.isnan(low) and -BAR_POINTS <= low and high <= BAR_POINTS
            and trained_pct < BAR_TRAINED_PCT)


def what_to_train(summary: pd.DataFrame, comparison: pd.DataFrame, mix_vs_top: pd.DataFrame,
                  runs: pd.DataFrame, largest_weight: str) -> str:
    """03's reading of this run, one paragraph per finding (module docstring). ``summary``,
    ``comparison`` and ``mix_vs_top`` are indexed by method as the notebook builds them; ``runs``
    has a ``method`` and a ``cached`` column; ``largest_weight``: the layer the scalar mix weighs
    most (``names[weights.mean(0).argmax()]``)."""
    lines = []
    base = summary.loc[BASELINE]
    adapters = [m for m in comparison.index if str(m).startswith("adapters")]
    for name in adapters:
        pct = float(summary.loc[name, "% trained"])
        bar = ("inside" if inside_bar(comparison.loc[name], pct) else "not shown inside")
        lines.append(f"{name} trains {rounding.shown(pct, 2)} % of the parameters and ends "
                     f"{_row_text(comparison.loc[name])}; its error {summary.loc[name, ERROR]} against "
                     f"full fine-tuning's {base[ERROR]}: {bar} the {rounding.shown(BAR_POINTS, 0)}-point / "
                     f"{rounding.shown(BAR_TRAINED_PCT, 0)} % bar (judged on the CI's far end).")
    state = ", ".join(f"{name} {rounding.shown(summary.loc[name, 'optimizer state (MiB)'], 2)} MiB"
                      for name in adapters)
    lines.append(f"Optimizer state: full fine-tuning {rounding.shown(base['optimizer state (MiB)'], 2)} MiB; "
                 f"{state}.")
    cached = runs.loc[runs["method"] == BASELINE, "cached"].astype(bool)
    if len(cached) and cached.all():
        lines.append("Time and memory are not compared: every full fine-tuning run came from the run "
                     "cache (notebook 02's), so none was measured beside the adapters.")
    else:
        per_epoch = ", ".join(f"{name} {rounding.shown(summary.loc[name, 'seconds / epoch'], 2)} s"
                              for name in [BASELINE, *adapters])
        lines.append(f"Seconds per epoch (one run each, not tested): {per_epoch}.")
    if TOP in summary.index and MIX in summary.index:
        lines.append(f"Feature extraction: top layer {summary.loc[TOP, ERROR]}, scalar mix "
                     f"{summary.loc[MIX, ERROR]}; the mix against the top layer "
                     f"{_row_text(mix_vs_top.loc[MIX])}; against full fine-tuning the top layer "
                     f"{_row_text(comparison.loc[TOP])}, the mix {_row_text(comparison.loc[MIX])}. "
                     f"The mix's largest weight: {largest_weight}.")
    return "\n".join(lines)
