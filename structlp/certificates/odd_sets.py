"""Edmonds' odd-set certificate of matchings and perfect matchings (LP duality over the
matching polytope): exact on every graph, within a budget of tight odd sets."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

import numpy as np
import scipy.sparse as sp

from .base import CertificateRows

if TYPE_CHECKING:  # pragma: no cover
    pass


#: Default budget of tight odd sets per example in :func:`odd_set_rows`.
MAX_ODD_SETS = 5000


def n_tight_odd_sets(n: int, m: int, j: int, perfect: bool = False) -> int:
    """Number of odd sets ``S`` of ``2 j + 1`` nodes with ``j`` matched pairs inside.

    A matching with ``m`` pairs on ``n`` nodes is *tight* on such a set
    (``y(E(S)) = (|S| - 1) / 2``): ``S`` is ``j`` of its pairs and one node
    outside them, ``C(m, j) (n - 2 j)`` sets.  ``perfect``: only the sets
    without node 0 and of fewer than ``n - 1`` nodes (:func:`tight_odd_sets`),
    ``C(m - 1, j) (n - 2 j - 1)``.

    Examples
    --------
    >>> from structlp.certificates import n_tight_odd_sets
    >>> # C(2, 1) pairs times the 3 nodes outside: 6 triangles
    >>> n_tight_odd_sets(5, 2, 1)
    6
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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import tight_odd_sets
    >>> # node 4 unmatched
    >>> sets, complete = tight_odd_sets(5, np.array([[0, 1], [2, 3]]))
    >>> [s.tolist() for s in sets], complete
    ([[[0, 1, 2], [0, 1, 3], [0, 1, 4], [0, 2, 3], [1, 2, 3], [2, 3, 4]], [[0, 1, 2, 3, 4]]], True)
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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import odd_cycle_counterexample, odd_set_rows, potentials_exist
    >>> S, y = odd_cycle_counterexample()
    >>> u, v = np.triu_indices(6, 1)
    >>> rows = odd_set_rows(6, u, v, y[u, v].astype(bool), perfect=True)
    >>> # Edmonds' certificate proves M optimal
    >>> potentials_exist(rows.Gs, rows.Gnu, S[u, v])
    True
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
