"""The block store of Frank–Wolfe on tree labellings: the examples' data packed for the
compiled kernels of :mod:`._fw_trees`, and each block's active labellings, weights, losses
and Gram matrix in slots of its own."""

from __future__ import annotations

import numpy as np

from ._fw_trees import _kernels

ENABLED = True            # tests switch it off to compare the per-block path's iterates
_CHUNK = 4096             # examples packed at once (their index arrays made together)


class _TreeBlocks:
    """The blocks of tree labellings.  Block ``i`` has ``cap[i]`` slots (4 at first, doubled
    when it needs more) at offset ``so[i]`` of the pools of labellings ``Y`` (P, nmax),
    weights ``alpha`` (P,) and losses ``lv`` (P,), and its (cap, cap) Gram matrix at offset
    ``go[i]`` of the pool ``G`` (flat): memory follows each block's own active set, not the
    largest one's.  A block that grows moves to the free ends of the pools (``top``: their
    used lengths), which double when full.  The example data are concatenated (node features
    (N, d_v), edge features (N - m, d_e), local tree arrays, node losses (N, k), true labels
    (N,), node and edge Gram matrices, flat)."""

    cache_passes = True
    # the passes without oracle (chosen on OCR letters, fold 1, by the epochs and passes
    # they took and their measured costs: a pass about 0.4 of a floor pass, an epoch 1.3-1.9):
    cache_share = 0.1      # passes while one gains this share of the epoch's gain
    pass_steps = 3         # pairwise steps per block in a pass
    skip_share = 1.0       # a later pass skips the blocks left with less than the mean gap

    def __init__(self, model, data):
        self.k = k = int(model.n_labels)
        self._pack(data)
        m = data.n_examples
        nmax = int(np.diff(self.noff).max(initial=1))
        self.cap = np.full(m, 4, dtype=np.int64)
        self.so = 4 * np.arange(m, dtype=np.int64)
        self.go = 16 * np.arange(m, dtype=np.int64)
        self.top = np.array([4 * m, 16 * m], dtype=np.int64)
        self.Y = np.zeros((8 * m, nmax), dtype=np.int64)       # room for growth
        self.alpha = np.zeros(8 * m)
        self.lv = np.zeros(8 * m)
        self.G = np.zeros(32 * m)
        self.ns = np.ones(m, dtype=np.int64)
        # block i starts at its truth: slot 4 i, weight 1 (arrays over all the letters)
        ex = np.repeat(np.arange(m), np.diff(self.noff))       # each letter's example
        N = len(ex)
        self.Y[4 * ex, np.arange(N) - self.noff[ex]] = self.ytrue
        self.alpha[4 * np.arange(m)] = 1.0
        self.lv[4 * np.arange(m)] = np.bincount(ex, self.cn[np.arange(N), self.ytrue],
                                                minlength=m)
        self.S = np.zeros((nmax, k))
        self.SC = np.full((nmax, k), np.nan)    # node scores of a pass without oracle
        self.msg = np.zeros((nmax, k))
        self.back = np.zeros((nmax, k), dtype=np.int64)
        self.ybuf = np.zeros(nmax, dtype=np.int64)
        self.coef = np.zeros((nmax, k + k * k))
        self.act = np.zeros(8)
        self.before = np.zeros(8)
        self.hg = np.full(m, np.inf)             # gaps left in the active sets (passes)
        self.n_passes = self.n_visits = 0        # passes without oracle, their block visits

    @staticmethod
    def applicable(model, data):
        """Whether ``data`` (of :func:`structlp.compiler.prepare`) suits these blocks:
        a TreeLabeling with dense node features and losses on the node parts only."""
        from scipy.sparse import issparse

        from ..structures.tree_labeling import TreeFeatures, TreeLabeling
        if not ENABLED or type(model) is not TreeLabeling or data.n_examples == 0:
            return False
        if data.X[0].node_features.shape[1] == 0 or data.X[0].edge_features.shape[1] == 0:
            return False
        k = int(model.n_labels)
        if _packed_trees(data):         # dense tree features, all (prepare_batch made them)
            sizes = data.X.n
        else:
            for x, op in zip(data.X, data.Phi):
                if type(op) is not TreeFeatures or issparse(op.V):
                    return False
            sizes = np.array([x.n_nodes for x in data.X], dtype=np.int64)
        idx, _, off = data.c.concatenated()
        return bool((idx < k * np.repeat(sizes, np.diff(off))).all())

    def _pack(self, data):
        k = self.k
        if _packed_trees(data):         # the arrays of prepare_batch: no object per example
            sizes, self.noff, V, E, parents, order, edge_of = data.X.concatenated()
        else:
            X = list(data.X)   # the examples made once (a prepared set makes them on access)
            sizes = np.array([x.n_nodes for x in X], dtype=np.int64)
            self.noff = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
            de = int(X[0].edge_features.shape[1])
            V = np.concatenate([x.node_features for x in X])
            E = np.concatenate([x.edge_features.reshape(n - 1, de)
                                for x, n in zip(X, sizes.tolist())])
            order = np.concatenate([x.order for x in X])
            parents = np.concatenate([x.parents for x in X])
            edge_of = np.concatenate([x.edge_of for x in X])
        self.V = np.ascontiguousarray(V, dtype=float)
        self.E = np.ascontiguousarray(E, dtype=float)
        self.dv, self.de = int(self.V.shape[1]), int(self.E.shape[1])
        # 1 where all edges of an example share their features (a chain's constant edge
        # feature): the epoch scores its labellings with max-sum's one table of edge scores
        m = len(sizes)
        self.uniform = np.ones(m, dtype=np.int64)
        self.order = np.asarray(order, dtype=np.int64)
        self.parents = np.asarray(parents, dtype=np.int64)
        self.edge_of = np.asarray(edge_of, dtype=np.int64)
        N = int(self.noff[-1])
        self.cn = np.zeros((N, k))
        self.ytrue = np.zeros(N, dtype=np.int64)
        # the node losses and true labels from the nonzeros: an example's node parts
        # (letter-major, < n_i k) are at k noff[i] of the flat (N, k); by chunks of
        # examples (their index arrays made at once)
        cn = self.cn.reshape(-1)
        c, mu = data.c.concatenated(), data.mu_true.concatenated()
        for a in range(0, m, _CHUNK):
            b = min(m, a + _CHUNK)
            lo, hi = int(self.noff[a]) - a, int(self.noff[b]) - b      # their edges
            ex_e = np.repeat(np.arange(a, b), sizes[a:b] - 1)
            first = self.E[self.noff[ex_e] - ex_e]
            self.uniform[ex_e[(self.E[lo:hi] != first).any(axis=1)]] = 0
            for (idx, vals, off), nodes_only in ((c, False), (mu, True)):
                s, t = int(off[a]), int(off[b])
                j = idx[s:t].astype(np.int64)
                ex = np.repeat(np.arange(a, b), np.diff(off[a:b + 1]))
                if nodes_only:          # the truths' edge parts follow their node parts
                    keep = j < k * sizes[ex]
                    j, ex = j[keep], ex[keep]
                flat = j + k * self.noff[ex]
                if nodes_only:
                    self.ytrue[flat // k] = flat % k
                else:
                    cn[flat] = vals[s:t]
        self.koff = np.concatenate(([0], np.cumsum(sizes ** 2))).astype(np.int64)
        self.keoff = np.concatenate(([0], np.cumsum((sizes - 1) ** 2))).astype(np.int64)
        self.Kn = np.zeros(int(self.koff[-1]))      # filled by the primal kernel
        self.Ke = np.zeros(int(self.keoff[-1]))
        self.fill = True
        self.n_features = k * self.dv + k * k * self.de

    def _grow(self, i):
        """Room for block ``i`` to double its slots: the scratch vectors, and the pools
        doubled (their used parts kept) when their free ends are too short."""
        c2 = 2 * int(self.cap[i])
        if c2 > self.act.shape[0]:
            self.act = np.zeros(c2)
            self.before = np.zeros(c2)
        P, Q = int(self.top[0]) + c2, int(self.top[1]) + c2 * c2
        if P > len(self.alpha):
            size = max(P, 2 * len(self.alpha))
            self.Y = np.concatenate([self.Y, np.zeros((size - len(self.Y), self.Y.shape[1]),
                                                      dtype=np.int64)])
            self.alpha = np.concatenate([self.alpha, np.zeros(size - len(self.alpha))])
            self.lv = np.concatenate([self.lv, np.zeros(size - len(self.lv))])
        if Q > len(self.G):
            self.G = np.concatenate([self.G, np.zeros(max(Q, 2 * len(self.G)) - len(self.G))])

    def restart(self, data):
        """Warm start: the features may differ, so data and Gram matrices are made afresh."""
        self._pack(data)
        nmax = int(np.diff(self.noff).max(initial=1))
        if nmax > self.Y.shape[1]:    # pragma: no cover - the part counts matched
            raise ValueError("warm start with longer examples")

    def _data(self):
        return (self.k, self.dv, self.de, self.V, self.E, self.noff)

    def _store(self):
        return (self.ns, self.so, self.go, self.cap)

    def epoch(self, perm, w, C, inner_steps, ell, g_est):
        """One epoch of pairwise BCFW steps over the blocks ``perm`` (int array)."""
        fn = _kernels()["_tree_epoch"]
        self.hg[:] = np.inf                      # the next pass without oracle visits all
        pos = 0
        while True:
            ell, pos = fn(perm, pos, w, C, inner_steps, ell, g_est, *self._data(), self.order,
                          self.parents, self.edge_of, self.cn, self.Kn, self.koff, self.Ke,
                          self.keoff, self.uniform, *self._store(), self.top, self.Y,
                          self.alpha, self.lv, self.G, self.S, self.msg, self.back, self.ybuf,
                          self.act, self.before, self.coef)
            if pos < 0:
                return ell
            self._grow(perm[pos])

    def cache_pass(self, w, C, ell, steps=None, order=None):
        """One pass without oracle, up to ``steps`` (default :attr:`pass_steps`) pairwise
        steps per block (see :func:`_cache_pass`), the blocks visited in the order
        ``order`` (a permutation of them; default: by index).  The first pass after an
        epoch visits every block with two or more active outputs; a later one only those
        whose gap between their best and worst active outputs, left by their last visit, is
        at least :attr:`skip_share` of the mean of those gaps."""
        hg = self.hg
        thr = self.skip_share * float(hg.mean()) if np.isfinite(hg).all() else 0.0
        ell, _ = self._passes(w, C, ell, 0.0, 0.0, 1, steps, thr, order)
        return ell

    def run_passes(self, w, C, ell, dual, gain, max_passes, order=None):
        """Passes without oracle after an epoch, in one kernel call, while one raises the
        dual (``dual`` before the first) by at least :attr:`cache_share` of the epoch's
        ``gain``, at most ``max_passes``, each visiting the blocks in the order ``order`` (a
        permutation of them, drawn afresh after each epoch by the learner: passes in one
        fixed order took more epochs; default: by index): see
        :func:`._fw_blocks.run_cache_passes`.  Returns ``ell`` and the dual after the
        passes."""
        hg = self.hg
        thr = self.skip_share * float(hg.mean()) if np.isfinite(hg).all() else 0.0
        return self._passes(w, C, ell, dual, self.cache_share * gain, max_passes, None, thr,
                            order)

    def _passes(self, w, C, ell, dual, least, max_passes, steps, thr, order):
        m = len(self.ns)
        if order is None:
            order = np.arange(m, dtype=np.int64)
        else:   # the compiled passes index by it unchecked
            order = np.ascontiguousarray(order)
            if (order.dtype != np.int64 or order.shape != (m,)
                    or not np.array_equal(np.sort(order), np.arange(m))):
                raise ValueError(f"order must be a permutation of the {m} blocks (int64 array "
                                 f"of shape ({m},)); got a {order.dtype} array of shape "
                                 f"{order.shape} that is not one.")
        out = np.zeros(3)
        ell = _kernels()["_tree_cache_passes"](
            w, C, ell, dual, least, 1.0, max_passes,
            self.pass_steps if steps is None else steps, self.skip_share, thr, self.hg,
            *self._data(), self.parents, self.edge_of, *self._store(), self.Y, self.alpha,
            self.lv, self.G, self.act, self.before, self.coef, self.SC, out, order)
        self.n_passes += int(out[1])            # counts for measurements
        self.n_visits += int(out[2])
        return ell, float(out[0])

    def check(self, w, C, dd):
        """Exact hinge losses (m,) and block gaps (m,) at ``w`` by one oracle pass."""
        m = len(self.ns)
        hinge, g = np.empty(m), np.empty(m)
        _kernels()["_tree_check"](w, C, dd, hinge, g, *self._data(), self.order,
                                  self.parents, self.edge_of, self.cn, self.ytrue, self.ns,
                                  self.so, self.Y, self.alpha, self.S, self.msg, self.back,
                                  self.ybuf)
        return hinge, g

    def oracle_pass(self, w):
        """The bare loss-augmented oracle pass at ``w`` (hinge losses, no block gaps)."""
        m = len(self.ns)
        hinge = np.empty(m)
        none = np.zeros(0, dtype=np.int64)
        _kernels()["_tree_check"](w, 0.0, np.zeros(m), hinge, hinge, *self._data(),
                                  self.order, self.parents, self.edge_of, self.cn,
                                  self.ytrue, none, none, self.Y, self.alpha, self.S, self.msg,
                                  self.back, self.ybuf)
        return hinge

    def primal(self, ops, mu_true, dd, C, d):
        """``w`` and ``ell`` afresh from the block variables (weights normalized; ``ops``,
        ``mu_true`` and ``d`` are those of the other block stores, unused here)."""
        w = np.zeros(self.n_features)
        ell = _kernels()["_tree_primal"](C, np.asarray(dd, dtype=float), w, *self._data(),
                                         self.parents, self.edge_of, self.ytrue,
                                         *self._store(), self.Y, self.alpha, self.lv,
                                         self.fill, self.Kn, self.koff, self.Ke, self.keoff,
                                         self.G)
        self.fill = False
        return w, float(ell)

    def weights(self, i):
        """The weights (ns_i,) of block ``i``'s active outputs."""
        o = int(self.so[i])
        return self.alpha[o:o + self.ns[i]]

    def labellings(self, i):
        """Block ``i``'s active outputs (ns_i, n_i) (labels of its nodes)."""
        o, n = int(self.so[i]), int(self.noff[i + 1] - self.noff[i])
        return self.Y[o:o + self.ns[i], :n]

    def loss(self, i):
        """``c_i . m_i``."""
        o = int(self.so[i])
        return float(self.weights(i).dot(self.lv[o:o + self.ns[i]]))

    def marginal(self, i, L):
        """``m_i`` as a dense part vector (L,) (for tests and inspection)."""
        k = self.k
        b, n = int(self.noff[i]), int(self.noff[i + 1] - self.noff[i])
        out = np.zeros(L)
        par = self.parents[b:b + n]
        eo = self.edge_of[b:b + n]
        for y, a in zip(self.labellings(i), self.weights(i)):
            out[np.arange(n) * k + y] += a
            j = np.flatnonzero(par >= 0)
            out[n * k + eo[j] * k * k + y[par[j]] * k + y[j]] += a
        return out


def _packed_trees(data):
    """Whether ``data`` comes from ``TreeLabeling.prepare_batch``: its examples (with their
    node counts ``n`` and all their arrays at once, ``concatenated()``) and their dense
    feature operators made on access from packed arrays."""
    return (callable(getattr(data.X, "concatenated", None))
            and getattr(data.Phi, "trees", None) is data.X)
