"""18's figures: the label curve of part 1 and the perplexities of the LM stage."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd


def plot_label_curve(table: pd.DataFrame, floor: float | None = None,
                     title: str = "TREC-6 test error by labels") -> plt.Figure:
    """Test error (mean ± std over seeds, in %) against the number of labels, one line per
    ``arm``; ``floor``: the majority class's error, dashed."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for arm, g in table.groupby("arm", sort=False):
        stats = g.groupby("labels")["test_error"].agg(["mean", "std"]) * 100
        ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), marker="o",
                    capsize=3, label=arm)
    if floor is not None:
        ax.axhline(100 * floor, color="grey", ls="--", lw=1, label="majority class")
    ax.set_xscale("log")
    ax.set_xlabel("labelled training questions")
    ax.set_ylabel("test error (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_perplexities(ppl: pd.DataFrame, title: str = "Per-token perplexity after each LM stage"
                      ) -> plt.Figure:
    """Bars: each model (rows of ``ppl``) on each text (columns), log scale."""
    ax = ppl.plot.bar(figsize=(6, 3.4), rot=0, logy=True)
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title(title)
    ax.figure.tight_layout()
    return ax.figure


def read_label_curve(table: pd.DataFrame, comparisons: Mapping[int, pd.DataFrame], method: str,
                     baseline: str) -> str:
    """One computed sentence per label count: the method's mean error against the baseline's, Δ
    and the verdict of that label count's comparison, and where the gap is largest."""
    means = table.groupby(["arm", "labels"])["test_error"].mean() * 100
    parts, gaps = [], {}
    for labels, comparison in comparisons.items():
        r = comparison.loc[method]
        gaps[labels] = r["Δ (points)"]
        seen = f", MDE {r['MDE']:.2f}" if str(r["verdict"]).startswith("within") else ""
        parts.append(f"{labels:,} labels: {means[(method, labels)]:.2f} % vs "
                     f"{means[(baseline, labels)]:.2f} % (Δ {r['Δ (points)']:+.2f} points, "
                     f"{r['verdict']}{seen})")
    best = min(gaps, key=gaps.get)
    where = (f"The largest fall in error is at {best:,} labels ({gaps[best]:+.2f} points)"
             if gaps[best] < 0 else "The error falls at no label count")
    return f"{method} against {baseline} — " + "; ".join(parts) + f". {where}."
