"""What notebook 11's rebuild (issue 36) rests on: why INLP did not erase UPOS, what LEACE does on
the same states, and what the five arms' intermediate stage does to MiniLM — measured at the
classroom scale before the notebook is written.

Part ``erasure`` (SmolLM2's next-word positions of 11's cell 4, the UD slices of its settings):
for each property, the INLP probe's C chosen on dev from ``--cs`` (``inlp.choose_C``), INLP with
that C and ``--inlp-positions`` training positions run to its stopping rule (cap
``--max-iterations``), LEACE fitted on the same positions, and for each eraser: directions removed,
the variance removed, and a fresh probe (its C chosen on dev) trained (a) on the eraser's own
positions and (b) on ``--other-positions`` other training positions, scored on dev and test
against the majority rates.

Part ``out-of-sample`` (issue 58: an erasure judged where the eraser was not fitted): positions
of ``--train-sentences`` UD train sentences; for each seed, ``--probe-positions`` of them held
apart for the fresh probe, LEACE (and INLP up to ``--inlp-max`` positions) fitted on each of
``--fit-sizes`` of the rest; the fresh probe (C chosen on dev) trained on the held-apart erased
positions (out of sample) and on the eraser's own (in sample), scored on dev and test against the
majority rates, and what the edit costs the LM's next-word accuracy on test.

Part ``arms`` (MiniLM, 11's adversary sentences): each arm of ``adversarial.ARMS`` — and the
reversed arm at each ``--lambdas`` — for ``--steps`` joint steps after ``--warmup`` head-only
steps; the head's accuracy on its own labels, a fresh UPOS probe (400 / 200 sentences), linear
CKA and mean cosine to the original encoder, seconds.

    python -m benchmarks.erasure_arms erasure
    python -m benchmarks.erasure_arms arms --lambdas 0.1 0.3 1.0
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

from tutorial_lib import backbones, config, runtime
from tutorial_lib.methods.probing import adversarial, amnesic, inlp, probing
from tutorial_lib.methods.probing.settings import AdversarialSettings, AmnesicSettings
from tutorial_lib.settings import Budget

RESULTS = Path(__file__).resolve().parent / "results" / "erasure_arms.json"


def machine() -> str:
    """The CPU's model name (Linux), else the architecture."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    return platform.machine()


def _save(part: str, rows: list[dict], args: argparse.Namespace) -> None:
    blob = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    blob[part] = {"date": dt.date.today().isoformat(), "machine": machine(),
                  "scale": "classroom", "arguments": {k: v for k, v in vars(args).items() if k != "part"},
                  "rows": rows}
    RESULTS.write_text(json.dumps(blob, indent=1) + "\n")


def erasure(args: argparse.Namespace) -> list[dict]:
    scale = config.get_scale("classroom")
    s = AmnesicSettings.at(scale)
    lm = backbones.load_backbone(s.backbone, scale)
    cuts = [s.train_sentences, s.dev_sentences]
    train_s = probing.load_sentences("train", cuts[0], seed=0)
    dev_s = probing.load_sentences("train", cuts[1], seed=0, offset=cuts[0])
    test_s = probing.load_sentences("test", s.test_sentences, seed=1)
    kw = dict(mask_fraction=s.mask_fraction, rounds=s.mask_rounds)
    train, dev, test = (amnesic.lm_positions(lm, x, seed=i, **kw)
                        for i, x in enumerate((train_s, dev_s, test_s)))
    rows = []
    for prop in ("upos", "position"):
        part = amnesic.subsample(train, args.inlp_positions, 0)
        other = amnesic.subsample(train, args.other_positions, 7)
        y, yd, yt = part.labels[prop], dev.labels[prop], test.labels[prop]
        C, grid = inlp.choose_C(part.hidden, y, dev.hidden, yd, tuple(args.cs))
        t = time.perf_counter()
        run = inlp.inlp(part.hidden, y, dev.hidden, yd, tol=s.inlp_tol, max_iterations=args.max_iterations,
                        classifier=lambda C=C: inlp.default_classifier(1000, C=C))
        inlp_seconds = time.perf_counter() - t
        t = time.perf_counter()
        lea = inlp.leace(part.hidden, y)
        leace_seconds = time.perf_counter() - t
        base = {"property": prop, "positions": len(part), "dev_accuracy_by_C": grid, "C": C,
                "majority_dev": inlp.majority_rate(y, yd), "majority_test": inlp.majority_rate(y, yt)}
        for eraser, seconds, extra in ((inlp.inlp_eraser(run), inlp_seconds,
                                        {"iterations": run.n_iterations, "converged": run.converged,
                                         "curve": run.accuracies}),
                                       (lea, leace_seconds, {})):
            probes = {}
            for name, fit_on in (("own positions", part), ("other positions", other)):
                X = eraser(fit_on.hidden)
                best, _ = inlp.choose_C(X, fit_on.labels[prop], eraser(dev.hidden), yd, tuple(args.cs))
                probes[name] = inlp.probe_after(
                    eraser, fit_on.hidden, fit_on.labels[prop],
                    {"dev": (dev.hidden, yd), "test": (test.hidden, yt)},
                    classifier=lambda C=best: inlp.default_classifier(1000, C=C)) | {"C": best}
            rows.append(base | extra | {
                "eraser": eraser.name, "directions": eraser.n_directions,
                "variance_removed": inlp.variance_removed(train.hidden, eraser.P),
                "fresh_probe": probes, "seconds": round(seconds, 1)})
            print(json.dumps(rows[-1] | {"curve": None}), flush=True)
    return rows


def out_of_sample(args: argparse.Namespace) -> list[dict]:
    import numpy as np

    scale = config.get_scale("classroom")
    s = AmnesicSettings.at(scale)
    lm = backbones.load_backbone(s.backbone, scale)
    train_s = probing.load_sentences("train", args.train_sentences, seed=0)
    dev_s = probing.load_sentences("train", s.dev_sentences, seed=0, offset=args.train_sentences)
    test_s = probing.load_sentences("test", s.test_sentences, seed=1)
    t = time.perf_counter()
    train, dev, test = (amnesic.lm_positions(lm, x, seed=i) for i, x in enumerate((train_s, dev_s, test_s)))
    print(f"positions {len(train)} / {len(dev)} / {len(test)} in {time.perf_counter() - t:.0f} s", flush=True)
    y_dev, y_test = dev.labels["upos"], test.labels["upos"]
    floor = {"dev": inlp.majority_rate(train.labels["upos"], y_dev),
             "test": inlp.majority_rate(train.labels["upos"], y_test)}
    splits = {"dev": (dev.hidden, y_dev), "test": (test.hidden, y_test)}
    vanilla = amnesic.lm_metrics(lm, test)["lm_accuracy"]
    rows = []
    for seed in args.seeds:
        order = np.random.default_rng(seed).permutation(len(train))
        probe_idx = order[:args.probe_positions]
        Xp, yp = train.hidden[probe_idx], train.labels["upos"][probe_idx]
        for n in args.fit_sizes:
            fit_idx = order[args.probe_positions:args.probe_positions + n]
            X, y = train.hidden[fit_idx], train.labels["upos"][fit_idx]
            classes = int(max(train.labels["upos"].max(), y_dev.max(), y_test.max())) + 1
            erasers = [("LEACE", lambda X=X, y=y, c=classes: inlp.leace(X, y, c))]
            if n <= args.inlp_max:
                C, _ = inlp.choose_C(X, y, dev.hidden, y_dev, tuple(args.cs))
                erasers.append(("INLP", lambda C=C, X=X, y=y: inlp.inlp_eraser(inlp.inlp(
                    X, y, dev.hidden, y_dev, tol=s.inlp_tol, max_iterations=args.max_iterations,
                    classifier=lambda: inlp.default_classifier(1000, C=C, tol=1e-3)))))
            for name, make in erasers:
                t = time.perf_counter()
                eraser = make()
                seconds = time.perf_counter() - t
                out = inlp.probe_after(eraser, Xp, yp, splits, grid=tuple(args.cs), tol=1e-3)
                own = (inlp.probe_after(eraser, X, y, splits, grid=tuple(args.cs), tol=1e-3)
                       if n <= args.inlp_max else None)  # in sample: costly on many positions
                lm_acc = amnesic.lm_metrics(lm, test, eraser.P, shift=eraser.shift)["lm_accuracy"]
                rows.append({"seed": seed, "eraser": name, "fit_positions": int(n),
                             "probe_positions": int(args.probe_positions),
                             "directions": eraser.n_directions, "majority": floor,
                             "out_of_sample": out, "in_sample": own,
                             "lm_accuracy": lm_acc, "vanilla_lm_accuracy": vanilla,
                             "variance_removed": inlp.variance_removed(test.hidden, eraser.P),
                             "seconds": round(seconds, 1)})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def arms(args: argparse.Namespace) -> list[dict]:
    scale = config.get_scale("classroom")
    s = AdversarialSettings.at(scale)
    enc = backbones.load_backbone(s.backbone, scale)
    stage = probing.load_sentences("train", args.sentences, seed=0)
    probe_train = probing.load_sentences("train", 400, seed=0, offset=args.sentences)
    probe_test = probing.load_sentences("test", 200, seed=2)
    budget = Budget(lr=s.stage_lr, batch_size=s.stage_batch_size)
    before = adversarial.final_probe_accuracy(enc, probe_train, probe_test)
    rows = [{"arm": "original encoder", "fresh_probe": before}]
    reversed_arm = next(a for a in adversarial.ARMS if a.reverse)
    todo = [a for a in adversarial.ARMS if a.labels is not None and not a.reverse]
    todo += [replace(reversed_arm, lambda_=lam) for lam in args.lambdas]
    for arm in todo:
        t = time.perf_counter()
        moved, info = adversarial.intermediate_stage(
            enc, arm, stage, budget, steps=args.steps, head_lr=s.head_lr,
            head_warmup_steps=args.warmup, batch_size=s.stage_batch_size, seed=0)
        rows.append({"arm": arm.name, "lambda": arm.lambda_, "head_accuracy": info["head_accuracy"],
                     "fresh_probe": adversarial.final_probe_accuracy(moved, probe_train, probe_test),
                     **adversarial.movement(enc, moved, probe_test),
                     "seconds": round(time.perf_counter() - t, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    e = sub.add_parser("erasure")
    e.add_argument("--cs", type=float, nargs="+", default=[0.001, 0.01, 0.1, 1.0])
    e.add_argument("--inlp-positions", type=int, default=5000)
    e.add_argument("--other-positions", type=int, default=10000)
    e.add_argument("--max-iterations", type=int, default=60)
    o = sub.add_parser("out-of-sample")
    o.add_argument("--train-sentences", type=int, default=4000)
    o.add_argument("--probe-positions", type=int, default=5000)
    o.add_argument("--fit-sizes", type=int, nargs="+", default=[8000, 16000, 32000, 56000])
    o.add_argument("--inlp-max", type=int, default=8000)
    o.add_argument("--max-iterations", type=int, default=60)
    o.add_argument("--seeds", type=int, nargs="+", default=[0])
    o.add_argument("--cs", type=float, nargs="+", default=[0.001, 0.01, 0.1, 1.0])
    a = sub.add_parser("arms")
    a.add_argument("--lambdas", type=float, nargs="+", default=[0.1, 1.0])
    a.add_argument("--steps", type=int, default=100)
    a.add_argument("--warmup", type=int, default=50)
    a.add_argument("--sentences", type=int, default=800)
    args = parser.parse_args(argv)
    runtime.quiet()
    run = {"erasure": erasure, "out-of-sample": out_of_sample, "arms": arms}[args.part]
    _save(args.part, run(args), args)


if __name__ == "__main__":
    main()
