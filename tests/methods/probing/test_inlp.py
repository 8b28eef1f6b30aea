"""Tests for tutorial_lib.methods.probing.inlp: the projection's algebra and that INLP really erases a
property."""

import numpy as np
import pytest

from tutorial_lib.methods.probing import inlp


def gaussian_task(n: int, d: int = 16, classes: int = 3, seed: int = 0, data_seed: int = 0):
    """Isotropic Gaussian vectors whose class (linearly) shifts the mean; ``seed`` fixes the
    class means, ``data_seed`` the sample."""
    means = 2.0 * np.random.default_rng(seed).standard_normal((classes, d))
    rng = np.random.default_rng([seed, data_seed])
    y = rng.integers(0, classes, size=n)
    return rng.standard_normal((n, d)) + means[y], y


@pytest.fixture(scope="module")
def erased():
    X, y = gaussian_task(3000)
    result = inlp.inlp(X[:2000], y[:2000], X[2000:], y[2000:], max_iterations=10)
    return X, y, result


def test_projection_is_symmetric_idempotent_and_annihilates_removed_directions(erased):
    _, _, r = erased
    P = r.P
    assert r.n_directions > 0
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    np.testing.assert_allclose(P @ r.basis, 0.0, atol=1e-10)
    assert inlp.directions_removed(P) == r.n_directions


def test_a_fresh_probe_after_inlp_is_near_the_majority_rate_on_held_out_data(erased):
    X, y, r = erased
    assert r.accuracies[0] > 0.9  # the property was linearly encoded
    assert r.converged and r.accuracies[-1] <= r.majority + 0.01
    X_new, y_new = gaussian_task(1000, data_seed=1)  # unseen data, same distribution
    before = inlp.default_classifier().fit(X, y).score(X_new, y_new)
    after = inlp.default_classifier().fit(X @ r.P, y).score(X_new @ r.P, y_new)
    assert before > 0.9
    assert after < inlp.majority_rate(y, y_new) + 0.05


def test_each_iteration_is_trained_on_projected_data_and_removes_new_directions():
    X, y = gaussian_task(3000, d=12, classes=2, seed=3)
    r = inlp.inlp(X[:2000], y[:2000], X[2000:], y[2000:], max_iterations=3, tol=-1.0)
    assert r.n_iterations == 3 and not r.converged
    assert r.n_directions == 3  # binary property: one new direction per iteration
    np.testing.assert_allclose(r.basis.T @ r.basis, np.eye(3), atol=1e-10)


def test_nullspace_projection_of_a_weight_matrix():
    W = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    P = inlp.nullspace_projection(W)
    np.testing.assert_allclose(W @ P, 0.0, atol=1e-12)
    np.testing.assert_allclose(P, np.diag([0.0, 0.0, 1.0]), atol=1e-12)


def test_random_and_coordinate_controls_remove_exactly_k_directions():
    P = inlp.random_projection(32, 5, seed=0)
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    assert inlp.directions_removed(P) == 5
    assert not np.allclose(P, inlp.random_projection(32, 5, seed=1))
    D = inlp.coordinate_projection(32, 5, seed=0)
    assert inlp.directions_removed(D) == 5 and np.allclose(D, np.diag(np.diag(D)))
    assert inlp.directions_removed(inlp.random_projection(8, 0)) == 0


def test_weights_in_input_space_undo_the_standard_scaler():
    X, y = gaussian_task(500, d=6, classes=2)
    X = X * np.array([1, 10, 100, 1, 1, 1.0])
    clf = inlp.default_classifier().fit(X, y)
    W = inlp.weights_in_input_space(clf)
    raw = X @ W.T
    std = clf[-1].decision_function(clf[0].transform(X))
    np.testing.assert_allclose(raw.ravel() - raw.ravel().mean(), std - std.mean(), atol=1e-8)


def test_numerically_zero_singular_directions_are_not_removed():
    """Bug guarded: the multinomial weights have rank C − 1; once the property is mostly gone
    their last singular value (~1e-15) against the others (~1e-2) passed scipy's cut-off and an
    iteration removed a random third direction (18 instead of 16 after 8 iterations here)."""
    X, y = gaussian_task(3000, d=64, classes=3)
    r = inlp.inlp(X[:2000], y[:2000], X[2000:], y[2000:], max_iterations=8, tol=-1.0)
    assert r.ranks == [2] * 8  # C − 1 per iteration
    assert r.n_directions == 16 == sum(r.ranks) == inlp.directions_removed(r.P)
    assert np.linalg.matrix_rank(np.eye(64) - r.P, tol=1e-8) == 16
    np.testing.assert_allclose(r.basis.T @ r.basis, np.eye(16), atol=1e-10)


def test_rowspace_basis_uses_a_relative_tolerance():
    rng = np.random.default_rng(0)
    W = 1e-2 * rng.standard_normal((2, 10))
    W = np.vstack([W, -W.sum(0) + 1e-15 * rng.standard_normal(10)])  # rows sum to ~0: rank 2
    assert inlp.rowspace_basis(W).shape == (10, 2)
    assert inlp.rowspace_basis(np.zeros((3, 10))).shape == (10, 0)
    basis = inlp.rowspace_basis(W)
    assert inlp.extend_basis(basis, basis).shape == (10, 2)  # nothing new


def test_every_probe_converged_and_the_solver_iterations_are_recorded(erased):
    _, _, r = erased
    assert len(r.solver_iterations) == len(r.accuracies)
    assert r.solver_cap == 1000 and r.probes_converged
    assert all(0 < n < r.solver_cap for n in r.solver_iterations)


def test_a_probe_stopped_at_its_cap_warns_or_fails_loudly():
    X, y = gaussian_task(600, d=16, classes=3)
    capped = lambda: inlp.default_classifier(max_iter=2, tol=1e-12)  # noqa: E731
    with pytest.warns(inlp.ProbeNotConverged, match="max_iter = 2"):
        r = inlp.inlp(X[:400], y[:400], X[400:], y[400:], max_iterations=1, classifier=capped)
    assert not r.probes_converged and r.solver_iterations[0] == 2
    with pytest.raises(inlp.ProbeNotConverged, match="raise max_iter"):
        inlp.inlp(X[:400], y[:400], X[400:], y[400:], max_iterations=1, classifier=capped,
                  strict=True)


def test_converged_inlp_accuracy_does_not_rise_over_iterations():
    X, y = gaussian_task(4000, d=24, classes=4, seed=5)
    r = inlp.inlp(X[:3000], y[:3000], X[3000:], y[3000:], max_iterations=6, strict=True)
    assert r.probes_converged
    assert all(b <= a + 0.02 for a, b in zip(r.accuracies, r.accuracies[1:]))  # within noise


def test_reinjecting_the_gold_labels_removed_mean_restores_what_the_label_explains():
    # the removed subspace carries only the label (no noise there): the class means restore x
    rng = np.random.default_rng(0)
    d, n = 8, 600
    y = rng.integers(0, 3, size=n)
    B = np.linalg.qr(rng.standard_normal((d, 2)))[0]  # the property's two directions
    codes = 3.0 * rng.standard_normal((3, 2))
    rest = rng.standard_normal((n, d))
    X = rest - (rest @ B) @ B.T + codes[y] @ B.T
    P = inlp.projection_removing(B, d)
    by_class, overall = inlp.removed_means(X, y, P)
    assert by_class.shape == (3, d)
    np.testing.assert_allclose(inlp.reinject(X, P, by_class[y]), X, atol=1e-10)
    np.testing.assert_allclose(overall, (X - X @ P).mean(0), atol=1e-12)
    # without the label (the overall mean, or shuffled labels) x does not come back
    assert np.abs(inlp.reinject(X, P, overall) - X).max() > 1.0
    shuffled = rng.permutation(y)
    assert np.abs(inlp.reinject(X, P, by_class[shuffled]) - X).max() > 1.0
    # a class absent from the labels gets the overall mean
    by4, _ = inlp.removed_means(X, y, P, classes=4)
    np.testing.assert_allclose(by4[3], overall)


# --- LEACE beside INLP ------------------------------------------------------------------------------


def _signal_in_three_directions(n: int = 3000, d: int = 12, seed: int = 0):
    """Four classes whose means differ only in the first three coordinates (isotropic noise)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    X = rng.normal(size=(n, d))
    X[:, :2] += 2 * np.eye(4)[y][:, :2]
    X[:, 2] += 1.5 * (y == 3)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def test_leace_leaves_no_linear_signal():
    """Every class's mean equals the overall mean after LEACE (so no linear classifier beats a
    constant on the fitting data), and a fresh probe is at the majority rate on held-out data."""
    X, y, X_dev, y_dev = _signal_in_three_directions()
    eraser = inlp.leace(X, y)
    erased = eraser(X)
    for z in range(4):
        assert np.allclose(erased[y == z].mean(0), erased.mean(0), atol=1e-9)
    assert eraser.n_directions == 3  # c − 1 for four classes
    probe = inlp.probe_after(eraser, X, y, {"dev": (X_dev, y_dev)})["dev"]
    assert probe <= inlp.majority_rate(y, y_dev) + 0.02


def test_our_eraser_form_is_the_packages_edit():
    """h ↦ P h + shift (what lm_logits applies) equals concept-erasure's own eraser(x)."""
    import torch
    from concept_erasure import LeaceEraser

    X, y, X_dev, _ = _signal_in_three_directions(seed=1)
    ours = inlp.leace(X, y)
    theirs = LeaceEraser.fit(torch.as_tensor(X), torch.nn.functional.one_hot(torch.as_tensor(y), 4)
                             .to(torch.float64))
    assert np.allclose(ours(X_dev), theirs(torch.as_tensor(X_dev)).numpy(), atol=1e-9)


def test_inlp_and_leace_agree_on_what_is_erasable():
    """On a property that lives in three known directions, INLP run to its stopping rule and LEACE
    both bring the probe to the majority rate, remove three directions, and remove (nearly) the
    same subspace: every principal cosine between INLP's removed basis and LEACE's removed space
    (the column space of I − P) above 0.9."""
    X, y, X_dev, y_dev = _signal_in_three_directions()
    run = inlp.inlp(X, y, X_dev, y_dev, max_iterations=10)
    assert run.converged and run.n_directions == 3
    lea = inlp.leace(X, y)
    removed = np.linalg.svd(np.eye(12) - lea.P)[0][:, :3]
    cosines = np.linalg.svd(run.basis.T @ removed, compute_uv=False)
    assert cosines.min() > 0.9
    for eraser in (inlp.inlp_eraser(run), lea):
        assert inlp.probe_after(eraser, X, y, {"dev": (X_dev, y_dev)})["dev"] <= run.majority + 0.02


def test_a_regularised_probe_is_chosen_on_dev_and_beats_an_overfit_one():
    """Few rows in many dimensions: C = 1 fits noise, a smaller C reads the property better on
    held-out data (11's case: 0.366 at C = 1, 0.475 at C = 0.001 on SmolLM2's states)."""
    rng = np.random.default_rng(0)
    n, d = 400, 200
    y = rng.integers(0, 3, 2 * n)
    X = rng.normal(size=(2 * n, d)) + 0.3 * np.eye(3)[y] @ rng.normal(size=(3, d))
    C, accuracy = inlp.choose_C(X[:n], y[:n], X[n:], y[n:])
    assert accuracy[C] == max(accuracy.values()) and C < 1.0
    assert accuracy[C] > accuracy[1.0]


def test_the_covariance_control_removes_more_variance_than_a_uniform_one():
    """A representation whose variance sits in a few directions: k directions drawn from N(0, Σ)
    remove far more of it than k uniform ones (k/d), which is what the control must match."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 50)) * np.r_[np.full(5, 10.0), np.ones(45)]
    uniform = inlp.variance_removed(X, inlp.random_projection(50, 5, seed=1))
    matched = inlp.variance_removed(X, inlp.covariance_projection(X, 5, seed=1))
    assert uniform < 0.2 < 0.5 < matched  # (0.09 and 0.61 here; the top five hold 92 %)
    assert inlp.directions_removed(inlp.covariance_projection(X, 5, seed=1)) == 5


def test_a_probe_after_an_eraser_with_a_grid_reports_the_best_dev_C_and_its_other_scores():
    """With ``grid`` the fresh probe is fitted at every C and the one best on dev is reported,
    with its own test score (not the best test score of the grid); an identity eraser keeps the
    property readable, LEACE does not."""
    X, y, X_dev, y_dev = _signal_in_three_directions()
    identity = inlp.Eraser("none", np.eye(12), np.zeros(12))
    splits = {"dev": (X_dev[:500], y_dev[:500]), "test": (X_dev[500:], y_dev[500:])}
    got = inlp.probe_after(identity, X, y, splits, grid=(0.001, 1.0))
    by_C = {C: inlp.probe_after(identity, X, y, splits,
                                classifier=lambda C=C: inlp.default_classifier(C=C)) for C in (0.001, 1.0)}
    best = max(by_C, key=lambda C: by_C[C]["dev"])
    assert got == {**by_C[best], "C": best}
    assert got["dev"] > inlp.majority_rate(y, y_dev) + 0.2
    erased = inlp.probe_after(inlp.leace(X, y), X, y, splits, grid=(0.001, 1.0))
    assert erased["dev"] <= inlp.majority_rate(y, y_dev[:500]) + 0.02
    with pytest.raises(ValueError, match="needs a 'dev' split"):
        inlp.probe_after(identity, X, y, {"test": splits["test"]}, grid=(1.0,))


def test_re_injection_works_through_an_affine_eraser_too():
    """For LEACE's oblique, shifted edit the removed component is x − r(x), not (I − P) x: when it is
    constant within each class (the property's directions carry only the label), r(x) + m_z gives
    x back — up to the little noise LEACE's whitened, oblique edit takes along — and the shuffled
    label does not."""
    rng = np.random.default_rng(1)
    d, n = 8, 900
    y = rng.integers(0, 3, size=n)
    B = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    rest = rng.standard_normal((n, d))
    X = rest - (rest @ B) @ B.T + (3.0 * rng.standard_normal((3, 2)))[y] @ B.T
    eraser = inlp.leace(X, y)
    by_class, overall = inlp.removed_means(X, y, eraser)
    np.testing.assert_allclose(overall, (X - eraser(X)).mean(0), atol=1e-10)
    np.testing.assert_allclose(inlp.reinject(X, eraser, by_class[y]), X, atol=5e-3)
    assert np.abs(inlp.reinject(X, eraser, by_class[rng.permutation(y)]) - X).max() > 1.0


def test_notebook_11s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_projections():
    """Notebook 11's self-check, run as the learner would: the stub is reported, the solution passes
    on bases of 0, 1 and 2 directions, and three plausible mistakes fail (I + BBᵀ, the sign flipped;
    BBᵀ, the projection onto the span instead of off it; I − BᵀB, the product the wrong way round)."""
    from notebook_selfcheck import LearnerRun

    from tutorial_lib import selfcheck

    run = LearnerRun("11_amnesic_probing", {"np": np, "inlp": inlp}, "my_projection_removing",
                     "random_basis", inlp.projection_removing)
    assert {B.shape[1] for B, _ in selfcheck.cases(run.ns["random_basis"], n=20)} == {0, 1, 2}
    run.fails({"plus": lambda B, d: np.eye(d) + B @ B.T, "onto the span": lambda B, d: B @ B.T,
               "BᵀB": lambda B, d: np.eye(d) - B.T @ B})


def test_the_variance_matched_control_removes_the_erasers_share_with_as_many_directions():
    """11's "variance-matched" control drawn from N(0, Σ) removed 0.377 of the variance against
    LEACE's 0.215 with the same 16 directions: not matched. Bisection on Σ's power matches it."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 30)) * np.linspace(3.0, 0.2, 30)
    covariance = inlp.variance_removed(X, inlp.covariance_projection(X, 5, seed=1))
    for target in (0.5 * covariance, 1.3 * covariance):
        P = inlp.variance_matched_projection(X, 5, target, seed=1)
        assert inlp.directions_removed(P) == 5
        assert abs(inlp.variance_removed(X, P) - target) < 0.005
        assert abs(covariance - target) > 0.05  # the unmatched control was off
    assert np.allclose(inlp.variance_matched_projection(X, 0, 0.3), np.eye(30))
