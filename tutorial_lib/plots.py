"""Matplotlib figures shared by the notebooks (each returns its Figure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import figures, stats
from .training import History


def _smooth(values: Sequence[float], window: int) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if window <= 1 or len(values) < window:
        return values
    kernel = np.ones(window) / window
    return np.convolve(values, kernel, mode="valid")


def plot_pretraining(histories: Mapping[str, History], smooth: int = 25) -> plt.Figure:
    """Training loss (smoothed), validation loss, and the learning-rate schedule per run."""
    fig, (ax_loss, ax_lr) = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, h in histories.items():
        steps = [r["step"] for r in h.train]
        loss = _smooth([r["loss"] for r in h.train], smooth)
        line, = ax_loss.plot(steps[len(steps) - len(loss):], loss, label=f"{name} train")
        evals = [r for r in h.evals if r["split"] == "validation"]
        ax_loss.plot([r["step"] for r in evals], [r["loss"] for r in evals], "o--",
                     color=line.get_color(), label=f"{name} validation")
        ax_lr.plot(steps, [r["lr"] for r in h.train], label=name)
    ax_loss.set(xlabel="optimizer step", ylabel="cross-entropy (nats / sub-word)",
                title="loss")
    ax_lr.set(xlabel="optimizer step", ylabel="learning rate", title="schedule: warm-up + cosine")
    ax_loss.legend(fontsize=8)
    ax_lr.legend(fontsize=8)
    fig.tight_layout()
    return fig


def read_pretraining(histories: Mapping[str, History]) -> str:
    """What :func:`plot_pretraining` shows, computed: per run, the validation loss at its first
    and last evaluation and how much of the whole fall came in the last interval (one run, no
    test: a large share says the loss was still falling when the budget ended the run)."""
    lines = []
    for name, h in histories.items():
        evals = [r for r in h.evals if r["split"] == "validation"]
        if len(evals) < 2:
            lines.append(f"{name}: one validation, no curve")
            continue
        first, before, last = evals[0], evals[-2], evals[-1]
        fall, tail = first["loss"] - last["loss"], before["loss"] - last["loss"]
        share = f"{100 * tail / fall:.0f} % of the fall since step {first['step']}" if fall > 0 else "no fall"
        lines.append(f"{name}: validation loss {first['loss']:.3f} at step {first['step']}, "
                     f"{last['loss']:.3f} at step {last['step']}; the last {last['step'] - before['step']} "
                     f"steps changed it by {-tail:+.3f} nats ({share}): "
                     f"{'still falling at the end' if tail > 0 else 'no longer falling at the end'}")
    return "\n".join(lines)


def plot_learning_curves(
    runs: Mapping[str, Sequence], metric: str = "error", title: str = "validation error",
    lower_is_better: bool = True, percent: bool = True,
) -> plt.Figure:
    """Mean ± std over seeds of a validation metric against epochs, one line per backbone; its
    alt text carries :func:`read_learning_curves` (print that under the figure).

    ``runs`` maps a name to a list of results that have a ``history`` (e.g. finetuning.Run).
    """
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for name, results in runs.items():
        frames = [pd.DataFrame(r.history.evals).set_index("epoch")[metric] for r in results]
        table = pd.concat(frames, axis=1)
        mean, std = table.mean(axis=1), table.std(axis=1, ddof=1).fillna(0.0)
        ax.plot(mean.index, mean.values, marker="o", label=f"{name} (n={len(results)})")
        ax.fill_between(mean.index, mean - std, mean + std, alpha=0.2)
    ax.set(xlabel="epoch", ylabel=metric, title=title)
    ax.legend()
    fig.tight_layout()
    return figures.describe(fig, read_learning_curves(runs, metric, lower_is_better, percent))


def read_learning_curves(runs: Mapping[str, Sequence], metric: str = "error",
                         lower_is_better: bool = True, percent: bool = True) -> str:
    """What :func:`plot_learning_curves` shows, computed: one line per curve with its mean at the
    first and the last validation, and whether it still moved at the end — each seed's change over
    the second half of its training (the last validation minus the one nearest the middle epoch),
    tested across seeds against 0 with the verdict rule (``stats.against_floor``). "Still
    improving" says the budget, not the method, ended the run."""
    unit, points, k = (" %", " points", 100.0) if percent else ("", "", 1.0)
    lines = []
    for name, results in runs.items():
        evals = [r.history.evals for r in results]
        if not evals or min(len(e) for e in evals) < 2:
            lines.append(f"{name}: one validation per run, no curve")
            continue
        first = np.mean([e[0][metric] for e in evals]) * k
        last = np.mean([e[-1][metric] for e in evals]) * k
        changes = [e[-1][metric] - min(e[:-1], key=lambda x: abs(x["epoch"] - e[-1]["epoch"] / 2))[metric]
                   for e in evals]
        c = stats.against_floor([k * d for d in changes], 0.0)
        word = {"better": "still improving at the end (the budget stopped it)",
                "worse": "getting worse at the end"}.get(c.raw_verdict(not lower_is_better),
                                                          "no change beyond noise at the end")
        if c.test != "none" and word.startswith("no change"):
            word += f" (this test could see {c.mde():.1f}{points})"
        tested = "one run, not tested" if c.test == "none" else f"p = {c.p:.3f}"
        lines.append(f"{name}: {metric} {first:.1f}{unit} at the first validation, {last:.1f}{unit} at "
                     f"the last; {c.delta:+.1f}{points} over the second half "
                     f"({tested}): {word}")
    return "\n".join(lines)


def plot_confusion(
    matrices: Mapping[str, np.ndarray], labels: Sequence[str], normalize: bool = True
) -> plt.Figure:
    """Side-by-side confusion matrices (rows = gold label, columns = prediction)."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(4.2 * len(matrices), 3.9), squeeze=False)
    for ax, (name, m) in zip(axes[0], matrices.items()):
        m = np.asarray(m, dtype=float)
        shown = m / m.sum(axis=1, keepdims=True).clip(min=1) if normalize else m
        ax.imshow(shown, cmap="Blues", vmin=0, vmax=1 if normalize else None)
        for i in range(len(labels)):
            for j in range(len(labels)):
                ax.text(j, i, int(m[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if shown[i, j] > 0.5 else "black")
        ax.set_xticks(range(len(labels)), labels, rotation=45)
        ax.set_yticks(range(len(labels)), labels)
        ax.set(xlabel="predicted", ylabel="gold", title=name)
    fig.tight_layout()
    return figures.describe(fig, read_confusion(matrices, labels))


def plot_label_counts(counts: Mapping[str, Mapping[str, int]]) -> plt.Figure:
    """Grouped bars: label frequency per split."""
    frame = pd.DataFrame(counts).fillna(0)
    ax = frame.plot.bar(figsize=(6.5, 3.2), rot=0)
    ax.set(ylabel="examples", title="label distribution")
    ax.figure.tight_layout()
    return ax.figure


def read_confusion(matrices: Mapping[str, np.ndarray], labels: Sequence[str]) -> str:
    """What :func:`plot_confusion` shows, computed: per model, its weakest class (the share of
    that class's test items it gets right) and its most frequent confusion (gold → predicted,
    count and share of the gold class)."""
    lines = []
    for name, m in matrices.items():
        m = np.asarray(m, dtype=float)
        totals = m.sum(axis=1)
        recall = np.divide(np.diag(m), totals, out=np.full(len(m), np.nan), where=totals > 0)
        weak = int(np.nanargmin(recall))
        off = m.copy()
        np.fill_diagonal(off, 0)
        gold, pred = np.unravel_index(int(off.argmax()), off.shape)
        lines.append(f"{name}: weakest class {labels[weak]} ({100 * recall[weak]:.0f} % of "
                     f"{int(totals[weak])} right); most frequent confusion {labels[gold]} → "
                     f"{labels[pred]} ({int(off[gold, pred])} items, "
                     f"{100 * off[gold, pred] / max(1, totals[gold]):.0f} % of {labels[gold]})")
    return "\n".join(lines)
