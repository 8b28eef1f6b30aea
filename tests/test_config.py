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


# --- the scale a notebook takes on Colab (its first cell; tests/test_colab_cell.py runs the cell) ---


def test_colab_scale_is_gpu_only_for_a_notebook_with_a_recorded_gpu_run(monkeypatch):
    monkeypatch.setattr(config, "GPU_RECORD", {"01_pretraining": {"gpu": "NVIDIA H200", "date": "2026-11-27",
                                                                  "minutes": 6.0, "peak_gib": 8.9}})
    scale, why = config.colab_scale("01_pretraining", True, "Tesla T4")
    assert scale == "gpu" and "Tesla T4" in why and "NVIDIA H200 (2026-11-27: 6.0 min, peak 8.9 GiB" in why
    scale, why = config.colab_scale("02_adaptation", True, "Tesla T4")
    assert scale == "classroom" == config.DEFAULT_SCALE and "no recorded run" in why and "Tesla T4" in why
    # no GPU: nothing set (get_scale's default), with how to get one
    assert config.colab_scale("01_pretraining", False)[0] is None
    assert "Runtime > Change runtime type > GPU" in config.colab_scale("02_adaptation", False)[1]
    # the user's TUTORIAL_SCALE wins, with or without a GPU or a record
    for notebook, gpu in (("01_pretraining", True), ("02_adaptation", True), ("02_adaptation", False)):
        assert config.colab_scale(notebook, gpu, "Tesla T4", preset="smoke") == ("smoke", "set by you")
    # a new record moves a notebook to gpu
    monkeypatch.setitem(config.GPU_RECORD, "02_adaptation", {"gpu": "Tesla T4", "date": "2027-01-02",
                                                             "minutes": 9.0, "peak_gib": 4.5})
    assert config.colab_scale("02_adaptation", True, "Tesla T4")[0] == "gpu"
