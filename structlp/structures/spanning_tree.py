"""Spanning trees, learned through their optimality certificate (Taskar et al. 2005, §5)."""

from __future__ import annotations

import functools
from typing import Any, Hashable, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from ..certificates import GraphStructure, n_components, spanning_tree_rows
from ..exceptions import InvalidInputError, InvalidOutputError
from ..polytope import Polytope


def rooted_flow_polytope(n: int, u: ArrayLike, v: ArrayLike) -> Polytope:
    """The spanning-tree polytope of the graph ``(u, v)`` on ``n`` nodes, extended.

    Variables: the edge indicators ``x`` (L,), then, for every root ``k`` and
    every arc ``a`` (``u_e -> v_e`` is arc ``e``, ``v_e -> u_e`` is arc
    ``L + e``), ``y[k, a] >= 0`` (column ``L + 2 L k + a``): the orientation of
    the tree towards root ``k``.  Equalities

    .. math::

        x_e = y_{k, u_e\\to v_e} + y_{k, v_e\\to u_e}\\;\\;\\forall k, e,\\qquad
        \\sum_{a \\text{ leaves } i} y_{k,a} = [i \\ne k]\\;\\;\\forall k, i,

    and ``0 <= x <= 1`` (``n L + n^2`` rows, ``L + 2 n L`` columns: Martin
    1991's O(n^3) size for the complete graph).  Its projection on ``x`` is the
    spanning-tree polytope: a tree oriented towards each root gives a point,
    so the polytope contains the hull of the trees; conversely, for a node set
    ``S`` and a root ``k`` in ``S``, every edge inside ``S`` is an arc leaving
    a node of ``S`` other than ``k`` (the root has none), so
    ``x(E(S)) <= |S| - 1``, and summing the out-degrees gives
    ``sum x = n - 1``: Edmonds' description of the spanning-tree polytope.

    Returns
    -------
    Polytope with ``n_parts = L`` and ``n_aux = 2 n L`` (and a ``lift``).
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    L = len(u)
    k = np.repeat(np.arange(n), L)                 # (n L,): root of each coupling row
    e = np.tile(np.arange(L), n)
    rows = np.arange(n * L)
    col = L + 2 * L * k
    coupling = sp.csr_array(
        (np.concatenate([np.ones(n * L), -np.ones(2 * n * L)]),
         (np.concatenate([rows, rows, rows]), np.concatenate([e, col + e, col + L + e]))),
        shape=(n * L, L + 2 * n * L))
    tail = np.concatenate([u, v])                  # tail node of arc a
    kk = np.repeat(np.arange(n), 2 * L)
    aa = np.tile(np.arange(2 * L), n)
    out_deg = sp.csr_array((np.ones(2 * n * L), (kk * n + tail[aa], L + 2 * L * kk + aa)),
                           shape=(n * n, L + 2 * n * L))
    rhs = 1.0 - np.eye(n).ravel()                  # [i != k] at row k n + i
    E = sp.vstack([coupling, out_deg], format="csr")
    lb = np.zeros(L + 2 * n * L)
    ub = np.concatenate([np.ones(L), np.full(2 * n * L, np.inf)])
    return Polytope(E=E, e=np.concatenate([np.zeros(n * L), rhs]), lb=lb, ub=ub,
                    n_parts=L, n_aux=2 * n * L, lift=functools.partial(_lift, n, u, v))


def _lift(n, u, v, mu):
    """The point of :func:`rooted_flow_polytope` above a spanning tree ``mu``, or None."""
    L = len(u)
    on = np.flatnonzero(np.asarray(mu) > 0.5)
    if len(on) != n - 1:
        return None
    T = sp.csr_array((np.ones(len(on)), (u[on], v[on])), shape=(n, n))
    y = np.zeros((n, 2 * L))
    for k in range(n):
        order, pred = breadth_first_order(T, k, directed=False, return_predecessors=True)
        if len(order) != n:
            return None
        # tree edge e is oriented u->v (arc e) iff v is the parent of u
        y[k, on] = pred[u[on]] == v[on]
        y[k, L + on] = pred[v[on]] == u[on]
    return np.concatenate([np.asarray(mu, dtype=float), y.ravel()])


class SpanningTree(GraphStructure):
    """Spanning trees of an undirected graph: ``formulation="certificate"`` or ``"minmax"``.

    Inference is the maximum spanning tree

    .. math::

        \\max_{T \\text{ spanning tree of } G} \\sum_{e \\in T} s_e ,

    which has no compact LP.  Its optimality has a compact certificate: ``T``
    is a maximum spanning tree iff for every non-tree edge ``e'`` and every
    tree edge ``e`` on the tree path joining the ends of ``e'``, ``s_e >= s_e'``
    (cutting ``e`` splits the tree, and ``e'`` crosses the cut).  With
    ``s = Phi w + c`` (loss-augmented scores) these are linear inequalities in
    ``w``, one per (non-tree edge, path edge) pair: at most ``(L - n + 1)(n - 1)``
    rows, no auxiliary variables.  The certificate is exact, but its slack
    (:class:`~structlp.certificates.Certificate`) only bounds the structured
    hinge: ``slack="two_sided"`` closely, ``"part"`` loosely.

    ``formulation="minmax"`` gives the *exact* structured hinge in one QP
    (and its kernelized dual): the spanning-tree polytope has a compact
    extended formulation (:func:`rooted_flow_polytope`, ``L + 2 n L``
    variables and ``n L + n^2`` equalities per example, ``L`` edges), which
    the min-max compiler dualizes like any polytope, its auxiliary variables
    having score 0.  On the complete graph both programs have ``O(n^3)``
    rows per example, the min-max about three times as many as the
    certificate, plus ``O(n^3)`` dual variables; sizes and times are in
    ``benchmarks/bench_certificates.py``.

    An example ``x`` is an array (n, n, d) of symmetric edge features of the
    complete graph on ``n >= 2`` nodes, or a pair ``(features, mask)`` whose
    boolean symmetric (n, n) ``mask`` restricts it to a sparse, connected graph.
    An output ``y`` is the 0/1 symmetric (n, n) adjacency of a spanning tree.
    Parts are the edges ``j < k`` (row-major); the loss is the number of true
    tree edges missing from ``y``.

    Notes
    -----
    Prediction uses :func:`scipy.sparse.csgraph.minimum_spanning_tree` on
    shifted negated scores (all spanning trees have ``n - 1`` edges, so a
    shift does not change the optimum).

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_spanning_tree
    >>> X, Y, w, model = make_spanning_tree(n_samples=10, n_nodes=5, random_state=0)
    >>> learner = structlp.MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    >>> int(learner.predict(X[:1])[0].sum()) // 2      # n_nodes - 1 tree edges
    4
    """

    formulations: tuple = ("certificate", "minmax")

    def polytope(self, x: Any) -> Polytope:
        """The extended spanning-tree polytope of ``x`` (:func:`rooted_flow_polytope`)."""
        g = self.check_x(x)
        return rooted_flow_polytope(g.n_nodes, g.u, g.v)

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        g = self.check_x(x)
        return ("spanning_tree", g.n_nodes, g.mask.tobytes())

    def check_x(self, x: Any) -> Any:
        g = super().check_x(x)
        if g is not x and n_components(g.n_nodes, g.u, g.v) > 1:
            raise InvalidInputError(
                f"The graph of x is disconnected ({n_components(g.n_nodes, g.u, g.v)} "
                "connected components in its mask): it has no spanning tree.")
        return g

    def _check_structure(self, g, mu):
        n = g.n_nodes
        on = mu > 0.5
        k = int(on.sum())
        comps = n_components(n, g.u[on], g.v[on])
        if k != n - 1 or comps != 1:
            what = ("contains a cycle" if k >= n or (k == n - 1 and comps > 1)
                    else f"is disconnected ({comps} components)")
            raise InvalidOutputError(
                f"y is not a spanning tree of the {n}-node graph: it has {k} edges "
                f"(a spanning tree has {n - 1}) and {what}.")

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        g = self.check_x(x)
        s = np.asarray(scores, dtype=float)
        cost = s.max() - s + 1.0  # > 0: csgraph treats 0 as "no edge"
        A = sp.csr_array((cost, (g.u, g.v)), shape=(g.n_nodes, g.n_nodes))
        T = sp.coo_array(minimum_spanning_tree(A))
        y = np.zeros((g.n_nodes, g.n_nodes), dtype=int)
        y[T.row, T.col] = 1
        y[T.col, T.row] = 1
        return y

    def certificate_rows(self, x: Any, mu_true: np.ndarray) -> Tuple[Any, Any]:
        g = self.check_x(x)
        Gs, _ = spanning_tree_rows(g.n_nodes, g.u, g.v, np.asarray(mu_true) > 0.5)
        return Gs, sp.csr_array((Gs.shape[0], 0))
