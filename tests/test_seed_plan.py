"""The gpu scale's seeds against the power plan (tutorial_lib/ops/seed_plan.py, issue 37 item 6):
computed from the committed classroom effects, every notebook's gpu seeds must reach the runs that
each reachable source effect needs, and docs/gpu.md shows the generated table."""

import json
from pathlib import Path

import pytest

from tutorial_lib import stats, tasks
from tutorial_lib.methods import references
from tutorial_lib.ops import seed_plan

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "results" / "gpu"


def _committed_plan():
    effects = json.loads((REPO / "results" / "classroom" / "effects.json").read_text())
    return seed_plan.plan(effects, GPU)


def test_every_notebooks_gpu_seeds_meet_the_plan_or_its_effect_is_out_of_reach():
    rows = _committed_plan()
    assert len(rows) == len(references.SOURCE_EFFECTS)  # every source's number has its row
    for notebook, needed in seed_plan.required_seeds(rows).items():
        seeds = seed_plan.gpu_settings(notebook).seeds
        assert len(seeds) >= needed, (notebook, seeds, needed)
        assert len(set(seeds)) == len(seeds)
    for r in rows:  # a reachable effect fits the budget at its runs; the rest are said to be out of it
        if r.reachable:
            assert r.runs_needed * r.seed_seconds <= seed_plan.SEED_BUDGET_SECONDS
        else:
            assert r.runs_needed is None or r.minutes(r.runs_needed) * 60 > seed_plan.SEED_BUDGET_SECONDS


def test_the_plan_asks_for_the_runs_a_reachable_effect_needs_and_nothing_for_one_out_of_reach(tmp_path):
    """Synthetic 03 records: a Δ the source's +0.4 points needs 11 runs for at this spread, and one
    it needs hundreds for: the plan asks for 11 and lists the other as out of reach."""
    def record(method, se):
        return {"notebook": "03_adapters_and_freezing", "method": method, "baseline": "full fine-tuning",
                "metric": "TREC-6 test error", "delta": 0.3, "ci95": "[-1, +1]", "p": 0.5,
                "verdict": stats.WITHIN_NOISE, "n": 3, "df": 2, "se": se, "test": "paired t"}
    spread = 0.4 / 1.0  # d = 1: 10 or 11 paired runs
    rows = seed_plan.plan([record("adapters m=64", spread / 3 ** 0.5),
                           record("adapters m=8", 10 * spread / 3 ** 0.5)], GPU)
    near, far = rows
    assert near.runs_needed == stats.seeds_needed(0.4, spread, paired=True) and near.reachable
    assert far.runs_needed > 300 and not far.reachable
    assert seed_plan.required_seeds(rows) == {"03_adapters_and_freezing": near.runs_needed}
    assert seed_plan.NOT_REACHABLE in seed_plan.markdown(rows)


def test_a_gpu_run_replaces_the_estimate_by_its_measured_seconds_per_seed(tmp_path):
    (tmp_path / "throughput").mkdir()
    (tmp_path / seed_plan.THROUGHPUT).write_text((GPU / seed_plan.THROUGHPUT).read_text())
    seconds, basis = seed_plan.seed_cost("04_gradual_unfreezing", tmp_path)
    assert basis.startswith("estimated") and seconds > 0
    runs = [{"method": m, "seed": s, "seconds": 10.0, "cached": m == "full fine-tuning"}
            for m in ("full fine-tuning", "gradual unfreezing", "chain-thaw") for s in range(5)]
    doc = {"date": "2027-01-01 00:00 UTC", "seeds": list(range(5)),
           "tables": {"runs": {"records": runs}, "summary": {"records": [{"method": "x"}]}}}
    (tmp_path / "04_gradual_unfreezing.json").write_text(json.dumps(doc))
    assert seed_plan.seed_cost("04_gradual_unfreezing", tmp_path) == (
        20.0, "measured (gpu run 2027-01-01 00:00 UTC)")  # two uncached runs a seed


def test_the_estimate_counts_each_run_a_seed_repeats():
    """13: the seed's source model, every stage-2 regulariser, three students of each size; 03: one
    run per bottleneck and full fine-tuning — more bottlenecks, more steps."""
    s = seed_plan.gpu_settings("13_forgetting_and_distillation")
    fewer = s.replace(ewc_strengths=(1.0,))
    assert seed_plan.STEPS[s.notebook](s) - seed_plan.STEPS[s.notebook](fewer) == (
        (len(s.ewc_strengths) - 1) * s.target_budget.epochs * 154 * seed_plan.MINILM_LAYERS)
    a = seed_plan.gpu_settings("03_adapters_and_freezing")
    assert seed_plan.STEPS[a.notebook](a.replace(bottlenecks=(8,))) * (1 + len(a.bottlenecks)) == (
        seed_plan.STEPS[a.notebook](a) * 2)


def test_the_train_rows_are_the_local_copys(with_data):
    for name, rows in seed_plan.TRAIN_ROWS.items():
        assert tasks.load_task(name).sizes()["train"] == rows, name


def test_docs_gpu_md_shows_the_generated_plan():
    """Regenerate with ``python -m tutorial_lib.ops.seed_plan --write docs/gpu.md``."""
    doc = (REPO / "docs" / "gpu.md").read_text()
    section = doc.split(seed_plan.START, 1)[1].split(seed_plan.END, 1)[0]
    assert section.strip() == seed_plan.markdown(_committed_plan()).strip()


@pytest.mark.parametrize("notebook", sorted(seed_plan.STEPS))
def test_every_planned_notebook_has_seeds_at_the_gpu_scale(notebook):
    assert len(seed_plan.gpu_settings(notebook).seeds) >= 2
