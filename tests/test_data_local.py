"""Tests of tutorial_lib.data.local: the parsers, on the real local copy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from data_helpers import load_local, needs_data, sizes
from datasets import DatasetDict, Value


@pytest.fixture
def local() -> Callable[..., DatasetDict]:
    """``local(name, **kw)`` loads from the real local copy."""
    return load_local


@needs_data
def test_trec(local: Any) -> None:
    dd = local("trec")
    assert len(dd["train"]) + len(dd["validation"]) == 5452
    assert len(dd["test"]) == 500
    assert dd["train"].features["coarse_label"].names == [
        "ABBR",
        "ENTY",
        "DESC",
        "HUM",
        "LOC",
        "NUM",
    ]
    fine = dd["train"].features["fine_label"].names
    assert len(fine) == 50 and fine[26] == "DESC:manner" and fine[0] == "ABBR:abb"
    first = dd["test"][0]  # "NUM:dist How far is it from Denver to Aspen ?"
    assert first["text"] == "How far is it from Denver to Aspen ?"
    assert fine[first["fine_label"]] == "NUM:dist" and first["coarse_label"] == 5
    coarse = Counter(dd["train"]["coarse_label"]) + Counter(dd["validation"]["coarse_label"])
    assert coarse[0] == 86 and coarse[2] == 1162  # ABBR, DESC counts of the README


@needs_data
def test_sst2(local: Any) -> None:
    dd = local("sst2")
    assert sizes(dd) == {"train": 67349, "validation": 872, "test": 1821}
    assert dd["train"].features["label"].names == ["negative", "positive"]
    assert list(dd["train"].features) == ["sentence", "label", "idx"]
    assert set(dd["test"]["label"]) == {-1}
    assert Counter(dd["validation"]["label"]) == {0: 428, 1: 444}


@needs_data
def test_ud_ewt(local: Any) -> None:
    dd = local("ud-ewt")
    assert sizes(dd) == {"train": 12544, "validation": 2001, "test": 2077}
    assert dd["train"].features["upos"].feature.names[:3] == ["ADJ", "ADP", "ADV"]
    assert len(dd["train"].features["upos"].feature.names) == 17
    n_tokens = 0
    for row in dd["validation"]:
        n = len(row["tokens"])
        assert n == len(row["upos"]) == len(row["head"]) == len(row["deprel"]) == len(row["xpos"])
        assert all(0 <= h <= n for h in row["head"])
        n_tokens += n
    assert n_tokens == 25147  # word lines only: no "1-2" ranges, no "8.1" empty nodes
    assert sum(len(t) for t in dd["train"]["tokens"]) == 204577


@needs_data
def test_conll2003(local: Any) -> None:
    """The IOB2 copy: the sentence, token and entity counts of the folder's README."""
    dd = local("conll2003")
    assert sizes(dd) == {"train": 14041, "validation": 3250, "test": 3453}
    names = dd["train"].features["ner_tags"].feature.names
    assert names == ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    assert len(dd["train"].features["pos_tags"].feature.names) == 47
    assert len(dd["train"].features["chunk_tags"].feature.names) == 23
    tokens = {split: sum(len(t) for t in ds["tokens"]) for split, ds in dd.items()}
    assert tokens == {"train": 203621, "validation": 51362, "test": 46435}
    for ds in dd.values():
        for row in ds.select(range(0, len(ds), 97)):
            lengths = {len(row[c]) for c in ("tokens", "pos_tags", "chunk_tags", "ner_tags")}
            assert len(lengths) == 1
    starts = Counter(names[t] for row in dd["train"]["ner_tags"] for t in row if names[t][0] == "B")
    assert starts == {"B-PER": 6600, "B-LOC": 7140, "B-ORG": 6321, "B-MISC": 3438}
    entities = {s: sum(names[t][0] == "B" for row in ds["ner_tags"] for t in row) for s, ds in dd.items()}
    assert entities == {"train": 23499, "validation": 5942, "test": 5648}
    first = dd["train"][0]  # "EU rejects German call to boycott British lamb ."
    assert first["tokens"][:3] == ["EU", "rejects", "German"]
    assert [names[t] for t in first["ner_tags"][:3]] == ["B-ORG", "O", "B-MISC"]
    pos = dd["train"].features["pos_tags"].feature
    assert pos.int2str(first["pos_tags"][0]) == "NNP"


@needs_data
def test_squad(local: Any) -> None:
    """Train: the 11-article subset (3,807 questions); validation: the whole dev set."""
    dd = local("squad")
    assert sizes(dd) == {"train": 3807, "validation": 10570}
    assert list(dd["train"].features) == ["id", "title", "context", "question", "answers"]
    for split, n_answers, n_titles, n_contexts in (("train", 3807, 11, 583),
                                                    ("validation", 34726, 48, 2067)):
        ds = dd[split]
        assert sum(len(a["text"]) for a in ds["answers"]) == n_answers
        assert len(set(ds["title"])) == n_titles and len(set(ds["context"])) == n_contexts
        assert len(set(ds["id"])) == len(ds)
        for context, answers in zip(ds["context"], ds["answers"]):
            for text, start in zip(answers["text"], answers["answer_start"]):
                assert context[start: start + len(text)] == text
    assert dd["train"][0]["answers"] == {"text": ["Saint Bernadette Soubirous"], "answer_start": [515]}
    assert dd["train"][0]["title"] == "University_of_Notre_Dame"
    assert dd["validation"][0]["answers"]["text"] == ["Denver Broncos"] * 3


@needs_data
@pytest.mark.parametrize(
    ("name", "expected", "names"),
    [
        ("cola", {"train": 8551, "validation": 1043, "test": 1063}, ["unacceptable", "acceptable"]),
        (
            "mrpc",
            {"train": 3668, "validation": 408, "test": 1725},
            ["not_equivalent", "equivalent"],
        ),
        ("rte", {"train": 2490, "validation": 277, "test": 3000}, ["entailment", "not_entailment"]),
        ("wnli", {"train": 635, "validation": 71}, ["not_entailment", "entailment"]),
        ("qnli", {"validation": 5463, "test": 5463}, ["entailment", "not_entailment"]),
        ("mnli", {"validation": 9815}, ["entailment", "neutral", "contradiction"]),
        (
            "sst5",
            {"train": 8544, "validation": 1101, "test": 2210},
            ["very negative", "negative", "neutral", "positive", "very positive"],
        ),
    ],
)
def test_fixed_splits(local: Any, name: str, expected: dict[str, int], names: list[str]) -> None:
    dd = local(name)
    assert sizes(dd) == expected
    assert dd[next(iter(expected))].features["label"].names == names


@needs_data
def test_glue_label_counts_by_name(local: Any) -> None:
    rte = local("rte")["train"]
    assert Counter(rte["label"]) == {0: 1249, 1: 1241}  # 0 = entailment
    wnli = local("wnli")["validation"]
    assert Counter(wnli["label"]) == {0: 40, 1: 31}  # 0 = not_entailment
    mnli = local("mnli")["validation"]
    assert Counter(mnli["label"]) == {0: 3479, 1: 3123, 2: 3213}
    mrpc = local("mrpc")["train"]
    assert not mrpc[0]["sentence1"].startswith("\ufeff")
    assert mrpc[0]["sentence1"].startswith("Amrozi accused his brother")


@needs_data
def test_stsb_float_labels(local: Any) -> None:
    dd = local("stsb")
    assert sizes(dd) == {"train": 5749, "validation": 1500, "test": 1379}
    assert dd["train"].features["label"] == Value("float32")
    for split in ("train", "validation"):
        labels = dd[split]["label"]
        assert min(labels) >= 0.0 and max(labels) <= 5.0
    assert set(dd["test"]["label"]) == {-1.0}


@needs_data
def test_qqp_subset(local: Any) -> None:
    dd = local("qqp")
    assert set(dd) == {"train", "validation"}
    assert len(dd["train"]) + len(dd["validation"]) == 20000
    rows = {row["idx"]: row for split in dd.values() for row in split}
    repaired = rows[133273]  # the row with a space instead of a tab before its label
    assert repaired["question2"] == "Which level of prepration is enough for the exam jlpt5?"
    assert repaired["label"] == 0


@needs_data
@pytest.mark.parametrize(
    ("name", "total", "names"),
    [
        ("mr", 10662, ["negative", "positive"]),
        ("cr", 3771, ["negative", "positive"]),  # 3,775 lines, 4 of them blank
        ("mpqa", 10603, ["negative", "positive"]),  # 10,606 lines, 3 of them blank
        ("subj", 10000, ["objective", "subjective"]),
    ],
)
def test_senteval_80_10_10(local: Any, name: str, total: int, names: list[str]) -> None:
    dd = local(name)
    assert sum(sizes(dd).values()) == total
    assert abs(len(dd["test"]) - total / 10) <= 2
    assert abs(len(dd["validation"]) - total / 10) <= 2
    assert dd["train"].features["label"].names == names
    assert all(t.strip() for split in dd.values() for t in split["text"])
    # fixed split: validation_fraction / seed do not change it, so the test split never moves
    other = local(name, validation_fraction=0.3, seed=7)
    assert other["test"]["text"] == dd["test"]["text"]


@needs_data
def test_wikitext2(local: Any) -> None:
    dd = local("wikitext-2")
    assert sizes(dd) == {"train": 36718, "validation": 3760, "test": 4358}
    assert dd["train"][1]["text"] == " = Valkyria Chronicles III = \n"
    assert dd["train"][0]["text"] == ""
    tokens = sum(len(t.split()) for t in dd["validation"]["text"])
    assert tokens == 213886
