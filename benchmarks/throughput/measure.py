"""Benchmark sizes, the FLOP arithmetic, and timing and memory on a device."""


from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import platform
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch
from torch import nn

from tutorial_lib.models import TransformerConfig, count_parameters
from tutorial_lib.pretraining_settings import PretrainingSettings
from tutorial_lib.runtime import PeakMemory, cpu_has_fast_bf16
from tutorial_lib.settings import Budget

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
SIZES = ("tiny", "classroom", "gpu", "paper")
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
    model: TransformerConfig  # the same sizes as a tutorial_lib scale's PretrainingSettings
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
        return dataclasses.replace(self.model, vocab_size=vocab_size or self.model.vocab_size,
                                   causal=causal, pad_id=0)


def bench_size(name: str) -> BenchSize:
    """``tiny`` (CI: seconds), or the model and pretraining batch of a ``tutorial_lib`` scale."""
    if name == "tiny":
        tiny = TransformerConfig(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_ff=64,
                                 max_len=32, dropout=0.1)
        return BenchSize("tiny", tiny, seq_len=16, batch_size=4, ft_seq_len=16, ft_batch_size=4,
                         warmup=1, rounds=2, steps=2, ft_warmup=1, ft_rounds=2, ft_steps=1)
    if name not in SIZES:
        raise ValueError(f"unknown size {name!r}: choose one of {', '.join(SIZES)}")
    p = PretrainingSettings.at(name)
    m = p.model
    timing = {"classroom": dict(warmup=3, rounds=8, steps=3, ft_warmup=2, ft_rounds=4, ft_steps=3),
              "gpu": dict(warmup=10, rounds=5, steps=20, ft_warmup=5, ft_rounds=5, ft_steps=10)}
    timing["paper"] = timing["gpu"]  # the 2019 model and batch (16 layers, d = 410, 8 x 256): a GPU's
    # fine-tuning rows: short sentences (TREC/SST-2 are ~10-25 tokens) on the CPU, longer on a GPU
    ft_seq = {"classroom": 32, "gpu": 128, "paper": 128}[name]
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


def sync(dev: torch.device) -> None:
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
        env["cpu_fast_bf16"] = cpu_has_fast_bf16()  # bf16 instructions that measure faster: autocast is on
    else:
        env["cuda"] = torch.version.cuda
    return env
