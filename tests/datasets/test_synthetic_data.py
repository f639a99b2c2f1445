"""structlp.datasets.make_*: the outputs are the best ones under the planted scores.

Oracles: scipy's linear_sum_assignment, networkx's maximum spanning tree and maximum-weight
matchings, and brute-force enumeration (tree labellings, sequences, b-matchings).
"""

import itertools

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from structlp import InvalidParameterError
from structlp.datasets import (make_bipartite_matching, make_matching, make_perfect_matching,
                               make_sequences, make_spanning_tree, make_tree_labeling)


def test_assignments_are_the_hungarian_optimum_of_the_planted_scores():
    X, Y, w, model = make_bipartite_matching(n_samples=5, n_rows=5, n_features=3, random_state=1)
    assert np.isclose(np.linalg.norm(w), 1.0) and (model.R, model.P) == (1, 1)
    for x, y in zip(X, Y):
        r, c = linear_sum_assignment(x @ w, maximize=True)
        best = np.zeros((5, 5), dtype=int)
        best[r, c] = 1
        assert np.array_equal(y, best)


def test_b_matchings_are_the_brute_force_optimum():
    X, Y, w, model = make_bipartite_matching(n_samples=3, n_rows=3, n_cols=2, R=2, P=2,
                                             n_features=2, random_state=2)
    for x, y in zip(X, Y):
        s = x @ w
        best, arg = -np.inf, None
        for bits in itertools.product([0, 1], repeat=6):
            cand = np.array(bits).reshape(3, 2)
            if (cand.sum(axis=0) == 2).all() and (cand.sum(axis=1) <= 2).all():
                if (v := (s * cand).sum()) > best:
                    best, arg = v, cand
        assert np.array_equal(y, arg)


def _graph(x, w):
    g = nx.Graph()
    n = len(x)
    for a in range(n):
        for b in range(a + 1, n):
            g.add_edge(a, b, weight=float(x[a, b] @ w))
    return g


def _adjacency(edges, n):
    y = np.zeros((n, n), dtype=int)
    for a, b in edges:
        y[a, b] = y[b, a] = 1
    return y


def test_graph_outputs_match_networkx():
    X, Y, w, _ = make_spanning_tree(n_samples=4, n_nodes=6, random_state=3)
    for x, y in zip(X, Y):
        assert np.allclose(x, x.transpose(1, 0, 2))
        t = nx.maximum_spanning_tree(_graph(x, w))
        assert np.array_equal(y, _adjacency(t.edges, 6))
    X, Y, w, _ = make_perfect_matching(n_samples=4, n_nodes=6, random_state=4)
    for x, y in zip(X, Y):
        m = nx.max_weight_matching(_graph(x, w), maxcardinality=True)
        assert np.array_equal(y, _adjacency(m, 6))
    X, Y, w, _ = make_matching(n_samples=4, n_nodes=7, random_state=5)
    for x, y in zip(X, Y):
        m = nx.max_weight_matching(_graph(x, w))
        assert np.array_equal(y, _adjacency(m, 7))


@pytest.mark.parametrize("tree", ["chain", "random"])
def test_tree_labellings_are_the_brute_force_optimum(tree):
    X, Y, w, model = make_tree_labeling(n_samples=3, n_nodes=4, n_labels=3, tree=tree,
                                        random_state=6)
    for x, y in zip(X, Y):
        cx = model.check_x(x)
        s = np.asarray(model.features(cx) @ w).ravel()
        best = max(itertools.product(range(3), repeat=4),
                   key=lambda lab: s @ model.encode(cx, np.array(lab)))
        assert np.array_equal(y, best)
        parents = x["parents"]
        assert parents[0] == -1 and all(0 <= parents[i] < i for i in range(1, 4))


def test_sequences_are_the_brute_force_optimum():
    X, Y, w, feats = make_sequences(n_samples=3, length=4, n_labels=2, n_inputs=3, window=1,
                                    random_state=7)
    for x, y in zip(X, Y):
        best = max(itertools.product(range(2), repeat=4),
                   key=lambda lab: w @ feats.joint_feature(x, np.array(lab)))
        assert np.array_equal(y, best)


def test_seeded_reproducible_and_noise_changes_the_labels():
    a = make_bipartite_matching(n_samples=10, random_state=0)
    b = make_bipartite_matching(n_samples=10, random_state=0)
    assert all(np.array_equal(u, v) for u, v in zip(a[0] + a[1], b[0] + b[1]))
    clean = make_bipartite_matching(n_samples=30, random_state=0)
    noisy = make_bipartite_matching(n_samples=30, noise=3.0, random_state=0)
    assert all(np.array_equal(u, v) for u, v in zip(clean[0], noisy[0]))   # same features
    assert any(not np.array_equal(u, v) for u, v in zip(clean[1], noisy[1]))


@pytest.mark.parametrize("call, match", [
    (lambda: make_bipartite_matching(n_samples=0), "'n_samples'"),
    (lambda: make_bipartite_matching(noise=-1), "'noise'"),
    (lambda: make_bipartite_matching(random_state=-1), "'random_state'"),
    (lambda: make_bipartite_matching(n_rows=2, n_cols=5, R=1, P=2), "No assignment exists"),
    (lambda: make_perfect_matching(n_nodes=5), "must be even"),
    (lambda: make_tree_labeling(tree="star"), "'tree'"),
    (lambda: make_sequences(n_labels=1), "n_labels"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
