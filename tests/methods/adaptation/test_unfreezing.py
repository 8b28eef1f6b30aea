"""Tests for tutorial_lib.methods.adaptation.unfreezing: the handler really unfreezes (the slides' typo
did not)."""

import pytest
import torch
from ignite.engine import Events
from tiny import tensors_equal
from tiny import tiny_classifier as _clf
from torch.utils.data import DataLoader

from tutorial_lib.anatomy import layer_groups
from tutorial_lib.methods.adaptation.unfreezing import (
    Unfreezing,
    UnfreezingHandler,
    chain_thaw_stages,
    gradual_stages,
)
from tutorial_lib.training import create_trainer


def _loader(n_batches: int) -> DataLoader:
    g = torch.Generator().manual_seed(1)
    rows = [{"input_ids": torch.randint(5, 50, (10,), generator=g),
             "labels": torch.randint(0, 3, (), generator=g)} for _ in range(4 * n_batches)]
    collate = lambda rs: {"input_ids": torch.stack([r["input_ids"] for r in rs]),
                          "attention_mask": torch.ones(len(rs), 10, dtype=torch.long),
                          "labels": torch.stack([r["labels"] for r in rs])}
    return DataLoader(rows, batch_size=4, collate_fn=collate)


def _ids(layer) -> set[int]:
    return {id(p) for p in layer.parameters()}


def test_each_stage_unfreezes_exactly_the_next_layer_which_then_trains():
    """Bug guarded: ``param.require_grad = True`` (typo) — nothing is ever unfrozen."""
    model = _clf()
    method = Unfreezing(every=2, weight_decay=0.1)
    method.prepare(model)
    opt = torch.optim.AdamW(method.param_groups(model), lr=1e-2)
    assert len({id(p) for g in opt.param_groups for p in g["params"]}) == \
        len(list(model.parameters())), "every parameter is in the optimizer from the start"
    trainer = create_trainer(model, opt, device=torch.device("cpu"))
    method.on_trainer(trainer, model, opt)
    layers = layer_groups(model, merge_final_norm=True)
    snapshots: list[dict[int, torch.Tensor]] = []
    trainable: list[set[int]] = []

    @trainer.on(Events.ITERATION_STARTED)
    def _before(_):
        trainable.append({id(p) for p in model.parameters() if p.requires_grad})
        snapshots.append({id(p): p.detach().clone() for p in model.parameters()})

    n_iter = 2 * len(layers) + 2
    trainer.run(_loader(n_iter), max_epochs=1)
    snapshots.append({id(p): p.detach().clone() for p in model.parameters()})
    for it in range(n_iter):
        stage = min(it // 2, len(layers) - 1)
        expected = set().union(*(_ids(layer) for layer in layers[: stage + 1]))
        assert trainable[it] == expected, f"iteration {it + 1}: wrong trainable set"
        for p in model.parameters():
            moved = not tensors_equal(snapshots[it][id(p)], snapshots[it + 1][id(p)])
            if id(p) in expected:
                assert moved, f"iteration {it + 1}: a trainable parameter did not change"
            else:
                assert not moved, f"iteration {it + 1}: a frozen parameter changed"
    # newly unfrozen at the step the handler fired: exactly the next layer
    for i in range(1, len(layers)):
        assert trainable[2 * i] - trainable[2 * i - 1] == _ids(layers[i])
    timeline = method.handlers[-1].timeline
    assert [r["stage"] for r in timeline][:5] == [0, 0, 1, 1, 2]
    assert timeline[-1][layers[-1].name] and not timeline[0][layers[1].name]


def test_typo_version_is_caught():
    """The slides' bug, reproduced: setting ``require_grad`` leaves the layer frozen."""
    model = _clf()
    handler = UnfreezingHandler(model, gradual_stages(layer_groups(model, True)), every=1)
    handler.apply(0)
    for p in handler.stages[1][1].parameters():
        p.require_grad = True  # the typo
    assert not any(p.requires_grad for p in handler.stages[1][1].parameters())
    handler.apply(1)
    assert all(p.requires_grad for p in handler.stages[1][1].parameters())


def test_chain_thaw_trains_head_then_each_layer_alone_bottom_up_then_all():
    model = _clf()
    layers = layer_groups(model, merge_final_norm=True)
    stages = chain_thaw_stages(layers)
    names = [[layer.name for layer in s] for s in stages]
    assert names[0] == ["head"] and names[1] == ["embeddings"] and names[2] == ["block 1"]
    assert names[-2] == ["block 3 + ln_f"] and names[-1] == [layer.name for layer in layers]
    handler = UnfreezingHandler(model, stages, every=1)
    handler.apply(2)
    assert handler.trainable_layers() == ["block 1"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        Unfreezing(every=1, mode="thaw")
    with pytest.raises(ValueError, match="event"):
        UnfreezingHandler(_clf(), [[]], every=1, event="batch")


def test_hooks_and_stage_counts():
    model = _clf()
    gradual, chain = Unfreezing(every=1), Unfreezing(every=1, mode="chain-thaw")
    method = gradual.method()
    assert method.prepare and method.param_groups and method.on_trainer and not method.loss_fn
    n_layers = len(layer_groups(model, merge_final_norm=True))  # head, 3 blocks, embeddings
    assert gradual.n_stages(model) == n_layers == 5 and chain.n_stages(model) == n_layers + 1
    gradual.prepare(model)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {"head.weight", "head.bias"}
    with pytest.raises(ValueError, match="every"):
        UnfreezingHandler(model, [[]], every=0)


def test_notebook_04s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_stages():
    """Notebook 04's self-check, run as the learner would: the stub is reported, the solution passes
    on cases of both modes, and two plausible mistakes fail (chain-thaw from the top down; gradual
    unfreezing from the bottom up)."""
    from notebook_selfcheck import LearnerRun

    from tutorial_lib.methods.adaptation import unfreezing

    run = LearnerRun("04_gradual_unfreezing", {"unfreezing": unfreezing}, "my_stages", "random_network",
                     "stages_reference", n=8)
    assert {mode for _, mode in run.cases()} == set(unfreezing.MODES)
    assert run.reference(3, "chain-thaw") == [[0], [2], [1], [0, 1, 2]]
    mine = run.mine

    def top_down(n, mode):
        return mine(n, mode) if mode == "gradual" else [[0], *([k] for k in range(1, n)), list(range(n))]

    def bottom_up(n, mode):
        return [list(range(n - 1 - i, n)) for i in range(n)] if mode == "gradual" else mine(n, mode)

    run.fails((top_down, bottom_up))
