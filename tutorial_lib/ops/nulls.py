"""The report's power section: what each null could have seen, and the sources' effects beside it.

:func:`with_power` adds to every effect record its minimum detectable effect and, where
``references.SOURCE_EFFECTS`` has the source's number for the comparison, whether this run could
have seen it; :func:`power_markdown` is RESULTS.md's "What the nulls could have seen" section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .. import stats
from ..methods import references
from ..results import (  # noqa: F401 (the statuses, re-exported: reports.SOURCE_BELOW, …)
    SOURCE_BELOW,
    SOURCE_EXCLUDED,
    SOURCE_NOT_SEEN,
    SOURCE_OPPOSITE,
    SOURCE_SEEN,
    power_of,
    source_status,
)


def with_power(records: Sequence[dict]) -> list[dict]:
    """``records`` with ``mde`` and ``no_larger_than`` (:func:`tutorial_lib.results.power_of`, from
    each record's standard error and df; a record saved before they existed gets them here) and,
    where ``references.SOURCE_EFFECTS`` holds the source's number for the comparison:
    ``source_delta``, ``runs_for_source`` (runs a repeat would need to detect it with 80 % power
    at this run's spread) and ``source_vs_run`` (:func:`tutorial_lib.results.source_status`) —
    for a null: "outside our 95 % CI" (the run's interval excludes the source's number: evidence
    against it here, whatever the MDE), else "below our MDE" (this run could not have seen it:
    its null says nothing about the source) or "above our MDE and not seen"; for a decided verdict
    "seen" or "opposite sign seen"; a void or untestable verdict is itself."""
    out = []
    for r in records:
        r = dict(r)
        if r.get("mde") is None:
            r.update(power_of(r))
        source = references.source_effect(r)
        if source is not None:
            r.update(source_delta=round(source.delta, 3), source_verified=source.verified,
                     **_against_source(r, source.delta))
        out.append(r)
    return out


def _against_source(r: Mapping, delta: float) -> dict:
    mde, se, n = r.get("mde"), r.get("se"), r.get("n")
    if mde is None or se is None or not n:
        return {"runs_for_source": None, "source_vs_run": "not tested"}
    paired = r.get("test") != "Welch t"
    spread = float(se) * math.sqrt(n if paired else n / 2)
    runs = stats.seeds_needed(delta, spread, paired=paired)
    status = source_status(str(r.get("verdict", "")), r["delta"], r.get("ci95"), mde, delta)
    return {"runs_for_source": None if math.isinf(runs) else int(runs), "source_vs_run": status}


def power_markdown(records: Sequence[dict]) -> str:
    """The report's "What the nulls could have seen" section: for every within-noise effect its
    minimum detectable effect (80 % power, α = 0.05, from the run's own spread and n) and, where
    its CI lies inside ±MDE, the bound it sets; then every effect with a source's number: whether
    this run could have seen it and how many runs would."""
    nulls = [r for r in records if r.get("verdict") == stats.WITHIN_NOISE]
    lines = ["## What the nulls could have seen\n",
             f"{len(nulls)} of {len(records)} effects are within noise. A null says nothing about "
             "effects smaller than its **minimum detectable effect** (MDE: the |Δ| the verdict "
             "rule's t-test detects with 80 % power at α = 0.05, given the run's own spread and "
             "number of runs; `tutorial_lib.stats.minimum_detectable_effect`). Where the whole 95 % "
             "CI lies inside ±MDE the run bounds the effect: |Δ| ≤ the CI's farther end.\n",
             "| notebook | effect | metric | Δ | 95 % CI | MDE | bound |", "|---|---|---|---|---|---|---|"]
    for r in nulls:
        mde = "—" if r.get("mde") is None else f"{r['mde']:.2f}"
        bound = "—" if r.get("no_larger_than") is None else f"\\|Δ\\| ≤ {r['no_larger_than']:.2f}"
        lines.append(f"| {r['notebook']} | {r['method']} vs {r['baseline']} | {r['metric']} | "
                     f"{r['delta']:+.2f} | {r.get('ci95') or '—'} | {mde} | {bound} |")
    sourced = [r for r in records if r.get("source_delta") is not None]
    if sourced:
        lines += ["", "The sources' numbers for some of these comparisons (`references.SOURCE_EFFECTS`,"
                  " as a Δ in our units; often from another benchmark or model): **below our MDE** "
                  "means this run could not have seen an effect that size, so its null says nothing "
                  "about the source; **above our MDE and not seen** is evidence against that size "
                  "here, and so is **outside our 95 % CI** (the interval excludes the source's Δ, "
                  "even where the MDE is larger). Runs needed: to detect the source's Δ with 80 % "
                  "power at this run's spread.\n",
                  "| notebook | effect | our Δ | MDE | source's Δ | runs needed | status |",
                  "|---|---|---|---|---|---|---|"]
        for r in sourced:
            mde = "—" if r.get("mde") is None else f"{r['mde']:.2f}"
            runs = "—" if r.get("runs_for_source") is None else str(r["runs_for_source"])
            lines.append(f"| {r['notebook']} | {r['method']} vs {r['baseline']} | {r['delta']:+.2f} | "
                         f"{mde} | {r['source_delta']:+.2f}"
                         f"{'' if r['source_verified'] else ' (**unverified**)'} | {runs} | "
                         f"{r['source_vs_run']} |")
    return "\n".join(lines) + "\n"
