"""Tests for tutorial_lib.methods.probing.adversaries (issue 59): the adversary's options — the
confusion objective, an MLP adversary, a head re-initialised every k steps — each changing the
encoder's training as intended, and the default (the reversed gradient) as it was. Tiny random
models, no data."""

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

# the tiny backbone, sentences and the fixtures (fp32, tokenizer) of the amnesic tests
from test_amnesic import fp32, tiny_backbone, tokenizer, upos_sentences  # noqa: F401
from tiny import tensors_equal

from tutorial_lib import heads
from tutorial_lib.heads import MultiHeadModel, merge_batches
from tutorial_lib.methods.probing import adversarial, adversaries, probing
from tutorial_lib.methods.probing.adversarial import Arm
from tutorial_lib.methods.probing.adversaries import Adversary
from tutorial_lib.models import IGNORE_INDEX
from tutorial_lib.settings import Budget
from tutorial_lib.training import pad_collate

REVERSED = Arm("reversed POS", "gold", reverse=True, lambda_=1.0)
BUDGET = Budget(batch_size=4, lr=5e-3, eval_batch_size=8)
STAGE = dict(steps=4, head_lr=1e-2, head_warmup_steps=2, batch_size=4)


@pytest.fixture(autouse=True)
def seventeen_tags(monkeypatch):
    monkeypatch.setattr(probing, "upos_names", lambda: [f"TAG{i}" for i in range(17)])


def equal_encoders(a, b) -> bool:
    sa, sb = a.encoder.state_dict(), b.encoder.state_dict()
    return all(tensors_equal(sa[k], sb[k]) for k in sa)


# --- the adversary's options -------------------------------------------------------------------


def test_the_default_adversary_is_the_flag_and_the_options_are_checked():
    assert REVERSED.adversary == adversaries.REVERSE == Adversary()
    cfg = adversaries.head_config(17, Adversary(), reverse=True, lambda_=0.5)
    assert cfg.reverse_gradient and cfg.lambda_ == 0.5 and cfg.hidden == 0 and cfg.level == "token"
    assert not adversaries.head_config(17, Adversary(), reverse=False, lambda_=0.0).reverse_gradient
    confusion = adversaries.head_config(17, Adversary("confusion", hidden=8), reverse=True, lambda_=1)
    assert not confusion.reverse_gradient and confusion.hidden == 8  # no reversal layer needed
    assert Adversary("confusion", hidden=64, reinit_every=10).label == "confusion + re-init/10 + MLP 64"
    with pytest.raises(ValueError, match="objective"):
        Adversary("entropy-ish")
    with pytest.raises(ValueError, match="≥ 0"):
        Adversary(reinit_every=-1)
    with pytest.raises(ValueError, match="reverse=True"):
        Arm("confused", "gold", adversary=Adversary("confusion"))


def test_confusion_is_minimal_at_the_uniform_prediction():
    uniform = adversaries.confusion(torch.zeros(5, 4))
    assert float(uniform) == pytest.approx(np.log(4))
    assert float(adversaries.confusion(torch.tensor([[3.0, 0.0, 0.0, 0.0]]))) > float(uniform)


def entropy(logits: torch.Tensor) -> float:
    p = F.softmax(logits.detach().float(), -1)
    return float(-(p * p.clamp_min(1e-12).log()).sum(-1).mean())


def test_the_confusion_objective_trains_the_head_to_read_and_the_encoder_to_raise_its_entropy(
        tokenizer):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=False)
    rows = probing.token_label_rows(bb, upos_sentences(8, 1), "upos")
    batch = pad_collate(bb.pad_id)(rows)
    torch.manual_seed(0)
    model = MultiHeadModel(bb.encoder, {"pos": adversaries.head_config(
        17, Adversary("confusion"), reverse=True, lambda_=2.0)}).eval()  # eval: no dropout
    with torch.no_grad():  # a head that reads something: far from uniform to start with
        model.heads["pos"].linear.weight.mul_(100.0)
    keep = batch["labels"] != IGNORE_INDEX
    head = model.heads["pos"]
    loss = adversaries.stage_loss(Adversary("confusion"), 2.0)(model, merge_batches({"pos": batch}))
    loss.backward()
    assert set(model.last_losses) == {"pos", "confusion"}
    # the head's gradient is its plain cross-entropy on detached features: nothing of the confusion
    hidden = model.encode(batch["input_ids"], batch["attention_mask"]).detach()
    expected = torch.autograd.grad(F.cross_entropy(head(hidden)[keep], batch["labels"][keep]),
                                   list(head.parameters()))
    for p, g in zip(head.parameters(), expected):
        torch.testing.assert_close(p.grad, g)
    # the encoder's gradient is λ × the confusion term's alone; a step along it raises the entropy
    before = entropy(head(hidden)[keep])
    moved = [p for p in model.encoder.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in moved))
    with torch.no_grad():  # a small step down the encoder's gradient
        for p in moved:
            p -= 1e-3 * p.grad / norm
        after = entropy(head(model.encode(batch["input_ids"], batch["attention_mask"]))[keep])
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters())
    assert after > before


def test_a_reversed_stage_is_unchanged_by_the_options_it_does_not_use(tokenizer):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    adv = upos_sentences(16, 1)
    plain, info = adversarial.intermediate_stage(bb, REVERSED, adv, BUDGET, seed=0, **STAGE)
    again, _ = adversarial.intermediate_stage(
        bb, replace(REVERSED, adversary=Adversary(retrain_steps=5)), adv, BUDGET, seed=0, **STAGE)
    assert equal_encoders(plain, again)  # retrain_steps without reinit_every: nothing happens
    assert info["steps"] == 4 and info["reinits"] == [] and info["checks"] == []
    assert np.isfinite(info["head_loss"]) and "confusion" not in info
    conf, c_info = adversarial.intermediate_stage(
        bb, replace(REVERSED, adversary=Adversary("confusion")), adv, BUDGET, seed=0, **STAGE)
    assert not equal_encoders(plain, conf) and c_info["confusion"] > 0
    mlp, m_info = adversarial.intermediate_stage(
        bb, replace(REVERSED, adversary=Adversary(hidden=8)), adv, BUDGET, seed=0, **STAGE)
    assert not equal_encoders(plain, mlp) and 0.0 <= m_info["head_accuracy"] <= 1.0


def test_the_adversary_is_reinitialised_and_retrained_alone_every_k_steps(tokenizer, monkeypatch):  # noqa: F811
    bb = tiny_backbone(tokenizer, causal=True)
    calls, resets = [], []
    train_alone = adversarial.train_head_alone

    def spy_train(model, head, rows, collate, budget, **kw):
        calls.append(kw["steps"])
        return train_alone(model, head, rows, collate, budget, **kw)

    reset = heads.TaskHead.reset_parameters

    def spy_reset(self):
        resets.append(self.linear.weight.detach().clone())
        reset(self)

    monkeypatch.setattr(adversarial, "train_head_alone", spy_train)
    monkeypatch.setattr(heads.TaskHead, "reset_parameters", spy_reset)
    arm = replace(REVERSED, adversary=Adversary(reinit_every=2, retrain_steps=3))
    _, info = adversarial.intermediate_stage(bb, arm, upos_sentences(16, 1), BUDGET,
                                             **{**STAGE, "steps": 6})
    assert info["reinits"] == [2, 4]  # after steps 2 and 4, not after the last
    assert calls == [2, 3, 3]  # the warm-up, then each re-initialised head alone
    assert len(resets) == 3  # built once, re-initialised twice
    assert not tensors_equal(resets[1], resets[0])  # the head had trained before its re-init
