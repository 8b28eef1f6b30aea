"""Issue 59's probe, before notebook 12 is rewired: at 12's budget, does any adversary burn POS out
of MiniLM when judged out of sample, and how far must a movement-matched control go?

At ``AdversarialSettings`` for ``--scale`` (the classroom sizes: 640 stage sentences, 20 head-only
+ 40 joint steps), the sentences of 12's cell 6 (stage and probe: disjoint slices of UD train) and
UD dev / test sentences to score the probes on:

1. the original encoder: fresh linear and MLP UPOS probes (``burnout.fresh_probes``) and the
   majority tag on dev and test;
2. for each adversary (``--options``; the reversed gradient as now, then each remedy of
   ``adversaries.Adversary``): one stage run, seed 0 (``adversarial.intermediate_stage``) — the
   stage's seconds, its head's accuracy and loss on its own labels (and the confusion term), the
   fresh probes out of sample with the erasure premise, and linear CKA to the original encoder
   on the words of the first ``--movement-sentences`` UD test sentences (12's ``movement`` uses
   all 200; fewer keep the control's repeated checks cheap);
3. the movement-matched control (``burnout.matched_control``: a reversed head on random tags)
   trained until its CKA is within ``--tolerance`` of the arm with the lowest linear test probe
   (or ``--match``), checked every ``stage_steps / 8`` joint steps up to twice the stage's, the
   encoder's rate searched (``--control-tries`` runs, a further one only if it fits in
   ``--seconds``): its CKA at each knob value tried (rate, joint steps), its fresh probes, and the
   matched premise.

Each part is timed (``time.perf_counter``); the table is printed and written to
``benchmarks/results/burnout_probe.json`` (smoke: a temporary file, unless ``--out``). At
classroom it is sized to finish in ≤ 6 minutes on the 2-core machine.

    TUTORIAL_DATA_DIR=../shared/data .venv/bin/python -m benchmarks.burnout_probe
    TUTORIAL_DATA_DIR=../shared/data .venv/bin/python -m benchmarks.burnout_probe --scale smoke
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks import write_json
from benchmarks.erasure_arms import machine
from tutorial_lib import backbones, config, runtime
from tutorial_lib.methods.probing import adversarial, burnout, probing
from tutorial_lib.methods.probing.adversaries import Adversary
from tutorial_lib.methods.probing.settings import AdversarialSettings
from tutorial_lib.settings import Budget

RESULTS = Path(__file__).resolve().parent / "results" / "burnout_probe.json"


def adversaries_to_try(s: AdversarialSettings) -> dict[str, Adversary]:
    """The reversed gradient as now and each remedy alone, sized to the stage: re-initialised four
    times over the joint steps and retrained for the head-only warm-up's steps; an MLP of 256."""
    every = max(s.stage_steps // 4, 1)
    return {"reversed": Adversary(),
            "confusion": Adversary("confusion"),
            "re-init": Adversary(reinit_every=every),
            "mlp": Adversary(hidden=256),
            "confusion+re-init+mlp": Adversary("confusion", hidden=256, reinit_every=every)}


DEFAULT_OPTIONS = ("reversed", "confusion", "re-init", "mlp")
COLUMNS = ["arm", "adversary", "stage_seconds", "head_accuracy", "head_loss", "confusion", "reinits",
           "linear_dev", "linear_test", "mlp_dev", "mlp_test", "majority_dev", "majority_test",
           "erased", "erased_mlp", "cka"]


def rounded(row: dict) -> dict:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="classroom", choices=("smoke", "classroom"))
    parser.add_argument("--options", nargs="+", default=list(DEFAULT_OPTIONS),
                        help="adversaries to run (%(default)s; also: confusion+re-init+mlp)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="CKA tolerance of the control")
    parser.add_argument("--match", default=None, help="the arm the control matches (default: the "
                                                      "one with the lowest linear test probe)")
    parser.add_argument("--control-tries", type=int, default=2,
                        help="encoder rates the control may try")
    parser.add_argument("--movement-sentences", type=int, default=100,
                        help="UD test sentences whose words CKA is measured on")
    parser.add_argument("--seconds", type=float, default=330.0,
                        help="the probe's time budget: the control tries no further rate past it")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    runtime.quiet()
    start = time.perf_counter()
    seconds: dict[str, float] = {}

    def lap(part: str, since: float) -> None:
        seconds[part] = round(time.perf_counter() - since, 1)
        print(f"[{time.perf_counter() - start:6.1f} s] {part}: {seconds[part]} s", flush=True)

    t = time.perf_counter()
    scale = config.get_scale(args.scale)
    s = AdversarialSettings.at(scale)
    options = adversaries_to_try(s)
    unknown = sorted(set(args.options) - set(options))
    if unknown:
        parser.error(f"unknown options {unknown}: choose from {sorted(options)}")
    encoder = backbones.load_backbone(s.backbone, scale)
    stage = probing.load_sentences("train", s.stage_sentences, seed=0)
    probe_train = probing.load_sentences("train", s.probe_train, seed=0, offset=s.stage_sentences)
    splits = {"dev": probing.load_sentences("validation", s.probe_test, seed=0),
              "test": probing.load_sentences("test", s.probe_test, seed=2)}
    moving = probing.Sentences(*(getattr(splits["test"], f)[:args.movement_sentences]
                                 for f in ("tokens", "upos", "deprel", "sent_ids")))
    lap("load", t)

    probe_kw = dict(max_iter=s.probe_max_iter)
    t = time.perf_counter()
    original = burnout.fresh_probes(encoder, stage, probe_train, splits, **probe_kw)
    reference = burnout.word_states(encoder, moving).layers[0]
    lap("original probes", t)
    rows = [{"arm": "original encoder", "adversary": "—", **original.record(), "cka": 1.0}]
    premises = {}
    stage_kw = dict(steps=s.stage_steps, head_lr=s.head_lr, head_warmup_steps=s.head_warmup_steps,
                    batch_size=s.stage_batch_size)
    budget = Budget(lr=s.stage_lr, batch_size=s.stage_batch_size)
    for name in args.options:
        arm = adversarial.Arm(f"reversed POS ({name})", "gold", reverse=True, lambda_=s.lambda_,
                              adversary=options[name])
        t = time.perf_counter()
        moved, info = adversarial.intermediate_stage(encoder, arm, stage, budget, seed=0, **stage_kw)
        lap(f"{name}: stage", t)
        t = time.perf_counter()
        fresh = burnout.fresh_probes(moved, stage, probe_train, splits, **probe_kw)
        cka = adversarial.linear_cka(reference, burnout.word_states(moved, moving).layers[0])
        lap(f"{name}: probes and CKA", t)
        rows.append({"arm": name, "adversary": options[name].label,
                     "stage_seconds": round(info["seconds"], 1),
                     "head_accuracy": info["head_accuracy"], "head_loss": info["head_loss"],
                     "confusion": info.get("confusion"), "reinits": len(info["reinits"]),
                     **fresh.record(), "cka": cka})
        premises[name] = {"linear": fresh.premise.record(), "mlp": fresh.mlp_premise.record()}
        print(f"  head {info['head_accuracy']:.3f} (loss {info['head_loss']:.3f}); fresh linear "
              f"dev/test {fresh.linear['dev']:.3f}/{fresh.linear['test']:.3f}, MLP "
              f"{fresh.mlp['dev']:.3f}/{fresh.mlp['test']:.3f} vs majority "
              f"{fresh.floor['dev']:.3f}/{fresh.floor['test']:.3f}; CKA {cka:.3f}", flush=True)

    arms = rows[1:]
    target = (next(r for r in arms if r["arm"] == args.match) if args.match
              else min(arms, key=lambda r: r["linear_test"]))
    t = time.perf_counter()
    control = burnout.matched_control(
        encoder, target["cka"], stage, moving, budget, tolerance=args.tolerance,
        max_steps=2 * s.stage_steps, check_every=max(s.stage_steps // 8, 1),
        tries=args.control_tries, time_limit=args.seconds - 20 - (time.perf_counter() - start),
        seed=0, **{k: v for k, v in stage_kw.items() if k != "steps"})
    lap("control: stage and search", t)
    t = time.perf_counter()
    control_fresh = burnout.fresh_probes(control.backbone, stage, probe_train, splits, **probe_kw)
    lap("control: probes", t)
    rows.append({"arm": "movement-matched control", "adversary": "reversed gradient, random tags",
                 "stage_seconds": round(control.info["seconds"], 1),
                 "head_accuracy": control.info["head_accuracy"],
                 "head_loss": control.info["head_loss"], **control_fresh.record(), "cka": control.cka})
    premises["movement-matched control"] = {"linear": control_fresh.premise.record(),
                                            "mlp": control_fresh.mlp_premise.record()}

    table = pd.DataFrame([rounded(r) for r in rows], columns=COLUMNS)
    total = round(time.perf_counter() - start, 1)
    print("\n" + table.to_string(index=False))
    print(f"\ncontrol matched to {target['arm']!r} (CKA {target['cka']:.3f}): "
          + ", ".join(f"lr {c['lr']:.2g} step {c['steps']}: {c['cka']:.3f}" for c in control.tried))
    print(control.premise.text())
    for r in rows[1:]:
        print(f"{r['arm']:>26s}: {'erased' if r['erased'] else 'POS still readable'} out of sample "
              f"(linear test {r['linear_test']:.3f}, MLP test {r['mlp_test']:.3f}, majority "
              f"{r['majority_test']:.3f})")
    print(f"total {total} s")
    out = args.out or (RESULTS if scale.name != "smoke" else
                       Path(tempfile.gettempdir()) / "burnout_probe_smoke.json")
    doc = write_json(out, {
        "machine": machine(), "scale": scale.name,
        "sizes": {k: getattr(s, k) for k in ("backbone", "stage_sentences", "stage_steps",
                                             "head_warmup_steps", "stage_lr", "head_lr", "lambda_",
                                             "stage_batch_size", "probe_train", "probe_test",
                                             "probe_max_iter")},
        "dev_test_sentences": {k: len(v) for k, v in splits.items()},
        "cka_sentences": len(moving),
        "rows": [rounded(r) for r in rows],
        "control": {"matches": target["arm"], "target_cka": target["cka"],
                    "tolerance": args.tolerance, "tried": control.tried, "cka": control.cka,
                    "lr": control.info["lr"], "steps": control.info["steps"],
                    "premise": control.premise.record()},
        "erasure_premises": premises,
        "seconds": seconds, "total_seconds": total})
    print(f"written: {out}")
    return doc


if __name__ == "__main__":
    main()
