"""Frank–Wolfe on tree labellings (chains, trees) at the cost of the oracle.

For :class:`~structlp.structures.TreeLabeling` with dense node features, a whole epoch of
block-coordinate Frank–Wolfe (each block: the unary scores ``V_i theta_v^T`` (n_i, k) as one
matrix product, the loss augmentation, max-sum, the pairwise step and its inner steps, the
sparse update of ``w``), a pass without oracle and the exact duality-gap pass are each one
call of a kernel compiled by numba (cached on disk), the same code run as Python where
numba cannot be imported.

A block's active outputs are kept as labellings (n_i,), not as part vectors: with the node
Gram matrix ``K_i = V_i V_i^T`` (n_i, n_i) and the edge Gram matrix ``E_i E_i^T`` of the
example, the inner product of two outputs' joint features is

.. math::

    \\psi(y)\\cdot\\psi(y') = \\sum_{j,l} K_i[j, l]\\,[y_j = y'_l]
        + \\sum_{e,f} (E_i E_i^T)[e, f]\\,[(y_{p(e)}, y_{c(e)}) = (y'_{p(f)}, y'_{c(f)})],

so the pairwise steps inside the active set (:func:`._fw_kernels._pairwise_steps`) run on
``n``-vectors, and ``w = (theta_v (k, d_v), theta_e (k^2, d_e))`` moves by adding rows of
``V_i`` and ``E_i`` to the rows of the labels concerned.  Memory: the data, their Gram
matrices (sum of n_i^2), and per block its active labellings and their Gram matrix, in
slots of its own (a power of two, at least 4, at most twice its largest active set).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..compiled import aot, jit
from ..compiled.prefetch import prefetch
from ..compiled.prefetch import register as _register_prefetch
from ._fw_kernels import _DROP, _pairwise_steps
from ._fw_kernels import _jit_helpers as _jit_kernel_helpers


# ------------------------------------------------------------------ kernels (numba or Python)

def _word_scores(i, w, k, dv, V, noff, S):
    """Node scores ``S[:n] = V_i theta_v^T`` (n, k) of example ``i`` (compiled:
    :func:`_word_scores_loop`)."""
    b = noff[i]
    n = noff[i + 1] - b
    S[:n] = np.dot(V[b:b + n], w[:k * dv].reshape((k, dv)).T)
    return b, n


def _word_scores_loop(i, w, k, dv, V, noff, S):
    """:func:`_word_scores` as loops, compiled with reassociated sums (SIMD): faster than
    a BLAS call on one example's few rows.  Two rows by two labels per sweep of a feature
    row (each load serves two products), on 1-D views (which the compiler vectorizes,
    where it does not vectorize the same sums on flat offsets)."""
    b = noff[i]
    n = noff[i + 1] - b
    j = 0
    while j < n:
        vr = V[b + j]
        vq = V[b + j + 1] if j + 1 < n else vr
        a = 0
        while a < k:
            w0 = w[a * dv:(a + 1) * dv]
            w1 = w[(a + 1) * dv:(a + 2) * dv] if a + 1 < k else w0
            v0 = 0.0
            v1 = 0.0
            v2 = 0.0
            v3 = 0.0
            for t in range(dv):
                x = vr[t]
                y = vq[t]
                v0 += x * w0[t]
                v1 += x * w1[t]
                v2 += y * w0[t]
                v3 += y * w1[t]
            S[j, a] = v0
            if j + 1 < n:
                S[j + 1, a] = v2
            if a + 1 < k:
                S[j, a + 1] = v1
                if j + 1 < n:
                    S[j + 1, a + 1] = v3
            a += 2
        j += 2
    return b, n


def _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back, edge, y):
    """Max-sum on the tree of example ``i`` (nodes ``b..b+n-1``, node scores ``S``, edge
    scores from ``w`` and ``E`` on the fly, parent label first); ``y[:n]`` receives the
    maximizer (ties: the smallest label, as :func:`structlp.graphical.maxsum.tree_max_sum`).
    Returns its value."""
    for j in range(n):
        for a in range(k):
            msg[j, a] = S[j, a]
    o0 = k * dv
    last = -1
    for t in range(n - 1, 0, -1):
        j = order[b + t]
        e = b - i + edge_of[b + j]
        p = parents[b + j]
        same = last >= 0
        for r in range(de):
            if same and E[e, r] != E[last, r]:
                same = False
        if not same:                         # the edge's scores (parent a, child c)
            for a in range(k):
                for c in range(k):
                    o = o0 + (a * k + c) * de
                    es = 0.0
                    for r in range(de):
                        es += E[e, r] * w[o + r]
                    edge[a, c] = es
            last = e
        for a in range(k):
            best = edge[a, 0] + msg[j, 0]
            arg = 0
            for c in range(1, k):
                v = edge[a, c] + msg[j, c]
                if v > best:
                    best = v
                    arg = c
            back[j, a] = arg
            msg[p, a] += best
    root = order[b]
    r = 0
    for a in range(1, k):
        if msg[root, a] > msg[root, r]:
            r = a
    y[root] = r
    for t in range(1, n):
        j = order[b + t]
        y[j] = back[j, y[parents[b + j]]]
    return msg[root, r]


def _label_value(i, b, n, k, dv, de, S, w, E, parents, edge_of, yv, o):
    """``sum_j S[j, y_j]`` plus the edge scores of the labelling ``y = yv[o:o + n]``.

    Labellings are read from a flat array at an offset, here and in the other helpers: a
    view per call costs more than the sum on OCR's words."""
    v = 0.0
    base = k * dv
    for j in range(n):
        yj = yv[o + j]
        v += S[j, yj]
        p = parents[b + j]
        if p >= 0:
            e = b - i + edge_of[b + j]
            q = base + (yv[o + p] * k + yj) * de
            for t in range(de):
                v += E[e, t] * w[q + t]
    return v


def _label_loss(b, n, cn, yv, o):
    """``c . v`` of the labelling ``yv[o:o + n]`` (node losses ``cn`` (N, k))."""
    v = 0.0
    for j in range(n):
        v += cn[b + j, yv[o + j]]
    return v


def _label_gram(i, b, n, k, yv, oy, oz, parents, edge_of, Kn, koff, Ke, keoff):
    """``psi(y) . psi(z)`` of ``y = yv[oy:oy + n]``, ``z = yv[oz:oz + n]`` from the
    example's node and edge Gram matrices."""
    g = 0.0
    ko = koff[i]
    for j in range(n):
        yj = yv[oy + j]
        for l in range(n):
            if yv[oz + l] == yj:
                g += Kn[ko + j * n + l]
    ke = keoff[i]
    for j in range(n):
        p = parents[b + j]
        if p < 0:
            continue
        e = edge_of[b + j]
        pair = yv[oy + p] * k + yv[oy + j]
        for l in range(n):
            q = parents[b + l]
            if q >= 0 and yv[oz + q] * k + yv[oz + l] == pair:
                g += Ke[ke + e * (n - 1) + edge_of[b + l]]
    return g


def _add_psi(i, b, n, k, dv, de, coef, yv, oy, w, V, E, parents, edge_of):
    """``w += coef psi(y)`` (``y = yv[oy:oy + n]``): rows of ``V_i`` (``E_i``) added to the
    label rows of ``w``."""
    for j in range(n):
        o = yv[oy + j] * dv
        wr = w[o:o + dv]
        vr = V[b + j]
        for t in range(dv):
            wr[t] += coef * vr[t]
    base = k * dv
    for j in range(n):
        p = parents[b + j]
        if p >= 0:
            o = base + (yv[oy + p] * k + yv[oy + j]) * de
            e = b - i + edge_of[b + j]
            for t in range(de):
                w[o + t] += coef * E[e, t]


def _psi_dot(i, b, n, k, dv, de, yv, oy, w, V, E, parents, edge_of):
    """``psi(y) . w`` of ``y = yv[oy:oy + n]`` (compiled with reassociated sums)."""
    v = 0.0
    for j in range(n):
        o = yv[oy + j] * dv
        wr = w[o:o + dv]                     # 1-D views: the compiled sum is vectorized
        vr = V[b + j]
        for t in range(dv):
            v += wr[t] * vr[t]
    base = k * dv
    for j in range(n):
        p = parents[b + j]
        if p >= 0:
            o = base + (yv[oy + p] * k + yv[oy + j]) * de
            e = b - i + edge_of[b + j]
            for t in range(de):
                v += w[o + t] * E[e, t]
    return v


def _drop_slot(i, s, ns, so, go, cap, Y, alpha, lv, G):
    """Block ``i``'s slot ``s`` leaves; its last slot takes the place."""
    last = ns[i] - 1
    o = so[i]
    g = go[i]
    c = cap[i]
    if s != last:
        Y[o + s] = Y[o + last]
        alpha[o + s] = alpha[o + last]
        lv[o + s] = lv[o + last]
        for t in range(last):
            if t != s:
                G[g + s * c + t] = G[g + last * c + t]
                G[g + t * c + s] = G[g + last * c + t]
        G[g + s * c + s] = G[g + last * c + last]
    alpha[o + last] = 0.0
    ns[i] = last


def _relocate(i, ns, so, go, cap, top, Y, alpha, lv, G):
    """Twice the slots of block ``i``, moved to the free ends of the pools (the old place
    is left unused); False (nothing changed) when the pools have no room."""
    c = cap[i]
    c2 = 2 * c
    no = top[0]
    ng = top[1]
    if no + c2 > alpha.shape[0] or ng + c2 * c2 > G.shape[0]:
        return False
    o = so[i]
    g = go[i]
    for s in range(ns[i]):
        Y[no + s] = Y[o + s]
        alpha[no + s] = alpha[o + s]
        lv[no + s] = lv[o + s]
        for t in range(ns[i]):
            G[ng + s * c2 + t] = G[g + s * c + t]
    for s in range(ns[i], c2):
        alpha[no + s] = 0.0
    so[i] = no
    go[i] = ng
    cap[i] = c2
    top[0] = no + c2
    top[1] = ng + c2 * c2
    return True


def _finish(i, b, n, k, dv, de, C, w, V, E, parents, edge_of, ns, so, go, cap, Y, alpha, lv,
            G, before, coef):
    """``w -= C sum_s (alpha_s - before_s) psi(y_s)``, then the outputs without weight go.

    The changes are first summed per (node, label) and per (edge, label pair) in ``coef``
    (nmax, k + k^2, zero on entry and on return): where the outputs agree they cancel, and
    only the rows of ``V_i`` (``E_i``) of the others are added to ``w``, read off the
    changed outputs only (no other output has a nonzero entry)."""
    scale = 0.0
    r0 = so[i]
    for s in range(ns[i]):
        dlt = alpha[r0 + s] - before[s]
        if dlt != 0.0:
            scale += abs(dlt)
            for j in range(n):
                yj = Y[r0 + s, j]
                coef[j, yj] += dlt
                p = parents[b + j]
                if p >= 0:
                    coef[edge_of[b + j], k + Y[r0 + s, p] * k + yj] += dlt
    tiny = 1e-14 * scale                     # rounding residue of changes that cancel
    base = k * dv
    for s in range(ns[i]):
        if alpha[r0 + s] == before[s]:        # its entries are those of the changed ones
            continue
        for j in range(n):
            yj = Y[r0 + s, j]
            cj = coef[j, yj]
            if cj != 0.0:
                coef[j, yj] = 0.0
                if abs(cj) > tiny:
                    o = yj * dv
                    f = -C * cj
                    wr = w[o:o + dv]         # 1-D views: a vectorized update
                    vr = V[b + j]
                    for t in range(dv):
                        wr[t] += f * vr[t]
            p = parents[b + j]
            if p >= 0:
                e = edge_of[b + j]
                pair = Y[r0 + s, p] * k + yj
                ce = coef[e, k + pair]
                if ce != 0.0:
                    coef[e, k + pair] = 0.0
                    if abs(ce) > tiny:
                        o = base + pair * de
                        f = -C * ce
                        for t in range(de):
                            w[o + t] += f * E[b - i + e, t]
    for s in range(ns[i] - 1, -1, -1):
        if alpha[r0 + s] <= _DROP:
            _drop_slot(i, s, ns, so, go, cap, Y, alpha, lv, G)


def _prefetch_block(i, k, dv, V, noff, cn, Kn, koff, ns, so, go, cap, Y, alpha, lv, G):
    """Ask for the cache lines of block ``i``'s data (feature rows, node losses, node Gram
    matrix, active outputs and their Gram rows) ahead of its turn in a random order."""
    b = noff[i]
    n = noff[i + 1] - b
    for t in range(b * dv, (b + n) * dv, 8):
        prefetch(V, t)
    for t in range(b * k, (b + n) * k, 8):
        prefetch(cn, t)
    for t in range(koff[i], koff[i] + n * n, 8):
        prefetch(Kn, t)
    nmax = Y.shape[1]
    o = so[i]
    c = cap[i]
    for s in range(ns[i]):
        prefetch(Y, (o + s) * nmax)
        prefetch(Y, (o + s) * nmax + nmax - 1)
        prefetch(G, go[i] + s * c)
    prefetch(alpha, o)
    prefetch(lv, o)


def _tree_epoch(perm, start, w, C, inner_steps, ell, g_est, k, dv, de, V, E, noff, order,
                parents, edge_of, cn, Kn, koff, Ke, keoff, ns, so, go, cap, top, Y, alpha, lv,
                G, S, msg, back, ybuf, act, before, coef):
    """Pairwise BCFW steps (with up to ``inner_steps`` inner steps) of the blocks
    ``perm[start:]`` at the running ``w`` (moved in place).  ``g_est[i]`` receives each
    block's gap.  Returns ``ell`` plus ``C`` times the changes of ``c_i . m_i``, and -1, or
    the position in ``perm`` of a block whose new output found no room in the pools
    (nothing of it was changed: grow the pools and call again from there)."""
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    for pos in range(start, perm.shape[0]):
        i = perm[pos]
        if pos + 1 < perm.shape[0]:
            _prefetch_block(perm[pos + 1], k, dv, V, noff, cn, Kn, koff, ns, so, go, cap, Y,
                            alpha, lv, G)
        b, n = _word_scores(i, w, k, dv, V, noff, S)
        for j in range(n):
            for a in range(k):
                S[j, a] += cn[b + j, a]
        amu = _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back,
                       msg[msg.shape[0] - k:], ybuf)
        ni = ns[i]
        o = so[i]
        mean = 0.0
        jj = -1
        for s in range(ni):
            act[s] = _label_value(i, b, n, k, dv, de, S, w, E, parents, edge_of, Yf,
                                  (o + s) * nmax)
            mean += alpha[o + s] * act[s]
            if jj < 0:
                same = True
                for j in range(n):
                    if Y[o + s, j] != ybuf[j]:
                        same = False
                        break
                if same:
                    jj = s
        g = C * (amu - mean)
        g_est[i] = g if g > 0.0 else 0.0
        if g <= 0.0:
            continue
        if jj < 0:                           # the oracle's output joins with weight 0
            if ni == cap[i]:
                if 2 * ni > act.shape[0] or not _relocate(i, ns, so, go, cap, top, Y, alpha,
                                                          lv, G):
                    return ell, pos
                o = so[i]
            c = cap[i]
            g0 = go[i]
            jj = ni
            for j in range(n):
                Y[o + jj, j] = ybuf[j]
            alpha[o + jj] = 0.0
            lv[o + jj] = _label_loss(b, n, cn, ybuf, 0)
            for s in range(ni + 1):
                gg = _label_gram(i, b, n, k, Yf, (o + jj) * nmax, (o + s) * nmax, parents,
                                 edge_of, Kn, koff, Ke, keoff)
                G[g0 + jj * c + s] = gg
                G[g0 + s * c + jj] = gg
            act[jj] = amu
            ns[i] = ni + 1
            ni += 1
        c = cap[i]
        g0 = go[i]
        for s in range(ni):
            before[s] = alpha[o + s]
        dl, steps = _pairwise_steps(act, G[g0:g0 + c * c].reshape((c, c)), alpha[o:o + c],
                                    lv[o:o + c], ni, jj, C, inner_steps, 1e-3 * g)
        if steps == 0:
            if alpha[o + jj] <= _DROP:
                _drop_slot(i, jj, ns, so, go, cap, Y, alpha, lv, G)
            continue
        _finish(i, b, n, k, dv, de, C, w, V, E, parents, edge_of, ns, so, go, cap, Y, alpha, lv,
                G, before, coef)
        ell += C * dl
    return ell, -1


def _tree_cache_pass(w, C, ell, k, dv, de, V, E, noff, parents, edge_of, ns, so, go, cap, Y,
                     alpha, lv, G, act, before, coef):
    """A pass without oracle: each block with two or more active outputs takes a pairwise
    step between its best and worst at the current ``w`` (values ``psi_s . w + lv_s``)."""
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    for i in range(ns.shape[0]):
        ni = ns[i]
        if ni < 2:
            continue
        b = noff[i]
        n = noff[i + 1] - b
        o = so[i]
        c = cap[i]
        g0 = go[i]
        for s in range(ni):
            act[s] = _psi_dot(i, b, n, k, dv, de, Yf, (o + s) * nmax, w, V, E, parents,
                              edge_of) + lv[o + s]
            before[s] = alpha[o + s]
        dl, steps = _pairwise_steps(act, G[g0:g0 + c * c].reshape((c, c)), alpha[o:o + c],
                                    lv[o:o + c], ni, -1, C, 1, 0.0)
        if steps:
            _finish(i, b, n, k, dv, de, C, w, V, E, parents, edge_of, ns, so, go, cap, Y,
                    alpha, lv, G, before, coef)
            ell += C * dl
    return ell


def _tree_check(w, C, dd, hinge, g_est, k, dv, de, V, E, noff, order, parents, edge_of, cn,
                ytrue, ns, so, Y, alpha, msg, back, ybuf):
    """The exact pass at ``w``: all unary scores as one matrix product, then per example the
    loss-augmented max-sum, the hinge loss ``hinge[i]`` and the block gap ``g_est[i]``
    (``C (a . mu* - a . m_i)``).  Without blocks (``ns`` empty): the oracle pass only."""
    m = noff.shape[0] - 1
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    SA = np.dot(V, w[:k * dv].reshape((k, dv)).T)              # (N, k)
    for i in range(m):
        b = noff[i]
        n = noff[i + 1] - b
        S = SA[b:b + n]
        truth = _label_value(i, b, n, k, dv, de, S, w, E, parents, edge_of, ytrue, b)
        for j in range(n):
            for a in range(k):
                S[j, a] += cn[b + j, a]
        amu = _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back,
                       msg[msg.shape[0] - k:], ybuf)
        hinge[i] = amu + dd[i] - truth
        if ns.shape[0]:
            mean = 0.0
            o = so[i]
            for s in range(ns[i]):
                mean += alpha[o + s] * _label_value(i, b, n, k, dv, de, S, w, E, parents,
                                                    edge_of, Yf, (o + s) * nmax)
            g = C * (amu - mean)
            g_est[i] = g if g > 0.0 else 0.0


def _tree_primal(C, dd, w, k, dv, de, V, E, noff, parents, edge_of, ytrue, ns, so, go, cap,
                 Y, alpha, lv, fill, Kn, koff, Ke, keoff, G):
    """``w = C sum_i (psi(y_i) - sum_s alpha_s psi(y_s))`` and ``ell = C sum_i (d_i + sum_s
    alpha_s lv_s)`` afresh from the block variables (their weights normalized first).
    With ``fill`` (at the start and at a warm start), first the examples' node and edge
    Gram matrices ``Kn``, ``Ke`` and the Gram matrices ``G`` of the active outputs."""
    w[:] = 0.0
    ell = 0.0
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    for i in range(ns.shape[0]):
        b = noff[i]
        n = noff[i + 1] - b
        o = so[i]
        if fill:
            for j in range(n):
                for l in range(n):
                    v = 0.0
                    for t in range(dv):
                        v += V[b + j, t] * V[b + l, t]
                    Kn[koff[i] + j * n + l] = v
            eb = b - i
            for e in range(n - 1):
                for f in range(n - 1):
                    v = 0.0
                    for t in range(de):
                        v += E[eb + e, t] * E[eb + f, t]
                    Ke[keoff[i] + e * (n - 1) + f] = v
            c = cap[i]
            for s in range(ns[i]):
                for t in range(s + 1):
                    g = _label_gram(i, b, n, k, Yf, (o + s) * nmax, (o + t) * nmax, parents,
                                    edge_of, Kn, koff, Ke, keoff)
                    G[go[i] + s * c + t] = g
                    G[go[i] + t * c + s] = g
        tot = 0.0
        for s in range(ns[i]):
            tot += alpha[o + s]
        loss = 0.0
        for s in range(ns[i]):
            alpha[o + s] /= tot
            loss += alpha[o + s] * lv[o + s]
        _add_psi(i, b, n, k, dv, de, 1.0, ytrue, b, w, V, E, parents, edge_of)
        for s in range(ns[i]):
            _add_psi(i, b, n, k, dv, de, -alpha[o + s], Yf, (o + s) * nmax, w, V, E, parents,
                     edge_of)
        ell += dd[i] + loss
    w *= C
    return C * ell


_HELPERS = (_prefetch_block, _viterbi, _label_value, _label_loss, _label_gram, _add_psi,
            _drop_slot, _relocate, _finish, _pairwise_steps)
_KERNELS = ("_tree_epoch", "_tree_cache_pass", "_tree_check", "_tree_primal")
_CACHE: Dict[str, Any] = {}
USE_NUMBA = True          # tests switch it off to run the same kernels as Python
ENABLED = True            # tests switch it off to compare the per-block path's iterates


def _jit_helpers() -> bool:
    """Make the kernels' helpers numba functions (once); False when numba does not import."""
    if "jitable" not in _CACHE:
        try:
            import numba  # noqa: F401 - first: numba.extending may be cached without numba
            from numba.extending import overload, register_jitable
        except ImportError:  # pragma: no cover - the Python kernels are tested directly
            return False
        _jit_kernel_helpers()
        _register_prefetch()
        for h in _HELPERS:
            register_jitable(h)
        fast: Any = {"fastmath": True}
        overload(_word_scores, jit_options=fast)(
            lambda i, w, k, dv, V, noff, S: _word_scores_loop)
        register_jitable(**fast)(_psi_dot)
        _CACHE["jitable"] = True
    return True


def _kernels():
    """The four kernels, compiled (built ahead of time, :mod:`structlp.compiled`, else by
    numba's JIT, cached on disk) when :data:`USE_NUMBA`, else the Python functions
    themselves."""
    key = "numba" if USE_NUMBA else "python"
    if key not in _CACHE:
        fns = {name: globals()[name] for name in _KERNELS}
        if key == "numba":
            built = {name: aot(name.lstrip("_")) for name in _KERNELS}
            if all(f is not None for f in built.values()):
                fns = built
            elif _jit_helpers():
                fns = {name: jit(fn) or fn for name, fn in fns.items()}
        _CACHE[key] = fns
    return _CACHE[key]


# ------------------------------------------------------------------ the block store

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
    cache_share = 0.5      # a pass costs about half an epoch (measured on OCR letters)

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
        for i in range(m):
            b, e = self.noff[i], self.noff[i + 1]
            self.Y[4 * i, :e - b] = self.ytrue[b:e]
            self.alpha[4 * i] = 1.0
            self.lv[4 * i] = float(self.cn[np.arange(b, e), self.ytrue[b:e]].sum())
        self.S = np.zeros((nmax, k))
        self.msg = np.zeros((nmax + k, k))      # (the last k rows: an edge's scores)
        self.back = np.zeros((nmax, k), dtype=np.int64)
        self.ybuf = np.zeros(nmax, dtype=np.int64)
        self.coef = np.zeros((nmax, k + k * k))
        self.act = np.zeros(8)
        self.before = np.zeros(8)

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
        for i, (x, op) in enumerate(zip(data.X, data.Phi)):
            if type(op) is not TreeFeatures or issparse(op.V):
                return False
            idx, _ = data.c.nonzeros(i)
            if idx.size and idx.max() >= x.n_nodes * k:
                return False
        return True

    def _pack(self, data):
        k = self.k
        X = data.X
        self.dv = int(X[0].node_features.shape[1])
        self.de = int(X[0].edge_features.shape[1])
        sizes = np.array([x.n_nodes for x in X], dtype=np.int64)
        self.noff = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.V = np.ascontiguousarray(np.concatenate([np.asarray(x.node_features, float)
                                                      for x in X]))
        self.E = np.ascontiguousarray(np.concatenate(
            [np.asarray(x.edge_features, float).reshape(x.n_nodes - 1, self.de) for x in X]))
        self.order = np.concatenate([x.order for x in X]).astype(np.int64)
        self.parents = np.concatenate([x.parents for x in X]).astype(np.int64)
        self.edge_of = np.concatenate([x.edge_of for x in X]).astype(np.int64)
        N = int(self.noff[-1])
        self.cn = np.zeros((N, k))
        self.ytrue = np.zeros(N, dtype=np.int64)
        for i in range(len(X)):
            b, n = int(self.noff[i]), int(sizes[i])
            idx, vals = data.c.nonzeros(i)
            flat = self.cn[b:b + n].reshape(-1)
            flat[idx] = vals
            t_idx, _ = data.mu_true.nonzeros(i)
            node = t_idx[t_idx < n * k]
            self.ytrue[b + node // k] = node % k
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
        pos = 0
        while True:
            ell, pos = fn(perm, pos, w, C, inner_steps, ell, g_est, *self._data(), self.order,
                          self.parents, self.edge_of, self.cn, self.Kn, self.koff, self.Ke,
                          self.keoff, *self._store(), self.top, self.Y, self.alpha, self.lv,
                          self.G, self.S, self.msg, self.back, self.ybuf, self.act, self.before,
                          self.coef)
            if pos < 0:
                return ell
            self._grow(perm[pos])

    def cache_pass(self, w, C, ell):
        """One pass without oracle (see :func:`_tree_cache_pass`)."""
        return _kernels()["_tree_cache_pass"](
            w, C, ell, *self._data(), self.parents, self.edge_of, *self._store(), self.Y,
            self.alpha, self.lv, self.G, self.act, self.before, self.coef)

    def check(self, w, C, dd):
        """Exact hinge losses (m,) and block gaps (m,) at ``w`` by one oracle pass."""
        m = len(self.ns)
        hinge, g = np.empty(m), np.empty(m)
        _kernels()["_tree_check"](w, C, dd, hinge, g, *self._data(), self.order,
                                  self.parents, self.edge_of, self.cn, self.ytrue, self.ns,
                                  self.so, self.Y, self.alpha, self.msg, self.back, self.ybuf)
        return hinge, g

    def oracle_pass(self, w):
        """The bare loss-augmented oracle pass at ``w`` (hinge losses, no block gaps)."""
        m = len(self.ns)
        hinge = np.empty(m)
        none = np.zeros(0, dtype=np.int64)
        _kernels()["_tree_check"](w, 0.0, np.zeros(m), hinge, hinge, *self._data(),
                                  self.order, self.parents, self.edge_of, self.cn,
                                  self.ytrue, none, none, self.Y, self.alpha, self.msg,
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


def tree_blocks(model: Any, data: Any) -> Optional[_TreeBlocks]:
    """:class:`_TreeBlocks` for ``data`` when applicable, else None."""
    return _TreeBlocks(model, data) if _TreeBlocks.applicable(model, data) else None
