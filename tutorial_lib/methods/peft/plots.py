"""Figures of notebook 14 (parameter-efficient fine-tuning); each function returns its Figure."""

from __future__ import annotations

from collections.abc import Collection

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator


def plot_frontier(table: pd.DataFrame, *, floor: float | None = None, by: str = "method",
                  title: str = "the parameter-efficiency frontier",
                  not_trained: Collection[str] = ()) -> plt.Figure:
    """Test error (mean ± std over seeds, in %) against the % of parameters trained (log x),
    one point per method, each seed as a faint dot; the dashed line: ``floor`` (the majority
    class's error, a fraction). The frontier is the lower-left envelope: no method both trains
    fewer parameters and errs less than a point on it. ``not_trained``: methods whose runs were
    not shown to beat their untrained start (the verdict "did not train"), drawn hollow and left
    out of the envelope. The legend stands outside the axes, clear of every point."""
    g = table.groupby(by, sort=False)
    err = 100 * g["test_error"].agg(["mean", "std"]).fillna(0.0)
    pct = g["trained_pct"].mean()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(8.6, 4.4))
    for i, name in enumerate(err.index):
        c = colors[i % len(colors)]
        hollow = name in not_trained
        seeds = table[table[by] == name]
        ax.scatter(seeds["trained_pct"], 100 * seeds["test_error"], s=12, color=c, alpha=0.35)
        ax.errorbar(pct[name], err.loc[name, "mean"], yerr=err.loc[name, "std"], fmt="o", ms=7,
                    capsize=3, color=c, mfc="white" if hollow else c,
                    label=f"{name} (did not train)" if hollow else name)
        ax.annotate(name, (pct[name], err.loc[name, "mean"]), textcoords="offset points",
                    xytext=(6, 5), fontsize=8, color=c)
    keep = [n for n in err.index if n not in not_trained]
    order = np.argsort(pct[keep].to_numpy())
    best, xs, ys = np.inf, [], []
    for j in order:  # the envelope: each point that errs less than every point left of it
        if err.loc[keep, "mean"].iloc[j] < best:
            best = err.loc[keep, "mean"].iloc[j]
            xs.append(pct[keep].iloc[j])
            ys.append(best)
    ax.step(xs, ys, where="post", color="0.6", lw=1, zorder=0, label="frontier")
    if floor is not None:
        ax.axhline(100 * floor, ls="--", color="0.4", lw=1, label="majority class")
    ax.set(xscale="log", xlabel="% of parameters trained (log scale)", ylabel="test error (%)",
           title=title)
    ax.margins(x=0.12)  # room for the right-most method's name inside the axes
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def plot_dev_curves(curves: pd.DataFrame, *, floor: float | None = None,
                    title: str = "dev error during training") -> plt.Figure:
    """Dev error (%) against the optimizer step, one colour per method: each seed's run as a thin
    line, their mean as a thick one with its points (``curves``: ``peft_frontier.dev_curves``).
    A curve still falling at the last step says the budget, not the method, ended the run.
    ``floor``: the majority class's error (a fraction), dashed."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(8.6, 4.4))
    for i, (name, g) in enumerate(curves.groupby("method", sort=False)):
        c = colors[i % len(colors)]
        for _, run in g.groupby("seed"):
            ax.plot(run["step"], 100 * run["dev_error"], color=c, lw=0.8, alpha=0.35)
        mean = g.groupby("step")["dev_error"].mean()
        ax.plot(mean.index, 100 * mean.to_numpy(), "o-", color=c, lw=2, ms=4, label=name)
    if floor is not None:
        ax.axhline(100 * floor, ls="--", color="0.4", lw=1, label="majority class")
    ax.set(xlabel="optimizer step", ylabel="dev error (%)", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def plot_costs(costs: pd.DataFrame) -> plt.Figure:
    """Per method: seconds per training step, peak memory of a few steps, and the adapter's size
    on disk (log scale: a LoRA file is KiB, the trained encoder MiB). ``costs``: indexed by
    method, with the columns of ``peft_frontier.check_and_cost``."""
    panels = [("s / step", "seconds per step", False), ("peak memory (MiB)", "peak memory (MiB)", False),
              ("checkpoint (KiB)", "checkpoint on disk (KiB, log)", True)]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.45 * len(costs) + 1.6), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (column, label, log) in zip(axes, panels):
        values = costs[column].astype(float)
        ax.barh(range(len(values)), values, color=[colors[i % len(colors)] for i in range(len(values))])
        ax.set(xlabel=label, xscale="log" if log else "linear")
        ax.set_yticks(range(len(values)), costs.index, fontsize=8)
    axes[0].invert_yaxis()
    fig.tight_layout()
    return fig
