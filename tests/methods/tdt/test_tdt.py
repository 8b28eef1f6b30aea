"""Tests for tutorial_lib.methods.tdt.tdt: confidences, views, the KL hinge and the plain-fine-tuning
limit."""

import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch as _batch
from tiny import tensors_equal
from tiny import tiny_bert_classifier as _hf

from tutorial_lib.methods.tdt import regularized, tdt
from tutorial_lib.models import TransformerClassifier, TransformerConfig


def _ours(num_labels: int = 3, causal: bool = True) -> TransformerClassifier:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2, d_ff=32, max_len=12,
                            dropout=0.0, causal=causal)
    return TransformerClassifier(cfg, num_labels=num_labels, dropout=0.0)


MODELS = [_ours, lambda: _ours(causal=False), _hf]
IDS = ["ours-causal", "ours-bidirectional", "hf"]


@pytest.mark.parametrize("make", MODELS, ids=IDS)
def test_confidences_lie_strictly_between_0_and_1(make):
    model = tdt.attach(make())
    with torch.no_grad():
        model.tdt.scorer.linear.weight.mul_(50)  # a trained, confident scorer
    v = tdt.views_for_batch(model, _batch())
    m = v["m"][v["content"]]
    assert ((m > 0) & (m < 1)).all()
    assert m.std() > 0.01  # really per token


def test_padding_never_enters_the_distilled_mean():
    torch.manual_seed(0)
    e = torch.randn(2, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    content = regularized.content_mask(_ours(), mask)  # ours: last real token is [CLS]
    m = torch.rand(2, 6)
    distilled, negative = tdt.make_views(e, m, content)
    # the mean is over the 3 content tokens of row 0, not the padded 6 (nor the [CLS])
    mean0 = e[0, :3].mean(0)
    assert torch.allclose(distilled[0, 1], m[0, 1] * e[0, 1] + (1 - m[0, 1]) * mean0, atol=1e-6)
    # changing whatever sits at the padding positions changes nothing
    e2 = e.clone()
    e2[0, 4:] = 1e3
    d2, n2 = tdt.make_views(e2, m, content)
    assert torch.allclose(d2[0, :4], distilled[0, :4]) and torch.allclose(n2[0, :4], negative[0, :4])


@pytest.mark.parametrize("make", MODELS, ids=IDS)
def test_views_never_touch_cls_or_padding(make):
    model = tdt.attach(make())
    batch = _batch()
    v = tdt.views_for_batch(model, batch)
    keep = ~v["content"]
    for view in ("distilled", "negative"):
        assert tensors_equal(v[view][keep], v["e"][keep])
        assert not torch.allclose(v[view][v["content"]], v["e"][v["content"]])


@pytest.mark.parametrize("make", MODELS, ids=IDS)
def test_with_extra_weights_zero_tdt_equals_plain_finetuning(make):
    batch = _batch()
    plain = make()
    loss_plain = plain(**batch).loss
    loss_plain.backward()
    model = tdt.attach(make(), tdt.TDTConfig(m_rate=0.0, kl_rate=0.0, margin=1.0))
    model.train()
    loss = tdt.tdt_loss(model, batch)
    loss.backward()
    assert loss.item() == pytest.approx(loss_plain.item(), rel=1e-5)
    grads = dict(plain.named_parameters())
    for name, p in model.named_parameters():
        if name.startswith("tdt."):
            assert p.grad is None or torch.count_nonzero(p.grad) == 0
        elif grads[name].grad is not None:
            assert torch.allclose(p.grad, grads[name].grad, atol=1e-6), name
    # and with the weights on, the extra terms really contribute (the scorer learns)
    model = tdt.attach(make(), tdt.TDTConfig(m_rate=1.0, kl_rate=1.0, margin=1.0))
    loss = tdt.tdt_loss(model, batch)
    loss.backward()
    assert loss.item() > loss_plain.item()
    assert torch.count_nonzero(model.tdt.scorer.linear.weight.grad) > 0


def test_kl_hinge_is_zero_when_the_margin_is_met():
    p = F.log_softmax(torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), -1)
    negative = F.log_softmax(torch.tensor([[0.0, 3.0, 3.0], [3.0, 0.0, 3.0]]), -1)
    # distilled == clean and the negative far away: the gap is −½KL(p‖p̂)·2 < −margin
    gap = -regularized.kl_per_example(p, negative)
    margin = 0.5 * gap.abs().min().item()
    p_req = p.clone().requires_grad_(True)
    hinge = tdt.kl_hinge(p_req, p_req, negative, margin)
    assert hinge.item() == 0.0
    hinge.backward()
    assert torch.count_nonzero(p_req.grad) == 0
    # not met: the hinge equals the gap + margin, averaged
    big = gap.abs().max().item() + 1.0
    assert tdt.kl_hinge(p, p, negative, big).item() == pytest.approx((gap + big).mean().item(),
                                                                     rel=1e-5)


def test_regression_is_refused_not_silently_switched_off():
    with pytest.raises(regularized.RegressionNotSupported, match="TDT"):
        tdt.attach(_ours(num_labels=1))
    model = tdt.attach(_ours())
    batch = _batch()
    batch["labels"] = batch["labels"].float()
    with pytest.raises(regularized.RegressionNotSupported):
        tdt.tdt_loss(model, batch)


def test_upstream_kl_rate_conversion():
    assert tdt.from_upstream_kl_rate(2.0, 2) == 1.0


def test_training_logs_terms_and_confidence_tables():
    from tutorial_lib.training import create_trainer

    model = tdt.attach(_ours())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    trainer = create_trainer(model, opt, device=torch.device("cpu"), loss_fn=tdt.tdt_loss)
    trainer.run([_batch()] * 4, max_epochs=1)
    assert len(model.tdt.history) == 4 and 0 < model.tdt.history[-1]["mean m"] < 1

    class Tok:
        pad_token_id = 0

        def convert_ids_to_tokens(self, ids):
            return [f"t{i}" for i in ids]

    rows = tdt.token_confidences(model, [[5, 6, 7, 2], [6, 6, 2]], Tok())
    assert [t for t, _ in rows[0]] == ["t5", "t6", "t7"]  # the final [CLS] is not content
    table = tdt.confidence_table(rows, min_count=2)
    assert list(table.index) == ["t6"] and table.loc["t6", "count"] == 3


def test_label_association_is_the_largest_smoothed_log_ratio_shift():
    import math

    confidences = [[("good", 0.9), ("the", 0.5)], [("good", 0.8), ("the", 0.4)],
                   [("bad", 0.9), ("the", 0.5)], [("bad", 0.1), ("the", 0.3)], [("rare", 0.2)]]
    labels = [1, 1, 0, 0, 1]
    assoc = tdt.label_association(confidences, labels, min_count=2)
    assert set(assoc.index) == {"good", "bad", "the"}  # "rare" is seen once
    prior = {0: 2 / 5, 1: 3 / 5}
    # "good": 2 of label 1 → P(1 | good) = (2+1)/(2+2), P(0 | good) = 1/4 (add-one)
    assert assoc["good"] == pytest.approx(max(abs(math.log(3 / 4) - math.log(prior[1])),
                                              abs(math.log(1 / 4) - math.log(prior[0]))))
    assert assoc["the"] == pytest.approx(max(abs(math.log(1 / 2) - math.log(p))
                                             for p in prior.values()))
    assert assoc["bad"] > assoc["the"] and assoc["good"] > assoc["the"]
    assert assoc.name == "|log-ratio|"  # log P(y|tok) − log P(y) is a log-ratio (PMI), not log-odds


def test_upstream_margin_conversion_and_a_positive_margin_keeps_the_triplet_term_active():
    """08's committed run had margin 0: the hinge sat at 0.01–0.03 and mostly sent no gradient to
    the scorer. With upstream's maxg 2 in our units (× C) it is non-zero on a real batch, and the
    scorer gets the hinge's gradient."""
    assert tdt.from_upstream_margin(2.0, 2) == 4.0
    model = tdt.attach(_ours(), tdt.TDTConfig(m_rate=0.0, kl_rate=1.0, margin=4.0))
    tdt.tdt_loss(model.train(), _batch()).backward()
    assert model.tdt.history[-1]["KL hinge"] > 3.0  # margin + a small gap: active
    assert torch.count_nonzero(model.tdt.scorer.linear.weight.grad) > 0


def test_the_collapse_penalty_is_zero_at_its_target_and_enters_the_loss_only_when_weighted():
    content = torch.tensor([[True, True, False], [True, False, False]])
    half = torch.full((2, 3), 0.5)
    assert tdt.collapse_penalty(half, content).item() == 0.0
    low = torch.tensor([[0.1, 0.1, 0.9], [0.1, 0.9, 0.9]])  # padding's 0.9 does not count
    assert tdt.collapse_penalty(low, content).item() == pytest.approx(0.16)
    batch = _batch()
    plain = tdt.attach(_ours(), tdt.TDTConfig())
    weighted = tdt.attach(_ours(), tdt.TDTConfig(collapse_weight=10.0, collapse_target=0.9))
    a, b = tdt.tdt_loss(plain.train(), batch), tdt.tdt_loss(weighted.train(), batch)
    penalty = weighted.tdt.history[-1]["collapse penalty"]
    assert penalty > 0.1  # mean m ≈ 0.5 at the start, the target 0.9
    assert b.item() == pytest.approx(a.item() + 10.0 * penalty, rel=1e-5)


def test_notebook_08s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_views():
    """Notebook 08's self-check, run as the learner would: the stub is reported, the solution passes,
    and three plausible mistakes fail (ē averaged over every token, [CLS] and padding included; the
    confidence weights swapped between e and ē; the negative view keeping m·e instead of (1 − m)·e)."""
    from notebook_selfcheck import LearnerRun

    run = LearnerRun("08_tdt", {"torch": torch, "tdt": tdt}, "my_make_views", "random_batch",
                     tdt.make_views)

    def views(e_bar, w_e, w_bar, w_neg):
        def make(e, m, content):
            keep, w = content[..., None], m[..., None]
            mean = e_bar(e, keep)
            distilled = torch.where(keep, w_e(w) * e + w_bar(w) * mean, e)
            return distilled, torch.where(keep, w_neg(w) * e, e)
        return make

    content_mean = lambda e, keep: (e * keep).sum(1, keepdim=True) / keep.sum(1, keepdim=True)  # noqa: E731
    m, one_minus = (lambda w: w), (lambda w: 1 - w)
    wrong = {"ē over all tokens": views(lambda e, keep: e.mean(1, keepdim=True), m, one_minus, one_minus),
             "weights swapped": views(content_mean, one_minus, m, one_minus),
             "negative keeps m·e": views(content_mean, m, one_minus, m)}
    assert run.check(views(content_mean, m, one_minus, one_minus))  # the frame is right
    run.fails(wrong)
