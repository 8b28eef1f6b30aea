"""Tests for tutorial_lib.methods.forgetting.distillation: the KD loss in its limits, ensembles, the
teacher-labelled rows, the truncated student and its training (a finetuning.Run)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch, tensors_equal, tiny_bert_classifier
from torch.utils.data import DataLoader
from transformers import BertConfig, BertModel

from tutorial_lib.backbones import Backbone
from tutorial_lib.finetuning import Run
from tutorial_lib.methods.forgetting import distillation
from tutorial_lib.models import IGNORE_INDEX
from tutorial_lib.runtime import seed_everything
from tutorial_lib.settings import Budget
from tutorial_lib.training import fit, pad_collate, resumable_loader


def _logits(seed: int, n: int = 6, c: int = 3) -> torch.Tensor:
    return torch.randn(n, c, generator=torch.Generator().manual_seed(seed)) * 2


def test_soft_target_term_with_a_one_hot_teacher_at_t1_is_the_cross_entropy():
    z = _logits(0)
    y = torch.tensor([0, 2, 1, 1, 0, 2])
    one_hot = F.one_hot(y, 3).float()
    torch.testing.assert_close(distillation.soft_target_loss(z, one_hot, 1.0), F.cross_entropy(z, y))
    # and zero when the student already matches the teacher
    t = _logits(1)
    assert distillation.soft_target_loss(t, distillation.soften(t, 4.0), 4.0).item() == \
        pytest.approx(0.0, abs=1e-6)


def test_t_squared_keeps_the_gradient_scale_hinton_logit_matching():
    """∂/∂z_s of T²·KL = T·(q_T(z_s) − q_T(z_t)) → (z_s − z_t)/C for zero-mean logits, large T."""
    zs, zt = _logits(2), _logits(3)
    zs, zt = zs - zs.mean(-1, keepdim=True), zt - zt.mean(-1, keepdim=True)
    grads = {}
    for T in (1.0, 1000.0):
        z = zs.clone().requires_grad_(True)
        distillation.soft_target_loss(z, distillation.soften(zt, T), T).backward()
        grads[T] = z.grad * len(z)  # the loss averages over the batch
    torch.testing.assert_close(grads[1000.0], (zs - zt) / 3, rtol=1e-2, atol=1e-3)
    # without the T² factor the gradient would shrink like 1/T²: far from the limit
    assert grads[1000.0].abs().max() > 0.1 * grads[1.0].abs().max()


def test_kd_loss_with_no_soft_weight_is_cross_entropy_and_unlabelled_rows_add_only_the_soft_term():
    z, zt = _logits(4), _logits(5)
    y = torch.tensor([0, 2, 1, 1, 0, 2])
    torch.testing.assert_close(distillation.kd_loss(z, zt, y, 3.0, 0.0), F.cross_entropy(z, y))
    unlabelled = torch.full_like(y, IGNORE_INDEX)
    torch.testing.assert_close(distillation.kd_loss(z, zt, unlabelled, 3.0, 0.5),
                               0.5 * distillation.soft_target_loss(z, distillation.soften(zt, 3.0), 3.0))
    mixed = y.clone()
    mixed[3:] = IGNORE_INDEX
    expected = 0.5 * F.cross_entropy(z[:3], y[:3]) + 0.5 * distillation.soft_target_loss(
        z, distillation.soften(zt, 3.0), 3.0)
    torch.testing.assert_close(distillation.kd_loss(z, zt, mixed, 3.0, 0.5), expected)


def _loader(num_labels: int = 3) -> DataLoader:
    b = padded_batch(num_labels)
    rows = [{"input_ids": b["input_ids"][i][: int(b["attention_mask"][i].sum())].tolist(),
             "labels": int(b["labels"][i])} for i in range(4)]
    return DataLoader(rows, batch_size=3, collate_fn=pad_collate(0))


def test_an_ensemble_of_identical_models_is_the_model():
    model = tiny_bert_classifier()
    loader = _loader()
    p = distillation.probabilities(model, loader)
    assert p.shape == (4, 3)
    torch.testing.assert_close(p.sum(-1), torch.ones(4))
    torch.testing.assert_close(distillation.ensemble_probabilities([p, p.clone(), p.clone()]), p)
    q = torch.softmax(_logits(6, 4), -1)
    torch.testing.assert_close(distillation.ensemble_probabilities([p, q]), (p + q) / 2)


def test_teacher_rows_and_their_collation():
    loader = _loader()
    rows = list(loader.dataset)
    probs = torch.softmax(_logits(7, 4), -1)
    labelled = distillation.teacher_rows(rows, probs)
    unlabelled = distillation.teacher_rows(rows, probs, keep_labels=False)
    assert [r["labels"] for r in labelled] == [r["labels"] for r in rows]
    assert all(r["labels"] == IGNORE_INDEX for r in unlabelled)
    batch = distillation.teacher_collate(0)(labelled)
    torch.testing.assert_close(torch.softmax(batch["teacher"], -1), probs, rtol=1e-5, atol=1e-6)
    assert batch["input_ids"].shape[0] == 4


def test_distillation_method_trains_through_the_one_recipe():
    model = tiny_bert_classifier()
    rows = distillation.teacher_rows(list(_loader().dataset), torch.softmax(_logits(8, 4), -1))
    loader = resumable_loader(rows * 4, seed=0, batch_size=4, collate_fn=distillation.teacher_collate(0))
    run = fit(model, loader, lr=1e-2, epochs=1, method=distillation.distillation(2.0, 0.5),
              amp_dtype=None)
    assert run.trainer.state.iteration == 4


def _tiny_teacher(layers: int = 3) -> Backbone:
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=layers,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=16))
    return Backbone("tiny", "encoder", SimpleNamespace(pad_token_id=0), encoder, 16, encoder)


def test_train_student_is_a_run_of_the_one_runner_with_the_numbers_of_its_own_loop():
    """train_student through finetuning.run: a finetuning.Run (the model, the seconds,
    one row), the student left as it was, and the weights of the loop it replaced, bit for bit."""
    student = distillation.truncated_backbone(_tiny_teacher(), 2)
    before = {k: v.clone() for k, v in student.encoder.state_dict().items()}
    rows = distillation.teacher_rows(list(_loader().dataset) * 3, torch.softmax(_logits(8, 12), -1))
    budget, method = Budget(batch_size=4, lr=1e-3), distillation.distillation(2.0, 0.5)
    run = distillation.train_student(student, rows, 3, method=method, steps=5, lr=1e-2,
                                     budget=budget, seed=7)
    assert isinstance(run, Run) and run.backbone == "tiny[:2]" and run.seed == 7
    assert list(run.row()) == ["backbone", "seed", "seconds", "trainable_params", "total_params",
                               "trained_pct"]
    assert run.seconds > 0 and 0 < run.trainable_params <= run.total_params
    assert [r["step"] for r in run.history.train] == [1, 2, 3, 4, 5]  # exactly ``steps`` batches
    assert all(tensors_equal(v, before[k]) for k, v in student.encoder.state_dict().items())
    # the loop train_student ran before it became a caller of run
    seed_everything(7)
    model = student.classifier(3)
    loader = resumable_loader(list(rows), seed=7, batch_size=4,
                              collate_fn=distillation.teacher_collate(0))
    fit(model, loader, lr=1e-2, weight_decay=budget.weight_decay, steps=5, method=method,
        warmup=int(budget.warmup_frac * 5), max_norm=budget.max_norm)
    mine, theirs = run.model.state_dict(), model.state_dict()
    assert mine.keys() == theirs.keys() and all(tensors_equal(mine[k], theirs[k]) for k in mine)


def test_truncated_student_keeps_the_first_layers():
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=3,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=16))
    teacher = Backbone("tiny", "encoder", None, encoder, 16, encoder)
    student = distillation.truncated_backbone(teacher, 2)
    assert student.n_layers == 2 and teacher.n_layers == 3
    torch.testing.assert_close(student.encoder.encoder.layer[1].attention.self.query.weight,
                               encoder.encoder.layer[1].attention.self.query.weight)
    assert student.encoder.encoder.layer[0] is not encoder.encoder.layer[0]  # a copy
    with pytest.raises(ValueError, match="choose 1 to 3"):
        distillation.truncated_backbone(teacher, 4)


def test_items_comparison_tests_item_by_item_and_guards_the_baseline():
    rng = np.random.default_rng(0)
    base = rng.random(400) < 0.7
    better = base | (rng.random(400) < 0.5)
    floor = np.zeros(400, dtype=bool)
    floor[:200] = True  # a majority class right on half the items
    table = distillation.items_comparison({"single": base, "ensemble": better}, "single", floor)
    assert table.loc["ensemble", "test"] == "McNemar"
    assert table.loc["ensemble", "verdict"] == "better"
    assert table.loc["single", "floor"] == 50.0
    at_chance = distillation.items_comparison({"single": floor, "ensemble": better}, "single", floor)
    assert at_chance.loc["ensemble", "verdict"] == "void: baseline at chance"


def test_row_probabilities_are_computed_shortest_first_and_returned_in_row_order():
    model = tiny_bert_classifier()
    rows = list(_loader().dataset)
    rows = [rows[i] for i in (0, 3, 1, 2)]  # lengths not sorted
    in_order = distillation.probabilities(model, DataLoader(rows, batch_size=2, collate_fn=pad_collate(0)))
    torch.testing.assert_close(distillation.row_probabilities(model, rows, pad_id=0, batch_size=2),
                               in_order, rtol=1e-4, atol=1e-5)
    assert distillation.row_labels(rows).tolist() == [r["labels"] for r in rows]
    assert distillation.student_name(1) == "student (1 layer)"
    assert distillation.student_name(2) == "student (2 layers)"
