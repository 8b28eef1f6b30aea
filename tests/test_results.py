"""The main job's results report: saving, where the figures lie, RESULTS.md, and the report of this
test run's notebooks (executed once, by nbval)."""

import base64
import importlib.util
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tutorial_lib import config, results, stats
from tutorial_lib.methods import NOTEBOOK_SETTINGS, references
from tutorial_lib.ops import report as reports

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIGURE_LINK = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
SESSION_START = time.time()  # imported at collection: results saved after it are this run's
# set by scripts/test.sh (a Unix time) when the notebooks ran in an earlier pytest call of the run
RAN_SINCE_ENV_VAR = "TUTORIAL_NOTEBOOKS_RAN_SINCE"


def sections(report: str) -> dict[str, str]:
    """``{heading: body}`` for the report's level-2 sections, in order."""
    parts = re.split(r"^## (.+)$", report, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def fake_notebook(n_images: int) -> dict:
    png = base64.b64encode(b"\x89PNG fake").decode()
    outputs = [{"output_type": "display_data", "data": {"image/png": png, "text/plain": "<Figure>"}}
               for _ in range(n_images)]
    return {"cells": [{"cell_type": "markdown", "source": "# x"},
                      {"cell_type": "code", "source": "plot()", "outputs": outputs},
                      {"cell_type": "code", "source": "1", "outputs": [{"output_type": "stream"}]}]}


@pytest.fixture
def results_env(tmp_path, monkeypatch):
    monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path))
    monkeypatch.delenv(config.SEEDS_ENV_VAR, raising=False)  # the main seed set
    return tmp_path


def test_save_records_the_seeds_or_flags_that_none_were_given(results_env):
    scale = config.get_scale("smoke")
    table = pd.DataFrame({"method": ["a"], "error": [0.5]}).set_index("method")
    path = results.save("02_adaptation", {"t": table}, scale=scale,
                        seeds={"MiniLM": (np.int64(0),), "small": [0, 1]})
    assert path == results_env / "02_adaptation.json"
    blob = json.loads(path.read_text())
    assert blob["seeds"] == {"MiniLM": [0], "small": [0, 1]} and blob["seeds_source"] == "notebook"
    assert blob["scale"] == "smoke" and blob["environment"].startswith("scale      : smoke")
    assert blob["seed_set"] == "main"  # which seed set produced it ($TUTORIAL_SEEDS unset)
    blob = json.loads(results.save("03_x", {"t": table}, scale=scale).read_text())
    assert blob["seeds"] == [] and blob["seeds_source"] == "not recorded"
    assert blob["tables"]["t"]["records"] == [{"method": "a", "error": 0.5}]
    assert blob["effects"] == []
    assert not list(results_env.glob(".*.tmp")), "written atomically"
    report = reports.report_markdown(results_env, ["03_x"])
    assert "- seeds: not recorded (the notebook did not pass its seeds" in report


def test_results_go_to_the_cache_without_the_env_var(monkeypatch, tmp_path):
    monkeypatch.delenv(results.RESULTS_ENV_VAR, raising=False)
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    assert results.results_dir(config.get_scale("smoke")) == tmp_path / "smoke" / "results"
    assert results.RESULTS_ENV_VAR == config.RESULTS_ENV_VAR


def test_seeds_of_reads_the_runs_table():
    table = pd.DataFrame({"backbone": ["s", "s", "p", "p", "m"], "seed": [1, 0, 0, 1, 0]})
    assert results.seeds_of(table) == [0, 1]
    assert results.seeds_of(table, by="backbone") == {"s": [0, 1], "p": [0, 1], "m": [0]}
    assert results.seeds_of(table[table.backbone != "m"], by="backbone") == [0, 1]


def comparison() -> pd.DataFrame:
    runs = pd.DataFrame({"method": ["base"] * 3 + ["new"] * 3, "seed": [0, 1, 2] * 2,
                         "test_error": [0.30, 0.20, 0.40, 0.28, 0.18, 0.39]})
    return stats.compare(runs, "base")


def test_effects_are_the_comparisons_rows_and_saved_with_the_notebook(results_env):
    table = comparison()
    records = results.effects(table, metric="TREC-6 test error", backbone="ours", expected="+",
                              source="ULMFiT Table 3")
    assert len(records) == 1
    e = records[0]
    assert (e["method"], e["baseline"], e["backbone"], e["expected"]) == ("new", "base", "ours", "+")
    assert e["delta"] == pytest.approx(round(table.loc["new", "Δ (points)"], 3))
    assert e["unit"] == "points" and e["test"] == "paired t" and e["verdict"] == table.loc["new", "verdict"]
    assert e["ci95"] == table.loc["new", "95% CI"] and e["p"] == pytest.approx(table.loc["new", "p"])
    scores = results.effects(table, metric="accuracy", backbone="ours", higher_is_better=True)
    assert scores[0]["metric"] == "accuracy (higher is better)"
    path = results.save("04_x", {"t": table}, scale=config.get_scale("smoke"), seeds=[0, 1, 2],
                        effects=records)
    saved = json.loads(path.read_text())["effects"]
    assert saved == [{"notebook": "04_x", **json.loads(json.dumps(e))} for e in records]
    report = reports.report_markdown(results_env, ["04_x"])
    glance = sections(report)["Results at a glance"]
    assert "ULMFiT Table 3" in glance and "paired t" in glance and "| new " in glance


def test_report_without_effects_has_no_glance_section(tmp_path):
    _write(tmp_path, "02_adaptation")
    assert "Results at a glance" not in reports.report_markdown(tmp_path, ["02_adaptation"])


def test_notebook_figures_are_numbered_in_cell_order_under_their_section():
    nb = fake_notebook(2)
    nb["cells"] = [{"cell_type": "code", "source": "early()", "outputs": nb["cells"][1]["outputs"][:1]},
                   *nb["cells"],
                   {"cell_type": "markdown", "source": ["Some text\n", "## Curves\n", "more"]},
                   {"cell_type": "markdown", "source": "no heading here"},
                   {"cell_type": "code", "source": "plot()", "outputs": [
                       {"output_type": "stream", "text": "# not a heading"},
                       *nb["cells"][1]["outputs"][:1]]}]
    assert reports.notebook_figures(nb) == ["", "x", "x", "Curves"]
    assert reports.notebook_figures(fake_notebook(0)) == []


def test_report_tables_carry_no_padding_and_render_the_same(tmp_path):
    """pandas pads every cell to its column's widest (half of RESULTS.md was spaces and dashes,
    issue 63): the report writes each row compact, with the same cells and alignment colons."""
    padded = pd.DataFrame({"method": ["a", "a much longer name", "-"],
                           "error": [0.5, 12.25, 3.0]}).to_markdown(index=False)
    assert "a    " in padded and "|:---------" in padded  # what pandas writes
    _write(tmp_path, "02_adaptation", tables={"t": {"markdown": padded, "records": [{}] * 3}})
    report = reports.report_markdown(tmp_path, ["02_adaptation"])
    assert ("| method | error |\n| :--- | ---: |\n| a | 0.5 |\n| a much longer name | 12.25 |\n"
            "| - | 3 |") in report
    rows = [line for line in report.splitlines() if line.startswith("|")]
    assert rows and not [r for r in rows if "  " in r or "----" in r]
    assert "hardware   : CPU test" in report  # fenced blocks keep their spaces
    assert reports.compact_tables(report) == report


def test_references_mark_recalled_numbers_unverified():
    assert references.REFERENCES
    for ref in references.REFERENCES:
        assert ref.notebook in {c.notebook for c in NOTEBOOK_SETTINGS}  # a file name
        if "recalled" in ref.source.lower() or "recalled" in ref.note.lower():
            assert not ref.verified, ref
    table = references.table("09_dart")
    assert len(table) and set(table["verified?"]) == {"**unverified**"}
    assert references.table("10_probing").empty


def _write(directory: Path, name: str, **extra) -> None:
    blob = {"notebook": name, "scale": "smoke", "date": "2026-01-01 00:00 UTC",
            "environment": "scale      : smoke\nhardware   : CPU test", "notes": "",
            "tables": {"main table": {"markdown": "| a |\n|---|\n| 0.123 |", "records": [{"a": 0.123}]},
                       "runs": {"markdown": "| long |", "records": [{}] * 40}}}
    blob.update(extra)
    (directory / f"{name}.json").write_text(json.dumps(blob))


def test_report_has_every_notebooks_section_references_and_figures(tmp_path):
    names = ["01_pretraining", "02_adaptation", "09_dart", "10_probing"]
    _write(tmp_path, "01_pretraining", seeds=[0, 1], seeds_source="scale default")
    _write(tmp_path, "02_adaptation", seeds={"small": [0, 1, 2], "MiniLM": [0]},
           seeds_source="notebook", notes="a note from the run")
    _write(tmp_path, "09_dart", seeds=[13, 21], seeds_source="notebook")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "02_adaptation.ipynb").write_text(json.dumps(fake_notebook(2)))
    (tmp_path / "notebooks" / "09_dart.ipynb").write_text(json.dumps(fake_notebook(0)))
    report = reports.report_markdown(tmp_path, names, {"02_adaptation": 12.3},
                                     links={"02_adaptation": "notebooks/02_adaptation.ipynb",
                                            "09_dart": "notebooks/09_dart.ipynb"})
    by_name = sections(report)
    assert [h for h in by_name if h[:2].isdigit()] == names
    for name in names:
        assert f"- [{name}](#{name})" in by_name["Contents"]
    assert "hardware   : CPU test" in by_name["Environment"]

    one, two, nine, ten = (by_name[n] for n in names)
    assert "0.123" in two and "small: 0, 1, 2; MiniLM: 0" in two and "12 s" in two
    assert "a note from the run" in two and "(notebooks/02_adaptation.ipynb)" in two
    assert "<details>" in two  # the 40-row table is folded
    assert "the notebook did not record" in one  # seeds from the scale default are flagged
    # reference numbers beside the results, with their verification status
    assert "≈ 29 ppl" in one and "| yes " in one
    assert "3.6 %" in two and "**unverified**" in two
    assert "93.5 (0.5)" in nine and "**unverified**" in nine
    # a notebook without results still has its section
    assert "No results" in ten and "10_probing.json" in ten and "None: the reference notes" in ten
    # the figures are pointed to in the executed notebook, not copied beside the report (issue 63)
    assert not FIGURE_LINK.findall(report) and not (tmp_path / "figures").exists()
    assert ("### Figures\n\nIn the executed notebook [02_adaptation.ipynb](notebooks/02_adaptation.ipynb)"
            in two)
    assert "- figure 1, under “x”\n- figure 2, under “x”\n" in two
    assert "Figures" not in nine and "Figures" not in one  # none drawn; no executed notebook


def test_report_says_which_sections_are_from_earlier_runs_and_which_failed(tmp_path):
    names = ["01_pretraining", "02_adaptation", "03_adapters_and_freezing"]
    _write(tmp_path, "01_pretraining")
    _write(tmp_path, "02_adaptation")
    report = reports.report_markdown(tmp_path, names, this_run=["02_adaptation", "03_adapters_and_freezing"],
                                     failures={"03_adapters_and_freezing": "RuntimeError: boom"})
    by_name = sections(report)
    header = report.split("## Environment")[0]
    assert "sections of 01_pretraining come from earlier runs" in header
    assert "Last attempt failed: 03_adapters_and_freezing" in header
    assert "an earlier run" in by_name["01_pretraining"]
    assert "an earlier run" not in by_name["02_adaptation"]
    assert "RuntimeError: boom" in by_name["03_adapters_and_freezing"]
    assert "No results" in by_name["03_adapters_and_freezing"]


def test_a_failed_notebook_shows_its_last_good_results_said_to_be_so(tmp_path):
    """Failures recorded under failed/ (as the main job keeps them) are read by default; the
    section shows the last good run's tables and date, the error and the failed execution."""
    names = ["01_pretraining", "02_adaptation"]
    _write(tmp_path, "01_pretraining")
    _write(tmp_path, "02_adaptation", date="2026-01-02 03:04 UTC")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "02_adaptation.ipynb").write_text(json.dumps(fake_notebook(1)))
    reports.record_failure(tmp_path, "02_adaptation", "DataError: cannot load trec: offline", 3.0,
                           date="2026-02-01 00:00 UTC")
    (reports.failed_dir(tmp_path, "02_adaptation") / "02_adaptation.ipynb").write_text("{}")
    assert set(reports.read_failures(tmp_path)) == {"02_adaptation"}
    report = reports.report_markdown(tmp_path, names, this_run=["02_adaptation"],
                                     links={"02_adaptation": "../notebooks/02_adaptation.ipynb"},
                                     at=tmp_path / reports.FAILED_DIR)
    two = sections(report)["02_adaptation"]
    assert "Last attempt failed: 02_adaptation" in report.split("## Environment")[0]
    assert "**Last attempt failed** (2026-02-01 00:00 UTC): `DataError: cannot load trec: offline`" in two
    assert "The results shown are the last good ones, from the run of 2026-01-02 03:04 UTC." in two
    assert "(02_adaptation/02_adaptation.ipynb)" in two and "0.123" in two
    # the last good run's figures, in its executed notebook, linked from where the report lies
    assert "[02_adaptation.ipynb](../notebooks/02_adaptation.ipynb), where they are embedded" in two
    assert "last attempt failed" in sections(report)["Contents"]
    assert "Last attempt failed" not in sections(report)["01_pretraining"]
    reports.clear_failure(tmp_path, "02_adaptation")
    assert not (tmp_path / reports.FAILED_DIR).exists()
    assert "failed" not in reports.report_markdown(tmp_path, names).lower()


def _run_notebooks_module():
    spec = importlib.util.spec_from_file_location("run_notebooks_for_report",
                                                  REPO / "scripts" / "run_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.after_notebooks
def test_every_notebook_of_this_test_run_saved_its_results_and_the_report_shows_them(request,
                                                                                     tmp_path):
    """The notebooks run once per test run, under nbval (scripts/test.sh points
    TUTORIAL_RESULTS_DIR at a fresh folder); this test runs after them (``after_notebooks``; in
    scripts/test.sh a second pytest call, as the first one runs on two xdist workers),
    requires every one of them to have saved its results during this session, and builds
    RESULTS.md from those outputs with the main job's own ``--report-only``. (The main job's
    staging, swap and figure extraction run on a synthetic notebook in
    tests/test_faults.py::test_a_failed_main_job_run_keeps_the_last_good_results_byte_identical.)"""
    since = os.environ.get(RAN_SINCE_ENV_VAR)
    if since:  # scripts/test.sh: the notebooks ran in the pytest call before this one
        ran, started = NOTEBOOKS, float(since)
    else:  # one pytest call that also collected notebooks
        ran = [nb for nb in NOTEBOOKS
               if any(Path(str(item.path)) == nb for item in request.session.items)]
        started = SESSION_START
    if not ran:
        pytest.skip("no notebook is part of this test run (scripts/test.sh runs them with nbval)")
    saved_in = results.results_dir(config.get_scale("smoke"))
    fresh = {nb.stem: saved_in / f"{nb.stem}.json" for nb in ran}
    stale = [stem for stem, path in fresh.items()
             if not path.exists() or path.stat().st_mtime < started]
    assert not stale, (f"{', '.join(stale)} saved no results in this test run (into {saved_in}): "
                       "a notebook must end with results.save")
    out = tmp_path / "smoke"
    out.mkdir()
    for path in fresh.values():
        shutil.copy2(path, out / path.name)
    assert _run_notebooks_module().main(["--scale", "smoke", "--out", str(out), "--report-only"]) == 0

    report = (out / reports.REPORT_NAME).read_text()
    by_name = sections(report)
    assert [h for h in by_name if h[:2].isdigit()] == [nb.stem for nb in NOTEBOOKS]
    for nb in ran:
        body = by_name[nb.stem]
        assert "- scale: **smoke**" in body and "No results" not in body, nb.stem
        assert "### " in body.split("### Reference numbers")[0], f"{nb.stem}: no result table"
    assert "Last attempt failed" not in report
    effects = json.loads((out / reports.EFFECTS_NAME).read_text())
    assert {e["notebook"] for e in effects} <= {nb.stem for nb in ran}


# --- issue 21: guards, multiplicity and replication in effects.json and RESULTS.md ---------------


def _guarded_comparison(baseline_scores: list[float]) -> pd.DataFrame:
    runs = pd.DataFrame({"method": ["head"] * 3 + ["prompt"] * 3, "seed": [0, 1, 2] * 2,
                         "test_accuracy": baseline_scores + [0.75, 0.77, 0.76]})
    return stats.compare(runs, "head", column="test_accuracy", higher_is_better=True,
                         floor=stats.Floor(0.51), starts={"prompt": 0.70})


def test_effects_carry_the_guard_and_a_void_verdict_is_computed(results_env):
    void = results.effects(_guarded_comparison([0.53, 0.49, 0.52]), metric="sst2 accuracy",
                           backbone="x", higher_is_better=True)[0]
    assert void["verdict"] == stats.VOID_AT_CHANCE and void["guarded"] is True
    assert void["floor"] == pytest.approx(51.0) and void["floor_p"] > 0.05
    assert void["start"] == pytest.approx(70.0) and void["start_p"] < 0.05
    assert void["n"] == 3 and void["df"] == 2 and void["se"] > 0
    ok = results.effects(_guarded_comparison([0.60, 0.62, 0.61]), metric="sst2 accuracy",
                         backbone="x", higher_is_better=True)[0]
    assert ok["verdict"] == "better" and ok["floor_p"] < 0.05
    # se is the CI's half-width over the t quantile (the CI printed to 2 decimals)
    low, high = (float(x) for x in ok["ci95"].strip("[]").split(","))
    assert ok["se"] == pytest.approx((high - low) / 2 / 4.302653, abs=1e-3)
    unguarded = results.effects(comparison(), metric="m", backbone="x")[0]
    assert unguarded["guarded"] is False and unguarded["floor"] is None
    path = results.save("09_x", {"t": comparison()}, scale=config.get_scale("smoke"), seeds=[0, 1, 2],
                        effects=[void, ok])
    saved = json.loads(path.read_text())["effects"]
    assert [e["verdict"] for e in saved] == [stats.VOID_AT_CHANCE, "better"]
    report = reports.report_markdown(results_env, ["09_x"])
    assert "void: baseline at chance" in sections(report)["Results at a glance"]
    assert "51 (p = " in sections(report)["Results at a glance"]  # the floor beside the verdict


def test_effects_json_and_the_report_give_holm_p_per_notebook_family(tmp_path):
    raw = [0.01, 0.04, 0.03, 0.005]
    effects_a = [{"method": f"m{i}", "baseline": "b", "metric": "err", "backbone": "x",
                  "delta": -1.0, "unit": "points", "ci95": "", "p": p, "test": "paired t",
                  "verdict": "better", "expected": "none", "source": ""} for i, p in enumerate(raw)]
    effects_b = [{**effects_a[0], "p": 0.04, "notebook": "03_adapters_and_freezing"}]
    _write(tmp_path, "02_adaptation", effects=[{"notebook": "02_adaptation", **e} for e in effects_a])
    _write(tmp_path, "03_adapters_and_freezing", effects=effects_b)
    names = ["02_adaptation", "03_adapters_and_freezing"]
    out = reports.effects_of(tmp_path, names)
    assert [e["p_holm"] for e in out[:4]] == pytest.approx(stats.holm(raw))
    assert [e["p_holm"] for e in out[:4]] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert out[4]["p_holm"] == pytest.approx(0.04) and out[4]["family"] == 1  # its own family
    assert {e["family"] for e in out[:4]} == {4}
    report = reports.report_markdown(tmp_path, names)
    multiplicity = sections(report)["Multiplicity"]
    assert "| 02_adaptation | 4 | 4 | 2 | 0 | 4 |" in multiplicity
    assert "m1 vs b (err): better at p = 0.04, Holm p = 0.06" in multiplicity
    header = sections(report)["Results at a glance"].split("| notebook", 1)[1].splitlines()[0]
    columns = [c.strip() for c in header.split("|")]
    assert columns[columns.index("p") + 1] == "p_holm"


def _effect(notebook, method, baseline, metric, delta, ci, verdict, n=5, test="paired t"):
    low, high = (float(x) for x in ci.strip("[]").split(","))
    df = n - 1
    se = (high - low) / 2 / float(stats.sps.t.ppf(0.975, df))
    return {"notebook": notebook, "method": method, "baseline": baseline, "metric": metric,
            "backbone": "x", "delta": delta, "unit": "points", "ci95": ci, "p": 0.5, "test": test,
            "verdict": verdict, "expected": "none", "source": "", "n": n, "df": df, "se": se}


def test_every_effect_carries_its_mde_and_a_null_inside_it_its_bound(tmp_path):
    """The MDE comes from the record's standard error and df alone (so effects saved before it
    existed get it too); a within-noise CI inside ±MDE gives the equivalence bound."""
    narrow = _effect("02_adaptation", "a", "b", "err", 0.1, "[-0.50, +0.70]", stats.WITHIN_NOISE)
    wide = _effect("02_adaptation", "c", "b", "err", 3.0, "[-2.00, +8.00]", stats.WITHIN_NOISE)
    [a, c] = reports.with_power([narrow, wide])
    assert a["mde"] == pytest.approx(stats.minimum_detectable_effect(narrow["se"], 4), abs=1e-3)
    assert a["no_larger_than"] == pytest.approx(0.7) and c["no_larger_than"] is None
    assert c["mde"] < 8.0  # the CI reaches past the MDE: no bound
    _write(tmp_path, "02_adaptation", effects=[narrow, wide])
    body = sections(reports.report_markdown(tmp_path, ["02_adaptation"]))["What the nulls could have seen"]
    assert "2 of 2 effects are within noise" in body and f"| {a['mde']:.2f} | \\|Δ\\| ≤ 0.70 |" in body


def test_a_source_effect_is_called_below_our_mde_or_not_seen_and_gets_its_runs(tmp_path):
    """03's adapters (the slides: +0.4 points of error) and 04's gradual unfreezing (+1.6): an MDE
    above the source's Δ says the run could not have seen it; below it, with a null, the run is
    evidence against that size."""
    below = _effect("03_adapters_and_freezing", "adapters m=64", "full fine-tuning",
                    "TREC-6 test error", 0.27, "[-0.77, +1.30]", stats.WITHIN_NOISE, n=3)
    against = _effect("04_gradual_unfreezing", "gradual unfreezing", "full fine-tuning",
                      "TREC-6 test error", 0.07, "[-0.40, +0.54]", stats.WITHIN_NOISE, n=3)
    [b, a] = reports.with_power([below, against])
    assert b["source_delta"] == pytest.approx(0.4) and b["source_vs_run"] == reports.SOURCE_BELOW
    assert a["source_delta"] == pytest.approx(1.6) and a["source_vs_run"] == reports.SOURCE_EXCLUDED
    assert b["runs_for_source"] > 3 and a["runs_for_source"] <= 3
    wide = reports.with_power([{**against, "delta": 0.5, "ci95": "[-0.90, +1.90]", "se": 0.3,
                                "df": 2.0, "mde": 1.2, "no_larger_than": None}])[0]
    assert wide["source_vs_run"] == reports.SOURCE_NOT_SEEN  # above the MDE, inside the CI
    # 08's TDT in domain: the CI [-0.11, +1.33] excludes the paper's -0.5 although the MDE (1.6)
    # is larger: evidence against it, not "below our MDE" (issue 58)
    tdt_first = reports.with_power([_effect("08_tdt", "TDT", "fine-tuning", "sst2 dev (in-domain) error",
                                            0.61, "[-0.11, +1.33]", stats.WITHIN_NOISE, n=3)])[0]
    assert tdt_first["mde"] > 0.5 and tdt_first["source_vs_run"] == reports.SOURCE_EXCLUDED
    assert b["source_verified"] and a["source_verified"]  # the slides' own numbers
    tdt = reports.with_power([_effect("08_tdt", "TDT", "fine-tuning", "sst2 dev (in-domain) error",
                                      -1.0, "[-4, +2]", stats.WITHIN_NOISE)])[0]
    assert tdt["source_verified"] is False  # recalled: the report marks it unverified
    assert "-0.50 (**unverified**)" in reports.power_markdown([tdt])
    kd = reports.with_power([_effect("13_forgetting_and_distillation", "KD", "hard labels",
                                     "student (2 layers) test accuracy", 2.0, "[-8, +12]",
                                     stats.WITHIN_NOISE)])[0]
    assert kd["source_verified"] is True  # checked by the teaching review of 2026-11-27
    assert "+0.72 |" in reports.power_markdown([kd])
    unrelated = reports.with_power([_effect("02_adaptation", "x", "y", "err", 1.0, "[-1, +3]",
                                            stats.WITHIN_NOISE)])[0]
    assert "source_delta" not in unrelated


def test_every_source_effect_finds_its_record_in_the_committed_classroom_effects():
    """A renamed method or metric (13's students went from 2 layers to 1) would drop a source's
    number from the report and the gpu seed plan without a word: each must match a record."""
    records = json.loads((REPO / "results" / "classroom" / "effects.json").read_text())
    for source in references.SOURCE_EFFECTS:
        assert any(references.source_effect(r) == source for r in records), source


def test_report_shows_the_replication_table_when_replication_json_exists(tmp_path):
    _write(tmp_path, "02_adaptation")
    assert "Held-out replication" not in reports.report_markdown(tmp_path, ["02_adaptation"])
    blob = {"definition": "Replicated: same sign and the held-out 95 % CI excludes zero.",
            "seed_rule": "seed + 1000", "first_dir": "results/classroom",
            "held_out_dir": "results/classroom/held-out", "date": "2026-11-24",
            "effects": [{"notebook": "02_adaptation", "method": "ours", "baseline": "scratch",
                         "metric": "err", "status": "replicated",
                         "first": {"delta": -7.27, "ci95": "[-11.88, -2.65]", "p": 0.021,
                                   "verdict": "better"},
                         "held_out": {"delta": -5.0, "ci95": "[-9.00, -1.00]", "p": 0.04,
                                      "verdict": "better"},
                         "pooled": {"delta": -6.1, "p": 0.002}}]}
    (tmp_path / reports.REPLICATION_NAME).write_text(json.dumps(blob))
    body = sections(reports.report_markdown(tmp_path, ["02_adaptation"]))["Held-out replication"]
    assert "same sign and the held-out 95 % CI excludes zero" in body and "seed + 1000" in body
    assert "| 02_adaptation | ours vs scratch |" in body and "| replicated |" in body
    assert "-7.27 [-11.88, -2.65], p = 0.021 → better" in body and "replicated: 1" in body


def test_peak_memory_text_and_the_t4_rule():
    cpu = {"device": "cpu", "cuda_allocated_mib": None, "cuda_reserved_mib": None,
           "cuda_context_mib": None, "rss_mib": 3072.0}
    assert reports.peak_memory_text(cpu) == "peak memory 3.00 GiB (kernel RSS)"
    assert reports.fits_t4(cpu) is None
    gpu = {"device": "NVIDIA H100 80GB HBM3", "cuda_allocated_mib": 12000.0,
           "cuda_reserved_mib": 14900.0, "cuda_context_mib": 600.0, "rss_mib": 5000.0}
    assert reports.fits_t4(gpu) is False  # 14,900 + 600 MiB > 15,360
    assert reports.fits_t4({**gpu, "cuda_context_mib": 400.0}) is True  # 15,300 MiB, just in
    assert reports.peak_memory_text(gpu) == ("peak GPU memory 14.55 GiB reserved (11.72 GiB "
                                             "allocated, NVIDIA H100 80GB HBM3; fits a 15 GiB T4: no)")


def test_memory_table_from_the_main_jobs_files(tmp_path):
    (tmp_path / "wall_times.json").write_text('{"01_pretraining": 312.4, "02_adaptation": 95.0}')
    (tmp_path / "peak_memory.json").write_text(json.dumps({"01_pretraining": {
        "device": "GPU X", "cuda_allocated_mib": 2048.0, "cuda_reserved_mib": 3072.0,
        "cuda_context_mib": 512.0, "rss_mib": 4096.0}}))
    table = reports.memory_table(tmp_path).splitlines()
    assert table[0] == "| notebook | wall time | peak memory | fits a 15 GiB T4 |"
    assert table[2] == ("| 01_pretraining | 312 s | peak GPU memory 3.00 GiB reserved (2.00 GiB "
                        "allocated, GPU X; fits a 15 GiB T4: yes) | yes |")
    assert table[3] == "| 02_adaptation | 95 s | not recorded | not measured on a GPU |"


def test_holm_family_adjusts_over_every_saved_test_and_says_what_survives():
    effects = [{"method": "a", "baseline": "b", "metric": "err", "delta": -2.0, "p": 0.01,
                "verdict": "better"},
               {"method": "c", "baseline": "b", "metric": "err", "delta": 1.0, "p": 0.04,
                "verdict": "worse"},
               {"method": "d", "baseline": "b", "metric": "err", "delta": 0.1, "p": 0.5,
                "verdict": "within noise"},
               {"method": "e", "baseline": "b", "metric": "err", "delta": 0.0, "p": None,
                "verdict": "untestable"}]
    family = results.holm_family(effects)
    assert family["Holm p"].tolist()[:3] == pytest.approx(stats.holm([0.01, 0.04, 0.5]))
    assert family["Holm"].tolist() == ["survives", "does not survive", "", ""]
    assert family.attrs["tests"] == 3
    assert results.holm_text(family) == ("One Holm family: the 3 tests this notebook saves; 2 "
                                         "better/worse on the raw p, 1 of them survive Holm: a vs b (err).")


def test_saving_effects_names_the_notebooks_one_holm_family(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(config.RESULTS_ENV_VAR, str(tmp_path))
    effects = [{"method": "a", "baseline": "b", "metric": "err", "delta": -2.0, "p": 0.01,
                "verdict": "better"}]
    results.save("04_x", {}, seeds=[0], effects=effects, scale=config.get_scale("smoke"))
    assert capsys.readouterr().out == ("One Holm family: the 1 test this notebook saves; 1 better/worse "
                                       "on the raw p, 1 of them survive Holm: a vs b (err).\n")
    results.save("04_x", {}, seeds=[0], scale=config.get_scale("smoke"))
    assert capsys.readouterr().out == ""


def test_headline_reads_one_verdict_with_its_mde_and_the_sources_number():
    rng = np.random.default_rng(3)
    runs = pd.DataFrame({"method": ["base"] * 3 + ["m"] * 3, "seed": [0, 1, 2] * 2,
                         "test_error": [*rng.normal(0.30, 0.02, 3), *rng.normal(0.30, 0.02, 3)]})
    table = stats.compare(runs, "base", floor=False)
    text = results.headline(table, "m", metric="test error", source="the paper", source_delta=-0.5)
    first, reading = text.split("\n")
    assert first.startswith("Headline — m vs base, test error: ") and "→ within noise (MDE" in first
    assert reading.startswith(f"Within noise: these runs could have seen |Δ| ≥ {table.loc['m', 'MDE']:.2f}")
    assert reading.endswith(f"The source's -0.5 points (the paper): {results.SOURCE_BELOW}.")
    runs.loc[runs.method == "m", "test_error"] = [0.6, 0.62, 0.61]
    worse = results.headline(stats.compare(runs, "base", floor=False), "m", metric="test error")
    assert "→ worse." in worse and "Beyond noise in this run (worse on the raw p" in worse
