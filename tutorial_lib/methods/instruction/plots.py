"""Figures of notebook 17: instruction tuning's losses and held-out accuracies, and preference
optimisation's losses, rewards and Hits@1."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

COLORS = ("tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:purple")


def _curves(ax: plt.Axes, curves: pd.DataFrame, column: str, colors: Mapping[str, str]) -> None:
    """One line per (arm, seed) of ``curves`` (columns ``arm``, ``seed``, ``step``, ``column``),
    each arm named once in the legend."""
    for (arm, seed), g in curves.groupby(["arm", "seed"], sort=False):
        first = seed == curves[curves["arm"] == arm]["seed"].iloc[0]
        ax.plot(g["step"], g[column], color=colors[arm], alpha=0.7, lw=1, label=arm if first else None)
    ax.set_xlabel("training step")


def _dots(ax: plt.Axes, runs: pd.DataFrame, column: str, methods: list[str],
          colors: Mapping[str, str]) -> None:
    """Each method's mean as a bar and each seed as a dot (jittered sideways so that equal seeds
    stay visible)."""
    rng = np.random.default_rng(0)
    for i, method in enumerate(methods):
        values = runs.loc[runs["method"] == method, column].to_numpy(dtype=float)
        ax.bar(i, values.mean(), color=colors[method], alpha=0.35, width=0.7)
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(values)), values, color=colors[method], s=18,
                   zorder=3)
    ax.set_xticks(range(len(methods)), [textwrap.fill(m, 14) for m in methods], fontsize=8)


def plot_instruction(runs: pd.DataFrame, curves: pd.DataFrame, floors: Mapping[str, float],
                     seen: Sequence[str] = ()) -> plt.Figure:
    """Left: each SFT run's loss on the response tokens per step (``curves``: ``arm``, ``seed``,
    ``step``, ``loss``). Right, one panel per task: zero-shot accuracy per method (``runs``:
    ``method``, ``seed``, ``task``, ``accuracy``), the majority floor (``floors``: task → mean
    floor) dashed; the tasks in ``seen`` (trained on) are marked."""
    tasks = list(runs["task"].unique())
    methods = list(runs["method"].unique())
    colors = dict(zip(methods, COLORS))
    fig, axes = plt.subplots(1, 1 + len(tasks), figsize=(4 + 2.8 * len(tasks), 3.8),
                             gridspec_kw={"width_ratios": [1.4] + [1] * len(tasks)})
    _curves(axes[0], curves, "loss", colors)
    axes[0].set_ylabel("loss on the response (nats per token)")
    axes[0].legend(fontsize=8)
    for ax, task in zip(axes[1:], tasks):
        _dots(ax, runs[runs["task"] == task], "accuracy", methods, colors)
        ax.axhline(floors[task], color="k", ls="--", lw=1)
        ax.set_title(f"{task} ({'seen type' if task in seen else 'held out'}; dashed: floor)", fontsize=9)
        ax.set_ylim(0, 1)
    axes[1].set_ylabel("zero-shot accuracy")
    fig.suptitle("Instruction tuning: the SFT losses, and zero-shot accuracy per task "
                 "(bar: mean; dots: seeds)")
    fig.tight_layout()
    return fig


def plot_preferences(runs: pd.DataFrame, curves: pd.DataFrame, candidates: int) -> plt.Figure:
    """Left: DPO's loss per step with ln 2 (the loss at the start) dashed; middle: its reward
    accuracy (the share of pairs whose chosen reply's implicit reward is above the rejected's);
    right: Hits@1 per method (``runs``: ``method``, ``seed``, ``hits_at_1``), chance (1/N)
    dashed. ``curves``: ``arm``, ``seed``, ``step``, ``loss``, ``reward accuracy``."""
    methods = list(runs["method"].unique())
    colors = dict(zip(methods, COLORS))
    dpo = curves[curves["arm"] == "DPO"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1, 1, 1.4]})
    _curves(axes[0], dpo, "loss", {"DPO": "tab:green"})
    axes[0].axhline(math.log(2), color="k", ls="--", lw=1, label="ln 2: the start")
    axes[0].set_ylabel("DPO loss")
    axes[0].legend(fontsize=8)
    _curves(axes[1], dpo, "reward accuracy", {"DPO": "tab:green"})
    axes[1].set_ylabel("reward accuracy of the batch")
    axes[1].set_ylim(-0.05, 1.05)
    _dots(axes[2], runs, "hits_at_1", methods, colors)
    axes[2].axhline(1 / candidates, color="k", ls="--", lw=1)
    axes[2].set_ylabel(f"Hits@1 (dashed: chance, 1/{candidates})")
    axes[2].set_ylim(0, 1)
    fig.suptitle("Preference optimisation on ConvAI2: DPO's training, and Hits@1 by each model's own score")
    fig.tight_layout()
    return fig
