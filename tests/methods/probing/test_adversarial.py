"""Tests for tutorial_lib.methods.probing.adversarial: the five arms' labels, linear CKA, the
intermediate stage and the deprel trainability runner (tiny random models, no data)."""

import numpy as np
import pytest
import torch

# the tiny backbone, sentences and the fixtures (fp32, tokenizer) of the amnesic tests
from test_amnesic import (  # noqa: F401
    LINES,
    WORDS,
    FixedLogits,
    fp32,
    sentences,
    tiny_backbone,
    tokenizer,
    upos_sentences,
)
from tiny import tensors_equal

from tutorial_lib import config
from tutorial_lib.heads import HeadConfig, MultiHeadModel
from tutorial_lib.methods.probing import adversarial, probing
from tutorial_lib.models import IGNORE_INDEX
from tutorial_lib.settings import Budget
from tutorial_lib.tokenization import train_wordpiece
from tutorial_lib.training import pad_collate

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
    assert all(tensors_equal(v, before[k]) for k, v in bb.encoder.state_dict().items())
    for info in (p_info, r_info):
        assert 0.0 <= info["head_accuracy"] <= 1.0 and info["seconds"] > 0
    a, b = plain.encoder.state_dict(), reversed_.encoder.state_dict()
    assert any(not tensors_equal(a[k], b[k]) for k in a)  # −λ reached the encoder
    again, _ = adversarial.intermediate_stage(bb, ARMS["reversed POS"], adv, budget, **kw)
    assert all(tensors_equal(v, again.encoder.state_dict()[k]) for k, v in b.items())  # seeded
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


# --- the heads' helpers, moved here from amnesic with notebook 12 -------------------------------


def test_head_accuracy_counts_labelled_positions_over_all_batches():
    ignore = IGNORE_INDEX
    token_logits = [torch.tensor([[[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]]),  # predicts 0, 1, 0
                    torch.tensor([[[0.0, 2.0], [0.0, 2.0], [2.0, 0.0]]])]  # predicts 1, 1, 0
    loader = [{"input_ids": torch.zeros(1, 3, dtype=torch.long),
               "attention_mask": torch.ones(1, 3, dtype=torch.long),
               "labels": torch.tensor([[0, 0, ignore]])},  # 1 of 2 right
              {"input_ids": torch.zeros(1, 3, dtype=torch.long),
               "attention_mask": torch.ones(1, 3, dtype=torch.long),
               "labels": torch.tensor([[1, ignore, ignore]])}]  # 1 of 1 right
    model = FixedLogits(token_logits)
    assert adversarial.head_accuracy(model, loader, "pos") == pytest.approx(2 / 3)  # not (½ + 1) / 2
    assert model.calls == ["pos", "pos"]
    seq = FixedLogits([torch.tensor([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]])])
    batch = {"input_ids": torch.zeros(2, 2, dtype=torch.long),
             "attention_mask": torch.ones(2, 2, dtype=torch.long), "labels": torch.tensor([1, 2])}
    assert adversarial.head_accuracy(seq, [batch], "main") == 0.5
    assert adversarial.head_accuracy(FixedLogits([]), [], "main") == 0.0


def test_head_warmup_trains_only_the_pos_head_and_the_head_gets_its_own_rate(tokenizer, monkeypatch):  # noqa: E501, F811
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])
    bb = tiny_backbone(tokenizer, causal=True)
    model = MultiHeadModel(bb.encoder, {"main": HeadConfig(2, "sequence"),
                                        "pos": HeadConfig(17, "token",
                                                                  reverse_gradient=True)})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = probing.token_label_rows(bb, upos_sentences(16, 1), "upos")
    seconds = adversarial.train_head_alone(model, "pos", rows, pad_collate(bb.pad_id),
                                        Budget(batch_size=4), lr=1e-2, steps=3, batch_size=4, seed=0)
    assert seconds > 0
    after = model.state_dict()
    changed = {k for k in after if not tensors_equal(after[k], before[k])}
    assert changed == {"heads.pos.linear.weight", "heads.pos.linear.bias"}
    assert all(p.requires_grad for p in model.encoder.parameters())  # unfrozen again
    groups = adversarial.head_rate(30.0)(model, 1e-4, 0.01)
    head = {id(p) for p in model.heads["pos"].parameters()}
    for g in groups:
        ids = {id(p) for p in g["params"]}
        assert ids <= head if g["name"] == "pos head" else not ids & head
        assert g.get("lr_scale", 1.0) == (30.0 if g["name"] == "pos head" else 1.0)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_final_probe_accuracy_reads_a_property_the_features_encode():
    # whole-word vocabulary: with the 60-piece one, "dog"/"dogs" (and "a"/"and", "happen"/"home")
    # share their first sub-word but not their tag, and a probe reads the first sub-word
    whole = train_wordpiece(LINES, vocab_size=200, min_frequency=1)
    assert all(len(whole.tokenize(w)) == 1 for w in WORDS)
    bb = tiny_backbone(whole, d=32)
    train, test = upos_sentences(60, 5), upos_sentences(30, 6)
    acc = adversarial.final_probe_accuracy(bb, train, test, max_iter=200)
    y_tr = np.concatenate([np.asarray(u) for u in train.upos])
    y_te = np.concatenate([np.asarray(u) for u in test.upos])
    majority = probing.majority_rate(y_tr, y_te)
    assert majority < 0.5 and acc > 0.9  # the tag is a function of the word: linearly readable
    # a label that is noise is not: random tags in the deprel slot stay near chance
    rng = np.random.default_rng(0)
    for s in (train, test):
        s.deprel = [rng.integers(3, size=len(t)).tolist() for t in s.tokens]
    assert adversarial.final_probe_accuracy(bb, train, test, prop="deprel", max_iter=200) < 0.6


def test_a_warmed_up_head_at_its_own_rate_reads_pos_before_any_reversal(monkeypatch):
    """The adversary must learn before its reversal means anything: after a head-only warm-up at
    its own rate, the λ = 0 arm's head reads a tag that is a function of the word far above the
    majority rate; without the warm-up, a few steps at the encoder's rate do not."""
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])
    tok = train_wordpiece(LINES, vocab_size=200, min_frequency=1)  # whole words: tags readable
    bb = tiny_backbone(tok, causal=False, d=32)
    stage = upos_sentences(64, 1)
    y = np.concatenate([np.asarray(u) for u in stage.upos])
    majority = probing.majority_rate(y, y)
    budget = Budget(batch_size=8, lr=1e-4, eval_batch_size=16)
    arm = ARMS["POS (λ = 0)"]
    _, cold = adversarial.intermediate_stage(bb, arm, stage, budget, steps=3, head_lr=1e-4,
                                             head_warmup_steps=0, batch_size=8, seed=0)
    _, warm = adversarial.intermediate_stage(bb, arm, stage, budget, steps=3, head_lr=3e-2,
                                             head_warmup_steps=40, batch_size=8, seed=0)
    assert cold["head_accuracy"] < majority + 0.1
    assert warm["head_accuracy"] > majority + 0.2
