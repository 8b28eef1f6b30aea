"""Amnesic probing (Elazar et al., TACL 2021) and adversarial heads (notebook 11).

**Amnesic probing** asks whether a model *uses* a property, not whether a probe can read it:
remove the property from the representation with INLP (:mod:`tutorial_lib.methods.probing.inlp`) and measure
how the model's own behaviour changes. Here the model is notebook 01's masked LM
(``config.causal=False``) and the behaviour is masked-word prediction:

* :func:`masked_positions` masks ~15% of the words of UD sentences (all sub-words of a chosen
  word become [MASK]) and keeps, at each masked word's first sub-word, the last hidden state h
  (after the final LayerNorm, the LM head's input), the gold token and the word's labels;
* :func:`lm_metrics` predicts with ``lm_head(P h)`` and reports accuracy and
  D_KL(p_original ‖ p_projected), averaged over positions;
* the controls: the same number of **random** directions removed (several seeds), and a
  property the LM should not need.

**Adversarial heads** (:func:`adversarial_finetune`): fine-tune the encoder on a main task while
a token-level POS head behind a gradient-reversal layer (:mod:`tutorial_lib.heads`) pushes POS
information out of it; a *fresh* linear probe afterwards measures what is left.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ...backbones import Backbone
from ...heads import HeadConfig, MultiHeadModel, MultiTaskLoader, multihead_loss
from ...models import IGNORE_INDEX
from ...params import decay_groups
from ...runtime import autocast, autocast_dtype, device, seed_everything
from ...settings import Budget
from ...tasks import Task
from ...training import Method, eval_loader, fit, fit_with, pad_collate, resumable_loader
from . import probing
from .inlp import Eraser, directions_removed, removed_means, variance_removed

# Word-index buckets of the control property "where in the sentence is the word":
# 0-3, 4-8, 9-15, 16+.
POSITION_EDGES = (4, 9, 16)
POSITION_NAMES = ["0-3", "4-8", "9-15", "16+"]


def position_bucket(word_index: int | np.ndarray) -> np.ndarray:
    """The control property: the bucket of a word's index in its sentence (4 classes)."""
    return np.searchsorted(POSITION_EDGES, np.asarray(word_index), side="right")


@dataclass
class MaskedPositions:
    """Masked-word positions of a set of sentences, ready for INLP and the LM head."""

    hidden: np.ndarray  # [n, d] float32, last hidden state at the masked word's first sub-word
    target: np.ndarray  # [n] the gold token id there
    labels: dict[str, np.ndarray]  # property name -> [n] labels ("upos", "deprel", "position")

    def __len__(self) -> int:
        return len(self.target)


@torch.no_grad()
def masked_positions(
    backbone: Backbone,
    sentences: probing.Sentences,
    *,
    mask_fraction: float = 0.15,
    rounds: int = 1,
    seed: int = 0,
    batch_size: int = 64,
) -> MaskedPositions:
    """Mask ``mask_fraction`` of the words of every sentence (at least one), ``rounds`` times with
    different masks, and collect the MLM's final hidden state at each masked word."""
    if backbone.kind != "masked":
        raise ValueError(f"masked-word positions need a masked LM, not {backbone.name!r} ({backbone.kind})")
    tokenizer = backbone.tokenizer
    rng = np.random.default_rng(seed)
    encoded = probing.encode_sentences(backbone, sentences)
    rows = []  # (input ids with masks, [(first position, sentence, word)])
    for _ in range(rounds):
        for s, e in enumerate(encoded):
            if not e.words:
                continue
            chosen = [w for w in e.words if rng.random() < mask_fraction]
            chosen = chosen or [e.words[rng.integers(len(e.words))]]
            ids = list(e.input_ids)
            chosen_set = set(chosen)
            for pos, w in enumerate(e.word_ids):
                if w in chosen_set:
                    ids[pos] = tokenizer.mask_token_id
            first = dict(zip(e.words, e.positions))
            rows.append((ids, e.input_ids, [(first[w], s, w) for w in chosen]))
    hidden, target, where = [], [], []
    for idx, (h,) in probing.states_by_length(backbone, [r[0] for r in rows], batch_size):
        h = h.float().cpu()
        for r, i in enumerate(idx):
            for pos, s, w in rows[i][2]:
                hidden.append(h[r, pos].numpy())
                target.append(rows[i][1][pos])
                where.append((s, w))
    return _positions(sentences, hidden, target, where)


def lm_positions(backbone: Backbone, sentences: probing.Sentences, *, mask_fraction: float = 0.15,
                 rounds: int = 1, seed: int = 0) -> MaskedPositions:
    """Where the backbone's LM head predicts a word: :func:`next_word_positions` for a causal LM,
    :func:`masked_positions` for a masked one."""
    if backbone.kind == "causal":
        return next_word_positions(backbone, sentences)
    return masked_positions(backbone, sentences, mask_fraction=mask_fraction, rounds=rounds,
                            seed=seed)


def subsample(positions: MaskedPositions, n: int | None, seed: int) -> MaskedPositions:
    """A fixed random subset of ``n`` positions (None or more than there are: all)."""
    if n is None or n >= len(positions):
        return positions
    keep = np.sort(np.random.default_rng(seed).choice(len(positions), n, replace=False))
    return MaskedPositions(positions.hidden[keep], positions.target[keep],
                           {k: v[keep] for k, v in positions.labels.items()})


@torch.no_grad()
def next_word_positions(backbone: Backbone, sentences: probing.Sentences, *,
                        batch_size: int = 32) -> MaskedPositions:
    """A causal LM's version of :func:`masked_positions`: for every word w ≥ 1 of every sentence,
    the final hidden state at the token *before* w's first sub-word — the state the LM head reads
    to predict that sub-word — the gold sub-word as target, and w's labels. Amnesic probing then
    asks whether the LM still predicts the next word once the *next word's* POS is projected out
    of that state (the causal analogue of Elazar et al.'s masked-word setting)."""
    if backbone.kind != "causal":
        raise ValueError(f"next-word positions need a causal LM, not {backbone.name!r} ({backbone.kind})")
    encoded = probing.encode_sentences(backbone, sentences)
    hidden, target, where = [], [], []
    for idx, (h,) in probing.states_by_length(backbone, [e.input_ids for e in encoded], batch_size):
        h = h.float().cpu()
        for r, i in enumerate(idx):
            e = encoded[i]
            for pos, w in zip(e.positions, e.words):
                if pos == 0:
                    continue  # the first token has no state before it
                hidden.append(h[r, pos - 1].numpy())
                target.append(e.input_ids[pos])
                where.append((i, w))
    return _positions(sentences, hidden, target, where)


def _positions(sentences: probing.Sentences, hidden: list, target: list, where: list
               ) -> MaskedPositions:
    w_idx = np.array([w for _, w in where])
    labels = {
        "upos": np.array([sentences.upos[s][w] for s, w in where], dtype=np.int64),
        "deprel": np.array([sentences.deprel[s][w] for s, w in where], dtype=np.int64),
        "position": position_bucket(w_idx).astype(np.int64),
    }
    return MaskedPositions(np.stack(hidden).astype(np.float32), np.array(target), labels)


@torch.no_grad()
def lm_logits(backbone: Backbone, hidden: np.ndarray, P: np.ndarray | None = None,
              shift: np.ndarray | None = None) -> torch.Tensor:
    """The LM's logits for hidden states h, optionally projected first and shifted:
    lm_head(P h + shift) (``shift``: one vector, or one per row — re-injection)."""
    h = torch.as_tensor(hidden, dtype=torch.float32)
    if P is not None:
        h = h @ torch.as_tensor(P, dtype=torch.float32).T
    if shift is not None:
        h = h + torch.tensor(np.asarray(shift), dtype=torch.float32)  # a copy: shift may be read-only
    return backbone.lm_head.to("cpu").float()(h)


def lm_metrics(
    backbone: Backbone, positions: MaskedPositions, P: np.ndarray | None = None, chunk: int = 1024,
    shift: np.ndarray | None = None,
) -> dict[str, float]:
    """The LM's accuracy at the positions with h ↦ P h (+ ``shift``: one vector or one per
    position) — masked word, or next word for a causal LM — and D_KL(p_original ‖ p_projected)
    (nats, mean). Computed in chunks: a 49k-word vocabulary makes the logits of every position at
    once several GB."""
    correct, kl, n = 0, 0.0, len(positions)
    shift = None if shift is None else np.broadcast_to(shift, positions.hidden.shape)
    for i in range(0, n, chunk):
        h = positions.hidden[i:i + chunk]
        original = F.log_softmax(lm_logits(backbone, h), dim=-1)
        s = None if shift is None else shift[i:i + chunk]
        projected = (original if P is None and s is None
                     else F.log_softmax(lm_logits(backbone, h, P, s), -1))
        target = torch.as_tensor(positions.target[i:i + chunk])
        correct += int((projected.argmax(-1) == target).sum())
        kl += float((original.exp() * (original - projected)).sum(-1).sum())
    return {"lm_accuracy": correct / n, "kl": kl / n}


def reinjection_metrics(
    backbone: Backbone, train: MaskedPositions, test: MaskedPositions, P: np.ndarray, prop: str,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """The re-injection control (:func:`inlp.reinject`) at the test positions, for one
    projection P of property ``prop`` (P h alone is :func:`lm_metrics` with P): the LM after
    P h + m_z with z the **gold** label and m_z the mean removed component of class z on the
    *training* positions (``"re-injected, gold label"``), and the same with the test labels
    shuffled (``"re-injected, shuffled label"``: vectors of the same kind and frequencies, no
    information about this word). Two LM passes over the vocabulary each: the costly part."""
    y_test = test.labels[prop]
    by_class, _ = removed_means(train.hidden, train.labels[prop], P,
                                classes=int(max(train.labels[prop].max(), y_test.max())) + 1)
    shuffled = np.random.default_rng(seed).permutation(y_test)
    return {"re-injected, gold label": lm_metrics(backbone, test, P, shift=by_class[y_test]),
            "re-injected, shuffled label": lm_metrics(backbone, test, P, shift=by_class[shuffled])}


def projection_table(
    backbone: Backbone,
    test: MaskedPositions,
    projections: dict[str, tuple[str, np.ndarray | Eraser | None]],
) -> pd.DataFrame:
    """One row per edit: ``{row name: (group, P or an Eraser such as LEACE's)}`` → directions
    removed, the share of the test states' variance removed, LM accuracy, KL."""
    rows = []
    for name, (group, edit) in projections.items():
        P, shift = (edit.P, edit.shift) if isinstance(edit, Eraser) else (edit, None)
        k = 0 if P is None else directions_removed(P)
        share = 0.0 if P is None else variance_removed(test.hidden, P)
        rows.append({"projection": name, "group": group, "directions": k, "variance_removed": share,
                     **lm_metrics(backbone, test, P, shift=shift)})
    return pd.DataFrame(rows)


# --- adversarial heads -------------------------------------------------------------------------


@dataclass
class AdversarialRun:
    lambda_: float
    seed: int
    main_accuracy: float  # main-task test accuracy
    head_accuracy: float  # the adversarial head's own accuracy on the probe-test sentences
    probe_accuracy: float  # a fresh linear probe on the encoder output, after training
    seconds: float
    model: MultiHeadModel | None = None

    def row(self) -> dict:
        return {"lambda": self.lambda_, "seed": self.seed, "main_accuracy": self.main_accuracy,
                "adversary_head_accuracy": self.head_accuracy,
                "fresh_probe_accuracy": self.probe_accuracy, "seconds": self.seconds}


@torch.no_grad()
def head_accuracy(model: MultiHeadModel, loader: Sequence[dict], head: str) -> float:
    """Accuracy of one head over a loader (token heads: over the labelled positions)."""
    dev, amp = device(), autocast_dtype()
    model.to(dev).eval()
    correct = total = 0
    for batch in loader:
        with autocast(dev, amp):
            logits = model(batch["input_ids"].to(dev), batch["attention_mask"].to(dev),
                           head=head).logits
        labels = batch["labels"].to(dev)
        keep = labels != IGNORE_INDEX
        correct += int((logits.argmax(-1)[keep] == labels[keep]).sum())
        total += int(keep.sum())
    return correct / max(total, 1)


def adversarial_finetune(
    backbone: Backbone,
    task: Task,
    adv_sentences: probing.Sentences,
    probe_train: probing.Sentences,
    probe_test: probing.Sentences,
    budget: Budget,
    *,
    lambda_: float,
    seed: int = 0,
    adv_batch_size: int = 16,
    adv_weight: float = 1.0,
    head_lr: float | None = None,
    head_warmup_steps: int = 0,
    probe_max_iter: int = 100,
    keep_model: bool = False,
) -> AdversarialRun:
    """Fine-tune ``backbone``'s encoder on ``task`` with a POS head behind a gradient reversal of
    strength ``lambda_`` (λ = 0: the head trains, the encoder ignores it), then measure.

    The adversary must first *be able to read POS*, or reversing its gradient shows nothing:

    1. ``head_warmup_steps`` steps train the POS head alone, on the frozen pretrained encoder (no
       reversal, no main task) — it starts the joint phase as a linear POS probe;
    2. every joint step sums the main loss on one task batch and ``adv_weight`` × the POS loss on
       one batch of ``adv_sentences``; the POS head learns at its own rate ``head_lr`` (None:
       the budget's), the encoder and the main head at ``budget.lr``.

    After training: main-task test accuracy, the adversary head's accuracy, and a fresh linear
    UPOS probe on the encoder output (trained on ``probe_train``, tested on ``probe_test``).
    """
    seed_everything(seed)
    encoder = copy.deepcopy(backbone.encoder)
    model = MultiHeadModel(encoder, {
        "main": HeadConfig(task.num_labels, "sequence"),
        "pos": HeadConfig(len(probing.upos_names()), "token", loss_weight=adv_weight,
                          reverse_gradient=True, lambda_=lambda_),
    }, pool=backbone.pool)
    collate = pad_collate(backbone.pad_id)
    pos_rows = probing.token_label_rows(backbone, adv_sentences, "upos")
    head_lr = budget.lr if head_lr is None else head_lr
    model.to(device())
    seconds = 0.0
    if head_warmup_steps > 0:
        seconds += train_head_alone(model, "pos", pos_rows, collate, budget, lr=head_lr,
                                     steps=head_warmup_steps, batch_size=adv_batch_size,
                                     seed=seed + 2)
    loaders = {
        "main": resumable_loader(backbone.encode_rows(task.train), batch_size=budget.batch_size,
                                 seed=seed, collate_fn=collate),
        "pos": resumable_loader(pos_rows, batch_size=adv_batch_size, seed=seed + 1,
                                collate_fn=collate),
    }
    train_loader = MultiTaskLoader(loaders, main="main")
    seconds += fit_with(model, train_loader, budget,
                        method=Method(loss_fn=multihead_loss,
                                      param_groups=head_rate(head_lr / budget.lr))).seconds

    test_loader = eval_loader(backbone.encode_rows(task.test), budget.eval_batch_size, collate)
    pos_test = eval_loader(probing.token_label_rows(backbone, probe_test, "upos"),
                           budget.eval_batch_size, collate)
    probe = final_probe_accuracy(replace(backbone, encoder=model.encoder), probe_train, probe_test,
                                 max_iter=probe_max_iter)
    return AdversarialRun(lambda_, seed, head_accuracy(model, test_loader, "main"),
                          head_accuracy(model, pos_test, "pos"), probe, seconds,
                          model if keep_model else None)


def head_rate(scale: float):
    """``Method.param_groups``: every parameter at the base rate, the POS head's × ``scale``."""
    def groups(model: MultiHeadModel, lr: float, weight_decay: float) -> list[dict]:
        head = list(model.heads["pos"].parameters())
        return (decay_groups(model, weight_decay, exclude=head, name="model")
                + decay_groups(model, weight_decay, params=head, name="pos head", lr_scale=scale))
    return groups


def train_head_alone(model: MultiHeadModel, head: str, rows, collate, budget: Budget, *,
                      lr: float, steps: int, batch_size: int, seed: int) -> float:
    """Train one head for ``steps`` steps with the encoder frozen (its other heads untouched);
    returns the seconds. The head's gradient reversal does not matter here: nothing upstream
    of it is trained."""
    frozen = [p for p in model.encoder.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        loader = MultiTaskLoader({head: resumable_loader(rows, batch_size=batch_size, seed=seed,
                                                         collate_fn=collate)}, main=head)
        params = list(model.heads[head].parameters())
        return fit(model, loader, lr=lr, weight_decay=budget.weight_decay, steps=steps,
                   method=Method(loss_fn=multihead_loss,
                                 param_groups=lambda m, lr_, wd: decay_groups(m, wd, params=params)),
                   warmup=0, schedule=None, max_norm=budget.max_norm).seconds
    finally:
        for p in frozen:
            p.requires_grad_(True)


def final_probe_accuracy(
    backbone: Backbone, probe_train: probing.Sentences, probe_test: probing.Sentences,
    prop: str = "upos", max_iter: int = 100,
) -> float:
    """A fresh linear probe for ``prop`` on a backbone's encoder output."""
    f_tr = probing.extract_features(backbone, probe_train, final=True)
    f_te = probing.extract_features(backbone, probe_test, final=True)
    return probing.probe_accuracy(f_tr.layers[0], f_tr.labels(probe_train, prop),
                                  f_te.layers[0], f_te.labels(probe_test, prop), max_iter)
