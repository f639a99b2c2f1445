"""The kernelized dual: primal = dual for the linear kernel, kernels that fit what a
linear model cannot, the low-rank factor, and bad kernel input."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from structlp import InvalidInputError, InvalidParameterError, MaxMarginLearner
from structlp.compiler import prepare
from structlp.dual import compile_dual
from structlp.formulations import MinMax
from structlp.kernels import Kernel, factor_kernel, incomplete_cholesky
from structlp.structures import BipartiteMatching


def assignments(rng, m, n, d, score, noise=0.0):
    X, Y = [], []
    for _ in range(m):
        x = rng.normal(size=(n, n, d))
        r, c = linear_sum_assignment(score(x) + noise * rng.normal(size=(n, n)), maximize=True)
        y = np.zeros((n, n), dtype=int)
        y[r, c] = 1
        X.append(x)
        Y.append(y)
    return X, Y


@pytest.fixture
def noisy(rng):
    w0 = rng.normal(size=4)
    return assignments(rng, 15, 5, 4, lambda x: x @ w0, noise=0.7)


@pytest.mark.parametrize("R, P", [(1, 1), (2, 2)])
def test_linear_dual_equals_primal(solver, R, P, rng):
    name, opts, tol = solver
    X, Y = [], []
    for _ in range(10):  # random (non-separable) outputs of the (R, P) polytope
        x = rng.normal(size=(4, 3, 3))
        s = x @ np.array([1.0, -0.5, 0.3]) + rng.normal(size=(4, 3))
        (y,), _ = __import__("structlp").inference.maximize(
            BipartiteMatching(R=R, P=P), [x], [s.ravel()])
        X.append(x)
        Y.append(y)
    model = BipartiteMatching(R=R, P=P)
    primal = MaxMarginLearner(model, C=0.7).fit(X, Y)
    dual = MaxMarginLearner(model, C=0.7, dual=True, solver=name, solver_opts=opts).fit(X, Y)
    rel = max(tol, 1e-6) * 100  # 1e-4 for interior point; looser for first-order solvers
    assert abs(dual.objective_ - primal.objective_) <= rel * abs(primal.objective_)
    np.testing.assert_allclose(dual.coef_, primal.coef_, atol=rel * np.abs(primal.coef_).max())
    np.testing.assert_allclose(dual.slack_, primal.slack_, atol=rel * (1 + primal.slack_.max()))


def test_kernel_expansion_equals_coef_prediction(noisy, rng):
    X, Y = noisy
    dual = MaxMarginLearner(BipartiteMatching(), C=1.0, dual=True).fit(X, Y)
    Xn, _ = assignments(rng, 6, 5, 4, lambda x: x[..., 0])
    expansion = dual.decision_scores(Xn)
    for x, s in zip(Xn, expansion):
        np.testing.assert_allclose(s, (x @ dual.coef_).ravel(), atol=1e-6)
    primal = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    for a, b in zip(dual.predict(Xn), primal.predict(Xn)):
        np.testing.assert_array_equal(a, b)
    # only support parts are kept, and they are enough
    assert len(dual.support_) <= dual.n_training_parts_
    np.testing.assert_allclose(dual.hinge_losses(X, Y), dual.slack_, atol=1e-6)


def test_rbf_fits_what_no_linear_model_can(rng):
    # the true edge score is -|x_jk|^2: not linear in the features
    score = lambda x: -np.sum(x ** 2, axis=-1)  # noqa: E731
    X, Y = assignments(rng, 25, 5, 2, score)
    Xt, Yt = assignments(rng, 25, 5, 2, score)
    linear = MaxMarginLearner(BipartiteMatching(), C=10.0).fit(X, Y)
    rbf = MaxMarginLearner(BipartiteMatching(), C=10.0, dual=True, kernel="rbf",
                           gamma=0.5).fit(X, Y)
    lin_train, rbf_train = linear.loss(X, Y), rbf.loss(X, Y)
    lin_test, rbf_test = linear.loss(Xt, Yt), rbf.loss(Xt, Yt)
    assert rbf_train <= 0.2 and lin_train >= 1.5   # (out of 5 edges per example)
    assert rbf_test < 0.5 * lin_test
    assert rbf.objective_ < linear.objective_


def test_factor_tolerance_converges_to_the_dense_kernel_objective(noisy):
    X, Y = noisy
    model = BipartiteMatching()
    data = prepare(model, X, Y)
    Phi = data.stacked_features().toarray()
    kern = Kernel("rbf", gamma=0.3)
    K = kern(Phi, Phi)
    vals, vecs = np.linalg.eigh(K)  # an exact factor computed independently
    G_exact = vecs * np.sqrt(np.clip(vals, 0, None))
    ref = compile_dual(MinMax().blocks(data), Phi.shape[0], len(X), 1.0, G_exact)
    ref.problem.solve(solver="CLARABEL")
    errors, ranks = [], []
    for tol in (1e-1, 1e-2, 1e-4, 1e-8, 0.0):
        fit = MaxMarginLearner(model, C=1.0, dual=True, kernel="rbf", gamma=0.3,
                               kernel_tol=tol).fit(X, Y)
        errors.append(abs(fit.objective_ - ref.objective) / abs(ref.objective))
        ranks.append(fit.kernel_rank_)
    assert ranks == sorted(ranks) and ranks[0] < ranks[-1]
    assert errors[0] > errors[2] and errors[-1] < 1e-6 and errors[-2] < 1e-6


def test_incomplete_cholesky_bounds(rng):
    A = rng.normal(size=(60, 3))
    kern = Kernel("rbf", gamma=0.2)
    K = kern(A, A)
    G, piv, res = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol=0.0)
    np.testing.assert_allclose(G @ G.T, K, atol=1e-8)
    G3, piv3, res3 = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol=0.0,
                                         max_rank=3)
    assert G3.shape == (60, 3) and len(set(piv3)) == 3
    R = K - G3 @ G3.T
    assert np.isclose(np.diag(R).max(), res3) and np.linalg.eigvalsh(R).min() > -1e-9
    G2, _, res2 = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol=1e-3)
    assert res2 <= 1e-3 * np.diag(K).max() and G2.shape[1] < 60
    # linear kernel: the factor is the features themselves
    F, info = factor_kernel(Kernel("linear"), A)
    assert F is A and info["rank"] == 3


def test_precomputed_and_callable_kernels_agree_with_builtin(noisy, rng):
    X, Y = noisy
    data = prepare(BipartiteMatching(), X, Y)
    Phi = data.stacked_features().toarray()
    kern = Kernel("poly", gamma=0.5, degree=2, coef0=1.0)
    builtin = MaxMarginLearner(BipartiteMatching(), dual=True, kernel="poly", gamma=0.5,
                               degree=2).fit(X, Y)
    pre = MaxMarginLearner(BipartiteMatching(), dual=True, kernel="precomputed").fit(
        X, Y, kernel_matrix=kern(Phi, Phi))
    func = MaxMarginLearner(BipartiteMatching(), dual=True,
                            kernel=lambda A, B: (0.5 * A @ B.T + 1.0) ** 2).fit(X, Y)
    for other in (pre, func):
        assert np.isclose(other.objective_, builtin.objective_, rtol=1e-6)
    Xn, _ = assignments(rng, 4, 5, 4, lambda x: x[..., 0])
    Pn = np.vstack([x.reshape(-1, 4) for x in Xn])
    a = builtin.predict(Xn)
    b = pre.predict(Xn, kernel_matrix=kern(Pn, Phi))
    c = func.predict(Xn)
    for ya, yb, yc in zip(a, b, c):
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(ya, yc)


# ------------------------------------------------------------------ bad input
def _fit(X, Y, **kw):
    km = kw.pop("kernel_matrix", None)
    return MaxMarginLearner(BipartiteMatching(), dual=True, **kw).fit(X, Y, kernel_matrix=km)


def test_unknown_kernel(noisy):
    with pytest.raises(InvalidParameterError, match="'kernel' parameter.*'gauss'"):
        _fit(*noisy, kernel="gauss")


@pytest.mark.parametrize("gamma", [0, -1.0, np.nan])
def test_bad_gamma(noisy, gamma):
    with pytest.raises(InvalidParameterError, match="'gamma' parameter"):
        _fit(*noisy, kernel="rbf", gamma=gamma)


def test_bad_degree_tol_rank(noisy):
    with pytest.raises(InvalidParameterError, match="'degree'"):
        _fit(*noisy, kernel="poly", degree=0)
    with pytest.raises(InvalidParameterError, match="'kernel_tol'"):
        _fit(*noisy, kernel="rbf", kernel_tol=-1)
    with pytest.raises(InvalidParameterError, match="'max_rank'"):
        _fit(*noisy, kernel="rbf", max_rank=0)


def test_kernel_without_dual(noisy):
    with pytest.raises(InvalidParameterError, match="needs dual=True"):
        MaxMarginLearner(BipartiteMatching(), kernel="rbf").fit(*noisy)


def test_precomputed_kernel_checks(noisy, rng):
    X, Y = noisy
    n = 25 * len(X)
    with pytest.raises(InvalidParameterError, match="kernel_matrix=K"):
        _fit(X, Y, kernel="precomputed")
    with pytest.raises(InvalidInputError, match=rf"shape \({n}, {n}\)"):
        _fit(X, Y, kernel="precomputed", kernel_matrix=np.eye(n - 1))
    A = rng.normal(size=(n, n))
    with pytest.raises(InvalidInputError, match="symmetric"):
        _fit(X, Y, kernel="precomputed", kernel_matrix=A)
    with pytest.raises(InvalidInputError, match="positive semidefinite"):
        _fit(X, Y, kernel="precomputed", kernel_matrix=-(A @ A.T))
    fit = _fit(X, Y, kernel="precomputed", kernel_matrix=np.eye(n))
    with pytest.raises(InvalidInputError, match=r"new parts x training parts"):
        fit.predict(X[:1], kernel_matrix=np.eye(3))
    with pytest.raises(InvalidParameterError, match="only used with kernel='precomputed'"):
        MaxMarginLearner(BipartiteMatching()).fit(X, Y, kernel_matrix=np.eye(n))


@pytest.mark.parametrize("structure", ["spanning_tree", "perfect_matching", "bipartite"])
def test_linear_dual_equals_primal_for_certificates(structure, rng):
    """Eq. 15 with the slack box: the dual of every certificate QP gives the primal's w."""
    from structlp.structures import PerfectMatching, SpanningTree
    n, d, m = 6, 4, 8
    model = {"spanning_tree": SpanningTree(), "perfect_matching": PerfectMatching(),
             "bipartite": BipartiteMatching()}[structure]
    w0 = rng.normal(size=d)
    X, Y = [], []
    for _ in range(m):
        x = rng.normal(size=(n, n, d))
        if structure != "bipartite":
            x = (x + x.transpose(1, 0, 2)) / 2
        s = model.features(model.check_x(x)) @ w0
        X.append(x)
        Y.append(model.inference(x, s))
    primal = MaxMarginLearner(model, C=0.5, formulation="certificate").fit(X, Y)
    dual = MaxMarginLearner(model, C=0.5, formulation="certificate", dual=True).fit(X, Y)
    assert abs(dual.objective_ - primal.objective_) <= 1e-4 * abs(primal.objective_)
    np.testing.assert_allclose(dual.coef_, primal.coef_, atol=1e-4 * np.abs(primal.coef_).max())
    assert np.abs(primal.coef_).max() > 0.05


# ------------------------------------------------------------------ valid input that crashed
def _sparse_assignments(rng, m=8, n=4, d=20, density=0.05):
    X, Y = [], []
    for _ in range(m):
        x = rng.normal(size=(n, n, d)) * (rng.random((n, n, d)) < density)
        r, c = linear_sum_assignment(rng.normal(size=(n, n)), maximize=True)
        y = np.zeros((n, n), dtype=int)
        y[r, c] = 1
        X.append(x)
        Y.append(y)
    return X, Y


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
@pytest.mark.parametrize("density", [0.05, 0.0])
def test_sparse_or_zero_part_features_factor_like_the_dense_kernel(kernel, density, rng):
    """Part features with <= 10% nonzeros (or none) stay sparse in the factor, which
    crashed; the result must equal the same kernel given as a dense precomputed matrix."""
    X, Y = _sparse_assignments(rng, density=density)
    fit = _fit(X, Y, kernel=kernel, gamma=0.5, degree=2)
    Phi = prepare(BipartiteMatching(), X, Y).stacked_features()
    assert Phi.nnz <= 0.1 * Phi.shape[0] * Phi.shape[1]
    dense = Phi.toarray()
    K = Kernel(kernel, gamma=0.5, degree=2)(dense, dense)
    ref = _fit(X, Y, kernel="precomputed", kernel_matrix=K)
    assert fit.objective_ == pytest.approx(ref.objective_, rel=1e-6, abs=1e-8)
    Xn, _ = _sparse_assignments(rng, m=3, density=density)
    Pn = np.vstack([x.reshape(-1, 20) for x in Xn])
    kn = Kernel(kernel, gamma=0.5, degree=2)(Pn, dense)
    for a, b in zip(fit.decision_scores(Xn), ref.decision_scores(Xn, kernel_matrix=kn)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_rank_zero_factor_is_a_clear_error(noisy):
    X, Y = noisy
    with pytest.raises(InvalidParameterError, match="'kernel_tol'.*< 1"):
        _fit(X, Y, kernel="rbf", kernel_tol=1.0)
    with pytest.raises(InvalidInputError, match="rank 0.*kernel_tol"):
        _fit(X, Y, kernel=lambda A, B: np.zeros((A.shape[0], B.shape[0])))
    n = 25 * len(X)
    with pytest.raises(InvalidInputError, match="kernel_matrix has rank 0"):
        _fit(X, Y, kernel="precomputed", kernel_matrix=np.zeros((n, n)))
    with pytest.raises(InvalidInputError, match="overflow.*gamma"):
        _fit(X, Y, kernel="poly", gamma=1e300)


def test_non_psd_callable_is_rejected_like_a_precomputed_matrix(noisy, monkeypatch):
    X, Y = noisy
    with pytest.raises(InvalidInputError, match="positive semidefinite"):
        _fit(X, Y, kernel=lambda A, B: -(A @ B.T))
    with pytest.raises(InvalidInputError, match="symmetric"):
        _fit(X, Y, kernel=lambda A, B: A @ B.T + A[:, :1] * 0.5)
    # beyond the size of the full check, the factor itself detects it
    import structlp.kernels as kernels
    monkeypatch.setattr(kernels, "CALLABLE_FULL_CHECK", 0)
    with pytest.raises(InvalidInputError, match="not positive semidefinite"):
        _fit(X, Y, kernel=lambda A, B: -(A @ B.T))


def test_incomplete_cholesky_detects_an_indefinite_matrix(rng):
    A = rng.normal(size=(30, 2))
    K = A @ A.T - 0.5 * np.eye(30) + 0.5   # diagonal positive, smallest eigenvalue < 0
    assert np.diag(K).min() > 0 and np.linalg.eigvalsh(K).min() < -0.1
    with pytest.raises(InvalidInputError, match="not positive semidefinite"):
        incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol=0.0)


def test_fitted_kernel_is_frozen(noisy, rng):
    """set_params on a fitted kernel model changes nothing until the next fit."""
    X, Y = noisy
    fit = _fit(X, Y, kernel="rbf", gamma=0.5)
    Xn, _ = assignments(rng, 4, 5, 4, lambda x: x[..., 0])
    before = fit.decision_scores(Xn)
    assert fit.kernel_params_ == {"kernel": "rbf", "gamma": 0.5, "degree": 3, "coef0": 1.0}
    for change in ({"gamma": 5.0}, {"kernel": "poly"}, {"kernel": "linear", "dual": False},
                   {"kernel": "precomputed"}, {"degree": 1, "coef0": -3.0}):
        fit.set_params(**change)
        for a, b in zip(fit.decision_scores(Xn), before):
            np.testing.assert_array_equal(a, b)
        fit.set_params(kernel="rbf", gamma=0.5, degree=3, coef0=1.0, dual=True)
    fit.set_params(gamma=2.0).fit(X, Y)
    assert fit.kernel_params_["gamma"] == 2.0
    assert not np.allclose(fit.decision_scores(Xn)[0], before[0])
    # gamma=None is resolved at fit time to 1 / n_features
    assert _fit(X, Y, kernel="rbf").kernel_params_["gamma"] == 0.25
