"""Which steps and rate grids for notebook 09, read without its splits and without a test set.

Trains each configuration (a method at a rate; DART's vectors at a multiple of it) on *design*
splits — LM-BFF-style K = 16 splits with seeds that are neither LM-BFF's (13 … 100) nor the
held-out run's (+1000) — and scores it every ``--every`` steps on 300 SST-2 **training** sentences
outside the split (a larger dev set: never the test set, which all splits share), beside the
prompt's zero-shot accuracy and the majority rate on the same sentences. The curve of each run
says how many steps a method needs and which rates learn; 09's settings were read from it
(``DARTSettings``' comments).

    python -m benchmarks.dart_design --splits 2013 2021 2042 --steps 32 --every 8

The label vectors' own rate (09's ``dart_label_scale``) was read from a second sweep at 09's
steps and fluency rows (``results/dart_design_labels.json``)::

    python -m benchmarks.dart_design --steps 16 --fluency-rows 2 \
        --out benchmarks/results/dart_design_labels.json --configs "DART 1e-4 x100" \
        "DART 1e-4 x100 labels x1" "DART 1e-4 x100 labels x10" "DART 1e-4 x100 labels fixed"

How many layers must train (09's ``trainable_layers``) was read from a third set of sweeps
(``results/dart_design_depth.json``, each with its command): the top 6 layers at lower rates,
every layer, the top 10 to 30, and 09's depth with DART, e.g.::

    python -m benchmarks.dart_design --steps 8 --every 4 --trainable-layers 15 --fluency-rows 2 \
        --out depth.json --configs "manual 1e-4" "DART 1e-4 x100 labels x10"

The default configurations are those of the committed result. One process, the machine's threads.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from benchmarks import dart_fields, write_json
from tutorial_lib import backbones, config, runtime, tasks
from tutorial_lib.methods.prompts import dart, fewshot, prompt_lms, prompting
from tutorial_lib.methods.prompts.settings import DARTSettings
from tutorial_lib.tasks import FewShotSplit

RESULTS = Path(__file__).resolve().parent / "results" / "dart_design.json"
# name: (method, run's rate, multiple of the run's rate for the head or DART's vectors[, the label
# vectors' own multiple: 0 keeps them their words])
CONFIGS = {
    "head A": ("head", 0.0001, 100),
    "head B": ("head", 0.0003, 100),
    "head C": ("head", 0.0001, 30),
    "manual 1e-5": ("manual", 1e-05, None),
    "manual 3e-5": ("manual", 3e-05, None),
    "manual 1e-4": ("manual", 0.0001, None),
    "manual 2e-4": ("manual", 0.0002, None),
    "manual 3e-4": ("manual", 0.0003, None),
    "manual 1e-3": ("manual", 0.001, None),
    "DART 1e-4 x30": ("dart", 0.0001, 30),
    "DART 3e-4 x30": ("dart", 0.0003, 30),
    "DART 1e-4 x100": ("dart", 0.0001, 100),
    "DART 2e-4 x100": ("dart", 0.0002, 100),
    "DART 1e-4 x100 labels x1": ("dart", 0.0001, 100, 1),
    "DART 1e-4 x100 labels x10": ("dart", 0.0001, 100, 10),
    "DART 2e-4 x100 labels x10": ("dart", 0.0002, 100, 10),
    "DART 1e-4 x100 labels x30": ("dart", 0.0001, 100, 30),
    "DART 1e-4 x100 labels x50": ("dart", 0.0001, 100, 50),
    "DART 1e-4 x100 labels fixed": ("dart", 0.0001, 100, 0),
}
# the configurations of the committed results/dart_design.json
DEFAULT = ["head A", "head B", "head C", "manual 1e-4", "manual 3e-4", "manual 1e-3",
           "DART 1e-4 x30", "DART 3e-4 x30", "DART 1e-4 x100"]


def design_split(task, seed: int, k: int, size: int = 300) -> FewShotSplit:
    """The K-shot split of ``seed`` with its dev set replaced by ``size`` training sentences
    outside its train and dev sets (seeded), and no test set."""
    split = tasks.few_shot(task, k, seed)
    used = {r["text"] for r in split.train + split.dev}
    pool = tasks.few_shot_pool(task)  # SST-2: its whole training sentences, as the splits
    texts, labels = pool["text"], pool["label"]
    free = [i for i in range(len(texts)) if texts[i] not in used]
    rows = [{"text": texts[i], "label": int(labels[i])} for i in random.Random(777).sample(free, size)]
    return FewShotSplit(split.task, split.k, split.seed, split.train, rows, rows, split.label_names)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, nargs="+", default=[2013, 2021, 2042])
    parser.add_argument("--configs", nargs="+", default=DEFAULT, choices=list(CONFIGS))
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--fluency-rows", type=int, default=4,
                        help="DART's fluency pass on this many rows of a batch (the committed "
                             "result: 4; 09 runs DARTSettings.fluency_rows)")
    parser.add_argument("--trainable-layers", type=int, default=None,
                        help="train this many top layers (0: every layer; default: 09's setting)")
    parser.add_argument("--scale", default="classroom", help="smoke: a quick check of the script")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    s = DARTSettings.at(scale)
    lm = prompting.load_prompt_lm(s.backbone, scale)
    backbones.forget_loaded()
    template = {"sst2": prompting.template_for(lm, "sst2")}
    words = {"sst2": prompting.choose_verbalizer(lm, prompting.verbalizer_candidates(lm, "sst2"))}
    k = s.trainable_layers if args.trainable_layers is None else (args.trainable_layers or None)
    shared = prompt_lms.FrozenPrefix(k) if k else False
    build = {
        "head": lambda x: fewshot.cls_method(lm, scale, trainable_layers=k, head_scale=x,
                                             pool=s.head_pool, frozen_states=bool(k)),
        "manual": lambda x: fewshot.prompt_method(lm, template, words, s.max_len, trainable_layers=k,
                                                  train_label_rows=s.prompt_label_rows,
                                                  frozen_states=bool(k)),
        "dart": lambda x, labels=None: dart.dart_method(
            lm, template, words, prompt_scale=x, label_scale=labels or None,
            train_labels=labels != 0, fluency_weight=s.fluency_weight,
            fluency_rows=args.fluency_rows, max_len=s.max_len, trainable_layers=k,
            prefix_words=True, frozen_states=shared)}
    task = tasks.load_task("sst2")
    rows, reference = [], {}
    for seed in args.splits:
        split = design_split(task, seed, s.k)
        positives = sum(r["label"] for r in split.dev) / len(split.dev)
        reference[seed] = {"majority": max(positives, 1 - positives), "zero_shot": fewshot.zero_shot(
            lm, split, template["sst2"], words["sst2"])["accuracy"]}
        for name in args.configs:
            method, lr, x, *labels = CONFIGS[name]
            t0 = time.perf_counter()
            run = fewshot.train_fewshot(build[method](x, *labels)(split), split, steps=args.steps,
                                        batch_size=s.batch_size, lr=lr, eval_every=args.every,
                                        evaluate_test=False)
            cos = dart.start_cosines(run.model) if method == "dart" else {}
            rows.append({"split": seed, "config": name, "method": method, "lr": lr, "scale": x,
                         "label_scale": labels[0] if labels else None,
                         "steps": [h["step"] for h in run.history.evals],
                         "design_dev_accuracy": [round(h["dev_accuracy"], 4) for h in run.history.evals],
                         "vector_cos": round(sum(cos.values()) / len(cos), 5) if cos else None,
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(rows[-1], flush=True)
    return write_json(args.out, {**dart_fields(s), "fluency_rows": args.fluency_rows,
                                 "design_dev": "300 SST-2 training sentences outside each split",
                                 "reference": reference, "runs": rows,
                                 "note": "seconds include scoring the 300 design-dev sentences "
                                         "at every evaluation"})


if __name__ == "__main__":
    main()
