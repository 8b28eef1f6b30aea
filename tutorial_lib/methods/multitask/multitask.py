"""Multi-task fine-tuning on Ignite (notebooks 06 and 07).

Three ways of sharing an encoder between tasks, all built on :class:`heads.MultiHeadModel`:

* **auxiliary LM loss** (the 2019 tutorial's hands-on #6, after Radford et al. 2018):
  L = 1.0 · L_clf + 0.5 · L_LM on the *same* batch — :func:`lm_aux_loss`;
* **multi-task fine-tuning** (MT-DNN, Liu et al. 2019): one head per task; every step a
  :class:`TaskSampler` picks a task and the step trains on one batch of it;
* **sequential (intermediate-task) adaptation** (STILTs, Phang et al. 2018): fine-tune on an
  intermediate task, then on the target task with a fresh head.

The sampler draws task i with probability p_i ∝ n_i^(1/T) (Arivazhagan et al. 2019): T = 1 is
proportional to the task sizes, T → ∞ uniform; ``round-robin`` cycles through the tasks.
``fixed={"rte": 0.5}`` pins a task's share (the main task of GradTS's runs) and spreads the rest
over the others with the strategy.

Budgets (``steps_per_task`` of ``settings.MultiTaskRuns``, S per task): single-task S steps;
multi-task over n tasks n·S steps (the compute of the n single-task runs together); a main task
with fixed share p gets S/p steps in all, so it sees S of its own batches in every setting. A
multi-task model therefore takes more optimizer steps than a single-task one: the control
:meth:`Experiment.equal_steps` trains the task alone for as many steps as the multi-task run
(setting ``EQUAL_STEPS``), which separates "more updates" from "sharing".
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from ignite.engine import Engine
from ignite.metrics import EpochMetric
from torch import nn
from torch.utils.data import DataLoader

from ... import stats
from ...anatomy import anatomy
from ...backbones import Backbone, load_backbone
from ...evaluation import logits_step
from ...finetuning import Recipe, Run, Scored, run
from ...heads import HeadConfig, MultiHeadModel, causal_lm_targets, merge_batches, multihead_loss
from ...models import IGNORE_INDEX, last_token
from ...runtime import autocast_dtype, device
from ...tasks import Task, compute_metrics, load_task, predictions_from_logits
from ...training import Method, eval_loader, pad_collate, resumable_loader
from .settings import MultiTaskRuns

STRATEGIES = ("proportional", "temperature", "round-robin")
SINGLE, EQUAL_STEPS = "single-task", "single-task (equal steps)"  # S steps; a multi-task run's steps


# --- (a) an auxiliary LM loss on the fine-tuning batch ------------------------------------------


def lm_aux_loss(lm_weight: float = 0.5, clf_weight: float = 1.0) -> Callable[[nn.Module, dict], torch.Tensor]:
    """``loss_fn`` for ``finetuning.finetune`` on our causal classifier: clf_weight · CE(labels)
    + lm_weight · next-token CE on the same input (the encoder runs once; padding and [CLS] are
    never LM targets). The 2019 slides use 1.0 / 0.5."""

    def loss_fn(model: nn.Module, batch: dict) -> torch.Tensor:
        if anatomy(model).family != "ours" or not model.encoder.config.is_decoder:
            raise ValueError("the auxiliary LM loss needs our causal TransformerClassifier "
                             "(backbone 'ours' or 'scratch')")
        ids, mask = batch["input_ids"], batch["attention_mask"]
        h = model.encoder(ids, mask).last_hidden_state
        clf = F.cross_entropy(model.head(model.dropout(last_token(h, mask))).float(), batch["labels"])
        cls_id = int(last_token(ids[..., None], mask)[0])  # every row ends with our [CLS]: never an LM target
        targets = causal_lm_targets(ids, mask, ignore_ids=(cls_id,))
        keep = targets != IGNORE_INDEX
        lm = F.cross_entropy(model.lm_head(h[keep]).float(), targets[keep])
        return clf_weight * clf + lm_weight * lm

    return loss_fn


# --- the task sampler ---------------------------------------------------------------------------


class TaskSampler:
    """Which task each step trains on (see the module docstring for the strategies)."""

    def __init__(
        self,
        sizes: Mapping[str, int],
        strategy: str = "proportional",
        temperature: float = 1.0,
        fixed: Mapping[str, float] | None = None,
        seed: int = 0,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}: choose one of {STRATEGIES}")
        if not sizes:
            raise ValueError("the sampler needs at least one task")
        fixed = dict(fixed or {})
        unknown = set(fixed) - set(sizes)
        if unknown:
            raise ValueError(f"fixed shares for unknown tasks {sorted(unknown)}; tasks: {list(sizes)}")
        if sum(fixed.values()) > 1 + 1e-9 or any(p <= 0 for p in fixed.values()):
            raise ValueError(f"fixed shares must be positive and sum to ≤ 1, got {fixed}")
        if strategy == "round-robin" and fixed:
            raise ValueError("round-robin cannot honour fixed shares; use 'temperature'")
        self.sizes, self.strategy, self.fixed = dict(sizes), strategy, fixed
        self.temperature = 1.0 if strategy == "proportional" else float(temperature)
        self.seed = seed
        rest = [t for t in sizes if t not in fixed]
        if not rest and abs(sum(fixed.values()) - 1) > 1e-9:
            raise ValueError("fixed shares of all the tasks must sum to 1")
        weights = np.array([sizes[t] ** (1.0 / self.temperature) for t in rest], dtype=float)
        free = 1.0 - sum(fixed.values())
        self.probabilities = {**fixed, **{t: free * w / weights.sum() for t, w in zip(rest, weights)}}

    def schedule(self, steps: int) -> list[str]:
        """The task of each of ``steps`` steps (seeded, so runs are reproducible)."""
        names = list(self.sizes)
        if self.strategy == "round-robin":
            return [names[i % len(names)] for i in range(steps)]
        rng = np.random.default_rng(self.seed)
        p = np.array([self.probabilities[t] for t in names])
        return [names[i] for i in rng.choice(len(names), size=steps, p=p / p.sum())]


class MultiTaskBatches:
    """Yields one merged batch (``"<task>/input_ids"`` …) per scheduled step; each task's loader
    restarts (reshuffled) when it runs out."""

    def __init__(self, loaders: Mapping[str, DataLoader], schedule: Sequence[str]):
        missing = set(schedule) - set(loaders)
        if missing:
            raise ValueError(f"no loader for tasks {sorted(missing)}")
        self.loaders, self.schedule = dict(loaders), list(schedule)

    def __len__(self) -> int:
        return len(self.schedule)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        iters = {name: iter(loader) for name, loader in self.loaders.items()}
        for task in self.schedule:
            try:
                batch = next(iters[task])
            except StopIteration:
                iters[task] = iter(self.loaders[task])
                batch = next(iters[task])
            yield merge_batches({task: batch})


# --- data ----------------------------------------------------------------------------------------


def head_config(task: Task) -> HeadConfig:
    return HeadConfig(task.num_labels, "sequence")


@dataclass
class EncodedTask:
    task: Task
    train: list[dict]
    dev: list[dict]  # the task's validation split: every choice is made here
    test: list[dict]


# --- evaluation ---------------------------------------------------------------------------------


def create_task_evaluator(model: MultiHeadModel, task: str, *, device: torch.device,
                          amp_dtype: torch.dtype | None = None) -> Engine:
    """An Ignite evaluator with the GLUE metrics of ``task`` (``score`` = their mean)."""
    evaluator = Engine(logits_step(model, device=device, amp_dtype=amp_dtype, head=task))

    def compute(y_pred: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        return compute_metrics(task, y_pred.cpu().numpy(), y.cpu().numpy())

    EpochMetric(compute, output_transform=lambda out: (predictions_from_logits(task, out[0]), out[1]),
                check_compute_fn=False).attach(evaluator, "glue")
    return evaluator


# --- one training run ---------------------------------------------------------------------------


def task_rows(run: Run) -> list[dict]:
    """A multi-task :class:`~tutorial_lib.finetuning.Run` as table rows: one per task it scored
    (its setting, the task's dev and test score, the run's steps and the task's, the seconds,
    and the task's other test metrics)."""
    out = []
    for task, splits in run.scores.items():
        row = {"setting": run.name, "task": task, "seed": run.seed,
               "dev_score": splits["dev"]["score"], "test_score": splits["test"]["score"],
               "steps": sum(run.steps.values()), "task_steps": run.steps.get(task, 0),
               "seconds": run.seconds}
        row.update({f"test_{k}": v for k, v in splits["test"].items() if k != "score"})
        out.append(row)
    return out


@dataclass
class Intermediate:
    """An encoder after STILTs' intermediate stage (see :meth:`Experiment.intermediate`)."""

    task: str
    steps: int
    state: dict = field(repr=False)  # the encoder's weights
    scores: dict = field(default_factory=dict)  # the intermediate task's scores after the stage
    seconds: float = 0.0


class Experiment:
    """GLUE tasks encoded once for one backbone; runs single-task, multi-task and sequential
    fine-tuning with a seed each; every run is a :class:`~tutorial_lib.finetuning.Run` (its
    setting in ``name``, each task's dev and test metrics in ``scores``, each task's steps in
    ``steps``; every step's loss and task, and the learning curve, in its ``history``).
    """

    def __init__(self, settings: MultiTaskRuns, tasks: Sequence[str]):
        self.scale, self.settings, self.backbone = settings.scale, settings, settings.backbone
        self.budget = settings.budget
        bb: Backbone = load_backbone(self.backbone, self.scale)
        self.pad_id = bb.pad_id
        self.data: dict[str, EncodedTask] = {}
        for name in tasks:
            t = load_task(name, train_examples=settings.train_examples,
                          validation_examples=settings.dev_examples,
                          test_examples=settings.test_examples)
            self.data[name] = EncodedTask(t, *(bb.encode_rows(s, self.budget.max_len)
                                               for s in (t.train, t.validation, t.test)))

    # -- building blocks --
    def split_table(self) -> pd.DataFrame:
        """Sizes of each task's train / dev / test as used here, with the metric(s)."""
        rows = [{"task": n, **e.task.sizes(), "labels": e.task.num_labels,
                 "metric": " / ".join(e.task.spec.metrics), "protocol": e.task.spec.protocol}
                for n, e in self.data.items()]
        return pd.DataFrame(rows).set_index("task")

    def floors(self) -> dict[str, stats.Floor]:
        """Every task's trivial floor on its test split (:func:`task_floor`)."""
        return {name: task_floor(e.task) for name, e in self.data.items()}

    def new_model(self, backbone: Backbone, heads: Sequence[str]) -> MultiHeadModel:
        """``backbone``'s encoder with one new head per task; a Hugging Face encoder's word
        embeddings stay frozen, as in :meth:`tutorial_lib.backbones.Backbone.classifier`."""
        backbone.freeze_word_embeddings()
        return MultiHeadModel(backbone.encoder, {h: head_config(self.data[h].task) for h in heads},
                              pool=backbone.pool)

    def recipe(self, sampler: TaskSampler, schedule: Sequence[str], *, scored: Sequence[str] = (),
               heads: Sequence[str] | None = None, encoder: Mapping[str, torch.Tensor] | None = None,
               train_rows: Mapping[str, list[dict]] | None = None,
               curve_every: int | None = None) -> Recipe:
        """The :class:`~tutorial_lib.finetuning.Recipe` of a multi-task run: a fresh encoder
        (``encoder``: these weights instead) with a new head per task of ``heads`` (default: the
        sampler's); step i trains on one batch of task ``schedule[i]``, from that task's own
        resumable loader (``train_rows``: instead of its training split); at the end each task of
        ``scored`` is scored on dev and test (the Scored test: task → split → metrics).
        ``curve_every``: every so many steps and at the end, each trained task's dev score goes
        into the history's evaluations (split "dev") — a learning curve from the run itself."""
        b, tasks = self.budget, list(sampler.sizes)

        def build(bb: Backbone) -> MultiHeadModel:
            model = self.new_model(bb, heads or tasks)
            if encoder is not None:
                model.encoder.load_state_dict(encoder)
            return model

        def batches(_: Backbone, seed: int) -> MultiTaskBatches:
            rows = {t: (train_rows or {}).get(t, self.data[t].train) for t in tasks}
            return MultiTaskBatches({t: resumable_loader(r, batch_size=b.batch_size, seed=seed + i,
                                                         collate_fn=pad_collate(self.pad_id),
                                                         group_by_length=b.group_by_length)
                                     for i, (t, r) in enumerate(rows.items())}, schedule)

        def dev_scores(model: MultiHeadModel) -> dict[str, float]:
            # a DataLoader draws its base seed from the global generator: without the fork, the
            # evaluations would shift every later dropout mask, and the run would not be the same
            with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
                return {t: m["dev"]["score"] for t, m in self.evaluate(model, tasks, ("dev",)).items()}

        return Recipe(build=build, backbone=self.backbone, loader=batches, budget=b,
                      method=Method(loss_fn=multihead_loss), steps=len(schedule),
                      validate=(lambda _: dev_scores) if curve_every else None,
                      validation_split="dev", evaluate_every=curve_every,
                      score=lambda model, _: Scored(self.evaluate(model, scored), {}))

    def train(self, setting: str, seed: int, sampler: TaskSampler, steps: int, *,
              keep_model: bool = False, **options: object) -> Run:
        """``steps`` steps of :meth:`recipe` (``options``: the recipe's) through the one runner,
        :func:`tutorial_lib.finetuning.run`, as a multi-task :class:`~tutorial_lib.finetuning.Run`:
        the ``setting`` (``name``), each scored task's dev and test metrics (``scores``), each
        task's steps as drawn (``steps``), and each step's ``task`` beside its loss (``history``)."""
        schedule = sampler.schedule(steps)
        result = run(self.recipe(sampler, schedule, **options), seed, scale=self.scale,
                     keep_model=keep_model)
        for row in result.history.train:
            row["task"] = schedule[row["step"] - 1]
        return dataclasses.replace(result, test={}, scores=result.test, name=setting,
                                   steps={t: schedule.count(t) for t in sampler.sizes})

    def evaluate(self, model: MultiHeadModel, tasks: Sequence[str],
                 splits: Sequence[str] = ("dev", "test")) -> dict[str, dict]:
        """Each task's GLUE metrics on its dev split (the task's validation set) and test split."""
        out = {}
        for t in tasks:
            ev = create_task_evaluator(model, t, device=device(), amp_dtype=autocast_dtype())
            out[t] = {split: ev.run(eval_loader(getattr(self.data[t], split),
                                                self.budget.eval_batch_size,
                                                pad_collate(self.pad_id))).metrics["glue"]
                      for split in splits}
        return out

    # -- the settings --
    def run(self, setting: str, tasks: Sequence[str], seed: int, *, main: str | None = None,
            evaluate: Sequence[str] | None = None,
            train_rows: Mapping[str, list[dict]] | None = None,
            keep_model: bool = False, steps: int | None = None,
            curve_every: int | None = None) -> Run:
        """Train one model on ``tasks`` jointly. With ``main``: the main task's share is fixed at
        ``settings.main_share`` and the run has S/share steps; without: n·S steps. ``steps``: S
        for this run (default ``settings.steps_per_task``); ``curve_every``: see :meth:`recipe`."""
        s = self.settings
        sizes = {t: len((train_rows or {}).get(t, self.data[t].train)) for t in tasks}
        fixed = {main: s.main_share} if main is not None and len(tasks) > 1 else None
        sampler = TaskSampler(sizes, s.strategy, s.temperature, fixed, seed)
        return self.train(setting, seed, sampler, self.steps_for(tasks, main=main, steps=steps),
                          keep_model=keep_model, scored=evaluate or ([main] if main else tasks),
                          train_rows=train_rows, curve_every=curve_every)

    def steps_for(self, tasks: Sequence[str], *, main: str | None = None,
                  steps: int | None = None) -> int:
        """The optimizer steps of :meth:`run` on ``tasks``: with a ``main`` task (of several) at
        fixed share p, S/p; otherwise n·S (S = ``steps``, default ``settings.steps_per_task``)."""
        each = steps or self.settings.steps_per_task
        if main is not None and len(tasks) > 1:
            return round(each / self.settings.main_share)
        return each * len(tasks)

    def single(self, task: str, seed: int, keep_model: bool = False,
               steps: int | None = None, curve_every: int | None = None,
               setting: str = SINGLE) -> Run:
        """``task`` alone for ``steps`` (default S = ``settings.steps_per_task``)."""
        return self.run(setting, [task], seed, keep_model=keep_model, steps=steps,
                        curve_every=curve_every)

    def equal_steps(self, task: str, seed: int, tasks: Sequence[str], *,
                    main: str | None = None) -> Run:
        """The control for "more updates": ``task`` alone, trained for as many optimizer steps as
        :meth:`run` gives a multi-task model on ``tasks`` (with ``main``, if given) — setting
        ``EQUAL_STEPS``. Against it, a multi-task gain is what sharing adds beyond the updates."""
        return self.single(task, seed, steps=self.steps_for(tasks, main=main), setting=EQUAL_STEPS)

    def batches(self, task: str, split: str = "train", limit: int | None = None,
                rows: Sequence[int] | None = None) -> list[dict]:
        """Padded batches of a split in a fixed order (no shuffling), at most ``limit`` of them;
        ``rows``: only these examples (e.g. for per-instance scores)."""
        data = getattr(self.data[task], split)
        if rows is not None:
            data = [data[i] for i in rows]
        loader = DataLoader(data, batch_size=self.budget.batch_size,
                            collate_fn=pad_collate(self.pad_id))
        return list(itertools.islice(loader, limit))


    def intermediate(self, task: str, steps: int, seed: int) -> Intermediate:
        """STILTs' first stage: a fresh encoder trained on ``task`` alone for ``steps`` (shared by
        the target's runs, as STILTs fine-tunes one intermediate model)."""
        stage = self.train(task, seed, TaskSampler({task: 1}, seed=seed), steps, keep_model=True,
                           scored=[task])
        state = {k: v.detach().cpu().clone() for k, v in stage.model.encoder.state_dict().items()}
        return Intermediate(task, steps, state, stage.scores, stage.seconds)

    def sequential(self, start: Intermediate, target: str, seed: int,
                   steps: int | None = None, curve_every: int | None = None) -> Run:
        """STILTs' second stage: the encoder trained in ``start`` gets a fresh ``target`` head and
        ``steps`` (default S) on ``target`` with this ``seed``. Scores: the target, and the
        intermediate task as it stood after its stage. ``curve_every``: see :meth:`recipe`."""
        steps = steps or self.settings.steps_per_task
        result = self.train(f"sequential ({start.task} → {target})", seed,
                            TaskSampler({target: 1}, seed=seed), steps, scored=[target],
                            heads=[start.task, target], encoder=start.state, curve_every=curve_every)
        return dataclasses.replace(result, scores={**result.scores, **start.scores},
                                   steps={start.task: start.steps, target: steps},
                                   seconds=start.seconds + result.seconds)


def head_loss(model: MultiHeadModel, task: str) -> Callable[[dict], torch.Tensor]:
    """``batch → loss`` of one head (what GradTS differentiates)."""
    return lambda b: model(b["input_ids"], b["attention_mask"], head=task, labels=b["labels"]).loss


def collect(results: Sequence[Run]) -> pd.DataFrame:
    """One row per (run, evaluated task): :func:`task_rows`."""
    return pd.DataFrame(list(itertools.chain.from_iterable(task_rows(r) for r in results)))


def curves(results: Sequence[Run]) -> pd.DataFrame:
    """The runs' learning curves (``curve_every``, in their histories): one row per (setting,
    seed, task, step) with the dev score there."""
    return pd.DataFrame([{"setting": r.name, "seed": r.seed, "task": t, "step": e["step"],
                          "dev_score": e[t]} for r in results for e in r.history.evals
                         if e.get("split") == "dev" for t in r.steps if t in e],
                        columns=["setting", "seed", "task", "step", "dev_score"])


def task_floor(task: Task, split: str = "test") -> stats.Floor:
    """The trivial floor of ``task`` on its ``split`` ("test" or "validation"), computed from the
    task (:meth:`tasks.Task.majority_baseline`): the GLUE score of always predicting the most
    frequent training label — the majority rate for accuracy, MCC 0 ("chance") for CoLA."""
    score = task.majority_baseline(split)["score"]
    metrics = tuple(task.spec.metrics)
    what = ("chance (MCC 0)" if metrics == ("mcc",) else "training mean" if task.is_regression
            else "majority class" if metrics == ("accuracy",)
            else f"majority class ({' / '.join(metrics)})")
    return stats.Floor(float(score), what)


def compare_settings(table: pd.DataFrame, baseline: str = SINGLE, *,
                     floors: Mapping[str, stats.Floor | float],
                     premises: Mapping[str, Mapping[str, stats.Premise]] | None = None
                     ) -> pd.DataFrame:
    """Per task, every setting against ``baseline`` on the test score (the rule of
    :mod:`tutorial_lib.stats`: paired by seed), with the learned-baseline guard: ``floors[task]``
    is the task's trivial floor (:func:`task_floor`, or :meth:`Experiment.floors`), and a
    comparison whose baseline does not beat it is "void: baseline at chance". ``premises``:
    ``{task: {setting: Premise}}``, e.g. STILTs' intermediate stage
    (``premises.stage_premise_items``) for its sequential setting. Tasks without a baseline row
    are skipped; a compared task without a floor is an error."""
    parts = {}
    for task, g in table.groupby("task", sort=False):
        if baseline in set(g["setting"]) and g["setting"].nunique() > 1:
            if task not in floors:
                raise ValueError(f"no floor for task {task!r}: pass floors=exp.floors() "
                                 f"(the tasks with one: {sorted(floors)})")
            given = {k: v for k, v in (premises or {}).get(task, {}).items()
                     if k in set(g["setting"])}
            parts[task] = stats.compare(g, baseline, by="setting", column="test_score",
                                        higher_is_better=True, floor=floors[task], premises=given)
    return pd.concat(parts, names=["task"]) if parts else pd.DataFrame()


def compare_each(table: pd.DataFrame, against: Mapping[str, Sequence[str] | None], *,
                 floors: Mapping[str, stats.Floor | float],
                 premises: Mapping[str, Mapping[str, stats.Premise]] | None = None
                 ) -> dict[str, pd.DataFrame]:
    """:func:`compare_settings` once per baseline: ``against[baseline]`` lists the settings
    compared with it (None: every other setting of the table), e.g. ``{SINGLE: None,
    EQUAL_STEPS: ["multi-task (all)"]}``. No Holm here: the notebook's one family is what it
    saves (``results.holm_family``)."""
    out = {}
    for baseline, others in against.items():
        rows = table if others is None else table[table["setting"].isin([baseline, *others])]
        out[baseline] = compare_settings(rows, baseline, floors=floors, premises=premises)
    return out
