"""Tests of tutorial_lib.data.registry: the names accepted by load, and unknown names."""

from __future__ import annotations

import pytest

from tutorial_lib import data


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
        "conll2003",
        "squad",
        "convai2",
    }


def test_unknown_name_lists_valid_names_and_suggests() -> None:
    with pytest.raises(data.DataError) as info:
        data.load("trex")
    msg = str(info.value)
    assert "'trex'" in msg and "Did you mean 'trec'" in msg
    for name in data.list_datasets():
        assert name in msg
