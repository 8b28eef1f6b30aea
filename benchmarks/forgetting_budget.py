"""The sweep behind ForgettingSettings' classroom values (notebook 13): does the source model
learn, does stage 2 forget, do the regularisers move, does the student learn — and what each
part costs.

Runs notebook 13's pipeline (the same library calls) at a scale, with settings overrides, for
each seed, and writes per part the CPU seconds of this process (``time.process_time``: with one
thread, the wall time it would take on an idle core, whatever else loads the machine) and its
wall seconds, plus every run's scores, to ``benchmarks/results/forgetting_budget.json``.
Single-threaded (a shared 2-core machine).

    python -m benchmarks.forgetting_budget --seeds 0 --decay 0.1 1 10 --ewc 0.1 1 10 --lwf 0.1 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from tutorial_lib import backbones, config, runtime, tasks
from tutorial_lib.methods.forgetting import distillation, forgetting
from tutorial_lib.methods.forgetting.settings import ForgettingSettings
from tutorial_lib.training import eval_loader, pad_collate

RESULTS = Path(__file__).resolve().parent / "results" / "forgetting_budget.json"


@contextmanager
def timed(parts: dict, name: str):
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    parts[name] = {"cpu_s": round(time.process_time() - cpu, 1),
                   "wall_s": round(time.perf_counter() - wall, 1)}
    print(name, parts[name], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="classroom")
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--decay", type=float, nargs="*", default=None)
    parser.add_argument("--ewc", type=float, nargs="*", default=None)
    parser.add_argument("--lwf", type=float, nargs="*", default=None)
    parser.add_argument("--regularisers", nargs="*", default=None)
    parser.add_argument("--target-lr", type=float, default=None)
    parser.add_argument("--target-epochs", type=int, default=None)
    parser.add_argument("--student-steps", type=int, default=None)
    parser.add_argument("--student-lr", type=float, default=None)
    parser.add_argument("--skip-students", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    s = ForgettingSettings.at(scale)
    changes = {k: tuple(v) for k, v in (("seeds", args.seeds), ("decay_strengths", args.decay),
                                        ("ewc_strengths", args.ewc), ("lwf_strengths", args.lwf),
                                        ("regularisers", args.regularisers)) if v is not None}
    if args.target_lr or args.target_epochs:
        changes["target_budget"] = s.target_budget.replace(
            **{k: v for k, v in (("lr", args.target_lr), ("epochs", args.target_epochs)) if v})
    for name in ("student_steps", "student_lr"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    s = s.replace(**changes)
    parts: dict = {}
    load = os.getloadavg()
    with timed(parts, "load data and backbone"):
        source = tasks.load_task(s.source_task, train_examples=s.source_train_examples,
                                 validation_examples=s.validation_examples,
                                 test_examples=s.test_examples)
        target = tasks.load_task(s.target_task, train_examples=s.target_train_examples,
                                 validation_examples=s.validation_examples,
                                 test_examples=s.test_examples)
        exp = forgetting.SequentialTransfer(scale, s.backbone, source, target, s.source_budget,
                                            s.target_budget, s.fisher_examples)
    with timed(parts, "stage 1 (source) + Fisher"):
        sources = [exp.source_stage(seed) for seed in s.seeds]
    regs = forgetting.regularisers(s)
    with timed(parts, f"stage 2: {len(regs)} settings x {len(s.seeds)} seeds"):
        table = exp.run(sources, regs, progress=print)
    out = {"scale": scale.name, "settings": repr(s), "load_before": load, "parts": parts,
           "stage1": [{"seed": x.seed, "source_accuracy": x.test_accuracy, "seconds": x.seconds}
                      for x in sources],
           "floors": exp.floors(), "runs": table.to_dict(orient="records")}
    print(forgetting.curve(table).round(3).to_string())
    if not args.skip_students:
        bb = exp.bb
        collate = pad_collate(bb.pad_id)
        with timed(parts, "teacher labels (ensemble)"):
            ordered = {k: eval_loader(exp.rows["source"][k], 128, collate, by_length=False)
                       for k in ("train", "test")}
            extra = distillation.transfer_text(source, s.transfer_examples)
            extra_rows = bb.encode_rows([{"text": t, "label": 0} for t in extra])
            probs = {k: distillation.ensemble_probabilities(
                [distillation.probabilities(x.model, v) for x in sources]) for k, v in ordered.items()}
            probs["extra"] = distillation.ensemble_probabilities(
                [distillation.probabilities(x.model, eval_loader(extra_rows, 128, collate, False))
                 for x in sources])
        labels = distillation.labels_of(ordered["test"])
        out["teacher_test_accuracy"] = distillation.accuracy(probs["test"], labels)
        labelled = distillation.teacher_rows(exp.rows["source"]["train"][: s.student_labels],
                                             probs["train"][: s.student_labels])
        unlabelled = distillation.teacher_rows(extra_rows, probs["extra"], keep_labels=False)
        arms = {"hard labels": (labelled, distillation.distillation(s.kd_temperature, 0.0)),
                "KD": (labelled, distillation.distillation(s.kd_temperature, s.kd_soft_weight)),
                "KD + transfer text": (labelled + unlabelled,
                                       distillation.distillation(s.kd_temperature, s.kd_soft_weight))}
        students = []
        with timed(parts, "students"):
            for layers in s.student_layers:
                for arm, (rows, method) in arms.items():
                    for seed in s.seeds:
                        student = distillation.truncated_backbone(backbones.load_backbone(
                            s.backbone, scale), layers)
                        run = distillation.train_student(
                            student, rows, source.num_labels, method=method, steps=s.student_steps,
                            lr=s.student_lr, budget=s.source_budget, seed=seed)
                        model, secs = run.model, run.seconds
                        acc = distillation.accuracy(distillation.probabilities(model, ordered["test"]),
                                                    labels)
                        students.append({"layers": layers, "arm": arm, "seed": seed,
                                         "accuracy": acc, "seconds": secs})
                        print(students[-1], flush=True)
        out["students"] = students
    out["date"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out["load_after"] = os.getloadavg()
    blob = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps([*blob, out], indent=1, default=str))
    print(json.dumps(parts, indent=1))


if __name__ == "__main__":
    main()
