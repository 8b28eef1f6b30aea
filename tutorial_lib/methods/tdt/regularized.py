"""Regularised fine-tuning at an equal step budget: R-Drop, R3F and token cutoff (notebook 08).

Each method is a ``loss_fn(model, batch)`` for :func:`tutorial_lib.training.create_trainer`,
packaged as the keyword arguments of :func:`tutorial_lib.finetuning.finetune` (so
``finetuning.compare_methods`` runs them next to plain fine-tuning with the same epochs, batch
size, learning rate and seeds — the same number of optimiser steps). They differ only in the
extra forward passes and the consistency term they add to the cross-entropy:

==============  ===================================================================  ==========
method          loss (p = softmax of the logits, KL per example, averaged)            passes
==============  ===================================================================  ==========
fine-tuning     CE(p, y)                                                               1
R-Drop          ½[CE(p₁,y) + CE(p₂,y)] + α·½[KL(p₁‖p₂) + KL(p₂‖p₁)], two dropout masks  2
R3F             CE(p,y) + λ·½[KL(p‖p_z) + KL(p_z‖p)], p_z: embeddings + noise z ~ U(±ε)   2
token cutoff    CE(p,y) + w_ce·CE(p_c,y) + w_js·JS(p, p_c), p_c: some token vectors → 0   2
==============  ===================================================================  ==========

(Liang et al. 2021; Aghajanyan et al. 2020; Shen et al. 2020.) Extra passes run as one forward
of a 2B-row batch. Every KL here is **per example, summed over classes, averaged over the batch**
("batchmean"). The reference codes reduce differently — R-Drop sums over the batch as well, TDT
averages over classes too — so their weights do not carry over one to one (see
``tdt.from_upstream_kl_rate``).

Perturbations act on the **output of the embedding layer** (token + position embeddings after
LayerNorm/dropout; the vectors TDT perturbs too), through a forward hook (:func:`perturb_embeddings`)
that works for any :class:`~tutorial_lib.models.SequenceClassifier` (ours or a BERT-style
Hugging Face encoder). They never touch padding or the [CLS] token
(:func:`content_mask`): ours sits *after* the last real token, BERT's at position 0 (its final
[SEP] is kept too). Only classification heads are supported: a regression head (STS-B) is refused
with :class:`RegressionNotSupported` rather than silently reduced to its MSE.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from ignite.engine import Engine, Events
from torch import nn
from torch.utils.data import DataLoader

from ...anatomy import anatomy
from ...backbones import Backbone
from ...evaluation import evaluate
from ...finetuning import method_and_run
from ...stats import floor_column
from ...tasks import Task, load_task, subsample
from ...training import Batch, Method, eval_loader, pad_collate

# --- shared pieces -----------------------------------------------------------------------------


class RegressionNotSupported(ValueError):
    """A consistency loss between predicted *distributions* needs a classification head."""


def check_classifier(model: nn.Module, method: str) -> None:
    """Refuse regression heads (one output) clearly; the upstream TDT code silently turned itself
    off for STS-B (a log-softmax over one logit is 0, so every KL term vanished)."""
    if getattr(model, "num_labels", 2) < 2:
        raise RegressionNotSupported(
            f"{method} compares predicted class distributions and needs a classification head "
            f"with ≥ 2 labels; this model has num_labels={model.num_labels} (regression, e.g. "
            "STS-B). Use plain fine-tuning, or recast the task as classification (bins)."
        )


def check_labels(labels: torch.Tensor, method: str) -> None:
    if labels.is_floating_point():
        raise RegressionNotSupported(f"{method} needs integer class labels, got {labels.dtype} "
                                     "(a regression target such as STS-B's similarity)")


def embedding_output_module(model: nn.Module) -> nn.Module:
    """The module whose output is the embedding layer's output e (shape [B, T, H]): BERT's
    LayerNorm + dropout of word + position + type, our dropout of tok_emb + pos_emb."""
    try:
        return anatomy(model).embedding_output
    except TypeError as err:
        raise TypeError(f"perturbing embeddings is implemented for a SequenceClassifier on our "
                        f"Transformer or a BERT-style encoder, not {type(model).__name__}") from err


def content_mask(model: nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """True at the positions a perturbation may touch: real tokens except [CLS] (and BERT's
    final [SEP]). Padding is never content. Shape [B, T], bool."""
    real = attention_mask.bool()
    idx = torch.arange(real.size(1), device=real.device)
    last = real.long().sum(1, keepdim=True) - 1
    special = idx[None, :] == last  # ours: [CLS] is the last real token; BERT: the final [SEP]
    if model.pool == "first":
        special = special | (idx[None, :] == 0)  # BERT's [CLS] at position 0
    return real & ~special


@contextlib.contextmanager
def perturb_embeddings(
    model: nn.Module, fn: Callable[[torch.Tensor], torch.Tensor]
) -> Iterator[None]:
    """Inside the block, every forward replaces the embedding output e by ``fn(e)``."""
    handle = embedding_output_module(model).register_forward_hook(
        lambda _module, _inputs, out: fn(out)
    )
    try:
        yield
    finally:
        handle.remove()


def repeat_batch(batch: Batch, times: int) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask stacked ``times`` times along the batch (one forward)."""
    return batch["input_ids"].repeat(times, 1), batch["attention_mask"].repeat(times, 1)


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(logits.float(), dim=-1)


def kl_per_example(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p‖q) = Σ_c p_c (log p_c − log q_c) for each row; [B]. Both arguments are log-probs and
    gradients flow into both (nothing is detached, as in R-Drop and TDT)."""
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def symmetric_kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """½[KL(p‖q) + KL(q‖p)] averaged over the batch (a scalar); 0 iff p = q."""
    return 0.5 * (kl_per_example(log_p, log_q) + kl_per_example(log_q, log_p)).mean()


def js_divergence(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon: ½KL(p‖m) + ½KL(q‖m), m = (p + q)/2, averaged over the batch."""
    log_m = torch.logsumexp(torch.stack([log_p, log_q]), dim=0) - torch.log(torch.tensor(2.0))
    return 0.5 * (kl_per_example(log_p, log_m) + kl_per_example(log_q, log_m)).mean()


# --- the methods -------------------------------------------------------------------------------


def rdrop_loss(model: nn.Module, batch: Batch, alpha: float = 1.0) -> torch.Tensor:
    """R-Drop: the same batch twice (two dropout masks), mean CE + α · symmetric KL."""
    labels = batch["labels"]
    check_labels(labels, "R-Drop")
    ids, mask = repeat_batch(batch, 2)
    l1, l2 = model(ids, mask).logits.chunk(2)
    ce = 0.5 * (F.cross_entropy(l1.float(), labels) + F.cross_entropy(l2.float(), labels))
    return ce + alpha * symmetric_kl(log_probs(l1), log_probs(l2))


def embedding_noise(e: torch.Tensor, content: torch.Tensor, eps: float,
                    noise: str = "uniform") -> torch.Tensor:
    """R3F's noise z for e [B, T, H]: U(−ε, ε) or N(0, ε²) at content tokens, 0 elsewhere.
    ``content``: [B, T] or [B, T, 1]."""
    z = (torch.rand_like(e) * 2 - 1) * eps if noise == "uniform" else torch.randn_like(e) * eps
    keep = content if content.dim() == 3 else content[..., None]
    return z * keep


def r3f_loss(model: nn.Module, batch: Batch, lam: float = 1.0, eps: float = 1e-5,
             noise: str = "uniform") -> torch.Tensor:
    """R3F: CE on the clean pass + λ · symmetric KL to a pass with noise on the token vectors."""
    labels = batch["labels"]
    check_labels(labels, "R3F")
    ids, mask = repeat_batch(batch, 2)
    B = labels.size(0)
    content = content_mask(model, batch["attention_mask"])[..., None]

    def add_noise(e: torch.Tensor) -> torch.Tensor:
        return torch.cat([e[:B], e[B:] + embedding_noise(e[B:], content, eps, noise)])

    with perturb_embeddings(model, add_noise):
        clean, noisy = model(ids, mask).logits.chunk(2)
    return F.cross_entropy(clean.float(), labels) + lam * symmetric_kl(log_probs(clean),
                                                                       log_probs(noisy))


def cutoff_positions(content: torch.Tensor, ratio: float) -> torch.Tensor:
    """A random ``ratio`` of each row's content tokens (at least one if it has two or more)."""
    n = content.long().sum(1, keepdim=True)
    k = torch.where(n >= 2, (ratio * n).floor().clamp(min=1), torch.zeros_like(n))
    scores = torch.rand(content.shape, device=content.device).masked_fill(~content, 2.0)
    rank = scores.argsort(1).argsort(1)  # 0 = the smallest score in the row
    return (rank < k) & content


def cutoff_loss(model: nn.Module, batch: Batch, ratio: float = 0.1, ce_weight: float = 1.0,
                js_weight: float = 1.0) -> torch.Tensor:
    """Token cutoff: a second view with ``ratio`` of the token vectors zeroed; CE on both + JS."""
    labels = batch["labels"]
    check_labels(labels, "token cutoff")
    ids, mask = repeat_batch(batch, 2)
    B = labels.size(0)
    cut = cutoff_positions(content_mask(model, batch["attention_mask"]), ratio)[..., None]

    def apply_cutoff(e: torch.Tensor) -> torch.Tensor:
        return torch.cat([e[:B], e[B:].masked_fill(cut, 0.0)])

    with perturb_embeddings(model, apply_cutoff):
        clean, aug = model(ids, mask).logits.chunk(2)
    return (F.cross_entropy(clean.float(), labels) + ce_weight * F.cross_entropy(aug.float(), labels)
            + js_weight * js_divergence(log_probs(clean), log_probs(aug)))


def _refuse_regression(method: str) -> Callable[[nn.Module], None]:
    return lambda model: check_classifier(model, method)


def rdrop(alpha: float = 1.0) -> Method:
    """R-Drop with weight α, as a :class:`~tutorial_lib.training.Method`."""
    return Method(prepare=_refuse_regression("R-Drop"),
                  loss_fn=lambda model, batch: rdrop_loss(model, batch, alpha))


def r3f(lam: float = 1.0, eps: float = 1e-5, noise: str = "uniform") -> Method:
    """R3F (noise ``"uniform"`` U(−ε, ε) or ``"normal"``), as a Method."""
    if noise not in ("uniform", "normal"):
        raise ValueError(f"noise must be 'uniform' or 'normal', got {noise!r}")
    return Method(prepare=_refuse_regression("R3F"),
                  loss_fn=lambda model, batch: r3f_loss(model, batch, lam, eps, noise))


def cutoff(ratio: float = 0.1, ce_weight: float = 1.0, js_weight: float = 1.0) -> Method:
    """Token cutoff, as a Method."""
    return Method(prepare=_refuse_regression("token cutoff"),
                  loss_fn=lambda model, batch: cutoff_loss(model, batch, ratio, ce_weight, js_weight))


# --- evaluation on other tasks (transfer sets) ------------------------------------------------


def encoded_loader(texts: Sequence[str], labels: Sequence[int], encode, pad_id: int,
                   batch_size: int = 128) -> DataLoader:
    """A padded evaluation loader for raw texts (e.g. another task's test split), shortest first."""
    rows = [{"input_ids": i, "labels": y} for i, y in zip(encode(list(texts)), labels)]
    return eval_loader(rows, batch_size, pad_collate(pad_id))


class TransferEvaluation:
    """``on_trainer`` hook: when training ends, evaluate the model on held-out *other* tasks
    (never seen in training, never used to select anything) and keep the last model per method.

    ``sets`` maps a name to a loader (see :func:`encoded_loader`) whose labels use the training
    task's label ids. ``records`` gets one dict per run, in run order.
    """

    def __init__(self, sets: Mapping[str, DataLoader], num_labels: int):
        self.sets, self.num_labels = dict(sets), num_labels
        self.records: list[dict] = []
        self.model: nn.Module | None = None

    def __call__(self, trainer: Engine, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        @trainer.on(Events.COMPLETED)
        def _evaluate(_: Engine) -> None:
            self.records.append({
                f"{name}_error": evaluate(model, loader, num_labels=self.num_labels)["error"]
                for name, loader in self.sets.items()})
            self.model = model


def with_transfer(methods: Mapping[str, Method | Mapping[str, object]], num_labels: int,
                  transfer_sets: Mapping[str, DataLoader]) -> tuple[dict[str, Method], dict]:
    """Each method plus a :class:`TransferEvaluation` handler (the error on each transfer set
    after training, columns ``<name>_error``). Returns (wired methods, evaluation per method);
    pass the first to ``finetuning.compare_methods`` and add :func:`transfer_columns`."""
    hooks = {name: TransferEvaluation(transfer_sets, num_labels) for name in methods}
    wired = {}
    for name, spec in methods.items():
        method, run = method_and_run(spec)
        wired[name] = {**run, "method": method.with_handlers(hooks[name])} if run else \
            method.with_handlers(hooks[name])
    return wired, hooks


def majority_error(loader: DataLoader) -> float:
    """The error of the best constant guess on ``loader``'s labels (1 − the majority-class rate of
    that very set): the floor of a transfer set, which the training task's majority label may not
    even reach on another domain."""
    labels = torch.cat([batch["labels"].reshape(-1) for batch in loader])
    return 1.0 - torch.bincount(labels).max().item() / len(labels)


def transfer_columns(table: pd.DataFrame, hooks: Mapping[str, TransferEvaluation]) -> pd.DataFrame:
    """``table`` (one row per run, methods in the order of ``hooks``) with the transfer errors
    ``<name>_error`` and their floors ``<name>_error_floor`` (:func:`majority_error`, which
    ``stats.compare`` reads to guard each transfer comparison)."""
    extra = pd.DataFrame([r for h in hooks.values() for r in h.records], index=table.index)
    sets = next(iter(hooks.values())).sets if hooks else {}
    for name, loader in sets.items():
        extra[floor_column(f"{name}_error")] = majority_error(loader)
    return pd.concat([table, extra], axis=1)


def transfer_sets(names: Sequence[str], backbone: Backbone, task: Task, limit: int | None = None,
                  batch_size: int = 128) -> dict[str, DataLoader]:
    """Evaluation loaders for the *test* splits of other tasks with the label names of ``task``
    (e.g. MR and CR for a model trained on SST-2); ``limit``: a fixed random subset (None = all)."""
    loaders = {}
    for name in names:
        other = load_task(name)
        if list(other.label_names) != list(task.label_names):
            raise ValueError(f"{name} labels {other.label_names} differ from {task.label_names}")
        test = subsample(other.test, limit)
        loaders[name] = encoded_loader(test["text"], test["label"], backbone.encode,
                                       backbone.pad_id, batch_size)
    return loaders


PASSES_PER_STEP = {"fine-tuning": 1, "R-Drop": 2, "token cutoff": 2, "R3F": 2, "TDT": 3}
"""Forward (and backward) passes per training step of each method: its cost at equal steps."""
