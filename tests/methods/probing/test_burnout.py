"""Tests for tutorial_lib.methods.probing.burnout (issue 59): what notebook 12's verdicts rest on —
fresh probes out of sample, the movement-matched control, one stage run per seed. Tiny random
models, no data."""

from dataclasses import replace

import numpy as np
import pytest
import torch

# the adversary tests' stage: the reversed arm, its budget and sizes, 17 tags (an autouse fixture)
from test_adversaries import BUDGET, REVERSED, STAGE, seventeen_tags  # noqa: F401, E402

# the tiny backbone, sentences and the fixtures (fp32, tokenizer) of the amnesic tests
from test_amnesic import LINES, WORDS, fp32, tiny_backbone, tokenizer, upos_sentences  # noqa: F401
from tiny import tensors_equal

from tutorial_lib import premises
from tutorial_lib.methods.probing import adversarial, burnout, probing
from tutorial_lib.tokenization import train_wordpiece


def named(s: probing.Sentences, prefix: str) -> probing.Sentences:
    """The same sentences with ids of their own (the helpers number every set from 0)."""
    return replace(s, sent_ids=[f"{prefix}-{i}" for i in range(len(s))])


def equal_encoders(a, b) -> bool:
    sa, sb = a.encoder.state_dict(), b.encoder.state_dict()
    return all(tensors_equal(sa[k], sb[k]) for k in sa)


# --- one stage run per seed --------------------------------------------------------------------


def test_each_stage_seed_is_its_own_run_and_a_seed_repeats_exactly(tokenizer):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    adv = upos_sentences(16, 1)
    runs = burnout.stage_runs(bb, REVERSED, adv, BUDGET, (0, 1, 2), **STAGE)
    assert sorted(runs) == [0, 1, 2]
    assert not equal_encoders(runs[0][0], runs[1][0]) and not equal_encoders(runs[1][0], runs[2][0])
    again = burnout.stage_runs(bb, REVERSED, adv, BUDGET, (1,), **STAGE)
    assert equal_encoders(again[1][0], runs[1][0])
    with pytest.raises(ValueError, match="differ"):
        burnout.stage_runs(bb, REVERSED, adv, BUDGET, (0, 0), **STAGE)


# --- fresh probes out of sample ----------------------------------------------------------------


@pytest.fixture(scope="module")
def whole_words():
    tok = train_wordpiece(LINES, vocab_size=200, min_frequency=1)  # whole words: tags readable
    assert all(len(tok.tokenize(w)) == 1 for w in WORDS)
    return tok


def test_fresh_probes_refuse_the_stages_own_sentences(whole_words):
    bb = tiny_backbone(whole_words, d=32)
    stage, probe = named(upos_sentences(20, 1), "stage"), named(upos_sentences(30, 5), "probe")
    splits = {"dev": named(upos_sentences(10, 6), "dev"), "test": named(upos_sentences(10, 7), "test")}
    overlapping = replace(probe, sent_ids=probe.sent_ids[:-1] + [stage.sent_ids[0]])
    with pytest.raises(ValueError, match="1 of the stage's own sentences"):
        burnout.fresh_probes(bb, stage, overlapping, splits)
    with pytest.raises(ValueError, match="test: 1 sentences"):
        burnout.fresh_probes(bb, stage, probe, {**splits, "test": replace(
            splits["test"], sent_ids=splits["test"].sent_ids[:-1] + [probe.sent_ids[0]])})


def test_fresh_probes_read_a_tag_the_states_carry_and_the_premise_says_not_erased(whole_words):
    bb = tiny_backbone(whole_words, d=32)
    stage, probe = named(upos_sentences(20, 1), "stage"), named(upos_sentences(60, 5), "probe")
    splits = {"dev": named(upos_sentences(30, 6), "dev"), "test": named(upos_sentences(30, 7), "test")}
    out = burnout.fresh_probes(bb, stage, probe, splits, max_iter=200, mlp_hidden=32)
    assert set(out.linear) == set(out.mlp) == set(out.floor) == {"dev", "test"}
    assert all(out.linear[s] > 0.9 and out.floor[s] < 0.5 for s in splits)
    assert out.mlp["test"] > out.floor["test"] + 0.2
    assert not out.premise.holds and out.premise.failure == premises.VOID_NOT_ERASED
    assert out.premise.name == "erased out of sample" and not out.mlp_premise.holds
    row = out.record()
    assert row["linear_test"] == out.linear["test"] and row["erased"] is False
    assert set(row) >= {"mlp_dev", "majority_dev", "erased_mlp"}
    assert out.states["test"].shape == (splits["test"].n_words, 32)
    # labels the states cannot carry (a random tag per word): at the floor, the premise holds
    rng = np.random.default_rng(0)
    for s in (probe, *splits.values()):
        s.deprel = [rng.integers(2, size=len(t)).tolist() for t in s.tokens]
    noise = burnout.fresh_probes(bb, stage, probe, splits, prop="deprel", tol=0.1, mlp_hidden=8)
    assert noise.premise.holds, noise.premise.detail


# --- the movement-matched control --------------------------------------------------------------


def test_the_matched_control_stops_once_matched_and_its_premise_holds(tokenizer):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    kw = dict(max_steps=6, check_every=2, head_lr=1e-2, head_warmup_steps=2, batch_size=4)
    out = burnout.matched_control(bb, 0.95, upos_sentences(16, 1), upos_sentences(10, 5), BUDGET,
                                  tolerance=0.5, **kw)
    assert [t["steps"] for t in out.tried] == [2] and out.info["steps"] == 2  # stopped at once
    assert out.premise.holds and out.premise.name == "matched"
    assert out.cka == out.tried[-1]["cka"] and out.info["lr"] == BUDGET.lr
    assert out.cka == pytest.approx(adversarial.movement(bb, out.backbone, upos_sentences(10, 5))["cka"])
    assert burnout.CONTROL.labels == "random" and burnout.CONTROL.reverse  # no POS in its targets


def test_the_matched_control_searches_the_rate_and_its_premise_fails_when_not_matched(tokenizer):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    kw = dict(max_steps=4, check_every=2, head_lr=1e-2, head_warmup_steps=2, batch_size=4)
    sents, moved_on = upos_sentences(16, 1), upos_sentences(10, 5)
    never = burnout.matched_control(bb, -5.0, sents, moved_on, BUDGET, tolerance=0.01, **kw)
    lr = BUDGET.lr
    assert [(t["lr"], t["steps"]) for t in never.tried] == [(lr, 2), (lr, 4), (3 * lr, 2), (3 * lr, 4)]
    assert not never.premise.holds and never.premise.failure == premises.VOID_NOT_MATCHED
    hurried = burnout.matched_control(bb, -5.0, sents, moved_on, BUDGET, tolerance=0.01,
                                      time_limit=0.0, **kw)
    assert {t["lr"] for t in hurried.tried} == {lr}  # no time for a second run
    assert burnout.CKA_WHAT in never.premise.detail
    over = burnout.matched_control(bb, 2.0, sents, moved_on, BUDGET, tolerance=0.01, **kw)
    assert [t["lr"] for t in over.tried] == [lr, pytest.approx(lr / 3)]  # overshot: a lower rate
    assert not over.premise.holds
    with pytest.raises(ValueError, match="≥ 1"):
        burnout.matched_control(bb, 0.5, sents, moved_on, BUDGET, **{**kw, "check_every": 0})


def test_lambda_is_a_weak_knob_under_adam_when_the_adversary_is_the_encoders_only_loss(tokenizer):  # noqa: F811,E501
    """Why the control's knob is the encoder's rate: Adam divides each update by the gradient's
    running scale, so at λ = 0.1 the encoder moves about as far as at λ = 1 — not a tenth."""
    bb = tiny_backbone(tokenizer, causal=True)
    adv = upos_sentences(16, 1)
    start = bb.encoder.state_dict()

    def distance(lambda_: float) -> float:
        moved, _ = adversarial.intermediate_stage(bb, replace(REVERSED, lambda_=lambda_), adv,
                                                  BUDGET, seed=0, **STAGE)
        end = moved.encoder.state_dict()
        return float(torch.sqrt(sum(((end[k] - start[k]).float() ** 2).sum() for k in end)))

    strong, gentle = distance(1.0), distance(0.1)
    assert strong > 0 and 0.8 < gentle / strong < 1.25
