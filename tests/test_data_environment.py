"""Tests of tutorial_lib.data.environment: TUTORIAL_DATA_DIR and the offline variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutorial_lib import data
from tutorial_lib.data import environment


def test_data_dir_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    assert data.data_dir() is None
    monkeypatch.setenv(data.DATA_ENV_VAR, "~/somewhere")
    assert data.data_dir() == Path("~/somewhere").expanduser()


def test_offline_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    assert environment.offline_flag() is None
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert environment.offline_flag() is None
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "ON")
    assert environment.offline_flag() == "HF_DATASETS_OFFLINE=ON"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert environment.offline_flag() == "HF_HUB_OFFLINE=1"
