"""The gpu scale's time per notebook on one GPU: measured where a GPU run of it exists, rescaled to
today's settings where those changed since, and "not measured" elsewhere (never guessed).

    python -m benchmarks.gpu_budget            # the table, from results/gpu/

01 is rescaled by its steps: its run records each objective's steps and seconds, and the rest of
the notebook (tokenizer, encoding, evaluation, generation) is its wall time less those; today's
``PretrainingSettings.at("gpu")`` steps at the same seconds per step give the estimate. The README's
gpu column and tests/test_gpu_budget.py read this.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tutorial_lib.pretraining_settings import PretrainingSettings  # noqa: E402

RESULTS = REPO / "results" / "gpu"
LOAN_SECONDS = 15 * 60  # a GPU loan: 15 device-minutes, the machine's start (1-2 min) included


def pretraining_estimate(results: Path = RESULTS) -> dict:
    """01 at today's gpu settings from its measured run: seconds per step of each objective."""
    doc = json.loads((results / "01_pretraining.json").read_text())
    wall = json.loads((results / "wall_times.json").read_text())["01_pretraining"]
    rows = {r["objective"]: r for r in doc["tables"]["pretraining"]["records"]}
    measured = {"causal": rows["causal LM"], "mlm": rows["masked LM"]}
    rest = wall - sum(r["seconds"] for r in measured.values())
    pretrain = PretrainingSettings.at("gpu")
    steps = {k: pretrain.steps_for(k) for k in measured}
    seconds = {k: steps[k] * r["seconds"] / r["steps"] for k, r in measured.items()}
    return {"measured_seconds": wall, "measured_steps": {k: int(r["steps"]) for k, r in measured.items()},
            "steps": steps, "rest_seconds": round(rest, 1),
            "estimate_seconds": round(rest + sum(seconds.values()), 1), "date": doc["date"],
            "hardware": doc["environment"].splitlines()[1].split(":", 1)[1].strip()}


def table(results: Path = RESULTS) -> list[dict]:
    """Per notebook 01-15: measured seconds, today's estimate, or None (not measured)."""
    times = results / "wall_times.json"
    wall = json.loads(times.read_text()) if times.exists() else {}
    rows = []
    for nb in sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        row = {"notebook": nb, "measured_seconds": wall.get(nb), "estimate_seconds": wall.get(nb)}
        if nb == "01_pretraining" and nb in wall:
            row["estimate_seconds"] = pretraining_estimate(results)["estimate_seconds"]
        rows.append(row)
    return rows


if __name__ == "__main__":
    est = pretraining_estimate()
    print(f"01 measured {est['measured_seconds']:.0f} s at steps {est['measured_steps']} "
          f"({est['hardware']}, {est['date']}); at today's steps {est['steps']}: "
          f"{est['estimate_seconds']:.0f} s")
    for row in table():
        m, e = row["measured_seconds"], row["estimate_seconds"]
        print(f"{row['notebook']:<32} " + ("not measured on a GPU" if m is None else
                                             f"measured {m:.0f} s, today's settings ≈ {e:.0f} s"))
