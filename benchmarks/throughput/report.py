"""The environment, the markdown reports, :func:`run_benchmark` and the command line."""


from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from tutorial_lib.pretraining_settings import SIZE_FIELDS

from .efficiency import GPU_PEAK_SIZES, PEAK_SIZES, efficiency, efficiency_from_file, matmul_peak
from .finetuning import finetune_costs
from .measure import RESULTS_DIR, SIZES, bench_size, device_tag, environment
from .pretraining import pretraining_throughput


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
    sizes = (64, 128) if size == "tiny" else GPU_PEAK_SIZES if dev.type == "cuda" else PEAK_SIZES
    peak = matmul_peak(dev, sizes=sizes, repeats=2 if size == "tiny" else 4) if measure_peak else None
    result = {
        "size": size, "environment": environment(dev),
        "config": {**{k: getattr(bs.model, k) for k in SIZE_FIELDS},
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
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.throughput",
        description="Throughput of tutorial_lib: pretraining against the 2019 slide model, "
                    "fine-tuning methods.")
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
