"""Which head rate and warm-up make notebook 11's adversarial POS head *learn* at λ = 0, and which
INLP solver settings make every INLP probe converge — the sweep behind AmnesicSettings.

At the old setting (the head at the encoder's rate 1e-4, 32 joint steps with warm-up) the head
read 0.089 at λ = 0, below the 0.177 UPOS majority rate: reversing its gradient showed nothing.
Part ``adversary`` runs, on 11's classroom data (MiniLM, 500 TREC-6 questions, 1,500 UD
sentences for the head, the fresh probe on 400/200 others), ``adversarial_finetune`` at λ = 0 for
each ``--head-lr`` × ``--warmup`` and seed, and writes the head's accuracy, the fresh probe's, the
majority rate and the seconds. Part ``inlp`` runs INLP on 11's SmolLM2 next-word positions for
each ``--inlp-max-iter`` (one subset seed) and writes the curve, each probe's lbfgs iterations
and the seconds. Runs single-threaded (a shared 2-core machine); re-running skips rows it has.

    python -m benchmarks.adversary_budget adversary --head-lr 1e-4 1e-3 1e-2 --warmup 0 50
    python -m benchmarks.adversary_budget inlp --inlp-max-iter 100 1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from tutorial_lib import backbones, config, runtime, tasks
from tutorial_lib.methods.probing import amnesic, inlp, probing
from tutorial_lib.methods.probing.settings import AmnesicSettings

RESULTS = Path(__file__).resolve().parent / "results" / "adversary_budget.json"


def sentences(settings: AmnesicSettings) -> dict[str, probing.Sentences]:
    """Notebook 11's UD slices (its cell 4) and the adversary's probe-test sentences (cell 16)."""
    cuts = [settings.train_sentences, settings.dev_sentences, settings.adv_sentences,
            settings.adv_probe_train]
    offsets = [sum(cuts[:i]) for i in range(len(cuts))]
    names = ["inlp_train", "inlp_dev", "adv", "probe_train"]
    out = {k: probing.load_sentences("train", n, seed=0, offset=o)
           for k, n, o in zip(names, cuts, offsets)}
    out["probe_test"] = probing.load_sentences("test", settings.adv_probe_test, seed=2)
    return out


def adversary(args, settings: AmnesicSettings, scale: str, rows: list[dict]) -> list[dict]:
    s = sentences(settings)
    task = tasks.load_task("trec", train_examples=settings.adv_train_examples)
    encoder = backbones.load_backbone(settings.adv_backbone, scale)
    y_tr = np.concatenate([np.asarray(u) for u in s["probe_train"].upos])
    y_te = np.concatenate([np.asarray(u) for u in s["probe_test"].upos])
    majority = probing.majority_rate(y_tr, y_te)
    for lam in args.lambdas:
        for lr in args.head_lr:
            for warm in args.warmup:
                for seed in args.seeds:
                    key = dict(part="adversary", head_lr=lr, warmup=warm, lambda_=lam, seed=seed)
                    if any(all(r.get(k) == v for k, v in key.items()) for r in rows):
                        continue
                    t0 = time.perf_counter()
                    run = amnesic.adversarial_finetune(
                        encoder, task, s["adv"], s["probe_train"], s["probe_test"],
                        settings.budget, lambda_=lam, seed=seed,
                        adv_batch_size=settings.adv_batch_size, adv_weight=settings.adv_weight,
                        head_lr=lr, head_warmup_steps=warm, probe_max_iter=settings.probe_max_iter)
                    rows.append({**key, "head_accuracy": round(run.head_accuracy, 4),
                                 "fresh_probe_accuracy": round(run.probe_accuracy, 4),
                                 "main_accuracy": round(run.main_accuracy, 4),
                                 "majority": round(majority, 4), "train_seconds": round(run.seconds, 1),
                                 "seconds": round(time.perf_counter() - t0, 1)})
                    print(rows[-1], flush=True)
                    save(args.out, rows, args.scale)
    return rows


def inlp_part(args, settings: AmnesicSettings, scale: str, rows: list[dict]) -> list[dict]:
    s = sentences(settings)
    lm = backbones.load_backbone(settings.backbone, scale)
    kw = dict(mask_fraction=settings.mask_fraction, rounds=settings.mask_rounds)
    t0 = time.perf_counter()
    train_pos = amnesic.lm_positions(lm, s["inlp_train"], seed=0, **kw)
    dev_pos = amnesic.lm_positions(lm, s["inlp_dev"], seed=1, **kw)
    positions_seconds = round(time.perf_counter() - t0, 1)
    for prop in args.props:
        for max_iter in args.inlp_max_iter:
            key = dict(part="inlp", prop=prop, max_iter=max_iter, tol=args.inlp_tol, seed=0)
            if any(all(r.get(k) == v for k, v in key.items()) for r in rows):
                continue
            part = amnesic.subsample(train_pos, settings.inlp_positions, 0)
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", inlp.ProbeNotConverged)
                r = inlp.inlp(part.hidden, part.labels[prop], dev_pos.hidden, dev_pos.labels[prop],
                              tol=settings.inlp_tol, max_iterations=settings.inlp_max_iterations,
                              classifier=lambda m=max_iter: inlp.default_classifier(m, tol=args.inlp_tol))
            acc = r.accuracies
            rises = [round(b - a, 4) for a, b in zip(acc, acc[1:]) if b > a]
            rows.append({**key, "accuracies": [round(a, 4) for a in acc], "majority": round(r.majority, 4),
                         "directions": r.n_directions, "solver_iterations": r.solver_iterations,
                         "probes_converged": r.probes_converged, "not_converged_warnings": len(caught),
                         "largest_rise": max(rises, default=0.0),
                         "positions_seconds": positions_seconds,
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(rows[-1], flush=True)
            save(args.out, rows, args.scale)
    return rows


def save(path: Path, rows: list[dict], scale: str = "classroom") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"written": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                               "machine": runtime.describe(config.get_scale(scale)).splitlines(),
                               "threads": torch.get_num_threads(), "runs": rows}, indent=1))
    tmp.replace(path)  # atomic: an interrupted sweep keeps its earlier rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["adversary", "inlp"])
    parser.add_argument("--head-lr", type=float, nargs="+", default=[1e-4, 1e-3, 1e-2])
    parser.add_argument("--warmup", type=int, nargs="+", default=[0, 50])
    parser.add_argument("--lambdas", type=float, nargs="+", default=[0.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--inlp-max-iter", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--inlp-tol", type=float, default=1e-4)
    parser.add_argument("--props", nargs="+", default=["upos", "position"])
    parser.add_argument("--scale", default="classroom", help="classroom (the sweep); smoke: a check")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runtime.quiet()
    scale = config.get_scale(args.scale)
    settings = AmnesicSettings.at(scale)
    rows = json.loads(args.out.read_text())["runs"] if args.out.exists() else []
    run = adversary if args.part == "adversary" else inlp_part
    return run(args, settings, scale, rows)


if __name__ == "__main__":
    main()
