"""The content fingerprints of the local copy (:mod:`tutorial_lib.data.fingerprints`), checked or
written:

    TUTORIAL_DATA_DIR=/path/to/data python -m tutorial_lib.ops.fingerprints           # compare
    TUTORIAL_DATA_DIR=/path/to/data python -m tutorial_lib.ops.fingerprints --write   # record

Both print the table (dataset, split, rows, sha256) and the time taken; the comparison exits 1,
naming the splits, when the local copy's fingerprints differ from the committed
``tutorial_lib/data/fingerprints.json``. Write only after checking that the change is intended (a
new local file, a parser fixed on purpose): the Hub path is checked against what is written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ..data.environment import DATA_ENV_VAR, data_dir
from ..data.fingerprints import FINGERPRINTS_FILE, WRITE_COMMAND, SplitPrint, local_prints, recorded, to_json
from ..data.registry import REGISTRY


def compute_all(root: Path) -> dict[str, dict[str, SplitPrint]]:
    """Fingerprints of every dataset of the local copy under ``root``, by name."""
    return {name: local_prints(spec, root) for name, spec in sorted(REGISTRY.items())
            if spec.parse_local is not None}


def table(prints: Mapping[str, Mapping[str, SplitPrint]]) -> str:
    """A plain table: dataset, split, rows, sha256 (first 12 hex digits)."""
    lines = [f"{'dataset':<12} {'split':<11} {'rows':>7}  sha256"]
    for name, splits in prints.items():
        lines += [f"{name:<12} {s:<11} {p.rows:>7,}  {p.sha256[:12]}" for s, p in splits.items()]
    return "\n".join(lines)


def stale(prints: Mapping[str, Mapping[str, SplitPrint]],
          committed: Mapping[str, Mapping[str, SplitPrint]]) -> list[str]:
    """``dataset/split`` of every fingerprint that differs, is new or is gone."""
    keys = {(n, s) for n, splits in prints.items() for s in splits}
    keys |= {(n, s) for n, splits in committed.items() for s in splits}
    return [f"{n}/{s}" for n, s in sorted(keys)
            if prints.get(n, {}).get(s) != committed.get(n, {}).get(s)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Content fingerprints of the local copy's splits.")
    parser.add_argument("--write", action="store_true",
                        help=f"record them in {FINGERPRINTS_FILE.name} (default: compare; 1 if different)")
    args = parser.parse_args(argv)
    root = data_dir()
    if root is None:
        parser.error(f"set {DATA_ENV_VAR} to the local copy of the data (the folder holding MANIFEST.md)")
    start = time.perf_counter()
    prints = compute_all(root)
    print(table(prints))
    print(f"computed in {time.perf_counter() - start:.1f} s")
    if args.write:
        FINGERPRINTS_FILE.write_text(to_json(prints), encoding="utf-8")
        recorded.cache_clear()
        print(f"wrote {FINGERPRINTS_FILE}")
        return 0
    differ = stale(prints, recorded())
    if differ:
        print(f"differs from {FINGERPRINTS_FILE.name}: {', '.join(differ)}. If the change is intended "
              f"(checked): {WRITE_COMMAND}", file=sys.stderr)
        return 1
    print(f"matches {FINGERPRINTS_FILE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
