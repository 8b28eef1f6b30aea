"""GradTS — gradient-based auxiliary-task selection (Ma, Lou, Zhang, Wang & Vosoughi, EMNLP 2021).

GradTS fingerprints a task by *which attention heads its loss pulls on*, and picks as auxiliary
tasks those whose fingerprint ranks the heads like the main task's does.

1. **Head importance** (:func:`head_importance`). Back-propagate the task loss of a model
   fine-tuned on the task, over its training data, without updating anything. For every layer
   take |∂L/∂W_K| and |∂L/∂W_V| (the query is ignored), and average each head's slice of them
   (key + value). Average over batches. This gives an [n_layer, n_head] matrix.
   :func:`normalize_importance` then divides each layer (row) by its sum and min–max scales the
   whole matrix to [0, 1].
2. **Correlation** (:func:`task_correlation`): Kendall τ between flattened matrices, one τ for
   each pair of tasks.
3. **GradTS-trial** (:func:`rank_auxiliaries`, :func:`trial_candidates`, :func:`select_best`).
   Sort the other tasks by τ with the main task. Train main + top-1, main + top-2, … and keep the
   prefix with the best score on a **held-out selection dev set**. Upstream selected on the GLUE
   dev sets it also reported. k stops one short of the whole pool (:func:`trial_k_limit`): the
   whole pool is the "all tasks" arm. Its control: :func:`random_subset`, as many auxiliaries
   drawn at random.
4. **GradTS-fg** (:mod:`.gradts_fg`): one matrix per auxiliary training instance; keep the
   instances whose τ with the main task's matrix is high.

This module works on any supported encoder and a callable loss. It does no training: fine-tuning
and multi-task runs come from :mod:`tutorial_lib.methods.multitask.multitask`.

Choices and differences from the released code (RenzeLou/GradTS, ``mt_dnn/model.py:update_no_grad``
and ``mt_dnn/inference.py``):

* **Head slices are the head's own rows.** In ``nn.Linear`` weights ([out, in]) the K/V output
  rows are head-major, so head h owns rows h·d_head:(h+1)·d_head. Upstream did
  ``grad.view(out, n_heads, d_head)``, which splits the **input** dimension, so its "head h" is
  the column block h·d_head:(h+1)·d_head: the K/V weights that *read* a chunk of the residual
  stream, in every head. ``slicing="upstream"`` reproduces that for comparison.
* **Dropout off by default** (``dropout=False``: the model is put in eval mode). Upstream called
  ``network.train()``, so every matrix came from one random dropout mask. The deterministic
  matrices describe the model as it is evaluated. ``dropout=True`` reproduces upstream. In both
  cases every module's own mode is restored afterwards.
* **Gradients come from** ``torch.autograd.grad``, **not** ``.backward()``. No parameter's
  ``.grad`` is written or cleared (gradients a caller had accumulated survive), and nothing is
  left behind. The K/V weights are made to require grad for the call (so a frozen encoder works),
  then restored.
* **Per-instance gradients come in batches.** A linear layer y = x Wᵀ + b has per-example weight
  gradient Σ_t g_t x_tᵀ, where g = ∂L/∂y. Forward hooks keep x and y, one ``autograd.grad``
  yields g, and an einsum gives every row's gradient. This is exact (:func:`instance_importance`
  is tested against a loop over single, unpadded examples) and replaces one backward pass per
  instance.
* **Upstream's ``batch_size_eval`` was 1.** With bigger batches :func:`head_importance` takes
  |mean gradient|, which is smaller where examples disagree. Upstream's exact quantity is
  ``normalize_importance(instance_importance(..., normalize=False).mean(0))``, computed here in
  batches.
* **Degenerate cases.** A layer whose importances sum to 0 stays 0, and a constant matrix
  normalises to all zeros (upstream divided by zero and produced NaN). Kendall τ with a constant
  matrix is NaN, and a NaN τ never passes a filter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

import numpy as np
import pandas as pd
import torch
from scipy.stats import kendalltau
from torch import nn

from ...anatomy import KeyValue, key_values

Slicing = Literal["rows", "upstream"]
LossFn = Callable[[Any], torch.Tensor]
K = TypeVar("K", bound=Hashable)

# --- where the key and value weights are: tutorial_lib.anatomy.key_values ---------------------


def kv_specs(model: nn.Module) -> list[KeyValue]:
    """Every attention layer's keys and values in ``model`` (ours or a BERT-like encoder, on its
    own or inside a classifier, an LM or a multi-head model), bottom first."""
    try:
        return key_values(model)
    except (TypeError, AttributeError) as err:
        raise ValueError(f"GradTS cannot find the attention key/value weights of a "
                         f"{type(model).__name__}: {err}") from err


def kv_weights(model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Per layer: (W_K, W_V, n_heads), each weight [n_heads·d_head, d_in] with head-major rows.

    The weights are *views*: for our Transformer, rows d:2d and 2d:3d of ``attn.qkv.weight``
    (whose rows are [W_Q; W_K; W_V]). For BERT-like Hugging Face encoders they are
    ``attention.self.key.weight`` and ``.value.weight``. ``model`` may also be a wrapper holding
    the encoder (``MultiHeadModel``, ``SequenceClassifier`` ...). Any other
    encoder raises ``ValueError``.
    """
    return [(s.key.weight[s.key_rows], s.value.weight[s.value_rows], s.n_heads)
            for s in kv_specs(model)]


# --- per-head reduction and normalisation ---------------------------------------------------------


def _per_head(grad_abs: torch.Tensor, n_heads: int, slicing: Slicing) -> torch.Tensor:
    """Mean |gradient| in each head's slice: [..., rows, cols] -> [..., n_heads]."""
    *lead, rows, cols = grad_abs.shape
    if slicing == "rows":  # head h = rows h*d_head:(h+1)*d_head (its own parameters)
        return grad_abs.reshape(*lead, n_heads, rows // n_heads, cols).mean(dim=(-2, -1))
    if slicing == "upstream":  # head h = columns h*d_head:(h+1)*d_head (upstream's view)
        return grad_abs.reshape(*lead, rows, n_heads, cols // n_heads).mean(dim=(-3, -1))
    raise ValueError(f"slicing must be 'rows' or 'upstream', got {slicing!r}")


def kv_score(g_key: torch.Tensor | None, g_value: torch.Tensor | None, spec: KeyValue,
              slicing: Slicing, shape: tuple[int, ...]) -> torch.Tensor:
    """mean(|g_K| + |g_V|) per head (the two slices have the same size) -> [..., n_heads]."""
    score = torch.zeros(*shape, spec.n_heads)
    for g in (g_key, g_value):
        if g is not None:
            score += _per_head(g.detach().abs().float(), spec.n_heads, slicing).cpu()
    return score


def normalize_importance(m: torch.Tensor, *, min_max: bool = True) -> torch.Tensor:
    """GradTS normalisation of head-importance matrices [..., n_layer, n_head] (Ma et al. 2021).

    Each layer (row) is divided by its sum ("layer normalisation"). Then, if ``min_max``, each
    matrix is scaled to [0, 1] as a whole. Leading dimensions are separate matrices (one per
    instance). An all-zero row stays zero, and a constant matrix becomes all zeros, not NaN.
    """
    if m.dim() < 2:
        raise ValueError(f"expected [..., n_layer, n_head], got shape {tuple(m.shape)}")
    m = m.double()
    row = m.sum(dim=-1, keepdim=True)
    m = m / torch.where(row == 0, torch.ones_like(row), row)
    if min_max:
        lo = m.amin(dim=(-2, -1), keepdim=True)
        span = m.amax(dim=(-2, -1), keepdim=True) - lo
        m = (m - lo) / torch.where(span == 0, torch.ones_like(span), span)
    return m.float()


# --- gradients ------------------------------------------------------------------------------------


@contextmanager
def gradient_state(model: nn.Module, weights: Sequence[nn.Parameter], dropout: bool) -> Iterator[None]:
    """Train/eval mode for the call, K/V weights requiring grad, everything restored after."""
    modes = [(m, m.training) for m in model.modules()]
    flags = [(w, w.requires_grad) for w in weights]
    try:
        model.train(dropout)
        for w in weights:
            w.requires_grad_(True)
        with torch.enable_grad():
            yield
    finally:
        for m, mode in modes:
            m.training = mode
        for w, flag in flags:
            w.requires_grad_(flag)


def unique_by_id(items: Iterable) -> list:
    """``items`` without repeats of the same object (tied or shared modules once), in order."""
    seen: dict[int, Any] = {}
    for item in items:
        seen.setdefault(id(item), item)
    return list(seen.values())


def head_importance(
    model: nn.Module,
    batches: Iterable[Any],
    loss_fn: LossFn,
    *,
    normalize: bool = True,
    dropout: bool = False,
    slicing: Slicing = "rows",
) -> torch.Tensor:
    """Task-level GradTS head-importance matrix [n_layer, n_head] (Ma et al. 2021, Sec. 3.1).

    For each batch: the gradient of ``loss_fn(batch)`` with respect to every layer's W_K and W_V
    (W_Q is ignored), then mean(|∂L/∂W_K|) + mean(|∂L/∂W_V|) over each head's rows. The result is
    averaged over batches and, if ``normalize``, passed through :func:`normalize_importance`.

    ``model`` is the encoder or a module holding it (see :func:`kv_weights`). It is put in eval
    mode (``dropout=True``: train mode, as upstream) for the call. Pass the *whole* model so that
    the heads' dropout is switched too. Parameters, ``.grad`` fields, ``requires_grad`` flags and
    every module's mode are left as they were. Upstream used batches of one example: see the
    module docstring for the batched equivalent.
    """
    specs = kv_specs(model)
    weights = unique_by_id(w for s in specs for w in (s.key.weight, s.value.weight))
    total = torch.zeros(len(specs), specs[0].n_heads, dtype=torch.float64)
    n_batches = 0
    with gradient_state(model, weights, dropout):
        for batch in batches:
            grads = torch.autograd.grad(loss_fn(batch), weights, allow_unused=True)
            by_id = {id(w): g for w, g in zip(weights, grads)}
            rows = []
            for s in specs:
                gk, gv = by_id[id(s.key.weight)], by_id[id(s.value.weight)]
                rows.append(kv_score(None if gk is None else gk[s.key_rows],
                                      None if gv is None else gv[s.value_rows], s, slicing, ()))
            total += torch.stack(rows).double()
            n_batches += 1
    if n_batches == 0:
        raise ValueError("head_importance needs at least one batch")
    m = (total / n_batches).float()
    return normalize_importance(m) if normalize else m


# --- correlation and selection --------------------------------------------------------------------


def kendall_tau(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> float:
    """Kendall τ-b between two flattened importance matrices (``scipy.stats.kendalltau``).

    NaN if either matrix is constant.
    """
    x = np.asarray(torch.as_tensor(a).detach().cpu(), dtype=np.float64).ravel()
    y = np.asarray(torch.as_tensor(b).detach().cpu(), dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"matrices differ in size: {x.size} vs {y.size}")
    return float(kendalltau(x, y).statistic)


def task_correlation(matrices: Mapping[str, torch.Tensor]) -> pd.DataFrame:
    """Kendall τ for every pair of tasks' importance matrices: symmetric, with diagonal exactly 1.

    Rows and columns follow the order of ``matrices``.
    """
    names = list(matrices)
    corr = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            corr.loc[a, b] = corr.loc[b, a] = kendall_tau(matrices[a], matrices[b])
    return corr


def rank_auxiliaries(corr: pd.DataFrame, main: str) -> list[str]:
    """The other tasks ranked by τ with ``main``, highest first.

    Ties are broken by name and NaN τ goes last. This is GradTS-trial's order.
    """
    if main not in corr.index:
        raise KeyError(f"main task {main!r} not in the correlation table {list(corr.index)}")
    taus = corr.loc[main].drop(labels=[main])
    key = {name: (math.isnan(t), -t if not math.isnan(t) else 0.0, str(name))
           for name, t in taus.items()}
    return sorted(taus.index, key=key.__getitem__)


def trial_candidates(ranked: Sequence[str], max_k: int | None = None) -> list[list[str]]:
    """GradTS-trial's auxiliary sets: the prefixes [top-1], [top-1, top-2], … up to ``max_k``."""
    k = len(ranked) if max_k is None else max_k
    if k < 1:
        raise ValueError(f"max_k must be at least 1, got {max_k}")
    return [list(ranked[:i]) for i in range(1, min(k, len(ranked)) + 1)]


def trial_k_limit(max_k: int | None, n_auxiliaries: int) -> int:
    """GradTS-trial's largest k in a pool of ``n_auxiliaries``: ``max_k`` (None: every
    auxiliary), and **at most n − 1** (where n ≥ 2). The prefix of all n auxiliaries *is* the
    "all tasks" arm, and a random draw of n is the whole pool again: a choice of every auxiliary
    makes GradTS-trial, "all tasks" and the random control the same runs, and the comparisons
    among them test nothing (07's held-out run: two auxiliaries in the pool, both chosen). What it
    costs: GradTS-trial may not choose every auxiliary, even where that prefix would score best
    on dev (the last prefix is the "all tasks" arm, run anyway); a pool of n auxiliaries gives it
    n − 1 prefixes to try. With one auxiliary nothing can be left out: k = 1, and the arms'
    premise (``gradts_fg.arms_premises``) finds them the same runs."""
    if n_auxiliaries < 1:
        raise ValueError(f"GradTS-trial needs at least one auxiliary task, got {n_auxiliaries}")
    limit = n_auxiliaries if max_k is None else min(max_k, n_auxiliaries)
    if limit < 1:
        raise ValueError(f"max_k must be at least 1, got {max_k}")
    return max(1, min(limit, n_auxiliaries - 1))


def random_subset(candidates: Sequence[str], k: int, seed: int) -> tuple[str, ...]:
    """``k`` of ``candidates`` drawn uniformly without replacement with ``seed``
    (``numpy.random.default_rng``), in the candidates' order: the control for a selection of
    size k (07: as many auxiliaries as GradTS-trial chose, one draw per run seed)."""
    if not 0 <= k <= len(candidates):
        raise ValueError(f"cannot draw {k} of {len(candidates)} candidates")
    picked = np.random.default_rng(seed).choice(len(candidates), size=k, replace=False)
    return tuple(candidates[i] for i in sorted(int(i) for i in picked))


def select_best(scores: Mapping[K, float], *, tol: float = 0.0) -> K:
    """The auxiliary set with the best **dev** score (GradTS-trial).

    Keys are collections of task names (e.g. ``tuple(prefix)``). Scores within ``tol`` of the
    best count as ties, and a tie goes to the smaller set, then to the earlier key. NaN scores
    are ignored. Select on a held-out dev split, never on the set you report.
    """
    valid = {k: float(v) for k, v in scores.items() if not math.isnan(float(v))}
    if not valid:
        raise ValueError("select_best needs at least one (non-NaN) score")
    for k in valid:
        if isinstance(k, str) or not isinstance(k, Collection):
            raise TypeError(f"keys must be collections of task names (e.g. tuples), got {k!r}")
    best = max(valid.values())
    tied = [k for k, v in valid.items() if v >= best - tol]
    return min(tied, key=len)  # min() keeps the first of equal sizes
