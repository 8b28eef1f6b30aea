"""Figures for notebook 13 (forgetting, regularisers, distillation); each returns its Figure."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from .distillation import student_name

COLOURS = {"weight decay": "tab:gray", "L2-SP": "tab:blue", "EWC": "tab:green", "LwF": "tab:orange"}
MARKERS = {"weight decay": "v", "L2-SP": "o", "EWC": "D", "LwF": "^"}


def far_below(curve: pd.DataFrame, target_floor: float | None) -> pd.Series:
    """Which points of ``curve`` lie in the lower half of the target's range, between its floor (0
    without one) and plain fine-tuning: they would squeeze every other point into a sliver of a
    shared axis, so :func:`plot_tradeoff` zooms past them."""
    base = curve.loc[curve["regulariser"] == "none", "target_accuracy mean"].iloc[0]
    return curve["target_accuracy mean"] < ((target_floor or 0.0) + base) / 2


def _tradeoff_panel(ax: plt.Axes, curve: pd.DataFrame, base: pd.Series, *, labels: bool) -> None:
    for kind, group in curve[curve["regulariser"] != "none"].groupby("regulariser", sort=False):
        g = pd.concat([base.to_frame().T, group]).astype({"strength": float})
        colour = COLOURS.get(kind)
        ax.plot(100 * g["target_accuracy mean"].astype(float), 100 * g["forgetting mean"].astype(float),
                "-", color=colour, alpha=0.5, lw=1)
        ax.errorbar(100 * group["target_accuracy mean"].astype(float),
                    100 * group["forgetting mean"].astype(float),
                    xerr=100 * group["target_accuracy std"].astype(float).fillna(0),
                    yerr=100 * group["forgetting std"].astype(float).fillna(0), ls="none",
                    marker=MARKERS.get(kind, "o"), mfc="none", mew=1.5, ms=8, capsize=3, color=colour,
                    label=kind, alpha=0.9)
        for i, (_, r) in enumerate(group.iterrows()):
            if labels:  # the strength, offset by regulariser so that coinciding points stay readable
                ax.annotate(f"{kind} {r['strength']:g}", (100 * r["target_accuracy mean"],
                                                           100 * r["forgetting mean"]),
                            textcoords="offset points", xytext=(6, 5 + 9 * (i % 2)), fontsize=8,
                            color=colour)
    ax.plot(100 * base["target_accuracy mean"], 100 * base["forgetting mean"], "ks", ms=8, mfc="none",
            mew=1.5, label="fine-tuning (strength 0)", zorder=5)
    ax.axhline(0, color="0.6", lw=0.8)


def plot_tradeoff(curve: pd.DataFrame, *, target_floor: float | None = None,
                  width: float = 11.0) -> plt.Figure:
    """Forgetting (source accuracy lost, points) against target accuracy (%): each regulariser at
    each strength (open markers, bars ± one std over seeds), joined to plain fine-tuning
    (strength 0, black square); ``target_floor``: the target's majority rate (dashed). Better is
    *down* (less forgetting) and *right* (higher target accuracy). Left: every point; right (when
    some point lies far below fine-tuning's target, :func:`far_below`): a zoom on the others."""
    base = curve[curve["regulariser"] == "none"].iloc[0]
    far = far_below(curve, target_floor)
    zoom = bool(far.any()) and not far.all()
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(width if zoom else width * 0.6, 0.42 * width),
                             squeeze=False)
    _tradeoff_panel(axes[0, 0], curve, base, labels=not zoom)
    if target_floor is not None:
        axes[0, 0].axvline(100 * target_floor, color="0.4", ls="--", lw=1, label="target majority class")
    axes[0, 0].set_title("every setting" if zoom else "Forgetting vs target accuracy")
    if zoom:
        near = curve[~far]
        _tradeoff_panel(axes[0, 1], near, base, labels=True)
        x = 100 * near["target_accuracy mean"].astype(float)
        sx = 100 * near["target_accuracy std"].astype(float).fillna(0)
        low, high = float((x - sx).min()), float((x + sx).max())
        pad = max(0.5, 0.15 * (high - low))
        axes[0, 1].set_xlim(low - pad, high + 3 * pad)
        axes[0, 0].axvspan(low - pad, high + 3 * pad, color="0.9", zorder=0, label="zoomed (right)")
        axes[0, 1].set_title("zoom: the settings whose target stayed near fine-tuning's")
    for ax in axes[0]:
        ax.set_xlabel("target test accuracy (%) → better")
    axes[0, 0].set_ylabel("forgetting: source accuracy lost (points) ↓ better")
    axes[0, 0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_stage_two_curves(curves: pd.DataFrame, width: float = 11.0) -> plt.Figure:
    """Stage 2 step by step, per setting (mean over seeds): left the target's cross-entropy on
    each step's training batch (does the target learn?), right the penalty Ω (log scale; plain
    fine-tuning has none)."""
    fig, (ce, pen) = plt.subplots(1, 2, figsize=(width, 0.38 * width))
    mean = curves.groupby(["method", "step"], sort=False)[["cross_entropy", "penalty"]].mean().reset_index()
    for method, g in mean.groupby("method", sort=False):
        kind = next((k for k in COLOURS if method.startswith(k)), None)
        colour = COLOURS.get(kind, "black")
        ce.plot(g["step"], g["cross_entropy"], color=colour, label=method, lw=1.5 if kind else 2.0,
                ls="-" if kind else "--", zorder=2 if kind else 3)
        if kind and (g["penalty"] > 0).any():
            pen.plot(g["step"], g["penalty"], color=colour, label=method, lw=1.5)
    ce.set_title("target cross-entropy on each training batch")
    ce.set_xlabel("stage-2 step")
    ce.set_ylabel("cross-entropy (nats)")
    ce.legend(fontsize=8)
    pen.set_yscale("log")
    pen.set_title("the penalty Ω added to it")
    pen.set_xlabel("stage-2 step")
    pen.set_ylabel("Ω (log scale)")
    pen.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_students(students: pd.DataFrame, sizes: pd.DataFrame, *,
                  teachers: Mapping[str, tuple[float, float]], floor: float | None = None,
                  width: float = 7.5) -> plt.Figure:
    """Test accuracy against size (parameters without the word embeddings, millions): each
    student arm (``students["method"]``) at each size (mean ± std over seeds, seeds as dots), the
    teachers as stars (``teachers``: name → (size, accuracy)); ``floor``: the majority rate
    (dashed). The x ticks are the sizes of ``sizes``' rows, each with its inference speed."""
    fig, ax = plt.subplots(figsize=(width, 0.65 * width))
    arms = list(dict.fromkeys(students["method"]))
    offsets = {arm: (i - (len(arms) - 1) / 2) * 0.04 for i, arm in enumerate(arms)}

    def size_of(layers: int) -> float:
        return sizes.loc[student_name(int(layers)), "parameters without word embeddings"] / 1e6

    for arm in arms:
        rows = students[students["method"] == arm]
        g = rows.groupby("layers")["test_accuracy"].agg(["mean", "std"]).reset_index()
        x = [size_of(n) * (1 + offsets[arm]) for n in g["layers"]]
        ax.errorbar(x, 100 * g["mean"], yerr=100 * g["std"].fillna(0), marker="o", capsize=3,
                    label=f"student: {arm}")
        for n, r in rows.groupby("layers"):
            xs = size_of(n) * (1 + offsets[arm])
            ax.plot([xs] * len(r), 100 * r["test_accuracy"], ".", color="0.3", alpha=0.5)
    for name, (size, acc) in teachers.items():
        ax.plot(size / 1e6, 100 * acc, "*", ms=14, label=name)
    if floor is not None:
        ax.axhline(100 * floor, color="0.4", ls="--", lw=1, label="majority class")
    ax.set_xscale("log")
    ticks = sizes["parameters without word embeddings"] / 1e6
    ax.xaxis.set_major_locator(FixedLocator(list(ticks)))
    ax.set_xticklabels([f"{m:.1f}M\n{s:.0f} ex/s" for m, s in zip(ticks, sizes["examples / s"])],
                       fontsize=8)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("parameters without the word embeddings (log scale), and inference speed")
    ax.set_ylabel("source test accuracy (%)")
    ax.set_title("How much of the teacher a student keeps, by size")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
