"""Pretraining throughput: our ``TransformerLM`` against the 2019 slide model, interleaved."""


from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from benchmarks.slide_model import SlideTransformerWithLMHead
from tutorial_lib.models import TransformerLM, count_parameters
from tutorial_lib.params import ADAM_BETAS, ADAM_EPS
from tutorial_lib.runtime import autocast, autocast_dtype, grad_scaler

from .measure import (
    INIT_LOSS_TOLERANCE,
    BenchSize,
    bench_size,
    device_name,
    flops_per_token,
    mfu,
    mfu_params,
    peak_flops_for,
    peak_memory,
    sync,
    tokens_per_second,
)

# --- pretraining: ours vs the slide model ----------------------------------------------------------

StepFn = Callable[[torch.Tensor], torch.Tensor]


def _lm_loss(model: nn.Module, kind: str, ids: torch.Tensor) -> torch.Tensor:
    """Causal-LM loss of a batch-first ``ids`` [B, T]; the slide model gets [T, B], as in 2019."""
    if kind == "ours":
        return model(ids, labels=ids).loss
    x = ids.t().contiguous()  # the 2019 update step: batch.transpose(0, 1).contiguous()
    return model(x, labels=x)[1]


def make_pretrain_step(model: nn.Module, kind: str, optimizer: torch.optim.Optimizer,
                       dev: torch.device, amp: torch.dtype | None, max_norm: float = 1.0) -> StepFn:
    """One training step, the same for both models: ``training.create_trainer``'s update
    (autocast forward, backward, clip, AdamW step, zero grads; in fp16 with its gradient scaler)
    without its per-step ``.item()`` sync, so that a GPU can queue steps ahead."""
    scaler = grad_scaler(dev, amp)

    def step(ids: torch.Tensor) -> torch.Tensor:
        with autocast(dev, amp):
            loss = _lm_loss(model, kind, ids)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def _time_block(step: StepFn, batches: Sequence[torch.Tensor], dev: torch.device,
                cpu: list[float] | None = None) -> float:
    """Wall seconds of the steps; their process CPU seconds (all threads) appended to ``cpu``."""
    sync(dev)
    start, start_cpu = time.perf_counter(), time.process_time()
    for ids in batches:
        step(ids)
    sync(dev)
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


@torch.no_grad()
def init_loss(model: nn.Module, kind: str, ids: torch.Tensor) -> float:
    """fp32, eval-mode loss of a freshly initialised model (≈ ln V when the init is sane)."""
    was = model.training
    model.eval()
    loss = _lm_loss(model, kind, ids).item()
    model.train(was)
    return loss


def pretraining_throughput(
    size: BenchSize | str = "tiny",
    dev: torch.device | str = "cpu",
    *,
    compile: bool = False,
    amp: torch.dtype | None | str = "auto",
    peak_flops: float | None = None,
    fp32_reference: bool = True,
    lr: float = 1e-3,
    seed: int = 0,
) -> dict:
    """Training tokens/s of ours vs the slide model; interleaved blocks, medians, ratio ours/slide.

    ``amp="auto"``: :func:`tutorial_lib.runtime.autocast_dtype` for the device, the same for
    both models. ``fp32_reference``: when that is a low precision, also time the slide model in
    fp32 — how the 2019 code trained — as a third, clearly separate participant (``slide_fp32``,
    ``ratio_vs_slide_fp32``); the headline ``ratio`` is always like for like. ``peak_flops``: the
    device's peak FLOP/s for :func:`mfu` (None: the datasheet table for a known GPU, else no MFU).
    Returns a JSON-able dict (see ``README.md``).
    """
    size = bench_size(size) if isinstance(size, str) else size
    dev = torch.device(dev)
    amp = autocast_dtype(dev) if amp == "auto" else amp
    if dev.type == "cpu":
        torch.set_flush_denormal(True)  # as create_trainer does: no slow denormal path, either model
    if peak_flops is None and dev.type == "cuda":
        peak_flops = peak_flops_for(device_name(dev))
    cfg = size.model_config(causal=True)
    # participant -> (model family, precision)
    plan: dict[str, tuple[str, torch.dtype | None]] = {"ours": ("ours", amp), "slide": ("slide", amp)}
    if fp32_reference and amp is not None:
        plan["slide_fp32"] = ("slide", None)
    gen = torch.Generator().manual_seed(seed)
    batches = [torch.randint(5, cfg.vocab_size, (size.batch_size, size.seq_len), generator=gen).to(dev)
               for _ in range(4)]
    tokens_per_step = size.batch_size * size.seq_len
    ln_v = math.log(cfg.vocab_size)

    steps: dict[str, StepFn] = {}
    out: dict[str, dict] = {}
    for name, (family, dtype) in plan.items():
        torch.manual_seed(seed)  # both slide participants start from the same weights
        model = (TransformerLM(cfg) if family == "ours" else SlideTransformerWithLMHead(cfg)).to(dev)
        loss0 = init_loss(model, family, batches[0])
        out[name] = {"model": "TransformerLM" if family == "ours" else "SlideTransformerWithLMHead",
                     "precision": str(dtype).removeprefix("torch.") if dtype else "fp32",
                     "params": count_parameters(model), "mfu_params": mfu_params(model),
                     "init_loss": loss0, "init_loss_ok": abs(loss0 - ln_v) < INIT_LOSS_TOLERANCE}
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                      weight_decay=0.01)
        runner = torch.compile(model) if compile else model
        steps[name] = make_pretrain_step(runner, family, optimizer, dev, dtype)

    # warm-up (allocator, kernels, torch.compile), then interleaved timed blocks, the order
    # reversed every other round (ours, slide, slide, ours, ...) so that drift cancels
    names = list(plan)
    for name in names:
        _time_block(steps[name], [batches[i % 4] for i in range(size.warmup)], dev)
    block = [batches[i % 4] for i in range(size.steps)]
    seconds: dict[str, list[float]] = {name: [] for name in names}
    cpu_seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(size.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            seconds[name].append(_time_block(steps[name], block, dev, cpu_seconds[name]))

    # memory: a separate, untimed pass of two steps each (parameters and AdamW state exist)
    for name in names:
        with peak_memory(dev) as mem:
            _time_block(steps[name], batches[:2], dev)
        out[name].update(peak_step_mib=mem["mib"], memory_measure=mem["what"])

    for name in names:
        tps = [tokens_per_second(s, size.steps, tokens_per_step) for s in seconds[name]]
        r = out[name]
        r.update(tokens_per_s=statistics.median(tps), tokens_per_s_rounds=tps,
                 seconds_per_step=statistics.median(seconds[name]) / size.steps,
                 cpu_seconds_per_step=statistics.median(cpu_seconds[name]) / size.steps,
                 flops_per_token=flops_per_token(r["mfu_params"], cfg.n_layer, cfg.d_model,
                                                 size.seq_len))
        r["mfu"] = (mfu(r["tokens_per_s"], r["mfu_params"], cfg.n_layer, cfg.d_model, size.seq_len,
                        peak_flops) if peak_flops else None)
    result = {
        **out,
        "ratio": out["ours"]["tokens_per_s"] / out["slide"]["tokens_per_s"],
        "ratio_rounds": [o / s for o, s in zip(out["ours"]["tokens_per_s_rounds"],
                                                out["slide"]["tokens_per_s_rounds"])],
        "ln_vocab": ln_v,
        "tokens_per_step": tokens_per_step,
        "batch_size": size.batch_size, "seq_len": size.seq_len,
        "warmup_steps": size.warmup, "rounds": size.rounds, "steps_per_block": size.steps,
        "precision": out["ours"]["precision"],
        "compile": compile,
        "peak_flops": peak_flops,
        "optimizer": f"AdamW(lr={lr}, betas={ADAM_BETAS}, eps={ADAM_EPS}, wd=0.01), clip 1.0",
    }
    if "slide_fp32" in out:
        result["ratio_vs_slide_fp32"] = out["ours"]["tokens_per_s"] / out["slide_fp32"]["tokens_per_s"]
    return result
