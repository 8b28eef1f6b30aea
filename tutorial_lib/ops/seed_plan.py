"""The gpu scale's seeds, sized from the power analysis (issue 37, item 6).

For every comparison with a source's number (``references.SOURCE_EFFECTS``), the classroom run's
spread gives the runs that detect the source's Δ with 80 % power at α = 0.05 (the report's "runs
needed": :func:`tutorial_lib.ops.nulls.with_power`, ``stats.seeds_needed`` from the noncentral t).
**The classroom spread stands in for the gpu scale's**, which no run has measured yet: the gpu
scale trains on more data, which usually shrinks the spread between seeds, so the runs needed here
are if anything too many — a conservative plan.

A notebook's gpu seeds must reach the most runs that any of its source effects needs, where that
fits the budget: the notebook's seed-proportional part (every run that its ``seeds`` repeat) may take
:data:`SEED_BUDGET_SECONDS` of the gpu scale's :data:`NOTEBOOK_BUDGET_SECONDS` (``config``: "≤ 20 min
a notebook"), leaving the rest for loading, evaluation and the cells that run once. An effect that
needs more is "not reachable at this budget". ``tests/test_seed_plan.py`` holds every notebook's
gpu seeds to the plan, so lowering them fails.

What a seed costs on one GPU (:func:`seed_cost`), never the whole notebook:

* **measured** where the notebook has a gpu run (``results/gpu/<notebook>.json``): the seconds of
  its runs tables' uncached runs, per seed;
* **estimated** elsewhere (02–16 have not run at the gpu scale yet): the training steps that one
  seed repeats at today's gpu settings (:data:`STEPS`: steps × forward passes × layers), at the
  H200's measured seconds per layer-step — the one training step timed on a GPU for a model of this
  class, ours at the paper size (16 layers, 8 × 256 tokens, eager bf16, 1.6 % MFU: launch-bound, so
  its time is taken to scale with the layers a step runs; ``results/gpu/throughput``). Evaluation,
  loading and cached features are not counted; frozen layers are counted as if they trained.

``python -m tutorial_lib.ops.seed_plan`` prints the plan; ``--write docs/gpu.md`` rewrites its
section there.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..methods import NOTEBOOK_SETTINGS
from ..methods.forgetting import forgetting
from ..methods.tdt.regularized import PASSES_PER_STEP
from ..pretraining_settings import PretrainingSettings
from ..settings import Budget, Settings
from .nulls import with_power

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_BUDGET_SECONDS = 20 * 60  # config.py: "gpu  one GPU, ≤ 20 min a notebook"
SEED_BUDGET_SECONDS = 15 * 60  # of it, what the seeds may take; 5 min for the rest
THROUGHPUT = Path("throughput") / "cuda-nvidia-h200-paper.json"  # under results/gpu
# Train rows after the validation carve (tasks.load_task(name).sizes(); tests check them), for the
# tasks that today's gpu settings train on in full.
TRAIN_ROWS = {"trec": 4906, "rte": 2241}
MINILM_LAYERS = 6
NOT_REACHABLE = "not reachable at this budget"
START, END = "<!-- seed-plan: start -->", "<!-- seed-plan: end -->"


def _rows(task: str, examples: int | None) -> int:
    return TRAIN_ROWS[task] if examples is None else min(examples, TRAIN_ROWS.get(task, examples))


def _steps(budget: Budget, rows: int) -> int:
    return budget.epochs * math.ceil(rows / budget.batch_size)


def _adapters(s) -> int:
    """03: full fine-tuning and one run per bottleneck (the probes read cached features)."""
    return (1 + len(s.bottlenecks)) * _steps(s.budget, _rows(s.task, s.train_examples)) * MINILM_LAYERS


def _unfreezing(s) -> int:
    """04: full fine-tuning, gradual unfreezing and chain-thaw, at equal steps."""
    return (2 + int(s.chain_thaw)) * _steps(s.budget, _rows(s.task, s.train_examples)) * MINILM_LAYERS


def _multitask(s) -> int:
    """06: TREC-6 with and without the LM loss (ours), each GLUE task alone and all together (S
    steps a task), and each STILTs target after its intermediate task (the intermediate runs once)
    and alone where it is not one of ``tasks``."""
    ours = PretrainingSettings.at("gpu").model.n_layer
    trec = 2 * _steps(s.trec_budget, _rows("trec", s.trec_train_examples)) * ours
    target = s.target_steps or s.steps_per_task
    glue = 2 * len(s.tasks) * s.steps_per_task + sum(target * (1 + (t not in s.tasks))
                                                     for _, t in s.sequential)
    return trec + glue * MINILM_LAYERS


def _tdt(s) -> int:
    """08: each method at its passes per step; fine-tuning and TDT on the sentence-pair task."""
    methods = ("fine-tuning", *s.baselines, "TDT")
    out = sum(PASSES_PER_STEP[m] for m in methods) * _steps(s.budget, _rows(s.task, s.train_examples))
    if s.pair_task:
        pair = _steps(s.budget, _rows(s.pair_task, s.pair_train_examples))
        out += (PASSES_PER_STEP["fine-tuning"] + PASSES_PER_STEP["TDT"]) * pair
    return out * MINILM_LAYERS


def _forgetting(s) -> int:
    """13: the seed's source model, stage 2 under each regulariser, and the students (hard labels,
    KD, KD + transfer text) of each size."""
    stage1 = _steps(s.source_budget, _rows(s.source_task, s.source_train_examples))
    stage2 = len(forgetting.regularisers(s)) * _steps(s.target_budget,
                                                      _rows(s.target_task, s.target_train_examples))
    return (stage1 + stage2) * MINILM_LAYERS + 3 * s.student_steps * sum(s.student_layers)


def _peft(s) -> int:
    """14: each method at its chosen rate (the rate grids run once, on the selection seed)."""
    methods = [name for name in vars(s) if name.endswith("_lrs")]
    return len(methods) * _steps(s.budget, _rows(s.task, s.train_examples)) * MINILM_LAYERS


STEPS: dict[str, Callable[[Settings], int]] = {
    "03_adapters_and_freezing": _adapters, "04_gradual_unfreezing": _unfreezing,
    "06_multitask": _multitask, "08_tdt": _tdt, "13_forgetting_and_distillation": _forgetting,
    "14_peft": _peft}
"""Layer-steps (training steps × forward passes × layers) that one seed repeats, per notebook."""


def gpu_settings(notebook: str) -> Settings:
    """The notebook's settings at the gpu scale."""
    return next(c for c in NOTEBOOK_SETTINGS if c.notebook == notebook).at("gpu")


def layer_step_seconds(gpu_results: Path) -> float:
    """The measured GPU step of ours at the paper size, per layer."""
    doc = json.loads((gpu_results / THROUGHPUT).read_text())
    return doc["pretraining"]["ours"]["seconds_per_step"] / doc["config"]["n_layer"]


def measured_seed_seconds(doc: Mapping) -> float | None:
    """A saved run's seconds per seed: its runs tables' uncached runs (rows with a seed and
    seconds), over its seeds; None where it has none."""
    total = sum(r["seconds"] for t in doc.get("tables", {}).values() for r in t.get("records", [])
                if "seed" in r and isinstance(r.get("seconds"), (int, float)) and not r.get("cached"))
    seeds = len(doc.get("seeds") or [])
    return total / seeds if total and seeds else None


def seed_cost(notebook: str, gpu_results: Path) -> tuple[float, str]:
    """``(seconds a seed, basis)`` at the gpu scale: measured by its gpu run where one exists,
    else estimated from :data:`STEPS` (see the module docstring)."""
    path = gpu_results / f"{notebook}.json"
    if path.exists():
        doc = json.loads(path.read_text())
        seconds = measured_seed_seconds(doc)
        if seconds is not None:
            return seconds, f"measured (gpu run {doc.get('date', '?')})"
    steps = STEPS[notebook](gpu_settings(notebook))
    rate = layer_step_seconds(gpu_results)
    return steps * rate, f"estimated: {steps:,} layer-steps a seed × {1000 * rate:.2f} ms"


@dataclass(frozen=True)
class Row:
    """One source effect's line of the plan."""

    notebook: str
    effect: str
    source_delta: float
    verified: bool
    runs_needed: int | None  # None: beyond stats.seeds_needed's limit
    gpu_seeds: int  # the settings' gpu seeds today
    seed_seconds: float
    basis: str

    @property
    def reachable(self) -> bool:
        return self.runs_needed is not None and self.runs_needed * self.seed_seconds <= SEED_BUDGET_SECONDS

    def minutes(self, seeds: int | None) -> float | None:
        """The estimated seed-proportional minutes with ``seeds`` seeds."""
        return None if seeds is None else seeds * self.seed_seconds / 60


def plan(effects: Sequence[dict], gpu_results: Path) -> list[Row]:
    """A :class:`Row` for every effect record (the classroom ``effects.json``) with a source's
    number."""
    rows, costs = [], {}
    for r in with_power(effects):
        if r.get("source_delta") is None:
            continue
        nb = r["notebook"]
        if nb not in costs:
            costs[nb] = seed_cost(nb, gpu_results)
        rows.append(Row(nb, f"{r['method']} vs {r['baseline']}", r["source_delta"],
                        bool(r["source_verified"]), r.get("runs_for_source"),
                        len(gpu_settings(nb).seeds), *costs[nb]))
    return rows


def required_seeds(rows: Sequence[Row]) -> dict[str, int]:
    """Per notebook, the gpu seeds the plan asks for: the most runs a reachable effect needs (at
    least 2; a notebook whose effects are all out of reach asks for none beyond its own)."""
    out: dict[str, int] = {}
    for r in rows:
        out[r.notebook] = max(out.get(r.notebook, 2), r.runs_needed if r.reachable else 2)
    return out


def markdown(rows: Sequence[Row]) -> str:
    """The plan as docs/gpu.md's table, with what it rests on."""
    need = required_seeds(rows)
    lines = [
        f"The budget: the seeds' part of a notebook ≤ {SEED_BUDGET_SECONDS // 60} of the gpu scale's "
        f"{NOTEBOOK_BUDGET_SECONDS // 60} minutes. Runs needed: to detect the source's Δ with 80 % "
        "power at α = 0.05, from the classroom run's spread (the gpu spread is not measured; the "
        "gpu scale's larger data usually shrinks it, so these counts are conservative). Minutes: the "
        "seed-proportional training only, estimated where the notebook has not run on a GPU.\n",
        "| notebook | effect | source's Δ | runs needed | minutes for them | reachable | gpu seeds "
        "(settings) | minutes at those | basis |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = "—" if r.runs_needed is None else f"{r.runs_needed:,}"
        at_need = r.minutes(r.runs_needed)
        lines.append(
            f"| {r.notebook} | {r.effect} | {r.source_delta:+.2f}{'' if r.verified else ' (unverified)'} "
            f"| {runs} | {'—' if at_need is None else f'{at_need:,.1f}'} | "
            f"{'yes' if r.reachable else NOT_REACHABLE} | {r.gpu_seeds} | {r.minutes(r.gpu_seeds):.1f} "
            f"| {r.basis} |")
    have = {r.notebook: r.gpu_seeds for r in rows}
    short = [f"{nb} ({n} > {have[nb]})" for nb, n in need.items() if n > have[nb]]
    lines += ["", "Every notebook's gpu seeds meet the plan." if not short else
              "**Below the plan:** " + ", ".join(short) + "."]
    return "\n".join(lines) + "\n"


def write_section(doc: Path, text: str) -> None:
    """Replace what lies between the seed-plan markers of ``doc`` with ``text``."""
    body = doc.read_text()
    head, rest = body.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}{END}{tail}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--effects", type=Path, default=REPO / "results" / "classroom" / "effects.json")
    ap.add_argument("--gpu-results", type=Path, default=REPO / "results" / "gpu")
    ap.add_argument("--write", type=Path, help="a markdown file with the seed-plan markers")
    args = ap.parse_args(argv)
    text = markdown(plan(json.loads(args.effects.read_text()), args.gpu_results))
    if args.write:
        write_section(args.write, text)
    print(text, end="")


if __name__ == "__main__":
    main()
