"""The device's measured matmul peak and the fraction of it a training step reaches."""


from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from tutorial_lib.models import TransformerConfig

from .finetuning import LABEL_NAMES
from .measure import environment, finetune_flops_per_step, sync

# --- the device's matmul peak and the fraction of it we reach --------------------------------------

PEAK_SIZES = (1024, 2048, 3072, 4096)
GPU_PEAK_SIZES = (2048, 4096, 8192)  # a GPU's tensor cores need 8192³ to approach their peak
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
                sync(dev)
                start, start_cpu = time.perf_counter(), time.process_time()
                torch.mm(a, b)
                sync(dev)
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
