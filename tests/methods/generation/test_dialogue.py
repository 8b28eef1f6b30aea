"""Tests of tutorial_lib.methods.generation.dialogue (TransferTransfo): the sequence builder's speakers and
labels, the shuffled candidates (no gold position leak), the double-heads model and loss on a tiny
random Llama with a word-level tokenizer (no Hub)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from data_helpers import load_local, needs_data
from scipy import stats as sps
from tiny import word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from tutorial_lib.methods.generation import decoding, dialogue
from tutorial_lib.methods.generation.dialogue import BOT, IGNORE, PARTNER, PERSONA, Turn

WORDS = ("i like cats . dogs are fine hi how you doing good thanks bye what do work as a nurse "
         "teacher ok sure no yes").split()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    return word_tokenizer(WORDS)


@pytest.fixture(scope="module")
def model(tok: PreTrainedTokenizerFast) -> dialogue.DoubleHeads:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=256,
                      initializer_range=0.3, bos_token_id=None, eos_token_id=None, pad_token_id=1)
    return dialogue.DoubleHeads(LlamaForCausalLM(cfg)).eval()


def runs(segments: list[int]) -> list[int]:
    """The speaker of each run of equal segment ids: [0, 0, 1, 1, 2] -> [0, 1, 2]."""
    return [s for i, s in enumerate(segments) if i == 0 or segments[i - 1] != s]


PERSONA_ = ["i like cats .", "i work as a nurse ."]


def test_speakers_alternate_back_from_the_partner(tok: PreTrainedTokenizerFast) -> None:
    x = dialogue.build_input(tok, PERSONA_, ["hi", "hi how are you", "good thanks"], "fine thanks")
    assert runs(x.segment_ids) == [PERSONA, PARTNER, BOT, PARTNER, BOT]
    even = dialogue.build_input(tok, PERSONA_, ["hi", "how are you"], "good")  # the bot spoke first
    assert runs(even.segment_ids) == [PERSONA, BOT, PARTNER, BOT]
    bare = dialogue.build_input(tok, [], ["hi"], "hi", max_history=3)
    assert runs(bare.segment_ids) == [PARTNER, BOT]
    long = dialogue.build_input(tok, PERSONA_, ["hi", "yes", "no", "ok", "sure", "bye", "what"], "bye",
                                max_history=3)
    assert runs(long.segment_ids) == [PERSONA, PARTNER, BOT, PARTNER, BOT]
    assert "ok" not in tok.decode(long.input_ids) and "sure bye" not in tok.decode(long.input_ids)
    for built in (x, even, bare, long):
        assert len(built.input_ids) == len(built.segment_ids) == len(built.labels)
        assert built.last == len(built.input_ids) - 1


def test_labels_cover_the_reply_only(tok: PreTrainedTokenizerFast) -> None:
    x = dialogue.build_input(tok, PERSONA_, ["hi how are you"], "good thanks")
    labelled = [t for t in x.labels if t != IGNORE]
    assert tok.convert_ids_to_tokens(labelled) == ["good", "thanks", "<|im_end|>"]
    assert x.labels[-len(labelled):] == x.input_ids[-len(labelled):]
    assert tok.decode(x.input_ids[: len(x.labels) - len(labelled)]).endswith("assistant")
    cut = dialogue.build_input(tok, PERSONA_, ["hi how are you"], "good thanks", max_len=6)
    assert len(cut.input_ids) == 6 and [t for t in cut.labels if t != IGNORE] == labelled
    prompt = dialogue.build_input(tok, PERSONA_, ["hi how are you"], None)
    assert prompt.input_ids == x.input_ids[: len(prompt.input_ids)] and set(prompt.labels) == {IGNORE}


def test_collate_puts_lm_labels_on_the_gold_candidate(tok: PreTrainedTokenizerFast) -> None:
    batch_turns = [Turn(PERSONA_, ["hi"], ["bye", "good thanks", "no"], 1),
                   Turn([], ["how are you", "fine", "what do you do"], ["i work as a nurse", "ok", "yes"], 0)]
    b = dialogue.collate(batch_turns, tok, tok.pad_token_id)
    assert b["input_ids"].shape[:2] == (2, 3) and b["gold"].tolist() == [1, 0]
    has_labels = (b["labels"] != IGNORE).any(-1)
    assert has_labels.tolist() == [[False, True, False], [True, False, False]]
    assert (b["reply_labels"] != IGNORE).any(-1).all()
    assert b["attention_mask"].sum(-1).sub(1).equal(b["last"])
    assert (b["input_ids"][b["attention_mask"] == 0] == tok.pad_token_id).all()


@needs_data
def test_gold_position_is_shuffled_and_a_position_bias_scores_at_chance() -> None:
    rows = [r for split in load_local("convai2").values() for r in split]
    for n in (20, 4):
        shuffled = dialogue.turns(rows, n_candidates=n if n < 20 else None, seed=0)
        assert len(shuffled) == 7801 and all(len(t.candidates) == n for t in shuffled)
        golds = Counter(t.gold for t in shuffled)
        assert sps.chisquare([golds[i] for i in range(n)]).pvalue > 1e-3  # uniform over positions
        for position in (0, n - 1):
            def prefers(chunk, position=position, n=n):
                return torch.nn.functional.one_hot(torch.full((len(chunk),), position), n).float()

            hits = sum(dialogue.evaluate_turns(prefers, shuffled, batch_size=256)) / len(shuffled)
            sd = (1 / n * (1 - 1 / n) / len(shuffled)) ** 0.5
            assert abs(hits - 1 / n) < 4 * sd, (n, position, hits)
    # the file's own order leaks: the same scorer preferring the last slot would be always right
    raw = [Turn(r["personality"], u["history"], u["candidates"], 19)
           for r in rows[:50] for u in r["utterances"]]
    last = dialogue.evaluate_turns(lambda c: torch.arange(20.0).repeat(len(c), 1), raw)
    assert all(last)
    gold_texts = [u["candidates"][-1] for r in rows for u in r["utterances"]]
    assert [t.candidates[t.gold] for t in dialogue.turns(rows)] == gold_texts


def test_double_heads_starts_as_the_pretrained_lm(tok, model) -> None:
    b = dialogue.collate([Turn(PERSONA_, ["hi how are you"], ["good thanks", "bye"], 0)], tok, 1)
    ids, mask = b["input_ids"][0], b["attention_mask"][0]
    with torch.no_grad():
        ours = model.hidden(ids, b["segment_ids"][0], mask)
        plain = model.lm.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(ours, plain, atol=1e-6)
    with torch.no_grad():  # the hook adds the speaker vectors to the token embeddings
        model.segments.weight.normal_()
        hooked = model.hidden(ids, b["segment_ids"][0], mask)
        embeds = model.lm.get_input_embeddings()(ids) + model.segments(b["segment_ids"][0])
        by_hand = model.lm.get_decoder()(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        model.segments.weight.zero_()
    assert torch.allclose(hooked, by_hand, atol=1e-5) and not torch.allclose(hooked, plain, atol=1e-3)
    # and the LM half of the loss is the model's own loss on the gold reply's labels
    _, parts = dialogue.double_heads_loss(model, b)
    with torch.no_grad():
        own = model.lm(input_ids=ids[:1], attention_mask=mask[:1], labels=b["labels"][0, :1]).loss
    assert parts["lm"] == pytest.approx(float(own), rel=1e-5)


def test_double_heads_loss_trains_every_new_part(tok, model) -> None:
    b = dialogue.collate([Turn(PERSONA_, ["hi"], ["bye", "good thanks", "no"], 2),
                          Turn([], ["what do you do"], ["i work as a nurse", "ok", "yes"], 0)], tok, 1)
    model.zero_grad()
    loss, parts = dialogue.double_heads_loss(model, b, lm_coef=2.0, mc_coef=1.0)
    assert float(loss) == pytest.approx(2 * parts["lm"] + parts["mc"], rel=1e-5)
    loss.backward()
    for p in (model.segments.weight, model.mc_head.weight, model.lm.model.layers[0].mlp.up_proj.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    model.zero_grad()


def test_speakers_at_a_higher_layer_enter_there(tok, model) -> None:
    """segment_layer=1: layer 0 never sees the speaker vectors (so a backward pass from them stops
    at layer 1), and they still get a gradient."""
    b = dialogue.collate([Turn(PERSONA_, ["hi"], ["bye", "good thanks"], 0)], tok, 1)
    high = dialogue.DoubleHeads(model.lm, segment_layer=1)
    seen: list[torch.Tensor] = []
    handle = high.lm.model.layers[0].register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.no_grad():
        first, _ = high(b)
        high.segments.weight.normal_()
        second, _ = high(b)
    handle.remove()
    assert torch.equal(seen[0], seen[1]) and not torch.allclose(first, second)
    for p in high.parameters():
        p.requires_grad_(False)
    trained = [*high.lm.model.layers[1].parameters(), high.segments.weight, high.mc_head.weight]
    for p in trained:
        p.requires_grad_(True)
    loss, _ = dialogue.double_heads_loss(high, b)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in trained)
    for p in high.parameters():
        p.requires_grad_(True)
        p.grad = None


def test_candidate_scores_and_reply_nll(tok, model) -> None:
    b = dialogue.collate([Turn(PERSONA_, ["hi how are you"], ["bye", "good thanks"], 1)], tok, 1)
    mc = dialogue.candidate_scores(model, b, "mc")
    lm = dialogue.candidate_scores(model, b, "lm")
    assert mc.shape == lm.shape == (1, 2)
    nll, n = dialogue.reply_nll(model, b)
    assert float(-lm[0, 1]) == pytest.approx(float(nll[0] / n[0]), rel=1e-5)  # the gold one
    x = dialogue.build_input(tok, PERSONA_, ["hi how are you"], "bye")
    reply = torch.tensor([[t for t in x.labels if t != IGNORE]])
    prompt = torch.tensor([x.input_ids[: len(x.input_ids) - reply.shape[1]]])
    total, k = decoding.continuation_nll(model.lm, prompt, reply)  # segments are still zero
    assert float(-lm[0, 0]) == pytest.approx(total / k, rel=1e-4)
    with pytest.raises(ValueError):
        dialogue.candidate_scores(model, b, "bleu")


def test_respond_is_our_generate_with_speaker_embeddings(tok, model) -> None:
    history = ["hi how are you"]
    prompt = dialogue.build_input(tok, PERSONA_, history, None)
    ids = torch.tensor([prompt.input_ids])
    plain = decoding.generate(model.lm, ids, decoding.greedy, 8)  # segments are zero: same tokens
    with_segments = decoding.generate(dialogue.chat_forward(model, torch.tensor([prompt.segment_ids])),
                                      ids, decoding.greedy, 8)
    assert torch.equal(plain, with_segments)
    reply = dialogue.respond(model, tok, PERSONA_, history, decoding.greedy, max_new_tokens=8)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    tokens = plain[0].tolist()
    kept = tokens[: tokens.index(end)] if end in tokens else tokens
    assert reply == tok.decode(kept, skip_special_tokens=True).strip()
    with torch.no_grad():  # a trained speaker embedding changes what the bot says
        model.segments.weight[BOT] = 3.0
    try:
        moved = decoding.generate(dialogue.chat_forward(model, torch.tensor([prompt.segment_ids])),
                                  ids, decoding.greedy, 8)
        assert not torch.equal(moved, plain)
    finally:
        with torch.no_grad():
            model.segments.weight.zero_()


def test_a_head_on_the_lm_prior_starts_at_the_lm_ranking_and_trains(tok, model) -> None:
    b = dialogue.collate([Turn(PERSONA_, ["hi"], ["bye", "good thanks", "no"], 2),
                          Turn([], ["what do you do"], ["i work as a nurse", "ok", "yes"], 0)], tok, 1)
    prior = dialogue.DoubleHeads(model.lm, lm_prior=True).eval()
    lm = dialogue.candidate_scores(model, b, "lm")
    assert torch.allclose(dialogue.candidate_scores(prior, b, "mc"), lm, atol=1e-6)  # step 0: the LM
    assert not torch.allclose(dialogue.candidate_scores(model, b, "mc"), lm, atol=1e-3)  # a plain head: not
    prior.zero_grad()
    loss, _ = dialogue.double_heads_loss(prior, b)
    loss.backward()
    for p in (prior.mc_head.weight, prior.lm.model.layers[0].mlp.up_proj.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    prior.zero_grad()
