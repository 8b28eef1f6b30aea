"""Checking the local copy before it is read: folders present, every file's sha256 as recorded.

Hashes are cached per ``(path, size, mtime)``, so re-verifying an unchanged file is free. The
errors say which of the user's settings is wrong and how to fix it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .environment import DATA_ENV_VAR
from .errors import DataError
from .registry import EXPECTED_SHA256, DatasetSpec

_VERIFIED: dict[tuple[str, int, int], str] = {}


def clear_verified() -> None:
    """Forget every cached file hash."""
    _VERIFIED.clear()


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    actual = _VERIFIED.get(key)
    if actual is None:
        actual = file_sha256(path)
        _VERIFIED[key] = actual
    if actual != sha256.lower():
        raise DataError(
            f"sha256 mismatch for {path}: expected {sha256}, got {actual}. The file is "
            "corrupt or a different version: re-copy it from the dataset's source listed in "
            f"MANIFEST.md, or unset {DATA_ENV_VAR} to use the Hub"
        )
    return path


def verify_local(spec: DatasetSpec, root: Path) -> None:
    """Verify every local file of ``spec`` under ``root`` (DataError on the first problem)."""
    if not root.is_dir():
        raise DataError(
            f"{DATA_ENV_VAR}={root} is not a directory: point it at the local copy of the "
            f"data (the folder holding MANIFEST.md), or unset {DATA_ENV_VAR} to use the Hub"
        )
    for rel in spec.local_files:
        verify_file(root / rel, EXPECTED_SHA256[rel])
