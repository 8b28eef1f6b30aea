"""Tests for tutorial_lib.config: the one scale knob."""

import pytest

from tutorial_lib import config
from tutorial_lib.models import TransformerConfig, TransformerLM, count_parameters


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


def test_cache_dir_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    assert config.cache_dir("smoke", "x") == tmp_path / "smoke" / "x"
    assert (tmp_path / "smoke" / "x").is_dir()
