"""The figures issue 21 found misleading, checked by what they draw (labels, texts, data)."""

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

from tutorial_lib import figures, plots, stats  # noqa: E402
from tutorial_lib.methods.adaptation import plots as adaptation
from tutorial_lib.methods.forgetting import plots as forgetting_plots
from tutorial_lib.methods.generation import decoding
from tutorial_lib.methods.generation import plots as generation
from tutorial_lib.methods.multitask import plots as multitask
from tutorial_lib.methods.peft import plots as peft
from tutorial_lib.methods.probing import plots as probing
from tutorial_lib.methods.tdt import plots as tdt  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def cost_table() -> pd.DataFrame:
    """03's design: full fine-tuning reused from the run cache (no memory, another run's time)."""
    rows = []
    for method, pct, cached, peak in (("full fine-tuning", 48.0, True, np.nan),
                                      ("adapters m=8", 0.4, False, 426.0)):
        for seed in range(3):
            rows.append({"method": method, "seed": seed, "test_error": 0.04 + 0.01 * seed,
                         "trained_pct": pct, "seconds_per_epoch": 30.0 + seed, "cached": cached,
                         "peak_mib": peak + seed})
    rows.append({"method": "features: top layer", "seed": 0, "test_error": 0.26, "trained_pct": 0.01,
                 "seconds_per_epoch": 0.1, "peak_mib": 465.0})  # no "cached" column: NaN
    return pd.DataFrame(rows)


def test_cost_panels_say_not_measured_instead_of_an_empty_bar():
    fig = adaptation.plot_cost_vs_error(cost_table())
    _, time_ax, memory_ax = fig.axes
    for ax in (time_ax, memory_ax):
        assert [t.get_text() for t in ax.texts] == [adaptation.NOT_MEASURED]  # full FT only
        widths = [p.get_width() for p in ax.patches]
        assert widths[0] == 0 and widths[1] > 0 and widths[2] > 0
    assert time_ax.get_xlabel().startswith("seconds / epoch — mean")
    assert memory_ax.get_xlabel().startswith("peak memory (MiB) — median")
    assert memory_ax.patches[1].get_width() == pytest.approx(427.0)  # median of 426, 427, 428


def test_schedules_have_a_zoomed_tail_with_a_zero_line():
    values = list(np.linspace(1e-4, -2e-6, 158))
    fig = adaptation.plot_schedules({"STLR, Eq. 3 as printed": values})
    (main,) = fig.axes
    (inset,) = main.child_axes
    assert inset.get_title() == "last 20 iterations (zoom)"
    line = inset.get_lines()[0]
    assert list(line.get_xdata()) == list(range(139, 159))
    assert line.get_ydata()[-1] == pytest.approx(-2e-6)
    assert any(list(ln.get_ydata()) == [0.0, 0.0] for ln in inset.get_lines())
    assert not adaptation.plot_schedules({"a": values}, tail=None).axes[0].child_axes


def probe_table() -> pd.DataFrame:
    rows = []
    for model, layers in (("ours", range(5)), ("smollm2", (0, 4, 9, 15, 20, 25, 30))):
        for layer in layers:
            rows.append({"model": model, "property": "upos", "layer": layer, "accuracy": 0.5,
                         "control_accuracy": 0.4, "selectivity": 0.1, "majority": 0.17})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("plot", [probing.plot_probe_layers, probing.plot_selectivity])
def test_probe_figures_use_relative_depth(plot):
    fig = plot(probe_table(), props=("upos",))
    ax = fig.axes[0]
    assert ax.get_xlabel() == probing.DEPTH_LABEL
    lines = [ln for ln in ax.get_lines() if ln.get_label() in ("ours (L = 4)", "smollm2 (L = 30)")]
    assert len(lines) == 2
    for ln in lines:  # every model spans 0 … 1
        assert min(ln.get_xdata()) == 0 and max(ln.get_xdata()) == pytest.approx(1.0)
    ours = next(ln for ln in lines if ln.get_label().startswith("ours"))
    assert list(ours.get_xdata()) == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])


def test_a_wrapped_example_has_its_label_on_its_first_row():
    long = [(f"tok{i}", 0.3 + 0.01 * i) for i in range(40)]
    fig = tdt.plot_token_confidences([long, [("short", 0.5)]], titles=["negative", "positive"],
                                     width=4.0)
    labels = [t for t in fig.axes[0].texts if t.get_ha() == "right"]
    rows = {t.get_text(): [] for t in labels}
    for t in labels:
        rows[t.get_text()].append(t.get_position()[1])
    assert rows["negative"] == [0] and min(rows["↳"]) == 1  # first row, then its continuations
    assert rows["positive"] == [max(rows["↳"]) + 1]


def test_the_frontier_is_the_lower_left_envelope_on_a_log_axis():
    runs = pd.DataFrame({"method": ["full", "full", "lora", "lora", "prompt", "prompt"],
                         "seed": [0, 1] * 3, "trained_pct": [50, 50, 0.5, 0.5, 0.01, 0.01],
                         "test_error": [0.05, 0.07, 0.06, 0.08, 0.5, 0.6]})
    fig = peft.plot_frontier(runs, floor=0.8)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    step = next(line for line in ax.get_lines() if line.get_label() == "frontier")
    # prompt (0.01 %, 55 %), then LoRA (0.5 %, 7 %), then full (50 %, 6 %): each errs less
    assert list(step.get_xdata()) == [0.01, 0.5, 50] and list(step.get_ydata()) == pytest.approx([55, 7, 6])


def test_a_method_that_did_not_train_is_hollow_and_off_the_envelope_and_the_legend_is_outside():
    runs = pd.DataFrame({"method": ["full", "full", "lora", "lora", "prompt", "prompt"],
                         "seed": [0, 1] * 3, "trained_pct": [50, 50, 0.5, 0.5, 0.01, 0.01],
                         "test_error": [0.05, 0.07, 0.06, 0.08, 0.5, 0.6]})
    fig = peft.plot_frontier(runs, floor=0.8, not_trained={"prompt"})
    ax = fig.axes[0]
    step = next(line for line in ax.get_lines() if line.get_label() == "frontier")
    assert list(step.get_xdata()) == [0.5, 50]  # prompt left out
    labels = ax.get_legend_handles_labels()[1]
    assert "prompt (did not train)" in labels and "lora" in labels
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 > 1.0  # right of the axes: over no point, bar or line


def test_dev_curves_draw_every_seed_and_each_methods_mean():
    curves = pd.DataFrame([{"method": m, "seed": s, "step": t, "dev_error": e0 - 0.1 * t / 20 + 0.01 * s}
                           for m, e0 in (("full", 0.5), ("LoRA", 0.7)) for s in (0, 1, 2)
                           for t in (20, 40, 60)])
    fig = peft.plot_dev_curves(curves, floor=0.8)
    ax = fig.axes[0]
    means = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(means) == {"full", "LoRA", "majority class"}
    assert list(means["full"].get_xdata()) == [20, 40, 60]
    assert list(means["LoRA"].get_ydata()) == pytest.approx([70 - 10 + 1, 70 - 20 + 1, 70 - 30 + 1])
    assert len(ax.get_lines()) == 2 * 3 + 2 + 1  # a thin line per run, a mean per method, the floor


def test_the_costs_put_checkpoint_sizes_on_a_log_axis():
    costs = pd.DataFrame({"s / step": [0.4, 0.3], "peak memory (MiB)": [120.0, 10.0],
                          "checkpoint (KiB)": [45000.0, 20.0]}, index=["full", "LoRA"])
    fig = peft.plot_costs(costs)
    assert [ax.get_xscale() for ax in fig.axes] == ["linear", "linear", "log"]


def test_token_task_figure_draws_every_tier_type_and_baseline():
    from tutorial_lib.methods.token_tasks import plots as token_tasks

    ner = pd.DataFrame([{"method": m, "seed": s, "f1": f, "F1 LOC": f + 0.1, "F1 PER": f - 0.1}
                        for m, f in (("scratch", 0.2), ("minilm", 0.5)) for s in (0, 1, 2)])
    qa = pd.DataFrame([{"method": m, "seed": s, "f1": f} for m, f in (("scratch", 0.06), ("minilm", 0.3))
                       for s in (0, 1, 2)])
    base = {"majority": {"f1": 0.4, "per_type": {"LOC": {"f1": 0.6}}}}  # no PER: drawn as 0
    fig = token_tasks.plot_token_tasks(ner, ["F1 LOC", "F1 PER"], base, qa,
                                       {"chance": 0.05, "first sentence": 0.08})
    left, right = fig.axes
    heights = sorted(round(p.get_height(), 3) for p in left.patches)
    assert heights == sorted([0.2, 0.3, 0.1, 0.5, 0.6, 0.4, 0.4, 0.6, 0.0])  # 2 tiers + baseline, 3 groups
    assert [t.get_text() for t in left.get_xticklabels()] == ["all types", "LOC", "PER"]
    assert [round(p.get_height(), 3) for p in right.patches] == [0.06, 0.3]
    lines = [line.get_ydata()[0] for line in right.get_lines() if line.get_linestyle() != "None"]
    assert lines == [0.05, 0.08]  # the baselines; the seeds' dots have no line
    for ax in fig.axes:  # each legend below its axes, over no bar
        box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
        assert box.y1 <= ax.get_window_extent().y0
    plt.close(fig)


def test_dev_curves_draw_every_seed_the_mean_and_the_baselines():
    from types import SimpleNamespace

    from tutorial_lib.methods.token_tasks import plots as token_tasks

    def run(values):
        evals = [{"step": 10 * k, "epoch": 0.5 * k, "split": "validation", "f1": v}
                 for k, v in enumerate(values, 1)]
        return SimpleNamespace(history=SimpleNamespace(evals=evals))

    runs = {"scratch": [run([0.1, 0.2]), run([0.3, 0.4])], "minilm": [run([0.5, 0.7])],
            "no curve": [SimpleNamespace(history=SimpleNamespace(evals=[]))]}
    fig = token_tasks.plot_dev_curves(runs, "f1", {"chance": 0.05}, title="t", ylabel="F1")
    [ax] = fig.axes
    means = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines() if line.get_marker() == "o"}
    assert means == {"scratch (mean of 2 seeds)": pytest.approx([0.2, 0.3]),
                     "minilm (mean of 1 seed)": pytest.approx([0.5, 0.7])}
    assert len(ax.get_lines()) == 2 + 1 + 2 + 1  # seeds, means and the chance line; "no curve" left out
    assert [t.get_text() for t in ax.get_legend().get_texts()][-1] == "chance"
    plt.close(fig)
    fig = token_tasks.plot_dev_curves(runs, "f1", {}, title="t", ylabel="F1",
                                      colours=["scratch", "ours", "minilm"])
    colour = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colour["minilm (mean of 1 seed)"] == "C2" and colour["scratch (mean of 2 seeds)"] == "C0"
    plt.close(fig)


# --- 13: the trade-off zooms past a point that would squeeze the others, the students' size axis
# reads in plain numbers, the stage-2 curves draw ------------------------------------------------


def _forgetting_points(wd_target: float) -> pd.DataFrame:
    rows = [("none", 0.0, 0.06, 0.89), ("weight decay", 1.0, 0.02, wd_target), ("L2-SP", 1.0, 0.02, 0.82),
            ("EWC", 1.0, 0.01, 0.87), ("LwF", 1.0, 0.02, 0.89)]
    return pd.DataFrame([{"regulariser": k, "strength": s, "forgetting mean": f, "forgetting std": 0.01,
                          "target_accuracy mean": t, "target_accuracy std": 0.01} for k, s, f, t in rows])


def test_the_tradeoff_zooms_past_a_point_far_below_and_not_otherwise():
    squeezed = _forgetting_points(0.24)
    assert forgetting_plots.far_below(squeezed, 0.13).tolist() == [False, True, False, False, False]
    fig = forgetting_plots.plot_tradeoff(squeezed, target_floor=0.13)
    assert len(fig.axes) == 2
    low, high = fig.axes[1].get_xlim()
    assert low > 24 and high > 89 and low < 82  # the zoom holds the near points, not weight decay
    plt.close(fig)
    fig = forgetting_plots.plot_tradeoff(_forgetting_points(0.85), target_floor=0.13)
    assert len(fig.axes) == 1
    plt.close(fig)


def test_the_students_size_axis_reads_plain_numbers_with_speeds():
    students = pd.DataFrame([{"method": m, "layers": 2, "seed": s, "test_accuracy": 0.7 + 0.01 * s}
                             for m in ("hard labels", "KD") for s in range(3)])
    sizes = pd.DataFrame({"parameters without word embeddings": [11.0e6, 3.9e6, 66.0e6],
                          "examples / s": [200.0, 600.0, 33.0]},
                         index=["teacher (one model)", "student (2 layers)", "ensemble (6 models)"])
    fig = forgetting_plots.plot_students(students, sizes, teachers={"teacher": (11.0e6, 0.77)}, floor=0.5)
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["11.0M\n200 ex/s", "3.9M\n600 ex/s", "66.0M\n33 ex/s"]
    assert not any("^" in t.get_text() for t in fig.axes[0].get_xticklabels(minor=True))
    plt.close(fig)


def test_the_stage_two_curves_draw_one_line_per_setting():
    steps = pd.DataFrame([{"method": m, "seed": s, "step": k, "cross_entropy": 2.0 / k,
                           "penalty": 0.0 if m == "fine-tuning" else 1.0 + k}
                          for m in ("fine-tuning", "EWC 1") for s in (0, 1) for k in (1, 2, 3)])
    fig = forgetting_plots.plot_stage_two_curves(steps)
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[1].lines) == 1  # fine-tuning has no Ω
    plt.close(fig)


def test_task_scores_put_each_seed_on_its_bar():
    runs = pd.DataFrame([{"task": t, "setting": s, "seed": seed, "test_score": 0.5 + 0.1 * seed + d}
                         for t in ("sst2", "mr") for s, d in (("single-task", 0.0), ("multi", 0.05))
                         for seed in range(3)])
    summary = stats.summarize(runs, by=["task", "setting"], column="test_score", digits=1)
    fig = multitask.plot_task_scores(summary, majority={"sst2": 51.0}, runs=runs)
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
    plain = multitask.plot_task_scores(summary)
    assert not any(isinstance(c, PathCollection) for c in plain.axes[0].collections)  # no dots


# --- 16: decoding, the dialogue's training curves and its rankings ---------------------------------


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
    fig = generation.plot_decoding(table)
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
    fig = generation.plot_training(curves(), candidates=4)
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
    fig = generation.plot_dialogue(pd.DataFrame(rows), 0.1)
    hits, ppl = fig.axes
    assert len(hits.patches) == 6 and len(ppl.patches) == 4
    assert all("LM ranking" not in t.get_text() for t in ppl.get_xticklabels())


def test_read_learning_curves_says_whether_each_curve_still_moved():
    """Three seeds whose error keeps falling over the second half read as "still improving"; flat
    noisy ones as no change; one validation per run as no curve; a single seed is not tested."""
    from types import SimpleNamespace

    def run(errors):
        return SimpleNamespace(history=SimpleNamespace(
            evals=[{"epoch": i + 1, "error": e} for i, e in enumerate(errors)]))

    falling = [run([0.5, 0.4, 0.3, 0.2 - d]) for d in (0.0, 0.01, 0.02)]
    flat = [run([0.5, 0.3, 0.3 + d, 0.3 - d]) for d in (0.01, -0.02, 0.015)]
    text = plots.read_learning_curves({"falling": falling, "flat": flat, "one": [run([0.4])],
                                       "single": [run([0.5, 0.4, 0.3])]}).split("\n")
    assert text[0].startswith("falling: error 50.0 % at the first validation, 19.0 % at the last")
    assert text[0].endswith("still improving at the end (the budget stopped it)")
    assert "no change beyond noise at the end (this test could see" in text[1]  # a null's MDE
    assert text[1].endswith(" points)")
    assert text[2] == "one: one validation per run, no curve"
    assert "one run, not tested" in text[3] and "could see" not in text[3]


def test_read_pretraining_says_how_much_of_the_fall_came_last():
    from types import SimpleNamespace

    def history(losses):
        return SimpleNamespace(evals=[{"split": "validation", "step": 100 * (i + 1), "loss": x}
                                      for i, x in enumerate(losses)])

    text = plots.read_pretraining({"a": history([6.0, 5.0, 4.5]), "b": history([6.0, 5.0, 5.1]),
                                   "c": history([6.0])}).split("\n")
    assert text[0] == ("a: validation loss 6.000 at step 100, 4.500 at step 300; the last 100 "
                       "steps changed it by -0.500 nats (33 % of the fall since step 100): "
                       "still falling at the end")
    assert text[1].endswith("no longer falling at the end")
    assert text[2] == "c: one validation, no curve"


def test_read_confusion_names_the_weakest_class_and_the_commonest_confusion_and_the_alt_text_has_it():
    m = np.array([[8, 2, 0], [1, 3, 6], [0, 0, 10]])
    text = plots.read_confusion({"ours": m}, ["A", "B", "C"])
    assert text == ("ours: weakest class B (30 % of 10 right); most frequent confusion B → C "
                    "(6 items, 60 % of B)")
    fig = plots.plot_confusion({"ours": m}, ["A", "B", "C"])
    assert figures.alt_text(fig).endswith(f"What it shows in this run: {text}")
    plt.close(fig)
