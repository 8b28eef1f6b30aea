"""The learner's checks on tiny random BERT and Llama classifiers: save → reload into a fresh
base → merge gives the same logits; the frozen weights are bit-identical after optimizer steps of
the tutorial's trainer; checkpoint sizes; step costs."""

import pytest
import torch
from tiny import tensors_equal
from tiny_peft import FAMILIES, batch, perturb_trainable, tiny_classifier

from tutorial_lib.methods.peft.peft_checks import (
    MERGE_ATOL,
    checkpoint_bytes,
    load_adapter,
    logits,
    merge,
    roundtrip,
    save_adapter,
    snapshot,
    step_costs,
    weights_check,
)
from tutorial_lib.methods.peft.peft_methods import (
    IA3,
    BitFit,
    Full,
    Houlsby,
    LoRA,
    PeftMethodError,
    PrefixTuning,
    PromptTuning,
    param_groups,
)
from tutorial_lib.params import make_optimizer, trainable_summary
from tutorial_lib.runtime import autocast_dtype
from tutorial_lib.training import create_trainer

METHODS = [LoRA(r=4, alpha=8), LoRA(r=4, alpha=8, ours=True), IA3(), PromptTuning(n_tokens=5),
           PrefixTuning(n_tokens=5), PrefixTuning(n_tokens=5, projection=16), Full()]
CASES = [(f, m) for f in FAMILIES for m in METHODS] + [("bert", BitFit()), ("bert", Houlsby(4))]
IDS = [f"{f}-{m!r}" for f, m in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_save_reload_merge_gives_the_same_logits(case, tmp_path):
    fam, method = case
    b = batch()
    model = method.apply(tiny_classifier(fam))
    perturb_trainable(model)  # a trained-looking adapter and head, far from their init
    fresh = tiny_classifier(fam)  # the same base weights, a new random head
    assert (logits(fresh, b) - logits(model, b)).abs().max() > 1e-2  # the check can fail
    result = roundtrip(model, method, fresh, b, tmp_path / "adapter")
    if method.exact_reload:
        assert result.reload_diff == 0.0  # the very same tensors: bit-identical logits
    else:  # the prefixes, saved after the reparametrising MLP: float32 rounding
        assert result.reload_diff <= result.reload_atol == MERGE_ATOL
    if method.mergeable:
        assert result.merge_diff is not None and result.merge_diff <= MERGE_ATOL
        assert not any("lora" in n or "ia3" in n or n.endswith((".A", ".B"))
                       for n, _ in fresh.named_parameters())  # a plain model again
    else:
        assert result.merge_diff is None
    assert result.ok


def test_an_adapter_saved_without_its_head_would_not_pass(tmp_path):
    """The silent failure: reloading the adapter but not the new head gives other logits."""
    b = batch()
    model = LoRA(r=4).apply(tiny_classifier("bert"))
    perturb_trainable(model)
    model.encoder.save_pretrained(tmp_path / "peft-only")  # what peft alone saves
    fresh = tiny_classifier("bert")
    fresh.encoder = type(model.encoder).from_pretrained(fresh.encoder, tmp_path / "peft-only")
    assert (logits(fresh, b) - logits(model, b)).abs().max() > 1e-2


@pytest.mark.parametrize("method", [PromptTuning(n_tokens=5), PrefixTuning(n_tokens=5), BitFit(),
                                    Houlsby(4)], ids=repr)
def test_methods_that_do_not_merge_say_so(method):
    model = method.apply(tiny_classifier("bert"))
    with pytest.raises(PeftMethodError, match="only LoRA and"):
        merge(model)


def test_loading_into_another_model_is_an_error_not_a_silent_skip(tmp_path):
    model = BitFit().apply(tiny_classifier("bert"))
    save_adapter(model, BitFit(), tmp_path / "a")
    other = tiny_classifier("bert")
    other.head = torch.nn.Linear(32, 5)  # another number of classes
    with pytest.raises(PeftMethodError, match="do not fit"):
        load_adapter(other, tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="save_adapter"):
        load_adapter(tiny_classifier("bert"), tmp_path / "nothing-here")


def test_saving_again_replaces_the_folder_and_leaves_no_temporary(tmp_path):
    model = LoRA(r=4).apply(tiny_classifier("bert"))
    save_adapter(model, LoRA(r=4), tmp_path / "a")
    perturb_trainable(model)
    save_adapter(model, LoRA(r=4), tmp_path / "a")
    fresh = tiny_classifier("bert")
    load_adapter(fresh, tmp_path / "a")
    assert tensors_equal(logits(fresh, batch()), logits(model, batch()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def train_steps(model, steps: int = 2) -> None:
    """A few steps of the tutorial's trainer (AdamW with weight decay, clipping, autocast)."""
    optimizer = make_optimizer(model, 1e-2, 0.01, param_groups(model, 0.01))
    create_trainer(model, optimizer, device=torch.device("cpu"),
                   amp_dtype=autocast_dtype()).run([batch()] * steps, max_epochs=1)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_frozen_weights_are_bit_identical_after_optimizer_steps(case):
    fam, method = case
    model = method.apply(tiny_classifier(fam))
    before = snapshot(model)
    train_steps(model)
    check = weights_check(before, model)
    assert check.ok, check.frozen_changed
    assert check.frozen + check.trained == len(before)
    assert "head.weight" not in check.trained_unchanged  # training did move the trained tensors


def test_step_costs_time_the_trainers_steps_and_train_the_model():
    model = LoRA(r=4).apply(tiny_classifier("llama"))
    before = snapshot(model)
    costs = step_costs(model, batch(), lr=1e-2, steps=2, warmup=1)
    assert costs.steps == 2 and 0 < costs.seconds_per_step < 60
    assert costs.peak_mib >= 0 and costs.memory_what
    assert weights_check(before, model).ok and not tensors_equal(before["head.weight"], model.head.weight)


def test_the_weights_check_sees_a_changed_frozen_tensor():
    model = LoRA(r=4).apply(tiny_classifier("bert"))
    before = snapshot(model)
    frozen = next(p for p in model.parameters() if not p.requires_grad)
    with torch.no_grad():
        frozen.view(-1)[0] += 1e-6
    assert not weights_check(before, model).ok


@pytest.mark.parametrize("method", [LoRA(r=4), IA3(), PromptTuning(n_tokens=5), BitFit(), Full()],
                         ids=repr)
def test_a_checkpoint_holds_the_trained_tensors_and_little_else(method, tmp_path):
    model = method.apply(tiny_classifier("bert"))
    save_adapter(model, method, tmp_path / "a")
    values = trainable_summary(model).trainable
    size = checkpoint_bytes(tmp_path / "a")
    assert 4 * values <= size <= 4 * values + 32 * 1024  # fp32 values + the files' headers
