"""log_partition, marginals against enumeration (1e-9) on chains, trees, junction trees,
arborescences; stability for large scores; refusals."""

import numpy as np
import pytest

from structlp.exceptions import InvalidInputError, InvalidParameterError
from structlp.graphical.trees import chain
from structlp.inference import log_partition, marginals
from structlp.structures import JunctionTreeLabeling, TreeLabeling

from enum_oracles import gibbs, labellings, table


def tree_x(rng, parents, d=2):
    n = len(parents)
    return {"node_features": rng.normal(size=(n, d)), "edge_features": rng.normal(size=(n - 1, d)),
            "parents": np.asarray(parents)}


def cycle_x(rng, n, d=2):
    edges = np.array([(i, (i + 1) % n) for i in range(n)])
    return {"node_features": rng.normal(size=(n, d)), "edges": edges,
            "edge_features": rng.normal(size=(n, d))}


CASES = [
    ("chain", lambda rng: (TreeLabeling(3), chain(rng.normal(size=(4, 2)),
                                                  rng.normal(size=(3, 2)))), 4, 3),
    ("tree", lambda rng: (TreeLabeling(2), tree_x(rng, [-1, 0, 0, 1, 1])), 5, 2),
    ("tree_root_inside", lambda rng: (TreeLabeling(3), tree_x(rng, [2, 2, -1, 1])), 4, 3),
    ("junction_cycle", lambda rng: (JunctionTreeLabeling(2), cycle_x(rng, 5)), 5, 2),
    ("junction_tree_dict", lambda rng: (JunctionTreeLabeling(3), tree_x(rng, [-1, 0, 1])), 3, 3),
]


@pytest.mark.parametrize("name, make, n, k", CASES, ids=[c[0] for c in CASES])
def test_log_partition_and_marginals_equal_enumeration(name, make, n, k):
    rng = np.random.default_rng(0)
    model, x = make(rng)
    xc = model.check_x(x)
    s = rng.normal(size=model.n_parts(xc)) * 2
    M, v = table(model, xc, labellings(n, k), s)
    log_Z, mu, _ = gibbs(M, v)
    got_Z, got_mu = log_partition(model, x, s)
    assert abs(got_Z - log_Z) <= 1e-9 * max(1, abs(log_Z))
    np.testing.assert_allclose(got_mu, mu, atol=1e-9, rtol=0)
    np.testing.assert_allclose(marginals(model, x, s), mu, atol=1e-9, rtol=0)


@pytest.mark.parametrize("name, make, n, k", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_large_scores_stay_finite_and_exact(name, make, n, k):
    rng = np.random.default_rng(1)
    model, x = make(rng)
    xc = model.check_x(x)
    s = rng.normal(size=model.n_parts(xc)) * 1e4
    M, v = table(model, xc, labellings(n, k), s)
    log_Z, mu, _ = gibbs(M, v)
    got_Z, got_mu = log_partition(model, x, s)
    assert abs(got_Z - log_Z) <= 1e-9 * abs(log_Z)
    np.testing.assert_allclose(got_mu, mu, atol=1e-9, rtol=0)


def test_scores_of_the_wrong_length_or_not_finite_are_refused():
    model = TreeLabeling(2)
    x = chain(np.zeros((3, 1)), np.zeros((2, 1)))
    with pytest.raises(InvalidInputError, match=r"shape \(14,\).*got shape \(13,\)"):
        log_partition(model, x, np.zeros(13))
    s = np.zeros(14)
    s[3] = np.nan
    with pytest.raises(ValueError, match="scores"):
        marginals(model, x, s)


@pytest.mark.parametrize("n, root, scale, tol", [(2, 0, 1.0, 1e-9), (4, 0, 1.0, 1e-9),
                                                 (5, 2, 2.0, 1e-9), (5, 3, 5.0, 1e-9),
                                                 (4, 1, 30.0, 1e-6)])
def test_arborescence_matrix_tree_equals_enumeration(n, root, scale, tol):
    """1e-9 for scores of moderate range; the matrix-tree theorem subtracts entries of the
    inverse Laplacian, so that very spread scores (range ~ 100) lose digits."""
    from structlp.structures import Arborescence
    from enum_oracles import heads
    rng = np.random.default_rng(n + root)
    model = Arborescence(root=root)
    x = rng.normal(size=(n, n, 2))
    s = rng.normal(size=model.n_parts(x)) * scale
    M, v = table(model, x, heads(n, root), s)
    log_Z, mu, _ = gibbs(M, v)
    got_Z, got_mu = log_partition(model, x, s)
    assert abs(got_Z - log_Z) <= 1e-9 * max(1, abs(log_Z))
    np.testing.assert_allclose(got_mu, mu, atol=tol, rtol=0)


def test_arborescence_with_extreme_scores_is_exact_or_refused():
    from structlp.exceptions import SolverError
    from structlp.structures import Arborescence
    from enum_oracles import heads
    rng = np.random.default_rng(3)
    model = Arborescence()
    x = rng.normal(size=(4, 4, 1))
    s = rng.normal(size=9) * 1e4
    M, v = table(model, x, heads(4), s)
    log_Z, mu, _ = gibbs(M, v)
    try:
        got_Z, got_mu = log_partition(model, x, s)
    except SolverError as exc:
        assert "lost its precision" in str(exc)
    else:
        assert abs(got_Z - log_Z) <= 1e-9 * abs(log_Z)
        np.testing.assert_allclose(got_mu, mu, atol=1e-6, rtol=0)


def test_graph_labeling_marginals_exact_on_a_narrow_cycle_refused_when_relaxed():
    from structlp.structures import GraphLabeling
    rng = np.random.default_rng(6)
    x = cycle_x(rng, 4)
    model = GraphLabeling(3)
    xc = model.check_x(x)
    s = rng.normal(size=model.n_parts(xc))
    M, v = table(model, xc, labellings(4, 3), s)
    log_Z, mu, _ = gibbs(M, v)
    got_Z, got_mu = log_partition(model, x, s)
    assert abs(got_Z - log_Z) <= 1e-9 * max(1, abs(log_Z))
    np.testing.assert_allclose(got_mu, mu, atol=1e-9, rtol=0)
    with pytest.raises(InvalidParameterError, match="log_partition: this GraphLabeling example "
                       "is a loopy graph.*SparseMAP.*perturb-and-MAP"):
        marginals(GraphLabeling(3, mode="relaxed"), x, s)


@pytest.mark.parametrize("make", [
    lambda: (__import__("structlp").structures.BipartiteMatching(), np.zeros((3, 3, 1)), 9),
    lambda: (__import__("structlp").structures.PerfectMatching(), np.zeros((4, 4, 1)), 6),
    lambda: (__import__("structlp").structures.Matching(), np.zeros((5, 5, 1)), 10),
])
def test_matchings_have_no_exact_marginals(make):
    model, x, L = make()
    with pytest.raises(InvalidParameterError,
                       match="has no exact log-partition function.*#P-hard.*SparseMAP.*"
                             "perturb-and-MAP"):
        marginals(model, x, np.zeros(L))


def test_compiled_sum_product_equals_the_batched_numpy_version(monkeypatch):
    from structlp.graphical import sumproduct
    from structlp.graphical.trees import Forest, check_tree_example, forest_marginals, \
        tree_marginals
    rng = np.random.default_rng(9)
    ex = check_tree_example(tree_x(rng, [3, 0, 0, -1, 1, 1, 3, 6]))
    b, B = rng.normal(size=(8, 4)) * 3, rng.normal(size=(7, 4, 4)) * 3
    want = forest_marginals(Forest([ex]), b, B)
    got = tree_marginals(ex, b, B)
    assert sumproduct.tree_sum_product(ex.order, ex.parents, ex.edge_of, b, B) is not None
    assert abs(got[0] - want[0][0]) <= 1e-12 * abs(want[0][0])
    np.testing.assert_allclose(got[1], want[1], atol=1e-13)
    np.testing.assert_allclose(got[2], want[2], atol=1e-13)
    monkeypatch.setattr(sumproduct, "_kernel", lambda: None)      # numba absent: numpy
    fallback = tree_marginals(ex, b, B)
    np.testing.assert_allclose(fallback[1], got[1], atol=1e-13)
    one = check_tree_example(tree_x(rng, [-1]))                   # a single node
    lz, node, edge = tree_marginals(one, np.array([[0.0, np.log(3.0)]]), np.zeros((0, 2, 2)))
    assert abs(lz - np.log(4.0)) < 1e-12 and edge.shape == (0, 2, 2)
    np.testing.assert_allclose(node, [[0.25, 0.75]])
