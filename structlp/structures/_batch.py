"""Vectorised preparation of a training set of chains and trees
(:class:`~.tree_labeling.TreeLabeling`) and of bipartite matchings
(:class:`~.bipartite_matching.BipartiteMatching`): what :func:`structlp.compiler.prepare`
computes example by example through the models' hooks, for all examples at once: the
features checked (and their rows' norms summed, for the scale check) by chunks of
concatenated rows, the parents and labels packed, the loss coefficients and the true
outputs by their nonzeros in one array each (:meth:`~structlp.compiler.SparseVectors.packed`),
the checks as array operations.  The examples and their feature operators are made on
access (:class:`_Packed`), so that no Python object per example is kept.

The vectorised code accepts a narrow format only (the examples and outputs as numpy arrays
of real dtypes, in a dict of arrays for trees); it never words a refusal.  It finds the
first example it cannot accept (``suspect``): a prefix of the set is scanned again until
no earlier example is suspect, so that the suspect is the first example any of the checks
refuses, and :func:`~structlp.compiler.prepare` then runs the per-example hooks on it, which
raise their own error naming it (or, when they accept it, an input only the hooks handle,
prepare every example through them).
"""

from __future__ import annotations

from collections.abc import Sequence
import itertools
from operator import attrgetter, itemgetter
from typing import Any, Callable, Iterator, List, Union

import numpy as np

from ..compiler import PolytopeCache, SparseVectors, first_false
from ..formulations import TrainingData
from ..graphical.losses import check_loss
from ..graphical.trees import TreeExample, tree_shape
from ..utils.validation import check_scale, row_norm_sums

#: What a vectorised preparation returns: the prepared data, the first suspect example,
#: or None (the set or the model is outside what it handles: every example by the hooks).
Prepared = Union[TrainingData, int, None]

_REAL = "biuf"


def _first_suspect(scan: Callable[[int], Any], m: int) -> Any:
    """``scan(end)`` of the examples ``0..end-1`` returns their arrays or the first suspect
    among them; scanned again on the prefix before a suspect until none is: returns the
    arrays of all ``m`` examples, or the first suspect (an int)."""
    end = m
    while True:
        got = scan(end)
        if not isinstance(got, (int, np.integer)):
            return got if end == m else end
        if got == 0:
            return 0
        end = int(got)


def _example_of(row: int, starts: np.ndarray) -> int:
    """The example whose rows (from ``starts``, increasing) hold packed row ``row``."""
    return int(np.searchsorted(starts, row, side="right") - 1)


def _first_not_finite(A: np.ndarray, starts: np.ndarray, sq: Any = None) -> int:
    """The first example with a non-finite entry in its rows of ``A`` (rows from
    ``starts``), or ``len(starts)``; ``sq``: the rows' sums of squares if at hand (a row
    whose sum is finite is finite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = A.sum(axis=tuple(range(1, A.ndim))) if sq is None else sq
    rows = np.flatnonzero(~np.isfinite(s))
    if rows.size:
        flat = A[rows].reshape(len(rows), -1)
        rows = rows[~np.isfinite(flat).all(axis=1)]
    return _example_of(int(rows[0]), starts) if rows.size else len(starts)


class _Packed(Sequence):
    """The examples (or their part features) of a prepared set, item ``i`` made when asked
    from the checked arrays: an item read by index is kept (a learner's steps
    read their examples again and again), one met while iterating is not (the compiled
    passes read every example once, to pack it): no Python object per example is held
    unless a learner reads it by index."""

    def __init__(self, m: int) -> None:
        self._m = m
        self._kept: dict = {}

    def _make(self, i: int) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __len__(self) -> int:
        return self._m

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._m))]
        i = range(self._m)[i]                   # negative indices; IndexError past the end
        item = self._kept.get(i)
        if item is None:
            item = self._kept[i] = self._make(i)
        return item

    def __iter__(self) -> Iterator[Any]:
        kept = self._kept
        for i in range(self._m):
            item = kept.get(i)
            yield item if item is not None else self._make(i)


class _Trees(_Packed):
    """Tree examples (:class:`~structlp.graphical.trees.TreeExample`) of the checked node
    and edge features packed, ``V`` (N, d_v) and ``E`` (N - m, d_e) (float, example after
    example: example ``i``'s are views of rows ``noff[i]:noff[i + 1]`` and ``noff[i] - i:
    noff[i + 1] - i - 1``), and their checked shapes: ``n`` (m,) the node counts, ``chain``
    (m,) which examples are chains (their shapes shared, ``by_n``: one per length), and
    ``tree`` None (every example a chain) or the arrays of all examples, ``(parents, order,
    edge_child, edge_of)`` ((N,), (N,), (N - m,), (N,), local indices; an example's are
    read-only views of them)."""

    def __init__(self, V, E, n, chain, by_n, tree):
        super().__init__(len(n))
        self.V, self.E, self.n, self.chain, self.by_n, self.tree = V, E, n, chain, by_n, tree
        self.noff = np.zeros(len(n) + 1, dtype=np.int64)
        np.cumsum(n, out=self.noff[1:])

    def _make(self, i):
        b, e = int(self.noff[i]), int(self.noff[i + 1])
        if self.chain[i]:
            shape = self.by_n[e - b]
        else:
            par, order, child, edge_of = self.tree
            shape = tuple(_read_only(a[s:t]) for a, s, t in (
                (par, b, e), (order, b, e), (child, b - i, e - i - 1), (edge_of, b, e)))
        return TreeExample(self.V[b:e], self.E[b - i:e - i - 1], *shape)

    def concatenated(self):
        """All trees at once, without an object per example: ``(n, noff, V, E, parents,
        order, edge_of)``, the node counts (m,), node offsets (m + 1,), node features
        (N, d_v) and edge features (N - m, d_e) (the packed arrays themselves), and each
        node's parent, breadth-first position and parent edge (N,) in its example's local
        indices (as :class:`~structlp.graphical.trees.TreeExample` has them; the packed
        arrays themselves unless every example is a chain)."""
        n, noff = self.n, self.noff
        if self.tree is not None:
            parents, order, _, edge_of = self.tree
            return n, noff, self.V, self.E, parents, order, edge_of
        loc = np.arange(int(noff[-1]), dtype=np.int64) - np.repeat(noff[:-1], n)
        return n, noff, self.V, self.E, loc - 1, loc, loc - 1


def _read_only(a):
    a.flags.writeable = False
    return a


def _sort_key(size):
    """The dtype of sort keys in ``0..size-1``: 16 bits where they fit (numpy's stable
    sort is then a radix sort)."""
    return np.uint16 if size <= 2 ** 16 else np.int64


def _tree_shapes(P, n):
    """:func:`~structlp.graphical.trees.tree_shape` of several parent arrays at once: ``P``
    their entries packed (local node indices), ``n`` their lengths (>= 1).  Returns the
    first array that is not a tree (one root, parents in range, no node its own parent,
    every node reaching the root), or the packed read-only ``(parents, order, edge_child,
    edge_of, node offsets, edge offsets)``, ``order`` the breadth-first order of
    :func:`~structlp.graphical.trees.check_parents` (children by index): level by level
    from the roots, each node's children (by index) after those of the nodes before it."""
    m, N = len(n), len(P)
    off = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(n, out=off[1:])
    ex = np.repeat(np.arange(m), n)
    loc = np.arange(N) - off[ex]
    root = P == -1
    bad = (P < -1) | (P >= n[ex]) | (P == loc)
    ok = (np.add.reduceat(root, off[:-1], dtype=np.int64) == 1) \
        & ~np.logical_or.reduceat(bad, off[:-1])
    if not ok.all():
        return first_false(ok)
    child = np.flatnonzero(~root)
    up = P[child] + off[ex[child]]                 # the non-roots' parents, packed
    # each node's children by index (a stable sort: radix on 16-bit keys), kids[first[j]:
    # first[j + 1]] those of node j
    kids = child[np.argsort(up.astype(_sort_key(N)), kind="stable")]
    first = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(np.bincount(up, minlength=N), out=first[1:])
    level = np.flatnonzero(root)                   # one per example, in order
    levels = [level]
    while True:
        cnt = first[level + 1] - first[level]
        total = int(cnt.sum())
        if total == 0:
            break
        ends = np.cumsum(cnt)
        level = kids[np.arange(total) + np.repeat(first[level] - (ends - cnt), cnt)]
        levels.append(level)
    bfs = np.concatenate(levels)             # each level by example: merged by example
    if len(bfs) < N:                         # a cycle: nodes the root does not reach
        return first_false(np.bincount(ex[bfs], minlength=m) == n)
    order = loc[bfs[np.argsort(ex[bfs].astype(_sort_key(m)), kind="stable")]]
    eoff = off - np.arange(m + 1)
    edge_of = np.full(N, -1, dtype=np.int64)
    edge_of[child] = np.arange(len(child)) - eoff[ex[child]]
    out = (P.astype(np.int64), order, loc[child], edge_of)
    for a in out:
        a.flags.writeable = False
    return out + (off, eoff)


class _TreeOps(_Packed):
    """The factored part features (:class:`~.tree_labeling.TreeFeatures`) of ``_Trees``."""

    def __init__(self, trees, k):
        super().__init__(len(trees))
        self.trees, self.k = trees, k

    def _make(self, i):
        from .tree_labeling import TreeFeatures
        x = self.trees._kept.get(i)
        return TreeFeatures(x if x is not None else self.trees._make(i), self.k)


class _Rows(_Packed):
    """The checked arrays ``A[i]`` (``parts``: reshaped to (L, d), the explicit part
    features; ``operator``: as :class:`~structlp.part_features.MatrixFeatures`)."""

    def __init__(self, A, parts=False, operator=False):
        super().__init__(len(A))
        self.A, self.parts, self.operator = A, parts, operator

    def _make(self, i):
        a = self.A[i]
        if self.parts:
            a = a.reshape(-1, a.shape[-1])
        if self.operator:
            from ..part_features import MatrixFeatures
            a = MatrixFeatures(a)
        return a


#: Examples per chunk of the checks and norms (the arrays of one chunk are made at once).
CHUNK = 1024
#: Examples per chunk of the trees' breadth-first orders (a loop over their levels each).
TREE_CHUNK = 4096


def _as_float(arrays):
    """The arrays as float64 (the same objects when they are: what the hooks keep)."""
    return [a if a.dtype == np.float64 else a.astype(float) for a in arrays]


def _checked_norms(arrays, a, starts=None, A=None):
    """The first example of ``arrays[a:]`` (one chunk) with a non-finite entry (its index
    in the whole set), or the sums of its rows' norms per example (``row_norm_sums``,
    over the rows of each array, 2-D; ``starts``: its rows' starts in the chunk); ``A``:
    the chunk's rows packed already (2-D)."""
    if A is None:
        A = np.concatenate(arrays, axis=0) if arrays[0].ndim == 2 else np.stack(arrays)
        A = A.reshape(-1, A.shape[-1])
    if starts is None:
        starts = np.arange(len(arrays), dtype=np.int64) * (len(A) // max(len(arrays), 1))
    with np.errstate(over="ignore", invalid="ignore"):
        sq = np.einsum("ij,ij->i", A, A)
    bad = _first_not_finite(A, starts, sq)
    if bad < len(arrays):
        return a + bad
    return row_norm_sums(A, starts, sq)


# ------------------------------------------------------------------ trees and chains
def prepare_trees(model: Any, X: List[Any], Y: List[Any], need_polytopes: bool,
                  operators: bool) -> Prepared:
    """:func:`~structlp.compiler.prepare` of tree examples (``operators=True``; node weights
    None or "position"), from packed arrays: see the module docstring."""
    nw = model.node_weights
    if not operators or not (nw is None or (isinstance(nw, str) and nw == "position")):
        return None
    k = int(model._k())
    L = check_loss(model.loss, k, owner="TreeLabeling")[1]
    m = len(X)
    x0 = X[0]
    if type(x0) is not dict or type(x0.get("node_features")) is not np.ndarray \
            or type(x0.get("edge_features")) is not np.ndarray:
        return None
    dv, de = x0["node_features"].shape[-1], x0["edge_features"].shape[-1]
    got = _first_suspect(lambda end: _scan_trees(X, Y, end, k, dv, de), m)
    if isinstance(got, (int, np.integer)):
        return int(got)
    n, noff, V, E, par, lab, G, chain, by_n, tree = got
    sizes = n * k + (n - 1) * (k * k)
    c, lam = _node_losses(model, L, k, n, noff, lab, sizes)
    mu = _true_parts(k, n, noff, par, lab, sizes)
    del par, lab
    # the scale check (:func:`check_scale`, its errors) from the rows' norms
    bounds = check_scale(None, None, None, bounds=(G, lam))   # type: ignore[arg-type]
    Xs = _Trees(V, E, n, chain, by_n, tree)
    polys: list = [None] * m
    if need_polytopes:                  # one polytope per distinct tree
        cache = PolytopeCache(model)
        ci = np.flatnonzero(chain)
        lens, at = np.unique(n[ci], return_index=True)
        of_n = {int(v): cache.get(Xs._make(int(ci[j])), int(ci[j]), int(sizes[ci[j]]))
                for v, j in zip(lens, at)}
        polys = [of_n.get(v) for v in n.tolist()]
        for i in np.flatnonzero(~chain).tolist():
            polys[i] = cache.get(Xs._make(i), i, int(sizes[i]))
    return TrainingData(_TreeOps(Xs, k), polys, c, np.zeros(m), mu, Xs,  # type: ignore
                        Y, k * dv + k * k * de, bounds)


def _node_losses(model, L, k, n, noff, lab, sizes):
    """The loss coefficients ``c[i k + a] = w_i L[a, y_i]`` of the node parts (node weights
    None or "position", normalized or not) by their nonzeros, and each example's
    ``sum |c|``; made by chunks of examples (the nonzeros counted, then written in place).
    The counts are those of ``L``'s columns (``w_i > 0``) unless a normalized weight could
    take a product to zero; then they are counted from the products."""
    m = len(n)
    position = model.node_weights is not None
    normalize = bool(model.normalize_weights)

    LT = np.ascontiguousarray(L.T)         # row b: the losses of each label against b

    def chunk(a, b):
        lo, hi = int(noff[a]), int(noff[b])
        exl = np.repeat(np.arange(b - a), n[a:b])
        Cn = LT[lab[lo:hi]]                                # (nodes, k)
        if position or normalize:
            w = np.ones(hi - lo)
            loc = np.arange(hi - lo) - (noff[a:b] - lo)[exl]
            if position:
                w = (loc + 1).astype(float)
            if normalize:
                nn = n[a:b]
                s = nn.astype(float) if not position else (nn * (nn + 1) / 2).astype(float)
                w = w / s[exl]
            Cn *= w[:, None]
        return Cn, exl

    nz = np.count_nonzero(L, axis=0)                       # by true label
    s_max = float(n.max()) * (float(n.max()) + 1) / 2 if position else float(n.max())
    by_columns = not normalize or float(L[L > 0].min(initial=np.inf)) / s_max > 1e-300
    cnt = np.zeros(m, dtype=np.int64)
    for a in range(0, m, CHUNK):
        b = min(m, a + CHUNK)
        if by_columns:
            lo = int(noff[a])
            cnt[a:b] = np.add.reduceat(nz[lab[lo:int(noff[b])]], noff[a:b] - lo)
        else:
            Cn, exl = chunk(a, b)
            cnt[a:b] = np.bincount(exl, weights=np.count_nonzero(Cn, axis=1),
                                   minlength=b - a)
    off = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(cnt, out=off[1:])
    small = int(sizes.max()) < 2 ** 31
    idx = np.empty(int(off[-1]), dtype=np.int32 if small else np.int64)
    val = np.empty(int(off[-1]))
    lam = np.zeros(m)
    for a in range(0, m, CHUNK):
        b = min(m, a + CHUNK)
        Cn, exl = chunk(a, b)
        at = np.flatnonzero(Cn)                            # by node, then label
        v = Cn.ravel()[at]
        ex = exl[at // k]
        idx[off[a]:off[b]] = at - ((noff[a:b] - noff[a]) * k)[ex]
        val[off[a]:off[b]] = v
        lam[a:b] = np.bincount(ex, weights=np.abs(v), minlength=b - a)
    return SparseVectors.packed(idx, val, cnt, sizes), lam


def _true_parts(k, n, noff, par, lab, sizes):
    """The true outputs by their nonzeros: each example's node indicators ``i k + y_i``,
    then its edge indicators ``n k + e k^2 + y_parent k + y_child`` (edges by child index),
    made by chunks of examples; ``par`` (N,) the parents, ``lab`` (N,) the labels."""
    m = len(n)
    counts = 2 * n - 1
    mo = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(counts, out=mo[1:])
    idx = np.empty(int(mo[-1]), dtype=np.int32 if int(sizes.max()) < 2 ** 31 else np.int64)
    for a in range(0, m, CHUNK):
        b = min(m, a + CHUNK)
        lo, hi = int(noff[a]), int(noff[b])
        nn = n[a:b]
        st = noff[a:b] - lo                                # the examples' first nodes
        exl = np.repeat(np.arange(b - a), nn)
        loc = np.arange(hi - lo) - st[exl]
        y, p = lab[lo:hi], par[lo:hi]
        out, at = idx[mo[a]:mo[b]], mo[a:b] - mo[a]
        out[at[exl] + loc] = loc * k + y
        child = np.flatnonzero(p >= 0)
        ec = exl[child]
        e = np.arange(len(child)) - (st - np.arange(b - a))[ec]   # the example's edge
        out[at[ec] + nn[ec] + e] = (nn[ec] * k + e * (k * k) + y[p[child] + st[ec]] * k
                                    + y[child])
    return SparseVectors.packed(idx, np.ones(len(idx)), counts, sizes)


_DTYPE = attrgetter("dtype")
_TREE_KEYS = ("node_features", "edge_features", "parents")
_TREE_KINDS = (_REAL, _REAL, "iu", "iuf")      # of node and edge features, parents, labels


def _copy_joined(out, arrays, dtypes):
    """Copy the entries of ``arrays`` (their dtypes ``dtypes``, a set) into ``out`` (1-D,
    of as many entries), their bytes joined: without ``np.concatenate``'s cost per array,
    when every one is a C-contiguous array of ``out``'s dtype.  Returns whether it did.
    (Exporting an array's buffer makes numpy keep a small description of it, some tens of
    bytes, on that array for its lifetime: the given examples grow by that much.)"""
    if dtypes != {out.dtype}:
        return False
    try:
        joined = bytearray().join(arrays)
    except TypeError:                  # one is not C-contiguous
        return False
    out[:] = np.frombuffer(joined, dtype=out.dtype)
    return True


def _chains(par, noff):
    """Which examples (offsets ``noff``) have the parents ``[-1, 0, 1, ...]`` of a chain:
    the first -1, each next one more."""
    step = np.empty(len(par), dtype=bool)
    np.equal(np.subtract(par[1:], par[:-1]), 1, out=step[1:])
    step[noff[:-1]] = par[noff[:-1]] == -1
    return np.logical_and.reduceat(step, noff[:-1])


def _all_shapes(par, n, noff, chain):
    """The shapes of all examples when some are not chains: ``(parents, order,
    edge_child, edge_of)`` ((N,), (N,), (N - m,), (N,): ``par`` itself, the others of
    :func:`_tree_shapes` by chunks of examples), or the first example that is not a
    tree."""
    m, N = len(n), len(par)
    order = np.empty(N, dtype=np.int64)
    edge_child = np.empty(N - m, dtype=np.int64)
    edge_of = np.empty(N, dtype=np.int64)
    for a in range(0, m, TREE_CHUNK):
        b = min(m, a + TREE_CHUNK)
        lo, hi = int(noff[a]), int(noff[b])
        if chain[a:b].all():
            loc = np.arange(hi - lo) - np.repeat(noff[a:b] - lo, n[a:b])
            order[lo:hi], edge_of[lo:hi] = loc, loc - 1
            edge_child[lo - a:hi - b] = loc[loc > 0]
            continue
        got = _tree_shapes(par[lo:hi], n[a:b])
        if isinstance(got, int):
            return a + got
        order[lo:hi], edge_child[lo - a:hi - b], edge_of[lo:hi] = got[1:4]
    return par, order, edge_child, edge_of


def _scan_trees(X, Y, end, k, dv, de):
    """The checked arrays of the tree examples ``0..end-1``, or the first suspect."""
    Xs, Ys = X[:end], Y[:end]
    ok = np.fromiter((type(x) is dict for x in Xs), bool, end)
    if not ok.all():
        return first_false(ok)
    try:
        Vs, Es, Ps = (list(map(itemgetter(key), Xs)) for key in _TREE_KEYS)
    except KeyError:
        return first_false(np.fromiter((all(key in x for key in _TREE_KEYS) for x in Xs),
                                       bool, end))
    # the types and kinds at once (their first refusal found example by example), then
    # the shapes (n_i = len(parents) >= 1)
    lists = (Vs, Es, Ps, Ys)
    nd = np.ndarray
    if set(map(type, itertools.chain(*lists))) != {nd}:
        dtypes = None
    else:
        dtypes = [set(map(_DTYPE, a)) for a in lists]
        if not all(t.kind in kinds for ts, kinds in zip(dtypes, _TREE_KINDS) for t in ts):
            dtypes = None
    if dtypes is None:
        return first_false(np.fromiter(
            (type(v) is nd and type(e) is nd and type(p) is nd and type(y) is nd
             and v.dtype.kind in _REAL and e.dtype.kind in _REAL
             and p.dtype.kind in "iu" and y.dtype.kind in "iuf"
             for v, e, p, y in zip(*lists)), bool, end))
    ok = np.fromiter((p.ndim == 1 and len(p) >= 1 and y.shape == p.shape
                      and v.shape == (len(p), dv) and e.shape == (len(p) - 1, de)
                      for v, e, p, y in zip(*lists)), bool, end)
    if not ok.all():
        return first_false(ok)
    n = np.fromiter(map(len, Ps), np.int64, end)
    noff = np.zeros(end + 1, dtype=np.int64)
    np.cumsum(n, out=noff[1:])
    N = int(noff[-1])
    lab = np.empty(N, dtype=np.int64)
    if _copy_joined(lab, Ys, dtypes[3]):
        ok = (lab >= 0) & (lab < k)
    else:
        yf = np.concatenate(Ys, dtype=float)
        ok = np.isfinite(yf) & (yf == np.round(yf)) & (yf >= 0) & (yf < k)
        lab[:] = yf.astype(np.int64) if ok.all() else 0
        del yf
    if not ok.all():
        return _example_of(first_false(ok), noff[:-1])
    del ok
    # parent arrays: chains ([-1, 0, 1, ...]) share their shapes (one per length), the
    # other trees' shapes all at once
    par = np.empty(N, dtype=np.int64)
    if not _copy_joined(par, Ps, dtypes[2]):
        np.concatenate(Ps, out=par, casting="unsafe")
    chain = _chains(par, noff)
    by_n = {int(v): tree_shape(np.arange(-1, v - 1)) for v in np.unique(n[chain])}
    tree = None
    if not chain.all():
        tree = _all_shapes(par, n, noff, chain)
        if isinstance(tree, int):
            return tree
    # the features packed as float, finite, and the sums of the rows' norms (the scale
    # check), by chunks
    V, E = np.empty((N, dv)), np.empty((N - end, de))
    Vf, Ef = V.reshape(-1), E.reshape(-1)
    G = np.empty(end)
    with np.errstate(over="ignore", invalid="ignore"):      # found as not finite
        for a in range(0, end, CHUNK):
            b = min(end, a + CHUNK)
            lo, hi = int(noff[a]), int(noff[b])
            if not _copy_joined(Vf[lo * dv:hi * dv], Vs[a:b], dtypes[0]):
                np.concatenate(Vs[a:b], out=V[lo:hi])
            gv = _checked_norms(Vs[a:b], a, noff[a:b] - lo, V[lo:hi])
            if isinstance(gv, int):
                return gv
            if not _copy_joined(Ef[(lo - a) * de:(hi - b) * de], Es[a:b], dtypes[1]):
                np.concatenate(Es[a:b], out=E[lo - a:hi - b])
            eo = noff[a:b] - np.arange(a, b)
            ge = _checked_norms(Es[a:b], a, eo - eo[0], E[lo - a:hi - b])
            if isinstance(ge, int):
                return ge
            G[a:b] = k * gv + (k * k) * ge
    return n, noff, V, E, par, lab, G, chain, by_n, tree


# ------------------------------------------------------------------ bipartite matchings
def prepare_matchings(model: Any, X: List[Any], Y: List[Any], need_polytopes: bool,
                      operators: bool) -> Prepared:
    """:func:`~structlp.compiler.prepare` of assignments (examples of one shape, no edge
    weights), from the stacked edge features and outputs: see the module docstring."""
    if model.edge_weights is not None or type(X[0]) is not np.ndarray or X[0].ndim != 3:
        return None
    R, P = model._params()
    shape = X[0].shape
    m = len(X)
    got = _first_suspect(lambda end: _scan_matchings(X, Y, end, shape, R, P,
                                                     need_polytopes), m)
    if isinstance(got, (int, np.integer)):
        return int(got)
    F, G, pos, counts = got
    nr, nc, d = shape
    L = nr * nc
    sizes = np.full(m, L, dtype=np.int64)
    mu = SparseVectors.packed(pos, np.ones(len(pos)), counts, sizes)
    c = SparseVectors.packed(pos, -np.ones(len(pos)), counts, sizes)
    dd = counts.astype(float)                   # d_i = sum(mu_i): the true edges
    bounds = check_scale(None, None, None, bounds=(G, 2.0 * dd))  # type: ignore[arg-type]
    polys: list = [None] * m
    if need_polytopes:
        poly = PolytopeCache(model).get(F[0], 0, L)
        polys = [poly] * m
    return TrainingData(_Rows(F, parts=True, operator=operators), polys, c, dd, mu,
                        _Rows(F), Y, d, bounds)  # type: ignore[arg-type]


def _scan_matchings(X, Y, end, shape, R, P, need_polytopes):
    """The checked edge features of the examples ``0..end-1`` (the given arrays, as float),
    their rows' norm sums, and their outputs' nonzeros (positions, counts), or the first
    suspect."""
    Xs, Ys = X[:end], Y[:end]
    nd = np.ndarray
    ok = np.fromiter((type(x) is nd and type(y) is nd and x.shape == shape
                      and y.shape == shape[:2] and x.dtype.kind in _REAL
                      and y.dtype.kind in _REAL for x, y in zip(Xs, Ys)), bool, end)
    if not ok.all():
        return first_false(ok)
    F = _as_float(Xs)
    G = np.empty(end)
    pos, counts = [], np.zeros(end, dtype=np.int64)
    for a in range(0, end, CHUNK):
        b = min(end, a + CHUNK)
        g = _checked_norms(F[a:b], a)
        if isinstance(g, int):
            return g
        G[a:b] = g
        Yf = np.stack(Ys[a:b]).astype(float, copy=False)
        ok = ((Yf == 0) | (Yf == 1)).all(axis=(1, 2))      # NaN and infinities too
        if need_polytopes:
            ok &= (Yf.sum(axis=1) == R).all(axis=1) & (Yf.sum(axis=2) <= P).all(axis=1)
        if not ok.all():
            return a + first_false(ok)
        ex, p = np.nonzero(Yf.reshape(b - a, -1))          # by example, then part
        pos.append(p)
        counts[a:b] = np.bincount(ex, minlength=b - a)
    return F, G, np.concatenate(pos), counts
