"""Tests of tutorial_lib.methods.token_tasks.extractive_qa: windows, answer spans, the span decoder, EM/F1.

The span round trips run on every reference answer of the local SQuAD copy (train subset and the
whole dev set) with MiniLM's fast tokenizer, loaded offline the way backbones.py does.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from data_helpers import load_local, needs_data
from tiny import tiny_encoder

from tutorial_lib import finetuning
from tutorial_lib.backbones import Backbone
from tutorial_lib.config import get_scale
from tutorial_lib.methods.token_tasks import extractive_qa as qa
from tutorial_lib.settings import Budget


@pytest.fixture(scope="module")
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer


# ----------------------------------------------------------------------------- metrics


@pytest.mark.parametrize(("text", "normal"), [
    ("The Denver Broncos!", "denver broncos"),
    ("  a cat,  an   apple ", "cat apple"),
    ("Theatre of the Absurd", "theatre of absurd"),  # articles only as whole words
    ("U.S.A.", "usa"),
    ("well-known", "wellknown"),  # punctuation is removed, not replaced by a space
    ("1,000 (est.)", "1000 est"),
    ("A", ""),
])
def test_normalize_answer(text, normal):
    assert qa.normalize_answer(text) == normal


def test_exact_match_and_f1_by_hand():
    assert qa.exact_match("the Denver Broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert qa.exact_match("Denver", ["Denver Broncos"]) == 0.0
    # pred {denver, broncos, won} vs gold {denver, broncos}: P = 2/3, R = 1, F1 = 0.8
    assert qa.token_f1("Denver Broncos won", "the Denver Broncos") == pytest.approx(0.8)
    # bags, not sets: "new york new york" vs "new york": 2 common, P = 1/2, R = 1, F1 = 2/3
    assert qa.token_f1("new york new york", "New York") == pytest.approx(2 / 3)
    # the best reference counts: vs "Denver Broncos" P = 1, R = 1/2, F1 = 2/3; vs "Carolina" 0
    assert qa.f1("Broncos", ["Denver Broncos", "Carolina"]) == pytest.approx(2 / 3)
    assert qa.f1("Panthers", ["Denver Broncos"]) == 0.0
    assert qa.f1("the", ["Denver"]) == 0.0  # nothing left after normalisation
    scores = qa.squad_scores(["Denver Broncos", "Broncos", "Panthers"],
                             [["Denver Broncos"], ["Denver Broncos", "Carolina"], ["Denver"]])
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    with pytest.raises(ValueError, match="one prediction per question"):
        qa.squad_scores(["a"], [])


# ----------------------------------------------------------------------- spans and windows


def test_char_to_token_span_by_hand():
    context = "Denver Broncos won 24-10."
    offsets = [None, None, (0, 6), (7, 14), (15, 18), (19, 21), (21, 22), (22, 24), (24, 25), None]
    assert qa.char_to_token_span(offsets, 0, 14) == (2, 3)
    assert qa.span_text(context, offsets, 2, 3) == "Denver Broncos"
    assert qa.char_to_token_span(offsets, 19, 24) == (5, 7)  # "24-10"
    assert qa.char_to_token_span(offsets, 8, 11) == (3, 3)  # "ron" inside "Broncos": mid-word
    window = offsets[:4] + [None]  # a window that ends after "Broncos"
    assert qa.char_to_token_span(window, 15, 18) is None
    with pytest.raises(ValueError, match="not both in the context"):
        qa.span_text(context, offsets, 0, 3)


def test_windows_cover_a_long_context(tokenizer):
    context = " ".join(f"Sentence number {k} talks about topic {k}." for k in range(40))
    start = context.index("topic 33")
    answers = [{"text": ["topic 33"], "answer_start": [start]}]
    w = qa.windows(tokenizer, ["Which topic?"], [context], answers, max_length=48, stride=16)
    n = len(w["example"])
    assert n > 5 and set(w["example"]) == {0}
    question_ids = tokenizer("Which topic?")["input_ids"][:-1]  # [CLS] which topic ?
    spans = []
    for ids, offsets, s, e in zip(w["input_ids"], w["offsets"], w["start_positions"],
                                  w["end_positions"]):
        assert len(ids) <= 48 and ids[: len(question_ids)] == question_ids
        context_offsets = [o for o in offsets if o is not None]
        spans.append((context_offsets[0][0], context_offsets[-1][1]))
        if (s, e) != (0, 0):
            assert qa.span_text(context, offsets, s, e) == "topic 33"
    assert sum((s, e) != (0, 0) for s, e in zip(w["start_positions"], w["end_positions"])) >= 1
    assert all(a[1] > b[0] for a, b in zip(spans, spans[1:]))  # consecutive windows overlap
    assert spans[0][0] == 0 and spans[-1][1] == len(context)
    again = qa.windows(tokenizer, ["Which topic?"] * 2, [context, "topic 1."], answers * 2,
                       max_length=48, stride=16, indices=[7, 8])  # a batch of Dataset.map
    assert again["example"] == [7] * n + [8] and again["start_positions"][:n] == w["start_positions"]


def test_a_question_too_long_for_the_stride_keeps_its_first_tokens(tokenizer):
    """A question that leaves the context no more than the stride made the fast tokenizer panic
    (found by running 15's solutions at smoke: max_length 64, stride 16, a long SQuAD question);
    it now keeps its first tokens, and a short question is untouched."""
    long_q = "Which of the many numbered sentences below " * 8 + "talks about topic 3?"
    context = " ".join(f"Sentence number {k} talks about topic {k}." for k in range(20))
    w = qa.windows(tokenizer, [long_q, "Which topic?"], [context, context], max_length=48, stride=16)
    assert set(w["example"]) == {0, 1} and all(len(ids) <= 48 for ids in w["input_ids"])
    assert all(sum(o is not None for o in offsets) > 16 for offsets in w["offsets"])  # room beyond the stride
    short = qa.windows(tokenizer, ["Which topic?"], [context], max_length=48, stride=16)
    assert short["input_ids"] == [ids for ids, e in zip(w["input_ids"], w["example"]) if e == 1]
    with pytest.raises(ValueError, match="lower the stride"):
        qa.windows(tokenizer, ["Which topic?"], [context], max_length=16, stride=16)


@needs_data
@pytest.mark.parametrize(("split", "exact", "mid_word"), [("train", 3785, 22), ("validation", 34526, 200)])
def test_every_answer_maps_to_tokens_and_back(split, exact, mid_word, tokenizer):
    """Every reference answer lies whole in a window (384 tokens, stride 128), and its token span
    gives back its exact text, except answers whose boundary falls inside a WordPiece token
    (``Tibet`` in ``Tibetan``, ``7`` in ``1817``): the nearest token span then holds the whole
    word. In dev, 133 of the 200 such answers have an *inferred* offset (the first occurrence of
    the text, which can sit inside a longer word; see the data README); 67 are official."""
    ds = load_local("squad")[split]
    check = qa.check_spans(tokenizer, ds["question"], ds["context"], ds["answers"])
    assert check.not_in_window == [] and check.other == []
    assert (check.exact, len(check.mid_word)) == (exact, mid_word)
    assert check.total == {"train": 3807, "validation": 34726}[split]
    assert all(answer in recovered and answer != recovered for answer, recovered in check.mid_word)


# ----------------------------------------------------------------------------- decoding


def test_best_span_respects_order_length_and_context():
    offsets = [None, None, (0, 3), (4, 7), (8, 11), (12, 15), (16, 19), None]
    start = torch.tensor([9.0, 0.0, 1.0, 0.0, 0.0, 5.0, 0.0, 9.0])
    end = torch.tensor([9.0, 0.0, 4.0, 0.0, 3.0, 0.0, 0.0, 9.0])
    # outside the context ([CLS], question, [SEP]) nothing counts, however high
    # best allowed: start 5 (5.0) ... end must be ≥ 5: end 5 or 6 (0.0) → 5.0;
    # start 2 (1.0) + end 2 (4.0) = 5.0 too: the first in row-major order wins (start 2)
    score, s, e = qa.best_span(start, end, offsets, max_answer_tokens=30)
    assert (score, s, e) == (5.0, 2, 2)
    end[4] = 4.5  # start 2 + end 4 = 5.5, a 3-token span
    assert qa.best_span(start, end, offsets, 30)[1:] == (2, 4)
    assert qa.best_span(start, end, offsets, max_answer_tokens=2)[1:] == (2, 2)  # too long now
    start[5], end[3] = 1.0, 20.0  # end before start is never taken: end 3 needs start ≤ 3
    assert qa.best_span(start, end, offsets, 30)[1:] == (2, 3)
    with pytest.raises(ValueError, match="no context token"):
        qa.best_span(start, end, [None] * 8)


def test_decode_takes_the_best_window():
    """Question 0 has two windows over one context; the second holds the better span."""
    context = "alpha beta gamma delta epsilon"
    w0 = [None, (0, 5), (6, 10), (11, 16), None]  # alpha beta gamma
    w1 = [None, (11, 16), (17, 22), (23, 30), None]  # gamma delta epsilon
    other = [None, (0, 3), (4, 7), None]
    logits = [
        (torch.tensor([0.0, 2.0, 0.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 2.0, 0.0, 0.0])),  # 4
        (torch.tensor([0.0, 0.0, 3.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, 3.0, 0.0])),  # 6
        (torch.tensor([0.0, 0.0, 1.0, 0.0]), torch.tensor([0.0, 0.0, 1.0, 0.0])),
    ]
    answers = qa.decode([context, "one two"], [0, 0, 1], [w0, w1, other],
                        [s for s, _ in logits], [e for _, e in logits])
    assert answers == ["delta epsilon", "two"]
    with pytest.raises(ValueError, match="have no window"):
        qa.decode([context, "one two", "x"], [0, 0, 1], [w0, w1, other],
                  [s for s, _ in logits], [e for _, e in logits])


# --------------------------------------------------------------------------- baselines


def test_baselines_by_hand():
    context = "Paris is large. The Eiffel Tower was built in 1889 for a fair. It is tall."
    assert qa.sentences(context) == ["Paris is large.", "The Eiffel Tower was built in 1889 for a fair.",
                                     "It is tall."]
    assert qa.first_sentence_baseline([context]) == ["Paris is large."]
    # the second sentence shares "eiffel", "tower", "built"; the question's words are dropped
    assert qa.overlap_sentence_baseline(["When was the Eiffel Tower built?"], [context]) == [
        "The was in 1889 for a fair."]
    spans = qa.random_span_baseline([context] * 50, [2, 3], seed=0)
    assert spans == qa.random_span_baseline([context] * 50, [2, 3], seed=0)  # seeded
    assert all(s in context and len(s.split()) in (2, 3) for s in spans) and len(set(spans)) > 10
    assert qa.random_span_baseline(["one"], [4]) == ["one"]  # never longer than the context


@needs_data
def test_baselines_on_the_train_subset():
    ds = load_local("squad")["train"]
    refs = [a["text"] for a in ds["answers"]]
    first = qa.squad_scores(qa.first_sentence_baseline(ds["context"]), refs)
    overlap = qa.squad_scores(qa.overlap_sentence_baseline(ds["question"], ds["context"]), refs)
    assert first["exact_match"] < 0.01 and overlap["exact_match"] < 0.01  # sentences, not spans
    assert 0.03 < first["f1"] < overlap["f1"] < 0.5
    lengths = [len(a["text"][0].split()) for a in ds["answers"]]
    chance = qa.squad_scores(qa.random_span_baseline(ds["context"], lengths), refs)
    assert chance["f1"] < first["f1"]  # chance is the lowest floor


# ----------------------------------------------------------------- the model and a run


def test_span_extractor_masks_padding_and_averages_two_losses():
    model = qa.SpanExtractor(tiny_encoder(40), dropout=0.0).eval()
    ids = torch.randint(5, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    labels = torch.tensor([[2, 4], [1, 1]])
    out = model(ids, mask, labels)
    assert out.logits.shape == (2, 6, 2)
    assert torch.isinf(out.logits[1, 4:]).all() and torch.isfinite(out.logits[0]).all()
    expected = (F.cross_entropy(out.logits[..., 0], labels[:, 0])
                + F.cross_entropy(out.logits[..., 1], labels[:, 1])) / 2
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.isfinite(out.loss)


def synthetic_squad(n: int, seed: int = 0) -> dict:
    """"Where is X?" over passages of filler words where X's city follows "in": the answer is
    the word after "in" (a position the model must find, not a fixed one)."""
    rng = random.Random(seed)
    filler, cities = ["the", "old", "house", "stood", "near", "a", "river"], ["paris", "rome", "oslo"]
    questions, contexts, answers = [], [], []
    for _ in range(n):
        before = " ".join(rng.choice(filler) for _ in range(rng.randint(1, 6)))
        city = rng.choice(cities)
        context = f"{before} in {city} {' '.join(rng.choice(filler) for _ in range(3))} ."
        questions.append("where is it ?")
        contexts.append(context)
        answers.append({"text": [city], "answer_start": [context.index(f" in {city}") + 4]})
    return {"question": questions, "context": contexts, "answers": answers}


def test_finetune_qa_learns_to_point(monkeypatch, tokenizer, one_thread):
    """The whole path — windows, start/end labels, the recipe, the span decoder, EM/F1 — learns
    an answer whose position varies (a label off by one token would score no exact match)."""
    backbone = Backbone("tiny", "encoder", tokenizer, tiny_encoder(tokenizer.vocab_size), 64)
    monkeypatch.setattr(finetuning, "load_backbone", lambda *a, **k: backbone)  # the runner loads
    train, test = synthetic_squad(128), synthetic_squad(32, seed=1)
    budget = Budget(epochs=10, lr=3e-3, batch_size=16)
    run = qa.finetune_qa("tiny", train, test, budget, 0, scale=get_scale("smoke"), max_length=32,
                         stride=8, max_answer_tokens=5)
    assert all(p in c for p, c in zip(run.predictions, test["context"]))
    assert run.test["exact_match"] > 0.8 and run.row()["f1"] >= run.test["exact_match"]
    assert run.columns["train_windows"] >= len(train["question"])


def test_chance_is_a_seeded_mean_of_random_span_draws():
    contexts = [f"w{k} " + " ".join(f"x{k}{j}" for j in range(12)) + f" answer{k} y z ." for k in range(30)]
    refs = [[f"answer{k} y"] for k in range(30)]
    chance = qa.chance_scores(contexts, refs, [1, 2, 3], seed=0, draws=4)
    assert chance == qa.chance_scores(contexts, refs, [1, 2, 3], seed=0, draws=4)  # seeded
    assert chance != qa.chance_scores(contexts, refs, [1, 2, 3], seed=1, draws=4)  # a seed of its own
    rng = random.Random(0)
    draws = [qa.squad_scores(qa.random_span_baseline(contexts, [1, 2, 3], seed=rng.randrange(2**32)), refs)
             for _ in range(4)]
    assert chance["f1"] == pytest.approx(sum(d["f1"] for d in draws) / 4)
    assert 0 < chance["f1"] < 0.5


def test_the_dev_curve_is_logged_and_leaves_the_run_as_it_was(monkeypatch, tokenizer, one_thread):
    """Scoring dev while training must not change what the run learns: same test answers with and
    without it, and the history holds one dev score per evaluation with its epoch."""
    monkeypatch.setattr(finetuning, "load_backbone", lambda *a, **k: Backbone(
        "tiny", "encoder", tokenizer, tiny_encoder(tokenizer.vocab_size), 64))  # fresh each run
    train, test, dev = synthetic_squad(64), synthetic_squad(16, seed=1), synthetic_squad(8, seed=2)
    budget = Budget(epochs=2, lr=3e-3, batch_size=16)
    kw = dict(scale=get_scale("smoke"), max_length=32, stride=8, max_answer_tokens=5)
    plain = qa.finetune_qa("tiny", train, test, budget, 0, **kw)
    curved = qa.finetune_qa("tiny", train, test, budget, 0, dev=dev, dev_evals=4, **kw)
    assert curved.predictions == plain.predictions and curved.test == plain.test
    assert plain.history.evals == []
    evals = curved.history.evals
    assert len(evals) == 4 and [round(e["epoch"], 2) for e in evals] == [0.5, 1.0, 1.5, 2.0]
    assert all(0 <= e["f1"] <= 1 and "exact_match" in e for e in evals)


def test_the_notebooks_self_check_passes_its_solution_and_fails_wrong_spans():
    """Notebook 15's self-check, run as the learner would: the stub is reported, the solution under
    "## Solutions" passes, and two plausible mistakes (no length limit; the two argmaxes taken
    apart) fail on the cell's own random windows."""
    import re
    from pathlib import Path

    import nbformat

    from tutorial_lib import selfcheck

    path = Path(__file__).resolve().parents[3] / "notebooks" / "15_token_tasks.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    cell = next(c.source for c in cells if c.cell_type == "code" and "def random_window" in c.source)
    space: dict = {"qa": qa}
    exec(cell, space)  # the stub: the cell's own check must not raise
    assert "not written yet" in selfcheck.check(space["my_best_span"], qa.best_span,
                                                selfcheck.cases(space["random_window"])).message
    solutions = next(c.source for c in cells if c.cell_type == "markdown" and "## Solutions" in c.source)
    solution = re.search(r"<summary>Self-check</summary>\s*```python\n(.*?)```", solutions, re.S).group(1)
    exec(solution, space)
    mine = space["my_best_span"]

    def no_band(s, e, offsets, max_answer_tokens):
        return mine(s, e, offsets, 10**6)

    def apart(s, e, offsets, max_answer_tokens):
        inside = [i for i, o in enumerate(offsets) if o is not None]
        i, j = max(inside, key=lambda k: s[k]), max(inside, key=lambda k: e[k])
        return float(s[i] + e[j]), i, j

    cases = lambda: selfcheck.cases(space["random_window"], n=20)  # noqa: E731
    assert selfcheck.check(mine, qa.best_span, cases())
    assert not selfcheck.check(no_band, qa.best_span, cases())
    assert not selfcheck.check(apart, qa.best_span, cases())
