"""Tests for tutorial_lib.pretraining: the smoke recipe end to end, caching, and torchrun."""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from tutorial_lib import config, pretraining
from tutorial_lib.models import ModelError, load_pretrained


@pytest.fixture
def smoke(with_data):
    return config.get_scale("smoke")


def test_pretrain_then_load_or_pretrain_reuses_the_checkpoint(smoke):
    result = pretraining.pretrain(smoke, "causal", progress=False)
    assert (result.directory / "model.pt").exists()
    m = result.metrics
    assert m["step"] == smoke.pretrain.steps
    assert m["ppl"] == pytest.approx(math.exp(m["loss"]))
    assert m["word_ppl"] > m["ppl"]  # more sub-words than words
    assert m["loss"] < math.log(smoke.model.vocab_size)  # learned something beyond uniform
    first = result.history.train[0]["loss"]
    assert abs(first - math.log(smoke.model.vocab_size)) < 1.0  # the N(0, 0.02) init
    stamp = os.stat(result.directory / "model.pt").st_mtime_ns
    again = pretraining.load_or_pretrain(smoke, "causal")
    assert os.stat(result.directory / "model.pt").st_mtime_ns == stamp  # loaded, not retrained
    for a, b in zip(result.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    assert again.history.evals == result.history.evals


def test_mlm_and_helpers_refuse_the_wrong_model(smoke):
    mlm = pretraining.pretrain(smoke, "mlm", progress=False)
    with pytest.raises(pretraining.PretrainError, match="causal LM"):
        pretraining.generate(mlm.model, mlm.tokenizer, "The")
    guesses = pretraining.fill_mask(mlm.model, mlm.tokenizer, "The [MASK] is .", top_k=3)
    assert len(guesses) == 3 and all(0 <= p <= 1 for _, p in guesses)
    with pytest.raises(pretraining.PretrainError, match="exactly one"):
        pretraining.fill_mask(mlm.model, mlm.tokenizer, "no mask here")
    with pytest.raises(ModelError, match="masked LM"):
        load_pretrained(mlm.directory, causal=True)
    with pytest.raises(pretraining.PretrainError, match="unknown objective"):
        pretraining.load_or_pretrain(smoke, "seq2seq")


def test_torchrun_two_cpu_processes(with_data, tmp_path):
    """The pretraining entry point runs unchanged under torchrun with 2 gloo processes."""
    out = tmp_path / "ddp"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
         "-m", "tutorial_lib.pretraining", "--scale", "smoke", "--objective", "causal",
         "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    assert report["world_size"] == 2
    model = load_pretrained(out, causal=True)
    assert model.config.n_layer == config.get_scale("smoke").model.n_layer
