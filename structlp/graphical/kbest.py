"""The k best labellings of trees and junction trees (Lawler-Murty partitioning).

Both use :func:`structlp.inference.kbest.lawler` over the node labels, visited in
breadth-first order from the root.

* Trees (:func:`tree_k_best`): a subproblem fixes the labels of a breadth-first prefix of
  the nodes and bars some labels of the next node; the free nodes form subtrees hanging
  from fixed parents, so its best score is the prefix's score plus one max-marginal
  message per free subtree (the upward max-sum messages, computed once).  A subproblem's
  children are then valued in O(k) each and decoded only when popped (after Nilsson and
  Goldberger 2001): O(n k^2) once, then O(n k) per output.
* Junction trees (:func:`jt_k_best`): each subproblem is one max-sum on the junction tree
  with the fixed and barred labels' clique entries at minus infinity.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from .junction import encode_cliques, jt_max_sum_cliques
from .trees import score as tree_score


def _upward_max(ex, b, B):
    """Max-sum messages: ``inside[j, a]``, the best score of ``j``'s subtree with ``y_j =
    a``; ``mval[j, a]`` = max over ``y_j`` of ``B[e_j, a, y_j] + inside[j, y_j]`` (``a``:
    the parent's label) and its argmax ``back[j, a]``."""
    n, k = b.shape
    inside = b.copy()
    mval = np.zeros((n, k))
    back = np.zeros((n, k), dtype=np.int64)
    for j in ex.order[:0:-1]:                     # leaves first, the root excluded
        M = B[ex.edge_of[j]] + inside[j][None, :]
        back[j] = M.argmax(axis=1)
        mval[j] = M[np.arange(k), back[j]]
        inside[ex.parents[j]] += mval[j]
    return inside, mval, back


def tree_k_best(ex: Any, b: np.ndarray, B: np.ndarray, K: int
                ) -> Tuple[List[np.ndarray], np.ndarray]:
    """The ``K`` best labellings of a tree for node scores ``b`` (n, k) and edge scores
    ``B`` (n - 1, k, k): ``max sum_i b[i, y_i] + sum_e B[e, y_pt(e), y_e]``.

    Returns
    -------
    Y : list of min(K, k^n) int arrays (n,); values : ndarray, non-increasing
    """
    from ..inference.kbest import lawler
    b = np.asarray(b, dtype=float)
    n, k = b.shape
    B = np.asarray(B, dtype=float).reshape(-1, k, k)
    order, parents, edge_of = ex.order, ex.parents, ex.edge_of
    children: List[List[int]] = [[] for _ in range(n)]
    for j in order[1:]:
        children[parents[j]].append(int(j))
    inside, mval, back = _upward_max(ex, b, B)

    def label_values(y, j):
        """Best score of ``j``'s subtree per label of ``j``, with its edge to the parent."""
        p = parents[j]
        return inside[j] + (B[edge_of[j], y[p]] if p >= 0 else 0.0)

    def decode(sol):
        y, t, a = sol
        y = y.copy()
        y[order[t]] = a
        for i in order[t + 1:]:
            y[i] = back[i, y[parents[i]]]
        return y

    def branch(y, t, F):
        prefix = frontier = 0.0
        for p_, j in enumerate(order):
            par = parents[j]
            up = mval[j, y[par]] if par >= 0 else 0.0
            if p_ >= t:
                barred = (F if p_ == t else frozenset()) | {int(y[j])}
                v = label_values(y, j).copy()
                v[list(barred)] = -np.inf
                a = int(np.argmax(v))
                if v[a] > -np.inf:
                    yield prefix + frontier - up + v[a], p_, barred, (y, p_, a)
            prefix += b[j, y[j]] + (B[edge_of[j], y[par], y[j]] if par >= 0 else 0.0)
            frontier += sum(mval[c, y[j]] for c in children[j]) - up

    root = order[0]
    a0 = int(np.argmax(inside[root]))
    found = lawler(((np.zeros(n, dtype=np.int64), 0, a0), float(inside[root, a0])), branch, K,
                   decode=decode)
    Y = [y for y, _ in found]
    return Y, np.array([tree_score(ex, b, B, y) for y in Y])


def jt_k_best(gx: Any, scores: np.ndarray, k: int, K: int) -> Tuple[List[np.ndarray], np.ndarray]:
    """The ``K`` best labellings of a junction-tree example for clique-part scores
    ``scores`` (n_parts,): Lawler-Murty over the node labels with max-sum as the oracle.

    Returns
    -------
    Y : list of min(K, k^n) int arrays (n,); values : ndarray, non-increasing
    """
    from ..inference.kbest import lawler, oracle_branch
    s = np.asarray(scores, dtype=float)
    T = gx.tables(k)
    n = gx.n_nodes
    # entries[v][a]: the clique parts (in every clique holding v) whose labelling has y_v = a
    entries: List[List[np.ndarray]] = [[np.zeros(0, dtype=np.int64)] * k for _ in range(n)]
    for c, C in enumerate(gx.cliques):
        for pos, v in enumerate(C):
            for a in range(k):
                hit = T.offsets[c] + np.flatnonzero(T.configs[c][:, pos] == a)
                entries[v][a] = np.concatenate([entries[v][a], hit])

    def solve(y, j, F):
        masked = s.copy()
        for v in range(j):
            for a in range(k):
                if a != y[v]:
                    masked[entries[v][a]] = -np.inf
        for a in F:
            masked[entries[j][a]] = -np.inf
        yy, best = jt_max_sum_cliques(gx, masked, k)
        return (yy, float(best)) if best > -np.inf else None

    found = lawler(solve(np.zeros(n, dtype=np.int64), 0, frozenset()), oracle_branch(solve, n), K)
    Y = [y for y, _ in found]
    return Y, np.array([float(s @ encode_cliques(gx, y, k)) for y in Y])
