"""Power and multiplicity: what a t-test of the verdict rule can detect, and Holm's correction.

:mod:`tutorial_lib.stats` re-exports every name here (``stats.minimum_detectable_effect``,
``stats.seeds_needed``, ``stats.holm`` …): this module keeps its arithmetic apart from the verdict
rule that uses it.

* :func:`t_power` — the power of the two-sided t-test to detect a standardised difference with n
  runs, from the noncentral t;
* :func:`seeds_needed` — the fewest runs that detect a difference with 80 % power;
* :func:`detectable_noncentrality` and :func:`minimum_detectable_effect` — the smallest true |Δ| a
  test detects with 80 % power, λ standard errors (matches ``statsmodels``' power solvers);
* :func:`holm` — Holm's step-down adjusted p-values for one family of tests;
* :func:`parse_ci`, :func:`equivalence_bound` — a printed CI, and the bound a null sets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq

ALPHA = 0.05
POWER = 0.8  # the power a minimum detectable effect is computed for (Cohen's convention)


def t_power(effect_size: float, n: int, alpha: float = ALPHA, paired: bool = True) -> float:
    """The power of the two-sided t-test at level ``alpha`` to detect a standardised difference
    ``effect_size`` with ``n`` runs (paired: ``n`` pairs and Cohen's d_z = Δ / std of the
    differences; else ``n`` runs per side, Cohen's d = Δ / per-run std, equal variances), from the
    **noncentral t** distribution: P(|T| > t_{1−α/2, df}) with T ~ t(df, λ), df = n − 1 and
    λ = d·√n paired, df = 2n − 2 and λ = d·√(n/2) otherwise."""
    df = n - 1 if paired else 2 * n - 2
    if df < 1:
        return math.nan
    nc = abs(effect_size) * (math.sqrt(n) if paired else math.sqrt(n / 2))
    crit = sps.t.ppf(1 - alpha / 2, df)
    return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


def seeds_needed(delta: float, std: float, power: float = 0.8, alpha: float = ALPHA,
                 paired: bool = False, most: int = 10_000) -> float:
    """The fewest runs (pairs when ``paired``, else per side; at least two) with which the t-test
    of the verdict rule detects ``delta`` with probability ``power`` — :func:`power` from the
    noncentral t, not the normal approximation (which claims ≈ 3 seeds where 3 seeds gave
    p = 0.094). ``std``: of the per-seed differences when ``paired``, else of one run. ∞ when
    Δ = 0 or more than ``most`` runs would be needed. Power: :func:`t_power`;
    :meth:`Comparison.seeds_needed` does this from a comparison's own effect size."""
    if delta == 0 or std < 0:
        return math.inf
    if std == 0:
        return 2
    d = abs(delta) / std
    for n in range(2, most + 1):
        if t_power(d, n, alpha, paired) >= power:
            return n
    return math.inf


def _critical(df: float, alpha: float) -> float:
    """The two-sided critical value: t with ``df`` degrees of freedom, the normal when df = ∞."""
    return float(sps.norm.ppf(1 - alpha / 2) if math.isinf(df) else sps.t.ppf(1 - alpha / 2, df))


def detectable_noncentrality(df: float, power: float = POWER, alpha: float = ALPHA) -> float:
    """λ such that the two-sided test at level ``alpha`` rejects with probability ``power`` when
    the true Δ is λ standard errors: P(|T| > t_{1−α/2}) = power with T ~ noncentral t(df, λ)
    (the normal shifted by λ when df = ∞): 2.80 for large df, 3.76 at df = 4 (5 paired seeds),
    5.65 at df = 2 (3 paired seeds)."""
    if not df or df < 1 or math.isnan(df):
        return math.nan
    crit = _critical(df, alpha)
    if math.isinf(df):
        def reject(lam: float) -> float:
            return float(sps.norm.sf(crit - lam) + sps.norm.cdf(-crit - lam))
    else:  # (the far tail's mass, NaN in scipy for a large λ at df = 1, is 0)
        def reject(lam: float) -> float:
            return float(sps.nct.sf(crit, df, lam) + np.nan_to_num(sps.nct.cdf(-crit, df, lam)))
    high = 8.0
    while reject(high) < power:
        high *= 2
    return float(brentq(lambda lam: reject(lam) - power, 0.0, high))


def minimum_detectable_effect(se: float, df: float, power: float = POWER,
                              alpha: float = ALPHA) -> float:
    """The smallest true |Δ| the verdict rule's test detects with probability ``power``, given
    Δ's standard error ``se`` and the test's ``df``: λ·SE (:func:`detectable_noncentrality`).
    Paired with n runs this is d_min·s, d_min the standardised effect of ``statsmodels``'
    ``TTestPower().solve_power(nobs=n, power=power)`` and s the std of the differences."""
    if se is None or math.isnan(se) or df is None:
        return math.nan
    return detectable_noncentrality(df, power, alpha) * se


def holm(pvalues: Sequence[float | None]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979) for one family of tests, in input order.

    Sorted ascending p_(1) ≤ … ≤ p_(m): p̃_(i) = min(1, max_{j ≤ i} (m − j + 1) p_(j)). Rejecting
    where p̃ < α keeps the family-wise error rate at α. ``None``/NaN (untested) pass through as NaN
    and do not count in m."""
    p = np.array([math.nan if v is None else float(v) for v in pvalues])
    tested = np.flatnonzero(~np.isnan(p))
    out = np.full(len(p), math.nan)
    m = len(tested)
    order = tested[np.argsort(p[tested], kind="stable")]
    running = 0.0
    for i, idx in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[idx]))
        out[idx] = running
    return out.tolist()


def parse_ci(text: object) -> tuple[float, float]:
    """(low, high) of a CI as the tables print it, ``"[-0.50, +0.70]"``; (NaN, NaN) for none."""
    if not text or (isinstance(text, float) and math.isnan(text)):
        return math.nan, math.nan
    low, high = (float(x) for x in str(text).strip("[]").split(","))
    return low, high


def equivalence_bound(low: float, high: float, mde: float) -> float | None:
    """The equivalence statement of a null: the CI's farther end when the whole CI lies inside
    ±``mde``, else None (the run cannot bound the effect that tightly)."""
    if any(math.isnan(v) for v in (low, high, mde)) or not (-mde <= low and high <= mde):
        return None
    return max(abs(low), abs(high))
