"""Certificate formulations: exactness (or sufficiency) against independent oracles."""

import networkx as nx
import numpy as np
import pytest

from conftest import INSTALLED, SOLVER_SETTINGS
from oracles import (enumerate_matchings, enumerate_perfect_matchings, enumerate_spanning_trees,
                     negative_alternating_walk)
from structlp import MaxMarginLearner
from structlp.certificates import (check_graph, graph_copy, odd_cycle_counterexample,
                                   potentials_exist)
from structlp.learners.cutting_plane import CuttingPlaneLearner
from structlp.structures import BipartiteMatching, Matching, PerfectMatching, SpanningTree
from structlp.structures.perfect_matching import max_weight_matching


def sym(x):
    return (x + x.transpose(1, 0, 2)) / 2


def random_graph_x(rng, n, d, p=None):
    x = sym(rng.normal(size=(n, n, d)))
    if p is None:
        return x
    while True:
        mask = np.triu(rng.random((n, n)) < p, 1)
        mask = mask | mask.T
        G = nx.from_numpy_array(mask.astype(int))
        if nx.is_connected(G):
            return x, mask


def certified(model, g, outputs, s):
    """For scores s: whether each output (a list of node pairs) passes the model's
    certificate, and the index of the best output (enumeration)."""
    vals = [sum(s[g.index[a, b]] for a, b in o) for o in outputs]
    feasible = [potentials_exist(*model.certificate_rows(g, pm_indicator(g, o).astype(float)),
                                 s) for o in outputs]
    return feasible, int(np.argmax(vals))


def pm_indicator(g, pairs):
    mu = np.zeros(g.n_edges, dtype=bool)
    for a, b in pairs:
        mu[g.index[a, b]] = True
    return mu


# ---------------------------------------------------------------- spanning trees
@pytest.mark.parametrize("n, p", [(5, None), (6, 0.6)])
def test_spanning_tree_certificate_iff_maximum(n, p, rng):
    model = SpanningTree()
    for _ in range(4):
        g = model.check_x(random_graph_x(rng, n, 1, p))
        trees = enumerate_spanning_trees(n, g.u, g.v)
        s = rng.normal(size=g.n_edges)
        values = np.array([s[t].sum() for t in trees])
        best = int(np.argmax(values))
        # inference agrees with enumeration and with networkx
        y = model.inference(g, s)
        np.testing.assert_array_equal(model.encode(g, y), trees[best].astype(float))
        G = nx.Graph()
        G.add_weighted_edges_from(zip(g.u.tolist(), g.v.tolist(), s.tolist()))
        ynx = np.zeros((n, n), dtype=int)
        for a, b in nx.maximum_spanning_tree(G).edges():
            ynx[a, b] = ynx[b, a] = 1
        np.testing.assert_array_equal(y, ynx)
        for t_idx, t in enumerate(trees):
            Gs, Gd = model.certificate_rows(g, t.astype(float))
            assert Gd.shape[1] == 0
            feasible = bool(np.all(Gs @ s >= 0))
            assert feasible == (t_idx == best)


def test_spanning_tree_rows_are_path_pairs(rng):
    """Each row pairs a non-tree edge with a tree edge on its tree path (n=6, checked by
    networkx shortest paths in the tree)."""
    model = SpanningTree()
    g = model.check_x(random_graph_x(rng, 6, 1))
    s = rng.normal(size=g.n_edges)
    mu = model.encode(g, model.inference(g, s))
    from structlp.certificates import spanning_tree_rows
    _, pairs = spanning_tree_rows(6, g.u, g.v, mu > 0.5)
    T = nx.Graph(list(zip(g.u[mu > 0.5].tolist(), g.v[mu > 0.5].tolist())))
    expect = set()
    for e in np.flatnonzero(mu < 0.5):
        path = nx.shortest_path(T, int(g.u[e]), int(g.v[e]))
        for a, b in zip(path[:-1], path[1:]):
            expect.add((int(g.index[a, b]), int(e)))
    assert set(map(tuple, pairs.tolist())) == expect


# -------------------------------------------------------------- perfect matchings
def test_bipartite_alternating_cycle_certificate_iff_optimal(rng):
    """On a bipartite graph (K_{3,3} as a mask of 6 nodes) feasible <=> optimal."""
    model = PerfectMatching(certificate="alternating_cycle")
    mask = np.zeros((6, 6), dtype=bool)
    mask[:3, 3:] = True
    mask = mask | mask.T
    edges = {(a, b) for a in range(3) for b in range(3, 6)}
    for _ in range(15):
        g = model.check_x((sym(rng.normal(size=(6, 6, 1))), mask))
        s = rng.normal(size=g.n_edges)
        pms = enumerate_perfect_matchings(range(6), edges)
        vals = [sum(s[g.index[a, b]] for a, b in pm) for pm in pms]
        best = int(np.argmax(vals))
        np.testing.assert_array_equal(model.encode(g, model.inference(g, s)),
                                      pm_indicator(g, pms[best]).astype(float))
        for i, pm in enumerate(pms):
            mu = pm_indicator(g, pm)
            Gs, Gd = model.certificate_rows(g, mu.astype(float))
            assert potentials_exist(Gs, Gd, s) == (i == best)


def test_general_graph_certificate_sufficient_and_matches_walk_oracle(rng):
    """K6, random scores, every perfect matching: feasible => optimal, and feasibility
    equals "no negative closed alternating walk" (Bellman-Ford on the state graph)."""
    model = PerfectMatching(certificate="alternating_cycle")
    g = model.check_x(np.zeros((6, 6, 1)))
    pms = enumerate_perfect_matchings(range(6))
    assert len(pms) == 15
    n_opt_feasible = 0
    for _ in range(30):
        s = rng.normal(size=g.n_edges)
        vals = [sum(s[g.index[a, b]] for a, b in pm) for pm in pms]
        best = int(np.argmax(vals))
        np.testing.assert_array_equal(model.encode(g, model.inference(g, s)),
                                      pm_indicator(g, pms[best]).astype(float))
        for i, pm in enumerate(pms):
            mu = pm_indicator(g, pm)
            Gs, Gd = model.certificate_rows(g, mu.astype(float))
            feasible = potentials_exist(Gs, Gd, s)
            assert feasible == (not negative_alternating_walk(6, g.u, g.v, mu, s))
            if feasible:
                assert i == best
                n_opt_feasible += 1
    assert n_opt_feasible >= 25  # the certificate is not vacuous


def test_odd_cycle_counterexample_optimal_but_rejected():
    """An optimal perfect matching the alternating-cycle constraints reject: a negative
    closed alternating walk around two triangles (see PerfectMatching's docstring)."""
    S, y = odd_cycle_counterexample()
    model = PerfectMatching(certificate="alternating_cycle")
    g = model.check_x(np.zeros((6, 6, 1)))
    s = S[g.u, g.v]
    pms = enumerate_perfect_matchings(range(6))
    vals = [sum(S[a, b] for a, b in pm) for pm in pms]
    best = pms[int(np.argmax(vals))]
    assert sorted(vals)[-1] > sorted(vals)[-2]  # unique optimum
    mu = model.encode(g, y)
    np.testing.assert_array_equal(mu, pm_indicator(g, best).astype(float))
    np.testing.assert_array_equal(model.inference(g, s), y)
    Gs, Gd = model.certificate_rows(g, mu)
    assert not potentials_exist(Gs, Gd, s)
    assert negative_alternating_walk(6, g.u, g.v, mu > 0.5, s)
    # the walk 0-1-2-3-1-0-4-5-0 has length -4
    walk = [0, 1, 2, 3, 1, 0, 4, 5, 0]
    length = sum((S[a, b] if y[a, b] else -S[a, b]) for a, b in zip(walk[:-1], walk[1:]))
    assert length == -4.0


def test_fraction_of_optimal_matchings_rejected_is_small(rng):
    """Random complete 6-node graphs: a small fraction (~1%) of maximum-weight perfect
    matchings fail the certificate; none on bipartite K_{3,3} (Bellman-Ford oracle)."""
    model = PerfectMatching(certificate="alternating_cycle")
    g = model.check_x(np.zeros((6, 6, 1)))
    rejected = 0
    n_draws = 600
    for _ in range(n_draws):
        s = rng.normal(size=g.n_edges)
        mu = model.encode(g, model.inference(g, s)) > 0.5
        rejected += negative_alternating_walk(6, g.u, g.v, mu, s)
    assert 0 < rejected / n_draws < 0.05


# ------------------------------------------------------------------ graph copy
@pytest.mark.parametrize("n", [4, 5, 6])
def test_graph_copy_max_matching_is_half_max_perfect_matching(n, rng):
    for _ in range(5):
        x, mask = random_graph_x(rng, n, 1, 0.7)
        g = check_graph((x, mask), "test")
        s = rng.normal(size=g.n_edges)
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_weighted_edges_from(zip(g.u.tolist(), g.v.tolist(), s.tolist()))
        mw = nx.max_weight_matching(G)
        best = sum(G[a][b]["weight"] for a, b in mw)
        # brute force over all matchings
        edges = list(zip(g.u.tolist(), g.v.tolist()))
        brute = max(sum(s[g.index[a, b]] for a, b in m) for m in enumerate_matchings(n, edges))
        assert np.isclose(best, brute)
        U, V, part, _ = graph_copy(n, g.u, g.v)
        s2 = np.where(part >= 0, s[np.maximum(part, 0)], 0.0)
        H = nx.Graph()
        H.add_weighted_edges_from(zip(U.tolist(), V.tolist(), s2.tolist()))
        pm = nx.max_weight_matching(H, maxcardinality=True)
        assert 2 * len(pm) == 2 * n
        assert np.isclose(sum(H[a][b]["weight"] for a, b in pm), 2 * best)
        # Matching.inference gives the same value
        y = Matching().inference(g, s)
        assert np.isclose(Matching().encode(g, y) @ s, best)


def test_matching_certificate_sufficient(rng):
    """Graph copy + alternating cycles (``certificate="alternating_cycle"``): a certified matching is a maximum one; the
    maximum one is certified for most random scores."""
    model = Matching(certificate="alternating_cycle")
    n = 5
    g = model.check_x(np.zeros((n, n, 1)))
    edges = list(zip(g.u.tolist(), g.v.tolist()))
    matchings = enumerate_matchings(n, edges)
    certified_best = 0
    for _ in range(8):
        feasible, best = certified(model, g, matchings, rng.normal(size=g.n_edges))
        assert [i for i, f in enumerate(feasible) if f] in ([], [best])   # sufficient
        certified_best += feasible[best]
    assert certified_best >= 6


# ------------------------------------------------------ Edmonds' odd-set certificate
def brute_tight_odd_sets(n, pairs):
    """Every odd node set (size >= 3) holding (|S| - 1) / 2 matched pairs, by enumeration."""
    import itertools
    out = set()
    for size in range(3, n + 1, 2):
        for S in itertools.combinations(range(n), size):
            inside = sum(a in S and b in S for a, b in pairs)
            if inside == (size - 1) // 2:
                out.add(S)
    return out


@pytest.mark.parametrize("n, m", [(6, 3), (7, 2), (8, 4), (9, 3), (10, 5)])
def test_tight_odd_sets_equal_enumeration(n, m, rng):
    from structlp.certificates import n_tight_odd_sets, tight_odd_sets
    nodes = rng.permutation(n)
    pairs = nodes[:2 * m].reshape(m, 2)
    sets, complete = tight_odd_sets(n, pairs)
    got = {tuple(S) for block in sets for S in block.tolist()}
    assert complete and sum(len(b) for b in sets) == len(got)      # no duplicates
    assert got == brute_tight_odd_sets(n, [tuple(p) for p in pairs.tolist()])
    assert len(got) == sum(n_tight_odd_sets(n, m, j) for j in range(1, m + 1))
    # a budget keeps whole sizes, smallest first
    sets3, complete3 = tight_odd_sets(n, pairs, n_tight_odd_sets(n, m, 1))
    assert [b.shape[1] for b in sets3] == [3] and not complete3


@pytest.mark.parametrize("n", [4, 6, 8, 10])
def test_tight_odd_sets_of_a_perfect_matching_one_of_each_complement(n, rng):
    """Perfect matchings: S and V - S give one constraint; the sets given are the tight
    ones without node 0 and of fewer than n - 1 nodes, one of each complementary pair."""
    from structlp.certificates import n_tight_odd_sets, tight_odd_sets
    pairs = rng.permutation(n).reshape(n // 2, 2)
    sets, complete = tight_odd_sets(n, pairs, perfect=True)
    got = {tuple(S) for block in sets for S in block.tolist()}
    every = brute_tight_odd_sets(n, [tuple(p) for p in pairs.tolist()])
    assert complete and got == {S for S in every if 0 not in S and len(S) < n - 1}
    full = set(range(n))
    for S in every:                    # every tight set or its complement is given
        rest = tuple(sorted(full - set(S)))
        assert S in got or rest in got or len(rest) == 1
    assert len(got) == sum(n_tight_odd_sets(n, n // 2, j, perfect=True)
                           for j in range(1, n // 2 + 1))


@pytest.mark.parametrize("n, p", [(6, None), (8, None), (8, 0.6)])
def test_odd_set_certificate_iff_optimal_perfect_matching(n, p, rng):
    """Edmonds' odd-set certificate is exact on general graphs: for random scores, the
    rows of a perfect matching are feasible iff it is the maximum one (enumeration)."""
    model = PerfectMatching(certificate="odd_sets")
    for _ in range(4 if n == 6 else 2):
        x = random_graph_x(rng, n, 1, p)
        if p is not None and max_weight_matching(model.check_x(x), np.zeros(
                model.check_x(x).n_edges), perfect=True) is None:
            continue
        g = model.check_x(x)
        edges = set(zip(g.u.tolist(), g.v.tolist()))
        pms = enumerate_perfect_matchings(range(n), edges)
        feasible, best = certified(model, g, pms, rng.normal(size=g.n_edges))
        assert [i for i, f in enumerate(feasible) if f] == [best]


def test_odd_set_certificate_accepts_the_odd_cycle_counterexample():
    """The optimal perfect matching the alternating-cycle certificate rejects passes the
    odd-set certificate (the triangles are tight odd sets)."""
    S, y = odd_cycle_counterexample()
    g = PerfectMatching(certificate="odd_sets").check_x(np.zeros((6, 6, 1)))
    mu = PerfectMatching(certificate="odd_sets").encode(g, y)
    s = S[g.u, g.v]
    assert potentials_exist(*PerfectMatching(certificate="odd_sets").certificate_rows(g, mu), s)
    assert not potentials_exist(
        *PerfectMatching(certificate="alternating_cycle").certificate_rows(g, mu), s)
    # without odd sets (the fractional relaxation) it is rejected too
    assert not potentials_exist(*PerfectMatching(certificate="odd_sets", max_odd_sets=0).certificate_rows(g, mu), s)


@pytest.mark.parametrize("n, p", [(5, None), (6, None), (6, 0.7)])
def test_odd_set_certificate_iff_optimal_matching(n, p, rng):
    """Matchings (not necessarily perfect), unmatched-node parts of score 0: feasible iff
    maximum, over every matching of the graph (enumeration)."""
    model = Matching()
    for _ in range(3):
        g = model.check_x(random_graph_x(rng, n, 1, p))
        matchings = enumerate_matchings(n, list(zip(g.u.tolist(), g.v.tolist())))
        rows = model.certificate_rows(g, np.zeros(g.n_edges))
        assert rows.Gt.shape[1] == g.n_edges + n                     # edges + nodes
        feasible, best = certified(model, g, matchings, rng.normal(size=g.n_edges))
        assert [i for i, f in enumerate(feasible) if f] == [best]


def two_pentagons():
    """Two 5-cycles 0-1-2-3-4 and 5-6-7-8-9 joined by the matched edge 0-5; M = {05, 12, 34,
    67, 89} scores 0, the other cycle edges 1, every other edge -10.  M is the unique
    optimum, but x = 1/2 on both cycles scores 3 and meets every triangle constraint: only
    the 5-node odd sets certify M."""
    S = np.full((10, 10), -10.0)
    np.fill_diagonal(S, 0.0)
    for c in (0, 5):
        ring = [c, c + 1, c + 2, c + 3, c + 4, c]
        for a, b in zip(ring[:-1], ring[1:]):
            S[a, b] = S[b, a] = 1.0
    M = [(0, 5), (1, 2), (3, 4), (6, 7), (8, 9)]
    for a, b in M:
        S[a, b] = S[b, a] = 0.0
    y = np.zeros((10, 10), dtype=int)
    for a, b in M:
        y[a, b] = y[b, a] = 1
    return S, y


def test_truncated_odd_set_certificate_is_sufficient_not_necessary(rng):
    """A budget that drops the larger odd sets keeps the rows sufficient (a certified
    matching is optimal, on random scores against worse matchings) but not necessary
    (two pentagons need their 5-node sets)."""
    from structlp.certificates import n_tight_odd_sets
    S, y = two_pentagons()
    g = PerfectMatching(certificate="odd_sets").check_x(np.zeros((10, 10, 1)))
    s = S[g.u, g.v]
    mu = PerfectMatching(certificate="odd_sets").encode(g, y)
    np.testing.assert_array_equal(PerfectMatching(certificate="odd_sets").inference(g, s), y)
    triangles = n_tight_odd_sets(10, 5, 1, perfect=True)     # 28 sets of size 3
    assert potentials_exist(*PerfectMatching(certificate="odd_sets").certificate_rows(g, mu), s)
    assert not potentials_exist(
        *PerfectMatching(certificate="odd_sets", max_odd_sets=triangles).certificate_rows(g, mu), s)
    assert not potentials_exist(
        *PerfectMatching(certificate="alternating_cycle").certificate_rows(g, mu), s)
    small = PerfectMatching(certificate="odd_sets", max_odd_sets=triangles)
    for _ in range(20):
        t = rng.normal(size=g.n_edges)
        best = small.encode(g, small.inference(g, t))
        other = small.encode(g, small.inference(g, t + rng.normal(scale=2.0, size=len(t))))
        if not np.array_equal(other, best):
            assert not potentials_exist(*small.certificate_rows(g, other), t)


# ----------------------------------------------------- learning: QP vs references
def planted(rng, model, m, n, d, shift=0.0, ones=False):
    w0 = rng.normal(size=d)
    X = [sym(rng.normal(size=(n, n, d))) for _ in range(m)]
    Y = [model.inference(x, model.features(x) @ w0 - shift) for x in X]
    if ones:
        X = [np.concatenate([x, np.ones((n, n, 1))], axis=-1) for x in X]
    return X, Y


def _certificate_equals_minmax(shape, name, opts, hard, rng):
    model = BipartiteMatching()
    w0 = rng.normal(size=3)
    X = [rng.normal(size=shape + (3,)) for _ in range(12)]
    Y = [model.inference(x, (x @ w0).ravel()) for x in X]
    C = 1e4 if hard else 1.0
    ref = MaxMarginLearner(model, C=C, solver="CLARABEL").fit(X, Y)
    mm = MaxMarginLearner(model, C=C, solver=name, solver_opts=opts).fit(X, Y)
    ce = MaxMarginLearner(model, C=C, formulation="certificate", solver=name,
                          solver_opts=opts).fit(X, Y)
    scale = np.abs(ref.coef_).max()
    for est in (mm, ce):
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-4 * scale)
        assert abs(est.objective_ - ref.objective_) <= 1e-4 * ref.objective_
    np.testing.assert_allclose(ce.coef_, mm.coef_, rtol=0, atol=1e-4 * scale)
    if hard:
        assert mm.slack_.max() < 1e-5 and ce.slack_.max() < 1e-5
        for y, p in zip(Y, ce.predict(X)):
            np.testing.assert_array_equal(p, y)
    else:     # the slacks are the hinge losses at the optimum (the certificate is exact)
        np.testing.assert_allclose(ce.slack_, ref.hinge_losses(X, Y), atol=1e-4 * C)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_bipartite_certificate_equals_minmax(shape, solver, rng):
    """Exact certificate: the same w as the min-max QP (1e-4 of the largest weight), with
    every installed solver, against the min-max QP solved by CLARABEL (interior point).

    Separable data in the hard-margin regime C=1e4 (both slacks vanish, the predictions are
    the training outputs) for the interior-point solvers; the first-order SCS and OSQP at
    C=1 (the certificate is exact at every C), where they reach 1e-4 at eps 1e-9 in well
    under a second (SCS takes 5 s per case at C=1e4: the slow test below; OSQP's 400,000
    iterations end before that regime's accuracy)."""
    name, opts, tol = solver
    _certificate_equals_minmax(shape, name, opts, name in ("CLARABEL", "ECOS"), rng)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_bipartite_certificate_equals_minmax_scs_hard_margin(shape, rng):
    if "SCS" not in INSTALLED:
        pytest.skip("SCS is not installed")
    # (the hard margin is harder for SCS than C=1: at eps 1e-9 SCS 3.3 ends "inaccurate"
    # on the second shape; 1e-8 still holds it to 1e-4 of CLARABEL)
    opts = dict(SOLVER_SETTINGS["SCS"][0], eps_abs=1e-8, eps_rel=1e-8, max_iters=400_000)
    _certificate_equals_minmax(shape, "SCS", opts, True, rng)


@pytest.mark.parametrize("slack, rtol", [("shared", 1e-6), ("two_sided", 1e-5), ("part", 1e-5)])
def test_spanning_tree_certificate_qp_equals_cutting_plane(slack, rtol, rng):
    """Separable data, hard margin: every slack vanishes and the certificate QP is the exact
    QP (the per-part slacks carry one variable per part, hence the looser rtol at C=1e4)."""
    model = SpanningTree()
    X, Y = planted(rng, model, 12, 6, 5)
    C = 1e4
    qp = MaxMarginLearner(model, C=C, formulation="certificate", slack=slack).fit(X, Y)
    cp = CuttingPlaneLearner(model, C=C, tol=1e-7).fit(X, Y)
    assert cp.converged_ and qp.slack_.max() < 1e-6 and cp.slack_.max() < 1e-6
    np.testing.assert_allclose(qp.objective_, cp.objective_, rtol=rtol)
    np.testing.assert_allclose(qp.coef_, cp.coef_, atol=1e-4 * np.abs(cp.coef_).max())
    for y, p in zip(Y, qp.predict(X)):
        np.testing.assert_array_equal(p, y)


def test_perfect_matching_certificate_qp_is_conservative():
    """Non-bipartite: the certificate QP objective is >= the exact (cutting-plane)
    objective.  With this seed the certificate binds: the exact optimum w leaves a
    negative closed alternating walk in some example, and the gap is ~40%."""
    model = PerfectMatching(certificate="alternating_cycle")
    rng = np.random.default_rng(3)
    X, Y = planted(rng, model, 15, 6, 5)
    C = 1e4
    qp = MaxMarginLearner(model, C=C, formulation="certificate").fit(X, Y)
    cp = CuttingPlaneLearner(model, C=C, tol=1e-7).fit(X, Y)
    assert cp.converged_ and cp.slack_.max() < 1e-6 and qp.slack_.max() < 1e-6
    assert qp.objective_ >= cp.objective_ * (1 - 1e-6)
    assert (qp.objective_ - cp.objective_) / cp.objective_ > 0.2
    # the certificate's w is feasible for the exact problem (zero hinge loss) ...
    ref = CuttingPlaneLearner(model, C=C)
    ref.coef_, ref.n_features_in_ = qp.coef_, qp.coef_.shape[0]
    assert ref.hinge_losses(X, Y).max() < 1e-6
    # ... and the exact optimum leaves a negative closed alternating walk somewhere
    walks = []
    for x, y in zip(X, Y):
        g = model.check_x(x)
        mu = model.encode(g, y)
        walks.append(negative_alternating_walk(6, g.u, g.v, mu > 0.5,
                                               model.features(g) @ cp.coef_ - mu))
    assert any(walks)


@pytest.mark.parametrize("model, shift, ones, seed", [
    (PerfectMatching(certificate="odd_sets"), 0.0, False, 3), (Matching(), 0.5, True, 1)])
def test_odd_set_certificate_qp_is_the_exact_qp_on_separable_data(model, shift, ones, seed):
    """The same data on which the alternating-cycle certificate QP is 20-40% above the exact
    objective (tests above): the exact odd-set certificate reaches zero slack, and its QP is
    the exact hard-margin QP (= the cutting plane's objective and w)."""
    X, Y = planted(np.random.default_rng(seed), model, 15, 6, 5, shift=shift, ones=ones)
    C = 1e4
    qp = MaxMarginLearner(model, C=C, formulation="certificate").fit(X, Y)
    cp = CuttingPlaneLearner(model, C=C, tol=1e-7).fit(X, Y)
    assert cp.converged_ and cp.slack_.max() < 1e-6 and qp.slack_.max() < 1e-6
    np.testing.assert_allclose(qp.objective_, cp.objective_, rtol=1e-5)
    np.testing.assert_allclose(qp.coef_, cp.coef_, atol=1e-3 * np.abs(cp.coef_).max())


def test_matching_certificate_qp_is_conservative():
    """Graph copy: on planted matchings the certificate QP cannot even reach zero slack
    for some examples (blossom walks through the copy edges), and its objective is
    >= the exact one."""
    model = Matching(certificate="alternating_cycle")
    rng = np.random.default_rng(1)
    X, Y = planted(rng, model, 15, 6, 5, shift=0.5, ones=True)
    C = 1e4
    qp = MaxMarginLearner(model, C=C, formulation="certificate").fit(X, Y)
    cp = CuttingPlaneLearner(model, C=C, tol=1e-7).fit(X, Y)
    assert cp.converged_ and cp.slack_.max() < 1e-6
    assert qp.objective_ >= cp.objective_
    assert qp.slack_.max() > 0.01


def test_certificate_qp_slacks_fit_predict_roundtrip(rng):
    """Non-separable data: the certificate QP runs, its slacks are >= 0, predictions are
    valid outputs."""
    model = PerfectMatching()
    X, _ = planted(rng, model, 8, 6, 3)
    Y = [model.inference(x, rng.normal(size=15)) for x in X]
    qp = MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    assert np.all(qp.slack_ >= -1e-8) and qp.slack_.max() > 0.01
    for p in qp.predict(X):
        assert np.all(p.sum(axis=0) == 1)
    assert 0 <= qp.loss(X, Y) <= 3


def test_certificate_blocks_work_with_the_kernelized_dual(rng):
    """The certificate writes its w-dependence as a "parts" term, so dual=True applies."""
    model = PerfectMatching()
    X, Y = planted(rng, model, 8, 6, 4)
    a = MaxMarginLearner(model, C=2.0, formulation="certificate").fit(X, Y)
    b = MaxMarginLearner(model, C=2.0, formulation="certificate", dual=True).fit(X, Y)
    np.testing.assert_allclose(b.objective_, a.objective_, rtol=1e-5)
    assert np.abs(a.coef_).max() > 0.1
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-4 * np.abs(a.coef_).max())
