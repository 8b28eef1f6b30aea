"""After a classroom re-run: write its wall time and peak RAM where the docs quote them.

Updates, from ``results/classroom/wall_times.json`` and ``peak_memory.json``, the README table's
time and RAM cells, the "N min in all" total of the README's quick start and docs/notebooks.md,
``docs/teaching.md``'s summary row, per-notebook ``- CPU (classroom):`` line and
the "N min in all" total, and a notebook header's "Run time at classroom scale on 2 CPU cores: X
minutes in the committed run". The tests that check these (test_claims, test_teaching,
test_notebooks) say what is wrong; this writes what they want. Usage::

    python scripts/sync_times.py 08 13      # notebook number prefixes
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
CLASSROOM = REPO / "results" / "classroom"


def minutes(times: dict, stem: str) -> str:
    return f"{times[stem] / 60:.1f} min"


def ram(peaks: dict, stem: str) -> str:
    return f"{peaks[stem]['rss_mib'] / 1024:.1f} GiB" if stem in peaks else "not measured yet"


def sync(stems: list[str]) -> None:
    times = json.loads((CLASSROOM / "wall_times.json").read_text())
    peaks = json.loads((CLASSROOM / "peak_memory.json").read_text())
    readme = REPO / "README.md"
    text = readme.read_text()
    for stem in stems:  # | 08 | [08_tdt](...) | ... | 7.5 min | 3.6 GiB | [![Open In Colab]
        text = re.sub(rf"(\| \[{stem}\]\(notebooks/{stem}\.ipynb\) \|.*) \| [\d.]+ min \| [^|]+ \|"
                      r"( \[!\[Open In Colab\])",
                      lambda m, s=stem: f"{m[1]} | {minutes(times, s)} | {ram(peaks, s)} |{m[2]}", text)
    total = sum(times[s] / 60 for s in times if (REPO / "notebooks" / f"{s}.ipynb").exists())
    text = re.sub(r"[\d.]+ min in all", f"{total:.1f} min in all", text)  # the quick start's total
    readme.write_text(text)
    details = REPO / "docs" / "notebooks.md"
    details.write_text(re.sub(r"[\d.]+ min in all", f"{total:.1f} min in all", details.read_text()))

    guide = REPO / "docs" / "teaching.md"
    text = guide.read_text()
    for stem in stems:
        text = re.sub(rf"^(\| {stem} \| [^|]+ \|) [\d.]+ min \| [^|]+ \|",
                      lambda m, s=stem: f"{m[1]} {minutes(times, s)} | {ram(peaks, s)} |", text, flags=re.M)
        head = text.index(f"\n## {stem} ")
        line = re.compile(r"- CPU \(classroom\): .*")
        found = line.search(text, head)
        text = (text[:found.start()] + f"- CPU (classroom): {minutes(times, stem)} · peak RAM "
                f"{ram(peaks, stem)}" + text[found.end():])
    total = sum(times[s] / 60 for s in times if (REPO / "notebooks" / f"{s}.ipynb").exists())
    text = re.sub(r"[\d.]+ min in all", f"{total:.1f} min in all", text)
    guide.write_text(text)

    for stem in stems:
        path = REPO / "notebooks" / f"{stem}.ipynb"
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = re.sub(r"(Run time at classroom scale on 2 CPU cores: )[\d.]+( minutes in "
                                     r"the committed run)", rf"\g<1>{times[stem] / 60:.1f}\g<2>", cell.source)
        nbformat.write(nb, path)
    print("synced:", ", ".join(f"{s} {minutes(times, s)}, {ram(peaks, s)}" for s in stems))


if __name__ == "__main__":
    names = [p.stem for p in sorted((REPO / "notebooks").glob("*.ipynb"))]
    sync([n for n in names if any(n.startswith(prefix) for prefix in sys.argv[1:])])
