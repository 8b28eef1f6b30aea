"""The few-shot loop of notebook 09: train, choose on the few-shot dev set, test once.

Every method — [CLS]-head fine-tuning, manual-prompt fine-tuning (:mod:`.prompting`), DART
(:mod:`.dart`) — is a function from a :class:`~tutorial_lib.tasks.FewShotSplit` to a ``build``
that makes a fresh :class:`Built` (model, encoder of rows, collate, optimizer groups).
:func:`train_fewshot` trains a fixed number of steps and keeps the checkpoint with the best
few-shot **dev** accuracy; :func:`select_and_test` is LM-BFF's per-split learning-rate grid
(chosen on dev only); :func:`compare_fewshot` runs every method on every split.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from ignite.engine import Engine, Events
from ignite.handlers import Checkpoint
from ignite.handlers.checkpoint import BaseSaveHandler
from torch import nn
from torch.utils.data import DataLoader

from .. import stats
from ..backbones import layer_groups, load_backbone
from ..config import Scale
from ..params import decay_groups, freeze, make_optimizer, unfreeze
from ..runtime import autocast_dtype, device, seed_everything
from ..tasks import FewShotSplit
from ..training import attach_schedule, create_classifier_evaluator, create_trainer, eval_loader, pad_collate
from .prompting import PromptClassifier, PromptLM, freeze_below, prompt_collate, verbalizer_ids


@dataclass
class Built:
    """What a method needs to be trained: the model, its encoded splits and its optimiser groups."""

    model: nn.Module
    encode: Callable[[Sequence[Mapping]], list[dict]]
    collate: Callable
    param_groups: Callable[[float, float], list[dict]] | None = None  # (lr, wd) → groups


@dataclass
class FewShotRun:
    test: dict
    dev_accuracy: float
    best_step: int
    lr: float
    seconds: float
    history: list[dict] = field(default_factory=list)
    built: Built | None = None

    @property
    def model(self) -> nn.Module | None:
        return self.built.model if self.built else None


class InMemorySaver(BaseSaveHandler):
    """An Ignite save handler that keeps checkpoints in memory: a few-shot run's best model lives
    only as long as the run, so ``Checkpoint(score_function=...)`` needs no file."""

    def __init__(self) -> None:
        self.saved: dict[str, tuple[dict, float]] = {}

    def __call__(self, checkpoint: Mapping, filename: str, metadata: Mapping | None = None) -> None:
        # a state_dict holds the live tensors: copy them, or the "best" would follow training
        self.saved[filename] = copy.deepcopy(dict(checkpoint)), (metadata or {}).get("priority")

    def remove(self, filename: str) -> None:
        self.saved.pop(filename, None)

    @property
    def best(self) -> tuple[dict, float]:
        """The one checkpoint an ``n_saved=1`` handler keeps, and its score."""
        (checkpoint, score), = self.saved.values()
        return checkpoint, score


def dev_score(metrics: Mapping[str, float]) -> float:
    """Dev accuracy first, lower loss breaking ties: accuracies differ by at least 1/|dev| and
    loss/10⁴ stays below that for any dev set under 1,000 examples and loss under 10."""
    return metrics["accuracy"] - metrics["loss"] / 1e4


def train_fewshot(
    build: Callable[[], Built],
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
) -> FewShotRun:
    """Train ``steps`` AdamW steps on ``split.train``; every ``eval_every`` steps score the few-shot
    dev set and keep the best checkpoint (accuracy, then lower loss); test that checkpoint once."""
    split.require("train", "dev", *(("test",) if evaluate_test else ()))
    seed_everything(seed)
    built = build()
    model, dev, amp = built.model, device(), autocast_dtype()
    model.to(dev)
    groups = (built.param_groups(lr, weight_decay) if built.param_groups
              else decay_groups(model, weight_decay))
    optimizer = make_optimizer(model, lr, weight_decay, groups)
    gen = torch.Generator().manual_seed(seed)
    train_rows = built.encode(split.train)
    loader = DataLoader(train_rows, batch_size=min(batch_size, len(train_rows)), shuffle=True,
                        collate_fn=built.collate, generator=gen, drop_last=True)
    dev_loader = eval_loader(built.encode(split.dev), eval_batch_size, built.collate)
    trainer = create_trainer(model, optimizer, device=dev, amp_dtype=amp, max_norm=max_norm)
    attach_schedule(trainer, optimizer, kind="linear", lr=lr, warmup=int(warmup_frac * steps),
                    total=steps)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=split.num_labels,
                                            amp_dtype=amp)
    saver = InMemorySaver()
    best = Checkpoint({"model": model}, saver, n_saved=1,  # strictly better only: first best kept
                      score_function=lambda e: dev_score(e.state.metrics),
                      global_step_transform=lambda *_: trainer.state.iteration)
    history: list[dict] = []

    @trainer.on(Events.ITERATION_COMPLETED(every=eval_every) | Events.COMPLETED)
    def _dev(engine: Engine) -> None:
        step = engine.state.iteration
        if history and history[-1]["step"] == step:
            return
        m = evaluator.run(dev_loader).metrics
        history.append({"step": step, "dev_accuracy": m["accuracy"], "dev_loss": m["loss"],
                        "train_loss": engine.state.output, "score": dev_score(m)})
        best(evaluator)

    @trainer.on(Events.ITERATION_COMPLETED(once=steps))
    def _stop(engine: Engine) -> None:
        _dev(engine)
        engine.terminate()

    start = time.perf_counter()
    trainer.run(loader, max_epochs=math.ceil(steps / len(loader)))
    checkpoint, score = saver.best
    Checkpoint.load_objects({"model": model}, checkpoint)
    chosen = next(h for h in history if h["score"] == score)
    test = {}
    if evaluate_test:
        test_loader = eval_loader(built.encode(split.test), eval_batch_size, built.collate)
        test = dict(evaluator.run(test_loader).metrics)
    return FewShotRun(test, chosen["dev_accuracy"], chosen["step"], lr, time.perf_counter() - start,
                      history, built)


def select_and_test(build: Callable[[], Built], split: FewShotSplit, lrs: Sequence[float],
                    **kwargs) -> FewShotRun:
    """LM-BFF's per-split grid search, on the few-shot **dev** set only: train once per learning
    rate, keep the best dev accuracy, and evaluate *only that* model on test."""
    runs = [train_fewshot(build, split, lr=lr, evaluate_test=False, **kwargs) for lr in lrs]
    winner = max(runs, key=lambda r: r.dev_accuracy)  # first best on ties
    built = winner.built
    evaluator = create_classifier_evaluator(built.model, device=device(),
                                            num_labels=split.num_labels,
                                            amp_dtype=autocast_dtype())
    loader = eval_loader(built.encode(split.test), kwargs.get("eval_batch_size", 128),
                         built.collate)
    winner.test = dict(evaluator.run(loader).metrics)
    winner.seconds = sum(r.seconds for r in runs)
    return winner


# --- the three methods of notebook 09 ------------------------------------------------------------


def cls_method(backbone: str, scale: Scale, trainable_layers: int | None = None
               ) -> Callable[[FewShotSplit], Callable[[], Built]]:
    """[CLS]-head fine-tuning: a new linear head on the backbone's pooled position (a causal LM:
    its last token). ``trainable_layers``: train only the head and the top layers (the budget of
    the prompt methods on a CPU, see ``prompting.freeze_below``)."""

    def for_split(split: FewShotSplit) -> Callable[[], Built]:
        def build() -> Built:
            b = load_backbone(backbone, scale)
            model = b.classifier(split.num_labels)
            if trainable_layers is not None:
                layers = layer_groups(model, merge_final_norm=True)
                freeze(model)
                unfreeze(model, *(m for layer in layers[: trainable_layers + 1]
                                  for m in layer.modules))

            def encode(rows):
                ids = b.encode([r["text"] for r in rows])
                return [{"input_ids": i, "labels": int(r["label"])} for i, r in zip(ids, rows)]

            return Built(model, encode, pad_collate(b.pad_id))

        return build

    return for_split


def prompt_method(
    mlm: PromptLM | Callable[[], PromptLM],
    templates: Mapping[str, str],
    verbalizers: Mapping[str, Mapping[str, str]],
    max_len: int | None = None,
    trainable_layers: int | None = None,
) -> Callable[[FewShotSplit], Callable[[], Built]]:
    """Manual-prompt fine-tuning; each run starts from a fresh copy of ``mlm`` (``trainable_layers``:
    a causal LM trains only its top layers)."""

    def for_split(split: FewShotSplit) -> Callable[[], Built]:
        def build() -> Built:
            lm = fresh(mlm)
            freeze_below(lm, trainable_layers)
            ids = verbalizer_ids(lm, verbalizers[split.task], split.label_names)
            model = PromptClassifier(lm, templates[split.task], ids)
            return Built(model, lambda rows: model.encode(rows, max_len), prompt_collate(lm.pad_id))

        return build

    return for_split


def fresh(mlm: PromptLM | Callable[[], PromptLM]) -> PromptLM:
    """A private copy of a masked LM (or a new one from a factory), so runs never share weights."""
    return copy.deepcopy(mlm) if isinstance(mlm, nn.Module) else mlm()


def compare_fewshot(
    methods: Mapping[str, Callable[[FewShotSplit], Callable[[], Built]]],
    splits: Sequence[FewShotSplit],
    *,
    lrs: Mapping[str, Sequence[float]],
    keep: Callable[[str, FewShotSplit], bool] | None = None,
    progress: Callable[[str], None] | None = None,
    **train_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """Every method on every split (grid over ``lrs[method]`` chosen on dev); one row per run.
    ``keep(method, split)`` marks runs whose trained model is returned in the second value."""
    rows, kept = [], {}
    for split in splits:
        for name, method in methods.items():
            run = select_and_test(method(split), split, lrs[name], **train_kwargs)
            rows.append({"task": split.task, "K": split.k if split.k else "full",
                         "split": split.seed, "method": name,
                         "test_accuracy": run.test["accuracy"], "test_error": run.test["error"],
                         "dev_accuracy": run.dev_accuracy, "best_step": run.best_step,
                         "lr": run.lr, "seconds": run.seconds})
            if keep and keep(name, split):
                kept[(name, split.task, split.k, split.seed)] = run
            if progress:
                progress(f"{split.task} K={split.k} split {split.seed} {name}: "
                         f"test {100 * run.test['accuracy']:.1f}")
    return pd.DataFrame(rows), kept


def zero_shot(mlm: PromptLM, split: FewShotSplit, template: str, verbalizer: Mapping[str, str],
              eval_batch_size: int = 128) -> dict:
    """Test metrics of the untrained prompt classifier (no training, nothing selected)."""
    model = PromptClassifier(mlm, template, verbalizer_ids(mlm, verbalizer, split.label_names))
    dev = device()
    model.to(dev)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=split.num_labels,
                                            amp_dtype=autocast_dtype())
    loader = eval_loader(model.encode(split.test), eval_batch_size, prompt_collate(mlm.pad_id))
    return dict(evaluator.run(loader).metrics)


def summarize(table: pd.DataFrame, by: Sequence[str] = ("task", "method")) -> pd.DataFrame:
    """Mean ± std over splits of test accuracy in %, one row per task and method."""
    return stats.summarize(table, list(by), "test_accuracy", digits=1)


def verdicts(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per task, every method against ``baseline`` on test accuracy over the splits (the rule of
    :mod:`tutorial_lib.stats`: paired by split)."""
    parts = []
    for task, g in table.groupby("task", sort=False):
        c = stats.compare(g, baseline, by="method", column="test_accuracy", higher_is_better=True,
                          pair_on="split")
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
