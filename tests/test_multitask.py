"""Tests for tutorial_lib.multitask: the task sampler, one-task-per-step batches, head loss
weights reaching the shared encoder, the auxiliary LM loss and the GLUE evaluator."""

import collections

import pytest
import torch
import torch.nn.functional as F
from tiny import padded_batch, tiny_classifier

from tutorial_lib import glue, heads, multitask
from tutorial_lib.models import IGNORE_INDEX, Transformer, TransformerConfig

SIZES = {"big": 3000, "mid": 1000, "small": 200}


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
    h = model.transformer(b["input_ids"], b["attention_mask"]).last_hidden_state
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
    ev = multitask.create_task_evaluator(model, "cola", dev=torch.device("cpu"))
    metrics = ev.run([b, b]).metrics["glue"]
    with torch.no_grad():
        pred = model(b["input_ids"], b["attention_mask"], head="cola").logits.argmax(-1)
    expected = glue.compute_metrics("cola", torch.cat([pred, pred]), torch.cat([b["labels"]] * 2))
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
    ev = multitask.create_task_evaluator(model.eval(), "stsb", dev=torch.device("cpu"))
    assert set(ev.run([sts]).metrics["glue"]) == {"pearson", "spearman", "score"}


def test_experiment_runs_every_setting_on_real_glue_data(with_data):
    """Single-task, multi-task with a fixed main share, and sequential runs end to end (smoke
    scale, random-init encoder): the step budget of each setting and one row per scored task."""
    from tutorial_lib import config

    scale = config.get_scale("smoke")
    settings = {**config.method_settings(scale, "multitask"), "steps_per_task": 2,
                "train_examples": 32, "dev_examples": 16, "test_examples": 16}
    exp = multitask.Experiment(scale, settings, ["rte", "sst2"], backbone="scratch")
    single = exp.single("rte", 0)
    assert single.steps_per_task == {"rte": 2}
    mtl = exp.run("all", ["rte", "sst2"], 0, main="rte")
    assert sum(mtl.steps_per_task.values()) == round(2 / settings["main_share"])
    assert list(mtl.scores) == ["rte"]  # a main task: only it is scored
    seq = exp.sequential("sst2", "rte", 0)
    assert seq.steps_per_task == {"sst2": 2, "rte": 2} and list(seq.scores) == ["rte"]
    table = multitask.collect([single, mtl, seq])
    assert set(table["setting"]) == {"single-task", "all", "sequential (sst2 → rte)"}
    assert table["test_score"].between(0, 1).all()
