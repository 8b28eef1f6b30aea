"""A learner's checks of a parameter-efficient model, and what each method costs.

The silent failures PEFT users report are an adapter that reloads as random weights (the new
classification head was never saved) and accuracy that collapses after merging. So:

* :func:`save_adapter` / :func:`load_adapter` — the method's parameters *and* every other trained
  tensor (the head; BitFit's biases) in one folder, written atomically; loading re-applies the
  method to a fresh base model and refuses a tensor it has no place for;
* :func:`merge` — fold LoRA / (IA)³ into the base weights (peft's ``merge_and_unload`` or our
  :func:`~tutorial_lib.methods.peft.lora.merge_lora`);
* :func:`roundtrip` — save → reload into a fresh base → merge, comparing logits each time;
* :func:`snapshot` / :func:`weights_check` — the frozen base weights bit-identical after training;
* :func:`checkpoint_bytes` and :func:`step_costs` — size on disk, time per step and peak memory.

Tolerances (fp32 on the CPU, no autocast): a reload computes with the very same tensors and the
same operations, so its logits must be **identical** (``RELOAD_ATOL = 0``); merging changes the
order of the arithmetic, (W + s·BA)x instead of Wx + s·B(Ax), which moves logits by float32
rounding only: ``MERGE_ATOL = 1e-4`` (float32's relative precision is 1.2e-7). One exception:
peft saves Li & Liang's reparametrised prefixes as the MLP's *output* (the MLP only helps
training), so that reload computes them no more and agrees to the same rounding, ``MERGE_ATOL``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from ignite.engine import Engine, Events
from peft import PeftModel
from safetensors.torch import load_file, save_file
from torch import nn

from ...runtime import PeakMemory, device
from ...training import Batch, Method, fit
from .lora import merge_lora
from .peft_methods import (
    METHODS,
    PeftMethod,
    PeftMethodError,
    PromptedEncoder,
    PromptTuning,
    ViaPeft,
    param_groups,
    peft_model_of,
    peft_quietly,
)

RELOAD_ATOL = 0.0
MERGE_ATOL = 1e-4
TRAINED_FILE, METHOD_FILE = "trained.safetensors", "method.json"


# --- save, reload, merge -------------------------------------------------------------------------


def _own_trained(model: nn.Module) -> dict[str, torch.Tensor]:
    """Trained tensors that peft does not save itself (the head, BitFit's biases, our adapters)."""
    peft = peft_model_of(model)
    theirs = {id(p) for p in peft.parameters()} if peft is not None else set()
    return {n: p.detach().cpu().contiguous() for n, p in model.named_parameters()
            if p.requires_grad and id(p) not in theirs}


def save_adapter(model: nn.Module, method: PeftMethod, directory: str | Path) -> Path:
    """Write what ``method`` trained to ``directory``: peft's adapter files (if peft applied it),
    ``trained.safetensors`` (every other trained tensor, by name) and ``method.json``. Written
    in a temporary folder renamed into place, so a crash leaves the old folder or the new one."""
    out = Path(directory)
    tmp, old = out.with_name(out.name + ".tmp"), out.with_name(out.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    peft = peft_model_of(model)
    if peft is not None:
        peft.save_pretrained(tmp)
    save_file(_own_trained(model), tmp / TRAINED_FILE)
    (tmp / METHOD_FILE).write_text(json.dumps({"method": type(method).__name__,
                                               "fields": asdict(method)}, indent=1))
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def load_adapter(model: nn.Module, directory: str | Path) -> PeftMethod:
    """Re-apply the saved method to ``model`` (a fresh classifier on the same base weights) and
    load every saved tensor into it; return the method. A saved tensor the model has no place
    for, or of another shape, is an error (never silently dropped)."""
    directory = Path(directory)
    if not (directory / METHOD_FILE).exists():
        raise FileNotFoundError(f"{directory} holds no saved adapter (no {METHOD_FILE}): "
                                "save one with save_adapter(model, method, directory) first")
    info = json.loads((directory / METHOD_FILE).read_text())
    method = METHODS[info["method"]](**info["fields"])
    if isinstance(method, ViaPeft) and not getattr(method, "ours", False):
        with peft_quietly():
            model.encoder = PeftModel.from_pretrained(model.encoder, directory)
        if isinstance(method, PromptTuning):
            model.encoder = PromptedEncoder(model.encoder, method.n_tokens)
    else:
        method.apply(model)
    params = dict(model.named_parameters())
    saved = load_file(directory / TRAINED_FILE)
    unknown = sorted(set(saved) - set(params))
    wrong = sorted(n for n in set(saved) & set(params) if saved[n].shape != params[n].shape)
    if unknown or wrong:
        raise PeftMethodError(f"{directory}: saved tensors that do not fit this model (a different "
                              f"base model or method?): unknown {unknown[:3]}, other shapes {wrong[:3]}")
    with torch.no_grad():
        for name, value in saved.items():
            params[name].copy_(value)
    return method


def merge(model: nn.Module) -> nn.Module:
    """Fold LoRA / (IA)³ into the base weights in place; the encoder is a plain model again."""
    peft = peft_model_of(model)
    if peft is None and merge_lora(model):  # ours
        return model
    kind = peft.peft_config["default"].peft_type.value if peft is not None else None
    if kind not in ("LORA", "IA3"):
        raise PeftMethodError("only LoRA and (IA)³ change the base weights linearly, so only they "
                              "merge; prompts, prefixes, adapters and BitFit's biases stay as they are")
    model.encoder = peft.merge_and_unload()
    return model


@torch.no_grad()
def logits(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The model's logits in eval mode, fp32, without autocast (what the checks compare)."""
    model.eval()
    dev = next(model.parameters()).device
    ids, mask = batch["input_ids"].to(dev), batch["attention_mask"].to(dev)
    return model(input_ids=ids, attention_mask=mask).logits.float().cpu()


@dataclass(frozen=True)
class RoundTrip:
    """Largest |logit difference| after reloading into a fresh base, and after merging (None:
    the method does not merge)."""

    method: str
    reload_diff: float
    merge_diff: float | None
    reload_atol: float = RELOAD_ATOL
    merge_atol: float = MERGE_ATOL

    @property
    def ok(self) -> bool:
        return self.reload_diff <= self.reload_atol and (
            self.merge_diff is None or self.merge_diff <= self.merge_atol)


def roundtrip(model: nn.Module, method: PeftMethod, fresh: nn.Module, batch: Batch,
              directory: str | Path) -> RoundTrip:
    """Save ``model``'s adapter, load it into ``fresh`` (an untouched classifier on the same base
    weights: a new, random head), merge it there if the method merges, and compare logits."""
    reference = logits(model, batch)
    save_adapter(model, method, directory)
    load_adapter(fresh, directory)
    reload_diff = (logits(fresh, batch) - reference).abs().max().item()
    merge_diff = None
    if method.mergeable:
        merge(fresh)
        merge_diff = (logits(fresh, batch) - reference).abs().max().item()
    return RoundTrip(method.label, reload_diff, merge_diff,
                     reload_atol=RELOAD_ATOL if method.exact_reload else MERGE_ATOL)


# --- the frozen weights stay frozen ---------------------------------------------------------------


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every parameter, by name, on the CPU (take it after applying the method, before
    training)."""
    return {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters()}


@dataclass(frozen=True)
class WeightsCheck:
    frozen: int  # frozen tensors compared
    frozen_changed: list[str]  # must be empty
    trained: int
    trained_unchanged: list[str]  # trained tensors that did not move (e.g. no gradient reached them)

    @property
    def ok(self) -> bool:
        return not self.frozen_changed


def weights_check(before: dict[str, torch.Tensor], model: nn.Module) -> WeightsCheck:
    """Compare ``model`` with a :func:`snapshot`: frozen tensors must be bit-identical."""
    params = dict(model.named_parameters())
    if set(params) != set(before):
        raise ValueError("the model's parameters are not those of the snapshot: take the snapshot "
                         "after applying the method")
    same = {n: torch.equal(before[n], p.detach().to(before[n].device)) for n, p in params.items()}
    frozen = [n for n, p in params.items() if not p.requires_grad]
    trained = [n for n, p in params.items() if p.requires_grad]
    return WeightsCheck(len(frozen), [n for n in frozen if not same[n]],
                        len(trained), [n for n in trained if same[n]])


# --- costs ----------------------------------------------------------------------------------------


def checkpoint_bytes(directory: str | Path) -> int:
    """Bytes of the weight files (``*.safetensors``) a saved adapter folder holds."""
    return sum(f.stat().st_size for f in Path(directory).glob("*.safetensors"))


@dataclass(frozen=True)
class StepCosts:
    seconds_per_step: float
    peak_mib: float
    memory_what: str  # what PeakMemory measured ("peak RSS increase", "CUDA tensors")
    steps: int


def step_costs(model: nn.Module, batch: Batch, *, lr: float = 1e-4, weight_decay: float = 0.0,
               steps: int = 3, warmup: int = 1) -> StepCosts:
    """Time per training step (after ``warmup`` steps) and peak memory of ``warmup + steps``
    steps of the one training recipe (:func:`tutorial_lib.training.fit`: AdamW over
    :func:`param_groups`, autocast, clipping; a constant rate) on one repeated batch.
    It trains ``model``: measure on a fresh one."""
    model.to(device())  # fit moves the batches, the caller the model
    stamps: list[float] = []

    def stamp_steps(trainer: Engine, _model: nn.Module, _optimizer: torch.optim.Optimizer) -> None:
        trainer.add_event_handler(Events.ITERATION_COMPLETED,
                                  lambda _: stamps.append(time.perf_counter()))

    method = Method(param_groups=lambda m, _lr, decay: param_groups(m, decay), on_trainer=stamp_steps)
    with PeakMemory() as mem:
        start = time.perf_counter()
        fit(model, [batch] * (warmup + steps), lr=lr, weight_decay=weight_decay, method=method,
            schedule=None)
    first = stamps[warmup - 1] if warmup else start
    return StepCosts((stamps[-1] - first) / steps, mem.peak_mib, mem.what, steps)
