"""Shared fixtures: the local data copy and a private cache directory for every test session."""

import os
from pathlib import Path

import pytest
import torch
import transformers
from on_device import TEST_DEVICE_ENV, compare_by_value, deterministic_cuda, device_mode, skip_without_weights

from tutorial_lib.backbones import Backbone, BackboneError, model_path
from tutorial_lib.config import DATA_ENV_VAR

REPO = Path(__file__).resolve().parents[1]


def local_data_dir() -> Path | None:
    """The data copy from $TUTORIAL_DATA_DIR, else ../shared/data next to the checkout."""
    env = os.environ.get(DATA_ENV_VAR)
    path = Path(env).expanduser() if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(autouse=True)
def unit_tests_device(monkeypatch):
    """By default the unit tests run on the CPU on every machine: they compare against CPU
    references and build their inputs where the CPU CI does. On a GPU machine they then see no
    CUDA, and neither do the processes they start (kernels, torchrun, subprocesses); the notebooks,
    executed by nbval in kernels of their own, do (scripts/gpu_runs.sh --tests).

    With TUTORIAL_TEST_DEVICE=cuda (the first call of docs/gpu.md) they see the GPU: the library
    puts models on it (runtime.device), the tests build their inputs on the model's device
    (``tests.tiny.near``), and their value comparisons ignore devices (``on_device.compare_by_value``;
    ``tests.tiny.tensors_equal`` on any machine); what only holds on a CPU skips with the reason.
    tests/test_devices.py checks on any machine that every helper feeds a model on its device."""
    if device_mode() == "cpu":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    else:
        compare_by_value(monkeypatch)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A test that loads an offline model whose package is a config-only copy (a device kit's)
    skips with the loader's message instead of failing: the weights are absent, not wrong."""
    with skip_without_weights():
        return (yield)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: one torch thread is far faster than two on a loaded 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def minilm_tokenizer():
    """MiniLM's fast (uncased WordPiece) tokenizer, loaded offline the way backbones.py does."""
    try:
        return transformers.AutoTokenizer.from_pretrained(model_path("minilm"))
    except BackboneError:
        pytest.skip("offline MiniLM not installed")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = local_data_dir()
    if path is None:
        pytest.skip(f"no local data copy: set {DATA_ENV_VAR}")
    return path


@pytest.fixture
def with_data(monkeypatch, data_dir, tmp_path):
    """Local data + an empty cache directory for this test."""
    monkeypatch.setenv(DATA_ENV_VAR, str(data_dir))
    monkeypatch.setenv("TUTORIAL_CACHE_DIR", str(tmp_path / "cache"))
    return data_dir


@pytest.fixture
def tiny_bert(minilm_tokenizer):
    """A randomly initialised BertForMaskedLM (no offline HF MLM has a pretrained head)."""
    tok = minilm_tokenizer
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64)
    return Backbone("tiny-bert", "masked", tok, transformers.BertForMaskedLM(cfg).eval(), 64)


def pytest_configure(config):
    if device_mode() == "cuda":
        if not torch.cuda.is_available():
            raise pytest.UsageError(f"{TEST_DEVICE_ENV}=cuda, but torch sees no CUDA device here")
        deterministic_cuda()
    config.addinivalue_line("markers", "after_notebooks: runs after every other test and notebook "
                                       "of the session (it reads what the notebooks saved)")
    config.addinivalue_line("markers", "network: asks the package index (pip resolutions); "
                                       "skipped offline, left out with SKIP_NETWORK=1 "
                                       "(scripts/pytest_all.sh)")
    config.addinivalue_line("markers", "network_in_ci: a network test the test command runs even "
                                       "with SKIP_NETWORK=1 (the Colab resolution, issue 60)")


def pytest_report_header(config):
    return f"unit tests' device: {device_mode()} ({TEST_DEVICE_ENV})"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``after_notebooks`` go last, whatever the order of the paths given."""
    items.sort(key=lambda item: item.get_closest_marker("after_notebooks") is not None)
