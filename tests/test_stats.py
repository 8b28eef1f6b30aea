"""Tests for tutorial_lib.stats: the one rule that calls a difference real, on known cases."""

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


def test_identical_runs_are_within_noise():
    c = stats.compare_runs(BASELINE, BASELINE, SEEDS, SEEDS)
    assert c.test == "paired t" and c.delta == 0.0 and c.p == 1.0
    assert c.verdict(higher_is_better=False) == stats.WITHIN_NOISE
    c = stats.compare_runs(BASELINE, BASELINE)  # unpaired: Welch
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
    assert stats.seeds_needed(0.01, 0.01) == math.ceil(2 * (1.959964 + 0.841621) ** 2)  # 16
    assert stats.seeds_needed(-0.01, 0.01) == stats.seeds_needed(0.01, 0.01)
    assert stats.seeds_needed(1.0, 0.01) == 2  # never fewer than two runs
    assert stats.seeds_needed(0.0, 0.01) == math.inf
    assert stats.seeds_needed(0.01, 0.02) > stats.seeds_needed(0.01, 0.01)  # noisier: more seeds


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
