"""Tests for tutorial_lib.params: selecting, freezing, counting, weight decay, the optimizer."""

import pytest
import torch
from tiny import tiny_classifier as _clf

from tutorial_lib.params import (
    ADAM_BETAS,
    ADAM_EPS,
    FreezingError,
    decay_groups,
    freeze,
    make_optimizer,
    no_decay,
    optimizer_state_mib,
    select_parameters,
    set_trainable,
    trainable_summary,
    unfreeze,
)


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
    freeze(model, r"^encoder\.blocks\.[01]\.", "pos_emb")
    s = trainable_summary(model)
    assert s.total == _direct_count(model, False)
    assert s.trainable == _direct_count(model, True)
    tok = model.encoder.tok_emb.weight.numel()
    # the tied lm_head is not a second copy of the embedding matrix
    assert s.total == sum(p.numel() for p in model.parameters()) and tok < s.total
    assert 0 < s.fraction < 1 and "parameters trained" in str(s)


def test_a_pattern_that_matches_nothing_is_an_error():
    model = _clf()
    with pytest.raises(FreezingError, match="matches no parameter"):
        freeze(model, r"encoder\.block\.0")  # typo: "block" for "blocks"
    with pytest.raises(FreezingError, match="invalid"):
        freeze(model, r"blocks\.(0")  # malformed regex, as in the slides
    assert all(p.requires_grad for p in model.parameters()), "a failed call freezes nothing"
    with pytest.raises(TypeError, match="int"):
        select_parameters(model, 3)


def test_freeze_by_pattern_and_module_and_tied_names():
    model = _clf()
    assert freeze(model) == len(list(model.parameters()))
    assert trainable_summary(model).trainable == 0
    unfreeze(model, model.head, r"blocks\.2\.")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in model.named_parameters()
                         if n.startswith(("head.", "encoder.blocks.2."))}
    # "lm_head" is the tied token embedding: matching it unfreezes that one tensor
    assert select_parameters(model, "lm_head") == [model.encoder.tok_emb.weight]
    # a parameter given directly, and each tensor returned once however often it is selected
    w = model.head.weight
    picked = select_parameters(model, w, model.head, r"^head\.")
    assert [id(p) for p in picked] == [id(w), id(model.head.bias)]
    assert set_trainable(model, False, w) == 1 and not w.requires_grad


def test_optimizer_state_is_gradients_plus_two_adam_moments():
    assert optimizer_state_mib(2**20) == pytest.approx(12.0)  # 3 fp32 values per parameter
    assert optimizer_state_mib(2**20, bytes_per_value=2) == pytest.approx(6.0)


def test_no_decay_on_biases_norms_and_embeddings():
    model = _clf()
    named = dict(model.named_parameters())
    assert not no_decay("encoder.blocks.0.attn.qkv.weight", named["encoder.blocks.0.attn.qkv.weight"])
    assert no_decay("head.bias", named["head.bias"])
    assert no_decay("encoder.ln_f.weight", named["encoder.ln_f.weight"])
    assert no_decay("encoder.tok_emb.weight", named["encoder.tok_emb.weight"])


def test_decay_groups_split_each_parameter_once_and_skip_frozen_ones():
    model = _clf()
    groups = decay_groups(model, 0.1, lr_scale=0.5)
    decay, plain = groups
    assert decay["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert decay["lr_scale"] == plain["lr_scale"] == 0.5
    named = dict(model.named_parameters())  # the tied lm_head is listed once, as tok_emb
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(named)
    assert {id(p) for p in plain["params"]} == {id(p) for n, p in named.items() if no_decay(n, p)}
    # the token embedding is also named lm_head.weight (tied): still an embedding, not decayed
    tok = model.encoder.tok_emb.weight
    assert model.lm_head.weight is tok and any(p is tok for p in plain["params"])
    freeze(model, r"blocks\.0\.")
    frozen = {id(p) for p in model.encoder.blocks[0].parameters()}
    assert not frozen & {id(p) for g in decay_groups(model, 0.1) for p in g["params"]}
    kept = {id(p) for g in decay_groups(model, 0.1, include_frozen=True) for p in g["params"]}
    assert frozen <= kept
    head_only = decay_groups(model, 0.1, params=model.head.parameters(), exclude=[model.head.bias])
    assert [g["params"] for g in head_only] == [[model.head.weight]]  # empty group dropped


def test_make_optimizer_is_adamw_with_the_tutorials_settings():
    model = _clf()
    freeze(model, "pos_emb")
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.01)
    assert isinstance(opt, torch.optim.AdamW)
    for g in opt.param_groups:
        assert g["lr"] == 1e-3 and g["betas"] == ADAM_BETAS and g["eps"] == ADAM_EPS
    params = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(model.encoder.pos_emb.weight) not in params  # frozen: not optimised
    custom = make_optimizer(model, 1e-3, 0.01, groups=[{"params": list(model.head.parameters())}])
    assert len(custom.param_groups) == 1 and custom.param_groups[0]["betas"] == ADAM_BETAS
