"""Tests for tutorial_lib.methods.prompts.fewshot: the few-shot loop of notebook 09 (train, choose on the
few-shot dev set, test once), the head and prompt methods, the logistic-regression probe, zero-shot
scoring and the verdicts with the learned-baseline guard
(the stats rule, paired by split). Tiny models; one test loads our smoke tokenizer."""

import pandas as pd
import pytest
import torch
from tiny import tensors_equal

from tutorial_lib import checkpoints, stats
from tutorial_lib.backbones import Backbone
from tutorial_lib.finetuning import Run
from tutorial_lib.methods.prompts import fewshot, prompting
from tutorial_lib.models import TransformerClassifier, TransformerConfig, TransformerLM
from tutorial_lib.tasks import FewShotSplit
from tutorial_lib.tokenization import train_wordpiece

LINES = ["It was great . The movie was good and fun .", "It was bad . A terrible cat and a dog .",
         "What is the name of the city ? Who is the man ?"] * 20
TEMPLATES = {"sst2": "<x> It was [MASK] ."}
VERBALIZERS = {"sst2": {"negative": "bad", "positive": "good"}}


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(LINES, vocab_size=200)


@pytest.fixture
def ours(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=False, pad_id=tokenizer.pad_token_id)
    return Backbone("ours-mlm", "masked", tokenizer, TransformerLM(cfg), 32)


def toy_split(seed: int = 13) -> FewShotSplit:
    return FewShotSplit(
        "sst2", 2, seed,
        train=[{"text": "good fun", "label": 1}, {"text": "bad cat", "label": 0}] * 2,
        dev=[{"text": "good", "label": 1}, {"text": "bad", "label": 0}],
        test=[{"text": "fun", "label": 1}, {"text": "dog", "label": 0}] * 3,
        label_names=["negative", "positive"])


def test_train_fewshot_selects_on_dev_and_tests_once(ours):
    split = toy_split()
    method = fewshot.prompt_method(ours, TEMPLATES, VERBALIZERS)
    table, kept = fewshot.compare_fewshot(
        {"manual prompt": method}, [split], lrs={"manual prompt": (1e-3, 1e-2)}, steps=4,
        batch_size=2, eval_every=2, keep=lambda m, s: True)
    row = table.iloc[0]
    assert row["lr"] in (1e-3, 1e-2) and row["best_step"] in (2, 4)
    assert (row["task"], row["K"], row["split"], row["method"]) == ("sst2", 2, 13, "manual prompt")
    assert row["test_error"] == pytest.approx(1 - row["test_accuracy"])
    run = kept[("manual prompt", "sst2", 2, 13)]
    assert isinstance(run, Run) and run.lr == row["lr"] and run.best_step == row["best_step"]
    assert list(run.row()) == ["backbone", "seed", "test_accuracy", "test_error", "seconds",
                               "trainable_params", "total_params", "trained_pct"]
    assert run.backbone == "ours-mlm" and run.row()["test_accuracy"] == row["test_accuracy"]
    assert [h["step"] for h in run.history.evals] == [2, 4]
    assert {h["split"] for h in run.history.evals} == {"dev"}
    assert fewshot.chosen(run)["dev_accuracy"] == row["dev_accuracy"]
    assert row["dev_accuracy"] == max(h["dev_accuracy"] for h in run.history.evals)
    assert run.test["confusion"].sum().item() == len(split.test)
    # the original masked LM was copied, never trained in place
    assert run.model.backbone is not ours


def test_the_best_model_is_a_copy_kept_by_ignite_first_best_on_ties():
    """The loop keeps its best model with Ignite's Checkpoint(score_function=...): the saved
    weights must not follow training, a tie keeps the earlier step, and accuracy outranks loss."""
    from ignite.engine import Engine
    from ignite.handlers import Checkpoint

    model = torch.nn.Linear(2, 1)
    saver = checkpoints.InMemorySaver()
    engine = Engine(lambda e, b: None)
    step = {"n": 0}
    handler = Checkpoint({"model": model}, saver, n_saved=1,
                         score_function=lambda e: fewshot.dev_score(e.state.metrics),
                         global_step_transform=lambda *_: step["n"])
    for n, (acc, loss, w) in enumerate([(0.5, 0.7, 1.0), (0.75, 0.9, 2.0), (0.75, 0.9, 3.0),
                                        (0.5, 0.1, 4.0)], start=1):
        step["n"] = n
        with torch.no_grad():
            model.weight.fill_(w)
        engine.state.metrics = {"accuracy": acc, "loss": loss}
        handler(engine)
    checkpoint, score = saver.best
    assert score == fewshot.dev_score({"accuracy": 0.75, "loss": 0.9})
    assert checkpoint["weight"].eq(2.0).all()  # step 2: the tie at step 3 did not replace it
    Checkpoint.load_objects({"model": model}, checkpoint)
    assert model.weight.eq(2.0).all()
    assert fewshot.dev_score({"accuracy": 0.5, "loss": 0.1}) < fewshot.dev_score(
        {"accuracy": 0.51, "loss": 9.9})


def test_the_grid_keeps_the_best_dev_run_and_tests_only_it(ours, monkeypatch):
    split = toy_split()
    runs = []
    train = fewshot.train_fewshot

    def spy(build, split, **kwargs):
        run = train(build, split, **kwargs)
        accuracy = {1e-3: 0.5, 1e-2: 1.0, 1e-4: 1.0}[kwargs["lr"]]  # a known dev ranking
        for h in run.history.evals:
            h["score"] = fewshot.dev_score({"accuracy": accuracy, "loss": 0.5})
        runs.append((kwargs["lr"], kwargs["evaluate_test"], run.seconds))
        return run

    monkeypatch.setattr(fewshot, "train_fewshot", spy)
    method = fewshot.prompt_method(ours, TEMPLATES, VERBALIZERS)
    winner = fewshot.select_and_test(method(split), split, (1e-3, 1e-2, 1e-4), steps=2,
                                     batch_size=2, eval_every=1)
    assert [lr for lr, _, _ in runs] == [1e-3, 1e-2, 1e-4]
    assert not any(evaluate for _, evaluate, _ in runs)  # no run looked at test while training
    assert winner.lr == 1e-2  # best dev; the tie with 1e-4 goes to the first
    assert winner.test["confusion"].sum().item() == len(split.test)
    assert winner.seconds == pytest.approx(sum(seconds for _, _, seconds in runs))  # whole grid


def test_zero_shot_scores_the_untrained_prompt_classifier(ours):
    split = toy_split()
    metrics = fewshot.zero_shot(ours, split, TEMPLATES["sst2"], VERBALIZERS["sst2"])
    ids = prompting.verbalizer_ids(ours, VERBALIZERS["sst2"], split.label_names)
    model = prompting.PromptClassifier(ours, TEMPLATES["sst2"], ids).eval()
    batch = prompting.prompt_collate(ours.pad_id)(model.encode(split.test))
    with torch.no_grad():
        pred = model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1)
    assert metrics["accuracy"] == pytest.approx((pred == batch["labels"]).float().mean().item())


def test_fresh_copies_a_module_and_calls_a_factory(ours):
    copy = fewshot.fresh(ours)
    assert copy is not ours and copy.lm is not ours.lm
    assert tensors_equal(copy.decoder_weight, ours.decoder_weight)
    assert fewshot.fresh(lambda: ours) is ours


def test_cls_method_builds_a_fresh_classifier_of_the_backbone(with_data):
    from tutorial_lib import config

    scale = config.get_scale("smoke")
    split = toy_split()
    build = fewshot.cls_method("scratch", scale)(split)
    built = build()
    assert isinstance(built.model, TransformerClassifier) and built.model.num_labels == 2
    rows = built.encode(split.train)
    cls_id = 2  # our tokenizer: [CLS] = 2, appended at the end
    assert all(r["input_ids"][-1] == cls_id for r in rows)
    assert [r["labels"] for r in rows] == [r["label"] for r in split.train]
    run = fewshot.train_fewshot(build, split, steps=2, batch_size=2, lr=1e-3, eval_every=1)
    assert [h["step"] for h in run.history.evals] == [1, 2]
    assert run.test["confusion"].sum().item() == len(split.test)


def _table() -> pd.DataFrame:
    rows = []
    for task, deltas in (("sst2", (0.05, 0.06, 0.04)), ("mr", (-0.10, 0.12, 0.0))):
        for split, (base, d) in zip((13, 21, 42), zip((0.60, 0.70, 0.80), deltas)):
            rows.append({"task": task, "K": 16, "split": split, "method": "fine-tuning",
                         "test_accuracy": base, "test_error": 1 - base})
            rows.append({"task": task, "K": 16, "split": split, "method": "DART",
                         "test_accuracy": base + d, "test_error": 1 - base - d})
    return pd.DataFrame(rows)


def test_verdicts_pair_methods_by_split_on_test_accuracy():
    table = _table()
    out = fewshot.verdicts(table, "fine-tuning")
    assert {"task", "method", "verdict"} <= set(out.columns)
    dart = out[out["method"] == "DART"].set_index("task")
    assert (dart["test"] == "paired t").all()
    assert dart.loc["sst2", "Δ (points)"] == pytest.approx(5.0)
    assert dart.loc["sst2", "verdict"] == "better"  # +4..+6 points on every split
    assert dart.loc["mr", "verdict"] == "within noise"
    assert (out[out["method"] == "fine-tuning"]["verdict"] == "(baseline)").all()
    assert fewshot.beats(out, "DART") == ["sst2"]
    lines = fewshot.verdict_lines(out).splitlines()
    assert len(lines) == 2 and lines[0].startswith("sst2: DART: +5.00 points of test accuracy")
    assert lines[0].endswith("→ better") and lines[1].startswith("mr: DART:")
    # worse is worse: swap the roles
    flipped = table.assign(method=table["method"].map({"DART": "fine-tuning",
                                                        "fine-tuning": "DART"}))
    assert fewshot.verdicts(flipped, "fine-tuning").set_index(["task", "method"]).loc[
        ("sst2", "DART"), "verdict"] == "worse"


def test_summarize_is_mean_and_std_over_splits_in_percent():
    out = fewshot.summarize(_table())
    row = out.loc[("sst2", "fine-tuning")]
    assert row["mean"] == pytest.approx(0.70) and row["std"] == pytest.approx(0.10)
    assert row["runs"] == 3 and row["test_accuracy (mean ± std)"] == "70.0 ± 10.0 %"


def test_head_lr_gives_the_new_head_its_own_rate(with_data):
    from tutorial_lib import config

    split = toy_split()
    built = fewshot.cls_method("scratch", config.get_scale("smoke"), head_lr=1e-2)(split)()
    groups = built.method.param_groups(built.model, 1e-4, 0.01)
    head = {id(p) for p in built.model.head.parameters()}
    scales = {id(p): g.get("lr_scale", 1.0) for g in groups for p in g["params"]}
    assert [scales[i] for i in head] == pytest.approx([100.0] * len(head))
    assert {s for i, s in scales.items() if i not in head} == {1.0}
    assert len(scales) == sum(1 for p in built.model.parameters() if p.requires_grad)
    run = fewshot.train_fewshot(lambda: built, split, steps=2, batch_size=2, lr=1e-4,
                                eval_every=2)
    assert run.test["confusion"].sum().item() == len(split.test)


def test_majority_floors_are_each_splits_test_majority_rate():
    a = toy_split(13)
    b = toy_split(21)
    b.test = [{"text": "x", "label": 1}] * 3 + [{"text": "y", "label": 0}]
    floors = fewshot.majority_floors([a, b])
    assert floors["sst2"].value == {13: pytest.approx(0.5), 21: pytest.approx(0.75)}
    assert floors["sst2"].what == "majority class"


def test_verdicts_guard_a_baseline_at_its_floor_and_a_prompt_at_its_start():
    table = _table()
    sst2 = table[table["task"] == "sst2"]
    # the baseline (0.60, 0.70, 0.80) does not beat a 0.70 floor: the comparison is void
    out = fewshot.verdicts(sst2, "fine-tuning", floors={"sst2": 0.70}).set_index("method")
    assert out.loc["DART", "verdict"] == "void: baseline at chance"
    assert out.loc["fine-tuning", "floor"] == pytest.approx(70.0)
    # a floor it beats on every split (paired by split): the verdict stands
    low = stats.Floor({13: 0.5, 21: 0.55, 42: 0.6})
    out = fewshot.verdicts(sst2, "fine-tuning", floors={"sst2": low}).set_index("method")
    assert out.loc["DART", "verdict"] == "better"
    # DART's start equal to where it ends on average: "did not train"
    out = fewshot.verdicts(sst2, "fine-tuning", floors={"sst2": low},
                           starts={"sst2": {"DART": 0.75}}).set_index("method")
    assert out.loc["DART", "verdict"] == "did not train"
    # a baseline with a start it does not beat: "void: baseline did not train"
    out = fewshot.verdicts(sst2, "fine-tuning", starts={"sst2": {"fine-tuning": 0.70,
                                                                 "absent method": 0.5}})
    assert out.set_index("method").loc["DART", "verdict"] == "void: baseline did not train"


def test_logreg_probe_chooses_c_on_dev_and_tests_once(with_data):
    from tutorial_lib import config

    splits = [toy_split(13), toy_split(21)]
    out = fewshot.logreg_probe("scratch", config.get_scale("smoke"), splits, (0.01, 1.0))
    assert list(out["split"]) == [13, 21] and set(out["method"]) == {fewshot.LOGREG}
    assert set(out["lr"]) <= {0.01, 1.0}
    assert ((out["test_accuracy"] >= 0) & (out["test_accuracy"] <= 1)).all()
    assert out["test_error"].tolist() == pytest.approx((1 - out["test_accuracy"]).tolist())
    # one test set, texts seen by the model: separable on train → dev and test follow the words
    assert out["dev_accuracy"].between(0, 1).all()


def test_pooled_features_mean_or_last_token(with_data):
    from tutorial_lib import config
    from tutorial_lib.backbones import load_backbone

    b = load_backbone("scratch", config.get_scale("smoke"))
    rows = toy_split().train
    mean, last = (fewshot.pooled_features(b, rows, pool) for pool in ("mean", "last"))
    assert mean.shape == last.shape == (len(rows), b.hidden_size)
    assert not (mean == last).all()
    with pytest.raises(ValueError, match="pool"):
        fewshot.pooled_features(b, rows, "first")


def test_pooled_features_come_in_the_rows_order(with_data):
    from tutorial_lib import config
    from tutorial_lib.backbones import load_backbone

    b = load_backbone("scratch", config.get_scale("smoke"))
    rows = [{"text": "good fun and more fun and good", "label": 1}, {"text": "bad", "label": 0},
            {"text": "a dog", "label": 0}]
    together = fewshot.pooled_features(b, rows, "mean", batch_size=8)
    alone = [fewshot.pooled_features(b, [r], "mean")[0] for r in rows]
    for got, want in zip(together, alone):
        assert got == pytest.approx(want, abs=2e-2)


def test_trained_weights_checkpoint_holds_only_what_trains_and_restores_it():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    model[0].requires_grad_(False)
    weights = checkpoints.TrainedWeights(model)
    saved = {k: v.clone() for k, v in weights.state_dict().items()}
    assert set(saved) == {"1.weight", "1.bias"}
    frozen = model[0].weight.clone()
    with torch.no_grad():
        model[1].weight.add_(1.0)
    weights.load_state_dict(saved)
    assert tensors_equal(model[1].weight, saved["1.weight"])
    assert tensors_equal(model[0].weight, frozen)


def test_a_method_can_take_the_rate_another_chose_on_the_same_split(ours):
    split = toy_split()
    method = fewshot.prompt_method(ours, TEMPLATES, VERBALIZERS)
    table, _ = fewshot.compare_fewshot(
        {"a": method, "b": method}, [split], lrs={"a": (1e-3, 1e-2), "b": "a"}, steps=2,
        batch_size=2, eval_every=2)
    assert table.loc[table.method == "b", "lr"].item() == table.loc[table.method == "a", "lr"].item()
    with pytest.raises(ValueError, match="must come before it"):
        fewshot.compare_fewshot({"b": method, "a": method}, [split], lrs={"a": (1e-3,), "b": "a"},
                                steps=2, batch_size=2, eval_every=2)


def test_choose_rates_picks_each_methods_rate_on_the_mean_dev_score_and_tests_nothing(
        ours, monkeypatch):
    """09's protocol: each rate on the first splits' dev sets, the best mean dev score wins (the
    grid's first on exact ties), no run is tested; compare_fewshot then tests the chosen runs of
    those splits (trained once) and trains the other splits at the chosen rate only."""
    splits = [toy_split(13), toy_split(21), toy_split(42)]
    calls = []
    train = fewshot.train_fewshot
    dev = {(13, 1e-3): 0.5, (21, 1e-3): 1.0, (13, 1e-2): 1.0, (21, 1e-2): 1.0,
           (13, 1e-4): 1.0, (21, 1e-4): 1.0}

    trained = {}

    def spy(build, split, **kwargs):
        run = train(build, split, **kwargs)
        calls.append((split.seed, kwargs["lr"], kwargs.get("evaluate_test", True)))
        trained[split.seed, kwargs["lr"]] = run
        if (split.seed, kwargs["lr"]) in dev:  # a known dev ranking: 1e-2 and 1e-4 tie, 1e-3 loses
            for h in run.history.evals:
                h["score"] = fewshot.dev_score({"accuracy": dev[split.seed, kwargs["lr"]], "loss": 0.5})
        return run

    monkeypatch.setattr(fewshot, "train_fewshot", spy)
    method = fewshot.prompt_method(ours, TEMPLATES, VERBALIZERS)
    kw = dict(steps=2, batch_size=2, eval_every=1)
    rates, selection, reuse = fewshot.choose_rates(
        {"a": method, "b": method}, splits[:2], lrs={"a": (1e-3, 1e-2, 1e-4), "b": "a"}, **kw)
    assert rates == {"a": 1e-2, "b": 1e-2}
    assert len(calls) == 6 and not any(test for *_, test in calls)  # "b" trained nothing here
    assert selection.groupby("lr")["chosen"].all().to_dict() == {1e-4: False, 1e-3: False, 1e-2: True}
    assert set(reuse) == {("a", "sst2", 13), ("a", "sst2", 21)}
    # memory: only the chosen rate's runs keep a model (without gradients or a saved copy)
    assert {key for key, run in trained.items() if run.model is not None} == {(13, 1e-2), (21, 1e-2)}
    assert all(p.grad is None for p in trained[13, 1e-2].model.parameters())
    calls.clear()
    table, _ = fewshot.compare_fewshot({"a": method, "b": method}, splits,
                                       lrs={m: (r,) for m, r in rates.items()}, reuse=reuse,
                                       inspect=lambda m, s, run: {"trained": run.model is not None},
                                       **kw)
    assert not reuse  # each reused run was taken out
    assert sorted(calls) == [(13, 1e-2, False), (21, 1e-2, False), (42, 1e-2, False),
                             (42, 1e-2, False)]  # "a" on split 42, "b" on every split
    assert table["test_accuracy"].notna().all() and (table["lr"] == 1e-2).all()
    assert table["trained"].all()


def test_head_fine_tuning_on_a_loaded_lm_copies_only_what_it_trains():
    from tiny import tiny_llama_backbone

    from tutorial_lib import config

    lm = tiny_llama_backbone(["a good film", "a bad film"], layers=3)
    build = fewshot.cls_method(lm, config.get_scale("smoke"), trainable_layers=1, head_lr=1e-2,
                               pool="mean")(toy_split())
    model = build().model
    params = {id(p): p for p in model.parameters()}
    shared = [p for p in lm.lm.parameters() if id(p) in params]
    assert shared and not any(p.requires_grad for p in shared)
    assert all(id(p) not in {id(q) for q in lm.lm.parameters()}
               for p in model.parameters() if p.requires_grad)


def test_zero_shot_and_the_probe_can_fill_the_caches_the_runs_read():
    """09 shares the frozen layers' states: zero-shot fills the manual prompt's cache (the same
    prompts), the probe reads head fine-tuning's (the same texts) — the same numbers as without."""
    from tiny import tiny_llama_backbone

    from tutorial_lib.methods.prompts import prompt_lms

    lm = tiny_llama_backbone(["a good fun film", "a bad dull film"], layers=3)
    split = toy_split()
    template, words = "Review:<x> It was:[MASK]", VERBALIZERS["sst2"]
    cache = prompt_lms.FrozenStates(trainable_layers=1)
    plain = fewshot.zero_shot(lm, split, template, words)
    cached = fewshot.zero_shot(lm, split, template, words, frozen=cache)
    assert len(cache.states) == len({r["text"] for r in split.test})
    assert cached["accuracy"] == plain["accuracy"]
    assert cached["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    texts = prompt_lms.FrozenStates(trainable_layers=1)
    rows = split.train + split.test
    torch.testing.assert_close(fewshot.pooled_features(lm, rows, frozen=texts),
                               fewshot.pooled_features(lm, rows), rtol=1e-4, atol=1e-5)
    assert texts.states
    with pytest.raises(ValueError, match="trained layers"):
        fewshot.prompt_method(lm, TEMPLATES, VERBALIZERS, trainable_layers=2, frozen_states=cache)


def test_a_finished_few_shot_run_frees_its_optimizer_without_the_cycle_collector(with_data):
    """A kept run must not hold its optimizer state (09's rate choice keeps several runs; a cycle
    through the dev hook once held 5 GiB more at classroom until Python's collector ran)."""
    import gc

    import torch

    from tutorial_lib import config

    split = toy_split()
    build = fewshot.cls_method("scratch", config.get_scale("smoke"))(split)
    gc.collect()
    gc.disable()
    try:
        run = fewshot.train_fewshot(build, split, steps=2, batch_size=2, lr=1e-3, eval_every=1)
        held = [o for o in gc.get_objects() if isinstance(o, torch.optim.Optimizer) and o.state]
    finally:
        gc.enable()
    assert run.model is not None and held == []  # no optimizer state outlives its run
