"""Every fault in docs/troubleshooting.md's "When something goes wrong" table, triggered on purpose: each test
checks the message the user sees and that nothing already computed or saved was lost.

Rows (its order): unknown scale or dataset · missing/corrupt data file · offline without a
copy · wrong checkpoint shape · corrupt cache · disk full while saving · interrupted run (training
and the main job) · a failed main-job run · input longer than max_len · empty few-shot split ·
label not in the verbalizer · CUDA out of memory. (The stale run cache's row is tested in
tests/test_finetuning.py, beside the run key; the changed Hub data's in tests/test_data_fingerprints.py.)
"""

import dataclasses
import errno
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch
from ignite.engine import Events
from tiny import kill_at

from tutorial_lib import backbones, config, data, finetuning, integrity, pretraining, results, tasks
from tutorial_lib.checkpoints import checkpoints
from tutorial_lib.config import ConfigError
from tutorial_lib.data import DataError
from tutorial_lib.methods.prompts import fewshot, prompting
from tutorial_lib.models import (
    ModelError,
    TransformerConfig,
    TransformerLM,
    load_pretrained,
    save_pretrained,
)
from tutorial_lib.ops import report as reports
from tutorial_lib.pretraining_settings import PretrainingSettings
from tutorial_lib.settings import Budget
from tutorial_lib.training import Method, TrainingOutOfMemory

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def smoke(with_data):
    return config.get_scale("smoke")


def tiny_recipe(smoke: config.Scale, **changes) -> PretrainingSettings:
    """The smoke recipe on 40 corpus lines: 24 steps, evaluation + checkpoint every 8 (a pass over
    the data is ~7 batches)."""
    settings = dict(max_train_lines=40, steps=24, eval_every=8, warmup=2) | changes
    return PretrainingSettings.at(smoke).replace(**settings)


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def warning_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.fixture
def fresh_data_memo():
    """Tests that point the data module elsewhere must not leave their datasets memoised."""
    data.clear_cache()
    yield
    data.clear_cache()


# --- unknown scale or dataset ----------------------------------------------------------------------


def test_unknown_scale_names_the_valid_ones_and_writes_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(config.SCALE_ENV_VAR, "huge")
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match=r"unknown scale 'huge': choose one of smoke, classroom, "
                                          r"gpu, paper \(set the TUTORIAL_SCALE"):
        config.get_scale()
    assert not (tmp_path / "cache").exists()


def test_unknown_dataset_suggests_the_closest_name(monkeypatch, tmp_path):
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / "cache"))
    with pytest.raises(DataError, match=r"unknown dataset 'tre'\. Did you mean 'trec'\? Valid names"):
        data.load("tre")
    with pytest.raises(ValueError, match="unknown task 'imdb'"):
        tasks.load_task("imdb")
    assert not (tmp_path / "cache").exists()


# --- missing / corrupt data file, offline -----------------------------------------------------------


def test_missing_or_corrupt_data_file_says_what_to_do_and_touches_nothing(
        data_dir, tmp_path, monkeypatch, fresh_data_memo):
    copy = tmp_path / "data"
    shutil.copytree(data_dir / "trec", copy / "trec")
    monkeypatch.setenv(data.DATA_ENV_VAR, str(copy))
    test_file = copy / "trec" / "TREC_10.label"
    damaged = bytearray(test_file.read_bytes())
    damaged[100] ^= 1
    test_file.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"sha256 mismatch for .*TREC_10\.label.*re-copy it from "
                                        r"the dataset's source listed in MANIFEST\.md"):
        data.load("trec")
    assert test_file.read_bytes() == bytes(damaged)  # reported, never "repaired" or deleted
    test_file.unlink()
    with pytest.raises(DataError, match=r"missing file .*TREC_10\.label: .*Re-copy it"):
        data.load("trec")
    assert (copy / "trec" / "train_5500.label").read_bytes() == \
        (data_dir / "trec" / "train_5500.label").read_bytes()


def test_offline_without_a_local_copy_says_how_to_get_one(monkeypatch, fresh_data_memo):
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match=r"cannot load trec: offline \(.* is set and the Hugging "
                                        r"Face cache has no copy\); there is no local copy "
                                        r"\(TUTORIAL_DATA_DIR is not set\)\. Set TUTORIAL_DATA_DIR to "
                                        r"a local copy of the data .*, or go online"):
        data.load("trec")


# --- wrong checkpoint shape ---------------------------------------------------------------------------


def test_a_checkpoint_of_another_model_size_is_refused_and_left_untouched(smoke, tmp_path,
                                                                         monkeypatch):
    """A killed run re-run with another model size in the same directory, and a model.pt whose
    tensors do not fit its configuration: ModelError, and the file stays as it was."""
    small = tiny_recipe(smoke)
    kill_at(monkeypatch, pretraining, 13)
    with pytest.raises(KeyboardInterrupt):
        pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False, settings=small)
    monkeypatch.undo()
    [saved] = checkpoints(tmp_path / "run" / "train_state")
    before = saved.read_bytes()
    wider = small.replace(model=dataclasses.replace(small.model, d_model=96, n_head=2))
    with pytest.raises(ModelError, match=r"training_checkpoint_8\.pt does not fit this run \(.*size "
                                         r"mismatch.*\)\. .*use another directory.*left untouched"):
        pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False,
                             settings=wider)
    assert saved.read_bytes() == before

    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=30, d_model=16, n_layer=1, n_head=2, d_ff=32,
                                         max_len=8))
    path = save_pretrained(lm, tmp_path / "model")
    payload = torch.load(path, weights_only=True)
    payload["config"]["d_ff"] = 64  # the configuration no longer describes the tensors
    integrity.save_torch(payload, path)
    before = path.read_bytes()
    with pytest.raises(ModelError, match=r"does not fit its own configuration .*size mismatch"
                                         r".*Delete it and pretrain again"):
        load_pretrained(tmp_path / "model")
    assert path.read_bytes() == before


# --- corrupt cache ------------------------------------------------------------------------------------


def _damage(path: Path, how: str) -> None:
    blob = path.read_bytes()
    if how == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    else:  # flip one byte: same size, other sha256
        path.write_bytes(blob[:50] + bytes([blob[50] ^ 1]) + blob[51:])


def test_damaged_cache_entries_are_rebuilt_with_one_warning_line_each(smoke, caplog):
    """Truncated encoded corpus and model.pt, a flipped byte in tokenizer.json: each is reported
    in one warning line and rebuilt identical (the tokenizer is deterministic; the model comes
    back from the run's final checkpoint without retraining); nothing damaged is loaded."""
    recipe = tiny_recipe(smoke)
    first = pretraining.load_or_pretrain(smoke, "causal", recipe)
    cache = config.cache_dir(smoke.name)
    tokenizer_json = next(cache.glob("tokenizer-*")) / "tokenizer.json"
    corpus = next(cache.glob("corpus-*-train.pt"))
    model_file = first.directory / "model.pt"
    originals = {p: p.read_bytes() for p in (tokenizer_json, corpus)}
    _damage(tokenizer_json, "flip")
    _damage(corpus, "truncate")
    _damage(model_file, "truncate")

    with caplog.at_level(logging.WARNING, logger="tutorial_lib"):
        again = pretraining.load_or_pretrain(smoke, "causal", recipe)
    lines = warning_lines(caplog)
    assert len(lines) == 3 and all("\n" not in ln for ln in lines)
    for what in ("pretrained model", "tokenizer", "encoded corpus"):
        assert any(ln.startswith(f"cache: {what} ") and "is damaged (" in ln
                   and ln.endswith("deleting it and rebuilding it.") for ln in lines), what
    for path, blob in originals.items():
        assert path.read_bytes() == blob, path.name
    assert same_weights(first.model, again.model)
    assert again.history.evals == first.history.evals
    assert integrity.problem(model_file) is None


def test_a_damaged_training_checkpoint_is_not_resumed_from(smoke, tmp_path, monkeypatch, caplog):
    recipe = tiny_recipe(smoke)
    reference = pretraining.pretrain(smoke, "mlm", directory=tmp_path / "ref",
        progress=False, settings=recipe)
    kill_at(monkeypatch, pretraining, 13)
    with pytest.raises(KeyboardInterrupt):
        pretraining.pretrain(smoke, "mlm", directory=tmp_path / "run", progress=False, settings=recipe)
    monkeypatch.undo()
    [saved] = checkpoints(tmp_path / "run" / "train_state")
    _damage(saved, "truncate")
    with caplog.at_level(logging.WARNING, logger="tutorial_lib"):
        run = pretraining.pretrain(smoke, "mlm", directory=tmp_path / "run", progress=False, settings=recipe)
    assert run.resumed_from is None  # started afresh rather than loading half a file
    [line] = warning_lines(caplog)
    assert line.startswith("cache: checkpoint ") and "training_checkpoint_8.pt is damaged" in line
    assert same_weights(reference.model, run.model)


# --- disk full while saving --------------------------------------------------------------------------


def _disk_full_when(monkeypatch, fragment: str) -> None:
    """``torch.save`` raises ENOSPC for files whose name contains ``fragment``."""
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        if fragment in str(f):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)


def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(smoke, tmp_path, monkeypatch):
    recipe = tiny_recipe(smoke)
    reference = pretraining.pretrain(smoke, "causal", directory=tmp_path / "ref",
        progress=False, settings=recipe)
    _disk_full_when(monkeypatch, "training_checkpoint_16")
    with pytest.raises(integrity.CacheWriteError) as caught:
        pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False, settings=recipe)
    monkeypatch.undo()
    message = str(caught.value)
    assert caught.value.errno == errno.ENOSPC
    assert "disk full while writing" in message and "training_checkpoint_16.pt" in message
    assert "free some space" in message and "TUTORIAL_CACHE_DIR" in message
    assert "training_checkpoint_8.pt is kept: running again resumes from it" in message
    state = tmp_path / "run" / "train_state"
    [kept] = checkpoints(state)
    assert kept.name == "training_checkpoint_8.pt" and integrity.problem(kept) is None
    assert not [p for p in state.iterdir() if p.name.endswith(".tmp")]
    run = pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False, settings=recipe)
    assert run.resumed_from.endswith("training_checkpoint_8.pt")
    assert same_weights(reference.model, run.model)  # nothing lost


def test_disk_full_while_saving_a_model_keeps_the_old_file(tmp_path, monkeypatch):
    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=30, d_model=16, n_layer=1, n_head=2, d_ff=32,
                                         max_len=8))
    path = save_pretrained(lm, tmp_path)
    before = path.read_bytes()
    _disk_full_when(monkeypatch, "model.pt")
    with torch.no_grad():
        lm.transformer.ln_f.weight.add_(1.0)
    with pytest.raises(integrity.CacheWriteError, match=r"disk full while writing .*model\.pt.*"
                                                        r"The previous version of this file is kept"):
        save_pretrained(lm, tmp_path)
    assert path.read_bytes() == before and integrity.problem(path) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# --- interrupted run ------------------------------------------------------------------------------------


def test_an_interrupted_finetuning_run_resumes_exactly(smoke, tmp_path):
    """finetune(checkpoint_dir=...) killed at iteration 14 of 24 (checkpoints every 4, epochs of
    8) and re-run: same weights, test metrics and history as the run never killed; re-running a
    finished run loads its final checkpoint instead of training on top of it."""
    task = tasks.load_task("trec", train_examples=256, validation_examples=200, test_examples=200)
    models = {}

    def hook(name, crash_at=None):
        def on_trainer(trainer, model, optimizer):
            models[name] = model
            if crash_at:
                @trainer.on(Events.ITERATION_COMPLETED(once=crash_at))
                def _kill(_):
                    raise KeyboardInterrupt("simulated kill")
        return on_trainer

    kwargs = dict(seed=1, scale=smoke, evals_per_epoch=2)
    budget = Budget(epochs=3)
    reference = finetuning.finetune("scratch", task, budget, method=Method(on_trainer=hook("ref")),
                                    checkpoint_dir=tmp_path / "ref", **kwargs)
    with pytest.raises(KeyboardInterrupt):
        finetuning.finetune("scratch", task, budget, method=Method(on_trainer=hook("run", crash_at=14)),
                            checkpoint_dir=tmp_path / "run", **kwargs)
    assert [p.name for p in checkpoints(tmp_path / "run")] == ["training_checkpoint_12.pt"]
    resumed = finetuning.finetune("scratch", task, budget, method=Method(on_trainer=hook("run")),
                                  checkpoint_dir=tmp_path / "run", **kwargs)
    assert same_weights(models["ref"], models["run"])
    assert resumed.test["loss"] == reference.test["loss"]
    assert resumed.history.train == reference.history.train
    assert resumed.history.evals == reference.history.evals
    finished = finetuning.finetune("scratch", task, budget, method=Method(on_trainer=hook("again")),
                                   checkpoint_dir=tmp_path / "ref", **kwargs)
    assert same_weights(models["ref"], models["again"])  # a finished run is not trained again
    assert finished.test["loss"] == reference.test["loss"]


def _run_notebooks_module(monkeypatch, root: Path):
    spec = importlib.util.spec_from_file_location("run_notebooks_under_test",
                                                  REPO / "scripts" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "ROOT", root)
    return module


def _fake_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "tutorial_lib").mkdir()
    (root / "tutorial_lib" / "training.py").write_text("# library source\n")
    for name in ("01_pretraining", "02_adaptation", "03_adapters"):
        (root / "notebooks" / f"{name}.ipynb").write_text("{}")
    return root


def test_main_job_resume_reruns_only_what_is_stale(tmp_path, monkeypatch):
    """Fake timestamps: a notebook runs again when it failed, lost its results, or when its
    .ipynb, a tutorial_lib source or 01 (the cache everyone uses) changed after it finished."""
    root = _fake_project(tmp_path)
    rn = _run_notebooks_module(monkeypatch, root)
    out = tmp_path / "results"
    out.mkdir()
    nbs = sorted((root / "notebooks").glob("*.ipynb"))
    t0 = 1_000_000.0
    for path in [*nbs, root / "tutorial_lib" / "training.py"]:
        os.utime(path, (t0, t0))
    for nb, finished in zip(nbs, (t0 + 10, t0 + 20, t0 + 30)):
        rn.record_state(out, nb.stem, ok=True, finished=finished)
        (out / f"{nb.stem}.json").write_text("{}")

    def stale():
        return {nb.stem: rn.why_stale(nb, nbs, out, rn.read_state(out)) for nb in nbs}

    assert stale() == dict.fromkeys((nb.stem for nb in nbs), None)
    os.utime(nbs[2], (t0 + 40, t0 + 40))  # 03 edited after its run
    assert stale()["03_adapters"] == "notebooks/03_adapters.ipynb changed after it ran"
    rn.record_state(out, "03_adapters", ok=True, finished=t0 + 50)
    rn.record_state(out, "01_pretraining", ok=True, finished=t0 + 60)  # 01 ran again
    assert stale() == {"01_pretraining": None, "02_adaptation": "01_pretraining ran again after it",
                       "03_adapters": "01_pretraining ran again after it"}
    for nb, finished in zip(nbs[1:], (t0 + 70, t0 + 80)):
        rn.record_state(out, nb.stem, ok=True, finished=finished)
    os.utime(root / "tutorial_lib" / "training.py", (t0 + 75, t0 + 75))  # library changed
    assert stale() == {"01_pretraining": "tutorial_lib/training.py changed after it ran",
                       "02_adaptation": "tutorial_lib/training.py changed after it ran",
                       "03_adapters": None}
    rn.record_state(out, "03_adapters", ok=False, finished=t0 + 90)
    (out / "02_adaptation.json").unlink()
    assert stale()["03_adapters"] == "failed last time"
    assert stale()["02_adaptation"] == "its results are missing"


def test_a_crashed_notebook_keeps_the_others_results_and_resume_reruns_only_it(tmp_path,
                                                                              monkeypatch):
    root = _fake_project(tmp_path)
    rn = _run_notebooks_module(monkeypatch, root)
    out = tmp_path / "results"
    ran: list[str] = []
    crash = {"02_adaptation"}

    def fake_run(notebook, destination, timeout, probe=None):
        ran.append(notebook.stem)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text("{}")
        if notebook.stem in crash:
            return 1.0, {"cells": []}, "KeyboardInterrupt: simulated crash"
        results.save(notebook.stem, {"t": pd.DataFrame({"x": [1]})}, seeds=[0],
                     scale=config.get_scale("smoke"))
        return 1.0, {"cells": []}, None

    monkeypatch.setattr(rn, "run", fake_run)
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / "cache"))
    argv = ["--scale", "smoke", "--out", str(out)]
    assert rn.main(argv) == 1  # 02 failed: exit status 1, the job went on to 03
    assert ran == ["01_pretraining", "02_adaptation", "03_adapters"]
    kept = {p: p.read_bytes() for p in (out / "01_pretraining.json", out / "03_adapters.json")}
    report = (out / reports.REPORT_NAME).read_text()
    assert "**Last attempt failed: 02_adaptation.**" in report
    assert "KeyboardInterrupt: simulated crash" in report
    assert not (out / "02_adaptation.json").exists() and (out / "failed" / "02_adaptation").is_dir()

    ran.clear()
    crash.clear()
    assert rn.main([*argv, "--resume"]) == 0
    assert ran == ["02_adaptation"]  # the others were up to date
    for path, blob in kept.items():
        assert path.read_bytes() == blob
    report = (out / reports.REPORT_NAME).read_text()
    assert "This invocation executed 02_adaptation" in report
    assert "failed" not in report.lower() and not (out / "failed").exists()
    state = json.loads((out / rn.STATE_NAME).read_text())
    assert all(state[nb]["ok"] for nb in ("01_pretraining", "02_adaptation", "03_adapters"))


def test_start_within_starts_no_notebook_after_its_minutes_and_resume_goes_on(tmp_path,
                                                                            monkeypatch):
    """A time-limited GPU session: past --start-within no further notebook starts (the one
    running finishes), the report says which ran, and --resume runs the rest."""
    root = _fake_project(tmp_path)
    rn = _run_notebooks_module(monkeypatch, root)
    out = tmp_path / "results"
    ran: list[str] = []
    clock = iter([0, 0, 60, 120, *range(200, 10_000)])  # job start, then before each notebook

    def fake_run(notebook, destination, timeout, probe=None):
        ran.append(notebook.stem)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text("{}")
        results.save(notebook.stem, {"t": pd.DataFrame({"x": [1]})}, seeds=[0],
                     scale=config.get_scale("smoke"))
        return 50.0, {"cells": []}, None

    monkeypatch.setattr(rn, "run", fake_run)
    monkeypatch.setattr(rn.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / "cache"))
    argv = ["--scale", "smoke", "--out", str(out), "--start-within", "1.5"]  # 90 s
    assert rn.main(argv) == 0
    assert ran == ["01_pretraining", "02_adaptation"]  # started at 0 and 60 s; 120 s is past 90
    report = (out / reports.REPORT_NAME).read_text()
    assert "**No results for: 03_adapters**" in report  # not started: said, not hidden
    ran.clear()
    assert rn.main([*argv[:-2], "--resume"]) == 0
    assert ran == ["03_adapters"]


# --- a failed main-job run keeps the last good results ---------------------------------------------

STEADY = """\
import os, uuid
import pandas as pd
from tutorial_lib import config, results
display({"image/png": uuid.uuid4().hex}, raw=True)  # a figure whose bytes differ on every run
results.save(NAME, {"t": pd.DataFrame({"x": [1]})}, seeds=[0], scale=config.get_scale("smoke"),
             notes=f"run {uuid.uuid4()}")  # results whose bytes differ on every run"""
MIDWAY = """\
import time
if os.environ.get("FLAKY") == "break":
    raise RuntimeError("boom midway")
if os.environ.get("FLAKY") == "hang":
    open(os.environ["FLAKY_MARKER"], "w").write(str(os.getpid()))
    time.sleep(120)"""


def _synthetic_project(root: Path) -> Path:
    """One tiny notebook that saves results and a figure through tutorial_lib, then raises
    (FLAKY=break) or hangs (FLAKY=hang) in its next cell."""
    cells = ["NAME = '02_flaky'", STEADY, MIDWAY, "print('done')"]
    nb = nbformat.v4.new_notebook(cells=list(map(nbformat.v4.new_code_cell, cells)))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (root / "notebooks").mkdir(parents=True)
    nbformat.write(nb, root / "notebooks" / "02_flaky.ipynb")
    return root


def _digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "main_job_state.json"}


def test_a_failed_main_job_run_keeps_the_last_good_results_byte_identical(tmp_path, monkeypatch):
    """Real kernels on a synthetic notebook, executed in place as at classroom scale: a run that
    raises midway (after saving new results and a new figure), or is stopped by SIGTERM, leaves
    every earlier output byte-identical (notebook, results, report, wall times) and adds only
    failed/, whose RESULTS.md names the failure, its one-line reason and the date of the results
    shown, and points to their figures in the last good notebook; the failed execution is kept
    with its traceback, its figure stripped. No figure is copied out of a notebook (issue 63).
    (A good run after it clears failed/: the test above.)"""
    root = _synthetic_project(tmp_path / "project")
    rn = _run_notebooks_module(monkeypatch, root)
    out = root / "results" / "smoke"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv("FLAKY", raising=False)
    # the kernels on the CPU on any machine: the probe's device is read below, and this test is
    # about failures, not devices (on the H200 the kernels saw the GPU, 2026-11-27)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    argv = ["--scale", "smoke", "--out", str(out), "--inplace", "--timeout", "120"]
    assert rn.main(argv) == 0
    good = _digests(root)
    assert {"notebooks/02_flaky.ipynb", "results/smoke/02_flaky.json", "results/smoke/RESULTS.md",
            "results/smoke/wall_times.json", "results/smoke/effects.json"} <= set(good)
    assert not [k for k in good if k.endswith(".png")]  # the figure stays in the notebook
    assert "- figure 1" in (out / "RESULTS.md").read_text().split("## 02_flaky")[-1]
    last_good = json.loads((out / "02_flaky.json").read_text())["date"]
    # the kernel's peak memory, from the probe cell the job appends and then removes
    peak = json.loads((out / "peak_memory.json").read_text())["02_flaky"]
    assert peak["device"] == "cpu" and peak["cuda_reserved_mib"] is None and peak["rss_mib"] > 20
    executed = nbformat.read(root / "notebooks" / "02_flaky.ipynb", as_version=4)
    assert len(executed.cells) == 4 and rn.PROBE_ID not in {c.get("id") for c in executed.cells}
    assert "02_flaky" in (out / "RESULTS.md").read_text().split("## Contents")[1].split(
        "peak memory ")[0] and "GiB (kernel RSS)" in (out / "RESULTS.md").read_text()

    monkeypatch.setenv("FLAKY", "break")
    assert rn.main(argv) == 1
    now = _digests(root)
    assert {k: now.get(k) for k in good} == good, "a good output was changed"
    assert all(k.startswith("results/smoke/failed/") for k in set(now) - set(good))
    kept = out / "failed" / "02_flaky"
    assert (kept / "02_flaky.json").exists()  # it did save new results before it raised
    failed_copy = json.loads((kept / "02_flaky.ipynb").read_text())
    assert "boom midway" in json.dumps(failed_copy)  # the traceback stays
    assert "[figure 1 of 02_flaky: stripped]" in json.dumps(failed_copy)
    assert failed_copy["metadata"]["tutorial_stripped"]["removed_bytes"]["image/png"] > 0
    report = (out / "failed" / "RESULTS.md").read_text()
    section = report.split("## 02_flaky")[-1]
    assert "**Last attempt failed: 02_flaky.**" in report
    assert "`RuntimeError: boom midway`" in section
    assert f"The results shown are the last good ones, from the run of {last_good}." in section
    assert "(02_flaky/02_flaky.ipynb)" in section
    assert "[02_flaky.ipynb](../../../notebooks/02_flaky.ipynb), where they are embedded" in section

    marker = tmp_path / "kernel.pid"
    monkeypatch.setenv("FLAKY", "hang")
    monkeypatch.setenv("FLAKY_MARKER", str(marker))

    def stop_when_hanging() -> None:
        for _ in range(600):
            if marker.exists() and marker.read_text():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.1)

    threading.Thread(target=stop_when_hanging, daemon=True).start()
    assert rn.main(argv) == 130
    now = _digests(root)
    assert {k: now.get(k) for k in good} == good, "a good output was changed"
    assert all(k.startswith("results/smoke/failed/") for k in set(now) - set(good))
    assert rn.INTERRUPTED in (out / "failed" / "RESULTS.md").read_text()
    kernel = int(marker.read_text())
    for _ in range(50):  # the interrupted kernel is shut down
        if not Path(f"/proc/{kernel}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{kernel}").exists(), "the interrupted notebook's kernel still runs"
    assert not (out / ".staging").exists()


# --- an input longer than max_len ---------------------------------------------------------------------


def test_inputs_longer_than_max_len_are_truncated_keeping_cls_else_a_clear_error(smoke):
    backbone = backbones.load_backbone("scratch", smoke)
    long_text = " ".join(["what is the name of the longest river ?"] * 40)
    [ids] = backbone.encode([long_text])
    tokenizer = pretraining.get_tokenizer(smoke)
    max_len = PretrainingSettings.at(smoke).model.max_len
    assert len(ids) == max_len and ids[-1] == tokenizer.cls_token_id
    too_long = torch.full((1, max_len + 1), 5)
    with pytest.raises(ValueError, match=r"sequence length 65 exceeds max_len=64: truncate the "
                                         r"input \(tokenization\.encode_with_cls"):
        backbone.classifier(2)(too_long, torch.ones_like(too_long))


# --- an empty few-shot split ----------------------------------------------------------------------------


def test_an_empty_fewshot_split_is_named_before_anything_is_built(with_data):
    split = tasks.few_shot("trec", k=2, seed=13, test_examples=20)
    empty = dataclasses.replace(split, train=[])

    def build():
        raise AssertionError("nothing may be built or trained for an empty split")

    with pytest.raises(tasks.TaskError, match=r"few-shot split of trec \(K=2, seed=13\) has an "
                                              r"empty train set"):
        fewshot.train_fewshot(build, empty, steps=4, batch_size=4, lr=1e-3, eval_every=2)
    with pytest.raises(tasks.TaskError, match="K and dev_k must be ≥ 1"):
        tasks.few_shot("trec", k=0, seed=13)
    with pytest.raises(tasks.TaskError, match=r"has only \d+ training examples.*smaller K"):
        tasks.few_shot("trec", k=100, seed=13)


# --- a label not in the verbalizer ------------------------------------------------------------------------


def test_a_label_missing_from_the_verbalizer_is_named(tiny_bert):
    with pytest.raises(prompting.PromptError, match=r"the verbalizer has no word for label\(s\) "
                                                    r"\['positive'\]: it maps \{'negative': 'bad'\}"):
        prompting.verbalizer_ids(tiny_bert, {"negative": "bad"}, ["negative", "positive"])
    with pytest.raises(prompting.PromptError, match="word pieces"):
        prompting.verbalizer_ids(tiny_bert, {"negative": "bad", "positive": "xylophonically"},
                                 ["negative", "positive"])


# --- CUDA out of memory ----------------------------------------------------------------------------------


def test_out_of_memory_in_a_training_step_says_what_to_lower_and_keeps_checkpoints(
        smoke, tmp_path, monkeypatch):
    """Simulated: the 13th training forward raises torch.OutOfMemoryError, as CUDA does at a
    scale too large for the GPU."""
    recipe = tiny_recipe(smoke)
    reference = pretraining.pretrain(smoke, "causal", directory=tmp_path / "ref",
        progress=False, settings=recipe)
    real_forward = TransformerLM.forward
    calls = {"train": 0}

    def forward(self, *args, **kwargs):
        if self.training:
            calls["train"] += 1
            if calls["train"] == 13:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(TransformerLM, "forward", forward)
    with pytest.raises(TrainingOutOfMemory) as caught:
        pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False, settings=recipe)
    monkeypatch.undo()
    message = str(caught.value)
    assert isinstance(caught.value, torch.OutOfMemoryError)  # existing handlers still catch it
    assert "out of memory in a training step (batch of 16×32 tokens" in message
    assert "Lower the batch size" in message and "smaller scale" in message
    assert "PretrainingSettings at 'smoke' have batch_size=16, seq_len=32, grad_accum=1" in message
    assert "Checkpoints already written are kept" in message
    [kept] = checkpoints(tmp_path / "run" / "train_state")
    assert kept.name == "training_checkpoint_8.pt" and integrity.problem(kept) is None
    run = pretraining.pretrain(smoke, "causal", directory=tmp_path / "run", progress=False, settings=recipe)
    assert same_weights(reference.model, run.model)
