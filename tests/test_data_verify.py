"""Tests of tutorial_lib.data.verify: sha256 checks and missing files or folders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from data_helpers import DATA_DIR, load_local, needs_data
from datasets import DatasetDict

from tutorial_lib import data
from tutorial_lib.data import verify


@pytest.fixture
def local() -> Callable[..., DatasetDict]:
    """``local(name, **kw)`` loads from the real local copy."""
    return load_local


def _mirror(tmp_path: Path, skip: str | None = None) -> Path:
    """A copy of the data dir made of symlinks (``skip`` left out)."""
    root = tmp_path / "data"
    for rel in data.EXPECTED_SHA256:
        if rel == skip or not (DATA_DIR / rel).exists():
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(DATA_DIR / rel)
    return root


@needs_data
def test_sha_mismatch_raises_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = "trec/TREC_10.label"
    root = _mirror(tmp_path, skip=rel)
    corrupt = root / rel
    corrupt.write_bytes((DATA_DIR / rel).read_bytes() + b"x")
    monkeypatch.setenv(data.DATA_ENV_VAR, str(root))
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    msg = str(info.value)
    assert str(corrupt) in msg
    assert data.EXPECTED_SHA256[rel] in msg
    assert verify.file_sha256(corrupt) in msg
    assert "MANIFEST.md" in msg and data.DATA_ENV_VAR in msg
    # the other datasets of the mirror still load and verify
    assert len(data.load("wnli")["train"]) == 635


@needs_data
def test_patched_hash_is_checked_even_after_memoisation(
    local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local("sst5")
    monkeypatch.setitem(data.EXPECTED_SHA256, "senteval/SST-5/sentiment-dev", "0" * 64)
    with pytest.raises(data.DataError, match="sha256 mismatch .*sentiment-dev"):
        local("sst5")


@needs_data
def test_missing_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = "glue/RTE/dev.tsv"
    root = _mirror(tmp_path, skip=rel)
    monkeypatch.setenv(data.DATA_ENV_VAR, str(root))
    with pytest.raises(data.DataError) as info:
        data.load("rte")
    assert str(root / rel) in str(info.value)
    assert data.DATA_ENV_VAR in str(info.value)


def test_missing_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(data.DataError, match=data.DATA_ENV_VAR):
        data.load("trec")


def test_verify_file_cache_notices_changes(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"hello\n")
    good = verify.file_sha256(path)
    assert data.verify_file(path, good) == path
    assert data.verify_file(path, good) == path  # cached
    path.write_bytes(b"hello, changed\n")
    with pytest.raises(data.DataError, match="expected " + good):
        data.verify_file(path, good)
    with pytest.raises(data.DataError, match="missing file"):
        data.verify_file(tmp_path / "absent.txt", good)


def test_data_dir_that_does_not_exist_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user set TUTORIAL_DATA_DIR to a folder that is not there: say so, and what to do."""
    missing = tmp_path / "no-such-copy"
    monkeypatch.setenv(data.DATA_ENV_VAR, str(missing))
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    msg = str(info.value)
    assert f"{data.DATA_ENV_VAR} is set to {missing}, which is not a directory" in msg
    assert "MANIFEST.md" in msg
    assert f"unset {data.DATA_ENV_VAR} to load trec from the Hub" in msg and "CogComp/trec" in msg


def test_data_dir_without_the_dataset_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TUTORIAL_DATA_DIR is a folder, but the dataset's folder is not in it."""
    (tmp_path / "trec").mkdir()  # another dataset is there, rte is not
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path))
    with pytest.raises(data.DataError) as info:
        data.load("rte")
    msg = str(info.value)
    assert f"{data.DATA_ENV_VAR}={tmp_path} lacks rte" in msg
    assert "no folder glue/RTE/" in msg and "MANIFEST.md" in msg
    assert f"unset {data.DATA_ENV_VAR} to load rte from the Hub" in msg and "nyu-mll/glue" in msg
