"""GradTS-fg: instance-level auxiliary selection, and GradTS's four settings (notebook 07).

GradTS-fg (Ma et al., EMNLP 2021) goes one level finer than GradTS-trial (:mod:`.gradts`): one
head-importance matrix per auxiliary training *instance* (:func:`instance_importance`, exact
per-example gradients computed in batches), normalised per instance; an instance is kept when the
Kendall τ between its matrix and the main task's task-level matrix is high
(:func:`instance_taus`, :func:`instance_filter`: τ ≥ 0.62 upstream, for bert-base's 144 heads,
or the top fraction). :func:`gradts_settings` runs single-task, all tasks, GradTS-trial,
GradTS-fg and the random-subset control for one main task at equal main-task budget;
:func:`compare_arms` compares them, each comparison resting on its arms being different runs
(:func:`arms_premises`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from torch import nn

from ... import data, stats
from ... import premises as prem
from ...anatomy import KeyValue
from ...batches import eval_loader, pad_collate
from ...evaluation import logits_step
from ...finetuning import Run
from ...runtime import autocast_dtype, device, device_of
from ...tasks import compute_metrics, predictions_from_logits
from ...training import to_device
from .gradts import (
    LossFn,
    Slicing,
    gradient_state,
    kv_score,
    kv_specs,
    normalize_importance,
    random_subset,
    rank_auxiliaries,
    select_best,
    trial_candidates,
    trial_k_limit,
    unique_by_id,
)
from .multitask import Experiment, compare_each, head_loss

UPSTREAM_INSTANCE_THRESHOLD = 0.62  # GradTS-fg, bert-base-cased (12 x 12 = 144 heads)
RANDOM_SUBSET = "random subset"  # the control: as many auxiliaries as GradTS-trial's, at random


def instance_importance(
    model: nn.Module,
    batches: Iterable[Any],
    loss_fn: LossFn,
    *,
    normalize: bool = True,
    dropout: bool = False,
    slicing: Slicing = "rows",
    loss_reduction: Literal["mean", "sum"] = "mean",
) -> torch.Tensor:
    """Instance-level GradTS matrices [N, n_layer, n_head], one per row of every batch (GradTS-fg).

    Each matrix is what :func:`head_importance` would give for that example alone, and is
    normalised on its own when ``normalize`` is set (as upstream). The per-example gradients of
    W_K and W_V come from a single forward and backward pass per batch (see the module
    docstring), so batches may be of any size. The rows are assumed independent (no
    cross-example terms in the model or loss), and every hooked K/V layer must run once per
    ``loss_fn`` call (otherwise ``RuntimeError``).

    ``loss_reduction`` says how ``loss_fn`` combines its rows. With "mean" (F.cross_entropy's
    default, used by ``MultiHeadModel`` sequence heads), each row's gradient is multiplied by the
    batch size. This only matters for ``normalize=False``: for a token-level loss averaged over
    tokens the raw values are off by one constant per batch, which normalisation removes.
    """
    if loss_reduction not in ("mean", "sum"):
        raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
    specs = kv_specs(model)
    modules = unique_by_id(m for s in specs for m in (s.key, s.value))
    weights = unique_by_id(m.weight for m in modules)
    records: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {id(m): [] for m in modules}

    def keep(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        records[id(module)].append((inputs[0].detach(), output))

    out: list[torch.Tensor] = []
    # prepend: see the layer's own output x Wᵀ + b, before any other hook may replace it
    handles = [m.register_forward_hook(keep, prepend=True) for m in modules]
    try:
        with gradient_state(model, weights, dropout):
            for batch in batches:
                for r in records.values():
                    r.clear()
                loss = loss_fn(to_device(batch, device_of(model)))
                if any(len(r) != 1 for r in records.values()):
                    calls = sorted({len(r) for r in records.values()})
                    raise RuntimeError(
                        f"a K/V projection ran {calls} times in one loss_fn call: per-example "
                        "gradients need exactly one forward pass of the encoder per batch"
                    )
                outputs = [records[id(m)][0][1] for m in modules]
                grads = torch.autograd.grad(loss, outputs, allow_unused=True)
                g_out = {id(m): g for m, g in zip(modules, grads)}
                out.append(_per_example_matrices(specs, records, g_out, slicing, loss_reduction))
    finally:
        for h in handles:
            h.remove()
        for r in records.values():
            r.clear()
    if not out:
        raise ValueError("instance_importance needs at least one batch")
    m = torch.cat(out)
    return normalize_importance(m) if normalize else m


def _per_example_matrices(
    specs: Sequence[KeyValue],
    records: Mapping[int, list[tuple[torch.Tensor, torch.Tensor]]],
    g_out: Mapping[int, torch.Tensor | None],
    slicing: Slicing,
    loss_reduction: str,
) -> torch.Tensor:
    """[B, n_layer, n_head] from the hooked inputs x and output gradients g of the K/V layers."""
    layers = []
    batch_size = None
    for s in specs:
        per_kind = []
        for module, rows in ((s.key, s.key_rows), (s.value, s.value_rows)):
            x = records[id(module)][0][0]
            b = x.shape[0]
            batch_size = b if batch_size is None else batch_size
            if b != batch_size:
                raise RuntimeError(f"K/V layers saw batch sizes {batch_size} and {b}")
            g = g_out[id(module)]
            if g is None:  # this projection does not influence the loss
                per_kind.append(None)
                continue
            x = x.reshape(b, -1, x.shape[-1])
            g = g.detach()[..., rows].reshape(b, -1, rows.stop - rows.start)
            grad_w = torch.einsum("bto,bti->boi", g, x)  # per-example ∂L/∂W[rows]: [B, out, in]
            if loss_reduction == "mean":
                grad_w = grad_w * b
            per_kind.append(grad_w)
        layers.append(kv_score(per_kind[0], per_kind[1], s, slicing, (batch_size,)))
    return torch.stack(layers, dim=1)


def task_importance(model: nn.Module, batches: Iterable[Any], loss_fn: LossFn, **kwargs: Any
                    ) -> torch.Tensor:
    """The paper's task-level matrix: the mean over instances of each instance's raw
    mean |∂L_i/∂W_K| + mean |∂L_i/∂W_V| per head (GradTS's release evaluated with batch size 1),
    then :func:`normalize_importance`. :func:`gradts.head_importance` instead takes |∂L_B/∂W| of
    whole batches: where a batch's examples pull a weight in opposite directions their gradients
    cancel before the |·|, so it is smaller and noisier per head; the per-instance gradients come
    from one backward pass per batch here, so the paper's quantity costs about the same."""
    raw = instance_importance(model, batches, loss_fn, normalize=False, **kwargs)
    return normalize_importance(raw.mean(0))


def floor_checks(exp: Experiment, single: Mapping[str, Run], *, resamples: int = 1000,
                 seed: int = 0) -> pd.DataFrame:
    """Did each task's single-task model (``keep_model=True``) learn? Its test score against the
    task's floor (:func:`multitask.task_floor`: the majority-class score, MCC 0 for CoLA), with a
    paired bootstrap over the test items (the model and the majority-class guess scored on the
    same resample): Δ, its 95 % percentile interval, and ``learned`` = the interval lies above 0
    (the α = 0.05 of :mod:`tutorial_lib.stats`). One model per task, so the test items are the
    units; GradTS fingerprints only the tasks that learned."""
    rng = np.random.default_rng(seed)
    floors, rows = exp.floors(), {}
    for t, run in single.items():
        preds, labels = _test_predictions(exp, run.model, t)
        train_labels = np.asarray(data.column(exp.data[t].task.train, "label"))
        guess = np.full_like(labels, np.bincount(train_labels).argmax())
        score = compute_metrics(t, preds, labels)["score"]
        deltas = []
        for _ in range(resamples):
            i = rng.integers(0, len(labels), len(labels))
            deltas.append(compute_metrics(t, preds[i], labels[i])["score"]
                          - compute_metrics(t, guess[i], labels[i])["score"])
        low, high = np.percentile(deltas, [100 * stats.ALPHA / 2, 100 * (1 - stats.ALPHA / 2)])
        rows[t] = {"test score %": 100 * score, "floor %": 100 * floors[t].value,
                   "floor": floors[t].what, "Δ (points)": 100 * (score - floors[t].value),
                   "95% CI": f"[{100 * low:+.1f}, {100 * high:+.1f}]", "learned": bool(low > 0)}
    return pd.DataFrame(rows).T.rename_axis("task")


def _test_predictions(exp: Experiment, model: nn.Module, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Class ids and labels of ``task``'s test split (the same forward pass as the evaluator)."""
    if model is None:
        raise ValueError(f"the single-task run of {task!r} kept no model: run it with keep_model=True")
    step = logits_step(model.to(device()), device=device(), amp_dtype=autocast_dtype(), head=task)
    preds, labels = [], []
    for batch in eval_loader(exp.data[task].test, exp.budget.eval_batch_size, pad_collate(exp.pad_id)):
        logits, y = step(None, batch)
        preds.append(predictions_from_logits(task, logits).cpu())
        labels.append(y.cpu())
    return torch.cat(preds).numpy(), torch.cat(labels).numpy()


def instance_taus(main_matrix: torch.Tensor, instance_matrices: torch.Tensor) -> torch.Tensor:
    """Kendall τ-b of each instance matrix [N, L, H] with the main task's matrix [L, H]: [N].

    Vectorised, and equal to :func:`kendall_tau` per instance (NaN for a constant matrix).
    """
    ref = torch.as_tensor(main_matrix).detach().cpu().double().flatten()
    inst = torch.as_tensor(instance_matrices).detach().cpu().double()
    inst = inst.reshape(inst.shape[0], -1)
    if inst.shape[1] != ref.numel():
        raise ValueError(f"instance matrices have {inst.shape[1]} entries, main has {ref.numel()}")
    i, j = torch.triu_indices(ref.numel(), ref.numel(), offset=1)
    sign_ref = torch.sign(ref[i] - ref[j]).float()  # +1 / -1 / 0 (tie) for every pair
    taus = []
    chunk = max(1, (1 << 22) // max(1, i.numel()))
    for part in inst.split(chunk):
        sign = torch.sign(part[:, i] - part[:, j]).float()
        # τ-b = (concordant − discordant) / sqrt(untied pairs in a · untied pairs in b)
        num = (sign * sign_ref).sum(dim=1).double()
        den = (sign.abs().sum(dim=1).double() * sign_ref.abs().sum().double()).sqrt()
        taus.append(torch.where(den > 0, num / torch.where(den > 0, den, 1.0), torch.nan))
    return torch.cat(taus) if taus else torch.zeros(0, dtype=torch.float64)


def instance_filter(
    main_matrix: torch.Tensor,
    instance_matrices: torch.Tensor,
    *,
    threshold: float | None = None,
    keep_fraction: float | None = None,
) -> torch.Tensor:
    """GradTS-fg: a boolean mask [N] of the auxiliary instances to keep.

    The score of an instance is its τ with the main task's task-level matrix
    (:func:`instance_taus`; plot those for a histogram). Give exactly one of:

    * ``threshold``: keep τ ≥ threshold. Upstream used 0.62
      (``UPSTREAM_INSTANCE_THRESHOLD``), tuned for bert-base's 144 heads;
    * ``keep_fraction``: keep the ⌈fraction·N⌉ instances with the highest τ. Ties are broken by
      instance order. This transfers across model sizes where an absolute threshold does not:
      with 16 heads τ takes only a few distinct values and is far noisier, so "≥ 0.62" can keep
      almost nothing or almost everything.

    NaN τ (a constant instance matrix) is never above a threshold and ranks last.
    """
    if (threshold is None) == (keep_fraction is None):
        raise ValueError("give exactly one of threshold= or keep_fraction=")
    taus = instance_taus(main_matrix, instance_matrices)
    if threshold is not None:
        return taus >= threshold  # NaN compares False
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    n_keep = min(len(taus), math.ceil(keep_fraction * len(taus) - 1e-9))
    order = torch.sort(torch.nan_to_num(taus, nan=-math.inf), descending=True, stable=True).indices
    keep = torch.zeros(len(taus), dtype=torch.bool)
    keep[order[:n_keep]] = True
    return keep


# --- GradTS's four settings for one main task ---------------------------------------------------


@dataclass
class GradTSOutcome:
    """What GradTS chose for one main task, and the runs of every setting."""

    main: str
    ranked: list[str]  # auxiliaries by τ with the main task, highest first
    trial_dev: dict[tuple[str, ...], float]  # prefix → mean dev score over the trial seeds
    chosen: tuple[str, ...]
    kept: dict[str, tuple[int, int]]  # GradTS-fg: aux task → (kept, scored) instances
    taus: dict[str, np.ndarray]  # GradTS-fg: aux task → τ of each instance with the main task
    cutoff: float  # the lowest τ that was kept
    runs: list[Run]
    random_subsets: dict[int, tuple[str, ...]] = field(default_factory=dict)  # seed → its draw


def gradts_settings(exp: Experiment, main: str, corr: pd.DataFrame,
                    importance: Mapping[str, torch.Tensor], single: Mapping[str, Run],
                    pool: Sequence[str] | None = None) -> GradTSOutcome:
    """Single-task, all-tasks MTL, GradTS-trial, GradTS-fg and (``settings.random_subsets``) the
    random-subset control for ``main`` at equal main-task budget.

    ``single[t]``: task t's single-task run with ``keep_model=True`` (seed = the first seed); its
    model gives the instance-level matrices of t's examples (GradTS-fg, as upstream). Trial sets
    are chosen on the **dev** split with ``settings.trial_seeds``; test is only reported.
    ``pool``: the tasks that may be auxiliaries (and make up "all tasks"); default every task of
    ``exp`` (07 passes the tasks whose single-task model beat its floor, :func:`floor_checks`).
    The control ``RANDOM_SUBSET``: for each seed, as many auxiliaries as GradTS-trial chose, drawn
    from the pool with that seed (:func:`gradts.random_subset`); a draw equal to GradTS-trial's
    choice is that seed's GradTS-trial run (the same run), not trained again.
    """
    s, seeds = exp.settings, list(exp.settings.seeds)
    others = [t for t in (exp.data if pool is None else pool) if t != main]
    corr = corr.loc[[main, *others], [main, *others]]
    runs = [replace(single[main], model=None)] if seeds[0] == single[main].seed else []
    runs += [exp.single(main, seed) for seed in seeds if seed != single[main].seed]
    runs += [exp.run("all tasks", [main, *others], seed, main=main) for seed in seeds]

    ranked = rank_auxiliaries(corr, main)
    trial_runs: dict[tuple[str, ...], list[Run]] = {}
    for prefix in trial_candidates(ranked, trial_k_limit(s.max_k, len(ranked))):
        key = tuple(prefix)
        trial_runs[key] = [exp.run(f"main + top-{len(key)}", [main, *key], seed, main=main)
                           for seed in s.trial_seeds]
    trial_dev = {k: float(np.mean([r.scores[main]["dev"]["score"] for r in rs]))
                 for k, rs in trial_runs.items()}
    chosen = select_best(trial_dev)
    done = {r.seed: r for r in trial_runs[chosen]}
    runs += [replace(done[seed], name="GradTS-trial") if seed in done else
             exp.run("GradTS-trial", [main, *chosen], seed, main=main) for seed in seeds]

    rows, kept, taus, cutoffs = {}, {}, {}, []
    for aux in chosen:
        model = single[aux].model
        inst = instance_importance(model, exp.batches(aux), head_loss(model, aux))
        mask = instance_filter(importance[main], inst, threshold=s.threshold,
                                      keep_fraction=s.keep_fraction)
        tau = instance_taus(importance[main], inst).numpy()
        rows[aux] = [exp.data[aux].train[i] for i in torch.nonzero(mask).flatten().tolist()]
        kept[aux], taus[aux] = (int(mask.sum()), len(mask)), tau
        if mask.any():
            cutoffs.append(float(np.nanmin(tau[mask.numpy()])))
    runs += [exp.run("GradTS-fg", [main, *chosen], seed, main=main, train_rows=rows)
             for seed in seeds]
    cutoff = min(cutoffs) if cutoffs else float("nan")
    subsets = {seed: random_subset(others, len(chosen), seed) for seed in seeds} if s.random_subsets else {}
    trial = {r.seed: r for r in runs if r.name == "GradTS-trial"}
    runs += [replace(trial[seed], name=RANDOM_SUBSET) if set(subset) == set(chosen)
             else exp.run(RANDOM_SUBSET, [main, *subset], seed, main=main)
             for seed, subset in subsets.items()]
    return GradTSOutcome(main, ranked, trial_dev, chosen, kept, taus, cutoff, runs, subsets)


# --- the arms must differ ------------------------------------------------------------------------


def trained_on(outcome: GradTSOutcome, run: Run) -> tuple[tuple[str, int | None], ...]:
    """What one run of ``outcome`` trained on besides its main task: each auxiliary task it took
    steps on (the run's own ``steps``), with the training instances it kept — GradTS-fg's kept
    count (:func:`instance_filter`), None where it kept them all."""
    fg = run.name == "GradTS-fg"

    def kept(task: str) -> int | None:
        k, n = outcome.kept.get(task, (None, None))
        return k if fg and k is not None and k < n else None

    return tuple(sorted((t, kept(t)) for t in run.steps if t != outcome.main))


def _arm_key(outcome: GradTSOutcome, run: Run, tasks_only: bool) -> tuple:
    on = trained_on(outcome, run)
    return tuple((t, None) for t, _ in on) if tasks_only else on


def _aux_text(key: tuple) -> str:
    return "+".join(t if k is None else f"{t} ({k} kept)" for t, k in key) or "none"


def arms_premises(outcomes: Mapping[str, GradTSOutcome], baseline: str,
                  compared: Sequence[str] | None = None) -> dict[str, dict[str, stats.Premise]]:
    """``{main: {setting: Premise}}``: for each setting compared with ``baseline`` (``compared``;
    None: every setting of the outcome), whether its runs differ from the baseline's, seed by
    seed (:func:`tutorial_lib.premises.arms_differ` on :func:`trained_on`). Where every seed
    trained on the same thing the comparison is "untestable: the arms are the same runs", never
    "within noise" (07's held-out run: GradTS-trial chose both auxiliaries of a pool of two, so
    it, "all tasks" and every random draw were the same runs).

    Against :data:`RANDOM_SUBSET` only the auxiliary *tasks* count: the control asks whether τ's
    choice of tasks beats a random one, and a draw equal to the choice on every seed leaves
    nothing to ask — for GradTS-fg too, whose kept instances would be the only difference left
    (→ ``premises.UNTESTABLE_SAME_TASKS``)."""
    control = baseline == RANDOM_SUBSET
    out: dict[str, dict[str, stats.Premise]] = {}
    for main, o in outcomes.items():
        runs = {(r.name, r.seed): r for r in o.runs}
        names = list(dict.fromkeys(r.name for r in o.runs))
        seeds = [r.seed for r in o.runs if r.name == baseline]
        if baseline not in names:
            raise ValueError(f"{main}: no {baseline!r} runs to compare with (settings: {names})")
        out[main] = {}
        for name in (n for n in (compared or names) if n != baseline and n in names):
            ours, theirs = ([_arm_key(o, runs[name, s], control) for s in seeds],
                            [_arm_key(o, runs[baseline, s], control) for s in seeds])
            p = prem.arms_differ(ours, theirs, "seeds' auxiliary task sets" if control else
                                 "seeds' auxiliary tasks and instances",
                                 failure=prem.UNTESTABLE_SAME_TASKS if control else prem.UNTESTABLE)
            first = f"seed {seeds[0]}: {_aux_text(ours[0])} vs {_aux_text(theirs[0])}"
            out[main][name] = replace(p, detail=f"{p.detail} ({first})")
    return out


def compare_arms(table: pd.DataFrame, outcomes: Mapping[str, GradTSOutcome],
                 against: Mapping[str, Sequence[str] | None], *,
                 floors: Mapping[str, stats.Floor | float]) -> dict[str, pd.DataFrame]:
    """:func:`multitask.compare_each` (``against``: ``{baseline: the settings compared with it}``;
    None: every other setting) with each comparison resting on its arms being different runs
    (:func:`arms_premises`): a setting that trained on what its baseline trained on, on every
    seed, is "untestable" — its own verdict, which the held-out replication never counts as "not
    replicated" (``benchmarks/replicate.py``)."""
    return {baseline: compare_each(table, {baseline: others}, floors=floors,
                                   premises=arms_premises(outcomes, baseline, others))[baseline]
            for baseline, others in against.items()}

