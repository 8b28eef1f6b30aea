"""Tests for tutorial_lib.hashing: the one file sha256 of the data registry and the cache."""

import hashlib

from tutorial_lib import hashing, integrity
from tutorial_lib.data import verify


def test_file_sha256_is_hashlibs_over_chunks(tmp_path):
    path = tmp_path / "blob.bin"
    data = bytes(range(256)) * 9000  # > 1 MiB: more than one chunk
    path.write_bytes(data)
    assert hashing.file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert verify.file_sha256 is hashing.file_sha256  # one helper, not two
    assert integrity.describe(path) == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
