"""Throughput of ``tutorial_lib``: pretraining against the 2019 slide model, fine-tuning methods.

Three measurements (``benchmarks/README.md`` has the what and why):

* :func:`pretraining_throughput` — training tokens/s and peak memory of our ``TransformerLM``
  (pre-LN, SDPA, batch-first) against :mod:`benchmarks.slide_model` (the 2019 model), built from
  one config, trained with the same step (AdamW, clipping, bf16 autocast where
  :func:`tutorial_lib.runtime.autocast_dtype` says so) in the same process, in **interleaved**
  blocks of steps (ours, slide, slide, ours, ...); the medians over blocks give the ratio
  ours / slide. With a peak FLOP/s figure it also gives the model FLOPs utilisation (:func:`mfu`).
* :func:`finetune_costs` — seconds per fine-tuning step of each method (adapters, TDT, R-Drop,
  manual prompt, DART) relative to plain fine-tuning, through the library's own
  ``training.create_trainer`` step, on random-init models (nothing is pretrained or downloaded).
* :func:`matmul_peak` and :func:`efficiency` — the device's measured matmul peak in bf16 and fp32
  (square matmuls, best of several) and the GFLOP/s that a pretraining step and a fine-tuning
  step achieve, counted analytically (:func:`flops_per_token`, :func:`finetune_flops_per_step`),
  as a fraction of that peak: how close to the hardware limit the tutorial runs.
* :func:`run_benchmark` / the CLI — all of it, written to ``benchmarks/results/<device>-<size>.json``
  and ``.md`` together with the device, the versions and the configuration.

    python -m benchmarks.throughput --size classroom            # CPU, ~2 min on 2 cores
    python -m benchmarks.throughput --size gpu --device cuda [--compile]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch
from torch import nn

from benchmarks.slide_model import SlideTransformerWithLMHead
from tutorial_lib.config import ModelSize, get_scale
from tutorial_lib.methods import adapters, dart, prompting, regularized, tdt
from tutorial_lib.models import TransformerClassifier, TransformerConfig, TransformerLM, count_parameters
from tutorial_lib.params import ADAM_BETAS, ADAM_EPS, decay_groups, make_optimizer
from tutorial_lib.runtime import PeakMemory, autocast, autocast_dtype, cpu_has_fast_bf16, grad_scaler
from tutorial_lib.settings import Budget
from tutorial_lib.tokenization import encode_with_cls, train_wordpiece
from tutorial_lib.training import create_trainer

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SIZES = ("tiny", "classroom", "gpu")
INIT_LOSS_TOLERANCE = 0.5  # nats: |loss at init − ln V| must stay below this for both models

# Dense (no-sparsity) bf16 tensor-core peak per GPU, **vendor datasheet numbers** (NVIDIA H100,
# H200 and A100 datasheets). Matched against torch.cuda.get_device_name(), first match wins.
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756e12),  # datasheet: 1,513 TFLOPS with sparsity
    ("H100", 989e12),  # SXM; datasheet: 1,979 TFLOPS with sparsity
    ("H200", 989e12),  # SXM; datasheet: 1,979 TFLOPS with sparsity
    ("A100", 312e12),  # SXM and PCIe; datasheet: 624 TFLOPS with sparsity
)


# --- sizes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchSize:
    """Model sizes, batch shapes and the number of warm-up / timed steps of one benchmark size."""

    name: str
    model: ModelSize  # the same sizes as a tutorial_lib scale
    seq_len: int  # pretraining
    batch_size: int
    ft_seq_len: int  # fine-tuning: every row is exactly this long
    ft_batch_size: int
    warmup: int  # pretraining steps before timing, per model
    rounds: int  # interleaved rounds; each round times one block of each model
    steps: int  # steps per block
    ft_warmup: int
    ft_rounds: int
    ft_steps: int

    def model_config(self, causal: bool = True, vocab_size: int | None = None) -> TransformerConfig:
        m = self.model
        return TransformerConfig(
            vocab_size=vocab_size or m.vocab_size, d_model=m.d_model, n_layer=m.n_layer,
            n_head=m.n_head, d_ff=m.d_ff, max_len=m.max_len, dropout=m.dropout,
            causal=causal, pad_id=0,
        )


def bench_size(name: str) -> BenchSize:
    """``tiny`` (CI: seconds), or the model and pretraining batch of a ``tutorial_lib`` scale."""
    if name == "tiny":
        tiny = ModelSize(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_ff=64, max_len=32,
                         dropout=0.1)
        return BenchSize("tiny", tiny, seq_len=16, batch_size=4, ft_seq_len=16, ft_batch_size=4,
                         warmup=1, rounds=2, steps=2, ft_warmup=1, ft_rounds=2, ft_steps=1)
    if name not in SIZES:
        raise ValueError(f"unknown size {name!r}: choose one of {', '.join(SIZES)}")
    scale = get_scale(name)
    m, p = scale.model, scale.pretrain
    timing = {"classroom": dict(warmup=3, rounds=8, steps=3, ft_warmup=2, ft_rounds=4, ft_steps=3),
              "gpu": dict(warmup=10, rounds=5, steps=20, ft_warmup=5, ft_rounds=5, ft_steps=10)}
    # fine-tuning rows: short sentences (TREC/SST-2 are ~10-25 tokens) on the CPU, longer on a GPU
    ft_seq = {"classroom": 32, "gpu": 128}[name]
    return BenchSize(name, m, seq_len=p.seq_len, batch_size=p.batch_size, ft_seq_len=ft_seq,
                     ft_batch_size=Budget().batch_size, **timing[name])  # every notebook's batch


# --- arithmetic ------------------------------------------------------------------------------------


def tokens_per_second(seconds: float, steps: int, tokens_per_step: int) -> float:
    """Throughput of one timed block."""
    return steps * tokens_per_step / seconds


def flops_per_token(n_params: int, n_layer: int, d_model: int, seq_len: int) -> float:
    """Training FLOPs per token, 6N + 12·L·d·T (PaLM, Chowdhery et al. 2022, App. B; nanoGPT's
    ``estimate_mfu``): 6N for the forward + backward matmuls with the N weights, 12·L·d·T for the
    attention scores and the weighted sum (counted in full, as is the convention, even though a
    causal mask skips half). N is the non-embedding count in nanoGPT's sense: the tied token
    embedding counts (it is the output layer's matmul), the position embedding does not."""
    return 6.0 * n_params + 12.0 * n_layer * d_model * seq_len


def finetune_flops_per_step(cfg: TransformerConfig, batch_size: int, seq_len: int,
                            num_labels: int) -> float:
    """Training FLOPs of one step of ``TransformerClassifier`` (plain fine-tuning), counted from the
    config: per token 6·L·(4d² + 2d·d_ff) (forward + backward through the attention projections
    and the feed-forward) + 12·L·d·T (attention scores and weighted sum), and per row 6·d·labels
    for the head on the [CLS] state. The token embedding is a lookup (its gradient a scatter, no
    matmul) and the classifier's tied LM head is not used, so neither counts, unlike in
    :func:`flops_per_token` for the LM."""
    L, d = cfg.n_layer, cfg.d_model
    per_token = 6.0 * L * (4 * d * d + 2 * d * cfg.d_ff) + 12.0 * L * d * seq_len
    return batch_size * seq_len * per_token + batch_size * 6.0 * d * num_labels


def mfu(tokens_per_s: float, n_params: int, n_layer: int, d_model: int, seq_len: int,
        peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the device's peak FLOP/s (0..1)."""
    return tokens_per_s * flops_per_token(n_params, n_layer, d_model, seq_len) / peak_flops


def peak_flops_for(device_name: str) -> float | None:
    """Datasheet dense bf16 peak of a GPU name (see :data:`PEAK_BF16_FLOPS`); None if unknown."""
    for key, value in PEAK_BF16_FLOPS:
        if key.lower() in device_name.lower():
            return value
    return None


def mfu_params(model: nn.Module) -> int:
    """N for :func:`flops_per_token`: all parameters (tied ones once) minus position embeddings."""
    pos = [m for name, m in model.named_modules() if name.endswith(("pos_emb", "position_embeddings"))]
    return count_parameters(model) - sum(p.numel() for m in pos for p in m.parameters())


# --- device, timing, memory ----------------------------------------------------------------------


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def device_name(dev: torch.device) -> str:
    """The GPU's name, or the CPU's model name (``/proc/cpuinfo``) and its thread count."""
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), name)
    return name


def device_tag(dev: torch.device) -> str:
    """A file-name tag: ``cpu-amd-epyc``, ``cuda-nvidia-h100-80gb-hbm3`` ..."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name(dev).lower()).strip("-")[:40].strip("-")
    return f"{dev.type}-{slug}" if slug else dev.type


@contextlib.contextmanager
def peak_memory(dev: torch.device) -> Iterator[dict]:
    """Peak memory growth of the block in MiB, into the yielded dict (``mib``, ``what``).

    CUDA: ``torch.cuda.max_memory_allocated`` minus what was allocated on entry. CPU: the
    library's ``runtime.PeakMemory`` (peak RSS growth, with the watermark reset on entry).
    """
    out = {"mib": float("nan"), "what": ""}
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = torch.cuda.memory_allocated(dev)
        yield out
        torch.cuda.synchronize(dev)
        out.update(mib=(torch.cuda.max_memory_allocated(dev) - start) / 2**20,
                   what="CUDA tensors: peak minus allocated on entry")
    elif not torch.cuda.is_available():
        with PeakMemory() as mem:
            yield out
        out.update(mib=mem.peak_mib, what=mem.what)
    else:  # a CPU run on a GPU machine: PeakMemory would measure the GPU
        yield out
        out["what"] = "not measured (CPU run on a CUDA machine)"


# --- the device's matmul peak and the fraction of it we reach --------------------------------------

PEAK_SIZES = (1024, 2048, 3072, 4096)
EFFICIENCY_FORMULA = ("training FLOPs = 6·N·tokens + 12·L·d·T·tokens (forward + backward); "
                      "pretraining N = parameters without the position embedding (tied head once), "
                      "fine-tuning N = L·(4d² + 2d·d_ff) plus the head; "
                      "peak = best 2n³/t over square n×n matmuls")


def matmul_peak(dev: torch.device | str = "cpu",
                dtypes: Sequence[torch.dtype] = (torch.bfloat16, torch.float32),
                sizes: Sequence[int] = PEAK_SIZES, repeats: int = 4, seed: int = 0) -> dict:
    """The device's attainable matmul FLOP/s per dtype: square ``n×n @ n×n`` products for each
    ``n`` in ``sizes``, each timed ``repeats`` times after one warm-up, best time kept (best of
    several: on a shared machine the fastest run is the one least disturbed). Returns
    ``{"bf16": {"gflops": best over sizes, "by_size": {n: GFLOP/s}}, "fp32": ...}``.

    On a CPU each dtype also gets ``gflops_cpu`` (and ``by_size_cpu``): the FLOPs over the
    process's CPU time divided by the thread count, i.e. the rate with every thread on a core of
    its own. Other jobs on the machine slow the wall clock but hardly the CPU time, so fractions
    of this peak stay meaningful on a shared machine (see :func:`efficiency`)."""
    dev = torch.device(dev)
    threads = torch.get_num_threads() if dev.type == "cpu" else None
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, dict] = {}
    for dtype in dtypes:
        by_size, by_size_cpu = {}, {}
        for n in sizes:
            a = torch.randn(n, n, generator=gen).to(dev, dtype)
            b = torch.randn(n, n, generator=gen).to(dev, dtype)
            best = best_cpu = math.inf
            for i in range(repeats + 1):
                _sync(dev)
                start, start_cpu = time.perf_counter(), time.process_time()
                torch.mm(a, b)
                _sync(dev)
                if i:  # the first product is the warm-up
                    best = min(best, time.perf_counter() - start)
                    best_cpu = min(best_cpu, time.process_time() - start_cpu)
            by_size[n] = 2.0 * n**3 / best / 1e9
            if threads:
                by_size_cpu[n] = 2.0 * n**3 / (max(best_cpu, 1e-9) / threads) / 1e9
            del a, b
        out[_dtype_name(dtype)] = {"gflops": max(by_size.values()), "by_size": by_size}
        if threads:
            out[_dtype_name(dtype)].update(gflops_cpu=max(by_size_cpu.values()), by_size_cpu=by_size_cpu)
    return out


def _dtype_name(dtype: torch.dtype | None) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", None: "fp32"}[dtype]


def efficiency(result: dict, peak: dict, threads: int | None = None, peak_clock: str = "wall clock") -> dict:
    """Achieved GFLOP/s of each pretraining participant and of plain fine-tuning, and their
    fractions of the measured matmul peak: in their own precision, in bf16 and in fp32.

    Two clocks: the wall clock (``gflops``, ``of_peak_*``), and on a CPU with ``threads`` given,
    the process CPU time divided by ``threads`` (``gflops_cpu``, ``of_peak_*_cpu``: the rate with
    every thread on a core of its own, against the peak measured the same way). On a machine
    shared with other jobs only the second kind of fraction can be trusted."""
    def rates(flops: float, seconds: float, cpu_seconds: float | None, precision: str) -> dict:
        own = {"bfloat16": "bf16", "float16": "fp16"}.get(precision, precision)
        r = {"precision": own, "gflops": flops / seconds / 1e9}
        r["of_peak_own_precision"] = r["gflops"] / peak[own]["gflops"] if own in peak else None
        r.update({f"of_peak_{k}": r["gflops"] / v["gflops"] for k, v in peak.items()})
        if threads and cpu_seconds and all("gflops_cpu" in v for v in peak.values()):
            r["gflops_cpu"] = flops / (cpu_seconds / threads) / 1e9
            r["of_peak_own_precision_cpu"] = (r["gflops_cpu"] / peak[own]["gflops_cpu"]
                                              if own in peak else None)
            r.update({f"of_peak_{k}_cpu": r["gflops_cpu"] / v["gflops_cpu"] for k, v in peak.items()})
        return r

    pre = result.get("pretraining") or {}
    out = {"formula": EFFICIENCY_FORMULA, "threads": threads, "peak_clock": peak_clock,
           "peak_gflops": {k: v["gflops"] for k, v in peak.items()},
           "peak_by_size": {k: v["by_size"] for k, v in peak.items()},
           "pretraining": {}, "finetuning": {}}
    if all("gflops_cpu" in v for v in peak.values()):
        out["peak_gflops_cpu"] = {k: v["gflops_cpu"] for k, v in peak.items()}
        out["peak_by_size_cpu"] = {k: v["by_size_cpu"] for k, v in peak.items()}
    for kind in ("ours", "slide", "slide_fp32"):
        if kind in pre:
            r = pre[kind]
            flops = pre["tokens_per_step"] * r["flops_per_token"]
            out["pretraining"][kind] = rates(flops, r["seconds_per_step"], r.get("cpu_seconds_per_step"),
                                             r["precision"])
    for row in result.get("finetune") or []:
        if row.get("flops_per_step"):
            out["finetuning"][row["method"]] = rates(row["flops_per_step"], row["seconds_per_step"],
                                                     row.get("cpu_seconds_per_step"), row["precision"])
    return out


def efficiency_from_file(path: str | Path, dev: torch.device | str = "cpu",
                         sizes: Sequence[int] = PEAK_SIZES, repeats: int = 4) -> dict:
    """The steps of an earlier result file against the matmul peak measured *now*.

    For a shared CPU, where timing training steps needs a quiet machine but the peak can still be
    measured on the CPU-time clock (:func:`matmul_peak`'s ``gflops_cpu``: what the threads do when
    each has a core to itself). The stored steps' wall-clock GFLOP/s are compared with that peak,
    so the fractions are lower bounds when the stored run itself was disturbed. On a GPU the
    wall-clock peak is used."""
    stored = json.loads(Path(path).read_text())
    dev = torch.device(dev)
    raw = matmul_peak(dev, sizes=sizes, repeats=repeats)
    cpu_clock = all("gflops_cpu" in v for v in raw.values())
    peak = ({k: {"gflops": v["gflops_cpu"], "by_size": v["by_size_cpu"]} for k, v in raw.items()}
            if cpu_clock else raw)
    cfg, pre = stored["config"], stored["pretraining"]
    model = TransformerConfig(**{k: cfg[k] for k in ("vocab_size", "d_model", "n_layer", "n_head",
                                                     "d_ff", "max_len")})
    rows = []
    for row in stored.get("finetune") or []:  # files written before the efficiency figures
        row = dict(row)
        row.setdefault("precision", pre["precision"])
        if row["method"] == "fine-tuning" and not row.get("flops_per_step"):
            row["flops_per_step"] = finetune_flops_per_step(model, row["batch_size"], row["seq_len"],
                                                            len(LABEL_NAMES))
        rows.append(row)
    steps = {"pretraining": {k: {f: v for f, v in r.items() if f != "cpu_seconds_per_step"}
                             if isinstance(r, dict) else r for k, r in pre.items()},
             "finetune": rows}
    return {
        "size": stored["size"],
        "steps_from": {"file": Path(path).name, "environment": stored["environment"]},
        "peak_measured": {"environment": environment(dev), "clock": "cpu time" if cpu_clock else "wall",
                          "raw": raw},
        "efficiency": efficiency(steps, peak, peak_clock=(
            f"CPU-time clock (process CPU seconds / {torch.get_num_threads()} threads)" if cpu_clock
            else "wall clock")),
    }


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
    _sync(dev)
    start, start_cpu = time.perf_counter(), time.process_time()
    for ids in batches:
        step(ids)
    _sync(dev)
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


# --- fine-tuning: cost of each method per step -----------------------------------------------------

_WORDS = ("the movie was good and fun . a film about people who were bad at it , "
          "but the story is great , the actors are fine and the music was terrible . "
          "It was a dog and a cat in the city of London , what is the name of ?").split()
TEMPLATE = "<x> It was [MASK] ."
VERBALIZER = {"negative": "bad", "positive": "good"}
LABEL_NAMES = ["negative", "positive"]
METHODS = ("fine-tuning", "adapters (m=64)", "TDT", "R-Drop", "manual prompt", "DART")
PASSES = {"fine-tuning": 1, "adapters (m=64)": 1, "TDT": 3, "R-Drop": 2, "manual prompt": 1,
          "DART": 2}


def small_tokenizer():
    """A WordPiece vocabulary trained in well under a second on a few synthetic lines."""
    rng = random.Random(0)
    lines = [" ".join(rng.choice(_WORDS) for _ in range(12)) for _ in range(200)]
    return train_wordpiece(lines + [" ".join(_WORDS)] * 4, vocab_size=200)


def _texts(n: int, n_words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(n_words)) for _ in range(n)]


@dataclass
class _Method:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch: dict[str, torch.Tensor]
    loss_fn: Callable | None = None


def _build_method(name: str, size: BenchSize, tok, texts: list[str], labels: list[int],
                  lr: float, weight_decay: float = 0.01, seed: int = 0) -> _Method:
    """A random-init model, its optimiser and one batch (every row ``ft_seq_len`` tokens long)."""
    torch.manual_seed(seed)
    vocab = max(size.model.vocab_size, len(tok))
    if name in ("manual prompt", "DART"):
        mlm = prompting.OurMaskedLM(TransformerLM(size.model_config(False, vocab)), tok)
        label_ids = prompting.verbalizer_ids(mlm, VERBALIZER, LABEL_NAMES)
        if name == "DART":
            model = dart.DARTClassifier(mlm, TEMPLATE, label_ids, fluency_weight=1.0, mask_rate=0.1)
            groups = model.param_groups(prompt_lr=lr)(lr, weight_decay)
        else:
            model = prompting.PromptClassifier(mlm, TEMPLATE, label_ids)
            groups = decay_groups(model, weight_decay)
        rows = model.encode([{"text": t, "label": y} for t, y in zip(texts, labels)],
                            max_len=size.ft_seq_len)
        batch = prompting.prompt_collate(mlm.pad_id)(rows)
        opt = torch.optim.AdamW(groups, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS)
        return _Method(model, opt, batch)

    model = TransformerClassifier(size.model_config(True, vocab), num_labels=len(LABEL_NAMES))
    ids = encode_with_cls(tok, texts, size.ft_seq_len)
    batch = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones(len(ids), len(ids[0]),
                                                                          dtype=torch.long),
             "labels": torch.tensor(labels)}
    kwargs: dict = {}
    if name == "adapters (m=64)":
        kwargs = {"prepare": adapters.prepare_adapters(64)}
    elif name == "TDT":
        kwargs = tdt.method()
    elif name == "R-Drop":
        kwargs = regularized.rdrop(alpha=1.0)
    elif name != "fine-tuning":
        raise ValueError(f"unknown method {name!r}: choose one of {METHODS}")
    if "prepare" in kwargs:
        kwargs["prepare"](model)
    return _Method(model, make_optimizer(model, lr, weight_decay), batch, kwargs.get("loss_fn"))


def finetune_costs(
    size: BenchSize | str = "tiny",
    dev: torch.device | str = "cpu",
    *,
    methods: Sequence[str] = METHODS,
    amp: torch.dtype | None | str = "auto",
    lr: float = 1e-3,
    seed: int = 0,
) -> list[dict]:
    """Median seconds per fine-tuning step of each method, relative to plain fine-tuning (1.0).

    Every method trains through ``training.create_trainer`` (the notebooks' step: autocast,
    backward, clip 1.0, AdamW) on the same texts and labels, every row exactly ``ft_seq_len``
    tokens, same model size, random init; blocks of steps interleaved over the methods. Plain
    fine-tuning and the prompt methods differ in their backbone (causal LM + [CLS] head vs masked
    LM + [MASK]), as in the notebooks.
    """
    size = bench_size(size) if isinstance(size, str) else size
    dev = torch.device(dev)
    amp = autocast_dtype(dev) if amp == "auto" else amp
    if "fine-tuning" not in methods:
        methods = ("fine-tuning", *methods)
    tok = small_tokenizer()
    texts = _texts(size.ft_batch_size, size.ft_seq_len + 8, seed)
    labels = [i % len(LABEL_NAMES) for i in range(size.ft_batch_size)]
    built = {name: _build_method(name, size, tok, texts, labels, lr, seed=seed) for name in methods}

    def block(name: str, n: int, cpu: list[float] | None = None) -> float:
        m = built[name]
        trainer = create_trainer(m.model, m.optimizer, device=dev, amp_dtype=amp, max_norm=1.0,
                                 **({"loss_fn": m.loss_fn} if m.loss_fn else {}))
        _sync(dev)
        start, start_cpu = time.perf_counter(), time.process_time()
        trainer.run([m.batch] * n, max_epochs=1)
        _sync(dev)
        if cpu is not None:
            cpu.append((time.process_time() - start_cpu) / n)
        return time.perf_counter() - start

    for m in built.values():
        m.model.to(dev)
        m.batch = {k: v.to(dev) for k, v in m.batch.items()}
    for name in methods:
        block(name, size.ft_warmup)
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    cpu_seconds: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(size.ft_rounds):
        for name in (methods if r % 2 == 0 else tuple(reversed(methods))):
            seconds[name].append(block(name, size.ft_steps, cpu_seconds[name]) / size.ft_steps)
    memory = {}
    for name in methods:
        with peak_memory(dev) as mem:
            block(name, 1)
        memory[name] = mem["mib"]

    base = statistics.median(seconds["fine-tuning"])
    rows = []
    for name in methods:
        m = built[name]
        step = statistics.median(seconds[name])
        rows.append({
            "method": name, "seconds_per_step": step, "relative": step / base,
            "cpu_seconds_per_step": statistics.median(cpu_seconds[name]),
            "seconds_rounds": seconds[name], "forward_passes": PASSES.get(name),
            "trainable_params": count_parameters(m.model, trainable_only=True),
            "total_params": count_parameters(m.model), "peak_step_mib": memory[name],
            "seq_len": int(m.batch["input_ids"].shape[1]),
            "batch_size": int(m.batch["input_ids"].shape[0]),
            "precision": str(amp).removeprefix("torch.") if amp else "fp32",
            # counted for plain fine-tuning only: the other methods change the work per step
            "flops_per_step": (finetune_flops_per_step(m.model.config, *m.batch["input_ids"].shape,
                                                       num_labels=len(LABEL_NAMES))
                               if name == "fine-tuning" else None),
        })
    return rows


# --- reports ---------------------------------------------------------------------------------------


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_revision() -> str | None:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, timeout=10, cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(dev: torch.device) -> dict:
    """Where the numbers come from: device, versions, threads, date."""
    env = {
        "device": dev.type, "device_name": device_name(dev),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__, "python": platform.python_version(),
        "tutorial_lib": _version("tutorial_lib"), "pytorch-ignite": _version("pytorch-ignite"),
        "platform": platform.platform(), "git": _git_revision(),
    }
    if hasattr(os, "getloadavg"):  # other jobs on the machine: read the numbers with this in mind
        env["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    if dev.type == "cpu":
        env["torch_threads"] = torch.get_num_threads()
        env["cpu_count"] = os.cpu_count()
        env["cpu_fast_bf16"] = cpu_has_fast_bf16()  # AMX or AVX512-BF16: autocast is on
    else:
        env["cuda"] = torch.version.cuda
    return env


def _efficiency_lines(eff: dict) -> list[str]:
    """The markdown section of :func:`efficiency`'s figures."""
    lines: list[str] = []
    sizes = ", ".join(str(n) for n in next(iter(eff["peak_by_size"].values())))
    cpu = "peak_gflops_cpu" in eff

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.1f} %"

    def peaks(key: str) -> str:
        return ", ".join(f"{k} {v:,.1f} GFLOP/s" for k, v in eff[key].items())

    lines += ["## Efficiency: achieved GFLOP/s against the measured matmul peak", "",
              f"Peak (best square matmul, n = {sizes}), {eff.get('peak_clock', 'wall clock')}: "
              f"{peaks('peak_gflops')}."]
    if cpu:
        lines += [f"The same on the CPU-time clock (process CPU seconds / {eff['threads']} threads, "
                  f"robust to other jobs on the machine): {peaks('peak_gflops_cpu')}."]
    lines += ["", f"FLOPs: {eff['formula']}.", "",
              "| step | precision | GFLOP/s (wall) | of the peak in its precision | of bf16 peak | "
              "of fp32 peak |" + (" GFLOP/s (CPU time) | of the peak in its precision | "
                                  "of bf16 peak | of fp32 peak |" if cpu else ""),
              "|---|---|---|---|---|---|" + ("---|---|---|---|" if cpu else "")]
    names = {"ours": "pretraining, ours", "slide": "pretraining, 2019 slide model",
             "slide_fp32": "pretraining, 2019 slide model in fp32"}
    rows = [(names[k], r) for k, r in eff["pretraining"].items()]
    rows += [(f"{k} (classifier)", r) for k, r in eff["finetuning"].items()]
    for label, r in rows:
        line = (f"| {label} | {r['precision']} | {r['gflops']:,.1f} | "
                f"{pct(r['of_peak_own_precision'])} | {pct(r.get('of_peak_bf16'))} | "
                f"{pct(r.get('of_peak_fp32'))} |")
        if cpu and "gflops_cpu" in r:
            line += (f" {r['gflops_cpu']:,.1f} | {pct(r['of_peak_own_precision_cpu'])} | "
                     f"{pct(r.get('of_peak_bf16_cpu'))} | {pct(r.get('of_peak_fp32_cpu'))} |")
        lines.append(line)
    lines.append("")
    return lines


def to_markdown(result: dict) -> str:
    """The result as a short markdown report (tables for pretraining and fine-tuning)."""
    env, cfg = result["environment"], result["config"]
    lines = [f"# Benchmark: {result['size']} on {env['device_name']}", "",
             f"{env['date']} · torch {env['torch']} · python {env['python']} · git {env['git']}"
             + (f" · {env['torch_threads']} threads" if "torch_threads" in env else "")
             + (f" · load average {env['load_average_1_5_15min'][0]} at the start, "
                f"{env['load_average_at_end'][0]} at the end" if "load_average_at_end" in env else ""),
             "",
             "Model: " + ", ".join(f"{k}={cfg[k]}" for k in
                                   ("vocab_size", "d_model", "n_layer", "n_head", "d_ff", "max_len")),
             ""]
    pre = result.get("pretraining")
    if pre:
        lines += [f"## Pretraining ({pre['batch_size']}×{pre['seq_len']} tokens/step, "
                  f"{pre['precision']}{', torch.compile' if pre['compile'] else ''}; "
                  f"median of {pre['rounds']} interleaved blocks of {pre['steps_per_block']} steps)",
                  "",
                  "| model | precision | tokens/s | s/step | peak step memory (MiB) | loss at init (ln V = "
                  f"{pre['ln_vocab']:.3f}) | params | MFU |",
                  "|---|---|---|---|---|---|---|---|"]
        labels = {"ours": "ours (`TransformerLM`)", "slide": "2019 slide model",
                  "slide_fp32": "2019 slide model, fp32 (as trained in 2019)"}
        for kind, label in labels.items():
            if kind not in pre:
                continue
            r = pre[kind]
            m = f"{100 * r['mfu']:.1f} %" if r["mfu"] is not None else "—"
            lines.append(f"| {label} | {r['precision']} | {r['tokens_per_s']:,.0f} | "
                         f"{r['seconds_per_step']:.4f} | {r['peak_step_mib']:.1f} | "
                         f"{r['init_loss']:.3f} | {r['params']:,} | {m} |")
        lines += ["", f"**Ratio ours / slide (same precision): {pre['ratio']:.2f}×** (per round: "
                  + ", ".join(f"{x:.2f}" for x in pre["ratio_rounds"]) + ")", ""]
        if "ratio_vs_slide_fp32" in pre:
            lines += [f"Ours ({pre['precision']}) / slide model in fp32: "
                      f"{pre['ratio_vs_slide_fp32']:.2f}× (precision, not architecture)", ""]
    ft = result.get("finetune")
    if ft:
        lines += [f"## Fine-tuning cost per step ({ft[0]['batch_size']}×{ft[0]['seq_len']} tokens, "
                  "relative to plain fine-tuning)", "",
                  "| method | s/step | relative | forward passes | trainable params | "
                  "peak step memory (MiB) |", "|---|---|---|---|---|---|"]
        for r in ft:
            lines.append(f"| {r['method']} | {r['seconds_per_step']:.4f} | {r['relative']:.2f}× | "
                         f"{r['forward_passes']} | {r['trainable_params']:,} | "
                         f"{r['peak_step_mib']:.1f} |")
        lines.append("")
    if result.get("efficiency"):
        lines += _efficiency_lines(result["efficiency"])
    return "\n".join(lines)


def efficiency_markdown(result: dict) -> str:
    """The report of :func:`efficiency_from_file`: provenance of the steps and of the peak, then
    the efficiency table."""
    steps, peak = result["steps_from"]["environment"], result["peak_measured"]["environment"]
    load = peak.get("load_average_1_5_15min")
    lines = [f"# Efficiency: {result['size']} on {peak['device_name']}", "",
             f"* steps: `{result['steps_from']['file']}`, {steps['date']}, torch {steps['torch']}, "
             f"{steps.get('torch_threads', '?')} threads",
             f"* peak: measured {peak['date']} on the {result['peak_measured']['clock']} clock, "
             f"torch {peak['torch']}" + (f", load average {load[0]}" if load else ""), ""]
    return "\n".join(lines + _efficiency_lines(result["efficiency"]))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one


def run_benchmark(
    size: str = "tiny",
    device: str | None = None,
    *,
    compile: bool = False,
    out: str | Path | None = RESULTS_DIR,
    finetune: bool = True,
    peak_flops: float | None = None,
    measure_peak: bool = True,
) -> dict:
    """Both benchmarks at ``size``, and (``measure_peak``) the device's matmul peak with the
    fraction of it each step reaches; written to ``out/<device-tag>-<size>[-compile].json/.md``."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bs = bench_size(size)
    # the peak first, on a quiet device; tiny sizes for the tiny (CI) benchmark
    peak = (matmul_peak(dev, sizes=(64, 128) if size == "tiny" else PEAK_SIZES,
                        repeats=2 if size == "tiny" else 4) if measure_peak else None)
    result = {
        "size": size, "environment": environment(dev),
        "config": {**dataclasses.asdict(bs.model),
                   **{k: v for k, v in dataclasses.asdict(bs).items() if k != "model"}},
        "pretraining": pretraining_throughput(bs, dev, compile=compile, peak_flops=peak_flops),
        "finetune": finetune_costs(bs, dev) if finetune else None,
    }
    threads = torch.get_num_threads() if dev.type == "cpu" else None
    result["efficiency"] = efficiency(result, peak, threads) if peak else None
    if hasattr(os, "getloadavg"):
        result["environment"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{device_tag(dev)}-{size}" + ("-compile" if compile else "")
        _write_atomic(out / f"{stem}.json", json.dumps(result, indent=2) + "\n")
        _write_atomic(out / f"{stem}.md", to_markdown(result))
        result["files"] = [str(out / f"{stem}.json"), str(out / f"{stem}.md")]
    return result


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=SIZES, default="tiny")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: cuda if available, else cpu")
    parser.add_argument("--compile", action="store_true", help="torch.compile both LMs")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="results directory")
    parser.add_argument("--no-finetune", action="store_true", help="pretraining only")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="the device's peak TFLOP/s for MFU (default: datasheet table for GPUs)")
    parser.add_argument("--no-peak", action="store_true",
                        help="skip measuring the matmul peak (and the efficiency figures)")
    parser.add_argument("--efficiency-from", type=Path, metavar="RESULT.json",
                        help="time nothing but the matmul peak; report the steps of this earlier "
                             "result against it (to <its stem>-efficiency.json/.md)")
    args = parser.parse_args(argv)
    if args.efficiency_from:
        result = efficiency_from_file(args.efficiency_from, args.device or "cpu")
        stem = Path(args.out) / f"{args.efficiency_from.stem}-efficiency"
        report = efficiency_markdown(result)
        _write_atomic(stem.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
        _write_atomic(stem.with_suffix(".md"), report)
        print(report)
        return result
    result = run_benchmark(args.size, args.device, compile=args.compile, out=args.out,
                           finetune=not args.no_finetune,
                           peak_flops=args.peak_tflops * 1e12 if args.peak_tflops else None,
                           measure_peak=not args.no_peak)
    print(to_markdown(result))
    pre = result["pretraining"]
    if not (pre["ours"]["init_loss_ok"] and pre["slide"]["init_loss_ok"]):
        print(f"WARNING: a loss at init is far from ln V = {pre['ln_vocab']:.3f}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
