"""Merge the per-notebook results folders of the GPU workflow's legs into one results folder.

Each leg of ``.github/workflows/notebooks-gpu.yml`` uploads its ``results/gpu`` (the executed
notebook, its tables, a ``wall_times.json`` and a ``peak_memory.json`` with one entry
each) as an artifact
``gpu-<notebook>``; the report job downloads them all into one folder and calls this script, then
``run_notebooks.py --report-only`` writes RESULTS.md from the merged folder.

    python scripts/merge_gpu_results.py ARTIFACTS_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

TIMES = "wall_times.json"
PEAKS = "peak_memory.json"
MERGED = (TIMES, PEAKS)  # one entry per notebook in each leg: merged, not overwritten


def merge(artifacts: Path, out: Path) -> dict[str, float]:
    """Copy every ``artifacts/gpu-*`` folder into ``out``; their wall times and peak memories are
    merged into one ``wall_times.json`` and one ``peak_memory.json`` (not overwritten by the last
    leg). Returns the merged wall times."""
    out.mkdir(parents=True, exist_ok=True)
    merged: dict[str, dict] = {name: {} for name in MERGED}
    for leg in sorted(p for p in artifacts.glob("gpu-*") if p.is_dir()):
        for name in MERGED:
            if (leg / name).exists():
                merged[name].update(json.loads((leg / name).read_text()))
        shutil.copytree(leg, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*MERGED))
    for name, entries in merged.items():
        if entries or name == TIMES:
            (out / name).write_text(json.dumps(dict(sorted(entries.items())), indent=1))
    return merged[TIMES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("artifacts", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    times = merge(args.artifacts, args.out)
    print(f"merged {len(times)} notebooks into {args.out}: {', '.join(sorted(times))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
