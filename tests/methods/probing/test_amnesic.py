"""Tests for tutorial_lib.methods.probing.amnesic: the position control property, masked-word positions of
a masked LM, the LM's behaviour under projections, the adversarial POS head and the fresh probe.

Tiny random models and a tokenizer trained on a few lines (words split into several sub-words);
no pretraining and no data. Comparisons that must be exact run in fp32.
"""


import numpy as np
import pytest
import torch
from tiny import near
from torch import nn

from tutorial_lib import stats
from tutorial_lib.backbones import Backbone
from tutorial_lib.config import PRECISION_ENV_VAR
from tutorial_lib.methods.probing import amnesic, inlp, probing
from tutorial_lib.models import Output, TransformerConfig, TransformerLM
from tutorial_lib.tokenization import train_wordpiece

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
            h = bb.encoder(near(bb.encoder, encode_masked(bb, e, set(e.words)))).last_hidden_state[0, pos]
        np.testing.assert_allclose(mp.hidden[i], h.cpu().numpy(), atol=1e-5, rtol=1e-4)


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
            h = bb.encoder(near(bb.encoder, encode_masked(bb, e, {w}))).last_hidden_state[0, pos]
        np.testing.assert_allclose(mp.hidden[i], h.cpu().numpy(), atol=1e-5, rtol=1e-4)


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
        ids = near(bb.encoder, encode_masked(bb, e, set(e.words)))  # [CLS] … [SEP] stay as they are
        assert ids[0, 0] == tiny_bert.tokenizer.cls_token_id
        with torch.no_grad():
            h = bb.encoder(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        np.testing.assert_allclose(mp.hidden[i], h[0, pos].cpu().numpy(), atol=1e-5, rtol=1e-4)
    # the LM head of a Hugging Face MLM reads the same hidden states
    logits = amnesic.lm_logits(bb, mp.hidden[:2])
    with torch.no_grad():
        want = tiny_bert.lm.cls(near(tiny_bert.lm, torch.as_tensor(mp.hidden[:2])))
    torch.testing.assert_close(logits.cpu(), want.cpu())


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


def upos_sentences(n: int, seed: int) -> probing.Sentences:
    """Sentences whose UPOS tag is a function of the word type (3 tags over 14 words)."""
    s = sentences(n, seed=seed, min_len=3, max_len=8)
    s.upos = [[WORDS.index(w) % 3 for w in t] for t in s.tokens]
    return s


# --- the erasers of notebook 11 and their premise ------------------------------------------------


def synthetic_positions(n: int, seed: int) -> amnesic.MaskedPositions:
    """States whose first two coordinates carry a 3-class "upos" (the rest noise); targets unused."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 10)).astype(np.float32)
    X[:, :2] += 2.0 * np.eye(3)[y][:, :2]
    return amnesic.MaskedPositions(X, np.zeros(n, dtype=np.int64),
                                   {"upos": y, "position": rng.integers(0, 4, n)})


def test_fit_erasers_gives_inlp_and_leace_per_seed_on_the_same_subset_and_both_erase():
    train, dev, test = (synthetic_positions(n, s) for n, s in ((3000, 0), (3000, 1), (3000, 2)))
    got = amnesic.fit_erasers(train, dev, test, "upos", seeds=(0, 1), positions=1500,
                              probe_positions=800, C=1.0, grid=(0.01, 1.0), max_iterations=10,
                              in_sample=True)
    assert list(got) == ["INLP", "LEACE"] and [e.seed for e in got["LEACE"]] == [0, 1]
    for e in got["INLP"] + got["LEACE"]:  # the probe never saw a position the eraser was fit to
        assert len(e.probed_on) == 800 and not set(e.fitted_on) & set(e.probed_on)
    assert len(got["INLP"][0].fitted_on) == 1500 and len(got["LEACE"][0].fitted_on) == 2200
    assert set(got["INLP"][0].fitted_on) <= set(got["LEACE"][0].fitted_on)
    assert got["LEACE"][0].in_sample is not None and got["LEACE"][1].in_sample is None
    assert got["INLP"][0].result.converged and got["LEACE"][0].result is None
    assert got["LEACE"][0].eraser.n_directions == 2 <= got["INLP"][0].eraser.n_directions  # c − 1 per pass
    # another seed, another subset: a different LEACE fit
    assert not np.allclose(got["LEACE"][0].eraser.P, got["LEACE"][1].eraser.P)
    floor = {s: inlp.majority_rate(train.labels["upos"], p.labels["upos"]) for s, p in
             (("dev", dev), ("test", test))}
    for runs in got.values():  # judged out of sample (whether it holds: the next test)
        assert amnesic.premise(runs, floor).name == "erased out of sample"
        assert all(set(e.probe) == {"dev", "test", "C"} for e in runs)


def test_an_in_sample_check_cannot_fail_where_the_out_of_sample_one_does():
    """11's LEACE: on its own fitting positions every class has the same mean, so a fresh probe
    there answers the majority class whatever happens elsewhere; on positions it was not fitted
    to, estimation error leaves the property readable (here: few positions, many dimensions)."""
    rng = np.random.default_rng(0)
    n, d = 2400, 120
    y = rng.integers(0, 3, n)
    X = (rng.normal(size=(n, d)) + 0.6 * np.eye(3)[y] @ rng.normal(size=(3, d))).astype(np.float32)
    train = amnesic.MaskedPositions(X[:1800], np.zeros(1800, dtype=np.int64), {"upos": y[:1800]})
    dev, test = (amnesic.MaskedPositions(X[a:b], np.zeros(b - a, dtype=np.int64), {"upos": y[a:b]})
                 for a, b in ((1800, 2100), (2100, 2400)))
    got = amnesic.fit_erasers(train, dev, test, "upos", seeds=(0,), positions=200,
                              probe_positions=1200, C=1.0, grid=(0.01, 1.0), max_iterations=2,
                              leace_positions=200, in_sample=True)["LEACE"][0]
    floor = {s: inlp.majority_rate(train.labels["upos"], p.labels["upos"]) for s, p in
             (("dev", dev), ("test", test))}
    assert stats.erasure_premise({k: got.in_sample[k] for k in floor}, floor).holds  # in sample
    assert not amnesic.premise([got], floor).holds  # out of sample: still readable
    with pytest.raises(ValueError, match="in-sample check cannot fail"):
        amnesic.premise([amnesic.Erasure(got.eraser, 0, got.probe, None, got.fitted_on,
                                         got.fitted_on[:10])], floor)


def test_the_premise_fails_on_the_worst_run_and_says_where():
    """One run that left the property readable on test voids the eraser's comparisons."""
    eraser = inlp.Eraser("INLP", np.eye(2), np.zeros(2))
    runs = [amnesic.Erasure(eraser, 0, {"dev": 0.35, "test": 0.34, "C": 1.0}),
            amnesic.Erasure(eraser, 1, {"dev": 0.35, "test": 0.52, "C": 1.0})]
    floor = {"dev": 0.34, "test": 0.34}
    premise = amnesic.premise(runs, floor)
    assert not premise.holds and premise.failure == stats.VOID_NOT_ERASED
    assert "test: probe 0.520 vs floor 0.340" in premise.detail
    assert amnesic.premise(runs[:1], floor).holds


def _sweep_numbers() -> set[str]:
    """Every accuracy of benchmarks/results/erasure_arms.json's out-of-sample sweep, at 3 decimals."""
    import json
    from pathlib import Path

    blob = json.loads((Path(__file__).resolve().parents[3] / "benchmarks" / "results"
                       / "erasure_arms.json").read_text())
    out = set()
    for row in blob["out-of-sample"]["rows"]:
        for key in ("out_of_sample", "in_sample", "majority"):
            out |= {f"{v:.3f}" for k, v in (row[key] or {}).items() if k in ("dev", "test")}
    return out


def _quoted(text: str, after: str) -> set[str]:
    """The 0.xxx numbers of ``text`` after its first ``after``."""
    import re

    return set(re.findall(r"\b0\.\d{3}\b", text.split(after, 1)[1]))


def test_the_sweep_numbers_quoted_in_prose_are_the_sweeps():
    """The settings' docstring, notebook 11's exercise 4 and docs/notebooks.md quote the
    out-of-sample sweep by hand: every 0.xxx they quote must be one of its numbers."""
    import json
    from pathlib import Path

    from tutorial_lib.methods.probing.settings import AmnesicSettings

    repo = Path(__file__).resolve().parents[3]
    cells = ["".join(c["source"]) for c in json.loads(
        (repo / "notebooks" / "11_amnesic_probing.ipynb").read_text())["cells"]]
    exercises = next(c for c in cells if "**Fewer positions.**" in c)
    details = (repo / "docs" / "notebooks.md").read_text().split("## 11_amnesic_probing", 1)[1]
    sweep = _sweep_numbers()
    texts = {"settings": (AmnesicSettings.__doc__, "Sizes"),
             "exercise 4": (exercises, "**Fewer positions.**"),
             "docs/notebooks.md": (details.split("fitted on the 35,136", 1)[0], "Fitted on 8,000")}
    for where, (text, after) in texts.items():
        quoted = _quoted(text, after)
        assert quoted and quoted <= sweep, (where, sorted(quoted - sweep))
    edited = texts["exercise 4"][0].replace("0.223", "0.231")
    assert not _quoted(edited, "**Fewer positions.**") <= sweep  # an edited number fails
