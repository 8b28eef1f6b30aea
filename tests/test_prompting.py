"""Tests for tutorial_lib.fewshot and tutorial_lib.prompting (tiny models, no pretraining)."""

from collections import Counter

import pytest
import torch

from tutorial_lib import fewshot, prompting
from tutorial_lib.models import TransformerConfig, TransformerLM
from tutorial_lib.tokenization import train_wordpiece

LINES = ["It was great . The movie was good and fun .", "It was bad . A terrible cat and a dog .",
         "What is the name of the city ? Who is the man ?"] * 20


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(LINES, vocab_size=200)


@pytest.fixture
def ours(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=False, pad_id=tokenizer.pad_token_id)
    return prompting.OurMaskedLM(TransformerLM(cfg), tokenizer)


# --- few-shot sampling --------------------------------------------------------------------------


def test_fewshot_sampling_is_reproducible_balanced_and_disjoint():
    labels = [0] * 50 + [1] * 30 + [2] * 40
    train, dev = fewshot.sample_indices(labels, k=8, seed=13)
    assert (train, dev) == fewshot.sample_indices(labels, k=8, seed=13)
    assert fewshot.sample_indices(labels, k=8, seed=21) != (train, dev)
    assert Counter(labels[i] for i in train) == {0: 8, 1: 8, 2: 8}
    assert Counter(labels[i] for i in dev) == {0: 8, 1: 8, 2: 8}
    assert not set(train) & set(dev)
    full, dev_full = fewshot.sample_indices(labels, k=None, seed=13, dev_k=4)
    assert len(full) == len(labels) - 12 and not set(full) & set(dev_full)


def test_k_larger_than_a_class_is_a_clear_error():
    with pytest.raises(fewshot.FewShotError, match="class 1 has only 30 .* smaller K"):
        fewshot.sample_indices([0] * 50 + [1] * 30, k=16, seed=13)


def test_load_fewshot_uses_train_for_train_and_dev_and_the_test_split(with_data):
    split = fewshot.load_fewshot("trec", k=4, seed=42)
    assert len(split.train) == len(split.dev) == 4 * 6 and len(split.test) == 500
    assert {r["text"] for r in split.train}.isdisjoint({r["text"] for r in split.dev})
    again = fewshot.load_fewshot("trec", k=4, seed=42)
    assert again.train == split.train and again.dev == split.dev


# --- templates, verbalizers, encoding -----------------------------------------------------------


def test_template_without_mask_is_a_clear_error():
    with pytest.raises(prompting.PromptError, match=r"exactly one \[MASK\]"):
        prompting.Template("<x> It was great .")


def test_label_missing_from_the_verbalizer_is_a_clear_error(ours):
    with pytest.raises(prompting.PromptError, match=r"no word for label\(s\) \['positive'\]"):
        prompting.verbalizer_ids(ours, {"negative": "bad"}, ["negative", "positive"])


def test_multi_piece_label_word_is_rejected_and_choose_verbalizer_skips_it(ours):
    assert len(ours.piece_ids("wonderfulness")) > 1
    with pytest.raises(prompting.PromptError, match="word pieces"):
        prompting.verbalizer_ids(ours, {"a": "wonderfulness"}, ["a"])
    assert prompting.choose_verbalizer(ours, {"a": ("wonderfulness", "good")}) == {"a": "good"}


def test_encoding_marks_the_mask_the_text_and_ends_with_sep(ours, tokenizer):
    rows = [{"text": "The movie was fun", "label": 1}]
    enc = prompting.encode_prompts(ours, prompting.Template("<x> It was [MASK] ."), rows)[0]
    toks = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    assert toks == ["The", "movie", "was", "fun", "It", "was", "[MASK]", ".", "[SEP]"]
    assert enc["mask_pos"] == 6 and enc["text_mask"] == [1, 1, 1, 1, 0, 0, 0, 0, 0]
    short = prompting.encode_prompts(ours, prompting.Template("[MASK] : <x>"), rows, max_len=5)[0]
    assert len(short["input_ids"]) == 5 and short["mask_pos"] == 0


@pytest.mark.parametrize("backbone", ["ours", "tiny_bert"])
def test_prompt_logits_are_the_mlm_logits_of_the_label_words(backbone, request):
    mlm = request.getfixturevalue(backbone)
    ids = prompting.verbalizer_ids(mlm, {"negative": "bad", "positive": "good"},
                                   ["negative", "positive"])
    model = prompting.PromptClassifier(mlm, "<x> It was [MASK] .", ids).eval()
    rows = [{"text": "The movie was fun", "label": 1}, {"text": "A cat", "label": 0}]
    batch = prompting.prompt_collate(mlm.pad_id)(model.encode(rows))
    logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    with torch.no_grad():
        if backbone == "ours":
            full = mlm.lm(batch["input_ids"], batch["attention_mask"]).logits
        else:
            full = mlm.model(input_ids=batch["input_ids"],
                             attention_mask=batch["attention_mask"]).logits
    expected = full[torch.arange(2), batch["mask_pos"]][:, ids]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


def test_train_fewshot_selects_on_dev_and_tests_once(ours):
    split = fewshot.FewShotSplit(
        "sst2", 2, 13,
        train=[{"text": "good fun", "label": 1}, {"text": "bad cat", "label": 0}] * 2,
        dev=[{"text": "good", "label": 1}, {"text": "bad", "label": 0}],
        test=[{"text": "fun", "label": 1}, {"text": "dog", "label": 0}] * 3,
        label_names=["negative", "positive"])
    method = prompting.prompt_method(ours, {"sst2": "<x> It was [MASK] ."},
                                     {"sst2": {"negative": "bad", "positive": "good"}})
    table, kept = prompting.compare_fewshot(
        {"manual prompt": method}, [split], lrs={"manual prompt": (1e-3, 1e-2)}, steps=4,
        batch_size=2, eval_every=2, keep=lambda m, s: True)
    row = table.iloc[0]
    assert row["lr"] in (1e-3, 1e-2) and row["best_step"] in (2, 4)
    run = kept[("manual prompt", "sst2", 2, 13)]
    assert [h["step"] for h in run.history] == [2, 4]
    assert run.dev_accuracy == max(h["dev_accuracy"] for h in run.history)
    assert run.test["confusion"].sum().item() == len(split.test)
    # the original masked LM was copied, never trained in place
    assert run.model.mlm is not ours
