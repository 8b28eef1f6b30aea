"""Tests for tutorial_lib.config: the one scale knob, the cache directory, the env vars
(every notebook's settings: tests/test_settings.py)."""

import dataclasses
import re
from pathlib import Path

import pytest

from tutorial_lib import config

REPO = Path(__file__).resolve().parents[1]


def test_unknown_scale_is_a_clear_error_listing_valid_names(monkeypatch):
    monkeypatch.setenv(config.SCALE_ENV_VAR, "huge")
    with pytest.raises(config.ConfigError) as err:
        config.get_scale()
    for name in ("smoke", "classroom", "gpu", "paper", config.SCALE_ENV_VAR):
        assert name in str(err.value)


def test_scale_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(config.SCALE_ENV_VAR, "smoke")
    assert config.get_scale().name == "smoke"
    monkeypatch.delenv(config.SCALE_ENV_VAR)
    assert config.get_scale().name == config.DEFAULT_SCALE == "classroom"
    assert config.get_scale(" GPU ").name == "gpu"


def test_fine_tuning_settings_are_not_in_the_scale():
    """Every size lives in a notebook's settings object (01's: PretrainingSettings), not in the
    scale."""
    fields = {f.name for f in dataclasses.fields(config.Scale)}
    assert "name" in fields
    assert not fields & {"finetune", "budget", "seeds", "epochs", "lr", "model", "pretrain"}


def test_cache_dir_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    assert config.cache_dir("smoke", "x") == tmp_path / "smoke" / "x"
    assert (tmp_path / "smoke" / "x").is_dir()


# --- environment variables -----------------------------------------------------------------------


def _readme_configuration_rows() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\|\s*`([A-Z_]+)`\s*\|", section, flags=re.M)


def test_readme_configuration_table_lists_every_environment_variable():
    rows = _readme_configuration_rows()
    assert rows, "no configuration table found in README.md"
    assert sorted(set(config.ENV_VARS) - set(rows)) == [], "missing from README's table"
    assert sorted(set(rows) - set(config.ENV_VARS)) == [], "in README's table but not ENV_VARS"


def test_every_tutorial_variable_the_package_names_is_in_env_vars():
    """ENV_VARS is the one list: no module reads a TUTORIAL_* variable it does not hold."""
    named = set()
    for path in (REPO / "tutorial_lib").rglob("*.py"):
        named |= set(re.findall(r"\bTUTORIAL_[A-Z_]+\b", path.read_text()))
    assert named <= set(config.ENV_VARS), sorted(named - set(config.ENV_VARS))
    constants = {getattr(config, n) for n in dir(config) if n.endswith("_ENV_VAR")}
    assert constants == set(config.ENV_VARS)
