"""Tests for tutorial_lib.freezing: selecting, counting, layer order, the scalar mix, probes."""

import pytest
import torch

from tutorial_lib.freezing import (
    Features,
    FreezingError,
    ScalarMix,
    cls_hidden_states,
    freeze,
    layer_groups,
    select_parameters,
    train_probe,
    trainable_summary,
    unfreeze,
)
from tutorial_lib.models import TransformerClassifier, TransformerConfig


def _clf(n_layer: int = 3) -> TransformerClassifier:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=50, d_model=16, n_layer=n_layer, n_head=2, d_ff=32,
                            max_len=12, dropout=0.0)
    return TransformerClassifier(cfg, num_labels=3)


def _direct_count(model, trainable_only: bool) -> int:
    seen, total = set(), 0
    for m in model.modules():
        for p in m._parameters.values():
            if p is None or id(p) in seen or (trainable_only and not p.requires_grad):
                continue
            seen.add(id(p))
            total += p.numel()
    return total


def test_trainable_summary_matches_a_direct_count_with_tied_weights_once():
    model = _clf()
    freeze(model, r"^transformer\.blocks\.[01]\.", "pos_emb")
    s = trainable_summary(model)
    assert s.total == _direct_count(model, False)
    assert s.trainable == _direct_count(model, True)
    tok = model.transformer.tok_emb.weight.numel()
    # the tied lm_head is not a second copy of the embedding matrix
    assert s.total == sum(p.numel() for p in model.parameters()) and tok < s.total
    assert 0 < s.fraction < 1 and "parameters trained" in str(s)


def test_a_pattern_that_matches_nothing_is_an_error():
    model = _clf()
    with pytest.raises(FreezingError, match="matches no parameter"):
        freeze(model, r"transformer\.block\.0")  # typo: "block" for "blocks"
    with pytest.raises(FreezingError, match="invalid"):
        freeze(model, r"blocks\.(0")  # malformed regex, as in the slides
    assert all(p.requires_grad for p in model.parameters()), "a failed call freezes nothing"


def test_freeze_by_pattern_and_module_and_tied_names():
    model = _clf()
    freeze(model)
    assert trainable_summary(model).trainable == 0
    unfreeze(model, model.head, r"blocks\.2\.")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in model.named_parameters()
                         if n.startswith(("head.", "transformer.blocks.2."))}
    # "lm_head" is the tied token embedding: matching it unfreezes that one tensor
    assert select_parameters(model, "lm_head") == [model.transformer.tok_emb.weight]


def test_layer_groups_are_top_down_and_cover_every_parameter_once():
    model = _clf(n_layer=3)
    names = [layer.name for layer in layer_groups(model)]
    assert names == ["head", "ln_f", "block 2", "block 1", "block 0", "embeddings"]
    merged = layer_groups(model, merge_final_norm=True)
    assert [layer.name for layer in merged][:2] == ["head", "block 2 + ln_f"]
    ids = [id(p) for layer in merged for p in layer.parameters()]
    assert len(ids) == len(set(ids)) and set(ids) == {id(p) for p in model.parameters()}


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


def test_cls_hidden_states_top_entry_is_what_the_head_sees():
    model = _clf().eval()
    ids = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    states = cls_hidden_states(model, ids, mask)
    assert states.shape == (2, model.config.n_layer + 1, 16)
    torch.testing.assert_close(states[:, -1], model.pooled(ids, mask))


def test_probe_learns_a_separable_problem_from_cached_features():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (200,), generator=g)
    x = torch.randn(200, 3, 8, generator=g)
    x[:, 1, 0] += 4 * (2 * y - 1)  # only the middle layer carries the label
    feats = Features(x, y)
    res = train_probe(feats, feats, feats, num_labels=2, mix=True, epochs=15, lr=1e-2)
    assert res.test["error"] < 0.05
    weights = res.probe.mix.weights()
    assert weights.argmax().item() == 1, "the mix learns to weight the informative layer"


def test_method_settings_of_notebooks_03_to_05_cover_every_scale():
    from tutorial_lib import config

    for method in ("adapters", "unfreezing", "discriminative"):
        keys = None
        for name in config.SCALES:
            settings = config.method_settings(config.get_scale(name), method)
            keys = keys or set(settings)
            assert set(settings) == keys, (method, name)
            assert settings["epochs"] >= 1
