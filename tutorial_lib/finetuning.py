"""The one runner (every training run in the notebooks) and fine-tuning a classifier with it.

A :class:`Recipe` says what a kind of run does — the backbone, the model to build, the training
rows (or a loader), the budget, the method, how to validate and test, which checkpoint to keep —
and :func:`run` follows it for one seed: seed → backbone → model → loader →
:func:`~tutorial_lib.training.fit` → score → a :class:`Run` (its record and table row).
:func:`compare` runs recipes × seeds, the design of every method notebook, one row per run.
:func:`finetune` is the run of :func:`classifier_recipe` (a backbone + a classification head;
model selection never looks at the test split: the model at the end of the budget, validation
curves alongside); :func:`compare_methods` compares methods of it at one budget, reusing plain
runs from a cache shared across notebooks (:func:`cached_finetune`)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch
import transformers
from ignite.engine import Engine
from torch import nn
from torch.utils.data import DataLoader

from . import data
from .backbones import OURS, Backbone, load_backbone
from .checkpoints import BestCheckpoint
from .config import Scale, cache_dir
from .evaluation import evaluate
from .models import count_parameters
from .pretraining_settings import PretrainingSettings
from .runtime import PeakMemory, atomic_write, autocast_dtype, device, seed_everything
from .settings import Budget
from .stats import floor_column
from .tasks import Task
from .training import (
    PLAIN,
    History,
    Method,
    eval_loader,
    fit,
    pad_collate,
    resumable_loader,
)


class Scored(NamedTuple):
    """What a driver's ``score`` gives :func:`run`: the test metrics, the columns a
    table row shows of them, and the predictions (if the driver keeps them)."""

    test: dict
    columns: dict
    predictions: list = []


@dataclass
class Run:
    """One training run, as every driver reports it — what ran, what it scored, what it cost —
    with its one table row (:meth:`row`). :func:`run` makes every one; a chapter may fill in more:
    a multi-task run (notebooks 06–07) names its setting (``name``) and keeps every scored task's
    dev and test metrics (``scores``) and each task's steps (``steps``); a few-shot run (09) keeps
    how to test its kept checkpoint later (``score_rows``). ``lr`` is the rate it ran at,
    ``best_step`` the checkpoint a best-on-dev recipe kept (None: the last). The history holds every step's
    loss (a multi-task step also its ``task``) and every evaluation during training."""

    backbone: str
    seed: int
    test: dict  # the test metrics (a classifier's: accuracy, error, loss, confusion)
    history: History = field(default_factory=History)
    seconds: float = 0.0
    trainable_params: int = 0
    total_params: int = 0
    model: nn.Module | None = None  # kept only when asked (``keep_model=True``)
    predictions: list = field(default_factory=list, repr=False)
    columns: dict = field(default_factory=dict)  # the test metrics as a row shows them
    name: str = ""  # the method or setting, where the driver names it (multi-task: the setting)
    scores: dict = field(default_factory=dict)  # task → split → metrics (a run scored on several)
    steps: dict = field(default_factory=dict)  # task → its optimizer steps (multi-task: as drawn)
    lr: float | None = None  # the learning rate, where the driver chose it (few-shot: on dev)
    best_step: int | None = None  # the checkpoint kept (few-shot: best on dev); None: the last
    score_rows: Callable[[Sequence[Mapping], int], dict] | None = field(default=None, repr=False)
    # ^ (rows, batch size) → the kept model's metrics on them: a test deferred until chosen

    @property
    def losses(self) -> list[tuple[int, str, float]]:
        """The training loss of every step, as (step, task, loss): the task a multi-task step
        trained ("" in a one-task run)."""
        return [(r["step"], r.get("task", ""), r["loss"]) for r in self.history.train]

    def row(self) -> dict:
        return {"backbone": self.backbone, "seed": self.seed, **self.columns,
                "seconds": self.seconds, "trainable_params": self.trainable_params,
                "total_params": self.total_params,
                "trained_pct": 100 * self.trainable_params / max(1, self.total_params)}


@dataclass(frozen=True)
class Recipe:
    """What a kind of run does, apart from its seed: :func:`run` follows it. Every training run
    in the library is one (fine-tuning, a probe, a multi-task mix, an LM stage, SFT, DPO …).

    * ``backbone`` — a name :func:`~tutorial_lib.backbones.load_backbone` knows (loaded per run,
      at the settings' scale), a :class:`~tutorial_lib.backbones.Backbone` (each run starts from a
      copy), or None (``build`` gets None: the model needs no backbone, e.g. a probe on features);
    * ``build(backbone)`` — the model to train (``method.prepare`` runs on it next);
    * ``rows(backbone)`` — the training rows, batched by a resumable loader (``collate(pad_id)``,
      length-grouped if the budget says so, ``drop_last``), or ``loader(backbone, seed)`` — the
      loader itself (e.g. multi-task batches, cached feature tensors);
    * ``budget`` and ``method`` — what the run may spend and what the method changes (or
      ``method(model)``: the Method of the model just built, e.g. optimizer groups that name its
      parts); the rate is the method's if it sets one, else the budget's (the one precedence);
      ``steps``: exactly so many batches instead of the budget's epochs; ``schedule``: "linear"
      (warm-up, then decay), "cosine" or None (a constant rate);
    * ``validate(backbone)`` — a function of the model whose metrics go into the history (split
      ``validation_split``) ``evals_per_epoch`` times a pass, or every ``evaluate_every`` steps;
      ``select``: "last" (the model at the end of the budget) or "best" (the checkpoint whose
      validation ``"score"`` was highest, first best kept: few-shot runs choose on dev);
    * ``score(model, backbone)`` — the test metrics at the end (:class:`Scored`; None: nothing is
      tested here);
    * ``on_cpu`` — train on the CPU in fp32 whatever the machine (e.g. features cached there);
    * ``reseed`` — False: the run does not seed, it continues the caller's random streams (a run
      inside another, e.g. a head trained alone before or during the stage that built it).
    """

    build: Callable[[Backbone | None], nn.Module]
    backbone: str | Backbone | None = None
    rows: Callable[[Backbone | None], Sequence] | None = None
    loader: Callable[[Backbone | None, int], object] | None = None
    budget: Budget = field(default_factory=Budget)
    method: Method | Callable[[nn.Module], Method] = PLAIN
    steps: int | None = None
    schedule: str | None = "linear"
    collate: Callable[[int], Callable] = pad_collate
    drop_last: bool = False
    validate: Callable[[Backbone | None], Callable[[nn.Module], dict]] | None = None
    validation_split: str = "validation"
    evals_per_epoch: int = 2
    evaluate_every: int | None = None
    select: str = "last"
    score: Callable[[nn.Module, Backbone | None], Scored] | None = None
    on_cpu: bool = False
    reseed: bool = True
    name: str = ""  # the Run's backbone column when ``backbone`` is None or an object

    def replace(self, **changes: object) -> Recipe:
        return dataclasses.replace(self, **changes)


def run(recipe: Recipe, seed: int, *, scale: Scale | None = None, progress: bool = False,
        keep_model: bool = False, checkpoint_dir: str | Path | None = None) -> Run:
    """The one runner above :func:`~tutorial_lib.training.fit`: seed → backbone → model
    (``recipe.build``, then ``method.prepare``) → a resumable loader → ``fit`` the budget (with
    the validation hook, and the best checkpoint if the recipe selects it) → ``score`` → a
    :class:`Run`. ``scale``: where a backbone named in the recipe is loaded from.
    ``checkpoint_dir``: checkpoint at every validation; a killed run, re-run, ends with the
    weights of an uninterrupted one. ``keep_model``: the Run keeps the trained model."""
    r, budget = recipe, recipe.budget
    if r.reseed:
        seed_everything(seed)
    backbone, name = r.backbone, r.name
    if isinstance(backbone, Backbone):
        backbone, name = copy.deepcopy(backbone), name or backbone.name
    elif backbone is not None:
        name = name or backbone
        backbone = load_backbone(backbone, scale, seed=seed)
    model = r.build(backbone)
    method = r.method if isinstance(r.method, Method) else r.method(model)
    if method.prepare:
        method.prepare(model)
    dev = torch.device("cpu") if r.on_cpu else device()
    model.to(dev)
    if r.loader is not None:
        loader = r.loader(backbone, seed)
    else:
        training_rows = r.rows(backbone)
        loader = resumable_loader(training_rows, seed=seed, drop_last=r.drop_last,
                                  batch_size=min(budget.batch_size, len(training_rows)),
                                  collate_fn=r.collate(backbone.pad_id if backbone else 0),
                                  group_by_length=budget.group_by_length)
    history, options, keep, per_pass = History(), {}, None, len(loader)
    if r.validate is not None:
        check = r.validate(backbone)
        if r.select == "best":
            keep = BestCheckpoint(model, history)

        def log(engine: Engine) -> None:
            row = history.log_eval(engine.state.iteration, r.validation_split, check(model))
            row["epoch"] = engine.state.iteration / per_pass
            if keep is not None:
                keep(engine)

        every = r.evaluate_every or max(1, per_pass // r.evals_per_epoch)
        options = {"evaluate": log, "evaluate_every": every}
    total = r.steps if r.steps is not None else budget.epochs * per_pass
    lr = method.lr if method.lr is not None else budget.lr  # the one precedence
    fitted = fit(model, loader, lr=lr,
                 weight_decay=budget.weight_decay, epochs=budget.epochs, steps=r.steps,
                 method=method, warmup=int(budget.warmup_frac * total), max_norm=budget.max_norm,
                 schedule=r.schedule, history=history, checkpoint_dir=checkpoint_dir,
                 progress=f"{name} seed {seed}" if progress else None,
                 device=dev, amp_dtype=None if r.on_cpu else "auto", **options)
    best_step = keep.restore() if keep is not None else None
    # Ignite's filtered-event wrappers hold their engine in a reference cycle, so the trainer and
    # its optimizer live until Python's cycle collector runs: drop the optimizer's moments and
    # the gradients now (09 keeps many runs: 5 GiB at classroom scale otherwise)
    fitted.optimizer.state.clear()
    model.zero_grad(set_to_none=True)
    scored = r.score(model, backbone) if r.score is not None else Scored({}, {})
    return Run(name, seed, scored.test, history, fitted.seconds,
               count_parameters(model, trainable_only=True), count_parameters(model),
               model.cpu() if keep_model else None, list(scored.predictions), scored.columns,
               lr=lr, best_step=best_step)


def loaders(backbone: Backbone, task: Task, batch_size: int, eval_batch_size: int, seed: int,
            max_len: int | None = None, group_by_length: bool = False
            ) -> tuple[DataLoader, DataLoader, DataLoader]:
    """(train, validation, test) loaders of ``task`` encoded for ``backbone``; train shuffled by
    ``seed`` (in an order that a resumed run can continue exactly), all right-padded per batch;
    ``group_by_length``: length-grouped training batches, evaluation shortest first."""
    collate = pad_collate(backbone.pad_id)
    train = resumable_loader(backbone.encode_rows(task.train, max_len), seed=seed,
                             batch_size=batch_size, collate_fn=collate,
                             group_by_length=group_by_length)
    val, test = (eval_loader(backbone.encode_rows(s, max_len), eval_batch_size, collate,
                             by_length=group_by_length) for s in (task.validation, task.test))
    return train, val, test


def classifier_scoring(task: Task, budget: Budget) -> tuple[
        Callable[[Backbone], Callable[[nn.Module], dict]], Callable[[nn.Module, Backbone], Scored]]:
    """A classifier's ``(validate, score)`` for :func:`run`: the validation metrics
    during training, the test metrics (error and accuracy columns) once at the end, each split
    encoded for the run's backbone and batched by the budget."""

    def split(backbone: Backbone, rows: object) -> DataLoader:
        return eval_loader(backbone.encode_rows(rows, budget.max_len), budget.eval_batch_size,
                           pad_collate(backbone.pad_id), by_length=budget.group_by_length)

    def validate(backbone: Backbone) -> Callable[[nn.Module], dict]:
        loader = split(backbone, task.validation)
        return lambda model: evaluate(model, loader, num_labels=task.num_labels)

    def score(model: nn.Module, backbone: Backbone) -> Scored:
        test = evaluate(model, split(backbone, task.test), num_labels=task.num_labels)
        return Scored(test, {"test_error": test["error"], "test_accuracy": test["accuracy"]})

    return validate, score


def classifier_recipe(backbone: str | Backbone, task: Task, budget: Budget, *,
                      method: Method = PLAIN, evals_per_epoch: int = 2) -> Recipe:
    """The recipe of fine-tuning ``backbone`` + a classification head on ``task``: validate
    ``evals_per_epoch`` times a pass, test once at the end (:func:`classifier_scoring`)."""
    if task.is_regression:  # the classifiers' loss and the evaluator's accuracy need classes
        raise ValueError(f"finetune trains classifiers; {task.name} is a regression task "
                         "(use heads.MultiHeadModel with a 1-output head, as notebook 06 does)")
    validate, score = classifier_scoring(task, budget)
    return Recipe(build=lambda bb: bb.classifier(task.num_labels), backbone=backbone,
                  budget=budget, method=method,
                  rows=lambda bb: bb.encode_rows(task.train, budget.max_len),
                  validate=validate, score=score, evals_per_epoch=evals_per_epoch)


def finetune(
    backbone_name: str | Backbone,
    task: Task,
    budget: Budget,
    seed: int = 0,
    *,
    scale: Scale,
    method: Method = PLAIN,
    evals_per_epoch: int = 2,
    progress: bool = False,
    keep_model: bool = False,
    checkpoint_dir: str | Path | None = None,
) -> Run:
    """Fine-tune one backbone + a classification head with one seed (:func:`run` of
    :func:`classifier_recipe`); validate during training, test once at the end.

    ``budget`` (epochs, batch size, lr, warm-up, weight decay, clipping) is the same for a method
    and its baseline; ``method`` (a :class:`~tutorial_lib.training.Method`) is what the method
    changes: ``prepare`` the model, its ``param_groups``, extra handlers, ``schedule``, training
    ``loss_fn`` and ``lr``.
    """
    recipe = classifier_recipe(backbone_name, task, budget, method=method,
                               evals_per_epoch=evals_per_epoch)
    return run(recipe, seed, scale=scale, progress=progress, keep_model=keep_model,
               checkpoint_dir=checkpoint_dir)


# --- a cache of plain fine-tuning runs, shared across notebooks --------------------------------

PACKAGE_DIR = Path(__file__).resolve().parent


@functools.cache
def source_digest(package: Path = PACKAGE_DIR) -> str:
    """sha256 of every ``.py`` file under ``package`` (names and contents), once per process: a
    change anywhere in the library (a head, the runtime, the data parsers) is a new run key."""
    digest = hashlib.sha256()
    for path in sorted(Path(package).rglob("*.py")):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def data_fingerprint(task: Task) -> dict:
    """What identifies the data ``task`` was read from: the sha256 of each local file it reads
    (:func:`tutorial_lib.data.fingerprint`), or from the Hub its id, config and revision plus the
    ``datasets`` fingerprints of the three splits (which follow the downloaded files)."""
    files = data.fingerprint(task.spec.dataset)
    if "hub" not in files:
        return files
    splits = [getattr(ds, "_fingerprint", None) for ds in (task.train, task.validation, task.test)]
    return {**files, "splits": splits}


def run_key(backbone: str, task: Task, budget: Budget, seed: int, scale: Scale,
            lr: float | None = None, *, package: Path = PACKAGE_DIR) -> str:
    """A hash of everything a plain fine-tuning run depends on: backbone (ours: the pretraining
    recipe), task, its split sizes and its data files (:func:`data_fingerprint`), budget, seed,
    learning rate, the whole library's source (:func:`source_digest` of ``package``), the torch
    and transformers versions, and the hardware's precision. Two runs with the same key give the
    same numbers on a CPU."""
    # ours: the pretraining recipe of its objective (mlm_steps enter the MLM's only)
    recipe = PretrainingSettings.at(scale).fingerprint(OURS[backbone]) if backbone in OURS else ""
    blob = {"backbone": backbone, "recipe": recipe,
            "task": [task.name, task.spec.protocol, task.sizes()], "data": data_fingerprint(task),
            "budget": dataclasses.asdict(budget), "seed": seed, "lr": lr,
            "code": source_digest(Path(package)), "torch": torch.__version__,
            "transformers": transformers.__version__, "device": device().type,
            "precision": str(autocast_dtype())}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def _save_run(path: Path, result: Run) -> None:
    test = {k: (v.tolist() if torch.is_tensor(v) else v) for k, v in result.test.items()}
    atomic_write(path, json.dumps({"backbone": result.backbone, "seed": result.seed, "test": test,
                                   "history": result.history.state_dict(),
                                   "seconds": result.seconds,
                                   "params": [result.trainable_params, result.total_params]}))


def _load_run(path: Path) -> Run | None:
    try:
        blob = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    test = {k: (torch.tensor(v) if k == "confusion" else v) for k, v in blob["test"].items()}
    history = History()
    history.load_state_dict(blob["history"])
    return Run(blob["backbone"], blob["seed"], test, history, blob["seconds"], *blob["params"],
               columns={"test_error": test["error"], "test_accuracy": test["accuracy"]})


def cached_finetune(backbone: str, task: Task, budget: Budget, seed: int, *, scale: Scale,
                    lr: float | None = None) -> tuple[Run, bool]:
    """Plain fine-tuning through a cache keyed by :func:`run_key`: notebooks 03–05 share their
    baseline instead of training it three times. Returns (result, whether it came from the cache)."""
    path = cache_dir("runs") / f"{run_key(backbone, task, budget, seed, scale, lr)}.json"
    cached = _load_run(path) if path.exists() else None
    if cached is not None:
        return cached, True
    result = finetune(backbone, task, budget, seed, scale=scale, method=Method(lr=lr))
    _save_run(path, result)
    return result, False


def floor_columns(task: Task) -> dict[str, float]:
    """The trivial floors of a run on ``task``'s test split, as the columns :func:`compare_methods`
    adds to every row (``stats.floor_column``): the majority-class accuracy and its error, from
    ``task.majority_baseline()``. ``stats.compare`` reads them, so every comparison of these runs
    first checks that its baseline beat the majority class (the learned-baseline guard)."""
    accuracy = float(task.majority_baseline()["accuracy"])
    return {floor_column("test_accuracy"): accuracy, floor_column("test_error"): 1.0 - accuracy}


RUN_KEYS = ("backbone", "budget", "seeds")  # what a method's entry may override besides the Method


def method_and_run(spec: Method | Mapping[str, object]) -> tuple[Method, dict]:
    """A :func:`compare_methods` entry as (the :class:`~tutorial_lib.training.Method`, its
    ``backbone``/``budget``/``seeds`` overrides). A mapping holds the Method's fields (``prepare``,
    ``param_groups``, ``on_trainer``, ``schedule``, ``loss_fn``, ``lr``) and the overrides, or
    ``"method": Method(...)`` and the overrides; ``{}`` is plain fine-tuning."""
    if isinstance(spec, Method):
        return spec, {}
    run = {k: spec[k] for k in RUN_KEYS if k in spec}
    fields = {k: v for k, v in spec.items() if k not in RUN_KEYS}
    if "method" in fields:
        method = fields.pop("method")
        if fields:
            raise TypeError(f"give the method's fields in its Method, not beside it: {sorted(fields)}")
        return method, run
    known = {f.name for f in dataclasses.fields(Method)}
    unknown = set(fields) - known
    if unknown:
        raise TypeError(f"unknown method fields {sorted(unknown)}: a method has {sorted(known)} and "
                        f"may override {list(RUN_KEYS)}")
    return Method(**fields), run


def compare(
    recipes: Mapping[str, Recipe | Callable[[int], Recipe]],
    seeds: Sequence[int] | Mapping[str, Sequence[int]],
    *,
    scale: Scale | None = None,
    columns: Callable[[str, Run], Mapping[str, object]] | None = None,
    runner: Callable[..., Run] | None = None,
    **options: object,
) -> tuple[pd.DataFrame, dict[str, list[Run]]]:
    """Every recipe × seed through the one runner (:func:`run`, ``options`` to it): the design
    of every method notebook. One row per run — the run's own (:meth:`Run.row`), its ``method``
    (the recipe's name) and ``columns(name, run)`` — and the runs by name. ``seeds``: one seed
    list for all, or per recipe. A recipe may be a function of the seed (e.g. each seed's stage 2
    from its own stage-1 model). ``runner(recipe, seed, name=…, **options)``: instead of
    :func:`run` (e.g. one that reuses cached plain runs, or measures memory)."""
    rows, runs = [], {}
    for name, of_seed in recipes.items():
        runs[name] = []
        for seed in seeds[name] if isinstance(seeds, Mapping) else seeds:
            recipe = of_seed(seed) if callable(of_seed) else of_seed
            one = (runner(recipe, seed, name=name, scale=scale, **options) if runner
                   else run(recipe, seed, scale=scale, **options))
            rows.append({**one.row(), "method": name, **(columns(name, one) if columns else {})})
            runs[name].append(one)
    return pd.DataFrame(rows), runs


def compare_methods(
    methods: Mapping[str, Method | Mapping[str, object]],
    task: Task,
    budget: Budget,
    *,
    scale: Scale,
    backbone: str,
    seeds: Sequence[int],
    measure_memory: bool = False,
    cache: bool = True,
    **options: object,
) -> tuple[pd.DataFrame, dict[str, list[Run]]]:
    """Fine-tune ``backbone`` once per method and seed; one row per run, with its costs.

    ``methods`` maps a name to a :class:`~tutorial_lib.training.Method` (or a mapping, see
    :func:`method_and_run`, that may also override ``backbone``, ``budget`` and ``seeds``: e.g.
    the tiers of notebook 02); ``budget`` is shared, so the budgets are equal by construction;
    ``options`` are :func:`finetune`'s (``evals_per_epoch``, ``progress``). A method that is plain
    fine-tuning comes from :func:`cached_finetune` when ``cache`` (column ``cached``: True when an
    identical earlier run was reused). With ``measure_memory`` each run is wrapped in
    :class:`~tutorial_lib.runtime.PeakMemory` (column ``peak_mib``; NaN for a cached run).
    Every row also carries the task's majority-class floors (:func:`floor_columns`), which
    ``stats.compare`` uses to void a comparison whose baseline did not beat them.
    """
    unknown = set(options) - {"evals_per_epoch", "progress"}
    if unknown:
        raise TypeError(f"compare_methods takes evals_per_epoch and progress, not {sorted(unknown)}")
    floors, recipes, seeds_of, seen = floor_columns(task), {}, {}, {}
    for name, spec in methods.items():
        method, over = method_and_run(spec)
        recipes[name] = classifier_recipe(over.get("backbone", backbone), task,
                                          over.get("budget", budget), method=method,
                                          evals_per_epoch=options.get("evals_per_epoch", 2))
        seeds_of[name] = over.get("seeds", seeds)

    def runner(recipe: Recipe, seed: int, *, name: str, scale: Scale | None) -> Run:
        seen.update(reused=False)
        with PeakMemory() as seen["mem"]:
            if cache and recipe.method.is_plain and not options:
                result, seen["reused"] = cached_finetune(recipe.backbone, task, recipe.budget,
                                                         seed, scale=scale, lr=recipe.method.lr)
            else:
                result = run(recipe, seed, scale=scale, progress=options.get("progress", False))
        return result

    def columns(name: str, result: Run) -> dict:
        epochs = result.history.evals[-1]["epoch"] if result.history.evals else 1.0
        row = {"seconds_per_epoch": result.seconds / epochs, "cached": seen["reused"], **floors}
        if measure_memory:
            row["peak_mib"] = float("nan") if seen["reused"] else seen["mem"].peak_mib
        return row

    return compare(recipes, seeds_of, scale=scale, columns=columns, runner=runner)
