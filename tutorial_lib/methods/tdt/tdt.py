"""TDT — Task-guided Disentangled Tuning (Zeng, Jiang, Wu, Yin & Li, Findings of ACL 2022).

TDT learns which input tokens matter for the task and trains the classifier to rely on them.

1. **Token confidence.** A linear scorer on the embedding layer's output e_i (token + position
   embeddings after LayerNorm/dropout): m_i = σ(w·e_i + b) ∈ (0, 1), one scalar per token.
2. **Distilled view** ẽ_i = m_i·e_i + (1 − m_i)·ē: low-confidence tokens are pulled towards the
   sentence mean ē, i.e. perturbed more; **negative view** ê_i = (1 − m_i)·e_i keeps only the
   low-confidence part of each token.
3. **Three losses.** The same encoder and head run on e, ẽ and ê, giving class distributions p,
   p̃ and p̂, and

       L = CE(p, y) + m_rate · CE(p̃, y)
           + kl_rate · max(0, KL(p‖p̃) − ½KL(p̃‖p̂) − ½KL(p‖p̂) + margin),

   a triplet loss in prediction space: the clean prediction (anchor) should be close to the
   distilled one (positive) and far from the negative one, by ``margin``.

Fixed here, relative to the released code (see the reference notes):

* ē is the mean over the **content tokens only** — upstream averaged the padded sequence, so a
  sentence's distilled input depended on how long the *other* sentences in its batch were;
* [CLS] and padding are never perturbed (:func:`tutorial_lib.methods.tdt.regularized.content_mask`);
* KL is per example, summed over classes, averaged over the batch. Upstream's ``KLDivLoss()``
  default averaged over classes too, which divides ``kl_rate`` by the number of classes
  (:func:`from_upstream_kl_rate` converts); the hinge is applied per example (upstream: to the
  batch means) with ``torch.clamp``;
* evaluation runs the clean view only (upstream ran all three passes and used one);
* regression heads are refused (upstream silently reduced TDT to MSE for STS-B).

The three views run as one forward of a 3B-row batch (three times the cost of a fine-tuning step).
Use :func:`method` with :func:`tutorial_lib.finetuning.finetune` / ``compare_methods``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from ...training import Batch, Method, pad_collate
from .regularized import (
    check_classifier,
    check_labels,
    content_mask,
    embedding_output_module,
    kl_per_example,
    log_probs,
    perturb_embeddings,
    repeat_batch,
)


@dataclass(frozen=True)
class TDTConfig:
    """Loss weights: ``m_rate`` (CE on the distilled view), ``kl_rate`` (the KL hinge, batchmean
    KL) and the hinge's ``margin`` (upstream's ``--m_rate``, ``--kl_rate``, ``--maxg``).

    ``margin = 0`` is the released launch script's ``--maxg 0`` (its grid: {0, 2}); the paper's
    value could not be read here. At 0 the hinge is zero as soon as the distilled prediction is
    closer to the clean one than the negative prediction is, so the triplet term — the scorer's
    only push apart — is ≈ 0 for most batches (08's committed run: the hinge at 0.01–0.03); a
    positive margin keeps it active (:func:`from_upstream_margin`: upstream's ``--maxg 2`` in our
    units).

    ``collapse_weight`` β: an optional penalty against the two collapses of the confidences —
    m → 0 everywhere (the distilled view a constant) and m → 1 everywhere (the negative view
    empty) — β · (mean m − ``collapse_target``)² over the content tokens. The paper (as its
    seed describes it) adds "a regularization penalty to prevent mode collapse" whose equation
    could not be read here; the released code has none. This is our form of it, off by default."""

    m_rate: float = 1.0
    kl_rate: float = 1.0
    margin: float = 0.0
    collapse_weight: float = 0.0
    collapse_target: float = 0.5


def from_upstream_kl_rate(kl_rate: float, num_labels: int) -> float:
    """Upstream's ``kl_rate`` in our units: its KL was averaged over the C classes, ours sums."""
    return kl_rate / num_labels


def from_upstream_margin(maxg: float, num_labels: int) -> float:
    """Upstream's hinge margin ``--maxg`` in our units: its hinge compared KL / C against maxg,
    ours compares KL against C · maxg (and :func:`from_upstream_kl_rate` divides the weight by C:
    the term is then the same)."""
    return maxg * num_labels


def collapse_penalty(m: torch.Tensor, content: torch.Tensor, target: float = 0.5) -> torch.Tensor:
    """(mean of m over the content tokens − ``target``)²: zero at the target, growing as the
    confidences collapse towards all 0 or all 1 (see :class:`TDTConfig`)."""
    return (m[content].mean() - target) ** 2 if content.any() else m.sum() * 0.0


class ConfidenceScorer(nn.Module):
    """m = σ(w·e + b) per token, computed in float32 (bf16 would round confident tokens to 1)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.linear.weight, std=0.02)  # starts near m = 0.5 everywhere
        nn.init.zeros_(self.linear.bias)

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=e.device.type, enabled=False):
            return torch.sigmoid(self.linear(e.float())).squeeze(-1)


class TDTHead(nn.Module):
    """What TDT adds to a classifier: the scorer, the loss weights and a per-step log."""

    def __init__(self, hidden_size: int, config: TDTConfig):
        super().__init__()
        self.config = config
        self.scorer = ConfidenceScorer(hidden_size)
        self.history: list[dict] = []  # one row per training step (the loss terms, mean m)


def masked_mean(e: torch.Tensor, content: torch.Tensor) -> torch.Tensor:
    """Mean of e over each row's content tokens: [B, 1, H]. Padding never enters it."""
    c = content[..., None].to(e.dtype)
    return (e * c).sum(1, keepdim=True) / c.sum(1, keepdim=True).clamp(min=1.0)


def make_views(
    e: torch.Tensor, m: torch.Tensor, content: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(distilled ẽ, negative ê) from e [B, T, H], m [B, T] and the content mask [B, T]; both keep
    e unchanged at non-content positions ([CLS], padding)."""
    e = e.float()
    w = m[..., None]
    keep = content[..., None]
    distilled = torch.where(keep, w * e + (1 - w) * masked_mean(e, content), e)
    negative = torch.where(keep, (1 - w) * e, e)
    return distilled, negative


def kl_hinge(log_p: torch.Tensor, log_pd: torch.Tensor, log_pn: torch.Tensor,
             margin: float = 0.0) -> torch.Tensor:
    """mean over the batch of max(0, KL(p‖p̃) − ½KL(p̃‖p̂) − ½KL(p‖p̂) + margin)."""
    gap = (kl_per_example(log_p, log_pd)
           - 0.5 * kl_per_example(log_pd, log_pn) - 0.5 * kl_per_example(log_p, log_pn))
    return torch.clamp(gap + margin, min=0.0).mean()


def hidden_size(model: nn.Module) -> int:
    """Width of a classifier's hidden states (ours or Hugging Face)."""
    return model.encoder.config.hidden_size


def attach(model: nn.Module, config: TDTConfig = TDTConfig()) -> nn.Module:
    """Add the TDT head to a classifier (refusing regression heads); returns the model."""
    check_classifier(model, "TDT")
    embedding_output_module(model)  # a clear error for a model we cannot perturb
    model.tdt = TDTHead(hidden_size(model), config)
    return model


def _three_views(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits [3B, C] for clean/distilled/negative, m [B, T], content [B, T])."""
    B = batch["input_ids"].size(0)
    content = content_mask(model, batch["attention_mask"])
    state: dict[str, torch.Tensor] = {}

    def views(e: torch.Tensor) -> torch.Tensor:
        clean = e[:B]  # the other 2B rows are replaced: every view starts from the same e
        state["m"] = m = model.tdt.scorer(clean)
        distilled, negative = make_views(clean, m, content)
        return torch.cat([clean, distilled.to(e.dtype), negative.to(e.dtype)])

    ids, mask = repeat_batch(batch, 3)
    with perturb_embeddings(model, views):
        logits = model(ids, mask).logits
    return logits, state["m"], content


def tdt_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The TDT loss of one batch (``loss_fn`` for ``training.create_trainer``)."""
    labels = batch["labels"]
    check_labels(labels, "TDT")
    cfg = model.tdt.config
    logits, m, content = _three_views(model, batch)
    clean, distilled, _ = logits.float().chunk(3)
    log_p, log_pd, log_pn = log_probs(logits).chunk(3)
    ce = F.cross_entropy(clean, labels)
    ce_distilled = F.cross_entropy(distilled, labels)
    hinge = kl_hinge(log_p, log_pd, log_pn, cfg.margin)
    loss = ce + cfg.m_rate * ce_distilled + cfg.kl_rate * hinge
    penalty = collapse_penalty(m, content, cfg.collapse_target)
    if cfg.collapse_weight:
        loss = loss + cfg.collapse_weight * penalty
    if model.training:
        model.tdt.history.append({
            "step": len(model.tdt.history) + 1, "CE clean": ce.item(),
            "CE distilled": ce_distilled.item(), "KL hinge": hinge.item(),
            "KL(p‖p̃)": kl_per_example(log_p, log_pd).mean().item(),
            "KL(p‖p̂)": kl_per_example(log_p, log_pn).mean().item(),
            "collapse penalty": penalty.item(),
            "mean m": m[content].mean().item() if content.any() else float("nan")})
    return loss


def method(config: TDTConfig = TDTConfig()) -> Method:
    """TDT as a :class:`~tutorial_lib.training.Method`: attach the head, train with
    :func:`tdt_loss`. Evaluation (``model(**batch)``) sees the clean input only."""
    return Method(prepare=lambda model: attach(model, config), loss_fn=tdt_loss)


# --- looking inside ------------------------------------------------------------------------------


@torch.no_grad()
def views_for_batch(model: nn.Module, batch: Batch) -> dict[str, torch.Tensor]:
    """e, m, ẽ, ê and the content mask of one batch, in eval mode (no dropout)."""
    was = model.training
    model.eval()
    captured: dict[str, torch.Tensor] = {}

    def grab(e: torch.Tensor) -> torch.Tensor:
        captured["e"] = e.float()
        return e

    with perturb_embeddings(model, grab):
        model(batch["input_ids"], batch["attention_mask"])
    model.train(was)
    content = content_mask(model, batch["attention_mask"])
    m = model.tdt.scorer(captured["e"])
    distilled, negative = make_views(captured["e"], m, content)
    return {"e": captured["e"], "m": m, "distilled": distilled, "negative": negative,
            "content": content}


def token_confidences(model: nn.Module, encoded: Sequence[Sequence[int]], tokenizer,
                      batch_size: int = 128) -> list[list[tuple[str, float]]]:
    """(token, m) for the content tokens of each encoded input, in order."""
    device = next(model.parameters()).device
    collate = pad_collate(tokenizer.pad_token_id)
    out = []
    for start in range(0, len(encoded), batch_size):
        rows = [{"input_ids": list(ids)} for ids in encoded[start:start + batch_size]]
        batch = {k: v.to(device) for k, v in collate(rows).items()}
        v = views_for_batch(model, batch)
        for ids, m, keep in zip(batch["input_ids"], v["m"], v["content"]):
            tokens = tokenizer.convert_ids_to_tokens(ids[keep].tolist())
            out.append(list(zip(tokens, m[keep].tolist())))
    return out


def confidence_table(confidences: Sequence[Sequence[tuple[str, float]]],
                     min_count: int = 5) -> pd.DataFrame:
    """Mean confidence per token type over many inputs (types seen ≥ ``min_count`` times),
    sorted from most to least confident."""
    frame = pd.DataFrame([pair for row in confidences for pair in row], columns=["token", "m"])
    table = frame.groupby("token")["m"].agg(["mean", "std", "count"])
    return table[table["count"] >= min_count].sort_values("mean", ascending=False)


def label_association(confidences: Sequence[Sequence[tuple[str, float]]], labels: Sequence[int],
                      min_count: int = 5) -> pd.Series:
    """How much a token type alone says about the label: max over classes y of
    |log P(y | token) − log P(y)| (add-one smoothed), for types seen ≥ ``min_count`` times — a
    log-ratio (pointwise mutual information of token and label), not log-odds."""
    frame = pd.DataFrame([(tok, y) for conf, y in zip(confidences, labels) for tok, _ in conf],
                         columns=["token", "label"])
    counts = pd.crosstab(frame["token"], frame["label"])
    counts = counts[counts.sum(1) >= min_count]
    prior = np.log(pd.Series(labels).value_counts(normalize=True).reindex(counts.columns).to_numpy())
    cond = np.log((counts + 1).div(counts.sum(1) + counts.shape[1], axis=0).to_numpy())
    return pd.Series(np.abs(cond - prior).max(1), index=counts.index, name="|log-ratio|")
