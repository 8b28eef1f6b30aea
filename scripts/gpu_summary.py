"""The test command's results on a GPU, per notebook, from pytest's JUnit XML.

    python scripts/gpu_summary.py smoke JUNIT_DIR OUT.json --seconds S --exit-status N

nbval makes one test of every notebook cell, so a notebook's seconds are the sum of its cells'
(the kernel's start is in its first cell) and it passed when none of its cells failed. The unit
tests are summed the same way, as one row. Written by ``scripts/gpu_runs.sh --tests``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

NOTEBOOK = re.compile(r"(\d\d_[A-Za-z0-9_]+)\.ipynb")


def summarize(junit_files: list[Path]) -> dict:
    """Per notebook (and one row for the unit tests): cells or tests, failures, skipped, seconds."""
    rows: dict[str, dict] = defaultdict(lambda: {"tests": 0, "failed": 0, "skipped": 0, "seconds": 0.0,
                                                 "first_failure": None})
    for path in junit_files:
        for case in ET.parse(path).getroot().iter("testcase"):
            where = f"{case.get('file', '')} {case.get('classname', '')} {case.get('name', '')}"
            found = NOTEBOOK.search(where)
            row = rows[found[1] if found else "unit tests"]
            row["tests"] += 1
            row["seconds"] += float(case.get("time") or 0)
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                row["failed"] += 1
                if row["first_failure"] is None:
                    message = (bad.get("message") or bad.text or "").strip().splitlines()
                    row["first_failure"] = f"{case.get('name')}: {message[-1][:300] if message else ''}"
            elif case.find("skipped") is not None:
                row["skipped"] += 1
    out = {}
    for name in sorted(rows, key=lambda n: (n == "unit tests", n)):
        row = rows[name]
        row["seconds"] = round(row["seconds"], 1)
        row["passed"] = row["failed"] == 0
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scale")
    parser.add_argument("junit_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, help="the test command's wall time")
    parser.add_argument("--exit-status", type=int)
    args = parser.parse_args(argv)
    files = sorted(args.junit_dir.glob("*.xml"))
    rows = summarize(files)
    notebooks = {k: v for k, v in rows.items() if k != "unit tests"}
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "scale": args.scale,
           "wall_seconds": args.seconds, "exit_status": args.exit_status,
           "junit_files": [f.name for f in files],
           "notebooks_passed": sum(r["passed"] for r in notebooks.values()),
           "notebooks": len(notebooks), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    width = max((len(k) for k in rows), default=10)
    for name, r in rows.items():
        state = "passed" if r["passed"] else f"FAILED ({r['failed']} of {r['tests']}): {r['first_failure']}"
        print(f"{name:<{width}}  {r['seconds']:7.1f} s  {r['tests']:4d} tests  {state}")
    return 0 if files else 1


if __name__ == "__main__":
    sys.exit(main())
