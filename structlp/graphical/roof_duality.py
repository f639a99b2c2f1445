"""The LP relaxation of a binary pairwise model, solved exactly by one maximum flow.

For two labels, node scores ``b`` (n, 2) and edge scores ``B`` (E, 2, 2) (``B[e, y_u, y_v]``
for ``e = (u, v)``), the LP over the local marginal polytope

.. math::

    \\max_{\\mu \\in M_L}\\; \\sum_i b_i \\cdot \\mu_i + \\sum_e B_e \\cdot \\mu_e

equals *roof duality* (Hammer, Hansen & Simeone 1984; Boros & Hammer 2002), which is a
minimum cut in a graph of ``2 n + 2`` nodes: each variable ``x_p`` has a node ``p`` and a
mirror node ``p'`` standing for ``1 - x_p``, and every term of the energy ``-score`` is
written, half on the nodes and half on their mirrors, as arcs of non-negative capacity
(Kolmogorov & Rother, "Minimizing nonsubmodular functions with graph cuts -- a review",
PAMI 2007, Section 2).  A minimum cut ``(x, x')`` gives the half-integral node marginals
``z_p = (x_p + 1 - x'_p) / 2`` (``z_p`` the marginal of label 1); each edge then takes the
edge marginal that is best for its two node marginals.  This is QPBO's construction: on
attractive (submodular) models the cut is the exact MAP labelling, on others the nodes
with ``z = 1/2`` are those the relaxation leaves undecided.

Nothing here is taken on trust: the maximum flow is a feasible flow, so ``-(c + flow)``
(``c`` the energy's constant) is an upper bound of the LP, and ``z`` with its edge
marginals is a feasible point of ``M_L`` whose score is computed directly.  The result is
*certified* when the two agree to ``1e-9`` of the scores' scale; the caller falls back to
another solver otherwise.

The maximum flow is Dinic's algorithm (breadth-first levels, then blocking flows by
depth-first search with current-arc pointers), compiled (:mod:`structlp.compiled`).  The graph's arcs
depend only on the edges, so their layout is built once per graph
(:class:`FlowGraph`) and each call only writes the capacities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from ..compiled import jit, kernel

#: The primal-dual gap, in the scores' scale, at which the cut's point is certified
#: (as in :mod:`structlp.graphical.dual_decomposition`).
_CERTIFY = 1e-9


def _dinic(start, head, rev, cap, s, t, eps):  # compiled by numba when available
    """Maximum flow from ``s`` to ``t`` in the residual graph (CSR arcs ``start``/``head``,
    ``rev`` the reverse arc, ``cap`` residual capacities, updated in place).  Returns the
    flow value and each node's side of a minimum cut (1: reachable from ``s``)."""
    n = start.shape[0] - 1
    level = np.empty(n, dtype=np.int64)
    cur = np.empty(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    path = np.empty(n, dtype=np.int64)
    flow = 0.0
    while True:
        for v in range(n):
            level[v] = -1
        level[s] = 0
        queue[0] = s
        qh, qt = 0, 1
        while qh < qt:
            v = queue[qh]
            qh += 1
            for a in range(start[v], start[v + 1]):
                w = head[a]
                if level[w] < 0 and cap[a] > eps:
                    level[w] = level[v] + 1
                    queue[qt] = w
                    qt += 1
        if level[t] < 0:
            break
        for v in range(n):
            cur[v] = start[v]
        while True:                     # blocking flow: augmenting paths along the levels
            top = 0
            v = s
            while v != t:
                advanced = False
                while cur[v] < start[v + 1]:
                    a = cur[v]
                    w = head[a]
                    if cap[a] > eps and level[w] == level[v] + 1:
                        path[top] = a
                        top += 1
                        v = w
                        advanced = True
                        break
                    cur[v] += 1
                if not advanced:
                    if top == 0:
                        break
                    level[v] = -1       # a dead end: no path to t through v this phase
                    top -= 1
                    v = head[rev[path[top]]]
                    cur[v] += 1
            if v != t:
                break
            f = cap[path[0]]
            for i in range(1, top):
                if cap[path[i]] < f:
                    f = cap[path[i]]
            for i in range(top):
                cap[path[i]] -= f
                cap[rev[path[i]]] += f
            flow += f
    side = np.zeros(n, dtype=np.int64)     # the last search found no path: its levels
    for v in range(n):                      # are the nodes reachable from s
        if level[v] >= 0:
            side[v] = 1
    return flow, side


def _jit():
    """Dinic's algorithm compiled by numba's JIT (on first use, cached on disk), or None."""
    return jit(_dinic)


def _kernel():
    """Dinic's algorithm built ahead of time (:mod:`structlp.compiled`), else by numba's
    JIT; None without either."""
    return kernel("dinic", _dinic)


@dataclass(eq=False)
class FlowGraph:
    """The arcs of the roof-duality graph of an ``n``-node graph with ``edges``, in CSR order.

    Nodes ``0..n-1`` are the variables, ``n..2n-1`` their mirrors, ``2n`` the source and
    ``2n+1`` the sink.  Every possible arc is laid out (with zero capacity where a term
    does not use it), so the layout depends on the graph only: per node, source -> p,
    p -> sink, source -> p', p' -> sink; per edge ``(p, q)``, q -> p, p' -> q',
    q' -> p, p' -> q; each with its reverse arc.
    """

    n: int
    start: np.ndarray
    head: np.ndarray
    rev: np.ndarray
    order: np.ndarray      # position in CSR order -> position in the laid-out arc list

    @classmethod
    def of(cls, n: int, edges: np.ndarray) -> "FlowGraph":
        p, q = edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64)
        nodes = np.arange(n, dtype=np.int64)
        s, t = 2 * n, 2 * n + 1
        S, T = np.full(n, s), np.full(n, t)
        tail = np.concatenate([S, nodes, S, n + nodes, q, n + p, n + q, n + p])
        hd = np.concatenate([nodes, T, n + nodes, T, p, n + q, p, q])
        m = len(tail)
        tails = np.concatenate([tail, hd])
        heads = np.concatenate([hd, tail])
        rev = np.concatenate([np.arange(m, 2 * m), np.arange(m)])
        order = np.argsort(tails, kind="stable")
        pos = np.empty(2 * m, dtype=np.int64)
        pos[order] = np.arange(2 * m)
        start = np.zeros(2 * n + 3, dtype=np.int64)
        np.cumsum(np.bincount(tails, minlength=2 * n + 2), out=start[1:])
        return cls(n, start, np.ascontiguousarray(heads[order]),
                   np.ascontiguousarray(pos[rev[order]]), order)


def binary_lp(graph: FlowGraph, b: np.ndarray, B: np.ndarray,
              edges: np.ndarray) -> Optional[Tuple[np.ndarray, np.ndarray, bool]]:
    """The LP over the local polytope of a two-label model, by roof duality.

    Parameters
    ----------
    graph : FlowGraph of ``(n, edges)``
    b : float array (n, 2); B : float array (E, 2, 2); edges : int array (E, 2)

    Returns
    -------
    None when no compiled kernel is available (neither built ahead of time nor numba);
    else ``(z, mu_e, certified)``:

    z : float array (n,)
        The marginal of label 1 of each node, in {0, 1/2, 1}.
    mu_e : float array (E, 2, 2)
        The edge marginals (``mu_e[e, a, c]``, ``a`` the label of ``edges[e, 0]``).
    certified : bool
        Whether the point's score equals the flow's upper bound to ``1e-9`` of the scores'
        scale (then it is an optimal point of the LP).
    """
    kernel = _kernel()
    if kernel is None:
        return None
    n = b.shape[0]
    p, q = edges[:, 0], edges[:, 1]
    th = -B                                     # energies
    u = (b[:, 0] - b[:, 1]).astype(np.float64)  # the energy's coefficient of x_p
    w = th[:, 0, 0] + th[:, 1, 1] - th[:, 0, 1] - th[:, 1, 0]
    sub = w < 0
    ep = th[:, 1, 0] - th[:, 0, 0] + np.where(sub, w, 0.0)
    eq = th[:, 0, 1] - th[:, 0, 0]
    u = u + np.bincount(p, ep, minlength=n) + np.bincount(q, eq, minlength=n)
    const = -b[:, 0].sum() + th[:, 0, 0].sum() + np.minimum(u, 0.0).sum()
    pos, neg = np.maximum(u, 0.0) / 2, np.maximum(-u, 0.0) / 2
    ws, wp = np.where(sub, -w, 0.0) / 2, np.where(sub, 0.0, w) / 2
    cap = np.concatenate([pos, neg, neg, pos, ws, ws, wp, wp])
    cap = np.concatenate([cap, np.zeros_like(cap)])[graph.order]
    scale = 1.0 + np.abs(b).sum() + np.abs(B).sum()
    flow, side = kernel(graph.start, graph.head, graph.rev, cap, 2 * n, 2 * n + 1,
                        1e-15 * scale)
    x = 1 - side[:n]                            # x_p = 1: p on the sink's side
    xm = 1 - side[n:2 * n]                      # the mirror's label, 1 - x_p when decided
    z = (x + 1 - xm) / 2.0
    a, c = z[p], z[q]
    # mu_e(1, 1) = t in [max(0, a + c - 1), min(a, c)]: the end its coefficient prefers
    coef = B[:, 0, 0] - B[:, 0, 1] - B[:, 1, 0] + B[:, 1, 1]
    t11 = np.where(coef > 0, np.minimum(a, c), np.maximum(0.0, a + c - 1))
    mu_e = np.empty((len(edges), 2, 2))
    mu_e[:, 1, 1] = t11
    mu_e[:, 1, 0] = a - t11
    mu_e[:, 0, 1] = c - t11
    mu_e[:, 0, 0] = 1 - a - c + t11
    primal = float(b[:, 0] @ (1 - z) + b[:, 1] @ z + (B * mu_e).sum())
    upper = -(const + flow)
    return z, mu_e, bool(upper - primal <= _CERTIFY * scale)
