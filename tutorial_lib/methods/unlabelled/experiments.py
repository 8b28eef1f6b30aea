"""18's runs: the label curve of part 1 (which start, how many labels) and part 2's few-label
comparison (supervised only, self-training, UDA), each through the one runner
(:func:`tutorial_lib.finetuning.run`) at equal steps, one row per run.

Every arm of one seed trains on the same labelled questions (the first ``n`` of the seed's
shuffle of the training split, so a larger set contains the smaller one); the unlabelled pool
of part 2 is the rest of that shuffle, its labels kept aside only to score the pseudo-labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ... import data, premises
from ...backbones import Backbone, load_backbone
from ...finetuning import Recipe, Run, classifier_scoring, floor_columns, run
from ...settings import Budget
from ...tasks import Task
from .consistency import UDA, predict, pseudo_label
from .settings import UnlabelledSettings

SUPERVISED, SELF_TRAINING, UDA_NAME = "supervised only", "self-training", "UDA (consistency)"
VOID_PSEUDO = "void: pseudo-labels at chance"
VOID_INACTIVE = "void: the consistency term never acted"


def shuffled(n: int, seed: int) -> np.ndarray:
    """The seed's order of ``n`` training rows: the first k are a run's k labels."""
    return np.random.default_rng(seed).permutation(n)


def per_class(labels: Sequence[int], k: int, seed: int) -> tuple[list[int], list[int]]:
    """(k labelled indices per class, the rest), both in the seed's shuffled order."""
    taken: dict[int, int] = {}
    labelled, rest = [], []
    for i in shuffled(len(labels), seed).tolist():
        if taken.get(labels[i], 0) < k:
            taken[labels[i]] = taken.get(labels[i], 0) + 1
            labelled.append(i)
        else:
            rest.append(i)
    return labelled, rest


def classify(backbone: Backbone, task: Task, rows: list[dict], seed: int, *, steps: int,
             budget: Budget, eval_every: int, keep_model: bool = False, **recipe: object) -> Run:
    """A classifier on ``backbone`` trained for exactly ``steps`` batches of ``rows`` (``recipe``:
    more of its :class:`~tutorial_lib.finetuning.Recipe`, e.g. the method)."""
    validate, score = classifier_scoring(task, budget)
    return run(Recipe(build=lambda bb: bb.classifier(task.num_labels), backbone=backbone,
                      rows=lambda bb: rows, budget=budget, steps=steps, validate=validate,
                      score=score, evaluate_every=eval_every, **recipe), seed, keep_model=keep_model)


def label_curve(starts: Mapping[str, Backbone], task: Task, s: UnlabelledSettings
                ) -> tuple[pd.DataFrame, dict[tuple[str, int], list[Run]]]:
    """Part 1: every start × label count × seed, ``s.cls_steps`` steps each. One row per run
    (``arm``, ``labels``, ``seed``, test error, the task's floors)."""
    rows, runs = [], {}
    floors = floor_columns(task)
    encoded = next(iter(starts.values())).encode_rows(task.train, s.cls_budget.max_len)
    for labels in s.label_counts:
        for seed in s.seeds:
            chosen = [encoded[i] for i in shuffled(len(encoded), seed)[:labels]]
            for arm, backbone in starts.items():
                run = classify(backbone, task, chosen, seed, steps=s.cls_steps,
                               budget=s.cls_budget, eval_every=s.eval_every)
                runs.setdefault((arm, labels), []).append(run)
                rows.append({**run.row(), "arm": arm, "labels": labels, **floors})
    return pd.DataFrame(rows), runs


def few_labels(task: Task, s: UnlabelledSettings
               ) -> tuple[pd.DataFrame, dict[str, list[Run]], dict[str, object]]:
    """Part 2: supervised only, self-training and UDA on ``s.labels_per_class`` labels a class,
    ``s.semi_steps`` steps each, per seed. Returns (one row per run, the runs by method, the
    premises: pseudo-label correctness pooled over seeds, UDA's mask shares)."""
    b = s.semi_budget
    labels = data.column(task.train, "label")
    rows, runs = [], {SUPERVISED: [], SELF_TRAINING: [], UDA_NAME: []}
    pseudo_correct, masked, pool_gold = [], [], []
    floors = floor_columns(task)
    backbone = load_backbone(s.semi_backbone, s.scale)  # every run trains a copy of it
    encoded = backbone.encode_rows(task.train, b.max_len)
    for seed in s.semi_seeds:
        labelled_idx, rest = per_class(labels, s.labels_per_class, seed)
        pool_idx = rest[: s.unlabelled] if s.unlabelled else rest
        labelled = [encoded[i] for i in labelled_idx]
        pool = [{"input_ids": encoded[i]["input_ids"]} for i in pool_idx]  # no labels
        pool_gold += [labels[i] for i in pool_idx]
        common = dict(steps=s.semi_steps, budget=b, eval_every=s.eval_every)
        teacher = classify(backbone, task, labelled, seed, keep_model=True, **common)
        probs = predict(teacher.model, pool, backbone.pad_id)
        teacher.model = None
        pseudo = pseudo_label(probs, pool, s.pseudo_threshold)
        kept = probs.max(-1).values >= s.pseudo_threshold
        gold = [labels[i] for i, k in zip(pool_idx, kept.tolist()) if k]
        pseudo_correct += [r["labels"] == g for r, g in zip(pseudo, gold)]
        student = classify(backbone, task, labelled + pseudo, seed, **common)
        specials = backbone.tokenizer.all_special_ids
        uda = UDA(pool, backbone.pad_id, specials, b.batch_size * s.unlabelled_ratio, seed,
                  s.uda_weight, s.uda_temperature, s.uda_threshold, s.replace_prob)
        consistent = classify(backbone, task, labelled, seed, method=uda.method(), **common)
        masked.append(float(np.mean(uda.masked)))
        extra = {SUPERVISED: {}, SELF_TRAINING: {"pseudo_labels": len(pseudo)},
                 UDA_NAME: {"mask_share": masked[-1]}}
        for name, one in ((SUPERVISED, teacher), (SELF_TRAINING, student), (UDA_NAME, consistent)):
            runs[name].append(one)
            rows.append({**one.row(), "method": name, "labels": len(labelled), **floors,
                         **extra[name]})
    shares = np.bincount(pool_gold) / max(1, len(pool_gold))
    return pd.DataFrame(rows), runs, {"pseudo_correct": pseudo_correct, "mask_shares": masked,
                                      "pool_floor": float(shares.max())}


def semi_premises(found: Mapping[str, object]) -> dict[str, premises.Premise]:
    """What part 2's comparisons rest on, measured out of sample: the pseudo-labels beat the
    pool's majority rate (a binomial test on the kept items, whose gold labels no run saw), and
    UDA's consistency term acted (some unlabelled examples passed its confidence mask)."""
    correct = list(found["pseudo_correct"])
    if correct:
        pseudo = dataclasses.replace(
            premises.above_floor_items(correct, found["pool_floor"], what="the kept pseudo-labels"),
            failure=VOID_PSEUDO, name="pseudo-labels above floor")
    else:
        pseudo = premises.Premise(False, VOID_PSEUDO, "no pool example reached the threshold",
                                  "pseudo-labels above floor")
    shares = list(found["mask_shares"])
    active = premises.Premise(min(shares) > 0, VOID_INACTIVE,
                              f"share of unlabelled examples past the confidence mask, per seed: "
                              f"{', '.join(f'{x:.2f}' for x in shares)}", "consistency active")
    return {SELF_TRAINING: pseudo, UDA_NAME: active}
