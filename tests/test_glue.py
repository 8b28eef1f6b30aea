"""Tests for tutorial_lib.glue: metrics against hand-computed values, and reproducible, disjoint
splits carved from the local copy."""

import math

import pytest

from tutorial_lib import glue


def test_metrics_by_task():
    y = [1, 1, 0, 0, 1, 0]
    p = [1, 0, 0, 1, 1, 0]  # tp=2, fn=1, fp=1, tn=2
    cola = glue.compute_metrics("cola", p, y)
    assert cola["mcc"] == pytest.approx((2 * 2 - 1 * 1) / math.sqrt(3 * 3 * 3 * 3))
    assert cola["score"] == cola["mcc"]
    mrpc = glue.compute_metrics("mrpc", p, y)
    assert mrpc["f1"] == pytest.approx(2 / 3) and mrpc["accuracy"] == pytest.approx(4 / 6)
    assert mrpc["score"] == pytest.approx((2 / 3 + 4 / 6) / 2)
    sts = glue.compute_metrics("stsb", [0.0, 1.0, 2.0, 3.0], [0.0, 2.0, 4.0, 6.5])
    assert sts["pearson"] == pytest.approx(10.75 / math.sqrt(5 * 23.1875))
    assert sts["spearman"] == pytest.approx(1.0)
    assert glue.compute_metrics("stsb", [1.0] * 4, [0.0, 1.0, 2.0, 3.0])["pearson"] == 0.0
    assert set(glue.compute_metrics("mnli", [0, 1, 2], [0, 1, 1])) == {"accuracy", "score"}


def test_unknown_task_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown GLUE task 'sst3'"):
        glue.spec("sst3")


@pytest.mark.parametrize("name", ["rte", "qqp", "mnli"])  # one task per way of carving
def test_splits_are_disjoint_reproducible_and_labelled(with_data, name):
    a = glue.load_glue_task(name, train_examples=300, dev_examples=100, test_examples=100)
    b = glue.load_glue_task(name, train_examples=300, dev_examples=100, test_examples=100)
    texts = {s: a.__dict__[s]["text"] for s in ("train", "dev", "test")}
    assert texts["train"] == b.train["text"] and texts["test"] == b.test["text"]
    assert not set(texts["train"]) & set(texts["dev"])
    assert not set(texts["train"]) & set(texts["test"])
    assert not set(texts["dev"]) & set(texts["test"])
    for split in (a.train, a.dev, a.test):
        assert min(split["label"]) >= 0 and len(split) <= 300
    if len(glue.spec(name).columns) == 2:
        assert all(glue.SEP in t for t in texts["train"])
