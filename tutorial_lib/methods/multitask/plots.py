"""Figures of the multi-task notebooks 06 (multi-task, sequential) and 07 (GradTS)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch


def plot_sampling(probabilities: Mapping[str, Mapping[str, float]]) -> plt.Figure:
    """Each strategy's task probabilities as grouped bars (strategy → task → p)."""
    frame = pd.DataFrame(probabilities)  # rows: tasks, columns: strategies
    fig, ax = plt.subplots(figsize=(7, 3.2))
    frame.plot.bar(ax=ax, rot=0)
    ax.set(ylabel="probability of a step", title="which task a step trains on")
    ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    fig.tight_layout()
    return fig


def plot_task_scores(stats: pd.DataFrame, baseline: str = "single-task",
                     majority: Mapping[str, float] | None = None, runs: pd.DataFrame | None = None,
                     column: str = "test_score") -> plt.Figure:
    """Mean ± std test score (%) per task (x) and setting (bars), from ``stats.summarize`` over
    (task, setting) of a score in [0, 1]; dashed: ``majority[task]`` (%), the majority-class score.
    ``runs``: the runs table (``task``, ``setting``, ``column``): each seed's score as a dot on its
    bar, so three seeds are seen, not only their mean."""
    tasks = list(dict.fromkeys(stats.index.get_level_values(0)))
    settings = list(dict.fromkeys(stats.index.get_level_values(1)))
    settings = [baseline] + [s for s in settings if s != baseline] if baseline in settings else settings
    width = 0.8 / len(settings)
    fig, ax = plt.subplots(figsize=(4 + 1.7 * len(tasks) * max(1.0, len(settings) / 4), 3.8))
    for i, setting in enumerate(settings):
        xs, means, stds = [], [], []
        for j, task in enumerate(tasks):
            if (task, setting) in stats.index:
                row = stats.loc[(task, setting)]
                xs.append(j + (i - (len(settings) - 1) / 2) * width)
                means.append(100 * row["mean"])
                stds.append(100 * row["std"])
                if runs is not None:
                    seeds = runs[(runs["task"] == task) & (runs["setting"] == setting)][column]
                    jitter = np.linspace(-0.25, 0.25, len(seeds)) * width if len(seeds) > 1 else [0.0]
                    ax.scatter(xs[-1] + np.asarray(jitter), 100 * seeds.to_numpy(), s=12, zorder=3,
                               color="black", alpha=0.7, label="one seed" if i == j == 0 else None)
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=setting, alpha=0.85)
    for j, task in enumerate(tasks):
        if majority and task in majority:
            ax.hlines(majority[task], j - 0.45, j + 0.45, colors="black", linestyles="--",
                      label="majority class" if j == 0 else None)
    ax.set_xticks(range(len(tasks)), tasks)
    title = "test score, mean ± std over seeds" + ("; dots: the seeds" if runs is not None else "")
    ax.set(ylabel="test score (%)", title=title)
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def plot_task_losses(losses: Sequence[tuple[int, str, float]], window: int = 10,
                     chance: float | None = None) -> plt.Figure:
    """Training loss of each task in one multi-task run (moving average over the task's own
    steps), against the task's own step count — comparable with a single-task run's S steps.
    ``chance``: a dashed line at the loss of a uniform guess (ln 2 for two classes)."""
    frame = pd.DataFrame(losses, columns=["step", "task", "loss"])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for task, g in frame.groupby("task", sort=False):
        ax.plot(np.arange(1, len(g) + 1), g["loss"].rolling(window, min_periods=1).mean(),
                label=task)
    if chance is not None:
        ax.axhline(chance, color="grey", ls="--", lw=1, label=f"uniform guess ({chance:.2f})")
    ax.set(xlabel="the task's own training steps",
           ylabel=f"training loss (moving avg, {window} steps)",
           title="one multi-task run: each task's loss")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_learning_curves(curves: pd.DataFrame, floor: float | None = None,
                         task: str | None = None) -> plt.Figure:
    """Dev score against the task's own training steps, one line per setting (its mean over
    seeds; each seed a dot), from :func:`tutorial_lib.methods.multitask.multitask.curves`. ``floor``: a
    dashed line at the dev split's trivial score (its majority rate)."""
    frame = curves if task is None else curves[curves["task"] == task]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, (setting, g) in enumerate(frame.groupby("setting", sort=False)):
        mean = g.groupby("step")["dev_score"].mean()
        ax.plot(mean.index, 100 * mean.values, marker="o", color=f"C{i}", label=setting)
        ax.scatter(g["step"], 100 * g["dev_score"], color=f"C{i}", s=10, alpha=0.5)
    if floor is not None:
        ax.axhline(100 * floor, color="grey", ls="--", lw=1, label=f"majority class ({100 * floor:.1f})")
    ax.set(xlabel=f"{task or 'the task'}'s own training steps", ylabel="dev score (%)",
           title=f"{task or 'target'}: dev score during training (mean; dots: seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_head_importance(matrices: Mapping[str, torch.Tensor], cols: int = 5) -> plt.Figure:
    """One heatmap per task: layer (rows, bottom = first) × head, normalised importance."""
    names = list(matrices)
    rows = int(np.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.8 * cols + 1.2, 2.4 * rows), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for i, (ax, name) in enumerate(zip(axes.flat, names)):
        m = matrices[name].detach().cpu().numpy()
        im = ax.imshow(m, origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_title(name, fontsize=10)
        step = max(1, m.shape[1] // 6)  # 12 heads: ticks 0, 2, 4, ... stay readable
        ax.set_xticks(range(0, m.shape[1], step))
        ax.set_yticks(range(m.shape[0]))
        ax.tick_params(labelsize=8, labelbottom=True)
        if i // cols == rows - 1 or i + cols >= len(names):  # bottom panel of its column
            ax.set_xlabel("head", fontsize=9)
        if i % cols == 0:
            ax.set_ylabel("layer", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.8, label="importance (min–max)")
    return fig


def plot_task_correlation(corr: pd.DataFrame) -> plt.Figure:
    """Kendall τ between the tasks' head-importance matrices."""
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    im = ax.imshow(corr.to_numpy(), vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(corr)), corr.columns, rotation=45, ha="right")
    ax.set_yticks(range(len(corr)), corr.index)
    for i in range(len(corr)):
        for j in range(len(corr)):
            ax.text(j, i, f"{corr.iat[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="Kendall τ")
    ax.set_title("task correlation of head importance")
    fig.tight_layout()
    return fig


def plot_instance_tau(taus: Mapping[str, np.ndarray], cutoffs: Mapping[str, float]) -> plt.Figure:
    """Histogram of instance-level τ with the main task, one panel per main task, with the
    selection threshold (GradTS-fg keeps the instances right of the line)."""
    names = list(taus)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 2.9), squeeze=False)
    for ax, name in zip(axes[0], names):
        ax.hist(np.asarray(taus[name]), bins=30, color="tab:gray")
        ax.axvline(cutoffs[name], color="tab:red", label="threshold")
        ax.set(title=f"main task {name}", xlabel="τ(instance, main task)", ylabel="instances")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
