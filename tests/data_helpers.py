"""Helpers shared by the tests of tutorial_lib.data: the real local copy and a fake Hub."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from datasets import Dataset, DatasetDict, Features

from tutorial_lib import data
from tutorial_lib.data import fingerprints

DATA_DIR = Path(
    os.environ.get(data.DATA_ENV_VAR) or Path(__file__).resolve().parents[2] / "shared" / "data"
).expanduser()
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"no local data copy at {DATA_DIR} (set {data.DATA_ENV_VAR})"
)


def load_local(name: str, **kwargs: Any) -> DatasetDict:
    """``data.load(name, source="local", ...)`` from the real local copy (memoised by data)."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"no local data copy at {DATA_DIR}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
        return data.load(name, source="local", **kwargs)


def go_online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Body of an ``online`` fixture: no local copy, not offline, empty memo (Hub path), and no
    recorded fingerprints: the fake Hubs serve a few rows, not whole splits (the content check
    has its own tests, in test_data_fingerprints.py)."""
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    monkeypatch.setattr(fingerprints, "recorded", dict)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    data.clear_cache()
    yield
    data.clear_cache()


def sizes(dd: DatasetDict) -> dict[str, int]:
    """Rows per split."""
    return {split: len(ds) for split, ds in dd.items()}


class FakeHub:
    """Stands in for ``datasets.load_dataset``: records calls, returns tiny DatasetDicts."""

    def __init__(self, result: DatasetDict | BaseException | None = None) -> None:
        self.result = result
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, path: str, name: str | None = None, **kwargs: Any) -> DatasetDict:
        self.calls.append((path, name, kwargs))
        if self.result is None:
            raise AssertionError("load_dataset must not be called")
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeHub) -> FakeHub:
    """Put ``fake`` in place of ``datasets.load_dataset`` (as the hub module calls it)."""
    monkeypatch.setattr(data.hub.datasets, "load_dataset", fake)
    return fake


def ds(rows: dict[str, list[Any]], features: dict[str, Any]) -> Dataset:
    """A small in-memory Dataset with the given features."""
    return Dataset.from_dict(rows, features=Features(features))
