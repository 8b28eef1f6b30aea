"""Evaluation on PyTorch-Ignite: evaluators with Ignite metrics, and :func:`evaluate`, the one way to
score a classifier on a loader.

* :func:`create_lm_evaluator` — token-weighted loss (nats per sub-word token), perplexity, and the
  2019 tutorial's word-level perplexity;
* :func:`logits_step` — an evaluator's step (eval mode, autocast, no gradients);
* :func:`create_classifier_evaluator` / :func:`evaluate` — accuracy, error, loss, confusion matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from ignite.engine import Engine
from ignite.metrics import Accuracy, ConfusionMatrix, Loss, MetricsLambda
from torch import nn

from .models import IGNORE_INDEX
from .runtime import autocast, autocast_dtype
from .runtime import device as default_device
from .training import Batch, to_device


def create_lm_evaluator(
    model: nn.Module,
    *,
    device: torch.device,
    amp_dtype: torch.dtype | None = None,
    words_per_token: float | None = None,
) -> Engine:
    """Evaluator with token-weighted ``loss`` (nats per sub-word token) and ``ppl`` = exp(loss).

    With ``words_per_token`` = n_words / n_tokens of the evaluated text it also reports
    ``word_ppl`` = exp(loss · n_tokens / n_words), the 2019 tutorial's conversion from sub-word
    to word-level perplexity (comparable with word-level LMs on WikiText).
    """

    @torch.no_grad()
    def step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        batch = to_device(batch, device)
        with autocast(device, amp_dtype):
            logits = model(**batch).logits
        labels = batch["labels"]
        if logits.dim() == 3:  # causal: logits for positions 0..T-2 predict labels 1..T-1
            labels = labels[:, 1:]
            logits = logits.flatten(0, 1)
            labels = labels.flatten()
        else:  # masked LM: logits already restricted to the masked positions
            labels = labels[labels != IGNORE_INDEX]
        keep = labels != IGNORE_INDEX
        return logits[keep].float(), labels[keep]

    evaluator = Engine(step)
    loss = Loss(F.cross_entropy)
    loss.attach(evaluator, "loss")
    MetricsLambda(math.exp, loss).attach(evaluator, "ppl")
    if words_per_token:
        MetricsLambda(lambda nll: math.exp(nll / words_per_token), loss).attach(
            evaluator, "word_ppl"
        )
    return evaluator


def logits_step(model: nn.Module, *, device: torch.device, amp_dtype: torch.dtype | None = None,
                **forward_kwargs: object) -> Callable[[Engine, Batch], tuple[torch.Tensor, torch.Tensor]]:
    """An evaluator's step: the model in eval mode under autocast, no gradients; returns
    ``(logits as float32, labels)`` of the batch. ``forward_kwargs`` go to the model (e.g. the
    ``head=`` of a multi-head model)."""

    @torch.no_grad()
    def step(engine: Engine, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        model.eval()
        batch = to_device(batch, device)
        labels = batch.pop("labels")
        with autocast(device, amp_dtype):
            logits = model(**batch, **forward_kwargs).logits
        return logits.float(), labels

    return step


def create_classifier_evaluator(
    model: nn.Module,
    *,
    device: torch.device,
    num_labels: int,
    amp_dtype: torch.dtype | None = None,
) -> Engine:
    """Evaluator with ``accuracy``, ``error`` (= 1 − accuracy), ``loss`` and ``confusion``."""
    evaluator = Engine(logits_step(model, device=device, amp_dtype=amp_dtype))
    acc = Accuracy()
    acc.attach(evaluator, "accuracy")
    MetricsLambda(lambda a: 1.0 - a, acc).attach(evaluator, "error")
    Loss(F.cross_entropy).attach(evaluator, "loss")
    ConfusionMatrix(num_classes=num_labels).attach(evaluator, "confusion")
    return evaluator


def evaluate(model: nn.Module, loader: object, *, num_labels: int,
             device: torch.device | None = None, amp_dtype: torch.dtype | None | str = "auto"
             ) -> dict:
    """A classifier's ``accuracy``, ``error``, ``loss`` and ``confusion`` on ``loader`` (the
    evaluator of :func:`create_classifier_evaluator`, run once)."""
    dev = device or default_device()
    amp = autocast_dtype(dev) if amp_dtype == "auto" else amp_dtype
    model.to(dev)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=num_labels, amp_dtype=amp)
    return dict(evaluator.run(loader).metrics)
