"""The main job's report ``RESULTS.md``, where its figures lie, failures and effects: an operation,
never read by a notebook (``scripts/run_notebooks.py`` and ``benchmarks/replicate.py`` call it).

:func:`report_markdown` builds the report from what each notebook saved
(:func:`tutorial_lib.results.save`): every number in it comes from the run that saved it, each
notebook's section says which run that was, and published numbers sit beside them in a separate
table (:mod:`tutorial_lib.methods.references`), marked unverified where they are.

A notebook whose last attempt failed keeps its last good results; the failed execution lies in
``failed/<notebook>/`` beside them with ``failure.json`` (:func:`record_failure`), and the report
says so in its section (:func:`read_failures`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from .. import stats
from ..methods import references
from ..runtime import atomic_write
from .nulls import (  # noqa: F401 (SOURCE_*: re-exported beside with_power)
    SOURCE_BELOW,
    SOURCE_EXCLUDED,
    SOURCE_NOT_SEEN,
    SOURCE_OPPOSITE,
    SOURCE_SEEN,
    power_markdown,
    with_power,
)
from .tables import compact_tables

REPORT_NAME = "RESULTS.md"
FOLD_ROWS = 25  # tables longer than this are folded (<details>) in the report


# ----------------------------------------------------------------------------------- figures


def notebook_figures(executed: Mapping) -> list[str]:
    """Where each figure (``image/png`` output) of an executed notebook (nbformat v4, as a dict)
    lies, in cell order: the heading of the markdown section above it ("" before any heading).
    The report points to the figures in the executed notebook, where they are embedded, instead of
    keeping a copy of each beside it (2.6 MiB of PNGs in the tracked tree, which every device call
    carries: issue 63). Figure k here is the k-th ``image/png`` output, as
    ``scripts/strip_outputs.py`` numbers them."""
    places, heading = [], ""
    for cell in executed.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = cell.get("source", "")
            lines = ("".join(source) if isinstance(source, list) else source).splitlines()
            titles = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
            heading = titles[-1] if titles else heading
        elif cell.get("cell_type") == "code":
            places += [heading for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
    return places


def figures_markdown(notebook: Path, link: str) -> str:
    """The report's "Figures" of one notebook: each figure of the executed ``notebook`` (at
    ``link`` from the report), by number and the section it lies in; "" when it has none (or
    cannot be read)."""
    try:
        places = notebook_figures(json.loads(Path(notebook).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return ""
    if not places:
        return ""
    lines = [f"### Figures\n\nIn the executed notebook [{Path(link).name}]({link}), where they are "
             "embedded (no copies are kept beside this report):\n"]
    lines += [f"- figure {k}" + (f", under “{place}”" if place else "")
              for k, place in enumerate(places, start=1)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------- failures

FAILED_DIR = "failed"
FAILURE_NAME = "failure.json"


def failed_dir(directory: Path, notebook: str) -> Path:
    """``<directory>/failed/<notebook>/``: where the main job keeps a failed execution."""
    return Path(directory) / FAILED_DIR / notebook


def record_failure(directory: Path, notebook: str, error: str, seconds: float | None = None,
                   date: str | None = None) -> Path:
    """Write ``failed/<notebook>/failure.json``: the one-line error, when, and how long it ran."""
    date = date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blob = {"notebook": notebook, "error": error, "date": date,
            "seconds": None if seconds is None else round(seconds, 1)}
    return atomic_write(failed_dir(directory, notebook) / FAILURE_NAME, json.dumps(blob, indent=1))


def read_failures(directory: Path) -> dict[str, dict]:
    """``{notebook: {"error", "date", "seconds"}}`` of the failures kept under ``failed/``."""
    found = {}
    for path in sorted((Path(directory) / FAILED_DIR).glob(f"*/{FAILURE_NAME}")):
        try:
            found[path.parent.name] = json.loads(path.read_text())
        except ValueError:  # cut short: still a failure, its details lost
            found[path.parent.name] = {"error": "(failure record unreadable)", "date": "unknown"}
    return found


def clear_failure(directory: Path, notebook: str) -> None:
    """Forget ``notebook``'s failure (it ran without error since); ``failed/`` goes when empty."""
    shutil.rmtree(failed_dir(directory, notebook), ignore_errors=True)
    folder = Path(directory) / FAILED_DIR
    if folder.is_dir() and not any(p.is_dir() for p in folder.iterdir()):
        shutil.rmtree(folder)


# ------------------------------------------------------------------------------------ report


def _join(values: object) -> str:
    if isinstance(values, (list, tuple)):
        return ", ".join(map(str, values)) if values else "none"
    return str(values)


def _seeds_text(blob: dict) -> str:
    seeds = blob.get("seeds")
    if seeds is None or blob.get("seeds_source") == "not recorded":
        return "not recorded (the notebook did not pass its seeds to `results.save`)"
    text = ("; ".join(f"{k}: {_join(v)}" for k, v in seeds.items()) if isinstance(seeds, dict)
            else _join(seeds))
    if blob.get("seeds_source") == "scale default":
        text += " (the scale's fine-tuning seeds: the notebook did not record which it used)"
    return text


def _table_markdown(name: str, table: dict) -> str:
    rows = len(table.get("records", []))
    if rows > FOLD_ROWS:
        return (f"<details><summary><b>{name}</b> ({rows} rows)</summary>\n\n"
                f"{table['markdown']}\n\n</details>\n")
    return f"### {name}\n\n{table['markdown']}\n"


EFFECTS_NAME = "effects.json"


def collect_effects(blobs: Mapping[str, dict], names: Sequence[str]) -> list[dict]:
    """All notebooks' effect records, in notebook order (what ``effects.json`` holds), each with
    its Holm-adjusted p over its notebook's family (:func:`with_holm`) and what it could have seen
    (:func:`with_power`)."""
    return with_power(with_holm([e for n in names if n in blobs for e in blobs[n].get("effects", [])]))


def with_holm(records: Sequence[dict]) -> list[dict]:
    """``records`` with ``p_holm`` (Holm-adjusted p, :func:`tutorial_lib.stats.holm`) and
    ``family`` (how many tested effects it was adjusted over) added. The family is a notebook's
    effects: every comparison it saved with ``results.save(effects=...)``, void ones included (they
    were tested). The verdict stays the raw p's (see :mod:`tutorial_lib.stats`)."""
    out = [dict(r) for r in records]
    by_notebook: dict[str, list[int]] = {}
    for i, r in enumerate(out):
        by_notebook.setdefault(str(r.get("notebook", "")), []).append(i)
    for idx in by_notebook.values():
        adjusted = stats.holm([out[i].get("p") for i in idx])
        size = sum(out[i].get("p") is not None for i in idx)
        for i, q in zip(idx, adjusted):
            out[i]["p_holm"] = None if pd.isna(q) else float(q)
            out[i]["family"] = size
    return out


def multiplicity_markdown(records: Sequence[dict]) -> str:
    """The report's "Multiplicity" section: each notebook's family of tests (its saved effects),
    and the effects whose verdict is "better"/"worse" on the raw p but whose Holm p is ≥ α."""
    records = with_holm(records) if records and "p_holm" not in records[0] else list(records)
    lines = ["## Multiplicity\n",
             "Each notebook's **family** is the effects it saved (the rows above). The verdict uses "
             "each test's raw p (α = 0.05 per comparison, fixed when the cell ran); the Holm-adjusted "
             f"p (`p_holm`) over the family is reported beside it: below {stats.ALPHA} it keeps the "
             "family-wise error rate at 5 %. Comparisons whose baseline was given no floor are "
             "**unguarded** (the learned-baseline guard of `tutorial_lib.stats` could not run).\n",
             "| notebook | tests in family | better/worse (raw p) | of them, Holm p < 0.05 | "
             "void or did not train | unguarded |", "|---|---|---|---|---|---|"]
    notes = []
    for nb in dict.fromkeys(str(r.get("notebook", "")) for r in records):
        rs = [r for r in records if str(r.get("notebook", "")) == nb]
        claimed = [r for r in rs if r.get("verdict") in ("better", "worse")]
        holds = [r for r in claimed if r.get("p_holm") is not None and r["p_holm"] < stats.ALPHA]
        void = [r for r in rs if str(r.get("verdict", "")).startswith(("void", "did not train"))]
        unguarded = [r for r in rs if not r.get("guarded")]
        lines.append(f"| {nb} | {rs[0].get('family', len(rs))} | {len(claimed)} | {len(holds)} | "
                     f"{len(void)} | {len(unguarded)} |")
        notes += [f"- {nb}: {r['method']} vs {r['baseline']} ({r['metric']}): {r['verdict']} at "
                  f"p = {r['p']:.3g}, Holm p = {r['p_holm']:.3g}" for r in claimed if r not in holds]
    if notes:
        lines += ["", "Verdicts that do not survive Holm's correction within their notebook:", *notes]
    return "\n".join(lines) + "\n"


def effects_of(directory: Path, names: Sequence[str]) -> list[dict]:
    """:func:`collect_effects` of the ``<notebook>.json`` files saved in ``directory``."""
    blobs = {p.stem: json.loads(p.read_text()) for p in Path(directory).glob("[0-9][0-9]_*.json")}
    return collect_effects(blobs, names)


GLANCE_HIDDEN = ("unit", "n", "df", "se", "family", "guarded", "floor_p", "start", "start_p",
                 "no_larger_than", "source_delta", "source_verified", "runs_for_source", "source_vs_run")


def glance_table(records: Sequence[dict]) -> str:
    """The "Results at a glance" table: one row per effect, with ``p_holm`` beside ``p`` and the
    baseline's ``floor`` ("unguarded" where none was given)."""
    table = pd.DataFrame(records)
    if "floor" in table:
        table["floor"] = [("unguarded" if not g or f is None or pd.isna(f) else
                           f"{f:.3g}" + ("" if q is None or pd.isna(q) else f" (p = {q:.2g})"))
                          for f, g, q in zip(table["floor"], table.get("guarded", table["floor"]),
                                             table.get("floor_p", table["floor"]))]
    if "p_holm" in table:
        table.insert(list(table.columns).index("p") + 1, "p_holm", table.pop("p_holm"))
    return table.drop(columns=[c for c in GLANCE_HIDDEN if c in table]).to_markdown(index=False) + "\n"


REPLICATION_NAME = "replication.json"


def replication_markdown(directory: Path) -> str:
    """The report's "Held-out replication" section from ``<directory>/replication.json``
    (written by ``benchmarks/replicate.py``); "" when there is none."""
    path = Path(directory) / REPLICATION_NAME
    if not path.exists():
        return ""
    blob = json.loads(path.read_text())
    rows = [{"notebook": e["notebook"], "effect": f"{e['method']} vs {e['baseline']}",
             "metric": e["metric"], "first run": _run_text(e.get("first")),
             "replication": _run_text(e.get("held_out")),
             "pooled": _pooled_text(e.get("pooled")),
             "status": e["status"]} for e in blob.get("effects", [])]
    head = (f"## Held-out replication\n\n{blob.get('definition', '')}\n\n"
            f"Held-out seeds: {blob.get('seed_rule', '')}; first run {blob.get('first_dir', '')}, "
            f"replication {blob.get('held_out_dir', '')} ({blob.get('date', '')}).\n")
    counts = pd.Series([r["status"] for r in rows]).value_counts().to_dict() if rows else {}
    summary = "; ".join(f"{k}: {v}" for k, v in counts.items()) or "no effects"
    table = compact_tables(pd.DataFrame(rows).to_markdown(index=False)) if rows else ""
    return f"{head}\n{summary}\n\n{table}\n"


def _pooled_text(pooled: Mapping | None) -> str:
    """The pooled column: the test over both seed sets and, beside a source's number, what it says
    of it (``source_vs_pooled``: :func:`tutorial_lib.results.source_status`; nothing where a
    guard decided the verdict, which then says it all)."""
    if not pooled:
        return "—"
    source = pooled.get("source_vs_pooled")
    return _run_text(pooled) + ("" if source is None or source == pooled.get("verdict") else
                                f"; source's {pooled['source_delta']:+.2f}: {source}")


def _run_text(run: Mapping | None) -> str:
    if not run:
        return "missing"
    p = run.get("p")
    ptext = "" if p is None else f", p = {p:.3g}"
    ci = f" {run['ci95']}" if run.get("ci95") else ""
    verdict = f" → {run['verdict']}" if run.get("verdict") else ""
    return f"{run['delta']:+.2f}{ci}{ptext}{verdict}"


PEAK_MEMORY_NAME = "peak_memory.json"  # written by the main job: {notebook: its kernel's peaks}


T4_GIB = 15.0
"""A Colab T4's memory as Colab shows it (15,360 MiB, ``nvidia-smi``): the card a notebook at the
gpu scale should fit to run on Colab's free tier."""


def fits_t4(peak: Mapping) -> bool | None:
    """Whether a notebook measured on a larger GPU fits a T4: its caching allocator's peak
    reservation plus the CUDA context measured beside it (:func:`runtime.process_peak_memory`) at
    most :data:`T4_GIB`. None when it was not measured on a GPU. A "yes" close to the line is
    worth confirming under ``TUTORIAL_GPU_MEMORY_GIB`` (the cap counts no context).

    >>> fits_t4({"cuda_reserved_mib": 9000.0, "cuda_context_mib": 500.0})
    True
    """
    if peak.get("cuda_reserved_mib") is None:
        return None
    return peak["cuda_reserved_mib"] + (peak.get("cuda_context_mib") or 0.0) <= T4_GIB * 1024


def peak_memory_text(peak: Mapping) -> str:
    """A notebook's peak memory as the report's contents list shows it: on a GPU what the caching
    allocator reserved (what must fit the card; the CUDA context comes on top), else the kernel's
    peak resident memory.

    >>> peak_memory_text({"device": "cpu", "cuda_reserved_mib": None, "rss_mib": 2150.0})
    'peak memory 2.10 GiB (kernel RSS)'
    """
    if peak.get("cuda_reserved_mib") is not None:
        fits = "yes" if fits_t4(peak) else "no"
        return (f"peak GPU memory {peak['cuda_reserved_mib'] / 1024:.2f} GiB reserved "
                f"({peak['cuda_allocated_mib'] / 1024:.2f} GiB allocated, {peak['device']}; "
                f"fits a {T4_GIB:g} GiB T4: {fits})")
    if peak.get("rss_mib") is not None:
        return f"peak memory {peak['rss_mib'] / 1024:.2f} GiB (kernel RSS)"
    return "peak memory not measured"


def memory_table(directory: Path) -> str:
    """Markdown: per notebook run into ``directory``, its wall time, peak memory and whether it fits
    a T4 (from ``wall_times.json`` and ``peak_memory.json``; what ``scripts/gpu_runs.sh`` prints)."""
    directory = Path(directory)
    read = lambda name: json.loads((directory / name).read_text()) if (directory / name).exists() else {}  # noqa: E731
    times, peaks = read("wall_times.json"), read(PEAK_MEMORY_NAME)
    lines = [f"| notebook | wall time | peak memory | fits a {T4_GIB:g} GiB T4 |", "|---|---|---|---|"]
    for name in sorted(set(times) | set(peaks)):
        peak = peaks.get(name)
        fit = {True: "yes", False: "no", None: "not measured on a GPU"}[fits_t4(peak) if peak else None]
        seconds = f"{times[name]:.0f} s" if name in times else "not recorded"
        lines.append(f"| {name} | {seconds} | {peak_memory_text(peak) if peak else 'not recorded'} "
                     f"| {fit} |")
    return "\n".join(lines) + "\n"


def report_markdown(directory: Path, notebooks: Sequence[str] | None = None,
                    wall_times: Mapping[str, float] | None = None,
                    this_run: Sequence[str] | None = None,
                    failures: Mapping[str, str | Mapping] | None = None,
                    links: Mapping[str, str] | None = None, at: Path | None = None) -> str:
    """The main job's report from every ``<notebook>.json`` in ``directory``.

    ``notebooks``: every notebook's name, in order; each gets a section, saying so when its results
    are missing. ``this_run``: the notebooks this invocation executed (sections from earlier runs
    are marked as such); ``failures``: ``{notebook: error or {"error", "date"}}`` for those whose
    last attempt failed (default: :func:`read_failures` of ``directory``): their sections show the
    last good results, said to be so, and link the failed execution; ``links``: ``{notebook: path
    of the executed notebook relative to at}``; ``at``: the folder the report is written to
    (default ``directory``), which every link is relative to. Figures are pointed to in the
    executed notebook of ``links`` (:func:`figures_markdown`), not copied.
    """
    directory = Path(directory)
    at = Path(at) if at is not None else directory
    failures = read_failures(directory) if failures is None else failures
    failures = {n: {"error": f} if isinstance(f, str) else dict(f) for n, f in failures.items()}
    wall_times, links = wall_times or {}, links or {}
    blobs = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("[0-9][0-9]_*.json"))}
    peak_path = directory / PEAK_MEMORY_NAME
    peaks = json.loads(peak_path.read_text()) if peak_path.exists() else {}
    names = list(notebooks) if notebooks is not None else sorted(blobs)
    ran = set(names if this_run is None else this_run)
    earlier = [n for n in names if n in blobs and (n not in ran or n in failures)]

    def link(path: Path) -> str:
        return Path(os.path.relpath(path, at)).as_posix()
    scales = sorted({b["scale"] for b in blobs.values()})
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    parts = [f"# Results: {', '.join(scales) or 'no'} scale\n",
             f"Written by the main job (`scripts/run_notebooks.py`) on {now}. Each notebook saved its "
             "own tables at the end of its run (`tutorial_lib.results.save`); every number in a "
             "section's result tables comes from the run that section names (scale, date, seeds), "
             "and none is typed in by hand. The reference numbers beside them come from papers and "
             "the 2019 tutorial (`tutorial_lib/methods/references.py`); those marked **unverified** are "
             "recalled values not yet checked against their source.\n"]
    if len(scales) > 1:
        parts.append(f"**Warning: this directory mixes scales ({', '.join(scales)}).**\n")
    if this_run is not None and earlier:
        parts.append(f"**This invocation executed {_join([n for n in names if n in ran])}; the "
                     f"sections of {_join(earlier)} come from earlier runs** (their dates are in "
                     "their sections).\n")
    failed = [n for n in names if n in failures]
    missing = [n for n in names if n not in blobs]
    if failed:
        parts.append(f"**Last attempt failed: {_join(failed)}.** Their sections give the error and "
                     "show the last good results, with their date; the failed executions are kept "
                     f"in `{FAILED_DIR}/`.\n")
    if missing:
        parts.append(f"**No results for: {_join(missing)}** (see their sections).\n")

    envs: dict[str, list[str]] = {}
    for name in names:
        if name in blobs:
            envs.setdefault(blobs[name]["environment"], []).append(name)
    common = max(envs, key=lambda e: len(envs[e])) if envs else None
    if common:
        parts.append("## Environment\n")
        for env, who in envs.items():
            label = "" if len(envs) == 1 else f"{_join(who)}:\n\n"
            parts.append(f"{label}```\n{env}\n```\n")

    glance = collect_effects(blobs, names)
    if glance:
        parts.append("## Results at a glance\n")
        parts.append("Every notebook's main comparisons, one row per effect (Δ = method − baseline; "
                     "the verdict follows `tutorial_lib.stats`: paired t-test over shared seeds or "
                     "splits, else Welch, α = 0.05; \"expected\" is the sign the literature "
                     "reports, \"none\" where no sign is claimed).\n")
        parts.append(glance_table(glance))
        parts.append(power_markdown(glance))
        parts.append(multiplicity_markdown(glance))
    replication = replication_markdown(directory)
    if replication:
        parts.append(replication)
    parts.append("## Contents\n")
    for name in names:
        status = (f"run {blobs[name]['date']}" + (" (earlier run)" if name in earlier else "")
                  if name in blobs else "**no results**")
        if name in wall_times:
            status += f" · {wall_times[name]:.0f} s"
        if name in peaks:
            status += f" · {peak_memory_text(peaks[name])}"
        if name in failures:
            status += " · **last attempt failed**"
        parts.append(f"- [{name}](#{name.lower()}): {status}")
    parts.append("")

    for name in names:
        parts.append(f"## {name}\n")
        blob = blobs.get(name)
        if name in failures:
            failure = failures[name]
            kept = failed_dir(directory, name) / f"{name}.ipynb"
            where = f" The failed execution: [{kept.name}]({link(kept)})." if kept.exists() else ""
            parts.append(f"**Last attempt failed** ({failure.get('date', 'date unknown')}): "
                         f"`{failure['error']}`\n")
            parts.append((f"The results shown are the last good ones, from the run of {blob['date']}."
                          if blob is not None else "There is no earlier good run to show.")
                         + where + "\n")
        if blob is None:
            if name in failures:
                parts.append("No results: the notebook stopped before saving them.\n")
            elif name in ran and this_run is not None:
                parts.append("No results: the notebook ran but saved none (`results.save` was not "
                             "reached).\n")
            else:
                parts.append(f"No results: the notebook has not been run into this directory "
                             f"(no `{name}.json`).\n")
        else:
            when = blob["date"] + (" (an earlier run, not this invocation)" if name in earlier else "")
            facts = [f"- scale: **{blob['scale']}**", f"- run: {when}", f"- seeds: {_seeds_text(blob)}"]
            if name in wall_times:
                facts.append(f"- notebook wall time: {wall_times[name]:.0f} s")
            if name in links:
                facts.append(f"- executed notebook: [{Path(links[name]).name}]({links[name]})"
                             + (" (the last good run)" if name in failures else ""))
            parts.append("\n".join(facts) + "\n")
            if blob["environment"] != common:
                parts.append(f"```\n{blob['environment']}\n```\n")
            for table_name, table in blob["tables"].items():
                parts.append(_table_markdown(table_name, table))
        refs = references.table(name)
        parts.append("### Reference numbers\n")
        parts.append(refs.to_markdown(index=False) + "\n" if len(refs) else
                     "None: the reference notes hold no published number for this experiment.\n")
        if blob is not None:
            if blob.get("notes"):
                parts.append(f"### Notes\n\n{blob['notes']}\n")
            figures = figures_markdown(at / links[name], links[name]) if name in links else ""
            if figures:
                parts.append(figures)
    return compact_tables("\n".join(parts))
