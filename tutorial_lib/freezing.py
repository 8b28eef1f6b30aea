"""Freezing parameters, counting what is trained, and feature extraction with an ELMo scalar mix.

Three tools used by notebooks 03-05:

* :func:`freeze` / :func:`unfreeze` by module or by a regular expression on parameter names. A
  pattern that matches no parameter is an error (a typo must not silently freeze nothing), and
  names are matched *with* tied duplicates, so ``"lm_head"`` finds the tied embedding matrix;
* :func:`trainable_summary` (trained vs total parameters, tied tensors counted once) and
  :func:`layer_groups`, the model's layers listed top-down — head, final LayerNorm, the blocks
  from the last to the first, embeddings — which gradual unfreezing and discriminative learning
  rates walk through;
* feature extraction: the backbone stays frozen and only a classifier on its hidden states is
  trained. :class:`ScalarMix` is ELMo's learned layer average (Peters et al. 2018, Eq. 1):
  ``γ Σ_j softmax(s)_j h_j``. Because the backbone never changes, :func:`extract_features`
  computes every layer's [CLS] state once and :func:`train_probe` trains on the cache in seconds.

It also has :class:`PeakMemory`, the memory meter of notebook 03.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
import resource
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from .runtime import autocast, autocast_dtype, device, seed_everything


class FreezingError(ValueError):
    """A freeze pattern that is not a valid regex or matches no parameter."""


Target = str | nn.Module | nn.Parameter


def _named_params(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    # remove_duplicate=False: a tied tensor is listed under every name it has
    return list(model.named_parameters(remove_duplicate=False))


def select_parameters(model: nn.Module, *targets: Target) -> list[nn.Parameter]:
    """Parameters of ``model`` picked by name regexes (``re.search``), modules or parameters.

    No target means every parameter. Each regex must be valid and match at least one name.
    Tied tensors are returned once.
    """
    if not targets:
        return list(model.parameters())
    named = _named_params(model)
    chosen: dict[int, nn.Parameter] = {}
    for target in targets:
        if isinstance(target, nn.Parameter):
            found = [target]
        elif isinstance(target, nn.Module):
            found = list(target.parameters())
        elif isinstance(target, str):
            try:
                regex = re.compile(target)
            except re.error as err:
                raise FreezingError(f"invalid parameter-name pattern {target!r}: {err}") from err
            found = [p for name, p in named if regex.search(name)]
            if not found:
                examples = ", ".join(n for n, _ in named[:4])
                raise FreezingError(
                    f"pattern {target!r} matches no parameter name (names look like: {examples}, …)"
                )
        else:
            raise TypeError(f"cannot select parameters with {type(target).__name__}")
        chosen.update((id(p), p) for p in found)
    return list(chosen.values())


def set_trainable(model: nn.Module, trainable: bool, *targets: Target) -> int:
    """Set ``requires_grad`` of the selected parameters; return how many tensors were set."""
    params = select_parameters(model, *targets)
    for p in params:
        p.requires_grad_(trainable)
    return len(params)


def freeze(model: nn.Module, *targets: Target) -> int:
    """Freeze the selected parameters (all of them if no target is given)."""
    return set_trainable(model, False, *targets)


def unfreeze(model: nn.Module, *targets: Target) -> int:
    """Unfreeze the selected parameters (all of them if no target is given)."""
    return set_trainable(model, True, *targets)


# --- counting ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainableSummary:
    trainable: int
    total: int

    @property
    def fraction(self) -> float:
        return self.trainable / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.trainable:,} of {self.total:,} parameters trained ({100 * self.fraction:.2f} %)"


def trainable_summary(model: nn.Module) -> TrainableSummary:
    """Trained vs total parameters, tied tensors counted once."""
    seen: set[int] = set()
    trainable = total = 0
    for _, p in _named_params(model):
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return TrainableSummary(trainable, total)


# --- the layers, top-down -------------------------------------------------------------------------


class Layer(NamedTuple):
    """One unit of unfreezing / discriminative learning rates: a name and its modules."""

    name: str
    modules: tuple[nn.Module, ...]

    def parameters(self) -> list[nn.Parameter]:
        seen: dict[int, nn.Parameter] = {}
        for m in self.modules:
            seen.update((id(p), p) for p in m.parameters())
        return list(seen.values())


def layer_groups(model: nn.Module, merge_final_norm: bool = False) -> list[Layer]:
    """The layers of a classifier from the top down.

    Our ``TransformerClassifier``: ``head, ln_f, block N-1, …, block 0, embeddings`` (token and
    position embeddings; the tied ``lm_head`` is the token embedding). ``merge_final_norm`` puts
    ``ln_f`` together with the top block (it is the LayerNorm that block's output goes through),
    which is what gradual unfreezing and discriminative rates use. A Hugging Face BERT classifier
    (``HFClassifier``): ``head, layer N-1, …, layer 0, embeddings``.
    """
    if hasattr(model, "transformer") and hasattr(model.transformer, "blocks"):
        t = model.transformer
        blocks = [Layer(f"block {i}", (b,)) for i, b in enumerate(t.blocks)][::-1]
        top = [Layer("ln_f", (t.ln_f,))]
        if merge_final_norm:
            blocks[0] = Layer(f"{blocks[0].name} + ln_f", (*blocks[0].modules, t.ln_f))
            top = []
        return [Layer("head", (model.head,)), *top, *blocks,
                Layer("embeddings", (t.tok_emb, t.pos_emb))]
    encoder = getattr(model, "encoder", None)
    if encoder is not None and hasattr(encoder, "encoder") and hasattr(encoder, "embeddings"):
        layers = [Layer(f"layer {i}", (m,)) for i, m in enumerate(encoder.encoder.layer)][::-1]
        return [Layer("head", (model.head,)), *layers, Layer("embeddings", (encoder.embeddings,))]
    raise TypeError(f"layer_groups does not know the layers of {type(model).__name__}")


# --- feature extraction -------------------------------------------------------------------------


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
def cls_hidden_states(
    model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Every layer's hidden state at the [CLS] position: ``[B, L, D]``.

    Our classifier ([CLS] last): the embeddings and each block's output, the top block's taken
    after the final LayerNorm (exactly what the fine-tuning head sees), so L = n_layer + 1.
    BERT-style ``HFClassifier`` ([CLS] first): the embeddings and each layer's output.
    """
    if hasattr(model, "transformer"):
        out = model.transformer(input_ids, attention_mask, output_hidden_states=True)
        states = torch.stack([*out.hidden_states[:-1], out.last_hidden_state], dim=1)  # [B, L, T, D]
        pos = attention_mask.long().sum(1) - 1
        return states[torch.arange(states.size(0), device=states.device), :, pos]
    out = model.encoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.stack(out.hidden_states, dim=1)[:, :, 0]


def feature_layer_names(n_layers: int) -> list[str]:
    """Names of the ``n_layers`` entries of :func:`cls_hidden_states`, bottom to top."""
    names = ["embeddings", *(f"block {i}" for i in range(n_layers - 1))]
    if n_layers > 1:
        names[-1] += " (+ ln_f)"
    return names


@dataclass
class Features:
    """Cached [CLS] features of one split: ``x`` [N, L, D] (float32) and ``y`` [N]."""

    x: torch.Tensor
    y: torch.Tensor
    seconds: float = 0.0


def extract_features(model: nn.Module, loader: DataLoader) -> Features:
    """Run the frozen backbone once over ``loader`` (eval mode, autocast) and keep every layer."""
    dev, amp = device(), autocast_dtype()
    model.to(dev).eval()
    xs, ys = [], []
    start = time.perf_counter()
    for batch in loader:
        with autocast(dev, amp):
            h = cls_hidden_states(model, batch["input_ids"].to(dev), batch["attention_mask"].to(dev))
        xs.append(h.float().cpu())
        ys.append(batch["labels"])
    return Features(torch.cat(xs), torch.cat(ys), time.perf_counter() - start)


@dataclass
class ProbeResult:
    probe: ProbeClassifier
    test: dict  # accuracy, error
    validation: list[dict] = field(default_factory=list)  # one row per epoch
    seconds: float = 0.0
    trainable_params: int = 0


@torch.no_grad()
def _evaluate(probe: nn.Module, feats: Features, batch_size: int = 1024) -> dict:
    probe.eval()
    correct = 0
    for i in range(0, len(feats.y), batch_size):
        logits = probe(feats.x[i : i + batch_size])
        correct += (logits.argmax(-1) == feats.y[i : i + batch_size]).sum().item()
    acc = correct / max(1, len(feats.y))
    return {"accuracy": acc, "error": 1.0 - acc}


def train_probe(
    train: Features,
    validation: Features,
    test: Features,
    *,
    num_labels: int,
    mix: bool,
    epochs: int,
    lr: float,
    batch_size: int = 32,
    weight_decay: float = 0.01,
    seed: int = 0,
) -> ProbeResult:
    """Train a :class:`ProbeClassifier` on cached features (AdamW, constant lr); test at the end."""
    seed_everything(seed)
    _, n_layers, d = train.x.shape
    probe = ProbeClassifier(n_layers, d, num_labels, mix)
    # the mix's scalars and γ get no weight decay (it would pull the mix towards uniform)
    mix_params = list(probe.mix.parameters()) if probe.mix is not None else []
    groups = [{"params": list(probe.head.parameters()), "weight_decay": weight_decay}]
    if mix_params:
        groups.append({"params": mix_params, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups, lr=lr)
    loader = DataLoader(TensorDataset(train.x, train.y), batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    rows = []
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        probe.train()
        for x, y in loader:
            loss = F.cross_entropy(probe(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        rows.append({"epoch": epoch, **_evaluate(probe, validation)})
    seconds = time.perf_counter() - start
    return ProbeResult(probe, _evaluate(probe, test), rows, seconds,
                       sum(p.numel() for p in probe.parameters()))


# --- memory ----------------------------------------------------------------------------------------


def _rss_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Peak memory of the code inside ``with PeakMemory() as mem:``, in MiB (``mem.peak_mib``).

    * GPU: ``torch.cuda.max_memory_allocated`` — exactly the tensors PyTorch allocated, peak
      minus the amount allocated on entry (``mem.what = "CUDA tensors"``).
    * CPU (Linux): the process's peak resident memory (``VmHWM``), reset on entry by writing 5 to
      ``/proc/self/clear_refs``, minus the resident memory on entry (``"peak RSS increase"``;
      freed heap memory is first returned to the system with glibc's ``malloc_trim``).
      This counts everything the process touched — tensors, allocator caches, Python objects —
      and the C allocator may reuse memory freed earlier without growing RSS, so read it as an
      upper-level indication, good to a few MiB, not an exact tensor count.
    * elsewhere: ``ru_maxrss`` growth, which only shows a new all-time peak of the process.
    """

    def __init__(self) -> None:
        self.peak_mib = float("nan")
        self.what = ""

    def __enter__(self) -> PeakMemory:
        gc.collect()
        _malloc_trim()  # give memory freed by earlier runs back, so it cannot hide this run's growth
        self._cuda = torch.cuda.is_available()
        if self._cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = torch.cuda.memory_allocated()
            self.what = "CUDA tensors"
            return self
        self._proc = _rss_kib("VmRSS") is not None and os.access("/proc/self/clear_refs", os.W_OK)
        if self._proc:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset the peak-RSS watermark (Linux >= 4.0)
            except OSError:
                self._proc = False
        if self._proc:
            self._start = _rss_kib("VmRSS") * 1024
            self.what = "peak RSS increase"
        else:
            self._start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            self.what = "max-RSS growth"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._cuda:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        elif self._proc:
            peak = (_rss_kib("VmHWM") or 0) * 1024
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.peak_mib = max(0.0, peak - self._start) / 2**20


def optimizer_state_mib(n_trainable: int, bytes_per_value: int = 4) -> float:
    """Gradients + AdamW's two moments of ``n_trainable`` fp32 parameters, in MiB (exact)."""
    return 3 * bytes_per_value * n_trainable / 2**20


def parameters_of(layers: Iterable[Layer]) -> list[nn.Parameter]:
    """All parameters of several layers, each once."""
    seen: dict[int, nn.Parameter] = {}
    for layer in layers:
        seen.update((id(p), p) for p in layer.parameters())
    return list(seen.values())


def decay_split(params: Sequence[nn.Parameter], names: dict[int, str]) -> tuple[list, list]:
    """(decay, no_decay) as in ``pretraining.make_optimizer``: no decay for 1-D and embeddings."""
    decay, no_decay = [], []
    for p in params:
        (no_decay if p.dim() < 2 or "emb" in names.get(id(p), "") else decay).append(p)
    return decay, no_decay


def feature_extraction_runs(
    task: object,
    scale: object,
    *,
    seeds: Sequence[int],
    epochs: int,
    lr: float,
    backbone: str = "pretrained",
    batch_size: int = 32,
) -> tuple[list[dict], dict[str, list[ProbeResult]]]:
    """Feature extraction on a frozen ``backbone``: top layer vs scalar mix, one run per seed.

    The [CLS] features of every layer are extracted once (train, validation and test) and both
    probes train on that cache. Each row has the same columns as ``finetuning.compare_methods``;
    ``seconds`` = the one extraction pass (shared, counted in every row) + that probe's training,
    and ``seconds_per_epoch`` = the probe's time per epoch over the cache. Trained parameters:
    the probe; total: backbone + probe.
    """
    from . import finetuning  # local import: finetuning imports this module's PeakMemory

    seed_everything(seeds[0])
    bb = finetuning.make_backbone(backbone, scale, task.num_labels)
    collate = finetuning.pad_collate(bb.pad_id)
    with PeakMemory() as extract_mem:
        feats = [extract_features(bb.model, DataLoader(finetuning.encode_split(split, bb, task),
                                                       batch_size=scale.finetune.eval_batch_size,
                                                       collate_fn=collate))
                 for split in (task.train, task.validation, task.test)]
    extract_seconds = sum(f.seconds for f in feats)
    backbone_params = trainable_summary(bb.model).total
    rows, probes = [], {}
    for name, mix in (("features: top layer", False), ("features: scalar mix", True)):
        probes[name] = []
        for seed in seeds:
            with PeakMemory() as mem:
                res = train_probe(*feats, num_labels=task.num_labels, mix=mix, epochs=epochs, lr=lr,
                                  batch_size=batch_size, weight_decay=scale.finetune.weight_decay,
                                  seed=seed)
            probes[name].append(res)
            total = backbone_params + res.trainable_params
            rows.append({"backbone": backbone, "seed": seed, "test_error": res.test["error"],
                         "test_accuracy": res.test["accuracy"],
                         "seconds": extract_seconds + res.seconds,
                         "trainable_params": res.trainable_params, "method": name,
                         "total_params": total, "trained_pct": 100 * res.trainable_params / total,
                         "seconds_per_epoch": res.seconds / epochs,
                         "peak_mib": max(extract_mem.peak_mib, mem.peak_mib)})
    return rows, probes


def mix_weights(probes: Sequence[ProbeResult]) -> torch.Tensor:
    """The learned softmax(s) of each probe's scalar mix: ``[n_probes, n_layers]``."""
    return torch.stack([p.probe.mix.weights().detach() for p in probes])
