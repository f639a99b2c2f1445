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

from typing import Any, Dict

import numpy as np

from ..compiled import kernel_set
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
    a BLAS call on one example's few rows.  Two rows by four labels per sweep of a feature
    row (each load of a row serves four products, each of a label's weights two), on 1-D
    views (which the compiler vectorizes, where it does not vectorize the same sums on flat
    offsets); past the last label, the sweep repeats label ``a`` and drops the sums."""
    b = noff[i]
    n = noff[i + 1] - b
    j = 0
    while j < n:
        vr = V[b + j]
        vq = V[b + j + 1] if j + 1 < n else vr
        a = 0
        while a < k:
            a1 = a + 1 if a + 1 < k else a
            a2 = a + 2 if a + 2 < k else a
            a3 = a + 3 if a + 3 < k else a
            w0 = w[a * dv:(a + 1) * dv]
            w1 = w[a1 * dv:(a1 + 1) * dv]
            w2 = w[a2 * dv:(a2 + 1) * dv]
            w3 = w[a3 * dv:(a3 + 1) * dv]
            x0 = 0.0
            x1 = 0.0
            x2 = 0.0
            x3 = 0.0
            y0 = 0.0
            y1 = 0.0
            y2 = 0.0
            y3 = 0.0
            for t in range(dv):
                x = vr[t]
                y = vq[t]
                x0 += x * w0[t]
                x1 += x * w1[t]
                x2 += x * w2[t]
                x3 += x * w3[t]
                y0 += y * w0[t]
                y1 += y * w1[t]
                y2 += y * w2[t]
                y3 += y * w3[t]
            S[j, a] = x0
            if a + 1 < k:
                S[j, a + 1] = x1
            if a + 2 < k:
                S[j, a + 2] = x2
            if a + 3 < k:
                S[j, a + 3] = x3
            if j + 1 < n:
                S[j + 1, a] = y0
                if a + 1 < k:
                    S[j + 1, a + 1] = y1
                if a + 2 < k:
                    S[j + 1, a + 2] = y2
                if a + 3 < k:
                    S[j + 1, a + 3] = y3
            a += 4
        j += 2
    return b, n


def _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back, edge, best, y):
    """Max-sum on the tree of example ``i`` (nodes ``b..b+n-1``, node scores ``S``, edge
    scores from ``w`` and ``E`` on the fly into ``edge`` (k, k), child label first; ``best``
    (k,) scratch); ``y[:n]`` receives the maximizer (ties: the smallest label, as
    :func:`structlp.graphical.maxsum.tree_max_sum`).  Returns its value."""
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
        if not same:               # the edge's scores, child label first: edge[c, a]
            for a in range(k):
                for c in range(k):
                    o = o0 + (a * k + c) * de
                    es = 0.0
                    for r in range(de):
                        es += E[e, r] * w[o + r]
                    edge[c, a] = es
            last = e
        # for every parent label a at once (SIMD selects, no branch): the best child
        # label, the smallest among ties
        mc = msg[j, 0]
        for a in range(k):
            best[a] = edge[0, a] + mc
            back[j, a] = 0
        for c in range(1, k):
            mc = msg[j, c]
            for a in range(k):
                v = edge[c, a] + mc
                cur = best[a]
                arg = back[j, a]
                if v > cur:
                    cur = v
                    arg = c
                best[a] = cur
                back[j, a] = arg
        for a in range(k):
            msg[p, a] += best[a]
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


def _label_value_table(b, n, S, edge, parents, Y, r, y):
    """``sum_j S[j, y_j]`` plus ``edge[y_j, y_p]`` over the edges of the labelling
    ``Y[r, :n]`` (all edges scored by the one table ``edge``), and whether it equals
    ``y[:n]``."""
    v = 0.0
    same = True
    for j in range(n):
        yj = Y[r, j]
        if yj != y[j]:
            same = False
        v += S[j, yj]
        p = parents[b + j]
        if p >= 0:
            v += edge[yj, Y[r, p]]
    return v, same


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


def _block_values(i, b, n, k, dv, de, yv, o, ns_i, w, V, E, parents, edge_of, lv, act, SC):
    """``act[s] = psi(y_s) . w + lv[o + s]`` of block ``i``'s active labellings ``y_s =
    yv[(o + s) nmax:...]`` (``s < ns_i``).

    A block's labellings mostly share their labels letter by letter: each node score
    ``V_ij . theta_a`` is computed once per distinct (node, label) pair, kept in ``SC``
    (nmax, k), NaN on entry and again on return (compiled with reassociated, contracted
    sums; NaN kept)."""
    nmax = SC.shape[0]
    base = k * dv
    for s in range(ns_i):
        ro = (o + s) * nmax
        v = lv[o + s]
        for j in range(n):
            a = yv[ro + j]
            x = SC[j, a]
            if x != x:                           # not yet computed
                wa = w[a * dv:(a + 1) * dv]      # 1-D views: the compiled sum is vectorized
                vr = V[b + j]
                x = 0.0
                for t in range(dv):
                    x += wa[t] * vr[t]
                SC[j, a] = x
            v += x
            p = parents[b + j]
            if p >= 0:
                q = base + (yv[ro + p] * k + a) * de
                e = b - i + edge_of[b + j]
                for t in range(de):
                    v += w[q + t] * E[e, t]
        act[s] = v
    for s in range(ns_i):
        ro = (o + s) * nmax
        for j in range(n):
            SC[j, yv[ro + j]] = np.nan


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
    W = w[:k * dv].reshape((k, dv))          # rows of labels: no view per update
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
                    f = -C * cj
                    r = b + j
                    for t in range(dv):
                        W[yj, t] += f * V[r, t]
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
                parents, edge_of, cn, Kn, koff, Ke, keoff, uniform, ns, so, go, cap, top, Y,
                alpha, lv, G, S, msg, back, ybuf, act, before, coef):
    """Pairwise BCFW steps (with up to ``inner_steps`` inner steps) of the blocks
    ``perm[start:]`` at the running ``w`` (moved in place).  ``g_est[i]`` receives each
    block's gap.  Where ``uniform[i]`` (all edges of example ``i`` share their features: a
    chain's constant edge feature), max-sum's one table of edge scores scores the block's
    active labellings.  Returns ``ell`` plus ``C`` times the changes of ``c_i . m_i``, and
    -1, or the position in ``perm`` of a block whose new output found no room in the pools
    (nothing of it was changed: grow the pools and call again from there)."""
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    edge = np.empty((k, k))                  # max-sum's edge scores (child, parent)
    best = np.empty(k)
    for pos in range(start, perm.shape[0]):
        i = perm[pos]
        if pos + 1 < perm.shape[0]:
            _prefetch_block(perm[pos + 1], k, dv, V, noff, cn, Kn, koff, ns, so, go, cap, Y,
                            alpha, lv, G)
        b, n = _word_scores(i, w, k, dv, V, noff, S)
        for j in range(n):
            for a in range(k):
                S[j, a] += cn[b + j, a]
        amu = _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back, edge,
                       best, ybuf)
        ni = ns[i]
        o = so[i]
        mean = 0.0
        jj = -1
        for s in range(ni):
            if uniform[i]:       # one edge table: max-sum's (the buffer's last k rows)
                act[s], same = _label_value_table(b, n, S, edge, parents, Y, o + s, ybuf)
            else:
                act[s] = _label_value(i, b, n, k, dv, de, S, w, E, parents, edge_of, Yf,
                                      (o + s) * nmax)
                same = True
                for j in range(n):
                    if Y[o + s, j] != ybuf[j]:
                        same = False
                        break
            mean += alpha[o + s] * act[s]
            if jj < 0 and same:
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


def _cache_pass(w, C, ell, steps, thr, hg, k, dv, de, V, E, noff, parents, edge_of, ns, so,
                go, cap, Y, alpha, lv, G, act, before, coef, SC, blocks):
    """A pass without oracle over the blocks in the order ``blocks`` (a permutation): each
    block with two or more active outputs and ``hg[i] >= thr`` takes up to ``steps``
    pairwise steps between its best and worst at the current ``w`` (values ``psi_s . w +
    lv_s`` (:func:`_block_values`), then moved by the Gram matrix); ``hg[i]`` receives the
    gap left between its best and worst active outputs (``C`` times their difference of
    values; 0 with fewer than two).  Returns ``ell`` and the number of blocks visited."""
    Yf = Y.reshape(-1)
    visits = 0
    for t in range(blocks.shape[0]):
        i = blocks[t]
        ni = ns[i]
        if ni < 2:
            hg[i] = 0.0
            continue
        if hg[i] < thr:
            continue
        visits += 1
        b = noff[i]
        n = noff[i + 1] - b
        o = so[i]
        c = cap[i]
        g0 = go[i]
        _block_values(i, b, n, k, dv, de, Yf, o, ni, w, V, E, parents, edge_of, lv, act, SC)
        for s in range(ni):
            before[s] = alpha[o + s]
        dl, taken = _pairwise_steps(act, G[g0:g0 + c * c].reshape((c, c)), alpha[o:o + c],
                                    lv[o:o + c], ni, -1, C, steps, 0.0)
        lo = -1
        hi = -1
        for s in range(ni):                  # the values after the steps (Gram-moved)
            if alpha[o + s] > _DROP:
                if lo < 0 or act[s] < act[lo]:
                    lo = s
                if hi < 0 or act[s] > act[hi]:
                    hi = s
        hg[i] = C * (act[hi] - act[lo]) if lo >= 0 else 0.0
        if taken:
            _finish(i, b, n, k, dv, de, C, w, V, E, parents, edge_of, ns, so, go, cap, Y,
                    alpha, lv, G, before, coef)
            ell += C * dl
    return ell, visits


def _tree_cache_passes(w, C, ell, dual, gain, share, max_passes, steps, skip, thr, hg, k, dv,
                       de, V, E, noff, parents, edge_of, ns, so, go, cap, Y, alpha, lv, G, act,
                       before, coef, SC, out, blocks):
    """Up to ``max_passes`` passes without oracle (:func:`_cache_pass`, each in the order
    ``blocks``), the first visiting the blocks with ``hg[i] >= thr``, a later one those with
    at least ``skip`` times the mean of ``hg``, while a pass raises the dual ``ell - |w|^2 /
    2`` (``dual`` before the first) by at least ``share * gain``.  Returns ``ell``; ``out[0]``
    receives the dual after the passes, ``out[1]`` their number and ``out[2]`` their block
    visits (one kernel call for all the passes after an epoch: a call's checks in front of
    the compiled code cost more than a pass skipping most blocks)."""
    m = ns.shape[0]
    done = visits = 0
    for _ in range(max_passes):
        ell, v = _cache_pass(w, C, ell, steps, thr, hg, k, dv, de, V, E, noff, parents,
                             edge_of, ns, so, go, cap, Y, alpha, lv, G, act, before, coef, SC,
                             blocks)
        visits, done = visits + v, done + 1
        ww = 0.0
        for t in range(w.shape[0]):
            ww += w[t] * w[t]
        now = ell - 0.5 * ww
        passed, dual = now - dual, now
        if passed < share * gain:
            break
        tot = 0.0
        for i in range(m):
            tot += hg[i]
        thr = skip * tot / m
    out[0], out[1], out[2] = dual, done, visits
    return ell


def _tree_check(w, C, dd, hinge, g_est, k, dv, de, V, E, noff, order, parents, edge_of, cn,
                ytrue, ns, so, Y, alpha, S, msg, back, ybuf):
    """The exact pass at ``w``: per example the unary scores (:func:`_word_scores`, into
    ``S`` (nmax, k)), the loss-augmented max-sum, the hinge loss ``hinge[i]`` and the block
    gap ``g_est[i]`` (``C (a . mu* - a . m_i)``).  Without blocks (``ns`` empty): the
    oracle pass only.  (No BLAS call: a compiled matrix product would import SciPy's BLAS,
    a noticeable start-up cost in a fresh process.)"""
    m = noff.shape[0] - 1
    nmax = Y.shape[1]
    Yf = Y.reshape(-1)
    edge = np.empty((k, k))
    best = np.empty(k)
    for i in range(m):
        b, n = _word_scores(i, w, k, dv, V, noff, S)
        truth = _label_value(i, b, n, k, dv, de, S, w, E, parents, edge_of, ytrue, b)
        for j in range(n):
            for a in range(k):
                S[j, a] += cn[b + j, a]
        amu = _viterbi(i, b, n, k, dv, de, S, w, E, order, parents, edge_of, msg, back, edge,
                       best, ybuf)
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


_HELPERS = (_prefetch_block, _viterbi, _label_value, _label_value_table, _label_loss,
            _label_gram, _add_psi, _drop_slot, _relocate, _finish, _pairwise_steps, _cache_pass)
_KERNELS = ("_tree_epoch", "_tree_cache_passes", "_tree_check", "_tree_primal")
_CACHE: Dict[str, Any] = {}
USE_NUMBA = True          # tests switch it off to run the same kernels as Python


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
        # (not nnan: the scores not yet computed are NaN)
        register_jitable(fastmath={"reassoc", "contract"})(_block_values)
        _CACHE["jitable"] = True
    return True


def _kernels():
    """The four kernels, compiled (:func:`structlp.compiled.kernel_set`) when
    :data:`USE_NUMBA`, else the Python functions themselves."""
    key = "numba" if USE_NUMBA else "python"
    if key not in _CACHE:
        fns = {name: globals()[name] for name in _KERNELS}
        _CACHE[key] = (key == "numba" and kernel_set(fns, _jit_helpers)) or fns
    return _CACHE[key]
