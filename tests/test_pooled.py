"""Both seed sets together (tutorial_lib.results.pooled_effect, pooled_with_committed) and what a
comparison says of a source's number (results.source_status): "below our MDE" only where the CI
does not exclude that number (issue 58: 08's in-domain TDT, pooled +0.44 points of error with a CI
that excludes the paper's −0.5 although the pooled MDE is larger)."""

import json
import re

import pytest
from scipy import stats as sps

from benchmarks import replicate
from tutorial_lib import config, results, stats
from tutorial_lib.methods import references

REPO = results.REPOSITORY
CLASSROOM = config.get_scale("classroom")
# 08's TDT in domain, both committed runs (results/classroom/[held-out/]08_tdt.json, 2026-12-07)
FIRST = {"notebook": "08_tdt", "backbone": "minilm", "method": "TDT", "baseline": "fine-tuning",
         "metric": "sst2 dev (in-domain) error", "unit": "points", "delta": 0.726,
         "ci95": "[+0.29, +1.16]", "p": 0.0188, "test": "paired t", "n": 3, "df": 2.0,
         "verdict": stats.WITHIN_NOISE}
HELD = {**FIRST, "delta": 0.153, "ci95": "[-0.85, +1.15]", "p": 0.578}


def test_below_our_mde_only_where_the_ci_does_not_exclude_the_source():
    # a null whose CI excludes the source's number: evidence against it, whatever the MDE
    assert results.source_status(stats.WITHIN_NOISE, 0.44, "[-0.00, +0.88]", 0.60, -0.5) == \
        results.SOURCE_EXCLUDED
    # inside the CI: below or above the MDE
    assert results.source_status(stats.WITHIN_NOISE, 0.1, "[-0.60, +0.80]", 0.9, -0.5) == \
        results.SOURCE_BELOW
    assert results.source_status(stats.WITHIN_NOISE, 0.1, "[-0.60, +0.80]", 0.4, -0.5) == \
        results.SOURCE_NOT_SEEN
    assert results.source_status("worse", 1.0, "[+0.5, +1.5]", 0.4, -0.5) == results.SOURCE_OPPOSITE
    assert results.source_status("better", -1.0, "[-1.5, -0.5]", 0.4, -0.5) == results.SOURCE_SEEN
    # a verdict no test decided says nothing of the source — an untestable one neither, although
    # its CI [+0.00, +0.00] "excludes" every number
    for guard in ("void: the scorer did not learn the label", stats.UNTESTABLE_IDENTICAL):
        assert results.source_status(guard, 0.0, "[+0.00, +0.00]", 0.0, -0.5) == guard


def test_the_pooled_test_over_both_seed_sets_and_its_verdict():
    pooled = results.pooled_effect(FIRST, HELD, source_delta=-0.5)
    assert pooled["delta"] == pytest.approx(0.44, abs=1e-3) and pooled["n"] == 6
    assert pooled["ci95"] == "[-0.00, +0.88]" and pooled["p"] == pytest.approx(0.050, abs=1e-3)
    assert pooled["raw verdict"] == pooled["verdict"] == stats.WITHIN_NOISE
    assert pooled["mde"] > 0.5  # the old rule would have said "below our MDE" …
    assert pooled["source_vs_pooled"] == results.SOURCE_EXCLUDED  # … yet the CI excludes −0.5
    # a failed premise in either run stands: pooling more seeds does not repair it
    void = "void: the scorer did not learn the label"
    both = results.pooled_effect(FIRST, {**HELD, "verdict": void}, source_delta=-0.5)
    assert both["verdict"] == void and both["raw verdict"] == stats.WITHIN_NOISE
    assert both["source_vs_pooled"] == void
    # a clear pooled difference in an error: positive Δ is worse
    worse = results.pooled_effect({**FIRST, "ci95": "[+0.50, +0.95]"}, {**HELD, "delta": 0.7,
                                                                       "ci95": "[+0.40, +1.00]"})
    assert worse["verdict"] == "worse" and worse["p"] < 0.05
    higher = results.pooled_effect({**FIRST, "metric": "acc (higher is better)",
                                    "ci95": "[+0.50, +0.95]"}, {**HELD, "delta": 0.7,
                                                                "ci95": "[+0.40, +1.00]"})
    assert higher["verdict"] == "better"
    # the same test as the replication record's, which now carries the verdict and the source
    assert replicate.pooled(FIRST, HELD) == results.pooled_effect(FIRST, HELD, -0.5)
    assert results.pooled_effect({**FIRST, "n": None}, HELD) is None


def test_pooled_with_committed_reads_the_other_seed_set_and_says_why_not(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "COMMITTED_DIR", tmp_path / "results")
    monkeypatch.setattr(results, "REPOSITORY", tmp_path)
    monkeypatch.delenv(config.SEEDS_ENV_VAR, raising=False)
    pooled, text = results.pooled_with_committed(FIRST, CLASSROOM, source_delta=-0.5)
    assert pooled is None and "installed without the repository" in text  # as on Colab
    (tmp_path / "notebooks").mkdir()
    pooled, text = results.pooled_with_committed(FIRST, CLASSROOM, source_delta=-0.5)
    assert pooled is None and "results/classroom/held-out/08_tdt.json is absent" in text
    held_dir = tmp_path / "results" / "classroom" / "held-out"
    held_dir.mkdir(parents=True)
    (held_dir / "08_tdt.json").write_text(json.dumps(
        {"notebook": "08_tdt", "seed_set": "held-out", "seeds": [1000, 1001, 1002],
         "effects": [HELD]}))
    pooled, text = results.pooled_with_committed(FIRST, CLASSROOM, source_delta=-0.5,
                                                 source="the paper")
    assert pooled == results.pooled_effect(FIRST, HELD, -0.5)
    assert text.startswith("TDT vs fine-tuning, sst2 dev (in-domain) error, pooled over this run "
                           "(main seeds) and the committed held-out run (seeds [1000, 1001, 1002]): "
                           "Δ +0.44 points, 95 % CI [-0.00, +0.88], p = 0.050")
    assert text.endswith("→ within noise; the pooled CI excludes the paper's -0.50 points")
    inside = results.pooled_with_committed(FIRST, CLASSROOM, source_delta=0.3)[1]
    assert inside.endswith(f"does not exclude the source's +0.30 points, below the pooled MDE "
                           f"({pooled['mde']:.2f})")
    # a held-out run pools with the main run, the main run's record first
    monkeypatch.setenv(config.SEEDS_ENV_VAR, "held-out")
    assert "absent" in results.pooled_with_committed(HELD, CLASSROOM)[1]
    monkeypatch.setenv(config.SEEDS_ENV_VAR, "2000")
    assert "no committed twin" in results.pooled_with_committed(FIRST, CLASSROOM)[1]


def test_the_committed_runs_pool_as_the_replication_record_does():
    """08's cell reads the committed held-out run: its pooled in-domain result is the one
    replication.json (RESULTS.md's pooled column) computed from the same two records."""
    first = results.committed_run("classroom", "08_tdt", "main")
    held = results.committed_run("classroom", "08_tdt", "held-out")
    if first is None or held is None:
        pytest.skip("no committed 08 runs on both seed sets")
    effect = next(e for e in first["effects"] if e["method"] == "TDT" and "in-domain" in e["metric"])
    source = references.source_effect(effect)
    pooled, text = results.pooled_with_committed(effect, CLASSROOM, source_delta=source.delta)
    twin = next(e for e in held["effects"] if results.effect_key(e) == results.effect_key(effect))
    assert pooled == replicate.pooled(effect, twin)
    low, high = stats.parse_ci(pooled["ci95"])
    assert ("excludes" in text) == (not low <= source.delta <= high)
    # the paired t over six differences: its p from its own t
    t = pooled["delta"] / ((high - low) / 2 / sps.t.ppf(0.975, 5))
    assert pooled["p"] == pytest.approx(2 * sps.t.sf(abs(t), 5), rel=0.05)


def test_the_report_pooled_column_says_what_the_pooled_test_says_of_the_source(tmp_path):
    from tutorial_lib.ops import report as reports

    row = {"notebook": "08_tdt", "method": "TDT", "baseline": "fine-tuning",
           "metric": "sst2 dev (in-domain) error", "status": "nothing to replicate",
           "first": FIRST, "held_out": HELD}
    null = results.pooled_effect(FIRST, HELD, -0.5)
    void = results.pooled_effect(FIRST, {**HELD, "verdict": "void: x"}, -0.5)
    (tmp_path / reports.REPLICATION_NAME).write_text(json.dumps(
        {"effects": [{**row, "pooled": null}, {**row, "method": "TDT again", "pooled": void}]}))
    body = reports.replication_markdown(tmp_path)
    assert "+0.44 [-0.00, +0.88], p = 0.0501 → within noise; source's -0.50: outside our 95 % CI" in body
    assert re.search(r"p = 0\.0501 → void: x +\|", body)  # a guard's verdict says it all
