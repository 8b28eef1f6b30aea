"""The gpu scale's budget on one GPU (benchmarks/gpu_budget.py): 01's measured run rescaled to
today's settings fits what the README and docs/gpu.md say, and a loan's call."""

import re
from pathlib import Path

from benchmarks import gpu_budget
from tutorial_lib.pretraining_settings import PretrainingSettings

REPO = Path(__file__).resolve().parents[1]


def test_01_at_todays_gpu_settings_fits_the_stated_minutes_and_a_call():
    est = gpu_budget.pretraining_estimate()
    pretrain = PretrainingSettings.at("gpu")
    assert est["steps"] == {"causal": pretrain.steps, "mlm": pretrain.steps_for("mlm")}
    # the measured run had 6000 steps of each; the estimate scales each objective's seconds
    assert est["measured_steps"] == {"causal": 6000, "mlm": 6000}
    assert est["estimate_seconds"] < est["measured_seconds"]
    minutes = round(est["estimate_seconds"] / 60, 1)
    for doc in ("README.md", "docs/gpu.md"):
        assert f"{minutes} min" in (REPO / doc).read_text(), (doc, minutes)
    assert est["estimate_seconds"] <= 10 * 60 - 60  # one call, with a minute for install and packing


def test_the_causal_steps_stop_before_the_measured_overfitting():
    """The H200 run's validation loss was lowest at step 1000-2000: 1500 steps stop there."""
    nb = (REPO / "results" / "gpu" / "notebooks" / "01_pretraining.ipynb").read_text()
    line = r"\[causal\] step (\d+)/6000: validation loss ([\d.]+)"
    curve = {int(s): float(v) for s, v in re.findall(line, nb)}
    best = min(curve, key=curve.get)
    assert curve[6000] > curve[best] + 1.0  # it over-fitted
    assert best <= PretrainingSettings.at("gpu").steps <= 2000
