"""Notebook 16's figures, checked by what they draw: readable log ticks, intervals that stay
inside a share's range, the reference named outside the bars, the loss curves' chance line, and a
second ranking of one model left out of the perplexity panel."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tutorial_lib.methods.generation import decoding, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def decoding_table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for name, share, ppl in (("human (the real continuation)", 0.003, 21.0), ("greedy", 0.06, 3.1),
                             ("beam (4)", 0.09, 2.4), ("nucleus 0.95", 0.005, 15.7)):
        reps = np.clip(rng.normal(share, 0.01, 20), 0, None)
        reps[: 15 if share < 0.01 else 0] = 0.0  # mostly zero: where a t-interval goes below 0
        rep = decoding.mean_interval(reps, "bootstrap")
        rows.append({"strategy": name, "repetition": rep.mean, "repetition low": rep.low,
                     "repetition high": rep.high, "self-perplexity": ppl,
                     "self-perplexity low": 0.8 * ppl, "self-perplexity high": 1.25 * ppl})
    return pd.DataFrame(rows).set_index("strategy")


def test_the_decoding_figure_has_readable_log_ticks_and_no_interval_below_zero():
    table = decoding_table()
    assert (table["repetition low"] >= 0).all()  # the bootstrap stays inside the share's range
    t_low = decoding.mean_interval([0.0] * 15 + [0.02, 0.0, 0.01, 0.0, 0.03], "t").low
    assert t_low < 0  # what the t-interval did
    fig = plots.plot_decoding(table)
    fig.canvas.draw()
    right = fig.axes[1].xaxis
    majors = [t.get_text() for t in right.get_ticklabels() if t.get_text()]
    assert majors and all("10^" not in m and "times" not in m and "\\" not in m for m in majors)
    assert set(majors) <= {"1", "2", "5", "10", "20", "50", "100"}
    assert not [t.get_text() for t in right.get_ticklabels(minor=True) if t.get_text()]
    assert not any(ax.get_legend() for ax in fig.axes)  # named once, outside the panels
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["human (the real continuation)"]


def curves() -> pd.DataFrame:
    return pd.DataFrame([{"input": inp, "seed": seed, "step": step, "lm": 3.5 - 0.02 * step,
                          "mc": math.log(4) + 0.01 * seed}
                         for inp in ("persona", "no persona") for seed in (0, 1) for step in range(1, 11)])


def test_the_training_curves_show_each_run_and_the_classification_losss_chance_level():
    fig = plots.plot_training(curves(), candidates=4)
    lm, mc = fig.axes
    assert len(lm.get_lines()) == 4  # 2 inputs x 2 seeds
    dashed = [line for line in mc.get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_ydata()[0] == pytest.approx(math.log(4))
    assert {t.get_text() for t in lm.get_legend().get_texts()} == {"persona", "no persona"}


def test_the_dialogue_figure_leaves_a_second_ranking_out_of_the_perplexity_panel():
    rows = []
    for inp in ("persona", "no persona"):
        for seed in (0, 1, 2):
            for method, hits, ppl in (("not fine-tuned", 0.2, 53.0), ("fine-tuned", 0.2, 33.0),
                                      ("fine-tuned (LM ranking)", 0.3, np.nan)):
                rows.append({"input": inp, "method": method, "seed": seed, "hits_at_1": hits,
                             "reply_ppl": ppl})
    fig = plots.plot_dialogue(pd.DataFrame(rows), 0.1)
    hits, ppl = fig.axes
    assert len(hits.patches) == 6 and len(ppl.patches) == 4
    assert all("LM ranking" not in t.get_text() for t in ppl.get_xticklabels())
