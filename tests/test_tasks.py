"""Tests for tutorial_lib.tasks: the split protocols on the local data copy, metrics, few-shot.

``ds["text"][:]``: the column read at once (``data.column``); ``ds["text"]`` alone is a lazy
``Column`` that ``set``, ``==`` and ``min`` read row by row (seconds for SST-2's 67k rows)."""

import math
from collections import Counter

import numpy as np
import pytest
import torch
from datasets import ClassLabel, Dataset, Features, Value

from tutorial_lib import data, tasks
from tutorial_lib.config import DATA_ENV_VAR


@pytest.fixture(scope="module")
def load(data_dir):
    """``load(name, **sizes)``: tasks from the local copy, each loaded once per module."""
    loaded: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV_VAR, str(data_dir))

        def get(name: str, **sizes) -> tasks.Task:
            key = (name, *sorted(sizes.items()))
            if key not in loaded:
                loaded[key] = tasks.load_task(name, **sizes)
            return loaded[key]

        yield get


def texts(ds: Dataset) -> Counter:
    return Counter(ds["text"][:])


def assert_carved_from(pool: Dataset, *splits: Dataset) -> None:
    """``splits`` partition ``pool``: their sizes add up and a text is in two splits only if the
    pool itself holds it twice (raw data sets have a few duplicates)."""
    assert sum(len(s) for s in splits) == len(pool)
    assert sum((texts(s) for s in splits), Counter()) == texts(pool)
    duplicated = {t for t, n in texts(pool).items() if n > 1}
    for i, a in enumerate(splits):
        for b in splits[i + 1:]:
            assert set(a["text"][:]) & set(b["text"][:]) <= duplicated


def test_every_task_has_a_known_protocol_and_dataset():
    for name, spec in tasks.TASKS.items():
        assert spec.name == name and spec.protocol in tasks.PROTOCOLS
        assert spec.dataset in data.list_datasets(), name
        assert 1 <= len(spec.columns) <= 2
    assert set(tasks.GLUE_TASKS) <= set(tasks.TASKS)


def test_unknown_task_is_a_clear_error_listing_the_tasks():
    with pytest.raises(tasks.TaskError, match="unknown task 'imdb'") as err:
        tasks.load_task("imdb")
    assert "trec" in str(err.value) and "sst2" in str(err.value)
    assert issubclass(tasks.TaskError, ValueError)


def test_official_protocol_trec(load):
    """TREC: validation = 10 % of the official train set, test = the official 500 questions."""
    task = load("trec")
    assert task.sizes() == {"train": 4906, "validation": 546, "test": 500}
    assert len(task.pool) == 5452
    assert_carved_from(task.pool, task.train, task.validation)
    assert task.test["text"][:] == load_raw("trec")["test"]["text"][:]
    assert task.label_names == ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"] and task.num_labels == 6
    assert task.train.column_names == ["text", "label"]
    assert isinstance(task.train.features["label"], ClassLabel)


def load_raw(name: str):
    return data.load(name, validation_fraction=0.0)


def test_glue_dev_protocol_sst2_tests_on_the_labelled_dev_set(load):
    """GLUE's test labels are hidden (-1): test = the labelled GLUE dev set (872 for SST-2)."""
    task = load("sst2")
    raw = load_raw("sst2")
    assert len(task.test) == 872 and task.test["text"][:] == raw["validation"]["sentence"][:]
    assert min(task.test["label"][:]) >= 0 and min(task.validation["label"][:]) >= 0
    assert len(task.validation) == round(0.1 * len(raw["train"]))
    assert_carved_from(task.pool, task.train, task.validation)
    assert not set(task.train["text"][:]) & set(task.test["text"][:])
    # stratified: the class shares of train and validation agree
    share = [np.mean(s["label"][:]) for s in (task.train, task.validation)]
    assert share[0] == pytest.approx(share[1], abs=0.005)
    assert task.label_names == ["negative", "positive"]


def test_train_only_protocol_qqp_is_80_10_10_of_train(load):
    task = load("qqp")
    n = len(load_raw("qqp")["train"])
    assert task.sizes() == {"train": 0.8 * n, "validation": 0.1 * n, "test": 0.1 * n}
    rest = task.pool  # train + validation; the test tenth is outside the pool
    assert_carved_from(rest, task.train, task.validation)
    assert not set(task.test["text"][:]) & set(rest["text"][:])
    assert task.spec.metrics == ("f1", "accuracy")


def test_dev_only_protocol_mnli_is_70_10_20_of_dev(load):
    task = load("mnli")
    n = len(load_raw("mnli")["validation"])
    sizes = task.sizes()
    assert sizes["test"] == round(0.2 * n)
    assert sizes["validation"] == round(0.125 * (n - sizes["test"]))
    assert sum(sizes.values()) == n
    assert [round(v / n, 2) for v in sizes.values()] == [0.7, 0.1, 0.2]
    assert_carved_from(task.pool, task.train, task.validation)
    assert not set(task.test["text"][:]) & set(task.pool["text"][:])
    assert task.label_names == ["entailment", "neutral", "contradiction"]


def test_pairs_are_joined_with_sep(load):
    task = load("mrpc")
    raw = load_raw("mrpc")["validation"]  # MRPC's test = GLUE dev, in its order
    pairs = zip(raw["sentence1"][:], raw["sentence2"][:])
    assert task.test["text"][:] == [a + " [SEP] " + b for a, b in pairs]
    assert task.test["label"][:] == raw["label"][:]
    assert tasks.SEP == " [SEP] "


def test_splits_are_reproducible_and_subsets_fixed(load, data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV_VAR, str(data_dir))
    a = load("trec", train_examples=256, validation_examples=200, test_examples=100)
    b = tasks.load_task("trec", train_examples=256, validation_examples=200, test_examples=100)
    assert a.sizes() == {"train": 256, "validation": 200, "test": 100}
    for split in ("train", "validation", "test"):
        assert getattr(a, split)["text"][:] == getattr(b, split)["text"][:]
        assert getattr(a, split)["label"][:] == getattr(b, split)["label"][:]
    full = load("trec")
    assert set(a.train["text"][:]) <= set(full.train["text"][:])  # a subset of the same carving
    assert set(a.validation["text"][:]) <= set(full.validation["text"][:])
    assert load("trec", train_examples=10**6).sizes() == full.sizes()  # more than there is: all


def test_with_train_subset_cuts_train_only(load):
    full = load("trec")
    small = tasks.with_train_subset(full, 100)
    assert len(small.train) == 100 and small.validation is full.validation and small.test is full.test
    assert small.train["text"][:] == tasks.with_train_subset(full, 100).train["text"][:]
    assert tasks.with_train_subset(full, None).train is full.train
    assert tasks.subsample(full.train, None) is full.train


def test_regression_task_has_one_output_and_no_label_names(load):
    task = load("stsb", train_examples=50, validation_examples=10, test_examples=10)
    assert task.is_regression and task.num_labels == 1 and task.label_names == []
    assert all(0.0 <= y <= 5.0 for y in task.train["label"][:])


# --- majority baseline and metrics on hand-made cases ---------------------------------------------


def hand_task(name: str, train: list, test: list) -> tasks.Task:
    spec = tasks.TASKS[name]
    feature = Value("float32") if spec.is_regression else ClassLabel(names=["a", "b", "c"])
    make = lambda labels: Dataset.from_dict(
        {"text": [f"t{i}" for i in range(len(labels))], "label": labels},
        features=Features({"text": Value("string"), "label": feature}))
    names = [] if spec.is_regression else ["a", "b", "c"]
    return tasks.Task(spec, make(train), make(test[:1]), make(test), names, make(train))


def test_majority_baseline_predicts_the_most_frequent_training_label():
    task = hand_task("trec", train=[0, 1, 1, 2, 1], test=[1, 0, 1, 1, 2, 1, 0, 0])
    assert task.majority_baseline() == {"accuracy": 0.5, "score": 0.5}
    assert task.majority_baseline("validation") == {"accuracy": 1.0, "score": 1.0}
    mrpc = hand_task("mrpc", train=[1, 1, 0], test=[1, 0, 1, 1])
    assert mrpc.majority_baseline() == pytest.approx(
        {"f1": 6 / 7, "accuracy": 0.75, "score": (6 / 7 + 0.75) / 2})
    # regression: the training mean, a constant whose correlation is undefined → 0
    sts = hand_task("stsb", train=[1.0, 2.0, 3.0], test=[0.5, 4.0, 2.5])
    assert sts.majority_baseline() == {"pearson": 0.0, "spearman": 0.0, "score": 0.0}


def test_compute_metrics_match_hand_computed_values():
    assert tasks.compute_metrics("sst2", [1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75, "score": 0.75}
    # MRPC: tp=2, fp=1, fn=1 → F1 = 2·2/(2·2+1+1) = 2/3; accuracy 3/5
    m = tasks.compute_metrics("mrpc", [1, 1, 1, 0, 0], [1, 1, 0, 1, 0])
    assert m == pytest.approx({"f1": 2 / 3, "accuracy": 0.6, "score": (2 / 3 + 0.6) / 2})
    # CoLA: tp=2, tn=1, fp=1, fn=1 → MCC = (2·1 − 1·1)/sqrt(3·3·2·2) = 1/6
    m = tasks.compute_metrics("cola", [1, 1, 1, 0, 0], [1, 1, 0, 1, 0])
    assert m == pytest.approx({"mcc": 1 / 6, "score": 1 / 6})
    # STS-B: predictions a linear function of the labels → Pearson 1; reversed order → Spearman −1
    m = tasks.compute_metrics("stsb", [0.0, 2.0, 4.0, 6.0], [1.0, 2.0, 3.0, 4.0])
    assert m == pytest.approx({"pearson": 1.0, "spearman": 1.0, "score": 1.0})
    m = tasks.compute_metrics("stsb", [4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 4.0, 8.0])
    assert m["spearman"] == pytest.approx(-1.0) and -1.0 < m["pearson"] < -0.8
    assert m["score"] == pytest.approx((m["pearson"] + m["spearman"]) / 2)
    # Task.metrics is compute_metrics of that task
    assert hand_task("cola", [0], [0]).metrics([1, 1, 1, 0, 0], [1, 1, 0, 1, 0]) == pytest.approx(
        {"mcc": 1 / 6, "score": 1 / 6})


def test_predictions_from_logits():
    logits = torch.tensor([[0.1, 2.0], [3.0, -1.0]])
    assert tasks.predictions_from_logits("sst2", logits).tolist() == [1, 0]
    assert tasks.predictions_from_logits("stsb", torch.tensor([[2.5], [0.5]])).tolist() == [2.5, 0.5]


# --- few-shot splits --------------------------------------------------------------------------------


def test_sample_indices_k_per_class_dev_disjoint_and_reproducible():
    labels = [0] * 30 + [1] * 20 + [2] * 10
    train, dev = tasks.sample_indices(labels, k=4, seed=13, dev_k=3)
    assert Counter(labels[i] for i in train) == {0: 4, 1: 4, 2: 4}
    assert Counter(labels[i] for i in dev) == {0: 3, 1: 3, 2: 3}
    assert not set(train) & set(dev)
    assert (train, dev) == tasks.sample_indices(labels, k=4, seed=13, dev_k=3)
    assert (train, dev) != tasks.sample_indices(labels, k=4, seed=21, dev_k=3)
    full, dev = tasks.sample_indices(labels, k=None, seed=13, dev_k=2)  # K = None: all but dev
    assert sorted(full + dev) == list(range(len(labels))) and len(dev) == 6
    with pytest.raises(tasks.TaskError, match="class 2 has only 10"):
        tasks.sample_indices(labels, k=8, seed=13)  # 8 + 8 > 10
    with pytest.raises(tasks.TaskError, match="dev_k"):
        tasks.sample_indices(labels, k=None, seed=13)
    with pytest.raises(tasks.TaskError, match="≥ 1"):
        tasks.sample_indices(labels, k=0, seed=13)


def test_few_shot_split_of_trec(load):
    task = load("trec")
    split = tasks.few_shot(task, k=4, seed=13, test_examples=50)
    assert split.sizes() == {"task": "trec", "K": 4, "seed": 13, "train": 24, "dev": 24,
                             "test": 50, "classes": 6}
    assert Counter(r["label"] for r in split.train) == {c: 4 for c in range(6)}
    assert Counter(r["label"] for r in split.dev) == {c: 4 for c in range(6)}
    pool = set(task.pool["text"][:])
    assert all(r["text"] in pool for r in split.train + split.dev)
    assert not {r["text"] for r in split.train} & {r["text"] for r in split.dev}
    assert [r["text"] for r in split.test] == tasks.subsample(task.test, 50)["text"][:]
    again = tasks.few_shot(task, k=4, seed=13, test_examples=50)
    assert (again.train, again.dev) == (split.train, split.dev)
    assert tasks.few_shot(task, k=4, seed=21).train != split.train
    assert tasks.LMBFF_SEEDS == (13, 21, 42, 87, 100)
    abbr = Counter(task.pool["label"][:])[0]  # ABBR, TREC's smallest class
    with pytest.raises(tasks.TaskError, match="Choose a smaller K"):
        tasks.few_shot(task, k=abbr, seed=13)


def test_few_shot_refuses_a_regression_task(load):
    with pytest.raises(tasks.TaskError, match="regression"):
        tasks.few_shot(load("stsb", train_examples=50, validation_examples=10, test_examples=10), k=4)


# --- metrics, GLUE splits and few-shot splits (ported from test_glue.py / test_prompting.py) ---


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


def test_predictions_from_logits_from_the_glue_tests():
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
    texts = {s: getattr(a, s)["text"][:] for s in ("train", "validation", "test")}
    assert texts["train"] == b.train["text"][:] and texts["test"] == b.test["text"][:]
    assert texts["validation"] == b.validation["text"][:]
    assert not set(texts["train"]) & set(texts["validation"])
    assert not set(texts["train"]) & set(texts["test"])
    assert not set(texts["validation"]) & set(texts["test"])
    for split in (a.train, a.validation, a.test):
        assert min(split["label"][:]) >= 0 and len(split) <= 300
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


def test_sst2_few_shot_splits_are_lmbffs_whole_sentences(with_data):
    """LM-BFF's SST-2 train is the 6,920 whole training sentences (its Table B.1), not GLUE's
    67,349 rows, most of them phrases: the K-shot rows must come from the sentences, spelled as
    the test sentences are, and none of them may be a test sentence."""
    sst2 = tasks.load_task("sst2")
    pool = tasks.few_shot_pool(sst2)
    assert len(pool) == 6920 and sum(pool["label"][:]) == 3610  # SST's binary train: 3,310 / 3,610
    assert not any("-lrb-" in t or "\\/" in t for t in pool["text"][:])
    assert all(t.endswith(" ") for t in pool["text"][:])  # GLUE's spelling, as the test sentences
    glue_train = set(sst2.pool["text"][:])
    assert sum(t in glue_train for t in pool["text"][:]) > 6800  # the same sentences, GLUE's spelling
    split = tasks.few_shot(sst2, k=16, seed=13)
    sentences = set(pool["text"][:])
    assert all(r["text"] in sentences for r in split.train + split.dev)
    assert sentences.isdisjoint(r["text"] for r in split.test)
    # the phrases are gone: GLUE's train rows average ~9 words, the sentences ~19
    assert np.mean([len(r["text"].split()) for r in split.train]) > 12
    assert tasks.few_shot_pool(tasks.load_task("trec")) is not pool


def test_held_out_takes_what_subsample_left_in_its_order():
    ds = Dataset.from_dict({"i": list(range(50))})
    test, dev = list(tasks.subsample(ds, 20)["i"]), list(tasks.held_out(ds, 20, 10)["i"])
    assert len(dev) == 10 and not set(test) & set(dev)
    assert test + dev == list(tasks.subsample(ds, 30)["i"])  # the next rows of the same fixed order
    assert len(tasks.held_out(ds, 20, None)) == 30 and len(tasks.held_out(ds, 45, 10)) == 5
    assert len(tasks.held_out(ds, None, 10)) == 0 and len(tasks.held_out(ds, 50, 10)) == 0  # all taken


def test_split_indices_are_datasets_own_and_read_back_from_the_cache(tmp_path, monkeypatch):
    """tasks._split keeps train_test_split's row indices in the cache: the same rows in the same
    order as datasets' own split (stratified or not), a later call reads them without splitting,
    and a damaged entry is computed again."""
    from tutorial_lib import config

    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    rng = np.random.default_rng(0)
    ds = Dataset.from_dict({"text": [f"row {i}" for i in range(300)],
                            "label": rng.integers(0, 3, 300).tolist()},
                           features=Features({"text": Value("string"), "label": ClassLabel(num_classes=3)}))
    for stratify in (True, False):
        kwargs = {"stratify_by_column": "label"} if stratify else {}
        theirs = ds.train_test_split(test_size=0.2, seed=tasks.SPLIT_SEED, **kwargs)
        train, test = tasks._split(ds, 0.2, stratify)
        assert train["text"] == theirs["train"]["text"] and test["text"] == theirs["test"]["text"]
    entries = sorted((tmp_path / "splits").glob("*.npz"))
    assert len(entries) == 2
    expected = ds.train_test_split(test_size=0.2, seed=tasks.SPLIT_SEED, stratify_by_column="label")

    def no_split(*args, **kwargs):
        raise AssertionError("split again instead of reading the cache")

    monkeypatch.setattr(Dataset, "train_test_split", no_split)
    assert tasks._split(ds, 0.2, True)[1]["text"] == expected["test"]["text"]
    monkeypatch.undo()
    monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path))
    for entry in entries:
        entry.write_bytes(b"damaged")
    assert tasks._split(ds, 0.2, False)[1]["text"] == theirs["test"]["text"]
