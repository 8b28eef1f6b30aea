"""Figures for notebook 08 (TDT and regularised fine-tuning); each function returns its Figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

CMAP = "RdYlGn"  # red = low confidence (perturbed most), green = high confidence


def _example_label(titles: Sequence[str] | None, i: int) -> str:
    return titles[i] if titles else f"#{i + 1}"


def plot_token_confidences(examples: Sequence[Sequence[tuple[str, float]]],
                           titles: Sequence[str] | None = None,
                           width: float = 11.0) -> plt.Figure:
    """Each example's tokens as text, each on a box coloured by its confidence m. The colour scale
    spans the confidences shown (a scorer that barely moved from 0.5 would otherwise paint every
    token the same); the colour bar gives the range. A long example wraps: its label stands on its
    first row, and the rows it continues on are marked "↳"."""
    cmap = matplotlib.colormaps[CMAP]
    values = [m for tokens in examples for _, m in tokens] or [0.0, 1.0]
    lo, hi = min(values), max(values)
    norm = plt.Normalize(lo, hi if hi > lo else lo + 1e-6)
    # rough layout: lines of at most ~width*9 characters, wrapped between tokens
    lines: list[list[tuple[str, float]]] = []
    labels: list[str] = []  # an example's label on its *first* row; "↳" on the rows it wraps onto
    for i, tokens in enumerate(examples):
        current, chars, first = [], 0, True
        for tok, m in tokens:
            if current and chars + len(tok) + 2 > width * 8.5:
                lines.append(current)
                labels.append(_example_label(titles, i) if first else "↳")
                current, chars, first = [], 0, False
            current.append((tok, m))
            chars += len(tok) + 2
        lines.append(current)
        labels.append(_example_label(titles, i) if first else "↳")
    fig, ax = plt.subplots(figsize=(width, 0.42 * len(lines) + 0.9))
    ax.set_xlim(0, width * 8.5)
    ax.set_ylim(len(lines), -0.5)
    ax.axis("off")
    for row, (line, label) in enumerate(zip(lines, labels)):
        x = 0.0
        if label:
            ax.text(-1, row, label, ha="right", va="center", fontsize=8, color="0.3")
        for tok, m in line:
            ax.text(x, row, tok, va="center", ha="left", family="monospace", fontsize=9,
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": cmap(norm(m)), "edgecolor": "none"})
            x += len(tok) + 2
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=norm)
    fig.colorbar(sm, ax=ax, orientation="horizontal", fraction=0.08, pad=0.02, aspect=50,
                 label=f"token confidence m, from {lo:.3f} to {hi:.3f} (low: blurred most in the "
                       "distilled view)")
    return fig


def plot_tdt_terms(history: Sequence[Mapping[str, float]], smooth: int = 10) -> plt.Figure:
    """TDT's loss terms (left) and the mean token confidence (right) through training."""
    frame = pd.DataFrame(history).set_index("step")
    rolled = frame.rolling(smooth, min_periods=1).mean()
    fig, (ax, ax_m) = plt.subplots(1, 2, figsize=(11, 3.4))
    for col in ("CE clean", "CE distilled", "KL hinge", "KL(p‖p̃)", "KL(p‖p̂)"):
        ax.plot(rolled.index, rolled[col], label=col)
    ax.set(xlabel="training step", ylabel="nats", title=f"TDT loss terms (rolling mean of {smooth})")
    ax.legend(fontsize=8)
    ax_m.plot(rolled.index, rolled["mean m"], color="tab:green")
    ax_m.set(xlabel="training step", ylabel="mean m over content tokens", ylim=(0, 1),
             title="mean token confidence")
    fig.tight_layout()
    return fig


def plot_method_errors(table: pd.DataFrame, columns: Mapping[str, str], by: str = "method",
                       majority: Mapping[str, float] | None = None) -> plt.Figure:
    """Grouped bars: mean error ± std over seeds per method, one group per evaluation set
    (``columns`` maps a column of ``table`` to the set's display name); seeds as dots; dashed:
    ``majority[display name]``, the error of always predicting the majority class."""
    methods = list(dict.fromkeys(table[by]))
    fig, ax = plt.subplots(figsize=(1.9 * len(columns) + 5, 3.8))
    width = 0.8 / len(methods)
    for i, name in enumerate(methods):
        rows = table[table[by] == name]
        xs = np.arange(len(columns)) + (i - (len(methods) - 1) / 2) * width
        vals = [100 * rows[c] for c in columns]
        ax.bar(xs, [v.mean() for v in vals], width, yerr=[v.std(ddof=1) if len(v) > 1 else 0
                                                          for v in vals],
               label=name, alpha=0.8, capsize=3)
        for x, v in zip(xs, vals):
            ax.plot([x] * len(v), v, "k.", ms=3)
    for j, label in enumerate(columns.values()):
        if majority and label in majority:
            ax.hlines(100 * majority[label], j - 0.45, j + 0.45, colors="black", linestyles="--",
                      label="majority class" if j == 0 else None)
    ax.set_xticks(np.arange(len(columns)), list(columns.values()))
    ax.set(ylabel="error (%)", title="error by method (mean ± std over seeds; dots: seeds)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
