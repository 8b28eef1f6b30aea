"""The test suite on a GPU machine (issue 63, item 3): what the first GPU run's 61 unit-test
failures (results/gpu/logs/call1-tests-and-throughput.log.gz, H200, 2026-11-27) were made of, held
here on a CPU: the tests' device switch, config-only offline models, and no hard-coded CPU device
name asserted where a GPU run would see another."""

import ast
import os
from pathlib import Path

import pytest
import torch
from on_device import (
    TEST_DEVICE_ENV,
    across_devices,
    compare_by_value,
    deterministic_cuda,
    device_mode,
    missing_weights,
    needs_weights,
    skip_without_weights,
)

from tutorial_lib import backbones
from tutorial_lib.backbones import WeightsNotInstalled

TESTS = Path(__file__).resolve().parent
FORCES_CPU = ("CUDA_VISIBLE_DEVICES", "is_available")
"""A test whose source names one of these puts itself (or its subprocesses) on the CPU."""


def test_the_device_switch_reads_cpu_by_default_and_refuses_a_typo():
    assert device_mode({}) == device_mode({TEST_DEVICE_ENV: ""}) == "cpu"  # cpu: the switch
    assert device_mode({TEST_DEVICE_ENV: " CUDA "}) == "cuda"
    with pytest.raises(pytest.UsageError, match="choose cpu or cuda"):
        device_mode({TEST_DEVICE_ENV: "gpu"})


@pytest.mark.skipif(device_mode() != "cpu", reason="TUTORIAL_TEST_DEVICE=cuda: the GPU is seen")
def test_by_default_neither_the_tests_nor_their_processes_see_cuda():
    assert torch.cuda.is_available() is False
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # kernels, torchrun, subprocesses


def test_a_config_only_offline_model_is_named_missing_and_its_tests_skip(monkeypatch, tmp_path):
    def config_only(name, weights=True):
        raise WeightsNotInstalled(f"{name}'s weights are not installed here")

    monkeypatch.setattr("on_device.model_path", config_only)
    assert "not installed" in missing_weights("minilm")
    with pytest.raises(pytest.skip.Exception, match="needs minilm's weights"):
        needs_weights("minilm")
    monkeypatch.setattr(backbones, "_package_dir", lambda spec: tmp_path)  # no GGUF file
    assert "config-only" in missing_weights("smollm2")


def test_a_test_that_meets_config_only_weights_is_skipped_with_the_reason():
    with pytest.raises(pytest.skip.Exception, match="model weights not installed here: gone"):
        with skip_without_weights():
            raise WeightsNotInstalled("gone")
    with pytest.raises(AssertionError), skip_without_weights():  # anything else still fails
        raise AssertionError("a real failure")


def _cpu_name_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, test) of every comparison with the string "cpu" (a device name asserted) in a test
    that does not put itself on the CPU (FORCES_CPU) and carries no ``# cpu:`` reason."""
    tree, lines = ast.parse(source), source.splitlines()
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
            continue
        body = ast.get_source_segment(source, fn) or ""
        if any(word in body for word in FORCES_CPU):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value == "cpu"
                    for c in [node.left, *node.comparators]):
                if "# cpu:" not in lines[node.lineno - 1]:
                    found.append((node.lineno, fn.name))
    return found


def test_no_test_asserts_a_cpu_device_name_a_gpu_run_would_not_see():
    """The H200 run failed where a test asserted "cpu" (a kernel's device, a peak-memory record):
    a comparison with "cpu" needs the test to force the CPU (CUDA_VISIBLE_DEVICES="" for its
    processes, torch.cuda.is_available patched) or a ``# cpu:`` reason on its line."""
    offenders = [f"{path.relative_to(TESTS)}:{line} {name}"
                 for path in sorted(TESTS.rglob("test_*.py"))
                 for line, name in _cpu_name_comparisons(path.read_text())]
    assert offenders == []


def test_the_scan_finds_an_asserted_cpu_device_and_accepts_a_forced_or_explained_one():
    bad = 'def test_a(model):\n    assert next(model.parameters()).device.type == "cpu"\n'
    assert _cpu_name_comparisons(bad) == [(2, "test_a")]
    forced = ('def test_b(monkeypatch):\n    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")\n'
              '    assert run()["device"] == "cpu"\n')
    explained = 'def test_c():\n    assert record["device"] == "cpu"  # cpu: a record written here\n'
    assert _cpu_name_comparisons(forced) == _cpu_name_comparisons(explained) == []


def test_on_cuda_value_comparisons_move_two_devices_to_the_cpu_and_nothing_else(monkeypatch):
    calls = []
    spy = across_devices(lambda a, b, **kw: calls.append((a, b, kw)) or True)
    a, b = torch.ones(2), torch.ones(2)
    assert spy(a, b, atol=1) and calls == [(a, b, {"atol": 1})]  # same device: untouched
    with pytest.raises(NotImplementedError, match="meta"):  # two devices: both to the CPU
        spy(a, torch.ones(2, device="meta"))
    assert len(calls) == 1
    compare_by_value(monkeypatch)
    assert torch.equal.__wrapped__ is not None and torch.equal(a, b) and torch.allclose(a, b)
    torch.testing.assert_close(a, b)
    with pytest.raises(AssertionError):  # values still count
        torch.testing.assert_close(a, b + 1)


def test_cuda_runs_ask_for_deterministic_kernels_before_cuda_starts():
    env: dict[str, str] = {}
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        deterministic_cuda(env)
        assert env == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
