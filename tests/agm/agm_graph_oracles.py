"""Independent oracles for the junction-tree AGM tests: enumeration over all k^n labellings."""

import itertools

import cvxpy as cp
import numpy as np
from scipy.optimize import linprog


def cycle(n):
    return np.array([(i, (i + 1) % n) for i in range(n)])


def grid(rows, cols):
    e = []
    for i in range(rows):
        for j in range(cols):
            v = i * cols + j
            if j + 1 < cols:
                e.append((v, v + 1))
            if i + 1 < rows:
                e.append((v, v + cols))
    return np.array(e)


def skip_chain_edges(n, skip=2):
    return np.array([(t, t + 1) for t in range(n - 1)] + [(t, t + skip) for t in range(n - skip)])


#: The small loopy graphs of the oracles, with their true treewidth.
LOOPY = {"cycle4": (cycle(4), 2), "cycle5": (cycle(5), 2), "grid2x3": (grid(2, 3), 2),
         "skip5": (skip_chain_edges(5), 2)}


def random_graph_data(rng, edges, m, k=3, d_v=3, d_e=2):
    n = int(np.max(edges)) + 1
    X = [{"node_features": rng.normal(size=(n, d_v)), "edges": edges,
          "edge_features": rng.normal(size=(len(edges), d_e))} for _ in range(m)]
    return X, [rng.integers(0, k, size=n) for _ in range(m)]


def exact_treewidth(n, edges):
    """Treewidth by trying every elimination ordering (n <= 8)."""
    best = n - 1
    for perm in itertools.permutations(range(n)):
        adj = {v: set() for v in range(n)}
        for u, v in edges:
            adj[u].add(v); adj[v].add(u)
        width = 0
        for v in perm:
            nb = adj.pop(v)
            width = max(width, len(nb))
            for a in nb:
                adj[a] |= nb - {a}
                adj[a].discard(v)
        best = min(best, width)
    return best


def labellings(n, k):
    return np.array(list(itertools.product(range(k), repeat=n)), dtype=np.int64)


def joint_features(x, k):
    """Phi(x, y) for every labelling y: rows (k^n, k d_v + k^2 d_e), written out by loops."""
    V, Ef, E = (np.asarray(x[key], dtype=float) for key in ("node_features", "edge_features",
                                                             "edges"))
    E = E.astype(int)
    n, d_v = V.shape
    d_e = Ef.shape[1]
    Ys = labellings(n, k)
    out = np.zeros((len(Ys), k * d_v + k * k * d_e))
    for r, y in enumerate(Ys):
        for i in range(n):
            out[r, y[i] * d_v:(y[i] + 1) * d_v] += V[i]
        for e, (u, v) in enumerate(E):
            c = k * d_v + (y[u] * k + y[v]) * d_e
            out[r, c:c + d_e] += Ef[e]
    return Ys, out


def joint_loss(Ys, L, w):
    """loss[yhat, ycheck] = sum_i w_i L[yhat_i, ycheck_i] over all pairs of labellings."""
    return np.einsum("i,pqi->pq", w, L[Ys[:, None, :], Ys[None, :, :]])


def joint_game_value(s, Lj):
    """max_{P in simplex (k^n)} min_{Phat in simplex} s.P + Phat^T Lj P: the adversary's
    game over the full joint distributions, as one LP (variables P, t)."""
    N = len(s)
    c = -np.concatenate([s, [1.0]])
    A_ub = np.hstack([-Lj, np.ones((N, 1))])           # t <= (Lj P)_yhat for every yhat
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(N),
                  A_eq=np.concatenate([np.ones(N), [0.0]])[None, :], b_eq=[1.0],
                  bounds=[(0, None)] * N + [(None, None)], method="highs")
    assert res.status == 0
    return -res.fun


def joint_objective(X, Y, theta, k, L, reg, weights=None):
    """The AGM objective by the joint game of every example."""
    total = 0.0
    for i, (x, y) in enumerate(zip(X, Y)):
        Ys, F = joint_features(x, k)
        w = np.ones(len(y)) if weights is None else weights[i]
        idx = int(np.flatnonzero((Ys == y).all(axis=1))[0])
        total += joint_game_value(F @ theta, joint_loss(Ys, L, w)) - F[idx] @ theta
    return 0.5 * reg * theta @ theta + total / len(X)


def joint_qp_objective(X, Y, k, L, reg):
    """min_theta of :func:`joint_objective`, each joint game by its LP dual (the predictor's
    joint distribution lam): nu >= F theta + Lj^T lam, lam in the simplex."""
    rows = [joint_features(x, k) for x in X]
    D = rows[0][1].shape[1]
    theta = cp.Variable(D)
    terms, cons = [], []
    for (Ys, F), y in zip(rows, Y):
        Lj = joint_loss(Ys, L, np.ones(len(y)))
        lam = cp.Variable(len(Ys), nonneg=True)
        nu = cp.Variable()
        idx = int(np.flatnonzero((Ys == y).all(axis=1))[0])
        cons += [nu >= F @ theta + Lj.T @ lam, cp.sum(lam) == 1]
        terms.append(nu - F[idx] @ theta)
    prob = cp.Problem(cp.Minimize(0.5 * reg * cp.sum_squares(theta) + sum(terms) / len(X)), cons)
    prob.solve(solver="ECOS")
    return prob.value
