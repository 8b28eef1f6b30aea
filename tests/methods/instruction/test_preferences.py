"""Tests of tutorial_lib.methods.instruction.preferences: ConvAI2 turns (shuffled candidates), the
conversation's roles, the pairs, and Hits@1 by log-probability and by DPO's implicit reward
against a hand computation on tiny random Llamas (no Hub)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from data_helpers import load_local
from tiny import tensors_equal, word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from tutorial_lib.methods.instruction import instructions, preferences
from tutorial_lib.methods.instruction.preferences import Turn
from tutorial_lib.models import IGNORE_INDEX

WORDS = "hi how are you i like cats . dogs fine good thanks what do work as a nurse ok sure".split()
pytestmark = pytest.mark.usefixtures("one_thread")
TURN = Turn(("i like cats .", "i work as a nurse ."), ("hi", "hi how are you", "good thanks what do you do"),
            ("i like dogs", "i work as a nurse", "ok sure", "fine"), 1)


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS)


def tiny_lm(tok, seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256,
                      initializer_range=0.5, bos_token_id=None, eos_token_id=None, pad_token_id=1)
    return LlamaForCausalLM(cfg).eval()


def test_turns_shuffle_the_gold_reply_out_of_its_last_place():
    listed = [f"d{j}" for j in range(19)] + ["gold"]  # ConvAI2 lists the gold reply last
    rows = [{"personality": ["p"], "utterances": [{"history": ["h"], "candidates": listed}]}
            for _ in range(200)]
    out = preferences.turns(rows, n_candidates=4, seed=0)
    assert all(len(t.candidates) == 4 and t.candidates[t.gold] == "gold" for t in out)
    assert set(Counter(t.gold for t in out)) == {0, 1, 2, 3}  # every position used
    assert preferences.turns(rows, n_candidates=4, seed=0) == out


def test_the_conversation_has_the_persona_as_system_and_the_partner_last():
    msgs = preferences.messages(TURN, max_history=3)
    assert msgs[0]["role"] == "system" and "i like cats ." in msgs[0]["content"]
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user"]
    assert msgs[-1]["content"] == TURN.history[-1]
    assert [m["role"] for m in preferences.messages(TURN, max_history=2)[1:]] == ["assistant", "user"]


def test_a_pair_prefers_the_gold_reply_to_a_distractor(tok):
    (pair,) = preferences.pairs(tok, [TURN], seed=0)
    n = pair["chosen_labels"].count(IGNORE_INDEX)
    assert pair["chosen_input_ids"][:n] == pair["rejected_input_ids"][:n]  # the same prompt
    assert tok.decode(pair["chosen_input_ids"][n:]).startswith("i work as a nurse")
    assert pair["chosen_input_ids"][n:] != pair["rejected_input_ids"][n:]
    (row,) = preferences.gold_rows(tok, [TURN])
    assert row == {"input_ids": pair["chosen_input_ids"], "labels": pair["chosen_labels"]}


def test_pair_turns_are_the_pairs_dpo_trains_on(tok):
    turns = [TURN, Turn(TURN.persona, TURN.history[:1], TURN.candidates, 3)] * 3
    for seed in (0, 1):
        paired = preferences.pair_turns(turns, seed=seed)
        assert [t.candidates[0] for t in paired] == [t.candidates[t.gold] for t in turns]
        assert all(t.gold == 0 and t.candidates[1] in turns[i].candidates
                   and t.candidates[1] != t.candidates[0] for i, t in enumerate(paired))
        for t, pair in zip(paired, preferences.pairs(tok, turns, seed=seed), strict=True):
            rejected = instructions.render(tok, preferences.messages(t), t.candidates[1])
            assert pair["rejected_input_ids"] == rejected["input_ids"]
    draws = {preferences.pair_turns(turns, seed=s)[0].candidates[1] for s in range(20)}
    assert len(draws) > 1  # the rejected reply is drawn, not always the same distractor


def test_scoring_every_candidate_once_serves_each_draw(tok):
    model = tiny_lm(tok, 0)
    full = Turn(TURN.persona, TURN.history, (*TURN.candidates, "sure i like dogs"), 1)
    every = preferences.score(model, tok, [full])[0]
    for order in ([1, 0, 4], [3, 1], [4, 2, 1, 0]):
        turn = Turn(TURN.persona, TURN.history, tuple(full.candidates[i] for i in order), order.index(1))
        assert preferences.places(full, turn) == order
        picked, direct = every.pick(order, turn.gold), preferences.score(model, tok, [turn])[0]
        assert picked.gold == direct.gold and tensors_equal(picked.tokens, direct.tokens)
        assert torch.allclose(picked.total, direct.total, atol=1e-4)
    with pytest.raises(ValueError, match="not the same turn"):
        preferences.places(full, Turn(TURN.persona, TURN.history[:1], TURN.candidates, 1))


def by_hand(model, tok, turn):
    """Each candidate's summed log-probability from the full model on prompt + reply."""
    out = []
    for c in turn.candidates:
        row = instructions.render(tok, preferences.messages(turn), c)
        n = row["labels"].count(IGNORE_INDEX)
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([row["input_ids"]])).logits[0].log_softmax(-1)
        ids = row["input_ids"]
        out.append((sum(float(logp[j - 1, ids[j]]) for j in range(n, len(ids))), len(ids) - n))
    return out


def test_hits_at_1_by_log_probability_and_by_implicit_reward_equal_the_hand_computation(tok):
    policy, ref = tiny_lm(tok, 0), tiny_lm(tok, 1)
    turns_ = [TURN, Turn(TURN.persona, ("hi",), ("hi", "ok sure", "i like cats"), 2)]
    mine, theirs = preferences.score(policy, tok, turns_), preferences.score(ref, tok, turns_)
    for turn, s in zip(turns_, mine):
        hand = by_hand(policy, tok, turn)
        assert s.total.tolist() == pytest.approx([h for h, _ in hand], abs=1e-4)
        assert s.tokens.tolist() == [n for _, n in hand]
    logp = preferences.hits_at_1(mine, "logp")
    expected = [max(range(len(s.total)), key=lambda i, s=s: s.total[i] / s.tokens[i]) == t.gold
                for s, t in zip(mine, turns_)]
    assert logp["correct"] == expected
    reward = preferences.hits_at_1(mine, "reward", reference=theirs, beta=0.3)
    expected = [max(range(len(s.total)), key=lambda i, s=s, r=r: s.total[i] - r.total[i]) == t.gold
                for s, r, t in zip(mine, theirs, turns_)]
    assert reward["correct"] == expected
    nll = -sum(float(s.total[t.gold]) for s, t in zip(mine, turns_))
    assert logp["reply_ppl"] == pytest.approx(math.exp(nll / sum(float(s.tokens[s.gold]) for s in mine)))
    with pytest.raises(ValueError, match="reference"):
        preferences.hits_at_1(mine, "reward")


def test_the_local_convai2_splits_give_pairs_from_train_and_turns_from_test():
    convai2 = load_local("convai2")
    train = preferences.turns(convai2["train"], n_candidates=4, seed=0)
    test = preferences.turns(convai2["test"], seed=0)
    assert len(test) == 1553 and all(len(t.candidates) == 20 for t in test)
    assert len(train) == 5468 and all(len(t.candidates) == 4 for t in train)


def test_seed_turns_give_each_seed_other_turns_with_its_own_draw_of_candidates():
    from tutorial_lib import data

    test = data.load("convai2")["test"]
    drawn = preferences.seed_turns(test, 12, [0, 1, 2], 4)
    assert [len(drawn[s]) for s in (0, 1, 2)] == [4, 4, 4]
    keys = [{(t.persona, t.history) for t in drawn[s]} for s in (0, 1, 2)]
    assert not (keys[0] & keys[1] or keys[1] & keys[2] or keys[0] & keys[2])  # other turns
    assert all(len(t.candidates) == 4 for s in drawn for t in drawn[s])
    assert drawn == preferences.seed_turns(test, 12, [0, 1, 2], 4)  # a fixed draw
