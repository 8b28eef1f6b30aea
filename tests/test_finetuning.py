"""Tests for tutorial_lib.finetuning at smoke scale (real TREC data, tiny budget)."""

import pandas as pd
import pytest
import torch

from tutorial_lib import config, finetuning


@pytest.fixture
def smoke(with_data):
    return config.get_scale("smoke")


def test_finetune_reports_test_metrics_and_history(smoke):
    task = finetuning.load_task("trec", smoke)
    assert task.num_labels == 6 and len(task.train) == smoke.finetune.max_train_examples
    result = finetuning.finetune("scratch", task, smoke, seed=0)
    assert 0.0 <= result.test["error"] <= 1.0
    assert result.test["error"] == pytest.approx(1 - result.test["accuracy"])
    assert result.test["confusion"].sum().item() == len(task.test)
    assert result.history.evals[-1]["epoch"] == pytest.approx(smoke.finetune.epochs)
    assert result.trainable_params == result.total_params


def test_same_seed_same_result_and_pretrained_backbone_starts_from_the_lm(smoke):
    task = finetuning.load_task("trec", smoke)
    a = finetuning.finetune("scratch", task, smoke, seed=3)
    b = finetuning.finetune("scratch", task, smoke, seed=3)
    assert a.test["error"] == b.test["error"]
    lm = finetuning.load_or_pretrain(smoke, "causal").model
    backbone = finetuning.make_backbone("pretrained", smoke, 6)
    assert torch.equal(backbone.model.transformer.tok_emb.weight, lm.transformer.tok_emb.weight)


def test_mean_std_uses_sample_std():
    table = pd.DataFrame({"backbone": ["a", "a", "b"], "test_error": [0.1, 0.3, 0.2]})
    out = finetuning.mean_std(table)
    assert out.loc["a", "mean"] == pytest.approx(0.2)
    assert out.loc["a", "std"] == pytest.approx(0.1414, abs=1e-4)
    assert out.loc["b", "seeds"] == 1
    assert "20.00 ± 14.14 %" in out.loc["a"].iloc[-1]


def test_unknown_task_is_a_clear_error(smoke):
    with pytest.raises(ValueError, match="unknown task"):
        finetuning.load_task("imdb", smoke)


def test_glue_task_uses_the_labelled_dev_set_as_test(smoke):
    """GLUE's test labels are hidden (-1): evaluating on them would be meaningless."""
    task = finetuning.load_task("sst2", smoke)
    assert min(task.test["label"]) >= 0 and min(task.validation["label"]) >= 0
    assert not set(task.train["sentence"]) & set(task.validation["sentence"][:50])
