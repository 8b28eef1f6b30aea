"""scripts/strip_outputs.py: executed copies kept as records (the held-out run, a failed execution)
keep what was printed and lose their figures, HTML and LaTeX (issue 63: the tracked tree travels
with every device call); run_notebooks.py applies it to a failed execution it keeps and, for a
record, when it swaps an executed copy in; it copies no figure out of any notebook."""

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_helpers import load_script

REPO = Path(__file__).resolve().parents[1]


strip_outputs = load_script("strip_outputs")
PNG = base64.b64encode(b"\x89PNG fake").decode()


def _notebook() -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3"}},
            "cells": [
                {"cell_type": "markdown", "source": "# t", "metadata": {}},
                {"cell_type": "code", "source": "plot()", "metadata": {}, "execution_count": 1,
                 "outputs": [
                     {"output_type": "stream", "name": "stdout", "text": "epoch 1: 0.91\n"},
                     {"output_type": "display_data", "metadata": {"image/png": {"width": 600}},
                      "data": {"image/png": PNG, "text/plain": "<Figure size 640x480>"}}]},
                {"cell_type": "code", "source": "table", "metadata": {}, "execution_count": 2,
                 "outputs": [
                     {"output_type": "execute_result", "metadata": {}, "execution_count": 2,
                      "data": {"text/html": "<table>…</table>", "text/plain": "   acc\n0  0.9"}},
                     {"output_type": "display_data", "metadata": {}, "data": {"text/latex": "$x$"}},
                     {"output_type": "display_data", "metadata": {},
                      "data": {"image/png": PNG, "text/plain": "<Figure>"}},
                     {"output_type": "error", "ename": "ValueError", "evalue": "x", "traceback": []}]},
            ]}


def test_rich_outputs_go_what_was_printed_stays_and_the_metadata_says_why():
    nb = strip_outputs.strip(_notebook(), "02_adaptation")
    first, second = nb["cells"][1]["outputs"], nb["cells"][2]["outputs"]
    assert first[0]["text"] == "epoch 1: 0.91\n"  # streams untouched
    assert first[1]["data"] == {"text/plain": "[figure 1 of 02_adaptation: stripped]"}
    assert first[1]["metadata"] == {}
    assert second[0]["data"] == {"text/plain": "   acc\n0  0.9"}  # the table as printed
    assert second[1]["data"] == {"text/plain": "[text/latex stripped]"}
    assert second[2]["data"] == {"text/plain": "[figure 2 of 02_adaptation: stripped]"}
    assert second[3]["ename"] == "ValueError"
    record = nb["metadata"]["tutorial_stripped"]
    assert "issue 63" in record["why"] and "text/plain" in record["why"]
    assert record["removed_bytes"] == {"image/png": 2 * len(json.dumps(PNG)),
                                       "text/html": len(json.dumps("<table>…</table>")),
                                       "text/latex": len(json.dumps("$x$"))}
    again = strip_outputs.strip(json.loads(json.dumps(nb)), "02_adaptation")
    assert again == nb  # stripping twice changes nothing


def test_a_notebook_without_rich_outputs_gets_no_record():
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "text": "hi"}]}],
          "metadata": {}}
    assert "tutorial_stripped" not in strip_outputs.strip(nb, "x")["metadata"]


def test_the_command_strips_in_place_and_refuses_the_teaching_notebooks(tmp_path):
    path = tmp_path / "05_discriminative_lr.ipynb"
    path.write_text(json.dumps(_notebook(), indent=1))
    done = subprocess.run([sys.executable, "scripts/strip_outputs.py", str(path)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert PNG not in path.read_text() and "epoch 1: 0.91" in path.read_text()
    taught = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))[0]
    before = taught.read_bytes()
    done = subprocess.run([sys.executable, "scripts/strip_outputs.py", str(taught)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 1 and "teaching material" in done.stderr
    assert taught.read_bytes() == before


def test_run_notebooks_copies_no_figure_and_strips_the_executed_copy_of_a_record(tmp_path):
    """No figure leaves a notebook (the report points to them in it, issue 63); with ``strip`` (a
    record: the held-out run) the executed copy keeps only what was printed."""
    rn = load_script("run_notebooks")
    stage, out = tmp_path / "stage", tmp_path / "out"
    for strip in (False, True):
        stage.mkdir()
        executed = _notebook()
        (stage / "02_adaptation.ipynb").write_text(json.dumps(executed, indent=1))
        dest = out / "notebooks" / "02_adaptation.ipynb"
        figures = rn.swap_in(stage, out, Path("notebooks/02_adaptation.ipynb"), executed, dest,
                             strip=strip)
        kept = dest.read_text()
        assert not stage.exists() and not (out / "figures").exists()
        if not strip:  # the lesson: the notebook whole, its figures where they lie in it
            assert figures == ["t", "t"] and PNG in kept
    assert figures == [] and "tutorial_stripped" in json.loads(kept)["metadata"] and PNG not in kept


def test_a_failed_execution_is_kept_stripped(tmp_path):
    rn = load_script("run_notebooks")
    stage, out = tmp_path / "stage", tmp_path / "out"
    stage.mkdir()
    (stage / "02_adaptation.ipynb").write_text(json.dumps(_notebook(), indent=1))
    kept = rn.keep_failed(stage, out, Path("notebooks/02_adaptation.ipynb"), "ValueError: x", 1.0)
    record = json.loads((kept / "02_adaptation.ipynb").read_text())
    assert PNG not in json.dumps(record) and record["cells"][2]["outputs"][3]["ename"] == "ValueError"
    assert json.loads((kept / "failure.json").read_text())["error"] == "ValueError: x"
    stage.mkdir()
    (stage / "02_adaptation.ipynb").write_text('{"cells": [')  # cut short: kept as it is
    kept = rn.keep_failed(stage, out, Path("notebooks/02_adaptation.ipynb"), "killed", 1.0)
    assert (kept / "02_adaptation.ipynb").read_text() == '{"cells": ['


def _git(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode == 128:
        pytest.skip(f"not a git work tree here (a copy of the tree): {done.stderr.strip()}")
    return done


def test_the_tracked_results_hold_no_figure_copies_and_no_held_out_executed_copies():
    """Issue 63 (the tracked tree travels with every device call): no PNG copies under results/,
    and the held-out run's executed copies stay outside the tree (git-ignored), its results JSON
    (what benchmarks/replicate.py reads) tracked; an executed copy tracked as a record (a failed
    execution) has no embedded figures or HTML (re-strip with the command)."""
    tracked = _git("ls-files", "results").stdout.splitlines()
    assert [p for p in tracked if p.startswith("results/classroom/held-out/") and p.endswith(".json")]
    assert not [p for p in tracked if p.endswith(".png") or "/held-out/notebooks/" in p]
    probes = ["results/classroom/figures/02_adaptation_01.png", "results/gpu/figures/01_pretraining_01.png",
              "results/classroom/held-out/figures/x.png",
              "results/classroom/held-out/notebooks/02_adaptation.ipynb"]
    assert _git("check-ignore", "--no-index", *probes).stdout.split() == probes
    rn = load_script("run_notebooks")
    held_out_copy, lesson = REPO / probes[-1], REPO / "notebooks" / "02_adaptation.ipynb"
    assert rn.git_ignored([held_out_copy, lesson]) == {held_out_copy}  # the report links only the lesson
    records = [REPO / p for p in tracked if p.endswith(".ipynb") and "/failed/" in p]
    for path in records:
        nb = json.loads(path.read_text())
        kinds = {k for cell in nb["cells"] for out in cell.get("outputs", []) for k in out.get("data", {})}
        assert kinds <= {"text/plain"}, (f"{path.name} holds {sorted(kinds - {'text/plain'})}: run "
                                         f"python scripts/strip_outputs.py {path.relative_to(REPO)}")
