"""The README's first screen and its notebook table: the quick start's commands are the ones CI
runs (``.ci/run``), its numbers are the committed runs', the table keeps one short line a notebook
with its details in ``docs/notebooks.md``, and the README's and docs' relative links resolve.
(Every number of the table's rows is checked against the results by ``tests/test_claims.py``.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tutorial_lib import config

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CLASSROOM = REPO / "results" / "classroom"
STEMS = [p.stem for p in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))]
ROW_PROSE_MAX = 200  # characters of a table row a reader reads: no badge, no link targets, no pipes


def quick_start(text: str) -> str:
    """The README's ``## Quick start`` section."""
    return text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]


def commands(block: str) -> list[str]:
    """The commands of a shell script or code block: one a line, comments and ``set``/``cd``/``echo``
    and variable assignments left out, whitespace normalised."""
    out = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = shlex.split(line)
        if words[0] in ("set", "cd", "echo") or re.fullmatch(r"\w+=\S*", words[0]):
            continue
        out.append(" ".join(words))
    return out


def quick_start_commands(text: str) -> list[str]:
    section = quick_start(text)
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the quick start has one bash block"
    return commands(blocks[0])


def check_quick_start_commands(text: str, ci_run: str | None = None) -> list[str]:
    """The quick start's test command is the one ``.ci/run`` (or the script ``ci_run``) runs, and
    it names the main job."""
    cmds = quick_start_commands(text)
    ci = commands(ci_run if ci_run is not None else (REPO / ".ci" / "run").read_text())
    problems = []
    if len(ci) != 1:
        problems.append(f".ci/run runs {ci}, not one command")
    if ci and ci[0] not in cmds:
        problems.append(f"the quick start's commands {cmds} do not include .ci/run's {ci[0]!r}")
    if cmds[-1:] != ci[:1]:
        problems.append(f"the quick start's test command (its last) is {cmds[-1:]}, .ci/run runs {ci}")
    if "bash scripts/main_job.sh" not in cmds:
        problems.append(f"the quick start's commands {cmds} lack the main job, bash scripts/main_job.sh")
    return problems


def check_quick_start_numbers(text: str) -> list[str]:
    """The classroom run's total (``N min in all``) is the sum of the committed wall times, and
    "each under T min and under R GiB of RAM" holds for every notebook."""
    times = json.loads((CLASSROOM / "wall_times.json").read_text())
    peaks = json.loads((CLASSROOM / "peak_memory.json").read_text())
    section, problems = " ".join(quick_start(text).split()), []
    total = f"{sum(times[s] for s in STEMS) / 60:.1f}"
    if re.findall(r"(\d+\.\d) min in all", section) != [total]:
        quoted = re.findall(r"(\S+) min in all", section)
        problems.append(f"the quick start's total {quoted}, the wall times sum to {total} min")
    bounds = re.findall(r"each under (\d+) min and under (\d+) GiB of RAM", section)
    if len(bounds) != 1:
        problems.append("no 'each under T min and under R GiB of RAM'")
    else:
        minutes, gib = map(float, bounds[0])
        slow = [s for s in STEMS if times[s] / 60 >= minutes]
        big = [s for s in STEMS if s in peaks and peaks[s]["rss_mib"] / 1024 >= gib]
        if slow or big or any(s not in peaks for s in STEMS):
            problems.append(f"not under {minutes} min: {slow}; not under {gib} GiB (or unmeasured): "
                            f"{big or [s for s in STEMS if s not in peaks]}")
    if str(len(STEMS)) + " notebooks" not in section:
        problems.append(f"the quick start does not say '{len(STEMS)} notebooks'")
    return problems


def test_the_quick_start_runs_what_ci_runs():
    assert not check_quick_start_commands(README.read_text())


def test_the_quick_start_numbers_are_the_committed_runs():
    assert not check_quick_start_numbers(README.read_text())


def test_the_details_total_is_the_committed_runs():
    """docs/notebooks.md's "N min in all" (its budget paragraph) is the same sum."""
    times = json.loads((CLASSROOM / "wall_times.json").read_text())
    text = (REPO / "docs" / "notebooks.md").read_text()
    assert re.findall(r"(\d+\.\d) min in all", text) == [f"{sum(times[s] for s in STEMS) / 60:.1f}"]


def test_the_quick_start_comes_first():
    """The first section after the introduction, within the first 25 lines."""
    lines = README.read_text().splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    assert lines[headings[0]] == "## Quick start" and headings[0] < 25


@pytest.mark.parametrize("old, new", [
    ("bash scripts/test.sh       #", "bash scripts/tests.sh      #"),  # another test command
    ("bash scripts/main_job.sh   #", "bash scripts/run_all.sh    #"),
])
def test_the_commands_check_fails_when_the_readme_differs(old, new):
    text = README.read_text()
    assert old in text
    assert check_quick_start_commands(text.replace(old, new, 1))


def test_the_commands_check_fails_when_ci_runs_another_command():
    ci_run = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/test.sh\n" in ci_run
    assert check_quick_start_commands(README.read_text(), ci_run) == []
    assert check_quick_start_commands(README.read_text(), ci_run.replace("bash scripts/test.sh\n",
                                                                          "bash scripts/test.sh --fast\n"))


def test_the_numbers_check_fails_on_an_edited_total():
    text = README.read_text()
    total = re.search(r"(\d+\.\d) min in all", quick_start(text)).group(1)
    edited = text.replace(f"{total} min in all", f"{float(total) + 0.1:.1f} min in all")
    assert check_quick_start_numbers(edited)
    assert check_quick_start_numbers(re.sub(r"each\s+under\s+\d+\s+min", "each under 9 min", text))


def check_colab_record(text: str) -> list[str]:
    """The Colab section's "today only NN, on an <GPU>" names config.GPU_RECORD's notebooks and GPU."""
    found = re.findall(r"today only ((?:\d\d(?:, | and )?)+), on an? (\S+)", " ".join(text.split()))
    if len(found) != 1:
        return [f"{len(found)} 'today only NN, on a GPU' phrases, not 1"]
    numbers, gpu = re.findall(r"\d\d", found[0][0]), found[0][1]
    want = sorted(stem[:2] for stem in config.GPU_RECORD)
    gpus = {str(entry["gpu"]) for entry in config.GPU_RECORD.values()}
    problems = [] if numbers == want else [f"README names {numbers}, the record {want}"]
    if not any(name.endswith(gpu) for name in gpus):
        problems.append(f"README names the GPU {gpu!r}, the record {gpus}")
    return problems


def test_the_colab_section_names_the_recorded_gpu_runs():
    text = README.read_text()
    assert not check_colab_record(text)
    assert check_colab_record(text.replace("today only 01, on an H200", "today only 01 and 02, on an H200"))
    assert check_colab_record(text.replace("today only 01, on an H200", "today only 01, on a T4"))


# --- the notebook table ------------------------------------------------------------------------------


def table_rows(text: str) -> dict[str, str]:
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*\d\d\s*\|\s*\[(\d\d_\w+)\]", line)
        if m:
            rows[m.group(1)] = line
    return rows


def row_prose(row: str) -> str:
    """What a reader reads of a row: without the Colab badge, link targets and the pipes."""
    text = row.rsplit("| [![Open In Colab]", 1)[0]
    text = re.sub(r"\]\([^)]*\)", "]", text).replace("[", "").replace("]", "")
    return " ".join(c.strip() for c in text.split("|") if c.strip())


def test_the_table_has_one_short_line_a_notebook_linking_its_details():
    rows = table_rows(README.read_text())
    assert list(rows) == STEMS
    details = (REPO / "docs" / "notebooks.md").read_text()
    for stem, row in rows.items():
        prose = row_prose(row)
        assert len(prose) <= ROW_PROSE_MAX, (stem, len(prose), prose)
        assert f"](docs/notebooks.md#{stem})" in row, f"{stem}'s row does not link its details"
        assert re.search(rf"^## {stem}\s*$", details, re.M), f"docs/notebooks.md has no section {stem}"
    long_row = "| 01 | [a](b) | " + "x" * 300 + " | 1 min | 1 GiB | [![Open In Colab](c)](d) |"
    assert len(row_prose(long_row)) > ROW_PROSE_MAX


@pytest.mark.parametrize("doc", ["README.md", "docs/notebooks.md", "docs/troubleshooting.md",
                                 "docs/offline_bundle.md", "docs/teaching.md", "docs/gpu.md"])
def test_relative_links_resolve(doc):
    """Every relative link of the README and the docs points at a file or folder that exists, and
    every ``#anchor`` into a markdown file at one of its headings."""
    path = REPO / doc
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        assert where.exists(), f"{doc}: {target}"
        if anchor and where.suffix == ".md":
            heads = re.findall(r"^#+ (.+)$", where.read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}
            assert anchor in slugs, f"{doc}: {target} (headings: {sorted(slugs)})"


def replication_counts(record: dict) -> dict[str, int]:
    """What the held-out paragraph quotes, from ``replication.json``: the first run's headline
    effects (a "better" or "worse" verdict) and what became of them on the held-out seeds."""
    statuses = [e["status"] for e in record["effects"]
                if e["first"] and e["first"]["verdict"] in ("better", "worse")]
    return {"headline": len(statuses), "replicated": statuses.count("replicated"),
            "not replicated": statuses.count("not replicated"),
            "unread": sum(s.startswith(("void in the held-out", "untestable in the held-out",
                                        "missing")) for s in statuses)}


def quoted_counts(text: str) -> dict[str, int]:
    m = re.search(r"Of the (\d+) headline effects [^,]*, (\d+) replicated", text)
    unread = re.search(r"(\d+) could not be read on the held-out seeds", text)
    did_not = re.search(r"(\d+) did not \(", text)
    if not (m and unread and did_not):
        raise AssertionError("the held-out paragraph must say 'Of the N headline effects …, M "
                             "replicated', 'K could not be read on the held-out seeds' and 'J did not ('")
    return {"headline": int(m[1]), "replicated": int(m[2]), "not replicated": int(did_not[1]),
            "unread": int(unread[1])}


def test_the_held_out_paragraph_counts_are_replication_json():
    """The replication counts quoted in docs/notebooks.md are computed from replication.json (they
    were typed by hand and drifted); an edited count fails."""
    record = json.loads((CLASSROOM / "replication.json").read_text())
    text = (REPO / "docs" / "notebooks.md").read_text()
    want = replication_counts(record)
    assert quoted_counts(text) == want
    assert want["headline"] == want["replicated"] + want["not replicated"] + want["unread"]
    edited = text.replace(f"{want['replicated']} replicated", f"{want['replicated'] + 1} replicated", 1)
    with pytest.raises(AssertionError):
        assert quoted_counts(edited) == want
