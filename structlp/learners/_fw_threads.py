"""Frank–Wolfe on tree labellings on several cores of one process: CoCoA+ over in-process
partitions of the blocks.

With ``K`` threads, the blocks are split once into ``K`` partitions (by a permutation drawn
from the fit's random generator, cut where the partitions hold about equal numbers of
nodes), each with a compiled block store of its own (:class:`._fw_tree_store._TreeBlocks`
over its examples).  An epoch hands each partition the blocks of the epoch's order that it
owns (in that order), cut into short rounds (:attr:`_ThreadedTreeBlocks.round_blocks`
blocks per partition); in a round each thread runs the compiled epoch kernel over its
blocks on the CoCoA+ local subproblem of its partition (:func:`tree_local_round`: the
ordinary BCFW dual of its blocks with ``C' = sigma' C``, from a copy of the global ``w``),
the same local solve as a worker of
:class:`~structlp.learners.sharded.ShardedFrankWolfeLearner` (``sigma' = K`` there).  Then
the partitions' changes are added (CoCoA+ "adding", Ma et al. 2015): a partition's local
iterate moved by ``w_p' - w = sigma' Delta w_p``, so the new ``w = w + sum_p (w_p' - w) /
sigma'`` is ``w(m)`` of the new block variables exactly, and ``ell`` moves by ``sum_p Delta
ell_p' / sigma'`` (the local ``ell`` is in units of ``C'``).  With ``sigma' = K`` the dual
never decreases (``|sum_p v_p|^2 <= K sum_p |v_p|^2``); ``sigma'`` follows the measured
alignment of the last round's changes (:meth:`_ThreadedTreeBlocks._combine`), which the
partitions' changes mostly undershoot (they point apart).  Whatever ``sigma'``, each block
holds a feasible distribution and ``w = w(m)``, so the exact duality gap (each partition's
check pass, in its thread) certifies the result as in a serial fit.  The passes without
oracle are rounds too, one pass each (:func:`._fw_blocks.run_cache_passes`).

Why short rounds: run apart for a whole epoch, the partitions' changes cancel more and
more (on OCR letters the fit then took several times the epochs of one thread); rounds of
32 blocks cost a few more epochs than one thread and two lock hand-offs each.

The kernels run without the GIL (numba's ``nogil``; the ahead-of-time build releases it as
well), so the threads run on separate cores.  The iterates depend on ``random_state`` and
``K`` only: the partition, the epochs' order of the blocks, the rounds and the order in
which the changes are added are fixed by them.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np

from ._fw_blocks import run_cache_passes
from ._fw_tree_store import _TreeBlocks

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


def _change(w, w_loc, ell):
    """``(d, |d|^2, ell)`` of a local iterate, ``d = w_loc - w`` (in ``w_loc``'s memory)."""
    w_loc -= w
    return w_loc, float(w_loc.dot(w_loc)), ell


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
        starts = off[self.idx]
        lens = off[self.idx + 1] - starts
        new_off = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=new_off[1:])
        sel = np.repeat(starts - new_off[:-1], lens) + np.arange(new_off[-1], dtype=np.int64)
        return idx[sel], val[sel], new_off


class _Part:
    """What a tree store reads of the prepared data, for the examples ``idx`` only."""

    def __init__(self, data, idx):
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
    # (6,251 words, 2 threads) 0.05 took 63 epochs, 0.1 (one thread's share) 68, 0.02-0.03
    # 59 with more passes and no less CPU; fold 1: 47 against 59
    cache_share = 0.05
    # blocks per partition in a round: on OCR letters (C = 0.1, tol = 1e-3, 2 threads) 32
    # took 65-67 epochs on the 6,251 words (one thread: 61), 128: about 100, a whole epoch
    # per round: over 300 (the partitions' changes cancel more the longer they run apart)
    round_blocks = 32

    def __init__(self, model, data, K, rng):
        self.K = int(K)
        m = data.n_examples
        self.parts = split([x.n_nodes for x in data.X], self.K, rng)
        self.owner = np.empty(m, dtype=np.int64)
        self.local = np.empty(m, dtype=np.int64)
        for p, idx in enumerate(self.parts):
            self.owner[idx] = p
            self.local[idx] = np.arange(len(idx))
        self.stores = [_TreeBlocks(model, _Part(data, idx)) for idx in self.parts]
        self.n_features = self.stores[0].n_features
        self.sigma = float(self.K)     # the next round's sigma' (see _combine): safe at first
        self.overlap_cpu = 0.0

    def _map(self, fn):
        """``[fn(p) for p in range(K)]``: partition 0 in this thread, the others in the
        crew's.  :attr:`overlap_cpu` adds the thread CPU seconds of all but the longest
        (what a machine with K free cores runs alongside: the process's CPU time minus
        it is the critical path, whatever else the machine runs)."""
        clock = time.thread_time

        def timed(p):
            t = clock()
            out = fn(p)
            return out, clock() - t

        outs = crew(self.K).run(timed)
        cpu = [t for _, t in outs]
        self.overlap_cpu += sum(cpu) - max(cpu)
        return [o for o, _ in outs]

    def restart(self, data):
        """Warm start: each partition's data made afresh (the features may differ)."""
        for idx, s in zip(self.parts, self.stores):
            s.restart(_Part(data, idx))

    def _combine(self, w, ell, outs, sigma):
        """CoCoA+ adding of the partitions' changes ``d_p = w_p' - w`` of their local
        iterates made with ``sigma`` (``outs``: ``(d_p, |d_p|^2, ell_p')`` in partition
        order): ``w += sum_p d_p / sigma`` in place; returns ``ell + sum_p ell_p' / sigma``.

        Then the next round's ``sigma' = min(K, max(1, a))`` with ``a = |sum_p d_p|^2 /
        sum_p |d_p|^2``: CoCoA+'s data-dependent bound (``sigma' >= a`` makes the local
        gains add up to at most the global one), measured on this round's changes instead
        of bounded by ``K``.  Any ``sigma'`` keeps the dual point feasible (each block takes
        its partition's new value); the certificate holds whatever it is."""
        step = outs[0][0]
        for d, _, _ in outs[1:]:              # in partition order: deterministic
            step += d
        sq = sum(q for _, q, _ in outs)
        align = float(step.dot(step)) / sq if sq > 0.0 else 1.0
        self.sigma = min(float(self.K), max(1.0, align))
        step *= 1.0 / sigma
        w += step
        return ell + sum(e for _, _, e in outs) / sigma

    def epoch(self, perm, w, C, inner_steps, ell, g_est):
        """An epoch in CoCoA+ rounds: each partition's blocks of ``perm`` (in that order),
        cut into rounds of about :attr:`round_blocks` blocks per partition, a round in the
        threads from the ``w`` the last one left.  ``g_est[i]`` receives the visited blocks'
        gaps (in units of ``C``: measured at the local iterates)."""
        K = self.K
        own = self.owner[perm]
        perms = [self.local[perm[own == p]] for p in range(K)]
        R = max(1, -(-max(len(q) for q in perms) // self.round_blocks))
        # each partition's blocks cut where the rounds hold equal shares of its nodes (the
        # threads then wait less for each other)
        ends = []
        for s, q in zip(self.stores, perms):
            work = np.cumsum(np.diff(s.noff)[q])
            ends.append(np.searchsorted(work, work[-1] * np.arange(1, R + 1) / R, side="right")
                        if len(q) else np.zeros(R, dtype=np.int64))
        gs = [g_est[idx] for idx in self.parts]     # the blocks not visited keep theirs
        for r in range(R):
            sig = self.sigma
            cut = [q[(e[r - 1] if r else 0):e[r]] for q, e in zip(perms, ends)]

            def run(p):
                out = tree_local_round(self.stores[p], w, C, sig, [cut[p]], inner_steps, 0,
                                       gs[p])
                gs[p][cut[p]] /= sig              # the local gaps in units of C
                return _change(w, *out)

            ell = self._combine(w, ell, self._map(run), sig)
        for idx, g in zip(self.parts, gs):
            g_est[idx] = g
        return ell

    def cache_pass(self, w, C, ell, steps=None):
        """One pass without oracle (:meth:`_TreeBlocks.cache_pass`) in every partition on
        its CoCoA+ local subproblem, combined as an epoch's round is (the learner runs
        these passes while one gains enough, :func:`._fw_blocks.run_cache_passes`)."""
        sig = self.sigma

        def run(p):
            w_loc = np.array(w, dtype=float)
            return _change(w, w_loc, self.stores[p].cache_pass(w_loc, sig * C, 0.0, steps))

        return self._combine(w, ell, self._map(run), sig)

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

