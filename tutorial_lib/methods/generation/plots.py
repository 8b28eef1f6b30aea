"""Figures of notebook 16: decoding strategies, and the persona chatbot's Hits@1 and perplexity."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_decoding(summary: pd.DataFrame, reference: str = "human (the real continuation)") -> plt.Figure:
    """One bar per strategy (rows of ``summary``) with its 95 % interval over prompts: repetition
    and self-perplexity (columns ``<metric>``, ``<metric> low``, ``<metric> high``); the
    ``reference`` row as a dashed line."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, metric, label in zip(axes, ("repetition", "self-perplexity"),
                                 ("share of repeated n-grams", "the model's perplexity of its own text")):
        rows = summary.drop(index=reference, errors="ignore")
        y = np.arange(len(rows))
        err = np.vstack([rows[metric] - rows[f"{metric} low"], rows[f"{metric} high"] - rows[metric]])
        ax.barh(y, rows[metric], xerr=err, color="tab:blue", alpha=0.8, capsize=3)
        ax.set_yticks(y, rows.index)
        ax.invert_yaxis()
        if reference in summary.index:
            ax.axvline(summary.loc[reference, metric], color="k", ls="--", label="human text")
            ax.legend(loc="lower right")
        ax.set_xlabel(label)
        if metric == "self-perplexity":
            ax.set_xscale("log")
    fig.suptitle("Decoding strategies: mean over prompts with 95 % intervals")
    fig.tight_layout()
    return fig


def plot_dialogue(runs: pd.DataFrame, chance: float) -> plt.Figure:
    """Hits@1 and reply perplexity per (input, method): the mean as a bar, each seed as a dot;
    chance (1/N) as a dashed line."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    groups = list(runs.groupby(["input", "method"], sort=False))
    labels = ("Hits@1", "perplexity of the gold reply")
    for ax, metric, label in zip(axes, ("hits_at_1", "reply_ppl"), labels):
        for i, ((_, method), g) in enumerate(groups):
            color = "tab:orange" if method == "fine-tuned" else "tab:gray"
            ax.bar(i, g[metric].mean(), color=color, alpha=0.7)
            ax.plot(np.full(len(g), i), g[metric], "k.", ms=6)
        ax.set_xticks(range(len(groups)), [f"{m}\n{inp}" for (inp, m), _ in groups], fontsize=8)
        ax.set_ylabel(label)
        if metric == "hits_at_1":
            ax.axhline(chance, color="k", ls="--", label=f"chance (1/{round(1 / chance)})")
            ax.legend(loc="upper left")
    fig.suptitle("TransferTransfo on ConvAI2 (test turns; dots: seeds)")
    fig.tight_layout()
    return fig
