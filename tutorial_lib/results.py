"""Saving each notebook's results: what a notebook calls.

A notebook ends with ``results.save("02_adaptation", scale, {"TREC-6 test error": table},
seeds=...)``, its effects from :func:`effects`. Files go to ``$TUTORIAL_RESULTS_DIR`` (the main
job sets it), else to the cache. The main job's report ``RESULTS.md``, built from them, is an
operation: :mod:`tutorial_lib.ops.report`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
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
    return out | power_of(out | {"ci95": row.get("95% CI"), "verdict": row.get("verdict"),
                                 "test": row.get("test")})


def power_of(record: Mapping) -> dict:
    """An effect record's power: ``mde`` (the minimum detectable effect at 80 % power,
    :func:`tutorial_lib.stats.minimum_detectable_effect`, from its ``se`` and ``df``) and, for a
    within-noise verdict whose CI lies inside ±MDE, ``no_larger_than`` (the CI's farther end).
    McNemar's (test items) from its normal CI; None where the record has no standard error."""
    se, df = record.get("se"), record.get("df")
    low, high = stats.parse_ci(record.get("ci95"))
    if record.get("test") == "McNemar" and not math.isnan(low):  # items: the CI is a normal one
        se, df = (high - low) / 2 / float(sps.norm.ppf(1 - stats.ALPHA / 2)), math.inf
    if se is None or df is None or pd.isna(se) or pd.isna(df):
        return {"mde": None, "no_larger_than": None}
    mde = stats.minimum_detectable_effect(float(se), float(df))
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


def save(notebook: Settings | str, scale: Scale, tables: dict[str, pd.DataFrame], notes: str = "",
         seeds: Sequence | Mapping | None = None, effects: Sequence[dict] = ()) -> Path:
    """Write ``<notebook>.json`` (tables as records + markdown, effects) and return its path.

    ``notebook``: the notebook's settings (its ``notebook`` names the file), or the name itself.

    ``seeds``: the seeds (or few-shot splits) the numbers come from, a list or
    ``{"what": [...]}``; every notebook passes them (``seeds_of`` reads them off a table).
    ``effects``: the notebook's main comparisons (see :func:`effects`).
    """
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
    return atomic_write(path, json.dumps(payload, indent=1))
