"""Did a change alter any number? Compare two runs' saved results, timings and memory aside.

    python scripts/compare_results.py BEFORE_DIR AFTER_DIR [--only 02 09]

Each directory holds the ``<notebook>.json`` files a run saved (``TUTORIAL_RESULTS_DIR``). Every
table cell and effect is compared exactly, except what a machine's load moves: wall times,
speeds, peak memory, dates, the environment line and the run cache's "cached" flag. Prints one
line per notebook ("same", or the first differences) and exits 1 if any differs.

The refactoring check: run every notebook at smoke twice — before and after the change — from
copies of one cache (``TUTORIAL_CACHE_DIR``), e.g. with ``scripts/pytest_all.sh``'s notebook leg
and ``TUTORIAL_RESULTS_DIR`` set, then compare. Smoke runs are bit-for-bit reproducible on one
machine (two runs of unchanged code give "same" everywhere), so any difference is the change's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

VOLATILE = re.compile(r"date|environment|seconds|second|wall|time|speed|peak|memory|mib|cached|"
                      r"markdown|seed_set|/ s\b|\(s\)|examples / s|s / step", re.IGNORECASE)


def stable(value: object) -> object:
    """``value`` without the keys a machine's load moves (see the module docstring)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if not VOLATILE.search(str(k))}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def differences(before: object, after: object, path: str = "") -> list[str]:
    """Where ``before`` and ``after`` differ: ``path: before != after``."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [d for k in sorted(set(before) | set(after), key=str)
                for d in differences(before.get(k), after.get(k), f"{path}/{k}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after))
                for d in differences(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r:.60} != {after!r:.60}"]


def compare(before_dir: Path, after_dir: Path, only: list[str] | None = None) -> dict[str, list[str]]:
    """``{notebook: its differences}`` for every notebook saved in either directory."""
    names = sorted({p.stem for d in (before_dir, after_dir) for p in d.glob("[0-9][0-9]_*.json")})
    out = {}
    for name in names:
        if only and not any(name.startswith(o) for o in only):
            continue
        files = [d / f"{name}.json" for d in (before_dir, after_dir)]
        missing = [str(f) for f in files if not f.is_file()]
        out[name] = [f"missing: {m}" for m in missing] or differences(
            *(stable(json.loads(f.read_text())) for f in files))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--only", nargs="*", help="notebook number prefixes, e.g. 02 09")
    args = parser.parse_args(argv)
    found = compare(args.before, args.after, args.only)
    for name, diffs in found.items():
        print(f"{'same' if not diffs else 'DIFF'}  {name}" + "".join(f"\n      {d}" for d in diffs[:5]))
    changed = [n for n, d in found.items() if d]
    print(f"{len(found) - len(changed)} same, {len(changed)} differ")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
