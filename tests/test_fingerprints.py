"""Tests of tutorial_lib.ops.fingerprints: comparing the local copy with the committed content
fingerprints, and writing them (on a one-dataset registry, so that it stays fast)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from data_helpers import DATA_DIR, needs_data

from tutorial_lib import data
from tutorial_lib.data import fingerprints
from tutorial_lib.data.fingerprints import SplitPrint
from tutorial_lib.data.registry import REGISTRY
from tutorial_lib.ops import fingerprints as command

P = SplitPrint(2, {"label": ["a"]}, "0" * 64)


def test_stale_names_changed_new_and_gone_splits() -> None:
    committed = {"a": {"train": P, "test": P}, "b": {"train": P}}
    now = {"a": {"train": P, "test": dataclasses.replace(P, rows=3)}, "c": {"train": P}}
    assert command.stale(now, committed) == ["a/test", "b/train", "c/train"]
    assert command.stale(committed, committed) == []


def test_table_lists_dataset_split_rows_and_hash() -> None:
    lines = command.table({"wnli": {"train": P}}).splitlines()
    assert lines[0].split() == ["dataset", "split", "rows", "sha256"]
    assert lines[1].split() == ["wnli", "train", "2", "0" * 12]


def test_no_local_copy_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    with pytest.raises(SystemExit) as info:
        command.main([])
    assert info.value.code == 2
    assert f"set {data.DATA_ENV_VAR} to the local copy" in capsys.readouterr().err


@pytest.fixture
def only_wnli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The local copy set, the registry cut to WNLI, the file to write in ``tmp_path``."""
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    monkeypatch.setattr(command, "REGISTRY", {"wnli": REGISTRY["wnli"]})
    out = tmp_path / "fingerprints.json"
    monkeypatch.setattr(command, "FINGERPRINTS_FILE", out)
    monkeypatch.setattr(fingerprints, "FINGERPRINTS_FILE", out)
    fingerprints.recorded.cache_clear()
    yield out
    fingerprints.recorded.cache_clear()


@needs_data
def test_write_then_compare(only_wnli: Path, capsys) -> None:
    assert command.main(["--write"]) == 0
    out = capsys.readouterr().out
    assert "wnli         validation       71" in out and "computed in" in out
    assert list(fingerprints.recorded()) == ["wnli"]
    assert fingerprints.to_json(fingerprints.recorded()) == only_wnli.read_text(encoding="utf-8")
    assert command.main([]) == 0
    assert "matches fingerprints.json" in capsys.readouterr().out


@needs_data
def test_compare_fails_naming_the_stale_split(only_wnli: Path, capsys) -> None:
    assert command.main(["--write"]) == 0
    real = fingerprints.recorded()["wnli"]
    stale = {"wnli": {**real, "validation": dataclasses.replace(real["validation"], rows=70)}}
    only_wnli.write_text(fingerprints.to_json(stale), encoding="utf-8")
    fingerprints.recorded.cache_clear()
    capsys.readouterr()
    assert command.main([]) == 1
    err = capsys.readouterr().err
    assert "differs from fingerprints.json: wnli/validation." in err
    assert "python -m tutorial_lib.ops.fingerprints --write" in err


def test_an_unreadable_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(fingerprints, "FINGERPRINTS_FILE", tmp_path / "absent.json")
    fingerprints.recorded.cache_clear()
    try:
        with pytest.raises(data.DataError, match="cannot read absent.json .*reinstall tutorial_lib"):
            fingerprints.recorded()
    finally:
        fingerprints.recorded.cache_clear()
