"""Tests for tutorial_lib.methods.adaptation.discriminative: per-layer rates that hold through the whole
schedule."""

import pytest
import torch
from ignite.engine import Events
from tiny import tiny_classifier as _clf
from torch.utils.data import DataLoader

from tutorial_lib.methods.adaptation.discriminative import (
    attach_stlr,
    compounding_lrs,
    discriminative_groups,
    group_names,
    layer_param_groups,
    stlr,
    stlr_as_printed,
    stlr_schedule,
    warmup_linear,
)
from tutorial_lib.params import ADAMW_DEFAULTS, decay_groups, freeze
from tutorial_lib.training import History, attach_schedule, create_trainer

XI = 2.6


def _loader(n_batches: int) -> DataLoader:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (4 * n_batches, 10), generator=g)
    labels = torch.randint(0, 3, (4 * n_batches,), generator=g)
    collate = lambda idx: {"input_ids": ids[idx], "attention_mask": torch.ones(len(idx), 10,
                                                                                 dtype=torch.long),
                           "labels": labels[idx]}
    return DataLoader(list(range(4 * n_batches)), batch_size=4, collate_fn=lambda b: collate(
        torch.tensor(b)))


def _run(attach, total: int = 30, bug: bool = False):
    """Train with discriminative groups and ``attach`` (a schedule); return groups and rates."""
    model = _clf()
    groups = layer_param_groups(model, weight_decay=0.01, factor=XI)
    opt = torch.optim.AdamW(groups, lr=0.0)
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    attach(trainer, opt)
    if bug:  # the 2019 slides: divide each group's *current* lr every iteration
        @trainer.on(Events.ITERATION_STARTED)
        def _divide(_):
            for g in opt.param_groups:
                g["lr"] = g.get("prev_lr", g["lr"]) / XI ** g["depth"]
                g["prev_lr"] = g["lr"]
    history = History()
    history.attach(trainer, opt)
    trainer.run(_loader(total), max_epochs=1)
    return opt.param_groups, history


def _assert_ratios(groups, history, schedule):
    for t, row in enumerate(history.train):
        for i, g in enumerate(groups):
            lr = row["lr" if i == 0 else f"lr_{i}"]
            assert lr == pytest.approx(schedule(t) * XI ** -g["depth"], rel=1e-9, abs=1e-15), \
                f"step {t + 1}, group {g['name']}"


def _linear(lr, warmup, total):
    return lambda t: lr * t / warmup if t <= warmup else lr * (total - t) / (total - warmup)


def test_groups_have_one_scale_per_layer_from_the_top():
    groups = layer_param_groups(_clf(), weight_decay=0.01, factor=XI)
    by_name = {g["name"]: (g["depth"], g["lr_scale"]) for g in groups}
    assert by_name["head"] == (0, 1.0)
    assert by_name["block 3 + ln_f"] == (1, pytest.approx(1 / XI))
    assert by_name["embeddings"] == (4, pytest.approx(XI ** -4))
    assert {g["name"] for g in groups} == {"head", "block 3 + ln_f", "block 2", "block 1",
                                          "embeddings"}


def test_every_step_of_warmup_linear_decay_keeps_the_ratios():
    """Bug guarded: compounding the division (the slides) — rates collapse towards zero."""
    attach = lambda tr, opt: attach_schedule(tr, opt, kind="linear", lr=1e-3, warmup=5, total=30)
    groups, history = _run(attach)
    _assert_ratios(groups, history, _linear(1e-3, 5, 30))


def test_every_step_of_stlr_keeps_the_ratios_and_follows_eq3():
    attach = lambda tr, opt: attach_stlr(tr, opt, lr=1e-3, total=30, cut_frac=0.1, ratio=32)
    groups, history = _run(attach)
    _assert_ratios(groups, history, lambda t: stlr(t, 30, 1e-3, 0.1, 32))


def test_the_compounding_version_fails_the_same_check():
    attach = lambda tr, opt: attach_schedule(tr, opt, kind="linear", lr=1e-3, warmup=5, total=30)
    groups, history = _run(attach, bug=True)
    with pytest.raises(AssertionError):
        _assert_ratios(groups, history, _linear(1e-3, 5, 30))
    rates = compounding_lrs([1e-3] * 30, XI, depth=2)
    assert rates[0] == pytest.approx(1e-3 / XI ** 2) and rates[-1] < 1e-3 * 1e-20


def test_stlr_matches_the_paper():
    """ULMFiT Eq. 3 with T=1000: η/32 at t=0, η at cut=100, back to η/32 at T."""
    assert stlr(0, 1000, 1.0) == pytest.approx(1 / 32)
    assert stlr(100, 1000, 1.0) == pytest.approx(1.0)
    assert stlr(1000, 1000, 1.0) == pytest.approx(1 / 32)
    assert stlr(550, 1000, 1.0) == pytest.approx((1 + 0.5 * 31) / 32)
    assert stlr(50, 1000, 1.0) == pytest.approx((1 + 0.5 * 31) / 32)


@pytest.mark.parametrize("total", [30, 158, 37, 11])
def test_stlr_is_never_below_its_floor_and_is_the_schedule_that_trains(total):
    """Bug guarded (issue 16): with T·cut_frac not whole, Eq. 3's decay is shorter than T − cut
    and went below zero (T = 158: −1.9e-5 at t = 157), while training used a clamped schedule,
    so notebook 05 plotted a schedule that was never used. Both must be the same, ≥ η/ratio."""
    lr, ratio = 1e-3, 32.0
    curve = [stlr(t, total, lr, 0.1, ratio) for t in range(total)]
    assert min(curve) >= lr / ratio - 1e-15 and max(curve) <= lr + 1e-15
    if total == 158:  # the formula as printed goes below zero there; ours is the one trained
        assert stlr_as_printed(157, total, lr) < 0 < stlr(157, total, lr)
    groups, history = _run(lambda tr, opt: attach_stlr(tr, opt, lr=lr, total=total, cut_frac=0.1,
                                                       ratio=ratio), total=total)
    _assert_ratios(groups, history, lambda t: curve[t])


def test_factor_one_groups_are_plain_fine_tunings_optimizer():
    """A method's optimizer differs from the baseline's only where it means to: with ξ = 1 the
    same parameters are decayed (the tied embedding / lm_head is not), at the same settings."""
    model = _clf()
    groups = layer_param_groups(model, weight_decay=0.01, factor=1.0)
    plain = decay_groups(model, 0.01)
    ids = lambda gs, wd: {id(p) for g in gs if (g["weight_decay"] > 0) == wd for p in g["params"]}
    assert ids(groups, True) == ids(plain, True) and ids(groups, False) == ids(plain, False)
    assert id(model.encoder.tok_emb.weight) in ids(groups, False)
    assert all(g["lr_scale"] == 1.0 and g["betas"] == ADAMW_DEFAULTS["betas"] for g in groups)
    assert discriminative_groups(XI, 0.01)(model)[0]["lr_scale"] == 1.0
    assert group_names(groups)[:2] == ["head", "head"] and group_names([{}]) == ["group 0"]


def test_frozen_parameters_stay_in_the_groups_unless_asked():
    model = _clf()
    freeze(model, r"blocks\.0\.")
    names = {g["name"] for g in layer_param_groups(model, weight_decay=0.01, factor=XI)}
    assert "block 1" in names  # so gradual unfreezing needs no new optimizer
    names = {g["name"] for g in layer_param_groups(model, weight_decay=0.01, factor=XI,
                                                   include_frozen=False)}
    assert "block 1" not in names


def test_stlr_schedule_hook_and_the_default_schedule_for_plots():
    attach = lambda tr, opt: stlr_schedule(cut_frac=0.1, ratio=32)(tr, opt, lr=1e-3, total=30)
    groups, history = _run(attach)
    _assert_ratios(groups, history, lambda t: stlr(t, 30, 1e-3, 0.1, 32))
    # warmup_linear is finetune's default schedule: warm-up int(0.1 · total) steps, then linear decay
    attach = lambda tr, opt: attach_schedule(tr, opt, kind="linear", lr=1e-3, warmup=3, total=30)
    groups, history = _run(attach)
    _assert_ratios(groups, history, lambda t: warmup_linear(t, 30, 1e-3, 0.1))


def test_notebook_05s_self_check_reports_the_stub_passes_the_solution_and_fails_eq3_as_printed():
    """Notebook 05's self-check, run as the learner would: the stub is reported, the solution passes,
    and Eq. 3 as printed (the decay too short), a schedule without the η/ratio floor and a rounded
    cut fail."""
    import math

    from notebook_selfcheck import LearnerRun

    from tutorial_lib.methods.adaptation import discriminative

    run = LearnerRun("05_discriminative_lr", {"discriminative": discriminative}, "my_stlr", "random_run",
                     discriminative.stlr, wrap="schedule_of")

    def rounded_cut(t, total, lr, cut_frac, ratio):
        cut = max(1, round(total * cut_frac))
        p = t / cut if t < cut else 1 - (t - cut) / (total - cut)
        return lr * (1 + p * (ratio - 1)) / ratio

    def no_floor(t, total, lr, cut_frac, ratio):  # from 0 to η and back to 0: ratio → ∞
        cut = max(1, math.floor(total * cut_frac))
        return lr * (t / cut if t < cut else 1 - (t - cut) / (total - cut))

    run.fails((stlr_as_printed, rounded_cut, no_floor))
