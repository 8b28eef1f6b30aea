"""Tests of tutorial_lib.methods.instruction.zeroshot on a tiny random Llama with a word-level
ChatML tokenizer (no Hub): every log-probability and every ranking against a hand computation
from the model's full logits, one sequence at a time."""

from __future__ import annotations

import pytest
import torch
from tiny import word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from tutorial_lib.floors import Floor
from tutorial_lib.methods.instruction import instructions, zeroshot
from tutorial_lib.methods.instruction.instructions import Item
from tutorial_lib.models import IGNORE_INDEX
from tutorial_lib.training import pad_collate

WORDS = "is it good ? the plot was dull film great yes no maybe not really entail".split()
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                      initializer_range=0.5, bos_token_id=None, eos_token_id=None, pad_token_id=1)
    return LlamaForCausalLM(cfg).eval()


def by_hand(model, prompt: list[int], answer: list[int]) -> float:
    """log π(answer | prompt) from the full model's logits on the one unpadded sequence."""
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        logp = model(input_ids=ids).logits[0].log_softmax(-1)
    return sum(float(logp[len(prompt) - 1 + j, a]) for j, a in enumerate(answer))


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_sequence_logps_of_a_padded_batch_equal_the_hand_computation(tok, model):
    pairs = [("is it good ?", "yes"), ("the plot was dull", "not really"), ("film", "maybe no yes")]
    rows = [instructions.render(tok, p, r) for p, r in pairs]
    batch = pad_collate(tok.pad_token_id)(rows)
    with torch.no_grad():
        total, count = zeroshot.sequence_logps(model, batch["input_ids"], batch["attention_mask"],
                                               batch["labels"])
    for i, row in enumerate(rows):
        n = row["labels"].count(IGNORE_INDEX)
        assert total[i].item() == pytest.approx(by_hand(model, row["input_ids"][:n], row["input_ids"][n:]),
                                                abs=1e-4)
        assert count[i].item() == len(row["input_ids"]) - n


def test_the_response_loss_is_the_hugging_face_loss_on_the_same_labels(tok, model):
    rows = [instructions.render(tok, p, r) for p, r in [("is it good ?", "yes no"), ("film", "maybe")]]
    batch = pad_collate(tok.pad_token_id)(rows)
    with torch.no_grad():
        ours = zeroshot.response_loss(model, batch)
        theirs = model(**batch).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)


def test_the_loss_sends_gradient_to_the_model(tok, model):
    batch = pad_collate(tok.pad_token_id)([instructions.render(tok, "is it good ?", "yes")])
    model.zero_grad()
    zeroshot.response_loss(model, batch).backward()
    assert model.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    model.zero_grad()


def test_candidates_on_the_prompts_cache_score_as_each_whole_sequence(tok, model):
    prompt = zeroshot.prompt_ids(tok, "is it good ?")
    candidates = [ids(tok, "yes"), ids(tok, "not really"), ids(tok, "maybe no yes entail")]
    total, count = zeroshot.candidate_logps(model, prompt, candidates)
    for i, c in enumerate(candidates):
        assert total[i].item() == pytest.approx(by_hand(model, prompt, c), abs=1e-4)
        assert count[i].item() == len(c)


@pytest.mark.parametrize("options", [("yes", "no", "not really"), ("yes", "no", "maybe")],
                         ids=["a two-token option: on the cache", "one-token options: batched"])
@pytest.mark.parametrize("length_norm", [False, True])
def test_the_ranking_and_the_accuracy_equal_the_hand_computation(tok, model, length_norm, options):
    items = [Item("t", p, options, label)
             for p, label in [("is it good ?", 0), ("the plot was dull", 2), ("film great", 1),
                              ("is the film dull ?", 0)]]
    hand = []
    for item in items:
        prompt = zeroshot.prompt_ids(tok, item.prompt)
        scores = [by_hand(model, prompt, ids(tok, o)) / (len(ids(tok, o)) if length_norm else 1)
                  for o in item.options]
        hand.append(max(range(len(scores)), key=scores.__getitem__))
    scores = zeroshot.option_scores(model, tok, items, batch_size=3)  # a padded batch, and one alone
    for item, (total, count) in zip(items, scores):
        prompt = zeroshot.prompt_ids(tok, item.prompt)
        assert total.tolist() == pytest.approx([by_hand(model, prompt, ids(tok, o)) for o in item.options],
                                               abs=1e-4)
        assert count.tolist() == [len(ids(tok, o)) for o in item.options]
    out = zeroshot.evaluate(model, tok, {"t": items}, {"t": Floor(0.5)}, length_norm=length_norm,
                            batch_size=3)["t"]
    assert out["correct"] == [h == item.label for h, item in zip(hand, items)]
    assert out["accuracy"] == pytest.approx(sum(out["correct"]) / len(items))
    assert out["floor"] == 0.5


def test_sum_and_mean_rank_differently_when_lengths_differ():
    total, count = torch.tensor([-3.0, -4.0]), torch.tensor([1, 4])
    assert zeroshot.choose(total, count) == 0
    assert zeroshot.choose(total, count, length_norm=True) == 1


def test_the_shared_prefix_is_the_longest_common_start_but_leaves_each_prompt_a_token():
    assert zeroshot.shared_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == 2
    assert zeroshot.shared_prefix([[1, 2, 3], [1, 2, 3]]) == 2  # one token of its own each
    assert zeroshot.shared_prefix([[7, 1], [8, 1]]) == 0 and zeroshot.shared_prefix([]) == 0


def test_next_token_scores_on_the_shared_prefix_cache_equal_each_prompt_alone(tok, model):
    prompts = [zeroshot.prompt_ids(tok, t) for t in ("is it good ?", "the plot was dull", "film")]
    assert zeroshot.shared_prefix(prompts) > 0  # the chat template's start
    cached = zeroshot.next_token_logps(model, prompts, batch_size=2)
    for p, row in zip(prompts, cached):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([p])).logits[0, -1].log_softmax(-1)
        assert torch.allclose(row, alone, atol=1e-4)


def test_calibration_subtracts_the_content_free_prior_before_the_ranking(tok, model):
    total, count = torch.tensor([-1.0, -2.0]), torch.tensor([1, 1])
    assert zeroshot.choose(total, count) == 0
    assert zeroshot.choose(total, count, prior=torch.tensor([-0.5, -3.0])) == 1  # -0.5 vs +1.0
    items = [Item("sst2", p, ("negative", "positive"), y) for p, y in [("is it good ?", 1), ("dull", 0)]]
    out = zeroshot.evaluate(model, tok, {"sst2": items}, {"sst2": Floor(0.5)}, calibrate=True)["sst2"]
    (prior, _), = zeroshot.option_scores(model, tok, [instructions.content_free("sst2")])
    hand = [zeroshot.choose(t, c, prior=prior) for t, c in zeroshot.option_scores(model, tok, items)]
    assert out["calibrated answers"] == hand and len(out["answers"]) == 2
    assert out["calibrated accuracy"] == sum(h == i.label for h, i in zip(hand, items)) / 2
