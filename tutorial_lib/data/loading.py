""":func:`load`: pick the source, verify or fetch, carve a validation split, memoise.

``source="auto"`` reads the local copy when ``TUTORIAL_DATA_DIR`` is set and holds the
dataset, and the Hub otherwise. Results are memoised in-process; :func:`clear_cache` forgets
them together with the file-verification cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datasets import DatasetDict

from .columns import train_test_split
from .environment import DATA_DIR_PLACEHOLDER, DATA_ENV_VAR, data_dir
from .errors import DataError
from .hub import load_hub
from .registry import DatasetSpec, lookup
from .verify import cached_sha256, clear_verified, verify_local

SOURCES = ("auto", "local", "hub")

_MEMO: dict[tuple[Any, ...], DatasetDict] = {}


def clear_cache() -> None:
    """Forget memoised datasets and file-verification results."""
    clear_verified()
    _MEMO.clear()


def resolve_source(spec: DatasetSpec, source: str) -> str:
    """``"local"`` or ``"hub"`` for a requested ``source``."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if source == "hub":
        return "hub"
    if source == "local":
        if spec.parse_local is None:
            raise DataError(
                f"{spec.name} is not part of the local copy (see MANIFEST.md); "
                f"load it with source='hub' ({spec.hub.describe()})"
            )
        if data_dir() is None:
            raise DataError(
                f"source='local' needs the environment variable {DATA_ENV_VAR} set to the "
                "directory of the local copy of the data (see README)"
            )
        return "local"
    return "local" if data_dir() is not None and spec.parse_local is not None else "hub"


def source_of(name: str, *, source: str = "auto") -> str:
    """Where :func:`load` would read ``name`` from, e.g. ``"local copy $TUTORIAL_DATA_DIR/trec"``
    or ``"hub CogComp/trec (revision refs/convert/parquet)"``. A local split that holds only part
    of the official one is named: ``"local copy $TUTORIAL_DATA_DIR/squad-v1.1 (train is a subset,
    the first 11 of 442 articles: 3,807 of 87,599 questions)"``.

    The local copy is named by its variable, never by its absolute path, so that printed
    outputs (committed notebooks) do not depend on the machine they ran on.
    """
    spec = lookup(name)
    if resolve_source(spec, source) == "local":
        subsets = "; ".join(f"{split} is a subset, {part}" for split, part in spec.local_subsets.items())
        return f"local copy {DATA_DIR_PLACEHOLDER}/{spec.local_dir}" + (f" ({subsets})" if subsets else "")
    return spec.hub.describe()


def fingerprint(name: str, *, source: str = "auto") -> dict[str, str]:
    """What identifies the data :func:`load` reads for ``name``, for cache keys: ``{file: sha256}``
    of the local copy's files (as they are on disk, hashed once per path, size and mtime), or
    ``{"hub": "hub <id> (config ..., revision ...)"}``."""
    spec = lookup(name)
    if resolve_source(spec, source) == "hub":
        return {"hub": spec.hub.describe()}
    root = data_dir()
    assert root is not None  # guaranteed by resolve_source
    return {rel: cached_sha256(root / rel) for rel in spec.local_files}


def carve_validation(
    dd: DatasetDict, spec: DatasetSpec, validation_fraction: float, seed: int
) -> DatasetDict:
    """Add ``validation`` = a seeded (stratified) fraction of train, if there is none.

    Stratification falls back to a plain seeded split when a class is too small for it.
    """
    if "train" not in dd or "validation" in dd or validation_fraction == 0:
        return dd
    try:
        parts = train_test_split(dd["train"], validation_fraction, seed, spec.stratify)
    except ValueError:  # too few rows per class to stratify (tiny datasets only)
        parts = train_test_split(dd["train"], validation_fraction, seed)
    out = {"train": parts["train"], "validation": parts["test"]}
    if "test" in dd:
        out["test"] = dd["test"]
    return DatasetDict(out)


def _read(
    spec: DatasetSpec, resolved: str
) -> tuple[tuple[Any, ...], Callable[[], DatasetDict]]:
    """Memo key and a zero-argument reader for ``spec`` from the resolved source.

    The local files are verified here, before the memo is consulted: cheap when cached, and a
    file changed since it was memoised is still caught.
    """
    if resolved == "hub":
        return ("hub",), lambda: load_hub(spec)
    root = data_dir()
    parse = spec.parse_local
    assert root is not None and parse is not None  # guaranteed by resolve_source
    verify_local(spec, root)
    return ("local", str(root)), lambda: parse(root)


def load(
    name: str,
    *,
    validation_fraction: float = 0.1,
    seed: int = 0,
    source: str = "auto",
) -> DatasetDict:
    """Load registry dataset ``name`` with the stable schema described in the package docstring.

    Args:
        name: a name from :func:`list_datasets` (case-insensitive).
        validation_fraction: fraction of ``train`` carved off as ``validation`` when the
            dataset has no validation split (0 keeps train whole).
        seed: seed of that carving.
        source: ``"auto"``, ``"local"`` (needs ``TUTORIAL_DATA_DIR``) or ``"hub"``.

    Raises:
        DataError: unknown name, missing/corrupt local file, offline without a local copy,
            or the Hub unreachable.
    """
    spec = lookup(name)
    if not 0 <= validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    where, read = _read(spec, resolve_source(spec, source))
    key = (spec.name, validation_fraction, seed, *where)
    if key not in _MEMO:
        raw = read()
        if spec.resplit is not None:
            raw = spec.resplit(raw)
        _MEMO[key] = carve_validation(raw, spec, validation_fraction, seed)
    return DatasetDict(dict(_MEMO[key]))
