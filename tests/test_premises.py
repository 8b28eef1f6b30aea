"""tutorial_lib.premises: every premise kind with a case where it holds and one where it fails,
and a failed one turning a clear difference into its own verdict in stats.compare and the saved
effect records."""

import pandas as pd
import pytest

from tutorial_lib import premises, results, stats

SEEDS = [0, 1, 2, 3, 4]
RUNS = pd.DataFrame({"method": ["base"] * 5 + ["method"] * 5, "seed": SEEDS * 2,
                     "acc": [0.60, 0.62, 0.61, 0.63, 0.60, 0.70, 0.71, 0.72, 0.71, 0.70]})


def test_erasure_judged_out_of_sample_holds_and_fails_and_refuses_an_in_sample_check():
    floor = {"dev": 0.174, "test": 0.183}
    held = premises.erasure_premise({"dev": 0.178, "test": 0.185}, floor, fitted_on=range(100),
                                    probed_on=range(100, 200))
    assert held.holds and held.name == "erased out of sample"
    failed = premises.erasure_premise({"dev": 0.266, "test": 0.255}, floor, fitted_on=range(100),
                                      probed_on=range(100, 200))  # 11's LEACE, out of sample
    assert not failed.holds and failed.failure == premises.VOID_NOT_ERASED
    with pytest.raises(ValueError, match="in-sample check cannot fail"):
        premises.erasure_premise({"dev": 0.17}, {"dev": 0.174}, fitted_on=range(100),
                                 probed_on=range(50, 150))


def test_an_intermediate_stage_must_beat_its_own_floor():
    learned = premises.stage_premise(stats.against_floor([0.55, 0.58, 0.57], 0.36), "MNLI stage")
    assert learned.holds and learned.name == "stage learned"
    at_floor = premises.stage_premise(stats.against_floor([0.36, 0.37, 0.35], 0.36), "MNLI stage")
    assert not at_floor.holds and at_floor.failure == premises.VOID_STAGE
    assert "MNLI stage" in at_floor.detail


def test_arms_that_are_the_same_runs_are_untestable():
    assert premises.arms_differ([("mr",), ("mr", "qnli")], [("mr",), ("qnli",)], "aux sets").holds
    same = premises.arms_differ([("mr",), ("mr",)], [("mr",), ("mr",)], "aux sets")
    assert not same.holds and same.failure == premises.UNTESTABLE
    assert same.detail == "2 of 2 aux sets identical"
    with pytest.raises(ValueError, match="run by run"):
        premises.arms_differ([1, 2], [1])
    with pytest.raises(ValueError, match="at least one pair"):
        premises.arms_differ([], [])
    # a control about one choice (07's random auxiliary subset) says which choice was the same
    tasks = premises.arms_differ([("mr",)], [("mr",)], "task sets",
                                 failure=premises.UNTESTABLE_SAME_TASKS)
    assert not tasks.holds and tasks.failure.startswith("untestable: the arms trained on the same")


def test_a_constant_answer_is_flagged():
    assert premises.varied_answers(["yes", "no", "yes"]).holds
    constant = premises.varied_answers(["acceptable"] * 40, "CoLA, mixture")
    assert not constant.holds and constant.failure == premises.VOID_CONSTANT
    assert "'acceptable' on all 40 items" in constant.detail


def test_a_matched_control_must_be_within_its_tolerance():
    """11's "variance-matched" control removed 0.377 of the variance against LEACE's 0.215."""
    assert premises.matched(0.22, 0.215, 0.02, "variance removed").holds
    off = premises.matched(0.377, 0.215, 0.02, "variance removed")
    assert not off.holds and off.failure == premises.VOID_NOT_MATCHED


def test_the_first_failed_premise_decides_the_verdict_and_is_saved_with_the_effect():
    ok = premises.matched(0.22, 0.215, 0.02, "variance removed")
    stage = premises.stage_premise(stats.against_floor([0.36, 0.37, 0.35], 0.36))
    table = stats.compare(RUNS, "base", column="acc", higher_is_better=True, floor=0.5,
                          premises={"method": [ok, stage]})
    assert table.loc["method", "p"] < 0.05  # a clear difference …
    assert table.loc["method", "verdict"] == premises.VOID_STAGE  # … on a stage that learned nothing
    saved = results.effects(table, metric="acc", backbone="x", higher_is_better=True)
    assert [(p["name"], p["holds"]) for p in saved[0]["premises"]] == [
        ("matched", True), ("stage learned", False)]
    clean = stats.compare(RUNS, "base", column="acc", higher_is_better=True, floor=0.5)
    assert clean.loc["method", "verdict"] == "better"
    assert results.effects(clean, metric="acc", backbone="x")[0]["premises"] == []


def test_the_floor_test_prints_what_it_could_see():
    """An evaluation too small to tell the baseline from its floor says so with the floor test's
    MDE (17: 16 questions a task, every not-fine-tuned model 'at chance')."""
    table = stats.compare(RUNS, "base", column="acc", higher_is_better=True, floor=0.5)
    mde = table.loc["base", "floor MDE"]
    assert 0 < mde < 5  # points: five runs with a spread of about one point
    assert f"(this test could see {mde:.2f} points)" in stats.sentences(table, "accuracy")
    noisy = RUNS.assign(acc=[0.40, 0.70, 0.50, 0.65, 0.45, 0.50, 0.71, 0.52, 0.66, 0.49])
    assert stats.compare(noisy, "base", column="acc", higher_is_better=True,
                         floor=0.5).loc["base", "floor MDE"] > 10


def test_a_stage_trained_once_is_judged_on_its_own_test_items():
    """06: "mnli after 60 steps: test score 36.0 % (majority class 36.0 %)" — a stage at its
    floor, yet MNLI → RTE was decided "worse"."""
    at_floor = premises.stage_premise_items(0.360, 2945, 0.360, "MNLI stage")
    assert not at_floor.holds and at_floor.failure == premises.VOID_STAGE
    assert "2,945 test items" in at_floor.detail
    assert premises.stage_premise_items(0.40, 2945, 0.36).holds  # 4 points over 2,945 items
    assert not premises.stage_premise_items(0.37, 200, 0.36).holds  # 1 point over 200: unseen
    with pytest.raises(ValueError, match="accuracy in"):
        premises.stage_premise_items(36.0, 2945, 0.36)  # percent, not a fraction


def test_a_scorer_must_follow_the_label_to_carry_a_task_guided_claim():
    """08: TDT's confidences ranked tokens *against* their label information (ρ = −0.27)."""
    assert premises.follows_label(0.31, 0.01, "TDT confidence").holds
    against = premises.follows_label(-0.27, 0.038, "TDT confidence")
    assert not against.holds and against.failure == premises.VOID_SCORER
    assert not premises.follows_label(0.2, 0.3, "TDT confidence").holds  # unrelated


def test_premise_records_survive_a_concatenation_with_tables_that_had_none():
    """06 concatenates per-task comparisons: only the task with a sequential setting has premises."""
    stage = premises.stage_premise_items(0.36, 2945, 0.36)
    with_p = stats.compare(RUNS, "base", column="acc", higher_is_better=True, floor=0.5,
                           premises={"method": stage})
    without = stats.compare(RUNS, "base", column="acc", higher_is_better=True, floor=0.5)
    both = pd.concat({"a": with_p, "b": without}, names=["task"])
    assert [p["name"] for p in results.effects(both.loc["a"], metric="m", backbone="x")[0]["premises"]] \
        == ["stage learned"]
    assert results.effects(both.loc["b"], metric="m", backbone="x")[0]["premises"] == []


# The comparisons whose verdict rests on a premise of their own kind (notebook, a word of the
# method's name, the premise's name): a decided verdict there must carry it, computed and holding.
REQUIRED = [("06_multitask", "sequential", "stage learned"),
            ("08_tdt", "TDT", "scorer learned"),
            ("11_amnesic_probing", "UPOS", "erased out of sample"),
            ("11_amnesic_probing", "position", "erased out of sample"),
            ("11_amnesic_probing", "re-injected", "erased out of sample"),
            ("12_adversarial_heads", "burn-out", "erased out of sample", "burn-out vs control"),
            ("12_adversarial_heads", "burn-out", "matched", "burn-out vs control"),
            ("17_instruction_tuning_and_preferences", "", "baseline above floor", "accuracy"),
            ("17_instruction_tuning_and_preferences", "", "baseline above floor", "Hits@1")]


def decided_without_premise(effects: list[dict]) -> list[str]:
    """Every decided verdict (better/worse) that rests on a failed premise, or lacks one its kind
    of comparison needs."""
    bad = []
    for e in effects:
        if e.get("verdict") not in ("better", "worse"):
            continue
        names = {p["name"]: p["holds"] for p in e.get("premises", [])}
        failed = [n for n, holds in names.items() if not holds]
        missing = [need for nb, word, need, *metric in REQUIRED
                   if e["notebook"] == nb and word in e["method"] and need not in names
                   and (not metric or metric[0] in e["metric"])]
        if failed or missing:
            bad.append(f"{e['notebook']}: {e['method']} vs {e['baseline']} ({e['metric']}) → "
                       f"{e['verdict']}: failed {failed}, not computed {missing}")
    return bad


def test_no_committed_verdict_rests_on_a_failed_or_missing_premise():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results" / "classroom"
    for path in (root / "effects.json", root / "held-out" / "effects.json"):
        assert decided_without_premise(json.loads(path.read_text())) == [], path
    fake = [{"notebook": "06_multitask", "method": "sequential (mnli → rte)", "baseline": "b",
             "metric": "m", "verdict": "worse", "premises": []},
            {"notebook": "11_amnesic_probing", "method": "LEACE UPOS", "baseline": "b", "metric": "m",
             "verdict": "worse", "premises": [{"name": "erased out of sample", "holds": False}]}]
    assert len(decided_without_premise(fake)) == 2  # the check can fail


def test_the_baseline_above_its_floor_on_items_holds_fails_and_says_what_it_could_see():
    from tutorial_lib import premises

    held = premises.above_floor_items([True] * 180 + [False] * 120, 0.5, "base")
    assert held.holds and "could see 8.1 points" in held.detail and held.name == "baseline above floor"
    failed = premises.above_floor_items([True] * 9 + [False] * 11, 0.5, "base")
    assert not failed.holds and failed.failure == "void: baseline at chance"
    below = premises.above_floor_items([True] * 5 + [False] * 95, 0.2)  # significant, but below
    assert not below.holds
    assert premises.binomial_mde(90, 0.1) == pytest.approx(0.0887, abs=5e-4)
    with pytest.raises(ValueError):
        premises.above_floor_items([], 0.5)


def test_a_dev_loss_that_fell_holds_one_that_did_not_is_did_not_train():
    from tutorial_lib import premises

    fell = premises.loss_fell([3.0, 3.2, 2.9, 3.1], [2.5, 2.8, 2.6, 2.7], "sft")
    assert fell.holds and fell.name == "trained (dev loss)"
    flat = premises.loss_fell([3.0, 3.2, 2.9, 3.1], [3.1, 3.1, 3.0, 3.0])
    assert not flat.holds and flat.failure == "did not train"
    assert not premises.loss_fell([1.0, 1.0], [1.5, 1.5]).holds  # rose: constant differences
    with pytest.raises(ValueError):
        premises.loss_fell([1.0, 2.0], [1.0])
