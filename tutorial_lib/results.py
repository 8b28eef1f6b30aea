"""Saving each notebook's results: what a notebook calls.

A notebook ends with ``results.save(settings, {"TREC-6 test error": table}, seeds=...)`` (the
settings name the notebook and carry its scale), its effects from :func:`effects`. Files go to
``$TUTORIAL_RESULTS_DIR`` (the main job sets it), else to the cache. The main job's report
``RESULTS.md``, built from them, is an operation: :mod:`tutorial_lib.ops.report`.

Reading them back: what a comparison says of a source's number (:func:`source_status`: "below our
MDE" only where the CI does not exclude it), the test over both seed sets (:func:`pooled_effect`,
also the held-out replication's, ``benchmarks/replicate.py``) and, in a notebook, this run pooled
with the committed run of the other seed set (:func:`pooled_with_committed`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from scipy import stats as sps

from . import stats
from .config import RESULTS_ENV_VAR, Scale, cache_dir, seed_set
from .runtime import atomic_write, describe
from .settings import Settings, notebook_name


def results_dir(scale: Scale) -> Path:
    root = os.environ.get(RESULTS_ENV_VAR)
    path = Path(root) if root else cache_dir(scale.name) / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _plain(value: object) -> object:
    """``value`` with tuples, numpy scalars and the like turned into JSON types."""
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def seeds_of(table: pd.DataFrame, by: str | None = None, column: str = "seed") -> list | dict:
    """The seeds a runs table actually holds: a sorted list, or ``{group: [...]}`` when ``by``'s
    groups used different seeds (e.g. the 3-seed small models and the 1-seed MiniLM)."""
    if by is None:
        return sorted({int(s) for s in table[column]})
    groups = {str(k): sorted({int(s) for s in g[column]}) for k, g in table.groupby(by, sort=False)}
    first = next(iter(groups.values()), [])
    return first if all(v == first for v in groups.values()) else groups


BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def benchmark(name: str) -> dict | None:
    """A committed benchmark result, ``benchmarks/results/<name>.json`` of the repository (None
    when the package is installed without the repository, e.g. with pip on Colab)."""
    path = BENCHMARKS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def effects(comparison: pd.DataFrame, *, metric: str, backbone: str, expected: str = "none",
            source: str = "", higher_is_better: bool = False) -> list[dict]:
    """The rows of a :func:`tutorial_lib.stats.compare` table as effect records for the report's
    "Results at a glance": one per method with Δ, its CI, p, the verdict, the sign the literature
    expects (``"+"`` better, ``"-"`` worse, ``"none"``: no sign claimed) and where that comes from;
    plus ``n``, ``df`` and ``se`` (Δ's standard error, from the CI) for the pooled replication test,
    the guards (:func:`guards_of`) and ``premises``: what the comparison rested on, each with its
    name, state and what was measured (:mod:`tutorial_lib.premises`; ``[]`` where none was given)."""
    unit = next(c for c in comparison.columns if c.startswith("Δ"))
    baseline = comparison.index[0]
    out = []
    for method, r in comparison.iloc[1:].iterrows():
        out.append({"backbone": backbone, "method": str(method), "baseline": str(baseline),
                    "metric": metric + (" (higher is better)" if higher_is_better else ""),
                    "delta": round(float(r[unit]), 3), "unit": unit[unit.index("(") + 1: -1],
                    "ci95": r["95% CI"], "p": None if pd.isna(r["p"]) else float(r["p"]),
                    "test": r["test"], "verdict": r["verdict"], "expected": expected,
                    "source": source, **_test_size(r), **guards_of(comparison, method),
                    "premises": _premise_records(r)})
    return out


def holm_family(effects: Sequence[Mapping]) -> pd.DataFrame:
    """A notebook's one Holm family: every test it saves (the records of :func:`effects`), each
    with its raw p, its Holm-adjusted p over all of them, the verdict (the raw p's, as
    everywhere) and, for a better/worse verdict, whether it survives Holm — the family the report
    (``RESULTS.md``, "Multiplicity") reads. Untested rows (p None) are listed, not counted."""
    ps = [e.get("p") for e in effects]
    tested = [i for i, p in enumerate(ps) if p is not None]
    adjusted = dict(zip(tested, stats.holm([ps[i] for i in tested])))
    rows = []
    for i, e in enumerate(effects):
        q = adjusted.get(i)
        claimed = e.get("verdict") in ("better", "worse")
        rows.append({"method": e["method"], "baseline": e["baseline"], "metric": e["metric"],
                     "Δ": e.get("delta"), "p": ps[i], "Holm p": q, "verdict": e.get("verdict"),
                     "Holm": ("survives" if q is not None and q < stats.ALPHA else "does not survive")
                     if claimed else ""})
    out = pd.DataFrame(rows)
    out.attrs["tests"] = len(tested)
    return out


def holm_text(family: pd.DataFrame) -> str:
    """One line that names the family (how many tests) and what survives it."""
    claimed = family[family["verdict"].isin(["better", "worse"])]
    kept = claimed[claimed["Holm"] == "survives"]
    n = family.attrs.get("tests", len(family))
    return (f"One Holm family: the {n} test{'' if n == 1 else 's'} this notebook "
            f"saves; {len(claimed)} better/worse on the raw p, {len(kept)} of them survive Holm"
            + (": " + "; ".join(f"{r.method} vs {r.baseline} ({r.metric})" for r in kept.itertuples())
               if len(kept) else "") + ".")


def _premise_records(row: pd.Series) -> list[dict]:
    """The premises a comparison row rests on (``stats.compare``'s ``premise records``); a row of a
    table concatenated with others that had none holds NaN there."""
    records = row.get("premise records")
    return json.loads(records) if isinstance(records, str) and records else []


def _number(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _test_size(row: pd.Series) -> dict:
    """``n``, ``df`` and ``se`` of one comparison row (None where the table has no such column:
    a table from before they existed, or an untested row), and what the test could have seen
    (:func:`power_of`)."""
    n, df = _number(row.get("n")), _number(row.get("df"))
    se = None
    if df and row.get("95% CI"):
        low, high = stats.parse_ci(row["95% CI"])
        se = round((high - low) / 2 / float(sps.t.ppf(1 - stats.ALPHA / 2, df)), 4)
    out = {"n": None if n is None else int(n), "df": df, "se": se}
    record = out | {"ci95": row.get("95% CI"), "verdict": row.get("verdict"), "test": row.get("test")}
    return out | power_of(record, mde=_number(row.get("MDE")))


def power_of(record: Mapping, mde: float | None = None) -> dict:
    """An effect record's power: ``mde`` (the minimum detectable effect at 80 % power,
    :func:`tutorial_lib.stats.minimum_detectable_effect`, from its ``se`` and ``df``) and, for a
    within-noise verdict whose CI lies inside ±MDE, ``no_larger_than`` (the CI's farther end).
    McNemar's (test items) from its normal CI; None where the record has no standard error.
    ``mde``: the comparison table's own MDE, when it has one — the number the notebook prints,
    not one rebuilt from the CI as printed (rounded), which could differ in the last digit."""
    se, df = record.get("se"), record.get("df")
    low, high = stats.parse_ci(record.get("ci95"))
    if record.get("test") == "McNemar" and not math.isnan(low):  # items: the CI is a normal one
        se, df = (high - low) / 2 / float(sps.norm.ppf(1 - stats.ALPHA / 2)), math.inf
    if se is None or df is None or pd.isna(se) or pd.isna(df):
        return {"mde": None, "no_larger_than": None}
    mde = mde if mde is not None else stats.minimum_detectable_effect(float(se), float(df))
    bound = (stats.equivalence_bound(low, high, mde)
             if record.get("verdict") == stats.WITHIN_NOISE else None)
    return {"mde": round(mde, 3), "no_larger_than": None if bound is None else round(bound, 3)}


def guards_of(comparison: pd.DataFrame, method: object) -> dict:
    """The learned-baseline guard of one row of a :func:`tutorial_lib.stats.compare` table:
    ``guarded`` (was the baseline's floor given?), ``floor``/``floor_p`` (the baseline against its
    floor) and ``start``/``start_p`` (the method against its starting point), in the table's
    units; None where not given."""
    base = comparison.iloc[0]
    row = comparison.loc[method]
    floor = _number(base.get("floor"))
    return {"guarded": floor is not None, "floor": floor, "floor_p": _number(base.get("floor p")),
            "start": _number(row.get("start")), "start_p": _number(row.get("start p"))}


def save(notebook: Settings | str, tables: dict[str, pd.DataFrame], notes: str = "",
         seeds: Sequence | Mapping | None = None, effects: Sequence[dict] = (), *,
         scale: Scale | None = None) -> Path:
    """Write ``<notebook>.json`` (tables as records + markdown, effects) and return its path.

    ``notebook``: the notebook's settings (its ``notebook`` names the file, its scale the run's),
    or the name itself with the ``scale`` it ran at.

    ``seeds``: the seeds (or few-shot splits) the numbers come from, a list or
    ``{"what": [...]}``; every notebook passes them (``seeds_of`` reads them off a table).
    ``effects``: the notebook's main comparisons (see :func:`effects`): they are the notebook's
    one Holm family, named here once (:func:`holm_text` is printed).
    """
    if scale is None:
        if not isinstance(notebook, Settings):
            raise TypeError(f"results.save({notebook!r}, …): give the notebook's settings, or its "
                            "name with scale=")
        scale = notebook.scale
    notebook = notebook_name(notebook)
    source = "notebook" if seeds is not None else "not recorded"
    seeds = seeds if seeds is not None else []
    payload = {
        "notebook": notebook,
        "scale": scale.name,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "environment": describe(scale),
        "seeds": _plain(seeds),
        "seeds_source": source,
        "seed_set": seed_set(),  # main, held-out or "offset N" ($TUTORIAL_SEEDS)
        "notes": notes,
        "effects": [{"notebook": notebook, **e} for e in effects],
        "tables": {
            name: {"markdown": table.to_markdown(),
                   "records": json.loads(table.reset_index().to_json(orient="records"))}
            for name, table in tables.items()
        },
    }
    path = results_dir(scale) / f"{notebook}.json"
    if effects:
        print(holm_text(holm_family(effects)))
    return atomic_write(path, json.dumps(payload, indent=1))


# --- the sources' numbers, and both seed sets together -------------------------------------------

SOURCE_BELOW, SOURCE_SEEN, SOURCE_NOT_SEEN, SOURCE_OPPOSITE, SOURCE_EXCLUDED = (
    "below our MDE", "seen", "above our MDE and not seen", "opposite sign seen",
    "outside our 95 % CI")
GUARD_PREFIXES = ("void", stats.DID_NOT_TRAIN, "untestable")  # a verdict no test decided


def source_status(verdict: str, delta: float, ci95: object, mde: float | None,
                  source_delta: float) -> str:
    """What a comparison says about a source's number ``source_delta`` (in the record's units):
    for a decided verdict "seen" (same sign) or "opposite sign seen"; a void or untestable
    verdict is itself (nothing was measured to set beside the source); for a null "outside our
    95 % CI" where the CI excludes the source's number — evidence against that size here, whatever
    the MDE — and only otherwise "below our MDE" (this run could not have seen it: its null says
    nothing about the source) or "above our MDE and not seen"."""
    verdict = str(verdict)
    if verdict in ("better", "worse"):
        return SOURCE_SEEN if (delta > 0) == (source_delta > 0) else SOURCE_OPPOSITE
    if verdict.startswith(GUARD_PREFIXES):
        return verdict
    low, high = stats.parse_ci(ci95)
    if not (math.isnan(low) or low <= source_delta <= high):
        return SOURCE_EXCLUDED
    return SOURCE_BELOW if mde is not None and abs(source_delta) < mde else SOURCE_NOT_SEEN


def headline(comparison: pd.DataFrame, method: str, *, metric: str, source: str = "",
             source_delta: float | None = None) -> str:
    """A notebook's headline, first: one verdict of a :func:`tutorial_lib.stats.compare` table
    (``method`` against the table's baseline) and its reading — beyond noise or not, what a null
    could have seen (its MDE), a guard that voided it, and where the source's own number
    ``source_delta`` (in Δ's units) lies (:func:`source_status`)."""
    unit_col = next(c for c in comparison.columns if c.startswith("Δ"))
    mean_col = next(c for c in comparison.columns if c.startswith("mean"))
    unit, baseline = unit_col[unit_col.index("(") + 1: -1], comparison.index[0]
    r = comparison.loc[method]
    verdict = str(r["verdict"])
    ci = f" [{str(r['95% CI']).strip('[]')}]" if r.get("95% CI") else ""
    p = "" if pd.isna(r["p"]) else f", p = {r['p']:.3f}"
    line = (f"Headline — {method} vs {baseline}, {metric}: {r[mean_col]:.2f} vs "
            f"{comparison.loc[baseline, mean_col]:.2f}, Δ {r[unit_col]:+.2f} {unit}{ci}{p} → "
            f"{verdict}{stats.null_text(r, unit)}.")
    if verdict.startswith(GUARD_PREFIXES):
        reading = "Δ is not read as the method's effect here: the verdict says why."
    elif verdict in ("better", "worse"):
        reading = f"Beyond noise in this run ({verdict} on the raw p; replicate before quoting it)."
    else:
        reading = (f"Within noise: these runs could have seen |Δ| ≥ {r['MDE']:.2f} {unit}, not a "
                   "smaller effect.")
    theirs = (f"The source's {source_delta:+g} {unit}{f' ({source})' if source else ''}"
              if source_delta is not None else "")
    if source_delta is not None and verdict.startswith(GUARD_PREFIXES):
        reading += f" {theirs} has nothing here to stand beside."
    elif source_delta is not None:
        status = source_status(verdict, float(r[unit_col]), r.get("95% CI"), _number(r.get("MDE")),
                               source_delta)
        reading += f" {theirs}: {status}."
    return f"{line}\n{reading}"


def effect_key(effect: Mapping) -> str:
    """What pairs an effect of one seed set with its twin in another."""
    return " | ".join(str(effect.get(k, "")) for k in ("notebook", "backbone", "metric", "method",
                                                        "baseline"))


def ci_of(effect: Mapping) -> tuple[float, float] | None:
    """The 95 % CI of an effect record (its ``ci95`` string), or None."""
    numbers = re.findall(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?",
                         str(effect.get("ci95") or "").replace("−", "-"))
    return (float(numbers[0]), float(numbers[1])) if len(numbers) == 2 else None


def _se(effect: Mapping) -> float | None:
    """Δ's standard error: the record's ``se``, else from its CI and ``df``."""
    if effect.get("se") is not None:
        return float(effect["se"])
    ci, df = ci_of(effect), effect.get("df")
    if ci is None or not df:
        return None
    return (ci[1] - ci[0]) / 2 / float(sps.t.ppf(1 - stats.ALPHA / 2, df))


def pooled_effect(first: Mapping, second: Mapping, source_delta: float | None = None) -> dict | None:
    """The test over both seed sets of one effect (its records in two runs): for paired t-tests
    the paired t-test over all n₁ + n₂ per-seed differences (reconstructed exactly from each run's
    n, Δ and standard error), otherwise an inverse-variance weighted (fixed-effect) z-test of the
    two Δs; None when a side lacks n or se. With it: ``mde`` (what the pooled test could see),
    ``raw verdict`` (the test alone) and ``verdict`` — a guard that failed in either run (a void or
    untestable verdict: the first run's, else the second's) stands, since pooling more seeds does
    not repair a premise — and, given ``source_delta``, ``source_vs_pooled``
    (:func:`source_status`)."""
    n1, n2 = first.get("n"), second.get("n")
    s1, s2 = _se(first), _se(second)
    if not n1 or not n2 or s1 is None or s2 is None:
        return None
    m1, m2 = float(first["delta"]), float(second["delta"])
    if first.get("test") == second.get("test") == "paired t":
        n = n1 + n2
        sd1, sd2 = s1 * math.sqrt(n1), s2 * math.sqrt(n2)
        mean = (n1 * m1 + n2 * m2) / n
        ss = (n1 - 1) * sd1 ** 2 + (n2 - 1) * sd2 ** 2 + n1 * (m1 - mean) ** 2 + n2 * (m2 - mean) ** 2
        se = math.sqrt(ss / (n - 1) / n)
        df, test = n - 1, "paired t, both seed sets"
        crit = float(sps.t.ppf(1 - stats.ALPHA / 2, df))
        p = 2 * float(sps.t.sf(abs(mean) / se, df)) if se > 0 else (0.0 if mean else 1.0)
    else:
        if s1 == 0 or s2 == 0:
            return None
        w1, w2 = 1 / s1 ** 2, 1 / s2 ** 2
        mean = (w1 * m1 + w2 * m2) / (w1 + w2)
        se = 1 / math.sqrt(w1 + w2)
        n, df, test = n1 + n2, None, "inverse-variance z, both seed sets"
        crit = float(sps.norm.ppf(1 - stats.ALPHA / 2))
        p = 2 * float(sps.norm.sf(abs(mean) / se))
    higher = str(first.get("metric", "")).endswith("(higher is better)")
    raw = (stats.WITHIN_NOISE if not p < stats.ALPHA else
           "better" if (mean > 0) == higher else "worse")
    guard = next((str(r.get("verdict")) for r in (first, second)
                  if str(r.get("verdict", "")).startswith(GUARD_PREFIXES)), None)
    mde = stats.minimum_detectable_effect(se, math.inf if df is None else df) if se > 0 else None
    out = {"delta": round(mean, 3), "ci95": f"[{mean - crit * se:+.2f}, {mean + crit * se:+.2f}]",
           "p": p, "test": test, "n": n, "df": df,
           "mde": None if mde is None else round(mde, 3), "raw verdict": raw, "verdict": guard or raw}
    if source_delta is not None:
        out.update(source_delta=source_delta,
                   source_vs_pooled=source_status(out["verdict"], mean, out["ci95"], mde, source_delta))
    return out


REPOSITORY = Path(__file__).resolve().parents[1]
COMMITTED_DIR = REPOSITORY / "results"  # the committed runs: results/<scale>/[held-out/]<notebook>.json
HELD_OUT_DIR = "held-out"  # the held-out seed set's runs, beside the main run's
_OTHER_SEED_SET = {"main": "held-out", "held-out": "main"}


def committed_run(scale_name: str, notebook: str, seed_set_name: str) -> dict | None:
    """The committed record of ``notebook`` at ``scale_name`` on the seed set ``main``
    (``results/<scale>/<notebook>.json``) or ``held-out`` (``results/<scale>/held-out/…``), as
    :func:`save` wrote it; None where there is none (a package installed without the repository,
    as on Colab, has no committed runs)."""
    folder = COMMITTED_DIR / scale_name
    path = (folder / HELD_OUT_DIR if seed_set_name == "held-out" else folder) / f"{notebook}.json"
    if seed_set_name not in _OTHER_SEED_SET or not path.exists():
        return None
    blob = json.loads(path.read_text())
    return blob if blob.get("seed_set", "main") == seed_set_name else None


def pooled_with_committed(effect: Mapping, scale: Scale, *, source_delta: float | None = None,
                          source: str = "the source") -> tuple[dict | None, str]:
    """This run's ``effect`` (a record of :func:`effects`, with its ``notebook``) pooled with its
    twin in the committed run of the *other* seed set (main ↔ held-out, :func:`committed_run`) by
    :func:`pooled_effect`, the main run's record first; and one sentence that reads it: Δ, its
    95 % CI, p, the verdict (and the test alone where a guard decided) and, given the source's
    number, whether the pooled CI excludes it. ``(None, why not)`` where there is no twin to pool
    with — never an error: the cell that asks runs anywhere."""
    notebook, this = str(effect.get("notebook", "")), seed_set()
    other = _OTHER_SEED_SET.get(this)
    if other is None:
        return None, (f"no pooled result: this run's seed set ({this}) has no committed twin (only "
                      "the main and held-out seed sets are committed)")
    where = f"results/{scale.name}/{HELD_OUT_DIR + '/' if other == 'held-out' else ''}{notebook}.json"
    blob = committed_run(scale.name, notebook, other)
    if blob is None:
        why = ("this copy of tutorial_lib was installed without the repository (as on Colab), "
               "which holds the committed runs" if not (REPOSITORY / "notebooks").is_dir() else
               f"no committed {other} run of this notebook at the {scale.name} scale (at classroom: "
               f"python -m benchmarks.replicate --run --only {notebook[:2]})")
        return None, f"no pooled result: {where} is absent — {why}"
    twin = next((e for e in blob.get("effects", []) if effect_key(e) == effect_key(effect)), None)
    if twin is None:
        return None, f"no pooled result: {where} has no effect {effect_key(effect)!r}"
    first, second = (effect, twin) if this == "main" else (twin, effect)
    pooled = pooled_effect(first, second, source_delta)
    if pooled is None:
        return None, f"no pooled result: a run of {effect_key(effect)!r} has no n or standard error"
    unit = effect.get("unit") or "points"
    text = (f"{effect.get('method')} vs {effect.get('baseline')}, {effect.get('metric')}, pooled over "
            f"this run ({this} seeds) and the committed {other} run (seeds {blob.get('seeds')}): "
            f"Δ {pooled['delta']:+.2f} {unit}, 95 % CI {pooled['ci95']}, p = {pooled['p']:.3f} "
            f"({pooled['test']}, n = {pooled['n']}) → {pooled['verdict']}")
    if pooled["verdict"] != pooled["raw verdict"]:
        text += f" (the test alone: {pooled['raw verdict']})"
    if source_delta is not None:
        low, high = stats.parse_ci(pooled["ci95"])
        excluded = not low <= source_delta <= high
        text += (f"; the pooled CI {'excludes' if excluded else 'does not exclude'} {source}'s "
                 f"{source_delta:+.2f} {unit}")
        if not excluded and pooled["verdict"] == stats.WITHIN_NOISE and pooled["mde"] is not None:
            text += (f", {'below' if abs(source_delta) < pooled['mde'] else 'above'} the pooled MDE "
                     f"({pooled['mde']:.2f})")
    return pooled, text
