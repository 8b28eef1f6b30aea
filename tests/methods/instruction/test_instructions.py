"""Tests of tutorial_lib.methods.instruction.instructions: the templates, the mixture (held-out
task types never in it) and the loss mask, which must cover exactly the response's tokens — with
a word-level ChatML tokenizer (always) and SmolLM2's own BPE tokenizer (where installed)."""

from __future__ import annotations

import pytest
from data_helpers import needs_data
from tiny import word_tokenizer
from transformers import AutoTokenizer

from tutorial_lib import backbones, config, tasks
from tutorial_lib.methods.instruction import instructions
from tutorial_lib.methods.instruction.settings import InstructSettings
from tutorial_lib.models import IGNORE_INDEX

WORDS = "is this review positive or negative ? great film dull plot yes no".split()


@pytest.fixture(scope="module")
def words():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="module")
def smollm2():
    try:
        return AutoTokenizer.from_pretrained(backbones.model_path("smollm2", weights=False))
    except backbones.BackboneError as err:
        pytest.skip(f"SmolLM2's tokenizer is not installed: {err}")


def _response_part(tokenizer, prompt, response):
    """The conversation's text after the prompt's: what the loss should cover."""
    before = instructions.chat_text(tokenizer, prompt)
    return instructions.chat_text(tokenizer, prompt, response)[len(before):]


@pytest.mark.parametrize("which", ["words", "smollm2"])
@pytest.mark.parametrize("response", ["positive", "negative", "no"])
def test_the_mask_covers_exactly_the_response_tokens(request, which, response):
    tok = request.getfixturevalue(which)
    prompt = "is this review positive or negative ? great film dull plot"
    row = instructions.render(tok, prompt, response)
    full = tok(instructions.chat_text(tok, prompt, response), add_special_tokens=False)["input_ids"]
    assert row["input_ids"] == full  # tokenising the two parts apart changed no token
    kept = [i for i, y in enumerate(row["labels"]) if y != IGNORE_INDEX]
    n = len(row["input_ids"]) - len(kept)
    assert kept == list(range(n, len(row["input_ids"])))  # one block at the end: the response
    assert [row["labels"][i] for i in kept] == row["input_ids"][n:]  # labels = the tokens themselves
    expected = tok(_response_part(tok, prompt, response), add_special_tokens=False)["input_ids"]
    assert row["input_ids"][n:] == expected
    assert response in tok.decode(row["input_ids"][n:])
    assert response not in tok.decode(row["input_ids"][:n]).split("assistant")[-1]  # not in the prompt


def test_the_smollm2_response_is_the_answer_and_the_end_of_turn(smollm2):
    row = instructions.render(smollm2, "Is it good?", "positive")
    n = row["labels"].count(IGNORE_INDEX)
    assert smollm2.decode(row["input_ids"][n:]) == "positive<|im_end|>\n"
    assert smollm2.decode(row["input_ids"][:n]).endswith("<|im_start|>assistant\n")
    table = instructions.show_mask(smollm2, row)
    assert table["in the loss"].sum() == len(row["input_ids"]) - n


def test_too_long_a_row_loses_prompt_tokens_and_keeps_the_whole_response(words):
    prompt = " ".join(["great film"] * 30)
    whole = instructions.render(words, prompt, "positive")
    cut = instructions.render(words, prompt, "positive", max_len=20)
    assert len(cut["input_ids"]) == 20
    n = whole["labels"].count(IGNORE_INDEX)
    assert cut["input_ids"][-(len(whole["input_ids"]) - n):] == whole["input_ids"][n:]


def test_a_tokenizer_without_a_chat_template_gets_chatml(words):
    assert not words.chat_template
    text = instructions.chat_text(words, "hi", "yes")
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyes<|im_end|>\n"


def test_every_task_of_every_scale_has_templates_with_one_answer_per_label():
    names = {n for scale in ("smoke", "classroom", "gpu", "paper")
             for s in [InstructSettings.at(scale)] for n in (*s.train_tasks, *s.heldout_tasks)}
    assert names <= set(instructions.TEMPLATES)
    for name, templates in instructions.TEMPLATES.items():
        assert len(templates) >= 2, name
        pair = len(tasks.spec(name).columns) == 2
        for t in templates:
            assert ("{a}" in t.text and "{b}" in t.text) == pair and ("{text}" in t.text) != pair, name
            assert len(set(t.answers)) == len(t.answers)


def test_a_pair_template_fills_both_sentences():
    t = instructions.TEMPLATES["rte"][1]
    prompt = t.prompt(f"The cat sat.{tasks.SEP}A cat sat.")
    assert "Premise: The cat sat.\nHypothesis: A cat sat." in prompt


@needs_data
def test_the_mixture_answers_each_example_with_its_labels_word_and_holds_no_heldout_task():
    s = InstructSettings.at("smoke")
    examples = instructions.mixture(s.train_tasks, 6, seed=0)
    assert sorted({e.task for e in examples}) == sorted(s.train_tasks)
    assert not {e.task for e in examples} & set(s.heldout_tasks)
    assert len(examples) == 6 * len(s.train_tasks)
    sst2 = tasks.load_task("sst2", train_examples=6).train
    right = {t.prompt(x): t.answers[y] for x, y in zip(sst2["text"], sst2["label"])
             for t in instructions.TEMPLATES["sst2"]}
    ours = [e for e in examples if e.task == "sst2"]
    assert len(ours) == 6 and all(e.response == right[e.prompt] for e in ours)
    assert instructions.mixture(s.train_tasks, 6, seed=0) == examples  # seeded


@needs_data
def test_heldout_items_carry_the_options_the_label_and_the_majority_floor():
    items, floor = instructions.heldout_items("rte", 20)
    assert len(items) == 20 and all(i.options == ("yes", "no") for i in items)
    labels = tasks.load_task("rte", test_examples=20).test["label"]
    assert [i.label for i in items] == list(labels)
    assert 0 < floor.mean < 1 and "majority" in floor.what


@needs_data
def test_balanced_questions_hold_as_many_of_each_label_and_their_floor_is_a_half():
    items, floor = instructions.heldout_items("mrpc", 40, balance=True)
    labels = [i.label for i in items]
    assert len(items) == 40 and labels.count(0) == labels.count(1) == 20
    assert floor.mean == 0.5
    assert instructions.heldout_items("mrpc", 40, balance=True)[0] == items  # a fixed draw


@pytest.mark.parametrize("scale", list(config.SCALES))
def test_heldout_tasks_are_never_trained_on_at_any_scale(scale):
    s = InstructSettings.at(scale)
    assert not set(s.heldout_tasks) & set(s.train_tasks)
    assert set(s.seen_tasks) <= set(s.train_tasks)  # a seen type: the mixture trains on it
    for name in (*s.train_tasks, *s.heldout_tasks):
        tasks.spec(name)  # raises for an unknown task
    assert s.candidates is None or s.candidates >= 2


def test_the_question_pool_gives_each_seed_other_balanced_questions_with_its_floor():
    pool = instructions.question_pool(["mrpc", "cola"], 20, [0, 1, 2], balance=True)
    again = instructions.question_pool(["mrpc", "cola"], 20, [0, 1, 2], balance=True)
    assert pool == again  # a fixed draw
    for name in ("mrpc", "cola"):
        prompts = [{i.prompt for i in pool[s][0][name]} for s in (0, 1, 2)]
        assert all(len(p) == 20 for p in prompts) and not (prompts[0] & prompts[1] | prompts[1] & prompts[2]
                                                           | prompts[0] & prompts[2])  # disjoint
        for s in (0, 1, 2):
            assert sum(i.label for i in pool[s][0][name]) == 10  # balanced per seed
            assert pool[s][1][name].mean == 0.5
    other = instructions.question_pool(["mrpc"], 20, [1000, 1001, 1002], balance=True)
    assert {i.prompt for i in other[1000][0]["mrpc"]} != {i.prompt for i in pool[0][0]["mrpc"]}


def test_content_free_questions_hold_no_content_and_no_label():
    pair, single = instructions.content_free("rte"), instructions.content_free("sst2")
    assert pair.prompt.count("N/A") == 2 and single.prompt.count("N/A") == 1
    assert pair.label == single.label == -1 and pair.options == instructions.TEMPLATES["rte"][0].answers


def test_a_dev_mixture_comes_from_the_validation_split_never_trained_on():
    train = instructions.mixture(["sst2", "trec"], 12, seed=0)
    dev = instructions.mixture(["sst2", "trec"], 6, seed=0, split="validation")
    assert len(dev) == 12 and not {e.prompt for e in train} & {e.prompt for e in dev}
    with pytest.raises(ValueError, match="split"):
        instructions.mixture(["sst2"], 2, split="test")
