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
how many seeds a difference of the observed size would need (:func:`seeds_needed`, from the
noncentral t).

When two deterministic classifiers (probes) are scored on the *same* test items, the items are the
units: :func:`compare_items` pairs them with McNemar's exact test on the items one got right and
the other wrong — the same α and the same verdict words.

**The learned-baseline guard.** A difference against a baseline that never learned says nothing
about the method. So a comparison may be given the baseline's trivial **floor** (:class:`Floor`:
the majority-class rate, or the task's chance metric; for an error, the majority-class error) and
a method's (or the baseline's) **starting point** (e.g. a prompt's zero-shot accuracy). Before Δ is
read, each is tested with the same rule: the baseline must be *better* than its floor (paired by
seed where the floor has one value per seed, else a one-sample t-test against the constant), and a
method with a start must be *better* than its start. Otherwise the verdict is computed as
**"void: baseline at chance"**, **"void: baseline did not train"** or, for the method,
**"did not train"** — in that order of precedence, never typed by hand.

**What a null could have seen.** "Within noise" is not "no effect": with three seeds the test can
miss large effects. Every comparison therefore carries its **minimum detectable effect**
(:meth:`Comparison.mde`, :func:`minimum_detectable_effect`): the smallest |Δ| the same test, at the
run's own spread and number of runs, detects with 80 % power at α = 0.05 — λ standard errors, λ
from the noncentral t (2.8 for many runs, 5.7 with three paired seeds). A within-noise verdict is
printed with it, and where the whole 95 % CI lies inside ±MDE the run bounds the effect
(:meth:`Comparison.bound`: "|Δ| ≤ the CI's farther end"). Set against a paper's number, the MDE
says whether a null is evidence (the paper's effect above the MDE and not seen) or silence (below
it); :meth:`Comparison.runs_for` says how many runs would detect it.

**The premise guard.** Some comparisons rest on something the run must first achieve: an
amnesic comparison says something about a property only if the eraser erased it (judged out of
sample), STILTs only if its intermediate stage learned, a comparison of two arms only if they are
different runs. A :class:`~tutorial_lib.premises.Premise` (:mod:`tutorial_lib.premises`: its kinds
and constructors) is computed in the run and given to :func:`compare`; when one fails the verdict
is its failure ("void: property not erased", "void: intermediate stage did not learn",
"untestable: the arms are the same runs", …), before every other guard. Two arms whose paired
differences are all exactly zero are found without being told: "untestable", never "within noise".
The floor test's own MDE is printed beside it (``floor MDE``): an evaluation too small to tell the
baseline from its floor says so.

**Multiplicity.** A notebook tests several effects. The verdict uses the **raw p** of its own test
(α = 0.05 per comparison): it is computed in the cell that runs the test, before the notebook's
other tests exist, and it never changes afterwards. The report (``RESULTS.md``, ``effects.json``)
adds beside it the **Holm-adjusted p** over the notebook's family — every effect it saved with
``results.save(effects=...)`` — (:func:`holm`): an effect whose Holm p is ≥ 0.05 would not survive
a family-wise error rate of 5 %, and the report says so; the held-out replication
(``benchmarks/replicate.py``) is the second check.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from .floors import (  # noqa: F401 (re-exported: stats.Floor, stats.majority_floor, …)
    FLOOR_SUFFIX,
    Floor,
    _as_floor,
    floor_column,
    floor_from_table,
    majority_floor,
)
from .power import (  # noqa: F401 (re-exported: stats.holm, stats.seeds_needed, …)
    ALPHA,
    POWER,
    _critical,
    detectable_noncentrality,
    equivalence_bound,
    holm,
    minimum_detectable_effect,
    parse_ci,
    seeds_needed,
    t_power,
)
from .premises import (  # noqa: F401 (re-exported: stats.Premise, stats.erasure_premise, …)
    DID_NOT_TRAIN,
    UNTESTABLE,
    UNTESTABLE_IDENTICAL,
    VOID_AT_CHANCE,
    VOID_NOT_ERASED,
    Premise,
    erasure_premise,
)

WITHIN_NOISE = "within noise"
VOID_BASELINE_DID_NOT_TRAIN = "void: baseline did not train"


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
    test: str  # "paired t", "Welch t", "one-sample t" or "none"
    n: int  # runs of the method (pairs, when paired)
    df: float = math.nan  # degrees of freedom of the t-test
    floor_check: Comparison | None = None  # the baseline against its floor
    start_check: Comparison | None = None  # the method against its starting point
    baseline_start_check: Comparison | None = None  # the baseline against its starting point
    premises: tuple[Premise, ...] = ()  # what the comparison rests on, measured in the run: the
    # first that fails decides the verdict

    @property
    def identical(self) -> bool:
        """Paired runs whose every difference is exactly zero: the arms gave identical results."""
        return self.test == "paired t" and self.delta == 0 and self.low == self.high == 0

    def raw_verdict(self, higher_is_better: bool) -> str:
        """"better" / "worse" (p < α), "within noise", or "not tested" with one run — the test
        alone, without the guards."""
        if self.test == "none":
            return "not tested (1 run)"
        if not self.p < ALPHA:
            return WITHIN_NOISE
        return "better" if (self.delta > 0) == higher_is_better else "worse"

    def verdict(self, higher_is_better: bool) -> str:
        """:meth:`raw_verdict`, unless a guard fails first: the method's premises (e.g.
        ``"void: property not erased"``, :class:`Premise`), identical arms (every paired difference
        zero: ``"untestable: …"``), the baseline not better than its floor
        (``"void: baseline at chance"``) or its start (``"void: baseline did not train"``), or the
        method not better than its start (``"did not train"``)."""
        if self.test == "none":
            return "not tested (1 run)"
        for premise in self.premises:
            if not premise.holds:
                return premise.failure
        if self.identical:
            return UNTESTABLE_IDENTICAL
        if self.floor_check is not None and self.floor_check.raw_verdict(higher_is_better) != "better":
            return VOID_AT_CHANCE
        if (self.baseline_start_check is not None
                and self.baseline_start_check.raw_verdict(higher_is_better) != "better"):
            return VOID_BASELINE_DID_NOT_TRAIN
        if self.start_check is not None and self.start_check.raw_verdict(higher_is_better) != "better":
            return DID_NOT_TRAIN
        return self.raw_verdict(higher_is_better)

    @property
    def se(self) -> float:
        """Δ's standard error, read back from the 95 % CI: half its width over the critical value
        (t with the test's ``df``; the normal for McNemar). NaN when nothing was tested."""
        if self.test == "none" or math.isnan(self.low) or math.isnan(self.high):
            return math.nan
        df = math.inf if self.test == "McNemar" else self.df
        return (self.high - self.low) / 2 / _critical(df, ALPHA)

    def mde(self, power: float = POWER, alpha: float = ALPHA) -> float:
        """The **minimum detectable effect**: the smallest |Δ| this design — its own spread and its
        number of runs — detects with probability ``power`` (:func:`minimum_detectable_effect`).
        A "within noise" verdict says nothing about effects smaller than this."""
        df = math.inf if self.test == "McNemar" else self.df
        return minimum_detectable_effect(self.se, df, power, alpha)

    def runs_for(self, delta: float, power: float = POWER, alpha: float = ALPHA) -> float:
        """Runs (pairs when paired; per side for Welch) with which a repeat of this comparison, at
        its observed spread, would detect a true Δ of ``delta`` (e.g. a paper's number) with
        ``power``. NaN for McNemar (its units are test items, not runs)."""
        if self.test in ("none", "McNemar") or math.isnan(self.se):
            return math.nan
        paired = self.test != "Welch t"
        spread = self.se * math.sqrt(self.n if paired else self.n / 2)
        return seeds_needed(delta, spread, power=power, alpha=alpha, paired=paired)

    def bound(self, power: float = POWER, alpha: float = ALPHA) -> float | None:
        """An **equivalence statement** for a null: when the verdict is within noise and the whole
        95 % CI lies inside ±MDE, the effect is "no larger than" the CI's farthest end (returned);
        None otherwise (the run cannot bound it that tightly)."""
        if self.raw_verdict(True) != WITHIN_NOISE:
            return None
        return equivalence_bound(self.low, self.high, self.mde(power, alpha))

    def seeds_needed(self, power: float = 0.8, alpha: float = ALPHA) -> float:
        """Runs a repeat of this comparison would need (pairs when paired; per side otherwise) to
        detect the observed Δ with ``power``, from its effect size (:func:`seeds_needed`)."""
        if self.test in ("none", "McNemar") or not self.effect_size:
            return math.inf
        if math.isinf(self.effect_size):
            return 2
        return seeds_needed(self.effect_size, 1.0, power=power, alpha=alpha,
                            paired=self.test != "Welch t")


def against_floor(values: Sequence[float], floor: Floor | float,
                  keys: Sequence[object] | None = None) -> Comparison:
    """``values`` (one run each) against ``floor``: Δ = mean(values) − floor. Paired by key when
    the floor has a value per seed/split (every run's key must be there), else a one-sample
    t-test against the constant. Read its direction with ``.raw_verdict(higher_is_better)``."""
    floor = _as_floor(floor, "floor")
    v = np.asarray(values, dtype=float)
    if isinstance(floor.value, Mapping):
        table = {str(k): float(x) for k, x in floor.value.items()}
        if keys is None or any(str(k) not in table for k in keys):
            raise ValueError(f"the floor {floor.what!r} has one value per seed/split "
                             f"({sorted(table)}) but the runs' keys are {keys}: pass the runs' seeds "
                             "(pair_on) or give the floor as one number")
        d = v - np.array([table[str(k)] for k in keys])
        test = "paired t"
    else:
        d = v - float(floor.value)
        test = "one-sample t"
    return _one_sample(d, test)


def _one_sample(d: np.ndarray, test: str) -> Comparison:
    """A one-sample t-test of the differences ``d`` against 0."""
    delta = float(d.mean())
    if len(d) < 2:
        return Comparison(delta, math.nan, math.nan, math.nan, math.nan, "none", len(d))
    sd = d.std(ddof=1)
    if sd <= 1e-12 * max(1.0, abs(delta)):  # identical differences (up to rounding): the t
        # statistic is infinite (or undefined at Δ = 0)
        return Comparison(delta, delta, delta, 0.0 if delta else 1.0,
                          math.copysign(math.inf, delta) if delta else 0.0, test, len(d), len(d) - 1)
    res = sps.ttest_1samp(d, 0.0)
    ci = res.confidence_interval(1 - ALPHA)
    return Comparison(delta, float(ci.low), float(ci.high), float(res.pvalue), float(delta / sd),
                      test, len(d), float(res.df))


def compare_runs(
    method: Sequence[float], baseline: Sequence[float],
    method_keys: Sequence[object] | None = None, baseline_keys: Sequence[object] | None = None,
    *, floor: Floor | float | None = None, start: Floor | float | None = None,
    baseline_start: Floor | float | None = None,
) -> Comparison:
    """Test ``method`` against ``baseline`` with the rule of the module docstring.

    ``*_keys``: the seed (or split) of each run; when both sides have the same set of keys the
    runs are paired by key. The guards (all optional, in the runs' units): ``floor``, the
    baseline's trivial floor; ``start``, the method's starting point; ``baseline_start``, the
    baseline's. Each is tested (:func:`against_floor`) and kept on the result, whose
    :meth:`Comparison.verdict` then voids the comparison when a guard fails.
    """
    c = _compare_runs(method, baseline, method_keys, baseline_keys)
    checks = {}
    if floor is not None:
        checks["floor_check"] = against_floor(baseline, _as_floor(floor, "floor"), baseline_keys)
    if baseline_start is not None:
        checks["baseline_start_check"] = against_floor(baseline, _as_floor(baseline_start, "start"),
                                                       baseline_keys)
    if start is not None:
        checks["start_check"] = against_floor(method, _as_floor(start, "start"), method_keys)
    return replace(c, **checks) if checks else c


def _compare_runs(method: Sequence[float], baseline: Sequence[float],
                  method_keys: Sequence[object] | None, baseline_keys: Sequence[object] | None,
                  ) -> Comparison:
    a, b = np.asarray(method, dtype=float), np.asarray(baseline, dtype=float)
    delta = float(a.mean() - b.mean())
    paired = (method_keys is not None and baseline_keys is not None and len(a) > 1
              and sorted(map(str, method_keys)) == sorted(map(str, baseline_keys))
              and len(set(map(str, method_keys))) == len(a) == len(b))
    if paired:
        order_b = {str(k): v for k, v in zip(baseline_keys, b)}
        return _one_sample(np.array([v - order_b[str(k)] for k, v in zip(method_keys, a)]),
                           "paired t")
    if min(len(a), len(b)) < 2:
        return Comparison(delta, math.nan, math.nan, math.nan, math.nan, "none", len(a))
    res = sps.ttest_ind(a, b, equal_var=False)
    pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    if pooled == 0:
        return Comparison(delta, delta, delta, 0.0 if delta else 1.0,
                          math.copysign(math.inf, delta) if delta else 0.0, "Welch t", len(a),
                          len(a) + len(b) - 2)
    ci = res.confidence_interval(1 - ALPHA)
    return Comparison(delta, float(ci.low), float(ci.high), float(res.pvalue), delta / pooled,
                      "Welch t", len(a), float(res.df))


def compare(
    table: pd.DataFrame, baseline: str, *, by: str = "method", column: str = "test_error",
    higher_is_better: bool = False, pair_on: str | None = "seed", percent: bool = True,
    floor: Floor | float | bool | None = None,
    starts: Mapping[str, Floor | float] | None = None,
    premises: Mapping[str, Premise | Sequence[Premise]] | None = None,
) -> pd.DataFrame:
    """Every group of ``table[by]`` against ``baseline`` on ``column``: one row each with Δ, its
    95 % CI, the effect size, the test, p (no Holm adjustment here: a notebook has one Holm
    family, every test it saves, :func:`tutorial_lib.results.holm_family`), the verdict, the
    minimum detectable effect ``MDE``
    (:meth:`Comparison.mde`, in Δ's units) and ``n`` (runs, pairs when paired) with the test's
    degrees of freedom ``df`` (in points when ``percent``). The baseline's own row comes
    first, with its mean. ``pair_on``: the column that pairs runs.

    The guards (module docstring), in ``column``'s units: ``floor`` — the baseline's trivial floor
    (e.g. ``Floor(1 - task.majority_baseline()["accuracy"])`` for an error, or
    :func:`majority_floor`); ``starts`` — ``{group: its starting point}`` (a prompt's zero-shot
    accuracy; the baseline may be one of them). A floor adds the columns ``floor`` and ``floor p``
    (on the baseline's row: the baseline against its floor), starts add ``start`` and ``start p``
    (on each row with a start); ``premises`` — ``{group: its Premise or Premises}`` (e.g.
    :func:`erasure_premise`, :mod:`tutorial_lib.premises`): a group whose premise failed gets the
    premise's verdict; the table's ``premise`` column says each one's state and ``premise records``
    keeps them as JSON records (``results.effects`` saves them with each effect). A floor adds
    ``floor MDE``: the smallest gap over the floor its test could see. The
    verdicts are voided where a guard fails. Without ``floor``,
    the floor comes from the table itself when its runs carry one (:func:`floor_from_table`:
    ``finetuning.compare_methods`` writes it from the task), so every such comparison is
    guarded; ``floor=False`` turns the guard off.
    """
    if floor is None:
        floor = floor_from_table(table, baseline, by=by, column=column, pair_on=pair_on)
    elif floor is False:
        floor = None
    groups = {name: g for name, g in table.groupby(by, sort=False)}
    if baseline not in groups:
        raise ValueError(f"baseline {baseline!r} is not in the table's {by!r} column: {list(groups)}")
    starts = {name: _as_floor(v, "start") for name, v in (starts or {}).items()}
    premises = {name: (p,) if isinstance(p, Premise) else tuple(p)
                for name, p in (premises or {}).items()}
    if sorted(set(premises) - set(groups)):
        raise ValueError(f"premises given for {sorted(set(premises) - set(groups))}, which are not "
                         f"in the table's {by!r} column: {list(groups)}")
    unknown = sorted(set(starts) - set(groups))
    if unknown:
        raise ValueError(f"starts given for {unknown}, which are not in the table's {by!r} column: "
                         f"{list(groups)}")
    floor = _as_floor(floor, "floor")
    k = 100.0 if percent else 1.0
    unit = "points" if percent else "units"
    base = groups[baseline]
    base_keys = base[pair_on].tolist() if pair_on in base else None
    rows = [{by: baseline, f"mean ({unit})": k * base[column].mean(), f"Δ ({unit})": 0.0,
             "95% CI": "", "effect size": math.nan, "test": "", "p": math.nan,
             "verdict": "(baseline)", "MDE": math.nan, "n": len(base), "df": math.nan}]
    guards = floor is not None or bool(starts)
    if guards:
        rows[0].update(_guard_columns(base[column], base_keys, floor, starts.get(baseline), k))
        check = against_floor(base[column], floor, base_keys) if floor is not None else None
        if check is not None and check.raw_verdict(higher_is_better) != "better":
            rows[0]["verdict"] = (f"(baseline) at its floor: {floor.what}" if check.test != "none"
                                  else "(baseline) floor not tested (1 run)")
    for name, g in groups.items():
        if name == baseline:
            continue
        keys = (g[pair_on].tolist(), base_keys) if pair_on in g else (None, None)
        c = compare_runs(g[column], base[column], *keys, floor=floor, start=starts.get(name),
                         baseline_start=starts.get(baseline))
        if name in premises:
            c = replace(c, premises=premises[name])
        row = {by: name, f"mean ({unit})": k * g[column].mean(), f"Δ ({unit})": k * c.delta,
               "95% CI": "" if math.isnan(c.low) else f"[{k * c.low:+.2f}, {k * c.high:+.2f}]",
               "effect size": c.effect_size, "test": c.test, "p": c.p,
               "verdict": c.verdict(higher_is_better), "MDE": k * c.mde(), "n": c.n, "df": c.df}
        if guards:
            row.update(_guard_columns(g[column], keys[0], None, starts.get(name), k))
        if premises:
            row["premise"] = "; ".join(p.text() for p in premises.get(name, ()))
            row["premise records"] = json.dumps([p.record() for p in premises.get(name, ())])
        rows.append(row)
    out = pd.DataFrame(rows).set_index(by)
    unused = [c for name, given in (("floor", floor is not None), ("start", bool(starts)))
              if not given for c in (name, f"{name} p", f"{name} MDE")]
    return out.drop(columns=[c for c in unused if c in out])


def _guard_columns(values: pd.Series, keys: Sequence[object] | None, floor: Floor | None,
                   start: Floor | None, k: float) -> dict:
    out = {"floor": math.nan, "floor p": math.nan, "floor MDE": math.nan, "start": math.nan,
           "start p": math.nan}
    for name, f in (("floor", floor), ("start", start)):
        if f is not None:
            check = against_floor(values, f, keys)
            out[name] = k * f.mean
            out[f"{name} p"] = check.p
            if name == "floor":
                out["floor MDE"] = k * check.mde()
    return out


def sentences(comparison: pd.DataFrame, metric: str = "test error") -> str:
    """A comparison table from :func:`compare` as plain sentences, for a notebook to print
    (with guards: first how the baseline and any method with a start did against them)."""
    unit_col = next(c for c in comparison.columns if c.startswith("Δ"))
    mean_col = next(c for c in comparison.columns if c.startswith("mean"))
    unit = unit_col[unit_col.index("(") + 1: -1]
    baseline = comparison.index[0]
    lines = []
    for name, r in comparison.iterrows():
        for guard in ("floor", "start"):
            if guard in r and not pd.isna(r[guard]):
                mde = r.get(f"{guard} MDE", math.nan)
                lines.append(f"{name}: {r[mean_col]:.2f} vs its {guard} {r[guard]:.2f}, p = "
                             f"{r[f'{guard} p']:.3f}"
                             + ("" if pd.isna(mde) else f" (this test could see {mde:.2f} {unit})"))
    for name, r in comparison.iloc[1:].iterrows():
        ci = f", 95% CI {r['95% CI']}" if r["95% CI"] else ""
        p = "" if math.isnan(r["p"]) else f", {r['test']} p = {r['p']:.3f}"
        lines.append(f"{name}: {r[unit_col]:+.2f} {unit} of {metric} vs {baseline}{ci}{p} → "
                     f"{r['verdict']}{null_text(r, unit)}")
    return "\n".join(lines)


def null_text(row: Mapping, unit: str = "points") -> str:
    """What a within-noise row of a :func:`compare` table could have seen: `` (MDE X unit)``, and
    where its CI lies inside ±MDE, ``; |Δ| ≤ Y`` (the equivalence statement). "" otherwise."""
    mde = row.get("MDE", math.nan)
    if row.get("verdict") != WITHIN_NOISE or mde is None or math.isnan(mde):
        return ""
    bound = equivalence_bound(*parse_ci(row.get("95% CI")), mde)
    return f" (MDE {mde:.2f} {unit}" + ("" if bound is None else f"; |Δ| ≤ {bound:.2f}") + ")"


def within_margin(comparison: Comparison, margin: float) -> bool:
    """Whether the whole 95 % CI of Δ lies inside ±``margin`` (in Δ's units): "as good as the
    baseline, to within ``margin``" is shown only then — a point estimate inside the margin with
    an interval reaching past it (03: m = 8 at +2.00 points, CI up to +4.28) is not shown to be
    inside. False when the CI is undefined (one run)."""
    if math.isnan(comparison.low) or math.isnan(comparison.high):
        return False
    return -margin <= comparison.low and comparison.high <= margin


def compare_items(method_correct: Sequence[bool], baseline_correct: Sequence[bool],
                  floor_correct: Sequence[bool] | None = None) -> Comparison:
    """Two classifiers on the same test items: Δ accuracy, its 95 % CI (normal approximation of
    the paired difference) and McNemar's exact two-sided p on the discordant items; effect size:
    the odds ratio of the discordant counts, in log form.

    ``floor_correct``: the trivial classifier on the same items (e.g. the majority tag,
    ``probing.majority_correct_by_word``); the baseline is then tested against it the same way
    (``floor_check``) and :meth:`Comparison.verdict` is "void: baseline at chance" unless the
    baseline is better."""
    if floor_correct is not None:
        check = compare_items(baseline_correct, floor_correct)
        return replace(compare_items(method_correct, baseline_correct), floor_check=check)
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
