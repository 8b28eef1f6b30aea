"""The one file hash of the package: the data registry's checks (:mod:`tutorial_lib.data.verify`)
and the cache's integrity records (:mod:`tutorial_lib.integrity`) both use :func:`file_sha256`.
It sits on the bottom floor (it imports nothing of ours) so that both may import it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (a multi-GB file never sits in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
