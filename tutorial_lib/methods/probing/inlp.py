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

**Every probe must converge.** A classifier stopped by its iteration cap reads a direction half
way to the one the property lies along: removing it says little, and the held-out accuracy can
even *rise* after a removal (notebook 11's curve once did, at lbfgs ``max_iter=100`` with the
warnings silenced). :func:`inlp` therefore records each probe's solver iterations
(``INLPResult.solver_iterations``) and, when one hit its cap, warns with
:class:`ProbeNotConverged` (``strict=True``: raises it) — raise ``max_iter`` or loosen ``tol``.
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


def covariance_projection(X: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """The control matched in *variance* as well as count: the projection removing ``k``
    orthonormalised directions drawn from N(0, Σ), Σ the covariance of ``X`` — high-variance
    directions are drawn more often, so it removes about as much of the representation's variance
    as an eraser whose directions carry much of it (INLP's), where a uniformly random subspace
    (:func:`random_projection`) removes only k/d of it."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    if k == 0:
        return np.eye(d)
    centred = X - X.mean(0)
    draws = np.random.default_rng(seed).standard_normal((k, len(X))) @ centred  # k × d, cov ∝ Σ
    return projection_removing(orth(draws.T), d)


def variance_matched_projection(X: np.ndarray, k: int, target: float, seed: int = 0,
                                steps: int = 40) -> np.ndarray:
    """The control matched in count **and** in variance: ``k`` orthonormalised directions drawn
    from N(0, Σ^α) (Σ the covariance of ``X``), with α ∈ [−8, 8] found by bisection so that the
    projection removes ``target`` of ``X``'s variance (:func:`variance_removed`). α = 0 draws
    uniformly random directions (about k/d of the variance, :func:`random_projection`), α = 1 is
    :func:`covariance_projection`, larger α leans on the top principal directions and negative α
    on the bottom ones. The same draws
    serve every α, so the share removed moves smoothly with α; how close it came is for the caller
    to check (``premises.matched``)."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    if k == 0:
        return np.eye(d)
    cov = np.cov(X, rowvar=False)
    eigval, eigvec = np.linalg.eigh(cov)
    eigval = np.clip(eigval / eigval.max(), 1e-12, None)
    draws = np.random.default_rng(seed).standard_normal((k, d))

    def basis(alpha: float) -> np.ndarray:
        return orth(((draws * eigval ** (alpha / 2)) @ eigvec.T).T)

    def share(B: np.ndarray) -> float:  # = variance_removed(X, I − B Bᵀ), from the covariance
        return float(np.trace(B.T @ cov @ B) / np.trace(cov))

    low, high = -8.0, 8.0
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if share(basis(mid)) < target else (low, mid)
    return projection_removing(basis((low + high) / 2), d)


def variance_removed(X: np.ndarray, P: np.ndarray, shift: np.ndarray | None = None) -> float:
    """The fraction of ``X``'s total variance an edit x ↦ P x (+ shift) removes."""
    X = np.asarray(X, dtype=np.float64)
    after = X @ np.asarray(P).T
    return float(1 - after.var(0).sum() / X.var(0).sum())


def coordinate_projection(d: int, k: int, seed: int = 0) -> np.ndarray:
    """The dropout control of amnesic probing: zero ``k`` random coordinates (a diagonal P)."""
    keep = np.ones(d)
    keep[np.random.default_rng(seed).choice(d, size=k, replace=False)] = 0.0
    return np.diag(keep)


def directions_removed(P: np.ndarray) -> int:
    """d − rank(P): the number of directions a projection removes (trace of I − P)."""
    return int(round(P.shape[0] - np.trace(P)))


def default_classifier(max_iter: int = 1000, C: float = 1.0, tol: float = 1e-4) -> Pipeline:
    """Standardise, then multinomial logistic regression (lbfgs, stopped at ``tol`` or after
    ``max_iter`` iterations: check :func:`solver_iterations` against the cap)."""
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, C=C, tol=tol))


def choose_C(X: np.ndarray, y: np.ndarray, X_dev: np.ndarray, y_dev: np.ndarray,
             grid: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0), max_iter: int = 1000,
             tol: float = 1e-4) -> tuple[float, dict[float, float]]:
    """The probe's inverse regularisation C, chosen on held-out data: ``(best C, {C: dev
    accuracy})``. An under-regularised probe (C = 1 on a few thousand 576-d states) fits noise:
    its dev accuracy is lower than a regularised probe's, and the directions INLP removes are
    then mostly its noise — 11 once removed 192 directions with the probe barely moving."""
    accuracy = {C: float(fit_converged(lambda C=C: default_classifier(max_iter, C=C, tol=tol), X, y,
                                       what=f"probe at C = {C}").score(X_dev, y_dev)) for C in grid}
    return max(accuracy, key=accuracy.get), accuracy


class ProbeNotConverged(UserWarning):
    """An INLP probe stopped at its solver's iteration cap instead of converging."""


def solver_iterations(clf) -> tuple[int, int | None]:
    """(iterations the fitted linear model's solver ran, its cap ``max_iter``); the cap is None
    for a solver without one (a closed-form classifier)."""
    model = clf[-1] if isinstance(clf, Pipeline) else clf
    n_iter = getattr(model, "n_iter_", None)
    used = 0 if n_iter is None else int(np.max(n_iter))
    return used, getattr(model, "max_iter", None) if n_iter is not None else None


def fit_converged(make: Callable[[], object], X: np.ndarray, y: np.ndarray, *, strict: bool = False,
                  what: str = "probe"):
    """Fit ``make()`` on (X, y) single-threaded (see ``probing.single_threaded``). If its solver
    hit the iteration cap, warn with :class:`ProbeNotConverged` (``strict``: raise it), with
    what to do. scikit-learn's own ConvergenceWarning is replaced by this one, not silenced."""
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported below, by our own check
        clf = make().fit(X, y)
    used, cap = solver_iterations(clf)
    if cap is not None and used >= cap:
        message = (f"the {what} did not converge: its solver stopped at max_iter = {cap}; raise "
                   "max_iter (settings: inlp_classifier_max_iter) or loosen its tol")
        if strict:
            raise ProbeNotConverged(message)
        warnings.warn(message, ProbeNotConverged, stacklevel=2)
    return clf


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
    solver_iterations: list[int] = field(default_factory=list)  # each probe's solver iterations
    solver_cap: int | None = None  # the solver's max_iter (None: no cap, e.g. closed form)

    @property
    def probes_converged(self) -> bool:
        """Every probe stopped before its solver's iteration cap."""
        return self.solver_cap is None or max(self.solver_iterations, default=0) < self.solver_cap

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
    strict: bool = False,
) -> INLPResult:
    """Run INLP; return the projection and the held-out accuracy curve.

    ``accuracies[i]`` is the held-out accuracy of a classifier trained after ``i`` iterations
    (``accuracies[0]``: the original representation). The loop stops as soon as that accuracy
    is at most ``majority + tol`` (the returned P is the one that achieved it), or after
    ``max_iterations`` removals. ``classifier()`` must return an unfitted sklearn classifier
    (default: :func:`default_classifier`). Every probe is checked for convergence
    (:func:`fit_converged`: a warning, or with ``strict`` an error, when one is not).
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
    used: list[int] = []
    cap = None
    for i in range(max_iterations + 1):
        clf = fit_converged(make, X_train @ P, y_train, strict=strict,
                            what=f"INLP probe of iteration {i}")
        n, cap = solver_iterations(clf)
        used.append(n)
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
    return INLPResult(P, basis, accuracies, majority, converged, ranks, used, cap)


def reinject(X: np.ndarray, P: np.ndarray | Eraser, shift: np.ndarray) -> np.ndarray:
    """The re-injection control of amnesic probing (Elazar et al. 2021): project the property
    out, then add information back, x ↦ P x + shift. With ``shift = by_class[y]`` from
    :func:`removed_means` (the gold label's mean removed component) only what the *label* says
    about the removed directions returns; with ``overall`` (or a shuffled label) the same kind
    of vector returns without the label. If the model's behaviour comes back with the gold label
    and not without it, what the projection took away was the property, not collateral
    information that shared its directions. ``P`` may be any :class:`Eraser` (x ↦ edit(x) + shift)."""
    X = np.asarray(X, dtype=np.float64)
    edited = P(X) if isinstance(P, Eraser) else X @ np.asarray(P).T
    return edited + np.asarray(shift, dtype=np.float64)


# --- LEACE, the closed-form eraser beside INLP -----------------------------------------------------


@dataclass(frozen=True)
class Eraser:
    """An affine eraser h ↦ P h + shift (row vectors: ``X @ P.T + shift``). INLP's is a linear
    orthogonal projection (shift 0); LEACE's an oblique one with a shift."""

    name: str
    P: np.ndarray  # d × d
    shift: np.ndarray  # d

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) @ self.P.T + self.shift

    @property
    def n_directions(self) -> int:
        """Directions it removes: d − rank(P)."""
        return directions_removed(self.P)


def removed_means(X: np.ndarray, y: np.ndarray, P: np.ndarray | Eraser, classes: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """What re-injection adds back: the mean of the *removed* component x − edit(x) over the rows of
    each class z (``classes`` × d; a class absent from ``y`` gets the overall mean) and over all
    rows (d: the label-free control). ``P``: INLP's projection (edit x ↦ P x) or any
    :class:`Eraser` (LEACE's oblique, shifted edit). ``classes``: None for max(y) + 1."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    c = int(y.max()) + 1 if classes is None else classes
    edited = P(X) if isinstance(P, Eraser) else X @ np.asarray(P).T
    removed = X - edited  # what the edit took from every row
    overall = removed.mean(0)
    by_class = np.stack([removed[y == z].mean(0) if np.any(y == z) else overall for z in range(c)])
    return by_class, overall


def inlp_eraser(result: INLPResult) -> Eraser:
    """INLP's projection as an :class:`Eraser`."""
    return Eraser("INLP", result.P, np.zeros(result.P.shape[0]))


def leace(X: np.ndarray, y: np.ndarray, classes: int | None = None) -> Eraser:
    """LEACE (Belrose et al., NeurIPS 2023, the ``concept-erasure`` package): the least-squares
    affine edit after which **no linear classifier** predicts ``y`` from ``X`` better than a
    constant — every class's mean becomes the overall mean — in closed form, removing at most
    c − 1 directions for c classes (INLP removes c − 1 *per iteration*, until its probes fail).
    ``y``: integer labels (one-hot encoded here: as integers the package would erase only their
    linear correlation with the *value* z, not the class)."""
    import torch
    from concept_erasure import LeaceEraser

    y = np.asarray(y)
    c = int(y.max()) + 1 if classes is None else classes
    x = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    z = torch.nn.functional.one_hot(torch.as_tensor(y, dtype=torch.long), c).to(torch.float64)
    fitted = LeaceEraser.fit(x, z)
    P = fitted.P.numpy()
    bias = fitted.bias.numpy() if fitted.bias is not None else np.zeros(P.shape[0])
    return Eraser("LEACE", P, bias @ (np.eye(P.shape[0]) - P).T)


def probe_after(eraser: Eraser, X_train: np.ndarray, y_train: np.ndarray,
                evaluations: dict[str, tuple[np.ndarray, np.ndarray]], *,
                classifier: Callable[[], object] | None = None,
                grid: tuple[float, ...] | None = None, max_iter: int = 1000, tol: float = 1e-4,
                ) -> dict[str, float]:
    """A fresh linear probe trained on the erased training vectors, scored on each erased
    evaluation set (``{split: (X, y)}``): did the eraser reach its own criterion there?

    With ``grid`` a probe is fitted at every C of it and the one best on ``evaluations["dev"]``
    is reported (its C under ``"C"``): the strongest probe of the grid gets its chance, so an
    eraser passes only if none of them reads the property — and the dev score is the best of
    several, a conservative check."""
    if grid is None:
        clf = fit_converged(classifier or default_classifier, eraser(X_train), y_train,
                            what=f"probe after {eraser.name}")
        return {split: float(clf.score(eraser(X), y)) for split, (X, y) in evaluations.items()}
    if "dev" not in evaluations:
        raise ValueError(f"choosing the probe's C needs a 'dev' split, not only {sorted(evaluations)}")
    erased = {split: (eraser(X), y) for split, (X, y) in evaluations.items()}
    best: dict[str, float] = {}
    for C in grid:
        clf = fit_converged(lambda C=C: default_classifier(max_iter, C=C, tol=tol), eraser(X_train),
                            y_train, what=f"probe after {eraser.name} at C = {C}")
        scores = {split: float(clf.score(X, y)) for split, (X, y) in erased.items()}
        if not best or scores["dev"] > best["dev"]:
            best = scores | {"C": C}
    return best
