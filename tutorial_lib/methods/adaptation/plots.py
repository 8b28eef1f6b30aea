"""Figures of the optimisation-scheme notebooks 03-05 (each function returns its Figure)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ...training import History

NOT_MEASURED = "not measured in this run"


def plot_cost_vs_error(table: pd.DataFrame, by: str = "method") -> plt.Figure:
    """Test error (mean ± std over seeds) against % of parameters trained (log scale); wall time
    per epoch (mean, min–max whiskers, as the notebooks' tables) and peak memory (if the table has
    ``peak_mib``; median, min–max: the first run of a process pays one-time costs) as bars.

    Only runs made *in this run* are measured: a row reused from the run cache (``cached``) or
    with no value has no bar, and the method says "not measured in this run" in its place — an
    empty slot would read as zero cost, and another run's time is not comparable."""
    g = table.groupby(by, sort=False)
    err = 100 * g["test_error"].agg(["mean", "std"]).fillna(0.0)
    pct = g["trained_pct"].mean()
    panels = [("seconds_per_epoch", "seconds / epoch", "mean")]
    if "peak_mib" in table:
        panels.append(("peak_mib", "peak memory (MiB)", "median"))
    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(4.4 * (1 + len(panels)), 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, name in enumerate(err.index):
        axes[0].errorbar(pct[name], err.loc[name, "mean"], yerr=err.loc[name, "std"], fmt="o",
                         capsize=3, color=colors[i % len(colors)], label=name)
    axes[0].set(xscale="log", xlabel="% of parameters trained (log)", ylabel="test error (%)",
                title="error vs parameters trained")
    axes[0].legend(fontsize=7)
    measured = table[~table["cached"].eq(True)] if "cached" in table else table  # NaN: not cached
    for ax, (column, label, centre) in zip(axes[1:], panels):
        stats = measured.groupby(by, sort=False)[column].agg([centre, "min", "max"])
        stats = stats.reindex(err.index)
        whiskers = np.vstack([stats[centre] - stats["min"], stats["max"] - stats[centre]])
        ax.barh(range(len(stats)), stats[centre].fillna(0.0), xerr=np.nan_to_num(whiskers),
                color=[colors[i % len(colors)] for i in range(len(stats))])
        for row, value in enumerate(stats[centre]):
            if np.isnan(value):
                ax.text(0.02, row, NOT_MEASURED, transform=ax.get_yaxis_transform(),
                        va="center", fontsize=8, color="0.35", style="italic")
        ax.set_yticks(range(len(stats)), stats.index, fontsize=8)
        ax.invert_yaxis()
        ax.set(xlabel=f"{label} — {centre}, min–max over seeds", title=label)
    fig.tight_layout()
    return fig


def plot_mix_weights(weights: np.ndarray, layer_names: Sequence[str]) -> plt.Figure:
    """Bar chart of a scalar mix's softmax weights (``[seeds, layers]``): mean ± std over seeds,
    with the uniform starting value as a dashed line."""
    weights = np.asarray(weights, dtype=float)
    mean = weights.mean(axis=0)
    std = weights.std(axis=0, ddof=1) if len(weights) > 1 else np.zeros_like(mean)
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    ax.bar(range(len(mean)), mean, yerr=std, capsize=3, color="tab:purple")
    ax.axhline(1 / len(mean), ls="--", color="gray", label="uniform (init)")
    ax.set_xticks(range(len(mean)), layer_names, rotation=20)
    ax.set(ylabel="softmax(s)_j", title=f"learned layer weights of the scalar mix (n={len(weights)})")
    ax.legend()
    fig.tight_layout()
    return fig


def plot_timelines(timelines: dict[str, Sequence[dict]], layer_names: Sequence[str]) -> plt.Figure:
    """Several unfreezing timelines stacked, one panel per method."""
    fig, axes = plt.subplots(len(timelines), 1, sharex=True,
                             figsize=(7.5, (0.3 * len(layer_names) + 0.9) * len(timelines) + 0.4),
                             squeeze=False)
    for ax, (name, timeline) in zip(axes[:, 0], timelines.items()):
        frame = pd.DataFrame(timeline)
        grid = frame[list(layer_names)].to_numpy(dtype=float).T
        steps = frame["step"].to_numpy()
        ax.imshow(grid, aspect="auto", cmap="Greens", vmin=0, vmax=1.3, interpolation="nearest",
                  extent=(steps[0] - 0.5, steps[-1] + 0.5, len(layer_names) - 0.5, -0.5))
        ax.set_yticks(range(len(layer_names)), layer_names, fontsize=8)
        ax.set_title(f"{name} (green = trainable)", fontsize=10)
    axes[-1, 0].set_xlabel("iteration")
    fig.tight_layout()
    return fig


def _group_lrs(history: History, names: Sequence[str]) -> pd.DataFrame:
    """One column per distinct group name (first group of that name), indexed by step."""
    frame = pd.DataFrame(history.train).set_index("step")
    out = {}
    for i, name in enumerate(names):
        if name not in out:
            out[name] = frame["lr" if i == 0 else f"lr_{i}"]
    return pd.DataFrame(out)


def plot_group_lrs(history: History, names: Sequence[str],
                   compounding: dict[str, Sequence[float]] | None = None) -> plt.Figure:
    """Left: every layer's learning rate over training (log scale). Right: each rate divided by
    the head's — flat lines at ξ^-depth if the ratios hold through the whole schedule.
    ``compounding`` (optional, name → rates) adds the 2019 slides' compounding rates, dotted,
    down to a thousandth of the smallest real rate (below that they leave the plot)."""
    lrs = _group_lrs(history, names)
    positive = lrs.to_numpy()[lrs.to_numpy() > 0]
    floor = positive.min() / 1e3 if positive.size else 0.0  # hide the compounding rates below
    fig, (ax, ax_ratio) = plt.subplots(1, 2, figsize=(11.5, 3.8))
    for name in lrs:
        line, = ax.plot(lrs.index, lrs[name], label=name)
        ax_ratio.plot(lrs.index, lrs[name] / lrs.iloc[:, 0], color=line.get_color(), label=name)
        if compounding and name in compounding:
            values = np.asarray(compounding[name], dtype=float)
            values = np.where(values > floor, values, np.nan)
            ax.plot(lrs.index[: len(values)], values, ls=":", color=line.get_color())
    ax.set(yscale="log", xlabel="iteration", ylabel="learning rate",
           title="lr per layer" + (" (dotted: slides' compounding version)" if compounding else ""))
    ax_ratio.set(yscale="log", xlabel="iteration", ylabel="lr / lr(head)",
                 title="ratio to the head's rate")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_schedules(schedules: dict[str, Sequence[float]], tail: int | None = 20) -> plt.Figure:
    """Several learning-rate schedules (base rate over iterations) on one axis, with an inset that
    zooms on the last ``tail`` iterations (None: no inset) and a line at zero: a tail of a few
    percent of the peak — e.g. the negative end of ULMFiT's Eq. 3 as printed — is invisible at the
    full scale."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    for name, values in schedules.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.set(xlabel="iteration", ylabel="learning rate (base)", title="schedules")
    ax.legend(loc="upper left", fontsize=8)
    n = max((len(v) for v in schedules.values()), default=0)
    if tail and n > tail:
        inset = ax.inset_axes([0.15, 0.1, 0.3, 0.33])  # below the decaying lines
        for values in schedules.values():
            inset.plot(range(len(values) - tail + 1, len(values) + 1), values[-tail:])
        inset.axhline(0.0, color="black", lw=0.8)
        inset.set_title(f"last {tail} iterations (zoom)", fontsize=7)
        inset.tick_params(labelsize=6)
        inset.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        inset.yaxis.get_offset_text().set_fontsize(6)
    fig.tight_layout()
    return fig
