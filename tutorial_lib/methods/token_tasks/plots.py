"""Figures of notebook 15: entity F1 per type and tier (NER), and QA F1 per tier, each seed a dot,
with the baselines that read no model; the runs' dev curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_token_tasks(ner: pd.DataFrame, types: Sequence[str], ner_baselines: Mapping[str, Mapping],
                     qa: pd.DataFrame, qa_baselines: Mapping[str, float]) -> plt.Figure:
    """Left: entity F1 (columns ``f1`` and ``F1 <type>`` of the ``ner`` runs, one row per
    ``method`` and seed) per type, a group of bars per column, one bar per tier (its mean; dots:
    seeds), and each ``ner_baselines`` entry's scores (``f1`` and ``per_type``) as an outlined
    bar. Right: QA F1 per tier (mean, dots: seeds) with ``qa_baselines`` (name → F1) as lines."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [2.2, 1]},
                                      layout="constrained")
    columns = ["f1", *types]
    tiers = list(dict.fromkeys(ner["method"]))
    width = 0.8 / (len(tiers) + len(ner_baselines))
    x = np.arange(len(columns))
    for k, tier in enumerate(tiers):
        g = ner[ner["method"] == tier]
        left.bar(x + k * width, [g[c].mean() for c in columns], width, label=tier, alpha=0.8)
        for j, c in enumerate(columns):
            left.plot(np.full(len(g), x[j] + k * width), g[c], "k.", ms=5)
    for k, (name, scores) in enumerate(ner_baselines.items(), start=len(tiers)):
        values = [scores["f1"], *(scores["per_type"].get(t[3:], {"f1": 0.0})["f1"] for t in types)]
        left.bar(x + k * width, values, width, label=name, fill=False, hatch="//", edgecolor="0.4")
    left.set_xticks(x + width * (len(tiers) + len(ner_baselines) - 1) / 2,
                    ["all types", *(t[3:] for t in types)])
    left.set_ylabel("entity F1 (seqeval, strict IOB2)")
    left.set_title("CoNLL-2003 NER")
    left.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    qa_tiers = list(dict.fromkeys(qa["method"]))
    for i, tier in enumerate(qa_tiers):
        g = qa[qa["method"] == tier]
        right.bar(i, g["f1"].mean(), 0.6, alpha=0.8, color=f"C{tiers.index(tier) if tier in tiers else i}")
        right.plot(np.full(len(g), i), g["f1"], "k.", ms=6)
    for (name, value), style in zip(qa_baselines.items(), ("--", ":", "-.")):
        right.axhline(value, color="0.3", ls=style, label=name)
    right.set_xticks(range(len(qa_tiers)), qa_tiers)
    right.set_ylabel("SQuAD F1")
    right.set_title("SQuAD v1.1 extractive QA")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12))  # below: over no bar
    return fig


def plot_dev_curves(runs: Mapping[str, Sequence[Any]], metric: str, baselines: Mapping[str, float], *,
                    title: str, ylabel: str, colours: Sequence[str] = ()) -> plt.Figure:
    """A dev metric during training, from each run's ``history.evals`` (rows with ``epoch`` and
    ``metric``): per tier (``runs``: name → its runs, one per seed) every seed a thin line and the
    mean over seeds a thick one with markers; ``baselines`` (name → value on the same dev set) as
    grey horizontal lines. Tiers without evaluations are left out. ``colours``: the tiers in the
    order that gives their colours (``C0``, ``C1`` …; default: ``runs``' order), so that a tier
    keeps its colour from figure to figure."""
    order = list(colours) or list(runs)
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    for name, tier_runs in runs.items():
        k = order.index(name) if name in order else len(order) + list(runs).index(name)
        frames = [pd.DataFrame(r.history.evals) for r in tier_runs if r.history.evals]
        if not frames:
            continue
        table = pd.concat([f.set_index("epoch")[metric] for f in frames], axis=1, keys=range(len(frames)))
        for column in table:
            ax.plot(table.index, table[column], color=f"C{k}", lw=0.8, alpha=0.5)
        ax.plot(table.index, table.mean(axis=1), "o-", color=f"C{k}", lw=2,
                label=f"{name} (mean of {table.shape[1]} seed{'s' * (table.shape[1] > 1)})")
    for (name, value), style in zip(baselines.items(), ("--", ":", "-.")):
        ax.axhline(value, color="0.3", ls=style, label=name)
    ax.set(xlabel="epoch", ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
