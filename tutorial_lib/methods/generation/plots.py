"""Figures of notebook 16: decoding strategies, the persona chatbot's training curves, and its
Hits@1 and perplexity."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D


def readable_log_axis(axis: object) -> None:
    """Major ticks at 1, 2 and 5 times each power of ten, written as plain numbers ("20", not
    "2×10¹"), and no labels on the minor ticks (where they collided)."""
    axis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(mticker.FuncFormatter(lambda x, _: f"{x:g}"))
    axis.set_minor_formatter(mticker.NullFormatter())


def plot_decoding(summary: pd.DataFrame, reference: str = "human (the real continuation)") -> plt.Figure:
    """One bar per strategy (rows of ``summary``) with its 95 % interval over prompts: repetition
    and self-perplexity (columns ``<metric>``, ``<metric> low``, ``<metric> high``; the intervals
    as the table gives them — a bootstrap keeps a share's inside [0, 1]); the ``reference`` row as
    a dashed line, named once below the panels (a legend inside sat on a bar)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, metric, label in zip(axes, ("repetition", "self-perplexity"),
                                 ("share of repeated n-grams", "the model's perplexity of its own text")):
        rows = summary.drop(index=reference, errors="ignore")
        y = np.arange(len(rows))
        err = np.vstack([rows[metric] - rows[f"{metric} low"], rows[f"{metric} high"] - rows[metric]])
        ax.barh(y, rows[metric], xerr=err.clip(min=0), color="tab:blue", alpha=0.8, capsize=3)
        ax.set_yticks(y, rows.index)
        ax.invert_yaxis()
        if reference in summary.index:
            ax.axvline(summary.loc[reference, metric], color="k", ls="--")
        ax.set_xlabel(label)
        if metric == "self-perplexity":
            ax.set_xscale("log")
            readable_log_axis(ax.xaxis)
    if reference in summary.index:
        fig.legend([Line2D([], [], color="k", ls="--")], [reference], loc="lower center", frameon=False)
    fig.suptitle("Decoding strategies: mean over prompts with 95 % intervals")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def plot_training(curves: pd.DataFrame, candidates: int) -> plt.Figure:
    """The dialogue fine-tuning's two losses per step (``curves``: columns ``input``, ``seed``,
    ``step``, ``lm``, ``mc``), one line per run, coloured by input; on the classification loss a
    dashed line at ln(``candidates``), the loss of a head that cannot tell the candidates apart."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    colors = dict(zip(curves["input"].unique(), ("tab:orange", "tab:blue", "tab:green")))
    for ax, part, label in zip(axes, ("lm", "mc"), ("LM loss on the gold reply (nats per token)",
                                                    "classification loss (nats)")):
        for (inp, seed), g in curves.groupby(["input", "seed"], sort=False):
            first = seed == curves[curves["input"] == inp]["seed"].iloc[0]
            ax.plot(g["step"], g[part], color=colors[inp], alpha=0.7, lw=1, label=inp if first else None)
        if part == "mc":
            ax.axhline(math.log(candidates), color="k", ls="--",
                       label=f"ln {candidates}: no better than chance")
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    fig.suptitle("TransferTransfo fine-tuning: each seed's losses per step")
    fig.tight_layout()
    return fig


COLORS = {"not fine-tuned": "tab:gray", "fine-tuned": "tab:orange"}


def plot_dialogue(runs: pd.DataFrame, chance: float) -> plt.Figure:
    """Hits@1 and reply perplexity per (input, method): the mean as a bar, each seed as a dot;
    chance (1/N) as a dashed line. A method without a perplexity of its own (NaN: a second ranking
    of a model already shown) is left out of the perplexity panel."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    labels = ("Hits@1", "perplexity of the gold reply")
    for ax, metric, label in zip(axes, ("hits_at_1", "reply_ppl"), labels):
        groups = [(k, g) for k, g in runs.groupby(["input", "method"], sort=False) if g[metric].notna().any()]
        for i, ((_, method), g) in enumerate(groups):
            ax.bar(i, g[metric].mean(), color=COLORS.get(method, "tab:green"), alpha=0.7)
            ax.plot(np.full(len(g), i), g[metric], "k.", ms=6)
        ax.set_xticks(range(len(groups)), [f"{m}\n{inp}".replace(" (", "\n(") for (inp, m), _ in groups],
                      fontsize=7)
        ax.set_ylabel(label)
        if metric == "hits_at_1":
            ax.axhline(chance, color="k", ls="--", label=f"chance (1/{round(1 / chance)})")
            ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("TransferTransfo on ConvAI2 (test turns; dots: seeds)")
    fig.tight_layout()
    return fig
