"""Arborescence (dependency parsing) and auxiliary variables declared in constraints()."""

import cvxpy as cp
import numpy as np
import pytest

from oracles import enumerate_arborescences, enumerated_qp
from structlp import FrankWolfeLearner, MaxMarginLearner, StructuredModel
from structlp.datasets.synthetic import make_dependency_parsing
from structlp.exceptions import (DeclarationError, InvalidInputError, InvalidOutputError,
                                 InvalidParameterError)
from structlp.inference import solve_stacked_lp
from structlp.structures.arborescence import Arborescence, arc_index, flow_polytope


@pytest.mark.parametrize("n, root", [(2, 0), (3, 1), (4, 0), (5, 2)])
def test_enumeration_matches_cayley_count(n, root):
    # rooted spanning arborescences of the complete digraph: n^(n-2) (Cayley)
    assert len(enumerate_arborescences(n, root)) == n ** (n - 2)


@pytest.mark.parametrize("n, root", [(3, 0), (4, 1), (5, 0)])
def test_inference_and_lp_equal_brute_force(n, root, rng):
    model = Arborescence(root=root)
    trees = enumerate_arborescences(n, root)
    x = rng.normal(size=(n, n, 2))
    P = flow_polytope(n, root)
    for _ in range(10):
        s = rng.normal(size=model.n_parts(x))
        best = max(trees, key=lambda h: s @ model.encode(x, h))
        np.testing.assert_array_equal(model.inference(x, s), best)
        lp = solve_stacked_lp([P], [s])[0]          # the flow polytope is integral
        np.testing.assert_allclose(lp, model.encode(x, best), atol=1e-7)


def test_every_tree_lifts_and_non_trees_are_refused(rng):
    n = 4
    model = Arborescence()
    x = rng.normal(size=(n, n, 1))
    P = model.polytope(x)
    for h in enumerate_arborescences(n):
        mu = model.encode(x, h)
        assert P.contains(P.lift(mu))
        assert P._solve_lift(mu) is not None
    # a cycle 1 -> 2 -> 1 with 3 under the root: in-degrees are right, flows impossible
    _, _, index = arc_index(n, 0)
    mu = np.zeros(model.n_parts(x))
    mu[[index[2, 1], index[1, 2], index[0, 3]]] = 1
    assert P.lift(mu) is None and P._solve_lift(mu) is None
    with pytest.raises(InvalidOutputError, match="extended polytope"):
        P.check_output(mu)


def _exact_qp(model, X, Y, C):
    n = X[0].shape[0]
    outs = [np.array([model.encode(x, h) for h in enumerate_arborescences(n)]) for x in X]
    mts = [model.encode(x, y) for x, y in zip(X, Y)]
    losses = [o @ -mt + mt.sum() for o, mt in zip(outs, mts)]
    return enumerated_qp([model.features(x) for x in X], mts, outs, losses, C)


def test_joint_qp_equals_enumerated_qp_and_frank_wolfe_within_its_gap():
    X, Y, w, model = make_dependency_parsing(n_samples=6, n_words=5, n_features=3,
                                             noise=1.0, random_state=0)
    exact = _exact_qp(model, X, Y, C=1.0)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    np.testing.assert_allclose(qp.objective_, exact, rtol=1e-6)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-4, max_iter=2000, random_state=0).fit(X, Y)
    assert fw.converged_
    assert exact * (1 - 1e-6) <= fw.objective_ <= exact + fw.duality_gap_ + 1e-7


class DeclaredArborescence(StructuredModel):
    """The arborescence declared by a user: multi-commodity flows as cvxpy variables in
    constraints(), no lift (outputs are completed by structlp's feasibility LP)."""

    def n_parts(self, x):
        return (x.shape[0] - 1) ** 2

    def features(self, x):
        h, m, _ = arc_index(x.shape[0], 0)
        return x[h, m]

    def constraints(self, x, mu):
        n = x.shape[0]
        heads, mods, _ = arc_index(n, 0)
        L = len(heads)
        f = cp.Variable((n - 1, L), nonneg=True, name="flow")
        cons = [mu >= 0, mu <= 1, f <= 1]
        for m in range(1, n):
            cons.append(cp.sum(mu[mods == m]) == 1)
        for k in range(1, n):
            cons.append(f[k - 1, :] <= mu)
            for i in range(n):
                net = cp.sum(f[k - 1, heads == i]) - cp.sum(f[k - 1, mods == i])
                cons.append(net == (i == 0) - (i == k))
        return cons

    def encode(self, x, y):
        return Arborescence().encode(x, y)

    def decode(self, x, mu):
        return Arborescence().decode(x, mu)

    def polytope_key(self, x):
        return x.shape[0]


def test_user_declared_flow_variables_give_the_same_objective():
    X, Y, _, model = make_dependency_parsing(n_samples=5, n_words=4, n_features=3,
                                             noise=1.0, random_state=1)
    declared = DeclaredArborescence()
    P = declared.polytope(X[0])
    assert (P.n_parts, P.n_aux) == (9, 27)
    builtin = MaxMarginLearner(model, C=1.0).fit(X, Y)
    user = MaxMarginLearner(declared, C=1.0).fit(X, Y)
    np.testing.assert_allclose(user.objective_, builtin.objective_, rtol=1e-6)
    for a, b in zip(user.predict(X), builtin.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_declared_output_without_auxiliary_values_is_refused():
    X, Y, _, _ = make_dependency_parsing(n_samples=2, n_words=4, random_state=2)
    bad = np.array([-1, 2, 1, 0])                 # 1 <-> 2 is a cycle
    with pytest.raises(InvalidOutputError, match="Y\\[1\\].*no auxiliary variables"):
        MaxMarginLearner(_NoTreeCheck(), C=1.0).fit(X, [Y[0], bad])


class _NoTreeCheck(DeclaredArborescence):
    def encode(self, x, y):              # encodes any head vector, trees or not
        _, _, index = arc_index(x.shape[0], 0)
        mu = np.zeros(self.n_parts(x))
        mu[index[np.asarray(y)[1:], np.arange(1, x.shape[0])]] = 1
        return mu


def test_unbounded_auxiliary_variable_is_named():
    class Unbounded(DeclaredArborescence):
        def constraints(self, x, mu):
            g = cp.Variable(name="slack")
            return super().constraints(x, mu) + [cp.sum(mu) + g >= 0]

    X, Y, _, _ = make_dependency_parsing(n_samples=2, n_words=3, random_state=0)
    with pytest.raises(DeclarationError, match="auxiliary variable 'slack'"):
        MaxMarginLearner(Unbounded()).fit(X, Y)


@pytest.mark.parametrize("y, match", [
    (np.array([-1, 0, 0]), "shape \\(4,\\)"),
    (np.array([0, 0, 1, 2]), "root\\) must be -1"),
    (np.array([-1, 1, 0, 0]), "y\\[1\\] = 1 is not a head"),
    (np.array([-1, 0, 7, 0]), "y\\[2\\] = 7 is not a head"),
    (np.array([-1, 2, 3, 1]), "cycle"),
    (np.array([-1, 0.5, 0, 0]), "integer heads"),
])
def test_bad_head_vectors(y, match, rng):
    with pytest.raises(InvalidOutputError, match=match):
        Arborescence().encode(rng.normal(size=(4, 4, 1)), y)


def test_bad_examples_and_root(rng):
    with pytest.raises(InvalidInputError, match="x must be an array \\(n, n, d\\)"):
        Arborescence().check_x(rng.normal(size=(3, 4, 1)))
    with pytest.raises(InvalidParameterError, match="'root' parameter"):
        Arborescence(root=5).check_x(rng.normal(size=(3, 3, 1)))


@pytest.mark.parametrize("fn", [arc_index, flow_polytope])
@pytest.mark.parametrize("n, root, name", [(-1, 0, "n"), (2.5, 0, "n"), ("3", 0, "n"),
                                           ([3], 0, "n"), (3, 3, "root"), (3, -1, "root"),
                                           (3, [0], "root")])
def test_arc_index_and_flow_polytope_refuse_bad_sizes(fn, n, root, name):
    # found by the fuzz suite: a root outside 0..n-1 gave every off-diagonal arc silently,
    # and non-integer sizes failed inside numpy (or lru_cache) without naming the argument
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        fn(n, root)


def test_flow_polytope_refuses_a_single_word():
    with pytest.raises(InvalidParameterError, match="'n'"):
        flow_polytope(1, 0)
    assert arc_index(1, 0)[2].shape == (1, 1)


def test_check_heads_refuses_a_ragged_head_vector():
    # found by the fuzz suite: numpy's "inhomogeneous shape" ValueError did not name y
    from structlp.structures.arborescence import check_heads
    with pytest.raises(InvalidOutputError, match="y must be a head vector"):
        check_heads([[-1], [0, 1]], 2, 0)
