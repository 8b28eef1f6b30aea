"""At how many steps does MiniLM learn each GLUE task of notebooks 06 and 07 — and what does a
step cost? The sweep behind 06's and 07's classroom ``steps_per_task``.

For each notebook's classroom splits and recipe (``--notebook 06``: ``MultitaskSettings``,
``07``: ``GradTSSettings``), each ``--tasks`` task, each ``--steps`` count and each ``--seeds``
seed: one single-task run, its dev and test score next to the task's floor (the majority-class
score on test, MCC 0 for CoLA: ``multitask.task_floor``), the training seconds per step and the
run's evaluation seconds. Results are merged into ``benchmarks/results/glue_budget.json`` (keyed
by notebook, task, steps, seed) after every run, so a sweep cut off keeps what it measured.
Set ``torch`` threads with ``--threads`` (the classroom notebooks run on 2; a sweep beside other
work on 1 — its seconds per step are then slower than a notebook's).

    python -m benchmarks.glue_budget --notebook 07 --tasks sst2 qnli mrpc rte mnli cola --steps 120
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks import write_json
from tutorial_lib import config, pretraining, runtime, stats
from tutorial_lib.methods.multitask import multitask
from tutorial_lib.methods.multitask.settings import GradTSSettings, MultitaskSettings

RESULTS = Path(__file__).resolve().parent / "results" / "glue_budget.json"
SETTINGS = {"06": MultitaskSettings, "07": GradTSSettings}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", choices=sorted(SETTINGS), required=True)
    parser.add_argument("--tasks", nargs="+", required=True)
    parser.add_argument("--steps", type=int, nargs="+", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    runtime.quiet()
    scale = config.get_scale("classroom")
    base = SETTINGS[args.notebook].at(scale)
    pretraining.ensure(base)  # our LM, if the settings name it
    blob = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    rows = blob["runs"]
    exp = multitask.Experiment(base, args.tasks)
    floors = exp.floors()
    for steps in args.steps:
        exp.settings = base.replace(steps_per_task=steps)
        for task in args.tasks:
            for seed in args.seeds:
                key = (args.notebook, task, steps, seed)
                if any((r["notebook"], r["task"], r["steps"], r["seed"]) == key for r in rows):
                    continue
                t0 = time.perf_counter()
                run = exp.single(task, seed)
                total = time.perf_counter() - t0
                rows.append({"notebook": args.notebook, "task": task, "steps": steps, "seed": seed,
                             "dev_score": run.scores[task]["dev"]["score"],
                             "test_score": run.scores[task]["test"]["score"],
                             "floor": floors[task].value, "floor_what": floors[task].what,
                             "train_seconds": round(run.seconds, 2),
                             "seconds_per_step": round(run.seconds / steps, 4),
                             "other_seconds": round(total - run.seconds, 2),
                             "threads": args.threads})
                print(rows[-1], flush=True)
                blob = {"environment": runtime.describe(scale),
                        "recipe": {nb: _recipe(SETTINGS[nb].at(scale)) for nb in SETTINGS},
                        "runs": rows, "summary": summary(rows)}
                blob = write_json(args.out, blob)
    print(pd.DataFrame(blob.get("summary", [])).to_string())
    return blob


def _recipe(s: multitask.MultiTaskRuns) -> dict:
    return {"train_examples": s.train_examples, "dev_examples": s.dev_examples,
            "test_examples": s.test_examples, "batch_size": s.budget.batch_size, "lr": s.budget.lr,
            "max_len": s.budget.max_len, "group_by_length": s.budget.group_by_length}


def summary(rows: list[dict]) -> list[dict]:
    """Per (notebook, task, steps): test score (%, mean ± std over seeds), the floor, Δ over it,
    the floor test (``stats.against_floor``; "not tested" with one seed) and seconds per step."""
    out = []
    for (nb, task, steps), g in pd.DataFrame(rows).groupby(["notebook", "task", "steps"]):
        check = stats.against_floor(g["test_score"], float(g["floor"].iloc[0]))
        mean, std = stats.mean_std(g["test_score"])
        out.append({"notebook": nb, "task": task, "steps": int(steps), "seeds": len(g),
                    "test score %": stats.fmt(mean, std, len(g), 100, 1),
                    "floor %": round(100 * float(g["floor"].iloc[0]), 1),
                    "Δ over floor (points)": round(100 * check.delta, 1),
                    "vs floor": check.raw_verdict(True),
                    "p": None if np.isnan(check.p) else round(check.p, 4),
                    "s/step": round(float(g["seconds_per_step"].mean()), 3),
                    "eval s": round(float(g["other_seconds"].mean()), 1)})
    return out


if __name__ == "__main__":
    main()
