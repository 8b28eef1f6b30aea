"""Fine-tuning a backbone on a text-classification task (notebook 02 and every method notebook).

A *backbone* is one of

* ``"pretrained"`` — our Transformer initialised from the causal LM of notebook 01;
* ``"pretrained-mlm"`` — the same architecture initialised from the masked LM of notebook 01;
* ``"scratch"`` — the same architecture, same tokenizer, random initialisation: the baseline that
  shows what transfer buys;
* ``"minilm"`` (or any Hub id) — a Hugging Face encoder pretrained at a far larger scale.

:func:`finetune` trains one backbone with one seed under the scale's budget and returns its
history and test metrics. Model selection never looks at the test split: we report the model at
the end of the fixed budget and show validation curves alongside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from ignite.engine import Engine, Events
from torch import nn
from torch.utils.data import DataLoader

from . import data
from .config import Scale
from .hf_models import HFClassifier, load_hf_encoder
from .models import TransformerClassifier, TransformerLM, count_parameters
from .pretraining import ADAM_BETAS, ADAM_EPS, get_tokenizer, load_or_pretrain, make_optimizer, model_config
from .runtime import autocast_dtype, device, seed_everything
from .tokenization import encode_with_cls
from .training import (
    History,
    attach_progress,
    attach_schedule,
    checkpoint_and_resume,
    create_classifier_evaluator,
    create_trainer,
    pad_collate,
    resumable_loader,
    run_to_completion,
)

OUR_BACKBONES = ("scratch", "pretrained", "pretrained-mlm")

# text and label columns of the classification tasks used by the notebooks
TASK_COLUMNS: dict[str, tuple[str, str]] = {
    "trec": ("text", "coarse_label"),
    "trec-fine": ("text", "fine_label"),
    "sst2": ("sentence", "label"),
    "cola": ("sentence", "label"),
    "mr": ("text", "label"),
    "cr": ("text", "label"),
    "mpqa": ("text", "label"),
    "subj": ("text", "label"),
    "sst5": ("text", "label"),
}


@dataclass
class Task:
    """A single-sentence classification task: raw splits plus column names and label names."""

    name: str
    train: object  # datasets.Dataset
    validation: object
    test: object
    text_column: str
    label_column: str
    label_names: list[str]

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


def load_task(name: str, scale: Scale, seed: int = 0) -> Task:
    """Load a classification task, carving 10% of train as validation, subsampled by the scale."""
    if name not in TASK_COLUMNS:
        raise ValueError(f"unknown task {name!r}: choose one of {sorted(TASK_COLUMNS)}")
    text_col, label_col = TASK_COLUMNS[name]
    ds = data.load(name.removesuffix("-fine"), validation_fraction=0.1, seed=seed)
    train, validation, test = ds["train"], ds["validation"], ds["test"]
    if min(test[label_col]) < 0:
        # GLUE's test labels are hidden (-1): its labelled dev set becomes our test set and a
        # seeded 10% of train our validation set, so nothing is ever selected on the test data.
        carved = train.train_test_split(test_size=0.1, seed=seed, stratify_by_column=label_col)
        train, validation, test = carved["train"], carved["test"], ds["validation"]
    limit = scale.finetune.max_train_examples
    if limit and len(train) > limit:
        train = train.shuffle(seed=seed).select(range(limit))
    cap = scale.finetune.max_eval_examples  # smoke scale only; classroom+ use the full splits
    if cap:
        validation, test = (s.select(range(min(cap, len(s)))) for s in (validation, test))
    return Task(name, train, validation, test, text_col, label_col,
                list(ds["train"].features[label_col].names))


@dataclass
class Backbone:
    """A classifier plus the function that turns texts into its token ids."""

    name: str
    model: nn.Module
    encode: Callable[[Sequence[str]], list[list[int]]]
    pad_id: int
    is_ours: bool


def make_backbone(name: str, scale: Scale, num_labels: int) -> Backbone:
    """Build a fresh classifier for ``name`` (see the module docstring for the names)."""
    max_len = scale.model.max_len
    if name in OUR_BACKBONES:
        tokenizer = get_tokenizer(scale)
        if name == "scratch":
            model = TransformerClassifier(model_config(scale, tokenizer, "causal"), num_labels)
        else:
            objective = "mlm" if name == "pretrained-mlm" else "causal"
            lm: TransformerLM = load_or_pretrain(scale, objective).model
            model = TransformerClassifier.from_lm(lm, num_labels)
        return Backbone(name, model, lambda texts: encode_with_cls(tokenizer, texts, max_len),
                        tokenizer.pad_token_id, True)
    encoder, tokenizer = load_hf_encoder(name)
    # The word-embedding matrix is half of MiniLM's parameters; it barely moves in fine-tuning but
    # its AdamW update dominates a CPU step, so (as is common) we keep it frozen.
    encoder.get_input_embeddings().weight.requires_grad_(False)

    def encode(texts: Sequence[str]) -> list[list[int]]:
        return tokenizer(list(texts), truncation=True, max_length=max_len)["input_ids"]

    return Backbone(name, HFClassifier(encoder, num_labels), encode, tokenizer.pad_token_id, False)


def encode_split(split, backbone: Backbone, task: Task) -> list[dict]:
    ids = backbone.encode(split[task.text_column])
    return [{"input_ids": i, "labels": y} for i, y in zip(ids, split[task.label_column])]


@dataclass
class FinetuneResult:
    backbone: str
    seed: int
    test: dict  # accuracy, error, loss, confusion (a tensor)
    history: History = field(default_factory=History)
    seconds: float = 0.0
    trainable_params: int = 0
    total_params: int = 0

    def row(self) -> dict:
        return {"backbone": self.backbone, "seed": self.seed,
                "test_error": self.test["error"], "test_accuracy": self.test["accuracy"],
                "seconds": self.seconds, "trainable_params": self.trainable_params}


def finetune(
    backbone_name: str,
    task: Task,
    scale: Scale,
    seed: int = 0,
    *,
    epochs: int | None = None,
    lr: float | None = None,
    prepare: Callable[[nn.Module], None] | None = None,
    param_groups: Callable[[nn.Module], list[dict]] | None = None,
    on_trainer: Callable[[Engine, nn.Module, torch.optim.Optimizer], None] | None = None,
    schedule: Callable[..., object] | None = None,
    evals_per_epoch: int = 2,
    progress: bool = False,
    loss_fn: Callable[[nn.Module, dict], torch.Tensor] | None = None,
    checkpoint_dir: str | Path | None = None,
) -> FinetuneResult:
    """Fine-tune one backbone with one seed; evaluate on validation during training, test at the end.

    Hooks for the method notebooks: ``prepare(model)`` (freeze, add adapters ...),
    ``param_groups(model)`` (e.g. discriminative learning rates; default: decay/no-decay
    groups) and ``on_trainer(trainer, model, optimizer)`` (extra Ignite handlers).
    ``schedule(trainer, optimizer, lr=lr, total=total)`` replaces the default warm-up + linear
    decay (e.g. ``discriminative.stlr_schedule()``); it must honour the groups' ``lr_scale``.
    ``loss_fn(model, batch)`` replaces the training loss (default: the model's cross-entropy;
    e.g. ``regularized.rdrop_loss``); evaluation always uses the model's plain forward.
    ``checkpoint_dir``: checkpoint there at every validation; re-running a killed run with the
    same arguments resumes it and ends with the weights of an uninterrupted run.
    """
    ft = scale.finetune
    seed_everything(seed)
    backbone = make_backbone(backbone_name, scale, task.num_labels)
    is_ours = backbone.is_ours
    epochs = epochs or (ft.epochs if is_ours else ft.hf_epochs)
    lr = lr or (ft.lr if is_ours else ft.hf_lr)
    model = backbone.model
    if prepare:
        prepare(model)
    dev, amp = device(), autocast_dtype()
    model.to(dev)

    collate = pad_collate(backbone.pad_id)
    train_loader = resumable_loader(encode_split(task.train, backbone, task), seed=seed,
                                    batch_size=ft.batch_size, collate_fn=collate)
    val_loader, test_loader = (
        DataLoader(encode_split(s, backbone, task), batch_size=ft.eval_batch_size,
                   collate_fn=collate)
        for s in (task.validation, task.test)
    )
    if param_groups:
        optimizer = torch.optim.AdamW(param_groups(model), lr=lr, weight_decay=ft.weight_decay,
                                      betas=ADAM_BETAS, eps=ADAM_EPS)
    else:
        optimizer = make_optimizer(model, lr, ft.weight_decay)
    trainer = create_trainer(model, optimizer, device=dev, amp_dtype=amp, max_norm=ft.max_norm,
                             **({"loss_fn": loss_fn} if loss_fn else {}))
    total = epochs * len(train_loader)
    if schedule:
        scheduler = schedule(trainer, optimizer, lr=lr, total=total)
    else:
        scheduler = attach_schedule(trainer, optimizer, kind="linear", lr=lr,
                                    warmup=int(ft.warmup_frac * total), total=total)
    if progress:
        attach_progress(trainer, f"{backbone_name} seed {seed}")
    history = History()
    history.attach(trainer, optimizer)
    evaluator = create_classifier_evaluator(model, device=dev, num_labels=task.num_labels,
                                            amp_dtype=amp)
    every = max(1, len(train_loader) // evals_per_epoch)

    @trainer.on(Events.ITERATION_COMPLETED(every=every) | Events.COMPLETED)
    def _validate(engine: Engine) -> None:
        if history.evals and history.evals[-1]["step"] == engine.state.iteration:
            return
        metrics = evaluator.run(val_loader).metrics
        row = history.log_eval(engine.state.iteration, "validation", metrics)
        row["epoch"] = engine.state.iteration / len(train_loader)

    if on_trainer:
        on_trainer(trainer, model, optimizer)
    if checkpoint_dir is not None:  # last: the validation row belongs in the checkpoint
        checkpoint_and_resume(trainer, {"model": model, "optimizer": optimizer, "trainer": trainer,
                                        "scheduler": scheduler, "history": history},
                              checkpoint_dir, every=every)
    start = time.perf_counter()
    run_to_completion(trainer, train_loader, max_epochs=epochs)
    seconds = time.perf_counter() - start
    test = dict(evaluator.run(test_loader).metrics)
    return FinetuneResult(backbone_name, seed, test, history, seconds,
                          count_parameters(model, trainable_only=True), count_parameters(model))


def compare(
    backbones: Sequence[str], task: Task, scale: Scale, **kwargs: object
) -> tuple[pd.DataFrame, dict[str, list[FinetuneResult]]]:
    """Fine-tune each backbone with each of the scale's seeds; one row per run."""
    runs: dict[str, list[FinetuneResult]] = {}
    for name in backbones:
        seeds = scale.finetune.seeds if name in OUR_BACKBONES else scale.finetune.hf_seeds
        runs[name] = [finetune(name, task, scale, seed, **kwargs) for seed in seeds]
    table = pd.DataFrame([r.row() for results in runs.values() for r in results])
    return table, runs


def mean_std(
    table: pd.DataFrame, by: str = "backbone", column: str = "test_error", percent: bool = True
) -> pd.DataFrame:
    """Mean ± std (sample std, n−1) of ``column`` per group, with the number of seeds."""
    g = table.groupby(by, sort=False)[column]
    out = pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1).fillna(0.0), "seeds": g.count()})
    k, unit = (100, " %") if percent else (1, "")
    out[f"{column} (mean ± std)"] = [
        f"{k * m:.2f} ± {k * s:.2f}{unit}" if n > 1 else f"{k * m:.2f}{unit} (1 seed)"
        for m, s, n in zip(out["mean"], out["std"], out["seeds"])
    ]
    return out


# --- comparing methods (notebooks 03-05) ------------------------------------------------------


def compare_methods(
    methods: Mapping[str, Mapping[str, object]],
    task: Task,
    scale: Scale,
    *,
    backbone: str = "pretrained",
    seeds: Sequence[int] | None = None,
    measure_memory: bool = False,
    **common: object,
) -> tuple[pd.DataFrame, dict[str, list[FinetuneResult]]]:
    """Fine-tune ``backbone`` once per method and seed; one row per run, with its costs.

    ``methods`` maps a name to the keyword arguments of :func:`finetune` that make the method
    (``prepare``, ``param_groups``, ``on_trainer``, ``schedule``, ``lr`` …); ``common`` (e.g.
    ``epochs``) applies to every method, so the budgets are equal by construction. With
    ``measure_memory`` each run is wrapped in ``freezing.PeakMemory`` (column ``peak_mib``).
    """
    from .freezing import PeakMemory  # local import: keeps this section self-contained

    seeds = tuple(seeds if seeds is not None else scale.finetune.seeds)
    runs: dict[str, list[FinetuneResult]] = {}
    rows = []
    for name, kwargs in methods.items():
        runs[name] = []
        for seed in seeds:
            with PeakMemory() as mem:
                result = finetune(backbone, task, scale, seed, **{**common, **kwargs})
            epochs = result.history.evals[-1]["epoch"] if result.history.evals else 1.0
            row = {**result.row(), "method": name, "total_params": result.total_params,
                   "trained_pct": 100 * result.trainable_params / result.total_params,
                   "seconds_per_epoch": result.seconds / epochs}
            if measure_memory:
                row["peak_mib"] = mem.peak_mib
            rows.append(row)
            runs[name].append(result)
    return pd.DataFrame(rows), runs


def compare_to_baseline(
    table: pd.DataFrame, baseline: str, by: str = "method", column: str = "test_error",
    higher_is_better: bool = False,
) -> pd.DataFrame:
    """Each method against ``baseline``: Δ mean (in points for an error), the pooled std
    sqrt((s_a² + s_b²) / 2) and a verdict — ``"within noise"`` when |Δ| ≤ pooled std, else
    better/worse. Also Welch's t-test p-value (with 3 seeds even "beyond noise" is weak evidence).
    The baseline's own row comes first (Δ = 0, its std, verdict "(baseline)").
    ``higher_is_better``: ``column`` is a score (accuracy, MCC …), not an error.
    """
    from scipy import stats

    groups = {name: g[column].to_numpy() for name, g in table.groupby(by, sort=False)}
    if baseline not in groups:
        raise ValueError(f"baseline {baseline!r} not in the table's {by!r} column: {list(groups)}")
    base = groups[baseline]
    rows = [{by: baseline, "Δ mean (points)": 0.0, "pooled std (points)": 100 * base.std(ddof=1),
             "Welch p": float("nan"), "verdict": "(baseline)"}]
    for name, vals in groups.items():
        if name == baseline:
            continue
        delta = vals.mean() - base.mean()
        pooled = ((vals.std(ddof=1) ** 2 + base.std(ddof=1) ** 2) / 2) ** 0.5
        if abs(delta) <= pooled:
            verdict = "within noise"
        elif higher_is_better:
            verdict = "higher score (beyond noise)" if delta > 0 else "lower score (beyond noise)"
        else:
            verdict = "lower error (beyond noise)" if delta < 0 else "higher error (beyond noise)"
        p = stats.ttest_ind(vals, base, equal_var=False).pvalue if min(len(vals), len(base)) > 1 \
            else float("nan")
        rows.append({by: name, "Δ mean (points)": 100 * delta, "pooled std (points)": 100 * pooled,
                     "Welch p": p, "verdict": verdict})
    return pd.DataFrame(rows).set_index(by)


def verdict_sentences(comparison: pd.DataFrame, baseline: str, metric: str = "test error") -> str:
    """The comparison table as plain sentences, for a notebook to print."""
    lines = []
    for name, r in comparison.iterrows():
        if name == baseline:
            continue
        lines.append(
            f"{name}: {r['Δ mean (points)']:+.2f} points of {metric} vs {baseline} "
            f"(pooled std {r['pooled std (points)']:.2f}) → {r['verdict']}"
        )
    return "\n".join(lines)


def with_train_subset(task: Task, n: int | None, seed: int = 0) -> Task:
    """The task with a fixed random subset of ``n`` training examples (``None``: unchanged)."""
    from dataclasses import replace

    if not n or n >= len(task.train):
        return task
    return replace(task, train=task.train.shuffle(seed=seed).select(range(n)))
