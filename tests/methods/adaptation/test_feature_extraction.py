"""Tests for tutorial_lib.methods.adaptation.feature_extraction: the scalar mix, cached features, probes."""

import pytest
import torch
from tiny import tiny_bert_classifier, tiny_classifier
from torch.utils.data import DataLoader

from tutorial_lib import config, tasks
from tutorial_lib.backbones import Backbone
from tutorial_lib.finetuning import Run, run
from tutorial_lib.methods.adaptation.feature_extraction import (
    CachedFeatures,
    ScalarMix,
    extract_features,
    feature_extraction_runs,
    feature_layer_names,
    mix_weights,
    pooled_states,
    probe_recipe,
)
from tutorial_lib.models import TransformerLM
from tutorial_lib.settings import Budget
from tutorial_lib.training import pad_collate


def train_probe(feats: CachedFeatures, mix: bool) -> Run:
    """A probe trained and tested on ``feats`` (15 epochs at 1e-2) by the one runner."""
    budget = Budget(epochs=15, lr=1e-2, batch_size=32)
    return run(probe_recipe(feats, feats, feats, num_labels=2, mix=mix, budget=budget), 0,
               keep_model=True)


def tiny_ours() -> tuple[Backbone, torch.nn.Module]:
    """A Backbone around a tiny LM of ours, and the classifier built from it."""
    clf = tiny_classifier().eval()
    lm = TransformerLM(clf.config)
    lm.transformer.load_state_dict(clf.encoder.state_dict())
    return Backbone("tiny", "causal", None, lm.eval(), clf.config.max_len), clf


def test_scalar_mix_is_gamma_times_softmax_weighted_sum():
    torch.manual_seed(0)
    mix = ScalarMix(3, normalize=False)
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.0, 1.0, -1.0]))
        mix.gamma.fill_(2.0)
    h = torch.randn(4, 3, 5)
    w = torch.softmax(torch.tensor([0.0, 1.0, -1.0]), 0)
    expected = 2.0 * (w[0] * h[:, 0] + w[1] * h[:, 1] + w[2] * h[:, 2])
    torch.testing.assert_close(mix(h), expected)
    assert mix.weights().sum().item() == pytest.approx(1.0)


def test_normalized_scalar_mix_ignores_each_layers_scale():
    torch.manual_seed(0)
    h = torch.randn(4, 2, 8)
    louder = h * torch.tensor([1.0, 100.0]).view(1, 2, 1)  # layer 1's residual stream is larger
    mix = ScalarMix(2, normalize=True)
    torch.testing.assert_close(mix(h), mix(louder), rtol=1e-4, atol=1e-4)


def test_pooled_states_top_entry_is_what_the_head_sees():
    backbone, clf = tiny_ours()
    ids = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    states = pooled_states(backbone, ids, mask)
    assert states.shape == (2, clf.config.n_layer + 1, 16)
    torch.testing.assert_close(states[:, -1], clf.pooled(ids, mask))
    assert feature_layer_names(backbone) == ["embeddings", "block 1", "block 2", "block 3 (+ ln_f)"]


def test_pooled_states_of_a_bert_encoder_read_the_first_token():
    clf = tiny_bert_classifier().eval()
    backbone = Backbone("tiny-bert", "encoder", None, clf.encoder, 16)
    ids = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    states = pooled_states(backbone, ids, mask)
    assert states.shape == (2, 2, 16)
    torch.testing.assert_close(states[:, -1], clf.pooled(ids, mask))
    assert feature_layer_names(backbone) == ["embeddings", "layer 1"]


def test_extract_features_keeps_every_layer_and_the_labels_in_order():
    backbone, clf = tiny_ours()
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(5, 50, (int(n),), generator=g).tolist() + [2], "labels": i % 3}
            for i, n in enumerate(torch.randint(2, 10, (10,), generator=g))]
    loader = DataLoader(rows, batch_size=4, collate_fn=pad_collate(0))
    feats = extract_features(backbone, loader)
    assert feats.x.shape == (10, 4, 16) and feats.x.dtype == torch.float32
    assert feats.y.tolist() == [r["labels"] for r in rows]
    one = pad_collate(0)([rows[7]])
    with torch.no_grad():
        alone = clf.pooled(one["input_ids"], one["attention_mask"])
    torch.testing.assert_close(feats.x[7, -1], alone[0], rtol=0.05, atol=0.02)  # autocast: bf16


def test_probe_learns_a_separable_problem_from_cached_features():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    x = torch.randn(200, 3, 8, generator=g)
    x[:, 1, 0] += 4 * (2 * y - 1)  # only the middle layer carries the label
    feats = CachedFeatures(x, y)
    res = train_probe(feats, mix=True)
    assert res.test["error"] < 0.05
    assert len(res.history.evals) == 15 and res.trainable_params == 8 * 2 + 2 + 3 + 1
    assert {r["lr"] for r in res.history.train} == {1e-2}  # a constant rate: no warm-up, no decay
    weights = res.model.mix.weights()
    assert weights.argmax().item() == 1, "the mix learns to weight the informative layer"
    assert mix_weights([res, res]).shape == (2, 3)
    top = train_probe(feats, mix=False)
    assert top.test["error"] > 0.3, "the top layer alone carries no label here"
    x_top = torch.randn(200, 3, 8, generator=g)
    x_top[:, -1, 0] += 4 * (2 * y - 1)  # now only the top layer does
    feats = CachedFeatures(x_top, y)
    top = train_probe(feats, mix=False)
    assert top.test["error"] < 0.05 and top.model.mix is None


def test_feature_extraction_runs_end_to_end(with_data):
    smoke = config.get_scale("smoke")
    task = tasks.load_task("trec", train_examples=64, validation_examples=32, test_examples=32)
    budget = Budget(batch_size=16)
    table, probes, backbone = feature_extraction_runs(task, budget, scale=smoke, backbone="scratch",
                                                      seeds=(0, 1), epochs=2, lr=1e-2)
    assert list(table["method"]) == ["features: top layer"] * 2 + ["features: scalar mix"] * 2
    assert list(table["seed"]) == [0, 1, 0, 1]
    assert set(probes) == {"features: top layer", "features: scalar mix"}
    assert {"test_error", "seconds", "seconds_per_epoch", "trainable_params", "total_params",
            "trained_pct", "peak_mib", "backbone"} <= set(table.columns)
    assert (table["trainable_params"] < table["total_params"]).all()
    assert table["test_error"].between(0, 1).all()
    majority = task.majority_baseline()["accuracy"]  # the floor stats.compare guards with
    assert table["test_error_floor"].tolist() == pytest.approx([1 - majority] * 4)
    assert backbone.name == "scratch"
    # the same seed, the same cached features: the same probe
    again, _, _ = feature_extraction_runs(task, budget, scale=smoke, backbone="scratch",
                                          seeds=(0,), epochs=2, lr=1e-2)
    assert again["test_error"].tolist() == table[table["seed"] == 0]["test_error"].tolist()
