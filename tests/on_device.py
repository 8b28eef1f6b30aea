"""What a GPU machine's test run differs in (tests/conftest.py, docs/gpu.md's first call): the
unit tests' device (TUTORIAL_TEST_DEVICE) and the offline models a device kit carries
config-only."""

import contextlib
import os

import pytest
import torch

from tutorial_lib import backbones
from tutorial_lib.backbones import BackboneError, WeightsNotInstalled, model_path

TEST_DEVICE_ENV = "TUTORIAL_TEST_DEVICE"
"""``cpu`` (the default) or ``cuda``: where the unit tests run on a machine with a GPU."""


def device_mode(environ=os.environ) -> str:
    """The unit tests' device from $TUTORIAL_TEST_DEVICE: ``cpu`` unless it says ``cuda``."""
    mode = environ.get(TEST_DEVICE_ENV, "cpu").strip().lower() or "cpu"
    if mode not in ("cpu", "cuda"):
        raise pytest.UsageError(f"{TEST_DEVICE_ENV}={mode!r}: choose cpu or cuda")
    return mode


def on_cuda() -> bool:
    """True when the unit tests run on CUDA (TUTORIAL_TEST_DEVICE=cuda on a GPU machine)."""
    return device_mode() == "cuda" and torch.cuda.is_available()


def missing_weights(name: str) -> str | None:
    """Why offline model ``name`` cannot be loaded with its weights here (a device kit carries
    MiniLM and SmolLM2 config-only at the smoke scale), or None when it can. Converts nothing."""
    spec = backbones.LOCAL_MODELS[name]
    try:
        if spec.gguf_file is None:
            model_path(name)
        elif not (backbones._package_dir(spec) / spec.gguf_file).is_file():
            return f"{name}'s package has no {spec.gguf_file} (config-only): {spec.install}"
    except BackboneError as exc:
        return str(exc)
    return None


def needs_weights(name: str) -> None:
    """Skip the calling test, with the reason, where ``name``'s weights are not installed."""
    why = missing_weights(name)
    if why:
        pytest.skip(f"needs {name}'s weights: {why}")


def across_devices(compare):
    """``compare`` (torch.equal, torch.allclose) on two tensors that may sit on different devices:
    a trained model's weights on the GPU against a snapshot or a reference the test built on the
    CPU compare by value, on the CPU. Same-device tensors go straight through."""

    def wrapped(a, b, *args, **kwargs):
        if torch.is_tensor(a) and torch.is_tensor(b) and a.device != b.device:
            a, b = a.detach().cpu(), b.detach().cpu()
        return compare(a, b, *args, **kwargs)

    wrapped.__wrapped__ = compare
    return wrapped


def compare_by_value(monkeypatch) -> None:
    """With TUTORIAL_TEST_DEVICE=cuda: the tests' value comparisons ignore where the tensors are
    (torch.equal, torch.allclose, torch.testing.assert_close without its device check); what a
    test feeds a model must still be on the model's device (``tests.tiny.near``)."""
    monkeypatch.setattr(torch, "equal", across_devices(torch.equal))
    monkeypatch.setattr(torch, "allclose", across_devices(torch.allclose))
    close = torch.testing.assert_close
    monkeypatch.setattr(torch.testing, "assert_close",
                        lambda actual, expected, **kw: close(actual, expected,
                                                             **{"check_device": False, **kw}))


def deterministic_cuda(environ=os.environ) -> None:
    """With TUTORIAL_TEST_DEVICE=cuda, before CUDA starts: deterministic kernels where PyTorch has
    them (cuBLAS's workspace setting included), so that the tests that compare two runs bit for bit
    (a killed run resumed, two seeds alike) compare the same arithmetic; an op without a
    deterministic kernel warns instead of failing."""
    environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextlib.contextmanager
def skip_without_weights():
    """A test that loads an offline model whose package is a config-only copy (a device kit's)
    skips with the loader's message instead of failing: the weights are absent, not wrong
    (tests/conftest.py wraps every test in this)."""
    try:
        yield
    except WeightsNotInstalled as exc:
        pytest.skip(f"model weights not installed here: {exc}")
