"""Catastrophic forgetting in sequential transfer, and three regularisers against it (notebook 13).

The experiment: fine-tune an encoder on a **source** task (stage 1), then give it a new head and
fine-tune it on a **target** task (stage 2). The source head is kept, frozen, on the same encoder,
so the source task can be scored after stage 2: what it lost is the *forgetting*. During stage 2
a regulariser Ω is added to the target's cross-entropy (as a ``loss_fn`` of the one recipe,
:func:`tutorial_lib.training.fit`):

==============  ==============================================================================
regulariser     Ω (w_S: the shared encoder's trained weights, w_new: the new head's)
==============  ==============================================================================
weight decay    α/2 ‖w_S‖² + β/2 ‖w_new‖²                 (towards zero: what the others replace)
L2-SP           α/2 ‖w_S − w_S⁰‖² + β/2 ‖w_new‖²          (Li, Grandvalet & Davoine 2018)
EWC             λ/2 Σ_i F_i (w_i − w_i⁰)²                 (Kirkpatrick et al. 2017)
LwF-style       λ · T² · KL(p_src⁰(x)/T ‖ p_src(x)/T)     (Li & Hoiem 2016, on target inputs x)
==============  ==============================================================================

w⁰ are the weights after stage 1 (the source model), F the diagonal Fisher information of the
source task at w⁰ (:func:`diagonal_fisher`), by default divided by its mean so that λ is on the
same scale as L2-SP's α (EWC with every F_i = 1 *is* L2-SP without β). LwF's term pulls the
source head's predictions on the target's inputs towards those of the frozen stage-1 model (the
distillation loss of :mod:`tutorial_lib.methods.forgetting.distillation`); in the paper the old head trains
too, here it stays frozen for every method. AdamW's own (decoupled) weight decay is off in
stage 2 for all of them (the budget says 0): the decay lives in Ω, so strength 0 is plain
fine-tuning for every regulariser.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from ...backbones import Backbone, load_backbone
from ...config import Scale
from ...evaluation import evaluate
from ...finetuning import finetune
from ...models import Output, SequenceClassifier, sequence_loss
from ...runtime import device, seed_everything
from ...settings import Budget
from ...stats import floor_column
from ...tasks import Task
from ...training import Batch, Method, eval_loader, fit_with, pad_collate, resumable_loader
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
    for name, w in params.items():
        diff = w if anchor is None else w - anchor[name]
        sq = diff.pow(2) if importance is None else importance[name] * diff.pow(2)
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
    with torch.no_grad():
        old = teacher(batch["input_ids"], batch["attention_mask"]).logits.float()
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


def stage_two_loss(model: TwoHeadClassifier, reg: Regulariser, source: SourceModel,
                   teacher: nn.Module | None = None) -> Callable[[nn.Module, Batch], torch.Tensor]:
    """The target's cross-entropy + Ω of ``reg``, as a ``loss_fn`` for :func:`training.fit`."""

    def loss_fn(m: nn.Module, batch: Batch) -> torch.Tensor:
        target_logits, source_logits = model.both(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(target_logits.float(), batch["labels"])
        if reg.kind == "weight decay":
            loss = loss + l2sp_penalty(model, None, reg.strength, reg.beta)
        elif reg.kind == "L2-SP":
            loss = loss + l2sp_penalty(model, source.anchor, reg.strength, reg.beta)
        elif reg.kind == "EWC":
            loss = loss + ewc_penalty(model, source.anchor, source.fisher, reg.strength)
        elif reg.kind == "LwF":
            loss = loss + lwf_term(model, source_logits, batch, teacher, reg.strength,
                                   reg.temperature)
        return loss

    return loss_fn


# --- the experiment -------------------------------------------------------------------------


@dataclass
class SequentialTransfer:
    """Source → target on one backbone: the tasks encoded once, stage 1 per seed
    (:meth:`source_stage`, through ``finetuning.finetune``), stage 2 per seed and regulariser
    (:meth:`target_stage`, through ``training.fit``), one row each (:meth:`run`)."""

    scale: Scale
    backbone: str
    source: Task
    target: Task
    source_budget: Budget
    target_budget: Budget
    fisher_examples: int = 200
    bb: Backbone = field(init=False, repr=False)

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

    def source_stage(self, seed: int, fisher: bool = True) -> SourceModel:
        """Fine-tune on the source task (the one recipe via ``finetune``); the anchor w⁰ and the
        source task's diagonal Fisher on ``fisher_examples`` of its training rows."""
        res = finetune(self.backbone, self.source, self.source_budget, seed, scale=self.scale,
                       keep_model=True, evals_per_epoch=1)
        model = res.model.to(device())
        anchor = {f"encoder.{n}": p.detach().clone() for n, p in model.encoder.named_parameters()
                  if p.requires_grad}
        params = {f"encoder.{n}": p for n, p in model.encoder.named_parameters() if p.requires_grad}
        fish = (diagonal_fisher(model, self.rows["source"]["train"][: self.fisher_examples],
                                self.bb.pad_id, params) if fisher else None)
        return SourceModel(seed, model.cpu(), anchor, fish, res.test["accuracy"], res.seconds)

    def target_stage(self, source: SourceModel, reg: Regulariser, seed: int) -> dict:
        """Stage 2 from a copy of ``source``'s model; one row: the source task's accuracy after
        it (and before), the target's, the forgetting and the time."""
        seed_everything(seed)
        stage1 = copy.deepcopy(source.model).to(device())
        model = TwoHeadClassifier(copy.deepcopy(stage1), self.target.num_labels).to(device())
        teacher = stage1.eval().requires_grad_(False) if reg.kind == "LwF" else None
        b = self.target_budget
        train = resumable_loader(self.rows["target"]["train"], seed=seed, batch_size=b.batch_size,
                                 collate_fn=pad_collate(self.bb.pad_id),
                                 group_by_length=b.group_by_length)
        run = fit_with(model, train, b,
                       method=Method(loss_fn=stage_two_loss(model, reg, source, teacher)))
        after = evaluate(model.source_view(), self.loader("source", "test"),
                         num_labels=self.source.num_labels)["accuracy"]
        target = evaluate(model, self.loader("target", "test"),
                          num_labels=self.target.num_labels)["accuracy"]
        return {"method": reg.label, "regulariser": reg.kind, "strength": reg.strength,
                "seed": seed, "source_before": source.test_accuracy, "source_accuracy": after,
                "forgetting": source.test_accuracy - after, "target_accuracy": target,
                "seconds": run.seconds}

    def floors(self) -> dict[str, float]:
        """The majority-class floors of the table's accuracy columns (``stats.floor_column``)."""
        return {floor_column("source_accuracy"): self.source.majority_baseline()["accuracy"],
                floor_column("target_accuracy"): self.target.majority_baseline()["accuracy"]}

    def run(self, sources: Sequence[SourceModel], regularisers: Sequence[Regulariser],
            progress: Callable[[str], None] | None = None) -> pd.DataFrame:
        """Every regulariser from every seed's source model: one row per run, with the floors."""
        rows = []
        start = time.perf_counter()
        for reg in regularisers:
            for src in sources:
                rows.append({**self.target_stage(src, reg, src.seed), **self.floors()})
            if progress:
                progress(f"{reg.label}: {time.perf_counter() - start:.0f} s")
        return pd.DataFrame(rows)


def curve(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of forgetting and target accuracy per (regulariser, strength):
    the trade-off curve's points."""
    g = table.groupby(["regulariser", "strength"], sort=False)
    out = g[["forgetting", "target_accuracy", "source_accuracy"]].agg(["mean", "std"])
    out.columns = [f"{a} {b}" for a, b in out.columns]
    return out.reset_index()
