"""Tests of tutorial_lib.data.fingerprints: the committed content fingerprints, the canonical form,
and the Hub path's check against them (``hub.fetch`` faked: no network)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from data_helpers import DATA_DIR, go_online, needs_data
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from tutorial_lib import data
from tutorial_lib.data import fingerprints, hub
from tutorial_lib.data.fingerprints import HUB_DIFFERS, SplitPrint, check_hub, split_print
from tutorial_lib.data.registry import REGISTRY, DatasetSpec, lookup

RECORDED = fingerprints.recorded  # go_online replaces it; the Hub tests here put it back
SMALL = ["wnli", "rte", "mrpc", "stsb", "trec", "sst5"]  # a few seconds in all (the full table:
# python -m tutorial_lib.ops.fingerprints, about 20 s on 2 busy cores)


@pytest.fixture(scope="module")
def local_raw() -> Callable[[str], DatasetDict]:
    """``local_raw(name)``: the local copy's splits as its parser gives them (nothing carved)."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"no local data copy at {DATA_DIR} (set {data.DATA_ENV_VAR})")
    cache: dict[str, DatasetDict] = {}

    def read(name: str) -> DatasetDict:
        if name not in cache:
            parse = lookup(name).parse_local
            assert parse is not None
            cache[name] = parse(DATA_DIR)
        return cache[name]

    return read


# ---------------------------------------------------------------- the committed file


def test_recorded_covers_every_dataset_of_the_local_copy_and_nothing_else() -> None:
    local = {name for name, spec in REGISTRY.items() if spec.parse_local is not None}
    prints = RECORDED()
    assert set(prints) == local and "wikitext-103" not in prints
    for name, splits in prints.items():
        assert splits and set(splits) <= set(data.SPLITS), name
        for split, p in splits.items():
            assert p.rows > 0 and len(p.sha256) == 64, (name, split)
            assert set(p.labels) == set(fingerprints._label_columns(REGISTRY[name].features)), name


def test_the_file_is_as_the_writer_writes_it() -> None:
    """Not edited by hand: reading and writing it back gives the same text."""
    text = fingerprints.FINGERPRINTS_FILE.read_text(encoding="utf-8")
    assert fingerprints.to_json(RECORDED()) == text
    assert fingerprints.WRITE_COMMAND in text


def test_hub_differs_names_recorded_splits_with_a_reason() -> None:
    prints = RECORDED()
    for name, splits in HUB_DIFFERS.items():
        assert name in prints, name
        for split, reason in splits.items():
            assert split in prints[name] and reason.strip(), (name, split)
    assert set(fingerprints.hub_checked("mrpc")) == set()
    assert set(fingerprints.hub_checked("rte")) == {"validation", "test"}
    assert set(fingerprints.hub_checked("sst2")) == {"train", "validation", "test"}
    assert fingerprints.hub_checked("wikitext-103") == {}


@needs_data
@pytest.mark.parametrize("name", SMALL)
def test_recorded_equals_the_local_copy(name: str) -> None:
    """The committed fingerprints are those of the local copy (files and parser). The whole table
    is compared by ``python -m tutorial_lib.ops.fingerprints`` (tests/test_fingerprints.py)."""
    assert fingerprints.local_prints(lookup(name), DATA_DIR) == RECORDED()[name]


def test_local_prints_of_a_hub_only_dataset_is_a_clear_error() -> None:
    with pytest.raises(data.DataError, match="wikitext-103 is not part of the local copy"):
        fingerprints.local_prints(lookup("wikitext-103"), DATA_DIR)


# ------------------------------------------------------------------- the canonical form


def _pairs(labels: list[int], names: list[str] | None = None) -> Dataset:
    features = Features({
        "sentence1": Value("string"), "sentence2": Value("string"),
        "label": ClassLabel(names=names or ["not_entailment", "entailment"]), "idx": Value("int32"),
    })
    n = len(labels)
    return Dataset.from_dict({"sentence1": [f"a{i} é" for i in range(n)], "sentence2": ["b"] * n,
                              "label": labels, "idx": list(range(n))}, features=features)


def test_canonical_rows_are_sorted_compact_json_over_the_schema() -> None:
    ds = _pairs([1, -1]).add_column("extra", ["x", "y"])
    rows = list(fingerprints.canonical_rows(ds, data.WNLI_FEATURES))
    assert rows == ['{"idx":0,"label":1,"sentence1":"a0 é","sentence2":"b"}',
                    '{"idx":1,"label":-1,"sentence1":"a1 é","sentence2":"b"}']
    p = split_print(ds, data.WNLI_FEATURES)
    assert p.rows == 2 and p.labels == {"label": [None, "entailment"]}


def test_same_content_in_another_layout_has_the_same_fingerprint() -> None:
    """Column order, an extra column and a Hub-style ClassLabel order (by-name remapping in
    ``normalise_hub``) do not change the fingerprint: only the content in the schema does."""
    ours = _pairs([0, 1, 1, 0])
    spec = lookup("wnli")
    reversed_names = ["entailment", "not_entailment"]
    theirs = _pairs([1, 0, 0, 1], reversed_names).add_column("extra", list("wxyz"))
    theirs = theirs.select_columns(["extra", "idx", "label", "sentence2", "sentence1"])
    normalised = hub.normalise_hub(DatasetDict({"validation": theirs}), spec)["validation"]
    assert split_print(normalised, spec.features) == split_print(ours, spec.features)


def test_every_kind_of_feature_serialises() -> None:
    """Lists of ClassLabel (label sets over all tokens), nested dicts, float32 scores."""
    conll = REGISTRY["conll2003"].features
    ds = Dataset.from_dict({"id": ["0"], "tokens": [["EU", "rejects"]], "pos_tags": [[22, 42]],
                            "chunk_tags": [[11, 21]], "ner_tags": [[3, 0]]}, features=conll)
    assert split_print(ds, conll).labels["ner_tags"] == ["O", "B-ORG"]
    squad = data.SQUAD_FEATURES
    sq = Dataset.from_dict({"id": ["q"], "title": ["t"], "context": ["c"], "question": ["?"],
                            "answers": [{"text": ["c"], "answer_start": [0]}]}, features=squad)
    assert '"answers":{"answer_start":[0],"text":["c"]}' in next(fingerprints.canonical_rows(sq, squad))
    stsb = Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [3.8], "idx": [0]},
                             features=data.STSB_FEATURES)
    assert '"label":3.799999952316284' in next(fingerprints.canonical_rows(stsb, data.STSB_FEATURES))


# ------------------------------------------------------------------------ the check


def _altered(ds: Dataset, how: str) -> Dataset:
    """One row changed, one row dropped, one label flipped, rows swapped, or one class gone."""
    if how == "row changed":
        return ds.map(lambda r, i: {"sentence1": r["sentence1"] + ("!" if i == 5 else "")},
                      with_indices=True)
    if how == "row dropped":
        return ds.select([i for i in range(len(ds)) if i != 5])
    if how == "label flipped":
        return ds.map(lambda r, i: {"label": 1 - r["label"] if i == 5 else r["label"]}, with_indices=True)
    if how == "rows swapped":
        return ds.select([1, 0, *range(2, len(ds))])
    assert how == "class gone"
    return ds.map(lambda r: {"label": 0})


WHAT_DIFFERS = {
    "row changed": ["content sha256"],
    "row dropped": ["70 rows, recorded 71", "content sha256"],
    "label flipped": ["content sha256"],
    "rows swapped": ["content sha256"],  # order matters: the carved splits depend on it
    "class gone": ["label set of label: missing [entailment]", "content sha256"],
}


@needs_data
@pytest.mark.parametrize("how", sorted(WHAT_DIFFERS))
def test_an_altered_split_fails_the_check_naming_it(
    how: str, local_raw: Callable[[str], DatasetDict]
) -> None:
    spec = lookup("wnli")
    dd = DatasetDict(local_raw("wnli"))
    check_hub(spec, dd)  # the local copy passes
    dd["validation"] = _altered(dd["validation"], how)
    with pytest.raises(data.DataError) as info:
        check_hub(spec, dd)
    msg = str(info.value)
    assert msg.startswith("wnli from hub nyu-mll/glue (config wnli) is not the data it was recorded with")
    assert "split validation: " in msg and "split train" not in msg
    for phrase in WHAT_DIFFERS[how]:
        assert phrase in msg
    if how != "row dropped":
        assert "rows, recorded" not in msg
    for advice in (data.DATA_ENV_VAR, "pin revision=", "HUB_DIFFERS", "no revision is pinned"):
        assert advice in msg


def test_the_differences_of_a_split_print() -> None:
    want = SplitPrint(3, {"label": ["a", "b"]}, "0" * 64)
    assert want.differences(want) == []
    got = SplitPrint(4, {"label": [None, "a"]}, "1" * 64)
    assert want.differences(got) == [
        "4 rows, recorded 3",
        "label set of label: new [(unlabelled)], missing [b]",
        "content sha256 111111111111…, recorded 000000000000…",
    ]


# ------------------------------------------------------------------- the Hub path


@pytest.fixture
def hub_serves(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[DatasetDict], None]]:
    """``hub_serves(dd)``: the Hub path is taken, ``hub.fetch`` returns ``dd``, and the recorded
    fingerprints are checked (go_online turns them off for the fake Hubs of the other tests)."""

    def serve(dd: DatasetDict) -> None:
        def fake_fetch(spec: DatasetSpec) -> DatasetDict:
            return dd

        monkeypatch.setattr(hub, "fetch", fake_fetch)

    online = go_online(monkeypatch)
    next(online)
    monkeypatch.setattr(fingerprints, "recorded", RECORDED)
    yield serve
    next(online, None)


@needs_data
def test_hub_path_passes_the_recorded_content_and_fails_an_altered_split(
    hub_serves: Callable[[DatasetDict], None], local_raw: Callable[[str], DatasetDict]
) -> None:
    """A Hub that serves the local copy's rows loads; one changed row of a checked split is the
    one clear error, from :func:`data.load`."""
    rte = DatasetDict(local_raw("rte"))
    hub_serves(rte)
    assert {s: len(d) for s, d in data.load("rte", validation_fraction=0).items()} == {
        "train": 2490, "validation": 277, "test": 3000}
    data.clear_cache()
    hub_serves(DatasetDict(rte, validation=_altered(rte["validation"], "row changed")))
    with pytest.raises(data.DataError, match=r"^rte from hub nyu-mll/glue .* validation: content sha256"):
        data.load("rte")


@needs_data
def test_hub_path_skips_the_splits_that_differ_by_design_and_hub_only_ones(
    hub_serves: Callable[[DatasetDict], None], local_raw: Callable[[str], DatasetDict]
) -> None:
    """RTE train differs on the Hub by one leading space (HUB_DIFFERS); WNLI's Hub test split has
    no local counterpart: neither is checked."""
    rte = DatasetDict(local_raw("rte"))
    hub_serves(DatasetDict(rte, train=_altered(rte["train"], "row dropped")))
    assert len(data.load("rte", validation_fraction=0)["train"]) == 2489
    wnli = DatasetDict(local_raw("wnli"))
    hub_serves(DatasetDict(wnli, test=wnli["validation"].map(lambda r: {"label": -1})))
    assert list(data.load("wnli")) == ["train", "validation", "test"]


@needs_data
def test_hub_path_fails_when_a_recorded_split_is_missing(
    hub_serves: Callable[[DatasetDict], None], local_raw: Callable[[str], DatasetDict]
) -> None:
    hub_serves(DatasetDict({"train": local_raw("wnli")["train"]}))
    with pytest.raises(data.DataError, match="split validation: missing \\(recorded 71 rows\\)"):
        data.load("wnli", validation_fraction=0)


@needs_data
def test_hub_path_checks_convai2_before_its_split_by_dialogue(
    hub_serves: Callable[[DatasetDict], None], local_raw: Callable[[str], DatasetDict]
) -> None:
    """ConvAI2's recorded split is the official validation set, whose order fixes our dev and test
    dialogues: the Hub's must be the same 1,000 dialogues in the same order; its train is not checked."""
    official = local_raw("convai2")["validation"]
    stand_in_train = official.select(range(3))
    hub_serves(DatasetDict({"train": stand_in_train, "validation": official}))
    got = data.load("convai2")
    assert [len(got[s]) for s in data.SPLITS] == [3, 100, 200]
    data.clear_cache()
    hub_serves(DatasetDict({"train": stand_in_train, "validation": _altered(official, "rows swapped")}))
    with pytest.raises(data.DataError, match="convai2 from hub AlekseyKorshuk/persona-chat .*revision"):
        data.load("convai2")
