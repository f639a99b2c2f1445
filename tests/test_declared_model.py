"""Structured models declared only here, with cvxpy constraints, train and predict
correctly without touching structlp/."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from oracles import brute_force_hinge
from structlp import FractionalSolutionError, MaxMarginLearner, StructuredModel
from structlp.structures import BipartiteMatching


class ChooseK(StructuredModel):
    """Choose exactly k of n items; x is (n, d) item features."""

    def __init__(self, k=2):
        self.k = k

    def n_parts(self, x):
        return x.shape[0]

    def features(self, x):
        return x

    def constraints(self, x, mu):
        return [cp.sum(mu) == self.k, mu >= 0, mu <= 1]


class WeightedChooseK(ChooseK):
    """Same output space; missing a true item costs 1 + its index, a false pick 0.5."""

    def loss(self, x, y_true, mu):
        y_true = np.asarray(y_true, dtype=float)
        cost = 1.0 + np.arange(len(y_true))
        return cost @ y_true - (cost * y_true) @ mu + 0.5 * (1 - y_true) @ mu


class DeclaredMatching(StructuredModel):
    """A perfect bipartite matching declared with a 2-D view of mu."""

    def n_parts(self, x):
        return x.shape[0] * x.shape[1]

    def features(self, x):
        return x.reshape(-1, x.shape[2])

    def constraints(self, x, mu):
        M = cp.reshape(mu, x.shape[:2], order="C")
        return [cp.sum(M, axis=0) == 1, cp.sum(M, axis=1) == 1, mu >= 0, mu <= 1]

    def encode(self, x, y):
        return np.asarray(y, dtype=float).ravel()

    def decode(self, x, mu):
        return np.rint(mu).astype(int).reshape(x.shape[:2])


def top_k(scores, k):
    y = np.zeros(len(scores), dtype=int)
    y[np.argsort(-scores)[:k]] = 1
    return y


def all_k_subsets(n, k):
    out = []
    for idx in itertools.combinations(range(n), k):
        y = np.zeros(n, dtype=int)
        y[list(idx)] = 1
        out.append(y)
    return out


@pytest.mark.parametrize("model_cls", [ChooseK, WeightedChooseK])
def test_choose_k_trains_and_predicts(model_cls, rng):
    n, d, k = 6, 4, 2
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, d)) for _ in range(15)]
    Y = [top_k(x @ w0, k) for x in X]
    model = model_cls(k)
    learner = MaxMarginLearner(model, C=100.0).fit(X, Y)
    for y, p in zip(Y, learner.predict(X)):
        np.testing.assert_array_equal(p, y)
    Xt = [rng.normal(size=(n, d)) for _ in range(10)]
    for x, p in zip(Xt, learner.predict(Xt)):
        np.testing.assert_array_equal(p, top_k(x @ learner.coef_, k))


def test_declared_loss_is_extracted_and_used(rng):
    n, d, k = 5, 3, 2
    model = WeightedChooseK(k)
    X = [rng.normal(size=(n, d)) for _ in range(8)]
    Y = [all_k_subsets(n, k)[i] for i in rng.integers(10, size=8)]
    c, dd = model.loss_coefficients(X[0], Y[0])
    outputs = all_k_subsets(n, k)
    for o in outputs:  # the extracted affine loss equals the declared formula
        cost = 1.0 + np.arange(n)
        ref = cost @ Y[0] - (cost * Y[0]) @ o + 0.5 * (1 - Y[0]) @ o
        assert np.isclose(dd + c @ o, ref)
    learner = MaxMarginLearner(model, C=1.0).fit(X, Y)
    enum = [brute_force_hinge(x, y, learner.coef_, outputs,
                              lambda o, x=x, y=y: model.task_loss(x, y, o))
            for x, y in zip(X, Y)]
    np.testing.assert_allclose(learner.slack_, enum, rtol=1e-6, atol=1e-6)


def test_declared_matching_equals_builtin(rng):
    from scipy.optimize import linear_sum_assignment
    w0 = rng.normal(size=3)
    X = [rng.normal(size=(4, 4, 3)) for _ in range(8)]
    Y = []
    for i, x in enumerate(X):  # planted assignments, every third one shuffled
        r, c = linear_sum_assignment(x @ w0, maximize=True)
        y = np.zeros((4, 4), dtype=int)
        y[r, c] = 1
        Y.append(y[rng.permutation(4)] if i % 3 == 0 else y)
    ours = MaxMarginLearner(DeclaredMatching(), C=1.0).fit(X, Y)
    builtin = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    assert np.isclose(ours.objective_, builtin.objective_, rtol=1e-6)
    np.testing.assert_allclose(ours.coef_, builtin.coef_, atol=1e-6)
    for a, b in zip(ours.predict(X), builtin.predict(X)):
        np.testing.assert_array_equal(a, b)


class FractionalTriangle(StructuredModel):
    """Pairs of a triangle with mu_a + mu_b <= 1: the LP optimum can be (1/2, 1/2, 1/2)."""

    def n_parts(self, x):
        return 3

    def features(self, x):
        return x

    def constraints(self, x, mu):
        return [mu[0] + mu[1] <= 1, mu[1] + mu[2] <= 1, mu[0] + mu[2] <= 1, mu >= 0, mu <= 1]


def test_non_integral_polytope_is_not_rounded_silently():
    learner = MaxMarginLearner(FractionalTriangle(), C=1.0)
    learner.fit([np.eye(3)], [np.array([1, 0, 0])])
    learner.coef_ = np.ones(3)  # all three parts equally good: the LP picks (1/2, 1/2, 1/2)
    with pytest.raises(FractionalSolutionError, match="not integral"):
        learner.predict([np.eye(3)])
