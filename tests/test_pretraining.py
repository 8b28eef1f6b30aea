"""Tests for tutorial_lib.pretraining: the smoke recipe end to end, caching, exact resume, torchrun."""

import functools
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from tiny import kill_at, tensors_equal

from tutorial_lib import config, pretraining
from tutorial_lib.models import ModelError, load_pretrained
from tutorial_lib.pretraining_settings import PretrainingSettings


@pytest.fixture
def smoke(with_data):
    return config.get_scale("smoke")


def test_pretrain_then_load_or_pretrain_reuses_the_checkpoint(smoke):
    result = pretraining.pretrain(smoke, "causal", progress=False)
    assert (result.directory / "model.pt").exists()
    m = result.metrics
    assert m["step"] == PretrainingSettings.at(smoke).steps
    assert m["ppl"] == pytest.approx(math.exp(m["loss"]))
    assert m["word_ppl"] > m["ppl"]  # more sub-words than words
    uniform = math.log(PretrainingSettings.at(smoke).model.vocab_size)
    assert m["loss"] < uniform  # learned something beyond uniform
    assert abs(result.history.train[0]["loss"] - uniform) < 1.0  # the N(0, 0.02) init
    stamp = os.stat(result.directory / "model.pt").st_mtime_ns
    again = pretraining.load_or_pretrain(smoke, "causal")
    assert os.stat(result.directory / "model.pt").st_mtime_ns == stamp  # loaded, not retrained
    for a, b in zip(result.model.state_dict().values(), again.model.state_dict().values()):
        assert tensors_equal(a, b)
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
    # CPU processes, even on a GPU machine
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
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
    assert model.config.n_layer == PretrainingSettings.at("smoke").model.n_layer


def test_torchrun_gets_nccl_with_a_gpu_per_process_gloo_without_and_a_clear_error_between():
    assert pretraining.dist_backend({"LOCAL_WORLD_SIZE": "2"}, gpus=0) == "gloo"
    assert pretraining.dist_backend({"LOCAL_WORLD_SIZE": "2"}, gpus=2) == "nccl"
    with pytest.raises(pretraining.PretrainError, match=r"2 processes .* 1 GPU.*--nproc_per_node=1"):
        pretraining.dist_backend({"LOCAL_WORLD_SIZE": "2"}, gpus=1)  # the H200: invalid device ordinal


@pytest.mark.parametrize("objective,grad_accum", [("mlm", 1), ("causal", 2)])
def test_killed_pretraining_resumes_bit_identical(smoke, tmp_path, monkeypatch, objective, grad_accum):
    """Kill at iteration 13 — not a checkpoint boundary, past the first evaluation epoch and the
    first pass over the (shortened) corpus — and re-run: the final weights and history equal the
    uninterrupted run's bit for bit. Before the fix the resumed run replayed the first batches
    with fresh dropout/masking draws (max |Δw| 8e-3 to 9e-3 at the smoke scale). With
    ``grad_accum=2`` checkpoints come every ``eval_every`` optimizer steps (8 iterations), not
    every ``eval_every`` iterations, and the history counts optimizer steps."""
    steps, eval_every = 24 // grad_accum, 8 // grad_accum
    recipe = PretrainingSettings.at(smoke).replace(
        max_train_lines=40, steps=steps, eval_every=eval_every, grad_accum=grad_accum, warmup=2)
    run = functools.partial(pretraining.pretrain, smoke, objective, progress=False, settings=recipe)
    reference = run(directory=tmp_path / "ref")
    n_blocks = len(pretraining.blocks(pretraining.encode_corpus(
        smoke, reference.tokenizer, "train", recipe).ids, recipe.seq_len))
    assert n_blocks // recipe.batch_size < 13, "the kill must come after the first pass"

    kill_at(monkeypatch, pretraining, 13)
    with pytest.raises(KeyboardInterrupt):
        run(directory=tmp_path / "run")
    monkeypatch.undo()
    state = tmp_path / "run" / "train_state"
    assert [p.name for p in state.glob("*.pt")] == ["training_checkpoint_8.pt"]  # iterations
    resumed = run(directory=tmp_path / "run")
    assert resumed.resumed_from and resumed.resumed_from.endswith("training_checkpoint_8.pt")
    for (name, a), b in zip(reference.model.state_dict().items(),
                            resumed.model.state_dict().values()):
        assert tensors_equal(a, b), name
    assert resumed.history.train == reference.history.train
    assert resumed.history.evals == reference.history.evals
    assert [r["step"] for r in resumed.history.evals] == list(range(eval_every, steps + 1, eval_every))
    assert resumed.history.train[-1]["step"] == steps and len(resumed.history.train) == 24


def test_the_unigram_floor_is_the_smoothed_token_frequency():
    """01's honest floor: add-one smoothed training frequencies, scored on validation tokens."""
    corpus = lambda ids: pretraining.EncodedCorpus(torch.tensor(ids), 1)  # noqa: E731
    train, valid = corpus([0, 0, 0, 1]), corpus([0, 1])
    counts = torch.tensor([4.0, 2.0, 1.0])  # vocabulary of 3: token 2 never seen
    want = -torch.log(counts / counts.sum())[[0, 1]].mean().item()
    assert pretraining.unigram_loss(train, valid, 3) == pytest.approx(want)
    assert pretraining.unigram_loss(train, valid, 3) < math.log(3)  # beats the uniform guess


def test_ensure_pretrains_what_the_settings_name_and_nothing_else(monkeypatch):
    """``ensure`` reads the backbone fields (and also_needs) of a notebook's settings: each of our
    objectives once, scratch only its tokenizer, other backbones nothing."""
    from tutorial_lib.methods.adaptation.settings import AdapterSettings
    from tutorial_lib.methods.probing.settings import ProbingSettings

    calls = []
    monkeypatch.setattr(pretraining, "load_or_pretrain", lambda scale, obj: calls.append(obj) or obj)
    monkeypatch.setattr(pretraining, "get_tokenizer", lambda scale: calls.append("tokenizer"))
    smoke = config.get_scale("smoke")
    probing = ProbingSettings.at(smoke)
    assert {"ours", "ours-mlm", "scratch"} <= set(probing.models)
    assert pretraining.ensure(probing) == {"causal": "causal", "mlm": "mlm"}
    assert sorted(calls) == ["causal", "mlm", "tokenizer"]
    calls.clear()
    assert pretraining.ensure(AdapterSettings.at(smoke)) == {} and calls == []  # MiniLM only


def test_pretraining_and_loading_hold_the_entrys_cache_lock(monkeypatch, tmp_path):
    """CI's two workers share a cache: notebook 01 retrains the causal LM (``pretrain`` discards
    the finished run first) while 18 loads it. Both sides take the entry's lock, so the loader
    waits for the new model instead of finding none (tests/test_runtime.py: the lock blocks)."""
    from tutorial_lib import integrity, ours

    smoke = config.get_scale("smoke")
    entry = pretraining.run_directory(smoke, "causal")
    lock = str(entry.with_name(f".{entry.name}.lock"))
    seen = []
    monkeypatch.setattr(pretraining, "_pretrain", lambda *a: seen.append(lock in integrity._held_locks))
    pretraining.pretrain(smoke, "causal")
    monkeypatch.setattr(ours, "_intact", lambda d: seen.append(lock in integrity._held_locks) or False)
    with pytest.raises(ours.NotPretrained):
        ours.load(smoke, "causal")
    assert seen == [True, True] and not integrity._held_locks
