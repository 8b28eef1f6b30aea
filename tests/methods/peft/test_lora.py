"""Our LoRA layer against 🤗 peft's on the same weights and input; merging; He et al.'s unified
view reproduces both our LoRA and our Houlsby adapter."""

import pytest
import torch
import torch.nn.functional as F
from tiny_peft import FAMILIES, batch, perturb_trainable, tiny_classifier
from torch import nn

from tutorial_lib.methods.peft.adapters import Adapter
from tutorial_lib.methods.peft.lora import (
    UNIFIED_VIEW,
    LoRALinear,
    copy_lora_from_peft,
    merge_lora,
    modified_output,
)
from tutorial_lib.methods.peft.peft_methods import LoRA


def logits(model, b):
    with torch.no_grad():
        return model.eval()(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits


@pytest.mark.parametrize("fam", FAMILIES)
def test_our_lora_computes_what_peft_computes_on_the_same_weights(fam):
    b = batch()
    theirs = LoRA(r=4, alpha=8).apply(tiny_classifier(fam))
    perturb_trainable(theirs)  # B ≠ 0: the LoRA path really contributes
    ours = LoRA(r=4, alpha=8, ours=True).apply(tiny_classifier(fam))
    assert copy_lora_from_peft(ours, theirs) == 4  # q and v in 2 layers
    ours.head.load_state_dict(theirs.head.state_dict())
    base = logits(tiny_classifier(fam), b)
    out_ours, out_theirs = logits(ours, b), logits(theirs, b)
    assert (out_theirs - base).abs().max() > 1e-2  # the adapters change the function
    torch.testing.assert_close(out_ours, out_theirs, rtol=0, atol=1e-5)


def test_lora_linear_is_the_base_layer_at_init_and_merges_to_the_same_function():
    torch.manual_seed(0)
    base = nn.Linear(16, 8)
    layer = LoRALinear(base, r=2, alpha=4)
    x = torch.randn(5, 16)
    assert torch.equal(layer(x), base(x))  # B = 0
    with torch.no_grad():
        layer.B.normal_()
    assert layer.scale == 2.0
    expected = base(x) + 2.0 * x @ (layer.B @ layer.A).T  # W + (α/r)·BA
    torch.testing.assert_close(layer(x), expected)
    torch.testing.assert_close(layer.merged()(x), layer(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("fam", FAMILIES)
def test_merging_our_lora_keeps_the_logits(fam):
    b = batch()
    model = LoRA(r=4, alpha=8, ours=True).apply(tiny_classifier(fam))
    perturb_trainable(model)
    before = logits(model, b)
    assert merge_lora(model) == 4
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    torch.testing.assert_close(logits(model, b), before, rtol=0, atol=1e-4)


def test_the_unified_view_reproduces_lora_as_parallel_and_the_adapter_as_sequential():
    torch.manual_seed(0)
    sub = nn.Linear(16, 16)
    x = torch.randn(4, 16)
    lora = LoRALinear(sub, r=3, alpha=6)
    adapter = Adapter(16, 3, init_std=0.5)  # zero biases at init, as modified_output has none
    with torch.no_grad():
        lora.B.normal_()
    parallel = modified_output(sub, x, lora.A, lora.B, insertion="parallel", scale=lora.scale,
                               act=lambda t: t)
    torch.testing.assert_close(parallel, lora(x))
    sequential = modified_output(sub, x, adapter.down.weight, adapter.up.weight,
                                 insertion="sequential", act=F.gelu)
    torch.testing.assert_close(sequential, adapter(sub(x)))
    # the same Δ-function reading the other place is another function
    swapped = modified_output(sub, x, adapter.down.weight, adapter.up.weight, insertion="parallel")
    assert not torch.allclose(swapped, sequential)
    assert {r.insertion for r in UNIFIED_VIEW} == {"parallel", "sequential"}


def _notebook_self_check() -> tuple[str, str]:
    """Notebook 14's self-check cell (the learner's stub and the check) and its solution's code."""
    import json
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "notebooks" / "14_peft.ipynb"
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    cell = next(s for s in cells if "def my_lora_output" in s and "selfcheck.check" in s)
    solutions = next(s for s in cells if s.startswith("## Solutions"))
    solution = re.search(r"<summary>Self-check</summary>\s*```python\n(.*?)```", solutions, re.S)
    return cell, solution.group(1)


def test_the_notebooks_self_check_reports_the_stub_passes_the_solution_and_fails_a_wrong_scale(capsys):
    from tutorial_lib import selfcheck
    from tutorial_lib.methods.peft import lora

    cell, solution = _notebook_self_check()
    ns = {"torch": torch, "lora": lora}
    exec(cell, ns)  # as the learner first runs it: the stub is reported, nothing raises
    assert "not written yet" in capsys.readouterr().out
    check = ns["lora_reference"], selfcheck.cases(ns["random_lora"])
    exec(solution, ns)
    with torch.no_grad():
        assert selfcheck.check(ns["my_lora_output"], *check)
        for base, x, A, B, alpha in selfcheck.cases(ns["random_lora"]):  # the reference is LoRA's layer
            layer = LoRALinear(base, A.shape[0], alpha)
            layer.A.copy_(A)
            layer.B.copy_(B)
            assert torch.allclose(layer(x), ns["lora_reference"](base, x, A, B, alpha), atol=1e-5)
        wrong = selfcheck.check(lambda base, x, A, B, alpha: base(x) + alpha * (x @ A.T @ B.T),
                                ns["lora_reference"], selfcheck.cases(ns["random_lora"]))
    assert not wrong and "largest difference" in wrong.message
