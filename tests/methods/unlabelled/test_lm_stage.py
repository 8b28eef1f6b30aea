"""Notebook 18: The LM stage's data (no label, no test text) and training."""

import math

import pytest
import torch
from datasets import Dataset

from tests.tiny import QUESTIONS as TRAIN
from tests.tiny import tiny_ours
from tutorial_lib.methods.unlabelled import lm_stage
from tutorial_lib.settings import Budget

TEST = ["which planet is the largest ?", "why is the sky blue ?"]



def test_the_lm_stage_reads_text_only_never_labels_or_test_questions():
    split = Dataset.from_dict({"text": TRAIN, "label": [0, 1, 2, 0, 1, 2]})
    texts = lm_stage.task_texts(split)
    assert texts == TRAIN  # the text column, nothing else
    ours = tiny_ours()
    rows = lm_stage.lm_blocks(ours, texts, seq_len=8)
    assert all(set(r) == {"input_ids", "labels"} and r["labels"] == r["input_ids"] for r in rows)
    stream = [t for r in rows for t in r["input_ids"]]
    for question in TEST:  # no test question's tokens appear in the stage's stream
        ids = ours.tokenizer(question, add_special_tokens=False)["input_ids"]
        assert not any(stream[i:i + len(ids)] == ids for i in range(len(stream)))
    with pytest.raises(ValueError, match="no block"):
        lm_stage.lm_blocks(ours, ["hi"], seq_len=64)


def test_the_lm_stage_trains_a_copy_and_lowers_the_loss_on_its_text():
    ours = tiny_ours()
    before = [p.clone() for p in ours.lm.parameters()]
    nll0, n0 = lm_stage.line_losses(ours, TRAIN)
    tuned, run = lm_stage.lm_stage(ours, TRAIN * 4, steps=30, seq_len=8, seed=0, name="tuned",
                                   budget=Budget(batch_size=4, lr=3e-3, warmup_frac=0.0))
    nll1, n1 = lm_stage.line_losses(tuned, TRAIN)
    assert tuned.name == "tuned" and len(run.history.train) == 30 and n0 == n1
    assert all(torch.equal(a, b) for a, b in zip(before, ours.lm.parameters()))  # untouched
    assert lm_stage.perplexity(nll1, n1) < lm_stage.perplexity(nll0, n0)
    assert tuned.encoder is tuned.lm.base_model  # the classifier reads the tuned LM
    assert math.isclose(lm_stage.perplexity([2.0, 4.0], [2, 1]), math.exp(2.0))
