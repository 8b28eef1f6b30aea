"""Feature extraction: a frozen backbone, a classifier on its cached hidden states (notebook 03).

The backbone never changes, so :func:`extract_features` runs it **once** over the data and keeps
the pooled hidden state of *every* layer (the embeddings and each layer's output; the top one is
exactly what a fine-tuning head sees). Two classifiers train on that cache in seconds:

* **top layer** — a linear layer on the last hidden state;
* **scalar mix** — ELMo's learned average of all layers (Peters et al. 2018, Eq. 1),
  ``γ Σ_j softmax(s)_j h_j`` (:class:`ScalarMix`), trained with the linear layer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ...backbones import Backbone, layer_states, load_backbone
from ...config import Scale
from ...finetuning import Recipe, Run, Scored, compare, floor_columns, run
from ...models import pool_hidden
from ...params import trainable_summary
from ...runtime import PeakMemory, autocast, autocast_dtype, device, seed_everything
from ...settings import Budget
from ...tasks import Task
from ...training import Method, pad_collate, resumable_loader


class ScalarMix(nn.Module):
    """ELMo's scalar mix (Peters et al. 2018, Eq. 1): ``γ Σ_j softmax(s)_j h_j``.

    Input ``[B, L, D]`` (L layers), output ``[B, D]``. With ``normalize`` each layer is first
    layer-normalised without learned parameters, so that layers whose residual stream has a
    larger scale do not dominate the mix by magnitude alone (the ``do_layer_norm`` option of
    AllenNLP's ScalarMix). Weights start uniform (s = 0) and γ at 1.
    """

    def __init__(self, n_layers: int, normalize: bool = True):
        super().__init__()
        self.normalize = normalize
        self.scalars = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def weights(self) -> torch.Tensor:
        """softmax(s): the share of each layer (sums to 1)."""
        return torch.softmax(self.scalars, dim=0)

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        if self.normalize:
            layers = F.layer_norm(layers, layers.shape[-1:])
        return self.gamma * torch.einsum("l,bld->bd", self.weights(), layers)


class ProbeClassifier(nn.Module):
    """A linear classifier on cached features: on the top layer only, or on a scalar mix of all."""

    def __init__(self, n_layers: int, d_model: int, num_labels: int, mix: bool, dropout: float = 0.1):
        super().__init__()
        self.mix = ScalarMix(n_layers) if mix else None
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_labels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``features`` is ``[B, L, D]``; without a mix only its last entry is used."""
        x = self.mix(features) if self.mix is not None else features[:, -1]
        return self.head(self.dropout(x))


@torch.no_grad()
def pooled_states(backbone: Backbone, input_ids: torch.Tensor, attention_mask: torch.Tensor
                  ) -> torch.Tensor:
    """Every layer's hidden state at the pooled position ([CLS]): ``[B, L + 1, D]``."""
    states = layer_states(backbone.encoder, input_ids, attention_mask)
    return torch.stack([pool_hidden(h, attention_mask, backbone.pool) for h in states], dim=1)


def feature_layer_names(backbone: Backbone) -> list[str]:
    """Names of the entries of :func:`pooled_states`, bottom to top."""
    return backbone.layer_names


@dataclass
class CachedFeatures:
    """Cached pooled features of one split: ``x`` [N, L, D] (float32) and ``y`` [N]."""

    x: torch.Tensor
    y: torch.Tensor
    seconds: float = 0.0


def extract_features(backbone: Backbone, loader: DataLoader) -> CachedFeatures:
    """Run the frozen backbone once over ``loader`` (eval mode, autocast) and keep every layer."""
    dev, amp = device(), autocast_dtype()
    backbone.encoder.to(dev).eval()
    xs, ys = [], []
    start = time.perf_counter()
    for batch in loader:
        with autocast(dev, amp):
            h = pooled_states(backbone, batch["input_ids"].to(dev), batch["attention_mask"].to(dev))
        xs.append(h.float().cpu())
        ys.append(batch["labels"])
    return CachedFeatures(torch.cat(xs), torch.cat(ys), time.perf_counter() - start)


@torch.no_grad()
def _evaluate(probe: nn.Module, feats: CachedFeatures, batch_size: int = 1024) -> dict:
    probe.eval()
    correct = 0
    for i in range(0, len(feats.y), batch_size):
        logits = probe(feats.x[i : i + batch_size])
        correct += (logits.argmax(-1) == feats.y[i : i + batch_size]).sum().item()
    acc = correct / max(1, len(feats.y))
    return {"accuracy": acc, "error": 1.0 - acc}


def probe_recipe(train: CachedFeatures, validation: CachedFeatures, test: CachedFeatures, *,
                 num_labels: int, mix: bool, budget: Budget, name: str = "") -> Recipe:
    """The :class:`~tutorial_lib.finetuning.Recipe` of a :class:`ProbeClassifier` on cached
    features (no backbone: the features are its input): AdamW at the budget's rate, constant (no
    schedule, no warm-up), no clipping, fp32 on the CPU where the features live; validate after
    every epoch (the history's evaluations), test at the end. ``name``: the run's backbone column
    (the backbone that made the features)."""
    _, n_layers, d = train.x.shape
    return Recipe(
        build=lambda _: ProbeClassifier(n_layers, d, num_labels, mix), name=name,
        loader=lambda _, seed: resumable_loader(TensorDataset(train.x, train.y), seed=seed,
                                                batch_size=budget.batch_size,
                                                collate_fn=_feature_batch),
        budget=budget.replace(max_norm=None, warmup_frac=0.0), schedule=None, on_cpu=True,
        method=Method(param_groups=_probe_groups, loss_fn=_probe_loss), evals_per_epoch=1,
        validate=lambda _: lambda probe: _evaluate(probe, validation),
        score=lambda probe, _: _scored(_evaluate(probe, test)))


def _scored(test: dict) -> Scored:
    return Scored(test, {"test_error": test["error"], "test_accuracy": test["accuracy"]})


def _feature_batch(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {"features": torch.stack([x for x, _ in rows]), "labels": torch.stack([y for _, y in rows])}


def _probe_loss(probe: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return F.cross_entropy(probe(batch["features"]), batch["labels"])


def _probe_groups(probe: ProbeClassifier, lr: float, weight_decay: float) -> list[dict]:
    """The head decays; the mix's scalars and γ do not (decay would pull the mix to uniform)."""
    groups = [{"params": list(probe.head.parameters()), "weight_decay": weight_decay}]
    if probe.mix is not None:
        groups.append({"params": list(probe.mix.parameters()), "weight_decay": 0.0})
    return groups


def feature_extraction_runs(
    task: Task, budget: Budget, *, scale: Scale, backbone: str, seeds: Sequence[int], epochs: int,
    lr: float,
) -> tuple[pd.DataFrame, dict[str, list[Run]], Backbone]:
    """Feature extraction on a frozen ``backbone``: top layer vs scalar mix, one run per seed.

    The features of every layer are extracted once (train, validation and test) and both probes
    train on that cache (:func:`probe_recipe` × seeds through ``finetuning.compare``). Rows have
    the columns of ``finetuning.compare_methods``; ``seconds`` =
    the one extraction pass (shared, counted in every row) + that probe's training, and
    ``seconds_per_epoch`` = the probe's time per epoch over the cache. Trained parameters: the
    probe; total: backbone + probe. The task's majority floors too (``finetuning.floor_columns``).
    """
    seed_everything(seeds[0])
    bb = load_backbone(backbone, scale)
    collate = pad_collate(bb.pad_id)
    with PeakMemory() as extract_mem:
        feats = [extract_features(bb, DataLoader(bb.encode_rows(split, budget.max_len),
                                                 batch_size=budget.eval_batch_size,
                                                 collate_fn=collate))
                 for split in (task.train, task.validation, task.test)]
    extract_seconds = sum(f.seconds for f in feats)
    backbone_params = trainable_summary(bb.encoder).total
    probe_budget = budget.replace(epochs=epochs, lr=lr)
    recipes = {name: probe_recipe(*feats, num_labels=task.num_labels, mix=mix, budget=probe_budget,
                                  name=backbone)
               for name, mix in (("features: top layer", False), ("features: scalar mix", True))}
    floors, memory = floor_columns(task), {}

    def runner(recipe: Recipe, seed: int, **_: object) -> Run:
        with PeakMemory() as memory["probe"]:
            probe = run(recipe, seed, keep_model=True)
        return dataclasses.replace(probe, total_params=backbone_params + probe.total_params)

    def columns(name: str, probe: Run) -> dict:
        return {"seconds": extract_seconds + probe.seconds, "seconds_per_epoch": probe.seconds / epochs,
                "peak_mib": max(extract_mem.peak_mib, memory["probe"].peak_mib), **floors}

    table, probes = compare(recipes, seeds, columns=columns, runner=runner)
    return table, probes, bb


def mix_weights(probes: Sequence[Run]) -> torch.Tensor:
    """The learned softmax(s) of each probe's scalar mix: ``[n_probes, n_layers]``."""
    return torch.stack([p.model.mix.weights().detach() for p in probes])
