"""Strip the rich outputs (figures, HTML tables, LaTeX …) of executed notebooks kept as records,
keeping what was printed.

An executed copy of a notebook that is not the teaching material (the held-out run under
``results/<scale>/held-out/notebooks/``, a failed execution under ``results/<scale>/failed/``) is
a record of what ran: its numbers are in ``<notebook>.json``, and its plots are those of the
committed notebook on other seeds (or its traceback says why there are none). Its figures, HTML
tables and LaTeX made the held-out run 7.4 MiB of the tracked tree, which every device call
carries (64 MiB a call, issue 63). So every output keeps only its ``text/plain`` (streams and
errors stay as they are); an ``image/png`` becomes a line saying which figure went; the
notebook's metadata (``tutorial_stripped``) says what went, how many bytes, and why. The held-out
run's executed copies are, besides, kept outside the tree (git-ignored; replication reads only
its ``<notebook>.json``); the last committed ones are in git history (``git show
ed78f54:results/classroom/held-out/notebooks/02_adaptation.ipynb``), and their figures before that.

    python scripts/strip_outputs.py results/classroom/failed/*/*.ipynb

``scripts/run_notebooks.py`` applies it to a failed execution it keeps, and with
``--strip-rich-outputs`` (what ``benchmarks.replicate --run`` passes) to each executed copy before
it is swapped in. Stripping twice changes nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

KEPT = ("text/plain",)
META_KEY = "tutorial_stripped"
WHY = ("rich outputs (figures, HTML, LaTeX) stripped to keep the tracked tree small: every "
       "device call carries it, 64 MiB a call (issue 63); what was printed (text/plain, streams, "
       "errors) is kept, the numbers are in <notebook>.json beside this folder, and the plots are "
       "those of the committed notebook on other seeds")


def strip(notebook: dict, stem: str) -> dict:
    """``notebook`` (nbformat v4 as a dict) with every output's data reduced to :data:`KEPT`, in
    place; an ``image/png`` becomes a text line ``[figure <k> of <stem>: stripped]`` (k in cell
    order, as ``report.notebook_figures`` numbers them). Records what went in the metadata; returns it."""
    removed: dict[str, int] = {}
    figure = 0
    for cell in notebook.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data")
            if not data:
                continue
            if "image/png" in data:
                figure += 1
            gone = {k: v for k, v in data.items() if k not in KEPT}
            if not gone:
                continue
            for kind, value in gone.items():
                removed[kind] = removed.get(kind, 0) + len(json.dumps(value))
                del data[kind]
            if "image/png" in gone:
                data["text/plain"] = f"[figure {figure} of {stem}: stripped]"
            elif "text/plain" not in data:
                data["text/plain"] = f"[{', '.join(sorted(gone))} stripped]"
            out.get("metadata", {}).clear()  # image sizes and the like: about what went
    record = notebook.setdefault("metadata", {}).get(META_KEY, {"why": WHY, "removed_bytes": {}})
    for kind, size in removed.items():
        record["removed_bytes"][kind] = record["removed_bytes"].get(kind, 0) + size
    if removed or META_KEY in notebook["metadata"]:
        notebook["metadata"][META_KEY] = record
    return notebook


def strip_file(path: Path) -> int:
    """Strip the notebook at ``path`` in place (written as nbformat writes it); bytes saved."""
    before = path.stat().st_size
    notebook = strip(json.loads(path.read_text(encoding="utf-8")), path.stem)
    path.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return before - path.stat().st_size


def main(argv: Sequence[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python scripts/strip_outputs.py NOTEBOOK.ipynb …", file=sys.stderr)
        return 2
    for path in paths:
        if path.resolve().parent == (Path(__file__).resolve().parents[1] / "notebooks"):
            print(f"error: {path} is teaching material (its outputs are the lesson): "
                  "strip only executed copies kept as records", file=sys.stderr)
            return 1
    for path in paths:
        print(f"{path}: {strip_file(path) / 2**20:.2f} MiB stripped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
