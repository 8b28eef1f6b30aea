"""Tests for tutorial_lib.finetuning at smoke scale (real TREC data, tiny budget).

Moved with the code: the backbones ("ours" starts from the LM) → test_backbones.py; mean ± std and
the baseline comparison → test_stats.py; tasks, GLUE's dev set as test → test_tasks.py.
"""

import hashlib
import shutil

import pytest
import torch
from datasets import Dataset
from tiny import tensors_equal

from tutorial_lib import config, finetuning, stats, tasks
from tutorial_lib.config import CACHE_ENV_VAR, DATA_ENV_VAR
from tutorial_lib.methods.adaptation.settings import AdaptationSettings
from tutorial_lib.params import freeze
from tutorial_lib.pretraining_settings import PretrainingSettings
from tutorial_lib.training import Method

SMOKE = config.get_scale("smoke")
SETTINGS = AdaptationSettings.at(SMOKE)


@pytest.fixture(scope="module")
def task(data_dir, tmp_path_factory):
    """TREC at the smoke sizes of notebook 02; local data and one cache (one tokenizer) per module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV_VAR, str(data_dir))
        mp.setenv(CACHE_ENV_VAR, str(tmp_path_factory.mktemp("cache")))
        yield tasks.load_task(SETTINGS.task, train_examples=SETTINGS.train_examples,
                              validation_examples=SETTINGS.validation_examples,
                              test_examples=SETTINGS.test_examples)


def test_finetune_reports_test_metrics_and_history(task):
    budget = SETTINGS.budget
    assert task.num_labels == 6 and len(task.train) == SETTINGS.train_examples
    result = finetuning.finetune("scratch", task, budget, seed=0, scale=SMOKE)
    assert 0.0 <= result.test["error"] <= 1.0
    assert result.test["error"] == pytest.approx(1 - result.test["accuracy"])
    assert result.test["confusion"].sum().item() == len(task.test)
    assert result.history.evals[-1]["epoch"] == pytest.approx(budget.epochs)
    steps = budget.epochs * -(-len(task.train) // budget.batch_size)
    assert len(result.history.train) == steps
    assert result.trainable_params == result.total_params and result.model is None
    row = result.row()
    assert row["trained_pct"] == 100 and row["test_error"] == result.test["error"]


def test_same_seed_same_result_and_the_seed_matters(task):
    budget = SETTINGS.budget
    a = finetuning.finetune("scratch", task, budget, seed=3, scale=SMOKE)
    b = finetuning.finetune("scratch", task, budget, seed=3, scale=SMOKE)
    c = finetuning.finetune("scratch", task, budget, seed=4, scale=SMOKE)
    assert a.test["error"] == b.test["error"]
    assert [r["loss"] for r in a.history.train] == [r["loss"] for r in b.history.train]
    assert [r["loss"] for r in a.history.train] != [r["loss"] for r in c.history.train]


def test_hooks_and_the_methods_own_learning_rate(task):
    """prepare (freezing), lr (a method's own rate) and keep_model reach the run."""
    budget = SETTINGS.budget.replace(warmup_frac=0.0)
    result = finetuning.finetune(
        "scratch", task, budget, seed=0, scale=SMOKE, keep_model=True,
        method=Method(lr=0.02, prepare=lambda model: freeze(model, r"^encoder\.")))
    assert max(r["lr"] for r in result.history.train) == pytest.approx(0.02)
    head = sum(p.numel() for p in result.model.head.parameters())
    assert result.trainable_params == head < result.total_params
    assert all(not p.requires_grad for p in result.model.encoder.parameters())


def test_compare_methods_runs_every_method_and_seed_and_reuses_plain_runs(task):
    head_budget = SETTINGS.budget.replace(lr=0.01)
    methods = {"full": {},
               "head only": {"prepare": lambda m: freeze(m, r"^encoder\."), "seeds": (0,),
                             "budget": head_budget}}  # a method may override seeds and budget
    table, runs = finetuning.compare_methods(methods, task, SETTINGS.budget, scale=SMOKE,
                                             backbone="scratch", seeds=(0, 1), measure_memory=True)
    assert list(table["method"]) == ["full", "full", "head only"]
    assert list(table["seed"]) == [0, 1, 0] and set(runs) == set(methods)
    assert {"test_error", "seconds_per_epoch", "trained_pct", "peak_mib", "total_params",
            "cached"} <= set(table)
    assert not table["cached"].any() and (table["peak_mib"] >= 0).all()
    # every run carries the task's majority floors, so stats.compare guards without being told
    majority = task.majority_baseline()["accuracy"]
    assert table["test_error_floor"].tolist() == pytest.approx([1 - majority] * 3)
    assert table["test_accuracy_floor"].tolist() == pytest.approx([majority] * 3)
    guarded = stats.compare(table, "full")
    assert guarded.loc["full", "floor"] == pytest.approx(100 * (1 - majority))
    assert "floor p" in guarded.columns
    full, head = (table[table["method"] == m] for m in methods)
    assert (full["trained_pct"] == 100).all() and (head["trained_pct"] < 10).all()
    assert max(r["lr"] for r in runs["head only"][0].history.train) == pytest.approx(0.01)
    # the same seed and budget: "full" here is exactly a plain finetune run
    alone = finetuning.finetune("scratch", task, SETTINGS.budget, seed=1, scale=SMOKE)
    assert full["test_error"].iloc[1] == alone.test["error"]
    # plain fine-tuning again (another notebook's baseline): from the run cache, the same numbers
    again, _ = finetuning.compare_methods({"baseline": {}}, task, SETTINGS.budget, scale=SMOKE,
                                          backbone="scratch", seeds=(0, 1), measure_memory=True)
    assert again["cached"].all() and again["peak_mib"].isna().all()
    assert again["test_error"].tolist() == full["test_error"].tolist()
    fresh, _ = finetuning.compare_methods({"baseline": {}}, task, SETTINGS.budget, scale=SMOKE,
                                          backbone="scratch", seeds=(1,), cache=False)
    assert not fresh["cached"].any() and fresh["test_error"].iloc[0] == alone.test["error"]


def test_run_key_names_everything_a_plain_run_depends_on(task, monkeypatch):
    key = lambda **kw: finetuning.run_key(**{"backbone": "scratch", "task": task, "budget": SETTINGS.budget,
                                             "seed": 0, "scale": SMOKE, **kw})
    assert key() == key()
    others = [key(seed=1), key(lr=0.5), key(backbone="ours"), key(budget=SETTINGS.budget.replace(epochs=2)),
              key(task=tasks.with_train_subset(task, 100)), key(scale=config.get_scale("classroom"))]
    assert len({key(), *others}) == len(others) + 1
    # the masked LM's own pretraining length is part of an ours-mlm run's recipe
    longer = PretrainingSettings.at(SMOKE).replace(mlm_steps=99)
    with monkeypatch.context() as patch:
        patch.setattr(PretrainingSettings, "at", classmethod(lambda cls, scale: longer))
        mlm_longer, ours_longer = key(backbone="ours-mlm"), key(backbone="ours")
    assert mlm_longer != key(backbone="ours-mlm") and ours_longer == key(backbone="ours")


def _tiny_trec() -> tasks.Task:
    """A TREC task of three rows per split, built in memory (no data files are read)."""
    rows = Dataset.from_dict({"text": ["what is a ?", "who is b ?", "where is c ?"], "label": [0, 1, 2]})
    return tasks.Task(tasks.spec("trec"), rows, rows, rows, ["a", "b", "c"], rows)


def test_run_key_changes_with_any_library_source_even_one_the_run_does_not_name(tmp_path):
    """The run cache cannot go stale on code: an edit to heads.py (which no hand-kept list named)
    in a copy of the package is a new key; an unchanged copy gives the package's own key."""
    copy = tmp_path / "tutorial_lib"
    shutil.copytree(finetuning.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    task = _tiny_trec()
    key = lambda **kw: finetuning.run_key("scratch", task, SETTINGS.budget, 0, SMOKE, **kw)
    assert key(package=copy) == key()
    heads = copy / "heads.py"
    heads.write_text(heads.read_text().replace("nn.Dropout(", "nn.Dropout(0.5 * ", 1))
    assert heads.read_text() != (finetuning.PACKAGE_DIR / "heads.py").read_text()
    finetuning.source_digest.cache_clear()  # the digest is computed once per process
    assert key(package=copy) != key()
    (copy / "data" / "new_module.py").write_text("X = 1\n")  # a new file in a subpackage too
    finetuning.source_digest.cache_clear()
    assert len({key(), key(package=copy), key(package=finetuning.PACKAGE_DIR)}) == 2


def test_run_key_changes_with_a_data_file_the_task_reads(tmp_path, monkeypatch):
    """The key holds the sha256 of the task's local files (TREC: its two files), as on disk; a
    dataset the task does not read changes nothing. From the Hub: its id and revision."""
    root = tmp_path / "data"
    (root / "trec").mkdir(parents=True)
    (root / "trec" / "train_5500.label").write_text("DESC:def what is a ?\n")
    (root / "trec" / "TREC_10.label").write_text("HUM:ind who is b ?\n")
    (root / "glue" / "SST-2").mkdir(parents=True)
    (root / "glue" / "SST-2" / "train.tsv").write_text("sentence\tlabel\n")
    monkeypatch.setenv(DATA_ENV_VAR, str(root))
    task = _tiny_trec()
    key = lambda: finetuning.run_key("scratch", task, SETTINGS.budget, 0, SMOKE)
    before = key()
    (root / "glue" / "SST-2" / "train.tsv").write_text("sentence\tlabel\nsomething\t1\n")
    assert key() == before
    with open(root / "trec" / "TREC_10.label", "a") as f:
        f.write("LOC:city where is c ?\n")
    changed = key()
    assert changed != before
    assert finetuning.data_fingerprint(task)["trec/TREC_10.label"] == hashlib.sha256(
        (root / "trec" / "TREC_10.label").read_bytes()).hexdigest()
    monkeypatch.setenv(DATA_ENV_VAR, "")
    assert finetuning.data_fingerprint(task)["hub"].startswith("hub ")
    assert key() not in (before, changed)


def test_cached_finetune_round_trips_the_whole_result(task):
    first, reused = finetuning.cached_finetune("scratch", task, SETTINGS.budget, 5, scale=SMOKE)
    second, again = finetuning.cached_finetune("scratch", task, SETTINGS.budget, 5, scale=SMOKE)
    assert (reused, again) == (False, True)
    assert tensors_equal(second.test["confusion"], first.test["confusion"].cpu())
    assert {k: v for k, v in second.test.items() if k != "confusion"} == {
        k: v for k, v in first.test.items() if k != "confusion"}
    assert second.history.evals == first.history.evals and second.history.train == first.history.train
    assert (second.trainable_params, second.total_params, second.seed) == (
        first.trainable_params, first.total_params, 5)


def test_loaders_shuffle_train_by_seed_and_keep_evaluation_order(task):
    from tutorial_lib.backbones import load_backbone

    backbone = load_backbone("scratch", SMOKE)
    first = lambda seed: next(iter(finetuning.loaders(backbone, task, 8, 16, seed)[0]))["input_ids"]
    assert tensors_equal(first(0), first(0)) and not tensors_equal(first(0), first(1))
    _, val, test = finetuning.loaders(backbone, task, 8, 16, seed=0, max_len=12)
    batch = next(iter(test))
    assert batch["labels"].tolist() == task.test["label"][:16]
    assert batch["input_ids"].shape[1] <= 12


def test_group_by_length_pads_less_and_is_part_of_the_run_key(task):
    from tutorial_lib.backbones import load_backbone

    backbone = load_backbone("scratch", SMOKE)
    padded = lambda loader: sum(b["input_ids"].numel() for b in loader)
    plain = finetuning.loaders(backbone, task, 8, 16, seed=0)
    grouped = finetuning.loaders(backbone, task, 8, 16, seed=0, group_by_length=True)
    assert sum(len(b["labels"]) for b in grouped[0]) == len(task.train)
    for a, b in zip(plain, grouped):
        assert padded(b) < padded(a)
    budget = SETTINGS.budget
    key = finetuning.run_key("scratch", task, budget, 0, SMOKE)
    assert key != finetuning.run_key("scratch", task, budget.replace(group_by_length=True), 0, SMOKE)


def test_a_regression_task_is_refused(task, data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV_VAR, str(data_dir))
    sts = tasks.load_task("stsb", train_examples=16, validation_examples=8, test_examples=8)
    with pytest.raises(ValueError, match="regression"):
        finetuning.finetune("scratch", sts, SETTINGS.budget, scale=SMOKE)


# --- the one runner -----------------------------------------------------------------------------


def _tiny_recipe(**changes):
    from tiny import tiny_ours

    rows = [{"input_ids": [1, 5 + i % 4, 6, 2], "labels": i % 3} for i in range(12)]
    recipe = finetuning.Recipe(build=lambda b: b.classifier(3), backbone=tiny_ours(),
                               budget=finetuning.Budget(batch_size=4, lr=1e-2), steps=6,
                               rows=lambda b: rows)
    return recipe.replace(**changes)


def test_the_runner_keeps_the_best_checkpoint_on_validation_when_asked():
    """select="best": the model the run returns is the one of its best-scoring evaluation (the
    first of equals), not the last; "last" keeps training's end."""
    scores = iter([0.1, 0.9, 0.9, 0.2, 0.3, 0.1])
    snapshots = []

    def validate(_):
        def check(model):
            snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
            return {"score": next(scores)}
        return check

    best = finetuning.run(_tiny_recipe(validate=validate, evaluate_every=1, select="best"), 0,
                          keep_model=True)
    assert best.best_step == 2  # the first 0.9
    for k, v in best.model.state_dict().items():
        assert tensors_equal(v, snapshots[1][k]), k
    snapshots.clear()
    scores = iter([0.1, 0.9, 0.9, 0.2, 0.3, 0.1])
    last = finetuning.run(_tiny_recipe(validate=validate, evaluate_every=1), 0, keep_model=True)
    assert last.best_step is None
    assert all(tensors_equal(v, snapshots[-1][k]) for k, v in last.model.state_dict().items())
    assert not all(tensors_equal(v, snapshots[1][k]) for k, v in last.model.state_dict().items())


def test_the_runners_rate_is_the_methods_else_the_budgets():
    assert finetuning.run(_tiny_recipe(), 0).lr == 1e-2
    assert finetuning.run(_tiny_recipe(method=Method(lr=3e-4)), 0).lr == 3e-4
    assert finetuning.run(_tiny_recipe(method=Method(lr=0.0)), 0).lr == 0.0  # 0 is a rate, not unset


def test_a_run_that_does_not_reseed_continues_the_callers_random_streams():
    """reseed=False (a run inside another): the run draws where its caller's generator stands, so
    two such runs after one seeding differ, and one after the same seeding repeats."""

    def build(backbone):  # a model whose start is drawn from the global generator
        model = backbone.classifier(3)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn_like(p))
        return model

    def once(draws_before: int, **changes) -> list[float]:
        recipe = _tiny_recipe(build=build, **changes)  # (its tiny backbone seeds the generator)
        torch.manual_seed(7)
        torch.rand(draws_before)
        return [r["loss"] for r in finetuning.run(recipe, 0).history.train]

    assert once(0, reseed=False) == once(0, reseed=False) != once(5, reseed=False)
    assert once(0) == once(5)  # reseeded (the default): the caller's draws do not matter


def test_compare_takes_a_recipe_per_seed():
    """A recipe may be a function of the seed (each seed's stage from its own model): compare calls
    it once per seed, and the runs are those of the recipes it returned."""
    asked = []

    def of_seed(seed: int) -> finetuning.Recipe:
        asked.append(seed)
        return _tiny_recipe(steps=2 + seed)

    table, runs = finetuning.compare({"fixed": _tiny_recipe(steps=2), "per seed": of_seed}, (0, 1))
    assert asked == [0, 1] and list(table["method"]) == ["fixed", "fixed", "per seed", "per seed"]
    assert [len(r.history.train) for r in runs["per seed"]] == [2, 3]
    assert [len(r.history.train) for r in runs["fixed"]] == [2, 2]


def test_a_recipes_method_may_be_made_for_the_model_just_built():
    """``method(model)``: the Method of the built model (its groups name the model's parts), made
    after ``build`` — the run is the one the same Method given directly makes."""
    seen = []

    def head_only(model):
        seen.append(model)
        return Method(prepare=lambda m: freeze(m, r"^encoder\."), lr=3e-3)

    made = finetuning.run(_tiny_recipe(method=head_only), 0, keep_model=True)
    given = finetuning.run(_tiny_recipe(method=Method(prepare=lambda m: freeze(m, r"^encoder\."),
                                                      lr=3e-3)), 0, keep_model=True)
    assert len(seen) == 1 and seen[0] is made.model and made.lr == 3e-3
    assert made.trainable_params == given.trainable_params < made.total_params
    assert all(tensors_equal(v, given.model.state_dict()[k])
               for k, v in made.model.state_dict().items())


def test_a_finished_run_frees_its_optimizer_without_the_cycle_collector():
    import gc

    import torch

    gc.collect()
    gc.disable()
    try:
        done = finetuning.run(_tiny_recipe(validate=lambda _: (lambda m: {"score": 0.5}),
                                           evaluate_every=2, select="best"), 0, keep_model=True)
        held = [o for o in gc.get_objects() if isinstance(o, torch.optim.Optimizer) and o.state]
    finally:
        gc.enable()
    assert done.model is not None and held == []  # no optimizer state outlives its run
    assert all(p.grad is None for p in done.model.parameters())
