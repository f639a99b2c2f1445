"""Independent oracles for the AGM tests: brute force and random tree data."""

import itertools

import numpy as np


def random_parents(rng, n, chain=False):
    if chain:
        return np.arange(-1, n - 1)
    par = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    perm = rng.permutation(n)
    inv = np.argsort(perm)
    return np.array([-1 if par[perm[j]] < 0 else inv[par[perm[j]]] for j in range(n)])


def random_tree_data(rng, m, n, k=3, d_v=3, d_e=2, chain=False):
    X, Y = [], []
    for _ in range(m):
        X.append({"node_features": rng.normal(size=(n, d_v)),
                  "edge_features": rng.normal(size=(n - 1, d_e)),
                  "parents": random_parents(rng, n, chain)})
        Y.append(rng.integers(0, k, size=n))
    return X, Y


def brute_force_argmax(ex, b, B):
    """argmax_y score over all k^n labellings."""
    from structlp.graphical.trees import score
    n, k = b.shape
    best, arg = -np.inf, None
    for y in itertools.product(range(k), repeat=n):
        s = score(ex, b, B, np.array(y))
        if s > best:
            best, arg = s, np.array(y)
    return arg, best


def game_value_dual_scipy(a, L):
    """The predictor's LP min_p max_b a_b + (L^T p)_b, by scipy's simplex-free HiGHS IPM."""
    from scipy.optimize import linprog
    k = len(a)
    c = np.concatenate([np.zeros(k), [1.0]])
    res = linprog(c, A_ub=np.hstack([L.T, -np.ones((k, 1))]), b_ub=-a,
                  A_eq=np.concatenate([np.ones(k), [0.0]])[None, :], b_eq=[1.0],
                  bounds=[(0, None)] * k + [(None, None)], method="highs-ipm")
    return res.fun


def squared_chain_case(seed):
    """A random chain (n = 8..19) with node/edge potentials and normalized position weights:
    the squared-loss case of the emotion experiment, for the Eq. 7 step-rule checks."""
    from structlp.agm import check_tree_example
    from structlp.graphical.trees import node_weights_of
    r = np.random.default_rng(seed)
    n = int(r.integers(8, 20))
    ex = check_tree_example({"node_features": r.normal(size=(n, 2)),
                             "edge_features": r.normal(size=(n - 1, 2)),
                             "parents": np.arange(-1, n - 1)})
    w = node_weights_of(ex, "position", True)
    sc = r.choice([0.05, 0.2, 1.0])
    return ex, r.normal(size=(n, 3)) * sc, r.normal(size=(n - 1, 3, 3)) * sc, w
