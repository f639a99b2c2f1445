"""Dual decomposition of a pairwise MAP problem into trees, in one compiled loop.

For node scores ``b`` (n, k), edge scores ``B`` (E, k, k) and a cover of the graph's edges
by ``T`` spanning trees (forests closed by zero-score edges), the Lagrangian dual

.. math::

    \\min_{\\lambda:\\ \\sum_t \\lambda_t = 0}\\; \\sum_t \\max_y \\Big[\\sum_i
    (b_i / T + \\lambda_{t,i})(y_i) + \\sum_{e \\in F_t} B_e(y_e)\\Big]

equals the MAP problem's LP relaxation over the local polytope; each inner max is exact
max-sum on a tree (:mod:`structlp.graphical.maxsum`).  Subgradient steps use Polyak's rule
with the best primal score met, ``rho (dual - primal) / ||g||^2``, halving ``rho`` after 5
steps without a better dual.  The loop stops when

* the best labelling met attains the best dual bound (to ``1e-9`` of the scores' scale):
  it is an optimum of the LP, and integral -- *certified*;
* ``rho`` has been halved more than ``max_halvings`` times (a stalled dual, as on
  fractional optima), or after ``max_iter`` steps -- *not certified* (the caller solves
  the LP).

Two implementations of the same loop: a numba kernel (the whole loop compiled, no Python
per step) when numba imports, and a numpy loop over :func:`tree_max_sum` otherwise.  Their
iterates agree up to rounding (the compiled one sums ``||g||^2`` in another order), and
what either certifies is an exact LP optimum.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..compiled import jit, kernel as compiled_kernel, numba_module
from ..exceptions import InvalidInputError, InvalidParameterError
from ._kernel_args import (check_range, check_tree, edge_pairs, float_array, immutable,
                           int_array)
from . import maxsum
from .maxsum import _max_sum_kernel, tree_max_sum

#: The dual must improve by this fraction of the scores' scale to count as progress.
_PROGRESS = 1e-12
#: The primal-dual gap, in the scores' scale, at which a labelling is certified.
_CERTIFY = 1e-9
#: Steps without a better dual before the step size is halved.
_STALL = 5


def _score(eu, ev, b, B, y):
    s = 0.0
    for i in range(b.shape[0]):
        s += b[i, y[i]]
    for e in range(eu.shape[0]):
        s += B[e, y[eu[e]], y[ev[e]]]
    return s


def _step_size(dual, best_d, rho, stall, halvings, scale):
    """The best dual so far and the step size's state after a step of dual value ``dual``:
    ``rho`` halves after :data:`_STALL` steps without progress."""
    if dual < best_d - _PROGRESS * scale:
        return dual, rho, 0, halvings
    if stall + 1 >= _STALL:
        return best_d, rho / 2, 0, halvings + 1
    return best_d, rho, stall + 1, halvings


#: The loop's helpers as Python functions (the JIT rebinds their names to compiled ones).
_HELPERS = {"_score": _score, "_step_size": _step_size}


def _dd_kernel(orders, parents, edge_ofs, Bts, b, B, eu, ev, max_iter, max_halvings,
               scale):  # compiled by numba when available
    T, n = orders.shape
    k = b.shape[1]
    lam = np.zeros((T, n, k))
    ys = np.zeros((T, n), dtype=np.int64)
    bt = np.empty((n, k))
    count = np.zeros((n, k))
    best_y = np.zeros(n, dtype=np.int64)
    best_p, best_d = -np.inf, np.inf
    rho, stall, halvings = 1.0, 0, 0
    for it in range(max_iter):
        dual = 0.0
        for t in range(T):
            for i in range(n):
                for a in range(k):
                    bt[i, a] = b[i, a] / T + lam[t, i, a]
            y, v, _ = _max_sum_kernel(orders[t], parents[t], edge_ofs[t], bt, Bts[t])
            ys[t] = y
            dual += v
        for t in range(T):
            p = _score(eu, ev, b, B, ys[t])
            if p > best_p:
                best_p = p
                best_y[:] = ys[t]
        best_d, rho, stall, halvings = _step_size(dual, best_d, rho, stall, halvings, scale)
        if halvings > max_halvings:
            return best_y, False, it + 1
        if best_d - best_p <= _CERTIFY * scale:
            return best_y, True, it + 1
        # the subgradient g[t, i, a] = [ys[t, i] == a] - (the trees' mean), and ||g||^2
        count[:] = 0.0
        for t in range(T):
            for i in range(n):
                count[i, ys[t, i]] += 1.0
        gg = 0.0
        for i in range(n):
            for a in range(k):
                m = count[i, a] / T
                if m > 0.0:
                    # T - count trees have 0 here (g = -m), count trees have 1 (g = 1 - m)
                    gg += (T - count[i, a]) * m * m + count[i, a] * (1.0 - m) * (1.0 - m)
        if gg == 0.0:                      # all trees agree (caught above up to rounding)
            return ys[0].copy(), True, it + 1
        step = rho * (dual - best_p) / gg
        for t in range(T):
            for i in range(n):
                for a in range(k):
                    g = -count[i, a] / T
                    if ys[t, i] == a:
                        g += 1.0
                    lam[t, i, a] -= step * g
    return best_y, False, max_iter


def _dd_numpy(orders, parents, edge_ofs, Bts, b, B, eu, ev, max_iter, max_halvings, scale):
    T, n = orders.shape
    k = b.shape[1]
    lam = np.zeros((T, n, k))
    best_y, best_p, best_d = np.zeros(n, dtype=np.int64), -np.inf, np.inf
    rho, stall, halvings = 1.0, 0, 0
    rows = np.arange(n)
    for it in range(max_iter):
        ys, dual = np.zeros((T, n), dtype=np.int64), 0.0
        for t in range(T):
            ys[t], v = tree_max_sum(orders[t], parents[t], edge_ofs[t], b / T + lam[t], Bts[t],
                                    backend="numpy")
            dual += v
        for t in range(T):
            p = float(b[rows, ys[t]].sum() + B[np.arange(len(eu)), ys[t][eu], ys[t][ev]].sum())
            if p > best_p:
                best_p, best_y = p, ys[t].copy()
        best_d, rho, stall, halvings = _step_size(dual, best_d, rho, stall, halvings, scale)
        if halvings > max_halvings:
            return best_y, False, it + 1
        if best_d - best_p <= _CERTIFY * scale:
            return best_y, True, it + 1
        onehot = np.zeros((T, n, k))
        for t in range(T):
            onehot[t, rows, ys[t]] = 1.0
        g = onehot - onehot.sum(axis=0) / T
        gg = float((g * g).sum())
        if gg == 0.0:
            return ys[0].copy(), True, it + 1
        lam -= rho * (dual - best_p) / gg * g
    return best_y, False, max_iter


def _numba_kernel():
    """The compiled loop: built ahead of time (:mod:`structlp.compiled`), else numba's
    JIT; None without either."""
    return compiled_kernel("dual_decomposition", _dd_kernel, _jit)


def _jit():
    """The loop compiled by numba's JIT (on first use, cached on disk), or None."""
    if numba_module() is None:
        return None
    # numba resolves the loop's globals when it compiles: bind them to compiled code
    # (max-sum's own dispatcher, so that both share one compilation and its cache)
    globals()["_max_sum_kernel"] = maxsum._jit()
    for name, fn in _HELPERS.items():
        globals()[name] = jit(fn)
    return jit(_dd_kernel)


def tree_dual_decomposition(orders: np.ndarray, parents: np.ndarray, edge_ofs: np.ndarray,
                            Bts: np.ndarray, b: np.ndarray, B: np.ndarray, edges: np.ndarray,
                            max_iter: int, max_halvings: int,
                            backend: str = "auto") -> Tuple[np.ndarray, bool, int]:
    """Subgradient dual decomposition of ``max_y sum_i b[i, y_i] + sum_e B[e, y_u, y_v]``.

    Parameters
    ----------
    orders, parents, edge_ofs : int arrays (T, n)
        The ``T`` trees (:func:`structlp.graphical.maxsum.tree_max_sum`'s arguments, one row
        per tree); their edges must cover the graph's edges once.
    Bts : float array (T, n - 1, k, k)
        Each tree's edge scores (the graph's ``B`` on its edges, zero on closing edges).
    b : float array (n, k); B : float array (E, k, k); edges : int array (E, 2)
    max_iter, max_halvings : int
    backend : {"auto", "numba", "numpy"}

    Returns
    -------
    y : int array (n,)
        The best labelling met.
    certified : bool
        Whether ``y`` attains the dual bound (so maximizes the LP over the local polytope).
    iterations : int

    Raises
    ------
    InvalidInputError
        An argument that is not as described (named in the message): index arrays not of
        integers or of other shapes, a row of ``orders``/``parents``/``edge_ofs`` that is
        not a tree (as :func:`~structlp.graphical.maxsum.tree_max_sum` checks), an edge
        naming a node out of range or a self-loop, a repeated edge, tables ``Bts``/``B``
        of other shapes, or trees that do not cover each edge of ``edges`` exactly once
        with its table (transposed when the tree runs the other way; closing edges
        zero), scores not finite.
    InvalidParameterError
        ``max_iter`` or ``max_halvings`` not an int >= 0.
    """
    orders, parents, edge_ofs, Bts, b, B, eu, ev, max_iter, max_halvings, scale = \
        _checked_args(orders, parents, edge_ofs, Bts, b, B, edges, max_iter, max_halvings)
    if backend not in ("auto", "numba", "numpy"):
        raise InvalidInputError(f"backend must be 'auto', 'numba' or 'numpy'; got {backend!r}.")
    kernel: Any = None if backend == "numpy" else _numba_kernel()
    if kernel is None:
        if backend == "numba":
            raise InvalidInputError("backend='numba' needs numba, which could not be "
                                    "imported (pip install numba).")
        kernel = _dd_numpy
    y, certified, iterations = kernel(orders, parents, edge_ofs, Bts, b, B, eu, ev,
                                      max_iter, max_halvings, float(scale))
    return np.asarray(y, dtype=np.int64), bool(certified), int(iterations)


def _checked_args(orders, parents, edge_ofs, Bts, b, B, edges, max_iter, max_halvings):
    """:func:`tree_dual_decomposition`'s arguments checked, as its kernel takes them
    (``edges`` split into ``eu``, ``ev``); raises InvalidInputError naming the first bad
    one."""
    owner = "tree_dual_decomposition"
    for name, v in (("max_iter", max_iter), ("max_halvings", max_halvings)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidParameterError(f"{owner}: {name} must be an int >= 0; got {v!r}.")
    b = float_array(b, "b (node scores)", owner, (None, None), finite=False)
    n, k = b.shape
    if n == 0 or k == 0:
        raise InvalidInputError(f"{owner}: b (node scores) must have shape (n_nodes, "
                                f"n_labels) with n_nodes >= 1 and n_labels >= 1; got {b.shape}.")
    ident = (id(orders), id(parents), id(edge_ofs), id(edges), n, k)
    hit = _BY_IDENTITY.get(ident)
    if hit is not None and hit[0][0] is orders and hit[0][1] is parents \
            and hit[0][2] is edge_ofs and hit[0][3] is edges:
        cover = hit[1]                    # the same immutable arrays, checked before
    else:
        raw = (orders, parents, edge_ofs, edges)
        orders, parents, edge_ofs, edges, cover = _checked_structure(
            orders, parents, edge_ofs, edges, n, k, owner)
        if all(isinstance(a, np.ndarray) and a.dtype == np.int64 and a.flags.c_contiguous
               and immutable(a) for a in raw):
            if len(_BY_IDENTITY) > 256:
                _BY_IDENTITY.clear()
            _BY_IDENTITY[ident] = (raw, cover)
    T = orders.shape[0]
    Bts = float_array(Bts, "Bts (the trees' edge scores)", owner, (T, n - 1, k, k),
                      finite=False)         # equal to B's tables or zero: checked below
    B = float_array(B, "B (edge scores)", owner, (len(edges), k, k), finite=False)
    scale = 1.0 + np.abs(b).sum() + np.abs(B).sum()
    if not np.isfinite(scale):
        raise InvalidInputError(f"{owner}: the scores b and B must be finite (and their sum "
                                "of magnitudes too); got NaN, infinite or overflowing values.")
    _check_tables(cover, Bts, B, edges, owner)
    return (orders, parents, edge_ofs, Bts, b, B, cover["eu"], cover["ev"], int(max_iter),
            int(max_halvings), scale)


_COVERS: dict = {}        # (trees, edges, k) bytes -> their checked cover
_BY_IDENTITY: dict = {}   # ids of immutable trees and edges arrays -> their checked cover


def _checked_structure(orders, parents, edge_ofs, edges, n, k, owner):
    """The trees and edges checked (each tree as :func:`tree_max_sum` checks it; edges
    in range, no self-loop, no repeat) and their tree edges matched to graph edges:
    ``(orders, parents, edge_ofs, edges, cover)``; the cover is remembered per distinct
    content."""
    orders, parents, edge_ofs = (int_array(a, name, owner, 2) for a, name in
                                 ((orders, "orders"), (parents, "parents"),
                                  (edge_ofs, "edge_ofs")))
    T = orders.shape[0]
    if T == 0 or any(a.shape != (T, n) for a in (orders, parents, edge_ofs)):
        raise InvalidInputError(
            f"{owner}: orders, parents and edge_ofs must have shape (n_trees, n_nodes) with "
            f"n_trees >= 1 and n_nodes = {n} (the rows of b); got {orders.shape}, "
            f"{parents.shape}, {edge_ofs.shape}.")
    for t in range(T):
        check_tree(orders[t], parents[t], edge_ofs[t], n, owner, which=f"[{t}]")
    edges = edge_pairs(edges, owner)
    key = b"|".join(a.tobytes() for a in (orders, parents, edge_ofs, edges)) \
        + bytes(str((orders.shape, k)), "ascii")
    cover = _COVERS.get(key)
    if cover is None:
        cover = _cover_map(orders, parents, edge_ofs, edges, k, owner)
        if len(_COVERS) > 256:
            _COVERS.clear()
        _COVERS[key] = cover
    return orders, parents, edge_ofs, edges, cover


def _cover_map(orders, parents, edge_ofs, edges, k, owner):
    """For the tree edges of all trees at once: ``(t, slot, g, flip)`` of those joining the
    two ends of graph edge ``g`` (``flip``: the tree runs ``v -> u``) and ``(t, slot)`` of
    the others (closing edges), with the flat indices that compare their tables in one
    step (``Bts.ravel()[tab] == B.ravel()[want]``, ``Bts.ravel()[closing] == 0``)."""
    T, n = orders.shape
    check_range(edges, 0, n - 1, "edges", owner)
    u, v = edges[:, 0], edges[:, 1]
    loops = np.flatnonzero(u == v)
    if len(loops):
        raise InvalidInputError(f"{owner}: edges[{loops[0]}] = ({u[loops[0]]}, "
                                f"{v[loops[0]]}) is a self-loop.")
    gkey = np.minimum(u, v) * n + np.maximum(u, v)
    srt = np.argsort(gkey, kind="stable")
    sk = gkey[srt]
    dup = np.flatnonzero(sk[1:] == sk[:-1])
    if len(dup):
        e = int(srt[dup[0] + 1])
        raise InvalidInputError(f"{owner}: edges[{e}] = ({u[e]}, {v[e]}) repeats an earlier "
                                "edge.")
    t_idx, child = np.nonzero(parents >= 0)
    par = parents[t_idx, child]
    slot = edge_ofs[t_idx, child]
    tkey = np.minimum(par, child) * n + np.maximum(par, child)
    at = np.minimum(np.searchsorted(sk, tkey), max(len(sk) - 1, 0))
    found = (sk[at] == tkey) if len(sk) else np.zeros(len(tkey), dtype=bool)
    g = srt[at[found]] if len(sk) else np.zeros(0, dtype=np.int64)
    flip = u[g] != par[found]
    t, sl, t0, sl0 = t_idx[found], slot[found], t_idx[~found], slot[~found]
    ab = np.arange(k * k)
    a, c = ab // k, ab % k
    n1 = n - 1
    tab = ((t * n1 + sl)[:, None] * (k * k) + ab[None, :]).ravel()
    want = (g[:, None] * (k * k) + np.where(flip[:, None], c * k + a, ab)[None, :]
            if len(g) else np.zeros((0, k * k), dtype=np.int64)).ravel()
    closing = ((t0 * n1 + sl0)[:, None] * (k * k) + ab[None, :]).ravel()
    return {"t": t, "g": g, "t0": t0,
            "par0": par[~found], "child0": child[~found], "tab": tab, "want": want,
            "closing": closing, "eu": np.ascontiguousarray(u), "ev": np.ascontiguousarray(v),
            "pattern": None}


def _check_tables(cover, Bts, B, edges, owner):
    """Each graph edge is a tree edge of exactly one tree, whose table is the edge's (or
    its transpose when the tree runs ``v -> u``); the other tree edges score zero (edges
    whose table is zero may be covered any number of times).  The tree edges found to
    carry the tables are remembered: the next call with the same trees checks them, and
    that the others are zero, in two steps."""
    flat_t, flat_b = Bts.reshape(-1), B.reshape(-1)
    pattern = cover["pattern"]
    if pattern is not None and np.array_equal(flat_t[pattern[0]], flat_b[pattern[1]]) \
            and not flat_t[pattern[2]].any() and not flat_b[pattern[3]].any():
        return
    k = B.shape[1]
    kk = k * k
    g, ia, ib = cover["g"], cover["tab"], cover["want"]
    other = flat_t[cover["closing"]].reshape(-1, kk)
    if other.size and np.any(other != 0.0):
        i = int(np.flatnonzero(np.any(other != 0.0, axis=1))[0])
        raise InvalidInputError(
            f"{owner}: tree {cover['t0'][i]}'s edge ({cover['par0'][i]}, "
            f"{cover['child0'][i]}) is not an edge of the graph, so its table in Bts must be "
            "zero (a closing edge); it is not.")
    tab = flat_t[ia].reshape(-1, kk)
    same = np.all(tab == flat_b[ib].reshape(-1, kk), axis=1)
    zero = np.all(tab == 0.0, axis=1)               # a closing edge along a graph edge
    off = np.flatnonzero(~same & ~zero)
    if len(off):
        e = int(g[off[0]])
        u, v = edges[e]
        raise InvalidInputError(
            f"{owner}: tree {cover['t'][off[0]]}'s table in Bts for edge {e} = ({u}, {v}) is "
            "neither that edge's table in B (transposed when the tree runs from "
            f"{v} to {u}) nor zero (a closing edge).")
    nonzero = np.any(B.reshape(len(edges), kk) != 0.0, axis=1)
    covered = np.bincount(g, weights=same & ~zero, minlength=len(edges))
    bad = np.flatnonzero((covered != 1) & nonzero)
    if len(bad):
        e = int(bad[0])
        raise InvalidInputError(
            f"{owner}: the trees must cover each edge exactly once; edges[{e}] = "
            f"({edges[e, 0]}, {edges[e, 1]}) is covered {int(covered[e])} times.")
    # remember one carrying tree edge per graph edge (a non-zero table first), the rest zero
    rank = np.lexsort((~(same & ~zero), ~same, g))
    first = np.ones(len(rank), dtype=bool)
    first[1:] = g[rank][1:] != g[rank][:-1]
    carry = np.zeros(len(g), dtype=bool)
    carry[rank[first & same[rank]]] = True
    rows = np.arange(len(g))
    pos = (rows[carry][:, None] * kk + np.arange(kk)[None, :]).ravel()
    rest = (rows[~carry][:, None] * kk + np.arange(kk)[None, :]).ravel()
    uncovered = np.flatnonzero(np.bincount(g, minlength=len(edges)) == 0)
    unc = (uncovered[:, None] * kk + np.arange(kk)[None, :]).ravel()
    cover["pattern"] = (ia[pos], ib[pos], np.concatenate([cover["closing"], ia[rest]]), unc)


def _check_kernel_args(orders, parents, edge_ofs, Bts, b, B, eu, ev, max_iter, max_halvings,
                       scale):
    """The value check of the compiled kernel's arguments (:func:`structlp.compiled.aot`)."""
    eu, ev = np.asarray(eu), np.asarray(ev)
    if eu.shape != ev.shape:
        raise InvalidInputError(f"dual_decomposition: eu and ev must have one entry per edge; "
                                f"got shapes {eu.shape} and {ev.shape}.")
    _checked_args(orders, parents, edge_ofs, Bts, b, B, np.column_stack([eu, ev]), max_iter,
                  max_halvings)
    if not (np.isfinite(scale) and scale > 0):
        raise InvalidInputError(f"dual_decomposition: scale must be finite and > 0; got "
                                f"{scale!r}.")
