"""Tests for tutorial_lib.tasks: metrics against hand-computed values, predictions from logits,
reproducible and disjoint splits carved from the local copy (one task per split protocol), and
the LM-BFF few-shot splits. (Ported from test_glue.py and the few-shot half of test_prompting.py.)"""

import math
from collections import Counter

import pytest
import torch

from tutorial_lib import tasks


def test_metrics_by_task():
    y = [1, 1, 0, 0, 1, 0]
    p = [1, 0, 0, 1, 1, 0]  # tp=2, fn=1, fp=1, tn=2
    cola = tasks.compute_metrics("cola", p, y)
    assert cola["mcc"] == pytest.approx((2 * 2 - 1 * 1) / math.sqrt(3 * 3 * 3 * 3))
    assert cola["score"] == cola["mcc"]
    mrpc = tasks.compute_metrics("mrpc", p, y)
    assert mrpc["f1"] == pytest.approx(2 / 3) and mrpc["accuracy"] == pytest.approx(4 / 6)
    assert mrpc["score"] == pytest.approx((2 / 3 + 4 / 6) / 2)
    sts = tasks.compute_metrics("stsb", [0.0, 1.0, 2.0, 3.0], [0.0, 2.0, 4.0, 6.5])
    assert sts["pearson"] == pytest.approx(10.75 / math.sqrt(5 * 23.1875))
    assert sts["spearman"] == pytest.approx(1.0)
    assert tasks.compute_metrics("stsb", [1.0] * 4, [0.0, 1.0, 2.0, 3.0])["pearson"] == 0.0
    assert set(tasks.compute_metrics("mnli", [0, 1, 2], [0, 1, 1])) == {"accuracy", "score"}
    # the non-GLUE tasks are scored by accuracy too
    assert tasks.compute_metrics("trec", [0, 1, 5], [0, 1, 2]) == pytest.approx(
        {"accuracy": 2 / 3, "score": 2 / 3})


def test_predictions_from_logits():
    logits = torch.tensor([[0.1, 2.0], [3.0, -1.0]])
    assert tasks.predictions_from_logits("sst2", logits).tolist() == [1, 0]
    scores = tasks.predictions_from_logits("stsb", torch.tensor([[0.5], [4.0]]))
    assert scores.shape == (2,) and scores.tolist() == [0.5, 4.0]


def test_unknown_task_is_a_clear_error():
    with pytest.raises(tasks.TaskError, match="unknown task 'sst3'"):
        tasks.spec("sst3")
    assert issubclass(tasks.TaskError, ValueError)


@pytest.mark.parametrize("name", ["rte", "qqp", "mnli"])  # one GLUE task per way of carving
def test_splits_are_disjoint_reproducible_and_labelled(with_data, name):
    a = tasks.load_task(name, train_examples=300, validation_examples=100, test_examples=100)
    b = tasks.load_task(name, train_examples=300, validation_examples=100, test_examples=100)
    texts = {s: getattr(a, s)["text"] for s in ("train", "validation", "test")}
    assert texts["train"] == b.train["text"] and texts["test"] == b.test["text"]
    assert texts["validation"] == b.validation["text"]
    assert not set(texts["train"]) & set(texts["validation"])
    assert not set(texts["train"]) & set(texts["test"])
    assert not set(texts["validation"]) & set(texts["test"])
    for split in (a.train, a.validation, a.test):
        assert min(split["label"]) >= 0 and len(split) <= 300
        assert set(split.column_names) == {"text", "label"}
    if len(tasks.spec(name).columns) == 2:
        assert all(tasks.SEP in t for t in texts["train"])
    assert a.num_labels == len(a.label_names) >= 2


# --- few-shot splits (LM-BFF) --------------------------------------------------------------------


def test_fewshot_sampling_is_reproducible_balanced_and_disjoint():
    labels = [0] * 50 + [1] * 30 + [2] * 40
    train, dev = tasks.sample_indices(labels, k=8, seed=13)
    assert (train, dev) == tasks.sample_indices(labels, k=8, seed=13)
    assert tasks.sample_indices(labels, k=8, seed=21) != (train, dev)
    assert Counter(labels[i] for i in train) == {0: 8, 1: 8, 2: 8}
    assert Counter(labels[i] for i in dev) == {0: 8, 1: 8, 2: 8}
    assert not set(train) & set(dev)
    full, dev_full = tasks.sample_indices(labels, k=None, seed=13, dev_k=4)
    assert len(full) == len(labels) - 12 and not set(full) & set(dev_full)


def test_k_larger_than_a_class_is_a_clear_error():
    with pytest.raises(tasks.TaskError, match="class 1 has only 30 .* smaller K"):
        tasks.sample_indices([0] * 50 + [1] * 30, k=16, seed=13)


def test_few_shot_uses_train_for_train_and_dev_and_the_test_split(with_data):
    split = tasks.few_shot("trec", k=4, seed=42)
    assert len(split.train) == len(split.dev) == 4 * 6 and len(split.test) == 500
    assert {r["text"] for r in split.train}.isdisjoint({r["text"] for r in split.dev})
    test_texts = {r["text"] for r in split.test}
    assert test_texts.isdisjoint({r["text"] for r in split.train + split.dev})
    again = tasks.few_shot("trec", k=4, seed=42)
    assert again.train == split.train and again.dev == split.dev
    assert tasks.few_shot("trec", k=4, seed=13).train != split.train
    assert split.label_names == tasks.load_task("trec").label_names
