"""CuttingPlaneLearner: the exact max-margin objective by cutting planes."""

import numpy as np
import pytest

from oracles import brute_force_hinge, enumerate_bmatchings, enumerate_spanning_trees
from structlp import InvalidParameterError, MaxMarginLearner, NotFittedError
from structlp.learners.cutting_plane import ConvergenceWarning, CuttingPlaneLearner
from structlp.structures import BipartiteMatching, SpanningTree


def noisy_assignments(rng, m, n_rows, n_cols, d, noise=1.0):
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n_rows, n_cols, d)) for _ in range(m)]
    model = BipartiteMatching()
    Y = [model.inference(x, (x @ w0).ravel() + noise * rng.normal(size=n_rows * n_cols))
         for x in X]
    return X, Y


def test_cutting_plane_equals_minmax_qp(solver, rng):
    """Non-separable bipartite data: same objective and w as the min-max QP."""
    name, opts, tol = solver
    X, Y = noisy_assignments(rng, 15, 5, 5, 4)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    cp = CuttingPlaneLearner(BipartiteMatching(), C=1.0, tol=1e-7, solver=name,
                             solver_opts=opts).fit(X, Y)
    assert cp.converged_ and cp.solver_ == name
    assert qp.slack_.max() > 0.1  # slacks are active
    assert abs(cp.objective_ - qp.objective_) <= max(tol, 1e-6) * qp.objective_ + 15e-7
    np.testing.assert_allclose(cp.coef_, qp.coef_, atol=100 * max(tol, 1e-6))
    np.testing.assert_allclose(cp.slack_, qp.slack_, atol=100 * max(tol, 1e-6))
    assert cp.master_objective_ <= cp.objective_ * (1 + 1e-6)


@pytest.mark.parametrize("n", [5, 7])
def test_one_slack_equals_minmax_qp_and_n_slack(n, rng):
    """One-slack: the optimum of the joint QP, with one joint row per round."""
    X, Y = noisy_assignments(rng, 20, n, n, 4, noise=0.3)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    one = CuttingPlaneLearner(BipartiteMatching(), C=1.0, tol=1e-7, one_slack=True,
                              max_iter=1000).fit(X, Y)
    nsl = CuttingPlaneLearner(BipartiteMatching(), C=1.0, tol=1e-7).fit(X, Y)
    assert one.converged_ and qp.slack_.max() > 0.1
    assert one.n_constraints_ <= len(one.history_) + 1   # the truths' row + one per round
    assert abs(one.objective_ - qp.objective_) <= 1e-6 * qp.objective_
    assert abs(one.objective_ - nsl.objective_) <= 1e-6 * qp.objective_
    np.testing.assert_allclose(one.coef_, qp.coef_, atol=1e-4)
    # the bound C m tol holds at every oracle round: objective - master <= C m violation
    assert sum("objective" in h for h in one.history_) == one.n_oracle_calls_ - 1
    for h in (h for h in one.history_ if "objective" in h):
        assert h["objective"] - h["master_objective"] <= \
            1.0 * len(X) * h["max_violation"] + 1e-6 * qp.objective_
    assert one.master_objective_ <= qp.objective_ * (1 + 1e-6)


def test_one_slack_spanning_trees_sparse_features(rng):
    """One-slack on spanning trees with sparse part features = the n-slack optimum."""
    import scipy.sparse as sp

    class SparseTree(SpanningTree):
        def features(self, x):
            return sp.csr_array(super().features(x))

    n, d = 6, 3
    X = [rng.normal(size=(n, n, d)) for _ in range(10)]
    X = [(x + x.transpose(1, 0, 2)) / 2 for x in X]
    Y = [SpanningTree().inference(x, rng.normal(size=n * (n - 1) // 2)) for x in X]
    one = CuttingPlaneLearner(SparseTree(), C=1.0, tol=1e-7, one_slack=True,
                              max_iter=1000).fit(X, Y)
    nsl = CuttingPlaneLearner(SpanningTree(), C=1.0, tol=1e-7).fit(X, Y)
    assert one.converged_ and nsl.converged_
    assert abs(one.objective_ - nsl.objective_) <= 1e-6 * nsl.objective_
    np.testing.assert_allclose(one.coef_, nsl.coef_, atol=1e-4)


def test_sparse_features_same_model(rng):
    """Sparse part features (stacked sparse working set) = dense features = the QP."""
    import scipy.sparse as sp

    class SparseBipartite(BipartiteMatching):
        def features(self, x):
            f = x.reshape(-1, x.shape[2]).copy()
            f[np.abs(f) < 0.5] = 0.0          # really sparse rows
            return sp.csr_array(f)

    class DenseBipartite(BipartiteMatching):
        def features(self, x):
            return SparseBipartite.features(self, x).toarray()

    X, Y = noisy_assignments(rng, 12, 5, 5, 6)
    sparse = CuttingPlaneLearner(SparseBipartite(), C=1.0, tol=1e-7).fit(X, Y)
    dense = CuttingPlaneLearner(DenseBipartite(), C=1.0, tol=1e-7).fit(X, Y)
    qp = MaxMarginLearner(DenseBipartite(), C=1.0).fit(X, Y)
    assert sparse.converged_ and dense.converged_
    assert abs(sparse.objective_ - dense.objective_) <= 1e-6 * dense.objective_
    assert abs(sparse.objective_ - qp.objective_) <= 1e-6 * qp.objective_
    np.testing.assert_allclose(sparse.coef_, qp.coef_, atol=1e-4)


def test_cutting_plane_with_lp_inference_b_matching(rng):
    """R=2, P=2 has no combinatorial fast path: loss-augmented inference by the LP."""
    w0 = rng.normal(size=3)
    X = [rng.normal(size=(4, 3, 3)) for _ in range(8)]
    outs = enumerate_bmatchings(4, 3, 2, 2)
    Y = [outs[int(np.argmax([np.sum((x @ w0 + rng.normal(size=(4, 3))) * o) for o in outs]))]
         for x in X]
    model = BipartiteMatching(R=2, P=2)
    qp = MaxMarginLearner(model, C=2.0).fit(X, Y)
    cp = CuttingPlaneLearner(model, C=2.0, tol=1e-7).fit(X, Y)
    np.testing.assert_allclose(cp.objective_, qp.objective_, rtol=1e-6)


def test_slack_is_enumerated_hinge_spanning_tree(rng):
    """slack_ equals the hinge loss recomputed by enumerating all spanning trees, and
    objective_ = 1/2|w|^2 + C sum(slack_)."""
    model = SpanningTree()
    n, d = 5, 3
    X = [rng.normal(size=(n, n, d)) for _ in range(6)]
    X = [(x + x.transpose(1, 0, 2)) / 2 for x in X]
    Y = [model.inference(x, rng.normal(size=n * (n - 1) // 2)) for x in X]  # random trees
    cp = CuttingPlaneLearner(model, C=1.0, tol=1e-8).fit(X, Y)
    g = model.check_x(X[0])
    trees = enumerate_spanning_trees(n, g.u, g.v)
    outputs = [g.to_adjacency(t) for t in trees]
    enum = []
    for x, y in zip(X, Y):
        F = np.zeros((n, n, d))
        gx = model.check_x(x)
        F[gx.u, gx.v] = x[gx.u, gx.v]  # each edge counted once
        enum.append(brute_force_hinge(F, y, cp.coef_, outputs,
                                      lambda o, x=x, y=y: model.task_loss(x, y, o)))
    np.testing.assert_allclose(cp.slack_, enum, atol=1e-9)
    np.testing.assert_allclose(cp.objective_, 0.5 * cp.coef_ @ cp.coef_ + np.sum(enum))
    assert max(enum) > 0.1
    np.testing.assert_allclose(cp.hinge_losses(X, Y), enum, atol=1e-9)


def test_estimator_contract(rng):
    X, Y = noisy_assignments(rng, 5, 3, 3, 2)
    cp = CuttingPlaneLearner(BipartiteMatching(), C=0.5)
    assert cp.get_params()["C"] == 0.5 and cp.get_params()["max_iter"] == 200
    assert cp.set_params(tol=1e-5) is cp and cp.tol == 1e-5
    with pytest.raises(NotFittedError):
        cp.predict(X)
    assert not hasattr(cp, "coef_")
    assert cp.fit(X, Y) is cp
    for attr in ("coef_", "objective_", "slack_", "solver_", "problem_", "n_iter_",
                 "n_constraints_", "converged_", "history_", "master_objective_",
                 "n_features_in_", "fit_time_"):
        assert hasattr(cp, attr), attr
    assert cp.coef_.shape == (2,) and cp.slack_.shape == (5,)
    assert len(cp.predict(X)) == 5
    assert cp.score(X, Y) == -cp.loss(X, Y)


def test_max_iter_warns(rng):
    X, Y = noisy_assignments(rng, 10, 5, 5, 4)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        cp = CuttingPlaneLearner(BipartiteMatching(), max_iter=1).fit(X, Y)
    assert not cp.converged_ and cp.n_iter_ == 1


@pytest.mark.parametrize("param, value, match", [
    ("C", 0, "'C' parameter of CuttingPlaneLearner must be a float > 0"),
    ("C", "1", "'C' parameter"),
    ("tol", -1e-3, "'tol' parameter of CuttingPlaneLearner must be a float > 0"),
    ("max_iter", 0, "'max_iter' parameter of CuttingPlaneLearner must be an int >= 1"),
    ("max_iter", 2.5, "'max_iter' parameter"),
    ("solver", "NOPE", "'solver' parameter of CuttingPlaneLearner"),
    ("solver_opts", [1], "'solver_opts' parameter of CuttingPlaneLearner"),
    ("one_slack", "yes", "'one_slack' parameter of CuttingPlaneLearner must be a bool"),
])
def test_bad_parameters(param, value, match, rng):
    X, Y = noisy_assignments(rng, 2, 3, 3, 2)
    with pytest.raises(InvalidParameterError, match=match):
        CuttingPlaneLearner(BipartiteMatching(), **{param: value}).fit(X, Y)


def test_bad_model():
    with pytest.raises(InvalidParameterError, match="'model' parameter of CuttingPlaneLearner"):
        CuttingPlaneLearner("tree").fit([np.zeros((2, 2, 1))], [np.eye(2)])


def chain_data(rng, m=12, n=4, k=3, dv=3):
    from structlp.structures import TreeLabeling
    W = rng.normal(size=(k, dv))
    X, Y = [], []
    for _ in range(m):
        V = rng.normal(size=(n, dv))
        X.append({"node_features": V, "edge_features": np.ones((n - 1, 1)),
                  "parents": np.arange(-1, n - 1)})
        Y.append(np.argmax(V @ W.T + rng.normal(size=(n, k)), axis=1))
    return TreeLabeling(k), X, Y


def test_one_slack_cache_on_off_same_optimum(rng):
    """The inference cache changes the path, not the optimum (the joint QP's)."""
    model, X, Y = chain_data(rng)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    on = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=True, max_iter=5000,
                             inference_cache=5).fit(X, Y)
    off = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=True, max_iter=5000,
                              inference_cache=0).fit(X, Y)
    assert on.converged_ and off.converged_
    assert on.n_oracle_calls_ < off.n_oracle_calls_          # the cache saves oracle calls
    for est in (on, off):
        assert abs(est.objective_ - qp.objective_) <= 1e-6 * qp.objective_
        assert est.master_objective_ <= qp.objective_ * (1 + 1e-8)
        # the certificate: objective - lower bound <= C m tol
        assert est.objective_ - est.master_objective_ <= 1.0 * len(X) * 1e-7 + 1e-9
        np.testing.assert_allclose(est.coef_, qp.coef_, atol=1e-4)


def assert_cvxpy_master_dual(R, b, group, cap, a, value, viol, same_w=True):
    """``a``, ``value`` of solve_master_dual are cvxpy's optimum of the same dual QP (and
    with ``same_w`` its ``w = R^T a`` cvxpy's to 1e-5)."""
    import cvxpy
    T, n_groups = len(b), len(cap)
    al = cvxpy.Variable(T, nonneg=True)
    S = np.zeros((n_groups, T))
    S[group, np.arange(T)] = 1.0
    pr = cvxpy.Problem(cvxpy.Maximize(b @ al - 0.5 * cvxpy.sum_squares(R.T @ al)),
                       [S @ al == cap])
    pr.solve(solver="CLARABEL")
    assert viol <= 1e-12 and a.min() >= 0.0
    np.testing.assert_allclose(S @ a, cap, atol=1e-12)
    assert abs(value - pr.value) <= 1e-7 * (1 + abs(pr.value))
    if same_w:
        np.testing.assert_allclose(R.T @ a, R.T @ al.value, atol=1e-5)     # w is unique


@pytest.mark.parametrize("seed", range(6))
def test_master_dual_matches_cvxpy(seed):
    """solve_master_dual = cvxpy on the same dual QP (several groups, singular G, warm start)."""
    from structlp.learners.cutting_plane import solve_master_dual
    rng = np.random.default_rng(seed)
    T, n_groups, d = 25, 1 + seed % 3 * 2, 4                 # T > d: G is singular
    R = rng.normal(size=(T, d))
    group = rng.integers(0, n_groups, T)
    group[:n_groups] = np.arange(n_groups)
    R[:n_groups] = 0.0                                       # truth rows
    b = rng.normal(size=T)
    cap = rng.uniform(0.5, 2.0, n_groups)
    a0 = None
    if seed % 2:                                             # a feasible warm start
        a0 = np.zeros(T)
        for g in range(n_groups):
            idx = np.flatnonzero(group == g)
            a0[idx] = cap[g] * rng.dirichlet(np.ones(len(idx)))
    a, grad, value, viol = solve_master_dual(R @ R.T, b, group, cap, alpha=a0, tol=1e-12)
    assert_cvxpy_master_dual(R, b, group, cap, a, value, viol)
    # the primal point (w, xi = max grad per group) closes the gap
    w = R.T @ a
    xi = np.array([grad[group == g].max() for g in range(n_groups)])
    primal = 0.5 * w @ w + cap @ xi
    assert primal - value <= 1e-9 * (1 + abs(value))


def test_builtin_master_equals_cvxpy_master(rng):
    model, X, Y = chain_data(rng, m=8)
    for one in (True, False):
        a = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=one, max_iter=5000).fit(X, Y)
        b = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=one, max_iter=5000,
                                solver="CLARABEL").fit(X, Y)
        assert a.solver_ == "dual" and b.solver_ == "CLARABEL" and b.problem_ is not None
        assert abs(a.objective_ - b.objective_) <= 1e-6 * b.objective_


def test_n_slack_drops_idle_rows_and_keeps_the_optimum(rng, monkeypatch):
    """n-slack rows idle for INACTIVE_ROUNDS_NSLACK rounds leave the master (here after
    one round): their outputs may join again (else the fit could not certify), and the
    fit reaches the joint QP's optimum with fewer rows than one that keeps every row."""
    from structlp.learners import cutting_plane
    X, Y = noisy_assignments(rng, 15, 5, 5, 4)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    fits = {}
    for rounds in (1, 10 ** 9):
        monkeypatch.setattr(cutting_plane, "INACTIVE_ROUNDS_NSLACK", rounds)
        fits[rounds] = CuttingPlaneLearner(BipartiteMatching(), C=1.0, tol=1e-7,
                                           max_iter=500).fit(X, Y)
    pruned, kept = fits[1], fits[10 ** 9]
    assert pruned.n_constraints_ < kept.n_constraints_
    for cp in (pruned, kept):
        assert cp.converged_ and cp.solver_ == "dual"
        assert abs(cp.objective_ - qp.objective_) <= 1e-6 * qp.objective_ + 15e-7
        np.testing.assert_allclose(cp.coef_, qp.coef_, atol=1e-4)
        assert cp.master_objective_ <= cp.objective_ * (1 + 1e-6)


def test_callback_verbose_and_early_stop(rng, caplog):
    import logging
    model, X, Y = chain_data(rng, m=6)
    seen = []

    def cb(info):
        seen.append(dict(info))
        return len(seen) >= 3

    with caplog.at_level(logging.INFO, logger="structlp"):
        est = CuttingPlaneLearner(model, C=1.0, tol=1e-9, one_slack=True, callback=cb,
                                  verbose=1).fit(X, Y)
    assert len(seen) == 3 and not est.converged_
    assert all({"iteration", "time", "master_objective", "oracle"} <= set(s) for s in seen)
    assert any("objective" in s for s in seen)
    assert sum("CuttingPlaneLearner:" in r.getMessage() for r in caplog.records) == 3
    with pytest.raises(InvalidParameterError, match="'callback' parameter"):
        CuttingPlaneLearner(model, callback=3).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'inference_cache' parameter"):
        CuttingPlaneLearner(model, inference_cache=-1).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'warm_start' parameter"):
        CuttingPlaneLearner(model, warm_start="yes").fit(X, Y)


def test_warm_start_reuses_the_working_set(rng):
    """A second fit with another C from the previous working set: the same optimum as a
    cold fit, in fewer oracle passes; on other data it starts afresh."""
    import pickle
    model, X, Y = chain_data(rng)
    warm = CuttingPlaneLearner(model, C=1.0, tol=1e-6, one_slack=True, max_iter=5000,
                               warm_start=True).fit(X, Y)
    warm.set_params(C=0.5).fit(X, Y)
    cold = CuttingPlaneLearner(model, C=0.5, tol=1e-6, one_slack=True, max_iter=5000).fit(X, Y)
    assert warm.converged_ and abs(warm.objective_ - cold.objective_) <= 1e-5 * cold.objective_
    assert warm.n_oracle_calls_ < cold.n_oracle_calls_
    pickle.loads(pickle.dumps(warm))                          # plain data only
    _, X2, Y2 = chain_data(np.random.default_rng(99))
    other = warm.fit(X2, Y2)
    fresh = CuttingPlaneLearner(model, C=0.5, tol=1e-6, one_slack=True, max_iter=5000).fit(X2, Y2)
    assert abs(other.objective_ - fresh.objective_) <= 1e-5 * fresh.objective_


def test_fit_runs_blas_on_one_thread_and_restores_it(rng, monkeypatch):
    """The master's small dense solves run on one BLAS thread (threadpoolctl); the user's
    setting comes back after the fit, and without threadpoolctl the iterates are the same."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import structlp.learners.master as cpm

    def blas_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas"]

    model, X, Y = chain_data(rng)
    seen = []
    before = blas_threads()
    est = CuttingPlaneLearner(model, C=1.0, tol=1e-6, one_slack=True, max_iter=5000,
                              callback=lambda info: seen.append(blas_threads()) and False)
    est.fit(X, Y)
    assert seen and all(all(n == 1 for n in s) for s in seen)
    assert blas_threads() == before
    monkeypatch.setattr(cpm, "threadpool_limits", None)
    plain = CuttingPlaneLearner(model, C=1.0, tol=1e-6, one_slack=True, max_iter=5000).fit(X, Y)
    np.testing.assert_allclose(plain.coef_, est.coef_, rtol=0, atol=1e-12)
    assert plain.n_iter_ == est.n_iter_


@pytest.mark.parametrize("n_groups", [1, 3])
def test_master_dual_inverse_updates_match_cvxpy(n_groups, monkeypatch):
    """Many active-set changes on a regular G: the kept inverse of the reduced KKT matrix
    (bordering and Schur updates, references handed on inside a group) gives cvxpy's
    optimum, without rebuilding it after the first factorization and without LU."""
    import structlp.learners.master as cpm
    rng = np.random.default_rng(7 + n_groups)
    T, d = 90, 150                                          # G = R R^T regular
    R = rng.normal(size=(T, d)) / np.sqrt(d)
    group = np.arange(T) % n_groups
    b = rng.normal(size=T) + 3.0 * rng.uniform(size=T)
    cap = np.full(n_groups, 5.0)
    calls = {"matrix": 0, "changes": 0, "lu": 0}
    matrix, add, remove = (cpm._FreeRowsKKT._matrix, cpm._FreeRowsKKT.add,
                           cpm._FreeRowsKKT.remove)

    def count(key, f):
        def wrapped(*args):
            calls[key] += 1
            return f(*args)
        return wrapped
    monkeypatch.setattr(cpm._FreeRowsKKT, "_matrix", count("matrix", matrix))
    monkeypatch.setattr(cpm._FreeRowsKKT, "add", count("changes", add))
    monkeypatch.setattr(cpm._FreeRowsKKT, "remove", count("changes", remove))
    monkeypatch.setattr(cpm, "_solve_or_lstsq", count("lu", cpm._solve_or_lstsq))
    a, grad, value, viol = cpm.solve_master_dual(R @ R.T, b, group, cap, tol=1e-12)
    assert calls["changes"] > 8
    assert calls["matrix"] == 1 and calls["lu"] == 0
    assert_cvxpy_master_dual(R, b, group, cap, a, value, viol)


def n_slack_master(rng, n_groups, T, d):
    """A random master of the n-slack shape: a zero truth row per group first, then vertex
    rows of random groups; returns (group, R, b, cap), G = R R^T."""
    group = np.r_[np.arange(n_groups), rng.integers(0, n_groups, T - n_groups)]
    R = rng.normal(size=(T, d)) / np.sqrt(d)
    R[:n_groups] = 0.0
    b = np.r_[np.zeros(n_groups), rng.uniform(0.05, 0.5, T - n_groups)]
    return group, R, b, rng.uniform(0.5, 2.0, n_groups)


@pytest.mark.parametrize("candidates", [1, 3, 32])
@pytest.mark.parametrize("seed", range(3))
def test_master_dual_candidate_pricing_matches_cvxpy(candidates, seed, monkeypatch):
    """The n-slack master's shape (a zero truth row per group, several vertex rows each,
    more rows than features): most rows violate at the start, so rows are freed from the
    last full pricing's candidates (gradients from their rows of G since then) and the
    references of groups leave; cvxpy's optimum whatever the candidate list's length,
    cold and warm started, and the primal point (w, xi) closes the gap."""
    import structlp.learners.master as cpm
    rng = np.random.default_rng(100 + seed)
    n_groups, T, d = 9, 70, 30
    group, R, b, cap = n_slack_master(rng, n_groups, T, d)
    monkeypatch.setattr(cpm, "CANDIDATES", candidates)
    a0 = None
    for start in ("cold", "warm"):
        a, grad, value, viol = cpm.solve_master_dual(R @ R.T, b, group, cap, alpha=a0,
                                                     tol=1e-12)
        assert_cvxpy_master_dual(R, b, group, cap, a, value, viol, same_w=False)
        # weak duality certifies a to 1e-9 (tighter than cvxpy's interior point)
        w = R.T @ a
        xi = np.array([grad[group == g].max() for g in range(n_groups)])
        assert 0.5 * w @ w + cap @ xi - value <= 1e-9 * (1 + abs(value))
        # the next round's master: new rows at weight 0 beside these weights
        extra = rng.integers(0, n_groups, 15)
        R = np.vstack([R, rng.normal(size=(15, d)) / np.sqrt(d)])
        b = np.r_[b, rng.uniform(0.05, 0.5, 15)]
        group = np.r_[group, extra]
        a0 = np.r_[a, np.zeros(15)]


def test_hinge_is_exact_and_never_negative_at_huge_C():
    """At C = 1e20 the rounding of the loss-augmented scores, C times, once made the hinge
    of an example whose maximizer is its truth -3.6e-15 (seed 11: an objective of 1.5e15
    with a negative slack): the hinge is the score difference plus the loss, at least 0,
    and objective_ the enumerated objective at coef_."""
    import warnings

    from structlp.datasets import make_bipartite_matching
    outputs = enumerate_bmatchings(4, 4, 1, 1)
    for seed in (11, 3, 7):
        X, Y, _, model = make_bipartite_matching(n_samples=3, n_rows=4, n_cols=4,
                                                 random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est = CuttingPlaneLearner(model, C=1e20, max_iter=60).fit(X, Y)
        w = est.coef_
        hinge = []
        for x, y in zip(X, Y):       # score difference plus Hamming loss, by enumeration
            S = x @ w
            hinge.append(max(float(np.sum(S * o) - np.sum(S * y))
                             + float(y.sum() - np.sum(o * y)) for o in outputs))
        assert np.all(est.slack_ >= 0), est.slack_
        np.testing.assert_allclose(est.slack_, hinge, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(est.objective_, 0.5 * w @ w + 1e20 * sum(hinge), rtol=1e-9)


def test_master_dual_incremental_gradient_is_exact(monkeypatch):
    """Within a solve the pricings' gradients are updated from the rows of G whose
    weights changed (not one product with G each): on a master large enough for that path,
    every such gradient equals the exact b - (G + rho) alpha to 1e-10, the path is taken,
    and the optimum is cvxpy's."""
    import structlp.learners.master as cpm
    group, R, b, cap = n_slack_master(np.random.default_rng(7), 60, 400, 40)
    checkpoint, seen = cpm._FreeRowsKKT.checkpoint, {"incremental": 0, "err": 0.0}

    def checked(self, exact=False):
        incremental = (not exact and self.a0 is not None
                       and 4 * np.count_nonzero(self.a != self.a0) <= len(self.a))
        grad = checkpoint(self, exact=exact)
        truth = self.b - self.G @ self.a - self.rho * self.a
        seen["incremental"] += incremental
        seen["err"] = max(seen["err"], float(np.abs(grad - truth).max()))
        return grad

    monkeypatch.setattr(cpm._FreeRowsKKT, "checkpoint", checked)
    a, grad, value, viol = cpm.solve_master_dual(R @ R.T, b, group, cap, tol=1e-12)
    assert seen["incremental"] >= 5 and seen["err"] <= 1e-10
    assert_cvxpy_master_dual(R, b, group, cap, a, value, viol, same_w=False)


@pytest.mark.parametrize("sparse", [True, False])
def test_row_gram_is_the_gram_matrix_and_gives_the_same_master(sparse):
    """RowGram(R) answers every question the master asks of G = R R^T (products, rows,
    blocks of a few rows and of many, the diagonal) as the dense matrix does, and the
    master solved through it is cvxpy's optimum, cold and warm."""
    import scipy.sparse as sp
    from structlp.learners.master import FEW_ROWS, RowGram, solve_master_dual
    rng = np.random.default_rng(11)
    group, R, b, cap = n_slack_master(rng, 20, 150, 60)
    R[rng.random(R.shape) < 0.7] = 0.0                      # sparse rows, as the AGM's
    R[:20] = 0.0                                            # empty rows, as the truths'
    G = R @ R.T
    a, d = rng.random(150), rng.normal(size=150)
    I, J = rng.choice(150, 5, replace=False), rng.choice(150, 40, replace=False)
    # (FEW_ROWS or fewer rows from CSR slices, more by scipy; blocks and rows from the
    # dense G when it is given)
    many = rng.choice(150, FEW_ROWS + 20, replace=False)
    for RG in (RowGram(sp.csr_array(R) if sparse else R),
               RowGram(sp.csr_array(R) if sparse else R, dense=G.copy())):
        np.testing.assert_allclose(RG @ a, G @ a, atol=1e-12)
        for rows in (I, J, many, np.arange(20)):
            np.testing.assert_allclose(RG.rows_dot(I, rows, d[rows]), G[np.ix_(I, rows)] @ d[rows],
                                       atol=1e-12)
            np.testing.assert_allclose(RG.rows_dot(rows, J, d[J]), G[np.ix_(rows, J)] @ d[J],
                                       atol=1e-12)
            np.testing.assert_allclose(RG.dot_rows(rows, d[rows]), d[rows] @ G[rows],
                                       atol=1e-12)
        for rows, cols in ((I, J), (J, I), (J, J), (I[:1], many)):
            np.testing.assert_allclose(RG.block(rows, cols), G[np.ix_(rows, cols)], atol=1e-12)
        np.testing.assert_allclose(RG.diagonal, np.diag(G), atol=1e-12)
    RG, a0 = RowGram(sp.csr_array(R) if sparse else R), None
    for start in ("cold", "warm"):
        a, grad, value, viol = solve_master_dual(RG, b, group, cap, alpha=a0, tol=1e-12)
        ad, _, value_d, _ = solve_master_dual(G, b, group, cap, alpha=a0, tol=1e-12)
        assert_cvxpy_master_dual(R, b, group, cap, a, value, viol, same_w=False)
        assert value == pytest.approx(value_d, rel=1e-12)
        a0 = a


@pytest.mark.parametrize("drift, rebuilt", [(1e-8, False), (1e-5, False), (0.5, True)])
def test_free_rows_solve_refines_a_drifted_inverse_before_rebuilding(drift, rebuilt,
                                                                     monkeypatch):
    """The free rows' kept inverse drifts with its rank-one updates: a step solves the
    reduced system to 1e-9 through it by iterative refinement, and rebuilds it only when
    refinement does not get there (a drift beyond what REFINE steps remove)."""
    import structlp.learners.master as cpm
    rng = np.random.default_rng(5)
    group, R, b, cap = n_slack_master(rng, 6, 60, 100)     # more features than rows:
    G = R @ R.T                                             # a regular reduced system
    a = np.zeros(60)
    for g in range(6):                  # every group's weight spread over its rows
        rows = np.flatnonzero(group == g)
        a[rows] = cap[g] * rng.dirichlet(np.ones(len(rows)))
    kkt = cpm._FreeRowsKKT(cpm._DenseGram(G), b, 1e-12, group, 6, np.flatnonzero(a), a)
    n = kkt.n
    assert n > 20
    E = rng.normal(size=(n, n))
    kkt.inv[:n, :n] *= 1.0 + drift * (E + E.T) / 2
    calls = []
    monkeypatch.setattr(cpm._FreeRowsKKT, "_rebuild",
                        lambda self, S, _f=cpm._FreeRowsKKT._rebuild: (calls.append(1),
                                                                       _f(self, S)))
    F, p, q = kkt.step()
    H, z = kkt.H[:n, :n], kkt.z[:n]
    assert np.abs(H @ q - z).max() <= 1e-9 * (1.0 + np.abs(z).max())
    np.testing.assert_allclose(q, np.linalg.solve(H, z), rtol=1e-6, atol=1e-9)
    assert bool(calls) == rebuilt
