"""Tests for tutorial_lib.methods.probing.amnesic: the position control property, masked-word positions of
a masked LM, the LM's behaviour under projections, the adversarial POS head and the fresh probe.

Tiny random models and a tokenizer trained on a few lines (words split into several sub-words);
no pretraining and no data. Comparisons that must be exact run in fp32.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch
from datasets import Dataset
from torch import nn

from tutorial_lib import tasks
from tutorial_lib.backbones import Backbone
from tutorial_lib.config import PRECISION_ENV_VAR
from tutorial_lib.heads import GradientReversalLayer, HeadConfig, MultiHeadModel
from tutorial_lib.methods.probing import amnesic, inlp, probing
from tutorial_lib.models import IGNORE_INDEX, Output, TransformerConfig, TransformerLM
from tutorial_lib.settings import Budget
from tutorial_lib.tokenization import train_wordpiece
from tutorial_lib.training import pad_collate

LINES = ["the cat sat on the mat", "unbelievable things happen", "cats and dogs",
         "a dog ran home"] * 50
WORDS = ["the", "cat", "sat", "on", "mat", "things", "happen", "cats", "and", "dogs", "a",
         "dog", "ran", "home"]


@pytest.fixture(autouse=True)
def fp32(monkeypatch):
    monkeypatch.setenv(PRECISION_ENV_VAR, "fp32")


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(LINES, vocab_size=60, min_frequency=1)


def tiny_backbone(tokenizer, causal: bool = False, d: int = 16, seed: int = 0) -> Backbone:
    """Our architecture with random weights, built by hand like ``backbones._load_ours``."""
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=d, n_layer=2, n_head=2, d_ff=2 * d,
                            max_len=64, dropout=0.0, causal=causal, pad_id=tokenizer.pad_token_id)
    return Backbone("tiny", "causal" if causal else "masked", tokenizer, TransformerLM(cfg).eval(),
                    64)


def sentences(n: int, seed: int = 0, min_len: int = 1, max_len: int = 20) -> probing.Sentences:
    """Random sentences over WORDS. ``upos`` is a unique code of (sentence, word) so that every
    masked position can be traced back; ``deprel`` is the word's index."""
    rng = np.random.default_rng(seed)
    tokens = [[WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(min_len, max_len + 1))]
              for _ in range(n)]
    return probing.Sentences(tokens, [[100 * s + w for w in range(len(t))] for s, t in enumerate(tokens)],
                             [list(range(len(t))) for t in tokens], [str(s) for s in range(n)])


def where(mp: amnesic.MaskedPositions) -> list[tuple[int, int]]:
    """(sentence, word) of every masked position, decoded from the upos codes."""
    return [(int(c) // 100, int(c) % 100) for c in mp.labels["upos"]]


def encode_masked(backbone: Backbone, enc: probing.EncodedSentence, masked_words: set[int]) -> torch.Tensor:
    """The expected masked input: every sub-word of the masked words is [MASK]."""
    ids = [backbone.tokenizer.mask_token_id if w in masked_words else i
           for i, w in zip(enc.input_ids, enc.word_ids)]
    return torch.tensor([ids])


# --- the control property -----------------------------------------------------------------------


def test_position_bucket_edges():
    idx = np.array([0, 3, 4, 8, 9, 15, 16, 40])
    assert amnesic.position_bucket(idx).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert int(amnesic.position_bucket(4)) == 1
    assert len(amnesic.POSITION_NAMES) == len(amnesic.POSITION_EDGES) + 1 == 4


# --- masked positions ---------------------------------------------------------------------------


def test_every_word_masked_gives_the_hidden_state_of_the_all_mask_input(tokenizer):
    bb = tiny_backbone(tokenizer)
    sents = sentences(6)
    mp = amnesic.masked_positions(bb, sents, mask_fraction=1.0)
    assert len(mp) == sents.n_words and mp.hidden.shape == (sents.n_words, 16)
    assert mp.hidden.dtype == np.float32
    encoded = probing.encode_sentences(bb, sents)
    assert sorted(where(mp)) == [(s, w) for s, e in enumerate(encoded) for w in e.words]
    for i, (s, w) in enumerate(where(mp)):
        e = encoded[s]
        pos = e.positions[e.words.index(w)]
        assert mp.target[i] == e.input_ids[pos]  # the original first sub-word, not [MASK]
        assert mp.labels["deprel"][i] == sents.deprel[s][w]
        assert mp.labels["position"][i] == amnesic.position_bucket(w)
        with torch.no_grad():
            h = bb.encoder(encode_masked(bb, e, set(e.words))).last_hidden_state[0, pos]
        np.testing.assert_allclose(mp.hidden[i], h.numpy(), atol=1e-5, rtol=1e-4)


def test_at_least_one_word_per_sentence_and_all_of_its_subwords_masked(tokenizer):
    bb = tiny_backbone(tokenizer)
    # one-word sentences of several sub-words, and longer ones
    tokens = [["unbelievable"], ["home"]] + sentences(8, seed=1).tokens
    sents = probing.Sentences(tokens, [[100 * s + w for w in range(len(t))]
                                       for s, t in enumerate(tokens)],
                              [list(range(len(t))) for t in tokens], [str(s) for s in range(10)])
    encoded = probing.encode_sentences(bb, sents)
    assert len(encoded[0].input_ids) > 1 and len(encoded[1].input_ids) > 1  # split into pieces
    mp = amnesic.masked_positions(bb, sents, mask_fraction=0.0, seed=3)  # the floor: one each
    assert sorted(s for s, _ in where(mp)) == list(range(len(sents)))
    for i, (s, w) in enumerate(where(mp)):
        e = encoded[s]
        pos = e.positions[e.words.index(w)]
        assert mp.target[i] == e.input_ids[pos]
        with torch.no_grad():  # the hidden state is that of the input with *every* piece masked
            h = bb.encoder(encode_masked(bb, e, {w})).last_hidden_state[0, pos]
        np.testing.assert_allclose(mp.hidden[i], h.numpy(), atol=1e-5, rtol=1e-4)


def test_masks_are_seeded_and_rounds_add_masks(tokenizer):
    bb = tiny_backbone(tokenizer)
    sents = sentences(10, seed=2, min_len=8)
    a = amnesic.masked_positions(bb, sents, mask_fraction=0.3, seed=0)
    b = amnesic.masked_positions(bb, sents, mask_fraction=0.3, seed=0)
    c = amnesic.masked_positions(bb, sents, mask_fraction=0.3, seed=1)
    assert sorted(where(a)) == sorted(where(b)) and sorted(where(a)) != sorted(where(c))
    np.testing.assert_array_equal(a.hidden, b.hidden)
    for s in range(len(sents)):  # about 30 % of the words, at least one
        n = sum(1 for t, _ in where(a) if t == s)
        assert 1 <= n <= len(sents.tokens[s])
    assert 0.15 < len(a) / sents.n_words < 0.45
    three = amnesic.masked_positions(bb, sents, mask_fraction=0.3, rounds=3, seed=0)
    assert all(sum(1 for t, _ in where(three) if t == s) >= 3 for s in range(len(sents)))
    assert len(three) > 2 * len(a)


def test_masked_positions_refuse_a_causal_lm(tokenizer):
    with pytest.raises(ValueError, match="masked LM"):
        amnesic.masked_positions(tiny_backbone(tokenizer, causal=True), sentences(2))


def test_a_hugging_face_masked_lm_keeps_its_special_tokens(tiny_bert):
    bb = Backbone("tiny-bert", "masked", tiny_bert.tokenizer, tiny_bert.lm.eval(), 64)
    sents = sentences(3, seed=4)
    mp = amnesic.masked_positions(bb, sents, mask_fraction=1.0)
    encoded = probing.encode_sentences(bb, sents)
    for i, (s, w) in enumerate(where(mp)):
        e = encoded[s]
        pos = e.positions[e.words.index(w)]
        assert pos >= 1 and mp.target[i] == e.input_ids[pos]
        ids = encode_masked(bb, e, set(e.words))  # [CLS] … [SEP] stay as they are
        assert ids[0, 0] == tiny_bert.tokenizer.cls_token_id
        with torch.no_grad():
            h = bb.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        np.testing.assert_allclose(mp.hidden[i], h[0, pos].numpy(), atol=1e-5, rtol=1e-4)
    # the LM head of a Hugging Face MLM reads the same hidden states
    logits = amnesic.lm_logits(bb, mp.hidden[:2])
    with torch.no_grad():
        want = tiny_bert.lm.cls(torch.as_tensor(mp.hidden[:2]))
    torch.testing.assert_close(logits, want)


# --- the LM under projections ---------------------------------------------------------------------


def designed_backbone(tokenizer) -> tuple[Backbone, list[int]]:
    """A backbone whose (tied) LM head maps 5·e_k to token TARGETS[k] and every other token to 0."""
    bb = tiny_backbone(tokenizer)
    targets = [10, 11, 12, 13]
    with torch.no_grad():
        bb.lm.transformer.tok_emb.weight.zero_()
        for k, t in enumerate(targets):
            bb.lm.transformer.tok_emb.weight[t, k] = 1.0
    return bb, targets


def designed_positions(targets: list[int], n: int = 40) -> amnesic.MaskedPositions:
    rng = np.random.default_rng(0)
    k = np.arange(n) % len(targets)
    hidden = (5.0 * np.eye(16)[k] + 0.01 * rng.standard_normal((n, 16))).astype(np.float32)
    return amnesic.MaskedPositions(hidden, np.array([targets[i] for i in k]),
                                   {"upos": k, "position": np.zeros(n, dtype=np.int64)})


def test_lm_metrics_without_a_projection_are_the_models_own_accuracy_and_zero_kl(tokenizer):
    bb = tiny_backbone(tokenizer)
    mp = amnesic.masked_positions(bb, sentences(8), mask_fraction=0.5)
    out = amnesic.lm_metrics(bb, mp)
    with torch.no_grad():
        pred = bb.lm.lm_head(torch.as_tensor(mp.hidden)).argmax(-1).numpy()
    assert out["kl"] == 0.0
    assert out["lm_accuracy"] == pytest.approx(float(np.mean(pred == mp.target)))
    identity = amnesic.lm_metrics(bb, mp, np.eye(16))
    assert identity["kl"] == pytest.approx(0.0, abs=1e-6)
    assert identity["lm_accuracy"] == out["lm_accuracy"]


def test_removing_the_direction_that_carries_a_target_costs_accuracy(tokenizer):
    bb, targets = designed_backbone(tokenizer)
    mp = designed_positions(targets)
    assert amnesic.lm_metrics(bb, mp) == {"lm_accuracy": 1.0, "kl": 0.0}
    v = np.eye(16)[0]  # the direction of the first target word
    P = np.eye(16) - np.outer(v, v)
    hit = amnesic.lm_metrics(bb, mp, P)
    assert hit["lm_accuracy"] == pytest.approx(0.75)  # that quarter of the positions is lost
    assert hit["kl"] > 0.1  # p moved from ~0.7 on the target word to uniform there
    logits = amnesic.lm_logits(bb, mp.hidden, P)
    with torch.no_grad():
        h = torch.as_tensor(mp.hidden)
        want = bb.lm.lm_head(h @ torch.as_tensor(P, dtype=torch.float32))
        log_p, log_q = bb.lm.lm_head(h).log_softmax(-1), want.log_softmax(-1)
    torch.testing.assert_close(logits, want)
    # D_KL(p_original ‖ p_projected), not the reverse
    kl = float((log_p.exp() * (log_p - log_q)).sum(-1).mean())
    reverse = float((log_q.exp() * (log_q - log_p)).sum(-1).mean())
    assert hit["kl"] == pytest.approx(kl, rel=1e-5) and abs(kl - reverse) > 0.01
    far = np.eye(16)[15]  # a direction no target uses
    miss = amnesic.lm_metrics(bb, mp, np.eye(16) - np.outer(far, far))
    assert miss["lm_accuracy"] == 1.0 and miss["kl"] < 1e-3 * hit["kl"]


def test_projection_table_counts_directions(tokenizer):
    bb, targets = designed_backbone(tokenizer)
    mp = designed_positions(targets)
    basis = np.eye(16)[:, :2]
    projections = {"vanilla": ("none", None),
                   "two": ("INLP", inlp.projection_removing(basis, 16)),
                   "random": ("random", inlp.random_projection(16, 5, seed=0))}
    table = amnesic.projection_table(bb, mp, projections)
    assert table["projection"].tolist() == ["vanilla", "two", "random"]
    assert table["group"].tolist() == ["none", "INLP", "random"]
    assert table["directions"].tolist() == [0, 2, 5]
    assert table.loc[1, "lm_accuracy"] == pytest.approx(0.5)
    for row, (_, P) in zip(table.itertuples(), projections.values()):
        assert row.lm_accuracy == amnesic.lm_metrics(bb, mp, P)["lm_accuracy"]
        assert row.kl == pytest.approx(amnesic.lm_metrics(bb, mp, P)["kl"])


def test_reinjecting_the_gold_label_brings_the_lm_back_and_no_label_does_not(tokenizer):
    bb, targets = designed_backbone(tokenizer)
    train, test = designed_positions(targets), designed_positions(targets, n=24)
    P = inlp.projection_removing(np.eye(16)[:, :4], 16)  # the four target directions: the "upos"
    out = amnesic.reinjection_metrics(bb, train, test, P, "upos", seed=0)
    assert set(out) == {"re-injected, gold label", "re-injected, shuffled label"}
    projected = amnesic.lm_metrics(bb, test, P)
    assert projected["lm_accuracy"] <= 0.25
    assert out["re-injected, gold label"]["lm_accuracy"] == 1.0  # the label restores the word
    assert out["re-injected, gold label"]["kl"] < 0.05 * projected["kl"]
    assert out["re-injected, shuffled label"]["lm_accuracy"] < 0.6
    _, overall = inlp.removed_means(train.hidden, train.labels["upos"], P)
    assert amnesic.lm_metrics(bb, test, P, shift=overall)["lm_accuracy"] <= 0.25  # no label
    # the shift is P h + m_z, as inlp.reinject computes it
    by_class, _ = inlp.removed_means(train.hidden, train.labels["upos"], P, classes=4)
    want = amnesic.lm_logits(bb, inlp.reinject(test.hidden, P, by_class[test.labels["upos"]]))
    got = amnesic.lm_logits(bb, test.hidden, P, by_class[test.labels["upos"]])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# --- adversarial heads ----------------------------------------------------------------------------


class FixedLogits(nn.Module):
    """Returns preset logits, one tensor per call (stands in for a MultiHeadModel)."""

    def __init__(self, logits: list[torch.Tensor]):
        super().__init__()
        self.logits, self.calls = logits, []

    def forward(self, input_ids, attention_mask, head):
        self.calls.append(head)
        return Output(self.logits[len(self.calls) - 1])


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
    assert amnesic.head_accuracy(model, loader, "pos") == pytest.approx(2 / 3)  # not (½ + 1) / 2
    assert model.calls == ["pos", "pos"]
    seq = FixedLogits([torch.tensor([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]])])
    batch = {"input_ids": torch.zeros(2, 2, dtype=torch.long),
             "attention_mask": torch.ones(2, 2, dtype=torch.long), "labels": torch.tensor([1, 2])}
    assert amnesic.head_accuracy(seq, [batch], "main") == 0.5
    assert amnesic.head_accuracy(FixedLogits([]), [], "main") == 0.0


def tiny_task(n_train: int = 24, n_test: int = 12) -> tasks.Task:
    """A 2-class task: sentences with "cat" are class 1."""
    rng = np.random.default_rng(0)

    def split(n: int, offset: int) -> Dataset:
        texts = [" ".join(WORDS[i] for i in rng.integers(len(WORDS), size=5)) for _ in range(n)]
        return Dataset.from_dict({"text": texts, "label": [int("cat" in t.split()) for t in texts]})

    train, test = split(n_train, 0), split(n_test, 1)
    return tasks.Task(tasks.spec("sst2"), train, test, test, ["negative", "positive"], train)


def upos_sentences(n: int, seed: int) -> probing.Sentences:
    """Sentences whose UPOS tag is a function of the word type (3 tags over 14 words)."""
    s = sentences(n, seed=seed, min_len=3, max_len=8)
    s.upos = [[WORDS.index(w) % 3 for w in t] for t in s.tokens]
    return s


def test_adversarial_finetune_end_to_end(tokenizer, monkeypatch):
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])  # no data
    bb = tiny_backbone(tokenizer, causal=True)
    before = {k: v.clone() for k, v in bb.encoder.state_dict().items()}
    task = tiny_task()
    adv, ptr, pte = upos_sentences(16, 1), upos_sentences(30, 2), upos_sentences(15, 3)
    budget = Budget(epochs=1, batch_size=4, lr=5e-3, eval_batch_size=8)
    kw = dict(seed=0, adv_batch_size=4, probe_max_iter=30, keep_model=True)
    runs = {lam: amnesic.adversarial_finetune(bb, task, adv, ptr, pte, budget, lambda_=lam, **kw)
            for lam in (0.0, 1.0)}
    for lam, run in runs.items():
        assert run.lambda_ == lam and run.seed == 0 and run.seconds > 0
        for value in (run.main_accuracy, run.head_accuracy, run.probe_accuracy):
            assert 0.0 <= value <= 1.0
        assert set(run.row()) == {"lambda", "seed", "main_accuracy", "adversary_head_accuracy",
                                  "fresh_probe_accuracy", "seconds"}
        model = run.model
        assert isinstance(model, MultiHeadModel) and set(model.heads) == {"main", "pos"}
        assert model.pool == "last"  # our [CLS] is the last token
        assert model.heads["pos"].linear.out_features == 17
        grl = model.heads["pos"].grl
        assert isinstance(grl, GradientReversalLayer) and grl.lambda_ == lam
        assert model.encoder is not bb.encoder
        # the reported numbers are those of the trained model
        probe = amnesic.final_probe_accuracy(replace(bb, encoder=model.encoder), ptr, pte,
                                             max_iter=30)
        assert run.probe_accuracy == probe
        batch = pad_collate(bb.pad_id)(bb.encode_rows(task.test))
        assert run.main_accuracy == amnesic.head_accuracy(model, [batch], "main")
    # the backbone itself was not trained
    assert all(torch.equal(v, before[k]) for k, v in bb.encoder.state_dict().items())
    # λ > 0 sends the reversed POS gradient into the encoder: the two encoders differ
    a, b = runs[0.0].model.encoder.state_dict(), runs[1.0].model.encoder.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)
    again = amnesic.adversarial_finetune(bb, task, adv, ptr, pte, budget, lambda_=0.0, **kw)
    c = again.model.encoder.state_dict()
    assert all(torch.equal(a[k], c[k]) for k in a)  # seeded: the same λ gives the same encoder
    assert amnesic.adversarial_finetune(bb, task, adv, ptr, pte, budget, lambda_=0.0,
                                        seed=0, adv_batch_size=4, probe_max_iter=30).model is None


def test_head_warmup_trains_only_the_pos_head_and_the_head_gets_its_own_rate(tokenizer, monkeypatch):
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])
    bb = tiny_backbone(tokenizer, causal=True)
    model = MultiHeadModel(bb.encoder, {"main": HeadConfig(2, "sequence"),
                                        "pos": HeadConfig(17, "token",
                                                                  reverse_gradient=True)})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = probing.token_label_rows(bb, upos_sentences(16, 1), "upos")
    seconds = amnesic.train_head_alone(model, "pos", rows, pad_collate(bb.pad_id),
                                        Budget(batch_size=4), lr=1e-2, steps=3, batch_size=4, seed=0)
    assert seconds > 0
    after = model.state_dict()
    changed = {k for k in after if not torch.equal(after[k], before[k])}
    assert changed == {"heads.pos.linear.weight", "heads.pos.linear.bias"}
    assert all(p.requires_grad for p in model.encoder.parameters())  # unfrozen again
    groups = amnesic.head_rate(30.0)(model, 1e-4, 0.01)
    head = {id(p) for p in model.heads["pos"].parameters()}
    for g in groups:
        ids = {id(p) for p in g["params"]}
        assert ids <= head if g["name"] == "pos head" else not ids & head
        assert g.get("lr_scale", 1.0) == (30.0 if g["name"] == "pos head" else 1.0)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_a_warmed_up_head_at_its_own_rate_reads_pos_at_lambda_zero(tokenizer, monkeypatch):
    """The adversary must learn before its reversal means anything: with a head warm-up at its own
    rate, at λ = 0 it beats the majority rate on a tag that is a function of the word."""
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])
    tok = train_wordpiece(LINES, vocab_size=200, min_frequency=1)  # whole words: tags readable
    bb = tiny_backbone(tok, causal=False, d=32)
    adv, ptr, pte = upos_sentences(64, 1), upos_sentences(30, 2), upos_sentences(30, 3)
    budget = Budget(epochs=1, batch_size=8, lr=1e-4, eval_batch_size=16)
    y_tr = np.concatenate([np.asarray(u) for u in ptr.upos])
    y_te = np.concatenate([np.asarray(u) for u in pte.upos])
    majority = probing.majority_rate(y_tr, y_te)
    kw = dict(seed=0, adv_batch_size=8, probe_max_iter=200)
    cold = amnesic.adversarial_finetune(bb, tiny_task(), adv, ptr, pte, budget, lambda_=0.0, **kw)
    warm = amnesic.adversarial_finetune(bb, tiny_task(), adv, ptr, pte, budget, lambda_=0.0,
                                        head_lr=3e-2, head_warmup_steps=40, **kw)
    assert cold.head_accuracy < majority + 0.1  # 3 steps at the encoder's rate: not learned
    assert warm.head_accuracy > majority + 0.2


def test_an_ours_mlm_backbone_pools_its_cls_at_the_end(tokenizer, monkeypatch):
    """Our inputs end with [CLS] whatever the objective: the main head must read that position."""
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])
    bb = tiny_backbone(tokenizer, causal=False)
    assert bb.encode(["the cat"])[0][-1] == tokenizer.cls_token_id
    assert bb.pool == "last"
    run = amnesic.adversarial_finetune(bb, tiny_task(8, 4), upos_sentences(4, 1),
                                       upos_sentences(6, 2), upos_sentences(4, 3),
                                       Budget(epochs=1, batch_size=4), lambda_=1.0,
                                       probe_max_iter=5, keep_model=True)
    assert run.model.pool == "last"


def test_final_probe_accuracy_reads_a_property_the_features_encode():
    # whole-word vocabulary: with the 60-piece one, "dog"/"dogs" (and "a"/"and", "happen"/"home")
    # share their first sub-word but not their tag, and a probe reads the first sub-word
    tokenizer = train_wordpiece(LINES, vocab_size=200, min_frequency=1)
    assert all(len(tokenizer.tokenize(w)) == 1 for w in WORDS)
    bb = tiny_backbone(tokenizer, d=32)
    train, test = upos_sentences(60, 5), upos_sentences(30, 6)
    acc = amnesic.final_probe_accuracy(bb, train, test, max_iter=200)
    y_tr = np.concatenate([np.asarray(u) for u in train.upos])
    y_te = np.concatenate([np.asarray(u) for u in test.upos])
    majority = probing.majority_rate(y_tr, y_te)
    assert majority < 0.5 and acc > 0.9  # the tag is a function of the word: linearly readable
    # a label that is noise is not: random tags in the deprel slot stay near chance
    rng = np.random.default_rng(0)
    for s in (train, test):
        s.deprel = [rng.integers(3, size=len(t)).tolist() for t in s.tokens]
    assert amnesic.final_probe_accuracy(bb, train, test, prop="deprel", max_iter=200) < 0.6
