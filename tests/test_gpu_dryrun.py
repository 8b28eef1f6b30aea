"""The gpu-scale dry run's memory estimator (benchmarks/gpu_memory.py) on tiny models against hand
counts, and its committed table (benchmarks/results/gpu_dryrun.json). The full dry run takes
minutes and is not run here: ``python -m benchmarks.gpu_dryrun``."""

import json

import pytest
import torch

from benchmarks import gpu_dryrun as dry
from benchmarks import gpu_memory as gm
from tutorial_lib.methods import NOTEBOOK_SETTINGS
from tutorial_lib.models import TransformerConfig, TransformerLM, count_parameters
from tutorial_lib.pretraining_settings import PretrainingSettings

CFG = TransformerConfig(vocab_size=500, d_model=32, n_layer=2, n_head=2, d_ff=64, max_len=32)


def _model() -> TransformerLM:
    torch.manual_seed(0)
    return dry.flash_attention(TransformerLM(CFG))


def _batch(rows: int) -> dict:
    ids = torch.randint(5, CFG.vocab_size, (rows, 32), generator=torch.Generator().manual_seed(rows))
    return {"input_ids": ids, "labels": ids.clone()}


def test_the_constant_part_is_fp32_weights_and_adamw_by_hand():
    model = _model()
    n = count_parameters(model)
    peak = gm.step_peak(model, _batch(2))
    assert peak.parts["Parameter"] == 4 * n  # fp32 master weights under autocast
    # AdamW: exp_avg and exp_avg_sq in fp32 (and a scalar step per tensor)
    assert peak.parts["Optstate"] == pytest.approx(8 * n, rel=0.01)
    # the optimizer's phase: weights, gradients and both states (16 bytes a parameter) and the
    # step's temporaries (foreach AdamW: about one fp32 copy), whatever the batch
    assert gm.adamw_bytes(n, n) <= peak.optimizer_total <= gm.adamw_bytes(n, n) + 8 * n
    assert gm.step_peak(_model(), _batch(8)).optimizer_total == peak.optimizer_total


def test_the_estimate_extrapolated_in_the_batch_matches_a_measured_step():
    est = gm.estimate(_model, _batch, 8, probes=(2, 4))
    step = gm.step_peak(_model(), _batch(8))
    measured = max(step.total, step.optimizer_total) / gm.GIB
    assert est["allocated_gib"] == pytest.approx(measured, rel=0.05)
    assert est["reserved_gib"] == pytest.approx(est["allocated_gib"] * gm.RESERVE)


def test_extrapolate_is_linear_by_hand():
    small, large = gm.StepPeak(2, 300, {"Activation": 200}), gm.StepPeak(4, 500, {"Activation": 400})
    out = gm.extrapolate(small, large, 64)
    assert out == {"total": 300 + 62 * 100, "Activation": 200 + 62 * 100}
    with pytest.raises(ValueError):
        gm.extrapolate(large, small, 64)


def test_every_notebook_has_a_workload_at_the_gpu_scale():
    classes = {c.notebook: c for c in (PretrainingSettings, *NOTEBOOK_SETTINGS)}
    assert len(classes) == 18
    for nb, cls in classes.items():
        assert dry.workloads(nb, cls.at("gpu")), nb


def test_the_committed_table_covers_all_18_and_01_within_25_percent():
    doc = json.loads((dry.OUT / "gpu_dryrun.json").read_text())
    assert len(doc["notebooks"]) == 18 and doc["hardware"] and doc["date"]
    for nb, row in doc["notebooks"].items():
        assert row["status"] in ("ran", "failed"), nb
    check = doc["check_01"]
    # the estimate of the tensors against the tensors measured on the H200 (independent of the
    # allocator's factor, which that run gave), and the reserved memory the issue asks about
    assert 0.75 <= check["allocated_ratio"] <= 1.25
    assert 0.75 <= check["estimated_reserved_gib"] / check["measured_reserved_gib"] <= 1.25
    table = (dry.OUT / "gpu_dryrun.md").read_text()
    assert all(f"| {nb} |" in table for nb in doc["notebooks"])
