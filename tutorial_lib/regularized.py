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
that works for our :class:`~tutorial_lib.models.TransformerClassifier` and for
:class:`~tutorial_lib.hf_models.HFClassifier`. They never touch padding or the [CLS] token
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

from .hf_models import HFClassifier
from .models import TransformerClassifier
from .training import Batch, create_classifier_evaluator

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
    """The module whose output is the embedding layer's output e (shape [B, T, H])."""
    if isinstance(model, TransformerClassifier):
        return model.transformer.drop  # dropout(tok_emb + pos_emb), used once in Transformer
    if isinstance(model, HFClassifier):
        return model.encoder.embeddings  # BERT: LayerNorm + dropout of word + position + type
    raise TypeError(f"perturbing embeddings is implemented for TransformerClassifier and "
                    f"HFClassifier, not {type(model).__name__}")


def content_mask(model: nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """True at the positions a perturbation may touch: real tokens except [CLS] (and BERT's
    final [SEP]). Padding is never content. Shape [B, T], bool."""
    real = attention_mask.bool()
    idx = torch.arange(real.size(1), device=real.device)
    last = real.long().sum(1, keepdim=True) - 1
    special = idx[None, :] == last  # ours: [CLS] is the last real token; BERT: the final [SEP]
    if isinstance(model, HFClassifier):
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


def rdrop(alpha: float = 1.0) -> dict:
    """``finetune`` keyword arguments for R-Drop with weight α."""
    return {"prepare": _refuse_regression("R-Drop"),
            "loss_fn": lambda model, batch: rdrop_loss(model, batch, alpha)}


def r3f(lam: float = 1.0, eps: float = 1e-5, noise: str = "uniform") -> dict:
    """``finetune`` keyword arguments for R3F (noise ``"uniform"`` U(−ε, ε) or ``"normal"``)."""
    if noise not in ("uniform", "normal"):
        raise ValueError(f"noise must be 'uniform' or 'normal', got {noise!r}")
    return {"prepare": _refuse_regression("R3F"),
            "loss_fn": lambda model, batch: r3f_loss(model, batch, lam, eps, noise)}


def cutoff(ratio: float = 0.1, ce_weight: float = 1.0, js_weight: float = 1.0) -> dict:
    """``finetune`` keyword arguments for token cutoff."""
    return {"prepare": _refuse_regression("token cutoff"),
            "loss_fn": lambda model, batch: cutoff_loss(model, batch, ratio, ce_weight, js_weight)}


# --- tasks: GLUE protocol, sentence pairs, transfer sets -------------------------------------------

PAIR_COLUMNS = {"rte": ("sentence1", "sentence2"), "mrpc": ("sentence1", "sentence2")}
SEP = " [SEP] "  # our tokenizer and BERT's both know [SEP] as a special token


def load_task(name: str, scale, seed: int = 0, *, train_examples: int | None = None,
              validation_examples: int | None = None):
    """A :class:`~tutorial_lib.finetuning.Task` for a single-sentence or sentence-pair task.

    GLUE's test labels are hidden, so for GLUE tasks (sst2, cola, rte, mrpc) the labelled GLUE
    **dev set is our test split** (touched once, at the end) and the validation split is carved
    from train (10%, by ``seed``), then capped at ``validation_examples``. Pairs become one text
    "s1 [SEP] s2" (for BERT tokenizers this is exactly the [CLS] s1 [SEP] s2 [SEP] input, less the
    segment ids, which our classifiers do not use). Other tasks: ``finetuning.load_task``.
    """
    from dataclasses import replace

    from . import data, finetuning

    glue = name in PAIR_COLUMNS or name in ("sst2", "cola")
    if not glue:
        task = finetuning.load_task(name, scale, seed)
    else:
        raw = data.load(name, validation_fraction=0.0)
        split = raw["train"].train_test_split(test_size=0.1, seed=seed, stratify_by_column="label")
        train, validation, test = split["train"], split["test"], raw["validation"]
        if name in PAIR_COLUMNS:
            a, b = PAIR_COLUMNS[name]
            join = lambda batch: {"text": [x + SEP + y for x, y in zip(batch[a], batch[b])]}
            train, validation, test = (s.map(join, batched=True) for s in (train, validation, test))
            text = "text"
        else:
            text = "sentence"
        limit = scale.finetune.max_train_examples
        if limit and len(train) > limit:
            train = train.shuffle(seed=seed).select(range(limit))
        cap = scale.finetune.max_eval_examples  # smoke scale only
        if cap:
            validation, test = (s.select(range(min(cap, len(s)))) for s in (validation, test))
        task = finetuning.Task(name, train, validation, test, text, "label",
                               list(raw["train"].features["label"].names))
    if validation_examples and len(task.validation) > validation_examples:
        task = replace(task, validation=task.validation.shuffle(seed=seed)
                       .select(range(validation_examples)))
    return finetuning.with_train_subset(task, train_examples, seed)


def encoded_loader(texts: Sequence[str], labels: Sequence[int], encode, pad_id: int,
                   batch_size: int = 128) -> DataLoader:
    """A padded evaluation loader for raw texts (e.g. another task's test split)."""
    from .training import pad_collate

    rows = [{"input_ids": i, "labels": y} for i, y in zip(encode(list(texts)), labels)]
    return DataLoader(rows, batch_size=batch_size, collate_fn=pad_collate(pad_id))


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
            from .runtime import autocast_dtype, device

            evaluator = create_classifier_evaluator(model, device=device(),
                                                    num_labels=self.num_labels,
                                                    amp_dtype=autocast_dtype())
            self.records.append({f"{name}_error": evaluator.run(loader).metrics["error"]
                                 for name, loader in self.sets.items()})
            self.model = model


def chain_on_trainer(*hooks: Callable | None) -> Callable:
    """Several ``on_trainer`` hooks as one."""
    def hook(trainer: Engine, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        for h in hooks:
            if h is not None:
                h(trainer, model, optimizer)
    return hook


def compare_with_transfer(methods: Mapping[str, Mapping[str, object]], task, scale,
                          transfer_sets: Mapping[str, DataLoader], **common: object):
    """``finetuning.compare_methods`` plus, for every run, the error on each transfer set
    (columns ``<name>_error``). Returns (table, runs, last model of each method)."""
    from .finetuning import compare_methods

    hooks = {name: TransferEvaluation(transfer_sets, task.num_labels) for name in methods}
    wired = {name: {**kw, "on_trainer": chain_on_trainer(kw.get("on_trainer"), hooks[name])}
             for name, kw in methods.items()}
    table, runs = compare_methods(wired, task, scale, **common)
    extra = pd.DataFrame([r for name in methods for r in hooks[name].records], index=table.index)
    return pd.concat([table, extra], axis=1), runs, {n: h.model for n, h in hooks.items()}


def transfer_sets(names: Sequence[str], scale, backbone, label_names: Sequence[str],
                  limit: int | None = None, batch_size: int = 128) -> dict[str, DataLoader]:
    """Evaluation loaders for the *test* splits of other tasks with the same label names (e.g.
    MR and CR for a model trained on SST-2); ``limit``: a fixed random subset (None = whole)."""
    from .finetuning import load_task as load_single

    loaders = {}
    for name in names:
        other = load_single(name, scale)
        if list(other.label_names) != list(label_names):
            raise ValueError(f"{name} labels {other.label_names} differ from {list(label_names)}")
        test = other.test
        if limit and len(test) > limit:
            test = test.shuffle(seed=0).select(range(limit))
        loaders[name] = encoded_loader(test[other.text_column], test[other.label_column],
                                       backbone.encode, backbone.pad_id, batch_size)
    return loaders


PASSES_PER_STEP = {"fine-tuning": 1, "R-Drop": 2, "token cutoff": 2, "R3F": 2, "TDT": 3}
"""Forward (and backward) passes per training step of each method: its cost at equal steps."""
