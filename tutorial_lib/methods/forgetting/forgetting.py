"""Catastrophic forgetting in sequential transfer, and three regularisers against it (notebook 13).

The experiment: fine-tune an encoder on a **source** task (stage 1), then give it a new head and
fine-tune it on a **target** task (stage 2). The source head is kept, frozen, on the same encoder,
so the source task can be scored after stage 2: what it lost is the *forgetting*. During stage 2
a regulariser Ω is added to the target's cross-entropy (as a ``loss_fn`` of the one runner,
:func:`tutorial_lib.finetuning.run`):

==============  ==============================================================================
regulariser     Ω (w_S: the shared encoder's trained weights, w_new: the new head's)
==============  ==============================================================================
weight decay    α/2 ‖w_S‖² + β/2 ‖w_new‖²                 (towards zero: what the others replace)
L2-SP           α/2 ‖w_S − w_S⁰‖² + β/2 ‖w_new‖²          (Li, Grandvalet & Davoine 2018)
EWC             λ/2 Σ_i F_i (w_i − w_i⁰)²                 (Kirkpatrick et al. 2017)
LwF-style       λ · T² · KL(softmax(z⁰/T) ‖ softmax(z/T)) (Li & Hoiem 2016; z: source logits on target x)
==============  ==============================================================================

w⁰ are the weights after stage 1 (the source model), F the diagonal Fisher information of the
source task at w⁰ (:func:`diagonal_fisher`), by default divided by its mean so that λ is on the
same scale as L2-SP's α (EWC with every F_i = 1 *is* L2-SP without β). LwF's term pulls the
source head's predictions on the target's inputs towards those of the frozen stage-1 model (the
distillation loss of :mod:`tutorial_lib.methods.forgetting.distillation`); in the paper the old head trains
too, here it stays frozen for every method. AdamW's own (decoupled) weight decay is off in
stage 2 for all of them (the budget says 0): the decay lives in Ω, so strength 0 is plain
fine-tuning for every regulariser.

The frozen source head reads the encoder along the directions it learned in stage 1; a source
accuracy lost under it may be information *forgotten* or features that only *drifted*. A fresh
linear head refitted on the encoder's states after each stage (:func:`refit_probe`) separates
the two.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits
from torch import nn
from torch.utils.data import DataLoader

from ...backbones import Backbone, load_backbone
from ...config import Scale
from ...evaluation import evaluate
from ...finetuning import Recipe, Run, Scored, compare, finetune
from ...models import Output, SequenceClassifier, sequence_loss
from ...runtime import autocast, autocast_dtype, device
from ...settings import Budget
from ...stats import floor_column
from ...tasks import Task
from ...training import Batch, Method, eval_loader, pad_collate
from .distillation import soft_target_loss
from .settings import ForgettingSettings

KINDS = ("none", "weight decay", "L2-SP", "EWC", "LwF")

# --- the model of stage 2 ---------------------------------------------------------------------


class TwoHeadClassifier(SequenceClassifier):
    """The source classifier's encoder with a new target head; its source head rides along,
    frozen, on the same pooled state. ``forward`` is the target's (so :func:`evaluation.evaluate`
    scores the target); :meth:`source_view` is a module that scores the source task."""

    def __init__(self, source: SequenceClassifier, num_labels: int):
        super().__init__(source.encoder, num_labels, source.pool, source.dropout.p)
        self.source_head = source.head
        self.source_head.requires_grad_(False)

    def both(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """(target logits, source logits) from one pass of the encoder."""
        pooled = self.dropout(self.pooled(input_ids, attention_mask))
        return self.head(pooled), self.source_head(pooled)

    def source_view(self) -> nn.Module:
        """A classifier of the *source* task sharing these weights (for ``evaluation.evaluate``)."""
        return _SourceView(self)


class _SourceView(nn.Module):
    def __init__(self, model: TwoHeadClassifier):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor | None = None) -> Output:
        pooled = self.model.dropout(self.model.pooled(input_ids, attention_mask))
        logits = self.model.source_head(pooled)
        return Output(logits, None if labels is None else sequence_loss(logits, labels))


# --- the penalties --------------------------------------------------------------------------


def shared_parameters(model: TwoHeadClassifier) -> dict[str, nn.Parameter]:
    """The trainable parameters of the shared encoder, by name (w_S)."""
    return {f"encoder.{n}": p for n, p in model.encoder.named_parameters() if p.requires_grad}


def new_parameters(model: TwoHeadClassifier) -> dict[str, nn.Parameter]:
    """The new target head's parameters (w_new)."""
    return {f"head.{n}": p for n, p in model.head.named_parameters()}


def snapshot(params: Mapping[str, nn.Parameter]) -> dict[str, torch.Tensor]:
    """Detached copies of ``params``: the anchor w⁰."""
    return {n: p.detach().clone() for n, p in params.items()}


def anchored_penalty(params: Mapping[str, nn.Parameter], strength: float,
                     anchor: Mapping[str, torch.Tensor] | None = None,
                     importance: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """strength/2 · Σ_i F_i (w_i − w_i⁰)²: ``anchor`` w⁰ (None: zero, i.e. weight decay) and
    ``importance`` F (None: all ones, i.e. L2-SP). Its gradient is strength · F_i (w_i − w_i⁰)."""
    total = torch.zeros((), device=next(iter(params.values())).device)
    for name, w in params.items():  # w⁰ and F where w is: a snapshot may stay on the CPU
        diff = w if anchor is None else w - anchor[name].to(w.device)
        sq = diff.pow(2) if importance is None else importance[name].to(w.device) * diff.pow(2)
        total = total + sq.sum()
    return 0.5 * strength * total


def l2sp_penalty(model: TwoHeadClassifier, anchor: Mapping[str, torch.Tensor] | None,
                 alpha: float, beta: float) -> torch.Tensor:
    """L2-SP: α/2 ‖w_S − w_S⁰‖² + β/2 ‖w_new‖² (``anchor`` None: weight decay, α/2 ‖w_S‖² + …)."""
    return (anchored_penalty(shared_parameters(model), alpha, anchor)
            + anchored_penalty(new_parameters(model), beta))


def ewc_penalty(model: TwoHeadClassifier, anchor: Mapping[str, torch.Tensor],
                fisher: Mapping[str, torch.Tensor], lam: float) -> torch.Tensor:
    """EWC: λ/2 Σ_i F_i (w_i − w_i⁰)² over the shared encoder's weights."""
    return anchored_penalty(shared_parameters(model), lam, anchor, fisher)


def diagonal_fisher(model: nn.Module, rows: Sequence[Mapping], pad_id: int,
                    params: Mapping[str, nn.Parameter], normalise: bool = True
                    ) -> dict[str, torch.Tensor]:
    """The diagonal Fisher information of ``model``'s predictive distribution at its weights,
    F_i = 1/N Σ_x Σ_y p(y|x) (∂ log p(y|x) / ∂w_i)², the expectation over y taken exactly (one
    backward pass per class) and over the N ``rows`` (one example at a time; their labels are not
    used). ``normalise``: divided by its mean over all entries (so mean F = 1)."""
    was_training = model.training
    model.eval()
    fisher = {n: torch.zeros_like(p) for n, p in params.items()}
    collate = pad_collate(pad_id)
    dev = next(iter(params.values())).device
    for row in rows:
        batch = collate([{"input_ids": row["input_ids"]}])
        log_p = F.log_softmax(model(batch["input_ids"].to(dev),
                                    batch["attention_mask"].to(dev)).logits.float(), -1)[0]
        probs = log_p.exp().detach()
        for y in range(log_p.numel()):
            grads = torch.autograd.grad(log_p[y], list(params.values()), retain_graph=True,
                                        allow_unused=True)
            for (name, _), g in zip(params.items(), grads):
                if g is not None:
                    fisher[name] += probs[y] * g.pow(2)
    for f in fisher.values():
        f /= max(1, len(rows))
    if normalise:
        mean = sum(f.sum() for f in fisher.values()) / sum(f.numel() for f in fisher.values())
        fisher = {n: f / mean.clamp_min(1e-30) for n, f in fisher.items()}
    model.train(was_training)
    return fisher


def lwf_term(model: TwoHeadClassifier, source_logits: torch.Tensor, batch: Batch,
             teacher: nn.Module, lam: float, temperature: float) -> torch.Tensor:
    """LwF-style: λ · T² · KL between the frozen stage-1 model's source predictions on these
    (target) inputs and the current source head's, both softened by T."""
    dev = next(teacher.parameters()).device  # the frozen model may sit on another device
    with torch.no_grad():
        old = teacher(batch["input_ids"].to(dev), batch["attention_mask"].to(dev)).logits.float()
    old = old.to(source_logits.device)
    return lam * soft_target_loss(source_logits, F.softmax(old / temperature, -1), temperature)


# --- a regulariser as a Method ---------------------------------------------------------------


@dataclass(frozen=True)
class Regulariser:
    """One stage-2 setting: ``kind`` (one of :data:`KINDS`) at ``strength`` (α or λ); ``beta``:
    the new head's decay (weight decay, L2-SP); ``temperature``: LwF's T."""

    kind: str = "none"
    strength: float = 0.0
    beta: float = 0.0
    temperature: float = 2.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown regulariser {self.kind!r}: choose one of {KINDS}")

    @property
    def label(self) -> str:
        return "fine-tuning" if self.kind == "none" else f"{self.kind} {self.strength:g}"


def regularisers(settings: ForgettingSettings) -> list[Regulariser]:
    """Plain fine-tuning, then each of ``settings.regularisers`` at each of its strengths."""
    grids = {"weight decay": settings.decay_strengths, "L2-SP": settings.decay_strengths,
             "EWC": settings.ewc_strengths, "LwF": settings.lwf_strengths}
    out = [Regulariser()]
    for kind in settings.regularisers:
        if kind not in grids:
            raise ValueError(f"unknown regulariser {kind!r} in settings.regularisers: choose from "
                             f"{list(grids)}")
        beta = settings.head_decay if kind in ("weight decay", "L2-SP") else 0.0
        out += [Regulariser(kind, s, beta, settings.lwf_temperature) for s in grids[kind]]
    return out


@dataclass
class SourceModel:
    """Stage 1's result for one seed: the classifier, what stage 2 anchors to, its scores."""

    seed: int
    model: SequenceClassifier
    anchor: dict[str, torch.Tensor] = field(repr=False)  # encoder weights, named as in stage 2
    fisher: dict[str, torch.Tensor] | None = field(default=None, repr=False)
    test_accuracy: float = 0.0
    seconds: float = 0.0
    probe_accuracy: float = float("nan")  # a fresh linear head on its encoder (:func:`refit_probe`)


def stage_two_loss(reg: Regulariser, source: SourceModel, teacher: nn.Module | None = None
                   ) -> Callable[[TwoHeadClassifier, Batch], torch.Tensor]:
    """The target's cross-entropy + Ω of ``reg``, as a ``loss_fn`` of stage 2's
    :class:`~tutorial_lib.training.Method`; the model keeps both parts of its last step in
    ``last_losses`` (``cross_entropy``, ``penalty``)."""

    def loss_fn(model: TwoHeadClassifier, batch: Batch) -> torch.Tensor:
        target_logits, source_logits = model.both(batch["input_ids"], batch["attention_mask"])
        ce = F.cross_entropy(target_logits.float(), batch["labels"])
        omega = torch.zeros((), device=ce.device)
        if reg.kind == "weight decay":
            omega = l2sp_penalty(model, None, reg.strength, reg.beta)
        elif reg.kind == "L2-SP":
            omega = l2sp_penalty(model, source.anchor, reg.strength, reg.beta)
        elif reg.kind == "EWC":
            omega = ewc_penalty(model, source.anchor, source.fisher, reg.strength)
        elif reg.kind == "LwF":
            omega = lwf_term(model, source_logits, batch, teacher, reg.strength, reg.temperature)
        model.last_losses = {"cross_entropy": float(ce.detach()), "penalty": float(omega.detach())}
        return ce + omega

    return loss_fn


# --- reading the source task: its old head, and a fresh one ------------------------------------


@torch.no_grad()
def pooled_states(model: SequenceClassifier, loader: DataLoader) -> tuple[torch.Tensor, torch.Tensor]:
    """The pooled states the heads read (eval mode: no dropout) and the labels, for every row of
    ``loader`` in its order: ([N, D] float32 on the CPU, [N])."""
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    states, labels = [], []
    for batch in loader:
        with autocast(dev, autocast_dtype(dev)):
            pooled = model.pooled(batch["input_ids"].to(dev), batch["attention_mask"].to(dev))
        states.append(pooled.float().cpu())
        labels.append(batch["labels"].reshape(-1))
    model.train(was_training)
    return torch.cat(states), torch.cat(labels)


def refit_probe(states: torch.Tensor, labels: torch.Tensor, C: float = 1.0, folds: int = 5,
                seed: int = 0) -> float:
    """The accuracy of a **fresh linear head** on ``states`` (standardised, then logistic
    regression at ``C``), cross-validated: each row is scored by a probe fitted on the other
    ``folds − 1`` folds (stratified, shuffled by ``seed``: the same folds for the same rows, so two
    encoders' probes are scored on the same splits). Single-threaded (a small shared CPU)."""
    y = labels.numpy()
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=300))
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a fixed budget is the protocol
        predicted = cross_val_predict(probe, states.numpy(), y,
                                      cv=StratifiedKFold(folds, shuffle=True, random_state=seed))
    return float(np.mean(predicted == y))


def relative_shift(params: Mapping[str, nn.Parameter], anchor: Mapping[str, torch.Tensor]) -> float:
    """‖w − w⁰‖ / ‖w⁰‖ over ``params``: how far stage 2 moved the weights, relative to their size."""
    with torch.no_grad():
        moved = sum(float((p - anchor[n]).pow(2).sum()) for n, p in params.items())
        size = sum(float(anchor[n].pow(2).sum()) for n in params)
    return (moved / max(size, 1e-30)) ** 0.5


# --- the experiment -------------------------------------------------------------------------


@dataclass
class SequentialTransfer:
    """Source → target on one backbone: the tasks encoded once, stage 1 per seed
    (:meth:`source_stage`, through ``finetuning.finetune``), stage 2 per seed and regulariser
    (:meth:`recipe`, run by ``finetuning.run``; :meth:`runs`: ``finetuning.compare``; one
    :class:`~tutorial_lib.finetuning.Run` each), one table row per run (:meth:`table`). The
    source task is read after each stage twice: by its own frozen head, and by a fresh linear
    head refitted on the encoder's states (:func:`refit_probe`, C = ``probe_c``,
    ``probe_folds`` folds of the source's test sentences)."""

    scale: Scale
    backbone: str
    source: Task
    target: Task
    source_budget: Budget
    target_budget: Budget
    fisher_examples: int = 200
    probe_c: float = 1.0
    probe_folds: int = 5
    bb: Backbone = field(init=False, repr=False)

    @classmethod
    def of(cls, settings: ForgettingSettings, source: Task, target: Task) -> SequentialTransfer:
        """The experiment that ``settings`` describe (at their scale), on the loaded ``source``
        and ``target``."""
        s = settings
        return cls(s.scale, s.backbone, source, target, s.source_budget, s.target_budget,
                   s.fisher_examples, s.probe_c, s.probe_folds)

    def __post_init__(self) -> None:
        self.bb = load_backbone(self.backbone, self.scale)
        enc = self.bb.encode_rows
        b = self.target_budget
        self.rows = {"source": {s: enc(getattr(self.source, s), b.max_len)
                                for s in ("train", "validation", "test")},
                     "target": {s: enc(getattr(self.target, s), b.max_len) for s in ("train", "test")}}

    def loader(self, task: str, split: str) -> DataLoader:
        return eval_loader(self.rows[task][split], self.target_budget.eval_batch_size,
                           pad_collate(self.bb.pad_id))

    def read_source(self, model: SequenceClassifier, head: nn.Module) -> tuple[float, float]:
        """(the source head's test accuracy, a refitted probe's) from one pass over the source's
        test sentences through ``model``'s encoder."""
        states, labels = pooled_states(model, self.loader("source", "test"))
        with torch.no_grad():
            logits = head(states.to(next(head.parameters()).device)).cpu()
        head_accuracy = float((logits.argmax(-1) == labels).float().mean())
        return head_accuracy, refit_probe(states, labels, self.probe_c, self.probe_folds)

    def source_stage(self, seed: int, fisher: bool = True) -> SourceModel:
        """Fine-tune on the source task (the one recipe via ``finetune``); the anchor w⁰, the
        source task's diagonal Fisher on ``fisher_examples`` of its training rows, and a fresh
        probe's accuracy on its encoder."""
        res = finetune(self.backbone, self.source, self.source_budget, seed, scale=self.scale,
                       keep_model=True, evals_per_epoch=1)
        model = res.model.to(device())
        params = {f"encoder.{n}": p for n, p in model.encoder.named_parameters() if p.requires_grad}
        anchor = snapshot(params)
        fish = (diagonal_fisher(model, self.rows["source"]["train"][: self.fisher_examples],
                                self.bb.pad_id, params) if fisher else None)
        _, probe = self.read_source(model, model.head)
        return SourceModel(seed, model.cpu(), anchor, fish, res.test["accuracy"], res.seconds, probe)

    def recipe(self, source: SourceModel, reg: Regulariser) -> Recipe:
        """Stage 2 from a copy of ``source``'s model: its history has the target's cross-entropy
        and Ω of every step (as evaluations of "train"), its ``test`` is the target's, and its
        columns hold the source task before and after (old head, fresh probe), the forgetting,
        the target's accuracy and how far the encoder moved."""
        teacher = (copy.deepcopy(source.model).to(device()).eval().requires_grad_(False)
                   if reg.kind == "LwF" else None)

        def score(model: TwoHeadClassifier, _: None) -> Scored:
            after, probe = self.read_source(model, model.source_head)
            target = evaluate(model, self.loader("target", "test"), num_labels=self.target.num_labels)
            return Scored(target, {
                "method": reg.label, "regulariser": reg.kind, "strength": reg.strength,
                "source_before": source.test_accuracy, "source_accuracy": after,
                "forgetting": source.test_accuracy - after, "target_accuracy": target["accuracy"],
                "probe_before": source.probe_accuracy, "source_probe": probe,
                "moved": relative_shift(shared_parameters(model), source.anchor)})

        return Recipe(
            build=lambda _: TwoHeadClassifier(copy.deepcopy(source.model), self.target.num_labels),
            name=self.backbone, budget=self.target_budget, rows=lambda _: self.rows["target"]["train"],
            collate=lambda _: pad_collate(self.bb.pad_id),
            method=Method(loss_fn=stage_two_loss(reg, source, teacher)), score=score,
            validate=lambda _: lambda model: model.last_losses, validation_split="train",
            evaluate_every=1)

    def floors(self) -> dict[str, float]:
        """The majority-class floors of the table's accuracy columns (``stats.floor_column``)."""
        source = self.source.majority_baseline()["accuracy"]
        return {floor_column("source_accuracy"): source, floor_column("source_probe"): source,
                floor_column("target_accuracy"): self.target.majority_baseline()["accuracy"]}

    def runs(self, sources: Sequence[SourceModel], regularisers: Sequence[Regulariser],
             progress: Callable[[str], None] | None = None) -> list[Run]:
        """Every regulariser from every seed's source model (``finetuning.compare`` of
        :meth:`recipe`): one :class:`Run` each, regulariser by regulariser."""
        by_seed, start = {s.seed: s for s in sources}, time.perf_counter()
        recipes = {reg.label: lambda seed, reg=reg: self.recipe(by_seed[seed], reg)
                   for reg in regularisers}
        if len(recipes) != len(regularisers) or len(by_seed) != len(sources):
            raise ValueError("every regulariser needs its own label, every source model its seed")

        def timing(name: str, one: Run) -> dict:
            if progress and one.seed == sources[-1].seed:
                progress(f"{name}: {time.perf_counter() - start:.0f} s")
            return {}

        _, by_name = compare(recipes, list(by_seed), columns=timing)
        return [one for runs in by_name.values() for one in runs]

    def table(self, runs: Sequence[Run]) -> pd.DataFrame:
        """One row per run (``Run.row``), with the floors."""
        return pd.DataFrame([{**r.row(), **self.floors()} for r in runs])

    def run(self, sources: Sequence[SourceModel], regularisers: Sequence[Regulariser],
            progress: Callable[[str], None] | None = None) -> pd.DataFrame:
        """:meth:`runs`, as :meth:`table`."""
        return self.table(self.runs(sources, regularisers, progress))


def curves(runs: Sequence[Run]) -> pd.DataFrame:
    """Stage 2's training curves: one row per run and step with the target's cross-entropy on
    that step's batch and the penalty Ω (their sum is what was minimised)."""
    return pd.DataFrame([{"method": r.columns["method"], "seed": r.seed, "step": h["step"],
                          "cross_entropy": h.get("cross_entropy"), "penalty": h.get("penalty")}
                         for r in runs for h in r.history.evals if h["split"] == "train"])


def curve(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of forgetting and target accuracy per (regulariser, strength):
    the trade-off curve's points."""
    g = table.groupby(["regulariser", "strength"], sort=False)
    cols = [c for c in ("forgetting", "target_accuracy", "source_accuracy", "source_probe")
            if c in table]
    out = g[cols].agg(["mean", "std"])
    out.columns = [f"{a} {b}" for a, b in out.columns]
    return out.reset_index()
