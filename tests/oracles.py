"""Independent oracles for the tests: brute-force enumeration."""

import itertools

import cvxpy as cp
import numpy as np

from structlp import StructuredModel


class ChooseK(StructuredModel):
    """Choose exactly k of n items (x: (n, d) item features), declared by its constraints
    alone: its oracle is the inference LP (the StructuredModel docstring's example without
    its decoder)."""

    def __init__(self, k=2):
        self.k = k

    def n_parts(self, x):
        return x.shape[0]

    def features(self, x):
        return x

    def constraints(self, x, mu):
        return [cp.sum(mu) == self.k, mu >= 0, mu <= 1]

    def polytope_key(self, x):
        return x.shape[0]


class ChooseKDecoded(ChooseK):
    """ChooseK with its exact decoder (the k best scores, ties to the first)."""

    def inference(self, x, scores):
        y = np.zeros(len(scores), dtype=int)
        y[np.argsort(-scores, kind="stable")[:self.k]] = 1
        return y


def enumerate_bmatchings(n_rows, n_cols, R, P):
    """Every 0/1 (n_rows, n_cols) matrix with column sums R and row sums <= P."""
    cols = [np.array(c) for c in itertools.combinations(range(n_rows), R)]
    out = []
    for choice in itertools.product(cols, repeat=n_cols):
        y = np.zeros((n_rows, n_cols), dtype=int)
        for k, rows in enumerate(choice):
            y[rows, k] = 1
        if np.all(y.sum(axis=1) <= P):
            out.append(y)
    return out


def brute_force_hinge(x, y_true, w, outputs, loss):
    """max_y [w.f(y) + loss(y)] - w.f(y_true) over an explicit list of outputs."""
    S = x @ w
    best = max(float(np.sum(S * y)) + loss(y) for y in outputs)
    return best - float(np.sum(S * y_true))


def brute_force_max_spanning_tree(n, u, v, s):
    """Maximum spanning tree of the graph (u, v) on n nodes by enumerating edge subsets.

    Returns the bool edge indicator (L,) of the best tree (unique for continuous s).
    """
    L = len(u)
    best, arg = -np.inf, None
    for sub in itertools.combinations(range(L), n - 1):
        sub = list(sub)
        if not _is_spanning_tree(n, u[sub], v[sub]):
            continue
        val = float(np.sum(s[sub]))
        if val > best:
            best, arg = val, sub
    mu = np.zeros(L, dtype=bool)
    mu[arg] = True
    return mu


def _is_spanning_tree(n, u, v):
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in zip(u, v):
        ra, rb = find(int(a)), find(int(b))
        if ra == rb:
            return False
        parent[ra] = rb
    return len(u) == n - 1


def enumerate_spanning_trees(n, u, v):
    """Every spanning tree of the graph (u, v), as bool edge indicators (L,)."""
    out = []
    for sub in itertools.combinations(range(len(u)), n - 1):
        sub = list(sub)
        if _is_spanning_tree(n, u[sub], v[sub]):
            mu = np.zeros(len(u), dtype=bool)
            mu[sub] = True
            out.append(mu)
    return out


def enumerate_perfect_matchings(nodes, edge_set=None):
    """Every perfect matching of the (complete, or ``edge_set``) graph on ``nodes``,
    as lists of pairs (a, b) with a < b."""
    nodes = list(nodes)
    if not nodes:
        return [[]]
    a = nodes[0]
    out = []
    for b in nodes[1:]:
        if edge_set is not None and (min(a, b), max(a, b)) not in edge_set:
            continue
        rest = [c for c in nodes[1:] if c != b]
        for m in enumerate_perfect_matchings(rest, edge_set):
            out.append([(min(a, b), max(a, b))] + m)
    return out


def enumerate_matchings(n, edges):
    """Every matching (including the empty one) of the graph with edge list ``edges``."""
    out = []
    for r in range(n // 2 + 1):
        for sub in itertools.combinations(edges, r):
            used = [x for e in sub for x in e]
            if len(used) == len(set(used)):
                out.append(list(sub))
    return out


def negative_alternating_walk(n, u, v, in_M, s):
    """Bellman-Ford on the alternating state graph: True iff some closed alternating
    walk w.r.t. the perfect matching ``in_M`` has negative length (lengths s on M,
    -s off M).  Independent of the certificate LP."""
    # state (j, e): e = 1 if the last edge was in M.  M edge jk: (j,0)->(k,1);
    # non-M edge jk: (j,1)->(k,0); both directions.
    src, dst, ln = [], [], []
    for a, b, m, w in zip(u, v, in_M, s):
        for j, k in ((a, b), (b, a)):
            if m:
                src.append(j); dst.append(n + k); ln.append(w)
            else:
                src.append(n + j); dst.append(k); ln.append(-w)
    src, dst, ln = np.array(src), np.array(dst), np.array(ln, dtype=float)
    dist = np.zeros(2 * n)
    for _ in range(2 * n + 1):
        cand = dist[src] + ln
        new = dist.copy()
        np.minimum.at(new, dst, cand)
        if np.allclose(new, dist, atol=1e-12, rtol=0):
            return False
        dist = new
    return True


def enumerate_arborescences(n, root=0):
    """Every head vector (n,) of an arborescence rooted at ``root`` (heads[root] = -1)."""
    out = []
    others = [m for m in range(n) if m != root]
    for choice in itertools.product(range(n), repeat=n - 1):
        h = np.full(n, -1)
        h[others] = choice
        if any(h[m] == m for m in others):
            continue
        ok = True
        for m in others:                       # every word reaches the root in < n steps
            v, steps = m, 0
            while v != root and steps < n:
                v, steps = h[v], steps + 1
            ok &= v == root
        if ok:
            out.append(h)
    return out


def enumerated_qp(Phis, mus_true, outputs, losses, C):
    """The exact max-margin QP with one constraint per enumerated output:
    ``min 1/2 |w|^2 + C sum xi_i, xi_i >= w.Phi_i^T (mu - mu_i) + loss_i(mu)``.

    Phis : list of (L_i, d); mus_true : list of (L_i,); outputs : list of (K_i, L_i) arrays
    of part vectors; losses : list of (K_i,) arrays.  Returns the optimal value.
    """
    import cvxpy as cp
    d = Phis[0].shape[1]
    w = cp.Variable(d)
    xi = cp.Variable(len(Phis))
    cons = []
    for i, (Phi, mt, Mu, ls) in enumerate(zip(Phis, mus_true, outputs, losses)):
        D = (np.asarray(Mu) - mt) @ np.asarray(Phi)
        cons.append(xi[i] >= D @ w + np.asarray(ls))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)
