"""Frank–Wolfe on tree labellings on several cores of one process: CoCoA+ over in-process
partitions of the blocks.

With ``K`` threads, the blocks are split once into ``K`` partitions (by a permutation drawn
from the fit's random generator, cut where the partitions hold about equal numbers of
nodes), each with a compiled block store of its own (:class:`._fw_tree_store._TreeBlocks`
over its examples).  An epoch hands each partition the blocks of the epoch's order that it
owns (in that order), cut into short rounds (:attr:`_ThreadedTreeBlocks.round_blocks`
blocks per partition); in a round each thread runs the BCFW steps of its blocks on the
CoCoA+ local subproblem of its partition (the ordinary BCFW dual of its blocks with ``C' =
sigma' C``, from a copy of the global ``w``: :func:`tree_local_round` states it), the same
local solve as a worker of :class:`~structlp.learners.sharded.ShardedFrankWolfeLearner`
(``sigma' = K`` there).  Then the partitions' changes are added (CoCoA+ "adding", Ma et
al. 2015): a partition's local iterate moved by ``w_p' - w = sigma' Delta w_p``, so the
new ``w = w + sum_p (w_p' - w) / sigma'`` is ``w(m)`` of the new block variables exactly,
and ``ell`` moves by ``sum_p Delta ell_p' / sigma'`` (the local ``ell`` is in units of
``C'``).  With ``sigma' = K`` the dual never decreases (``|sum_p v_p|^2 <= K sum_p
|v_p|^2``); ``sigma'`` follows the measured alignment of the last round's changes
(:func:`._fw_rounds._combine`), which the partitions' changes mostly undershoot (they point
apart).  Whatever ``sigma'``, each block holds a feasible distribution and ``w = w(m)``, so
the exact duality gap (each partition's check pass, in its thread) certifies the result as
in a serial fit.  The passes without oracle after an epoch are rounds too, one pass of
every partition each.

The rounds of an epoch (and the passes after it) run inside one compiled call per thread
(:mod:`._fw_rounds`): the threads meet twice a round in the compiled code
(:mod:`structlp.compiled.barrier`), without the GIL and without returning to Python.  Why
short rounds: run apart for a whole epoch, the partitions' changes cancel more and more (on
OCR letters the fit then took several times the epochs of one thread).

The iterates depend on ``random_state`` and ``K`` only: the partition, the epochs' order of
the blocks, the rounds and the order in which the changes are added are fixed by them.
Without numba the same kernels run as Python, the partitions one after another in one
thread, with the same iterates as the threads' (to rounding).
"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

import numpy as np

from ..compiled.barrier import new_sync
from ._fw_blocks import run_cache_passes
from ._fw_rounds import _kernels as _round_kernels
from ._fw_tree_store import _packed_trees, _TreeBlocks

_CREWS: Dict[Tuple[int, int], "_Crew"] = {}
_LOCK = threading.Lock()


class _Crew:
    """``K - 1`` threads that run a round's ``fn(p)``, ``p = 1..K-1``, while the caller runs
    ``fn(0)``: each waits on a lock of its own, so a round costs two lock hand-offs per
    thread (no futures, no queue).  One round at a time (a lock around :meth:`run`)."""

    def __init__(self, K):
        self.K = K
        self.fn: Any = None
        self.out: List[Any] = [None] * K
        self.go = [threading.Lock() for _ in range(K)]
        self.done = [threading.Lock() for _ in range(K)]
        self.busy = threading.Lock()
        for p in range(1, K):
            self.go[p].acquire()
            self.done[p].acquire()
            threading.Thread(target=self._loop, args=(p,), daemon=True,
                             name=f"structlp-fw-{p}").start()

    def _loop(self, p):
        while True:
            self.go[p].acquire()
            try:
                self.out[p] = (True, self.fn(p))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                self.out[p] = (False, exc)
            self.done[p].release()

    def run(self, fn):
        """``[fn(p) for p in range(K)]``, ``fn(0)`` in this thread, the others in the crew's
        (an exception of any is raised here, after all have finished)."""
        with self.busy:
            self.fn = fn
            for p in range(1, self.K):
                self.go[p].release()
            try:
                first = fn(0)
            finally:
                for p in range(1, self.K):
                    self.done[p].acquire()
                self.fn = None
            outs = [first]
            for p in range(1, self.K):
                ok, value = self.out[p]
                self.out[p] = None
                if not ok:
                    raise value
                outs.append(value)
            return outs


def crew(K):
    """The :class:`_Crew` of ``K`` (made once per process and kept: idle threads cost
    nothing; a fork makes its own)."""
    key = (os.getpid(), int(K))
    with _LOCK:
        c = _CREWS.get(key)
        if c is None:
            c = _CREWS[key] = _Crew(int(K))
    return c


def tree_local_round(blocks, w, C, K, perms, inner_steps, cache_passes, g_est, gain=None):
    """The CoCoA+ local subproblem of a partition's tree blocks, from the global ``w``:

    .. math::

        \\max_{\\Delta m_{[p]}}\\; C\\sum_{i\\in p} c_i\\cdot\\Delta m_i
            - w\\cdot\\Delta w_p - \\tfrac{K}{2}\\|\\Delta w_p\\|^2,\\qquad
        \\Delta w_p = -C\\sum_{i\\in p}\\Phi_i^T\\Delta m_i ,

    (``K``: CoCoA+'s ``sigma'``, the number of partitions for its safe value) which is the
    BCFW dual of the blocks with ``C' = K C`` from ``w``: an epoch of the compiled kernel
    over each block order of ``perms`` (int64 arrays), then up to ``cache_passes`` passes
    without oracle (:func:`._fw_blocks.run_cache_passes`; ``gain``: the dual gain the
    passes' stopping rule compares with, default the epochs').

    Returns the local iterate ``w' = w + K Delta w_p`` (d,) (``w`` is not changed) and
    ``C' sum_i c_i . Delta m_i``; ``g_est[i]`` receives the local gap (``C'`` units) of
    each block visited.
    """
    Cp = K * C
    w_loc = np.array(w, dtype=float)
    ell = 0.0
    if not cache_passes:
        for perm in perms:
            ell = blocks.epoch(perm, w_loc, Cp, inner_steps, ell, g_est)
        return w_loc, ell
    dual_before = -0.5 * float(w_loc.dot(w_loc))
    for perm in perms:
        ell = blocks.epoch(perm, w_loc, Cp, inner_steps, ell, g_est)
    dual_now = ell - 0.5 * float(w_loc.dot(w_loc))
    ell, _ = run_cache_passes(blocks, w_loc, Cp, ell, dual_now,
                              dual_now - dual_before if gain is None else gain, cache_passes)
    return w_loc, ell


def _ranges(starts, lens):
    """The concatenated index ranges ``starts[j] + arange(lens[j])`` (int64), and their
    offsets (len(lens) + 1,)."""
    off = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    return np.repeat(starts - off[:-1], lens) + np.arange(off[-1], dtype=np.int64), off


class _Rows:
    """The nonzeros of a partition's rows of a stacked vector (``c``, ``mu_true``)."""

    def __init__(self, vecs, idx):
        self.vecs, self.idx = vecs, idx

    def nonzeros(self, i):
        return self.vecs.nonzeros(int(self.idx[i]))

    def concatenated(self):
        """The partition's rows' nonzeros in one array each, ``(idx, vals, offsets)``, as
        :meth:`structlp.compiler.SparseVectors.concatenated` gives all of them."""
        idx, val, off = self.vecs.concatenated()
        sel, new_off = _ranges(off[self.idx], off[self.idx + 1] - off[self.idx])
        return idx[sel], val[sel], new_off


class _PartTrees:
    """A partition's examples of packed trees (``TreeLabeling.prepare_batch``): what the
    tree store reads of them, ``concatenated()`` (their rows copied out of the packed
    arrays), without an object per example."""

    def __init__(self, trees, idx):
        self.trees, self.idx = trees, idx
        self.n = trees.n[idx]

    def concatenated(self):
        n, noff, V, E, parents, order, edge_of = self.trees.concatenated()
        starts = noff[self.idx]
        rows, new_noff = _ranges(starts, self.n)
        edges, _ = _ranges(starts - self.idx, self.n - 1)
        return (self.n, new_noff, V[rows], E[edges], parents[rows], order[rows],
                edge_of[rows])


class _Part:
    """What a tree store reads of the prepared data, for the examples ``idx`` only."""

    def __init__(self, data, idx):
        if _packed_trees(data):
            self.X: Any = _PartTrees(data.X, idx)
            self.Phi: Any = SimpleNamespace(trees=self.X)    # packed: _pack reads X only
        else:
            self.X = [data.X[i] for i in idx]
            self.Phi = [data.Phi[i] for i in idx]
        self.c = _Rows(data.c, idx)
        self.mu_true = _Rows(data.mu_true, idx)
        self.n_examples = len(idx)


def split(sizes, K, rng):
    """``K`` partitions of the examples (sorted index arrays), cut from a random permutation
    where they hold about equal numbers of nodes (``sizes`` (m,)); none empty."""
    m = len(sizes)
    order = rng.permutation(m)
    cum = np.cumsum(np.asarray(sizes, dtype=float)[order])
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, K) / K, side="right")
    cuts = np.clip(cuts, np.arange(1, K), m - K + np.arange(1, K))    # none empty
    return [np.sort(p).astype(np.int64) for p in np.split(order, cuts)]


class _ThreadedTreeBlocks:
    """The blocks of tree labellings in ``K`` partitions, each a :class:`_TreeBlocks` run by
    a thread of its own (CoCoA+, see the module's notes); the interface of
    :class:`_TreeBlocks` with the learner's (global) indices and ``C``."""

    cache_passes = True
    # passes without oracle while one gains this share of the epoch's gain: on OCR letters
    # (6,251 words, C = 0.1, tol = 1e-3, 2 threads) 0.05 took 54 epochs, 0.1 (one
    # thread's share) 58 in about the same time, 0.2 69 and more time
    cache_share = 0.05
    # blocks per partition in a round: on the same fit 12-32 took 53-55 epochs (one thread:
    # 51), with the least time at 24-32 (below 16 the meetings cost more than the epochs
    # saved); a whole epoch per round took several times the epochs (the partitions'
    # changes cancel more the longer they run apart)
    round_blocks = 32

    def __init__(self, model, data, K, rng):
        self.K = int(K)
        m = data.n_examples
        sizes = data.X.n if _packed_trees(data) else [x.n_nodes for x in data.X]
        self.parts = split(sizes, self.K, rng)
        self.owner = np.empty(m, dtype=np.int64)
        self.local = np.empty(m, dtype=np.int64)
        for p, idx in enumerate(self.parts):
            self.owner[idx] = p
            self.local[idx] = np.arange(len(idx))
        # each partition's store made in its thread (numpy's copies release the GIL)
        self.stores = self._map(lambda p: _TreeBlocks(model, _Part(data, self.parts[p])))
        self.n_features = self.stores[0].n_features
        self.sigma = float(self.K)     # the next round's sigma' (_combine): safe at first
        # what the threads share in a launch (._fw_rounds)
        self.sync = new_sync(self.K)
        self.st = np.zeros(5)
        self.stats = np.zeros((self.K, 4))
        self.W: Any = None
        self.WL: Any = None
        self.least = -np.inf

    def _map(self, fn):
        """``[fn(p) for p in range(K)]``: partition 0 in this thread, the others in the
        crew's."""
        return crew(self.K).run(fn)

    def restart(self, data):
        """Warm start: each partition's data made afresh (the features may differ)."""
        self._map(lambda p: self.stores[p].restart(_Part(data, self.parts[p])))

    def _launch(self, kernel, args):
        """``kernel(p, K, *args(p))`` for every partition ``p``: on the crew's threads at
        once when the kernels are compiled (they meet inside the compiled code,
        :mod:`._fw_rounds`), else one partition after another with :func:`._fw_rounds._combine`
        after them (the same iterates).  Returns partition 0's result."""
        fns = _round_kernels()
        K = self.K
        if not fns["together"]:
            outs = [fns[kernel](p, K, *args(p, False)) for p in range(K)]
            fns["_combine"](K, self.W, self.WL, self.stats, self.st, self.least)
            return outs[0]
        sync = self.sync
        sync[:] = 0
        fn = fns[kernel]

        def run(p):
            try:
                return fn(p, K, *args(p, True))
            except BaseException:
                sync[-1] = 1                  # abort: the others stop waiting for this one
                raise

        out = self._map(run)[0]
        if out < 0:                           # pragma: no cover - a thread failed: raised
            raise RuntimeError("a thread of the Frank-Wolfe rounds was aborted")
        return out

    def _begin(self, w, ell):
        """The shared state of a launch from the learner's ``w`` and ``ell``."""
        if self.W is None or self.W.shape[0] != len(w):
            self.W = np.empty(len(w))
            self.WL = np.empty((self.K, len(w)))
        self.W[:] = w
        self.st[0] = ell
        self.st[1] = self.sigma
        self.st[2:] = 0.0
        self.stats[:] = 0.0

    def _end(self, w):
        w[:] = self.W
        self.sigma = float(self.st[1])
        return float(self.st[0])

    def epoch(self, perm, w, C, inner_steps, ell, g_est):
        """An epoch in CoCoA+ rounds: each partition's blocks of ``perm`` (in that order),
        cut into rounds of about :attr:`round_blocks` blocks per partition, a round in the
        threads from the ``w`` the last one left (:func:`._fw_rounds._tree_rounds`).
        ``g_est[i]`` receives the visited blocks' gaps (in units of ``C``: measured at the
        local iterates)."""
        K = self.K
        own = self.owner[perm]
        perms = [np.ascontiguousarray(self.local[perm[own == p]]) for p in range(K)]
        R = max(1, -(-max(len(q) for q in perms) // self.round_blocks))
        # each partition's blocks cut where the rounds hold equal shares of its nodes (the
        # threads then wait less for each other)
        ends = []
        for s, q in zip(self.stores, perms):
            work = np.cumsum(np.diff(s.noff)[q])
            ends.append(np.searchsorted(work, work[-1] * np.arange(1, R + 1) / R,
                                        side="right").astype(np.int64)
                        if len(q) else np.zeros(R, dtype=np.int64))
        gs = [np.ascontiguousarray(g_est[idx]) for idx in self.parts]  # unvisited: theirs
        for s in self.stores:
            s.hg[:] = np.inf                  # the next pass without oracle visits all
        self._begin(w, ell)
        self.least = -np.inf
        pos = np.zeros(K, dtype=np.int64)
        r = 0
        while r < R:
            def args(p, together, r=r):
                s = self.stores[p]
                return (r, together, self.sync, self.st, self.W, self.WL, self.stats, pos,
                        ends[p], perms[p], C, inner_steps, gs[p], *s._data(), s.order,
                        s.parents, s.edge_of, s.cn, s.Kn, s.koff, s.Ke, s.keoff, s.uniform,
                        *s._store(), s.top, s.Y, s.alpha, s.lv, s.G, s.S, s.msg, s.back,
                        s.ybuf, s.act, s.before, s.coef)

            r = self._launch("_tree_rounds", args)
            for p in range(K):
                if self.stats[p, 2]:          # no room for block perms[p][pos[p]]: grow
                    self.stores[p]._grow(perms[p][pos[p]])
            self.st[2] = 0.0
            self.stats[:, 2] = 0.0
        for idx, g in zip(self.parts, gs):
            g_est[idx] = g
        return self._end(w)

    def run_passes(self, w, C, ell, dual, gain, max_passes, order=None):
        """Passes without oracle after an epoch, each a CoCoA+ round of every partition's
        pass in the threads (:func:`._fw_rounds._tree_pass_rounds`; the partition's blocks
        in the order ``order`` restricted to them, default by index), while a pass raises
        the dual (``dual`` before the first) by at least :attr:`cache_share` of ``gain``,
        at most ``max_passes``.  Returns ``ell`` and the dual after the passes (the learner
        calls it through :func:`._fw_blocks.run_cache_passes`)."""
        return self._passes(w, C, ell, dual, self.cache_share * gain, max_passes, None,
                            order)

    def _passes(self, w, C, ell, dual, least, max_passes, steps, order):
        """The passes of :meth:`run_passes`, while one raises the dual by ``least``, up to
        ``steps`` pairwise steps per block (default: each store's :attr:`pass_steps`)."""
        m = len(self.owner)
        order = np.arange(m, dtype=np.int64) if order is None else np.asarray(order)
        own = self.owner[order]
        orders = [np.ascontiguousarray(self.local[order[own == p]]) for p in range(self.K)]
        self._begin(w, ell)
        self.st[4] = dual
        self.least = least
        done = 0
        while done < max_passes:
            def args(p, together, left=max_passes - done):
                s = self.stores[p]
                return (together, self.sync, self.st, self.W, self.WL, self.stats, C,
                        s.pass_steps if steps is None else steps, s.skip_share, self.least,
                        left, s.hg, *s._data(), s.parents, s.edge_of, *s._store(), s.Y,
                        s.alpha, s.lv, s.G, s.act, s.before, s.coef, s.SC, orders[p])

            done += self._launch("_tree_pass_rounds", args)
            if self.st[3]:
                break
        for p, s in enumerate(self.stores):
            s.n_passes += done
            s.n_visits += int(self.stats[p, 3])
        return self._end(w), float(self.st[4])

    def cache_pass(self, w, C, ell, steps=None):
        """One pass without oracle in every partition, up to ``steps`` pairwise steps per
        block (default: each store's ``pass_steps``), combined as a round (see
        :meth:`run_passes`)."""
        ell, _ = self._passes(w, C, ell, -np.inf, 0.0, 1, steps, None)
        return ell

    def check(self, w, C, dd):
        """Exact hinge losses (m,) and block gaps (m,) at ``w``: each partition's pass in its
        thread."""
        m = len(self.owner)
        hinge, g = np.empty(m), np.empty(m)
        outs = self._map(lambda p: self.stores[p].check(w, C, dd[self.parts[p]]))
        for idx, (h, gp) in zip(self.parts, outs):
            hinge[idx], g[idx] = h, gp
        return hinge, g

    def oracle_pass(self, w):
        """The bare loss-augmented oracle pass at ``w`` (hinge losses, no block gaps)."""
        hinge = np.empty(len(self.owner))
        outs = self._map(lambda p: self.stores[p].oracle_pass(w))
        for idx, h in zip(self.parts, outs):
            hinge[idx] = h
        return hinge

    def primal(self, ops, mu_true, dd, C, d):
        """``w = sum_p w_p`` and ``ell = sum_p ell_p`` afresh from the partitions' block
        variables (each in its thread; added in partition order)."""
        dd = np.asarray(dd, dtype=float)
        outs = self._map(lambda p: self.stores[p].primal(None, None, dd[self.parts[p]], C,
                                                          d))
        w = np.zeros(self.n_features)
        ell = 0.0
        for w_p, e in outs:
            w += w_p
            ell += e
        return w, ell

    def _at(self, i):
        return self.stores[self.owner[i]], int(self.local[i])

    def weights(self, i):
        """The weights (ns_i,) of block ``i``'s active outputs."""
        s, j = self._at(i)
        return s.weights(j)

    def labellings(self, i):
        """Block ``i``'s active outputs (ns_i, n_i) (labels of its nodes)."""
        s, j = self._at(i)
        return s.labellings(j)

    def loss(self, i):
        """``c_i . m_i``."""
        s, j = self._at(i)
        return s.loss(j)

    def marginal(self, i, L):
        """``m_i`` as a dense part vector (L,)."""
        s, j = self._at(i)
        return s.marginal(j, L)


def n_threads(n_jobs):
    """The threads of a compiled tree fit for ``n_jobs`` (checked: None, or a non-zero
    int; -1 all cores)."""
    from ..parallel import check_n_jobs
    return check_n_jobs(n_jobs)

