"""Where and how we compute: device, mixed precision, seeds, and the header every notebook prints."""

from __future__ import annotations

import contextlib
import os
import platform
import random
from importlib import metadata

import numpy as np
import torch

from .config import Scale

PRECISION_ENV_VAR = "TUTORIAL_PRECISION"  # "auto" (default), "bf16", "fp16" or "fp32"
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
# bf16 tensor cores arrived with Ampere (compute capability 8.0). Below that (T4 = 7.5, V100 = 7.0)
# torch.cuda.is_bf16_supported() still answers True, but bf16 is emulated and slow, while fp16
# runs on the tensor cores: there we use fp16 autocast with a gradient scaler.
CUDA_BF16_MIN_CAPABILITY = (8, 0)


def device() -> torch.device:
    """The accelerator if there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cpu_has_fast_bf16() -> bool:
    """True when this CPU runs bf16 matmuls natively (AMX or AVX512-BF16)."""
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def choose_precision(
    device_type: str,
    *,
    capability: tuple[int, int] | None = None,
    cpu_fast_bf16: bool = False,
    override: str = "auto",
) -> torch.dtype | None:
    """The autocast dtype for a device, from facts passed in (so that every case is testable).

    ========================================  ===========================================
    device                                    autocast
    ========================================  ===========================================
    CUDA, compute capability >= 8.0           bf16 (A100, L4, RTX 30xx/40xx, H100, ...)
    CUDA, compute capability < 8.0            fp16 + gradient scaler (T4, V100, P100)
    CPU with AVX512-BF16 or AMX               bf16
    any other CPU                             None: plain fp32 (bf16 would be *slower*)
    ========================================  ===========================================

    ``override`` (``TUTORIAL_PRECISION``) other than ``"auto"`` wins: ``"bf16"``, ``"fp16"`` or
    ``"fp32"`` (returned as None). fp16 needs :func:`grad_scaler` in the training step.
    """
    choice = (override or "auto").strip().lower()
    if choice not in PRECISIONS:
        raise ValueError(f"{PRECISION_ENV_VAR}={override!r}: choose one of {', '.join(PRECISIONS)}")
    if choice != "auto":
        return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[choice]
    if device_type == "cuda":
        if capability is None:
            raise ValueError("choose_precision: a CUDA device needs its compute capability")
        return torch.bfloat16 if tuple(capability) >= CUDA_BF16_MIN_CAPABILITY else torch.float16
    if device_type == "cpu":
        return torch.bfloat16 if cpu_fast_bf16 else None
    return None  # other backends (mps, xpu, ...): fp32 until someone measures them


def autocast_dtype(dev: torch.device | None = None) -> torch.dtype | None:
    """:func:`choose_precision` for ``dev`` (default :func:`device`) on this machine.

    On this project's CPUs a bf16 matmul is ~3x faster than fp32; on a CPU without bf16
    instructions autocast would be *slower*, so we only turn it on where it helps. On a GPU below
    compute capability 8.0 (Colab's free T4) it is fp16, with a gradient scaler in the trainer.
    Override with ``TUTORIAL_PRECISION=fp32``, ``bf16`` or ``fp16``.
    """
    dev = torch.device(dev) if dev is not None else device()
    override = os.environ.get(PRECISION_ENV_VAR, "auto")
    if dev.type == "cuda":
        return choose_precision("cuda", capability=torch.cuda.get_device_capability(dev),
                                override=override)
    return choose_precision(dev.type, cpu_fast_bf16=dev.type == "cpu" and cpu_has_fast_bf16(),
                            override=override)


def grad_scaler(dev: torch.device, dtype: torch.dtype | None) -> torch.amp.GradScaler | None:
    """A ``torch.amp.GradScaler`` when training in fp16 (its 5-bit exponent underflows small
    gradients without loss scaling), else None: bf16 and fp32 have fp32's exponent range."""
    if dtype != torch.float16:
        return None
    return torch.amp.GradScaler(dev.type)


def precision_name(dtype: torch.dtype | None) -> str:
    """How :func:`describe` prints a precision: ``bf16 autocast``, ``fp16 autocast + grad scaler``,
    ``fp32``."""
    if dtype is None:
        return "fp32"
    name = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype).removeprefix("torch."))
    return f"{name} autocast" + (" + grad scaler" if dtype == torch.float16 else "")


def autocast(dev: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` for ``dtype``, or a no-op when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=dev.type, dtype=dtype)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(scale: Scale) -> str:
    """One block of text: scale, hardware, precision and library versions (a notebook's first output)."""
    dev = device()
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        hw = f"GPU {torch.cuda.get_device_name(dev)} (compute capability {major}.{minor})"
    else:
        hw = f"CPU {_cpu_name()}, {torch.get_num_threads()} threads"
    dtype = autocast_dtype(dev)
    pkgs = ["torch", "pytorch-ignite", "transformers", "datasets", "tokenizers", "scikit-learn"]
    lines = [
        f"scale      : {scale.name} ({scale.notes})",
        f"hardware   : {hw}",
        f"precision  : {precision_name(dtype)}",
        f"python     : {platform.python_version()}",
        "versions   : " + ", ".join(f"{p} {_version(p)}" for p in pkgs),
    ]
    return "\n".join(lines)


def quiet() -> None:
    """Silence library chatter in notebooks: Ignite's INFO logs, HF download/loading bars."""
    import logging

    import datasets
    from transformers.utils import logging as hf_logging

    logging.getLogger("ignite").setLevel(logging.WARNING)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
