"""The teacher's guide, ``docs/teaching.md``, against the notebooks and the committed results.

The guide is parsed simply: a notebook's section runs from its level-2 heading
``## <stem> — <title>`` to the next level-2 heading, and its figures sit on fixed lines.

* **Sections**: every notebook in ``notebooks/`` has exactly one section, in notebook order, and
  one row ``| <stem> | topic | CPU min | peak RAM | suggested session |`` in the summary table.
* **CPU time and peak RAM**: each section has exactly one line
  ``- CPU (classroom): <min> · peak RAM <GiB>``. That line and the summary row quote
  ``f"{wall_times[stem] / 60:.1f} min"`` (``results/classroom/wall_times.json``) and
  ``f"{rss_mib / 1024:.1f} GiB"`` (``results/classroom/peak_memory.json``; ``not measured yet``
  where it has no entry). The "How to run" section's total (``N min in all``) is the sum of the
  wall times in minutes.
* **GPU**: a notebook with a wall time in ``results/gpu/wall_times.json`` has the line
  ``- GPU (gpu scale): <min> on <gpu>, <date> · peak <R> GiB reserved + <C> GiB CUDA context``. The
  GPU and the date come from ``results/gpu/machine.json``, and R (one decimal) and C (two
  decimals) from ``results/gpu/peak_memory.json``. Every other notebook's line reads
  ``- GPU: not measured yet``.
* **Exercises**. The rule: the guide names an exercise as ``Exercise N, "Title"``. The notebook's
  exercises are the numbered items ``N. **Title**`` under its ``## Try this`` heading (the
  notebooks' exercises section). The named exercise must exist there with that number, and its
  title must equal the quoted title, compared case-insensitively and without a trailing period or
  colon. A number and its whole title are harder to get wrong by accident than a number and one
  word. Every mention of "exercise <number>" in a section must have that form, so a loose
  reference cannot escape the check. Each section names one to three exercises.
* **Notebook 01's users**: the notebooks the "Run notebook 01 first" line names (``… that 02, 06, 10
  and 15 load from the cache``) are those whose code calls ``pretraining.ensure`` (the call that
  loads 01's models, or pretrains them first); the Colab line's "today 01 only" names the notebooks
  of ``tutorial_lib.config.GPU_RECORD`` (the recorded gpu-scale runs).
* **Provenance**: the "What the timings mean" bullet names, per CPU (``on an idle 2-core <CPU>``,
  with the precision it names for that CPU if any), each notebook once in a clause
  ``<numbers> on <date> [in fp32 | with bf16 pinned]``; the date must be the committed run's
  (``results/classroom/<stem>.json``'s ``date``), the CPU its ``hardware`` line's and the precision
  its ``precision`` line's (issue 61: 12's date and precision were once wrong there).
* **MDEs and bounds**: every number quoted as ``MDE … points`` (or ``MDEs of/from …``) must be an
  MDE the notebook prints (its saved comparison tables' ``MDE`` column), and every ``|Δ| ≤ X
  points`` a ``no_larger_than`` of that notebook's effects in ``results/classroom/effects.json``,
  each as :mod:`tutorial_lib.rounding` shows it (half to even, no tolerance). effects.json's own
  ``mde`` is recomputed from the printed CI (``results.power_of``), a second rounding of the same
  quantity: 05's 4.448 against the 4.44 the notebook prints (issue 61).

Each check is a function that returns a list of problems. The tests run each check on the guide
(no problems) and on a copy with one deliberate edit (that problem found).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

from tutorial_lib import config, rounding

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "teaching.md"
CLASSROOM = REPO / "results" / "classroom"
GPU = REPO / "results" / "gpu"
STEMS = [nb.stem for nb in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))]

HEADING = re.compile(r"^## (\d\d_\w+) — \S.*$", re.M)
LEVEL2 = re.compile(r"^## ", re.M)
ROW = re.compile(r"^\|\s*(\d\d_\w+)\s*\|.*$", re.M)
CPU_LINE = re.compile(r"^- CPU \(classroom\): (.+?) · peak RAM (.+?)\s*$", re.M)
GPU_ANY = re.compile(r"^- GPU\b.*$", re.M)
GPU_LINE = re.compile(r"^- GPU \(gpu scale\): (\S+ min) on (.+?), (\d{4}-\d\d-\d\d) · "
                      r"peak (\S+ GiB) reserved \+ (\S+ GiB) CUDA context\s*$")
GPU_NONE = "- GPU: not measured yet"
TOTAL = re.compile(r"(\d+\.\d) min in all")
EXERCISE = re.compile(r'\bExercise (\d+), "([^"]+)"')
MENTION = re.compile(r"\bexercises? \d", re.I)
ITEM = re.compile(r"^(\d+)\. \*\*(.+?)\*\*", re.M)
NUM = r"\d+(?:\.\d+)?"
MDE = re.compile(rf"\bMDEs? (?:of |from )?({NUM}(?:(?:,| and| to) {NUM})*) points")
MDE_ANY = re.compile(r"\bMDEs? (?:of |from )?\d")
BOUND = re.compile(rf"\|Δ\| ≤ ({NUM}) points")
USERS_OF_01 = re.compile(r"the two small LMs that ((?:\d\d(?:, | and )?)+) load from the")
GPU_RECORDED = re.compile(r"\(today ((?:\d\d(?:, | and )?)+) only, `results/gpu/`\)")


# --- the sources ------------------------------------------------------------------------------------


@cache
def _json(path: Path):
    return json.loads(path.read_text())


def cpu_minutes(stem: str) -> str:
    return f"{_json(CLASSROOM / 'wall_times.json')[stem] / 60:.1f} min"


def peak_ram(stem: str) -> str:
    peaks = _json(CLASSROOM / "peak_memory.json")
    return f"{peaks[stem]['rss_mib'] / 1024:.1f} GiB" if stem in peaks else "not measured yet"


def gpu_line(stem: str) -> str | None:
    """The GPU line the guide must carry for ``stem``, or None when no GPU run of it exists."""
    times = _json(GPU / "wall_times.json") if (GPU / "wall_times.json").exists() else {}
    if stem not in times:
        return None
    machine, peak = _json(GPU / "machine.json"), _json(GPU / "peak_memory.json")[stem]
    return (f"- GPU (gpu scale): {times[stem] / 60:.1f} min on {machine['gpu']}, {machine['date'][:10]}"
            f" · peak {peak['cuda_reserved_mib'] / 1024:.1f} GiB reserved"
            f" + {peak['cuda_context_mib'] / 1024:.2f} GiB CUDA context")


def _norm_title(title: str) -> str:
    return title.strip().rstrip(".:").strip().casefold()


@cache
def notebook_exercises(stem: str) -> dict[int, str]:
    """``{number: normalised title}`` of the items under the notebook's ``## Try this`` heading."""
    cells = _json(REPO / "notebooks" / f"{stem}.ipynb")["cells"]
    markdown = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    start = markdown.find("## Try this")
    assert start >= 0, f"{stem} has no '## Try this' section"
    block = markdown[start + len("## Try this"):]
    nxt = LEVEL2.search(block)
    block = block[: nxt.start()] if nxt else block
    return {int(n): _norm_title(t) for n, t in ITEM.findall(block)}


def effect_numbers(stem: str) -> tuple[list[float], list[float]]:
    """The MDEs the notebook prints (its saved comparison tables' ``MDE`` column) and its effects'
    bounds (``no_larger_than``)."""
    saved = CLASSROOM / f"{stem}.json"
    tables = _json(saved).get("tables", {}) if saved.exists() else {}
    mdes = [r["MDE"] for t in tables.values() for r in t.get("records", [])
            if isinstance(r.get("MDE"), (int, float))]
    effects = [e for e in _json(CLASSROOM / "effects.json") if e.get("notebook") == stem]
    bounds = [e["no_larger_than"] for e in effects if e.get("no_larger_than") is not None]
    return mdes, bounds


def _shown(quoted: str, value: float) -> bool:
    """``value`` shows as ``quoted`` under the one rounding rule (:mod:`tutorial_lib.rounding`)."""
    return rounding.shows(quoted, value)


# --- parsing the guide ------------------------------------------------------------------------------


def sections(text: str) -> dict[str, str]:
    """``{stem: its section's text}``; a repeated heading keeps its first section (the section
    check reports the repeat)."""
    out: dict[str, str] = {}
    for m in HEADING.finditer(text):
        nxt = LEVEL2.search(text, m.end())
        out.setdefault(m.group(1), text[m.start(): nxt.start() if nxt else len(text)])
    return out


def summary_rows(text: str) -> dict[str, list[list[str]]]:
    """``{stem: [cells of each of its summary rows]}``."""
    rows: dict[str, list[list[str]]] = {}
    for m in ROW.finditer(text):
        cells = [c.strip() for c in m.group(0).strip().strip("|").split("|")]
        rows.setdefault(cells[0], []).append(cells)
    return rows


# --- the checks -------------------------------------------------------------------------------------


def check_sections(text: str) -> list[str]:
    found = [m.group(1) for m in HEADING.finditer(text)]
    problems = [f"no section for {s}" for s in STEMS if s not in found]
    problems += [f"section for a notebook that does not exist: {s}" for s in found if s not in STEMS]
    problems += [f"{s} has {found.count(s)} sections" for s in set(found) if found.count(s) > 1]
    if not problems and found != STEMS:
        problems.append(f"sections out of notebook order: {found}")
    rows = summary_rows(text)
    problems += [f"{s} has {len(rows.get(s, []))} summary rows, not 1" for s in STEMS
                 if len(rows.get(s, [])) != 1]
    return problems


def check_times(text: str) -> list[str]:
    problems = []
    secs, rows = sections(text), summary_rows(text)
    for stem in STEMS:
        want = (cpu_minutes(stem), peak_ram(stem))
        lines = CPU_LINE.findall(secs.get(stem, ""))
        if len(lines) != 1:
            problems.append(f"{stem}: {len(lines)} '- CPU (classroom): …' lines, not 1")
        elif lines[0] != want:
            problems.append(f"{stem}: section quotes {lines[0]}, the results give {want}")
        for cells in rows.get(stem, []):
            if len(cells) != 5:
                problems.append(f"{stem}: summary row has {len(cells)} cells, not 5: {cells}")
            elif (cells[2], cells[3]) != want:
                problems.append(f"{stem}: summary row quotes {(cells[2], cells[3])}, the results give {want}")
    total = f"{sum(_json(CLASSROOM / 'wall_times.json').values()) / 60:.1f}"
    quoted = TOTAL.findall(text)
    if quoted != [total]:
        problems.append(f"total quoted {quoted}, the wall times sum to {total} min")
    return problems


def check_gpu(text: str) -> list[str]:
    problems = []
    for stem, body in sections(text).items():
        if stem not in STEMS:
            continue
        lines = GPU_ANY.findall(body)
        want = gpu_line(stem)
        if len(lines) != 1:
            problems.append(f"{stem}: {len(lines)} '- GPU…' lines, not 1")
        elif want is None and lines[0].rstrip() != GPU_NONE and not lines[0].startswith(GPU_NONE + "."):
            problems.append(f"{stem}: no GPU run is committed, but the guide says {lines[0]!r}")
        elif want is not None and (lines[0].rstrip() != want or not GPU_LINE.match(lines[0])):
            problems.append(f"{stem}: GPU line {lines[0]!r}, the results give {want!r}")
    return problems


def check_exercises(text: str) -> list[str]:
    problems = []
    for stem, body in sections(text).items():
        if stem not in STEMS:
            continue
        named = EXERCISE.findall(body)
        if not 1 <= len(named) <= 3:
            problems.append(f"{stem}: names {len(named)} exercises, not 1 to 3")
        if len(MENTION.findall(body)) != len(named):
            problems.append(f"{stem}: an exercise is mentioned without the form 'Exercise N, \"Title\"'")
        own = notebook_exercises(stem)
        for number, title in named:
            if int(number) not in own:
                problems.append(f"{stem}: no exercise {number} in its 'Try this' list {sorted(own)}")
            elif _norm_title(title) != own[int(number)]:
                problems.append(f"{stem}: exercise {number} is {own[int(number)]!r}, not {title!r}")
    return problems


def check_effect_numbers(text: str) -> list[str]:
    problems = []
    for stem, body in sections(text).items():
        if stem not in STEMS:
            continue
        mdes, bounds = effect_numbers(stem)
        if len(MDE.findall(body)) != len(MDE_ANY.findall(body)):
            problems.append(f"{stem}: an MDE is quoted in a form this test does not read")
        for group in MDE.findall(body):
            for quoted in re.findall(NUM, group):
                if not any(_shown(quoted, v) for v in mdes):
                    problems.append(f"{stem}: MDE {quoted} is not one of the saved MDEs {mdes}")
        for quoted in BOUND.findall(body):
            if not any(_shown(quoted, v) for v in bounds):
                problems.append(f"{stem}: bound |Δ| ≤ {quoted} is not one of the saved bounds {bounds}")
    return problems


def notebooks_loading_01() -> list[str]:
    """The numbers of the notebooks whose code calls ``pretraining.ensure`` (01's models)."""
    out = []
    for stem in STEMS:
        cells = _json(REPO / "notebooks" / f"{stem}.ipynb")["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        if re.search(r"^[^#\n]*\bpretraining\.ensure\(", code, re.M):
            out.append(stem[:2])
    return out


def check_named_notebooks(text: str) -> list[str]:
    problems = []
    for pattern, want, what in ((USERS_OF_01, notebooks_loading_01(), "call pretraining.ensure"),
                                (GPU_RECORDED, sorted(s[:2] for s in config.GPU_RECORD),
                                 "have a recorded gpu-scale run (config.GPU_RECORD)")):
        found = pattern.findall(text)
        if len(found) != 1:
            problems.append(f"{len(found)} lines of the form {pattern.pattern!r}, not 1")
        elif re.findall(r"\d\d", found[0]) != want:
            problems.append(f"the guide names {found[0]!r}; the notebooks that {what}: {want}")
    return problems


TIMINGS = re.compile(r"\*\*What the timings mean\.\*\*(.*?)min in all", re.S)
CPU_GROUP = re.compile(r"on\s+an\s+idle\s+2-core\s+(Intel\s+Xeon|AMD\s+EPYC)([^:]*):")
CLAUSE = re.compile(r"((?:\d\d(?:–\d\d)?(?:,\s+and\s+|,\s+|\s+and\s+)?)+)\s+on\s+(\d{4}-\d\d-\d\d)"
                    r"(\s+in\s+fp32|\s+with\s+bf16\s+pinned)?")


def _numbers(listed: str) -> list[str]:
    """``"01–04, 07 and 12"`` → ``["01", "02", "03", "04", "07", "12"]``."""
    out = []
    for a, b in re.findall(r"(\d\d)(?:–(\d\d))?", listed):
        out += [f"{n:02d}" for n in range(int(a), int(b or a) + 1)]
    return out


def check_provenance(text: str) -> list[str]:
    found = TIMINGS.search(text)
    if not found:
        return ["no '**What the timings mean.**' bullet"]
    body, problems, seen = found.group(1), [], []
    groups = list(CPU_GROUP.finditer(body))
    if not groups:
        return ["the timings bullet names no CPU ('on an idle 2-core <CPU>')"]
    for g, nxt in zip(groups, [*groups[1:], None]):
        cpu = " ".join(g.group(1).split())
        default = "bf16 autocast" if "bf16 autocast" in " ".join(g.group(2).split()) else None
        for listed, date, how in CLAUSE.findall(body[g.end(): nxt.start() if nxt else len(body)]):
            precision = "fp32" if "fp32" in how else "bf16 autocast" if "bf16" in how else default
            for number in _numbers(listed):
                stem = next((s for s in STEMS if s.startswith(number + "_")), None)
                if stem is None:
                    problems.append(f"the timings name notebook {number}, which does not exist")
                    continue
                seen.append(stem)
                run = _json(CLASSROOM / f"{stem}.json")
                env = dict(re.findall(r"^(\w+)\s*:\s*(.*)$", run["environment"], re.M))
                if run["date"][:10] != date:
                    problems.append(f"{stem}: the guide says {date}, its committed run {run['date'][:10]}")
                if cpu not in env.get("hardware", "").replace("(R)", ""):
                    problems.append(f"{stem}: the guide says {cpu}, its run {env.get('hardware')!r}")
                if precision != env.get("precision", "").strip():
                    problems.append(f"{stem}: the guide says {precision}, its run {env.get('precision')!r}")
    problems += [f"the timings name {s} {seen.count(s)} times" for s in set(seen) if seen.count(s) > 1]
    problems += [f"the timings do not say where {s} ran" for s in STEMS if s not in seen]
    return problems


CHECKS = [check_sections, check_times, check_gpu, check_exercises, check_effect_numbers,
          check_named_notebooks, check_provenance]


# --- the guide ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_guide_agrees_with_the_notebooks_and_results(check):
    problems = check(GUIDE.read_text())
    assert not problems, "\n".join(problems)


def test_the_readme_points_to_the_guide():
    """The README's layout lists the guide under ``docs/``."""
    assert re.search(r"^docs/\s+teaching\.md", (REPO / "README.md").read_text(), re.M)


# --- each check fails on a deliberately edited guide ---------------------------------------------------


def _edit(old: str, new: str, count: int = 1) -> str:
    text = GUIDE.read_text()
    assert old in text, old
    return text.replace(old, new, count)


def _first_exercise(stem: str) -> tuple[str, str]:
    return EXERCISE.findall(sections(GUIDE.read_text())[stem])[0]


def _edits():
    stem = STEMS[0]
    cpu, ram = cpu_minutes(stem), peak_ram(stem)
    number, title = _first_exercise(stem)
    own = notebook_exercises(stem)
    missing = max(own) + 1
    heading = HEADING.search(GUIDE.read_text()).group(0)
    mde = MDE.search(GUIDE.read_text()).group(0)
    bad_mde = mde.replace(re.findall(NUM, mde)[0], "99.9", 1)
    return [
        ("a section removed", check_sections, heading + "\n", heading.replace("## ", "### ") + "\n"),
        ("a CPU time changed", check_times, f"- CPU (classroom): {cpu} · peak RAM {ram}",
         f"- CPU (classroom): {float(cpu.split()[0]) + 0.1:.1f} min · peak RAM {ram}"),
        ("a summary RAM changed", check_times, f"| {cpu} | {ram} |", f"| {cpu} | 99.9 GiB |"),
        ("a GPU line dropped", check_gpu, "- GPU: not measured yet", "- GPU: 1.0 min"),
        ("an exercise retitled", check_exercises, f'Exercise {number}, "{title}"',
         f'Exercise {number}, "{title} everything"'),
        ("an exercise renumbered", check_exercises, f'Exercise {number}, "{title}"',
         f'Exercise {missing}, "{title}"'),
        ("a loose mention", check_exercises, f'Exercise {number}, "{title}"',
         f'Exercise {number}, "{title}" (see exercise {number})'),
        ("an MDE changed", check_effect_numbers, mde, bad_mde),
        ("01's users misnamed", check_named_notebooks, "02, 06, 10, 15 and 18 load",
         "02, 06, 10, 14 and 18 load"),
        ("the gpu record misnamed", check_named_notebooks, "(today 01 only,", "(today 01 and 02 only,"),
        ("a run's date changed", check_provenance, "06, 09, 13, 16 and 18 on 2026-12-08",
         "06, 09, 13 and 16 on 2026-12-08, 18 on 2026-12-06"),
        ("a run's precision changed", check_provenance, "and 11 on 2026-12-07 in fp32",
         "and 11 on 2026-12-07"),
        ("a notebook left out", check_provenance, "Xeon: 05, 10, 14 and 15", "Xeon: 05, 10 and 15"),
    ]


@pytest.mark.parametrize("what, check, old, new", _edits(), ids=[e[0] for e in _edits()])
def test_each_check_fails_on_an_edited_guide(what, check, old, new):
    assert not check(GUIDE.read_text())
    assert check(_edit(old, new)), f"{check.__name__} missed: {what}"
