"""Tests for tutorial_lib.power: the power of the verdict rule's t-test, minimum detectable
effects (against statsmodels' power solvers) and Holm's correction (against its multipletests)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from tutorial_lib import power as stats  # the names stats re-exports, tested where they live


def test_holm_on_a_hand_checked_example():
    """p = (0.01, 0.04, 0.03, 0.005), m = 4. Sorted: 0.005·4 = 0.02; 0.01·3 = 0.03; 0.03·2 = 0.06;
    0.04·1 = 0.04 → raised to the running maximum 0.06. statsmodels' multipletests(method="holm")
    gives the same (a dev dependency: the check below always runs)."""
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    out = stats.holm([0.01, None, float("nan"), 0.02])  # untested: NaN, not in the family
    assert out[0] == pytest.approx(0.02) and out[3] == pytest.approx(0.02)
    assert math.isnan(out[1]) and math.isnan(out[2])
    assert stats.holm([]) == []
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 0.2, 12)
    adj = np.array(stats.holm(p))
    assert np.all(adj >= p) and np.all(adj <= 1)
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= 0)  # monotone in p
    assert adj[order[0]] == pytest.approx(12 * p.min())  # the smallest: Bonferroni
    from statsmodels.stats.multitest import multipletests

    assert adj == pytest.approx(multipletests(p, method="holm")[1])


@pytest.mark.parametrize("n", [2, 3, 5, 10, 30])
def test_minimum_detectable_effect_matches_statsmodels_power_solver(n):
    """Paired (one-sample t on n differences of std s): MDE = d_min·s with d_min from statsmodels'
    TTestPower; two independent groups of n (equal variances, df = 2n − 2): d_min·s from
    TTestIndPower. Ours works from Δ's standard error and df alone: λ(df)·SE."""
    from statsmodels.stats.power import TTestIndPower, TTestPower

    s = 2.5
    paired = TTestPower().solve_power(effect_size=None, nobs=n, alpha=0.05, power=0.8)
    mde = stats.minimum_detectable_effect
    assert mde(s / math.sqrt(n), n - 1) == pytest.approx(paired * s, rel=1e-4)
    two = TTestIndPower().solve_power(effect_size=None, nobs1=n, alpha=0.05, power=0.8)
    assert mde(s * math.sqrt(2 / n), 2 * n - 2) == pytest.approx(two * s, rel=1e-4)
    # and the power at the MDE is 80 % by our own power function
    assert stats.t_power(paired, n) == pytest.approx(0.8, abs=1e-4)


def test_large_samples_need_the_normal_two_point_eight_standard_errors():
    lam = stats.detectable_noncentrality(math.inf)
    assert lam == pytest.approx(sps.norm.ppf(0.975) + sps.norm.ppf(0.8), abs=1e-3)  # 2.80
    assert stats.detectable_noncentrality(2) > stats.detectable_noncentrality(4) > lam  # few seeds
