"""Fine-tuning a backbone on a classification task (notebook 02 and every method notebook).

:func:`finetune` trains one backbone (any name :func:`tutorial_lib.backbones.load_backbone`
knows) with one seed under a fixed budget and returns its history and test metrics. Model
selection never looks at the test split: we report the model at the end of the budget and show
validation curves alongside. :func:`compare_methods` runs several methods × seeds at the same
budget — the design of every method notebook — with hooks that make each method. Every driver
above ``fit`` reports a :class:`Run` (:func:`train_and_score` makes most of them; the multi-task
runs of 06–07 and the few-shot runs of 09 make their own).
"""

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
    fit_with,
    pad_collate,
    resumable_loader,
)


class Scored(NamedTuple):
    """What a driver's ``score`` gives :func:`train_and_score`: the test metrics, the columns a
    table row shows of them, and the predictions (if the driver keeps them)."""

    test: dict
    columns: dict
    predictions: list = []


@dataclass
class Run:
    """One training run, as every driver reports it — what ran, what it scored, what it cost —
    with its one table row (:meth:`row`). :func:`train_and_score` makes it; the drivers that
    cannot be its thin callers make it too: a multi-task run (notebooks 06–07) names its setting
    (``name``) and keeps every scored task's dev and test metrics (``scores``) and each task's
    steps (``steps``); a few-shot run (09) keeps its rate (``lr``), the checkpoint it chose on dev
    (``best_step``) and how to test it later (``score_rows``). The history holds every step's
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


def train_and_score(
    backbone_name: str | Backbone,
    seed: int,
    *,
    scale: Scale | None = None,
    budget: Budget,
    build: Callable[[Backbone], nn.Module],
    rows: Callable[[Backbone], list[dict]],
    score: Callable[[nn.Module, Backbone], Scored] | None = None,
    method: Method = PLAIN,
    steps: int | None = None,
    lr: float | None = None,
    collate: Callable[[int], Callable] = pad_collate,
    validate: Callable[[Backbone], Callable[[nn.Module], dict]] | None = None,
    evals_per_epoch: int = 2,
    evaluate_every: int | None = None,
    progress: bool = False,
    keep_model: bool = False,
    checkpoint_dir: str | Path | None = None,
) -> Run:
    """The one runner above :func:`~tutorial_lib.training.fit`: seed → backbone → model
    (``build``, then ``method.prepare``) → a resumable loader of ``rows(backbone)`` (padded,
    length-grouped if the budget says so) → :func:`~tutorial_lib.training.fit_with` the budget →
    ``score(model, backbone)`` → a :class:`Run` (no ``score``: nothing tested here, e.g. a model
    the caller scores itself). ``steps``: exactly so many batches instead of the budget's epochs;
    ``lr``: the rate instead of the method's or the budget's; ``collate``: ``pad_id`` → the
    loader's batch maker (default right-padding; e.g. one that also stacks a teacher's logits).
    ``scale``: where a backbone named here is loaded from. ``validate(backbone)``: a function of the model
    whose metrics go into the history ``evals_per_epoch`` times a pass (``evaluate_every``:
    every so many steps instead, e.g. for a run of many passes over a few labels). ``checkpoint_dir``:
    checkpoint at every validation; a killed run, re-run, ends with the weights of an
    uninterrupted one. ``backbone_name`` may be a :class:`~tutorial_lib.backbones.Backbone` itself
    (e.g. an encoder after an intermediate stage): each run then starts from a copy of it."""
    seed_everything(seed)
    if isinstance(backbone_name, Backbone):
        backbone, backbone_name = copy.deepcopy(backbone_name), backbone_name.name
    else:
        backbone = load_backbone(backbone_name, scale, seed=seed)
    model = build(backbone)
    if method.prepare:
        method.prepare(model)
    model.to(device())
    loader = resumable_loader(rows(backbone), seed=seed, batch_size=budget.batch_size,
                              collate_fn=collate(backbone.pad_id),
                              group_by_length=budget.group_by_length)
    history, options = History(), {}
    if validate is not None:
        check = validate(backbone)

        def log(engine: Engine) -> None:
            row = history.log_eval(engine.state.iteration, "validation", check(model))
            row["epoch"] = engine.state.iteration / len(loader)

        every = evaluate_every or max(1, len(loader) // evals_per_epoch)
        options = {"evaluate": log, "evaluate_every": every}
    fitted = fit_with(model, loader, budget, method=method, steps=steps, lr=lr, history=history,
                      checkpoint_dir=checkpoint_dir,
                      progress=f"{backbone_name} seed {seed}" if progress else None, **options)
    scored = score(model, backbone) if score is not None else Scored({}, {})
    return Run(backbone_name, seed, scored.test, history, fitted.seconds,
               count_parameters(model, trainable_only=True), count_parameters(model),
               model.cpu() if keep_model else None, list(scored.predictions), scored.columns)


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
    """A classifier's ``(validate, score)`` for :func:`train_and_score`: the validation metrics
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
    """Fine-tune one backbone + a classification head with one seed (:func:`train_and_score`);
    validate during training, test once at the end.

    ``budget`` (epochs, batch size, lr, warm-up, weight decay, clipping) is the same for a method
    and its baseline; ``method`` (a :class:`~tutorial_lib.training.Method`) is what the method
    changes: ``prepare`` the model, its ``param_groups``, extra handlers, ``schedule``, training
    ``loss_fn`` and ``lr``.
    """
    if task.is_regression:  # the classifiers' loss and the evaluator's accuracy need classes
        raise ValueError(f"finetune trains classifiers; {task.name} is a regression task "
                         "(use heads.MultiHeadModel with a 1-output head, as notebook 06 does)")

    validate, score = classifier_scoring(task, budget)
    return train_and_score(
        backbone_name, seed, scale=scale, budget=budget, method=method,
        build=lambda backbone: backbone.classifier(task.num_labels),
        rows=lambda backbone: backbone.encode_rows(task.train, budget.max_len),
        validate=validate, score=score, evals_per_epoch=evals_per_epoch, progress=progress,
        keep_model=keep_model, checkpoint_dir=checkpoint_dir)


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
    runs: dict[str, list[Run]] = {}
    rows = []
    floors = floor_columns(task)
    for name, spec in methods.items():
        method, run = method_and_run(spec)
        bb, b = run.get("backbone", backbone), run.get("budget", budget)
        runs[name] = []
        for seed in run.get("seeds", seeds):
            reused = False
            with PeakMemory() as mem:
                if cache and method.is_plain and not options:
                    result, reused = cached_finetune(bb, task, b, seed, scale=scale, lr=method.lr)
                else:
                    result = finetune(bb, task, b, seed, scale=scale, method=method, **options)
            epochs = result.history.evals[-1]["epoch"] if result.history.evals else 1.0
            row = {**result.row(), "method": name, "seconds_per_epoch": result.seconds / epochs,
                   "cached": reused, **floors}
            if measure_memory:
                row["peak_mib"] = float("nan") if reused else mem.peak_mib
            rows.append(row)
            runs[name].append(result)
    return pd.DataFrame(rows), runs
