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

Both erasers (INLP and LEACE, :mod:`tutorial_lib.methods.probing.inlp`) are fitted per seed
(:func:`fit_erasers`) and checked by a fresh probe (:func:`premise`); the training-time eraser, a
head with a reversed gradient, is notebook 12's (:mod:`tutorial_lib.methods.probing.adversarial`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ...backbones import Backbone
from ...stats import Premise, erasure_premise
from . import inlp, probing
from .inlp import Eraser, INLPResult, directions_removed, removed_means, variance_removed

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
    backbone: Backbone, train: MaskedPositions, test: MaskedPositions, P: np.ndarray | Eraser,
    prop: str, seed: int = 0,
) -> dict[str, dict[str, float]]:
    """The re-injection control (:func:`inlp.reinject`) at the test positions, for one edit —
    INLP's projection P or any :class:`Eraser` — of property ``prop``: the LM after
    edit(h) + m_z with z the **gold** label and m_z the mean removed component of class z on the
    *training* positions (``"re-injected, gold label"``), and the same with the test labels
    shuffled (``"re-injected, shuffled label"``: vectors of the same kind and frequencies, no
    information about this word). Two LM passes over the vocabulary each: the costly part."""
    y_test = test.labels[prop]
    by_class, _ = removed_means(train.hidden, train.labels[prop], P,
                                classes=int(max(train.labels[prop].max(), y_test.max())) + 1)
    shuffled = np.random.default_rng(seed).permutation(y_test)
    P, shift = (P.P, P.shift) if isinstance(P, Eraser) else (P, 0.0)
    return {"re-injected, gold label": lm_metrics(backbone, test, P, shift=shift + by_class[y_test]),
            "re-injected, shuffled label": lm_metrics(backbone, test, P,
                                                      shift=shift + by_class[shuffled])}


@dataclass
class Erasure:
    """One eraser fitted on one random subset of training positions (``seed``), and what a fresh
    linear probe reads after it (:func:`inlp.probe_after` with the C grid): ``probe`` **out of
    sample** — trained on erased training positions the eraser was not fitted to — and, where
    computed, ``in_sample`` — trained on the eraser's own positions, where LEACE's class means are
    equal by construction, so that check cannot fail (``{"dev", "test", "C"}`` each)."""

    eraser: Eraser
    seed: int
    probe: dict[str, float]
    result: INLPResult | None = None  # INLP's run (its curve, ranks); None for LEACE
    fitted_on: np.ndarray | None = None  # the training positions the eraser was fitted to
    probed_on: np.ndarray | None = None  # those the fresh probe was trained on (disjoint)
    in_sample: dict[str, float] | None = None


def disjoint_subsets(n: int, fit: int | None, probe: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint random subsets of ``range(n)``: ``fit`` positions for an eraser (None: all
    that the probe's ``probe`` positions leave) and ``probe`` positions for the fresh probe."""
    if probe >= n:
        raise ValueError(f"the fresh probe's {probe} positions leave none of the {n} training "
                         "positions to fit an eraser on: lower probe_positions")
    order = np.random.default_rng(seed).permutation(n)
    rest = order[probe:]
    return np.sort(rest if fit is None else rest[:fit]), np.sort(order[:probe])


def fit_erasers(
    train: MaskedPositions, dev: MaskedPositions, test: MaskedPositions, prop: str, *,
    seeds: Sequence[int], positions: int | None, probe_positions: int, C: float,
    grid: tuple[float, ...], max_iterations: int, tol: float = 0.01, max_iter: int = 1000,
    solver_tol: float = 1e-4, leace_positions: int | None = None, in_sample: bool = False,
) -> dict[str, list[Erasure]]:
    """INLP (probes at ``C``, run to its rule or ``max_iterations``, fitted on ``positions``
    random training positions per seed) and LEACE (on ``leace_positions`` of them; None: every
    position the probe leaves — LEACE is closed form, so more data costs little), each checked by a
    fresh probe (C from ``grid``, chosen on dev) trained on ``probe_positions`` erased training
    positions **neither eraser saw**, scored on dev and test: ``{"INLP": [...], "LEACE": [...]}``,
    one :class:`Erasure` per seed. ``in_sample``: also the probe on as many of the eraser's own
    positions (the first seed only), to show what an in-sample check would have said."""
    out: dict[str, list[Erasure]] = {"INLP": [], "LEACE": []}
    y_dev, y_test = dev.labels[prop], test.labels[prop]
    splits = {"dev": (dev.hidden, y_dev), "test": (test.hidden, y_test)}
    labels = train.labels[prop]
    classes = int(max(labels.max(), y_dev.max(), y_test.max())) + 1
    probe_kw = dict(grid=grid, max_iter=max_iter, tol=solver_tol)
    for i, seed in enumerate(seeds):
        # one permutation per seed: the probe's positions are the same for both erasers, and
        # INLP's (the first `positions` of the rest) lie inside LEACE's
        fit_inlp, probed = disjoint_subsets(len(train), positions, probe_positions, seed)
        fit_all, _ = disjoint_subsets(len(train), leace_positions, probe_positions, seed)
        run = inlp.inlp(train.hidden[fit_inlp], labels[fit_inlp], dev.hidden, y_dev, tol=tol,
                        max_iterations=max_iterations,
                        classifier=lambda: inlp.default_classifier(max_iter, C=C, tol=solver_tol))
        fitted = ((inlp.inlp_eraser(run), run, fit_inlp),
                  (inlp.leace(train.hidden[fit_all], labels[fit_all], classes), None, fit_all))
        for eraser, result, fit in fitted:
            probe = inlp.probe_after(eraser, train.hidden[probed], labels[probed], splits, **probe_kw)
            own = None
            if in_sample and i == 0:  # on as many of its own positions as the probe's
                mine = np.random.default_rng(seed).choice(fit, min(len(fit), len(probed)), replace=False)
                own = inlp.probe_after(eraser, train.hidden[mine], labels[mine], splits, **probe_kw)
            out[eraser.name].append(Erasure(eraser, seed, probe, result, fit, probed, own))
    return out


def premise(erasures: Sequence[Erasure], floor: dict[str, float], tol: float = 0.01) -> Premise:
    """The premise of every comparison with these erasers (:func:`stats.erasure_premise`): the
    *highest* out-of-sample fresh-probe accuracy over their runs within ``tol`` of the floor on
    each split (each run's probe positions disjoint from its eraser's, checked)."""
    for e in erasures:
        erasure_premise({s: e.probe[s] for s in floor}, floor, tol, fitted_on=e.fitted_on,
                        probed_on=e.probed_on)
    worst = {split: max(e.probe[split] for e in erasures) for split in floor}
    first = erasures[0]
    return erasure_premise(worst, floor, tol, fitted_on=first.fitted_on, probed_on=first.probed_on)


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
