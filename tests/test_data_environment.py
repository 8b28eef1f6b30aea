"""Tests of tutorial_lib.data.environment: TUTORIAL_DATA_DIR and the offline variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutorial_lib import data


def test_data_dir_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    assert data.data_dir() is None
    monkeypatch.setenv(data.DATA_ENV_VAR, "~/somewhere")
    assert data.data_dir() == Path("~/somewhere").expanduser()
