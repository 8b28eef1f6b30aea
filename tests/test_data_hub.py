"""Tests of tutorial_lib.data.hub: the Hub path, with datasets.load_dataset faked (no network)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from data_helpers import DATA_DIR, FakeHub, ds, go_online, install, sizes
from datasets import ClassLabel, DatasetDict, Features, List, Value
from datasets.exceptions import DatasetNotFoundError

from tutorial_lib import data


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No local copy, not offline, empty memo: the Hub path is taken."""
    yield from go_online(monkeypatch)


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
    fake = install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": ds(rows, feats), "test": ds({k: v[:4] for k, v in rows.items()}, feats)}
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
    fake = install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": ds(row, feats), "validation": ds(row, feats), "test": ds(test, feats)}
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
    fake = install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {
                    split: ds(mrow, mfeats)
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
    fake = install(
        monkeypatch,
        FakeHub(DatasetDict({s: ds(rows, feats) for s in ("train", "validation", "test")})),
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
    fake = install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": ds(srows, sfeats), "dev": ds(srows, sfeats), "test": ds(srows, sfeats)}
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
    install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {"train": ds(rows, feats), "dev": ds(rows, feats), "test": ds(rows, feats)}
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
    fake = install(
        monkeypatch, FakeHub(DatasetDict({s: ds(rows, feats) for s in ("train", "dev", "test")}))
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
    fake = install(
        monkeypatch,
        FakeHub(
            DatasetDict(
                {s: ds(rows, {"text": Value("string")}) for s in ("train", "validation", "test")}
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
    """Offline, ``datasets`` is still asked (it reads a copy cached by an earlier online run);
    when it has none, the one offline error says what to do."""
    fake = install(monkeypatch, FakeHub(ConnectionError("offline mode is enabled")))
    monkeypatch.setenv(var, "1")
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    msg = str(info.value)
    assert "offline" in msg and data.DATA_ENV_VAR in msg and "CogComp/trec" in msg
    assert "the Hugging Face cache has no copy" in msg
    assert len(fake.calls) == 1


def test_offline_with_a_cached_hub_copy_loads_it(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``python -m tutorial_lib.ops.prefetch`` is for: online once, then offline from the cache
    (the GPU workflow's legs run with HF_HUB_OFFLINE=1 and no local copy)."""
    rows = {"text": ["", " = A = \n", "b\n"]}
    install(monkeypatch, FakeHub(DatasetDict(
        {s: ds(rows, {"text": Value("string")}) for s in ("train", "validation", "test")})))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert data.load("wikitext-103")["train"]["text"] == rows["text"]


def test_hub_connection_error_becomes_data_error(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, FakeHub(ConnectionError("Couldn't reach the Hub")))
    with pytest.raises(data.DataError) as info:
        data.load("sst2")
    msg = str(info.value)
    assert data.DATA_ENV_VAR in msg and "nyu-mll/glue" in msg
    assert isinstance(info.value.__cause__, ConnectionError)


def _offline_advice(hub_id: str) -> str:
    """The advice part of the offline error when TUTORIAL_DATA_DIR is unset."""
    return (
        f"there is no local copy ({data.DATA_ENV_VAR} is not set). Set {data.DATA_ENV_VAR} to a "
        "local copy of the data (the folder holding MANIFEST.md; see README), or go online to "
        f"load it from hub {hub_id}"
    )


@pytest.mark.parametrize("cause", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "no network"])
def test_offline_without_local_copy_is_one_clear_error(
    online: None, monkeypatch: pytest.MonkeyPatch, cause: str
) -> None:
    """Offline by flag or by a failed connection, with no local copy: the same error, saying
    to set TUTORIAL_DATA_DIR or go online."""
    if cause == "no network":
        install(monkeypatch, FakeHub(ConnectionError("Couldn't reach 'CogComp/trec' on the Hub")))
        reason = "the Hub could not be reached: Couldn't reach 'CogComp/trec' on the Hub"
    else:
        install(monkeypatch, FakeHub(ConnectionError("offline mode is enabled")))
        monkeypatch.setenv(cause, "1")
        reason = f"{cause}=1 is set and the Hugging Face cache has no copy"
    with pytest.raises(data.DataError) as info:
        data.load("trec")
    assert str(info.value) == (
        f"cannot load trec: offline ({reason}); "
        + _offline_advice("CogComp/trec (revision refs/convert/parquet)")
    )


def test_offline_hub_only_dataset_says_go_online(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(data.DATA_ENV_VAR, "/anywhere")
    with pytest.raises(data.DataError) as info:
        data.load("wikitext-103")
    msg = str(info.value)
    assert msg.startswith("cannot load wikitext-103: offline (HF_HUB_OFFLINE=1 is set and the Hugging Face "
                          "cache has no copy)")
    assert "not part of the local copy: go online" in msg and "Salesforce/wikitext" in msg


def test_offline_with_hub_forced_points_to_the_local_copy(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "true")
    monkeypatch.setenv(data.DATA_ENV_VAR, "/anywhere")
    with pytest.raises(data.DataError) as info:
        data.load("trec", source="hub")
    msg = str(info.value)
    assert msg.startswith("cannot load trec: offline (HF_DATASETS_OFFLINE=true is set and the Hugging "
                          "Face cache has no copy)")
    assert "source='hub' was asked for. Use source='auto'" in msg and "$TUTORIAL_DATA_DIR" in msg


def test_dataset_missing_on_the_hub_is_not_called_offline(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, FakeHub(DatasetNotFoundError("Dataset 'nyu-mll/glue' doesn't exist")))
    with pytest.raises(data.DataError) as info:
        data.load("rte")
    msg = str(info.value)
    assert "hub nyu-mll/glue (config rte) was not found on the Hub" in msg
    assert "offline" not in msg and data.DATA_ENV_VAR in msg
    assert isinstance(info.value.__cause__, DatasetNotFoundError)
