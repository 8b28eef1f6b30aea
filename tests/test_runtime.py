"""Tests for tutorial_lib.runtime: precision choice, seeds, the memory meter, atomic writes."""

import pytest
import torch

from tutorial_lib import config, runtime


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
    with runtime.PeakMemory() as mem:
        x = torch.ones(64 * 2**20 // 4)  # 64 MiB, written so every page is resident
        x += 1
        del x
    assert mem.what
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
