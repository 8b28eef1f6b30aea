"""Tests for tutorial_lib.methods.probing.probing: sub-word alignment, feature extraction from a Backbone
(ours and Hugging Face), control tasks, selectivity, attention maps and token-label rows."""

import numpy as np
import pytest
import torch
from tiny import near

from tutorial_lib.backbones import Backbone
from tutorial_lib.config import PRECISION_ENV_VAR
from tutorial_lib.methods.probing import probing
from tutorial_lib.models import TransformerConfig, TransformerLM
from tutorial_lib.tokenization import train_wordpiece
from tutorial_lib.training import pad_collate


@pytest.fixture(scope="module")
def tokenizer():
    lines = ["the cat sat on the mat", "unbelievable things happen", "cats and dogs"] * 50
    return train_wordpiece(lines, vocab_size=60, min_frequency=1)


def tiny_backbone(tokenizer, causal: bool = False, n_layer: int = 2) -> Backbone:
    """Our architecture, random weights, the tiny tokenizer (no [CLS]/[SEP] around sentences)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=16, n_layer=n_layer, n_head=2,
                            d_ff=32, max_len=64, dropout=0.0, causal=causal,
                            pad_id=tokenizer.pad_token_id)
    return Backbone("tiny", "causal" if causal else "masked", tokenizer, TransformerLM(cfg), 64)


SENTENCES = probing.Sentences(
    tokens=[["unbelievable", "cats"], ["the", "cat", "sat", "on", "the", "mat"], ["dogs"]],
    upos=[[1, 2], [3, 2, 4, 5, 3, 2], [2]], deprel=[[0, 1], [2, 3, 4, 5, 2, 6], [7]],
    sent_ids=["a", "b", "c"])


def test_first_subword_positions_skip_specials_and_continuations():
    assert probing.first_subword_positions([None, 0, 0, 1, 2, 2, 2, None]) == {0: 1, 1: 3, 2: 4}
    assert probing.first_subword_positions([0, 1, 1, 3]) == {0: 0, 1: 1, 3: 3}  # word 2 erased


def test_encode_words_points_at_the_first_subword_of_every_word(tokenizer):
    words = ["unbelievable", "cats", "sat", "mat"]
    enc = probing.encode_words(tokenizer, [words], add_special_tokens=False, max_len=64)[0]
    assert enc.words == [0, 1, 2, 3]
    tokens = tokenizer.convert_ids_to_tokens(enc.input_ids)
    assert len(tokens) > len(words)  # some words are split into several sub-words
    for w, pos in zip(enc.words, enc.positions):
        assert not tokens[pos].startswith("##")
        assert words[w].startswith(tokens[pos])
        assert enc.word_ids[pos] == w and (pos == 0 or enc.word_ids[pos - 1] != w)


def test_truncation_drops_words_that_do_not_fit(tokenizer):
    words = ["unbelievable"] * 10
    enc = probing.encode_words(tokenizer, [words], add_special_tokens=False, max_len=8)[0]
    assert len(enc.input_ids) == 8 and 0 < len(enc.words) < 10
    assert max(enc.positions) < 8


def test_control_labels_are_a_deterministic_function_of_the_word_type():
    dist = np.array([0.5, 0.3, 0.2])
    words = ["the", "cat", "the", "dog", "cat", "the"]
    labels = probing.control_labels(words, dist, seed=0)
    assert labels[0] == labels[2] == labels[5] and labels[1] == labels[4]
    again = probing.control_labels(list(reversed(words)), dist, seed=0)[::-1]
    assert np.array_equal(labels, again)  # independent of order and of the other words
    assert probing.control_label("dog", dist, 0) == labels[3]
    many = probing.control_labels([f"w{i}" for i in range(4000)], dist, seed=0)
    np.testing.assert_allclose(np.bincount(many, minlength=3) / 4000, dist, atol=0.03)
    other_seed = probing.control_labels([f"w{i}" for i in range(200)], dist, seed=1)
    assert not np.array_equal(many[:200], other_seed)


def test_selectivity_is_probe_minus_control_accuracy():
    assert probing.selectivity(0.9, 0.6) == pytest.approx(0.3)
    rng = np.random.default_rng(0)
    sentences = probing.Sentences(
        tokens=[[f"w{rng.integers(30)}" for _ in range(12)] for _ in range(60)],
        upos=[[int(rng.integers(3)) for _ in range(12)] for _ in range(60)],
        deprel=[[0] * 12 for _ in range(60)], sent_ids=[str(i) for i in range(60)])
    n = sentences.n_words
    feats = probing.WordFeatures([rng.standard_normal((n, 4)).astype(np.float32)],
                                 np.repeat(np.arange(60), 12), np.tile(np.arange(12), 60))
    table = probing.probe_layers("m", feats, feats, sentences, sentences, props=("upos",),
                                 max_iter=50)
    row = table.iloc[0]
    assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control_accuracy"])
    assert 0 <= row["majority"] <= 1
    # the trivial classifier on the same words: its mean is the table's majority rate
    majority = probing.majority_correct_by_word(feats, feats, sentences, sentences, "upos")
    assert majority.mean() == pytest.approx(row["majority"])
    assert majority.index.equals(probing.correct_by_word(feats, feats, sentences, sentences,
                                                         "upos", 0, 50).index)


@pytest.mark.parametrize("causal", [True, False])
def test_recomputed_attention_weights_reproduce_the_attention_output(causal):
    torch.manual_seed(0)
    lm = TransformerLM(TransformerConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2, d_ff=32,
                                         max_len=16, dropout=0.0, causal=causal)).eval()
    ids = torch.randint(5, 40, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    outputs = []
    hooks = [b.attn.register_forward_hook(lambda m, a, o: outputs.append((a[0], o)))
             for b in lm.transformer.blocks]
    maps = probing.attention_maps(lm, ids, mask)
    for h in hooks:
        h.remove()
    assert len(maps) == 2 and maps[0].shape == (2, 2, 7, 7)
    for attn_map, block, (x, out) in zip(maps, lm.transformer.blocks, outputs[-2:]):
        torch.testing.assert_close(attn_map.sum(-1), torch.ones(2, 2, 7))
        if causal:
            assert torch.all(attn_map.triu(1) == 0)
        else:
            assert torch.all(attn_map[1, :, :, 5:] == 0)
        v = block.attn.qkv(x).split(16, dim=2)[2].view(2, 7, 2, 8).transpose(1, 2)
        y = (attn_map @ v).transpose(1, 2).reshape(2, 7, 16)
        torch.testing.assert_close(block.attn.proj(y), out, atol=1e-5, rtol=1e-4)


def test_token_label_rows_put_labels_on_first_subwords_only(tokenizer):
    backbone = tiny_backbone(tokenizer)
    sentences = probing.Sentences([["unbelievable", "cats"]], [[3, 7]], [[0, 1]], ["s"])
    row = probing.token_label_rows(backbone, sentences, "upos")[0]
    enc = probing.encode_words(tokenizer, sentences.tokens, add_special_tokens=False,
                               max_len=128)[0]
    assert row["input_ids"] == enc.input_ids  # ours: no special tokens around the words
    expected = [-100] * len(row["input_ids"])
    expected[enc.positions[0]], expected[enc.positions[1]] = 3, 7
    assert row["labels"] == expected
    batch = pad_collate(0)([row, {"input_ids": [5], "labels": [2]}])  # token labels: padded
    assert batch["labels"][1].tolist() == [2] + [-100] * (len(expected) - 1)
    assert batch["attention_mask"][1].tolist() == [1] + [0] * (len(expected) - 1)


@pytest.mark.parametrize("causal", [False, True])
def test_extract_features_reads_every_layer_at_first_subwords(tokenizer, monkeypatch, causal):
    monkeypatch.setenv(PRECISION_ENV_VAR, "fp32")  # exact comparison
    backbone = tiny_backbone(tokenizer, causal=causal)
    feats = probing.extract_features(backbone, SENTENCES, batch_size=2)  # batched by length
    assert len(feats.layers) == backbone.n_layers + 1 == 3
    assert all(x.shape == (SENTENCES.n_words, 16) and x.dtype == np.float32 for x in feats.layers)
    assert feats.sentence.tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 2]
    assert feats.word.tolist() == [0, 1, 0, 1, 2, 3, 4, 5, 0]
    assert feats.labels(SENTENCES, "upos").tolist() == [1, 2, 3, 2, 4, 5, 3, 2, 2]
    assert feats.words(SENTENCES)[2:4] == ["the", "cat"]
    encoded = probing.encode_sentences(backbone, SENTENCES)
    row = 0
    for enc in encoded:  # each sentence alone, unpadded
        ids = near(backbone.encoder, torch.tensor([enc.input_ids]))
        with torch.no_grad():
            out = backbone.encoder(ids, torch.ones_like(ids), output_hidden_states=True)
        want = [out.hidden_states[0], out.hidden_states[1], out.last_hidden_state]  # top: ln_f
        for layer, h in enumerate(want):
            np.testing.assert_allclose(feats.layers[layer][row: row + len(enc.words)],
                                       h[0, enc.positions].cpu().numpy(), atol=1e-5, rtol=1e-4)
        row += len(enc.words)
    final = probing.extract_features(backbone, SENTENCES, final=True)
    assert len(final.layers) == 1
    np.testing.assert_allclose(final.layers[0], feats.layers[-1], atol=1e-5, rtol=1e-4)


def test_extract_features_of_a_hugging_face_encoder_skip_its_special_tokens(tiny_bert,
                                                                            monkeypatch):
    monkeypatch.setenv(PRECISION_ENV_VAR, "fp32")
    backbone = Backbone("tiny-bert", "masked", tiny_bert.tokenizer, tiny_bert.lm, 64)
    encoded = probing.encode_sentences(backbone, SENTENCES)
    assert encoded[0].input_ids[0] == tiny_bert.tokenizer.cls_token_id
    assert encoded[0].input_ids[-1] == tiny_bert.tokenizer.sep_token_id
    assert encoded[0].positions[0] == 1  # the first word comes after [CLS]
    feats = probing.extract_features(backbone, SENTENCES)
    assert len(feats.layers) == backbone.n_layers + 1
    ids = near(backbone.encoder, torch.tensor([encoded[1].input_ids]))
    with torch.no_grad():
        out = backbone.encoder(input_ids=ids, attention_mask=torch.ones_like(ids),
                               output_hidden_states=True)
    np.testing.assert_allclose(feats.layers[-1][2:8],
                               out.last_hidden_state[0, encoded[1].positions].cpu(), atol=1e-5, rtol=1e-4)


def test_notebook_10s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_controls():
    """Notebook 10's self-check, run as the learner would: the stub is reported, the solution passes
    against ``probe_layers``, and three plausible mistakes fail: control labels drawn per token
    instead of per word type, from a uniform distribution, and selectivity with its sign reversed."""
    from notebook_selfcheck import LearnerRun

    run = LearnerRun("10_probing", {"probing": probing}, "my_selectivity", "random_words",
                     "selectivity_reference", n=3)
    ref, cases, mine = run.reference, run.cases, run.mine
    assert all(0 < acc < 1 and sel > 0 for acc, _, sel in map(lambda c: ref(*c), cases()))

    def with_controls(draw):
        def fn(X_tr, y_tr, w_tr, X_te, y_te, w_te, seed):
            c_tr, c_te = draw(y_tr, w_tr, seed), draw(y_tr, w_te, seed)
            acc = probing.probe_accuracy(X_tr, y_tr, X_te, y_te)
            return acc, probing.probe_accuracy(X_tr, c_tr, X_te, c_te), None
        return fn

    def per_token(y_tr, words, seed):
        dist = probing.label_distribution(y_tr, int(y_tr.max()) + 1)
        return np.random.default_rng([seed, len(words)]).choice(len(dist), len(words), p=dist)

    def uniform(y_tr, words, seed):
        k = int(y_tr.max()) + 1
        return probing.control_labels(words, np.full(k, 1 / k), seed)

    for draw in (per_token, uniform):
        out = run.check(with_controls(draw))
        assert out.message.startswith("✗ case ") and "[1]: largest difference" in out.message, draw.__name__
    reversed_sign = run.check(lambda *a: (lambda r: (r[0], r[1], r[1] - r[0]))(mine(*a)))
    assert "[2]: largest difference" in reversed_sign.message
