"""Notebook 14's experiments: the parameter-efficiency frontier, the learner's checks and costs
per method, and QLoRA where a GPU and bitsandbytes allow it.

* :func:`as_method` — a :class:`~.peft_methods.PeftMethod` as a
  :class:`~tutorial_lib.training.Method` of the one recipe: ``prepare`` applies it, the optimizer
  trains its parameters at the method's rate and the new head at its own;
* :func:`frontier_runs` — for each method, every rate of its grid with one seed, the rate with
  the lowest dev error kept, then the other seeds at that rate (``finetuning.compare_methods``:
  the budgets are equal by construction, and every row carries the majority-class floor);
* :func:`rate_positions` — where each method's chosen rate sits in its grid: at an edge, the
  optimum may lie beyond it;
* :func:`dev_curves` — every run's dev error at each validation (its history), for the curves;
* :func:`start_errors` — each method's test error *before* training (the same initialisation as
  its run), the starting point ``stats.compare(..., starts=)`` tests each method against;
* :func:`check_and_cost` — one method on a fresh model: the count against its formula, a few
  optimizer steps timed (:func:`~.peft_checks.step_costs`), the frozen weights compared bit for
  bit, save → reload into a fresh base → merge, and the size on disk;
* :func:`qlora_status` / :func:`qlora_run` — a 4-bit base model with LoRA (Dettmers et al. 2023).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd
import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from torch import nn
from transformers import AutoModel, AutoTokenizer, BitsAndBytesConfig

from ... import data, finetuning
from ...backbones import Backbone, load_backbone
from ...config import PRECISION_ENV_VAR, Scale
from ...evaluation import evaluate
from ...finetuning import Recipe, Run, Scored, compare_methods, loaders
from ...models import SequenceClassifier, count_parameters
from ...runtime import choose_precision, reset_cuda_peak, seed_everything
from ...settings import Budget
from ...tasks import Task
from ...training import Batch, Method, eval_loader, pad_collate
from .peft_checks import checkpoint_bytes, roundtrip, snapshot, step_costs, weights_check
from .peft_methods import PeftMethod, param_groups

Grid = Mapping[str, tuple[PeftMethod, Sequence[float]]]  # name -> (method, its rates)


def as_method(method: PeftMethod, lr: float, head_lr: float | None = None) -> Method:
    """``method`` as a Method of the one recipe at rate ``lr``; the head at ``head_lr`` (None:
    ``lr``), through the groups' ``lr_scale`` so that the schedule scales both alike."""
    head_scale = 1.0 if head_lr is None else head_lr / lr

    def groups(model: nn.Module, _lr: float, weight_decay: float) -> list[dict]:
        return param_groups(model, weight_decay, head_scale)

    return Method(prepare=method.apply, param_groups=groups, lr=lr)


def _dev_error(result: Run) -> float:
    """The run's last validation error (its dev score at the end of the budget)."""
    rows = [r for r in result.history.evals if r.get("split") == "validation"]
    return float(rows[-1]["error"]) if rows else float("nan")


def frontier_runs(grid: Grid, task: Task, budget: Budget, *, scale: Scale, backbone: str,
                  seeds: Sequence[int], head_lr: float | None = None,
                  select_seed: int | None = None, evals_per_epoch: int = 1
                  ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, list[Run]]]:
    """Every method of ``grid`` at every rate of its grid with ``select_seed`` (default: the
    first seed); the rate with the lowest final dev error is kept (ties: the first of the grid),
    and the other seeds run at it. The test split is read only for the table's report. Every run
    is validated ``evals_per_epoch`` times a pass (its history: :func:`dev_curves`).

    Returns ``(runs, grid_table, results)``: one row per method and seed at its chosen rate
    (``compare_methods``' columns plus ``lr`` and ``dev_error``; the selection seed's row is its
    grid run, not a second one), every grid run's dev and test error, and the runs by method.
    """
    first = seeds[0] if select_seed is None else select_seed
    rows, grid_rows, out = [], [], {}
    for name, (method, lrs) in grid.items():
        trial = {f"{name} @ {lr:g}": {"method": as_method(method, lr, head_lr), "seeds": [first]}
                 for lr in lrs}
        table, runs = compare_methods(trial, task, budget, scale=scale, backbone=backbone,
                                      seeds=[first], evals_per_epoch=evals_per_epoch)
        dev = [_dev_error(runs[key][0]) for key in trial]
        for lr, key, d in zip(lrs, trial, dev):
            grid_rows.append({"method": name, "lr": lr, "dev_error": d,
                              "test_error": runs[key][0].test["error"], "seed": first})
        best = min(range(len(lrs)), key=lambda i: (dev[i], i))
        chosen = table.iloc[[best]].assign(method=name, lr=lrs[best], dev_error=dev[best])
        rest = [s for s in seeds if s != first]
        results = [runs[list(trial)[best]][0]]
        if rest:
            more, more_runs = compare_methods(
                {name: {"method": as_method(method, lrs[best], head_lr), "seeds": rest}}, task,
                budget, scale=scale, backbone=backbone, seeds=rest, evals_per_epoch=evals_per_epoch)
            more = more.assign(lr=lrs[best], dev_error=[_dev_error(r) for r in more_runs[name]])
            chosen = pd.concat([chosen, more], ignore_index=True)
            results += more_runs[name]
        rows.append(chosen)
        out[name] = results
    runs_table = pd.concat(rows, ignore_index=True)
    return runs_table, pd.DataFrame(grid_rows), out


EDGE_NOTE = "at edge: the optimum may lie beyond"


def rate_positions(trials: pd.DataFrame, chosen: Mapping[str, float]) -> pd.DataFrame:
    """Where each method's ``chosen`` rate sits in the grid it was chosen from (``trials``:
    :func:`frontier_runs`' grid table, one row per method and rate): ``"inside"`` the grid, or at
    its ``"lowest"`` or ``"highest"`` rate — **at an edge**, where the dev error may still fall
    beyond the grid, so the method's point on the frontier may be worse than the method — or
    ``"only rate"`` (a grid of one: nothing was chosen). One row per method, in ``trials``' order,
    with ``rates tried`` (ascending), ``chosen``, ``position``, ``at edge`` and ``note``."""
    rows = []
    for name, g in trials.groupby("method", sort=False):
        lrs = sorted(set(g["lr"].astype(float)))
        lr = float(chosen[name])
        if lr not in lrs:
            raise ValueError(f"{name}: the chosen rate {lr:g} is not in its grid {lrs}")
        position = ("only rate" if len(lrs) == 1 else "lowest" if lr == lrs[0]
                    else "highest" if lr == lrs[-1] else "inside")
        edge = position != "inside"
        note = (EDGE_NOTE + (" (one rate tried)" if position == "only rate" else f" ({position})")
                if edge else "")
        rows.append({"method": name, "rates tried": tuple(lrs), "chosen": lr, "position": position,
                     "at edge": edge, "note": note})
    return pd.DataFrame(rows).set_index("method")


def dev_curves(results: Mapping[str, Sequence[Run]]) -> pd.DataFrame:
    """Every run's dev error at each of its validations (from its history), one row per method,
    seed and step: ``method``, ``seed``, ``step``, ``dev_error``."""
    return pd.DataFrame([{"method": name, "seed": run.seed, "step": r["step"],
                          "dev_error": float(r["error"])}
                         for name, runs in results.items() for run in runs
                         for r in run.history.evals if r.get("split") == "validation"],
                        columns=["method", "seed", "step", "dev_error"])


def start_errors(methods: Mapping[str, PeftMethod], task: Task, budget: Budget, *, scale: Scale,
                 backbone: str, seeds: Sequence[int]) -> dict[str, dict[int, float]]:
    """``{method: {seed: test error before any step}}``: the model each run starts from (built
    as ``finetuning.finetune`` builds it, with the seed's head and the method's initialisation),
    scored on the test split. ``stats.compare(..., starts=)`` reads them as ``Floor``s."""
    out: dict[str, dict[int, float]] = {}
    for name, method in methods.items():
        out[name] = {}
        for seed in seeds:
            seed_everything(seed)
            bb = load_backbone(backbone, scale, seed=seed)
            model = bb.classifier(task.num_labels)
            method.apply(model)
            test = loaders(bb, task, budget.batch_size, budget.eval_batch_size, seed,
                           budget.max_len, budget.group_by_length)[2]
            out[name][seed] = float(evaluate(model, test, num_labels=task.num_labels)["error"])
    return out


def check_batch(backbone: Backbone, split: object, n: int) -> Batch:
    """``n`` rows of ``split`` (a dataset with ``text`` and ``label``) as one padded batch."""
    rows = backbone.encode_rows(split.select(range(min(n, len(split)))))
    return pad_collate(backbone.pad_id)(rows)


Fresh = Callable[[], nn.Module]
"""Makes a new classifier on the same pretrained weights (a new random head) at every call, e.g.
``lambda: load_backbone(name, scale).classifier(k)``. Not ``backbone.classifier`` twice on one
Backbone: its classifiers share the backbone's encoder, which a method changes in place."""


def check_and_cost(method: PeftMethod, fresh: Fresh, batch: Batch, *, lr: float, steps: int = 3,
                   directory: str | Path | None = None) -> dict:
    """One method on a classifier from ``fresh()``: trained parameters against the formula,
    ``steps`` timed optimizer steps (after one warm-up) at ``lr``, the frozen weights
    bit-identical afterwards, save → reload into another ``fresh()`` base → merge (largest
    |Δ logit| and its tolerance), and the adapter's size on disk. One row for the notebook."""
    model = fresh()
    expected = method.expected_trainable(model)
    method.apply(model)
    actual, total = count_parameters(model, trainable_only=True), count_parameters(model)
    before = snapshot(model)
    costs = step_costs(model, batch, lr=lr, steps=steps)
    model.cpu()
    weights = weights_check(before, model)
    tmp = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="peft-"))
    try:
        trip = roundtrip(model, method, fresh(), batch, tmp / "adapter")
        size = checkpoint_bytes(tmp / "adapter")
    finally:
        if directory is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"method": method.label, "trained (formula)": expected, "trained (counted)": actual,
            "count ok": expected == actual, "% trained": 100 * actual / total,
            "frozen tensors": weights.frozen, "frozen changed": len(weights.frozen_changed),
            "reload |Δ logit|": trip.reload_diff, "reload tolerance": trip.reload_atol,
            "merge |Δ logit|": trip.merge_diff, "merge tolerance": trip.merge_atol if
            method.mergeable else None, "round trip ok": trip.ok,
            "checkpoint (KiB)": size / 1024, "s / step": costs.seconds_per_step,
            "peak memory (MiB)": costs.peak_mib, "memory measured": costs.memory_what}


def trained_counts(methods: Mapping[str, PeftMethod], fresh: Fresh) -> pd.DataFrame:
    """Trained parameters of each method on a classifier from ``fresh()`` (formula and counted,
    no training): the frontier's x axis, also for a model too large to train here."""
    rows = []
    for name, method in methods.items():
        model = fresh()
        expected = method.expected_trainable(model)
        method.apply(model)
        actual, total = count_parameters(model, trainable_only=True), count_parameters(model)
        rows.append({"method": name, "trained (formula)": expected, "trained (counted)": actual,
                     "count ok": expected == actual, "% trained": 100 * actual / total})
        del model
    return pd.DataFrame(rows).set_index("method")


# --- QLoRA (Dettmers et al. 2023): a 4-bit base model, LoRA on top --------------------------------


def qlora_status() -> str | None:
    """None when QLoRA can run here (a CUDA GPU and the bitsandbytes package), else why not."""
    if not torch.cuda.is_available():
        return "no CUDA GPU: bitsandbytes' 4-bit layers need one (QLoRA runs at the gpu scale)"
    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed: pip install bitsandbytes (on a CUDA machine)"
    return None


def qlora_dtype(capability: tuple[int, int] | None = None) -> torch.dtype | None:
    """The compute and autocast dtype of QLoRA on the GPU: bf16 from compute capability 8.0, fp16
    below (a T4, 7.5: no bf16 tensor cores), as :func:`~tutorial_lib.runtime.choose_precision`
    picks for every other run; None (fp32, no autocast) when ``TUTORIAL_PRECISION=fp32`` asks."""
    capability = capability or torch.cuda.get_device_capability()
    return choose_precision("cuda", capability=capability,
                            override=os.environ.get(PRECISION_ENV_VAR, "auto"))


def qlora_classifier(name: str, num_labels: int, r: int = 8, alpha: float = 16.0) -> nn.Module:
    """A classifier on Hub model ``name`` loaded in 4-bit NF4 (:func:`qlora_dtype` compute),
    prepared for k-bit training, with peft's LoRA on every linear layer of the attention and the
    MLP."""
    why = qlora_status()
    if why:
        raise RuntimeError(f"QLoRA cannot run here: {why}")
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_compute_dtype=qlora_dtype() or torch.float32,
                               bnb_4bit_use_double_quant=True)
    base = AutoModel.from_pretrained(name, quantization_config=quant, device_map={"": 0})
    base = prepare_model_for_kbit_training(base)
    config = LoraConfig(task_type="FEATURE_EXTRACTION", r=r, lora_alpha=alpha,
                        target_modules="all-linear")
    encoder = get_peft_model(base, config)
    model = SequenceClassifier(encoder, num_labels, "last", dropout=0.1)
    model.head.to(device="cuda", dtype=torch.float32)
    return model


def qlora_run(name: str, task: Task, budget: Budget, *, steps: int, seed: int = 0,
              lr: float = 2e-4) -> dict:
    """QLoRA on ``task``: ``steps`` steps of the one runner (:func:`qlora_dtype` autocast: fp16
    with the gradient scaler on a T4, bf16 from an A100 on) on the 4-bit model at rate ``lr``
    (warm-up: a tenth of the steps), then the test error, the trained parameters and the peak GPU
    memory of the training and the test (CUDA tensors)."""
    tokenizer = AutoTokenizer.from_pretrained(name)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def rows(split: object) -> list[dict]:  # a causal LM: the end-of-text token is pooled
        ids = tokenizer(data.column(split, "text"), add_special_tokens=False)["input_ids"]
        return [{"input_ids": i[: 126] + [tokenizer.eos_token_id], "labels": y}
                for i, y in zip(ids, data.column(split, "label"))]

    def score(model: nn.Module, _: None) -> Scored:
        test = eval_loader(rows(task.test), budget.eval_batch_size, pad_collate(pad))
        metrics = evaluate(model, test, num_labels=task.num_labels, amp_dtype=qlora_dtype())
        return Scored(metrics, {"test_error": float(metrics["error"])})

    # the peak counts from the first step (the notebook's own is kept: process_peak_memory)
    method = Method(param_groups=lambda m, _lr, wd: param_groups(m, wd),
                    on_trainer=lambda *_: reset_cuda_peak())
    run = finetuning.run(Recipe(
        build=lambda _: qlora_classifier(name, task.num_labels), rows=lambda _: rows(task.train),
        collate=lambda _: pad_collate(pad), method=method, steps=steps, score=score, name=name,
        budget=budget.replace(lr=lr, warmup_frac=0.1, group_by_length=False)), seed)
    return {"model": name, "bits": 4, "steps": steps, "test_error": run.columns["test_error"],
            "trained params": run.trainable_params,
            "peak GPU memory (MiB)": torch.cuda.max_memory_allocated() / 2**20,
            "seconds": run.seconds}
