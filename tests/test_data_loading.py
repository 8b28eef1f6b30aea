"""Tests of tutorial_lib.data.loading: source choice, validation carving, arguments."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from data_helpers import DATA_DIR, FakeHub, go_online, install, load_local, needs_data
from datasets import DatasetDict

from tutorial_lib import data


@pytest.fixture
def local() -> Callable[..., DatasetDict]:
    """``local(name, **kw)`` loads from the real local copy."""
    return load_local


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No local copy, not offline, empty memo: the Hub path is taken."""
    yield from go_online(monkeypatch)


@needs_data
def test_source_of_local_and_auto(local: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    assert data.source_of("TREC") == "local copy $TUTORIAL_DATA_DIR/trec"
    assert data.source_of("wikitext-103") == "hub Salesforce/wikitext (config wikitext-103-v1)"
    assert data.source_of("trec", source="hub") == (
        "hub CogComp/trec (revision refs/convert/parquet)"
    )
    with pytest.raises(data.DataError, match="not part of the local copy"):
        data.load("wikitext-103", source="local")


@needs_data
def test_source_of_says_when_a_local_split_is_a_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQuAD's local train is 11 of 442 articles: the printed source says so; the Hub's does not."""
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    assert data.source_of("squad") == (
        "local copy $TUTORIAL_DATA_DIR/squad-v1.1 (train is a subset, the first 11 of 442 "
        "articles: 3,807 of 87,599 questions)"
    )
    assert data.source_of("squad", source="hub") == "hub rajpurkar/squad (config plain_text)"
    assert data.source_of("conll2003") == "local copy $TUTORIAL_DATA_DIR/conll2003"


def test_source_of_names_no_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Printed in committed notebooks: the local copy is named by its variable, not its path."""
    for root in (tmp_path / "copy", DATA_DIR, Path("~/data")):
        monkeypatch.setenv(data.DATA_ENV_VAR, str(root))
        for name in data.list_datasets():
            where = data.source_of(name)
            assert str(root) not in where and str(root.expanduser()) not in where
            assert not re.search(r"(^|[\s(])[/~]", where), where
            if where.startswith("local copy"):
                assert where.startswith(f"local copy ${data.DATA_ENV_VAR}/")


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


@needs_data
def test_hub_forced_even_with_local_copy(online: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.DATA_ENV_VAR, str(DATA_DIR))
    fake = install(monkeypatch, FakeHub(ConnectionError("no network")))
    with pytest.raises(data.DataError):
        data.load("cola", source="hub")
    assert fake.calls == [("nyu-mll/glue", "cola", {})]
    fake.calls.clear()
    assert len(data.load("cola")["train"]) == 8551  # auto -> local, no Hub call
    assert fake.calls == []
