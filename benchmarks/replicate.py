"""Held-out replication: does every headline effect of ``effects.json`` hold on seeds nobody tuned for?

The first run (``results/<scale>/``, the committed one) chose its settings while looking at its
own seeds. This re-runs the notebooks with the **held-out seed set** — every fine-tuning seed and
few-shot split moved to seed + 1000 (``tutorial_lib.config.apply_seed_set``; chosen once, before
any held-out result existed, and written in the output) — into ``results/<scale>/held-out/``,
pairs each effect of the first run with the same effect of the held-out run (by notebook,
backbone, metric, method and baseline) and writes ``results/<scale>/replication.json`` and the
"Held-out replication" section of ``RESULTS.md``.

**Replicated**, defined before looking: the first run's verdict was "better" or "worse", the
held-out Δ has the same sign, and the held-out 95 % CI excludes zero (i.e. the held-out verdict is
the same). Everything else that had a verdict is **not replicated**; an effect the first run found
within noise has nothing to replicate (reported, not counted); a void comparison (baseline at its
floor, a method that did not train, a failed premise) in either run is reported as void, and an
**untestable** one (the two arms were the same runs, or gave identical results on every seed) as
untestable — its own category, never "not replicated". Beside both runs the
**pooled test** over both seed sets: for paired t-tests the paired t-test over all 2n per-seed
differences (reconstructed exactly from each run's n, Δ and standard error), otherwise an
inverse-variance weighted (fixed-effect) z-test of the two Δs. With three seeds a verdict can flip
on new seeds while the direction holds; the pooled test says what six seeds say together.

    python -m benchmarks.replicate [--scale classroom] [--run] [--only 02 09] [--seeds held-out|N]

``--seeds N`` replicates on a seed set of your own (every seed + N) instead, into
``results/<scale>/seeds-N/`` with its record there. ``--run`` executes the notebooks first
(``scripts/run_notebooks.py`` with ``TUTORIAL_SEEDS=held-out`` or N; classroom: ≈ 80 min on 2
cores); without it the saved results are compared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tutorial_lib import config, results, stats
from tutorial_lib.methods import references
from tutorial_lib.ops import report as reports
from tutorial_lib.runtime import atomic_write

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT_DIR = results.HELD_OUT_DIR
SEED_RULE = (f"held-out seed = seed + {config.HELD_OUT_OFFSET} for every fine-tuning seed and "
             "few-shot split (tutorial_lib.config.apply_seed_set, $TUTORIAL_SEEDS=held-out); "
             "the pretrained models are the same")
DEFINITION = ("An effect **replicated** when the first run called it \"better\" or \"worse\", the "
              "held-out run's Δ has the same sign and its 95 % CI excludes zero. The **pooled** "
              "column tests both seed sets together (paired t over all per-seed differences where "
              "both runs were paired, else an inverse-variance weighted z-test of the two Δs); its "
              "verdict keeps a guard that failed in either run, and beside a source's number it says "
              "\"below our MDE\" only where the pooled CI does not exclude that number. An "
              "effect within noise in the first run has nothing to replicate; a void comparison "
              "(baseline at its floor, a method that did not train, a failed premise) is reported "
              "as void, and one whose arms were the same runs as untestable (its own category).")
CLAIMED = ("better", "worse")
VOID_PREFIXES = ("void", stats.DID_NOT_TRAIN)
UNTESTABLE_PREFIX = "untestable"
effect_key = results.effect_key  # what pairs an effect of the first run with its held-out twin
ci_of = results.ci_of  # the 95 % CI of an effect record (its ``ci95`` string), or None


def verdict_of(effect: Mapping) -> str:
    """An effect's verdict, read as the premises read it today: a paired comparison saved before
    identical arms were detected (Δ = 0 with the CI [+0.00, +0.00]) is untestable."""
    verdict = str(effect.get("verdict", ""))
    if (verdict == stats.WITHIN_NOISE and effect.get("test") == "paired t"
            and effect.get("delta") == 0 and ci_of(effect) == (0.0, 0.0)):
        return stats.UNTESTABLE_IDENTICAL
    return verdict


def pooled(first: Mapping, held: Mapping) -> dict | None:
    """The test over both seed sets (module docstring, :func:`tutorial_lib.results.pooled_effect`),
    each run's verdict read as :func:`verdict_of` reads it (a failed guard in either stands), and
    where ``references.SOURCE_EFFECTS`` has the source's number, what the pooled test says of it
    (``source_vs_pooled``: "below our MDE" only where the pooled CI does not exclude it)."""
    source = references.source_effect(first)
    return results.pooled_effect({**first, "verdict": verdict_of(first)},
                                 {**held, "verdict": verdict_of(held)},
                                 None if source is None else source.delta)


def status(first: Mapping, held: Mapping | None) -> str:
    """"replicated" / "not replicated" by the definition, or why neither applies."""
    verdict = verdict_of(first)
    if verdict.startswith(UNTESTABLE_PREFIX):
        return f"untestable in the first run ({verdict})"
    if verdict.startswith(VOID_PREFIXES):
        return f"void in the first run ({verdict})"
    if verdict not in CLAIMED:
        return f"nothing to replicate (first run: {verdict})"
    if held is None:
        return "missing in the held-out run"
    if verdict_of(held).startswith(UNTESTABLE_PREFIX):
        return f"untestable in the held-out run ({verdict_of(held)})"
    if str(held.get("verdict", "")).startswith(VOID_PREFIXES):
        return f"void in the held-out run ({held['verdict']})"
    ci = ci_of(held)
    excludes_zero = (ci[0] > 0 or ci[1] < 0) if ci else (held.get("p") is not None
                                                         and held["p"] < stats.ALPHA)
    same_sign = math.copysign(1, float(first["delta"])) == math.copysign(1, float(held["delta"]))
    return "replicated" if same_sign and excludes_zero and held["delta"] != 0 else "not replicated"


def _summary(effect: Mapping | None) -> dict | None:
    if effect is None:
        return None
    return {k: effect.get(k) for k in ("delta", "ci95", "p", "p_holm", "test", "n")} | {
        "verdict": verdict_of(effect), "premises": effect.get("premises", [])}


def _seeds(directory: Path, notebook: str) -> object:
    path = directory / f"{notebook}.json"
    return json.loads(path.read_text()).get("seeds") if path.exists() else None


def _flat(seeds: object) -> set[int]:
    if isinstance(seeds, Mapping):
        return set().union(*(_flat(v) for v in seeds.values())) if seeds else set()
    if isinstance(seeds, (list, tuple)):
        return {int(s) for s in seeds if isinstance(s, (int, float))}
    return set()


def replicate(first: Sequence[Mapping], held_out: Sequence[Mapping], *,
              first_seeds: Mapping[str, object] | None = None,
              held_out_seeds: Mapping[str, object] | None = None) -> dict:
    """The replication record of every effect in ``first`` (effect records as in ``effects.json``)
    against ``held_out``. ``*_seeds``: ``{notebook: the seeds its results recorded}``; a notebook
    whose held-out run used any seed of its first run is not a held-out replication, and its
    effects say so."""
    first_seeds, held_out_seeds = first_seeds or {}, held_out_seeds or {}
    twins = {effect_key(e): e for e in held_out}
    rows = []
    for e in first:
        held = twins.get(effect_key(e))
        nb = str(e.get("notebook", ""))
        shared = _flat(first_seeds.get(nb)) & _flat(held_out_seeds.get(nb))
        row_status = (f"not held out (seeds {sorted(shared)} in both runs)" if held is not None
                      and shared else status(e, held))
        rows.append({"key": effect_key(e), "notebook": nb, "backbone": e.get("backbone"),
                     "method": e.get("method"), "baseline": e.get("baseline"),
                     "metric": e.get("metric"), "unit": e.get("unit"), "expected": e.get("expected"),
                     "first": _summary(e), "held_out": _summary(held),
                     "pooled": pooled(e, held) if held is not None else None,
                     "status": row_status})
    notebooks = list(dict.fromkeys(r["notebook"] for r in rows))
    counts: dict[str, int] = {}
    for r in rows:
        label = r["status"] if r["status"] in ("replicated", "not replicated") else r["status"].split(
            " (")[0]
        counts[label] = counts.get(label, 0) + 1
    return {"definition": DEFINITION, "seed_rule": SEED_RULE,
            "seeds": {nb: {"first": first_seeds.get(nb), "held_out": held_out_seeds.get(nb)}
                      for nb in notebooks},
            "counts": counts, "effects": rows}


def _effects(directory: Path) -> list[dict]:
    path = directory / reports.EFFECTS_NAME
    if path.exists():
        return json.loads(path.read_text())
    names = sorted(p.stem for p in directory.glob("[0-9][0-9]_*.json"))
    return reports.effects_of(directory, names)


def write_report_section(directory: Path) -> Path | None:
    """Put (or replace) the "Held-out replication" section of ``<directory>/RESULTS.md``."""
    path = directory / reports.REPORT_NAME
    section = reports.replication_markdown(directory)
    if not path.exists() or not section:
        return None
    text = path.read_text()
    heading = "## Held-out replication\n"
    if heading in text:
        before, rest = text.split(heading, 1)
        after = rest[rest.index("\n## "):] if "\n## " in rest else ""
        text = before + section + after
    elif "\n## Contents\n" in text:
        before, after = text.split("\n## Contents\n", 1)
        text = before + "\n" + section + "\n## Contents\n" + after
    else:
        text = text + "\n" + section
    return atomic_write(path, text)


def run_held_out(scale: str, held_dir: Path, only: Sequence[str] | None, seeds: str = "held-out") -> int:
    """Execute the notebooks with the seed set ``seeds`` (held-out, or an integer offset) into
    ``held_dir`` (never in place). The executed copies keep only what was printed
    (``scripts/strip_outputs.py``) and stay outside the tree (git-ignored: replication reads only
    ``<notebook>.json``), so the held-out run does not double the tracked tree every device call
    carries (issue 63)."""
    env = {**os.environ, config.SEEDS_ENV_VAR: seeds}
    cmd = [sys.executable, str(ROOT / "scripts" / "run_notebooks.py"), "--scale", scale,
           "--out", str(held_dir), "--strip-rich-outputs", *(["--only", *only] if only else [])]
    return subprocess.call(cmd, env=env, cwd=ROOT)


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=os.environ.get(config.SCALE_ENV_VAR, "classroom"))
    parser.add_argument("--first", type=Path, help="the first run's results (default results/<scale>)")
    parser.add_argument("--held-out", type=Path, help="the held-out run's results "
                        "(default results/<scale>/held-out)")
    parser.add_argument("--run", action="store_true", help="execute the notebooks with the held-out "
                        "seeds first")
    parser.add_argument("--only", nargs="*",
                        help="re-run only these notebooks (number prefixes, e.g. 02 09); "
                        "the record covers them all")
    parser.add_argument("--seeds", default="held-out",
                        help="the seed set to replicate on: held-out (the committed one), or an "
                        "integer offset of your own (e.g. 2000: results in results/<scale>/seeds-2000, "
                        "the record beside them; the committed report is left alone)")
    args = parser.parse_args(argv)
    config.offset_of(args.seeds)  # a bad value: one clear error before anything runs
    own = args.seeds != "held-out"
    first_dir = (args.first or ROOT / "results" / args.scale).resolve()
    held_dir = (args.held_out or first_dir / (f"seeds-{args.seeds}" if own else HELD_OUT_DIR)).resolve()
    if args.run and run_held_out(args.scale, held_dir, args.only, args.seeds) != 0:
        print("some held-out notebooks failed; comparing what was saved", file=sys.stderr)
    # ``--only`` picks what is re-run; the record always covers every effect of the first run
    # (one not re-run yet reads "missing in the held-out run"), so a partial re-run never drops
    # the others' replication
    first = _effects(first_dir)
    held = _effects(held_dir) if held_dir.exists() else []
    notebooks = list(dict.fromkeys(str(e.get("notebook", "")) for e in first))
    record = replicate(first, held,
                       first_seeds={nb: _seeds(first_dir, nb) for nb in notebooks},
                       held_out_seeds={nb: _seeds(held_dir, nb) for nb in notebooks})

    def shown(path: Path) -> str:
        return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)

    record = {"scale": args.scale,
              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "first_dir": shown(first_dir), "held_out_dir": shown(held_dir), **record}
    out = atomic_write((held_dir if own else first_dir) / reports.REPLICATION_NAME,
                       json.dumps(record, indent=1))
    if not own:
        write_report_section(first_dir)
    print(f"{shown(out)}: " + ", ".join(f"{k}: {v}" for k, v in record["counts"].items()))
    return record


if __name__ == "__main__":
    main()
