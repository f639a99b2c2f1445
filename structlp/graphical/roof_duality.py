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
from ..exceptions import InvalidInputError
from ._kernel_args import check_range, edge_pairs, float_array, frozen, int_array

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
    return kernel("dinic", _dinic, _jit)


@dataclass(eq=False, frozen=True, init=False)
class FlowGraph:
    """The arcs of the roof-duality graph of an ``n``-node graph with ``edges``, in CSR order.

    Nodes ``0..n-1`` are the variables, ``n..2n-1`` their mirrors, ``2n`` the source and
    ``2n+1`` the sink.  Every possible arc is laid out (with zero capacity where a term
    does not use it), so the layout depends on the graph only: per node, source -> p,
    p -> sink, source -> p', p' -> sink; per edge ``(p, q)``, q -> p, p' -> q',
    q' -> p, p' -> q; each with its reverse arc.

    Built from ``(n, edges)`` only (``FlowGraph(n, edges)`` or :meth:`of`), which are
    checked (``n >= 1``; edges an (E, 2) integer array of node indices, no self-loop); its
    arrays are read-only and the object frozen, so the maximum flow always runs on a
    consistent layout.

    Raises
    ------
    InvalidInputError
        ``n`` or ``edges`` not as above.
    """

    n: int
    edges: np.ndarray
    start: np.ndarray
    head: np.ndarray
    rev: np.ndarray
    order: np.ndarray      # position in CSR order -> position in the laid-out arc list

    def __init__(self, n: Any, edges: Any) -> None:
        owner = "FlowGraph"
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InvalidInputError(f"{owner}: n must be an int >= 1; got {n!r}.")
        n = int(n)
        edges = _edge_array(edges, n, owner)
        p, q = edges[:, 0], edges[:, 1]
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
        for name, value in (("n", n), ("edges", edges), ("start", start),
                            ("head", heads[order]), ("rev", pos[rev[order]]),
                            ("order", order)):
            object.__setattr__(self, name, value if name == "n" else frozen(value))

    @classmethod
    def of(cls, n: int, edges: np.ndarray) -> "FlowGraph":
        """``FlowGraph(n, edges)``."""
        return cls(n, edges)


def _edge_array(edges: Any, n: int, owner: str) -> np.ndarray:
    edges = edge_pairs(edges, owner)
    check_range(edges, 0, n - 1, "edges", owner)
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if len(loops):
        e = int(loops[0])
        raise InvalidInputError(f"{owner}: edges[{e}] = ({edges[e, 0]}, {edges[e, 1]}) is a "
                                "self-loop.")
    return edges


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

    Raises
    ------
    InvalidInputError
        ``graph`` not a :class:`FlowGraph`, ``edges`` not the edges it was built from,
        ``b`` or ``B`` not finite arrays of shapes (n, 2) and (E, 2, 2).
    """
    if not isinstance(graph, FlowGraph):
        raise InvalidInputError(f"binary_lp: graph must be a FlowGraph; got "
                                f"{type(graph).__name__}.")
    n = graph.n
    b = float_array(b, "b (node scores)", "binary_lp", (n, 2), finite=False)
    if edges is not graph.edges:                  # (the graph's own: immutable, checked)
        edges = np.asarray(edges)
        if edges.size == 0:
            edges = edges.reshape(0, 2)
        edges = int_array(edges, "edges", "binary_lp", 2)
        if edges.shape != graph.edges.shape or not np.array_equal(edges, graph.edges):
            raise InvalidInputError(
                f"binary_lp: edges must be the edges the graph was built from "
                f"({len(graph.edges)} edges on {n} nodes); got {edges.shape[0]} other edges "
                "(build FlowGraph(n, edges) for them).")
    B = float_array(B, "B (edge scores)", "binary_lp", (len(edges), 2, 2), finite=False)
    scale = 1.0 + np.abs(b).sum() + np.abs(B).sum()
    if not np.isfinite(scale):
        raise InvalidInputError("binary_lp: the scores b and B must be finite (and their sum "
                                "of magnitudes too); got NaN, infinite or overflowing values.")
    kernel = _kernel()
    if kernel is None:
        return None
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


def _check_kernel_args(start, head, rev, cap, s, t, eps):
    """The value check of the compiled kernel's arguments (:func:`structlp.compiled.aot`):
    a residual graph in CSR form whose reverse arcs pair up, finite capacities >= 0, two
    distinct terminals and ``eps > 0`` (so that every augmenting path saturates an arc and
    the search ends)."""
    owner = "dinic"
    n = len(start) - 1
    m = len(head)
    if n < 2 or start[0] != 0 or start[-1] != m or np.any(np.diff(start) < 0):
        raise InvalidInputError(
            f"{owner}: start must be the CSR offsets of the arcs of n >= 2 nodes: "
            f"non-decreasing from 0 to len(head) = {m}; got {len(start)} entries from "
            f"{start[0] if len(start) else None} to {start[-1] if len(start) else None}.")
    if len(rev) != m or len(cap) != m:
        raise InvalidInputError(f"{owner}: head, rev and cap must have one entry per arc; got "
                                f"lengths {m}, {len(rev)}, {len(cap)}.")
    check_range(head, 0, n - 1, "head", owner)
    check_range(rev, 0, m - 1, "rev", owner)
    tail = np.repeat(np.arange(n), np.diff(start))
    bad = np.flatnonzero((rev[rev] != np.arange(m)) | (rev == np.arange(m))
                         | (head[rev] != tail))
    if len(bad):
        a = int(bad[0])
        raise InvalidInputError(
            f"{owner}: rev must pair each arc with its reverse (rev[rev[a]] = a != rev[a], "
            f"head[rev[a]] = the tail of a); arc {a} is not paired.")
    if not (np.isfinite(cap).all() and np.all(cap >= 0)):
        raise InvalidInputError(f"{owner}: cap must be finite and >= 0.")
    for name, v in (("s", s), ("t", t)):
        if not 0 <= v < n:
            raise InvalidInputError(f"{owner}: {name} = {v} is not a node 0..{n - 1}.")
    if s == t:
        raise InvalidInputError(f"{owner}: s and t must differ; got {s} for both.")
    if not (np.isfinite(eps) and eps > 0):
        raise InvalidInputError(f"{owner}: eps must be finite and > 0; got {eps!r}.")
