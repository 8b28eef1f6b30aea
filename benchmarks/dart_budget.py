"""At which budget do notebook 09's baselines learn? The sweep behind 09's classroom settings.

At 09's first classroom budget (20 steps, one learning rate per method) head fine-tuning stayed at
the majority rate and the manual prompt ended where it began zero-shot, so its comparisons said
nothing. This trains, on a few of 09's SST-2 K = 16 splits at the classroom scale, each method at
each learning rate of its grid for ``--steps`` steps (``fewshot.train_fewshot``: best dev checkpoint,
then test) and writes every run — test and dev accuracy, seconds, seconds per step — beside the
test set's majority rate and the prompt's zero-shot accuracy, plus the logistic-regression probe on
frozen features (C chosen on dev). Choosing on dev from the rows is then the notebook's rule.

    python -m benchmarks.dart_budget --splits 13 21 --steps 40 --lrs 1e-4 3e-4 --head-lr 1e-2

Run with one thread (``--threads 1``, the default) on a shared machine; a notebook on 2 threads
runs about 0.6× these times. An interrupted sweep resumes: rows already in ``--out`` are kept.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
import torch

from benchmarks import dart_fields, write_json
from tutorial_lib import config, runtime, tasks
from tutorial_lib.methods.prompts import dart, fewshot, prompting
from tutorial_lib.methods.prompts.settings import DARTSettings

RESULTS = Path(__file__).resolve().parent / "results" / "dart_budget.json"
METHODS = ("head fine-tuning", "manual prompt", "DART-style")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, nargs="+", default=[13, 21])
    parser.add_argument("--steps", type=int, nargs="+", default=[40])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-4, 3e-4])
    parser.add_argument("--head-lr", type=float, nargs="+", default=[1e-2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--trainable-layers", type=int, default=None)
    parser.add_argument("--cs", type=float, nargs="+", default=[0.001, 0.01, 0.1, 1.0])
    parser.add_argument("--pool", default="mean", help="the probe's features: mean or last")
    parser.add_argument("--reuse", action="store_true",
                        help="take zero-shot and the probe from --out (same splits)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scale", default="classroom", help="smoke: a quick check of the script")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    s = DARTSettings.at(scale)
    layers = args.trainable_layers if args.trainable_layers is not None else s.trainable_layers
    doc = json.loads(args.out.read_text()) if args.out.exists() else {"runs": []}
    rows = doc["runs"]
    splits = [tasks.few_shot("sst2", s.k, seed, test_examples=s.test_examples)
              for seed in args.splits]
    floors = fewshot.majority_floors(splits)["sst2"].value
    lm = prompting.load_prompt_lm(s.backbone, scale)
    template = {"sst2": prompting.template_for(lm, "sst2")}
    words = {"sst2": prompting.choose_verbalizer(lm, prompting.verbalizer_candidates(lm, "sst2"))}
    if args.reuse:  # zero-shot is deterministic: take it from the earlier run of the same test set
        zero, zero_seconds = doc["zero_shot"], doc["zero_shot_seconds"]
    else:
        t0 = time.perf_counter()
        zero = fewshot.zero_shot(lm, splits[0], template["sst2"], words["sst2"])["accuracy"]
        zero_seconds = time.perf_counter() - t0
    stored = pd.DataFrame(doc.get("logreg", []))
    if args.reuse and len(stored) and set(stored.get("pool", [])) == {args.pool}:
        probe, probe_seconds = stored, doc["logreg_seconds"]
    else:
        t0 = time.perf_counter()
        probe = fewshot.logreg_probe(s.cls_backbone, scale, splits, args.cs, pool=args.pool)
        probe_seconds = time.perf_counter() - t0
        probe["pool"] = args.pool
    builders = {
        "manual prompt": lambda hl: fewshot.prompt_method(lm, template, words, s.max_len,
                                                          trainable_layers=layers),
        "DART-style": lambda hl: dart.dart_method(lm, template, words, prompt_lr=None,
                                                  fluency_weight=s.fluency_weight,
                                                  max_len=s.max_len, trainable_layers=layers),
        "head fine-tuning": lambda hl: fewshot.cls_method(s.cls_backbone, scale,
                                                          trainable_layers=layers, head_lr=hl)}
    for steps in args.steps:
        for split in splits:
            for name in [m for m in args.methods if m in builders]:  # "none": the probe only
                for head_lr in (args.head_lr if name == "head fine-tuning" else [None]):
                    for lr in args.lrs:
                        key = dict(method=name, split=split.seed, steps=steps, lr=lr,
                                   head_lr=head_lr, trainable_layers=layers)
                        if any(all(r.get(k) == v for k, v in key.items()) for r in rows):
                            continue
                        t0 = time.perf_counter()
                        run = fewshot.train_fewshot(builders[name](head_lr)(split), split,
                                                    steps=steps, batch_size=s.batch_size, lr=lr,
                                                    eval_every=s.eval_every)
                        rows.append({**key, "test_accuracy": run.test["accuracy"],
                                     "dev_accuracy": fewshot.chosen(run)["dev_accuracy"],
                                     "best_step": run.best_step,
                                     "seconds": round(time.perf_counter() - t0, 1),
                                     "fit_seconds": round(run.seconds, 1),
                                     "majority": floors[split.seed], "zero_shot": zero})
                        print(rows[-1], flush=True)
                        _write(args.out, doc, s, args, zero, zero_seconds, probe, probe_seconds)
    return _write(args.out, doc, s, args, zero, zero_seconds, probe, probe_seconds)


def _write(out: Path, doc: dict, s: DARTSettings, args, zero, zero_seconds, probe,
           probe_seconds) -> dict:
    doc.update({
        **dart_fields(s), "threads": args.threads, "zero_shot": zero,
        "zero_shot_seconds": round(zero_seconds, 1),
        "logreg": probe.to_dict("records"), "logreg_seconds": round(probe_seconds, 1),
        "note": "seconds: a whole run (copy of the LM, training, dev evaluations, one test "
                "evaluation); fit_seconds: training with its dev evaluations"})
    return write_json(out, doc)


if __name__ == "__main__":
    main()
