"""Tests of tutorial_lib.methods.instruction.dpo: the loss against a hand computation, log 2 at
the start, the gradient through the policy only, a few steps that raise the chosen reply's
implicit reward above the rejected one's — and the loss against ``trl``'s ``DPOTrainer`` on the
same batch (``trl`` is a development dependency, installed by scripts/setup_env.sh; not a runtime
one: it pins pyarrow >= 21, which Colab's stack lacks)."""

from __future__ import annotations

import copy
import importlib.util
import math

import pytest
import torch
from tiny import word_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from tutorial_lib.methods.instruction import dpo, sft
from tutorial_lib.settings import Budget

WORDS = "is it good ? the plot was dull film great yes no maybe not really".split()
PAIRS = [("is it good ?", "yes", "no"), ("the plot was dull", "not really", "yes great film"),
         ("film great ?", "yes", "maybe not")]
pytestmark = pytest.mark.usefixtures("one_thread")
HAS_TRL = importlib.util.find_spec("trl") is not None


@pytest.fixture(scope="module")
def tok():
    t = word_tokenizer(WORDS)
    t.eos_token = "<|im_end|>"  # trl appends it to every reply that lacks it (ours end with it)
    return t


def tiny_lm(tok, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                      initializer_range=0.5, bos_token_id=None, eos_token_id=None, pad_token_id=1)
    return LlamaForCausalLM(cfg).eval()


def batch_of(tok, pairs=PAIRS):
    return dpo.collate_pairs(tok.pad_token_id)([dpo.pair_row(tok, *p) for p in pairs])


def moved_lora(tok, seed: int = 0):
    """A LoRA model whose B matrices are not zero: a policy away from its reference."""
    model = sft.with_lora(tiny_lm(tok), r=4, alpha=8.0, seed=seed)
    torch.manual_seed(seed + 10)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    return model.eval()


def test_the_loss_and_the_rewards_equal_a_hand_computation():
    pc, pr = torch.tensor([-1.0, -2.0, -4.0]), torch.tensor([-1.5, -1.0, -4.5])
    rc, rr = torch.tensor([-1.2, -2.5, -3.0]), torch.tensor([-1.4, -0.8, -6.0])
    beta = 0.5
    loss, chosen, rejected = dpo.dpo_loss(pc, pr, rc, rr, beta)
    hand = []
    for i in range(3):
        margin = beta * ((pc[i] - rc[i]) - (pr[i] - rr[i])).item()
        hand.append(-math.log(1 / (1 + math.exp(-margin))))
    assert loss.item() == pytest.approx(sum(hand) / 3, rel=1e-6)
    assert chosen.tolist() == pytest.approx([0.1, 0.25, -0.5])
    assert rejected.tolist() == pytest.approx([-0.05, -0.1, 0.75])
    assert dpo.implicit_reward(pc, rc, beta).tolist() == pytest.approx(chosen.tolist())


def test_at_the_start_the_policy_is_the_reference_and_the_loss_is_log_2(tok):
    model = sft.with_lora(tiny_lm(tok), r=4, alpha=8.0)
    loss, parts = dpo.batch_loss(model, batch_of(tok), beta=0.1)
    assert loss.item() == pytest.approx(math.log(2), abs=1e-6)
    assert parts["chosen reward"] == pytest.approx(0, abs=1e-6)


def test_the_gradient_flows_through_the_policy_only(tok):
    policy, ref_model = tiny_lm(tok, 0), tiny_lm(tok, 1)
    ref_model.train()  # its parameters require grad: none may reach them
    batch = batch_of(tok)
    loss, _ = dpo.batch_loss(policy, batch, beta=0.1, ref_model=ref_model)
    loss.backward()
    assert all(p.grad is None for p in ref_model.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_with_lora_the_reference_is_the_disabled_adapter_and_a_constant(tok):
    model, batch = moved_lora(tok), batch_of(tok)
    loss, _ = dpo.batch_loss(model, batch, beta=0.1)
    grads = torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])
    args = batch["input_ids"], batch["attention_mask"], batch["labels"]
    with torch.no_grad():
        with model.disable_adapter():
            ref, _ = dpo.sequence_logps(model, *args)
        pretrained, _ = dpo.sequence_logps(tiny_lm(tok), *args)
    assert torch.allclose(ref, pretrained, atol=1e-5)  # the disabled adapter is the pretrained model
    policy, _ = dpo.sequence_logps(model, *args)
    by_hand, _, _ = dpo.dpo_loss(*policy.chunk(2), *ref.chunk(2), 0.1)
    assert loss.item() == pytest.approx(by_hand.item(), abs=1e-6)
    expected = torch.autograd.grad(by_hand, [p for p in model.parameters() if p.requires_grad])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, expected))


def test_reference_logps_computed_once_give_the_same_loss_and_gradient(tok):
    """The reference's log-probabilities computed once (with_reference_logps, one pair a batch:
    other padding) give batch_loss the same loss and gradient as the adapter disabled in the
    batch; collate carries them only when every row has them."""
    model = moved_lora(tok)
    rows = [dpo.pair_row(tok, *p) for p in PAIRS]
    with model.disable_adapter():
        cached = dpo.with_reference_logps(model, rows, tok.pad_token_id, batch_size=1)
    batch, plain = dpo.collate_pairs(tok.pad_token_id)(cached), batch_of(tok)
    assert "ref_logps" in batch and "ref_logps" not in plain
    trainable = [p for p in model.parameters() if p.requires_grad]
    loss, parts = dpo.batch_loss(model, batch, beta=0.1)
    expected, expected_parts = dpo.batch_loss(model, plain, beta=0.1)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    assert loss.item() != pytest.approx(math.log(2))  # a policy away from its reference
    assert parts == pytest.approx(expected_parts, abs=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in
               zip(torch.autograd.grad(loss, trainable), torch.autograd.grad(expected, trainable)))


def test_a_few_dpo_steps_put_the_chosen_replies_above_the_rejected(tok):
    model = sft.with_lora(tiny_lm(tok), r=4, alpha=8.0, targets=("q_proj", "v_proj", "o_proj"))
    pairs = [dpo.pair_row(tok, *p) for p in PAIRS]
    fitted = dpo.finetune(model, pairs * 4, seed=0, pad_id=tok.pad_token_id, beta=0.5,
                          budget=Budget(epochs=2, batch_size=3, lr=3e-2))
    rows = fitted.history.train
    assert len(rows) == 8 and {"chosen reward", "reward accuracy"} <= set(rows[0])
    model.eval()
    with torch.no_grad():
        loss, parts = dpo.batch_loss(model, batch_of(tok), beta=0.5)
    assert loss.item() < math.log(2) - 0.1 and parts["reward accuracy"] == 1.0


# --- against trl ------------------------------------------------------------------------------


def trl_loss(tok, policy, ref_model, batch, beta, lora=None):
    """trl's sigmoid DPO loss (``DPOTrainer._compute_loss``, its default loss type) on our batch.
    ``lora``: a peft model whose LoRA config trl applies to ``policy`` (trl's reference is then the
    adapter disabled) and whose LoRA weights are copied in after."""
    import tempfile

    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True, bf16=False, beta=beta,
                     per_device_train_batch_size=2, precompute_ref_log_probs=False, loss_type=["sigmoid"])
    data = Dataset.from_dict({"prompt": ["is it good ?"], "chosen": [" yes"], "rejected": [" no"]})
    trainer = DPOTrainer(policy, ref_model=ref_model, args=args, train_dataset=data, processing_class=tok,
                         peft_config=lora.peft_config["default"] if lora is not None else None)
    if lora is not None:
        theirs = dict(trainer.model.named_parameters())
        with torch.no_grad():
            for name, p in lora.named_parameters():
                if "lora_" in name:
                    theirs[name].copy_(p)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
              "completion_mask": (batch["labels"] != -100).long()}
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, inputs, return_outputs=False).item()


@pytest.mark.skipif(not HAS_TRL, reason="trl is not installed (a development dependency: "
                                        "pip install -e '.[dev]'; it pins pyarrow>=21)")
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_the_loss_equals_trls_with_a_reference_model(tok, beta):
    policy, ref_model, batch = tiny_lm(tok, 0), tiny_lm(tok, 1), batch_of(tok)
    with torch.no_grad():
        ours, _ = dpo.batch_loss(policy, batch, beta=beta, ref_model=ref_model)
    theirs = trl_loss(tok, copy.deepcopy(policy), copy.deepcopy(ref_model), batch, beta)
    assert abs(ours.item() - math.log(2)) > 1e-3  # the policy is not its reference: a real test
    assert ours.item() == pytest.approx(theirs, abs=1e-5)


@pytest.mark.skipif(not HAS_TRL, reason="trl is not installed (a development dependency: "
                                        "pip install -e '.[dev]'; it pins pyarrow>=21)")
def test_the_loss_equals_trls_with_lora_and_the_adapter_disabled_as_reference(tok):
    model, batch = moved_lora(tok), batch_of(tok)
    with torch.no_grad():
        ours, _ = dpo.batch_loss(model, batch, beta=0.1)
    theirs = trl_loss(tok, tiny_lm(tok), None, batch, 0.1, lora=model)
    assert abs(ours.item() - math.log(2)) > 1e-3
    assert ours.item() == pytest.approx(theirs, abs=1e-5)
