"""AGM, SSVM and CRF on low-treewidth graphs through junction trees, against enumeration."""

import pickle

import numpy as np
import pytest
from scipy.special import logsumexp

import structlp
from structlp.agm import AdversarialGraphicalModel, JunctionTreeCRF, TreeCRF
from structlp.agm.game import loss_matrix
from structlp.agm.inner import inner_lp
from structlp.graphical.junction import (as_tree, check_graph_example, graph_score, jt_marginals,
                                   jt_max_sum, skip_chain, tree_as_graph)
from structlp.graphical.trees import check_tree_example, max_sum, n_params, potentials
from structlp.exceptions import InvalidInputError, InvalidOutputError
from structlp.structures import JunctionTreeLabeling, TreeLabeling

from agm_graph_oracles import (LOOPY, exact_treewidth, joint_features, joint_game_value,
                               joint_loss, joint_objective, joint_qp_objective, labellings,
                               random_graph_data)
from agm_oracles import random_tree_data

GRAPHS = list(LOOPY)


def _case(rng, name, k, m=1):
    X, Y = random_graph_data(rng, LOOPY[name][0], m, k=k)
    return X, Y


@pytest.mark.parametrize("name", GRAPHS)
def test_width_is_true_treewidth(name):
    edges, tw = LOOPY[name]
    n = int(edges.max()) + 1
    assert exact_treewidth(n, edges.tolist()) == tw
    gx = check_graph_example({"node_features": np.zeros((n, 1)), "edges": edges,
                              "edge_features": np.zeros((len(edges), 1))})
    assert gx.width == tw and gx.width_exact
    # a junction tree: every edge in a clique, running intersection
    members = [set(c.tolist()) for c in gx.cliques]
    assert all(any({u, v} <= c for c in members) for u, v in edges.tolist())
    for v in range(n):
        holding = [c for c in range(len(members)) if v in members[c]]
        roots = [c for c in holding if gx.clique_parent[c] not in holding]
        assert len(roots) == 1                      # the cliques holding v form a subtree


@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("k", [2, 3])
def test_max_sum_and_sum_product_equal_enumeration(rng, name, k):
    (x,), _ = _case(rng, name, k)
    gx = check_graph_example(x, k)
    b, B = potentials(gx, rng.normal(size=n_params(3, 2, k)), k)
    Ys = labellings(gx.n_nodes, k)
    sc = np.array([graph_score(gx, b, B, y) for y in Ys])
    y, s = jt_max_sum(gx, b, B)
    np.testing.assert_array_equal(y, Ys[np.argmax(sc)])
    assert s == pytest.approx(sc.max(), abs=1e-10)
    log_Z, mu, node, edge = jt_marginals(gx, b, B)
    assert log_Z == pytest.approx(logsumexp(sc), abs=1e-10)
    p = np.exp(sc - logsumexp(sc))
    ref_node = np.stack([np.bincount(Ys[:, i], p, minlength=k) for i in range(gx.n_nodes)])
    np.testing.assert_allclose(node, ref_node, atol=1e-12)
    for e, (u, v) in enumerate(gx.edges):
        ref = np.zeros((k, k))
        np.add.at(ref, (Ys[:, u], Ys[:, v]), p)
        np.testing.assert_allclose(edge[e], ref, atol=1e-12)


@pytest.mark.parametrize("name,k", [(g, 3) for g in GRAPHS] + [("grid2x3", 2)])
@pytest.mark.parametrize("loss", ["zero_one", "absolute", "squared"])
def test_inner_max_min_equals_joint_game(rng, name, k, loss):
    (x,), _ = _case(rng, name, k)
    gx = check_graph_example(x, k)
    theta = rng.normal(size=n_params(3, 2, k))
    b, B = potentials(gx, theta, k)
    w = rng.uniform(0.5, 2, size=gx.n_nodes)
    L = loss_matrix(loss, k)
    value = inner_lp(gx, b, B, w[:, None, None] * L[None])[0]
    Ys, F = joint_features(x, k)
    assert value == pytest.approx(joint_game_value(F @ theta, joint_loss(Ys, L, w)),
                                  rel=1e-8, abs=1e-8)


@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("loss", ["zero_one", "absolute", "squared"])
def test_objective_equals_enumeration(rng, name, loss):
    X, Y = _case(rng, name, 3, m=2)
    theta = rng.normal(size=n_params(3, 2, 3))
    agm = AdversarialGraphicalModel(3, loss=loss, reg=0.3)
    ref = joint_objective(X, Y, theta, 3, loss_matrix(loss, 3), 0.3)
    assert agm.objective(X, Y, theta) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("name,loss", [("cycle4", "zero_one"), ("skip5", "absolute"),
                                       ("grid2x3", "squared")])
def test_qp_equals_joint_qp(rng, name, loss):
    k = 3 if name != "grid2x3" else 2
    X, Y = _case(rng, name, k, m=2)
    qp = AdversarialGraphicalModel(k, loss=loss, reg=0.5, method="qp").fit(X, Y)
    ref = joint_qp_objective(X, Y, k, loss_matrix(loss, k), 0.5)
    assert qp.qp_objective_ == pytest.approx(ref, rel=1e-6)
    assert qp.objective(X, Y) == pytest.approx(ref, rel=1e-6)


def test_qp_and_subgradient_agree_on_cycle(rng):
    X, Y = _case(rng, "cycle5", 3, m=3)
    qp = AdversarialGraphicalModel(3, reg=0.5, method="qp").fit(X, Y)
    sg = AdversarialGraphicalModel(3, reg=0.5, max_epochs=500, random_state=0).fit(X, Y)
    assert sg.objective_ >= qp.objective_ * (1 - 1e-6)
    assert sg.objective_ == pytest.approx(qp.objective_, rel=2e-3)


@pytest.mark.slow
def test_junction_dual_decomposition_learner_reaches_qp(rng):
    X, Y = _case(rng, "cycle5", 3, m=3)
    qp = AdversarialGraphicalModel(3, reg=0.5, method="qp").fit(X, Y)
    dd = AdversarialGraphicalModel(3, reg=0.5, max_epochs=300, random_state=0,
                                   inner="dual_decomposition").fit(X, Y)
    assert dd.objective_ == pytest.approx(qp.objective_, rel=2e-3)
    assert dd.inner_stats_["solves"] == 900


@pytest.mark.parametrize("loss", ["zero_one", "absolute", "squared"])
def test_junction_dual_decomposition_bounds_the_lp(rng, loss):
    """Node games + max-sum on the junction tree: a primal point below the LP value, at
    it (1e-6) when certified; most random cases certify within 300 iterations."""
    from structlp.agm.inner import inner_junction_decomposition
    certified = 0
    for t, name in enumerate(GRAPHS):
        (x,), _ = _case(rng, name, 3)
        gx = check_graph_example(x, 3)
        b, B = potentials(gx, rng.normal(size=n_params(3, 2, 3)) * (0.3, 1.0, 3.0)[t % 3], 3)
        w = rng.uniform(0.5, 2, size=gx.n_nodes)
        NL = w[:, None, None] * loss_matrix(loss, 3)[None]
        v = inner_lp(gx, b, B, NL)[0]
        v2, R, Q, u, ok, it = inner_junction_decomposition(gx, b, B, loss, w, None, NL,
                                                           max_iter=300, tol=1e-7)
        assert v2 <= v + 1e-7
        np.testing.assert_allclose(Q.sum(axis=(1, 2)), 1.0, atol=1e-8)
        if ok:
            certified += 1
            assert v2 == pytest.approx(v, rel=1e-6, abs=1e-6)
    assert certified >= 2


@pytest.mark.parametrize("name", ["cycle5", "skip5"])
def test_predict_proba_is_a_saddle_point(rng, name):
    """Eq. 10: at the predictor's p, the adversary's best response (max-sum with node
    potentials b + L^T p) gives the inner max-min value (min-max = max-min), = enumeration."""
    X, Y = _case(rng, name, 3, m=2)
    agm = AdversarialGraphicalModel(3, loss="absolute", reg=0.5, method="qp").fit(X, Y)
    L = loss_matrix("absolute", 3)
    for x, P in zip(X, agm.predict_proba(X)):
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-8)
        gx = check_graph_example(x, 3)
        b, B = potentials(gx, agm.coef_, 3)
        best = jt_max_sum(gx, b + P @ L, B)[1]
        Ys, F = joint_features(x, 3)
        ref = joint_game_value(F @ agm.coef_, joint_loss(Ys, L, np.ones(gx.n_nodes)))
        assert best == pytest.approx(ref, rel=1e-6, abs=1e-6)
        np.testing.assert_array_equal(agm.predict([x])[0],
                                      Ys[np.argmax(F @ agm.coef_)])


# ---------------------------------------------------------------- trees through the new code
def _as_shuffled_graph(rng, x):
    """A tree example as a graph: edges (parent, child) in a shuffled order."""
    g = tree_as_graph(x)
    perm = rng.permutation(len(g["edges"]))
    return {"node_features": g["node_features"], "edges": g["edges"][perm],
            "edge_features": g["edge_features"][perm]}


@pytest.mark.parametrize("method", ["qp", "subgradient"])
def test_tree_given_as_graph_is_the_tree_fast_path(rng, method):
    X, Y = random_tree_data(rng, 4, 5)
    Xg = [_as_shuffled_graph(rng, x) for x in X]
    kw = dict(loss="absolute", reg=0.3, method=method, max_epochs=20, random_state=0)
    t = AdversarialGraphicalModel(3, **kw).fit(X, Y)
    g = AdversarialGraphicalModel(3, **kw).fit(Xg, Y)
    np.testing.assert_allclose(g.coef_, t.coef_, rtol=1e-8, atol=1e-8)
    assert g.objective_ == pytest.approx(t.objective_, rel=1e-8)
    for a, c in zip(t.predict(X), g.predict(Xg)):
        np.testing.assert_array_equal(a, c)
    for a, c in zip(t.predict_proba(X), g.predict_proba(Xg)):
        np.testing.assert_allclose(a, c, atol=1e-8)


def test_tree_through_junction_tree_code_equals_tree_code(rng, monkeypatch):
    """The junction-tree path itself (fast path off) on trees: the tree code's numbers."""
    import structlp.agm.model as model
    X, Y = random_tree_data(rng, 3, 5)
    Xg = [tree_as_graph(x) for x in X]
    theta = rng.normal(size=n_params(3, 2, 3))
    L = loss_matrix("squared", 3)
    for x, xg in zip(X, Xg):
        ex = check_tree_example(x)
        gx = check_graph_example(xg, 3)
        assert gx.width == 1 and gx.width_exact and as_tree(gx) is not None
        b, B = potentials(ex, theta, 3)
        NL = np.broadcast_to(L, (5, 3, 3))
        assert inner_lp(gx, b, B, NL)[0] == pytest.approx(inner_lp(ex, b, B, NL)[0], abs=1e-8)
        np.testing.assert_array_equal(jt_max_sum(gx, b, B)[0], max_sum(ex, b, B)[0])
    ref = AdversarialGraphicalModel(3, loss="squared", reg=0.3, method="qp").fit(X, Y)
    obj_t = ref.objective(X, Y, theta)
    monkeypatch.setattr(model, "as_tree", lambda gx: None)
    jt = AdversarialGraphicalModel(3, loss="squared", reg=0.3, method="qp").fit(Xg, Y)
    assert jt.objective(Xg, Y, theta) == pytest.approx(obj_t, abs=1e-8)
    assert jt.qp_objective_ == pytest.approx(ref.qp_objective_, rel=1e-6)
    for a, c in zip(ref.predict(X), jt.predict(Xg)):
        np.testing.assert_array_equal(a, c)


# ---------------------------------------------------------------- CRF
@pytest.mark.parametrize("name", ["cycle4", "grid2x3"])
def test_crf_gradient_equals_finite_differences(rng, name):
    from structlp.agm.crf import crf_objective
    from structlp.graphical.junction import encode_pairwise
    from structlp.graphical.trees import part_features
    X, Y = _case(rng, name, 3, m=2)
    exs = [check_graph_example(x, 3) for x in X]
    Psi = sum(part_features(ex, 3).T @ encode_pairwise(ex, y, 3) for ex, y in zip(exs, Y))
    theta = rng.normal(size=n_params(3, 2, 3)) * 0.5
    f, g = crf_objective(theta, exs, Psi, 3, 0.1)
    # f = enumeration
    ref = 0.05 * theta @ theta
    for x, y in zip(X, Y):
        Ys, F = joint_features(x, 3)
        ref += (logsumexp(F @ theta) - F[(Ys == y).all(axis=1)][0] @ theta) / 2
    assert f == pytest.approx(ref, rel=1e-10)
    h = 1e-6
    fd = np.array([(crf_objective(theta + h * e, exs, Psi, 3, 0.1)[0]
                    - crf_objective(theta - h * e, exs, Psi, 3, 0.1)[0]) / (2 * h)
                   for e in np.eye(len(theta))])
    np.testing.assert_allclose(g, fd, atol=1e-6)


def test_crf_on_trees_equals_tree_crf_and_pickles(rng):
    X, Y = random_tree_data(rng, 4, 5)
    t = TreeCRF(3, reg=0.1).fit(X, Y)
    g = JunctionTreeCRF(3, reg=0.1).fit([_as_shuffled_graph(rng, x) for x in X], Y)
    np.testing.assert_allclose(g.coef_, t.coef_, atol=1e-8)
    g2 = pickle.loads(pickle.dumps(g))
    for a, c in zip(t.predict_proba(X), g2.predict_proba(X)):
        np.testing.assert_allclose(a, c, atol=1e-8)
    assert all(not callable(v) for k, v in vars(g).items() if k.endswith("_"))


# ---------------------------------------------------------------- max-margin structure
def test_junction_tree_labeling_inference_and_tree_equivalence(rng):
    model = JunctionTreeLabeling(3, loss="absolute")
    (x,), (y,) = _case(rng, "grid2x3", 3)
    gx = model.check_x(x)
    s = rng.normal(size=model.n_parts(gx))
    Ys = labellings(gx.n_nodes, 3)
    enc = np.array([model.encode(gx, yy) for yy in Ys])
    np.testing.assert_array_equal(model.inference(gx, s), Ys[np.argmax(enc @ s)])
    c, d = model.loss_coefficients(gx, y)
    np.testing.assert_allclose(enc @ c + d, np.abs(Ys - y).sum(axis=1))
    X, Y = random_tree_data(rng, 4, 5)
    a = structlp.MaxMarginLearner(TreeLabeling(3, loss="absolute")).fit(X, Y)
    b = structlp.MaxMarginLearner(model).fit([tree_as_graph(x) for x in X], Y)
    assert b.objective_ == pytest.approx(a.objective_, rel=1e-6)


@pytest.mark.slow   # about 10 s
def test_junction_tree_labeling_with_every_learner(rng):
    X, Y = _case(rng, "cycle5", 3, m=4)
    model = JunctionTreeLabeling(3)
    qp = structlp.MaxMarginLearner(model, C=1.0).fit(X, Y)
    fw = structlp.FrankWolfeLearner(model, C=1.0, max_iter=500, tol=1e-5).fit(X, Y)
    cpl = structlp.CuttingPlaneLearner(model, C=1.0).fit(X, Y)
    for other in (fw, cpl):
        assert other.objective_ == pytest.approx(qp.objective_, rel=1e-3)
    # the LP over the clique polytope is integral: LP prediction = max-sum
    for a, c in zip(qp.predict(X), [model.inference(model.check_x(x), model.features(
            model.check_x(x)) @ qp.coef_) for x in X]):
        np.testing.assert_array_equal(a, c)


# ---------------------------------------------------------------- bad input
def _g(n=4, edges=None, d_e=2):
    edges = LOOPY["cycle4"][0] if edges is None else np.asarray(edges)
    return {"node_features": np.ones((n, 2)), "edges": edges,
            "edge_features": np.ones((len(edges), d_e))}


@pytest.mark.parametrize("x,match", [
    (_g(4, [(0, 1), (2, 3)]), "not connected"),
    (_g(4, [(0, 1), (1, 1), (1, 2), (2, 3)]), "self-loop"),
    (_g(4, [(0, 1), (1, 2), (2, 1), (2, 3)]), "duplicate edges"),
    (_g(4, [(0, 1), (1, 2), (2, 5)]), "outside 0..3"),
    (dict(_g(), edge_features=np.ones((3, 2))), r"one row per row"),
    (dict(_g(), edges=np.zeros((4, 3), dtype=int)), r"shape \(E, 2\)"),
    (dict(_g(), edges=np.array([[0, 1.5], [1, 2]])), "integer"),
])
def test_bad_graphs(x, match):
    for est in (AdversarialGraphicalModel(3), AdversarialGraphicalModel(3, method="qp"),
                JunctionTreeCRF(3), structlp.MaxMarginLearner(JunctionTreeLabeling(3))):
        with pytest.raises(InvalidInputError, match=match):
            est.fit([x], [np.zeros(4, dtype=int)])


def test_max_treewidth_guard_names_width_and_table_size():
    import networkx as nx
    G = nx.complete_graph(12)                  # treewidth 11: 3^12 = 531441-entry tables
    x = _g(12, list(G.edges))
    for est in (AdversarialGraphicalModel(3), JunctionTreeCRF(3),
                structlp.MaxMarginLearner(JunctionTreeLabeling(3))):
        with pytest.raises(InvalidInputError,
                           match=r"width w = 11 \(the treewidth\), above max_treewidth=8.*"
                                 r"3\^12 = 531441"):
            est.fit([x], [np.zeros(12, dtype=int)])
    with pytest.raises(InvalidInputError, match="max_treewidth=1"):
        AdversarialGraphicalModel(3, max_treewidth=1).fit([_g()], [np.zeros(4, dtype=int)])


def test_labels_out_of_range_and_feature_mismatch(rng):
    X, Y = _case(rng, "cycle4", 3, m=2)
    bad = [Y[0], np.array([0, 1, 3, 0])]
    for est in (AdversarialGraphicalModel(3), JunctionTreeCRF(3),
                structlp.MaxMarginLearner(JunctionTreeLabeling(3))):
        with pytest.raises(InvalidOutputError, match="out of range"):
            est.fit(X, bad)
    X2 = [X[0], dict(X[1], edge_features=np.ones((4, 5)))]
    with pytest.raises(InvalidInputError, match="feature sizes"):
        AdversarialGraphicalModel(3).fit(X2, Y)


def test_skip_chain_builder():
    x = skip_chain(np.ones((5, 2)), np.ones((4, 3)))
    assert x["edges"].tolist() == [[0, 1], [1, 2], [2, 3], [3, 4], [0, 2], [1, 3], [2, 4]]
    assert x["edge_features"].shape == (7, 4)
    assert check_graph_example(x).width == 2
    with pytest.raises(InvalidInputError, match="skip_features"):
        skip_chain(np.ones((5, 2)), np.ones((4, 3)), skip_features=np.ones((2, 1)))


@pytest.mark.parametrize("structure", ["cycle", "skip_chain", "grid"])
def test_make_loopy_data(structure):
    from structlp.agm import make_loopy_data
    X, Xc, Y = make_loopy_data(structure, n_examples=3, n_nodes=6, random_state=0)
    for x, xc, y in zip(X, Xc, Y):
        gx, gc = check_graph_example(x, 3), check_graph_example(xc, 3)
        assert gx.width == 2 and gx.width_exact and gc.width == 1
        assert as_tree(gc) is not None                    # the chain takes the tree path
        und = {tuple(sorted(e)) for e in x["edges"].tolist()}
        assert {tuple(sorted(e)) for e in xc["edges"].tolist()} <= und
        assert len(xc["edges"]) == 5 and y.shape == (6,) and set(y.tolist()) <= {0, 1, 2}
    from structlp.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match="structure"):
        make_loopy_data("torus")
    with pytest.raises(InvalidParameterError, match="even n_nodes"):
        make_loopy_data("grid", n_nodes=7)


@pytest.mark.slow
def test_loopy_models_beat_their_chain_versions():
    from structlp.agm import make_loopy_data
    X, Xc, Y = make_loopy_data("skip_chain", n_examples=200, n_nodes=8, random_state=0)

    def err(est, XX):
        P = est.fit(XX[:100], Y[:100]).predict(XX[100:])
        return np.mean([np.mean(p != y) for p, y in zip(P, Y[100:])])

    for mk in (lambda: AdversarialGraphicalModel(3, reg=0.05, method="qp"),
               lambda: structlp.MaxMarginLearner(JunctionTreeLabeling(3)),
               lambda: JunctionTreeCRF(3, reg=0.05)):
        assert err(mk(), X) < err(mk(), Xc) - 0.05


def test_emotion_skip_chain_examples(rng):
    from structlp.agm.data import emotion_examples
    frames = [rng.normal(size=(6, 3)), rng.normal(size=(2, 3)), rng.normal(size=(1, 3))]
    chain = emotion_examples(frames, [1, 0, 1], n_classes=2)
    skip = emotion_examples(frames, [1, 0, 1], n_classes=2, edges="skip2")
    assert [check_graph_example(x).width for x in skip] == [2, 1, 0]
    np.testing.assert_array_equal(skip[0]["edge_features"][:5, :8], chain[0]["edge_features"])
    np.testing.assert_allclose(skip[0]["edge_features"][5, 12:15],
                               np.abs(frames[0][2] - frames[0][0]))
    Y = [rng.integers(0, 3, size=len(f)) for f in frames]
    agm = AdversarialGraphicalModel(3, reg=0.5, method="qp").fit(skip, Y)
    assert [p.shape for p in agm.predict(skip)] == [(6,), (2,), (1,)]
    from structlp.exceptions import InvalidParameterError
    with pytest.raises(InvalidParameterError, match="edges"):
        emotion_examples(frames, [0, 0, 0], n_classes=2, edges="skip3")


def test_inner_lp_total_and_shared_polytopes(rng):
    """One block-diagonal LP over trees and graphs has the sum of the per-example maxima; a QP
    whose examples repeat shapes (polytopes built once, shared) is verified against them."""
    from structlp.agm.inner import inner_lp_total, inner_polytope
    k = 3
    X, Y = random_graph_data(rng, LOOPY[GRAPHS[0]][0], 3, k=k)
    Xt, Yt = random_tree_data(rng, 3, 5, chain=True)
    exs = [check_graph_example(x, k) for x in X] + [check_tree_example(x) for x in Xt]
    L = loss_matrix("absolute", k)
    pots, polys, total = [], [], 0.0
    for ex in exs:
        b, B = potentials(ex, rng.normal(size=n_params(3, 2, k)), k)
        NL = rng.uniform(0.5, 2, size=ex.n_nodes)[:, None, None] * L[None]
        pots.append((b, B))
        polys.append(inner_polytope(ex, k, NL))
        total += inner_lp(ex, b, B, NL)[0]
    assert inner_lp_total(exs, pots, polys) == pytest.approx(total, rel=1e-9, abs=1e-9)
    # the same shapes repeated, with and without position weights: one polytope per
    # (shape, node losses), the exact objective of the QP's theta equals its verification
    # (both HiGHS optima: to its tolerances, about 1e-9 relative)
    for weights in (None, "position"):
        m = AdversarialGraphicalModel(k, loss="absolute", node_weights=weights, reg=0.5,
                                      method="qp").fit(X + X + Xt, Y + Y + Yt)
        assert m.verification_["ok"]
        assert m.verification_["recomputed"] == pytest.approx(m.objective(X + X + Xt, Y + Y + Yt),
                                                              rel=1e-8, abs=1e-8)


@pytest.mark.parametrize("name,loss", [("cycle4", "absolute"), ("skip5", "zero_one"),
                                       ("grid2x3", "squared")])
def test_cutting_plane_equals_joint_qp(rng, name, loss):
    """The cutting plane on junction-tree examples: the optimum of the joint QP over all
    labellings (enumeration), certified by its own lower bound."""
    k = 3 if name != "grid2x3" else 2
    X, Y = _case(rng, name, k, m=2)
    cpl = AdversarialGraphicalModel(k, loss=loss, reg=0.5, method="cutting_plane").fit(X, Y)
    ref = joint_qp_objective(X, Y, k, loss_matrix(loss, k), 0.5)
    assert cpl.converged_
    assert cpl.objective_ == pytest.approx(ref, rel=1e-7)
    assert cpl.lower_bound_ <= ref * (1 + 1e-7)      # ref: an interior-point optimum
    theta = cpl.coef_
    assert joint_objective(X, Y, theta, k, loss_matrix(loss, k), 0.5) == pytest.approx(
        cpl.objective_, rel=1e-8)
