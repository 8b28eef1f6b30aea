"""Tests of tutorial_lib.methods.generation.dialogue_training: the cached-states path (frozen lower layers run
once, candidates on the context's cache) gives the plain path's scores, hidden states, losses and
metrics; draws keep the gold reply; fine-tuning trains only the top and lowers the loss."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch
from tiny import tensors_equal, word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from tutorial_lib.finetuning import Run
from tutorial_lib.methods.generation import dialogue, dialogue_training
from tutorial_lib.methods.generation.dialogue import Turn
from tutorial_lib.settings import Budget

WORDS = ("i like cats . dogs are fine hi how you doing good thanks bye what do work as a nurse "
         "teacher ok sure no yes").split()
PERSONA = ["i like cats .", "i work as a nurse ."]
TURNS = [Turn(PERSONA, ["hi how are you"], ["good thanks", "bye", "i like dogs", "no"], 0),
         Turn(PERSONA, ["hi", "hi how are you doing", "good what do you do"],
              ["ok", "i work as a nurse", "yes", "sure thanks bye"], 1),
         Turn([], ["what do you like"], ["cats", "dogs are fine", "no", "i like cats ."], 3)]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return word_tokenizer(WORDS)


def make_model(tok: PreTrainedTokenizerFast, segment_layer: int) -> dialogue.DoubleHeads:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256,
                      initializer_range=0.3, bos_token_id=None, eos_token_id=None, pad_token_id=1)
    model = dialogue.DoubleHeads(LlamaForCausalLM(cfg), segment_layer=segment_layer).eval()
    with torch.no_grad():
        model.segments.weight.normal_()  # speakers that matter, so their placement is tested
    return model


@pytest.mark.parametrize("segment_layer", [0, 1, 2])
def test_cached_states_give_the_plain_paths_scores_and_losses(tok, segment_layer) -> None:
    model = make_model(tok, segment_layer)
    plain = dialogue.collate(TURNS, tok, tok.pad_token_id)
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS]
    cached = dialogue_training.states_batch(states)
    for key in ("segment_ids", "attention_mask", "reply_labels", "labels", "last", "gold"):
        assert tensors_equal(cached[key], plain[key]), key
    with torch.no_grad():
        s_plain, h_plain = model(plain)
        s_cached, h_cached = model(cached)
    real = plain["attention_mask"].reshape(-1, plain["attention_mask"].shape[-1]).bool()
    # bf16 storage of the states: close, not equal
    assert torch.allclose(h_cached[real], h_plain[real], atol=0.05, rtol=0.02)
    assert torch.allclose(s_cached, s_plain, atol=0.02)
    for how in ("mc", "lm"):
        assert torch.allclose(dialogue.candidate_scores(model, cached, how),
                              dialogue.candidate_scores(model, plain, how), atol=0.02)
    loss_c, parts_c = dialogue.double_heads_loss(model, cached)
    loss_p, parts_p = dialogue.double_heads_loss(model, plain)
    assert float(loss_c) == pytest.approx(float(loss_p), rel=0.01)
    assert parts_c["lm"] == pytest.approx(parts_p["lm"], rel=0.01)


def test_evaluate_is_hits_at_1_and_the_gold_replys_perplexity(tok) -> None:
    model = make_model(tok, 1)
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS]
    plain = dialogue.collate(TURNS, tok, tok.pad_token_id)
    nll, n = dialogue.reply_nll(model, plain)
    for how in ("mc", "lm"):
        out = dialogue_training.evaluate(model, states, how, batch_size=2)
        want = dialogue.hits_at_1(dialogue.candidate_scores(model, plain, how), plain["gold"])
        assert out["correct"] == want and out["hits_at_1"] == sum(want) / 3
        assert out["reply_ppl"] == pytest.approx(float((nll.sum() / n.sum()).exp()), rel=0.02)
    with pytest.raises(ValueError):
        dialogue_training.evaluate(model, states, "bleu")


def test_draw_keeps_the_gold_reply_at_a_uniform_position(tok) -> None:
    model = make_model(tok, 1)
    states = dialogue_training.turn_states(model, tok, TURNS[0], amp_dtype=None)
    gold_ids = states.reply_ids[states.gold]
    rng = random.Random(0)
    positions = Counter()
    for _ in range(400):
        d = dialogue_training.draw(states, 2, rng)
        assert len(d.replies) == 2 and d.reply_ids[d.gold] == gold_ids
        assert tensors_equal(d.replies[d.gold], states.replies[states.gold])
        positions[d.gold] += 1
    assert 150 < positions[0] < 250  # gold first about half the time
    same = [dialogue_training.draw_all([states] * 5, 3, seed=7) for _ in range(2)]
    assert [s.reply_ids for s in same[0]] == [s.reply_ids for s in same[1]]
    assert len(dialogue_training.draw(states, None, rng).replies) == 4


def test_select_keeps_the_chosen_candidates_in_their_order(tok) -> None:
    model = make_model(tok, 1)
    states = dialogue_training.turn_states(model, tok, TURNS[0], amp_dtype=None)
    others = [i for i in range(4) if i != states.gold]
    chosen = [others[1], states.gold, others[0]]
    s = dialogue_training.select(states, chosen)
    assert s.order == tuple(chosen) and s.gold == 1
    assert s.reply_ids == [states.reply_ids[i] for i in chosen]
    assert dialogue_training.select(s, [2, 1]).order == (others[0], states.gold)  # points home
    with pytest.raises(ValueError, match="gold"):
        dialogue_training.select(states, others)


def test_finetune_trains_only_the_top_and_lowers_the_loss(tok) -> None:
    model = make_model(tok, 2)
    with torch.no_grad():
        model.segments.weight.zero_()
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS] * 4
    frozen = {k: v.clone() for k, v in model.lm.model.layers[0].state_dict().items()}
    before = float(dialogue.double_heads_loss(model, dialogue_training.states_batch(states))[0])
    run = dialogue_training.finetune(model, states, seed=0, head_lr=3e-2,
                                     budget=Budget(lr=3e-3, epochs=4, batch_size=4))
    after = float(dialogue.double_heads_loss(model, dialogue_training.states_batch(states))[0])
    rows = run.history.train
    assert len(rows) == 12 and after < before and {"lm", "mc"} <= set(rows[0])
    new = {id(p) for p in [*model.segments.parameters(), *model.mc_head.parameters()]}
    groups = dialogue_training.new_parts_rate(3e-2)(model, 3e-3, 0.01)
    scales = {(round(g.get("lr_scale", 1.0), 6), {id(p) for p in g["params"]} <= new) for g in groups}
    assert scales == {(1.0, False), (10.0, True)}  # the new parts at head_lr, the rest at lr
    assert groups[-1]["lr_scale"] == pytest.approx(10.0)  # and the run trained with these groups:
    assert all(r[f"lr_{len(groups) - 1}"] == pytest.approx(10 * r["lr"]) for r in rows)
    assert all(tensors_equal(v, model.lm.model.layers[0].state_dict()[k]) for k, v in frozen.items())
    assert model.segments.weight.abs().sum() > 0  # the speakers learned something
    assert not model.lm.model.embed_tokens.weight.requires_grad
    assert model.lm.model.layers[2].self_attn.q_proj.weight.requires_grad


def test_finetune_prepares_the_model_with_its_prepare(tok) -> None:
    """``prepare`` replaces train_top (notebook 16's exercise 5: the speakers kept at zero)."""
    model = make_model(tok, 2)
    with torch.no_grad():
        model.segments.weight.zero_()
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS]

    def without_speakers(m) -> None:
        dialogue_training.train_top(m)
        m.segments.requires_grad_(False)

    run = dialogue_training.finetune(model, states, seed=0, head_lr=3e-2, prepare=without_speakers,
                                     budget=Budget(lr=3e-3, epochs=2, batch_size=2))
    assert len(run.history.train) == 4 and not model.segments.weight.any()
    assert model.mc_head.weight.requires_grad and run.test == {}


@pytest.mark.parametrize("segment_layer", [0, 1, 2])
@pytest.mark.parametrize("lm_prior", [False, True])
def test_each_context_once_gives_the_scores_losses_and_gradients_of_whole_sequences(
        tok, segment_layer, lm_prior) -> None:
    model = make_model(tok, segment_layer)
    model.lm_prior = lm_prior
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS]
    whole, shared = dialogue_training.states_batch(states), dialogue_training.context_batch(states)
    with torch.no_grad():
        scores, h = model(whole)
        B, N, T = whole["segment_ids"].shape
        nll = dialogue.token_nll(model, h, whole["reply_labels"].reshape(B * N, T)).sum(-1).view(B, N)
        got, got_nll, tokens = dialogue_training.turn_scores(model, shared)
    assert torch.allclose(got, scores, atol=1e-4)
    assert torch.allclose(got_nll, nll, atol=1e-3)
    assert tensors_equal(tokens, (whole["reply_labels"][..., 1:] != dialogue.IGNORE).sum(-1).float())
    gold_only = dialogue_training.turn_scores(model, shared, every_reply=False)[1]
    is_gold = torch.arange(N)[None] == whole["gold"][:, None]
    assert torch.allclose(gold_only[is_gold], nll[is_gold], atol=1e-3)
    assert lm_prior or not gold_only[~is_gold].any()  # the LM head skipped the distractors

    def grads(loss_of):
        model.zero_grad()
        loss, parts = loss_of()
        loss.backward()
        return parts, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    dialogue_training.train_top(model)
    parts_w, g_w = grads(lambda: dialogue.double_heads_loss(model, whole))
    parts_s, g_s = grads(lambda: dialogue_training.context_loss(model, shared))
    assert parts_s == pytest.approx(parts_w, rel=1e-4)
    assert len(g_s) == len(g_w) and all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g_s, g_w))


def test_only_layers_renumbers_the_kept_layers_and_restores_them(tok) -> None:
    decoder = make_model(tok, 1).lm.get_decoder()
    with dialogue.only_layers(decoder, 1):
        assert [layer.self_attn.layer_idx for layer in decoder.layers] == [0, 1]
    assert [layer.self_attn.layer_idx for layer in decoder.layers] == [0, 1, 2]
    assert len(decoder.layers) == 3


def test_scoring_all_candidates_once_serves_every_draw(tok) -> None:
    model = make_model(tok, 1)
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS]
    every = dialogue_training.score(model, states, batch_size=2)
    for seed in (0, 1):
        drawn = dialogue_training.draw_all(states, 3, seed)
        direct = dialogue_training.score(model, drawn, batch_size=3)
        for a, b in zip(dialogue_training.picked(every, drawn), direct):
            assert a.gold == b.gold
            for x, y in ((a.head, b.head), (a.lm, b.lm), (a.nll, b.nll), (a.tokens, b.tokens)):
                assert torch.allclose(x, y, atol=1e-4)
        again = dialogue_training.draw_all(drawn, 2, seed)  # a draw of a draw still points home
        for a, t in zip(dialogue_training.picked(every, again), again):
            assert tensors_equal(a.tokens, torch.tensor([float(len(r)) for r in t.reply_ids]))
    m = dialogue_training.metrics(every)
    assert m["turns"] == 3 and m["candidates"] == 4 and 0 <= m["hits_at_1_lm"] <= 1
    assert m["hits_at_1_lm"] == sum(bool(s.lm.argmax() == s.gold) for s in every) / 3


def test_a_run_is_the_tutorials_run_record_with_both_losses_in_its_history(tok) -> None:
    model = make_model(tok, 2)
    states = [dialogue_training.turn_states(model, tok, t, amp_dtype=None) for t in TURNS] * 2
    run = dialogue_training.finetune(model, states, test=states[:3], seed=0, head_lr=3e-2,
                                     budget=Budget(lr=3e-3, epochs=2, batch_size=3, eval_batch_size=2))
    assert isinstance(run, Run) and run.seed == 0 and run.seconds > 0
    assert len(run.history.train) == 4
    assert all({"loss", "lm", "mc"} <= set(r) for r in run.history.train)
    first = run.history.train[0]
    assert first["loss"] == pytest.approx(2.0 * first["lm"] + first["mc"], rel=1e-4)
    assert set(run.columns) == {"hits_at_1", "hits_at_1_lm", "reply_ppl"}
    assert 0 < run.trainable_params < run.total_params
    assert run.row()["hits_at_1"] == run.test["hits_at_1_mc"]
