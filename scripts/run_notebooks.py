"""Execute every notebook in order at one scale and write a results summary.

At classroom scale (the default) notebooks are executed *in place*, so the committed notebooks
carry the outputs of this run; at any other scale the executed copies go to
``results/<scale>/notebooks/`` unless ``--inplace`` is given. Each notebook saves its tables
through ``tutorial_lib.results``; this script gathers them, with each notebook's wall time, into
``results/<scale>/SUMMARY.md``.

    python scripts/run_notebooks.py [--scale classroom] [--only 01 02] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tutorial_lib import config  # noqa: E402
from tutorial_lib.results import RESULTS_ENV_VAR, summary_markdown  # noqa: E402


def run(notebook: Path, destination: Path, timeout: int) -> float:
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        seconds = time.perf_counter() - start
        destination.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, destination)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=os.environ.get(config.SCALE_ENV_VAR, "classroom"))
    parser.add_argument("--only", nargs="*", help="notebook number prefixes, e.g. 01 02")
    parser.add_argument("--out", type=Path, help="results directory (default results/<scale>)")
    parser.add_argument("--inplace", action="store_true", help="overwrite the notebooks")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = parser.parse_args()

    scale = config.get_scale(args.scale)
    out = (args.out or ROOT / "results" / scale.name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ[config.SCALE_ENV_VAR] = scale.name
    os.environ[RESULTS_ENV_VAR] = str(out)
    inplace = args.inplace or (scale.name == "classroom" and args.out is None)

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.only:
        notebooks = [nb for nb in notebooks if nb.name[:2] in args.only]
    times_path = out / "wall_times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for nb in notebooks:
        dest = nb if inplace else out / "notebooks" / nb.name
        print(f"[{scale.name}] {nb.name} ...", flush=True)
        seconds = run(nb, dest, args.timeout)
        times[nb.stem] = round(seconds, 1)
        times_path.write_text(json.dumps(times, indent=1))
        print(f"[{scale.name}] {nb.name} done in {seconds:.0f} s -> {dest.relative_to(ROOT)}",
              flush=True)
    (out / "SUMMARY.md").write_text(summary_markdown(out, times))
    print(f"summary: {(out / 'SUMMARY.md').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
