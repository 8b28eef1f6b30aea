"""Notebook 18: UDA's consistency loss against a hand computation, the perturbation, pseudo-labels."""

import math

import numpy as np
import pytest
import torch

from tests.tiny import tiny_bert_classifier
from tutorial_lib.methods.unlabelled import consistency

TRAIN = ["what is the capital of france ?", "who wrote hamlet ?", "how far is the moon ?",
         "when did the war end ?", "what does a cat eat ?", "where is the river nile ?"]
TEST = ["which planet is the largest ?", "why is the sky blue ?"]



def test_consistency_loss_matches_a_hand_computation():
    clean = torch.tensor([[2.0, 0.0, 0.0], [0.1, 0.0, 0.0]])
    perturbed = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 0.0]])
    tau, beta = 0.5, 0.6
    loss, mask = consistency.consistency_loss(clean, perturbed, temperature=tau, threshold=beta)

    def softmax(z):
        e = np.exp(np.asarray(z) - max(z))
        return e / e.sum()

    # row 0: confidence softmax([2, 0, 0]) max = 0.787 ≥ 0.6 → counts; row 1: 0.356 < 0.6 → 0
    p = softmax([4.0, 0.0, 0.0])  # sharpened: z / τ
    q = softmax([1.0, 1.0, 0.0])
    kl0 = float(np.sum(p * (np.log(p) - np.log(q))))
    assert mask.tolist() == [1.0, 0.0]
    assert math.isclose(float(loss), kl0 / 2, rel_tol=1e-5)  # the mean over both rows


def test_consistency_loss_sends_no_gradient_into_the_clean_side():
    clean = torch.randn(4, 3, requires_grad=True)
    perturbed = torch.randn(4, 3, requires_grad=True)
    loss, _ = consistency.consistency_loss(clean, perturbed, temperature=0.85)
    loss.backward()
    assert clean.grad is None and perturbed.grad is not None and perturbed.grad.abs().sum() > 0
    same, _ = consistency.consistency_loss(clean.detach(), clean.detach())
    assert float(same) == pytest.approx(0.0, abs=1e-6)  # τ = 1, identical inputs: KL = 0


def test_replace_tokens_keeps_specials_and_padding_and_follows_its_probability():
    ids = torch.tensor([[101, 5, 6, 7, 102, 0], [101, 8, 102, 0, 0, 0]])
    mask = (ids != 0).long()
    pieces = torch.tensor([50, 51])
    g = torch.Generator().manual_seed(0)
    assert torch.equal(consistency.replace_tokens(ids, mask, pieces, 0.0, [101, 102], g), ids)
    out = consistency.replace_tokens(ids, mask, pieces, 1.0, [101, 102], g)
    words = (mask == 1) & (ids != 101) & (ids != 102)
    assert torch.equal(out[~words], ids[~words])  # [CLS], [SEP] and padding untouched
    assert set(out[words].tolist()) <= {50, 51}


def test_unigram_sampler_leaves_out_special_tokens():
    rows = [{"input_ids": [101, 5, 5, 102]}, {"input_ids": [101, 6, 102]}]
    assert sorted(consistency.unigram_sampler(rows, [101, 102]).tolist()) == [5, 5, 6]
    with pytest.raises(ValueError, match="no word pieces"):
        consistency.unigram_sampler([{"input_ids": [101, 102]}], [101, 102])


def test_pseudo_labels_keep_confident_rows_and_drop_the_gold_label():
    probs = torch.tensor([[0.9, 0.1], [0.55, 0.45], [0.2, 0.8]])
    rows = [{"input_ids": [1], "labels": 1}, {"input_ids": [2], "labels": 0},
            {"input_ids": [3], "labels": 0}]
    kept = consistency.pseudo_label(probs, rows, threshold=0.7)
    assert kept == [{"input_ids": [1], "labels": 0}, {"input_ids": [3], "labels": 1}]
    assert consistency.pseudo_label(probs, rows, threshold=0.95) == []


def test_uda_adds_its_term_and_records_the_mask_share():
    model = tiny_bert_classifier()
    pool = [{"input_ids": [1, 7, 8, 9, 2]}, {"input_ids": [1, 10, 11, 2]}] * 4
    uda = consistency.UDA(pool, pad_id=0, special_ids=[0, 1, 2], batch_size=4, seed=0,
                          weight=1.0, temperature=1.0, threshold=0.0, probability=0.5)
    batch = {"input_ids": torch.tensor([[1, 5, 6, 2]]), "attention_mask": torch.ones(1, 4).long(),
             "labels": torch.tensor([1])}
    model.eval()  # no dropout: the supervised part is exactly the plain loss
    total = uda.loss(model, batch)
    plain = model(**batch).loss
    assert uda.masked == [1.0] and float(total.detach()) >= float(plain.detach())
