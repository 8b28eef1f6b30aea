"""Tests for tutorial_lib.training: masking, the update step, schedules, checkpoints, exact resume."""

import math

import pytest
import torch
from ignite.engine import Events
from tiny import tensors_equal
from torch.utils.data import DataLoader, TensorDataset

from tutorial_lib.checkpoints import (
    attach_checkpointing,
    checkpoint_and_resume,
    checkpoints,
    run_to_completion,
)
from tutorial_lib.config import PROGRESS_ENV_VAR
from tutorial_lib.evaluation import create_lm_evaluator, evaluate
from tutorial_lib.models import TransformerConfig, TransformerLM
from tutorial_lib.training import (
    History,
    Method,
    attach_progress,
    attach_schedule,
    create_trainer,
    eval_loader,
    fit,
    mask_tokens,
    pad_collate,
    resumable_loader,
)

SPECIAL = [0, 1, 2, 3, 4]
MASK_ID = 4


def _tiny_lm(seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_layer=1, n_head=2, d_ff=32, max_len=8,
                            dropout=0.0)
    return TransformerLM(cfg)


def _loader() -> DataLoader:
    g = torch.Generator().manual_seed(1)
    blocks = torch.randint(5, 40, (40, 8), generator=g)
    return DataLoader(TensorDataset(blocks), batch_size=4, shuffle=False,
                      collate_fn=lambda rows: {"input_ids": torch.stack([r[0] for r in rows]),
                                               "labels": torch.stack([r[0] for r in rows])})


def test_gradient_accumulation_steps_every_k_iterations():
    model = _tiny_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = create_trainer(model, opt, device=torch.device("cpu"), grad_accum=3)
    snapshots = []
    trainer.add_event_handler(Events.ITERATION_COMPLETED,
                              lambda e: snapshots.append(model.transformer.ln_f.weight.clone()))
    trainer.run(_loader(), max_epochs=1, epoch_length=6)
    changed = [not tensors_equal(a, b) for a, b in zip(snapshots, snapshots[1:])]
    # iterations 2..6: only 3 -> the step at 3 and at 6 change weights
    assert changed == [False, True, False, False, True]


def test_warmup_cosine_schedule_values():
    model = _tiny_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    attach_schedule(trainer, opt, kind="cosine", lr=1.0, warmup=4, total=20)
    hist = History()
    hist.attach(trainer, opt)
    trainer.run(_loader(), max_epochs=2)  # 20 iterations
    lrs = [r["lr"] for r in hist.train]
    assert lrs[0] == pytest.approx(0.0)
    assert max(lrs) == pytest.approx(1.0)
    assert lrs.index(max(lrs)) == 4 - 1 or lrs.index(max(lrs)) == 4
    assert lrs[-1] < 0.05 and all(a >= b - 1e-12 for a, b in zip(lrs[4:], lrs[5:]))


def test_linear_schedule_warms_up_then_decays_to_zero():
    model = _tiny_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    attach_schedule(trainer, opt, kind="linear", lr=2.0, warmup=5, total=20)
    hist = History()
    hist.attach(trainer, opt)
    trainer.run(_loader(), max_epochs=2)
    lrs = [r["lr"] for r in hist.train]
    assert lrs[5] == pytest.approx(2.0)
    assert lrs[2] == pytest.approx(2.0 * 2 / 5)
    assert lrs[-1] == pytest.approx(2.0 * 1 / 15)


def _masked_lm_run(directory, crash_at: int | None = None, *, every: int = 7):
    """A masked LM with dropout on a shuffled, resumable loader whose collate masks at random from
    the global generator; Ignite epochs of 7 iterations, passes over the data of 10 batches,
    35 iterations, checkpoints every ``every`` iterations; raises KeyboardInterrupt at ``crash_at``."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=40, d_model=16, n_layer=1, n_head=2, d_ff=32, max_len=8,
                            dropout=0.1, causal=False)
    model = TransformerLM(cfg)
    blocks = torch.randint(5, 40, (40, 8), generator=torch.Generator().manual_seed(1))

    def collate(rows):
        inputs, labels = mask_tokens(torch.stack([r[0] for r in rows]), mask_id=MASK_ID,
                                     vocab_size=40, special_ids=SPECIAL, probability=0.3)
        return {"input_ids": inputs, "labels": labels}

    loader = resumable_loader(TensorDataset(blocks), batch_size=4, seed=3, collate_fn=collate)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    sched = attach_schedule(trainer, opt, kind="cosine", lr=1e-2, warmup=3, total=35)
    history = History()
    history.attach(trainer, opt)
    to_save = {"model": model, "optimizer": opt, "trainer": trainer, "scheduler": sched,
               "history": history}
    resumed = checkpoint_and_resume(trainer, to_save, directory, every=every)
    if crash_at is not None:
        @trainer.on(Events.ITERATION_COMPLETED(once=crash_at))
        def _crash(engine):
            raise KeyboardInterrupt("simulated kill")
    run_to_completion(trainer, loader, epoch_length=7, max_epochs=5)
    return model, history, resumed


def _max_abs_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a.state_dict().values(),
                                                          b.state_dict().values()))


def test_resume_after_a_kill_mid_epoch_is_bit_identical(tmp_path):
    """Kill at iteration 25 — not a checkpoint boundary (21, 28), in the 4th Ignite epoch and the
    3rd pass over the data — and re-run: it resumes from 21 and ends with the weights, history and
    masks of the uninterrupted run, bit for bit. Bug guarded: the resumed run replayed the first
    batches of the data (the global RNG re-seeded a fresh shuffle) with fresh dropout/masking
    draws; before the fix max |Δw| was 1.5e-2 here."""
    reference, ref_history, _ = _masked_lm_run(tmp_path / "ref")
    again, _, _ = _masked_lm_run(tmp_path / "again")
    assert _max_abs_difference(reference, again) == 0.0  # the run itself is deterministic
    with pytest.raises(KeyboardInterrupt):
        _masked_lm_run(tmp_path / "run", crash_at=25)
    assert [p.name for p in checkpoints(tmp_path / "run")] == ["training_checkpoint_21.pt"]
    assert not list((tmp_path / "run").glob("*.tmp")), "no half-written files are left behind"
    model, history, resumed = _masked_lm_run(tmp_path / "run")
    assert resumed is not None and resumed.name == "training_checkpoint_21.pt"
    assert _max_abs_difference(reference, model) == 0.0
    for (name, a), b in zip(reference.state_dict().items(), model.state_dict().values()):
        assert tensors_equal(a, b), name
    assert history.train == ref_history.train  # records before the kill come from the checkpoint


def test_a_finished_run_resumed_from_its_final_checkpoint_stays_finished(tmp_path):
    """Bug guarded: Ignite starts a finished state over (iteration 0), which trained another 35
    iterations on top of the final weights."""
    reference, ref_history, _ = _masked_lm_run(tmp_path / "run")
    again, history, resumed = _masked_lm_run(tmp_path / "run")
    assert resumed.name == "training_checkpoint_35.pt"
    assert _max_abs_difference(reference, again) == 0.0 and history.train == ref_history.train


def test_history_is_checkpointed_with_the_training_state():
    history = History([{"step": 1, "loss": 2.0}], [{"step": 1, "split": "validation"}])
    restored = History()
    restored.load_state_dict(history.state_dict())
    assert restored == history


def test_checkpoints_need_the_trainer(tmp_path):
    model = _tiny_lm()
    with pytest.raises(ValueError, match="need the trainer"):
        attach_checkpointing(create_trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
                                            device=torch.device("cpu")),
                             {"model": model}, tmp_path, every=2)


def test_lm_evaluator_perplexity_is_exp_of_token_weighted_loss():
    model = _tiny_lm().eval()
    loader = _loader()
    ev = create_lm_evaluator(model, device=torch.device("cpu"), words_per_token=0.5)
    m = ev.run(loader).metrics
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            logits = model(batch["input_ids"]).logits[:, :-1]
            loss = torch.nn.functional.cross_entropy(
                logits.flatten(0, 1), batch["labels"][:, 1:].flatten(), reduction="sum")
            total, count = total + loss.item(), count + logits.shape[0] * logits.shape[1]
    assert m["loss"] == pytest.approx(total / count, rel=1e-5)
    assert m["ppl"] == pytest.approx(math.exp(total / count), rel=1e-5)
    assert m["word_ppl"] == pytest.approx(math.exp(2 * total / count), rel=1e-5)


def test_bf16_autocast_loss_matches_fp32():
    """bf16 autocast is our CPU speed lever: its loss must stay close to fp32's."""
    model = _tiny_lm().eval()
    batch = next(iter(_loader()))
    with torch.no_grad():
        fp32 = model(**batch).loss.item()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = model(**batch).loss.item()
    assert bf16 == pytest.approx(fp32, rel=0.02)


def test_per_group_lr_scales_follow_the_schedule_without_compounding():
    """Bug guarded: the slides divided each group's current lr every step (rates collapse)."""
    model = _tiny_lm()
    blocks = list(model.transformer.blocks.parameters())
    rest = [p for p in model.parameters() if all(p is not b for b in blocks)]
    opt = torch.optim.SGD([{"params": blocks, "lr_scale": 1 / 2.6}, {"params": rest}], lr=0.0)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    attach_schedule(trainer, opt, kind="linear", lr=1.0, warmup=5, total=20)
    hist = History()
    hist.attach(trainer, opt)
    trainer.run(_loader(), max_epochs=2)
    for row in hist.train:
        assert row["lr"] == pytest.approx(row["lr_1"] / 2.6)
    assert hist.train[5]["lr_1"] == pytest.approx(1.0)


def test_progress_env_var_zero_hides_the_bar_but_keeps_the_running_loss(monkeypatch):
    model = _tiny_lm()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    monkeypatch.setenv(PROGRESS_ENV_VAR, "0")
    assert attach_progress(trainer) is None
    trainer.run(_loader(), max_epochs=1, epoch_length=2)
    assert "loss" in trainer.state.metrics
    monkeypatch.setenv(PROGRESS_ENV_VAR, "1")
    assert attach_progress(create_trainer(model, opt, device=torch.device("cpu"))) is not None


# --- the one recipe: fit, evaluate, Method ----------------------------------------------------


def _classification(n: int = 24, seed: int = 0):
    """A 2-class toy task for a tiny classifier: rows whose ids end high are class 1."""
    from tiny import tiny_classifier

    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        ids = torch.randint(3, 50, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
        rows.append({"input_ids": ids.tolist(), "labels": int(ids[-1] > 25) * 2})
    return tiny_classifier(), rows


def _weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.state_dict().values()]


def test_fit_trains_exactly_the_steps_and_evaluates_every_n_and_at_the_end_once():
    model, rows = _classification()
    loader = resumable_loader(rows, batch_size=5, seed=0, collate_fn=pad_collate(0))
    seen = []
    result = fit(model, loader, lr=1e-2, steps=7, warmup=2, evaluate=lambda e: seen.append(
        e.state.iteration), evaluate_every=3, device=torch.device("cpu"), amp_dtype=None)
    assert len(loader) == 5 and result.trainer.state.iteration == 7  # a second pass, cut at 7
    assert seen == [3, 6, 7]
    assert [r["step"] for r in result.history.train] == list(range(1, 8))
    lrs = [r["lr"] for r in result.history.train]
    assert lrs[0] == 0.0 and max(lrs) == pytest.approx(1e-2) == lrs[2]  # 2 warm-up steps, decay
    assert lrs[-1] < lrs[2]


def test_fit_resumes_a_killed_run_bit_identically(tmp_path):
    def run(directory, kill_at=None):
        model, rows = _classification()
        loader = resumable_loader(rows, batch_size=4, seed=3, collate_fn=pad_collate(0))
        stop = None
        if kill_at is not None:
            def stop(trainer, *_):
                @trainer.on(Events.ITERATION_COMPLETED(once=kill_at))
                def _kill(_):
                    raise KeyboardInterrupt("simulated kill")
        fit(model, loader, lr=1e-2, epochs=3, method=Method(on_trainer=stop), evaluate_every=3,
            checkpoint_dir=directory, device=torch.device("cpu"), amp_dtype=None)
        return model

    reference = _weights(run(tmp_path / "a"))
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", kill_at=10)
    resumed = _weights(run(tmp_path / "b"))
    assert all(tensors_equal(a, b) for a, b in zip(reference, resumed))


def test_a_method_changes_only_what_it_names():
    model, rows = _classification()
    calls = []
    method = Method(prepare=None, param_groups=lambda m, lr, wd: [
        {"params": list(m.head.parameters()), "weight_decay": wd}],
        loss_fn=lambda m, b: calls.append("loss") or m(**b).loss)
    assert Method().is_plain and Method(lr=0.1).is_plain and not method.is_plain
    loader = resumable_loader(rows, batch_size=8, seed=0, collate_fn=pad_collate(0))
    result = fit(model, loader, lr=1e-2, weight_decay=0.05, epochs=1, method=method,
                 device=torch.device("cpu"), amp_dtype=None)
    (group,) = result.optimizer.param_groups
    assert group["weight_decay"] == 0.05 and len(group["params"]) == 2  # the head only
    assert calls == ["loss"] * len(loader)
    order = []
    both = Method(on_trainer=lambda *_: order.append("own")).with_handlers(
        lambda *_: order.append("more"))
    both.on_trainer(None, None, None)
    assert order == ["own", "more"]


def test_evaluate_scores_a_classifier_on_a_loader():
    model, rows = _classification()
    loader = eval_loader(rows, 8, pad_collate(0))
    metrics = evaluate(model, loader, num_labels=3, device=torch.device("cpu"), amp_dtype=None)
    model.eval()
    with torch.no_grad():
        batch = pad_collate(0)(rows)
        predicted = model(batch["input_ids"], batch["attention_mask"]).logits.argmax(-1)
    assert metrics["accuracy"] == pytest.approx(float((predicted == batch["labels"]).float().mean()))
    assert metrics["confusion"].sum().item() == len(rows)
