"""k_best against the enumerated top k (scores to 1e-9, ties in any order) on chains, trees,
junction trees, assignments, b-matchings (LP fallback), arborescences and a user-declared
model (Lawler-Murty over its LP); refusals."""

import cvxpy as cp
import numpy as np
import pytest

from structlp import StructuredModel
from structlp.exceptions import FractionalSolutionError, InvalidInputError, InvalidParameterError
from structlp.graphical.trees import chain
from structlp.inference import k_best
from structlp.structures import (Arborescence, BipartiteMatching, GraphLabeling,
                                 JunctionTreeLabeling, TreeLabeling)

from enum_oracles import assignments, heads, labellings, table
from test_marginals import cycle_x, tree_x


def check_top_k(model, x, s, outputs, k):
    """k_best's list is a top-k list of the enumeration: values equal the sorted top k to
    1e-9, each output's own score is its value, outputs distinct."""
    xc = model.check_x(x)
    _, v = table(model, xc, outputs, s)
    Y, values = k_best(model, x, s, k)
    top = np.sort(v)[::-1][:k]
    assert len(Y) == len(values) == min(k, len(outputs))
    np.testing.assert_allclose(values, top, atol=1e-9, rtol=0)
    assert np.all(np.diff(values) <= 1e-12)
    M = np.array([model.encode(xc, y) for y in Y])
    np.testing.assert_allclose(M @ s, values, atol=1e-9, rtol=0)
    assert len({m.tobytes() for m in M}) == len(Y)          # distinct outputs
    return Y, values


class Choose2(StructuredModel):
    """A user's model: choose exactly 2 of L items (declared by cvxpy constraints only)."""

    def __init__(self, L=5):
        self.L = L

    def n_parts(self, x):
        return self.L

    def features(self, x):
        return np.asarray(x, dtype=float)

    def constraints(self, x, mu):
        return [cp.sum(mu) == 2, mu >= 0, mu <= 1]


CASES = [
    ("chain", lambda rng: (TreeLabeling(3), chain(rng.normal(size=(4, 2)),
                                                  rng.normal(size=(3, 2)))), labellings(4, 3)),
    ("tree", lambda rng: (TreeLabeling(2), tree_x(rng, [1, -1, 1, 0, 0, 2])), labellings(6, 2)),
    ("junction", lambda rng: (JunctionTreeLabeling(2), cycle_x(rng, 5)), labellings(5, 2)),
    ("assignment", lambda rng: (BipartiteMatching(), rng.normal(size=(4, 3, 1))),
     assignments(4, 3)),
    ("arborescence", lambda rng: (Arborescence(root=2), rng.normal(size=(5, 5, 1))),
     heads(5, 2)),
]


@pytest.mark.parametrize("k", [1, 7, 40])
@pytest.mark.parametrize("name, make, outputs", CASES, ids=[c[0] for c in CASES])
def test_k_best_equals_enumerated_top_k(name, make, outputs, k):
    rng = np.random.default_rng(k)
    model, x = make(rng)
    s = rng.normal(size=model.n_parts(model.check_x(x)))
    check_top_k(model, x, s, outputs, k)


def test_k_larger_than_the_number_of_outputs_lists_them_all():
    rng = np.random.default_rng(0)
    model, x = TreeLabeling(2), chain(rng.normal(size=(3, 1)), rng.normal(size=(2, 1)))
    s = rng.normal(size=14)
    Y, values = check_top_k(model, x, s, labellings(3, 2), 100)
    assert len(Y) == 8


def test_ties_in_any_order():
    model, x = TreeLabeling(2), chain(np.zeros((3, 1)), np.zeros((2, 1)))
    Y, values = k_best(model, x, np.zeros(14), 5)
    assert values.tolist() == [0.0] * 5 and len({y.tobytes() for y in Y}) == 5


def test_user_declared_model_through_lawler_murty_lp():
    rng = np.random.default_rng(5)
    model = Choose2(5)
    outs = [np.array(v, dtype=float) for v in np.eye(5)[[(i, j) for i in range(5)
                                                        for j in range(i + 1, 5)]].sum(axis=1)]
    x = rng.normal(size=(5, 1))
    s = rng.normal(size=5)
    check_top_k(model, x, s, outs, 6)
    check_top_k(model, x, s, outs, 10)


def test_b_matching_through_lawler_murty_lp():
    import itertools
    rng = np.random.default_rng(2)
    model = BipartiteMatching(R=1, P=2)                 # each row may take 2 columns
    x = rng.normal(size=(2, 3, 1))
    outs = []
    for rows in itertools.product(range(2), repeat=3):
        y = np.zeros((2, 3), dtype=int)
        y[list(rows), np.arange(3)] = 1
        if y.sum(axis=1).max() <= 2:
            outs.append(y)
    check_top_k(model, x, rng.normal(size=6), outs, 5)


def test_lp_fallback_refuses_a_fractional_polytope():
    rng = np.random.default_rng(0)
    model = GraphLabeling(2, mode="relaxed")      # the local polytope of a cycle: loose
    x = cycle_x(rng, 3)
    xc = model.check_x(x)
    L = model.n_parts(xc)
    s = np.zeros(L)
    # frustrated cycle: every edge prefers different labels, so the LP goes fractional
    s[2 * 3:] = np.tile([-1.0, 1.0, 1.0, -1.0], 3) * 5
    with pytest.raises(FractionalSolutionError,
                       match="k_best.*not integral.*k_best\\(x, scores, k\\)"):
        k_best(model, x, s, 3)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3", None])
def test_bad_k_is_refused(bad):
    model, x = TreeLabeling(2), chain(np.zeros((2, 1)), np.zeros((1, 1)))
    with pytest.raises(InvalidParameterError, match="'k' parameter of k_best must be an int >= 1"):
        k_best(model, x, np.zeros(8), bad)


def test_bad_scores_are_refused():
    model, x = TreeLabeling(2), chain(np.zeros((2, 1)), np.zeros((1, 1)))
    with pytest.raises(InvalidInputError, match=r"shape \(8,\).*TreeLabeling"):
        k_best(model, x, np.zeros(9), 2)
    # integer scores are numbers here (the layers refuse them: no gradient of an int tensor)
    assert len(k_best(model, x, np.arange(8), 2)) == 2
    with pytest.raises(ValueError, match="scores"):
        k_best(model, x, np.full(8, np.nan), 2)


def test_graph_labeling_exact_mode_on_a_cycle():
    rng = np.random.default_rng(4)
    model = GraphLabeling(2)                      # auto: a 5-cycle gets a junction tree
    x = cycle_x(rng, 5)
    s = rng.normal(size=model.n_parts(model.check_x(x)))
    check_top_k(model, x, s, labellings(5, 2), 9)


def test_spanning_trees_through_the_lp_of_an_extended_formulation():
    """SpanningTree has no k_best hook: Lawler-Murty over its rooted-flow polytope (parts
    plus auxiliary flows) against every spanning tree of K4 (16)."""
    import itertools

    import networkx as nx
    from structlp.structures import SpanningTree
    rng = np.random.default_rng(8)
    model = SpanningTree()
    x = rng.normal(size=(4, 4, 1))
    x = (x + x.transpose(1, 0, 2)) / 2
    xc = model.check_x(x)
    L = model.n_parts(xc)
    s = rng.normal(size=L)
    trees = []
    for on in itertools.combinations(range(L), 3):
        mu = np.zeros(L)
        mu[list(on)] = 1
        if nx.is_tree(nx.from_numpy_array(np.asarray(model.decode(xc, mu)))):
            trees.append(mu)
    assert len(trees) == 16
    v = np.sort(np.array(trees) @ s)[::-1]
    Y, values = k_best(model, x, s, 6)
    np.testing.assert_allclose(values, v[:6], atol=1e-9, rtol=0)
    M = np.array([model.encode(xc, y) for y in Y])
    np.testing.assert_allclose(M @ s, values, atol=1e-9, rtol=0)


def all_matchings(n, perfect):
    import itertools
    edges = [(a, b) for a in range(n) for b in range(a + 1, n)]
    out = []
    for r in range(n // 2 + 1):
        for sub in itertools.combinations(edges, r):
            nodes = [v for e in sub for v in e]
            if len(set(nodes)) < len(nodes) or (perfect and len(nodes) != n):
                continue
            A = np.zeros((n, n), dtype=int)
            for a, b in sub:
                A[a, b] = A[b, a] = 1
            out.append(A)
    return out


@pytest.mark.parametrize("perfect, n", [(True, 4), (True, 6), (False, 5)])
def test_general_matchings_by_lawler_over_blossom(perfect, n):
    from structlp.structures import Matching, PerfectMatching
    rng = np.random.default_rng(n)
    model = PerfectMatching() if perfect else Matching()
    x = rng.normal(size=(n, n, 1))
    x = (x + x.transpose(1, 0, 2)) / 2
    s = rng.normal(size=model.n_parts(model.check_x(x)))
    check_top_k(model, x, s, all_matchings(n, perfect), 8)


def test_a_model_without_polytope_or_hook_is_refused_clearly():
    from structlp.exceptions import DeclarationError

    class NoPolytope(StructuredModel):
        def n_parts(self, x):
            return 3

        def features(self, x):
            return np.eye(3)

    with pytest.raises(DeclarationError, match="k_best: NoPolytope defines no k_best.*"
                                               "needs an output polytope"):
        k_best(NoPolytope(), None, np.zeros(3), 2)


def test_a_user_hook_that_breaks_its_contract_is_named():
    from structlp.exceptions import OracleError
    from structlp.inference import log_partition, sample

    class Broken(Choose2):
        def k_best(self, x, scores, k):
            return [np.zeros(5), np.ones(5)], np.array([1.0, 2.0])     # increasing

        def log_partition(self, x, scores):
            return 0.0, np.zeros(4)                                    # wrong length

        def sample(self, x, scores, n, rng):
            return [np.zeros(5)] * (n - 1)

    model, x, s = Broken(5), np.zeros((5, 1)), np.zeros(5)
    with pytest.raises(OracleError, match=r"Broken.k_best\(x, scores, k\) must return"):
        k_best(model, x, s, 2)
    with pytest.raises(OracleError, match=r"Broken.log_partition\(x, scores\) must return.*"
                                          r"shape \(5,\)"):
        log_partition(model, x, s)
    with pytest.raises(OracleError, match="must return n = 3 outputs; got 2"):
        sample(model, x, s, n=3)
