"""The inner step of the SparseMAP active set: a vertex enters, the restricted QP is solved.

With the active vertices ``V[:k]`` (rows, 0/1), their Gram matrix ``G`` (exact: overlaps
of 0/1 vectors), their scores ``bt = V theta`` and convex weights ``alpha``, the
restricted problem

.. math::

    \\min_{\\alpha} \\tfrac12 \\|V^T \\alpha - \\theta\\|^2
    \\quad \\text{s.t.} \\quad 1^T \\alpha = 1, \\ \\alpha \\ge 0

is solved by its equality-constrained KKT system ``[G 1; 1^T 0] [alpha; tau] = [bt; 1]``
(its inverse kept up to date as vertices enter and leave) and ratio steps that drop a vertex whose weight would turn negative (the primal active-set
method, Nocedal & Wright, Algorithm 16.3).  One plain function, compiled by numba's JIT
when numba imports (:func:`structlp.compiled.jit`), else run as it is on NumPy.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ..compiled import jit

#: status codes of :func:`add_vertex`
ADDED, DUPLICATE, STALLED, CERTIFIED, FULL = 0, 1, 2, 3, 4
#: Updates of the KKT inverse between two recomputations from the Gram matrix.
REFRESH = 16


def add_vertex(v: np.ndarray, I: np.ndarray, nI: np.ndarray, G: np.ndarray, bt: np.ndarray,
               alpha: np.ndarray, k: int, theta: np.ndarray, mu: np.ndarray, r: np.ndarray,
               mark: np.ndarray, rmu: float, threshold: float, Kinv: np.ndarray,
               n_updates: np.ndarray) -> Any:
    """The Frank-Wolfe gap of the oracle's vertex ``v`` (0/1, shape (L,)) for the gradient
    ``r = theta - mu``; unless it certifies ``mu``, add ``v`` to the ``k`` active vertices,
    solve the restricted QP, and write ``mu = alpha V`` and ``r = theta - mu``.

    The vertices are 0/1, kept by their ones: vertex ``j`` has them at ``I[j, :nI[j]]``, so
    that the Gram row of the new vertex and ``mu`` cost O(k nnz), not O(k L); ``mark`` is
    a scratch vector of L zeros (left as it came).  ``Kinv[:k+1, :k+1]`` is the inverse of
    the KKT matrix ``[0 1^T; 1 G]`` (the multiplier first), updated in O(k^2) when a
    vertex enters (bordering) or leaves (its Schur complement), and recomputed from ``G``
    after every :data:`REFRESH` updates (``n_updates[0]`` counts them).

    Returns ``(k, status, gap, r . mu)``: the number of active vertices; CERTIFIED (``gap
    = r . v - rmu <= threshold``: nothing changed), FULL (no room for ``v``: nothing
    changed), ADDED, DUPLICATE (``v`` is already active: nothing changed) or STALLED
    (``v`` cannot enter, numerically in the active vertices' affine hull, or left at once:
    rounding); the gap; and ``r . mu`` (``rmu`` is its last value, for this gap).
    """
    vi = np.flatnonzero(v)
    nv = vi.shape[0]
    gap = r[vi].sum() - rmu
    if gap <= threshold:
        return k, CERTIFIED, gap, rmu
    if k == I.shape[0] or nv > I.shape[1]:
        return k, FULL, gap, rmu
    for t in range(nv):
        mark[vi[t]] = 1.0
    Vv = np.zeros(k)
    dup = False
    for j in range(k):
        c = 0.0
        for t in range(nI[j]):
            c += mark[I[j, t]]
        Vv[j] = c
        if c == nv and G[j, j] == nv:
            dup = True
    for t in range(nv):
        mark[vi[t]] = 0.0
    if dup:
        return k, DUPLICATE, gap, rmu
    m = k + 1                                 # the KKT matrix's size before v enters
    if k == 0:
        Kinv[0, 0] = -float(nv)
        Kinv[0, 1] = 1.0
        Kinv[1, 0] = 1.0
        Kinv[1, 1] = 0.0
    else:                                     # bordering: u = (1, V v), c = v . v
        w = np.zeros(m)
        for i in range(m):
            acc = Kinv[i, 0]
            for j in range(k):
                acc += Kinv[i, j + 1] * Vv[j]
            w[i] = acc
        sc = float(nv) - w[0]
        for j in range(k):
            sc -= Vv[j] * w[j + 1]
        if not sc > 1e-9 * max(1.0, float(nv)):      # v in the affine hull (rounding)
            return k, STALLED, gap, rmu
        for i in range(m):
            for j in range(m):
                Kinv[i, j] += w[i] * w[j] / sc
            Kinv[i, m] = -w[i] / sc
            Kinv[m, i] = -w[i] / sc
        Kinv[m, m] = 1.0 / sc
    n_updates[0] += 1
    b = 0.0
    for t in range(nv):
        I[k, t] = vi[t]
        b += theta[vi[t]]
    nI[k] = nv
    for j in range(k):
        G[k, j] = Vv[j]
        G[j, k] = Vv[j]
    G[k, k] = nv
    bt[k] = b
    alpha[k] = 0.0
    entering = k
    k += 1
    status = ADDED
    ah = np.zeros(k)
    while True:
        if n_updates[0] >= REFRESH:           # recompute the inverse from G
            K = np.zeros((k + 1, k + 1))
            for i in range(k):
                K[0, i + 1] = 1.0
                K[i + 1, 0] = 1.0
                for j in range(k):
                    K[i + 1, j + 1] = G[i, j]
            Kinv[:k + 1, :k + 1] = np.linalg.inv(K)
            n_updates[0] = 0
        total = 0.0
        for i in range(k):                    # alpha = the vertices' rows of Kinv (1, bt)
            acc = Kinv[i + 1, 0]
            for j in range(k):
                acc += Kinv[i + 1, j + 1] * bt[j]
            ah[i] = acc
            total += acc
        for i in range(k):                    # (the sum is 1 up to rounding)
            ah[i] /= total
        q = -1
        tmin = 2.0
        for i in range(k):
            if ah[i] <= 0.0:
                ti = alpha[i] / (alpha[i] - ah[i])
                if ti < tmin:
                    tmin, q = ti, i
        if q < 0:
            for i in range(k):
                alpha[i] = ah[i]
            break
        for i in range(k):
            alpha[i] += tmin * (ah[i] - alpha[i])
        if q == entering and tmin <= 0.0:
            status = STALLED
        last = k - 1                      # drop q: the last active vertex takes its place
        a, z = q + 1, k                   # their rows in Kinv
        if q != last:
            I[q, :nI[last]] = I[last, :nI[last]]
            nI[q] = nI[last]
            for j in range(k):
                G[q, j] = G[last, j]
            for j in range(k):
                G[j, q] = G[j, last]
            G[q, q] = G[last, last]
            bt[q] = bt[last]
            alpha[q] = alpha[last]
            ah[q] = ah[last]
            if entering == last:
                entering = q
            for j in range(k + 1):        # the same symmetric swap in Kinv
                tmp = Kinv[a, j]
                Kinv[a, j] = Kinv[z, j]
                Kinv[z, j] = tmp
            for j in range(k + 1):
                tmp = Kinv[j, a]
                Kinv[j, a] = Kinv[j, z]
                Kinv[j, z] = tmp
        d = Kinv[z, z]                    # drop the last row: its Schur complement
        for i in range(z):
            for j in range(z):
                Kinv[i, j] -= Kinv[i, z] * Kinv[z, j] / d
        n_updates[0] += 1
        k -= 1
        if status == STALLED:
            break
    mu[:] = 0.0
    for j in range(k):
        aj = alpha[j]
        for t in range(nI[j]):
            mu[I[j, t]] += aj
    rmu = 0.0
    for i in range(mu.shape[0]):          # (a loop: BLAS threads cost more than this)
        r[i] = theta[i] - mu[i]
        rmu += r[i] * mu[i]
    return k, status, gap, rmu


_COMPILED: Optional[Callable[..., Any]] = None


def step_function() -> Callable[..., Any]:
    """:func:`add_vertex` compiled by numba (on first use, cached on disk), or the plain
    function without numba."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = jit(add_vertex) or add_vertex
    return _COMPILED
