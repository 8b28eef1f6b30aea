"""Peak GPU memory of a training step, estimated on the CPU (issue 63, item 2).

One training step of the library's own update (``training.create_trainer``: autocast forward,
backward, clipping, AdamW) runs on the CPU under ``torch.distributed._tools.mem_tracker.MemTracker``,
which follows every tensor storage the step creates and frees and reports the peak of what is alive
at once: parameters (fp32 master weights under autocast), gradients, AdamW's two fp32 states per
trainable parameter, the activations saved for backward (and autocast's low-precision weight
copies), and the temporaries of the backward pass (the gradient of the vocabulary logits is the
largest). That is what ``torch.cuda.max_memory_allocated`` counts on a GPU, kernel workspaces
aside. The second step is the one measured: the first creates the optimizer's state.

A step at the gpu batch is too slow on 2 CPU cores for most models, so it runs at two small batches
``b1 < b2`` and the peak is extrapolated linearly to the gpu batch ``B``:
``peak(B) = peak(b1) + (B - b1) * (peak(b2) - peak(b1)) / (b2 - b1)`` (everything that scales
with the batch is linear in it: activations, logits and their gradients; the rest is constant).
The two phases of a step peak apart and are measured apart: the forward and backward (which grows
with the batch, extrapolated) and the clipping and AdamW step (weights, gradients, states and the
step's temporaries: the same at any batch); the step's peak is the larger. (Extrapolating one
peak of the whole step goes wrong where the small probes peak in the optimizer's step and the
gpu batch in the backward.)

The GPU's caching allocator holds more than the tensors (``max_memory_reserved`` >
``max_memory_allocated``: freed blocks kept for reuse, rounding, fragmentation); :data:`RESERVE`
is that ratio as measured by the one gpu-scale run so far (notebook 01 on an H200, 8310 / 6741
MiB); the CUDA context (771 MiB there) is in neither.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tutorial_lib.training import create_trainer

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30
T4_USABLE_GIB = 15.0  # a Colab T4 (what TUTORIAL_GPU_MEMORY_GIB=15 caps a larger GPU at)
_MEASURED = json.loads((REPO / "results" / "gpu" / "peak_memory.json").read_text())["01_pretraining"]
MEASURED_01 = {"allocated_gib": _MEASURED["cuda_allocated_mib"] / 1024,
               "reserved_gib": _MEASURED["cuda_reserved_mib"] / 1024,
               "context_gib": _MEASURED["cuda_context_mib"] / 1024}
RESERVE = MEASURED_01["reserved_gib"] / MEASURED_01["allocated_gib"]  # 1.23: one run's ratio

Batch = dict[str, torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass
class StepPeak:
    """The peak of one measured training step, in bytes, by kind (MemTracker's categories)."""

    batch: int
    total: int  # forward and backward
    parts: dict[str, int]
    optimizer_total: int = 0  # clipping and the optimizer's step


def _peak_of(tracker: object) -> tuple[int, dict[str, int]]:
    snap = tracker.get_tracker_snapshot("peak")
    cpu = next(iter(snap.values()))
    parts = {str(getattr(k, "value", k)): int(v) for k, v in cpu.items() if k != "Total"}
    return int(cpu["Total"]), parts


def _tracker() -> object:
    """A MemTracker that also takes frozen parameters (it hooks every parameter of a module for its
    gradient, which a frozen one refuses: then a module's hooks are left out and its gradients
    are counted as the other tensors a step creates, under another name)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    class Tracker(MemTracker):
        def _track_module_params_and_buffers(self, module: nn.Module, install_grad_hooks: bool = True):
            hooks = install_grad_hooks and all(p.requires_grad for p in module.parameters())
            return super()._track_module_params_and_buffers(module, hooks)

    return Tracker()


def step_peak(model: nn.Module, batch: Batch, *, loss_fn: LossFn | None = None,
              amp_dtype: torch.dtype | None = torch.bfloat16, lr: float = 1e-4) -> StepPeak:
    """Peak bytes of the second training step of ``model`` on ``batch``, in its two phases: the
    forward and backward (``total``, ``parts``: they grow with the batch) and the clipping and
    AdamW step (``optimizer_total``: it does not). Step 1 is the library's trainer's
    (``training.create_trainer``); step 2 is the same update written out, so that each phase is
    measured on its own. ``amp_dtype``: the autocast dtype (bf16 here stands for the T4's fp16:
    the same bytes)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    loss_fn = loss_fn or (lambda m, b: m(**b).loss)
    rows = next(iter(batch.values())).shape[0]
    amp = torch.autocast("cpu", dtype=amp_dtype, enabled=amp_dtype is not None)
    if not trainable:  # inference only: one forward without gradients
        tracker = _tracker()
        tracker.track_external(model)
        with tracker, torch.no_grad(), amp:
            model(**batch)
        total, parts = _peak_of(tracker)
        return StepPeak(rows, total, parts)
    optimizer = torch.optim.AdamW(trainable, lr=lr)
    trainer = create_trainer(model, optimizer, device=torch.device("cpu"), amp_dtype=amp_dtype,
                             loss_fn=loss_fn)
    trainer.run([batch], max_epochs=1)  # step 1: AdamW's state comes into being
    model.train()
    tracker = _tracker()
    tracker.track_external(model, optimizer)
    with tracker:
        with amp:
            loss = loss_fn(model, batch)
        loss.backward()
        del loss
    total, parts = _peak_of(tracker)
    tracker = _tracker()
    tracker.track_external(model, optimizer)
    with tracker:
        nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    optimizer_total, _ = _peak_of(tracker)
    return StepPeak(rows, total, parts, optimizer_total)


def extrapolate(small: StepPeak, large: StepPeak, batch: int) -> dict[str, float]:
    """The peak at ``batch`` rows from peaks at two smaller batches, linear in the batch, in
    bytes: the total and each part."""
    if large.batch <= small.batch:
        raise ValueError("extrapolate needs two different batches, the second larger")
    k = (batch - small.batch) / (large.batch - small.batch)
    parts = {name: small.parts.get(name, 0) + k * (large.parts.get(name, 0) - small.parts.get(name, 0))
             for name in set(small.parts) | set(large.parts)}
    return {"total": small.total + k * (large.total - small.total), **parts}


def estimate(model_fn: Callable[[], nn.Module], batch_fn: Callable[[int], Batch], batch: int,
             *, probes: tuple[int, int] = (1, 2), loss_fn: LossFn | None = None,
             extra_bytes: int = 0) -> dict:
    """Peak GPU memory of a training step at ``batch`` rows: measured at the two ``probes``
    batches on the CPU and extrapolated; ``extra_bytes``: what the method keeps besides (e.g.
    L2-SP's anchor and EWC's Fisher: a copy of the weights each). A fresh model per probe, so the
    probes do not share state."""
    peaks = []
    for rows in probes:
        torch.manual_seed(0)
        peaks.append(step_peak(model_fn(), batch_fn(min(rows, batch)), loss_fn=loss_fn))
    if probes[0] >= batch:
        allocated = {"total": float(peaks[0].total), **peaks[0].parts}
    else:
        allocated = extrapolate(peaks[0], peaks[1], batch)
    backward = allocated.pop("total")
    step = float(max(p.optimizer_total for p in peaks))
    total = max(backward, step) + extra_bytes
    return {"allocated_gib": total / GIB, "reserved_gib": total * RESERVE / GIB,
            "peak_in": "forward/backward" if backward >= step else "optimizer step",
            "backward_gib": round(backward / GIB, 3), "optimizer_step_gib": round(step / GIB, 3),
            "parts_gib": {k: round(v / GIB, 3) for k, v in sorted(allocated.items()) if v},
            "extra_gib": round(extra_bytes / GIB, 3), "probes": list(probes),
            "probe_peaks_mib": [round(p.total / 2**20, 1) for p in peaks]}


def adamw_bytes(params: int, trainable: int) -> int:
    """Hand count of the constant part: fp32 weights, fp32 gradients and AdamW's two fp32 states
    of the trainable ones (what :func:`estimate` must reproduce at batch 0)."""
    return 4 * params + (4 + 8) * trainable


def fits(reserved_gib: float, cap: float = T4_USABLE_GIB) -> bool:
    return reserved_gib <= cap


def summary(rows: Mapping[str, dict]) -> str:
    """A one-line-per-workload text table."""
    out = []
    for name, r in rows.items():
        out.append(f"{name:<44} {r.get('status', '?'):<8} {r.get('params', 0) / 1e6:8.1f}M "
                   f"{r.get('reserved_gib', float('nan')):7.2f} GiB")
    return "\n".join(out)
