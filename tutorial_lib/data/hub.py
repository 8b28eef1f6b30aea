"""Loading from the Hugging Face Hub, normalised to the local copy's schema.

:func:`fetch` is the only caller of ``datasets.load_dataset``; :func:`normalise_hub` renames
the Hub's splits and columns and re-maps its labels *by name* to the ClassLabels of
:mod:`.schema`, so a label int means the same thing whichever source was used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, List, Value
from datasets.exceptions import DatasetNotFoundError

from .environment import DATA_DIR_PLACEHOLDER, DATA_ENV_VAR, data_dir, offline_flag
from .errors import DataError
from .fingerprints import check_hub
from .registry import DatasetSpec
from .schema import SPLITS

SPLIT_ALIASES = {"dev": "validation", "valid": "validation", "val": "validation"}
"""Hub split names that mean ``validation``."""

Converter = Callable[[dict[str, list[Any]]], list[Any]]

# ------------------------------------------------------------------------------ fetching


def network_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean 'the Hub could not be reached' (OSError covers most)."""
    errors: list[type[BaseException]] = [OSError, ConnectionError, TimeoutError]
    for module, attr in (
        ("httpx", "HTTPError"),
        ("httpx2", "HTTPError"),
        ("requests", "RequestException"),
    ):
        try:
            errors.append(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            pass
    return tuple(errors)


def fetch(spec: DatasetSpec) -> DatasetDict:
    """The raw Hub dataset of ``spec``: ``datasets.load_dataset`` with its config/revision."""
    kwargs: dict[str, Any] = {}
    if spec.hub.revision:
        kwargs["revision"] = spec.hub.revision
    if spec.hub.data_dir:
        kwargs["data_dir"] = spec.hub.data_dir
    raw = datasets.load_dataset(spec.hub.path, spec.hub.config, **kwargs)
    if not isinstance(raw, DatasetDict):
        raise DataError(f"{spec.hub.describe()} did not return a DatasetDict")
    return raw


def unreachable_error(spec: DatasetSpec, reason: str) -> DataError:
    """The one error for 'no Hub and no local copy to fall back on', with what to do."""
    hub = spec.hub.describe()
    if spec.parse_local is None:
        advice = f"{spec.name} is not part of the local copy: go online to load it from {hub}"
    elif data_dir() is None:
        advice = (
            f"there is no local copy ({DATA_ENV_VAR} is not set). Set {DATA_ENV_VAR} to a local "
            f"copy of the data (the folder holding MANIFEST.md; see README), or go online to "
            f"load it from {hub}"
        )
    else:
        advice = (
            f"source='hub' was asked for. Use source='auto' to read the local copy in "
            f"{DATA_DIR_PLACEHOLDER}, or go online to load it from {hub}"
        )
    return DataError(f"cannot load {spec.name}: offline ({reason}); {advice}")


def load_hub(spec: DatasetSpec) -> DatasetDict:
    """:func:`fetch` + :func:`normalise_hub`, then :func:`.fingerprints.check_hub` (DataError when
    a split differs from its recorded content); offline, unreachable Hub or a dataset the Hub
    does not know -> DataError. Offline (``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE``), ``datasets``
    still reads a copy an earlier online run (``python -m tutorial_lib.ops.prefetch``) left in its
    cache: only when there is none is it the "offline, no local copy" error."""
    flag = offline_flag()
    try:
        raw = fetch(spec)
    except Exception as err:
        if flag:  # whatever datasets raised offline, the cause is the same: nothing cached
            raise unreachable_error(spec, f"{flag} is set and the Hugging Face cache has no copy") from err
        if isinstance(err, DatasetNotFoundError):
            raise DataError(
                f"{spec.hub.describe()} was not found on the Hub ({err}); it may have moved. Set "
                f"{DATA_ENV_VAR} to a local copy of the data (see README) if you have one"
            ) from err
        if isinstance(err, network_errors()):
            raise unreachable_error(spec, f"the Hub could not be reached: {err}") from err
        raise
    dd = normalise_hub(raw, spec)
    check_hub(spec, dd)
    return dd


# --------------------------------------------------------------------------- normalising
def _name_table(target: ClassLabel, aliases: Mapping[str, str]) -> Callable[[str], int]:
    """Map a label name (aliases, case-insensitive) to the target index; -1 for None."""
    exact = {n: i for i, n in enumerate(target.names)}
    folded = {n.lower(): i for i, n in enumerate(target.names)}

    def lookup(name: str | None) -> int:
        if name is None:
            return -1
        name = aliases.get(name, name)
        if name in exact:
            return exact[name]
        if str(name).lower() in folded:
            return folded[str(name).lower()]
        raise DataError(f"unexpected label {name!r} from the Hub; expected one of {target.names}")

    return lookup


def _index_table(names: list[str], lookup: Callable[[str], int]) -> Callable[[int | None], int]:
    """Map source ClassLabel ints to target ints; a source name with no target (e.g. the
    ``_`` UPOS of multiword-token rows) raises only if a value actually uses it."""
    table: list[int | str] = []
    for name in names:
        try:
            table.append(lookup(name))
        except DataError:
            table.append(name)

    def convert(value: int | None) -> int:
        if value is None or value < 0:
            return -1
        mapped = table[value]
        return mapped if isinstance(mapped, int) else lookup(mapped)  # raises DataError

    return convert


def _label_converter(
    col: str, ds: Dataset, target: ClassLabel, aliases: Mapping[str, str]
) -> Converter:
    """Converter of a top-level label column to the target ClassLabel, by name."""
    src = ds.features[col]
    lookup = _name_table(target, aliases)
    if isinstance(src, ClassLabel):
        convert = _index_table(src.names, lookup)
        return lambda b: [convert(v) for v in b[col]]
    if isinstance(src, Value) and src.dtype == "string":
        return lambda b: [lookup(v) for v in b[col]]
    text_col = f"{col}_text"  # SetFit style: int label + label_text; prefer the names
    if text_col in ds.column_names:
        try:
            [lookup(v) for v in ds.unique(text_col)]
        except DataError:
            pass
        else:
            return lambda b: [lookup(v) for v in b[text_col]]

    def by_int(batch: dict[str, list[Any]]) -> list[int]:
        values = [-1 if v is None else int(v) for v in batch[col]]
        if any(v >= target.num_classes for v in values):
            raise DataError(f"label out of range for {target.names} from the Hub")
        return values

    return by_int


def _sequence_converter(
    col: str, ds: Dataset, target: Any, aliases: Mapping[str, str]
) -> Converter:
    """Converter of a list column (UPOS names, string heads, None xpos ...)."""
    inner = target.feature
    src_inner = getattr(ds.features[col], "feature", None)
    if isinstance(inner, ClassLabel):
        lookup = _name_table(inner, aliases)
        if isinstance(src_inner, ClassLabel):
            convert = _index_table(src_inner.names, lookup)
            return lambda b: [[convert(v) for v in row] for row in b[col]]
        return lambda b: [[lookup(v) for v in row] for row in b[col]]
    if isinstance(inner, Value) and inner.dtype.startswith("int"):
        return lambda b: [[int(v) for v in row] for row in b[col]]
    return lambda b: [["_" if v is None else v for v in row] for row in b[col]]


def _normalise_columns(ds: Dataset, spec: DatasetSpec) -> Dataset:
    """Bring one Hub split to the registry schema (names, label mapping, column order)."""
    renames = {k: v for k, v in spec.hub_renames.items() if k in ds.column_names}
    if renames:
        ds = ds.rename_columns(renames)
    missing = [c for c in spec.features if c not in ds.column_names]
    if missing:
        raise DataError(
            f"{spec.hub.describe()} has no column(s) {missing} (columns: {ds.column_names}); "
            f"the Hub dataset changed: set {DATA_ENV_VAR} to use the local copy"
        )
    if all(ds.features[c] == f for c, f in spec.features.items()):
        return ds.select_columns(list(spec.features))
    converters: dict[str, Converter] = {}
    for col, target in spec.features.items():
        if isinstance(target, ClassLabel):
            converters[col] = _label_converter(col, ds, target, spec.label_aliases)
        elif isinstance(target, List):
            converters[col] = _sequence_converter(col, ds, target, spec.label_aliases)
        else:
            converters[col] = lambda b, c=col: b[c]
    return ds.map(
        lambda batch: {col: conv(batch) for col, conv in converters.items()},
        batched=True,
        features=spec.features,
        remove_columns=ds.column_names,
    )


def normalise_hub(raw: DatasetDict, spec: DatasetSpec) -> DatasetDict:
    """Rename/drop Hub splits and normalise their columns to the registry schema."""
    out: dict[str, Dataset] = {}
    for split, ds in raw.items():
        target = spec.hub_split_renames.get(split, SPLIT_ALIASES.get(split, split))
        if target in spec.hub_keep_splits:
            out[target] = _normalise_columns(ds, spec)
    if not out:
        raise DataError(f"{spec.hub.describe()} has none of the splits {spec.hub_keep_splits}")
    return DatasetDict({s: out[s] for s in SPLITS if s in out})
