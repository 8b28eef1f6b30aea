"""How many RTE steps does MiniLM need before single-task RTE clears chance — and does STILTs'
MNLI stage still help once it does? An older side sweep (2026-11-23, 06's recipe before its batches
were length-grouped); notebook 06 now runs STILTs at ``MultitaskSettings.target_steps`` itself, and
``benchmarks/glue_budget.py`` measures each task's single-task score against its floor.

At the classroom budget of 06 (40 steps a task) single-task RTE stays at the majority rate, so a
gain from MNLI → RTE there is a rescue, not an improvement. This runs, on 06's classroom splits
and recipe (batch 16, lr 1e-4, inputs cut to 128 tokens), single-task RTE for each ``--steps``
and each seed, and MNLI (``--intermediate`` steps, once) → RTE at the same step counts, and
writes the test scores, their majority rate and the wall time. Notebook 06 shows the JSON.

    python -m benchmarks.rte_budget --steps 40 160 400 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from benchmarks import write_json
from tutorial_lib import config, pretraining, runtime, stats
from tutorial_lib.methods.multitask import multitask
from tutorial_lib.methods.multitask.settings import MultitaskSettings

RESULTS = Path(__file__).resolve().parent / "results" / "rte_budget.json"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[40, 160, 400])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--intermediate", type=int, default=100, help="MNLI steps (06's default)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runtime.quiet()
    scale = config.get_scale("classroom")
    base = MultitaskSettings.at(scale)
    pretraining.ensure(base)  # our LM, if the settings name it
    start_time = time.perf_counter()
    done = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    rows = [r for r in done if r["steps"] in args.steps and r["seed"] in args.seeds]
    exp = multitask.Experiment(base, ["rte", "mnli"])
    majority = 100 * exp.data["rte"].task.majority_baseline()["score"]
    start = exp.intermediate("mnli", args.intermediate, args.seeds[0])
    out = {}
    for steps in args.steps:
        exp.settings = base.replace(steps_per_task=steps)
        for seed in args.seeds:
            for setting in ("single-task", "MNLI → RTE"):
                if any((r["steps"], r["seed"], r["setting"]) == (steps, seed, setting) for r in rows):
                    continue  # measured by an earlier, interrupted run of this sweep
                t0 = time.perf_counter()
                result = (exp.single("rte", seed) if setting == "single-task"
                          else exp.sequential(start, "rte", seed))
                rows.append({"steps": steps, "setting": setting, "seed": seed,
                             "test_score": result.scores["rte"]["test"]["score"],
                             "dev_score": result.scores["rte"]["dev"]["score"],
                             "seconds": round(time.perf_counter() - t0, 1)})
                print(rows[-1], flush=True)
        # written after every step count, so a sweep cut off keeps what it measured
        out = {"environment": runtime.describe(scale), "recipe": {
                   "train_examples": base.train_examples, "batch_size": base.budget.batch_size,
                   "lr": base.budget.lr, "max_len": base.budget.max_len,
                   "intermediate": f"mnli, {args.intermediate} steps, seed {args.seeds[0]}",
                   "mnli_test_score_after_intermediate": start.scores["mnli"]["test"]["score"]},
               "rte_majority_test_score": majority, "runs": rows, "summary": _table(rows),
               "seconds_this_run": round(time.perf_counter() - start_time, 1),
               "seconds_all_runs": round(sum(r["seconds"] for r in rows), 1)}
        out = write_json(args.out, out)
    print(json.dumps(out.get("summary"), indent=1))
    return out


def _table(rows: list[dict]) -> list[dict]:
    """Per step count: both settings' test score (%, mean ± std over seeds) and the paired
    verdict of MNLI → RTE against single-task (``tutorial_lib.stats``)."""
    runs = pd.DataFrame(rows)
    out = []
    for steps, g in runs.groupby("steps"):
        cmp = stats.compare(g, "single-task", by="setting", column="test_score",
                            higher_is_better=True).loc["MNLI → RTE"]
        means = {s: f"{100 * v.mean():.1f} ± {100 * v.std(ddof=1):.1f}"
                 for s, v in g.groupby("setting", sort=False)["test_score"]}
        out.append({"steps": int(steps), **means, "Δ (points)": round(float(cmp["Δ (points)"]), 1),
                    "95% CI": cmp["95% CI"], "p": round(float(cmp["p"]), 4),
                    "verdict": cmp["verdict"]})
    return out


if __name__ == "__main__":
    main()
