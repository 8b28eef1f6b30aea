"""**Premises**: what a comparison rests on, each measured in the run and each able to fail.

A verdict says something about a method only if the run achieved what the comparison assumes.
The learned-baseline guards of :mod:`tutorial_lib.stats` are two such premises (the baseline beat
its floor; the method left its start). The others, each a :class:`Premise` built here from the
run's own measurements and handed to ``stats.compare(premises=...)`` (or kept on a
``stats.Comparison``), turn a verdict into ``premise.failure`` when they fail — before every other
guard, never typed by hand:

==========================  =================================================================
kind (``Premise.name``)      fails when …  → verdict
==========================  =================================================================
``erased out of sample``    a fresh probe, trained on erased positions the eraser was **not**
                            fitted to, still reads the property above its floor + tolerance on
                            dev or test (:func:`erasure_premise`) → "void: property not erased".
                            In sample (the probe on the eraser's own fitting set) LEACE's class
                            means are equal by construction, so that check cannot fail: the
                            fitting and probing positions must be disjoint (checked here).
``stage learned``           an intermediate model (STILTs' MNLI stage, an auxiliary stage) is
                            not better than its own floor (:func:`stage_premise`)
                            → "void: intermediate stage did not learn".
``arms differ``             the two arms are the same runs or made identical predictions
                            (:func:`arms_differ`) → "untestable: the arms are the same runs":
                            not a null, nothing was compared. ``stats.Comparison.verdict`` also
                            finds it alone when every paired difference is exactly zero. A
                            control that asks about one choice (07's random auxiliary subset)
                            compares only that choice → "untestable: the arms trained on the
                            same auxiliary tasks".
``answers vary``            an arm gives one constant answer on every test item
                            (:func:`varied_answers`) → "void: constant answer": a rank
                            classifier stuck on one label measures the label prior, not the task.
``scorer learned``          a learned component the method's claim rests on (TDT's token
                            confidence: "task-guided") does not follow the label information —
                            a rank correlation not positive at p < α (:func:`follows_label`)
                            → "void: the scorer did not learn the label".
``baseline above floor``    the baseline's accuracy on the **items** it answered (pooled over
                            seeds) is not above its floor rate by an exact binomial test
                            (:func:`above_floor_items`) → "void: baseline at chance". The items
                            are the units, so the test can see what a t-test over three seeds
                            cannot; its minimum detectable effect is in the detail.
``trained (dev loss)``      a fine-tuning did not lower its loss on held-out (dev) examples, by a
                            paired test over those examples (:func:`loss_fell`) → "did not train".
                            First-vs-last training batch is not a test: batches differ.
``matched``                 a control meant to match the method on some quantity (the variance
                            an eraser removes, how far an encoder moved) is outside the stated
                            tolerance (:func:`matched`) → "void: control not matched".
==========================  =================================================================

Where a comparison rests on several premises, the first that fails decides (``premises=[...]``).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as sps

from .power import ALPHA, POWER

VOID_AT_CHANCE = "void: baseline at chance"
DID_NOT_TRAIN = "did not train"
VOID_NOT_ERASED = "void: property not erased"
VOID_STAGE = "void: intermediate stage did not learn"
UNTESTABLE = "untestable: the arms are the same runs"
UNTESTABLE_IDENTICAL = "untestable: the arms gave identical results on every run"
UNTESTABLE_SAME_TASKS = "untestable: the arms trained on the same auxiliary tasks"
VOID_CONSTANT = "void: constant answer"
VOID_NOT_MATCHED = "void: control not matched"
VOID_SCORER = "void: the scorer did not learn the label"


@dataclass(frozen=True)
class Premise:
    """A condition a comparison rests on, measured in the same run. When ``holds`` is False the
    verdict is ``failure``; ``name`` is the premise's kind (the table of the module docstring),
    ``detail`` what was measured. Saved with each effect (``results.effects``)."""

    holds: bool
    failure: str  # the verdict when it does not hold, e.g. VOID_NOT_ERASED
    detail: str = ""  # what was measured
    name: str = "premise"

    def record(self) -> dict:
        return {"name": self.name, "holds": bool(self.holds), "detail": self.detail}

    def text(self) -> str:
        return f"{self.name}: {'holds' if self.holds else 'failed'} ({self.detail})"


def erasure_premise(probe: Mapping[str, float], floor: Mapping[str, float], tol: float = 0.01, *,
                    fitted_on: Collection[Hashable] | None = None,
                    probed_on: Collection[Hashable] | None = None) -> Premise:
    """An eraser's premise: a fresh probe after erasure within ``tol`` of its floor (the majority
    rate) on every split measured (``{split: accuracy}``; e.g. dev and test) — INLP's own stopping
    rule, applied to its result and to any other eraser's. ``fitted_on`` / ``probed_on``: the
    positions the eraser was fitted to and those the fresh probe was trained on; when given they
    must be disjoint (an out-of-sample check), else a ValueError says so."""
    missing = sorted(set(probe) - set(floor))
    if missing or not probe:
        raise ValueError(f"an erasure premise needs the probe and its floor on the same splits: "
                         f"probe {sorted(probe)}, floor {sorted(floor)}")
    if fitted_on is not None and probed_on is not None:
        shared = set(fitted_on) & set(probed_on)
        if shared:
            raise ValueError(f"the fresh probe was trained on {len(shared)} positions the eraser was "
                             "fitted to: an in-sample check cannot fail (LEACE equalises the class "
                             "means there). Train the probe on erased positions outside the "
                             "eraser's fitting set.")
    over = {s for s in probe if probe[s] > floor[s] + tol}
    detail = "; ".join(f"{s}: probe {probe[s]:.3f} vs floor {floor[s]:.3f}" for s in probe)
    sample = " out of sample" if fitted_on is not None and probed_on is not None else ""
    return Premise(not over, VOID_NOT_ERASED, f"{detail} (tolerance {tol}){sample}",
                   "erased out of sample" if sample else "erased")


def stage_premise(check, what: str = "the intermediate stage") -> Premise:
    """An intermediate stage's premise: ``check`` is the stage's scores against its own floor
    (``stats.against_floor(scores, floor)``, in a higher-is-better metric); it holds when that
    test says "better" (p < α, above the floor)."""
    holds = check.raw_verdict(True) == "better"
    p = "no test (1 run)" if check.test == "none" else f"p = {check.p:.3f}"
    return Premise(holds, VOID_STAGE, f"{what}: {check.delta:+.4f} over its floor, {p}",
                   "stage learned")


def stage_premise_items(score: float, n: int, floor: float, what: str = "the intermediate stage"
                        ) -> Premise:
    """An intermediate stage trained **once** (STILTs fine-tunes one intermediate model), judged on
    its own test items: its accuracy ``score`` on ``n`` items against its floor rate (the
    majority class), by a one-sided exact binomial test (the items are the units); it holds when
    p < α."""
    if not 0 <= score <= 1 or n < 1:
        raise ValueError(f"stage_premise_items needs an accuracy in [0, 1] on n ≥ 1 items, not "
                         f"{score} on {n}")
    p = float(sps.binomtest(round(score * n), n, floor, alternative="greater").pvalue)
    return Premise(p < ALPHA, VOID_STAGE, f"{what}: {score:.3f} on {n:,} test items vs its floor "
                   f"{floor:.3f}, one-sided binomial p = {p:.3f}", "stage learned")


def binomial_mde(n: int, rate: float, power: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest gap over ``rate`` a two-sided test on ``n`` independent items detects with
    ``power`` at ``alpha`` (normal approximation: ``(z_{1-α/2} + z_power) · √(rate(1-rate)/n)``)."""
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return float(z * (rate * (1 - rate) / n) ** 0.5)


def above_floor_items(correct: Sequence[bool], floor: float, what: str = "the baseline") -> Premise:
    """The baseline against its floor on its **items** (``correct``: one bool per question or
    turn, pooled over seeds; ``floor``: the rate a trivial answer scores, e.g. the majority class
    or chance 1/N): an exact two-sided binomial test; it holds when the accuracy is above the floor
    with p < α. The detail gives the test's minimum detectable effect (:func:`binomial_mde`), so a
    failure on too few items says so."""
    n = len(correct)
    if n < 1 or not 0 < floor < 1:
        raise ValueError(f"above_floor_items needs items and a floor rate in (0, 1), not {n} items "
                         f"and {floor}")
    k = int(sum(bool(c) for c in correct))
    p = float(sps.binomtest(k, n, floor).pvalue)
    holds = k / n > floor and p < ALPHA
    return Premise(holds, VOID_AT_CHANCE,
                   f"{what}: {k / n:.3f} on {n} items vs its floor {floor:.3f}, binomial p = {p:.3f}; "
                   f"this test could see {100 * binomial_mde(n, floor):.1f} points",
                   "baseline above floor")


def loss_fell(before: Sequence[float], after: Sequence[float], what: str = "the fine-tuning"
              ) -> Premise:
    """A fine-tuning's premise: its loss on held-out examples (``before`` / ``after``: one loss
    per example, the same examples in the same order) fell, by a one-sided paired t-test with
    p < α. The training batches' own losses are no such test (each batch holds other examples)."""
    b, a = [float(x) for x in before], [float(x) for x in after]
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"loss_fell pairs losses example by example: {len(b)} before, {len(a)} after "
                         "(at least 2 each)")
    diffs = [y - x for x, y in zip(b, a)]
    if all(d == diffs[0] for d in diffs):
        p = 0.0 if diffs[0] < 0 else 1.0
    else:
        p = float(sps.ttest_rel(a, b, alternative="less").pvalue)
    mean_b, mean_a = sum(b) / len(b), sum(a) / len(a)
    return Premise(mean_a < mean_b and p < ALPHA, DID_NOT_TRAIN,
                   f"{what}: dev loss {mean_b:.3f} → {mean_a:.3f} on {len(a)} examples, one-sided "
                   f"paired t p = {p:.2g}", "trained (dev loss)")


def arms_differ(method: Sequence, baseline: Sequence, what: str = "runs", *,
                failure: str = UNTESTABLE) -> Premise:
    """Whether two arms are different: ``method`` and ``baseline`` are what identifies each run
    (e.g. the auxiliary tasks each seed trained on, or its predictions), in the same order. The
    premise fails when every one is equal — the "comparison" would test a run against itself.
    ``failure``: the verdict then (default :data:`UNTESTABLE`; :data:`UNTESTABLE_SAME_TASKS` where
    only the arms' choice of tasks is compared)."""
    if len(method) != len(baseline):
        raise ValueError(f"arms_differ compares run by run: {len(method)} vs {len(baseline)} {what}")
    if not len(method):
        raise ValueError(f"arms_differ needs at least one pair of {what}")
    same = [m == b for m, b in zip(method, baseline)]
    return Premise(not all(same), failure,
                   f"{sum(same)} of {len(same)} {what} identical", "arms differ")


def varied_answers(predictions: Sequence[Hashable], what: str = "the arm") -> Premise:
    """Whether an arm answers more than one thing on its test items (a classifier that always says
    the same label measures that label's share, not the task)."""
    if not len(predictions):
        raise ValueError("varied_answers needs the arm's predictions on its test items")
    answers = set(predictions)
    detail = (f"{what} answered {len(answers)} distinct labels on {len(predictions)} items"
              if len(answers) > 1 else
              f"{what} answered {next(iter(answers))!r} on all {len(predictions)} items")
    return Premise(len(answers) > 1, VOID_CONSTANT, detail, "answers vary")


def follows_label(rho: float, p: float, what: str) -> Premise:
    """Whether a learned score ranks things by their label information: Spearman's ``rho`` (score
    against a measure of label association) positive with ``p`` < α. A ranking that runs against
    the label, or none at all, fails: the method then works, if at all, without the guidance its
    name claims."""
    holds = rho > 0 and p < ALPHA
    return Premise(holds, VOID_SCORER, f"{what}: Spearman ρ = {rho:+.2f} (p = {p:.2g})",
                   "scorer learned")


def matched(control: float, target: float, tolerance: float, what: str) -> Premise:
    """A control matched to the method on ``what`` (e.g. the share of variance removed): it holds
    when ``|control − target| ≤ tolerance`` (absolute, in the quantity's units)."""
    gap = control - target
    return Premise(abs(gap) <= tolerance, VOID_NOT_MATCHED,
                   f"{what}: control {control:.4g} vs {target:.4g} (gap {gap:+.4g}, tolerance "
                   f"{tolerance:.4g})", "matched")
