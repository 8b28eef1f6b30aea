"""Checking the local copy before it is read: folders present, every file's sha256 as recorded.

Hashes are cached per ``(path, size, mtime)``, so re-verifying an unchanged file is free. The
errors name ``TUTORIAL_DATA_DIR`` (the user's setting) and say how to fix it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..hashing import file_sha256
from .environment import DATA_ENV_VAR
from .errors import DataError
from .registry import EXPECTED_SHA256, DatasetSpec

_VERIFIED: dict[tuple[str, int, int], str] = {}


def clear_verified() -> None:
    """Forget every cached file hash."""
    _VERIFIED.clear()


def cached_sha256(path: Path, stat: os.stat_result | None = None) -> str:
    """:func:`file_sha256`, computed once per (path, size, mtime) in this process."""
    path = Path(path)
    stat = stat or path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        _VERIFIED[key] = file_sha256(path)
    return _VERIFIED[key]


def verify_file(path: Path, sha256: str) -> Path:
    """Check ``path`` against its expected sha256 and return it.

    Results are cached per (path, size, mtime), so re-verifying an unchanged file is free.
    Raises :class:`DataError` when the file is missing or its hash differs.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise DataError(
            f"missing file {path}: it should be part of the local copy named by "
            f"{DATA_ENV_VAR} (see MANIFEST.md there). Re-copy it, point {DATA_ENV_VAR} at a "
            f"complete copy, or unset {DATA_ENV_VAR} to use the Hub"
        ) from err
    actual = cached_sha256(path, stat)
    if actual != sha256.lower():
        raise DataError(
            f"sha256 mismatch for {path}: expected {sha256}, got {actual}. The file is "
            "corrupt or a different version: re-copy it from the dataset's source listed in "
            f"MANIFEST.md, or unset {DATA_ENV_VAR} to use the Hub"
        )
    return path


def _check_folders(spec: DatasetSpec, root: Path) -> None:
    """DataError naming ``TUTORIAL_DATA_DIR`` when it, or the dataset's folder in it, is absent."""
    use_hub = f"or unset {DATA_ENV_VAR} to load {spec.name} from the Hub instead ({spec.hub.path})"
    if not root.is_dir():
        raise DataError(
            f"{DATA_ENV_VAR} is set to {root}, which is not a directory. Point {DATA_ENV_VAR} "
            f"at the local copy of the data (the folder holding MANIFEST.md), {use_hub}"
        )
    if spec.local_dir and not (root / spec.local_dir).is_dir():
        raise DataError(
            f"the local copy named by {DATA_ENV_VAR}={root} lacks {spec.name}: it has no "
            f"folder {spec.local_dir}/. Copy that folder into it (MANIFEST.md lists its files), "
            f"point {DATA_ENV_VAR} at a complete copy, {use_hub}"
        )


def verify_local(spec: DatasetSpec, root: Path) -> None:
    """Verify every local file of ``spec`` under ``root`` (DataError on the first problem)."""
    _check_folders(spec, root)
    for rel in spec.local_files:
        verify_file(root / rel, EXPECTED_SHA256[rel])
