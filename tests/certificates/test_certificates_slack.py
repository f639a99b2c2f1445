"""Certificate slacks against the exact structured hinge, by enumeration of every output.

For each structure and slack, on noisy instances small enough to enumerate, the
certificate QP is compared with the exact-hinge QP

    min 1/2 |w|^2 + C sum_i xi_i   s.t.  xi_i >= (Phi_i w + c_i).(mu - mu_i) for every output mu

(all outputs of every example listed): the certificate's slack bounds the hinge
recomputed from its coef_, its objective bounds the exact optimum, it never collapses to
w = 0 where the exact QP does not (two_sided, part), and with the default slack the
exact objective at its w is within 5% of the exact optimum.
"""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from oracles import enumerate_matchings, enumerate_perfect_matchings, enumerate_spanning_trees
from structlp import InvalidParameterError, MaxMarginLearner
from structlp.structures import BipartiteMatching, Matching, PerfectMatching, SpanningTree


def sym(x):
    return (x + x.transpose(1, 0, 2)) / 2


def all_outputs(model, x):
    """Every output of example x as 0/1 part vectors, shape (n_outputs, L)."""
    g = model.check_x(x) if not isinstance(model, BipartiteMatching) else None
    if isinstance(model, SpanningTree):
        return np.array(enumerate_spanning_trees(g.n_nodes, g.u, g.v), dtype=float)
    if isinstance(model, BipartiteMatching):
        nr, nc = x.shape[:2]
        out = []
        for rows in itertools.permutations(range(nr), nc):
            y = np.zeros((nr, nc))
            y[list(rows), np.arange(nc)] = 1
            out.append(y.ravel())
        return np.array(out)
    if isinstance(model, PerfectMatching):
        pms = enumerate_perfect_matchings(range(g.n_nodes))
    else:
        pms = enumerate_matchings(g.n_nodes, list(zip(g.u.tolist(), g.v.tolist())))
    out = np.zeros((len(pms), g.n_edges))
    for r, pairs in enumerate(pms):
        for a, b in pairs:
            out[r, g.index[a, b]] = 1
    return out


class Exact:
    """The exact structured-hinge QP of a training set, every output enumerated."""

    def __init__(self, model, X, Y):
        self.Phi = [np.asarray(model.features(model.check_x(x)), dtype=float) for x in X]
        self.mu = []
        self.Mus = []
        self.c = []
        for x, y in zip(X, Y):
            xc = model.check_x(x)
            mu = model.encode(xc, y)
            c, d = model.loss_coefficients(xc, y)
            assert abs(d + c @ mu) < 1e-12          # the loss of the truth is 0
            self.mu.append(mu)
            self.c.append(c)
            self.Mus.append(all_outputs(model, x))

    def hinges(self, w):
        """Exact hinge of every example at w, by enumeration."""
        return np.array([max(0.0, ((Mu - mu) @ (P @ w + c)).max())
                         for P, mu, c, Mu in zip(self.Phi, self.mu, self.c, self.Mus)])

    def objective(self, w, C):
        return 0.5 * w @ w + C * self.hinges(w).sum()

    def solve(self, C):
        w = cp.Variable(self.Phi[0].shape[1])
        xi = cp.Variable(len(self.Phi))
        cons = [xi >= 0]
        for i, (P, mu, c, Mu) in enumerate(zip(self.Phi, self.mu, self.c, self.Mus)):
            Dm = Mu - mu
            cons.append(xi[i] >= (Dm @ P) @ w + Dm @ c)
        prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), cons)
        prob.solve(solver="CLARABEL")
        return float(prob.value), np.asarray(w.value)


def noisy(model, rng, m, n, d, flip=0.3):
    """Instances with a planted w0 and, in a fraction ``flip`` of examples, a random
    (noisy) true output."""
    X, Y = [], []
    w0 = rng.normal(size=d)
    for i in range(m):
        x = rng.normal(size=(n[0], n[1], d)) if isinstance(model, BipartiteMatching) \
            else sym(rng.normal(size=(n, n, d)))
        if isinstance(model, Matching):
            x = np.concatenate([x, np.ones(x.shape[:2] + (1,))], axis=-1)
            w0 = np.concatenate([w0[:d], [-0.5]])
        s = model.features(model.check_x(x)) @ w0
        if rng.random() < flip:
            s = rng.normal(size=s.shape)
        X.append(x)
        Y.append(model.inference(model.check_x(x), s))
    return X, Y


BOUNDING = ("two_sided", "part")
#: (structure, size, examples) small enough to enumerate every output
CASES = {"tree": (SpanningTree(), 5, 10), "perfect_matching": (PerfectMatching(), 6, 10),
         "perfect_matching_odd_sets": (PerfectMatching(certificate="odd_sets"), 6, 10),
         "bipartite": (BipartiteMatching(), (5, 5), 10),
         "bipartite_rect": (BipartiteMatching(), (5, 3), 10), "matching": (Matching(), 6, 8)}
#: Exact objective at the default (two-sided) certificate's w over the exact optimum, at
#: most (square and rectangular bipartite graphs are exact).
GAP = 1.05


def fitted(case, seed, slack, C=1.0, n=None, model=None, **kw):
    model0, n0, m = CASES[case]
    n = n0 if n is None else n
    model = model0 if model is None else model
    X, Y = noisy(model, np.random.default_rng(seed), m, n, 4, flip=0.25)
    est = MaxMarginLearner(model, C=C, formulation="certificate", slack=slack, **kw).fit(X, Y)
    return est, X, Y, Exact(model, X, Y)


@pytest.mark.parametrize("slack", BOUNDING)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 2])
def test_slack_bounds_the_exact_hinge(case, slack, seed):
    est, X, Y, ex = fitted(case, seed, slack)
    opt, w_opt = ex.solve(1.0)
    assert np.linalg.norm(w_opt) > 0.1                       # a real (not collapsed) optimum
    hinge = ex.hinges(est.coef_)
    assert np.all(est.slack_ >= hinge - 1e-6)                 # per example: slack >= hinge
    np.testing.assert_allclose(est.hinge_losses(X, Y), hinge, atol=1e-7)
    assert est.objective_ >= opt * (1 - 1e-7)                 # a bound of the exact optimum
    assert np.linalg.norm(est.coef_) > 0.1                    # no collapse to w = 0
    if slack == "two_sided":                                  # the default is close
        assert ex.objective(est.coef_, 1.0) <= GAP * opt
    if case.startswith("bipartite"):                          # bipartite: exact, any data
        np.testing.assert_allclose(est.objective_, opt, rtol=1e-6)
        np.testing.assert_allclose(est.slack_, hinge, atol=1e-6)


#: Worst exact objective at the two-sided w over the optimum, matchings of n nodes (8
#: examples), per certificate: measured over 30 training sets per size, odd sets 1.0024
#: (n = 4), 1.0060 (n = 5), 1.0031 (n = 6 over 20); the graph copy's alternating cycles
#: 1.055, 1.051, 1.016 (up to 1.095 at n = 6 before its own edges carried slacks).
MATCHING_GAP = {"odd_sets": {4: 1.01, 5: 1.01, 6: 1.01},
                "alternating_cycle": {4: 1.06, 5: 1.06, 6: GAP}}


@pytest.mark.parametrize("certificate", sorted(MATCHING_GAP))
@pytest.mark.parametrize("n", [4, 5, 6])
def test_matching_slack_on_many_noisy_instances(n, certificate):
    """Matchings, 8 random noisy training sets per size, both certificates (Edmonds' odd
    sets, and the graph copy's alternating cycles): every bounding slack is >= the exact
    hinge of every example (enumerated), the objective bounds the exact optimum, and the
    default slack's w is close to it."""
    worst = 0.0
    model = Matching(certificate=certificate)
    for seed in range(8):
        for slack in BOUNDING:
            est, X, Y, ex = fitted("matching", 100 * n + seed, slack, n=n, model=model)
            opt, w_opt = ex.solve(1.0)
            assert np.all(est.slack_ >= ex.hinges(est.coef_) - 1e-6)
            assert est.objective_ >= opt * (1 - 1e-7)
            if np.linalg.norm(w_opt) > 0.1:
                assert np.linalg.norm(est.coef_) > 0.1
            if slack == "two_sided":
                worst = max(worst, ex.objective(est.coef_, 1.0) / opt)
    assert worst <= MATCHING_GAP[certificate][n]


@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_slack_is_no_bound_and_collapses(case):
    """slack='shared' (one xi per example): below the exact hinge, w = 0 on noisy trees
    and perfect matchings for every C tried."""
    est, X, Y, ex = fitted(case, 0, "shared")
    opt, _ = ex.solve(1.0)
    assert est.objective_ < opt and np.any(est.slack_ < ex.hinges(est.coef_) - 1e-3)
    if case in ("tree", "perfect_matching"):
        for C in (1.0, 100.0):
            est = fitted(case, 1, "shared", C=C)[0]
            assert np.abs(est.coef_).max() < 1e-6
            assert np.linalg.norm(fitted(case, 1, "two_sided", C=C)[0].coef_) > 0.1


@pytest.mark.parametrize("slack", BOUNDING)
def test_square_bipartite_certificate_equals_minmax_on_noisy_data(slack, solver):
    name, opts, tol = solver
    model, n, m = CASES["bipartite"]
    X, Y = noisy(model, np.random.default_rng(2), m, n, 4, flip=0.25)
    mm = MaxMarginLearner(model, C=1.0, solver=name, solver_opts=opts).fit(X, Y)
    ce = MaxMarginLearner(model, C=1.0, formulation="certificate", slack=slack, solver=name,
                          solver_opts=opts).fit(X, Y)
    assert mm.slack_.max() > 0.1 and np.linalg.norm(mm.coef_) > 0.1   # noisy, not collapsed
    np.testing.assert_allclose(ce.objective_, mm.objective_, rtol=tol)
    np.testing.assert_allclose(ce.coef_, mm.coef_, rtol=0, atol=tol * np.abs(mm.coef_).max())
    np.testing.assert_allclose(ce.slack_, mm.slack_, rtol=0, atol=tol * mm.slack_.max())


TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


@pytest.mark.parametrize("slack", ["two_sided", "part", "shared"])
@pytest.mark.parametrize("case", ["tree", "perfect_matching", "bipartite_rect", "matching"])
def test_linear_dual_equals_primal_for_every_slack(case, slack):
    a = fitted(case, 0, slack, solver_opts=TIGHT)[0]
    b = fitted(case, 0, slack, dual=True, solver_opts=TIGHT)[0]
    np.testing.assert_allclose(b.objective_, a.objective_, rtol=1e-6)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=0, atol=1e-6 * max(np.abs(a.coef_).max(), 1))
    np.testing.assert_allclose(b.slack_, a.slack_, rtol=0, atol=1e-6 * max(a.slack_.max(), 1))


@pytest.mark.parametrize("case", ["perfect_matching", "matching"])
@pytest.mark.parametrize("slack", BOUNDING)
def test_kernels_with_every_slack(slack, case):
    """RBF, poly, callable and precomputed kernels: the dual runs, the slack bounds the
    hinge of the kernel scores, and a callable / precomputed RBF gives the built-in fit
    (perfect matchings through alternating cycles, matchings through odd sets)."""
    model, n, m = CASES[case]
    X, Y = noisy(model, np.random.default_rng(4), m, n, 4, flip=0.25)
    gamma = 0.3
    kw = dict(C=1.0, formulation="certificate", slack=slack, dual=True)
    rbf = MaxMarginLearner(model, kernel="rbf", gamma=gamma, **kw).fit(X, Y)
    poly = MaxMarginLearner(model, kernel="poly", gamma=gamma, degree=2, **kw).fit(X, Y)
    for est in (rbf, poly):
        assert np.all(est.slack_ >= est.hinge_losses(X, Y) - 1e-6)
        assert est.slack_.sum() < sum(len(model.check_x(x).u) for x in X)  # learnt something

    def k(A, B):
        sq = (A ** 2).sum(1)[:, None] + (B ** 2).sum(1)[None, :] - 2 * A @ B.T
        return np.exp(-gamma * sq)

    call = MaxMarginLearner(model, kernel=k, **kw).fit(X, Y)
    F = np.vstack([model.features(model.check_x(x)) for x in X])
    pre = MaxMarginLearner(model, kernel="precomputed", **kw).fit(X, Y, kernel_matrix=k(F, F))
    for est in (call, pre):
        np.testing.assert_allclose(est.objective_, rbf.objective_, rtol=1e-6)
    s_rbf = np.concatenate(rbf.decision_scores(X))
    np.testing.assert_allclose(np.concatenate(call.decision_scores(X)), s_rbf, atol=1e-5)
    np.testing.assert_allclose(np.concatenate(pre.decision_scores(X, kernel_matrix=k(F, F))),
                               s_rbf, atol=1e-5)


# ------------------------------------------------------------ spanning trees: exact min-max
@pytest.mark.parametrize("n, p", [(5, None), (5, 0.7), (4, None)])
def test_tree_minmax_equals_enumeration_and_cutting_plane(n, p):
    from structlp.learners.cutting_plane import CuttingPlaneLearner
    model = SpanningTree()
    rng = np.random.default_rng(n)
    X, Y = noisy(model, rng, 10, n, 4, flip=0.25)
    if p is not None:            # a sparse connected graph: drop a few edges off every tree
        X = [(x, (rng.random((n, n)) < p) | (y > 0)) for x, y in zip(X, Y)]
        X = [(x, np.triu(mk, 1) | np.triu(mk, 1).T) for x, mk in X]
    ex = Exact(model, X, Y)
    opt, w_opt = ex.solve(1.0)
    assert np.linalg.norm(w_opt) > 0.1
    mm = MaxMarginLearner(model, C=1.0, formulation="minmax", solver_opts=TIGHT).fit(X, Y)
    np.testing.assert_allclose(mm.objective_, opt, rtol=1e-6)
    np.testing.assert_allclose(mm.coef_, w_opt, atol=1e-6 * np.abs(w_opt).max())
    np.testing.assert_allclose(mm.slack_, ex.hinges(mm.coef_), atol=1e-6)
    cpl = CuttingPlaneLearner(model, C=1.0, tol=1e-9).fit(X, Y)
    np.testing.assert_allclose(cpl.objective_, mm.objective_, rtol=1e-6)
    du = MaxMarginLearner(model, C=1.0, formulation="minmax", dual=True,
                          solver_opts=TIGHT).fit(X, Y)
    np.testing.assert_allclose(du.objective_, opt, rtol=1e-6)
    np.testing.assert_allclose(du.coef_, w_opt, atol=1e-6 * np.abs(w_opt).max())
    cert = MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    assert cert.objective_ >= mm.objective_ * (1 - 1e-7)


def test_tree_minmax_rbf_dual_slack_is_the_exact_hinge():
    """Kernel dual of the tree min-max: its slack is the exact hinge of the kernel scores."""
    model = SpanningTree()
    X, Y = noisy(model, np.random.default_rng(7), 8, 5, 4, flip=0.25)
    est = MaxMarginLearner(model, C=1.0, formulation="minmax", dual=True, kernel="rbf",
                           gamma=0.5, solver_opts=TIGHT).fit(X, Y)
    np.testing.assert_allclose(est.slack_, est.hinge_losses(X, Y), atol=1e-6)


def test_rooted_flow_polytope_vertices_are_the_spanning_trees():
    """Maximizing random scores over the extended polytope (an LP, HiGHS) gives the
    maximum spanning tree found by enumeration, and every tree lifts into it."""
    from scipy.optimize import linprog
    from structlp.structures.spanning_tree import rooted_flow_polytope
    rng = np.random.default_rng(0)
    n = 5
    g = SpanningTree().check_x(sym(rng.normal(size=(n, n, 1))))
    P = rooted_flow_polytope(n, g.u, g.v)
    trees = np.array(enumerate_spanning_trees(n, g.u, g.v), dtype=float)
    for t in trees:
        assert P.violation(P.lift(t)) < 1e-12
    for _ in range(5):
        s = rng.normal(size=g.n_edges)
        res = linprog(-np.pad(s, (0, P.n_aux)), A_eq=P.E.toarray(), b_eq=P.e,
                      bounds=list(zip(P.lb, np.where(np.isfinite(P.ub), P.ub, None))),
                      method="highs")
        np.testing.assert_allclose(-res.fun, (trees @ s).max(), atol=1e-9)


def test_inference_lp_over_an_extended_polytope():
    """Without a fast path, prediction solves the inference LP over the extended polytope
    (auxiliary columns of score 0) and finds the maximum spanning tree."""

    class LPTree(SpanningTree):
        def inference(self, x, scores):
            return None

    X, Y = noisy(SpanningTree(), np.random.default_rng(3), 6, 5, 4, flip=0.0)
    est = MaxMarginLearner(LPTree(), C=1.0, formulation="minmax").fit(X, Y)
    ref = MaxMarginLearner(SpanningTree(), C=1.0, formulation="minmax").fit(X, Y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-8)
    for p, q in zip(est.predict(X), ref.predict(X)):
        np.testing.assert_array_equal(p, q)
