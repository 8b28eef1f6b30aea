"""Tests for tutorial_lib.runtime: precision choice, seeds, the memory meter, atomic writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tutorial_lib import config, runtime

REPO = Path(__file__).resolve().parents[1]


def test_precision_override_and_a_bad_value_is_an_error(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "fp32")
    assert runtime.autocast_dtype(cpu) is None
    monkeypatch.setenv(config.PRECISION_ENV_VAR, " BF16 ")
    assert runtime.autocast_dtype(cpu) is torch.bfloat16
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "auto")
    assert runtime.autocast_dtype(cpu) is (torch.bfloat16 if runtime.cpu_has_fast_bf16() else None)
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "fp16")
    assert runtime.autocast_dtype(cpu) is torch.float16
    monkeypatch.setenv(config.PRECISION_ENV_VAR, "half")  # a typo must not silently mean auto
    with pytest.raises(config.ConfigError, match="choose one of auto, bf16, fp16, fp32"):
        runtime.autocast_dtype(cpu)
    # ENV_VARS (and so the README's table) offers exactly the precisions the code accepts
    offered = config.ENV_VARS[config.PRECISION_ENV_VAR].split("(")[0].replace(" ", "").split("|")
    assert sorted(offered) == sorted(runtime.PRECISIONS)


def test_autocast_none_is_a_no_op():
    with runtime.autocast(torch.device("cpu"), None):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    with runtime.autocast(torch.device("cpu"), torch.bfloat16):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


def test_seed_everything_repeats_every_generator():
    import random

    import numpy as np

    runtime.seed_everything(3)
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    runtime.seed_everything(3)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == a


def test_peak_memory_sees_a_temporary_allocation():
    """On the device the tests run on: the CPU's peak RSS, or CUDA's allocated peak with
    TUTORIAL_TEST_DEVICE=cuda (a CPU tensor would leave CUDA's reading at 0: the H200 run)."""
    dev = runtime.device()
    with runtime.PeakMemory() as mem:
        x = torch.ones(64 * 2**20 // 4, device=dev)  # 64 MiB, written so every page is resident
        x += 1
        del x
    assert mem.what == "CUDA tensors" if dev.type == "cuda" else mem.what
    assert 48 <= mem.peak_mib < 1024, mem.peak_mib


def test_atomic_write_text_bytes_and_callable(tmp_path):
    path = runtime.atomic_write(tmp_path / "sub" / "a.txt", "hello")
    assert path.read_text() == "hello"
    runtime.atomic_write(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    runtime.atomic_write(path, lambda tmp: torch.save({"x": 1}, tmp))
    assert torch.load(path) == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["a.txt"], "no temporary file is left"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = runtime.atomic_write(tmp_path / "a.txt", "old")

    def crash(tmp):
        tmp.write_text("half of the new")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        runtime.atomic_write(path, crash)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_describe_names_the_scale_and_the_precision():
    text = runtime.describe(config.get_scale("smoke"))
    assert text.startswith("scale      : smoke") and "precision  :" in text and "torch" in text


def test_the_process_peak_survives_the_resets_of_peak_memory_blocks():
    """PeakMemory restarts the kernel's peak-RSS watermark for each block; the notebook's peak
    (what the main job records) must still count an allocation made before such a block. In a
    fresh process, so that nothing earlier set the peak."""
    script = """
import json, torch
from tutorial_lib import runtime
base = runtime._rss_kib("VmRSS") / 1024
big = torch.ones(128, 2**20); big.add_(1)  # 512 MiB, every page touched
del big; runtime._malloc_trim()
with runtime.PeakMemory() as mem:  # resets VmHWM
    torch.ones(2**20).add_(1)
print(json.dumps({"base": base, "hwm_now": runtime._rss_kib("VmHWM") / 1024,
                  "peak": runtime.process_peak_memory(), "block": mem.peak_mib}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=REPO, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["hwm_now"] < got["base"] + 256, "the block did not reset the watermark"
    assert got["peak"]["rss_mib"] >= got["base"] + 500, got  # the 512 MiB before the block
    assert got["block"] < 100 and got["peak"]["device"] == "cpu"
    assert got["peak"]["cuda_allocated_mib"] is None and got["peak"]["cuda_reserved_mib"] is None


def test_gpu_memory_cap_fraction_and_one_error_for_a_bad_value():
    assert runtime.memory_cap_fraction("15", 80 * 2**30) == pytest.approx(15 / 80)
    assert runtime.memory_cap_fraction(" 7.5 ", 15 * 2**30) == pytest.approx(0.5)
    for bad in ("abc", "0", "-1", "nan", "81"):
        with pytest.raises(config.ConfigError, match=r"TUTORIAL_GPU_MEMORY_GIB=.*at most this "
                                                     r"GPU's 80\.0 GiB .*unset it"):
            runtime.memory_cap_fraction(bad, 80 * 2**30)


def test_the_cap_is_applied_on_a_gpu_and_printed_and_ignored_without_one(monkeypatch):
    monkeypatch.delenv(config.GPU_MEMORY_ENV_VAR, raising=False)
    assert runtime.apply_gpu_memory_cap() is None
    monkeypatch.setenv(config.GPU_MEMORY_ENV_VAR, "15")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "ignored: there is no GPU" in runtime.describe(config.get_scale("smoke"))
    applied = []  # a fake 80 GiB GPU: what the notebook's first cell would do there
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: type("P", (), {"total_memory": 80 * 2**30})())
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, dev: applied.append((fraction, dev)))
    assert runtime.apply_gpu_memory_cap() == ("15 GiB of 80.0 GiB "
                                              "(set_per_process_memory_fraction 0.188)")
    assert applied == [(pytest.approx(0.1875), 0)]
    monkeypatch.setenv(config.GPU_MEMORY_ENV_VAR, "100")
    with pytest.raises(config.ConfigError):
        runtime.apply_gpu_memory_cap()
