"""Reading an offline bundle back (:mod:`tutorial_lib.ops.bundle` writes it): every part checked
against ``manifest.json`` (:func:`verify_parts`), then the parts unpacked as one tar stream and every
file checked against its recorded sha256 (:func:`unpack`).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path

from ..data.verify import file_sha256
from .bundle import MANIFEST, BundleError


def _rebuild_hint(manifest: dict) -> str:
    return (f"copy it again from the machine that built the bundle, or rebuild the bundle there: "
            f"python -m tutorial_lib.ops.prefetch --scale {manifest.get('scale', 'gpu')} --bundle DIR")


def verify_parts(bundle: Path) -> dict:
    """The manifest, after checking every part's size and sha256 (BundleError naming the first
    bad or missing part and what to do)."""
    bundle = Path(bundle)
    if not (bundle / MANIFEST).is_file():
        raise BundleError(f"{bundle} has no {MANIFEST}: give the directory the bundle was written to")
    manifest = json.loads((bundle / MANIFEST).read_text())
    for part in manifest["parts"]:
        path = bundle / part["name"]
        if not path.is_file():
            raise BundleError(f"bundle part {part['name']} is missing from {bundle}: "
                              + _rebuild_hint(manifest))
        if path.stat().st_size != part["size"] or file_sha256(path) != part["sha256"]:
            raise BundleError(f"bundle part {part['name']} is corrupt (its size or sha256 differs "
                              f"from {MANIFEST}): " + _rebuild_hint(manifest))
    return manifest


_SAFE = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


class _Joined(io.RawIOBase):
    """The parts read back as one stream."""

    def __init__(self, paths: Sequence[Path]):
        self._paths, self._file = list(paths), None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while True:
            if self._file is None:
                if not self._paths:
                    return 0
                self._file = open(self._paths.pop(0), "rb")  # noqa: SIM115
            n = self._file.readinto(buffer)
            if n:
                return n
            self._file.close()
            self._file = None


def unpack(bundle: Path, dest: Path) -> dict:
    """Verify the parts, extract them into ``dest`` and check every file's sha256; the manifest."""
    manifest, dest = verify_parts(bundle), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    stream = io.BufferedReader(_Joined([Path(bundle) / p["name"] for p in manifest["parts"]]))
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            target = (dest / member.name).resolve()
            if not member.isfile() or not target.is_relative_to(dest.resolve()):
                raise BundleError(f"unexpected entry {member.name!r} in the bundle: rebuild it")
            tar.extract(member, dest, **_SAFE)
    for f in manifest["files"]:
        if file_sha256(dest / f["path"]) != f["sha256"]:
            raise BundleError(f"{f['path']} unpacked from the bundle differs from {MANIFEST}: "
                              + _rebuild_hint(manifest))
    return manifest
