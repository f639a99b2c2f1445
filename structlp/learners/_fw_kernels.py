"""Frank–Wolfe step kernels: pairwise steps and line searches, compiled by numba when it
imports (the same operations as plain Python otherwise)."""

from __future__ import annotations

from typing import Any, Callable, Dict

import numpy as np

from ..compiled import ahead_of_time, jit


_DROP = 1e-12          # an output whose weight falls to this leaves the active set


def _pairwise_steps(act, G, alpha, lv, n, j, C, inner_steps, g_min):
    """Pairwise Frank–Wolfe steps inside a block's active set, on ``n``-vectors only.

    ``act[l] = a . v_l`` (n,) are the loss-augmented values of the active outputs at the
    current ``w`` and ``G[l, r] = psi_l . psi_r`` their Gram matrix, so that a step of
    ``gamma`` from output ``f`` to ``b`` (``w -= gamma C (psi_b - psi_f)``) changes the
    values by ``-gamma C (G[b] - G[f])`` (``G`` is symmetric) and the dual objective by
    ``gamma g - gamma^2 C^2 |psi_b - psi_f|^2 / 2`` with ``g = C (act[b] - act[f])``: the
    exact line search is ``gamma = min(alpha[f], g / (C^2 |psi_b - psi_f|^2))``.

    If ``j >= 0``: first a step from the worst active output (lowest value, weight
    above ``_DROP``) to ``j`` (the oracle's output, possibly of weight 0), and no more
    if it leaves exactly two outputs; then (or if ``j < 0``) up to ``inner_steps`` steps
    from the worst to the best active output, while their gap exceeds ``g_min``.
    ``alpha`` and ``act`` are updated in place (outputs whose weight falls to ``_DROP``
    are skipped, for the caller to drop).  Returns the change of ``c . m`` and the number
    of steps taken.

    Plain scalar loops: compiled by numba when it is installed, run as Python otherwise,
    with the same operations in the same order (the same results).
    """
    dl = 0.0
    steps = 0
    pair_only = False
    for s in range(inner_steps + 1):
        if s == 0 and j < 0:
            continue
        lo = -1
        hi = -1
        count = 0
        for l in range(n):
            if alpha[l] > _DROP:
                count += 1
                if lo < 0 or act[l] < act[lo]:
                    lo = l
                if hi < 0 or act[l] > act[hi]:
                    hi = l
        if s == 0:
            hi = j
            # mu and one other output: that pair is exactly line-searched by this step
            pair_only = count + (0 if alpha[j] > _DROP else 1) == 2
        elif count < 2 or pair_only:
            break
        if lo < 0:
            break
        g = C * (act[hi] - act[lo])
        if g <= (0.0 if s == 0 else g_min):
            break
        den = C * C * (G[hi, hi] + G[lo, lo] - 2.0 * G[hi, lo])
        cap = alpha[lo]
        gamma = cap if den <= 0.0 else min(cap, g / den)
        if gamma <= 0.0:
            break
        alpha[hi] += gamma
        alpha[lo] -= gamma
        dl += gamma * (lv[hi] - lv[lo])
        t = gamma * C
        for l in range(n):
            act[l] -= t * (G[hi, l] - G[lo, l])       # G is symmetric: rows are contiguous
        steps += 1
        if s == 0 and alpha[lo] <= _DROP:
            pair_only = False          # a drop step: the others may still move
    return dl, steps


def _line_search(w, v, g_dir, cap, C):
    """Exact line search along ``m_i += gamma delta``, ``gamma <= cap``; moves ``w``.

    ``v = Phi_i^T delta``: ``w`` changes by ``-gamma C v`` and the dual objective by
    ``gamma g_dir - gamma^2 C^2 |v|^2 / 2``."""
    den = C * C * v.dot(v)
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        w -= (gamma * C) * v
    return gamma


# ---------------------------------------------------------------- psi-mode kernels
# Plain scalar loops over the pool arrays of _PsiBlocks (see there): compiled by numba
# when it imports (_compiled), run as Python otherwise, with the same operations in the
# same order (bit-identical iterates): elementwise array operations, and every sum of
# products in order, as a cumulative sum (:func:`_dot`; numpy's and numba's ``cumsum``
# add in order, whereas ``dot`` may not).  The helpers are inlined into the two kernels.

def _dot(a, b):
    """``a . b`` (1-D) summed in index order (compiled: :func:`_dot_loop`)."""
    return (a * b).cumsum()[-1] if a.shape[0] else 0.0


def _dot_loop(a, b):
    """:func:`_dot` as a loop, the same additions in the same order (no temporaries)."""
    if a.shape[0] == 0:
        return 0.0
    v = a[0] * b[0]
    for t in range(1, a.shape[0]):
        v += a[t] * b[t]
    return v


def _psi_values(i, w, rows, n, psi, lv, act):
    """``act[s] = psi_r . w + lv_r`` for the active rows ``r = rows[i, s]``."""
    for s in range(n[i]):
        r = rows[i, s]
        act[s] = _dot(psi[r], w) + lv[r]


def _psi_line(w, p, q, g_dir, cap, C):
    """:func:`_line_search` along ``v = p - q`` (two (d,) vectors; compiled:
    :func:`_psi_line_loop`)."""
    v = p - q
    den = C * C * _dot(v, v)
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        w -= (gamma * C) * v
    return gamma


def _psi_line_loop(w, p, q, g_dir, cap, C):
    """:func:`_psi_line` as loops, the same operations in the same order (no
    temporaries)."""
    den = 0.0
    for t in range(w.shape[0]):
        v = p[t] - q[t]
        den = v * v if t == 0 else den + v * v
    den = C * C * den
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        gc = gamma * C
        for t in range(w.shape[0]):
            w[t] -= gc * (p[t] - q[t])
    return gamma


def _psi_remove(i, s, rows, n, alpha, free, nfree):
    """Block ``i``'s slot ``s`` leaves (its last slot takes the place); the row is freed."""
    r = rows[i, s]
    last = n[i] - 1
    rows[i, s] = rows[i, last]
    n[i] = last
    alpha[r] = 0.0
    free[nfree[0]] = r
    nfree[0] += 1


def _psi_inner(i, w, C, g_min, rows, n, psi, lv, alpha, free, nfree, act):
    """A pairwise step of block ``i`` between its best and worst active outputs at ``w``
    (``act``: scratch space for their values).  Returns the change of ``c_i . m_i`` and
    whether a step was taken (not if fewer than two outputs are active or their gap is
    at most ``g_min``)."""
    ni = n[i]
    if ni < 2:
        return 0.0, False
    _psi_values(i, w, rows, n, psi, lv, act)
    kf = 0
    ka = 0
    for s in range(1, ni):
        if act[s] > act[kf]:
            kf = s
        if act[s] < act[ka]:
            ka = s
    g2 = C * (act[kf] - act[ka])
    if g2 <= g_min:
        return 0.0, False
    rf = rows[i, kf]
    ra = rows[i, ka]
    gamma = _psi_line(w, psi[rf], psi[ra], g2, alpha[ra], C)
    alpha[rf] += gamma
    alpha[ra] -= gamma
    dl = gamma * (lv[rf] - lv[ra])
    if alpha[ra] <= _DROP:
        _psi_remove(i, ka, rows, n, alpha, free, nfree)
    return dl, True


def _psi_step(i, mu, psi_mu, c_idx, c_val, w, C, pairwise, inner_steps, rows, n, psi, idx,
              val, nnz, alpha, lv, free, nfree):
    """Block ``i``'s Frank–Wolfe step towards the oracle's output ``mu`` (L_i,), of joint
    feature ``psi_mu`` and loss ``c_i . mu`` (``c_i[c_idx] = c_val``), at ``w`` (moved in
    place).

    Pairwise (Osokin et al. 2016): weight moves from the worst active output to ``mu``
    (exact line search capped by that weight), then, unless exactly two outputs remain,
    up to ``inner_steps`` steps between the best and worst (:func:`_psi_inner`, while
    their gap exceeds ``1e-3`` of this block's gap).  Classical: ``m_i += gamma (mu -
    m_i)``.  Returns the block's gap ``C (a . mu - a . m_i)`` before the step, the change
    of ``c_i . m_i`` and ``room``: 0, or (nothing changed) the nonzeros of ``mu`` when
    the rows are narrower, -1 when a new output finds no free slot or row.
    """
    nz = np.flatnonzero(mu)
    k = nz.shape[0]
    if k > idx.shape[1]:
        return 0.0, 0.0, k
    vals = mu[nz]
    ni = n[i]
    j = -1                                   # mu among the active outputs?
    for s in range(ni):
        r = rows[i, s]
        if nnz[r] == k and np.array_equal(idx[r, :k], nz) and np.array_equal(val[r, :k], vals):
            j = s
            break
    if j < 0 and (ni == rows.shape[1] or nfree[0] == 0):
        return 0.0, 0.0, -1
    lmu = _dot(c_val, mu[c_idx])
    act = np.empty(rows.shape[1])
    _psi_values(i, w, rows, n, psi, lv, act)
    amu = _dot(psi_mu, w) + lmu
    mean = 0.0
    for s in range(ni):
        mean += alpha[rows[i, s]] * act[s]
    g = C * (amu - mean)
    if g <= 0.0:
        return g, 0.0, 0
    kk = 0
    if pairwise:
        for s in range(1, ni):
            if act[s] < act[kk]:
                kk = s
        rk = rows[i, kk]
        g_dir = C * (amu - act[kk])
        if g_dir <= 0.0:
            return g, 0.0, 0
        gamma = _psi_line(w, psi_mu, psi[rk], g_dir, alpha[rk], C)
        lost = lv[rk]
    else:
        mix = np.zeros(w.shape[0])           # Phi_i^T m_i
        lost = 0.0
        for s in range(ni):
            r = rows[i, s]
            lost += alpha[r] * lv[r]
            mix += alpha[r] * psi[r]
        gamma = _psi_line(w, psi_mu, mix, g, 1.0, C)
    if gamma <= 0.0:
        return g, 0.0, 0
    if pairwise:
        alpha[rows[i, kk]] -= gamma
    elif gamma >= 1.0:                       # a full step: mu alone remains
        for s in range(ni - 1, -1, -1):
            _psi_remove(i, s, rows, n, alpha, free, nfree)
        j = -1
    else:
        for s in range(ni):
            alpha[rows[i, s]] *= 1.0 - gamma
    if j < 0:                                # mu joins as a new row
        j = n[i]
        nfree[0] -= 1
        r = free[nfree[0]]
        rows[i, j] = r
        n[i] = j + 1
        idx[r, :k] = nz
        idx[r, k:] = 0
        val[r, :k] = vals
        val[r, k:] = 0.0
        nnz[r] = k
        psi[r] = psi_mu
        lv[r] = lmu
        alpha[r] = 0.0
    alpha[rows[i, j]] += gamma
    dl = gamma * (lmu - lost)
    if not pairwise:
        return g, dl, 0
    if alpha[rows[i, kk]] <= _DROP:          # a drop step: the output leaves
        _psi_remove(i, kk, rows, n, alpha, free, nfree)
    elif n[i] == 2:          # the only pair is (v_k, mu), just line-searched exactly
        return g, dl, 0
    for _ in range(inner_steps):
        step, took = _psi_inner(i, w, C, 1e-3 * g, rows, n, psi, lv, alpha, free, nfree,
                                act)
        if not took:
            break
        dl += step
    return g, dl, 0


def _psi_pass(w, C, ell, rows, n, psi, idx, val, nnz, alpha, lv, free, nfree):
    """A pass without oracle over the blocks (see :meth:`_PsiBlocks.cache_pass`)."""
    act = np.empty(rows.shape[1])
    for i in range(n.shape[0]):
        if n[i] > 1:
            dl, took = _psi_inner(i, w, C, 0.0, rows, n, psi, lv, alpha, free, nfree, act)
            if took:
                ell += C * dl
    return ell


_JITABLE = (_psi_values, _psi_remove, _psi_inner)   # inlined by numba
_COMPILED: Dict[str, Callable[..., Any]] = {}


def _jit_helpers() -> bool:
    """Make the kernels' helpers numba functions (once); False when numba does not import."""
    if "helpers" not in _COMPILED:
        try:
            import numba  # noqa: F401 - first: numba.extending may be cached without numba
            from numba.extending import overload, register_jitable
        except ImportError:  # pragma: no cover - the Python kernels are tested directly
            return False
        for helper in _JITABLE:
            register_jitable(helper)
        overload(_dot)(lambda a, b: _dot_loop)
        overload(_psi_line)(lambda w, p, q, g_dir, cap, C: _psi_line_loop)
        _COMPILED["helpers"] = _jit_helpers
    return True


def _compiled(fn):
    """``fn`` compiled: built ahead of time (:mod:`structlp.compiled`), else by numba's JIT
    (on first use; cached on disk) when numba imports, else ``fn`` itself."""
    kernel = _COMPILED.get(fn.__name__)
    if kernel is None:
        kernel = (ahead_of_time(fn.__name__.lstrip("_"), fn)
                  or (jit(fn) if _jit_helpers() else None) or fn)
        _COMPILED[fn.__name__] = kernel
    return kernel


def _kernel():
    """:func:`_pairwise_steps`, compiled by numba when it imports (else the Python one)."""
    return _compiled(_pairwise_steps)
