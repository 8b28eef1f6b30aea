"""Consistency training (UDA) and self-training: two ways to learn from unlabelled questions.

**UDA** (Xie et al. 2019, "Unsupervised data augmentation for consistency training"): besides the
supervised loss on a labelled batch, make the prediction on a *perturbed* unlabelled input x′
agree with the (fixed, sharpened) prediction on the original x,

    L = CE(y, p_θ(y|x_l)) + λ · mean_x 1[max p_θ(y|x) ≥ β] · KL( p̃(y|x) ‖ p_θ(y|x′) ),
    p̃(y|x) = softmax(z(x)/τ)  (no gradient through it),

with a confidence mask β (only examples the model is already fairly sure of count) and
sharpening τ < 1; the mean runs over the whole unlabelled batch, masked examples counting 0, as in
UDA's reference code. UDA perturbed text by back-translation or TF-IDF word replacement; offline
we replace each word piece with probability ``p`` by one drawn from the unlabelled text's own
unigram distribution (no translation model here, and the replacement needs only the pool).

**Self-training** (the classic baseline; Yarowsky 1995, Lee 2013's pseudo-labels): train on the
labels, label the unlabelled pool with the model, keep the confident predictions
(p ≥ threshold) as if they were gold, train a fresh model on both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ...batches import Batch, pad_collate
from ...runtime import autocast, autocast_dtype
from ...training import Method, default_loss, eval_loader, resumable_loader


def consistency_loss(clean_logits: torch.Tensor, perturbed_logits: torch.Tensor, *,
                     temperature: float = 1.0, threshold: float = 0.0
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """UDA's unsupervised term: KL(softmax(clean/τ) ‖ softmax(perturbed)) per example, zero where
    the clean prediction's top probability is below ``threshold``, averaged over the batch.
    Returns (the loss, the mask). No gradient flows into the clean side."""
    clean = clean_logits.detach().float()
    target = F.softmax(clean / temperature, dim=-1)
    mask = (F.softmax(clean, dim=-1).max(-1).values >= threshold).float()
    log_q = F.log_softmax(perturbed_logits.float(), dim=-1)
    kl = (target * (torch.log(target.clamp_min(1e-12)) - log_q)).sum(-1)
    return (kl * mask).mean(), mask


def unigram_sampler(rows: Sequence[dict], special_ids: Sequence[int]) -> torch.Tensor:
    """The word pieces of ``rows`` (specials left out), one entry per occurrence: drawing a
    uniform index draws from the pool's unigram distribution."""
    special = set(special_ids)
    pieces = [t for r in rows for t in r["input_ids"] if t not in special]
    if not pieces:
        raise ValueError("the unlabelled rows hold no word pieces to draw replacements from")
    return torch.tensor(pieces, dtype=torch.long)


def replace_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, pieces: torch.Tensor,
                   probability: float, special_ids: Sequence[int],
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """A perturbed copy x′: each real, non-special token replaced with ``probability`` by a piece
    drawn from ``pieces`` (:func:`unigram_sampler`). Padding and special tokens stay."""
    can = attention_mask.bool() & ~torch.isin(input_ids, torch.as_tensor(list(special_ids),
                                                                          device=input_ids.device))
    draw = torch.rand(input_ids.shape, generator=generator, device="cpu").to(input_ids.device)
    chosen = can & (draw < probability)
    picks = torch.randint(len(pieces), input_ids.shape, generator=generator, device="cpu")
    return torch.where(chosen, pieces[picks].to(input_ids.device), input_ids)


@dataclass
class UDA:
    """UDA as a :class:`~tutorial_lib.training.Method`'s loss: each labelled batch brings its own
    unlabelled batch (``ratio`` × as large) from a stream of the pool; ``masked`` records each
    step's share of unlabelled examples that passed the confidence mask."""

    unlabelled: list[dict]
    pad_id: int
    special_ids: Sequence[int]
    batch_size: int
    seed: int
    weight: float = 1.0
    temperature: float = 0.85
    threshold: float = 0.45
    probability: float = 0.15
    masked: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pieces = unigram_sampler(self.unlabelled, self.special_ids)
        self.generator = torch.Generator().manual_seed(self.seed)
        self._stream: Iterator[Batch] | None = None

    def _next(self) -> Batch:
        if self._stream is None:
            loader = resumable_loader(self.unlabelled, seed=self.seed, batch_size=self.batch_size,
                                      collate_fn=pad_collate(self.pad_id))
            self._stream = (b for _ in iter(int, 1) for b in loader)  # pass after pass
        return next(self._stream)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        supervised = default_loss(model, batch)
        dev = batch["input_ids"].device
        u = {k: v.to(dev) for k, v in self._next().items() if k != "labels"}
        with torch.no_grad():
            clean = model(**u).logits
        perturbed_ids = replace_tokens(u["input_ids"], u["attention_mask"], self.pieces,
                                       self.probability, self.special_ids, self.generator)
        perturbed = model(input_ids=perturbed_ids, attention_mask=u["attention_mask"]).logits
        unsup, mask = consistency_loss(clean, perturbed, temperature=self.temperature,
                                       threshold=self.threshold)
        self.masked.append(float(mask.mean()))
        return supervised + self.weight * unsup

    def method(self) -> Method:
        return Method(loss_fn=self.loss)


@torch.no_grad()
def predict(model: nn.Module, rows: Sequence[dict], pad_id: int, batch_size: int = 128,
            dev: torch.device | None = None) -> torch.Tensor:
    """Class probabilities of ``rows`` (in their order) under ``model``: [N, classes]."""
    dev = dev or next(model.parameters()).device
    model.eval()
    out = []
    for batch in eval_loader(list(rows), batch_size, pad_collate(pad_id), by_length=False):
        with autocast(dev, autocast_dtype(dev)):
            logits = model(input_ids=batch["input_ids"].to(dev),
                           attention_mask=batch["attention_mask"].to(dev)).logits
        out.append(F.softmax(logits.float(), -1))
    return torch.cat(out).cpu()


def pseudo_label(probs: torch.Tensor, rows: Sequence[dict], threshold: float) -> list[dict]:
    """The rows whose top class probability is ≥ ``threshold``, labelled with that class (any
    label they carried is dropped first: a pseudo-label never sees the gold one)."""
    confidence, label = probs.max(-1)
    return [{"input_ids": r["input_ids"], "labels": int(y)}
            for r, c, y in zip(rows, confidence.tolist(), label.tolist()) if c >= threshold]
