"""Tests for the precision choice (tutorial_lib.runtime) and the fp16 gradient scaler in the trainer.

The choice is tested for each kind of device by faking what torch reports
(``torch.cuda.get_device_capability``, ``torch.cuda.is_available``, the CPU's bf16 support), so
it runs on any machine; the scaler is exercised for real with fp16 autocast on the CPU.
"""

import pytest
import torch
from torch import nn

from tutorial_lib import runtime
from tutorial_lib.training import create_trainer

# (GPU, compute capability, autocast dtype). torch.cuda.is_bf16_supported() answers True on all
# of these, the T4 included, where bf16 is emulated: the choice must not rely on it.
CUDA_CASES = [
    ("P100", (6, 0), torch.float16),
    ("V100", (7, 0), torch.float16),
    ("T4 (Colab free tier)", (7, 5), torch.float16),
    ("A100", (8, 0), torch.bfloat16),
    ("RTX 3090 / A10", (8, 6), torch.bfloat16),
    ("L4 / RTX 4090", (8, 9), torch.bfloat16),
    ("H100", (9, 0), torch.bfloat16),
    ("B200", (10, 0), torch.bfloat16),
]


@pytest.fixture
def fake_cuda(monkeypatch):
    """Make torch report one CUDA device of a given compute capability (and bf16 'supported')."""

    def install(capability: tuple[int, int]) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
        monkeypatch.delenv(runtime.PRECISION_ENV_VAR, raising=False)

    return install


@pytest.mark.parametrize("gpu, capability, want", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_precision_follows_the_compute_capability(fake_cuda, gpu, capability, want):
    fake_cuda(capability)
    assert runtime.device().type == "cuda"
    assert runtime.autocast_dtype() == want
    assert runtime.choose_precision("cuda", capability=capability) == want
    scaler = runtime.grad_scaler(torch.device("cuda"), want)
    assert (scaler is not None) == (want == torch.float16)  # scaler exactly for fp16


@pytest.mark.parametrize("fast_bf16, want", [(True, torch.bfloat16), (False, None)])
def test_cpu_precision_is_bf16_only_with_native_bf16(monkeypatch, fast_bf16, want):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "cpu_has_fast_bf16", lambda: fast_bf16)
    monkeypatch.delenv(runtime.PRECISION_ENV_VAR, raising=False)
    assert runtime.device().type == "cpu"
    assert runtime.autocast_dtype() is want
    assert runtime.grad_scaler(torch.device("cpu"), want) is None


@pytest.mark.parametrize("override, want", [("fp32", None), ("bf16", torch.bfloat16),
                                            ("FP16", torch.float16), (" auto ", torch.float16)])
def test_the_environment_override_wins(fake_cuda, monkeypatch, override, want):
    fake_cuda((7, 5))  # a T4: auto would be fp16
    monkeypatch.setenv(runtime.PRECISION_ENV_VAR, override)
    assert runtime.autocast_dtype() is want


def test_an_unknown_override_is_refused(monkeypatch):
    monkeypatch.setenv(runtime.PRECISION_ENV_VAR, "fp8")
    with pytest.raises(ValueError, match="TUTORIAL_PRECISION"):
        runtime.autocast_dtype(torch.device("cpu"))


def test_cuda_without_a_capability_is_an_error():
    with pytest.raises(ValueError, match="compute capability"):
        runtime.choose_precision("cuda")


def test_precision_names_in_the_notebook_header():
    assert runtime.precision_name(None) == "fp32"
    assert runtime.precision_name(torch.bfloat16) == "bf16 autocast"  # as in the committed outputs
    assert runtime.precision_name(torch.float16) == "fp16 autocast + grad scaler"


# --- the trainer's fp16 step ----------------------------------------------------------------------


class _Regressor(nn.Module):
    """A linear model whose loss can be made to overflow fp16 on purpose (``loss_scale``)."""

    def __init__(self, loss_scale: float = 1.0):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(8, 1)
        self.loss_scale = loss_scale

    def forward(self, x, y):
        out = self.lin(x).float().squeeze(-1)
        return type("Out", (), {"loss": self.loss_scale * ((out - y) ** 2).mean()})()


def _batch():
    g = torch.Generator().manual_seed(1)
    return {"x": torch.randn(16, 8, generator=g), "y": 1 + torch.randn(16, generator=g)}


def _run(model, amp_dtype, max_norm, lr=1.0):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    trainer = create_trainer(model, opt, device=torch.device("cpu"), amp_dtype=amp_dtype,
                             max_norm=max_norm)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.run([_batch()], max_epochs=1)
    delta = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before)])
    return trainer, delta


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_no_scaler_outside_fp16(dtype):
    trainer, _ = _run(_Regressor(), dtype, max_norm=1.0)
    assert trainer.grad_scaler is None


def test_fp16_clips_the_unscaled_gradients():
    """SGD with lr 1 and clipping at 1e-3 moves the weights by exactly 1e-3 (the gradients are far
    larger). Clipping the *scaled* gradients, then unscaling, would move them by 1e-3 / 65536.
    The loss is kept small so that the first step, at the initial scale 2**16, does not overflow."""
    trainer, delta = _run(_Regressor(loss_scale=1e-2), torch.float16, max_norm=1e-3)
    assert isinstance(trainer.grad_scaler, torch.amp.GradScaler)
    assert delta.norm().item() == pytest.approx(1e-3, rel=1e-2)


def test_fp16_skips_an_overflowing_step_and_lowers_the_scale():
    """A loss whose scaled gradients overflow fp16: the scaler skips the step (weights unchanged,
    not NaN) and halves its scale. Without the scaler the weights would turn inf/NaN."""
    trainer, delta = _run(_Regressor(loss_scale=1e6), torch.float16, max_norm=None, lr=1e-9)
    scaler = trainer.grad_scaler
    assert torch.isfinite(delta).all() and delta.abs().max().item() == 0.0
    assert scaler.get_scale() == pytest.approx(2.0**16 * scaler.get_backoff_factor())


@pytest.mark.parametrize("instructions, speedup, want", [(False, 3.0, False), (True, 0.6, False),
                                                         (True, 1.1, False), (True, 3.0, True)])
def test_cpu_bf16_needs_the_instructions_and_a_measured_speedup(monkeypatch, instructions, speedup, want):
    # The Xeon this was found on has AVX512-BF16 and runs bf16 autocast 1.6x slower: flags alone
    # must not turn it on.
    monkeypatch.setattr(runtime, "cpu_has_bf16_instructions", lambda: instructions)
    monkeypatch.setattr(runtime, "bf16_speedup", lambda: speedup)
    runtime.cpu_has_fast_bf16.cache_clear()
    try:
        assert runtime.cpu_has_fast_bf16() is want
    finally:
        runtime.cpu_has_fast_bf16.cache_clear()


def test_measuring_the_speedup_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    assert runtime.bf16_speedup(repeats=1) > 0
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_the_speedup_can_be_measured_first_inside_an_evaluation(context):
    # the first autocast_dtype() of a process may come from an evaluation under no_grad
    with context():
        assert runtime.bf16_speedup(repeats=1) > 0
