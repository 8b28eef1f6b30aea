"""Notebook 14's experiment functions at smoke scale (tiny random MiniLM-class models, real TREC):
the rate chosen on dev and the selection seed's run reused, the starts, the checks and costs per
method, the counts on a causal LM, and QLoRA's clear refusal on a CPU."""

import pandas as pd
import pytest
import torch
from tiny_peft import batch, tiny_classifier, tiny_encoder

from tutorial_lib import backbones, config, tasks
from tutorial_lib.config import CACHE_ENV_VAR, DATA_ENV_VAR
from tutorial_lib.methods.peft import peft_frontier as pf
from tutorial_lib.methods.peft.peft_methods import IA3, BitFit, Full, LoRA, PromptTuning
from tutorial_lib.methods.peft.settings import PEFTSettings
from tutorial_lib.models import SequenceClassifier

SMOKE = config.get_scale("smoke")
SETTINGS = PEFTSettings.at(SMOKE)


@pytest.fixture(scope="module")
def task(data_dir, tmp_path_factory, one_thread):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV_VAR, str(data_dir))
        mp.setenv(CACHE_ENV_VAR, str(tmp_path_factory.mktemp("cache")))
        yield tasks.load_task("trec", train_examples=48, validation_examples=24, test_examples=24)


BUDGET = SETTINGS.budget.replace(batch_size=16)


def test_as_method_trains_the_head_at_its_own_rate():
    model = tiny_classifier("bert")
    method = pf.as_method(LoRA(r=2, alpha=4), lr=1e-2, head_lr=1e-3)
    method.prepare(model)
    groups = method.param_groups(model, 1e-2, 0.01)
    head = {id(p) for p in model.head.parameters()}
    scales = {g.get("lr_scale", 1.0) for g in groups if any(id(p) in head for p in g["params"])}
    assert len(scales) == 1 and scales.pop() == pytest.approx(0.1)
    trained = {id(p) for p in model.parameters() if p.requires_grad}
    assert {id(p) for g in groups for p in g["params"]} == trained


def test_the_rate_is_chosen_on_dev_and_the_selection_run_is_reused(task):
    grid = {"LoRA": (LoRA(r=2, alpha=4), (1e-3, 1e-1)), "BitFit": (BitFit(), (1e-3,))}
    runs, trials, results = pf.frontier_runs(grid, task, BUDGET, scale=SMOKE, backbone="minilm",
                                             seeds=(0, 1), head_lr=1e-3, evals_per_epoch=2)
    assert len(trials) == 3 and len(runs) == 4  # 3 grid runs + 1 more seed each: no seed-0 rerun
    assert sorted(runs.groupby("method").seed.apply(list).tolist()) == [[0, 1], [0, 1]]
    lora = trials[trials.method == "LoRA"]
    best = lora.sort_values("dev_error", kind="stable").iloc[0]
    chosen = runs[(runs.method == "LoRA")]
    assert (chosen.lr == best.lr).all()
    assert chosen[chosen.seed == 0].test_error.item() == best.test_error  # the grid's run itself
    assert "test_error_floor" in runs and [len(v) for v in results.values()] == [2, 2]
    curves = pf.dev_curves(results)  # validated during each run, the last one is the chosen dev error
    assert curves.groupby(["method", "seed"]).step.nunique().min() >= 2
    last = curves.sort_values("step").groupby(["method", "seed"]).dev_error.last()
    assert [last[("LoRA", s)] for s in (0, 1)] == runs[runs.method == "LoRA"].dev_error.tolist()
    positions = pf.rate_positions(trials, runs.groupby("method")["lr"].first())
    assert positions.loc["BitFit", "position"] == "only rate" and positions["at edge"].loc["BitFit"]


def test_rate_positions_flag_a_choice_at_either_edge_of_its_grid():
    trials = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3 + ["c"] * 2 + ["d"],
                           "lr": [1e-3, 3e-3, 1e-2, 3e-3, 1e-2, 3e-2, 1e-4, 3e-4, 1e-2]})
    table = pf.rate_positions(trials, {"a": 3e-3, "b": 3e-2, "c": 1e-4, "d": 1e-2})
    assert list(table.index) == ["a", "b", "c", "d"]
    assert table["position"].tolist() == ["inside", "highest", "lowest", "only rate"]
    assert table["at edge"].tolist() == [False, True, True, True]
    assert table.loc["a", "note"] == "" and table.loc["b", "note"].startswith(pf.EDGE_NOTE)
    assert table.loc["b", "rates tried"] == (3e-3, 1e-2, 3e-2)
    with pytest.raises(ValueError, match="not in its grid"):
        pf.rate_positions(trials, {"a": 1.0, "b": 3e-2, "c": 1e-4, "d": 1e-2})


def test_dev_curves_read_each_runs_validations():
    from tutorial_lib.finetuning import Run
    from tutorial_lib.training import History

    history = History()
    for step, error in ((20, 0.5), (40, 0.3)):
        history.log_eval(step, "validation", {"error": error, "accuracy": 1 - error})
    history.log_eval(40, "test", {"error": 0.9})  # not a dev row
    curves = pf.dev_curves({"LoRA": [Run("minilm", 3, {}, history)]})
    assert curves.to_dict("records") == [{"method": "LoRA", "seed": 3, "step": 20, "dev_error": 0.5},
                                         {"method": "LoRA", "seed": 3, "step": 40, "dev_error": 0.3}]


def test_starts_are_the_untrained_models_and_lora_starts_as_its_base(task):
    methods = {"full": Full(train_embeddings=False), "LoRA": LoRA(r=2, alpha=4), "BitFit": BitFit(),
               "prompt": PromptTuning(n_tokens=3)}
    starts = pf.start_errors(methods, task, BUDGET, scale=SMOKE, backbone="minilm", seeds=(0, 1))
    assert set(starts) == set(methods) and all(set(v) == {0, 1} for v in starts.values())
    # the same seed's head on the unchanged base: identical errors (LoRA's B = 0)
    assert starts["LoRA"] == starts["full"] == starts["BitFit"]
    assert all(0.0 <= e <= 1.0 for v in starts.values() for e in v.values())


@pytest.mark.parametrize("method", [LoRA(r=2, alpha=4), IA3(), BitFit(), PromptTuning(n_tokens=3),
                                    Full(train_embeddings=False)], ids=repr)
def test_check_and_cost_reports_every_check_passing_on_a_real_step(method, tmp_path, one_thread):
    row = pf.check_and_cost(method, lambda: tiny_classifier("bert"), batch(), lr=1e-2, steps=1,
                            directory=tmp_path)
    assert row["count ok"] and row["frozen changed"] == 0 and row["round trip ok"]
    assert row["checkpoint (KiB)"] > 0 and row["s / step"] > 0
    assert (row["merge |Δ logit|"] is None) == (not method.mergeable)


def test_classifiers_of_one_backbone_share_its_encoder_so_checks_take_a_factory(task):
    """Why check_and_cost takes ``fresh``: a method applied to one classifier of a Backbone would
    change every other classifier of it (the reload check would compare a model with itself)."""
    bb = backbones.load_backbone("minilm", SMOKE)
    a, b = bb.classifier(task.num_labels), bb.classifier(task.num_labels)
    assert a.encoder is b.encoder
    c = backbones.load_backbone("minilm", SMOKE).classifier(task.num_labels)
    assert c.encoder is not a.encoder


def test_check_batch_is_one_padded_batch_of_the_split(task):
    bb = backbones.load_backbone("minilm", SMOKE)
    b = pf.check_batch(bb, task.validation, 5)
    assert b["input_ids"].shape[0] == 5 == len(b["labels"])
    assert b["attention_mask"].sum(1).min() >= 3  # [CLS] … [SEP]


def test_counts_on_a_causal_lm_match_their_formulas():
    table = pf.trained_counts({"LoRA": LoRA(r=2, alpha=4), "(IA)³": IA3(),
                               "prompt": PromptTuning(n_tokens=3)}, lambda: tiny_classifier("llama"))
    assert table["count ok"].all() and (table["% trained"] < 100).all()


def test_qlora_computes_in_fp16_on_a_t4_and_bf16_from_an_a100(monkeypatch):
    # issue 63's dry run: QLoRA hard-coded bf16, which a T4 (compute capability 7.5) has no
    # tensor cores for; every other run there takes fp16 with the gradient scaler
    monkeypatch.delenv("TUTORIAL_PRECISION", raising=False)
    assert pf.qlora_dtype((7, 5)) == torch.float16
    assert pf.qlora_dtype((8, 0)) == torch.bfloat16
    monkeypatch.setenv("TUTORIAL_PRECISION", "fp32")
    assert pf.qlora_dtype((7, 5)) is None


def test_qlora_says_why_it_cannot_run_on_a_cpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    why = pf.qlora_status()
    assert why and "GPU" in why
    with pytest.raises(RuntimeError, match="QLoRA cannot run here"):
        pf.qlora_classifier("any", 2)


class _WordTokenizer:
    """A stand-in for the Hub tokenizer of qlora_run: one id per word, no pad token."""

    pad_token_id, eos_token_id = None, 1

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[5 + sum(map(ord, w)) % 90 for w in t.split()] for t in texts]}


def test_qlora_run_trains_lora_through_the_runner_on_a_stand_in_model(task, monkeypatch):
    """qlora_run's wiring without a GPU: a tiny causal LM with LoRA stands in for the 4-bit model.
    Only LoRA and the head train (the frozen base stays bit for bit), the test error is read
    once, and the same seed gives the same run."""
    made = []

    def classifier(name, num_labels):
        model = SequenceClassifier(tiny_encoder("llama"), num_labels, "last", dropout=0.1)
        LoRA(r=2, alpha=4).apply(model)
        made.append(model)
        return model

    monkeypatch.setenv("TUTORIAL_PRECISION", "fp32")
    monkeypatch.setattr(pf, "qlora_classifier", classifier)
    monkeypatch.setattr(pf, "qlora_dtype", lambda: None)
    monkeypatch.setattr(pf.AutoTokenizer, "from_pretrained", lambda name: _WordTokenizer())
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 0)
    start = dict(classifier("start", task.num_labels).named_parameters())
    one, two = (pf.qlora_run("stand-in", task, BUDGET, steps=4, seed=1, lr=1e-2) for _ in range(2))
    assert one["steps"] == 4 and 0.0 <= one["test_error"] <= 1.0
    trained = {n for n, p in made[1].named_parameters() if p.requires_grad}
    assert one["trained params"] == sum(start[n].numel() for n in trained)
    assert trained and all("lora" in n or n.startswith("head") for n in trained)
    after = dict(made[1].named_parameters())
    assert all(torch.equal(after[n], p) for n, p in start.items() if n not in trained)
    assert all(not torch.equal(after[n], start[n]) for n in trained if "lora_B" in n)  # from 0
    assert {k: v for k, v in one.items() if k != "seconds"} == {
        k: v for k, v in two.items() if k != "seconds"}
    assert all(torch.equal(p, q) for p, q in zip(made[1].parameters(), made[2].parameters()))
