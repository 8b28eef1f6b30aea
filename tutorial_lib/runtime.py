"""Where and how we compute: device, mixed precision, seeds, memory, safe writes, and the header
every notebook prints.

* :func:`device`, :func:`autocast_dtype`, :func:`autocast` — the accelerator and the mixed
  precision that is fast on it;
* :func:`seed_everything`;
* :class:`PeakMemory` — the memory meter of notebook 03 (CUDA tensors, or the process's RSS);
* :func:`atomic_write` — the one way files are written: a temporary file renamed into place, so a
  crash leaves the old file or the new one, never half of one;
* :func:`describe` / :func:`quiet` — the first output of every notebook, and less library chatter.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import gc
import json
import os
import platform
import random
import resource
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from . import figures
from .config import GPU_MEMORY_ENV_VAR, PRECISION_ENV_VAR, ConfigError, Scale

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
# bf16 tensor cores arrived with Ampere (compute capability 8.0). Below that (T4 = 7.5, V100 = 7.0)
# torch.cuda.is_bf16_supported() still answers True, but bf16 is emulated and slow, while fp16
# runs on the tensor cores: there we use fp16 autocast with a gradient scaler.
CUDA_BF16_MIN_CAPABILITY = (8, 0)


def device() -> torch.device:
    """The accelerator if there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_of(module: torch.nn.Module) -> torch.device:
    """Where a module's parameters live (the CPU for a module without any): a helper that feeds
    a model tensors it made itself puts them there (on a GPU, CPU inputs crash the forward)."""
    return next(module.parameters(), torch.empty(0)).device


def cpu_has_bf16_instructions() -> bool:
    """True when this CPU has native bf16 matmul instructions (AMX or AVX512-BF16)."""
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


# bf16 autocast is chosen on a CPU only where it is measurably faster than fp32. The instructions
# alone do not say so: on an Intel Xeon with AVX512-BF16 and no AMX a training step ran 1.6x
# *slower* under bf16 autocast, while an AMD EPYC with the same flag ran ~3x faster.
BF16_MIN_SPEEDUP = 1.2


def bf16_speedup(repeats: int = 7) -> float:
    """fp32 time / bf16-autocast time of one forward + backward pass of a transformer-sized MLP
    (1024 x 384 -> 1536 -> 384), medians of ``repeats``. Uses its own generator: the global random
    state, and so every seeded result, is untouched. The first caller may be an evaluation under
    ``no_grad`` or ``inference_mode``: the measurement runs with grad all the same."""
    with torch.inference_mode(False), torch.enable_grad():
        return _bf16_speedup(repeats)


def _bf16_speedup(repeats: int) -> float:
    import time

    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 384, generator=g)
    w1 = (torch.randn(1536, 384, generator=g) * 0.05).requires_grad_()
    w2 = (torch.randn(384, 1536, generator=g) * 0.05).requires_grad_()

    def step(dtype: torch.dtype | None) -> float:
        start = time.perf_counter()
        with autocast(torch.device("cpu"), dtype):
            y = torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, w1)), w2)
        y.float().square().mean().backward()
        return time.perf_counter() - start

    def median(dtype: torch.dtype | None) -> float:
        step(dtype)  # warm-up
        return sorted(step(dtype) for _ in range(repeats))[repeats // 2]

    return median(None) / median(torch.bfloat16)


@functools.cache
def cpu_has_fast_bf16() -> bool:
    """True when bf16 autocast pays on this CPU: it has bf16 instructions *and* a training step runs
    at least :data:`BF16_MIN_SPEEDUP` times faster under it (:func:`bf16_speedup`, measured once
    per process, about a second)."""
    return cpu_has_bf16_instructions() and bf16_speedup() >= BF16_MIN_SPEEDUP


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
    CPU where bf16 is measured faster         bf16 (AMX, or AVX512-BF16 that pays)
    any other CPU                             None: plain fp32 (bf16 would be *slower*)
    ========================================  ===========================================

    ``override`` (``TUTORIAL_PRECISION``) other than ``"auto"`` wins: ``"bf16"``, ``"fp16"`` or
    ``"fp32"`` (returned as None). fp16 needs :func:`grad_scaler` in the training step.
    """
    choice = (override or "auto").strip().lower()
    if choice not in PRECISIONS:
        raise ConfigError(f"{PRECISION_ENV_VAR}={override!r}: choose one of {', '.join(PRECISIONS)}")
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

    On a CPU, bf16 autocast only where it is measured to be faster than fp32
    (:func:`cpu_has_fast_bf16`): ~3x on an AMD EPYC, 1.6x *slower* on an Intel Xeon without AMX.
    On a GPU below compute capability 8.0 (Colab's free T4) it is fp16, with a gradient scaler in the trainer.
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


# The process's peaks seen before a reset (bytes): PeakMemory restarts CUDA's peak statistics and
# the kernel's peak-RSS watermark for each measured block, so without this the peak of a whole
# notebook (what the main job records, :func:`process_peak_memory`) would be lost at every reset.
_PEAKS_BEFORE_RESET = {"cuda_allocated": 0, "cuda_reserved": 0, "rss": 0}


def _cuda_in_use() -> bool:
    """True when this process has initialised CUDA (asking an uninitialised one would start it)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _remember_peaks() -> None:
    """Fold the current peaks into :data:`_PEAKS_BEFORE_RESET` (called before any reset)."""
    seen = _PEAKS_BEFORE_RESET
    if _cuda_in_use():
        seen["cuda_allocated"] = max(seen["cuda_allocated"], torch.cuda.max_memory_allocated())
        seen["cuda_reserved"] = max(seen["cuda_reserved"], torch.cuda.max_memory_reserved())
    hwm = _rss_kib("VmHWM")
    if hwm is not None:
        seen["rss"] = max(seen["rss"], hwm * 1024)


def reset_cuda_peak() -> None:
    """``torch.cuda.reset_peak_memory_stats`` that keeps the process's peak for
    :func:`process_peak_memory` (use it instead of calling torch's directly)."""
    _remember_peaks()
    if _cuda_in_use():
        torch.cuda.reset_peak_memory_stats()


def process_peak_memory() -> dict[str, float | str | None]:
    """This process's peak memory since it started, in MiB, whatever :class:`PeakMemory` reset
    in between: what the main job records per notebook (``results/<scale>/peak_memory.json``).

    * ``cuda_allocated_mib``: ``torch.cuda.max_memory_allocated`` — PyTorch's tensors at their
      peak; ``cuda_reserved_mib``: ``max_memory_reserved`` — what its caching allocator held,
      the number that must fit the card (plus the CUDA context, a few hundred MiB, in neither);
      both None when the process never used CUDA;
    * ``rss_mib``: the process's peak resident memory (``VmHWM``; None off Linux);
    * ``cuda_context_mib``: the GPU memory in use that PyTorch did not reserve, read now (the CUDA
      context and its libraries' workspaces, on a GPU of its own; other processes' memory too on
      a shared one);
    * ``device``: the GPU's name, or ``"cpu"``.
    """
    _remember_peaks()
    seen = _PEAKS_BEFORE_RESET
    cuda = _cuda_in_use()
    mib = lambda b: round(b / 2**20, 1)  # noqa: E731
    context = None
    if cuda:
        free, total = torch.cuda.mem_get_info()
        context = mib(total - free - torch.cuda.memory_reserved())
    return {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "cuda_allocated_mib": mib(seen["cuda_allocated"]) if cuda else None,
        "cuda_reserved_mib": mib(seen["cuda_reserved"]) if cuda else None,
        "cuda_context_mib": context,
        "rss_mib": mib(seen["rss"]) if seen["rss"] else None,
    }


def write_process_peak_memory(path: str | Path) -> Path:
    """Write :func:`process_peak_memory` as JSON to ``path`` (the main job's last request to a
    notebook's kernel, just before it shuts down)."""
    return atomic_write(path, json.dumps(process_peak_memory(), indent=1))


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
        _remember_peaks()  # the whole process's peak survives this block's resets
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



def memory_cap_fraction(gib: str, total_bytes: int) -> float:
    """The ``torch.cuda.set_per_process_memory_fraction`` that lets PyTorch allocate ``gib`` GiB
    (``TUTORIAL_GPU_MEMORY_GIB``, text) of a GPU with ``total_bytes``: a bad value is one error.

    >>> round(memory_cap_fraction("15", 80 * 2**30), 4)
    0.1875
    """
    try:
        cap = float(gib)
    except ValueError:
        cap = float("nan")
    total_gib = total_bytes / 2**30
    if not 0 < cap <= total_gib:  # also NaN
        raise ConfigError(f"{GPU_MEMORY_ENV_VAR}={gib!r}: give the GiB PyTorch may allocate, a "
                          f"number above 0 and at most this GPU's {total_gib:.1f} GiB (e.g. 15 "
                          "for a Colab T4), or unset it for no cap")
    return cap / total_gib


def apply_gpu_memory_cap() -> str | None:
    """Cap PyTorch's GPU memory at ``$TUTORIAL_GPU_MEMORY_GIB`` (unset: nothing happens), so that
    a larger GPU shows whether a notebook fits a smaller one: past the cap an allocation raises
    CUDA's out-of-memory error, as on the small card (the CUDA context itself is not counted).
    Returns what :func:`describe` prints, or None without a cap. Called by :func:`describe`,
    every notebook's first output."""
    gib = os.environ.get(GPU_MEMORY_ENV_VAR, "").strip()
    if not gib:
        return None
    if not torch.cuda.is_available():
        return f"{GPU_MEMORY_ENV_VAR}={gib} ignored: there is no GPU"
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = memory_cap_fraction(gib, total)
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    return f"{float(gib):g} GiB of {total / 2**30:.1f} GiB (set_per_process_memory_fraction {fraction:.3f})"


# --- files -------------------------------------------------------------------------------------


class CacheWriteError(OSError):
    """Writing a file failed because the disk is full; the previous file is kept."""


def is_disk_full(err: BaseException) -> bool:
    """True for the errors a full disk (or quota) raises: ``OSError(ENOSPC/EDQUOT)`` from Python,
    ``RuntimeError("... file write failed")`` from ``torch.save``'s C++ writer."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("file write failed" in text or "No space left" in text)


def disk_full_message(path: Path, kept: str) -> str:
    """What to do after a full disk interrupted a write (``kept``: what was not lost)."""
    return (f"disk full while writing {path}: free some space on that disk (or set "
            f"TUTORIAL_CACHE_DIR to a disk with room) and run again. {kept}")


def atomic_write(
    path: str | Path,
    content: str | bytes | Callable[[Path], None],
    before_rename: Callable[[Path], None] | None = None,
) -> Path:
    """Write ``content`` to ``path`` through a temporary file in the same folder, then rename.

    ``content`` is text, bytes, or a function that writes the temporary path it is given (e.g.
    ``lambda tmp: torch.save(obj, tmp)``); ``before_rename(tmp)`` runs on the finished temporary
    file (e.g. to record its hash). ``os.replace`` is atomic on POSIX and Windows: readers see the
    old file or the new one, never a half-written one. On any error the temporary file is removed
    and the old file is left as it was; a full disk raises :class:`CacheWriteError` that says so.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        if callable(content):
            content(tmp)
        elif isinstance(content, bytes):
            tmp.write_bytes(content)
        else:
            tmp.write_text(content)
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if is_disk_full(err):
            kept = ("The previous version of this file is kept." if path.exists()
                    else "Nothing that was already saved has been lost.")
            raise CacheWriteError(errno.ENOSPC, disk_full_message(path, kept)) from err
        raise
    return path


# --- the notebook header -------------------------------------------------------------------------


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
    cap = apply_gpu_memory_cap()
    if cap:
        lines.insert(2, f"memory cap : {cap}")
    return "\n".join(lines)


def quiet() -> None:
    """Silence library chatter in notebooks (Ignite's INFO logs, HF download/loading bars) and give
    every figure the notebook shows its alt text (:func:`tutorial_lib.figures.enable_alt_text`)."""
    import logging

    import datasets
    from transformers.utils import logging as hf_logging

    logging.getLogger("ignite").setLevel(logging.WARNING)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    figures.enable_alt_text()
