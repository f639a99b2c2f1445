"""Certificate formulations (Taskar et al. 2005, §5) and the graph helpers they share.

For some output spaces (spanning trees, non-bipartite perfect matchings) no
compact LP describes loss-augmented inference, so the min-max formulation does
not apply.  The *optimality of the true output* still has a compact
certificate: linear constraints, jointly in the weights ``w`` and auxiliary
variables ``nu_i``, that hold iff (or, for general matchings, only if... see
below) ``y_i`` maximizes the loss-augmented scores

.. math::

    s_i(w) = \\Phi_i w + c_i \\qquad (\\text{shape } (L_i,)),

where ``loss_i(mu) = d_i + c_i . mu``.  Every structure supplies the sparse
matrices ``G^s_i`` (rows × parts) and ``G^nu_i`` (rows × auxiliary variables)
through ``certificate_rows(x, mu_true)``: the rows
``G^s_i s + G^nu_i nu_i >= 0`` hold for some ``nu_i`` only if ``y_i``
maximizes ``s . mu`` (or, as a :class:`CertificateRows`, rows over the
certificate's own parts ``t = P_i s``, e.g. the edges of a graph copy).
Training puts a slack on the (certificate) part scores
(:class:`Certificate`, ``slack="two_sided"`` by default) and is, for
``P_i = I``, the single QP

.. math::

    \\min_{w,\\zeta\\ge 0,\\nu}\\; \\tfrac12\\|w\\|^2 + C\\sum_i \\mathbf 1^T\\zeta_i
    \\quad\\text{s.t.}\\quad G^s_i(\\Phi_i w + c_i + D_i\\zeta_i) + G^\\nu_i \\nu_i \\ge 0
    \\quad\\forall i,

whose slack ``1^T zeta_i`` (``1^T zeta_i / k_i`` over certificate parts of
multiplicity ``k_i``) bounds the structured hinge of example ``i`` from
above (see :class:`Certificate` for the proof, for ``slack="part"`` and for
the paper's ``slack="shared"``, which does not and collapses to ``w = 0``
under label noise).

* **Spanning tree** (:func:`spanning_tree_rows`): for every non-tree edge ``e'``
  and every tree edge ``e`` on the tree path joining the ends of ``e'``,
  ``s_e - s_e' >= 0``.  No auxiliary variables.  Exact.
* **Matching and perfect matching** (:func:`odd_set_rows`; the default of
  :class:`~structlp.structures.Matching`, ``certificate="odd_sets"`` of
  :class:`~structlp.structures.PerfectMatching`): Edmonds' odd-set certificate.  Node potentials ``pi`` and potentials
  ``z_S >= 0`` of the odd sets on which the matching is tight, with
  ``pi_j + pi_k + sum_{S ni j,k} z_S >= s_jk`` for every edge, equality on the
  matching (and, for matchings, ``pi >= 0``, zero at unmatched nodes, through
  score-0 *unmatched-node parts*): LP duality over Edmonds' matching polytope,
  so **exact on every graph**.  Its size grows with the number of tight odd
  sets, ``sum_j C(m, j)(n - 2j)`` for a matching of ``m`` pairs (70 for a
  perfect matching of 10 nodes, whose complementary sets are one constraint),
  bounded by a budget (``max_odd_sets``) beyond which it is sufficient only.
* **Perfect matching** (:func:`alternating_cycle_rows`, Taskar Eq. 13,
  ``certificate="alternating_cycle"``): edge
  lengths ``l_e = s_e`` on the matching ``M``, ``l_e = -s_e`` off it, and node
  potentials ``d0_j, d1_j`` with ``l_jk >= d0_k - d1_j, l_jk >= d0_j - d1_k``
  for ``jk`` not in ``M`` and ``l_jk >= d1_k - d0_j, l_jk >= d1_j - d0_k`` for
  ``jk`` in ``M``.  Potentials exist iff the *state graph* (node ``j`` in state
  0 or 1 = the last edge was off / on ``M``) has no negative cycle, i.e. iff
  no **closed alternating walk** has negative length.  On bipartite graphs
  every closed alternating walk splits into alternating cycles, so the
  certificate is exact (Edmonds).  **On general graphs it is sufficient but
  not necessary**: a closed alternating walk may run around an odd cycle
  twice, and such a walk can be negative while ``M`` is optimal
  (:func:`odd_cycle_counterexample` builds one).  The certificate QP is then
  a conservative program: its feasible set of ``w`` is a subset of the exact
  one, so with vanishing slacks its objective is >= the exact objective.
* **Matching** (not necessarily perfect, ``certificate="alternating_cycle"``):
  the graph-copy reduction (:func:`graph_copy`): copy the graph, join each
  node to its copy by a zero-score edge, mirror the matching and match
  unmatched nodes to their copies; then the perfect-matching certificate on
  the copy graph, whose edges (node-to-copy edges included) are the
  certificate's parts (:class:`CertificateRows`).

Exact min-max alternatives: :class:`~structlp.structures.BipartiteMatching`
(``formulation="minmax"``; its certificate with the per-part slacks gives
the same ``w`` on any data, see :class:`Certificate`) and
:class:`~structlp.structures.SpanningTree` (``formulation="minmax"`` through a
compact extended formulation).  :class:`~structlp.cutting_plane.CuttingPlaneLearner`
solves the exact problem for every structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.sparse.csgraph import breadth_first_order, connected_components

from ._validation import check_binary, check_finite_array, check_real
from .exceptions import InvalidInputError, InvalidOutputError, InvalidParameterError
from .formulations import LinearBlocks, TrainingData, block_diag

if TYPE_CHECKING:  # pragma: no cover
    from .polytope import Polytope

#: Relative tolerance of the symmetry check of edge features.
SYMMETRY_RTOL = 1e-9


# --------------------------------------------------------------------------- graphs
@dataclass(eq=False)
class Graph:
    """An undirected graph with edge features, as the graph structures use it.

    Attributes
    ----------
    features : ndarray, shape (n, n, d)
        ``features[j, k]`` are the features of edge ``jk`` (symmetric in j, k).
    mask : ndarray of bool, shape (n, n)
        Symmetric adjacency of the graph (no self-loops).
    u, v : ndarray of int, shape (L,)
        End points of the edges, ``u < v``, in row-major order; edge ``e`` is part ``e``.
    index : ndarray of int, shape (n, n)
        Part index of edge ``jk`` (symmetric), -1 where there is no edge.
    """

    features: np.ndarray
    mask: np.ndarray
    u: np.ndarray
    v: np.ndarray
    index: np.ndarray

    @property
    def n_nodes(self) -> int:
        return self.mask.shape[0]

    @property
    def n_edges(self) -> int:
        return len(self.u)

    def edge_features(self) -> np.ndarray:
        """Features of the edges, shape (L, d)."""
        return self.features[self.u, self.v]

    def to_adjacency(self, mu: ArrayLike) -> np.ndarray:
        """0/1 symmetric (n, n) int adjacency of the edge indicator ``mu`` (L,)."""
        n = self.n_nodes
        y = np.zeros((n, n), dtype=int)
        on = np.rint(np.asarray(mu, dtype=float)).astype(bool)
        y[self.u[on], self.v[on]] = 1
        y[self.v[on], self.u[on]] = 1
        return y

    def score_matrix(self, scores: ArrayLike) -> np.ndarray:
        """Symmetric (n, n) matrix of edge scores (0 off the graph)."""
        n = self.n_nodes
        S = np.zeros((n, n))
        S[self.u, self.v] = scores
        S[self.v, self.u] = scores
        return S

    def __repr__(self):
        return (f"Graph(n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                f"n_features={self.features.shape[2]})")


def check_graph(x: Any, owner: str, min_nodes: int = 2) -> Graph:
    """Validate an example of a graph structure and return it as a :class:`Graph`.

    Parameters
    ----------
    x : ndarray of shape (n, n, d), or a pair ``(features, mask)`` with a boolean
        (n, n) symmetric ``mask`` restricting the complete graph, or a Graph.
    owner : str
        Name of the structure, for error messages.

    Raises
    ------
    InvalidInputError
        Wrong shape, NaN/inf on an edge, asymmetric features or mask, a self-loop.
    """
    if isinstance(x, Graph):
        return x
    mask = None
    if isinstance(x, (tuple, list)) and len(x) == 2 and np.ndim(x[1]) == 2:
        x, mask = x
    check_real(x, f"x (edge features) of {owner}")
    try:
        feats = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"x (edge features) of {owner} must be a numeric array of shape (n, n, d) or a "
            f"pair (features, mask); could not convert it ({exc}).") from None
    if feats.ndim != 3 or feats.shape[0] != feats.shape[1]:
        raise InvalidInputError(
            f"x (edge features) of {owner} must have shape (n, n, d); got {feats.shape}.")
    n, _, d = feats.shape
    if n < min_nodes or d < 1:
        raise InvalidInputError(
            f"x (edge features) of {owner} must have at least {min_nodes} nodes and one "
            f"feature; got shape {feats.shape}.")
    if mask is None:
        mask = ~np.eye(n, dtype=bool)
    else:
        m = np.asarray(mask)
        if m.shape != (n, n):
            raise InvalidInputError(
                f"The mask of x of {owner} must have shape ({n}, {n}); got {m.shape}.")
        if m.dtype != bool:
            m = check_binary(m, f"The mask of x of {owner}").astype(bool)
        if not np.array_equal(m, m.T):
            j, k = np.argwhere(m != m.T)[0]
            raise InvalidInputError(
                f"The mask of x of {owner} must be symmetric; mask[{j}, {k}] != mask[{k}, {j}].")
        if np.any(np.diag(m)):
            j = int(np.flatnonzero(np.diag(m))[0])
            raise InvalidInputError(
                f"The mask of x of {owner} must have no self-loops; mask[{j}, {j}] is set.")
        mask = m.copy()
    u, v = np.nonzero(np.triu(mask, 1))
    fu, fv = feats[u, v], feats[v, u]
    if not (np.all(np.isfinite(fu)) and np.all(np.isfinite(fv))):
        raise InvalidInputError(f"x (edge features) of {owner} contains NaN or infinite "
                                "values on an edge of the graph.")
    if not np.allclose(fu, fv, rtol=SYMMETRY_RTOL, atol=1e-12):
        bad = int(np.flatnonzero(~np.all(np.isclose(fu, fv, rtol=SYMMETRY_RTOL, atol=1e-12),
                                         axis=1))[0])
        raise InvalidInputError(
            f"x (edge features) of {owner} must be symmetric, x[j, k] == x[k, j], for an "
            f"undirected graph; x[{u[bad]}, {v[bad]}] != x[{v[bad]}, {u[bad]}].")
    index = np.full((n, n), -1, dtype=np.int64)
    index[u, v] = np.arange(len(u))
    index[v, u] = np.arange(len(u))
    return Graph(feats, mask, u.astype(np.int64), v.astype(np.int64), index)


def n_components(n: int, u: np.ndarray, v: np.ndarray) -> int:
    """Number of connected components of the graph with edges (u, v) on n nodes."""
    A = sp.csr_array((np.ones(len(u)), (u, v)), shape=(n, n))
    return int(connected_components(A, directed=False)[0])


def check_adjacency(g: Graph, y: Any, owner: str) -> np.ndarray:
    """Check that ``y`` is a 0/1 symmetric adjacency of a subgraph of ``g``; return mu (L,).

    Raises
    ------
    InvalidOutputError
    """
    n = g.n_nodes
    try:
        Y = check_finite_array(y, "y")
    except InvalidInputError as exc:
        raise InvalidOutputError(str(exc)) from None
    if Y.shape != (n, n):
        raise InvalidOutputError(
            f"y of {owner} must be a 0/1 adjacency matrix of shape ({n}, {n}); got {Y.shape}.")
    if not np.all((Y == 0) | (Y == 1)):
        raise InvalidOutputError(f"y of {owner} must contain only 0 and 1.")
    if not np.array_equal(Y, Y.T):
        j, k = np.argwhere(Y != Y.T)[0]
        raise InvalidOutputError(
            f"y of {owner} must be symmetric (an undirected adjacency); y[{j}, {k}] != "
            f"y[{k}, {j}].")
    if np.any(np.diag(Y)):
        j = int(np.flatnonzero(np.diag(Y))[0])
        raise InvalidOutputError(f"y of {owner} has a self-loop at node {j}.")
    off = (Y == 1) & ~g.mask
    if np.any(off):
        j, k = np.argwhere(off)[0]
        raise InvalidOutputError(
            f"y of {owner} uses edge ({j}, {k}), which is not in the graph (mask).")
    return Y[g.u, g.v].astype(float)


# ------------------------------------------------------------- certificate rows
@dataclass(eq=False)
class CertificateRows:
    """A certificate over its own parts: rows ``Gt t + Gnu nu >= 0``, ``t = lift @ s``.

    A certificate may prove the optimality of an output of a *larger* structure
    than the model's (the graph copy of a matching, the padded square
    assignment of a rectangular one): its *certificate parts* (edges of that
    structure) score ``t = lift @ s`` from the model's part scores ``s``.  The
    contract, with ``T_i = t_true`` the certified output: for every model
    output ``y`` there is a 0/1 certificate output ``T(y)`` with
    ``lift^T T(y) = multiplicity * y`` (so ``t . T(y) = k s . y``,
    ``k = multiplicity``) and ``T(y_i) = T_i``; rows that hold for some ``nu``
    prove that ``T_i`` maximizes ``t . T`` over the certificate outputs.
    :class:`Certificate` puts its slacks on the certificate parts at cost
    ``1 / k`` each (see there for the hinge bound).

    Iterating gives ``(Gs, Gnu)`` with ``Gs = Gt @ lift`` (rows x model parts),
    the plain form of ``certificate_rows``, which a structure may return
    instead (``lift`` the identity, ``t_true = mu_true``, ``k = 1``).

    Attributes
    ----------
    Gt : sparse (R, Q); Gnu : sparse (R, n_aux); lift : sparse (Q, L)
    t_true : ndarray (Q,) of 0/1; multiplicity : int
    """

    Gt: sp.csr_array
    Gnu: sp.csr_array
    lift: sp.csr_array
    t_true: np.ndarray
    multiplicity: int = 1

    @property
    def Gs(self) -> sp.csr_array:
        """Rows in the model's part scores, sparse (R, L)."""
        return sp.csr_array(self.Gt @ self.lift)

    def __iter__(self) -> Iterator[sp.csr_array]:
        return iter((self.Gs, self.Gnu))

    @classmethod
    def of(cls, rows: Any, mu_true: ArrayLike) -> "CertificateRows":
        """``rows`` as returned by ``certificate_rows``: a CertificateRows or ``(Gs, Gnu)``."""
        if isinstance(rows, cls):
            return rows
        Gs, Gnu = rows
        Gs = sp.csr_array(Gs)
        return cls(Gs, sp.csr_array(Gnu), sp.eye_array(Gs.shape[1], format="csr"),
                   np.asarray(mu_true, dtype=float), 1)


def spanning_tree_rows(n: int, u: np.ndarray, v: np.ndarray,
                       in_tree: np.ndarray) -> Tuple[sp.csr_array, Any]:
    """Certificate rows of a spanning tree: ``s_e - s_e' >= 0`` for each non-tree
    edge ``e'`` and each tree edge ``e`` on the tree path joining its ends.

    Parameters
    ----------
    n : int
        Number of nodes.
    u, v : int arrays, shape (L,)
        Edge end points; edge ``e`` is part ``e``.
    in_tree : bool array, shape (L,)
        The tree (must be a spanning tree).

    Returns
    -------
    Gs : sparse (R, L)
        Row ``r`` has +1 at its tree edge and -1 at its non-tree edge.
    pairs : int array, shape (R, 2)
        (tree edge, non-tree edge) of each row.
    """
    in_tree = np.asarray(in_tree, dtype=bool)
    L = len(u)
    te = np.flatnonzero(in_tree)
    ne = np.flatnonzero(~in_tree)
    T = sp.csr_array((np.ones(len(te)), (u[te], v[te])), shape=(n, n))
    order, pred = breadth_first_order(T, 0, directed=False, return_predecessors=True)
    # anc[j, c]: the tree edge (c, pred[c]) lies on the path from j to the root
    anc = np.zeros((n, n), dtype=bool)
    for j in order[1:]:
        anc[j] = anc[pred[j]]
        anc[j, j] = True
    edge_of_child = np.full(n, -1, dtype=np.int64)
    child = np.where(pred[u[te]] == v[te], u[te], v[te])
    edge_of_child[child] = te
    on_path = anc[u[ne]] ^ anc[v[ne]]  # (n_nontree, n): tree path of each non-tree edge
    r, c = np.nonzero(on_path)
    pairs = np.column_stack([edge_of_child[c], ne[r]])
    R = len(pairs)
    rows = np.repeat(np.arange(R), 2)
    cols = pairs.ravel()
    vals = np.tile([1.0, -1.0], R)
    return sp.csr_array((vals, (rows, cols)), shape=(R, L)), pairs


def alternating_cycle_rows(n: int, u: np.ndarray, v: np.ndarray, in_M: np.ndarray,
                           part: np.ndarray, n_parts: int) -> "CertificateRows":
    """Alternating-cycle certificate rows of a perfect matching (Taskar Eq. 13).

    With ``l_e = t_e`` for ``e in M`` and ``l_e = -t_e`` otherwise (``t`` the
    edge scores), and node potentials ``d0, d1`` (shape (n,) each; ``d0[0]`` is
    fixed to 0 since potentials are defined up to a common shift), the rows are,
    per edge ``jk``,

    * ``jk not in M``: ``l_jk - d0_k + d1_j >= 0`` and ``l_jk - d0_j + d1_k >= 0``;
    * ``jk in M``: ``l_jk - d1_k + d0_j >= 0`` and ``l_jk - d1_j + d0_k >= 0``.

    Feasible potentials exist iff no closed alternating walk has negative
    length: exactly optimality of ``M`` on bipartite graphs; sufficient but not
    necessary on general graphs (see the module docstring).

    The edges are the *certificate parts*: edge ``e`` scores ``t_e = s[part[e]]``
    (the model part it copies), or 0 when ``part[e] == -1`` (a node-to-copy edge
    of the graph copy, a dummy column of a padded assignment).  Each edge gets
    its own slack in :class:`Certificate`.

    Parameters
    ----------
    n : int
        Number of nodes (even).
    u, v : int arrays, shape (E,)
        Edges of the graph.
    in_M : bool array, shape (E,)
        The perfect matching.
    part : int array, shape (E,)
        Part (score index) of each edge; -1 for an edge of score 0.  Every part
        must be copied by the same number ``k >= 1`` of edges (its
        ``multiplicity``: 1, or 2 for the graph copy).
    n_parts : int
        Number of parts.

    Returns
    -------
    CertificateRows
        ``Gt`` sparse (2E, E) (+-1 at the row's edge), ``Gnu`` sparse (2E, 2n - 1)
        (the potentials ``(d0[1:], d1)``), ``lift`` (E, n_parts) from ``part``,
        ``t_true = in_M``; unpacks as ``Gs, Gnu`` with ``Gs = Gt @ lift``
        (2E, n_parts).
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    in_M = np.asarray(in_M, dtype=bool)
    part = np.asarray(part, dtype=np.int64)
    E = len(u)
    sign = np.where(in_M, 1.0, -1.0)
    # row a (edge j=u, k=v) and row b (j=v, k=u):  l + d[plus] - d[minus] >= 0
    # in M: plus = d0_j, minus = d1_k;  not in M: plus = d1_j, minus = d0_k
    j = np.concatenate([u, v])
    k = np.concatenate([v, u])
    M2 = np.concatenate([in_M, in_M])
    plus = np.where(M2, j, n + j)
    minus = np.where(M2, n + k, k)
    rows = np.arange(2 * E)
    edges = np.arange(E)
    Gt = sp.csr_array((np.concatenate([sign, sign]), (rows, np.concatenate([edges, edges]))),
                      shape=(2 * E, E))
    # potential column p -> p - 1, column 0 (d0 of node 0) dropped
    cols = np.concatenate([plus, minus])
    vals = np.concatenate([np.ones(2 * E), -np.ones(2 * E)])
    rr = np.concatenate([rows, rows])
    keep = cols != 0
    Gd = sp.csr_array((vals[keep], (rr[keep], cols[keep] - 1)), shape=(2 * E, 2 * n - 1))
    has = part >= 0
    lift = sp.csr_array((np.ones(int(has.sum())), (edges[has], part[has])), shape=(E, n_parts))
    copies = np.bincount(part[has], minlength=n_parts)
    if n_parts and (copies.min() < 1 or copies.min() != copies.max()):
        raise ValueError("alternating_cycle_rows: every part must be copied by the same "
                         f"number (>= 1) of edges; got between {copies.min()} and "
                         f"{copies.max()}.")
    return CertificateRows(Gt, Gd, lift, in_M.astype(float),
                           int(copies[0]) if n_parts else 1)


#: Default budget of tight odd sets per example in :func:`odd_set_rows`.
MAX_ODD_SETS = 5000


def n_tight_odd_sets(n: int, m: int, j: int, perfect: bool = False) -> int:
    """Number of odd sets ``S`` of ``2 j + 1`` nodes with ``j`` matched pairs inside.

    A matching with ``m`` pairs on ``n`` nodes is *tight* on such a set
    (``y(E(S)) = (|S| - 1) / 2``): ``S`` is ``j`` of its pairs and one node
    outside them, ``C(m, j) (n - 2 j)`` sets.  ``perfect``: only the sets
    without node 0 and of fewer than ``n - 1`` nodes (:func:`tight_odd_sets`),
    ``C(m - 1, j) (n - 2 j - 1)``.
    """
    from math import comb
    if perfect:
        return comb(m - 1, j) * max(n - 2 * j - 1, 0) if 2 * j + 1 < n - 1 else 0
    return comb(m, j) * max(n - 2 * j, 0)


def tight_odd_sets(n: int, pairs: np.ndarray, max_odd_sets: int = MAX_ODD_SETS,
                   perfect: bool = False) -> Tuple[List[np.ndarray], bool]:
    """The odd sets (``|S| >= 3``) on which a matching is tight, by increasing size.

    For a perfect matching, ``x(E(S)) <= (|S| - 1) / 2`` and the same
    constraint for ``V - S`` are one (both say ``x(delta(S)) >= 1`` when every
    node has degree 1), and ``V - {0}`` repeats node 0's degree: with
    ``perfect`` only the sets without node 0 and of fewer than ``n - 1`` nodes
    are given, one of each pair.  (With both, the certificate's potentials
    would be unbounded: on K4 the four triangles sum to the degree vectors.)

    Parameters
    ----------
    n : int
        Number of nodes.
    pairs : int array, shape (m, 2)
        The matched pairs (``perfect``: all nodes).
    max_odd_sets : int
        Budget: sets of ``2 j + 1`` nodes are included, for ``j = 1, 2, ...``,
        while the total stays within it (whole sizes only).
    perfect : bool
        Perfect matchings (see above).

    Returns
    -------
    sets : list of int arrays, shape (n_j, 2 j + 1)
        The node sets of each included size (sorted rows).
    complete : bool
        Whether every tight odd set is included (the certificate is then exact).
    """
    import itertools
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if perfect:                  # node 0's pair never enters; node 0 is never the extra one
        pairs = pairs[~np.any(pairs == 0, axis=1)]
    m = len(pairs)
    out: List[np.ndarray] = []
    total = 0
    for j in range(1, m + 1):
        count = n_tight_odd_sets(n, m + perfect, j, perfect)
        if count == 0:
            continue
        if total + count > max_odd_sets:
            return out, False
        combos = np.array(list(itertools.combinations(range(m), j)), dtype=np.int64)
        inside = pairs[combos].reshape(len(combos), 2 * j)          # (C(m, j), 2 j)
        member = np.zeros((len(combos), n), dtype=bool)
        member[np.arange(len(combos))[:, None], inside] = True
        if perfect:
            member[:, 0] = True
        which, extra = np.nonzero(~member)                          # one node outside
        sets = np.sort(np.column_stack([inside[which], extra]), axis=1)
        out.append(sets)
        total += count
    return out, True


def odd_set_rows(n: int, u: np.ndarray, v: np.ndarray, in_M: np.ndarray, perfect: bool,
                 max_odd_sets: int = MAX_ODD_SETS) -> "CertificateRows":
    """Edmonds' odd-set certificate of a (perfect) matching: exact on every graph.

    The matching polytope of a general graph is ``{x >= 0 : x(delta(v)) <= 1,
    x(E(S)) <= (|S| - 1) / 2 for odd S}`` (``= 1`` at every node for perfect
    matchings; Edmonds 1965), so by LP duality ``M`` is a maximum-weight
    (perfect) matching for scores ``t`` iff there are node potentials
    ``pi`` (n,) and odd-set potentials ``z_S >= 0`` with

    .. math::

        \\pi_j + \\pi_k + \\sum_{S \\ni j, k} z_S \\ge t_{jk}\\;\\forall jk,\\quad
        \\text{with equality on } M,\\qquad z_S > 0 \\text{ only if } M(E(S)) = (|S|-1)/2,

    and, for matchings that need not be perfect, ``pi_j >= t_{r_j}`` for every
    node with equality at unmatched nodes: ``r_j`` is the *unmatched-node
    part* of node ``j`` (score 0 in the model: ``x(delta(j)) + r_j = 1``), so
    ``pi >= 0`` and ``pi_j = 0`` where ``M`` leaves ``j`` alone.  The
    unmatched-node parts are certificate parts with their own slack in
    :class:`Certificate` (the analogue of the graph copy's node-to-copy edges);
    without them the slack bound was up to 5.6% looser on noisy 4-node matchings.

    Only the *tight* odd sets enter (complementary slackness): ``j`` matched
    pairs and one more node, ``C(m, j) (n - 2 j)`` sets of size ``2 j + 1``
    (:func:`n_tight_odd_sets`), one of each complementary pair for perfect
    matchings (:func:`tight_odd_sets`: 70 for 10 nodes, 1,008 for 16).  With
    every tight set the certificate is exact: it holds iff ``M`` is optimal,
    odd cycles included (:func:`odd_cycle_counterexample` passes).
    Sets are taken by increasing size within ``max_odd_sets``; with fewer the
    rows are still sufficient (weak duality holds for any family of sets),
    so the slacks still bound the hinge, but not necessary.

    Parameters
    ----------
    n : int
        Number of nodes.
    u, v : int arrays, shape (E,)
        Edges of the graph; edge ``e`` is part ``e``.
    in_M : bool array, shape (E,)
        The (perfect) matching.
    perfect : bool
        Perfect matchings (no unmatched-node parts, ``pi`` free).
    max_odd_sets : int
        Budget of tight odd sets (:func:`tight_odd_sets`).

    Returns
    -------
    CertificateRows
        Certificate parts: the ``E`` edges, then (``perfect=False``) the ``n``
        unmatched-node parts.  The equalities are eliminated: the potential
        of the second node of each pair of ``M`` (and of each unmatched node)
        is expressed through the others, leaving ``|M| + Z`` auxiliary
        variables (the first node's potential of each pair, and ``z``) and
        ``E - |M| + Z`` rows (``+`` one per matched node for matchings,
        ``pi_j >= t_{r_j}``); ``Z`` of the rows say
        ``z >= 0`` (:class:`Certificate` makes them the variables' signs).
        ``lift`` maps the edges to the model parts, ``multiplicity`` 1.
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    in_M = np.asarray(in_M, dtype=bool)
    E = len(u)
    index = np.full((n, n), -1, dtype=np.int64)
    index[u, v] = index[v, u] = np.arange(E)
    sets, _ = tight_odd_sets(n, np.column_stack([u[in_M], v[in_M]]), max_odd_sets, perfect)
    # (edge, set) incidences: every pair of nodes of a set that is an edge
    er, ec, Z = [], [], 0
    for S in sets:
        a, b = np.triu_indices(S.shape[1], 1)
        e = index[S[:, a], S[:, b]]                                  # (n_sets, pairs)
        r, c = np.nonzero(e >= 0)
        er.append(e[r, c])
        ec.append(Z + r)
        Z += len(S)
    inside = sp.csr_array((np.ones(sum(map(len, er))),
                           (np.concatenate(er) if er else np.zeros(0, np.int64),
                            np.concatenate(ec) if ec else np.zeros(0, np.int64))),
                          shape=(E, Z))
    edges = np.arange(E)
    deg = sp.csr_array((np.ones(2 * E), (np.concatenate([edges, edges]),
                                         np.concatenate([u, v]))), shape=(E, n))
    cover = sp.hstack([deg, inside], format="csr")                   # (E, n + Z)
    Q = E if perfect else E + n
    on = np.flatnonzero(in_M)
    matched = np.zeros(n, dtype=bool)
    matched[u[on]] = matched[v[on]] = True
    # The equalities (tight rows of M, pi_j = t_rj at unmatched nodes) are eliminated:
    # the potential of each pair's second node and of every unmatched node becomes an
    # affine function of t and of the other potentials, full = Pt t + Pnu kept.
    alone = np.flatnonzero(~matched)                 # empty for perfect matchings
    keep = np.setdiff1d(np.arange(n + Z), np.concatenate([v[on], alone]))
    col = np.full(n + Z, -1, dtype=np.int64)
    col[keep] = np.arange(len(keep))
    # pi_b = t_e - pi_a - sum_{S ni e} z_S for every pair e = (a, b) of M
    sub = sp.coo_array(cover[on].tocsr() - sp.csr_array(
        (np.ones(len(on)), (np.arange(len(on)), v[on])), shape=(len(on), n + Z)))
    Pnu = sp.csr_array((np.concatenate([np.ones(len(keep)), -sub.data]),
                        (np.concatenate([keep, v[on][sub.row]]),
                         np.concatenate([np.arange(len(keep)), col[sub.col]]))),
                       shape=(n + Z, len(keep)))
    Pt_rows = [v[on], alone]
    Pt_cols = [on, E + alone]
    Pt = sp.csr_array((np.ones(sum(map(len, Pt_rows))),
                       (np.concatenate(Pt_rows), np.concatenate(Pt_cols))), shape=(n + Z, Q))
    # the remaining inequalities: every edge off M, z >= 0, pi_j >= t_rj at matched nodes
    off = np.flatnonzero(~in_M)
    minus_t = sp.csr_array((-np.ones(len(off)), (np.arange(len(off)), off)), shape=(len(off), Q))
    Gt = [minus_t, sp.csr_array((Z, Q))]
    Gfull = [cover[off], sp.hstack([sp.csr_array((Z, n)), sp.eye_array(Z, format="csr")])]
    t_true = in_M.astype(float)
    if not perfect:
        both = np.flatnonzero(matched)
        Gt.append(sp.csr_array((-np.ones(len(both)), (np.arange(len(both)), E + both)),
                               shape=(len(both), Q)))
        Gfull.append(sp.csr_array((np.ones(len(both)), (np.arange(len(both)), both)),
                                  shape=(len(both), n + Z)))
        t_true = np.concatenate([t_true, (~matched).astype(float)])
    Gf = sp.vstack(Gfull, format="csr")
    Gt_all = sp.csr_array(sp.vstack(Gt, format="csr") + Gf @ Pt)
    Gnu_all = sp.csr_array(Gf @ Pnu)
    Gt_all.eliminate_zeros()
    Gnu_all.eliminate_zeros()
    lift = sp.csr_array((np.ones(E), (edges, edges)), shape=(Q, E))
    return CertificateRows(Gt_all, Gnu_all, lift, t_true, 1)


def potentials_exist(Gs: Any, Gd: Any, scores: ArrayLike) -> bool:
    """Whether potentials ``nu`` with ``Gs @ scores + Gd @ nu >= 0`` exist (an LP, HiGHS).

    Parameters
    ----------
    Gs : sparse (R, L); Gd : sparse (R, k); scores : array (L,)

    Returns
    -------
    bool
    """
    from scipy.optimize import linprog
    rhs = np.asarray(Gs @ np.asarray(scores, dtype=float)).ravel()
    if Gd.shape[1] == 0:
        return bool(np.all(rhs >= -1e-9))
    # -Gd nu <= rhs ; minimize 0
    res = linprog(np.zeros(Gd.shape[1]), A_ub=-sp.csr_array(Gd), b_ub=rhs + 1e-9,
                  bounds=[(None, None)] * Gd.shape[1], method="highs")
    return res.status == 0


def graph_copy(n: int, u: ArrayLike, v: ArrayLike, in_M: Optional[ArrayLike] = None
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """The graph-copy reduction of matchings to perfect matchings (Taskar §5).

    Nodes ``0..n-1`` are the graph, ``n..2n-1`` its copy; the edges are the
    graph's edges, their copies, and ``(j, j + n)`` for every node.  A matching
    ``M`` becomes the perfect matching ``M + copy(M) + {(j, j+n): j unmatched}``.

    Parameters
    ----------
    n : int
    u, v : int arrays, shape (L,)
        Edges of the graph (edge ``e`` is part ``e``).
    in_M : bool array, shape (L,), optional
        A matching of the graph.

    Returns
    -------
    U, V : int arrays, shape (2L + n,)
        Edges of the copy graph.
    part : int array, shape (2L + n,)
        Part of each copy-graph edge (``e`` for both copies of edge ``e``, -1 for
        the node-to-copy edges, whose score is 0).
    in_M2 : bool array, shape (2L + n,) or None
        The mirrored perfect matching.
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    L = len(u)
    nodes = np.arange(n)
    U = np.concatenate([u, u + n, nodes])
    V = np.concatenate([v, v + n, nodes + n])
    part = np.concatenate([np.arange(L), np.arange(L), np.full(n, -1)])
    if in_M is None:
        return U, V, part, None
    in_M = np.asarray(in_M, dtype=bool)
    matched = np.zeros(n, dtype=bool)
    matched[u[in_M]] = True
    matched[v[in_M]] = True
    return U, V, part, np.concatenate([in_M, in_M, ~matched])


def odd_cycle_counterexample() -> Tuple[np.ndarray, np.ndarray]:
    """A graph where an optimal perfect matching fails the alternating-cycle certificate.

    Six nodes, two triangles ``{1, 2, 3}`` and ``{0, 4, 5}`` joined by the edge
    ``0-1``; ``M = {01, 23, 45}`` has score 0 and the four other triangle
    edges score 1, every other edge -10.  ``M`` is the unique maximum-weight
    perfect matching (any other uses a -10 edge), yet the closed alternating
    walk ``0-1-2-3-1-0-4-5-0`` (M, non-M, M, non-M, M, non-M, M, non-M) goes
    around both odd cycles and has length ``2*0 + 0 + 0 - 4 = -4 < 0``, so no
    potentials exist.

    Returns
    -------
    S : ndarray, shape (6, 6)
        Symmetric edge scores.
    y : ndarray of int, shape (6, 6)
        The optimal perfect matching's adjacency.
    """
    S = np.full((6, 6), -10.0)
    np.fill_diagonal(S, 0.0)
    for a, b, s in [(0, 1, 0.0), (2, 3, 0.0), (4, 5, 0.0),
                    (1, 2, 1.0), (1, 3, 1.0), (0, 4, 1.0), (0, 5, 1.0)]:
        S[a, b] = S[b, a] = s
    y = np.zeros((6, 6), dtype=int)
    for a, b in [(0, 1), (2, 3), (4, 5)]:
        y[a, b] = y[b, a] = 1
    return S, y


# ------------------------------------------------------------- the formulation
#: The slacks of the certificate formulation, the default first.
SLACKS = ("two_sided", "part", "shared")


def check_slack(slack: Any, owner: Optional[str] = None) -> str:
    """Validate a certificate ``slack`` value (None means the default ``"two_sided"``)."""
    if slack is None:
        return SLACKS[0]
    if not isinstance(slack, str) or slack not in SLACKS:
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'slack' parameter{where} must be one of {list(SLACKS)} (or None for the "
            f"default {SLACKS[0]!r}); got {slack!r}.")
    return slack


def slack_columns(t_true: Sequence[np.ndarray], slack: str,
                  multiplicity: Optional[Sequence[int]] = None) -> Tuple[sp.csr_array, sp.csr_array]:
    """Part-to-slack map of the per-part slacks of all examples.

    Parameters
    ----------
    t_true : list of m 0/1 arrays, shape (Q_i,)
        The certified output of each example over its certificate parts.
    slack : {"two_sided", "part"}
    multiplicity : sequence of m ints, optional (default 1)
        ``k_i`` of each example's certificate (:class:`CertificateRows`).

    Returns
    -------
    D : sparse (sum Q_i, Z)
        Column ``z`` adds ``+zeta_z`` to a true part's score, ``-zeta_z`` to another
        part's (``"two_sided"``: one column per part; ``"part"``: one per true part).
    S : sparse (m, Z)
        Row ``i`` sums the slacks of example ``i``, each weighted ``1 / k_i``.
    """
    mu = np.concatenate(t_true) if len(t_true) else np.zeros(0)
    example = np.repeat(np.arange(len(t_true)), [len(t) for t in t_true])
    k = np.ones(len(t_true)) if multiplicity is None else np.asarray(multiplicity, float)
    parts = np.flatnonzero(mu > 0.5) if slack == "part" else np.arange(len(mu))
    sign = np.where(mu[parts] > 0.5, 1.0, -1.0)
    Z = len(parts)
    D = sp.csr_array((sign, (parts, np.arange(Z))), shape=(len(mu), Z))
    S = sp.csr_array((1.0 / k[example[parts]], (example[parts], np.arange(Z))),
                     shape=(len(t_true), Z))
    return D, S


def sign_rows(Gt: sp.csr_array, Gnu: sp.csr_array) -> Tuple[np.ndarray, np.ndarray]:
    """The rows ``nu_k >= 0`` among certificate rows ``Gt t + Gnu nu >= 0``.

    Returns
    -------
    rows : bool array (R,)
        Rows with no score term and one positive auxiliary coefficient.
    columns : bool array (n_aux,)
        The auxiliary variables those rows make non-negative.
    """
    Gt, Gnu = sp.csr_array(Gt), sp.csr_array(Gnu)
    rows = (np.diff(Gt.indptr) == 0) & (np.diff(Gnu.indptr) == 1)
    first = Gnu.indptr[:-1][rows]
    rows[np.flatnonzero(rows)] = Gnu.data[first] > 0
    columns = np.zeros(Gnu.shape[1], dtype=bool)
    columns[Gnu.indices[Gnu.indptr[:-1][rows]]] = True
    return rows, columns


class Certificate:
    """``formulation="certificate"``: the optimality certificate of each true output.

    With ``s_i = Phi_i w + c_i`` the loss-augmented part scores of example
    ``i`` and ``model.certificate_rows(x_i, mu_true_i)`` its certificate
    (:class:`CertificateRows`: rows ``G^t_i t_i + G^nu_i nu_i >= 0`` over
    certificate parts ``t_i = P_i s_i``, ``P_i`` the ``lift``, that, when they
    hold for some ``nu_i``, prove that the certified output ``T_i`` -- and so
    ``y_i`` -- is optimal; or a plain pair ``(G^s_i, G^nu_i)``, ``P_i = I``),
    the training QP is, by ``slack``:

    * ``"two_sided"`` (default): a slack on every certificate part, added to
      the certified parts' scores and subtracted from the others',

      .. math::

          \\min\\; \\tfrac12\\|w\\|^2 + C\\sum_i \\frac{1}{k_i}\\sum_q \\zeta_{iq}
          \\quad\\text{s.t.}\\quad
          G^t_i(P_i(\\Phi_i w + c_i) + D_i\\zeta_i) + G^\\nu_i\\nu_i \\ge 0,\\;\\zeta\\ge 0,

      ``D_i = diag(2 T_i - 1)`` (shape (Q_i, Q_i)), ``k_i`` the certificate's
      ``multiplicity`` (1, or 2 for the graph copy of a matching, which counts
      every part twice);
    * ``"part"``: the same with a slack on the certified parts only (``D_i``
      is (Q_i, |T_i|), +1 at each certified part);
    * ``"shared"``: one slack per example added to every row,
      ``G^s_i s_i + G^nu_i nu_i + xi_i 1 >= 0`` — Taskar et al.'s relaxation.

    **What the slacks bound.**  For ``"two_sided"`` and ``"part"``, feasible rows
    mean (the certificate is sufficient) that ``T_i`` is optimal for the shifted
    certificate scores ``t' = t + D zeta``.  For any model output ``y``, with
    ``T(y)`` its 0/1 certificate output (``P^T T(y) = k y``, so
    ``t . T(y) = k s . y``),
    ``k (s.y - s.y_i) = (t'.T(y) - t'.T_i) + sum_{q in T_i} zeta_q (1 - T(y)_q)
    + sum_{q not in T_i} zeta_q T(y)_q <= sum_q zeta_q``, so
    ``xi_i = sum_q zeta_iq / k_i >= max_y s.y - s.y_i = hinge_i(w)`` (the
    structured hinge, when the loss of ``y_i`` is 0): the QP's objective
    bounds the exact max-margin objective from above, whatever the data.  At
    ``w = 0`` the bound is the whole loss, so there is no free collapse.

    Slack on *every* certificate part matters where the certificate has parts
    of its own: the node-to-copy edges of the graph copy (a matching's
    unmatched nodes) and the dummy columns of a padded rectangular assignment
    are parts of the certified perfect matching; without a slack there, the
    conservative (general-graph) certificate had to be met through the model
    parts alone, and the exact objective at the certificate's ``w`` was up to
    9.5% above the optimum on noisy 6-node matchings (1.6% with them, and
    5.5% on 4-node ones; with the odd-set certificate and its unmatched-node
    parts 0.3% and 0.24%, ``tests/test_certificates_slack.py``); rectangular
    assignments became exact (their padded square graph is bipartite).  Tying the slacks of a part's ``k``
    copies together (one ``zeta_p`` at cost 1 per model part, no slack on the
    certificate's own parts) is a special case, so the untied program's
    optimum is never higher.

    It is exact (``xi_i = hinge_i``) for square bipartite assignments
    (:class:`~structlp.structures.BipartiteMatching`, both slacks): with
    ``(u, v)`` an optimal dual of the assignment LP for ``s``, the slack
    ``zeta_rc = u_r + v_c - s_rc >= 0`` on the true edges makes ``(u, v)``
    dual feasible for ``s'`` with ``s'.y_i = sum u + sum v``, so ``y_i`` is
    optimal for ``s'`` (the certificate is exact on bipartite graphs) and
    ``sum zeta = sum u + sum v - s.y_i = hinge_i``.  Elsewhere the slack can
    exceed the hinge even with an exact certificate (odd sets, spanning
    trees): one perturbation must make ``y_i`` optimal against every output
    at once; a conservative certificate (alternating cycles on general
    graphs) adds to that.  For spanning trees ``"part"`` charges one
    attractive non-tree edge once per tree edge on its path and can exceed
    the hinge several times over (it collapses to ``w = 0`` on noisy trees),
    ``"two_sided"`` stays close.  ``"shared"`` is *not* a bound of the hinge:
    at ``w = 0`` every row has the same value, ``xi_i = 1`` (trees) or
    ``1/2`` (matchings) satisfies them all while the hinge is the whole
    Hamming loss, so under label noise the QP returns ``w = 0`` for every
    ``C``; it is kept for comparison.

    Blocks: ``"two_sided"``/``"part"`` add a non-negative auxiliary ``zeta``
    and the equality ``xi = S zeta`` (``slack_`` is then
    ``sum_q zeta_iq / k_i``); in the kernelized dual this becomes the box
    ``(D^T G^T alpha)_z <= C / k_i`` on the row multipliers.  Output
    polytopes are not built (``needs_polytopes=False``, the default) and the
    structure's ``encode`` validates every ``y``; a structure that has a
    polytope too (BipartiteMatching) passes ``needs_polytopes=True``.
    """

    name = "certificate"
    slacks = SLACKS

    def __init__(self, model: Any, needs_polytopes: bool = False, slack: Any = "two_sided",
                 owner: Optional[str] = None) -> None:
        self.model = model
        self.needs_polytopes = needs_polytopes
        self.slack = check_slack(slack, owner)

    def with_slack(self, slack: Any, owner: Optional[str] = None) -> Certificate:
        """The same formulation with another ``slack`` (``owner`` names the caller in errors)."""
        return Certificate(self.model, self.needs_polytopes, slack, owner)

    def rows(self, data: TrainingData) -> List[CertificateRows]:
        """Per-example :class:`CertificateRows`."""
        return [CertificateRows.of(self.model.certificate_rows(x, mu), mu)
                for x, mu in zip(data.X, data.mu_true)]

    def blocks(self, data: TrainingData) -> LinearBlocks:
        m = data.n_examples
        certs = self.rows(data)
        Gt = sp.csr_array(block_diag([r.Gt for r in certs]))
        Gd = sp.csr_array(block_diag([r.Gnu for r in certs]))
        example = np.repeat(np.arange(m), [r.Gt.shape[0] for r in certs])
        # a row that only says nu_k >= 0 (the odd-set potentials) is the sign of nu_k:
        # nu_k becomes a non-negative variable and the row goes (no slack, no multiplier)
        sign, positive = sign_rows(Gt, Gd)
        Gt, Gd, example = Gt[~sign], Gd[~sign], example[~sign]
        n_rows = np.bincount(example, minlength=m)
        Gs = sp.csr_array(Gt @ block_diag([r.lift for r in certs]))
        c = np.concatenate(data.c)
        R = int(n_rows.sum())
        rhs = -np.asarray(Gs @ c).ravel()
        nu = {"nu": sp.csr_array(Gd[:, np.flatnonzero(~positive)])}
        blocks = LinearBlocks(aux={"nu": (nu["nu"].shape[1], False)})
        if positive.any():
            nu["nu_pos"] = sp.csr_array(Gd[:, np.flatnonzero(positive)])
            blocks.aux["nu_pos"] = (nu["nu_pos"].shape[1], True)
        # "parts": Gs stands for (Gs @ Phi) @ w, so the kernelized dual applies too
        if self.slack == "shared":
            # xi_i enters every row on the scores (rows on the auxiliary variables alone
            # are no optimality conditions of the scores and take none)
            scored = np.diff(Gt.indptr) > 0
            Xi = sp.csr_array((scored.astype(float), (np.arange(R), example)), shape=(R, m))
            if R:
                blocks.ineq.append(({"parts": Gs, "xi": Xi, **nu}, rhs))
            blocks.ineq.append(({"xi": sp.eye_array(m, format="csr")}, np.zeros(m)))
            return blocks
        D, S = slack_columns([r.t_true for r in certs], self.slack,
                             [r.multiplicity for r in certs])
        blocks.aux["zeta"] = (D.shape[1], True)
        if R:
            blocks.ineq.append(({"parts": Gs, "zeta": sp.csr_array(Gt @ D), **nu}, rhs))
        blocks.eq.append(({"xi": sp.eye_array(m, format="csr"), "zeta": -S}, np.zeros(m)))
        return blocks


# ------------------------------------------------------------- graph structures
from .model import StructuredModel  # noqa: E402  (after the helpers it uses)


class GraphStructure(StructuredModel):
    """Base of the graph structures: parts are the edges of an undirected graph.

    An example ``x`` is an array of shape (n, n, d) of symmetric edge features
    (the complete graph), or a pair ``(features, mask)`` with a symmetric
    boolean (n, n) ``mask`` selecting the edges.  An output ``y`` is the 0/1
    symmetric (n, n) adjacency of the chosen edge set.  Parts are the edges
    ``j < k`` of the graph in row-major order; the loss is the Hamming loss of
    #2, the number of true edges missing from ``y``.
    """

    formulations = ("certificate",)
    _min_nodes = 2

    def check_x(self, x: Any) -> Any:
        return check_graph(x, type(self).__name__, self._min_nodes)

    def n_parts(self, x: Any) -> int:
        return self.check_x(x).n_edges

    def features(self, x: Any) -> np.ndarray:
        return self.check_x(x).edge_features()

    def encode(self, x: Any, y: Any) -> np.ndarray:
        g = self.check_x(x)
        mu = check_adjacency(g, y, type(self).__name__)
        self._check_structure(g, mu)
        return mu

    def decode(self, x: Any, mu: np.ndarray) -> np.ndarray:
        return self.check_x(x).to_adjacency(mu)

    def _check_structure(self, g, mu):  # pragma: no cover - overridden
        raise NotImplementedError

    def polytope(self, x: Any) -> Polytope:
        from .exceptions import DeclarationError
        raise DeclarationError(
            f"{type(self).__name__} has no compact output polytope; train it with "
            "formulation='certificate' (MaxMarginLearner) or with CuttingPlaneLearner.")

    def formulation(self, name: str) -> Certificate:
        if name == "certificate":
            return Certificate(self)
        raise KeyError(name)

    def certificate_rows(self, x: Any, mu_true: np.ndarray
                         ) -> Union[CertificateRows, Tuple[Any, Any]]:  # pragma: no cover
        raise NotImplementedError


def degrees(g: Graph, mu: ArrayLike) -> np.ndarray:
    """Degree of every node in the edge set ``mu`` of graph ``g``, shape (n,)."""
    on = np.asarray(mu) > 0.5
    return np.bincount(np.concatenate([g.u[on], g.v[on]]), minlength=g.n_nodes)
