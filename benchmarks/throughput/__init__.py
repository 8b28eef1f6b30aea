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

The package reads in the order of a run: :mod:`.measure` (sizes, FLOP arithmetic, timing and
memory on a device), :mod:`.efficiency` (the matmul peak), :mod:`.pretraining`,
:mod:`.finetuning` (per-method step costs) and :mod:`.report` (markdown, files, command line).
"""

from .efficiency import EFFICIENCY_FORMULA, PEAK_SIZES, efficiency, efficiency_from_file, matmul_peak
from .finetuning import LABEL_NAMES, METHODS, PASSES, TEMPLATE, VERBALIZER, finetune_costs, small_tokenizer
from .measure import (
    INIT_LOSS_TOLERANCE,
    PEAK_BF16_FLOPS,
    RESULTS_DIR,
    SIZES,
    BenchSize,
    bench_size,
    device_name,
    device_tag,
    environment,
    finetune_flops_per_step,
    flops_per_token,
    mfu,
    mfu_params,
    peak_flops_for,
    peak_memory,
    sync,
    tokens_per_second,
)
from .pretraining import init_loss, make_pretrain_step, pretraining_throughput
from .report import efficiency_markdown, main, run_benchmark, to_markdown

__all__ = [
    "EFFICIENCY_FORMULA", "INIT_LOSS_TOLERANCE", "LABEL_NAMES", "METHODS", "PASSES", "PEAK_BF16_FLOPS",
    "PEAK_SIZES", "RESULTS_DIR", "SIZES", "TEMPLATE", "VERBALIZER", "BenchSize", "bench_size",
    "device_name", "device_tag", "efficiency", "efficiency_from_file", "efficiency_markdown",
    "environment", "finetune_costs", "finetune_flops_per_step", "flops_per_token", "init_loss",
    "main", "make_pretrain_step", "matmul_peak", "mfu", "mfu_params", "peak_flops_for",
    "peak_memory", "pretraining_throughput", "run_benchmark", "small_tokenizer", "sync",
    "to_markdown", "tokens_per_second",
]
