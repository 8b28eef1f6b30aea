"""06–07's figures: the test-score bars show every seed, not only the mean."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tutorial_lib import stats  # noqa: E402
from tutorial_lib.methods.multitask import plots  # noqa: E402


def test_task_scores_put_each_seed_on_its_bar():
    runs = pd.DataFrame([{"task": t, "setting": s, "seed": seed, "test_score": 0.5 + 0.1 * seed + d}
                         for t in ("sst2", "mr") for s, d in (("single-task", 0.0), ("multi", 0.05))
                         for seed in range(3)])
    summary = stats.summarize(runs, by=["task", "setting"], column="test_score", digits=1)
    fig = plots.plot_task_scores(summary, majority={"sst2": 51.0}, runs=runs)
    ax = fig.axes[0]
    dots = np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)])
    assert len(dots) == len(runs)
    assert sorted(np.round(dots[:, 1], 6)) == sorted(np.round(100 * runs["test_score"], 6))
    bars = [p for p in ax.patches]
    assert len(bars) == 4  # 2 tasks × 2 settings
    for bar in bars:  # each seed sits on its own bar
        inside = dots[(dots[:, 0] >= bar.get_x()) & (dots[:, 0] <= bar.get_x() + bar.get_width())]
        assert len(inside) == 3
    assert "one seed" in [t.get_text() for t in ax.get_legend().get_texts()]
    plain = plots.plot_task_scores(summary)
    assert not any(isinstance(c, PathCollection) for c in plain.axes[0].collections)  # no dots
    plt.close("all")
