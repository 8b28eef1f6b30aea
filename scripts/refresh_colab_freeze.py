"""Refresh tests/colab/pip-freeze.gpu.txt: Colab's GPU runtime as Google publishes it.

    python scripts/refresh_colab_freeze.py      # online (GitHub); then run tests/test_colab_resolution.py

googlecolab/backend-info keeps ``pip-freeze.gpu.txt`` (the runtime's ``pip freeze``) and
``os-info-gpu.txt`` (its Python). This writes the freeze with a header naming the commit and its
date, which the Colab-stack test (tests/test_colab_resolution.py) resolves the project against.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "colab" / "pip-freeze.gpu.txt"
SOURCE = "googlecolab/backend-info"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def main() -> int:
    try:
        api = f"https://api.github.com/repos/{SOURCE}/commits?path=pip-freeze.gpu.txt&per_page=1"
        commits = json.loads(_get(api))
        sha, date = commits[0]["sha"], commits[0]["commit"]["committer"]["date"][:10]
        message = commits[0]["commit"]["message"].splitlines()[0]
        freeze = _get(f"https://raw.githubusercontent.com/{SOURCE}/{sha}/pip-freeze.gpu.txt").decode()
        python = _get(f"https://raw.githubusercontent.com/{SOURCE}/{sha}/os-info-gpu.txt").decode()
    except OSError as err:
        print(f"error: GitHub could not be reached ({err}): run this online", file=sys.stderr)
        return 1
    version = next((line.split()[1] for line in python.splitlines() if line.startswith("Python ")), "?")
    header = (f"# Colab's GPU runtime, pip freeze: {SOURCE}, pip-freeze.gpu.txt at commit\n"
              f"# {sha} ({date}, \"{message}\"; Python {version}); refresh with\n"
              "# python scripts/refresh_colab_freeze.py (online). Its own header follows.\n")
    OUT.write_text(header + freeze)
    print(f"{OUT}: {len(freeze.splitlines())} lines from {sha[:7]} ({date}), Python {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
