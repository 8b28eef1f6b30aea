"""The few-shot loop of notebook 09: train, choose on the few-shot dev set, test once.

Every method — head fine-tuning (a new linear head on the pooled position: [CLS] for a masked
LM, the last token for a causal LM), manual-prompt fine-tuning (:mod:`.prompting`), DART
prompts (:mod:`.dart`) — is a function from a :class:`~tutorial_lib.tasks.FewShotSplit` to a ``build``
that makes a fresh :class:`FewShotModel` (model, encoder of rows, collate, and the
:class:`~tutorial_lib.training.Method` it trains with). :func:`train_fewshot` trains a fixed
number of steps with the one runner (its :func:`recipe` through
:func:`tutorial_lib.finetuning.run`) and keeps the checkpoint with the best few-shot **dev**
accuracy (a :class:`~tutorial_lib.finetuning.Run`: its rate, the kept step, every dev evaluation
in its history, :func:`chosen`); :func:`select_and_test` is
LM-BFF's per-split learning-rate grid (chosen on dev only); :func:`compare_fewshot` runs every
method on every split.
:func:`choose_rates` is the cheaper protocol notebook 09 runs: each method's rate chosen once, on
the dev sets of a few splits, then every split trained at it. :func:`logreg_probe` (from
:mod:`.probe`) is the cheap strong baseline: scikit-learn's logistic regression on the frozen
backbone's pooled features, its C chosen on dev. :func:`verdicts` guards every comparison
(:mod:`tutorial_lib.stats`): the baseline against each split's majority rate
(:func:`majority_floors`), a prompt against its zero-shot start.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from ... import finetuning, stats
from ...anatomy import layer_groups
from ...backbones import Backbone, load_backbone
from ...config import Scale
from ...evaluation import evaluate
from ...finetuning import Recipe, Run
from ...params import decay_groups, freeze, unfreeze
from ...settings import Budget
from ...tasks import FewShotSplit
from ...training import PLAIN, Method, eval_loader, pad_collate
from .probe import (  # noqa: F401 (part of this module's face)
    LOGREG,
    head_start,
    logreg_probe,
    pooled_features,
    probe_init,
)
from .prompt_lms import FrozenStates, TopLayers, on_frozen_states
from .prompting import PromptClassifier, freeze_below, fresh_copy, prompt_collate, verbalizer_ids


@dataclass
class FewShotModel:
    """What a few-shot method builds for one run: the model, how rows become its inputs, and the
    :class:`~tutorial_lib.training.Method` it trains with (e.g. DART's optimizer groups)."""

    model: nn.Module
    encode: Callable[[Sequence[Mapping]], list[dict]]
    collate: Callable
    method: Method = PLAIN
    backbone: str = ""  # the LM's name, for the run's record


def chosen(run: Run) -> dict:
    """The dev evaluation of a few-shot run's kept checkpoint (``run.best_step``): its
    ``dev_accuracy``, ``dev_loss``, ``train_loss`` and :func:`dev_score` (``score``)."""
    return next(h for h in run.history.evals if h["step"] == run.best_step)


def dev_score(metrics: Mapping[str, float]) -> float:
    """Dev accuracy first, lower loss breaking ties: accuracies differ by at least 1/|dev| and
    loss/10⁴ stays below that for any dev set under 1,000 examples and loss under 10."""
    return metrics["accuracy"] - metrics["loss"] / 1e4


def recipe(build: Callable[[], FewShotModel], split: FewShotSplit, budget: Budget, *, steps: int,
           eval_every: int, validate: Callable[[FewShotModel], Callable[[nn.Module], dict]] | None = None,
           select: str = "best") -> tuple[Recipe, dict]:
    """A few-shot method's run as a :class:`~tutorial_lib.finetuning.Recipe`: ``build()`` makes the
    model with the encoder of its rows, its collate and its Method; ``steps`` steps on
    ``split.train`` (whole batches only) under ``budget``; every ``eval_every`` steps
    ``validate(built)``'s metrics (default: the dev set's ``dev_accuracy``, ``dev_loss``, the
    step's ``train_loss`` and :func:`dev_score`: ``score``) go into the history (split "dev");
    ``select``: the checkpoint kept ("best" on dev, or "last"). Returns the recipe and what its
    latest run made (``"built"``: the :class:`FewShotModel`; ``"trainer"``: a weak reference to its
    trainer — a strong one would make a cycle through the dev hook that keeps each finished run's
    optimizer state alive until Python's cycle collector runs: 5 GiB more at 09's classroom scale)."""
    made: dict = {}

    def model(_: None) -> nn.Module:
        made["built"] = build()
        return made["built"].model

    def method(_: nn.Module) -> Method:  # the trainer is kept: a dev row logs the step's loss
        return made["built"].method.with_handlers(
            lambda trainer, *_: made.update(trainer=weakref.ref(trainer)))

    def on_dev(built: FewShotModel) -> Callable[[nn.Module], dict]:
        loader = eval_loader(built.encode(split.dev), budget.eval_batch_size, built.collate)

        def check(trained: nn.Module) -> dict:
            m = evaluate(trained, loader, num_labels=split.num_labels)
            return {"dev_accuracy": m["accuracy"], "dev_loss": m["loss"],
                    "train_loss": made["trainer"]().state.output, "score": dev_score(m)}

        return check

    return Recipe(build=model, rows=lambda _: made["built"].encode(split.train),
                  collate=lambda _: made["built"].collate, drop_last=True, budget=budget,
                  method=method, steps=steps, validate=lambda _: (validate or on_dev)(made["built"]),
                  validation_split="dev", evaluate_every=eval_every, select=select), made


def train_fewshot(
    build: Callable[[], FewShotModel],
    split: FewShotSplit,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    eval_every: int,
    seed: int = 0,
    weight_decay: float = 0.01,
    max_norm: float = 1.0,
    warmup_frac: float = 0.1,
    eval_batch_size: int = 128,
    evaluate_test: bool = True,
) -> Run:
    """Train ``steps`` AdamW steps on ``split.train`` (:func:`recipe` through
    :func:`~tutorial_lib.finetuning.run`); every ``eval_every`` steps score the few-shot dev set
    and keep the best checkpoint (accuracy, then lower loss); test that checkpoint once
    (``evaluate_test``; else later, :func:`test_once`). Returns a
    :class:`~tutorial_lib.finetuning.Run`: its ``history`` holds every dev evaluation (split
    "dev"), ``best_step`` the kept checkpoint's (:func:`chosen`), ``lr`` the rate."""
    split.require("train", "dev", *(("test",) if evaluate_test else ()))
    budget = Budget(batch_size=batch_size, lr=lr, warmup_frac=warmup_frac,
                    weight_decay=weight_decay, max_norm=max_norm, eval_batch_size=eval_batch_size)
    few, made = recipe(build, split, budget, steps=steps, eval_every=eval_every)
    run = finetuning.run(few, seed)
    built = made["built"]  # kept where it trained (a shared frozen LM stays on the device)
    run.backbone, run.model = built.backbone, built.model

    def score_rows(rows: Sequence[Mapping], batch_size: int) -> dict:
        loader = eval_loader(built.encode(rows), batch_size, built.collate)
        return evaluate(built.model, loader, num_labels=split.num_labels)

    run.score_rows = score_rows
    return test_once(run, split, eval_batch_size) if evaluate_test else run


def select_and_test(build: Callable[[], FewShotModel], split: FewShotSplit, lrs: Sequence[float],
                    **kwargs) -> Run:
    """LM-BFF's per-split grid search, on the few-shot **dev** set only: train once per learning
    rate, keep the best dev accuracy (lower dev loss breaking ties: the rule that chose each run's
    checkpoint), and evaluate *only that* model on test."""
    winner, seconds = None, 0.0
    for lr in lrs:  # a run that loses on dev is dropped at once: one trained copy lives at a time
        run = train_fewshot(build, split, lr=lr, evaluate_test=False, **kwargs)
        seconds += run.seconds
        if winner is None or chosen(run)["score"] > chosen(winner)["score"]:  # first best on ties
            winner = run
    test_once(winner, split, kwargs.get("eval_batch_size", 128))
    winner.seconds = seconds
    return winner


def test_once(run: Run, split: FewShotSplit, eval_batch_size: int = 128) -> Run:
    """Score the run's chosen checkpoint on the split's test set (the one time it is tested)."""
    run.test = run.score_rows(split.test, eval_batch_size)
    run.columns = {"test_accuracy": run.test["accuracy"], "test_error": run.test["error"]}
    return run


# --- the three methods of notebook 09 ------------------------------------------------------------


def cls_method(backbone: str | Backbone, scale: Scale, trainable_layers: int | None = None,
               head_lr: float | None = None, pool: str | None = None,
               frozen_states: bool | FrozenStates = False, head_scale: float | None = None,
               head_init: Callable[[FewShotSplit], tuple[torch.Tensor, torch.Tensor]] | None = None
               ) -> Callable[[FewShotSplit], Callable[[], FewShotModel]]:
    """Head fine-tuning: a new linear head on the backbone's pooled position ([CLS] for a masked
    LM, a causal LM's last token). ``trainable_layers``: train only the head and the top layers
    (the budget of the prompt methods on a CPU, see ``prompting.freeze_below``). ``head_lr``: the
    new head's own rate (None: the run's) — a randomly initialised head needs a far larger rate
    than the pretrained layers under it; ``head_scale``: the head at this multiple of the run's
    rate instead (a grid over the run's rate then moves both). ``pool``: where the head reads
    (None: the backbone's default; ``"mean"``: every real token, as the logistic-regression probe
    does). ``head_init``: ``split → (weight, bias)``, the head's start instead of random, e.g.
    :func:`~.probe.probe_init`'s logistic-regression probe (LP-FT: the head then needs no larger
    rate than the layers under it).
    ``frozen_states``: a causal LM computes its frozen layers once per input for all the runs
    (:class:`~.prompt_lms.FrozenStates`; the same numbers, a fraction of the time; one given here
    is shared with whatever else reads the same inputs, e.g. :func:`logreg_probe`). ``backbone``:
    a name (each run loads a whole copy) or a loaded LM (each run copies only what it trains and
    shares the frozen weights with it: see ``prompting.fresh_copy``)."""
    frozen = frozen_cache(frozen_states, trainable_layers)

    def for_split(split: FewShotSplit) -> Callable[[], FewShotModel]:
        def build() -> FewShotModel:
            b = (fresh(backbone, trainable_layers) if isinstance(backbone, Backbone)
                 else load_backbone(backbone, scale))
            model = b.classifier(split.num_labels, pool=pool)
            if head_init is not None:
                weight, bias = head_init(split)
                with torch.no_grad():
                    model.head.weight.copy_(weight)
                    model.head.bias.copy_(bias)
            if trainable_layers is not None:
                layers = layer_groups(model, merge_final_norm=True)
                freeze(model)
                unfreeze(model, *(m for layer in layers[: trainable_layers + 1]
                                  for m in layer.modules))
            if frozen is not None:
                model.encoder = TopLayers(model.encoder, frozen)
            method = (PLAIN if head_lr is None and head_scale is None
                      else Method(param_groups=head_groups(model, head_lr, head_scale)))
            return FewShotModel(model, b.encode_rows, pad_collate(b.pad_id), method, b.name)

        return build

    return for_split


def frozen_cache(frozen_states: bool | FrozenStates, trainable_layers: int | None
                 ) -> FrozenStates | None:
    """The frozen-state cache a method's runs share: the one given, a new one (True, with layers
    frozen), or none."""
    if isinstance(frozen_states, FrozenStates):
        if frozen_states.trainable_layers != trainable_layers:
            raise ValueError(f"the frozen states given are for {frozen_states.trainable_layers} "
                             f"trained layers, this method trains {trainable_layers}")
        return frozen_states
    return FrozenStates(trainable_layers) if frozen_states and trainable_layers else None


def head_groups(model: nn.Module, head_lr: float | None, head_scale: float | None = None):
    """AdamW groups: the pretrained layers at the run's rate, the new ``model.head`` at ``head_lr``
    (or at ``head_scale`` × the run's rate)."""
    if (head_lr is None) == (head_scale is None):
        raise ValueError("give the head a rate (head_lr) or a multiple of the run's (head_scale)")

    def groups(_: nn.Module, lr: float, weight_decay: float) -> list[dict]:
        head = [p for p in model.head.parameters() if p.requires_grad]
        scale = head_scale if head_scale is not None else head_lr / lr
        return (decay_groups(model, weight_decay, exclude=head)
                + decay_groups(model, weight_decay, params=head, lr_scale=scale))

    return groups


def prompt_method(
    lm: Backbone | Callable[[], Backbone],
    templates: Mapping[str, str],
    verbalizers: Mapping[str, Mapping[str, str]],
    max_len: int | None = None,
    trainable_layers: int | None = None,
    train_label_rows: bool = False,
    frozen_states: bool | FrozenStates = False,
) -> Callable[[FewShotSplit], Callable[[], FewShotModel]]:
    """Manual-prompt fine-tuning; each run starts from a fresh copy of ``lm`` (``trainable_layers``:
    a causal LM trains only its top layers; ``train_label_rows``: the label words' output rows
    train too, as they do in LM-BFF's full fine-tuning, where the word embeddings are frozen;
    ``frozen_states``: the frozen layers computed once per input for all runs, as in
    :func:`cls_method`; a given cache may be :func:`zero_shot`'s: the same prompts)."""
    frozen = frozen_cache(frozen_states, trainable_layers)

    def for_split(split: FewShotSplit) -> Callable[[], FewShotModel]:
        def build() -> FewShotModel:
            own = fresh(lm, trainable_layers)
            freeze_below(own, trainable_layers)
            own = on_frozen_states(own, frozen)
            ids = verbalizer_ids(own, verbalizers[split.task], split.label_names)
            model = PromptClassifier(own, templates[split.task], ids,
                                     train_label_rows=train_label_rows)
            return FewShotModel(model, lambda rows: model.encode(rows, max_len),
                                prompt_collate(own.pad_id), backbone=own.name)

        return build

    return for_split


def fresh(lm: Backbone | Callable[[], Backbone], trainable_layers: int | None = None) -> Backbone:
    """A private copy of a prompt's LM (or a new one from a factory), so runs never share the
    weights they train (``trainable_layers``: the frozen ones are shared, see ``fresh_copy``)."""
    return fresh_copy(lm, trainable_layers) if isinstance(lm, Backbone) else lm()


def _grid(name: str, grid: Sequence[float] | str, chosen: Mapping[str, float],
          methods: Sequence[str]) -> tuple[float, ...]:
    """A method's rate grid; a string names an earlier method, whose chosen rate it takes."""
    if not isinstance(grid, str):
        return tuple(grid)
    if grid not in chosen:
        raise ValueError(f"{name!r} takes the rate of {grid!r}, which must come before it among "
                         f"the methods: {list(methods)}")
    return (chosen[grid],)


def choose_rates(
    methods: Mapping[str, Callable[[FewShotSplit], Callable[[], FewShotModel]]],
    splits: Sequence[FewShotSplit],
    *,
    lrs: Mapping[str, Sequence[float] | str],
    **train_kwargs,
) -> tuple[dict[str, float], pd.DataFrame, dict]:
    """Each method's rate, chosen once on the **dev** sets of ``splits`` (a few of the comparison's
    splits): every rate of ``lrs[method]`` trains on each of them, and the rate with the best mean
    :func:`dev_score` wins (dev accuracy, lower dev loss breaking ties; on exact ties the grid's
    first). Nothing is tested. A one-rate grid (or the name of an earlier method, whose rate it
    takes) trains nothing here.

    Returns ``(rates, selection, reuse)``: ``{method: rate}``; one row per run (method, split,
    lr, dev accuracy, dev loss, best step, seconds, chosen); and the runs at the chosen rate
    (``{(method, task, split seed): run}``), for :func:`compare_fewshot` to test instead of
    training them again. Costs ``len(splits) × len(grid)`` runs a method, against ``splits ×
    grid`` for the whole comparison with LM-BFF's per-split grid."""
    rates: dict[str, float] = {}
    rows, reuse = [], {}
    for name, method in methods.items():
        grid = _grid(name, lrs[name], rates, list(methods))
        if len(grid) == 1:
            rates[name] = grid[0]
            continue
        runs, mean = {}, {}
        for lr in grid:
            runs[lr] = [train_fewshot(method(s), s, lr=lr, evaluate_test=False, **train_kwargs)
                        for s in splits]
            mean[lr] = float(np.mean([chosen(r)["score"] for r in runs[lr]]))
            for other in runs:  # only the best rate's runs are tested later: drop the others' models
                if other != max(runs, key=lambda r: mean[r]):  # first best on exact ties
                    for r in runs[other]:
                        r.model = r.score_rows = None
        rates[name] = max(grid, key=lambda lr: mean[lr])  # first best on exact ties
        for lr, rs in runs.items():
            for split, run in zip(splits, rs):
                h = chosen(run)
                rows.append({"method": name, "split": split.seed, "lr": lr,
                             "dev_accuracy": h["dev_accuracy"], "dev_loss": h["dev_loss"],
                             "best_step": run.best_step, "seconds": run.seconds,
                             "chosen": lr == rates[name]})
        reuse |= {(name, s.task, s.seed): r for s, r in zip(splits, runs[rates[name]])}
    return rates, pd.DataFrame(rows), reuse


def compare_fewshot(
    methods: Mapping[str, Callable[[FewShotSplit], Callable[[], FewShotModel]]],
    splits: Sequence[FewShotSplit],
    *,
    lrs: Mapping[str, Sequence[float] | str],
    keep: Callable[[str, FewShotSplit], bool] | None = None,
    progress: Callable[[str], None] | None = None,
    reuse: dict | None = None,
    inspect: Callable[[str, FewShotSplit, Run], Mapping] | None = None,
    **train_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """Every method on every split (grid over ``lrs[method]`` chosen on dev); one row per run.
    ``lrs[method]`` may name an earlier method instead: this one then trains once, at the rate
    that method chose on the same split's dev set (equal rates, e.g. DART's ablations at DART's).
    ``keep(method, split)`` marks runs whose trained model is returned in the second value.
    ``reuse``: runs already trained at the method's one rate (:func:`choose_rates`), tested
    here and not trained again (taken out of the dict). ``inspect(method, split, run)``: more
    columns for the run's row, read from its trained model before it is dropped (e.g. how far
    DART's vectors moved)."""
    rows, kept = [], {}
    for split in splits:
        rates: dict[str, float] = {}
        for name, method in methods.items():
            grid = _grid(name, lrs[name], rates, list(methods))
            run = (reuse or {}).pop((name, split.task, split.seed), None)
            if run is not None and grid == (run.lr,):
                test_once(run, split, train_kwargs.get("eval_batch_size", 128))
            else:
                run = select_and_test(method(split), split, grid, **train_kwargs)
            rates[name] = run.lr
            rows.append({"task": split.task, "K": split.k if split.k else "full",
                         "split": split.seed, "method": name, **run.columns,
                         "dev_accuracy": chosen(run)["dev_accuracy"], "best_step": run.best_step,
                         "lr": run.lr, "seconds": run.seconds,
                         **(inspect(name, split, run) if inspect else {})})
            if keep and keep(name, split):
                kept[(name, split.task, split.k, split.seed)] = run
            if progress:
                progress(f"{split.task} K={split.k} split {split.seed} {name}: "
                         f"test {100 * run.test['accuracy']:.1f}")
    return pd.DataFrame(rows), kept


def zero_shot(lm: Backbone, split: FewShotSplit, template: str, verbalizer: Mapping[str, str],
              eval_batch_size: int = 128, frozen: FrozenStates | None = None) -> dict:
    """Test metrics of the untrained prompt classifier (no training, nothing selected).
    ``frozen``: read the frozen layers' states from (and into) this cache — the one the manual
    prompt's runs share: the same prompts, the same frozen weights, the same numbers."""
    lm = on_frozen_states(lm, frozen)
    model = PromptClassifier(lm, template, verbalizer_ids(lm, verbalizer, split.label_names))
    loader = eval_loader(model.encode(split.test), eval_batch_size, prompt_collate(lm.pad_id))
    return evaluate(model, loader, num_labels=split.num_labels)


# --- results and their verdicts --------------------------------------------------------------------


def majority_floors(splits: Sequence[FewShotSplit]) -> dict[str, stats.Floor]:
    """Per task, the floor a classifier must beat: each split's majority-class rate on its test
    set (the most frequent test label's share; ``{split seed: rate}``, so checks pair by split)."""
    rates: dict[str, dict[int, float]] = {}
    for s in splits:
        labels = np.array([r["label"] for r in s.test])
        rates.setdefault(s.task, {})[s.seed] = float(np.bincount(labels).max() / len(labels))
    return {task: stats.Floor(by_split, "majority class") for task, by_split in rates.items()}


def summarize(table: pd.DataFrame, by: Sequence[str] = ("task", "method")) -> pd.DataFrame:
    """Mean ± std over splits of test accuracy in %, one row per task and method."""
    return stats.summarize(table, list(by), "test_accuracy", digits=1)


def verdicts(table: pd.DataFrame, baseline: str, *,
             floors: Mapping[str, stats.Floor | float] | None = None,
             starts: Mapping[str, Mapping[str, float]] | None = None,
             premises: Mapping[str, Mapping[str, stats.Premise]] | None = None) -> pd.DataFrame:
    """Per task, every method against ``baseline`` on test accuracy over the splits (the rule of
    :mod:`tutorial_lib.stats`: paired by split), with the learned-baseline guard: ``floors[task]``
    — the baseline's floor (:func:`majority_floors`); ``starts[task][method]`` — a method's
    starting point (a prompt's zero-shot accuracy), checked for the methods in the table;
    ``premises[task][method]`` — a method guard computed in the run (DART's vectors moved:
    ``dart.moved_premise``), for the methods in the table other than the baseline."""
    parts = []
    for task, g in table.groupby("task", sort=False):
        present = set(g["method"])
        task_starts = {m: stats.Floor(v, "zero-shot start")
                       for m, v in ((starts or {}).get(task) or {}).items() if m in present}
        task_premises = {m: p for m, p in ((premises or {}).get(task) or {}).items()
                         if m in present and m != baseline}
        c = stats.compare(g, baseline, by="method", column="test_accuracy", higher_is_better=True,
                          pair_on="split", floor=(floors or {}).get(task),
                          starts=task_starts or None, premises=task_premises or None)
        c.insert(0, "task", task)
        parts.append(c.reset_index())
    return pd.concat(parts, ignore_index=True)


def verdict_lines(comparison: pd.DataFrame) -> str:
    """The :func:`verdicts` table as sentences."""
    return "\n".join(f"{task}: " + stats.sentences(g.set_index("method").drop(columns="task"),
                                                    "test accuracy").replace("\n", f"\n{task}: ")
                     for task, g in comparison.groupby("task", sort=False))


def beats(comparison: pd.DataFrame, method: str) -> list[str]:
    """The tasks on which ``method`` is better than the baseline (p < 0.05)."""
    rows = comparison[(comparison["method"] == method) & (comparison["verdict"] == "better")]
    return list(rows["task"])
