"""Target-task LM fine-tuning (ULMFiT's second stage; "task-adaptive pretraining", TAPT).

Before the classifier sees a label, the pretrained LM keeps training on the *task's own text*:
the training questions without their labels, as one stream cut into blocks (the layout of
notebook 01's pretraining). The control spends the same steps on more of the pretraining corpus,
so "in-domain text" and "more LM steps" can be told apart. Nothing here may read a label or a
test question: :func:`task_texts` takes the training split's ``text`` column only.

Howard & Ruder (2018), ULMFiT Sec. 3.2; Gururangan et al. (2020), "Don't stop pretraining", TAPT.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ... import data, premises
from ...backbones import Backbone
from ...batches import pad_ids
from ...finetuning import Recipe, Run, run
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...training import PLAIN, Method


def task_texts(split: object) -> list[str]:
    """The unlabelled text of a split: its ``text`` column and nothing else (no labels)."""
    return [str(t) for t in data.column(split, "text")]


def lm_blocks(backbone: Backbone, texts: Sequence[str], seq_len: int) -> list[dict]:
    """Causal-LM rows: ``texts`` tokenised, each followed by [SEP], as one stream (as 01 encoded
    WikiText-2), cut into ``seq_len``-token blocks (the ragged tail dropped); labels = inputs."""
    ids = backbone.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    sep = backbone.tokenizer.sep_token_id
    stream = [tok for row in ids for tok in (*row, sep)]
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"{len(stream)} tokens make no block of {seq_len}: give more text or a "
                         "shorter lm_seq_len")
    return [{"input_ids": stream[i * seq_len:(i + 1) * seq_len],
             "labels": stream[i * seq_len:(i + 1) * seq_len]} for i in range(n)]


def lm_stage(backbone: Backbone, texts: Sequence[str], *, steps: int, seq_len: int,
             budget: Budget, seed: int, method: Method = PLAIN, name: str = "") -> tuple[Backbone, Run]:
    """Fine-tune ``backbone``'s causal LM on ``texts`` for exactly ``steps`` batches (the budget's
    batch size and rate; ``method``: e.g. ULMFiT's slanted triangular schedule). Returns the new
    backbone (same tokenizer, the tuned LM; named ``name``) and the stage's :class:`Run`."""
    if not backbone.is_ours or backbone.kind != "causal":
        raise ValueError("the LM stage continues our causal LM (notebook 01's); "
                         f"{backbone.name!r} is a {backbone.kind} model")
    rows = lm_blocks(backbone, texts, seq_len)
    stage = run(Recipe(build=lambda bb: bb.lm, backbone=backbone, rows=lambda bb: rows,
                       budget=budget, steps=steps, method=method), seed, keep_model=True)
    tuned = dataclasses.replace(backbone, name=name or backbone.name, lm=stage.model, encoder=None)
    return tuned, stage


@torch.no_grad()
def line_losses(backbone: Backbone, lines: Sequence[str], batch_size: int = 64
                ) -> tuple[list[float], list[int]]:
    """Each line's total negative log-likelihood (nats) under ``backbone``'s causal LM and the
    number of tokens it predicted (every token after the first, as ``Backbone.text_nll``)."""
    model = backbone.lm.to(device()).eval()
    nll, counts = [], []
    for i in range(0, len(lines), batch_size):
        ids = backbone.tokenizer(list(lines[i:i + batch_size]), add_special_tokens=False,
                                 truncation=True, max_length=backbone.max_len)["input_ids"]
        x, mask = (t.to(device()) for t in pad_ids(ids, backbone.pad_id))
        with autocast(device(), autocast_dtype()):
            h = model.base_model(input_ids=x, attention_mask=mask).last_hidden_state
            logits = model.lm_head(h[:, :-1]).float()
        keep = mask[:, 1:].bool()
        per_token = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none") * keep
        nll += per_token.sum(1).tolist()
        counts += keep.sum(1).tolist()
    return nll, counts


def perplexity(nll: Sequence[float], counts: Sequence[int]) -> float:
    """Per-token perplexity of lines scored by :func:`line_losses`: exp(total nats / tokens)."""
    return math.exp(sum(nll) / max(1, sum(counts)))


def stage_learned(before: Sequence[float], after: Sequence[float], what: str) -> premises.Premise:
    """An LM stage's premise, judged on held-out lines no stage trained on: their losses
    (:func:`line_losses`, line by line) fell, by a one-sided paired test; if not, every comparison
    built on the stage is void ("intermediate stage did not learn")."""
    fell = premises.loss_fell(before, after, what=what)
    return premises.Premise(fell.holds, premises.VOID_STAGE, fell.detail, "stage learned")
