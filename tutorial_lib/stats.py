"""Mean ± std over seeds, and the one rule every notebook uses to call a difference real.

A method is compared with its baseline on one metric over several runs (seeds or few-shot
splits). The rule, the same in every notebook and in RESULTS.md:

* **the test fits the design**: when every run of the method has a baseline run with the same
  seed (or split) — the runs share data order and initialisation — the difference is tested
  **paired** (a one-sample t-test on the per-seed differences); otherwise with **Welch's** t-test
  (unequal variances);
* **α = 0.05, two-sided**: "better"/"worse" only when p < 0.05, otherwise "within noise";
* every comparison reports Δ (method − baseline), its **95 % confidence interval** and an
  **effect size** (Cohen's d_z = mean difference / std of the differences, paired; Cohen's d with
  the pooled std, Welch).

With one run per side nothing can be tested: the verdict says so. With three seeds a t-test has
little power — an honest "within noise" is often all three seeds can say, and the notebooks say
how many seeds a difference of the observed size would need (:func:`seeds_needed`).

When two deterministic classifiers (probes) are scored on the *same* test items, the items are the
units: :func:`compare_items` pairs them with McNemar's exact test on the items one got right and
the other wrong — the same α and the same verdict words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

ALPHA = 0.05
WITHIN_NOISE = "within noise"


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n − 1; 0 for a single value)."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def fmt(mean: float, std: float, n: int, scale: float = 1.0, digits: int = 2, unit: str = "") -> str:
    """``"12.34 ± 0.56 %"``; one run: ``"12.34 % (1 run)"``."""
    if n > 1:
        return f"{scale * mean:.{digits}f} ± {scale * std:.{digits}f}{unit}"
    return f"{scale * mean:.{digits}f}{unit} (1 run)"


def summarize(
    table: pd.DataFrame, by: str | Sequence[str] = "method", column: str = "test_error",
    percent: bool = True, digits: int = 2,
) -> pd.DataFrame:
    """One row per group: ``mean``, ``std`` (in the column's units), ``runs`` and a formatted
    ``"<column> (mean ± std)"`` (× 100 with a % sign when ``percent``)."""
    g = table.groupby(by, sort=False)[column]
    out = pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1).fillna(0.0), "runs": g.count()})
    k, unit = (100.0, " %") if percent else (1.0, "")
    out[f"{column} (mean ± std)"] = [fmt(m, s, n, k, digits, unit)
                                    for m, s, n in zip(out["mean"], out["std"], out["runs"])]
    return out


@dataclass(frozen=True)
class Comparison:
    """One method against its baseline (values in the metric's own units)."""

    delta: float  # mean(method) − mean(baseline)
    low: float  # 95 % confidence interval of delta
    high: float
    p: float
    effect_size: float
    test: str  # "paired t", "Welch t" or "none"
    n: int  # runs of the method (pairs, when paired)

    def verdict(self, higher_is_better: bool) -> str:
        """"better" / "worse" (p < α), "within noise", or "not tested" with one run."""
        if self.test == "none":
            return "not tested (1 run)"
        if not self.p < ALPHA:
            return WITHIN_NOISE
        return "better" if (self.delta > 0) == higher_is_better else "worse"


def compare_runs(
    method: Sequence[float], baseline: Sequence[float],
    method_keys: Sequence[object] | None = None, baseline_keys: Sequence[object] | None = None,
) -> Comparison:
    """Test ``method`` against ``baseline`` with the rule of the module docstring.

    ``*_keys``: the seed (or split) of each run; when both sides have the same set of keys the
    runs are paired by key.
    """
    a, b = np.asarray(method, dtype=float), np.asarray(baseline, dtype=float)
    delta = float(a.mean() - b.mean())
    paired = (method_keys is not None and baseline_keys is not None and len(a) > 1
              and sorted(map(str, method_keys)) == sorted(map(str, baseline_keys))
              and len(set(map(str, method_keys))) == len(a) == len(b))
    if paired:
        order_b = {str(k): v for k, v in zip(baseline_keys, b)}
        d = np.array([v - order_b[str(k)] for k, v in zip(method_keys, a)])
        sd = d.std(ddof=1)
        if sd == 0:  # identical differences: the t statistic is infinite (or undefined at Δ = 0)
            return Comparison(delta, delta, delta, 0.0 if delta else 1.0,
                              math.copysign(math.inf, delta) if delta else 0.0, "paired t", len(d))
        res = sps.ttest_1samp(d, 0.0)
        ci = res.confidence_interval(1 - ALPHA)
        return Comparison(delta, float(ci.low), float(ci.high), float(res.pvalue),
                          float(d.mean() / sd), "paired t", len(d))
    if min(len(a), len(b)) < 2:
        return Comparison(delta, math.nan, math.nan, math.nan, math.nan, "none", len(a))
    res = sps.ttest_ind(a, b, equal_var=False)
    pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    if pooled == 0:
        return Comparison(delta, delta, delta, 0.0 if delta else 1.0,
                          math.copysign(math.inf, delta) if delta else 0.0, "Welch t", len(a))
    ci = res.confidence_interval(1 - ALPHA)
    return Comparison(delta, float(ci.low), float(ci.high), float(res.pvalue), delta / pooled,
                      "Welch t", len(a))


def compare(
    table: pd.DataFrame, baseline: str, *, by: str = "method", column: str = "test_error",
    higher_is_better: bool = False, pair_on: str | None = "seed", percent: bool = True,
) -> pd.DataFrame:
    """Every group of ``table[by]`` against ``baseline`` on ``column``: one row each with Δ, its
    95 % CI, the effect size, the test, p and the verdict (in points when ``percent``). The
    baseline's own row comes first, with its mean. ``pair_on``: the column that pairs runs."""
    groups = {name: g for name, g in table.groupby(by, sort=False)}
    if baseline not in groups:
        raise ValueError(f"baseline {baseline!r} is not in the table's {by!r} column: {list(groups)}")
    k = 100.0 if percent else 1.0
    unit = "points" if percent else "units"
    base = groups[baseline]
    rows = [{by: baseline, f"mean ({unit})": k * base[column].mean(), f"Δ ({unit})": 0.0,
             "95% CI": "", "effect size": math.nan, "test": "", "p": math.nan,
             "verdict": "(baseline)"}]
    for name, g in groups.items():
        if name == baseline:
            continue
        keys = (g[pair_on].tolist(), base[pair_on].tolist()) if pair_on in g else (None, None)
        c = compare_runs(g[column], base[column], *keys)
        rows.append({by: name, f"mean ({unit})": k * g[column].mean(), f"Δ ({unit})": k * c.delta,
                     "95% CI": "" if math.isnan(c.low) else f"[{k * c.low:+.2f}, {k * c.high:+.2f}]",
                     "effect size": c.effect_size, "test": c.test, "p": c.p,
                     "verdict": c.verdict(higher_is_better)})
    return pd.DataFrame(rows).set_index(by)


def sentences(comparison: pd.DataFrame, metric: str = "test error") -> str:
    """A comparison table from :func:`compare` as plain sentences, for a notebook to print."""
    unit_col = next(c for c in comparison.columns if c.startswith("Δ"))
    unit = unit_col[unit_col.index("(") + 1: -1]
    baseline = comparison.index[0]
    lines = []
    for name, r in comparison.iloc[1:].iterrows():
        ci = f", 95% CI {r['95% CI']}" if r["95% CI"] else ""
        p = "" if math.isnan(r["p"]) else f", {r['test']} p = {r['p']:.3f}"
        lines.append(f"{name}: {r[unit_col]:+.2f} {unit} of {metric} vs {baseline}{ci}{p} → "
                     f"{r['verdict']}")
    return "\n".join(lines)


def seeds_needed(delta: float, std: float, power: float = 0.8, alpha: float = ALPHA) -> int:
    """Runs per side a two-sample t-test needs to detect ``delta`` with a per-run ``std``
    (normal approximation, n = 2 (z_{1-α/2} + z_{power})² σ² / Δ²); ∞ when Δ = 0."""
    if delta == 0:
        return math.inf
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return max(2, math.ceil(2 * (z * std / delta) ** 2))


def compare_items(method_correct: Sequence[bool], baseline_correct: Sequence[bool]) -> Comparison:
    """Two classifiers on the same test items: Δ accuracy, its 95 % CI (normal approximation of
    the paired difference) and McNemar's exact two-sided p on the discordant items; effect size:
    the odds ratio of the discordant counts, in log form."""
    a = np.asarray(method_correct, dtype=bool)
    b = np.asarray(baseline_correct, dtype=bool)
    n = len(a)
    d = a.astype(float) - b.astype(float)
    delta = float(d.mean())
    half = float(sps.norm.ppf(1 - ALPHA / 2) * d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    p = float(sps.binomtest(only_a, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0
    effect = math.log((only_a + 0.5) / (only_b + 0.5))
    return Comparison(delta, delta - half, delta + half, p, effect, "McNemar", n)
