"""Sum-product on one tree in log space, compiled with numba: the per-node loops of
:func:`structlp.graphical.trees.forest_marginals` for a single example.

For node scores ``b`` (n, k) and edge scores ``B`` (n - 1, k, k) (parent label, child label)

.. math::

    \\log Z = \\log \\sum_y \\exp\\Big(\\sum_i b[i, y_i]
        + \\sum_e B[e, y_{\\mathrm{parent}(e)}, y_{\\mathrm{child}(e)}]\\Big),

with the node and edge marginals of ``p(y) = exp(score(y) - log Z)``: messages from the
leaves to the root (each a log-sum-exp shifted by its maximum) and back, O(n k^2).  The
level-synchronous numpy version (:func:`~structlp.graphical.trees.forest_marginals`, which
batches many trees) computes the same quantities; this kernel serves one tree at a time
(:func:`structlp.inference.marginals`), where numpy's per-call overhead would dominate.
It is compiled by numba's JIT (cached on disk) and falls back to the numpy version where
numba does not import.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

from ..compiled import jit


def _sum_product_kernel(order, parents, edge_of, b, B):  # compiled by numba when available
    n, k = b.shape
    inc = b.copy()                       # node score plus the messages of its children
    msg = np.zeros((n, k))
    for t in range(n - 1, 0, -1):        # reverse breadth-first order: leaves first
        j = order[t]
        e = edge_of[j]
        p = parents[j]
        for a in range(k):
            mx = -np.inf
            for c in range(k):
                v = B[e, a, c] + inc[j, c]
                if v > mx:
                    mx = v
            s = 0.0
            for c in range(k):
                s += math.exp(B[e, a, c] + inc[j, c] - mx)
            msg[j, a] = mx + math.log(s)
            inc[p, a] += msg[j, a]
    root = order[0]
    mx = -np.inf
    for a in range(k):
        if inc[root, a] > mx:
            mx = inc[root, a]
    s = 0.0
    for a in range(k):
        s += math.exp(inc[root, a] - mx)
    log_Z = mx + math.log(s)
    down = np.zeros((n, k))              # log of the messages from the rest of the tree
    node = np.empty((n, k))
    edge = np.empty((max(n - 1, 0), k, k))
    outside = np.empty(k)
    for a in range(k):
        node[root, a] = math.exp(inc[root, a] - log_Z)
    for t in range(1, n):
        j = order[t]
        p = parents[j]
        e = edge_of[j]
        for a in range(k):
            outside[a] = inc[p, a] + down[p, a] - msg[j, a]
        for c in range(k):
            mx = -np.inf
            for a in range(k):
                v = outside[a] + B[e, a, c]
                if v > mx:
                    mx = v
            s = 0.0
            for a in range(k):
                w = outside[a] + B[e, a, c]
                s += math.exp(w - mx)
                edge[e, a, c] = math.exp(w + inc[j, c] - log_Z)
            down[j, c] = mx + math.log(s)
            node[j, c] = math.exp(inc[j, c] + down[j, c] - log_Z)
    return log_Z, node, edge


def _kernel() -> Optional[Any]:
    """The kernel compiled by numba's JIT (on first use, cached on disk), or None."""
    return jit(_sum_product_kernel)


def tree_sum_product(order: np.ndarray, parents: np.ndarray, edge_of: np.ndarray,
                     b: np.ndarray, B: np.ndarray
                     ) -> Optional[Tuple[float, np.ndarray, np.ndarray]]:
    """``(log Z, node (n, k), edge (n - 1, k, k))`` of one tree by the compiled kernel, or
    None where numba does not import (the caller then uses the numpy version).

    ``order`` (breadth-first from the root), ``parents`` and ``edge_of`` as a checked
    :class:`~structlp.graphical.trees.TreeExample` has them (int64), ``b`` and ``B`` finite
    float64 arrays (C-contiguous copies are made otherwise).
    """
    kernel = _kernel()
    if kernel is None:
        return None
    b = np.ascontiguousarray(b, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64).reshape(-1, b.shape[1], b.shape[1])
    log_Z, node, edge = kernel(np.ascontiguousarray(order, dtype=np.int64),
                               np.ascontiguousarray(parents, dtype=np.int64),
                               np.ascontiguousarray(edge_of, dtype=np.int64), b, B)
    return float(log_Z), node, edge
