"""Cache integrity: every file the library writes into the cache carries a record of its size and
sha256, written together with it; readers check the record before they trust the file.

A file whose record is missing or disagrees with it (a copy cut short, a disk that filled up,
a crash on a filesystem without atomic rename, bit rot) is reported in one warning line,
deleted and rebuilt by its caller — never loaded silently. Writes go to a temporary file in the
same directory and are renamed into place, so a reader sees the old file or the new one, never
half of one; if the disk is full the old file stays and the error says what to do.

* :func:`save_torch` / :func:`write_with_record` — write a file and its record;
* :func:`check` — True for a file that matches its record, else warn, delete, return False;
* :func:`write_directory_record` / :func:`check_directory` — the same for a whole directory
  (the tokenizer's files);
* :func:`cache_lock` — one process at a time builds or reads an entry (processes share a cache).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from .hashing import file_sha256
from .runtime import CacheWriteError, atomic_write, disk_full_message, is_disk_full  # noqa: F401

RECORD_SUFFIX = ".integrity.json"
DIRECTORY_RECORD = "INTEGRITY.json"
logger = logging.getLogger("tutorial_lib")


def record_path(path: Path) -> Path:
    """Where the record of ``path`` lives: ``<name>.integrity.json`` next to it."""
    path = Path(path)
    return path.with_name(path.name + RECORD_SUFFIX)


def describe(path: Path) -> dict:
    """``{"size": bytes, "sha256": hex}`` of a file."""
    return {"size": Path(path).stat().st_size, "sha256": file_sha256(path)}


def _write_json_atomically(path: Path, blob: dict) -> None:
    atomic_write(path, json.dumps(blob, indent=1, sort_keys=True))


def write_with_record(path: Path, write: Callable[[Path], None]) -> Path:
    """:func:`tutorial_lib.runtime.atomic_write` of ``write(tmp)``, with the size and sha256 of
    the new file recorded before it is renamed into place. The record goes first: a crash in
    between leaves a record that does not match the old file (rebuilt on the next read), never a
    new file without a record."""
    return atomic_write(path, write, lambda tmp: _write_json_atomically(record_path(path), describe(tmp)))


def save_torch(obj: object, path: Path) -> Path:
    """``torch.save(obj, path)`` atomically, with an integrity record.

    Saved through a file handle: given a path, ``torch.save`` names the zip archive's records
    after the file — here the random temporary name — so equal objects would give other bytes.
    """

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)

    return write_with_record(path, write)


def problem(path: Path, *, require_record: bool = True) -> str | None:
    """Why ``path`` cannot be trusted (missing, no record, wrong size, wrong sha256), or None."""
    path, record = Path(path), record_path(path)
    if not path.exists():
        return "missing"
    if not record.exists():
        return "no integrity record (written by an older version or cut short)" if require_record else None
    try:
        expected = json.loads(record.read_text())
        size, digest = int(expected["size"]), str(expected["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unreadable integrity record"
    actual = path.stat().st_size
    if actual != size:
        return f"{actual:,} bytes, {size:,} were written"
    if file_sha256(path) != digest:
        return "sha256 differs from the one recorded at write time"
    return None


def discard(path: Path) -> None:
    """Delete a file (or directory) and its record."""
    path = Path(path)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    record_path(path).unlink(missing_ok=True)


def warn_rebuild(what: str, path: Path, reason: str) -> None:
    """The one warning line of a damaged cache entry."""
    logger.warning(f"cache: {what} {path} is damaged ({reason}); deleting it and rebuilding it.")


def check(path: Path, what: str) -> bool:
    """True if ``path`` exists and matches its record. A damaged file (or one without a record)
    is reported in one warning line and deleted, and False is returned: the caller rebuilds it.
    A file that simply does not exist gives False without a warning."""
    return _trust(path, what, problem(path))


def _trust(path: Path, what: str, reason: str | None) -> bool:
    """The verdict of :func:`check` and :func:`check_directory` on ``reason`` (None: intact)."""
    if reason is None:
        return True
    if reason != "missing":
        warn_rebuild(what, path, reason)
        discard(path)
    return False


# --- whole directories (the tokenizer) ------------------------------------------------------------


def write_directory_record(directory: Path) -> None:
    """Record the size and sha256 of every file in ``directory`` in ``INTEGRITY.json`` inside it."""
    directory = Path(directory)
    files = {p.name: describe(p) for p in sorted(directory.iterdir())
             if p.is_file() and p.name != DIRECTORY_RECORD}
    _write_json_atomically(directory / DIRECTORY_RECORD, files)


def directory_problem(directory: Path) -> str | None:
    """Why the files of ``directory`` cannot be trusted, or None."""
    directory = Path(directory)
    if not directory.is_dir():
        return "missing"
    record = directory / DIRECTORY_RECORD
    if not record.exists():
        return "no integrity record (written by an older version or cut short)"
    try:
        expected = json.loads(record.read_text())
    except (OSError, ValueError):
        return "unreadable integrity record"
    for name, blob in expected.items():
        path = directory / name
        if not path.exists():
            return f"{name} is missing"
        try:
            size, digest = int(blob["size"]), str(blob["sha256"])
        except (KeyError, TypeError, ValueError):
            return "unreadable integrity record"
        if path.stat().st_size != size:
            return f"{name}: {path.stat().st_size:,} bytes, {size:,} were written"
        if file_sha256(path) != digest:
            return f"{name}: sha256 differs from the one recorded at write time"
    return None


def check_directory(directory: Path, what: str) -> bool:
    """:func:`check` for a directory written with :func:`write_directory_record`."""
    return _trust(directory, what, directory_problem(directory))


_held_locks: dict[str, tuple[int, int]] = {}  # lock file -> (descriptor, depth) in this process


@contextlib.contextmanager
def cache_lock(path: str | Path):
    """Hold an exclusive lock on the cache entry ``path`` (a hidden ``.<name>.lock`` beside it) while
    it is built or read, so that two processes sharing a cache (pytest-xdist workers, two notebooks
    open at once) never read an entry another is rebuilding, nor build one twice. Re-entrant within
    a process; where ``fcntl`` does not exist (Windows) it only keeps the in-process count."""
    lock = Path(path).with_name(f".{Path(path).name}.lock")  # hidden: globs of entries miss it
    key = str(lock)
    if key in _held_locks:
        fd, depth = _held_locks[key]
        _held_locks[key] = (fd, depth + 1)
    else:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl
        except ImportError:  # Windows: no inter-process lock
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        _held_locks[key] = (fd, 1)
    try:
        yield
    finally:
        fd, depth = _held_locks[key]
        if depth > 1:
            _held_locks[key] = (fd, depth - 1)
        else:
            del _held_locks[key]
            os.close(fd)  # closing the descriptor releases the lock
