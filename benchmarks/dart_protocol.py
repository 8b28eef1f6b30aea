"""Which checkpoint rule lets 09's prompts leave their zero-shot start on *any* five splits — read
without 09's splits and without its test set.

09 keeps the checkpoint with the best few-shot dev score among steps 4 and 8. On a split where
training hurts, that rule still keeps a trained checkpoint (09's split 100: the manual prompt 11
points below its start), and one such split fails the start guard of all five. This sweep trains
the manual prompt and DART at 09's depth, steps and rate grid on *design* splits (seeds neither
LM-BFF's nor the held-out run's) and scores every ``--every`` steps, from step 0 (the untrained
prompt), both the split's own 32-sentence dev set (what 09 selects on) and ``--size`` SST-2
training sentences outside the split (the stand-in for a test set). ``simulate`` then replays
09's protocol — each method's rate chosen on the mean dev score of the first two splits of a
five-split set, each split's checkpoint chosen on its dev set — with and without step 0 among
the candidates, over every five-split set of the design splits.

    python -m benchmarks.dart_protocol --splits 2013 2021 2042 2087 2100 3013 3021 3042
    python -m benchmarks.dart_protocol --replay   # the protocols again, from the recorded curves

The committed result (``results/dart_protocol.json``, its ``reading``): step 0 among the
candidates changes almost nothing (training rarely scores below its start on dev), and no replayed
protocol — checkpoint set, step 0, either rate alone — lets DART pass the start guard on more than
38 % of the 56 five-split sets, while the manual prompt passes on 98 % with 09's protocol.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from benchmarks import dart_fields, write_json
from benchmarks.dart_design import design_split
from tutorial_lib import backbones, config, finetuning, runtime, tasks
from tutorial_lib.evaluation import evaluate
from tutorial_lib.methods.prompts import dart, fewshot, prompt_lms, prompting
from tutorial_lib.methods.prompts.settings import DARTSettings
from tutorial_lib.settings import Budget
from tutorial_lib.tasks import FewShotSplit
from tutorial_lib.training import eval_loader

RESULTS = Path(__file__).resolve().parent / "results" / "dart_protocol.json"


def curve(build, split: FewShotSplit, design: list[dict], *, steps: int, every: int, lr: float,
          batch_size: int, warmup_frac: float = 0.1) -> dict:
    """One run as 09 trains it (``fewshot.recipe`` through the runner: ``train_fewshot``'s
    loader, rate schedule and clipping), scored on the dev set and on ``design`` at step 0 and
    every ``every`` steps."""
    start = []

    def scores(built: fewshot.FewShotModel):
        dev = eval_loader(built.encode(split.dev), 128, built.collate)
        held = eval_loader(built.encode(design), 128, built.collate)

        def score(model) -> dict:
            d, h = evaluate(model, dev, num_labels=2), evaluate(model, held, num_labels=2)
            return {"dev_score": fewshot.dev_score(d), "dev_accuracy": d["accuracy"],
                    "design_accuracy": h["accuracy"]}

        start.append({"step": 0, **score(built.model)})
        return score

    budget = Budget(batch_size=batch_size, lr=lr, warmup_frac=warmup_frac)
    recipe, made = fewshot.recipe(build, split, budget, steps=steps, eval_every=every,
                                  validate=scores, select="last")
    run = finetuning.run(recipe, 0)
    points = start + [{k: h[k] for k in ("step", "dev_score", "dev_accuracy", "design_accuracy")}
                      for h in run.history.evals]
    model = made["built"].model
    cos = dart.start_cosines(model) if hasattr(model, "template_words") else {}
    return {"points": points, "vector_cos": float(np.mean(list(cos.values()))) if cos else None}


def simulate(runs: list[dict], starts: dict, *, last: int, every: int, with_start: bool,
             rates: dict | None = None, rate_dev_sets: int = 2, n_splits: int = 5) -> dict:
    """09's protocol replayed on the recorded curves: per five-split set (every combination of
    the design splits, in seed order), per method, the rate of its grid (``rates[method]``, else
    every rate recorded) with the best mean dev score on the first ``rate_dev_sets`` splits, then
    each split's best dev checkpoint among steps ``every`` … ``last`` (and step 0 ``with_start``;
    the first best on ties). Returns, per method, the gains over the zero-shot start on the design
    sentences and the start guard's pass rate (the one rule: p < 0.05 and a gain)."""
    from tutorial_lib import stats

    by = {(r["method"], r["lr"], r["split"]): r["points"] for r in runs}
    methods = sorted({r["method"] for r in runs})
    seeds = sorted({int(r["split"]) for r in runs})
    starts = {int(k): v for k, v in starts.items()}
    out = {}
    for m in methods:
        grid = [lr for lr in ((rates or {}).get(m) or sorted({lr for (mm, lr, _) in by if mm == m}))
                if all((m, lr, sd) in by for sd in seeds)]
        if not grid:  # a rate this method did not run
            continue

        def kept(lr, seed, m=m):
            pts = [p for p in by[(m, lr, seed)]
                   if p["step"] <= last and (p["step"] % every == 0)
                   and (p["step"] > 0 or with_start)]
            return max(pts, key=lambda p: (p["dev_score"], -p["step"]))

        passes, gains = [], []
        for subset in itertools.combinations(seeds, n_splits):
            lr = max(grid, key=lambda r: np.mean([kept(r, s)["dev_score"]
                                                   for s in subset[:rate_dev_sets]]))
            acc = [kept(lr, s)["design_accuracy"] for s in subset]
            d = np.array(acc) - np.array([starts[s] for s in subset])
            gains.append(float(d.mean()))
            c = stats.against_floor(d, 0.0)
            passes.append(c.p < 0.05 and c.delta > 0)
        per_split = {s: {lr: kept(lr, s)["design_accuracy"] - starts[s] for lr in grid}
                     for s in seeds}
        out[m] = {"sets": len(passes), "guard_pass_rate": float(np.mean(passes)),
                  "mean_gain": float(np.mean(gains)), "per_split_gain": per_split}
    return out


def protocols(doc: dict, steps: int, eval_every: int) -> dict:
    """Every replayed protocol: checkpoints every ``eval_every`` (09's) or every recorded step,
    with and without step 0, and each method's rate grid whole or one rate alone."""
    out = {}
    rates = sorted({r["lr"] for r in doc["runs"]})
    for every in sorted({eval_every, doc["every"]}):
        for with_start in (False, True):
            for grid in [None, *([lr] for lr in rates)]:
                name = (f"steps {every}..{steps}{' and step 0' if with_start else ''}, "
                        + (f"rate {grid[0]:g} only" if grid else "the grid chosen on dev"))
                out[name] = simulate(doc["runs"], doc["zero_shot"], last=steps, every=every,
                                     with_start=with_start,
                                     rates=None if grid is None else dict.fromkeys(
                                         {r["method"] for r in doc["runs"]}, grid))
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, nargs="+",
                        default=[2013, 2021, 2042, 2087, 2100, 3013, 3021, 3042])
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--methods", nargs="+", default=["manual prompt", "DART"])
    parser.add_argument("--scale", default="classroom", help="smoke: a quick check of the script")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--replay", action="store_true",
                        help="no training: replay the protocols on the curves in --out")
    args = parser.parse_args(argv)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    s = DARTSettings.at(scale)
    if args.replay:
        import json

        doc = json.loads(args.out.read_text())
        return write_json(args.out, {**doc, "protocols": protocols(doc, s.steps, s.eval_every)})
    lm = prompting.load_prompt_lm(s.backbone, scale)
    backbones.forget_loaded()
    template = {"sst2": prompting.template_for(lm, "sst2")}
    words = {"sst2": prompting.choose_verbalizer(lm, prompting.verbalizer_candidates(lm, "sst2"))}
    k = s.trainable_layers

    def dart_variant(scale: float = s.dart_prompt_scale):
        return dart.dart_method(lm, template, words, prompt_scale=scale,
                                label_scale=s.dart_label_scale, fluency_weight=s.fluency_weight,
                                fluency_rows=s.fluency_rows, max_len=s.max_len,
                                trainable_layers=k, prefix_words=s.dart_prefix_words,
                                causal_fluency=s.causal_fluency,
                                frozen_states=prompt_lms.FrozenPrefix(k) if k else False)

    # name: (the method, its rate grid, the warm-up share of the steps)
    variants = {
        "manual prompt": (fewshot.prompt_method(lm, template, words, s.max_len, trainable_layers=k,
                                                train_label_rows=s.prompt_label_rows,
                                                frozen_states=s.frozen_states), s.prompt_lrs, 0.1),
        "DART": (dart_variant(), s.dart_lrs, 0.1),
        "DART, warm-up 25 %": (dart_variant(), s.dart_lrs, 0.25),
        "DART, vectors x30": (dart_variant(30.0), s.dart_lrs, 0.1),
    }
    methods = {m: variants[m] for m in args.methods}
    task = tasks.load_task("sst2")
    runs, starts = [], {}
    doc = {**dart_fields(s), "trainable_layers": k, "steps": s.steps, "every": args.every,
           "design_dev": f"{args.size} SST-2 training sentences outside each split",
           "selection_dev": "each split's own few-shot dev set (K per class)"}
    for seed in args.splits:
        real = tasks.few_shot(task, s.k, seed)
        design = design_split(task, seed, s.k, args.size).dev
        split = FewShotSplit(real.task, real.k, real.seed, real.train, real.dev, design,
                             real.label_names)
        starts[seed] = fewshot.zero_shot(lm, split, template["sst2"], words["sst2"])["accuracy"]
        for name, (method, lrs, warmup) in methods.items():
            for lr in lrs:
                t0 = time.perf_counter()
                r = curve(method(split), split, design, steps=s.steps, every=args.every, lr=lr,
                          batch_size=s.batch_size, warmup_frac=warmup)
                runs.append({"split": seed, "method": name, "lr": lr, **r,
                             "seconds": round(time.perf_counter() - t0, 1)})
                print(seed, name, lr, starts[seed],
                      [(p["step"], round(p["dev_accuracy"], 3), p["design_accuracy"])
                       for p in r["points"]], flush=True)
        write_json(args.out, {**doc, "zero_shot": starts, "runs": runs})
    doc |= {"zero_shot": starts, "runs": runs}
    return write_json(args.out, {**doc, "protocols": protocols(doc, s.steps, s.eval_every)})


if __name__ == "__main__":
    main()
