"""The adversarial-head experiment of notebook 11: does burning POS out of an encoder impair the
trainability of a target task?

The request this project was founded on: task heads that train on gold labels but **flip their
gradient before it reaches the shared encoder** (``HeadConfig(reverse_gradient=True)``, the
gradient-reversal layer of Ganin & Lempitsky 2015, :mod:`tutorial_lib.heads`), used to burn a
property out of the encodings — and then to measure how much that impairs training a target task.
Two look-alikes do *not* do it: a head trained on **inverted labels** ("getting all the answers
exactly wrong requires just as much domain knowledge") and one on **random labels** (a feckless
head that changes itself rather than the encoder).

Five arms, each an *intermediate stage* on the same encoder with the same sentences and steps
(:data:`ARMS`): none; POS (λ = 0, the head trains, the encoder with it); reversed POS (gold labels,
the encoder gets −λ × the head's gradient); inverted labels (a fixed permutation of the tags, no
reversal); random labels (no reversal). After each arm:

(a) a fresh linear POS probe on the frozen encoder (did the information go?);
(b) how far the encoder moved: linear CKA (Kornblith et al. 2019) between its word states and the
    original encoder's on the same words (1: the same up to rotation and scale) — :func:`linear_cka`;
(c) trainability of two targets: one that needs syntax (UD dependency relations, a token task) and
    one that needs it less (TREC-6 questions): the dev learning curve and the test score of
    fine-tuning from the arm's encoder, several seeds (:func:`train_deprel`, ``finetuning.finetune``).

The predictions the request makes: reversal removes POS (probe near the majority rate) and hurts the
syntactic target more than the other; inverted and random labels leave the probe high.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ...backbones import Backbone
from ...config import Scale
from ...finetuning import Recipe, Run, Scored, run
from ...heads import HeadConfig, MultiHeadModel, MultiTaskLoader, merge_batches, multihead_loss
from ...settings import Budget
from ...training import Method, eval_loader, pad_collate, resumable_loader
from . import adversaries, probing
from .adversaries import (  # noqa: F401 (re-exported: 12 and its tests call adversarial.head_accuracy …)
    REVERSE,
    Adversary,
    head_accuracy,
    head_rate,
    train_head_alone,
)


@dataclass(frozen=True)
class Arm:
    """One intermediate stage: which POS labels its head trains on (None: no stage), whether the
    encoder is trained against the head (``reverse``: by default its gradient reversed before the
    encoder) and how (``adversary``: :class:`~.adversaries.Adversary`, the objective and the
    remedies for a head that is simply fooled)."""

    name: str
    labels: str | None  # "gold", "inverted" (a fixed permutation), "random", or None
    reverse: bool = False
    lambda_: float = 0.0  # the reversal's strength (only with reverse)
    adversary: Adversary = field(default=REVERSE)

    def __post_init__(self) -> None:
        if self.adversary.objective != "reverse" and not self.reverse:
            raise ValueError(f"arm {self.name!r}: the {self.adversary.objective!r} objective works "
                             "against the head: it needs reverse=True")


ARMS = (
    Arm("none", None),
    Arm("POS (λ = 0)", "gold"),
    Arm("reversed POS", "gold", reverse=True, lambda_=1.0),
    Arm("inverted labels", "inverted"),
    Arm("random labels", "random"),
)


def arm_labels(arm: Arm, upos: list[list[int]], n_tags: int, seed: int = 0) -> list[list[int]]:
    """The POS labels an arm's head trains on: the gold tags; the tags under one fixed permutation
    with no tag left in place (every answer wrong, systematically); or a uniformly random tag per
    word (drawn once, the same at every pass)."""
    if arm.labels in (None, "gold"):
        return upos
    rng = np.random.default_rng(seed)
    if arm.labels == "inverted":
        order = rng.permutation(n_tags)
        mapping = np.empty(n_tags, dtype=int)
        mapping[order] = np.roll(order, 1)  # order[i] → order[i − 1]: one cycle, no tag in place
        return [[int(mapping[t]) for t in row] for row in upos]
    if arm.labels == "random":
        return [[int(t) for t in rng.integers(0, n_tags, len(row))] for row in upos]
    raise ValueError(f"unknown labels {arm.labels!r} in arm {arm.name!r}")


def intermediate_stage(
    backbone: Backbone, arm: Arm, sentences: probing.Sentences, budget: Budget, *, steps: int,
    head_lr: float, head_warmup_steps: int, batch_size: int, seed: int = 0,
    check: Callable[[MultiHeadModel, int], bool] | None = None, check_every: int = 0,
) -> tuple[Backbone, dict]:
    """``backbone`` after ``arm``'s stage: the POS head first trains alone on the frozen encoder for
    ``head_warmup_steps`` (so that a reversed head can read POS before its gradient is turned on
    the encoder), then head and encoder train together for ``steps`` at ``budget.lr`` (the head
    at ``head_lr``), against each other as ``arm.adversary`` says (:mod:`.adversaries`): one
    :func:`~tutorial_lib.finetuning.run` whose model is built with its head warmed up.
    ``seed`` seeds everything the stage draws (the head, the batches' order, random labels): one
    stage run per seed replicates the treatment. ``check(model, step)``, every ``check_every``
    joint steps, stops the stage when it returns True (a control trained until it matches).

    Returns the new backbone and ``{"head_accuracy", "head_loss", "seconds", "steps", "reinits",
    "checks"}``: the head on its own training labels, its loss over the last 5 joint steps (with
    "confusion" the encoder's term too), the joint steps run and the steps after which the head
    was re-initialised or checked. The "none" arm returns a copy of ``backbone``."""
    if arm.labels is None:
        return copy.deepcopy(backbone), {"head_accuracy": float("nan"), "head_loss": float("nan"),
                                         "seconds": 0.0, "steps": 0, "reinits": [], "checks": []}
    n_tags = len(probing.upos_names())
    relabelled = replace(sentences, upos=arm_labels(arm, sentences.upos, n_tags, seed))
    adversary, warmup = arm.adversary, {}
    rows = probing.token_label_rows(backbone, relabelled, "upos")
    collate = pad_collate(backbone.pad_id)

    def alone(model: MultiHeadModel, steps_: int, seed_: int) -> float:
        return train_head_alone(model, "pos", rows, collate, budget, lr=head_lr, steps=steps_,
                                batch_size=batch_size, seed=seed_)

    def build(_: None) -> MultiHeadModel:  # the stage's model, its head warmed up alone
        model = MultiHeadModel(copy.deepcopy(backbone.encoder), {"pos": adversaries.head_config(
            n_tags, adversary, reverse=arm.reverse, lambda_=arm.lambda_)}, pool=backbone.pool)
        warmup["seconds"] = alone(model, head_warmup_steps, seed)
        return model

    def score(model: MultiHeadModel, _: None) -> Scored:  # the head on its own training labels
        return Scored({"accuracy": head_accuracy(
            model, eval_loader(rows, budget.eval_batch_size, collate), "pos")}, {})

    retrain_steps = head_warmup_steps if adversary.retrain_steps is None else adversary.retrain_steps
    handlers, record = adversaries.stage_handlers(
        adversary, steps=steps, check=check, check_every=check_every,
        retrain=lambda model, count: alone(model, retrain_steps, seed + 1000 * (count + 1)))
    stage = run(Recipe(
        build=build, name=arm.name, budget=budget, steps=steps, schedule=None, score=score,
        loader=lambda _, s: MultiTaskLoader({"pos": resumable_loader(
            rows, batch_size=batch_size, seed=s + 1, collate_fn=collate)}, main="pos"),
        method=Method(loss_fn=adversaries.stage_loss(adversary, arm.lambda_),
                      param_groups=head_rate(head_lr / budget.lr), on_trainer=handlers)),
        seed, keep_model=True)
    losses = adversaries.last_losses(record)
    return replace(backbone, encoder=stage.model.encoder), {
        "head_accuracy": stage.test["accuracy"], "head_loss": losses.get("pos", float("nan")),
        **({"confusion": losses["confusion"]} if "confusion" in losses else {}),
        "seconds": warmup["seconds"] + stage.seconds, "steps": len(stage.history.train),
        "reinits": record["reinits"], "checks": record["checks"]}


# --- (a) what a fresh probe reads, (b) how far the encoder moved --------------------------------


def linear_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Linear centred kernel alignment of two representations of the same n items (n × d₁, n × d₂):
    ‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F) on column-centred X, Y (Kornblith et al. 2019, eq. 5). 1 when
    Y is X rotated and scaled; 0 when they share no linear structure."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    X, Y = X - X.mean(0), Y - Y.mean(0)
    cross = np.linalg.norm(Y.T @ X) ** 2
    return float(cross / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y)))


def movement(original: Backbone, moved: Backbone, sentences: probing.Sentences) -> dict[str, float]:
    """How far an encoder moved from ``original``: linear CKA and the mean cosine between the two
    encoders' final word states on ``sentences`` (first sub-words)."""
    a = probing.extract_features(original, sentences, final=True).layers[-1]
    b = probing.extract_features(moved, sentences, final=True).layers[-1]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    return {"cka": linear_cka(a, b), "mean_cosine": float(cos.mean())}


# --- (c) trainability of a syntactic target: dependency relations as token labels -------------------


def train_deprel(
    backbone: Backbone, train: probing.Sentences, dev: probing.Sentences, test: probing.Sentences,
    budget: Budget, seed: int, *, scale: Scale, evals_per_epoch: int = 2,
) -> Run:
    """Fine-tune ``backbone`` (encoder + a new token head) to tag every word with its universal
    dependency relation (37 classes, first sub-words), :func:`~tutorial_lib.finetuning.run`
    with dev accuracy in the history ``evals_per_epoch`` times a pass and test accuracy at the
    end."""
    n = len(probing.label_names("deprel"))
    collate = pad_collate(backbone.pad_id)

    def split(b: Backbone, sentences: probing.Sentences):
        return eval_loader(probing.token_label_rows(b, sentences, "deprel"), budget.eval_batch_size,
                           collate)

    def validate(b: Backbone):
        loader = split(b, dev)
        return lambda model: {"accuracy": head_accuracy(model, loader, "deprel")}

    def score(model: MultiHeadModel, b: Backbone) -> Scored:
        accuracy = head_accuracy(model, split(b, test), "deprel")
        return Scored({"accuracy": accuracy}, {"test_accuracy": accuracy})

    return run(Recipe(
        backbone=backbone, budget=budget,
        build=lambda b: MultiHeadModel(b.encoder, {"deprel": HeadConfig(n, "token")}, pool=b.pool),
        rows=lambda b: probing.token_label_rows(b, train, "deprel"),
        method=Method(loss_fn=lambda model, batch: multihead_loss(model, merge_batches({"deprel": batch}))),
        validate=validate, score=score, evals_per_epoch=evals_per_epoch), seed, scale=scale)


def final_probe_accuracy(
    backbone: Backbone, probe_train: probing.Sentences, probe_test: probing.Sentences,
    prop: str = "upos", max_iter: int = 100,
) -> float:
    """A fresh linear probe for ``prop`` on a backbone's encoder output."""
    f_tr = probing.extract_features(backbone, probe_train, final=True)
    f_te = probing.extract_features(backbone, probe_test, final=True)
    return probing.probe_accuracy(f_tr.layers[0], f_tr.labels(probe_train, prop),
                                  f_te.layers[0], f_te.labels(probe_test, prop), max_iter)
