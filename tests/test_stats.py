"""Tests for tutorial_lib.stats: the one rule that calls a difference real, on known cases."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tutorial_lib import stats

SEEDS = [0, 1, 2, 3]
# seeds differ a lot from each other (data order, init), the method is 2 points better on every one
BASELINE = [0.10, 0.30, 0.50, 0.20]
METHOD = [b - 0.02 + e for b, e in zip(BASELINE, [0.001, -0.001, 0.0005, -0.0003])]


def runs(**groups) -> pd.DataFrame:
    """A runs table: ``name=(errors, seeds)``."""
    rows = [{"method": name, "seed": s, "test_error": v}
            for name, (values, seeds) in groups.items() for v, s in zip(values, seeds)]
    return pd.DataFrame(rows)


def test_mean_std_uses_the_sample_std_and_zero_for_one_value():
    assert stats.mean_std([0.1, 0.3]) == pytest.approx((0.2, 0.1414214))
    assert stats.mean_std([0.4]) == (0.4, 0.0)


def test_summarize_formats_mean_and_sample_std_per_group():
    table = pd.DataFrame({"backbone": ["a", "a", "b"], "test_error": [0.1, 0.3, 0.2]})
    out = stats.summarize(table, by="backbone")
    assert out.loc["a", "mean"] == pytest.approx(0.2)
    assert out.loc["a", "std"] == pytest.approx(0.1414, abs=1e-4)
    assert out.loc["b", "runs"] == 1 and out.loc["b", "std"] == 0.0
    assert list(out.index) == ["a", "b"]  # the table's order, not sorted
    assert out.loc["a", "test_error (mean ± std)"] == "20.00 ± 14.14 %"
    assert out.loc["b", "test_error (mean ± std)"] == "20.00 % (1 run)"
    raw = stats.summarize(table, by="backbone", percent=False, digits=3)
    assert raw.loc["a", "test_error (mean ± std)"] == "0.200 ± 0.141"
    assert stats.fmt(0.5, 0.25, 3, scale=100, digits=1, unit=" %") == "50.0 ± 25.0 %"


def test_identical_paired_runs_are_untestable_not_a_null():
    """07's held-out run compared arms that were the same runs: "+0.00, CI [+0.00, +0.00], p = 1.0"
    was reported "within noise". Every paired difference exactly zero: nothing was compared."""
    c = stats.compare_runs(BASELINE, BASELINE, SEEDS, SEEDS)
    assert c.test == "paired t" and c.delta == 0.0 and c.p == 1.0
    assert c.raw_verdict(higher_is_better=False) == stats.WITHIN_NOISE  # the test alone
    assert c.verdict(higher_is_better=False) == stats.UNTESTABLE_IDENTICAL
    nearly = stats.compare_runs([b + d for b, d in zip(BASELINE, (0.0, 0.0, 0.0, 1e-3))],
                                BASELINE, SEEDS, SEEDS)
    assert nearly.verdict(higher_is_better=False) == stats.WITHIN_NOISE  # one run differs: a test
    c = stats.compare_runs(BASELINE, BASELINE)  # unpaired: Welch (no pairing, so no claim)
    assert c.test == "Welch t" and c.p == pytest.approx(1.0)
    assert c.verdict(higher_is_better=True) == stats.WITHIN_NOISE


def test_a_consistent_shift_is_significant_paired_where_welch_is_not():
    """Matching seeds are paired: the large between-seed spread cancels in the differences."""
    paired = stats.compare_runs(METHOD, BASELINE, SEEDS, SEEDS)
    welch = stats.compare_runs(METHOD, BASELINE)
    assert paired.test == "paired t" and paired.n == 4
    assert welch.test == "Welch t"
    assert paired.p < 0.05 < welch.p
    assert paired.verdict(higher_is_better=False) == "better"  # lower error
    assert welch.verdict(higher_is_better=False) == stats.WITHIN_NOISE
    # the same numbers against scipy directly
    assert paired.p == pytest.approx(sps.ttest_rel(METHOD, BASELINE).pvalue, rel=1e-9)
    assert welch.p == pytest.approx(sps.ttest_ind(METHOD, BASELINE, equal_var=False).pvalue, rel=1e-9)
    d = np.subtract(METHOD, BASELINE)
    half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    assert (paired.low, paired.high) == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-9)
    assert paired.effect_size == pytest.approx(d.mean() / d.std(ddof=1))


def test_a_gap_larger_than_the_pooled_std_is_not_enough():
    """The old rule called |Δ| > pooled std "beyond noise"; with three seeds that let through
    p up to ≈ 0.29 (06's auxiliary LM loss had p = 0.155). Under the one rule it is within noise."""
    baseline, method = [0.20, 0.22, 0.24], [0.17, 0.21, 0.20]  # Δ = −2.67 points
    pooled = math.sqrt((np.var(baseline, ddof=1) + np.var(method, ddof=1)) / 2)
    assert abs(np.mean(method) - np.mean(baseline)) > pooled  # "beyond noise" by the old rule
    c = stats.compare_runs(method, baseline, [0, 1, 2], [0, 1, 2])
    assert 0.05 < c.p < 0.3 and c.low < 0 < c.high
    assert c.verdict(higher_is_better=False) == stats.WITHIN_NOISE


def test_runs_are_paired_by_seed_not_by_position():
    order = [2, 0, 3, 1]
    shuffled = stats.compare_runs([METHOD[i] for i in order], BASELINE, [SEEDS[i] for i in order], SEEDS)
    assert shuffled.p == pytest.approx(stats.compare_runs(METHOD, BASELINE, SEEDS, SEEDS).p)
    # positions paired instead of seeds would pair unrelated runs: no longer significant
    assert stats.compare_runs([METHOD[i] for i in order], BASELINE, SEEDS, SEEDS).p > 0.05


def test_unmatched_seeds_use_welch():
    c = stats.compare_runs(METHOD, BASELINE, [4, 5, 6, 7], SEEDS)
    assert c.test == "Welch t"
    assert c.p == pytest.approx(sps.ttest_ind(METHOD, BASELINE, equal_var=False).pvalue)
    pooled = math.sqrt((np.var(METHOD, ddof=1) + np.var(BASELINE, ddof=1)) / 2)
    assert c.effect_size == pytest.approx(c.delta / pooled)
    assert stats.compare_runs(METHOD[:3], BASELINE, SEEDS[:3], SEEDS).test == "Welch t"
    assert stats.compare_runs([0.1, 0.2], [0.1, 0.3], [0, 0], [0, 0]).test == "Welch t"  # keys repeat


def test_one_run_each_is_not_tested():
    c = stats.compare_runs([0.1], [0.3], [0], [0])
    assert c.test == "none" and math.isnan(c.p) and math.isnan(c.low)
    assert c.delta == pytest.approx(-0.2)
    assert c.verdict(higher_is_better=False) == "not tested (1 run)"
    assert stats.compare_runs([0.1], [0.3, 0.2]).verdict(True) == "not tested (1 run)"


@pytest.mark.parametrize("keys", [(SEEDS, SEEDS), (None, None)], ids=["paired", "welch"])
def test_the_95_ci_contains_delta(keys):
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.normal(0.3, 0.05, 4), rng.normal(0.3, 0.05, 4)
        c = stats.compare_runs(a, b, *keys)
        assert c.delta == pytest.approx(a.mean() - b.mean())
        assert c.low < c.delta < c.high
        # p < 0.05 exactly when the interval excludes zero
        assert (c.p < 0.05) == (c.low > 0 or c.high < 0)
        # and the verdict is "within noise" exactly when it includes zero
        assert (c.verdict(higher_is_better=False) == stats.WITHIN_NOISE) == (c.low <= 0 <= c.high)


def test_higher_is_better_flips_the_verdict():
    c = stats.compare_runs(METHOD, BASELINE, SEEDS, SEEDS)  # method lower
    assert c.verdict(higher_is_better=False) == "better"
    assert c.verdict(higher_is_better=True) == "worse"
    up = stats.compare_runs(BASELINE, METHOD, SEEDS, SEEDS)
    assert up.verdict(higher_is_better=True) == "better"
    assert up.verdict(higher_is_better=False) == "worse"


def test_compare_table_pairs_on_the_seed_column():
    table = runs(baseline=(BASELINE, SEEDS), method=(METHOD, SEEDS),
                 other=(METHOD, [4, 5, 6, 7]), single=([0.2], [0]))
    out = stats.compare(table, "baseline")
    assert list(out.index) == ["baseline", "method", "other", "single"]
    assert out.loc["baseline", "verdict"] == "(baseline)" and out.loc["baseline", "Δ (points)"] == 0
    assert out.loc["baseline", "mean (points)"] == pytest.approx(100 * np.mean(BASELINE))
    assert out.loc["method", "test"] == "paired t" and out.loc["method", "verdict"] == "better"
    assert out.loc["method", "Δ (points)"] == pytest.approx(100 * (np.mean(METHOD) - np.mean(BASELINE)))
    low, high = (float(x) for x in out.loc["method", "95% CI"].strip("[]").split(","))
    assert low < out.loc["method", "Δ (points)"] < high < 0
    assert out.loc["other", "test"] == "Welch t" and out.loc["other", "verdict"] == stats.WITHIN_NOISE
    assert out.loc["single", "verdict"] == "not tested (1 run)" and out.loc["single", "95% CI"] == ""
    unpaired = stats.compare(table, "baseline", pair_on=None)
    assert unpaired.loc["method", "test"] == "Welch t"
    scores = stats.compare(table, "baseline", higher_is_better=True, percent=False)
    assert scores.loc["method", "verdict"] == "worse" and "Δ (units)" in scores.columns
    with pytest.raises(ValueError, match="not in the table"):
        stats.compare(table, "nope")


def test_sentences_state_delta_test_and_verdict():
    table = runs(baseline=(BASELINE, SEEDS), method=(METHOD, SEEDS), single=([0.2], [0]))
    text = stats.sentences(stats.compare(table, "baseline"), metric="test error")
    first, second = text.splitlines()
    assert first.startswith("method: -2.00 points of test error vs baseline, 95% CI [")
    assert "paired t p = " in first and first.endswith("→ better")
    assert second == "single: -7.50 points of test error vs baseline → not tested (1 run)"


def test_seeds_needed_falls_as_the_difference_grows():
    needed = [stats.seeds_needed(delta, std=0.01) for delta in (0.001, 0.002, 0.005, 0.01, 0.05)]
    assert needed == sorted(needed, reverse=True) and needed[0] > needed[-1]
    assert stats.seeds_needed(-0.01, 0.01) == stats.seeds_needed(0.01, 0.01)
    assert stats.seeds_needed(1.0, 0.01) == 2  # never fewer than two runs
    assert stats.seeds_needed(0.0, 0.01) == math.inf
    assert stats.seeds_needed(0.01, 0.02) > stats.seeds_needed(0.01, 0.01)  # noisier: more seeds


def _power_by_hand(d: float, n: int, paired: bool) -> float:
    """The noncentral-t power written out once more, as a check of :func:`stats.t_power`."""
    df, nc = (n - 1, d * math.sqrt(n)) if paired else (2 * n - 2, d * math.sqrt(n / 2))
    crit = sps.t.ppf(0.975, df)
    return 1 - sps.nct.cdf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)


def test_seeds_needed_uses_the_noncentral_t_not_the_normal_approximation():
    """Issue 21 (08): "≈ 3 seeds" was printed for a difference that 3 seeds did not separate
    (p = 0.094). That is the normal approximation; the paired t-test needs more."""
    t = sps.t.isf(0.094 / 2, 2)  # the t statistic of 3 pairs with p = 0.094
    d_z = t / math.sqrt(3)  # its effect size, ≈ 1.75
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert math.ceil((z / d_z) ** 2) == 3  # the old (normal) answer: 3 pairs
    assert stats.t_power(d_z, 3) < 0.5  # but 3 pairs have less than even odds
    n = stats.seeds_needed(d_z, 1.0, paired=True)
    assert n == 5 and stats.t_power(d_z, n) >= 0.8 > stats.t_power(d_z, n - 1)
    for d, n, paired in [(1.75, 3, True), (0.5, 20, True), (1.0, 17, False), (0.3, 50, False)]:
        assert stats.t_power(d, n, paired=paired) == pytest.approx(_power_by_hand(d, n, paired))
    # two groups of d = 1: the textbook answer is 17 per group (normal approximation: 16)
    assert stats.seeds_needed(0.01, 0.01) == 17
    # and the power is what a simulation of the paired test finds
    rng = np.random.default_rng(0)
    diffs = rng.normal(d_z, 1.0, size=(20_000, 5))
    simulated = np.mean(sps.ttest_1samp(diffs, 0.0, axis=1).pvalue < 0.05)
    assert simulated == pytest.approx(stats.t_power(d_z, 5), abs=0.01)


def test_a_comparison_knows_how_many_seeds_it_would_need():
    base, method = [0.20, 0.22, 0.24], [0.17, 0.21, 0.20]
    c = stats.compare_runs(method, base, [0, 1, 2], [0, 1, 2])
    assert c.p > 0.05 and c.seeds_needed() > 3
    assert c.seeds_needed() == stats.seeds_needed(c.delta, c.delta / c.effect_size, paired=True)


# --- the learned-baseline guard ---------------------------------------------------------------

MAJORITY = 0.51  # e.g. SST-2's majority rate
AT_CHANCE = [0.53, 0.49, 0.56, 0.50, 0.57]  # 53.0 ± 3.5 over five splits (09's head fine-tuning)
LEARNED = [0.78, 0.80, 0.76, 0.79, 0.81]
PROMPT = [0.75, 0.76, 0.73, 0.75, 0.77]
SPLITS = [13, 21, 42, 87, 100]


def accuracy_runs(**groups) -> pd.DataFrame:
    return pd.DataFrame([{"method": name, "split": s, "test_accuracy": v}
                         for name, values in groups.items() for s, v in zip(SPLITS, values)])


def test_a_baseline_at_its_majority_rate_voids_the_comparison():
    c = stats.compare_runs(PROMPT, AT_CHANCE, SPLITS, SPLITS, floor=stats.Floor(MAJORITY))
    assert c.raw_verdict(higher_is_better=True) == "better"  # the test alone says "better"
    assert c.floor_check.test == "one-sample t" and c.floor_check.p > 0.05
    assert c.floor_check.p == pytest.approx(sps.ttest_1samp(AT_CHANCE, MAJORITY).pvalue)
    assert c.verdict(higher_is_better=True) == stats.VOID_AT_CHANCE
    # a baseline *below* its floor (11's adversary at 0.089 vs 0.177) is void too
    below = stats.compare_runs([0.3, 0.31, 0.29], [0.08, 0.09, 0.10], floor=0.177)
    assert below.floor_check.raw_verdict(True) == "worse"
    assert below.verdict(higher_is_better=True) == stats.VOID_AT_CHANCE


def test_a_baseline_that_beats_its_floor_is_not_void():
    c = stats.compare_runs(PROMPT, LEARNED, SPLITS, SPLITS, floor=stats.Floor(MAJORITY))
    assert c.floor_check.p < 0.05
    assert c.verdict(higher_is_better=True) == c.raw_verdict(higher_is_better=True) == "worse"


def test_an_error_floor_is_the_majority_class_error_and_lower_must_beat_it():
    floor = stats.majority_floor([0, 0, 0, 1, 2], [0, 1, 1, 2, 0, 0, 1, 2, 2, 2], error=True)
    assert floor.value == pytest.approx(0.7) and floor.what == "majority-class error"
    assert stats.majority_floor([0, 0, 1], [0, 1, 1, 1]).value == pytest.approx(0.25)
    learned = stats.compare_runs([0.10, 0.12, 0.11], [0.20, 0.22, 0.21], [0, 1, 2], [0, 1, 2],
                                 floor=floor)
    assert learned.verdict(higher_is_better=False) == "better"
    stuck = stats.compare_runs([0.10, 0.12, 0.11], [0.79, 0.81, 0.80], [0, 1, 2], [0, 1, 2],
                               floor=floor)
    assert stuck.verdict(higher_is_better=False) == stats.VOID_AT_CHANCE


def test_a_floor_per_seed_is_paired_by_seed():
    """Each seed has its own floor (e.g. its own training subset): the check pairs them."""
    floors = {0: 0.30, 1: 0.50, 2: 0.70}
    baseline = [0.71, 0.31, 0.51]  # seeds 2, 0, 1: each 1 point above its own floor
    check = stats.against_floor(baseline, stats.Floor(floors), keys=[2, 0, 1])
    assert check.test == "paired t" and check.delta == pytest.approx(0.01)
    assert check.raw_verdict(higher_is_better=True) == "better"
    # against the mean floor (0.5) the spread hides it
    assert stats.against_floor(baseline, stats.Floor(0.5)).p > 0.05
    with pytest.raises(ValueError, match="one value per seed"):
        stats.against_floor(baseline, stats.Floor(floors), keys=[0, 1, 5])


def test_a_method_that_ends_where_it_started_did_not_train():
    """09: the manual prompt after training, 71.1 %, against 71.0 % zero-shot."""
    zero_shot = 0.710
    manual = [0.712, 0.705, 0.716, 0.709, 0.713]
    dart = [0.74, 0.78, 0.70, 0.77, 0.73]
    c = stats.compare_runs(dart, manual, SPLITS, SPLITS, baseline_start=zero_shot)
    assert c.verdict(higher_is_better=True) == stats.VOID_BASELINE_DID_NOT_TRAIN
    head = stats.compare_runs(manual, LEARNED, SPLITS, SPLITS, start=stats.Floor(zero_shot, "zero-shot"))
    assert head.start_check.p > 0.05
    assert head.verdict(higher_is_better=True) == stats.DID_NOT_TRAIN
    trained = stats.compare_runs(dart, manual, SPLITS, SPLITS, start=0.60)  # DART did move from 0.60
    assert trained.verdict(higher_is_better=True) == trained.raw_verdict(True)


def test_compare_with_guards_writes_them_in_the_table_and_the_sentences():
    table = accuracy_runs(**{"head": AT_CHANCE, "prompt": PROMPT, "learned": LEARNED})
    out = stats.compare(table, "head", column="test_accuracy", higher_is_better=True,
                        pair_on="split", floor=stats.Floor(MAJORITY), starts={"prompt": 0.75})
    assert out.loc["head", "verdict"].startswith("(baseline) at its floor")
    assert out.loc["head", "floor"] == pytest.approx(51.0) and out.loc["head", "floor p"] > 0.05
    assert set(out.loc[["prompt", "learned"], "verdict"]) == {stats.VOID_AT_CHANCE}
    assert out.loc["prompt", "start"] == pytest.approx(75.0) and math.isnan(out.loc["learned", "start"])
    assert list(out["n"]) == [5, 5, 5] and out.loc["prompt", "df"] == 4
    text = stats.sentences(out, "test accuracy")
    assert "head: 53.00 vs its floor 51.00, p = " in text and "→ void: baseline at chance" in text
    ok = stats.compare(accuracy_runs(head=LEARNED, prompt=PROMPT), "head", column="test_accuracy",
                       higher_is_better=True, pair_on="split", floor=MAJORITY, starts={"prompt": 0.5})
    assert ok.loc["head", "verdict"] == "(baseline)" and ok.loc["prompt", "verdict"] == "worse"
    with pytest.raises(ValueError, match="not in the table"):
        stats.compare(table, "head", column="test_accuracy", starts={"nope": 0.5})
    floor_only = stats.compare(table, "head", column="test_accuracy", higher_is_better=True,
                               pair_on="split", floor=MAJORITY)
    assert {"floor", "floor p"} <= set(floor_only.columns) and "start" not in floor_only.columns
    one = stats.compare(table[(table.method != "head") | (table.split == 13)], "head",
                        column="test_accuracy", higher_is_better=True, pair_on="split", floor=MAJORITY)
    assert one.loc["head", "verdict"] == "(baseline) floor not tested (1 run)"
    assert one.loc["prompt", "verdict"] == "not tested (1 run)"
    # without guards the table has no guard columns (and its verdicts are the test's alone)
    plain = stats.compare(table, "head", column="test_accuracy", higher_is_better=True, pair_on="split")
    assert "floor" not in plain.columns and plain.loc["prompt", "verdict"] == "better"


def error_runs(floor: float, **groups) -> pd.DataFrame:
    """A runs table as ``finetuning.compare_methods`` writes it: errors and the floor column."""
    return pd.DataFrame([{"method": name, "seed": s, "test_error": v,
                          stats.floor_column("test_error"): floor}
                         for name, values in groups.items() for s, v in enumerate(values)])


def test_compare_reads_the_floor_from_the_runs_table_and_voids_an_at_floor_baseline():
    """No hand-written floor: a baseline at its majority-class error (0.49) is void; one that
    learned is not; ``floor=False`` turns the guard off; an explicit floor wins."""
    at_floor = error_runs(0.49, baseline=[1 - v for v in AT_CHANCE], method=[0.2, 0.22, 0.21, 0.19, 0.2])
    out = stats.compare(at_floor, "baseline")
    assert out.loc["baseline", "floor"] == pytest.approx(49.0)
    assert out.loc["method", "verdict"] == stats.VOID_AT_CHANCE
    assert stats.compare(at_floor, "baseline", floor=False).loc["method", "verdict"] == "better"
    assert "floor" not in stats.compare(at_floor, "baseline", floor=False).columns
    assert stats.compare(at_floor, "baseline", floor=0.60).loc["method", "verdict"] == "better"
    learned = error_runs(0.49, baseline=[1 - v for v in LEARNED], method=[0.1, 0.12, 0.11, 0.09, 0.1])
    assert stats.compare(learned, "baseline").loc["method", "verdict"] == "better"
    # a floor per seed (e.g. each seed its own subset) is kept per seed and paired
    per_seed = at_floor.assign(test_error_floor=[0.40, 0.50, 0.40, 0.50, 0.45] * 2)
    floor = stats.floor_from_table(per_seed, "baseline")
    assert floor.what == "majority-class error" and floor.value == {0: 0.40, 1: 0.50, 2: 0.40,
                                                                   3: 0.50, 4: 0.45}
    assert stats.floor_from_table(at_floor.drop(columns="test_error_floor"), "baseline") is None


def test_compare_items_with_the_trivial_classifier_voids_an_at_floor_baseline():
    """Probes on the same words: the baseline (a random-weights probe) must beat the majority tag."""
    rng = np.random.default_rng(0)
    majority = rng.random(400) < 0.3
    good = majority | (rng.random(400) < 0.6)  # right on most words
    echo = majority.copy()  # the baseline predicts the majority tag: at its floor
    c = stats.compare_items(good, echo, floor_correct=majority)
    assert c.raw_verdict(True) == "better" and c.floor_check.p == 1.0
    assert c.verdict(higher_is_better=True) == stats.VOID_AT_CHANCE
    learned = majority | (rng.random(400) < 0.4)
    ok = stats.compare_items(good, learned, floor_correct=majority)
    assert ok.floor_check.raw_verdict(True) == "better"
    assert ok.verdict(higher_is_better=True) == ok.raw_verdict(True)


def test_within_margin_uses_the_whole_interval_not_the_point_estimate():
    """03: m = 8 is +2.00 points with a CI to +4.28: not shown inside a 2-point bar; m = 64's CI
    [−0.77, +1.30] is."""
    edge = stats.Comparison(0.02, -0.0028, 0.0428, 0.063, 1.0, "paired t", 3, 2)
    inside = stats.Comparison(0.00267, -0.0077, 0.0130, 0.38, 0.5, "paired t", 3, 2)
    assert not stats.within_margin(edge, 0.02) and stats.within_margin(inside, 0.02)
    assert not stats.within_margin(stats.compare_runs([0.1], [0.1]), 0.02)  # one run: no CI


# --- multiplicity -------------------------------------------------------------------------------


def test_compare_items_is_mcnemar_on_the_discordant_items():
    """Probes on the same words: only the words one gets right and the other wrong count."""
    method = [True] * 80 + [True] * 15 + [False] * 3 + [False] * 2
    baseline = [True] * 80 + [False] * 15 + [True] * 3 + [False] * 2
    c = stats.compare_items(method, baseline)
    assert c.test == "McNemar" and c.n == 100
    assert c.delta == pytest.approx(0.12)
    assert c.p == pytest.approx(sps.binomtest(15, 18, 0.5).pvalue)
    assert c.low < c.delta < c.high
    assert c.verdict(higher_is_better=True) == "better"
    same = stats.compare_items(baseline, baseline)
    assert same.p == 1.0 and same.verdict(higher_is_better=True) == stats.WITHIN_NOISE


# --- power: what a null could have seen ---------------------------------------------------------


def test_a_comparison_knows_its_mde_the_runs_a_source_effect_needs_and_its_bound():
    rng = np.random.default_rng(0)
    base = rng.normal(0.20, 0.01, 5)
    method = base + rng.normal(0.001, 0.004, 5)  # a tiny, noisy difference: within noise
    c = stats.compare_runs(method, base, range(5), range(5))
    d = method - base
    assert c.se == pytest.approx(d.std(ddof=1) / math.sqrt(5))
    assert c.mde() == pytest.approx(stats.minimum_detectable_effect(c.se, 4))
    assert c.raw_verdict(True) == stats.WITHIN_NOISE
    # an effect of the MDE's size needs about as many runs as we have; a tenth of it many more
    assert c.runs_for(c.mde()) in (5, 6) and c.runs_for(c.mde() / 10) > 100
    bound = c.bound()
    assert bound is not None and bound == pytest.approx(max(abs(c.low), abs(c.high)))
    assert bound <= c.mde()
    clear = stats.compare_runs(base + 0.05, base, range(5), range(5))  # better: no equivalence
    assert clear.raw_verdict(True) == "better" and clear.bound() is None


def test_a_within_noise_row_prints_its_mde_and_a_decided_row_does_not():
    rng = np.random.default_rng(1)
    runs = pd.DataFrame({"method": ["base"] * 3 + ["same"] * 3 + ["worse"] * 3,
                         "seed": [0, 1, 2] * 3,
                         "test_error": [*rng.normal(0.2, 0.02, 3), *rng.normal(0.2, 0.02, 3),
                                        0.5, 0.52, 0.51]})
    table = stats.compare(runs, "base", floor=False)
    assert "MDE" in table and math.isnan(table.loc["base", "MDE"])
    text = stats.sentences(table).splitlines()
    same, worse = (next(ln for ln in text if ln.startswith(m)) for m in ("same", "worse"))
    assert same.endswith(f"within noise (MDE {table.loc['same', 'MDE']:.2f} points)") or "; |Δ| ≤" in same
    assert "MDE" not in worse and worse.endswith("worse")
    # no Holm per table: a notebook's one family is what it saves (results.holm_family)
    assert "Holm p" not in table and "Holm" not in "\n".join(text)


# --- the premise guard ---------------------------------------------------------------------------


def test_an_erasure_premise_holds_only_at_the_floor_on_every_split():
    held = stats.erasure_premise({"dev": 0.18, "test": 0.19}, {"dev": 0.174, "test": 0.183})
    assert held.holds and held.failure == stats.VOID_NOT_ERASED
    # notebook 11's committed INLP: dev 0.354 and test 0.372 against majorities 0.174 / 0.183
    failed = stats.erasure_premise({"dev": 0.354, "test": 0.372}, {"dev": 0.174, "test": 0.183})
    assert not failed.holds and "dev: probe 0.354 vs floor 0.174" in failed.detail
    one = stats.erasure_premise({"dev": 0.18, "test": 0.25}, {"dev": 0.174, "test": 0.183})
    assert not one.holds  # erased on dev, not on test
    with pytest.raises(ValueError, match="same splits"):
        stats.erasure_premise({"dev": 0.2, "test": 0.2}, {"dev": 0.17})


def test_a_failed_premise_voids_even_a_clear_difference_and_a_held_one_leaves_it():
    """11's case: the LM after 'erasing' UPOS is clearly worse than after random directions, but
    the eraser did not erase: the verdict is computed void, not 'worse'."""
    runs = pd.DataFrame({"method": ["random"] * 5 + ["INLP UPOS"] * 5 + ["LEACE UPOS"] * 5,
                         "seed": list(range(5)) * 3,
                         "acc": [0.40, 0.41, 0.40, 0.42, 0.41, 0.36, 0.37, 0.36, 0.38, 0.37,
                                 0.35, 0.36, 0.35, 0.37, 0.36]})
    failed = stats.erasure_premise({"dev": 0.354}, {"dev": 0.174})
    held = stats.erasure_premise({"dev": 0.176}, {"dev": 0.174})
    table = stats.compare(runs, "random", column="acc", higher_is_better=True, floor=False,
                          premises={"INLP UPOS": failed, "LEACE UPOS": held})
    assert table.loc["INLP UPOS", "p"] < 0.05
    assert table.loc["INLP UPOS", "verdict"] == stats.VOID_NOT_ERASED
    assert table.loc["LEACE UPOS", "verdict"] == "worse"
    assert table.loc["INLP UPOS", "premise"].startswith("erased: failed (dev: probe 0.354")
    record = json.loads(table.loc["INLP UPOS", "premise records"])[0]
    assert (record["name"], record["holds"]) == ("erased", False)
    with pytest.raises(ValueError, match="premises given for"):
        stats.compare(runs, "random", column="acc", floor=False, premises={"nope": held})
