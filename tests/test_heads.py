"""Tests for tutorial_lib.heads: gradient reversal and multi-head models."""

import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch, tiny_bert_classifier

from tutorial_lib import heads
from tutorial_lib.models import IGNORE_INDEX, Transformer, TransformerConfig


def tiny_encoder(seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(vocab_size=50, d_model=16, n_layer=1, n_head=2, d_ff=32,
                                         max_len=16, dropout=0.0))


def token_batch(seed: int = 0, B: int = 8, T: int = 6) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50, (B, T), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones(B, T, dtype=torch.long),
            "labels": ids % 3}  # a token-level property the encoder can expose


@pytest.mark.parametrize("lam", [0.0, 0.5, 2.0])
def test_gradient_reversal_is_identity_forward_and_minus_lambda_backward(lam):
    x = torch.randn(4, 3, requires_grad=True)
    g = torch.randn(4, 3)
    y = heads.reverse_gradient(x, lam)
    assert torch.equal(y, x)
    (y * g).sum().backward()
    assert torch.equal(x.grad, -lam * g)


def grads(model: heads.MultiHeadModel, batch: dict) -> dict[str, torch.Tensor]:
    model.zero_grad()
    model(batch["input_ids"], batch["attention_mask"], head="adv", labels=batch["labels"]).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_adversarial_head_gets_normal_gradients_and_the_encoder_reversed_ones():
    lam = 0.7
    plain = heads.MultiHeadModel(tiny_encoder(), {"adv": heads.HeadConfig(3, "token", dropout=0)})
    adv = copy.deepcopy(plain)
    adv.heads["adv"] = heads.TaskHead(16, heads.HeadConfig(3, "token", reverse_gradient=True,
                                                           lambda_=lam, dropout=0))
    adv.heads["adv"].linear.load_state_dict(plain.heads["adv"].linear.state_dict())
    batch = token_batch()
    g_plain, g_adv = grads(plain, batch), grads(adv, batch)
    for name in g_plain:
        if name.startswith("heads."):
            torch.testing.assert_close(g_adv[name], g_plain[name])  # the head descends as usual
        else:
            torch.testing.assert_close(g_adv[name], -lam * g_plain[name])  # the encoder ascends


def test_an_mlp_head_has_a_hidden_layer_and_reset_parameters_draws_a_fresh_one():
    head = heads.TaskHead(16, heads.HeadConfig(3, "token", hidden=8))
    assert head.mlp[0].weight.shape == (8, 16) and head.linear.weight.shape == (3, 8)
    before = {k: v.clone() for k, v in head.state_dict().items()}
    head.reset_parameters()
    after = head.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k in after if k.endswith("weight"))
    assert torch.equal(head.linear.bias, torch.zeros(3))
    assert float(head.linear.weight.std()) == pytest.approx(0.02, rel=0.5)
    linear = heads.TaskHead(16, heads.HeadConfig(3, "token"))  # unchanged: the same parameters
    assert set(linear.state_dict()) == {"linear.weight", "linear.bias"}
    for bad in (dict(level="lm", hidden=8), dict(hidden=-1)):
        with pytest.raises(ValueError, match="hidden"):
            heads.HeadConfig(3, **bad)


def test_an_mlp_adversary_sends_the_encoder_minus_lambda_times_its_gradient():
    lam = 0.5
    plain = heads.MultiHeadModel(tiny_encoder(), {"adv": heads.HeadConfig(3, "token", dropout=0,
                                                                           hidden=8)})
    adv = copy.deepcopy(plain)
    adv.heads["adv"] = heads.TaskHead(16, heads.HeadConfig(3, "token", reverse_gradient=True,
                                                           lambda_=lam, dropout=0, hidden=8))
    adv.heads["adv"].load_state_dict(plain.heads["adv"].state_dict())
    g_plain, g_adv = grads(plain, token_batch()), grads(adv, token_batch())
    assert any(n.startswith("heads.adv.mlp") for n in g_plain)
    for name in g_plain:
        expected = g_plain[name] if name.startswith("heads.") else -lam * g_plain[name]
        torch.testing.assert_close(g_adv[name], expected)


def test_an_adversarial_head_learns_its_labels_on_a_frozen_encoder():
    model = heads.MultiHeadModel(tiny_encoder(), {
        "adv": heads.HeadConfig(3, "token", reverse_gradient=True, lambda_=1.0, dropout=0.0)})
    model.encoder.requires_grad_(False)
    opt = torch.optim.Adam(model.heads.parameters(), lr=1e-2)
    batch = heads.merge_batches({"adv": token_batch()})
    losses = []
    for _ in range(60):
        loss = model.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_with_a_trainable_encoder_the_head_descends_and_the_encoder_ascends():
    """One SGD step split in two: the head's half lowers the head's loss, the encoder's half
    (reversed gradient) raises it."""
    model = heads.MultiHeadModel(tiny_encoder(), {
        "adv": heads.HeadConfig(3, "token", reverse_gradient=True, lambda_=1.0, dropout=0.0)})
    batch = heads.merge_batches({"adv": token_batch()})
    loss0 = model.loss(batch)
    loss0.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters()
               if p.dim() > 1)

    def after_step(params) -> float:
        saved = copy.deepcopy(model.state_dict())
        with torch.no_grad():
            for _, p in params:
                p -= 0.05 * p.grad
            loss = model.loss(batch).item()
        model.load_state_dict(saved)
        return loss

    head = [(n, p) for n, p in model.named_parameters() if n.startswith("heads.")]
    encoder = [(n, p) for n, p in model.named_parameters() if not n.startswith("heads.")]
    assert after_step(head) < loss0.item()
    assert after_step(encoder) > loss0.item()


def test_sequence_head_pools_the_last_real_token_for_our_encoder_and_first_for_hf_style():
    model = heads.MultiHeadModel(tiny_encoder(), {"cls": heads.HeadConfig(2)})
    assert model.pool == "last"
    masked = tiny_encoder()
    masked.config = dataclasses.replace(masked.config, causal=False)
    assert heads.MultiHeadModel(masked, {"cls": heads.HeadConfig(2)}).pool == "last"  # [CLS] at the end
    assert heads.MultiHeadModel(tiny_bert_classifier().encoder, {"cls": heads.HeadConfig(2)}).pool == "first"
    assert heads.MultiHeadModel(tiny_encoder(), {"cls": heads.HeadConfig(2)}, pool="first").pool == "first"
    hidden = torch.arange(2 * 4 * 1.0).view(2, 4, 1)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    assert model.pooled(hidden, mask).flatten().tolist() == [1.0, 7.0]
    model.pool = "first"
    assert model.pooled(hidden, mask).flatten().tolist() == [0.0, 4.0]


def test_loss_is_the_weighted_sum_of_head_losses_and_ignores_unlabelled_tokens():
    model = heads.MultiHeadModel(tiny_encoder(), {
        "seq": heads.HeadConfig(2, loss_weight=0.5, dropout=0.0),
        "tok": heads.HeadConfig(3, "token", loss_weight=2.0, dropout=0.0)}).eval()
    tok = token_batch()
    tok["labels"][:, 3:] = IGNORE_INDEX
    seq = {**token_batch(1), "labels": torch.tensor([0, 1] * 4)}
    total = model.loss(heads.merge_batches({"seq": seq, "tok": tok}))
    l_seq = model(seq["input_ids"], seq["attention_mask"], "seq", seq["labels"]).loss
    logits = model(tok["input_ids"], tok["attention_mask"], "tok").logits
    l_tok = torch.nn.functional.cross_entropy(logits[:, :3].flatten(0, 1), tok["labels"][:, :3].flatten())
    torch.testing.assert_close(total, 0.5 * l_seq + 2.0 * l_tok)
    assert set(model.last_losses) == {"seq", "tok"}


def test_multitask_loader_cycles_the_auxiliary_loader():
    loader = heads.MultiTaskLoader({"main": [{"x": torch.tensor(i)} for i in range(5)],
                                    "aux": [{"x": torch.tensor(10 + i)} for i in range(2)]},
                                   main="main")
    batches = list(loader)
    assert len(loader) == len(batches) == 5
    assert [int(b["aux/x"]) for b in batches] == [10, 11, 10, 11, 10]
    assert heads.split_batch(batches[0]) == {"main": {"x": 0}, "aux": {"x": 10}}


def test_set_lambda_and_dann_schedule():
    model = heads.MultiHeadModel(tiny_encoder(), {
        "adv": heads.HeadConfig(3, "token", reverse_gradient=True), "main": heads.HeadConfig(2)})
    model.set_lambda("adv", 0.25)
    assert model.heads["adv"].grl.lambda_ == 0.25
    with pytest.raises(ValueError):
        model.set_lambda("main", 1.0)
    assert heads.dann_lambda(0.0) == 0.0 and heads.dann_lambda(1.0, 2.0) == pytest.approx(2.0, abs=1e-3)


def test_regression_head_uses_mse():
    model = heads.MultiHeadModel(tiny_encoder(), {"sts": heads.HeadConfig(1, dropout=0.0)}).eval()
    b = padded_batch()
    y = torch.tensor([0.5, 4.0, 2.0, 1.0])
    out = model(b["input_ids"], b["attention_mask"], head="sts", labels=y)
    assert out.logits.shape == (4, 1)
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), y))


def test_causal_lm_targets_skip_padding_and_cls():
    ids = torch.tensor([[7, 8, 9, 2, 0], [5, 6, 2, 0, 0]])
    mask = (ids != 0).long()
    t = heads.causal_lm_targets(ids, mask, ignore_ids=(2,))
    ign = IGNORE_INDEX
    assert t.tolist() == [[8, 9, ign, ign, ign], [6, ign, ign, ign, ign]]


def test_shared_input_is_encoded_once_for_a_classification_and_an_lm_head():
    model = heads.MultiHeadModel(tiny_encoder(), {
        "cls": heads.HeadConfig(3, dropout=0.0), "lm": heads.HeadConfig(0, "lm", loss_weight=0.5)})
    model.eval()
    calls = []
    model.encoder.register_forward_hook(lambda *a: calls.append(1))
    b = padded_batch()
    total = model.loss({"input_ids": b["input_ids"], "attention_mask": b["attention_mask"],
                        "cls/labels": b["labels"], "lm/marker": torch.tensor(0)})
    assert len(calls) == 1
    expected = model.last_losses["cls"] + 0.5 * model.last_losses["lm"]
    assert float(total) == pytest.approx(expected, rel=1e-5)
    # the LM head is tied to the word embeddings
    assert model.heads["lm"].embeddings[0] is model.encoder.tok_emb


def test_notebook_12s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_reversals():
    """Notebook 12's self-check, run as the learner would: the stub is reported, the solution passes,
    and four plausible mistakes fail (no reversal; −grad with λ left out; λ·grad with the sign left
    out; −λ·x in the forward pass, which sends back the right gradient but not the identity)."""
    from notebook_selfcheck import LearnerRun

    learner = LearnerRun("12_adversarial_heads", {"torch": torch, "heads": heads}, "my_reverse_gradient",
                         "random_input", heads.reverse_gradient, wrap="output_and_grad")

    def backward_times(factor):
        def fn(x, lam):
            class Wrong(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad):
                    return factor(lam) * grad
            return Wrong.apply(x)
        return fn

    assert learner.check(backward_times(lambda lam: -lam))  # the frame is right
    wrong = {"no reversal": lambda x, lam: x, "λ left out": backward_times(lambda lam: -1.0),
             "sign left out": backward_times(lambda lam: lam), "−λx forward": lambda x, lam: -lam * x}
    learner.fails(wrong)
    message = learner.check(wrong["−λx forward"]).message
    assert message.startswith("✗ case 1: [0]:"), message  # the output differs; the gradient alone would not
