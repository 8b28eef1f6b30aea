"""Tests for tutorial_lib.config: the one scale knob, every notebook's settings, the env vars."""

import dataclasses
import re
from pathlib import Path

import pytest

from tutorial_lib import config
from tutorial_lib.models import TransformerConfig, TransformerLM, count_parameters

REPO = Path(__file__).resolve().parents[1]

# the settings class each notebook must use (a notebook reading another's class is a bug)
SETTINGS_TYPES = {
    "02_adaptation": config.AdaptationSettings,
    "03_adapters_and_freezing": config.AdapterSettings,
    "04_gradual_unfreezing": config.UnfreezingSettings,
    "05_discriminative_lr": config.DiscriminativeSettings,
    "06_multitask": config.MultitaskSettings,
    "07_gradts": config.GradTSSettings,
    "08_tdt": config.TDTSettings,
    "09_dart": config.DARTSettings,
    "10_probing": config.ProbingSettings,
    "11_amnesic_probing": config.AmnesicSettings,
}


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


def test_paper_scale_is_the_2019_model_with_50M_parameters():
    m = config.get_scale("paper").model
    assert (m.d_model, m.d_ff, m.n_layer, m.n_head, m.max_len) == (410, 2100, 16, 10, 256)
    assert config.get_scale("paper").pretrain.corpus == "wikitext-103"
    model = TransformerLM(TransformerConfig(vocab_size=m.vocab_size, d_model=m.d_model,
                                            n_layer=m.n_layer, n_head=m.n_head, d_ff=m.d_ff,
                                            max_len=m.max_len))
    # 16 x 2,400,190 per block + embeddings (+ final LayerNorm): the README's "50M"
    assert count_parameters(model) == pytest.approx(50.4e6, rel=0.01)


def test_scales_grow_and_fingerprints_differ():
    names = ["smoke", "classroom", "gpu", "paper"]
    sizes = [config.get_scale(n).model.d_model * config.get_scale(n).model.n_layer for n in names]
    assert sizes == sorted(sizes)
    prints = {config.get_scale(n).fingerprint("causal") for n in names}
    assert len(prints) == 4
    s = config.get_scale("smoke")
    assert s.fingerprint("causal") != s.fingerprint("mlm")


def test_mlm_steps_change_only_the_mlm_fingerprint():
    s = config.get_scale("smoke")
    more = dataclasses.replace(s, pretrain=dataclasses.replace(s.pretrain, mlm_steps=99))
    assert more.fingerprint("causal") == s.fingerprint("causal")
    assert more.fingerprint("mlm") != s.fingerprint("mlm")
    assert more.pretrain.steps_for("mlm") == 99 and more.pretrain.steps_for("causal") == s.pretrain.steps


def test_fine_tuning_settings_are_not_in_the_scale():
    """Fine-tuning settings live in each notebook's settings object, not in the scale."""
    fields = {f.name for f in dataclasses.fields(config.Scale)}
    assert {"name", "model", "pretrain"} <= fields
    assert not fields & {"finetune", "budget", "seeds", "epochs", "lr"}


def test_cache_dir_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    assert config.cache_dir("smoke", "x") == tmp_path / "smoke" / "x"
    assert (tmp_path / "smoke" / "x").is_dir()


# --- every notebook's settings -------------------------------------------------------------------


def test_every_notebook_has_settings_of_its_own_type_at_every_scale():
    assert set(config.SETTINGS) == set(SETTINGS_TYPES)
    for notebook, by_scale in config.SETTINGS.items():
        assert set(by_scale) == set(config.SCALES), notebook
        for name, settings in by_scale.items():
            assert type(settings) is SETTINGS_TYPES[notebook], (notebook, name)
            assert config.settings(config.get_scale(name), notebook) is settings
            assert config.settings(config.get_scale(name), notebook[:2]) is settings
            budget = getattr(settings, "budget", None)
            assert budget is None or isinstance(budget, config.Budget)
            assert budget is None or budget.epochs >= 1, (notebook, name)
            seeds = getattr(settings, "seeds", None)
            assert seeds is None or (len(seeds) >= 1 and len(set(seeds)) == len(seeds))


def test_notebooks_found_by_their_number_and_an_unknown_one_is_an_error():
    smoke = config.get_scale("smoke")
    assert isinstance(config.settings(smoke, "03"), config.AdapterSettings)
    with pytest.raises(config.ConfigError, match="known notebooks"):
        config.settings(smoke, "99")


def test_replace_with_a_misspelt_name_names_the_valid_settings():
    s = config.settings(config.get_scale("smoke"), "03")
    with pytest.raises(config.ConfigError) as err:
        s.replace(bottelnecks=(4,))
    message = str(err.value)
    assert "bottelnecks" in message
    for valid in ("bottlenecks", "probe_epochs", "epochs", "lr"):  # its own and the budget's
        assert valid in message
    with pytest.raises(config.ConfigError, match="epochs"):
        config.Budget().replace(epoch=3)
    with pytest.raises(config.ConfigError, match="its settings"):  # no budget to reach into
        config.settings(config.get_scale("smoke"), "10").replace(epochs=3)


def test_replace_reaches_into_the_budget_and_leaves_the_original_alone():
    s = config.settings(config.get_scale("smoke"), "03")
    changed = s.replace(epochs=7, lr=3e-4, bottlenecks=(4,))
    assert isinstance(changed, config.AdapterSettings)
    assert (changed.budget.epochs, changed.budget.lr, changed.bottlenecks) == (7, 3e-4, (4,))
    assert changed.budget.batch_size == s.budget.batch_size  # the rest of the budget kept
    assert s.budget.epochs == 1 and s.bottlenecks == (8,)  # frozen: the original is unchanged
    whole = s.replace(budget=config.Budget(epochs=5))
    assert whole.budget == config.Budget(epochs=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.budget.epochs = 2


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
