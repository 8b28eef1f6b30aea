"""Tests for tutorial_lib.methods.prompts.prompting: masked-LM wrappers, templates, verbalizers, prompt
encoding and the prompt classifier (tiny models, no pretraining). The few-shot loop is tested in
test_fewshot.py, the few-shot splits in test_tasks_metrics.py."""

import pytest
import torch
from tiny import tensors_equal

from tutorial_lib.backbones import Backbone
from tutorial_lib.methods.prompts import prompting
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
    return Backbone("ours-mlm", "masked", tokenizer, TransformerLM(cfg), 32)


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
        full = mlm.lm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    expected = full[torch.arange(2), batch["mask_pos"]][:, ids]
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


def test_trained_label_rows_start_at_the_words_and_train_with_the_embeddings_frozen(ours):
    ids = prompting.verbalizer_ids(ours, {"negative": "bad", "positive": "good"},
                                   ["negative", "positive"])
    plain = prompting.PromptClassifier(ours, "<x> It was [MASK] .", ids).eval()
    rows = [{"text": "The movie was fun", "label": 1}, {"text": "A cat", "label": 0}]
    batch = prompting.prompt_collate(ours.pad_id)(plain.encode(rows))
    model = prompting.PromptClassifier(ours, "<x> It was [MASK] .", ids, train_label_rows=True)
    torch.testing.assert_close(model.eval()(**batch).logits, plain(**batch).logits)
    for p in ours.lm.parameters():
        p.requires_grad_(False)
    embedding = ours.decoder_weight.detach().clone()
    model.train()(**batch).loss.backward()
    torch.optim.SGD([model.label_rows], lr=1.0).step()
    assert model.label_rows.grad.abs().sum() > 0
    assert tensors_equal(ours.decoder_weight, embedding)  # the vocabulary is untouched
    assert not torch.allclose(model.label_rows, embedding[ids])


def test_a_causal_lm_answers_with_the_next_token_and_has_no_mask(tokenizer):
    from tutorial_lib.backbones import BackboneError

    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=True, pad_id=tokenizer.pad_token_id)
    causal = Backbone("ours", "causal", tokenizer, TransformerLM(cfg), 32)
    assert causal.answer_slot == "next" and causal.special_wrap() == ([], [tokenizer.sep_token_id])
    with pytest.raises(BackboneError, match="no mask token"):
        _ = causal.mask_id
    with pytest.raises(prompting.PromptError, match="causal LM's decoder layers"):
        prompting.freeze_below(causal, 1)  # ours has no Hugging Face decoder layers to keep


def test_load_mlm_refuses_backbones_without_a_masked_lm_head(with_data):
    from tutorial_lib import config
    from tutorial_lib.backbones import BackboneError

    scale = config.get_scale("smoke")
    with pytest.raises(prompting.PromptError, match="causal model.*masked LM"):
        prompting.load_mlm("scratch", scale)  # our architecture, but a causal LM
    with pytest.raises(BackboneError, match="no masked head"):
        prompting.load_mlm("minilm", scale)  # MiniLM was saved without its MLM head


def test_hugging_face_masked_lm_features_give_its_own_logits(tiny_bert):
    ids = torch.tensor([[tiny_bert.tokenizer.cls_token_id, 1000, 2000, tiny_bert.mask_id,
                         tiny_bert.tokenizer.sep_token_id]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        h = tiny_bert.features(ids, mask)
        want = tiny_bert.lm(input_ids=ids, attention_mask=mask).logits
    got = h @ tiny_bert.decoder_weight.T + tiny_bert.decoder_bias
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    before, after = tiny_bert.special_wrap()
    assert before == [tiny_bert.tokenizer.cls_token_id] and after == [tiny_bert.tokenizer.sep_token_id]
