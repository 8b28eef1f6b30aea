"""Tests for tutorial_lib.methods.forgetting.forgetting: the penalties, the diagonal Fisher, the two-head
model of stage 2, the regularised loss going through the one recipe (and its log), the refitted
source probe and the stage-2 curves."""

import numpy as np
import pytest
import torch
from tiny import padded_batch, tiny_bert_classifier
from torch import nn
from torch.utils.data import DataLoader

from tutorial_lib.finetuning import Run
from tutorial_lib.methods.forgetting import forgetting
from tutorial_lib.models import Output
from tutorial_lib.training import History, Method, fit, pad_collate, resumable_loader


def _two_head(num_labels: int = 4) -> forgetting.TwoHeadClassifier:
    source = tiny_bert_classifier(num_labels=2)
    torch.manual_seed(1)
    return forgetting.TwoHeadClassifier(source, num_labels)


def _source(model: forgetting.TwoHeadClassifier, fisher: bool = False) -> forgetting.SourceModel:
    anchor = forgetting.snapshot(forgetting.shared_parameters(model))
    fish = {n: torch.rand_like(a) for n, a in anchor.items()} if fisher else None
    return forgetting.SourceModel(0, model, anchor, fish, 0.9)


def _move(model: nn.Module, scale: float = 0.01) -> None:
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(scale * torch.randn(p.shape, generator=g))


def test_l2sp_penalty_is_zero_at_the_start_and_its_gradient_is_alpha_times_the_shift():
    model = _two_head()
    anchor = forgetting.snapshot(forgetting.shared_parameters(model))
    assert forgetting.l2sp_penalty(model, anchor, alpha=3.0, beta=0.0).item() == 0.0
    _move(model)
    alpha = 3.0
    penalty = forgetting.l2sp_penalty(model, anchor, alpha=alpha, beta=0.0)
    assert penalty.item() > 0
    penalty.backward()
    for name, p in forgetting.shared_parameters(model).items():
        torch.testing.assert_close(p.grad, alpha * (p.detach() - anchor[name]))
    for p in model.head.parameters():  # β = 0: the new head gets no gradient
        assert p.grad is None or torch.count_nonzero(p.grad) == 0


def test_weight_decay_pulls_to_zero_and_beta_decays_the_new_head():
    model = _two_head()
    beta = 0.5
    penalty = forgetting.l2sp_penalty(model, None, alpha=0.0, beta=beta)
    expected = 0.5 * beta * sum(p.pow(2).sum() for p in model.head.parameters())
    torch.testing.assert_close(penalty, expected)
    alpha = 2.0
    decay = forgetting.l2sp_penalty(model, None, alpha=alpha, beta=0.0)
    shared = forgetting.shared_parameters(model)
    torch.testing.assert_close(decay, 0.5 * alpha * sum(p.pow(2).sum() for p in shared.values()))


def test_ewc_penalty_weights_each_shift_by_its_fisher():
    model = _two_head()
    source = _source(model, fisher=True)
    _move(model)
    lam = 4.0
    penalty = forgetting.ewc_penalty(model, source.anchor, source.fisher, lam)
    penalty.backward()
    for name, p in forgetting.shared_parameters(model).items():
        torch.testing.assert_close(p.grad, lam * source.fisher[name] * (p.detach() - source.anchor[name]))
    # with every F_i = 1, EWC is L2-SP without β
    ones = {n: torch.ones_like(a) for n, a in source.anchor.items()}
    torch.testing.assert_close(forgetting.ewc_penalty(model, source.anchor, ones, lam),
                               forgetting.l2sp_penalty(model, source.anchor, lam, 0.0))


class _Softmax(nn.Module):
    """A linear softmax classifier of one feature vector per first token id."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.features = torch.randn(10, 3)
        self.linear = nn.Linear(3, 2)

    def forward(self, input_ids, attention_mask, labels=None):
        return Output(self.linear(self.features[input_ids[:, 0]]), None)


def test_fisher_of_a_softmax_classifier_equals_the_hand_computation():
    model = _Softmax()
    rows = [{"input_ids": [i], "labels": 0} for i in (1, 4, 7)]
    params = dict(model.linear.named_parameters())
    fisher = forgetting.diagonal_fisher(model, rows, pad_id=0, params=params, normalise=False)
    W, b = (model.linear.weight.detach().numpy(), model.linear.bias.detach().numpy())
    fw, fb = np.zeros_like(W), np.zeros_like(b)
    for i in (1, 4, 7):
        x = model.features[i].numpy()
        p = np.exp(W @ x + b)
        p /= p.sum()
        for y in range(2):  # d log p_y / dz = e_y − p; dz/dW = x
            dz = np.eye(2)[y] - p
            fw += p[y] * np.outer(dz, x) ** 2
            fb += p[y] * dz ** 2
    np.testing.assert_allclose(fisher["weight"].numpy(), fw / 3, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fisher["bias"].numpy(), fb / 3, rtol=1e-5, atol=1e-7)
    normed = forgetting.diagonal_fisher(model, rows, pad_id=0, params=params)
    mean = sum(f.sum() for f in normed.values()) / sum(f.numel() for f in normed.values())
    assert mean.item() == pytest.approx(1.0, rel=1e-5)


def test_the_source_head_is_frozen_and_its_view_scores_the_source_task():
    source = tiny_bert_classifier(num_labels=2).eval()
    batch = padded_batch(2)
    before = source(batch["input_ids"], batch["attention_mask"]).logits
    model = forgetting.TwoHeadClassifier(source, 5).eval()
    assert not any(p.requires_grad for p in model.source_head.parameters())
    target, src = model.both(batch["input_ids"], batch["attention_mask"])
    assert target.shape == (4, 5) and src.shape == (4, 2)
    torch.testing.assert_close(model.source_view()(batch["input_ids"], batch["attention_mask"]).logits,
                               before)
    torch.testing.assert_close(model(batch["input_ids"], batch["attention_mask"]).logits, target)


def test_lwf_term_is_zero_before_training_and_positive_after_a_move():
    stage1 = tiny_bert_classifier(num_labels=2).eval()  # the same seed: the same weights
    model = forgetting.TwoHeadClassifier(tiny_bert_classifier(num_labels=2), 3).eval()
    batch = padded_batch(3)
    _, src = model.both(batch["input_ids"], batch["attention_mask"])
    term = forgetting.lwf_term(model, src, batch, stage1, lam=1.0, temperature=2.0)
    assert term.item() == pytest.approx(0.0, abs=1e-6)
    _move(model, 0.2)
    _, src = model.both(batch["input_ids"], batch["attention_mask"])
    assert forgetting.lwf_term(model, src, batch, stage1, lam=1.0, temperature=2.0).item() > 1e-4


@pytest.mark.parametrize("kind", ["weight decay", "L2-SP", "EWC", "LwF"])
def test_strength_zero_is_plain_fine_tuning_and_a_strong_anchor_keeps_the_weights(kind):
    def train(reg: forgetting.Regulariser) -> forgetting.TwoHeadClassifier:
        model = _two_head(3)
        source = _source(model, fisher=True)
        teacher = tiny_bert_classifier(num_labels=2).eval() if kind == "LwF" else None
        rows = [{"input_ids": padded_batch(3)["input_ids"][i % 4].tolist()[: 3 + i % 5],
                 "labels": i % 3} for i in range(16)]
        loader = resumable_loader(rows, seed=0, batch_size=4, collate_fn=pad_collate(0))
        torch.manual_seed(0)
        fit(model, loader, lr=1e-2, weight_decay=0.0, epochs=1, schedule=None,
            method=Method(loss_fn=forgetting.stage_two_loss(reg, source, teacher)),
            amp_dtype=None)
        return model

    plain = train(forgetting.Regulariser())
    zero = train(forgetting.Regulariser(kind, 0.0))
    for a, b in zip(plain.parameters(), zero.parameters()):
        torch.testing.assert_close(a, b)
    if kind in ("L2-SP", "EWC"):
        start = _two_head(3)
        strong = train(forgetting.Regulariser(kind, 1e4))
        moved = [(p - q.to(p.device)).abs().max().item() for p, q in  # start: on the CPU
                 zip(forgetting.shared_parameters(strong).values(),
                     forgetting.shared_parameters(start).values())]
        free = [(p - q.to(p.device)).abs().max().item() for p, q in
                zip(forgetting.shared_parameters(plain).values(),
                    forgetting.shared_parameters(start).values())]
        assert max(moved) < max(free)


def test_unknown_regulariser_is_refused():
    with pytest.raises(ValueError, match="choose one of"):
        forgetting.Regulariser("dropout", 1.0)


@pytest.mark.parametrize("kind", ["none", "weight decay", "EWC", "LwF"])
def test_stage_two_loss_logs_the_cross_entropy_and_the_penalty_it_adds(kind):
    model = _two_head(3)
    source = _source(model, fisher=True)
    _move(model, 0.05)  # away from the anchor, so that the anchored penalties are not zero
    teacher = tiny_bert_classifier(num_labels=2).eval() if kind == "LwF" else None
    batch = padded_batch(3)
    reg = forgetting.Regulariser() if kind == "none" else forgetting.Regulariser(kind, 2.0)
    model.eval()  # no dropout: the same forward pass twice
    loss = forgetting.stage_two_loss(reg, source, teacher)(model, batch)
    target_logits, _ = model.both(batch["input_ids"], batch["attention_mask"])
    log = [model.last_losses]
    assert set(log[0]) == {"cross_entropy", "penalty"}
    assert log[0]["cross_entropy"] == pytest.approx(
        float(torch.nn.functional.cross_entropy(target_logits, batch["labels"])), rel=1e-5)
    assert loss.item() == pytest.approx(log[0]["cross_entropy"] + log[0]["penalty"], rel=1e-5)
    assert (log[0]["penalty"] == 0.0) == (kind == "none")


def test_the_heads_read_the_pooled_states_as_the_source_view_does():
    model = forgetting.TwoHeadClassifier(tiny_bert_classifier(num_labels=2), 3).eval()
    b = padded_batch(2)
    rows = [{"input_ids": b["input_ids"][i][: int(b["attention_mask"][i].sum())].tolist(),
             "labels": int(b["labels"][i])} for i in range(4)]
    loader = DataLoader(rows, batch_size=3, collate_fn=pad_collate(0))
    states, labels = forgetting.pooled_states(model, loader)
    assert states.shape == (4, model.head.in_features) and labels.tolist() == [r["labels"] for r in rows]
    view = torch.cat([model.source_view()(x["input_ids"], x["attention_mask"]).logits for x in loader])
    torch.testing.assert_close(model.source_head(states), view)


def test_a_refitted_probe_reads_what_is_linearly_there_and_nothing_else():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 2
    informative = torch.randn(200, 8, generator=g) + 3.0 * labels[:, None].float()
    noise = torch.randn(200, 8, generator=g)
    assert forgetting.refit_probe(informative, labels) == 1.0
    chance = forgetting.refit_probe(noise, labels)
    assert 0.3 < chance < 0.7
    assert forgetting.refit_probe(noise, labels) == chance  # the same folds every time


def test_relative_shift_is_the_distance_travelled_over_the_size():
    model = _two_head()
    params = forgetting.shared_parameters(model)
    anchor = forgetting.snapshot(params)
    assert forgetting.relative_shift(params, anchor) == 0.0
    with torch.no_grad():
        for p in params.values():
            p.mul_(1.1)  # every weight 10 % further from zero
    assert forgetting.relative_shift(params, anchor) == pytest.approx(0.1, rel=1e-4)


def test_curves_read_the_runs_histories():
    def run(method, seed, ces):
        history = History(train=[{"step": i + 1, "loss": c + 1.0} for i, c in enumerate(ces)],
                          evals=[{"step": i + 1, "split": "train", "cross_entropy": c, "penalty": 1.0,
                                  "epoch": (i + 1) / len(ces)} for i, c in enumerate(ces)])
        return Run("tiny", seed, {}, history, columns={"method": method})

    steps = forgetting.curves([run("fine-tuning", 0, [2.0, 1.0]), run("EWC 1", 0, [2.0, 1.5])])
    assert list(steps.columns) == ["method", "seed", "step", "cross_entropy", "penalty"]
    assert steps[steps.method == "EWC 1"].cross_entropy.tolist() == [2.0, 1.5]
    assert len(steps) == 4


def test_notebook_13s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_penalties():
    """Notebook 13's self-check, run as the learner would: the stub is reported, the solution passes,
    and three plausible mistakes fail (the ½ left out; the importance left out, i.e. L2-SP; |w − w⁰|
    instead of its square)."""
    from notebook_selfcheck import LearnerRun

    run = LearnerRun("13_forgetting_and_distillation", {"np": np, "torch": torch, "forgetting": forgetting},
                     "my_anchored_penalty", "random_weights", forgetting.anchored_penalty)

    def penalty(half=0.5, importance=True, power=2):
        def fn(params, strength, anchor, F):
            return half * strength * sum(((F[n] if importance else 1) * (w - anchor[n]).abs() ** power).sum()
                                         for n, w in params.items())
        return fn

    assert run.check(penalty())  # the frame is right
    run.fails({"no ½": penalty(half=1.0), "no importance": penalty(importance=False),
               "|w − w⁰|": penalty(power=1)})
