"""Figures for notebook 13 (forgetting, regularisers, distillation); each returns its Figure."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd

COLOURS = {"weight decay": "tab:gray", "L2-SP": "tab:blue", "EWC": "tab:green", "LwF": "tab:orange"}


def plot_tradeoff(curve: pd.DataFrame, *, target_floor: float | None = None,
                  width: float = 7.5) -> plt.Figure:
    """Forgetting (source accuracy lost, points) against target accuracy (%), one line per
    regulariser through its strengths, each starting at plain fine-tuning (strength 0, black);
    bars: ± one std over seeds; ``target_floor``: the target's majority rate (dashed). Better is
    *down* (less forgetting) and *right* (higher target accuracy)."""
    fig, ax = plt.subplots(figsize=(width, 0.7 * width))
    base = curve[curve["regulariser"] == "none"].iloc[0]
    for kind, group in curve[curve["regulariser"] != "none"].groupby("regulariser", sort=False):
        g = pd.concat([base.to_frame().T, group]).astype({"strength": float})
        colour = COLOURS.get(kind)
        ax.errorbar(100 * g["target_accuracy mean"].astype(float),
                    100 * g["forgetting mean"].astype(float),
                    xerr=100 * g["target_accuracy std"].astype(float).fillna(0),
                    yerr=100 * g["forgetting std"].astype(float).fillna(0),
                    marker="o", capsize=3, color=colour, label=kind, alpha=0.85)
        for _, r in group.iterrows():
            ax.annotate(f"{r['strength']:g}", (100 * r["target_accuracy mean"],
                                               100 * r["forgetting mean"]),
                        textcoords="offset points", xytext=(5, 4), fontsize=8, color=colour)
    ax.plot(100 * base["target_accuracy mean"], 100 * base["forgetting mean"], "ks", ms=9,
            label="fine-tuning (strength 0)", zorder=5)
    ax.axhline(0, color="0.6", lw=0.8)
    if target_floor is not None:
        ax.axvline(100 * target_floor, color="0.4", ls="--", lw=1,
                   label="target majority class")
    ax.set_xlabel("target test accuracy (%) → better")
    ax.set_ylabel("forgetting: source accuracy lost (points) ↓ better")
    ax.set_title("Forgetting vs target accuracy, per regulariser and strength (labels: strength)")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_students(students: pd.DataFrame, sizes: pd.DataFrame, *,
                  teachers: Mapping[str, tuple[float, float]], floor: float | None = None,
                  width: float = 7.5) -> plt.Figure:
    """Test accuracy against size (parameters without the word embeddings, millions): each
    student arm at each size (mean ± std over seeds, seeds as dots), the teachers as stars
    (``teachers``: name → (size, accuracy)); ``floor``: the majority rate (dashed)."""
    fig, ax = plt.subplots(figsize=(width, 0.65 * width))
    arms = list(dict.fromkeys(students["arm"]))
    offsets = {arm: (i - (len(arms) - 1) / 2) * 0.04 for i, arm in enumerate(arms)}
    for arm in arms:
        rows = students[students["arm"] == arm]
        g = rows.groupby("layers")["test_accuracy"].agg(["mean", "std"]).reset_index()
        x = [sizes.loc[int(n), "parameters without word embeddings"] / 1e6 * (1 + offsets[arm])
             for n in g["layers"]]
        ax.errorbar(x, 100 * g["mean"], yerr=100 * g["std"].fillna(0), marker="o", capsize=3,
                    label=f"student: {arm}")
        for n, r in rows.groupby("layers"):
            xs = sizes.loc[int(n), "parameters without word embeddings"] / 1e6 * (1 + offsets[arm])
            ax.plot([xs] * len(r), 100 * r["test_accuracy"], ".", color="0.3", alpha=0.5)
    for name, (size, acc) in teachers.items():
        ax.plot(size / 1e6, 100 * acc, "*", ms=14, label=name)
    if floor is not None:
        ax.axhline(100 * floor, color="0.4", ls="--", lw=1, label="majority class")
    ax.set_xscale("log")
    ax.set_xlabel("parameters without the word embeddings (millions, log scale)")
    ax.set_ylabel("source test accuracy (%)")
    ax.set_title("How much of the teacher a student keeps, by size")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
