"""Tests for tutorial_lib.methods.probing.adversarial: the five arms' labels, linear CKA, the
intermediate stage and the deprel trainability runner (tiny random models, no data)."""

import numpy as np
import pytest
import torch

# the tiny backbone, sentences and the fixtures (fp32, tokenizer) of the amnesic tests
from test_amnesic import fp32, sentences, tiny_backbone, tokenizer, upos_sentences  # noqa: F401

from tutorial_lib import config
from tutorial_lib.methods.probing import adversarial, probing
from tutorial_lib.settings import Budget

ARMS = {a.name: a for a in adversarial.ARMS}


def test_the_five_arms_are_the_request_and_its_two_look_alikes():
    assert list(ARMS) == ["none", "POS (λ = 0)", "reversed POS", "inverted labels", "random labels"]
    assert [a.reverse for a in adversarial.ARMS] == [False, False, True, False, False]
    assert ARMS["reversed POS"].lambda_ > 0 and ARMS["reversed POS"].labels == "gold"


def test_inverted_labels_are_a_fixed_permutation_with_no_tag_in_place_and_random_ones_are_drawn_once():
    upos = [[t % 17 for t in range(s, s + 30)] for s in range(5)]
    inverted = adversarial.arm_labels(ARMS["inverted labels"], upos, 17, seed=3)
    mapping = {}
    for row, new in zip(upos, inverted):
        for t, u in zip(row, new):
            assert mapping.setdefault(t, u) == u  # the same tag always maps to the same tag
    assert sorted(mapping.values()) == sorted(mapping) and all(t != u for t, u in mapping.items())
    random_a = adversarial.arm_labels(ARMS["random labels"], upos, 17, seed=3)
    assert random_a == adversarial.arm_labels(ARMS["random labels"], upos, 17, seed=3)
    assert np.mean([t == u for r, n in zip(upos, random_a) for t, u in zip(r, n)]) < 0.2
    assert adversarial.arm_labels(ARMS["POS (λ = 0)"], upos, 17) is upos


def test_linear_cka_is_one_under_rotation_and_scale_and_low_for_unrelated_states():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 20))
    Q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    assert adversarial.linear_cka(X, X) == pytest.approx(1.0)
    assert adversarial.linear_cka(X, 3.0 * X @ Q + 5.0) == pytest.approx(1.0)  # rotation, scale, shift
    assert adversarial.linear_cka(X, rng.normal(size=(500, 20))) < 0.1
    assert adversarial.linear_cka(X, X[:, :10]) == pytest.approx(np.sqrt(0.5), abs=0.05)


@pytest.fixture
def seventeen_tags(monkeypatch):
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])


def test_an_intermediate_stage_moves_only_a_copy_and_reversal_changes_the_encoder(
        tokenizer, seventeen_tags):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    before = {k: v.clone() for k, v in bb.encoder.state_dict().items()}
    adv = upos_sentences(16, 1)
    budget = Budget(batch_size=4, lr=5e-3, eval_batch_size=8)
    kw = dict(steps=4, head_lr=1e-2, head_warmup_steps=2, batch_size=4, seed=0)
    none, info = adversarial.intermediate_stage(bb, ARMS["none"], adv, budget, **kw)
    assert none.encoder is not bb.encoder and np.isnan(info["head_accuracy"])
    plain, p_info = adversarial.intermediate_stage(bb, ARMS["POS (λ = 0)"], adv, budget, **kw)
    reversed_, r_info = adversarial.intermediate_stage(bb, ARMS["reversed POS"], adv, budget, **kw)
    assert all(torch.equal(v, before[k]) for k, v in bb.encoder.state_dict().items())
    for info in (p_info, r_info):
        assert 0.0 <= info["head_accuracy"] <= 1.0 and info["seconds"] > 0
    a, b = plain.encoder.state_dict(), reversed_.encoder.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)  # −λ reached the encoder
    again, _ = adversarial.intermediate_stage(bb, ARMS["reversed POS"], adv, budget, **kw)
    assert all(torch.equal(v, again.encoder.state_dict()[k]) for k, v in b.items())  # seeded
    moved = adversarial.movement(bb, reversed_, upos_sentences(10, 5))
    assert 0.0 < moved["cka"] <= 1.0 + 1e-9
    assert adversarial.movement(bb, none, upos_sentences(10, 5))["cka"] == pytest.approx(1.0)


def test_train_deprel_reports_a_run_with_a_dev_curve_and_test_accuracy(tokenizer, monkeypatch):  # noqa: F811
    monkeypatch.setattr(probing, "label_names", lambda prop: [f"REL{i}" for i in range(37)])
    bb = tiny_backbone(tokenizer, causal=True)
    train, dev, test = sentences(12, 1, 3, 8), sentences(6, 2, 3, 8), sentences(6, 3, 3, 8)
    budget = Budget(epochs=2, batch_size=4, lr=5e-3, eval_batch_size=8)
    run = adversarial.train_deprel(bb, train, dev, test, budget, seed=0,
                                   scale=config.get_scale("smoke"))
    assert run.backbone == "tiny" and run.seed == 0 and 0.0 <= run.test["accuracy"] <= 1.0
    curve = [r["accuracy"] for r in run.history.evals]
    assert len(curve) >= 4 and all(0.0 <= a <= 1.0 for a in curve)  # ≥ 2 evaluations a pass
