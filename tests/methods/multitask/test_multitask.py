"""Tests for tutorial_lib.methods.multitask.multitask: the task sampler, one-task-per-step batches, head loss
weights reaching the shared encoder, the auxiliary LM loss, the GLUE evaluator, the Experiment
runs and the per-task comparison with the stats rule; and the chapter's notebooks' self-checks."""

import ast
import collections
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch, tensors_equal, tiny_classifier

from tutorial_lib import heads, tasks
from tutorial_lib.backbones import load_backbone
from tutorial_lib.finetuning import Run
from tutorial_lib.methods.multitask import gradts, multitask
from tutorial_lib.models import IGNORE_INDEX, Transformer, TransformerConfig

SIZES = {"big": 3000, "mid": 1000, "small": 200}
ROW_COLUMNS = ["backbone", "seed", "seconds", "trainable_params", "total_params", "trained_pct"]


def empirical(sampler: multitask.TaskSampler, steps: int = 40_000) -> dict[str, float]:
    counts = collections.Counter(sampler.schedule(steps))
    return {t: counts[t] / steps for t in sampler.sizes}


@pytest.mark.parametrize("strategy,temperature,expected", [
    ("proportional", 1.0, {"big": 0.75, "mid": 0.25, "small": 0.05}),
    ("temperature", 2.0, None),
    ("temperature", 1e9, {"big": 1 / 3, "mid": 1 / 3, "small": 1 / 3}),
])
def test_sampler_probabilities_and_empirical_proportions(strategy, temperature, expected):
    sizes = SIZES
    sampler = multitask.TaskSampler(sizes, strategy, temperature, seed=1)
    if expected is None:  # p ∝ sqrt(n)
        roots = {t: n ** 0.5 for t, n in sizes.items()}
        expected = {t: r / sum(roots.values()) for t, r in roots.items()}
    if strategy == "proportional":
        expected = {t: n / sum(sizes.values()) for t, n in sizes.items()}
    for t in sizes:
        assert sampler.probabilities[t] == pytest.approx(expected[t], abs=1e-6)
    freq = empirical(sampler)
    for t in sizes:
        assert freq[t] == pytest.approx(expected[t], abs=0.01)


def test_fixed_main_share_and_temperature_over_the_rest():
    sampler = multitask.TaskSampler(SIZES, "temperature", 2.0, fixed={"small": 0.5}, seed=3)
    p = sampler.probabilities
    assert p["small"] == pytest.approx(0.5)
    assert p["big"] / p["mid"] == pytest.approx((3000 / 1000) ** 0.5)
    assert sum(p.values()) == pytest.approx(1.0)
    freq = empirical(sampler)
    assert freq["small"] == pytest.approx(0.5, abs=0.01)


def test_round_robin_cycles_and_schedules_are_reproducible():
    rr = multitask.TaskSampler(SIZES, "round-robin")
    assert rr.schedule(7) == ["big", "mid", "small", "big", "mid", "small", "big"]
    a = multitask.TaskSampler(SIZES, seed=5).schedule(50)
    assert a == multitask.TaskSampler(SIZES, seed=5).schedule(50)
    assert a != multitask.TaskSampler(SIZES, seed=6).schedule(50)


@pytest.mark.parametrize("kwargs,message", [
    ({"strategy": "uniformish"}, "unknown strategy"),
    ({"fixed": {"nope": 0.5}}, "unknown tasks"),
    ({"fixed": {"big": 0.7, "mid": 0.6}}, "sum to"),
    ({"strategy": "round-robin", "fixed": {"big": 0.5}}, "round-robin"),
])
def test_sampler_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        multitask.TaskSampler(SIZES, **kwargs)


def test_batches_follow_the_schedule_and_loaders_restart():
    loaders = {"a": [{"x": torch.tensor(i)} for i in range(2)],
               "b": [{"x": torch.tensor(10 + i)} for i in range(3)]}
    schedule = ["a", "a", "a", "b", "a"]
    out = list(multitask.MultiTaskBatches(loaders, schedule))
    assert len(out) == 5
    assert [list(heads.split_batch(b)) for b in out] == [[t] for t in schedule]
    assert [int(b["a/x"]) for b in out if "a/x" in b] == [0, 1, 0, 1]  # restarted after 2
    with pytest.raises(ValueError, match="no loader"):
        multitask.MultiTaskBatches(loaders, ["c"])


def tiny_encoder() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=50, d_model=16, n_layer=2, n_head=2, d_ff=32,
                                         max_len=16, dropout=0.0))


def encoder_grads(model: heads.MultiHeadModel, loss: torch.Tensor) -> torch.Tensor:
    model.zero_grad()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.encoder.parameters() if p.grad is not None])


@pytest.mark.parametrize("weight", [0.3, 2.0])
def test_a_head_loss_reaches_the_encoder_with_its_weight(weight):
    model = heads.MultiHeadModel(tiny_encoder(), {
        "a": heads.HeadConfig(3, dropout=0.0),
        "b": heads.HeadConfig(2, loss_weight=weight, dropout=0.0)}).eval()
    batch = padded_batch(num_labels=2)
    part = {k: v for k, v in batch.items()}
    plain = model(part["input_ids"], part["attention_mask"], head="b", labels=part["labels"]).loss
    g_plain = encoder_grads(model, plain)
    g_weighted = encoder_grads(model, model.loss(heads.merge_batches({"b": part})))
    torch.testing.assert_close(g_weighted, weight * g_plain)
    # two heads in one step: the encoder's gradient is the weighted sum
    a_part = {**part, "labels": part["labels"] % 3}
    g_a = encoder_grads(model, model(a_part["input_ids"], a_part["attention_mask"], head="a",
                                     labels=a_part["labels"]).loss)
    g_both = encoder_grads(model, model.loss(heads.merge_batches({"a": a_part, "b": part})))
    torch.testing.assert_close(g_both, g_a + weight * g_plain)


def test_lm_aux_loss_is_clf_plus_weighted_next_token_loss():
    model = tiny_classifier(vocab_size=50).eval()
    b = padded_batch()
    cls_id = 2
    last = b["attention_mask"].sum(1) - 1
    b["input_ids"][torch.arange(4), last] = cls_id  # every row ends with [CLS], as encoded
    total = multitask.lm_aux_loss(0.5)(model, b)
    clf = model(**b).loss
    h = model.encoder(b["input_ids"], b["attention_mask"]).last_hidden_state
    targets = heads.causal_lm_targets(b["input_ids"], b["attention_mask"], ignore_ids=(cls_id,))
    lm = F.cross_entropy(model.lm_head(h).flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    torch.testing.assert_close(total, clf + 0.5 * lm)


def test_lm_aux_loss_refuses_a_bidirectional_model():
    from tiny import tiny_bert_classifier

    with pytest.raises(ValueError, match="causal"):
        multitask.lm_aux_loss()(tiny_bert_classifier(), padded_batch())


def test_task_evaluator_reports_the_glue_metric():
    model = heads.MultiHeadModel(tiny_encoder(), {"cola": heads.HeadConfig(2, dropout=0.0)}).eval()
    b = padded_batch(num_labels=2)
    ev = multitask.create_task_evaluator(model, "cola", device=torch.device("cpu"))
    metrics = ev.run([b, b]).metrics["glue"]
    with torch.no_grad():
        pred = model(b["input_ids"], b["attention_mask"], head="cola").logits.argmax(-1)
    expected = tasks.compute_metrics("cola", torch.cat([pred, pred]), torch.cat([b["labels"]] * 2))
    assert metrics == pytest.approx(expected)
    assert set(metrics) == {"mcc", "score"}


def test_a_hugging_face_encoder_trains_and_evaluates_with_named_heads():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=32,
                                max_position_embeddings=16, hidden_dropout_prob=0.0,
                                attention_probs_dropout_prob=0.0))
    model = heads.MultiHeadModel(bert, {"sst2": heads.HeadConfig(2, dropout=0.0),
                                        "stsb": heads.HeadConfig(1, dropout=0.0)})
    assert model.pool == "first"  # BERT's [CLS] is the first token
    b = padded_batch(num_labels=2)
    sts = {**b, "labels": torch.tensor([0.5, 4.0, 2.0, 1.0])}
    batches = multitask.MultiTaskBatches({"sst2": [b], "stsb": [sts]}, ["sst2", "stsb"] * 20)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses: dict[str, list[float]] = {"sst2": [], "stsb": []}
    for batch in batches:  # one task per step, alternating
        loss = heads.multihead_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        (task,) = model.last_losses
        losses[task].append(model.last_losses[task])
    assert len(losses["sst2"]) == len(losses["stsb"]) == 20
    assert losses["stsb"][-1] < losses["stsb"][0] and losses["sst2"][-1] < losses["sst2"][0]
    ev = multitask.create_task_evaluator(model.eval(), "stsb", device=torch.device("cpu"))
    assert set(ev.run([sts]).metrics["glue"]) == {"pearson", "spearman", "score"}


def test_experiment_runs_every_setting_on_real_glue_data(with_data):
    """Single-task, multi-task with a fixed main share, and sequential runs end to end (smoke
    scale, random-init encoder): the step budget of each setting and one row per scored task."""
    from tutorial_lib import config
    from tutorial_lib.methods.multitask.settings import MultitaskSettings

    scale = config.get_scale("smoke")
    settings = MultitaskSettings.at(scale).replace(
        backbone="scratch", steps_per_task=2, train_examples=32, dev_examples=16, test_examples=16)
    exp = multitask.Experiment(settings, ["rte", "sst2"])
    assert exp.split_table().loc["rte", "validation"] == 16  # the validation split is "dev"
    single = exp.single("rte", 0)
    assert isinstance(single, Run) and single.steps == {"rte": 2} and single.name == multitask.SINGLE
    assert list(single.row()) == ROW_COLUMNS and single.total_params > 0
    assert single.trainable_params <= single.total_params
    assert set(single.scores["rte"]) == {"dev", "test"}
    mtl = exp.run("all", ["rte", "sst2"], 0, main="rte")
    assert sum(mtl.steps.values()) == round(2 / settings.main_share)
    assert list(mtl.scores) == ["rte"]  # a main task: only it is scored
    # a multi-task run's curve: every trained task's dev score, every 2 steps and at the end
    mtl_curve = exp.run("all", ["rte", "sst2"], 0, main="rte", curve_every=2)
    assert mtl_curve.scores == mtl.scores  # the evaluations change nothing in the run
    n, mtl_points = sum(mtl.steps.values()), multitask.curves([mtl_curve])
    assert list(zip(mtl_points["step"], mtl_points["task"])) == [
        (step, t) for step in sorted({*range(2, n + 1, 2), n}) for t in ("rte", "sst2")]
    assert mtl_points["dev_score"].iloc[-2] == mtl.scores["rte"]["dev"]["score"]
    start = exp.intermediate("sst2", 3, seed=0)  # STILTs' stage 1, shared by every target seed
    assert start.task == "sst2" and start.steps == 3 and set(start.scores) == {"sst2"}
    before = {k: v.clone() for k, v in start.state.items()}
    seq = exp.sequential(start, "rte", 0)
    assert seq.steps == {"sst2": 3, "rte": 2} and list(seq.scores) == ["rte", "sst2"]
    assert multitask.curves([seq, single]).empty  # no learning curve unless asked
    # the learning curve: the target's dev score every step and at the end, from the run itself
    seq_curve = exp.sequential(start, "rte", 0, curve_every=1)
    points = multitask.curves([seq_curve])
    assert list(zip(points["step"], points["task"])) == [(1, "rte"), (2, "rte")]
    assert points["dev_score"].iloc[-1] == pytest.approx(seq_curve.scores["rte"]["dev"]["score"])
    # the control for "more updates": alone, as many steps as the multi-task run would take
    assert exp.steps_for(["rte", "sst2"]) == 4 and exp.steps_for(["rte"]) == 2
    assert exp.steps_for(["rte", "sst2"], main="rte") == round(2 / settings.main_share)
    assert exp.steps_for(["rte", "sst2"], steps=5) == 10
    equal = exp.equal_steps("rte", 0, ["rte", "sst2", "mr"])
    assert equal.name == multitask.EQUAL_STEPS and equal.steps == {"rte": 6}
    assert [(step, t) for step, t, _ in equal.losses] == [(s, "rte") for s in range(1, 7)]
    assert collections.Counter(t for _, t, _ in mtl.losses) == mtl.steps  # each step's task
    single_again = exp.single("rte", 0)
    after_plain = torch.rand(3)  # the global generator after a run without a curve …
    single_curve = exp.single("rte", 0, curve_every=1)
    after_curve = torch.rand(3)  # … and with one: the evaluations drew nothing from it
    assert tensors_equal(after_plain, after_curve)
    assert single_curve.scores == single.scores == single_again.scores
    curves = multitask.curves([single_curve, seq_curve, single])
    assert list(curves.groupby("setting", sort=False).size().items()) == [
        ("single-task", 2), ("sequential (sst2 → rte)", 2)]
    assert float(multitask.task_floor(exp.data["rte"].task, "validation").value) == pytest.approx(
        exp.data["rte"].task.majority_baseline("validation")["score"])
    assert seq.seconds > start.seconds  # both stages are charged to the sequential run
    assert all(tensors_equal(v, before[k]) for k, v in start.state.items())  # reusable as it was
    table = multitask.collect([single, mtl, seq])
    assert set(table["setting"]) == {"single-task", "all", "sequential (sst2 → rte)"}
    assert list(table.columns[:8]) == ["setting", "task", "seed", "dev_score", "test_score", "steps",
                                       "task_steps", "seconds"]
    assert table.loc[table.setting == "all", "task_steps"].item() == mtl.steps["rte"]
    assert table["test_score"].between(0, 1).all()
    # each seed starts from its own random encoder (scratch: the seed is the init)
    a, b = (exp.new_model(load_backbone("scratch", scale, seed=seed), ["rte"]) for seed in (0, 1))
    assert not tensors_equal(a.encoder.tok_emb.weight, b.encoder.tok_emb.weight)
    again = exp.new_model(load_backbone("scratch", scale, seed=0), ["rte"])
    assert tensors_equal(a.encoder.tok_emb.weight, again.encoder.tok_emb.weight)


def _runs(rows: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"task": t, "setting": s, "seed": seed, "test_score": v}
                         for (t, s), values in rows.items() for seed, v in enumerate(values)])


def test_compare_settings_pairs_by_seed_and_skips_tasks_without_a_baseline():
    table = _runs({
        ("rte", "single-task"): [0.50, 0.60, 0.70],
        ("rte", "all"): [0.55, 0.66, 0.74],  # +5, +6, +4 points on every seed: paired → better
        ("rte", "noisy"): [0.40, 0.75, 0.70],  # Δ −1.7 points, differences −10 .. +15: noise
        ("qqp", "all"): [0.8, 0.7, 0.9],  # no baseline for qqp: not compared
    })
    floors = {"rte": 0.3, "qqp": 0.5}
    out = multitask.compare_settings(table, floors=floors)
    assert set(out.index.get_level_values("task")) == {"rte"}
    rte = out.loc["rte"]
    assert rte.loc["single-task", "verdict"] == "(baseline)"
    assert rte.loc["all", "test"] == "paired t"
    assert rte.loc["all", "Δ (points)"] == pytest.approx(5.0)
    assert rte.loc["all", "verdict"] == "better"
    assert rte.loc["noisy", "verdict"] == "within noise"
    # unpaired, the same scores of "all" are within noise (Welch cannot see the shared seeds)
    shuffled = table.copy()
    shuffled.loc[(shuffled["task"] == "rte") & (shuffled["setting"] == "all"), "seed"] = [10, 11, 12]
    welch = multitask.compare_settings(shuffled, floors=floors).loc["rte"]
    assert welch.loc["all", "test"] == "Welch t" and welch.loc["all", "verdict"] == "within noise"
    assert multitask.compare_settings(table[table["task"] == "qqp"], floors=floors).empty


def test_compare_each_tests_each_setting_against_its_own_baseline():
    """06's two baselines: the extra steps alone (equal steps vs S steps) and sharing beyond the
    updates (multi-task vs equal steps) — each table with its own baseline row and Holm column."""
    table = _runs({
        ("sst2", multitask.SINGLE): [0.60, 0.65, 0.70],
        ("sst2", multitask.EQUAL_STEPS): [0.70, 0.74, 0.81],  # +10, +9, +11: the steps alone
        ("sst2", "multi"): [0.71, 0.74, 0.80],  # +1, 0, −1 against equal steps
    })
    out = multitask.compare_each(table, {multitask.SINGLE: None, multitask.EQUAL_STEPS: ["multi"]},
                                 floors={"sst2": 0.5})
    assert list(out) == [multitask.SINGLE, multitask.EQUAL_STEPS]
    first, second = out[multitask.SINGLE].loc["sst2"], out[multitask.EQUAL_STEPS].loc["sst2"]
    assert list(first.index) == [multitask.SINGLE, multitask.EQUAL_STEPS, "multi"]
    assert first.loc[multitask.EQUAL_STEPS, "verdict"] == "better"
    assert first.loc["multi", "verdict"] == "better"
    assert list(second.index) == [multitask.EQUAL_STEPS, "multi"]
    assert second.loc["multi", "Δ (points)"] == pytest.approx(0.0, abs=1e-9)
    assert second.loc["multi", "verdict"] == "within noise"
    assert first["p"].notna().sum() == 2 and second["p"].notna().sum() == 1
    assert "Holm p" not in first and "Holm p" not in second  # one family per notebook, not per table


def test_compare_settings_voids_a_task_whose_single_task_runs_sit_at_their_floor():
    table = _runs({
        ("rte", "single-task"): [0.47, 0.48, 0.47],  # at RTE's 47.3 % majority rate
        ("rte", "sequential"): [0.55, 0.56, 0.57],  # +8 points on every seed: raw "better"
        ("sst2", "single-task"): [0.70, 0.75, 0.72],
        ("sst2", "multi"): [0.75, 0.80, 0.78],
    })
    out = multitask.compare_settings(table, floors={"rte": 0.473, "sst2": 0.513})
    assert out.loc[("rte", "sequential"), "verdict"] == "void: baseline at chance"
    assert out.loc[("rte", "single-task"), "verdict"].startswith("(baseline) at its floor")
    assert out.loc[("sst2", "multi"), "verdict"] == "better"
    assert out.loc[("sst2", "single-task"), "floor"] == pytest.approx(51.3)
    with pytest.raises(ValueError, match="no floor for task 'sst2'"):
        multitask.compare_settings(table, floors={"rte": 0.473})


def test_task_floor_is_computed_from_the_task(with_data):
    """The floor is the task's own majority-class score on its test split (MCC 0 for CoLA)."""
    for name in ("rte", "cola", "mrpc"):
        task = tasks.load_task(name, train_examples=200, test_examples=100)
        floor = multitask.task_floor(task)
        assert floor.value == pytest.approx(task.majority_baseline("test")["score"])
    cola = multitask.task_floor(tasks.load_task("cola", train_examples=200, test_examples=100))
    assert cola.value == 0.0 and cola.what == "chance (MCC 0)"


def test_a_hugging_face_backbone_keeps_its_word_embeddings_frozen(with_data):
    """As in 02 (``Backbone.classifier``): MiniLM's word embeddings are half its parameters and
    their AdamW update dominates a CPU step, so multi-task runs do not train them either."""
    from tutorial_lib import config
    from tutorial_lib.backbones import BackboneError
    from tutorial_lib.methods.multitask.settings import MultitaskSettings

    scale = config.get_scale("smoke")
    settings = MultitaskSettings.at(scale).replace(
        backbone="minilm", train_examples=8, dev_examples=8, test_examples=8)
    try:
        exp = multitask.Experiment(settings, ["rte"])
    except BackboneError:
        pytest.skip("offline MiniLM not installed")
    model = exp.new_model(load_backbone("minilm", scale), ["rte"])
    assert model.pool == "first"  # BERT's [CLS]
    assert not model.encoder.get_input_embeddings().weight.requires_grad
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any(n.startswith("encoder.encoder.layer.") for n in trainable)
    assert any(n.startswith("heads.rte.") for n in trainable)
    ours = multitask.Experiment(settings.replace(backbone="scratch"), ["rte"])
    scratch = load_backbone("scratch", scale)
    assert ours.new_model(scratch, ["rte"]).encoder.tok_emb.weight.requires_grad  # ours: all trained


# --- 06's and 07's self-checks, run as a learner would ------------------------------------------
# the notebook's check cell with its stub (a "not written yet" line, no exception), with the
# solution from the notebook's "## Solutions" (passes) and with each deliberately wrong answer (fails,
# saying what differs)

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
SOLUTION = re.compile(r"<details><summary>Self-check</summary>.*?```python\n(.*?)```", re.S)

WRONG = {  # plausible mistakes per notebook: the learner's function redefined
    "06_multitask": {
        "T instead of 1/T": "def my_probabilities(sizes, temperature):\n"
                            "    total = sum(n ** temperature for n in sizes.values())\n"
                            "    return {t: n ** temperature / total for t, n in sizes.items()}\n",
        "no temperature": "def my_probabilities(sizes, temperature):\n"
                          "    return {t: n / sum(sizes.values()) for t, n in sizes.items()}\n",
        "not normalised": "def my_probabilities(sizes, temperature):\n"
                          "    return {t: n ** (1 / temperature) for t, n in sizes.items()}\n",
    },
    "07_gradts": {
        "no layer normalisation": "def my_normalize(m):\n"
                                  "    return (m - m.min()) / (m.max() - m.min())\n",
        "columns, not layers": "def my_normalize(m):\n"
                               "    m = m / m.sum(dim=0, keepdim=True)\n"
                               "    return (m - m.min()) / (m.max() - m.min())\n",
        "divided by the max only": "def my_normalize(m):\n"
                                   "    m = m / m.sum(dim=1, keepdim=True)\n"
                                   "    return m / m.max()\n",
    },
}
CASES = [(stem, name) for stem in sorted(WRONG) for name in WRONG[stem]]


def run_check(stem: str, answer: str | None):
    """The notebook's self-check cell, with ``answer`` defined after the stub; its last
    expression's value (the check's result)."""
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "selfcheck.check(" in c.source)
    tree = ast.parse(cell)
    scope = {"multitask": multitask, "gradts": gradts, "np": np, "pd": pd, "torch": torch}
    exec(compile(ast.Module(tree.body[:-1], type_ignores=[]), stem, "exec"), scope)
    if answer:
        exec(answer, scope)
    return eval(compile(ast.Expression(tree.body[-1].value), stem, "eval"), scope)


def solution(stem: str) -> str:
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return SOLUTION.search(text[text.index("## Solutions"):]).group(1)


@pytest.mark.parametrize("stem", sorted(WRONG))
def test_the_stub_reports_and_the_solution_passes(stem):
    stub = run_check(stem, None)
    assert not stub and "not written yet" in repr(stub)
    right = run_check(stem, solution(stem))
    assert right and right.cases == 5, repr(right)


@pytest.mark.parametrize(("stem", "mistake"), CASES)
def test_a_wrong_answer_fails(stem, mistake):
    wrong = run_check(stem, WRONG[stem][mistake])
    assert not wrong and repr(wrong).startswith("✗ case ") and "differ" in repr(wrong), repr(wrong)
