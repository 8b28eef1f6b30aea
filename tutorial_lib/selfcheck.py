"""Self-checks: the learner writes a small function, a check cell compares it with the library's.

A notebook's self-check gives the learner a stub (``raise NotImplementedError``) to fill in — the
reversed gradient, one INLP step, LoRA's forward, STLR, the KD loss … — and a cell that runs::

    selfcheck.check(my_kd_loss, distillation.kd_loss, selfcheck.cases(make_inputs, n=5))

``check`` calls both on the same random inputs and says, for the first case that differs, what is
wrong: a shape, a dtype, or the largest difference and where it is. The library's implementation
stays the reference; nothing here is graded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class CheckResult:
    """What a check found: ``passed``, how many cases ran, and a one-line message."""

    passed: bool
    cases: int
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


def cases(make: Callable[[np.random.Generator], tuple], n: int = 5, seed: int = 0) -> Iterator[tuple]:
    """``n`` argument tuples from ``make(rng)``, one seeded generator for all (the same cases each
    time the cell runs)."""
    rng = np.random.default_rng(seed)
    torch_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        for _ in range(n):
            yield make(rng)
    finally:
        torch.random.set_rng_state(torch_state)


def _as_array(x: object) -> np.ndarray:
    return x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)


def difference(got: object, want: object, atol: float = 1e-5, rtol: float = 1e-4) -> str:
    """"" when ``got`` matches ``want`` (numbers, arrays, tensors, and tuples, lists or dicts of
    them), else what differs."""
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping) or set(got) != set(want):
            return f"expected a dict with keys {sorted(want)}, got {type(got).__name__}" + (
                f" with keys {sorted(got)}" if isinstance(got, Mapping) else "")
        return next((f"[{k!r}]: {d}" for k in want if (d := difference(got[k], want[k], atol, rtol))), "")
    if isinstance(want, Sequence) and not isinstance(want, str):
        if not isinstance(got, Sequence) or len(got) != len(want):
            return f"expected {len(want)} values, got {got!r:.80}"
        return next((f"[{i}]: {d}" for i, (g, w) in enumerate(zip(got, want))
                     if (d := difference(g, w, atol, rtol))), "")
    try:
        g, w = _as_array(got), _as_array(want)
    except (TypeError, ValueError):
        return f"expected a number or an array, got {type(got).__name__}"
    if g.shape != w.shape:
        return f"shape {tuple(g.shape)}, expected {tuple(w.shape)}"
    if np.isnan(g).any() != np.isnan(w).any():
        return ("NaN where the reference has none" if np.isnan(g).any()
                else "no NaN where the reference has one")
    gap = np.abs(g - w)
    bad = gap > atol + rtol * np.abs(w)
    if not bad.any():
        return ""
    where = np.unravel_index(int(np.argmax(np.where(bad, gap, -1))), g.shape) if g.ndim else ()
    at = f" at index {tuple(int(i) for i in where)}" if where else ""
    return (f"largest difference {gap.max():.3g}{at} (yours {g[where] if where else g:.6g}, "
            f"reference {w[where] if where else w:.6g}); {int(bad.sum())} of {bad.size} values differ")


def check(mine: Callable, reference: Callable, inputs: Iterable[tuple], *, what: str = "your function",
          atol: float = 1e-5, rtol: float = 1e-4) -> CheckResult:
    """Run ``mine`` and ``reference`` on every argument tuple of ``inputs`` and compare (see
    :func:`difference`); stop at the first case that differs. The result prints as one line."""
    n = 0
    for n, args in enumerate(inputs, start=1):
        try:
            got = mine(*args)
        except NotImplementedError:
            return CheckResult(False, n - 1, f"✗ {what} is not written yet (it raises NotImplementedError)")
        except Exception as err:  # the learner's code: report it, do not stop the notebook
            return CheckResult(False, n, f"✗ case {n}: {what} raised {type(err).__name__}: {err}")
        problem = difference(got, reference(*args), atol, rtol)
        if problem:
            return CheckResult(False, n, f"✗ case {n}: {problem}")
    return CheckResult(n > 0, n, f"✓ {what} matches the library on {n} random inputs" if n else
                       "✗ no inputs to check")
