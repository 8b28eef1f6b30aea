"""How many steps, at which rates, before notebook 09's manual prompt leaves its zero-shot start?

At 20 steps the manual prompt ended where it began zero-shot, so every prompt comparison of
notebook 09 was void. This trains the manual prompt exactly as 09 builds it (its settings: label
rows, frozen lower-layer states, top layers trained) on the given few-shot SST-2 splits, once per
number of steps and learning rate (``fewshot.train_fewshot``: the best dev checkpoint, then test),
and then applies 09's rule to each rate grid: per split the run with the best dev score (accuracy,
lower dev loss breaking ties; first in the grid on exact ties), and that run's test accuracy
against the zero-shot start with the guard of ``tutorial_lib.stats`` (``against_floor``, paired by
split). It saw test accuracy, so the held-out splits of ``benchmarks/replicate.py`` are the check
on whatever it suggests.

    python -m benchmarks.prompt_steps --steps 30 40 50 --lrs 1e-3 3e-4 1e-4 \\
        --grids 1e-3,3e-4 3e-4,1e-4

Its output (``benchmarks/results/prompt_steps.json``) is behind 09's classroom ``steps`` and
``prompt_lrs`` (see the comments of ``DARTSettings``). An interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks import dart_fields, write_json
from tutorial_lib import config, runtime, stats, tasks
from tutorial_lib.methods.prompts import fewshot, prompting
from tutorial_lib.methods.prompts.settings import DARTSettings

RESULTS = Path(__file__).resolve().parent / "results" / "prompt_steps.json"


def choose(runs: list[dict], split: int, steps: int, grid: list[float]) -> dict:
    """09's rule on one split: the run of ``grid`` with the best dev score (first on ties)."""
    candidates = [next(r for r in runs if (r["split"], r["steps"], r["lr"]) == (split, steps, lr))
                  for lr in grid]
    return max(candidates, key=lambda r: r["dev_score"])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, nargs="+", default=None,
                        help="few-shot split seeds (default: the settings' splits)")
    parser.add_argument("--steps", type=int, nargs="+", default=[30, 40, 50])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-4, 1e-4])
    parser.add_argument("--grids", nargs="+", default=["1e-3,3e-4", "3e-4,1e-4"],
                        help="rate grids to choose from on dev, each comma-separated")
    parser.add_argument("--scale", default="classroom", help="smoke: a quick check of the script")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    s = DARTSettings.at(scale)
    split_seeds = args.splits or list(s.splits)
    grids = [[float(x) for x in g.split(",")] for g in args.grids]
    missing = {lr for g in grids for lr in g} - set(args.lrs)
    if missing:
        parser.error(f"the grids use rates not in --lrs: {sorted(missing)}")
    doc = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    runs = doc["runs"]
    task = tasks.load_task("sst2")
    splits = [tasks.few_shot(task, s.k, seed, test_examples=s.test_examples) for seed in split_seeds]
    lm = prompting.load_prompt_lm(s.backbone, scale)
    template = {"sst2": prompting.template_for(lm, "sst2")}
    words = {"sst2": prompting.choose_verbalizer(lm, prompting.verbalizer_candidates(lm, "sst2"))}
    zero = fewshot.zero_shot(lm, splits[0], template["sst2"], words["sst2"])["accuracy"]
    method = fewshot.prompt_method(lm, template, words, s.max_len,
                                   trainable_layers=s.trainable_layers,
                                   train_label_rows=s.prompt_label_rows,
                                   frozen_states=s.frozen_states)
    for steps in args.steps:
        for split in splits:
            for lr in args.lrs:
                if any((r["split"], r["steps"], r["lr"]) == (split.seed, steps, lr) for r in runs):
                    continue
                t0 = time.perf_counter()
                run = fewshot.train_fewshot(method(split), split, steps=steps, lr=lr,
                                            batch_size=s.batch_size, eval_every=s.eval_every)
                runs.append({"split": split.seed, "steps": steps, "lr": lr,
                             "test_accuracy": run.test["accuracy"],
                             "dev_accuracy": fewshot.chosen(run)["dev_accuracy"],
                             "dev_score": fewshot.chosen(run)["score"],
                             "best_step": run.best_step,
                             "seconds": round(time.perf_counter() - t0, 1)})
                print(runs[-1], flush=True)
                _write(args.out, doc, s, zero, [])
    selections = []
    for steps in args.steps:
        for grid in grids:
            chosen = [choose(runs, seed, steps, grid) for seed in split_seeds]
            check = stats.against_floor([r["test_accuracy"] for r in chosen],
                                        stats.Floor(zero, "zero-shot start"))
            selections.append({
                "steps": steps, "grid": grid, "chosen_lrs": [r["lr"] for r in chosen],
                "test_accuracy": [r["test_accuracy"] for r in chosen],
                "delta_points": round(100 * check.delta, 2),
                "std_points": round(100 * stats.mean_std(
                    [r["test_accuracy"] - zero for r in chosen])[1], 2),
                "p": check.p, "verdict": check.raw_verdict(higher_is_better=True)})
            print(selections[-1], flush=True)
    return _write(args.out, doc, s, zero, selections)


def _write(out: Path, doc: dict, s: DARTSettings, zero: float, selections: list[dict]) -> dict:
    doc.update({
        **dart_fields(s), "trainable_layers": s.trainable_layers, "zero_shot": zero,
        "selections": selections,
        "note": "each run: one rate, the best dev checkpoint tested; a selection applies 09's "
                "rule (best dev score per split within the grid) and tests the chosen runs "
                "against the zero-shot start (paired by split: one-sample t on the differences)"})
    return write_json(out, doc)


if __name__ == "__main__":
    main()
