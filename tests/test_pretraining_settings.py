"""Tests for tutorial_lib.pretraining_settings: notebook 01's settings (our model's size and the
pretraining recipe) and the fingerprint that names their cache entries."""

import pytest

from tutorial_lib import config, settings
from tutorial_lib.models import TransformerLM, count_parameters
from tutorial_lib.pretraining_settings import PretrainingSettings

SCALES = ["smoke", "classroom", "gpu", "paper"]


def test_paper_scale_is_the_2019_model_with_50M_parameters():
    s = PretrainingSettings.at("paper")
    m = s.model
    assert (m.d_model, m.d_ff, m.n_layer, m.n_head, m.max_len) == (410, 2100, 16, 10, 256)
    assert s.corpus == "wikitext-103"
    # 16 x 2,400,190 per block + embeddings (+ final LayerNorm): the README's "50M"
    assert count_parameters(TransformerLM(m)) == pytest.approx(50.4e6, rel=0.01)


def test_scales_grow_and_fingerprints_differ():
    sizes = [PretrainingSettings.at(n).model.d_model * PretrainingSettings.at(n).model.n_layer
             for n in SCALES]
    assert sizes == sorted(sizes)
    assert len({PretrainingSettings.at(n).fingerprint("causal") for n in SCALES}) == 4
    s = PretrainingSettings.at("smoke")
    assert s.fingerprint("causal") != s.fingerprint("mlm")


def test_mlm_steps_change_only_the_mlm_fingerprint():
    s = PretrainingSettings.at("smoke")
    more = s.replace(mlm_steps=99)
    assert more.fingerprint("causal") == s.fingerprint("causal")
    assert more.fingerprint("mlm") != s.fingerprint("mlm")
    assert more.steps_for("mlm") == 99 and more.steps_for("causal") == s.steps


def test_a_changed_recipe_or_size_changes_the_fingerprint_and_evaluation_does_not():
    s = PretrainingSettings.at("smoke")
    assert s.replace(steps=80).fingerprint("causal") != s.fingerprint("causal")
    assert s.replace(model=s.model.__class__(**{**vars(s.model), "n_layer": 3})
                     ).fingerprint("causal") != s.fingerprint("causal")
    assert s.replace(compare_lines=99).fingerprint("causal") == s.fingerprint("causal")


# the fingerprints the caches were built under before 01 had its own settings class (they lived in
# config.Scale): equal, so no cached tokenizer, corpus or checkpoint was orphaned by the move.
# Changed on purpose since: the classroom masked LM's (mlm_steps 800 -> 400, 2026-11-28; it was
# "d5e9784f34"), which retrains only the masked LM
FINGERPRINTS = {
    "smoke": {"tok": "dc6ad137fd", "causal": "1252b05a9d", "mlm": "da37472ced"},
    "classroom": {"tok": "a4eb3667e0", "causal": "aef2d6ed5f", "mlm": "b68a6b6f15"},
    "gpu": {"tok": "f82538afa1", "causal": "0254af80f8", "mlm": "cb79d7a1ed"},
    "paper": {"tok": "627e7e2aeb", "causal": "d7e9c50a84", "mlm": "0fa85a37a3"},
}


@pytest.mark.parametrize("scale", SCALES)
def test_fingerprints_name_the_same_cache_entries_as_before(scale):
    s = PretrainingSettings.at(scale)
    assert {part: s.fingerprint(part) for part in FINGERPRINTS[scale]} == FINGERPRINTS[scale]


def test_notebook_01_settings_are_registered_and_a_misspelt_change_is_an_error():
    assert PretrainingSettings in settings.registered()
    assert PretrainingSettings.notebook == "01_pretraining"
    with pytest.raises(config.ConfigError, match="no setting"):
        PretrainingSettings.at("smoke").replace(stepz=800)
