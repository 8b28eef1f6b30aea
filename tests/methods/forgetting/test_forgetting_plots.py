"""Tests for tutorial_lib.methods.forgetting.plots: the trade-off figure zooms past a point that
would squeeze the others, the students' size axis reads in plain numbers, the curves draw."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from tutorial_lib.methods.forgetting import plots  # noqa: E402


def _points(wd_target: float) -> pd.DataFrame:
    rows = [("none", 0.0, 0.06, 0.89), ("weight decay", 1.0, 0.02, wd_target), ("L2-SP", 1.0, 0.02, 0.82),
            ("EWC", 1.0, 0.01, 0.87), ("LwF", 1.0, 0.02, 0.89)]
    return pd.DataFrame([{"regulariser": k, "strength": s, "forgetting mean": f, "forgetting std": 0.01,
                          "target_accuracy mean": t, "target_accuracy std": 0.01} for k, s, f, t in rows])


def test_the_tradeoff_zooms_past_a_point_far_below_and_not_otherwise():
    squeezed = _points(0.24)
    assert plots.far_below(squeezed, 0.13).tolist() == [False, True, False, False, False]
    fig = plots.plot_tradeoff(squeezed, target_floor=0.13)
    assert len(fig.axes) == 2
    low, high = fig.axes[1].get_xlim()
    assert low > 24 and high > 89 and low < 82  # the zoom holds the near points, not weight decay
    plt.close(fig)
    fig = plots.plot_tradeoff(_points(0.85), target_floor=0.13)
    assert len(fig.axes) == 1
    plt.close(fig)


def test_the_students_size_axis_reads_plain_numbers_with_speeds():
    students = pd.DataFrame([{"method": m, "layers": 2, "seed": s, "test_accuracy": 0.7 + 0.01 * s}
                             for m in ("hard labels", "KD") for s in range(3)])
    sizes = pd.DataFrame({"parameters without word embeddings": [11.0e6, 3.9e6, 66.0e6],
                          "examples / s": [200.0, 600.0, 33.0]},
                         index=["teacher (one model)", "student (2 layers)", "ensemble (6 models)"])
    fig = plots.plot_students(students, sizes, teachers={"teacher": (11.0e6, 0.77)}, floor=0.5)
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["11.0M\n200 ex/s", "3.9M\n600 ex/s", "66.0M\n33 ex/s"]
    assert not any("^" in t.get_text() for t in fig.axes[0].get_xticklabels(minor=True))
    plt.close(fig)


def test_the_stage_two_curves_draw_one_line_per_setting():
    steps = pd.DataFrame([{"method": m, "seed": s, "step": k, "cross_entropy": 2.0 / k,
                           "penalty": 0.0 if m == "fine-tuning" else 1.0 + k}
                          for m in ("fine-tuning", "EWC 1") for s in (0, 1) for k in (1, 2, 3)])
    fig = plots.plot_stage_two_curves(steps)
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[1].lines) == 1  # fine-tuning has no Ω
    plt.close(fig)
