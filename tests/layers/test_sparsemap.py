"""sparsemap: the projection against cvxpy on the hull of enumerated outputs, its certificate
and its vector-Jacobian product against finite differences."""

import warnings

import numpy as np
import pytest
from layer_cases import CASES, case, hull_projection

from structlp import ConvergenceWarning
from structlp.layers import sparsemap, sparsemap_batch


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_projection_matches_cvxpy_on_the_enumerated_hull(name, seed):
    model, x, _, M = case(name, seed)
    theta = np.random.default_rng(10 + seed).normal(size=M.shape[1])
    res = sparsemap(model, x, theta)
    want = hull_projection(M, theta)
    assert np.abs(res.mu - want).max() < 1e-6
    assert res.certified and 0 <= res.gap <= res.threshold
    # the support: outputs of x, positive weights summing to one, mixing to mu
    rows = {r.tobytes() for r in M}
    assert all(s.tobytes() in rows for s in res.support)
    assert np.all(res.weights > 0) and abs(res.weights.sum() - 1) < 1e-12
    assert np.allclose(res.weights @ res.support, res.mu, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_vjp_matches_finite_differences(name):
    model, x, _, M = case(name, 3)
    rng = np.random.default_rng(4)
    theta = rng.normal(size=M.shape[1])
    res, vjp = sparsemap(model, x, theta, with_vjp=True)
    g = rng.normal(size=M.shape[1])
    h = 1e-6
    fd = np.empty_like(theta)
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h
        fd[j] = g @ (sparsemap(model, x, theta + e).mu - sparsemap(model, x, theta - e).mu) \
            / (2 * h)
    assert np.abs(vjp(g) - fd).max() < 1e-6
    J = res.jacobian()
    assert np.allclose(J, J.T) and np.allclose(J @ J, J)          # an orthogonal projector
    assert np.allclose(J @ g, vjp(g)) and np.allclose(res.vjp(g), vjp(g))
    assert np.allclose(vjp(np.vstack([g, 2 * g])), [vjp(g), 2 * vjp(g)])


def test_a_vertex_has_a_zero_jacobian():
    model, x, _, M = case("matching")
    theta = 10 * M[3] - 5                           # far beyond one vertex
    res, vjp = sparsemap(model, x, theta, with_vjp=True)
    assert res.support.shape[0] == 1 and np.array_equal(res.mu, M[3])
    assert not vjp(np.ones(M.shape[1])).any()


def test_max_iter_without_the_gap_warns_and_is_not_certified():
    model, x, _, M = case("matching")
    theta = np.random.default_rng(0).normal(size=M.shape[1])
    with pytest.warns(ConvergenceWarning, match="not certified"):
        res = sparsemap(model, x, theta, max_iter=1)
    assert not res.certified and res.gap > res.threshold and res.n_iter == 1
    with pytest.warns(ConvergenceWarning):
        res = sparsemap(model, x, theta, max_iter=0)
    assert np.isnan(res.gap) and not res.certified


def test_batch_is_the_examples_one_by_one():
    model, x, _, M = case("chain")
    rng = np.random.default_rng(0)
    thetas = rng.normal(size=(5, M.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n_jobs in (None, 2):
            out, vjps = sparsemap_batch(model, [x] * 5, thetas, with_vjp=True, n_jobs=n_jobs)
            for th, r, v in zip(thetas, out, vjps):
                one, vjp = sparsemap(model, x, th, with_vjp=True)
                assert np.array_equal(r.mu, one.mu)
                assert np.array_equal(v(th), vjp(th))


def test_the_plain_step_is_the_compiled_one(monkeypatch):
    """Without numba the restricted QP's step runs as plain NumPy: the same projections."""
    from structlp.layers import projection, qp
    for name in ("matching", "chain"):
        model, x, _, M = case(name, 5)
        theta = np.random.default_rng(5).normal(size=M.shape[1])
        compiled = sparsemap(model, x, theta)
        monkeypatch.setattr(projection, "step_function", lambda: qp.add_vertex)
        plain = sparsemap(model, x, theta)
        monkeypatch.undo()
        assert np.allclose(plain.mu, compiled.mu, atol=1e-12)
        assert plain.n_iter == compiled.n_iter and plain.certified


def test_a_declared_decoder_that_does_not_maximize_is_caught():
    """The oracle is the learners' checked path: a wrong declared decoder is an OracleError."""
    from oracles import ChooseKDecoded

    from structlp import OracleError

    class Wrong(ChooseKDecoded):
        def inference(self, x, scores):
            y = np.zeros(len(scores), dtype=int)
            y[:3] = 1                                  # three items where k = 2
            return y
    x = np.zeros((5, 1))
    with pytest.raises(OracleError, match="Wrong.inference"):
        sparsemap(Wrong(2), x, np.arange(5.0))


@pytest.mark.parametrize("shift", [-50.0, 50.0])
def test_a_constant_shift_leaves_the_projection_on_a_matching(shift):
    """Every assignment has the same number of ones, so theta + c 1 projects as theta does
    (scores far below zero included: the first vertex is never taken as certified)."""
    model, x, _, M = case("matching", 6)
    theta = np.random.default_rng(6).normal(size=M.shape[1])
    a, b = sparsemap(model, x, theta), sparsemap(model, x, theta + shift)
    assert np.abs(a.mu - b.mu).max() < 1e-8 and b.certified
    assert np.abs(b.mu - hull_projection(M, theta + shift)).max() < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matching6", "chain5"])
@pytest.mark.parametrize("scale", [0.3, 1.0, 5.0])
def test_larger_hulls_against_cvxpy(name, scale):
    """Hundreds of outputs, supports of every size (small scores: near the barycenter)."""
    model, x, _, M = case(name, 7)
    for seed in range(3):
        theta = scale * np.random.default_rng(seed).normal(size=M.shape[1])
        res, vjp = sparsemap(model, x, theta, with_vjp=True)
        assert res.certified
        assert np.abs(res.mu - hull_projection(M, theta)).max() < 1e-6
        g = np.random.default_rng(seed + 10).normal(size=M.shape[1])
        e = 1e-6 * np.random.default_rng(seed + 20).normal(size=M.shape[1])
        fd = (sparsemap(model, x, theta + e).mu - sparsemap(model, x, theta - e).mu) @ g / 2
        assert abs(vjp(g) @ e - fd) < 1e-9


@pytest.mark.parametrize("scale", [0.01, 0.3, 3.0])
def test_10x10_matchings_against_the_doubly_stochastic_projection(scale):
    """The Birkhoff polytope is the hull of the assignments (Birkhoff-von Neumann): cvxpy's
    projection onto the doubly stochastic matrices is an independent answer.  Small scores
    need supports of up to (n-1)^2 + 1 assignments: many KKT updates and recomputations."""
    import cvxpy as cp

    from structlp.structures import BipartiteMatching
    n = 10
    theta = scale * np.random.default_rng(int(100 * scale)).normal(size=n * n)
    res = sparsemap(BipartiteMatching(), np.zeros((n, n, 1)), theta)
    P = cp.Variable((n, n), nonneg=True)
    cp.Problem(cp.Minimize(cp.sum_squares(P - theta.reshape(n, n))),
               [cp.sum(P, axis=0) == 1, cp.sum(P, axis=1) == 1]).solve(
        solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    assert res.certified and np.abs(res.mu - P.value.ravel()).max() < 1e-6
    assert len(res.weights) <= (n - 1) ** 2 + 1
