"""Checks on the committed notebooks (their execution is tested by nbval in the same run)."""

import ast
import importlib
import io
import re
import subprocess
import sys
import tokenize
import warnings
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from tutorial_lib import COLAB_REF, REPO_SLUG, stats
from tutorial_lib.methods import NOTEBOOK_SETTINGS

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_notebooks_exist_in_sequence():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers[:2] == [1, 2] and numbers == sorted(set(numbers))


def test_colab_badges_and_setup_cells_match_the_one_repo_url():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "sync_notebooks.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if proc.stdout.strip():  # setup cells of a superseded template: accepted until the next sync
        warnings.warn(proc.stdout.strip(), stacklevel=1)


def test_readme_lists_every_notebook_with_its_colab_badge():
    readme = (REPO / "README.md").read_text()
    for nb in NOTEBOOKS:
        url = f"colab.research.google.com/github/{REPO_SLUG}/blob/{COLAB_REF}/notebooks/{nb.name}"
        assert url in readme, f"README has no Colab badge for {nb.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_reads_the_scale_and_prints_the_environment_first(path):
    nb = nbformat.read(path, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "google.colab" in code[0]
    assert "config.get_scale()" in code[1] and "runtime.describe(scale)" in code[1]
    # after the generated Colab cell (which may pick the gpu scale), no cell names the scale
    joined = "\n".join(code[1:])
    # comments may explain the variable; code must not set or read it (get_scale does)
    assert "TUTORIAL_SCALE" not in "\n".join(_without_comments(c) for c in code[1:])
    assert "results.save(" in joined, "every notebook saves its results table for the summary"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_come_from_a_classroom_run(path):
    """Readers on GitHub/Colab see real figures: every notebook is committed executed, at classroom
    scale, without errors, every code cell run in order."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    header = "".join(o.get("text", "") for o in code[1].get("outputs", []))
    assert "scale      : classroom" in header, f"{path.name}: not executed at classroom scale"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: committed with an error output"
    images = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, f"{path.name}: no figure in the committed outputs"
    counts = [c.get("execution_count") for c in code]
    assert all(counts) and counts == sorted(counts), f"{path.name}: cells not all run in order"


def _python(source: str) -> str:
    """A cell's source with IPython's ``%magic`` and ``!shell`` lines made ``pass`` (same indent)."""
    return "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in source.splitlines())


def _without_comments(source: str) -> str:
    """The cell's code less its comments; ``%magic`` / ``!shell`` lines kept as they are."""
    magics = [line for line in source.splitlines() if line.lstrip().startswith(("%", "!"))]
    tokens = tokenize.generate_tokens(io.StringIO(_python(source)).readline)
    code = tokenize.untokenize((t.type, t.string) for t in tokens if t.type != tokenize.COMMENT)
    return "\n".join([code, *magics])


def _stale_names(path: Path) -> list[str]:
    """``tutorial_lib`` imports and module attributes a notebook uses that the package lacks."""
    nb = nbformat.read(path, as_version=4)
    modules, missing = {}, set()
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        tree = ast.parse(_python(cell.source))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tutorial_lib"):
                for alias in node.names:
                    try:
                        obj = importlib.import_module(f"{node.module}.{alias.name}")
                    except ModuleNotFoundError:
                        obj = getattr(importlib.import_module(node.module), alias.name, None)
                    if obj is None:
                        missing.add(f"from {node.module} import {alias.name}")
                    else:
                        modules[alias.asname or alias.name] = obj
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and hasattr(modules[node.value.id], "__file__")
                    and not hasattr(modules[node.value.id], node.attr)):
                missing.add(f"{node.value.id}.{node.attr}")
    return sorted(missing)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_uses_only_names_the_package_has(path):
    """Static and instant: a module or function the package no longer has (moved or renamed)
    fails here, before a notebook runs."""
    assert _stale_names(path) == []


SETTINGS_OF = {cls.notebook: cls for cls in NOTEBOOK_SETTINGS}


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem in SETTINGS_OF],
                         ids=lambda p: p.stem)
def test_notebook_reads_its_own_settings(path):
    """Sizes come from the notebook's own settings class (``settings = DARTSettings.at(scale)``),
    never typed into a cell; no notebook reads another's class."""
    cls = SETTINGS_OF[path.stem]
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    chapter = cls.__module__.removeprefix("tutorial_lib.")  # methods.<chapter>.settings
    assert f"from tutorial_lib.{chapter} import {cls.__name__}\n" in code, path.stem
    assert re.search(rf"^settings = {cls.__name__}\.at\(scale\)", code, re.M), path.stem
    # … and saves its results through it, never under a name typed into a cell
    assert re.search(r"results\.save\(settings,\s", code), path.stem  # its scale with it
    assert [c.__name__ for c in NOTEBOOK_SETTINGS if c is not cls and c.__name__ in code] == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebooks_show_no_machine_paths(path):
    """Outputs and sources never show where the run happened (a staging folder, a home directory):
    e.g. a ``results.save(...)`` cell must end with ``;`` so the returned path is not echoed."""
    text = path.read_text()
    found = sorted(set(re.findall(r"/(?:work|root|home|tmp)/[\w./-]+", text)))
    assert not found, f"{path.name} shows machine paths: {found[:3]}"


RUN_TIME = re.compile(r"Run time at classroom scale on 2 CPU cores: ([\d.]+) minutes in the committed run")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_header_that_states_its_run_time_quotes_the_committed_run(path):
    """14–16's headers once said "about 8 minutes (an estimate)"; a header that states its time
    now quotes the committed classroom run (``wall_times.json``), so a re-run that changes it
    fails here until the header follows."""
    import json

    text = " ".join(c.source for c in nbformat.read(path, as_version=4).cells
                    if c.cell_type == "markdown").replace("\n", " ")
    assert "an estimate until the classroom run" not in text and "estimated from timed" not in text
    times = json.loads((REPO / "results" / "classroom" / "wall_times.json").read_text())
    for quoted in RUN_TIME.findall(text):
        assert quoted == f"{times[path.stem] / 60:.1f}", (path.stem, quoted)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_holm_family_per_notebook(path):
    """A notebook's Holm family is the effects it saves (``results.save`` names it, the report reads
    it): a cell may show that family once (``results.holm_family``, or 18's closing table of the
    same tests), never build a second one."""
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    families = len(re.findall(r"\bholm(?:_family)?\(", code))
    assert families <= 1, f"{path.stem} computes {families} Holm families"


def test_no_table_adjusts_over_its_own_tests():
    table = stats.compare(pd.DataFrame({"method": ["a"] * 2 + ["b"] * 2, "seed": [0, 1] * 2,
                                        "test_error": [0.1, 0.2, 0.3, 0.35]}), "a", floor=False)
    assert "Holm p" not in table and "Holm" not in stats.sentences(table)
