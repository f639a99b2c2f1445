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
from ._kernel_args import check_range, check_tree, float_array, int_array
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
    orders, parents, edge_ofs, Bts, b, B, eu, ev, max_iter, max_halvings = _checked_args(
        orders, parents, edge_ofs, Bts, b, B, edges, max_iter, max_halvings)
    scale = 1.0 + np.abs(b).sum() + np.abs(B).sum()
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
    b = float_array(b, "b (node scores)", owner, (None, None))
    n, k = b.shape
    if n == 0 or k == 0:
        raise InvalidInputError(f"{owner}: b (node scores) must have shape (n_nodes, "
                                f"n_labels) with n_nodes >= 1 and n_labels >= 1; got {b.shape}.")
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
    Bts = float_array(Bts, "Bts (the trees' edge scores)", owner, (T, n - 1, k, k))
    edges = np.asarray(edges)
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    edges = int_array(edges, "edges", owner, 2)
    if edges.shape[1] != 2:
        raise InvalidInputError(f"{owner}: edges must have shape (n_edges, 2); got "
                                f"{edges.shape}.")
    check_range(edges, 0, n - 1, "edges", owner)
    E = len(edges)
    B = float_array(B, "B (edge scores)", owner, (E, k, k))
    _check_cover(orders, parents, edge_ofs, Bts, B, edges, owner)
    eu = np.ascontiguousarray(edges[:, 0])
    ev = np.ascontiguousarray(edges[:, 1])
    return orders, parents, edge_ofs, Bts, b, B, eu, ev, int(max_iter), int(max_halvings)


def _check_cover(orders, parents, edge_ofs, Bts, B, edges, owner):
    """Each graph edge is a tree edge of exactly one tree, whose table is the edge's (or
    its transpose when the tree runs ``v -> u``); the other tree edges score zero (edges
    whose table is zero may be covered any number of times)."""
    T, n = orders.shape
    u, v = edges[:, 0], edges[:, 1]
    loops = np.flatnonzero(u == v)
    if len(loops):
        raise InvalidInputError(f"{owner}: edges[{loops[0]}] = ({u[loops[0]]}, "
                                f"{v[loops[0]]}) is a self-loop.")
    key = np.minimum(u, v) * n + np.maximum(u, v)
    srt = np.argsort(key, kind="stable")
    dup = np.flatnonzero(key[srt][1:] == key[srt][:-1])
    if len(dup):
        e = int(srt[dup[0] + 1])
        raise InvalidInputError(f"{owner}: edges[{e}] = ({u[e]}, {v[e]}) repeats an earlier "
                                "edge.")
    covered = np.zeros(len(edges), dtype=np.int64)
    for t in range(T):
        child = np.flatnonzero(parents[t] >= 0)
        par = parents[t][child]
        tab = Bts[t][edge_ofs[t][child]]                       # (n - 1, k, k)
        tkey = np.minimum(par, child) * n + np.maximum(par, child)
        at = np.searchsorted(key[srt], tkey)
        found = at < len(key)
        found[found] = key[srt][at[found]] == tkey[found]
        g = srt[np.minimum(at, max(len(srt) - 1, 0))] if len(srt) else at
        if np.any(tab[~found] != 0.0):
            j = int(child[np.flatnonzero(~found)[np.any(tab[~found] != 0.0, axis=(1, 2))][0]])
            raise InvalidInputError(
                f"{owner}: tree {t}'s edge ({parents[t][j]}, {j}) is not an edge of the graph, "
                "so its table in Bts must be zero (a closing edge); it is not.")
        if np.any(found):
            gf, pf = g[found], par[found]
            want = np.where((u[gf] == pf)[:, None, None], B[gf], B[gf].transpose(0, 2, 1))
            same = np.all(tab[found] == want, axis=(1, 2))
            zero = np.all(tab[found] == 0.0, axis=(1, 2))      # a closing edge
            off = np.flatnonzero(~same & ~zero)
            if len(off):
                e = int(gf[off[0]])
                raise InvalidInputError(
                    f"{owner}: tree {t}'s table in Bts for edge {e} = ({u[e]}, {v[e]}) is "
                    "neither that edge's table in B (transposed when the tree runs from "
                    f"{v[e]} to {u[e]}) nor zero (a closing edge).")
            np.add.at(covered, gf[same], 1)
    bad = np.flatnonzero((covered != 1) & np.any(B != 0.0, axis=(1, 2)))
    if len(bad):
        e = int(bad[0])
        raise InvalidInputError(
            f"{owner}: the trees must cover each edge exactly once; edges[{e}] = "
            f"({u[e]}, {v[e]}) is covered {covered[e]} times.")


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
