"""Iterative nullspace projection (INLP; Ravfogel et al., ACL 2020), the eraser of notebook 11.

Given vectors X (n × d) and labels z of a property, repeat:

1. train a linear classifier W (c × d) to predict z from the current X·P;
2. add W's row space to the removed subspace; with B an orthonormal basis of all removed
   directions, P = I − B Bᵀ, the orthogonal projection onto the intersection of the
   classifiers' nullspaces (Ben-Israel's formula, stabler than multiplying the Pᵢ);
3. retrain on the projected data ("autoregressive" INLP).

Stop when a freshly trained classifier is within ``tol`` of the majority-class rate on
*held-out* data (the amnesic-probing rule, tol 0.01), or after ``max_iterations``.

P is a d × d matrix: symmetric (Pᵀ = P), idempotent (P·P = P) and P·b = 0 for every removed
direction b. It can be applied inside a model, h ↦ P h. Each iteration removes the rank of the
classifier's weights — c − 1 directions for a c-class multinomial classifier, whose rows sum to
zero (1 for a binary property) — so a multi-class property can eat much of a small space.
Singular values below ``RANK_RTOL`` × the largest are numerical zeros, not directions: with
``scipy.linalg.orth``'s cut-off (machine epsilon × size × the largest) a later iteration's
≈1e-15 against ≈1e-2 counted as a direction, which removed a random direction and overstated
the rank removed. ``INLPResult.ranks`` says how many each iteration really removed;
:func:`random_projection` removes the *same number* of random directions, the control every
INLP result needs. INLP guards only against *linear* read-out: a non-linear probe can still
recover some of the property (Ravfogel et al. report 85 % for an MLP after linear accuracy fell
to chance).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import orth
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

RANK_RTOL = 1e-8  # singular values below this fraction of the largest count as zero


def rowspace_basis(W: np.ndarray, rtol: float = RANK_RTOL) -> np.ndarray:
    """Orthonormal basis (d × r) of the row space of W (c × d): the right singular vectors whose
    singular value exceeds ``rtol`` × the largest (r is W's numerical rank)."""
    W = np.atleast_2d(np.asarray(W, dtype=np.float64))
    if W.size == 0:
        return np.zeros((W.shape[1], 0))
    _, s, vt = np.linalg.svd(W, full_matrices=False)
    if s[0] == 0.0:
        return np.zeros((W.shape[1], 0))
    return vt[s > rtol * s[0]].T


def extend_basis(basis: np.ndarray, directions: np.ndarray, tol: float = RANK_RTOL) -> np.ndarray:
    """``basis`` (d × k, orthonormal) plus the part of ``directions`` (d × m, unit columns) that is
    new: each is made orthogonal to ``basis`` and kept only where it has norm left (> ``tol``)."""
    if directions.shape[1] == 0:
        return basis
    rest = directions - basis @ (basis.T @ directions)
    u, s, _ = np.linalg.svd(rest, full_matrices=False)
    return np.concatenate([basis, u[:, s > tol]], axis=1)


def projection_removing(basis: np.ndarray, d: int) -> np.ndarray:
    """P = I − B Bᵀ for an orthonormal basis B (d × k) of the directions to remove."""
    basis = np.asarray(basis, dtype=np.float64).reshape(d, -1)
    return np.eye(d) - basis @ basis.T


def nullspace_projection(W: np.ndarray) -> np.ndarray:
    """Orthogonal projection onto the nullspace of W (c × d): removes W's row space."""
    W = np.atleast_2d(W)
    return projection_removing(rowspace_basis(W), W.shape[1])


def random_directions(d: int, k: int, seed: int = 0) -> np.ndarray:
    """Orthonormal basis (d × k) of a uniformly random k-dimensional subspace."""
    if k == 0:
        return np.zeros((d, 0))
    return orth(np.random.default_rng(seed).standard_normal((d, k)))


def random_projection(d: int, k: int, seed: int = 0) -> np.ndarray:
    """The control: the projection removing ``k`` random directions (same machinery as INLP)."""
    return projection_removing(random_directions(d, k, seed), d)


def coordinate_projection(d: int, k: int, seed: int = 0) -> np.ndarray:
    """The dropout control of amnesic probing: zero ``k`` random coordinates (a diagonal P)."""
    keep = np.ones(d)
    keep[np.random.default_rng(seed).choice(d, size=k, replace=False)] = 0.0
    return np.diag(keep)


def directions_removed(P: np.ndarray) -> int:
    """d − rank(P): the number of directions a projection removes (trace of I − P)."""
    return int(round(P.shape[0] - np.trace(P)))


def default_classifier(max_iter: int = 100, C: float = 1.0) -> Pipeline:
    """Standardise, then multinomial logistic regression (lbfgs)."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, C=C))


def weights_in_input_space(clf) -> np.ndarray:
    """The classifier's weight matrix (c × d) acting on the *raw* input vectors.

    For a StandardScaler + linear model pipeline, W·((x − μ)/σ) = (W/σ)·x − const, so the
    directions the classifier reads are the rows of W/σ.
    """
    if isinstance(clf, Pipeline):
        W = clf[-1].coef_
        scaler = clf[0]
        return W / scaler.scale_ if isinstance(scaler, StandardScaler) else W
    return clf.coef_


def majority_rate(y_train: np.ndarray, y_eval: np.ndarray) -> float:
    """Accuracy on ``y_eval`` of always predicting the most frequent label of ``y_train``."""
    values, counts = np.unique(y_train, return_counts=True)
    return float(np.mean(np.asarray(y_eval) == values[counts.argmax()]))


@dataclass
class INLPResult:
    P: np.ndarray  # d × d projection (symmetric, idempotent)
    basis: np.ndarray  # d × k orthonormal basis of the removed directions
    accuracies: list[float] = field(default_factory=list)  # held-out acc after 0, 1, ... iterations
    majority: float = 0.0  # held-out majority-class rate
    converged: bool = False  # True if stopped by the majority rule, not by max_iterations
    ranks: list[int] = field(default_factory=list)  # directions each iteration actually removed

    @property
    def n_iterations(self) -> int:
        return len(self.accuracies) - 1

    @property
    def n_directions(self) -> int:
        """The rank removed: d − rank(P), the sum of ``ranks``."""
        return self.basis.shape[1]


def inlp(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_dev: np.ndarray,
    y_dev: np.ndarray,
    *,
    max_iterations: int = 20,
    tol: float = 0.01,
    classifier: Callable[[], object] | None = None,
) -> INLPResult:
    """Run INLP; return the projection and the held-out accuracy curve.

    ``accuracies[i]`` is the held-out accuracy of a classifier trained after ``i`` iterations
    (``accuracies[0]``: the original representation). The loop stops as soon as that accuracy
    is at most ``majority + tol`` (the returned P is the one that achieved it), or after
    ``max_iterations`` removals. ``classifier()`` must return an unfitted sklearn classifier
    (default: :func:`default_classifier`).
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    X_dev = np.asarray(X_dev, dtype=np.float64)
    d = X_train.shape[1]
    make = classifier or default_classifier
    majority = majority_rate(y_train, y_dev)
    basis = np.zeros((d, 0))
    P = np.eye(d)
    accuracies: list[float] = []
    ranks: list[int] = []
    converged = False
    for i in range(max_iterations + 1):
        with threadpool_limits(limits=1), warnings.catch_warnings():  # see probing.single_threaded
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = make().fit(X_train @ P, y_train)
        accuracies.append(float(clf.score(X_dev @ P, y_dev)))
        if accuracies[-1] <= majority + tol:
            converged = True
            break
        if i == max_iterations:
            break
        W = weights_in_input_space(clf) @ P  # read through P: stays orthogonal to what is gone
        before = basis.shape[1]
        basis = extend_basis(basis, rowspace_basis(W))
        ranks.append(basis.shape[1] - before)
        P = projection_removing(basis, d)
    return INLPResult(P, basis, accuracies, majority, converged, ranks)
