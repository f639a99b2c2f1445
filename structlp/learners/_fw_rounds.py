"""CoCoA+ rounds of tree-labelling blocks on several threads, inside the compiled code.

The kernels of :class:`._fw_threads._ThreadedTreeBlocks`.  Thread ``p`` of ``K`` runs one
call of :func:`_tree_rounds` for a whole epoch (or :func:`_tree_pass_rounds` for the passes
without oracle after it) on its partition's block store.  A round: the thread copies the
global ``W`` into its row of ``WL``, runs the BCFW steps of its next blocks on its CoCoA+
local subproblem (``C' = sigma' C``: :func:`._fw_trees._tree_epoch`, or a pass without
oracle :func:`._fw_trees._cache_pass`), turns its row into its change ``d_p = w_p' - W``
and meets the others (:func:`structlp.compiled.barrier.wait`).  Thread 0 then adds the
changes (:func:`_combine`, in partition order) while the others wait at a second meeting.
So a round costs two meetings inside the compiled code instead of a return to Python, and
rounds can be short (a few blocks per partition: the partitions' changes, made apart, then
cancel less).

``st`` (float64 (5,)) is the state all threads share: ``ell``, the next round's ``sigma'``,
whether a store must grow, whether the passes stop, the dual after the last round.
``stats`` (K, 4): per partition, its round's ``ell`` change (local units), ``|d_p|^2``,
whether it stopped for room in its pools, and its passes' block visits.

``together=False`` runs one round of partition ``p`` and returns without meeting anyone:
the caller then runs the other partitions' and :func:`_combine` in order, in one thread.
That is the same arithmetic in the same order, so the iterates equal the threads' bit for
bit; it is how the Python kernels (numba absent) run, and the tests' oracle for the
threads.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..compiled import barrier as _barrier
from ..compiled import kernel_set
from ..compiled.barrier import wait
from . import _fw_trees
from ._fw_trees import _cache_pass, _tree_epoch
from ._fw_trees import _jit_helpers as _jit_tree_helpers


def _combine(K, W, WL, stats, st, least):
    """CoCoA+ adding of the changes ``d_p`` (rows of ``WL``) made with ``sigma = st[1]``:
    ``W += sum_p d_p / sigma``, ``st[0] += sum_p stats[p, 0] / sigma``; then the next
    round's ``st[1] = min(K, max(1, |sum_p d_p|^2 / sum_p |d_p|^2))`` (CoCoA+'s
    data-dependent safe value, measured on this round's changes), ``st[2]`` whether a
    partition stopped for room, ``st[3]`` whether the dual ``st[0] - |W|^2 / 2`` rose by
    less than ``least`` since ``st[4]``, which receives it."""
    d = W.shape[0]
    sig = st[1]
    sq = 0.0
    ell = 0.0
    grow = 0.0
    for q in range(K):
        ell += stats[q, 0]
        sq += stats[q, 1]
        if stats[q, 2] > grow:
            grow = stats[q, 2]
    step_sq = 0.0
    ww = 0.0
    for t in range(d):
        s = 0.0
        for q in range(K):
            s += WL[q, t]
        step_sq += s * s
        W[t] += s / sig
        ww += W[t] * W[t]
    align = step_sq / sq if sq > 0.0 else 1.0
    st[0] += ell / sig
    st[1] = min(float(K), max(1.0, align))
    st[2] = grow
    dual = st[0] - 0.5 * ww
    st[3] = 1.0 if dual - st[4] < least else 0.0
    st[4] = dual


def _change(p, W, WL, stats, ell):
    """Partition ``p``'s row of ``WL`` made its change ``d_p = w_p' - W``; ``stats[p, :2]``
    its ``ell`` and ``|d_p|^2``."""
    sq = 0.0
    for t in range(W.shape[0]):
        v = WL[p, t] - W[t]
        WL[p, t] = v
        sq += v * v
    stats[p, 0] = ell
    stats[p, 1] = sq


def _meet(sync, p, K, gen, W, WL, stats, st, least):
    """The two meetings of a round (``gen + 1``, ``gen + 2``) with thread 0's
    :func:`_combine` between them; False when aborted."""
    if not wait(sync, p, K, gen + 1):
        return False
    if p == 0:
        _combine(K, W, WL, stats, st, least)
    return wait(sync, p, K, gen + 2)


def _tree_rounds(p, K, r0, together, sync, st, W, WL, stats, pos, ends, perm, C, inner_steps,
                 g_est, k, dv, de, V, E, noff, order, parents, edge_of, cn, Kn, koff, Ke,
                 keoff, uniform, ns, so, go, cap, top, Y, alpha, lv, G, S, msg, back, ybuf,
                 act, before, coef):
    """Partition ``p``'s rounds ``r0, r0 + 1, ...`` of an epoch: in round ``r`` the blocks
    ``perm[pos[p]:ends[r]]`` (local indices, in that order) take their BCFW steps on the
    CoCoA+ local subproblem from ``W`` (``g_est`` receives their gaps in units of ``C``);
    ``pos[p]`` moves past them.  Returns the round to go on from: ``len(ends)`` at the end
    of the epoch, ``r + 1`` after a round in which a partition found no room in its pools
    (``stats[q, 2]``: grow block ``perm[pos[q]]`` of each such ``q``, then call again),
    ``r0 + 1`` when not ``together``, -1 when aborted."""
    R = ends.shape[0]
    r1 = R if together else min(r0 + 1, R)
    gen = 0
    for r in range(r0, r1):
        sig = st[1]
        for t in range(W.shape[0]):
            WL[p, t] = W[t]
        a = pos[p]
        ell, stop = _tree_epoch(perm[:ends[r]], a, WL[p], sig * C, inner_steps, 0.0, g_est,
                                k, dv, de, V, E, noff, order, parents, edge_of, cn, Kn, koff,
                                Ke, keoff, uniform, ns, so, go, cap, top, Y, alpha, lv, G, S,
                                msg, back, ybuf, act, before, coef)
        b = ends[r] if stop < 0 else stop
        for t in range(a, b):
            g_est[perm[t]] /= sig            # the local gaps in units of C
        pos[p] = b
        _change(p, W, WL, stats, ell)
        stats[p, 2] = 0.0 if stop < 0 else 1.0
        if not together:
            return r + 1
        if not _meet(sync, p, K, gen, W, WL, stats, st, -np.inf):
            return -1
        gen += 2
        if st[2] != 0.0:
            return r + 1
    return r1


def _tree_pass_rounds(p, K, together, sync, st, W, WL, stats, C, steps, skip, least,
                      max_passes, hg, k, dv, de, V, E, noff, parents, edge_of, ns, so, go, cap,
                      Y, alpha, lv, G, act, before, coef, SC, blocks):
    """Partition ``p``'s passes without oracle after an epoch, each a round: the blocks of
    ``blocks`` (local indices, in that order) with two or more active outputs and a gap
    ``hg[i]`` at least the threshold (0 while some ``hg`` is unknown, else ``skip`` times
    their mean) take up to ``steps`` pairwise steps on the CoCoA+ local subproblem from
    ``W``; passes go on while one raises the dual by at least ``least`` (``st[4]``: the
    dual before the first), at most ``max_passes``.  ``stats[p, 3]`` adds the block
    visits.  Returns the passes made (1 when not ``together``), -1 when aborted."""
    m = hg.shape[0]
    gen = 0
    for it in range(max_passes if together else 1):
        sig = st[1]
        tot = 0.0
        for i in range(m):
            tot += hg[i]
        thr = skip * tot / m if m > 0 and np.isfinite(tot) else 0.0
        for t in range(W.shape[0]):
            WL[p, t] = W[t]
        ell, visits = _cache_pass(WL[p], sig * C, 0.0, steps, thr, hg, k, dv, de, V, E, noff,
                                  parents, edge_of, ns, so, go, cap, Y, alpha, lv, G, act,
                                  before, coef, SC, blocks)
        _change(p, W, WL, stats, ell)
        stats[p, 2] = 0.0
        stats[p, 3] += visits
        if not together:
            return 1
        if not _meet(sync, p, K, gen, W, WL, stats, st, least):
            return -1
        gen += 2
        if st[3] != 0.0:
            return it + 1
    return max_passes


_KERNELS = ("_tree_rounds", "_tree_pass_rounds", "_combine")
_CACHE: Dict[str, Any] = {}


def _jit_helpers() -> bool:
    """Make the kernels' helpers numba functions (once); False when numba does not
    import."""
    if "jitable" not in _CACHE:
        if not _jit_tree_helpers():
            return False
        from numba.extending import register_jitable
        _barrier.register()
        for h in (_tree_epoch, _combine, _change, _meet):
            register_jitable(h)
        _CACHE["jitable"] = True
    return True


def _kernels():
    """The kernels, compiled (:func:`structlp.compiled.kernel_set`), or the Python functions
    themselves (where :data:`._fw_trees.USE_NUMBA` is off, or numba absent).  Compiled,
    they run without the GIL: ``"together"`` in the result says whether threads may run
    them at once."""
    key = "numba" if _fw_trees.USE_NUMBA else "python"
    if key not in _CACHE:
        fns: Dict[str, Any] = {name: globals()[name] for name in _KERNELS}
        built = kernel_set(fns, _jit_helpers) if key == "numba" else None
        _CACHE[key] = dict(built or fns, together=built is not None)
    return _CACHE[key]
