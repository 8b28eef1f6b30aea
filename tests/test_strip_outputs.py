"""scripts/strip_outputs.py: executed copies kept as records (the held-out run) keep what was
printed and lose their figures, HTML and LaTeX (issue 63: the tracked tree travels with every
device call); run_notebooks.py applies it when it swaps an executed copy in, and keeps no figures."""

import base64
import json
import subprocess
import sys
from pathlib import Path

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


def test_run_notebooks_strips_the_executed_copy_and_keeps_no_figures(tmp_path):
    rn = load_script("run_notebooks")
    stage, out = tmp_path / "stage", tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "02_adaptation_01.png").write_bytes(b"an older run's")
    for strip in (False, True):
        stage.mkdir()
        executed = _notebook()
        (stage / "02_adaptation.ipynb").write_text(json.dumps(executed, indent=1))
        dest = out / "notebooks" / "02_adaptation.ipynb"
        figures = rn.swap_in(stage, out, Path("notebooks/02_adaptation.ipynb"), executed, dest,
                             strip=strip)
        kept = dest.read_text()
        if not strip:  # as before: figures extracted, the notebook whole
            assert [f.name for f in figures] == ["02_adaptation_01.png", "02_adaptation_02.png"]
            assert figures[0].read_bytes() == b"\x89PNG fake" and PNG in kept
    assert figures == [] and not list((out / "figures").iterdir())  # the older ones went too
    assert "tutorial_stripped" in json.loads(kept)["metadata"] and PNG not in kept


def test_the_committed_held_out_notebooks_are_stripped():
    """The held-out run's executed copies: no embedded figures or HTML (re-strip with the command),
    and no figures beside them."""
    held = sorted(REPO.glob("results/*/held-out/notebooks/*.ipynb"))
    assert held and not list(REPO.glob("results/*/held-out/figures/*"))
    for path in held:
        nb = json.loads(path.read_text())
        kinds = {k for cell in nb["cells"] for out in cell.get("outputs", []) for k in out.get("data", {})}
        assert kinds <= {"text/plain"}, (f"{path.name} holds {sorted(kinds - {'text/plain'})}: run "
                                         f"python scripts/strip_outputs.py {path.relative_to(REPO)}")
