"""Tests of tutorial_lib.methods.token_tasks.token_tasks: IOB schemes, word ↔ piece labels, entity scoring.

The round trips run on the full local CoNLL-2003 copy with MiniLM's own (uncased WordPiece) fast
tokenizer, loaded offline the way backbones.py does.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from data_helpers import DATA_DIR, load_local, needs_data
from tiny import near, tiny_encoder

from tutorial_lib import finetuning
from tutorial_lib.backbones import Backbone
from tutorial_lib.config import get_scale
from tutorial_lib.data import CONLL_NER
from tutorial_lib.data.local import conll_sentences
from tutorial_lib.data.verify import verify_file
from tutorial_lib.methods.token_tasks import token_tasks as tt
from tutorial_lib.settings import Budget

# sha256 of the original IOB1 files (MANIFEST.md); the loader reads the IOB2 copy only
IOB1_FILES = {
    "train": ("eng.train", "eac0822f501353f265383ddf1edb0dcd42a1b6eefd3e383d7074db98c38eb41c"),
    "validation": ("eng.testa", "aedc4ccbd1ae9795feaa0e86fe72d195b0258abed9d705b630d1c889276fac1e"),
    "test": ("eng.testb", "0632f32c090ef31c223135b7fee3187a7cf8e65c4015c7866bb7783428cdd9a6"),
}


@pytest.fixture(scope="module")
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer


@pytest.fixture(scope="module")
def conll():
    dd = load_local("conll2003")
    names = dd["train"].features["ner_tags"].feature.names
    return dd, names


def as_names(rows, names):
    return [[names[i] for i in row] for row in rows]


# --------------------------------------------------------------------------- tag schemes


def test_iob1_to_iob2_by_hand():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC", "I-MISC"]
    assert tt.iob1_to_iob2(iob1) == [
        "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC", "I-MISC"]
    assert tt.iob1_to_iob2([]) == []


@needs_data
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_iob1_files_convert_to_the_iob2_copy(split, conll):
    """The original eng.* (IOB1) files, converted, are the IOB2 copy the registry loads."""
    dd, names = conll
    fname, sha = IOB1_FILES[split]
    path = verify_file(DATA_DIR / "conll2003" / fname, sha)
    converted = [tt.iob1_to_iob2([w[3] for w in words]) for words in conll_sentences(path)]
    assert converted == as_names(dd[split]["ner_tags"], names)
    assert any(w[3].startswith("I-") and i == 0 for words in conll_sentences(path)
               for i, w in enumerate(words))  # the files really are IOB1: the test converts


def test_continuation_ids():
    cont = tt.continuation_ids(CONLL_NER)
    assert [CONLL_NER[c] for c in cont] == [
        "O", "I-PER", "I-PER", "I-ORG", "I-ORG", "I-LOC", "I-LOC", "I-MISC", "I-MISC"]


# ---------------------------------------------------------------------- words ↔ pieces


def test_align_labels_by_hand():
    # [CLS] peter black ##burn [SEP]: words 0 (B-PER = 1), 1 (I-PER = 2)
    word_ids = [None, 0, 1, 1, None]
    assert tt.align_labels(word_ids, [1, 2]) == [-100, 1, 2, -100, -100]
    assert tt.align_labels(word_ids, [1, 2], all_pieces=True) == [-100, 1, 2, 2, -100]
    # a B- word split in pieces: its later pieces are I- in all-pieces labelling
    cont = tt.continuation_ids(CONLL_NER)
    assert tt.align_labels([None, 0, 0, 0, None], [5], all_pieces=True, continuation=cont) == [
        -100, 5, 6, 6, -100]
    assert tt.word_tags([None, 0, 0, 1, None], [9, 1, 7, 2, 9], 3) == [1, 2, 0]  # word 2 cut off


def test_tokenize_and_align_on_a_sentence(tokenizer):
    words = ["Peter", "Blackburn", "visited", "BRUSSELS", "."]
    tags = [1, 2, 0, 5, 0]
    enc = tt.tokenize_and_align(tokenizer, [words], [tags], names=CONLL_NER, all_pieces=True)
    pieces = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    assert "peter" in pieces and "brussels" in pieces  # uncased: capitals are gone
    labels = dict(zip(pieces, enc["labels"][0]))
    assert labels["[CLS]"] == labels["[SEP]"] == -100 and labels["peter"] == 1
    assert tt.word_tags(enc["word_ids"][0], enc["labels"][0], len(words)) == tags
    with pytest.raises(TypeError, match="fast tokenizer"):
        tt.tokenize_and_align(object(), [words])


@needs_data
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_every_gold_tag_survives_words_pieces_words(split, tokenizer, conll):
    """First-piece labelling, on every sentence: no word loses its tag or its pieces."""
    dd, names = conll
    ds = dd[split]
    counts = tt.check_tags(tokenizer, ds["tokens"], ds["ner_tags"])
    words = {"train": 203621, "validation": 51362, "test": 46435}[split]
    assert counts == {"words": words, "changed": 0, "truncated": 0, "pieceless": 0}


@needs_data
def test_all_pieces_and_truncation_round_trips(tokenizer, conll):
    dd, names = conll
    ds = dd["test"]
    counts = tt.check_tags(tokenizer, ds["tokens"], ds["ner_tags"], all_pieces=True, names=names)
    assert counts["changed"] == 0 and counts["pieceless"] == 0
    enc = tt.tokenize_and_align(tokenizer, ds["tokens"], ds["ner_tags"], all_pieces=True, names=names)
    for word_ids, labels in zip(enc["word_ids"], enc["labels"]):
        for k in range(1, len(word_ids)):  # no B- on a continuation piece
            if word_ids[k] is not None and word_ids[k] == word_ids[k - 1]:
                assert not names[labels[k]].startswith("B-")
    short = tt.check_tags(tokenizer, ds["tokens"], ds["ner_tags"], max_length=64)
    assert short["truncated"] > 0 and short["changed"] == 0  # cut words are counted, not scored


@needs_data
def test_pieces_spell_their_word(tokenizer, conll):
    """word_ids point at the right word: its pieces, ## removed, spell the lower-cased word."""
    dd, _ = conll
    tokens = dd["test"]["tokens"]
    enc = tt.tokenize_and_align(tokenizer, tokens)
    wrong = 0
    for words, ids, word_ids in zip(tokens, enc["input_ids"], enc["word_ids"]):
        spelled = [""] * len(words)
        for piece, w in zip(tokenizer.convert_ids_to_tokens(ids), word_ids):
            if w is not None:
                spelled[w] += piece.removeprefix("##")
        wrong += sum(s not in (w.lower(), "[UNK]") for s, w in zip(spelled, words))
    assert wrong == 0


# ---------------------------------------------------------------------------- scoring


def test_entity_spans_strict():
    tags = ["B-PER", "I-PER", "O", "I-LOC", "B-ORG", "B-ORG", "I-ORG", "I-PER"]
    assert tt.entity_spans(tags) == {("PER", 0, 1), ("ORG", 4, 4), ("ORG", 5, 6)}  # I-LOC, I-PER: none


def test_entity_scores_by_hand():
    """Gold: 3 entities (PER, LOC, ORG); predicted: 3, of which PER is right, LOC has a wrong
    boundary and one MISC is spurious. P = 1/3, R = 1/3, F1 = 1/3; per type PER 1, LOC 0."""
    gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC"], ["B-ORG", "O", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "O"], ["O", "O", "B-MISC"]]
    scores = tt.entity_scores(gold, pred)
    assert scores["precision"] == pytest.approx(1 / 3)
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(1 / 3)
    assert scores["per_type"]["PER"]["f1"] == 1.0 and scores["per_type"]["LOC"]["f1"] == 0.0
    assert scores["per_type"]["ORG"]["support"] == 1 and scores["per_type"]["MISC"]["precision"] == 0
    assert tt.entity_f1_by_hand(gold, pred) == pytest.approx(
        {k: scores[k] for k in ("precision", "recall", "f1")})
    # strict IOB2: an entity opened by I- is no entity
    assert tt.entity_scores([["B-PER", "I-PER"]], [["I-PER", "I-PER"]])["f1"] == 0.0
    with pytest.raises(ValueError, match="same sentences"):
        tt.entity_scores(gold, pred[:1])


@needs_data
def test_baselines_on_testb_and_seqeval_agrees_with_the_definition(conll):
    dd, names = conll
    gold = as_names(dd["test"]["ner_tags"], names)
    train_tags = as_names(dd["train"]["ner_tags"], names)
    assert tt.entity_scores(gold, tt.all_o_tagger(dd["test"]["tokens"]))["f1"] == 0.0
    for repair in (False, True):
        tagger = tt.MajorityTagger(repair=repair).fit(dd["train"]["tokens"], train_tags)
        pred = tagger.predict(dd["test"]["tokens"])
        scores = tt.entity_scores(gold, pred)
        assert 0.45 < scores["f1"] < 0.65  # far above all-O, far below a fine-tuned model
        assert tt.entity_f1_by_hand(gold, pred) == pytest.approx(
            {k: scores[k] for k in ("precision", "recall", "f1")})
        assert set(scores["per_type"]) == {"PER", "LOC", "ORG", "MISC"}


# ------------------------------------------------------------------- the model and a run


def test_token_classifier_loss_reads_only_labelled_positions():
    model = tt.TokenClassifier(tiny_encoder(40), num_labels=5, dropout=0.0).eval()
    ids = torch.randint(5, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    labels = torch.tensor([[-100, 1, 2, -100, 0, -100], [-100, 3, 4, -100, -100, -100]])
    out = model(ids, mask, labels)
    assert out.logits.shape == (2, 6, 5)
    keep = labels != -100
    expected = F.cross_entropy(out.logits[keep], labels[keep])
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_position_logits_keep_the_rows_order():
    model = tt.TokenClassifier(tiny_encoder(40), num_labels=3, dropout=0.0)
    rows = [[7, 8, 9, 10, 11], [12], [13, 14, 15], [16, 17]]
    logits = tt.position_logits(model, rows, pad_id=0, batch_size=2)
    assert [tuple(lg.shape) for lg in logits] == [(5, 3), (1, 3), (3, 3), (2, 3)]
    with torch.no_grad():
        for row, lg in zip(rows, logits):  # each row alone, unpadded
            alone = model(near(model, torch.tensor([row])),
                          near(model, torch.ones(1, len(row), dtype=torch.long))).logits[0]
            assert torch.allclose(lg.cpu(), alone.float().cpu(), atol=0.05)


def synthetic_ner(n: int, seed: int = 0) -> dict:
    """Sentences of filler words with a person's and a city's name: each word's tag is fixed."""
    rng = random.Random(seed)
    people, cities = ["peter", "maria", "john"], ["paris", "london", "berlin"]
    filler = ["the", "visited", "and", "today", "went", "to"]
    tokens, tags = [], []
    for _ in range(n):
        words = [rng.choice(filler) for _ in range(rng.randint(2, 5))]
        words.insert(rng.randrange(len(words) + 1), rng.choice(people))
        words.insert(rng.randrange(len(words) + 1), rng.choice(cities))
        tokens.append(words)
        tags.append([1 if w in people else 5 if w in cities else 0 for w in words])  # B-PER, B-LOC
    return {"tokens": tokens, "ner_tags": tags}


def test_finetune_ner_learns_a_word_lookup(monkeypatch, minilm_tokenizer, one_thread):
    """The whole path — alignment, the recipe, first-piece prediction, seqeval — learns to tag
    names whose tag is a function of the word (a misaligned label would not)."""
    tok = minilm_tokenizer
    backbone = Backbone("tiny", "encoder", tok, tiny_encoder(tok.vocab_size), 64)
    monkeypatch.setattr(finetuning, "load_backbone", lambda *a, **k: backbone)  # the runner loads
    train, test = synthetic_ner(96), synthetic_ner(32, seed=1)
    budget = Budget(epochs=8, lr=1e-2, batch_size=16)
    run = tt.finetune_ner("tiny", train, test, CONLL_NER, budget, 0, scale=get_scale("smoke"))
    assert run.test["f1"] > 0.9 and set(run.test["per_type"]) == {"PER", "LOC"}
    assert [len(p) for p in run.predictions] == [len(t) for t in test["tokens"]]
    assert run.row()["F1 PER"] == run.test["per_type"]["PER"]["f1"]


def test_dev_scores_land_in_the_history_about_dev_evals_times(monkeypatch, minilm_tokenizer, one_thread):
    """Runs of 1 and of 2 epochs both score dev about ``dev_evals`` times, each row with the
    epoch and the NER columns; training is the same with and without it."""
    tok = minilm_tokenizer
    monkeypatch.setattr(finetuning, "load_backbone", lambda *a, **k: Backbone(
        "tiny", "encoder", tok, tiny_encoder(tok.vocab_size), 64))  # a fresh model each run
    train, test, dev = synthetic_ner(64), synthetic_ner(16, seed=1), synthetic_ner(8, seed=2)
    assert tt.evals_per_epoch(Budget(epochs=4), 4) == 1 and tt.evals_per_epoch(Budget(epochs=2), 4) == 2
    assert tt.evals_per_epoch(Budget(epochs=8), 4) == 1  # at least once a pass
    for epochs in (1, 2):
        budget = Budget(epochs=epochs, lr=1e-2, batch_size=16)
        plain = tt.finetune_ner("tiny", train, test, CONLL_NER, budget, 0, scale=get_scale("smoke"))
        curved = tt.finetune_ner("tiny", train, test, CONLL_NER, budget, 0, scale=get_scale("smoke"),
                                 dev=dev, dev_evals=2)
        assert curved.predictions == plain.predictions and plain.history.evals == []
        evals = curved.history.evals
        assert len(evals) == 2 and evals[-1]["epoch"] == epochs
        assert {"f1", "precision", "recall"} <= set(evals[0])
