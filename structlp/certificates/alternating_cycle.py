"""The alternating-cycle certificate of perfect matchings (Taskar et al. 2005, Eq. 13) and
the graph-copy reduction of matchings to perfect matchings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from .base import CertificateRows

if TYPE_CHECKING:  # pragma: no cover
    pass


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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import alternating_cycle_rows, potentials_exist
    >>> # the 4-cycle 0-1-3-2-0
    >>> u, v = np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])
    >>> in_M = np.array([True, False, False, True])                 # M = {01, 23}
    >>> rows = alternating_cycle_rows(4, u, v, in_M, np.arange(4), n_parts=4)
    >>> # M is optimal
    >>> potentials_exist(rows.Gs, rows.Gnu, np.array([1.0, 0.0, 0.0, 1.0]))
    True
    >>> # {02, 13} is better
    >>> potentials_exist(rows.Gs, rows.Gnu, np.array([0.0, 1.0, 1.0, 0.0]))
    False
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


def potentials_exist(Gs: Any, Gd: Any, scores: ArrayLike) -> bool:
    """Whether potentials ``nu`` with ``Gs @ scores + Gd @ nu >= 0`` exist (an LP, HiGHS).

    Parameters
    ----------
    Gs : sparse (R, L); Gd : sparse (R, k); scores : array (L,)

    Returns
    -------
    bool

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from structlp.certificates import potentials_exist
    >>> Gs = sp.csr_array(np.array([[1.0, -1.0]]))       # s_0 - s_1 + nu >= 0 ...
    >>> # ... with no potential to help
    >>> Gd = sp.csr_array(np.array([[0.0]]))
    >>> potentials_exist(Gs, Gd, np.array([2.0, 1.0]))
    True
    >>> potentials_exist(Gs, Gd, np.array([1.0, 2.0]))
    False
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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import graph_copy
    >>> # path 0-1-2, M = {01}
    >>> u, v, in_M = np.array([0, 1]), np.array([1, 2]), np.array([True, False])
    >>> U, V, part, in_M2 = graph_copy(3, u, v, in_M)
    >>> list(zip(U.tolist(), V.tolist(), part.tolist(), in_M2.tolist()))
    [(0, 1, 0, True), (1, 2, 1, False), (3, 4, 0, True), (4, 5, 1, False), (0, 3, -1, False), (1, 4, -1, False), (2, 5, -1, True)]
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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import (alternating_cycle_rows, odd_cycle_counterexample,
    ...                                    potentials_exist)
    >>> S, y = odd_cycle_counterexample()
    >>> u, v = np.triu_indices(6, 1)
    >>> rows = alternating_cycle_rows(6, u, v, y[u, v].astype(bool), np.arange(len(u)), len(u))
    >>> # the optimal M is not certified
    >>> potentials_exist(rows.Gs, rows.Gnu, S[u, v])
    False
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
