"""Figures of notebooks 10 (probing), 11 (amnesic probing) and 12 (adversarial heads).

Each function returns its matplotlib Figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

DEPTH_LABEL = "relative depth (layer / L: 0 = embeddings, 1 = last block)"


def relative_depth(table: pd.DataFrame) -> pd.Series:
    """Each row's layer divided by its model's number of blocks L (the largest layer probed for
    that model: ``probing.spread_layers`` always keeps the last), so a 4-block and a 30-block model
    share one 0–1 axis. Layers are numbered 0 = embeddings, ℓ = block ℓ."""
    top = table.groupby("model")["layer"].transform("max").clip(lower=1)
    return table["layer"] / top


def plot_probe_layers(table: pd.DataFrame, props: Sequence[str] = ("upos", "deprel")) -> plt.Figure:
    """Probe accuracy by layer, one line per model, one panel per property, against relative
    depth (:func:`relative_depth`; each model's L in its legend entry).

    ``table`` has columns model, property, layer, accuracy, majority (and optionally
    control_accuracy, drawn dotted in the same colour).
    """
    fig, axes = plt.subplots(1, len(props), figsize=(5.6 * len(props), 3.8), squeeze=False)
    for ax, prop in zip(axes[0], props):
        part = table[table["property"] == prop]
        depth = relative_depth(part)
        for model, rows in part.groupby("model", sort=False):
            label = f"{model} (L = {int(rows['layer'].max())})"
            line, = ax.plot(depth[rows.index], rows["accuracy"], marker="o", label=label)
            if "control_accuracy" in rows:
                ax.plot(depth[rows.index], rows["control_accuracy"], ":", marker=".",
                        color=line.get_color())
        ax.axhline(part["majority"].iloc[0], color="grey", lw=1, ls="--", label="majority class")
        ax.set(xlabel=DEPTH_LABEL, ylabel="test accuracy", ylim=(0, 1), xlim=(-0.03, 1.03),
               title=f"{prop}: probe (solid) and control task (dotted)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_selectivity(table: pd.DataFrame, props: Sequence[str] = ("upos", "deprel")) -> plt.Figure:
    """Selectivity (probe − control accuracy) by relative depth, one line per model and property."""
    fig, axes = plt.subplots(1, len(props), figsize=(5.6 * len(props), 3.4), squeeze=False)
    for ax, prop in zip(axes[0], props):
        part = table[table["property"] == prop]
        depth = relative_depth(part)
        for model, rows in part.groupby("model", sort=False):
            ax.plot(depth[rows.index], rows["selectivity"], marker="o",
                    label=f"{model} (L = {int(rows['layer'].max())})")
        ax.axhline(0, color="grey", lw=1)
        ax.set(xlabel=DEPTH_LABEL, ylabel="probe − control accuracy", xlim=(-0.03, 1.03),
               title=f"{prop}: selectivity (below 0: the control task is easier)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_attention(
    maps: Sequence, tokens: Sequence[str], layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
) -> plt.Figure:
    """Attention weights (rows: query token, columns: key token) for chosen layers × heads.

    ``maps`` is :func:`tutorial_lib.methods.probing.probing.attention_maps` for a batch of one sentence.
    """
    layers = list(layers if layers is not None else range(len(maps)))
    heads = list(heads if heads is not None else range(maps[0].shape[1]))
    n = len(tokens)
    size = 2.3 if n <= 16 else 2.9  # room for a label per token
    fig, axes = plt.subplots(len(layers), len(heads), squeeze=False, sharex=True, sharey=True,
                             figsize=(size * len(heads) + 1.2, size * len(layers) + 1.0))
    ticks = list(range(n)) if n <= 32 else []
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(np.asarray(maps[layer][0, head, :n, :n]), cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"layer {layer + 1} · head {head}", fontsize=8)
            ax.set_xticks(ticks, [tokens[i] for i in ticks], rotation=90, fontsize=5.5)
            ax.set_yticks(ticks, [tokens[i] for i in ticks], fontsize=5.5)
            # token names once: rows on the left column, columns under the bottom row
            ax.tick_params(labelleft=c == 0, labelbottom=r == len(layers) - 1, length=0)
    axes[-1][0].set_xlabel("key (attended to)", fontsize=8)
    axes[-1][0].set_ylabel("query", fontsize=8)
    fig.tight_layout()
    return fig


def plot_projection_2d(
    points: np.ndarray, labels: np.ndarray, names: Sequence[str], top: int = 8,
    title: str = "PCA of token representations",
) -> plt.Figure:
    """2-D scatter coloured by label; only the ``top`` most frequent labels get a colour."""
    fig, ax = plt.subplots(figsize=(6.2, 4.8))
    values, counts = np.unique(labels, return_counts=True)
    shown = values[np.argsort(-counts)][:top]
    rest = ~np.isin(labels, shown)
    ax.scatter(points[rest, 0], points[rest, 1], s=4, color="lightgrey", label="other")
    cmap = plt.get_cmap("tab10")
    for i, v in enumerate(shown):
        sel = labels == v
        ax.scatter(points[sel, 0], points[sel, 1], s=5, color=cmap(i % 10), label=names[v])
    ax.set(xlabel="PC 1", ylabel="PC 2", title=title)
    ax.legend(fontsize=7, markerscale=3, loc="best")
    fig.tight_layout()
    return fig


def plot_inlp_curves(curves: Mapping[str, tuple[Sequence[float], float, int]]) -> plt.Figure:
    """Held-out probe accuracy after each INLP iteration, one line per property.

    ``curves`` maps a property to (accuracies, majority rate, directions removed in all); the
    majority rate is dashed. The x axis counts iterations; the legend gives the directions.
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for name, (accs, majority, directions) in curves.items():
        line, = ax.plot(range(len(accs)), accs, marker="o",
                        label=f"{name} ({directions} directions removed in all)")
        ax.axhline(majority, color=line.get_color(), ls="--", lw=1)
    ax.set(xlabel="INLP iteration", ylabel="held-out probe accuracy", ylim=(0, 1),
           title="INLP: train a probe, project out its directions, repeat (dashed: majority)")
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def plot_amnesic_bars(table: pd.DataFrame, metric: str = "lm_accuracy",
                      title: str = "LM prediction after a projection",
                      xlabel: str | None = None) -> plt.Figure:
    """One horizontal bar per projection group (mean ± std over the group's rows: seeds), with the
    number of directions removed in its label.

    ``table`` has columns group, directions and ``metric`` (one row per seed for random groups).
    ``xlabel``: the axis label (default: the column name in words).
    """
    g = table.groupby("group", sort=False)
    mean, std = g[metric].mean(), g[metric].std(ddof=1).fillna(0.0)
    dirs, n = g["directions"].first(), g[metric].count()
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(mean) + 1.4))
    colors = ["grey" if "random" in k or "none" in k else "tab:red" for k in mean.index]
    ax.barh(range(len(mean)), mean.values, xerr=std.values, capsize=4, color=colors)
    ax.set_yticks(range(len(mean)), [f"{k} ({d} dirs, n={c})" for k, d, c in zip(mean.index, dirs, n)],
                  fontsize=9)
    ax.invert_yaxis()
    ax.set(xlabel=xlabel or metric.replace("_", " "), title=title)
    fig.tight_layout()
    return fig


def plot_arms(table: pd.DataFrame, majority: float, original: float) -> plt.Figure:
    """Notebook 12's intermediate stages, one row per arm: the fresh UPOS probe's accuracy (left;
    dashed: the majority rate, dotted: the original encoder's probe) and linear CKA to the
    original encoder (right; 1 = unchanged up to rotation and scale). ``table``: columns arm,
    fresh_probe, cka."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 0.5 * len(table) + 1.6), sharey=True)
    y = range(len(table))
    left.barh(y, table["fresh_probe"], color="tab:blue")
    left.axvline(majority, color="black", ls="--", lw=1, label=f"majority {majority:.2f}")
    left.axvline(original, color="grey", ls=":", lw=1.5, label=f"original encoder {original:.2f}")
    left.set(xlim=(0, 1), xlabel="fresh linear UPOS probe (test accuracy)")
    left.set_yticks(list(y), table["arm"])
    left.invert_yaxis()
    left.legend(fontsize=8, loc="lower right")
    right.barh(y, table["cka"], color="tab:orange")
    right.set(xlim=(0, 1.05), xlabel="linear CKA to the original encoder")
    fig.suptitle("What each intermediate stage did to the encoder", fontsize=11)
    fig.tight_layout()
    return fig


def plot_arm_curves(curves: pd.DataFrame, floors: Mapping[str, float]) -> plt.Figure:
    """Dev accuracy while fine-tuning on each target from each arm's encoder: one panel per
    target, one line per arm (mean over seeds, the band ± one std); dashed: the target's majority
    rate. ``curves``: columns target, arm, seed, epoch, accuracy."""
    targets = list(dict.fromkeys(curves["target"]))
    fig, axes = plt.subplots(1, len(targets), figsize=(5.2 * len(targets), 3.8), squeeze=False)
    for ax, target in zip(axes[0], targets):
        part = curves[curves["target"] == target]
        for arm, g in part.groupby("arm", sort=False):
            stats = g.groupby("epoch")["accuracy"].agg(["mean", "std"]).fillna(0.0)
            line, = ax.plot(stats.index, stats["mean"], marker="o", ms=3, label=arm)
            ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"],
                            color=line.get_color(), alpha=0.15)
        ax.axhline(floors[target], color="black", ls="--", lw=1)
        ax.set(title=target, xlabel="epoch", ylabel="dev accuracy", ylim=(0, 1))
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig
