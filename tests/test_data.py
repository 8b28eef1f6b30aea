"""Tests of tutorial_lib.data: local copy (real files), verification, and the Hub path (faked)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from tutorial_lib import data

DATA_DIR = Path(
    os.environ.get(data.DATA_ENV_VAR) or Path(__file__).resolve().parents[2] / "shared" / "data"
).expanduser()
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"no local data copy at {DATA_DIR} (set {data.DATA_ENV_VAR})"
)


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    """``local(name, **kw)`` loads from the real local copy (memoised inside the module)."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"no local data copy at {DATA_DIR}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(data.DATA_ENV_VAR, str(DATA_DIR))

        def get(name: str, **kwargs: Any) -> DatasetDict:
            return data.load(name, source="local", **kwargs)

        yield get


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """No local copy, not offline, empty memo: the Hub path is taken."""
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    data.clear_cache()
    yield
    data.clear_cache()


def sizes(dd: DatasetDict) -> dict[str, int]:
    return {split: len(ds) for split, ds in dd.items()}


# ------------------------------------------------------------------------- registry


def test_list_datasets_sorted_and_complete() -> None:
    names = data.list_datasets()
    assert names == sorted(names)
    assert set(names) == {
        "wikitext-2",
        "wikitext-103",
        "trec",
        "sst2",
        "cola",
        "mrpc",
        "rte",
        "wnli",
        "stsb",
        "qnli",
        "qqp",
        "mnli",
        "mr",
        "cr",
        "mpqa",
        "subj",
        "sst5",
        "ud-ewt",
    }


def test_unknown_name_lists_valid_names_and_suggests() -> None:
    with pytest.raises(data.DataError) as info:
        data.load("trex")
    msg = str(info.value)
    assert "'trex'" in msg and "Did you mean 'trec'" in msg
    for name in data.list_datasets():
        assert name in msg


def test_data_dir_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    assert data.data_dir() is None
    monkeypatch.setenv(data.DATA_ENV_VAR, "~/somewhere")
    assert data.data_dir() == Path("~/somewhere").expanduser()


# ---------------------------------------------------------------------- local copy


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


@needs_data
def test_source_of_local_and_auto(local: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    assert data.source_of("TREC") == f"local copy {DATA_DIR / 'trec'}"
    assert data.source_of("wikitext-103") == "hub Salesforce/wikitext (config wikitext-103-v1)"
    assert data.source_of("trec", source="hub") == (
        "hub CogComp/trec (revision refs/convert/parquet)"
    )
    with pytest.raises(data.DataError, match="not part of the local copy"):
        data.load("wikitext-103", source="local")


# --------------------------------------------------------------- validation carving


@needs_data
def test_validation_carving_reproducible_disjoint_test_untouched(local: Any) -> None:
    whole = local("trec", validation_fraction=0)
    assert set(whole) == {"train", "test"} and len(whole["train"]) == 5452
    a = local("trec", seed=0)
    data.clear_cache()
    a_again = local("trec", seed=0)
    b = local("trec", seed=1)
    assert a is not a_again
    assert a_again["validation"]["text"] == a["validation"]["text"]
    assert b["validation"]["text"] != a["validation"]["text"]
    for dd in (a, b):
        # train and validation partition the original train (as a multiset): disjoint rows
        parts = Counter(dd["train"]["text"]) + Counter(dd["validation"]["text"])
        assert parts == Counter(whole["train"]["text"])
        assert dd["test"]["text"] == whole["test"]["text"]
        assert len(dd["validation"]) == 546
        # stratified by coarse label: every class is present in validation
        assert set(dd["validation"]["coarse_label"]) == set(range(6))
    quarter = local("trec", validation_fraction=0.25, seed=0)
    assert len(quarter["validation"]) == 1363


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="validation_fraction"):
        data.load("trec", validation_fraction=1.0)
    with pytest.raises(ValueError, match="source"):
        data.load("trec", source="web")
    monkeypatch.delenv(data.DATA_ENV_VAR, raising=False)
    with pytest.raises(data.DataError, match=data.DATA_ENV_VAR):
        data.load("trec", source="local")


# ----------------------------------------------------------------- verification


def _mirror(tmp_path: Path, skip: str | None = None) -> Path:
    """A copy of the data dir made of symlinks (``skip`` left out)."""
    root = tmp_path / "data"
    for rel in data.EXPECTED_SHA256:
        if rel == skip or not (DATA_DIR / rel).exists():
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(DATA_DIR / rel)
    return root


@needs_data
def test_sha_mismatch_raises_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = "trec/TREC_10.label"
    root = _mirror(tmp_path, skip=rel)
    corrupt = root / rel
    corrupt.write_bytes((DATA_DIR / rel).read_bytes() + b"x")
    monkeypatch.setenv(data.DATA_ENV_VAR, str(root))
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    msg = str(info.value)
    assert str(corrupt) in msg
    assert data.EXPECTED_SHA256[rel] in msg
    assert data._sha256(corrupt) in msg
    assert "MANIFEST.md" in msg and data.DATA_ENV_VAR in msg
    # the other datasets of the mirror still load and verify
    assert len(data.load("wnli")["train"]) == 635


@needs_data
def test_patched_hash_is_checked_even_after_memoisation(
    local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    local("sst5")
    monkeypatch.setitem(data.EXPECTED_SHA256, "senteval/SST-5/sentiment-dev", "0" * 64)
    with pytest.raises(data.DataError, match="sha256 mismatch .*sentiment-dev"):
        local("sst5")


@needs_data
def test_missing_file_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = "glue/RTE/dev.tsv"
    root = _mirror(tmp_path, skip=rel)
    monkeypatch.setenv(data.DATA_ENV_VAR, str(root))
    with pytest.raises(data.DataError) as info:
        data.load("rte")
    assert str(root / rel) in str(info.value)
    assert data.DATA_ENV_VAR in str(info.value)


def test_missing_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(data.DataError, match=data.DATA_ENV_VAR):
        data.load("trec")


def test_verify_file_cache_notices_changes(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"hello\n")
    good = data._sha256(path)
    assert data.verify_file(path, good) == path
    assert data.verify_file(path, good) == path  # cached
    path.write_bytes(b"hello, changed\n")
    with pytest.raises(data.DataError, match="expected " + good):
        data.verify_file(path, good)
    with pytest.raises(data.DataError, match="missing file"):
        data.verify_file(tmp_path / "absent.txt", good)


# ----------------------------------------------------------------- Hub path (faked)


class FakeHub:
    """Stands in for ``datasets.load_dataset``: records calls, returns tiny DatasetDicts."""

    def __init__(self, result: DatasetDict | BaseException | None = None) -> None:
        self.result = result
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, path: str, name: str | None = None, **kwargs: Any) -> DatasetDict:
        self.calls.append((path, name, kwargs))
        if self.result is None:
            raise AssertionError("load_dataset must not be called")
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def _install(monkeypatch: pytest.MonkeyPatch, fake: FakeHub) -> FakeHub:
    monkeypatch.setattr(data.datasets, "load_dataset", fake)
    return fake


def _ds(rows: dict[str, list[Any]], features: dict[str, Any]) -> Dataset:
    return Dataset.from_dict(rows, features=Features(features))


def test_hub_trec_normalised(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    feats = {
        "text": Value("string"),
        "coarse_label": ClassLabel(names=data.TREC_COARSE),
        "fine_label": ClassLabel(names=data.TREC_FINE),
    }
    rows = {
        "text": [f"q{i} ?" for i in range(60)],
        "coarse_label": [i % 6 for i in range(60)],
        "fine_label": [26 if i % 6 == 2 else 0 for i in range(60)],
    }
    fake = _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": _ds(rows, feats), "test": _ds({k: v[:4] for k, v in rows.items()}, feats)}
            )
        ),
    )
    dd = data.load("trec")
    assert fake.calls == [("CogComp/trec", None, {"revision": "refs/convert/parquet"})]
    assert sizes(dd) == {"train": 54, "validation": 6, "test": 4}
    assert sorted(dd["validation"]["coarse_label"]) == list(range(6))  # stratified
    assert dd["train"].features == data.TREC_FEATURES
    assert dd["test"]["text"] == rows["text"][:4]
    assert data.source_of("trec") == "hub CogComp/trec (revision refs/convert/parquet)"
    if DATA_DIR.is_dir():
        monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
        assert dd["train"].features == data.load("trec", source="local")["train"].features


def test_hub_glue_rte_and_mnli(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    feats = {
        "sentence1": Value("string"),
        "sentence2": Value("string"),
        "label": ClassLabel(names=["entailment", "not_entailment"]),
        "idx": Value("int32"),
    }
    row = {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": [0, 1], "idx": [0, 1]}
    test = dict(row, label=[-1, -1])
    fake = _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": _ds(row, feats), "validation": _ds(row, feats), "test": _ds(test, feats)}
            )
        ),
    )
    rte = data.load("rte")
    assert fake.calls == [("nyu-mll/glue", "rte", {})]
    assert sizes(rte) == {"train": 2, "validation": 2, "test": 2}
    assert rte["validation"].features == data.RTE_FEATURES
    assert rte["test"]["label"] == [-1, -1]

    mfeats = {
        "premise": Value("string"),
        "hypothesis": Value("string"),
        "label": ClassLabel(names=["entailment", "neutral", "contradiction"]),
        "idx": Value("int32"),
    }
    mrow = {
        "premise": ["p1", "p2", "p3"],
        "hypothesis": ["h1", "h2", "h3"],
        "label": [0, 1, 2],
        "idx": [0, 1, 2],
    }
    fake = _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {
                    split: _ds(mrow, mfeats)
                    for split in (
                        "train",
                        "validation_matched",
                        "validation_mismatched",
                        "test_matched",
                        "test_mismatched",
                    )
                }
            )
        ),
    )
    mnli = data.load("mnli")
    assert fake.calls == [("nyu-mll/glue", "mnli", {})]
    assert list(mnli) == ["validation"]
    assert mnli["validation"].features == data.MNLI_FEATURES
    if DATA_DIR.is_dir():
        monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
        for name, hub in (("rte", rte), ("mnli", mnli)):
            local_dd = data.load(name, source="local")
            assert hub["validation"].features == local_dd["validation"].features


def test_hub_mr_and_setfit_labels(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    feats = {"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])}
    rows = {"text": ["bad", "good"], "label": [0, 1]}
    fake = _install(
        monkeypatch,
        FakeHub(DatasetDict({s: _ds(rows, feats) for s in ("train", "validation", "test")})),
    )
    mr = data.load("mr")
    assert fake.calls == [("cornell-movie-review-data/rotten_tomatoes", None, {})]
    assert mr["train"].features["label"].names == ["negative", "positive"]
    assert mr["test"]["label"] == [0, 1]

    # SetFit style: plain int label + label_text; mapped by name, validation carved
    sfeats = {"text": Value("string"), "label": Value("int64"), "label_text": Value("string")}
    names = data.SST5_NAMES
    srows = {
        "text": [f"s{i}" for i in range(20)],
        "label": [i % 5 for i in range(20)],
        "label_text": [names[i % 5] for i in range(20)],
    }
    fake = _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": _ds(srows, sfeats), "dev": _ds(srows, sfeats), "test": _ds(srows, sfeats)}
            )
        ),
    )
    sst5 = data.load("sst5")
    assert fake.calls == [("SetFit/sst5", None, {})]
    assert sizes(sst5) == {"train": 20, "validation": 20, "test": 20}
    assert list(sst5["train"].features) == ["text", "label"]
    assert sst5["train"].features["label"].names == names
    assert sst5["test"]["label"] == srows["label"]


def test_hub_mpqa_rename(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    feats = {"sentence": Value("string"), "label": Value("int64")}
    rows = {"sentence": [f"x{i}" for i in range(10)], "label": [i % 2 for i in range(10)]}
    _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": _ds(rows, feats), "dev": _ds(rows, feats), "test": _ds(rows, feats)}
            )
        ),
    )
    dd = data.load("mpqa")
    assert dd["train"].features == Features(
        {"text": Value("string"), "label": ClassLabel(names=["negative", "positive"])}
    )
    assert dd["validation"]["text"] == rows["sentence"]


def test_hub_ud_normalised(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # option A/B upos order (18 names incl. "_"), heads as strings, split named "dev"
    hub_upos = [
        "NOUN",
        "PUNCT",
        "ADP",
        "NUM",
        "SYM",
        "SCONJ",
        "ADJ",
        "PART",
        "DET",
        "CCONJ",
        "PROPN",
        "PRON",
        "X",
        "_",
        "ADV",
        "INTJ",
        "VERB",
        "AUX",
    ]
    feats = {
        "sent_id": Value("string"),
        "text": Value("string"),
        "comments": List(Value("string")),
        "tokens": List(Value("string")),
        "lemmas": List(Value("string")),
        "upos": List(ClassLabel(names=hub_upos)),
        "xpos": List(Value("string")),
        "feats": List(Value("string")),
        "head": List(Value("string")),
        "deprel": List(Value("string")),
        "deps": List(Value("string")),
        "misc": List(Value("string")),
    }
    rows = {
        "sent_id": ["s1"],
        "text": ["Dogs bark."],
        "comments": [[]],
        "tokens": [["Dogs", "bark", "."]],
        "lemmas": [["dog", "bark", "."]],
        "upos": [[0, 16, 1]],
        "xpos": [["NNS", "VBP", None]],
        "feats": [["_", "_", "_"]],
        "head": [["2", "0", "2"]],
        "deprel": [["nsubj", "root", "punct"]],
        "deps": [["_", "_", "_"]],
        "misc": [["_", "_", "_"]],
    }
    fake = _install(
        monkeypatch, FakeHub(DatasetDict({s: _ds(rows, feats) for s in ("train", "dev", "test")}))
    )
    dd = data.load("ud-ewt")
    assert fake.calls == [("commul/universal_dependencies", "en_ewt", {"revision": "2.17"})]
    assert sizes(dd) == {"train": 1, "validation": 1, "test": 1}
    assert dd["train"].features == data.UD_FEATURES
    row = dd["validation"][0]
    upos = data.UD_FEATURES["upos"].feature
    assert [upos.int2str(u) for u in row["upos"]] == ["NOUN", "VERB", "PUNCT"]
    assert row["head"] == [2, 0, 2]
    assert row["xpos"] == ["NNS", "VBP", "_"]
    if DATA_DIR.is_dir():
        monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
        assert dd["train"].features == data.load("ud-ewt", source="local")["train"].features


def test_hub_wikitext103(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {"text": ["", " = A = \n", "b\n"]}
    fake = _install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {s: _ds(rows, {"text": Value("string")}) for s in ("train", "validation", "test")}
            )
        ),
    )
    dd = data.load("WikiText-103")
    assert fake.calls == [("Salesforce/wikitext", "wikitext-103-v1", {})]
    assert dd["train"]["text"] == rows["text"]
    # auto with a local copy still goes to the Hub: wikitext-103 is not part of it
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    assert data.source_of("wikitext-103").startswith("hub Salesforce/wikitext")


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_without_local_copy(
    online: None, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    fake = _install(monkeypatch, FakeHub(None))  # asserts if called
    monkeypatch.setenv(var, "1")
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    msg = str(info.value)
    assert "offline" in msg and data.DATA_ENV_VAR in msg and "CogComp/trec" in msg
    assert fake.calls == []


def test_hub_connection_error_becomes_data_error(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(monkeypatch, FakeHub(ConnectionError("Couldn't reach the Hub")))
    with pytest.raises(data.DataError) as info:
        data.load("sst2")
    msg = str(info.value)
    assert data.DATA_ENV_VAR in msg and "nyu-mll/glue" in msg
    assert isinstance(info.value.__cause__, ConnectionError)


@needs_data
def test_hub_forced_even_with_local_copy(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    fake = _install(monkeypatch, FakeHub(ConnectionError("no network")))
    with pytest.raises(data.DataError):
        data.load("cola", source="hub")
    assert fake.calls == [("nyu-mll/glue", "cola", {})]
    fake.calls.clear()
    assert len(data.load("cola")["train"]) == 8551  # auto -> local, no Hub call
    assert fake.calls == []
