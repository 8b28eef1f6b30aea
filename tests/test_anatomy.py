"""Tests for tutorial_lib.anatomy: each family's parts are found, named and cut the same way."""

import pytest
import torch
from tiny import tiny_bert_classifier, tiny_classifier, tiny_llama_backbone

from tutorial_lib.anatomy import adapter_sites, anatomy, key_values, layer_groups, truncated

TEXTS = ["the cat sat", "a dog ran far"]


def test_each_family_is_recognised_on_its_own_and_inside_a_model():
    ours, bert = tiny_classifier(n_layer=3), tiny_bert_classifier()
    llama = tiny_llama_backbone(TEXTS, layers=2)
    assert anatomy(ours).family == anatomy(ours.encoder).family == "ours"
    assert anatomy(bert).family == anatomy(bert.encoder).family == "bert"
    assert anatomy(llama.lm).family == anatomy(llama.encoder).family == "llama"  # via base_model
    assert len(anatomy(ours).blocks) == 3 and anatomy(ours).final_norm is ours.encoder.ln_f
    assert anatomy(bert).final_norm is None and anatomy(bert).embedding_output is bert.encoder.embeddings
    assert anatomy(llama.lm).final_norm is llama.encoder.norm
    with pytest.raises(TypeError, match="no known anatomy"):
        anatomy(torch.nn.Linear(3, 3))


def test_layer_groups_are_the_anatomy_top_down():
    ours = tiny_classifier(n_layer=2)
    assert [g.name for g in layer_groups(ours)] == ["head", "ln_f", "block 2", "block 1", "embeddings"]
    assert [g.name for g in layer_groups(ours, merge_final_norm=True)][:2] == ["head", "block 2 + ln_f"]
    with pytest.raises(TypeError, match="does not know the layers"):
        layer_groups(torch.nn.Linear(3, 3))


def test_keys_and_values_are_rows_of_the_right_weights():
    ours = tiny_classifier(n_layer=2)
    d = ours.encoder.config.d_model
    kv = key_values(ours)
    assert len(kv) == 2 and kv[0].key is ours.encoder.blocks[0].attn.qkv
    assert (kv[0].key_rows, kv[0].value_rows) == (slice(d, 2 * d), slice(2 * d, 3 * d))
    bert = tiny_bert_classifier()
    assert key_values(bert)[0].value is bert.encoder.encoder.layer[0].attention.self.value
    with pytest.raises(TypeError, match="not mapped"):
        key_values(tiny_llama_backbone(TEXTS).lm)


def test_a_truncated_encoder_is_a_shorter_copy():
    llama = tiny_llama_backbone(TEXTS, layers=3).encoder
    short = truncated(llama, 1)
    assert len(anatomy(short).blocks) == 1 and short.config.num_hidden_layers == 1
    assert len(anatomy(llama).blocks) == llama.config.num_hidden_layers == 3  # the original intact
    bert = tiny_bert_classifier().encoder
    assert truncated(bert, 1).encoder.layer is not bert.encoder.layer  # a copy
    with pytest.raises(TypeError, match="Hugging Face"):
        truncated(tiny_classifier().encoder, 1)


def test_adapter_sites_are_two_per_block_at_the_sublayer_ends():
    ours = tiny_classifier(n_layer=2)
    sites = adapter_sites(ours)
    assert [(s.owner, s.attribute) for s in sites[:2]] == [(ours.encoder.blocks[0], "adapter_attn"),
                                                          (ours.encoder.blocks[0], "adapter_ff")]
    assert len(sites) == 4 and {s.width for s in sites} == {ours.encoder.config.d_model}
    bert = tiny_bert_classifier()
    layer = bert.encoder.encoder.layer[0]
    assert [s.owner for s in adapter_sites(bert)[:2]] == [layer.attention.output, layer.output]
    with pytest.raises(TypeError, match="not mapped"):
        adapter_sites(tiny_llama_backbone(TEXTS).lm)
