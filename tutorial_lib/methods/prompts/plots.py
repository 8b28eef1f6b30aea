"""Figures of the prompting notebook 09 (each function returns its Figure)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_methods_by_task(table: pd.DataFrame, chance: Mapping[str, float] | None = None,
                         zero_shot: Mapping[str, float] | None = None) -> plt.Figure:
    """Test accuracy (mean ± std over splits) per task, one bar per method; dashed: the majority
    class of the test set; dotted: the untrained prompt (zero-shot), when given."""
    g = table.groupby(["task", "method"], sort=False)["test_accuracy"]
    stats = 100 * g.agg(["mean", "std"]).fillna(0.0)
    tasks = list(dict.fromkeys(table["task"]))
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(1.9 * len(tasks) + 4, 3.6))
    for j, m in enumerate(methods):
        x = np.arange(len(tasks)) + (j - (len(methods) - 1) / 2) * width
        vals = [tuple(stats.loc[(t, m)]) if (t, m) in stats.index else (np.nan, 0) for t in tasks]
        ax.bar(x, [v[0] for v in vals], width, yerr=[v[1] for v in vals], capsize=3, label=m)
    for values, style, name in ((chance, "--", "majority class"), (zero_shot, ":", "zero-shot prompt")):
        for i, t in enumerate(tasks):
            if values is not None and t in values:
                ax.hlines(100 * values[t], i - 0.45, i + 0.45, colors="black", linestyles=style,
                          label=name if i == 0 else None)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_xlim(-0.6, len(tasks) - 0.4)
    ax.set_ylim(0, 100)
    ax.set(ylabel="test accuracy (%)", title="few-shot test accuracy (mean ± std over splits)")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
