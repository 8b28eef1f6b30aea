"""Tests of the ConvAI2 entry of tutorial_lib.data: the parser, the split by dialogue, the Hub path."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from data_helpers import DATA_DIR, go_online, load_local, needs_data
from datasets import Dataset, DatasetDict

from tutorial_lib import data
from tutorial_lib.data import hub
from tutorial_lib.data.local import parse_convai2, parse_convai2_lines
from tutorial_lib.data.registry import DatasetSpec, HubSpec

HUB = HubSpec("AlekseyKorshuk/persona-chat", revision="498fd0081de41b8833a72e1a126aaf52917e1ddd")


def key(row: dict) -> str:
    """A dialogue's whole content: two rows with the same key are the same dialogue."""
    return json.dumps([row["personality"], row["utterances"]])


def keys(ds: Dataset) -> list[str]:
    return [key(r) for r in ds]


def test_parser_reads_persona_history_and_candidates() -> None:
    lines = [
        "1 your persona: i like cats.",
        "2 your persona: i am a nurse.",
        "3 hi there\thello !\t\tbye|no|hello !",
        "4 how are you ?\tfine , thanks .\t\tfine , thanks .",
        "1 your persona: i surf.",
        "2 yo\tsup\t\tx|sup",
    ]
    cols = parse_convai2_lines(lines, "test")
    assert cols["personality"] == [["i like cats.", "i am a nurse."], ["i surf."]]
    first = cols["utterances"][0]
    assert first[0] == {"candidates": ["bye", "no", "hello !"], "history": ["hi there"]}
    assert first[1]["history"] == ["hi there", "hello !", "how are you ?"]  # partner speaks first
    assert cols["utterances"][1] == [{"candidates": ["x", "sup"], "history": ["yo"]}]


def test_parser_rejects_a_gold_reply_that_is_not_the_last_candidate() -> None:
    with pytest.raises(data.DataError, match="reply last"):
        parse_convai2_lines(["1 hi\thello\t\thello|bye"], "bad.txt")


@needs_data
def test_local_counts_of_the_readme() -> None:
    dd = load_local("convai2")
    whole = DatasetDict({s: dd[s] for s in dd})
    rows = [r for s in whole for r in whole[s]]
    assert len(rows) == 1000
    turns = [u for r in rows for u in r["utterances"]]
    assert len(turns) == 7801
    assert all(len(u["candidates"]) == 20 for u in turns)
    assert sum(len(r["personality"]) for r in rows) == 4483
    assert all(len(u["history"]) % 2 == 1 for u in turns)  # partner, reply, ..., partner


@needs_data
def test_split_by_dialogue_sizes_seed_and_no_overlap() -> None:
    dd = load_local("convai2")
    assert list(dd) == ["train", "validation", "test"]
    assert {s: len(dd[s]) for s in dd} == {"train": 700, "validation": 100, "test": 200}
    assert {s: sum(len(u) for u in dd[s]["utterances"]) for s in dd} == {
        "train": 5468, "validation": 780, "test": 1553}
    sets = {s: set(keys(dd[s])) for s in dd}
    assert sum(len(v) for v in sets.values()) == 1000  # every dialogue once, none in two splits
    assert not (sets["train"] & sets["validation"] or sets["train"] & sets["test"]
                or sets["validation"] & sets["test"])
    # the fixed seed: the same test set in every run and on every machine
    assert dd["test"][0]["personality"][0] == "i love disneyland and mickey mouse."
    again = data.split_by_dialogue(DatasetDict({"validation": Dataset.from_list(
        [r for s in ("train", "validation", "test") for r in dd[s]], features=data.CONVAI2_FEATURES)}))
    assert {s: len(again[s]) for s in again} == {"train": 700, "validation": 100, "test": 200}


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from go_online(monkeypatch)


@needs_data
def test_hub_path_keeps_our_dev_and_test_and_uses_the_official_train(
    online: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Hub serves TransferTransfo's JSON layout (train + validation): validation and test are
    the same dialogues as from the local copy, train is the official training split."""
    local = load_local("convai2")
    official = parse_convai2(DATA_DIR)["validation"]  # the file, in its order
    stand_in_train = local["train"].select(range(5))  # the real one has 17,878 dialogues
    asked: list[HubSpec] = []

    def fake_fetch(spec: DatasetSpec) -> DatasetDict:
        asked.append(spec.hub)
        return DatasetDict({"train": stand_in_train, "validation": official})

    monkeypatch.setattr(hub, "fetch", fake_fetch)
    got = data.load("convai2")
    assert asked == [HUB]
    assert keys(got["train"]) == keys(stand_in_train)
    assert keys(got["validation"]) == keys(local["validation"])
    assert keys(got["test"]) == keys(local["test"])

