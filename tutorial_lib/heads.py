"""One shared encoder, any number of named task heads, and adversarial heads (notebook 11).

A :class:`MultiHeadModel` wraps an encoder (our :class:`~tutorial_lib.models.Transformer` or a
Hugging Face encoder) and a dict of :class:`TaskHead`, each described by a :class:`HeadConfig`:

* ``level="sequence"``: a linear head on the pooled [CLS] state (ours: the [CLS] appended at the
  *end*, ``pool="last"``; BERT-style encoders: position 0, ``pool="first"``);
* ``level="token"``: a linear head on every position (labels = IGNORE_INDEX where there is none);
* ``level="lm"``: a language-modelling head tied to the encoder's word embeddings (Radford et al.
  2018's auxiliary LM loss, the 2019 tutorial's hands-on #6). With a causal encoder each position
  predicts the next token of the input (padding and [CLS] are never targets); with a
  bidirectional one the batch must bring masked inputs and ``labels`` from
  ``training.mask_tokens``;
* ``num_labels=1`` on a sequence head: regression (STS-B) with a mean-squared-error loss;
* ``loss_weight``: the head's weight in the summed loss;
* ``hidden=h`` on a sequence or token head: an MLP head (one hidden layer of width h, GELU) in
  place of the linear one — e.g. a stronger adversary (notebook 12);
* ``reverse_gradient=True`` with strength λ: a **gradient-reversal layer** (Ganin & Lempitsky
  2015) sits between encoder and head. Forward it is the identity; backward it multiplies the
  gradient by −λ. The head still minimises its loss (it learns to read the property), while the
  encoder receives −λ × that gradient and so *maximises* the head's loss: it learns to hide the
  property. This is the "adversarial/amnesic head" asked for in huggingface/transformers#9992.
  The layer goes *before* the head, never after it: reversing the gradient of the loss itself
  would turn the head's own training into ascent (and blows up, pytorch-revgrad issue #5).

Batches for several heads travel as one flat dict with keys ``"<head>/<field>"``
(:func:`merge_batches`), so they fit the single-batch Ignite trainer of
:mod:`tutorial_lib.training`; :class:`MultiTaskLoader` zips a main loader with cycling
auxiliary loaders, and :meth:`MultiHeadModel.loss` sums the weighted head losses. Heads that read
the *same* input (classification + LM on one sentence) share plain ``input_ids`` /
``attention_mask`` keys and only their labels are prefixed (``"trec/labels"``, ``"lm/labels"``):
the encoder then runs once for all of them. (:mod:`tutorial_lib.methods.multitask.multitask` samples one
task per
step instead.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .backbones import default_pool, is_causal
from .models import IGNORE_INDEX, POOLS, Output, pool_hidden, sequence_loss

LEVELS = ("sequence", "token", "lm")


class GradientReversal(torch.autograd.Function):
    """y = x forward; dL/dx = −λ · dL/dy backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, lambda_: float) -> torch.Tensor:
        ctx.lambda_ = float(lambda_)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.lambda_ * grad_output, None


def reverse_gradient(x: torch.Tensor, lambda_: float = 1.0) -> torch.Tensor:
    """Apply the gradient-reversal function with strength ``lambda_``."""
    return GradientReversal.apply(x, lambda_)


class GradientReversalLayer(nn.Module):
    """Module form of :func:`reverse_gradient`; ``lambda_`` may be changed during training."""

    def __init__(self, lambda_: float = 1.0):
        super().__init__()
        self.lambda_ = lambda_

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reverse_gradient(x, self.lambda_)

    def extra_repr(self) -> str:
        return f"lambda_={self.lambda_}"


def dann_lambda(progress: float, lambda_max: float = 1.0, gamma: float = 10.0) -> float:
    """The DANN warm-up of λ over training progress p ∈ [0, 1]: λ_max·(2/(1+e^(−γp)) − 1).

    (Ganin & Lempitsky 2015; the constant γ = 10 is as recalled, not checked against the paper.)
    """
    return lambda_max * (2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0)


@dataclass
class HeadConfig:
    """One task head: its label count, level, loss weight and (optional) gradient reversal."""

    num_labels: int  # 1 on a sequence head = regression; ignored by an "lm" head
    level: str = "sequence"  # "sequence" (pooled [CLS]), "token" or "lm"
    loss_weight: float = 1.0
    reverse_gradient: bool = False
    lambda_: float = 1.0
    dropout: float = 0.1
    hidden: int = 0  # > 0: an MLP head with one hidden layer of this width; 0: linear

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")
        if self.hidden < 0 or (self.hidden and self.level == "lm"):
            raise ValueError(f"hidden must be ≥ 0, and 0 on an lm head (tied to the embeddings): "
                             f"got {self.hidden} on a {self.level!r} head")

    @property
    def is_regression(self) -> bool:
        return self.level == "sequence" and self.num_labels == 1


class TaskHead(nn.Module):
    """[gradient reversal →] dropout → [linear → GELU, with ``cfg.hidden``] → linear."""

    def __init__(self, hidden_size: int, cfg: HeadConfig):
        super().__init__()
        self.cfg = cfg
        self.grl = GradientReversalLayer(cfg.lambda_) if cfg.reverse_gradient else nn.Identity()
        self.dropout = nn.Dropout(cfg.dropout)
        self.mlp = (nn.Sequential(nn.Linear(hidden_size, cfg.hidden), nn.GELU()) if cfg.hidden
                    else nn.Identity())
        self.linear = nn.Linear(cfg.hidden or hidden_size, cfg.num_labels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """A fresh head: the output layer N(0, 0.02) with zero bias, a hidden layer at PyTorch's
        default initialisation."""
        if self.cfg.hidden:
            self.mlp[0].reset_parameters()
        nn.init.normal_(self.linear.weight, std=0.02)
        nn.init.zeros_(self.linear.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(self.mlp(self.dropout(self.grl(features))))


class LMHead(nn.Module):
    """[gradient reversal →] logits over the vocabulary with the encoder's word embeddings (tied)."""

    def __init__(self, embeddings: nn.Embedding, cfg: HeadConfig):
        super().__init__()
        self.cfg = cfg
        self.grl = GradientReversalLayer(cfg.lambda_) if cfg.reverse_gradient else nn.Identity()
        self.embeddings = [embeddings]  # a list: not registered twice as a submodule
        self.bias = nn.Parameter(torch.zeros(embeddings.num_embeddings))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.grl(hidden), self.embeddings[0].weight, self.bias)


def causal_lm_targets(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      ignore_ids: Iterable[int] = ()) -> torch.Tensor:
    """Next-token targets for every position: ``targets[:, t] = input_ids[:, t + 1]``, with
    IGNORE_INDEX at the last position, after it (padding) and where the target is in
    ``ignore_ids`` (e.g. [CLS])."""
    targets = torch.full_like(input_ids, IGNORE_INDEX)
    targets[:, :-1] = input_ids[:, 1:]
    valid = torch.zeros_like(attention_mask, dtype=torch.bool)
    valid[:, :-1] = attention_mask[:, 1:].bool()
    for i in ignore_ids:
        valid &= targets != i
    return targets.masked_fill(~valid, IGNORE_INDEX)


class MultiHeadModel(nn.Module):
    """A shared encoder with named heads (see the module docstring)."""

    def __init__(
        self, encoder: nn.Module, heads: Mapping[str, HeadConfig], pool: str | None = None
    ):
        super().__init__()
        self.encoder = encoder
        self.pool = pool or default_pool(encoder)  # the rule of backbones.Backbone.pool
        if self.pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {self.pool!r}")
        d = encoder.config.hidden_size
        self.heads = nn.ModuleDict({
            name: LMHead(encoder.get_input_embeddings(), cfg) if cfg.level == "lm" else TaskHead(d, cfg)
            for name, cfg in heads.items()})
        self.last_losses: dict[str, float] = {}
        self.cls_token_id: int | None = None  # set it to keep [CLS] out of causal LM targets

    def set_lambda(self, head: str, lambda_: float) -> None:
        """Change the reversal strength of an adversarial head (e.g. on a schedule)."""
        grl = self.heads[head].grl
        if not isinstance(grl, GradientReversalLayer):
            raise ValueError(f"head {head!r} has no gradient reversal")
        grl.lambda_ = lambda_

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def pooled(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return pool_hidden(hidden, attention_mask, self.pool)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        head: str,
        labels: torch.Tensor | None = None,
        hidden: torch.Tensor | None = None,
    ) -> Output:
        """Logits of one head (and its *unweighted* loss when ``labels`` are given; a causal
        "lm" head makes its own targets from ``input_ids``). ``hidden``: reuse an encoding."""
        module = self.heads[head]
        if hidden is None:
            hidden = self.encode(input_ids, attention_mask)
        cfg = module.cfg
        if cfg.level == "sequence":
            logits = module(self.pooled(hidden, attention_mask))
        else:
            logits = module(hidden)
        if cfg.level == "lm" and labels is None and is_causal(self.encoder):
            ignore = () if self.cls_token_id is None else (self.cls_token_id,)
            labels = causal_lm_targets(input_ids, attention_mask, ignore)
        if labels is None:
            return Output(logits)
        if cfg.level == "sequence":
            loss = sequence_loss(logits, labels)  # regression (MSE) with one output
        else:
            loss = F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(),
                                   ignore_index=IGNORE_INDEX)
        return Output(logits, loss)

    def loss(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Σ_heads loss_weight · loss over the heads present in a merged batch.

        Heads without their own ``input_ids`` read the shared (unprefixed) input, encoded once.
        The per-head losses of the last call are kept in ``last_losses`` for logging.
        """
        total = None
        self.last_losses = {}
        shared = {k: v for k, v in batch.items() if "/" not in k}
        shared_hidden = None
        for name, part in split_batch({k: v for k, v in batch.items() if "/" in k}).items():
            if name not in self.heads:
                raise ValueError(f"batch has data for head {name!r}; heads: {list(self.heads)}")
            hidden = None
            if "input_ids" not in part:
                if "input_ids" not in shared:
                    raise ValueError(f"head {name!r} has no input_ids and there is no shared input")
                part = {**shared, **part}
                if shared_hidden is None:
                    shared_hidden = self.encode(shared["input_ids"], shared["attention_mask"])
                hidden = shared_hidden
            out = self(part["input_ids"], part["attention_mask"], head=name,
                       labels=part.get("labels"), hidden=hidden)
            self.last_losses[name] = float(out.loss.detach())
            weighted = self.heads[name].cfg.loss_weight * out.loss
            total = weighted if total is None else total + weighted
        if total is None:
            raise ValueError("the batch holds no head's data (keys must look like 'head/field')")
        return total


def merge_batches(batches: Mapping[str, Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``{"trec": {"input_ids": ...}}`` → ``{"trec/input_ids": ...}``."""
    return {f"{head}/{k}": v for head, b in batches.items() for k, v in b.items()}


def split_batch(flat: Mapping[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """Inverse of :func:`merge_batches`."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in flat.items():
        head, _, field_ = key.partition("/")
        out.setdefault(head, {})[field_] = value
    return out


def multihead_loss(model: MultiHeadModel, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """``loss_fn`` for :func:`tutorial_lib.training.create_trainer`."""
    return model.loss(batch)


class MultiTaskLoader:
    """One pass over ``loaders[main]``; every step also takes the next batch of each other loader
    (restarted, hence reshuffled, when it runs out). Yields merged batches; ``len`` = main's."""

    def __init__(self, loaders: Mapping[str, Iterable], main: str):
        if main not in loaders:
            raise ValueError(f"main loader {main!r} not among {list(loaders)}")
        self.loaders, self.main = dict(loaders), main

    def __len__(self) -> int:
        return len(self.loaders[self.main])

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        others = {k: iter(v) for k, v in self.loaders.items() if k != self.main}
        for main_batch in self.loaders[self.main]:
            parts = {self.main: main_batch}
            for name in others:
                try:
                    parts[name] = next(others[name])
                except StopIteration:
                    others[name] = iter(self.loaders[name])
                    parts[name] = next(others[name])
            yield merge_batches(parts)
