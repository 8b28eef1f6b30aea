"""tutorial_lib.data.columns: the fast column read and the split that selects datasets' rows."""

from __future__ import annotations

import numpy as np
import pytest
from datasets import ClassLabel, Dataset, Features, Value

from tutorial_lib import data


def labelled(n: int, classes: int = 3, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    features = Features({"text": Value("string"), "label": ClassLabel(num_classes=classes)})
    return Dataset.from_dict({"text": [f"s{i}" for i in range(n)],
                              "label": rng.integers(0, classes, n).tolist()}, features=features)


def rows(ds: Dataset) -> list:
    return ds[:]["text"]


@pytest.mark.parametrize("n,fraction,seed", [(50, 0.1, 0), (1000, 0.2, 42), (997, 0.1, 7)])
@pytest.mark.parametrize("stratify", [None, "label"])
def test_the_split_selects_datasets_rows_in_its_order(n, fraction, seed, stratify):
    """Same input, same arguments: the rows ``Dataset.train_test_split`` gives, in its order —
    also on a shuffled, selected dataset (an indices mapping), as the notebooks' pools are."""
    for ds in (labelled(n), labelled(n + 40).shuffle(seed=3).select(range(n))):
        theirs = ds.train_test_split(test_size=fraction, seed=seed, stratify_by_column=stratify)
        ours = data.train_test_split(ds, fraction, seed, stratify)
        for part in ("train", "test"):
            assert rows(ours[part]) == rows(theirs[part])


def test_it_raises_where_datasets_raises():
    one_member = Dataset.from_dict({"text": list("abcde"), "label": [0, 0, 0, 1, 1]}).cast_column(
        "label", ClassLabel(num_classes=3))
    one_member = one_member.map(lambda r, i: {"label": 2 if i == 0 else r["label"]}, with_indices=True)
    for split in (one_member.train_test_split, lambda **kw: data.train_test_split(one_member, **kw)):
        with pytest.raises(ValueError):
            split(test_size=0.4, seed=0, stratify_by_column="label")
    plain = Dataset.from_dict({"text": ["a", "b"], "label": [0.5, 1.5]})
    with pytest.raises(ValueError, match="ClassLabel"):
        data.train_test_split(plain, 0.5, 0, "label")
    with pytest.raises(ValueError, match="range"):
        data.train_test_split(plain, 1.5, 0)


def test_column_is_the_column_row_by_row_gives():
    ds = labelled(300).shuffle(seed=1).select(range(250))
    assert data.column(ds, "label") == [r["label"] for r in ds]
    assert data.column(ds, "text") == [r["text"] for r in ds]
