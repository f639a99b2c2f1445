"""The inner step of the SparseMAP active set: a vertex enters, the restricted QP is solved.

With the active vertices ``V[:k]`` (rows, 0/1), their Gram matrix ``G`` (exact: overlaps
of 0/1 vectors), their scores ``bt = V theta`` and convex weights ``alpha``, the
restricted problem

.. math::

    \\min_{\\alpha} \\tfrac12 \\|V^T \\alpha - \\theta\\|^2
    \\quad \\text{s.t.} \\quad 1^T \\alpha = 1, \\ \\alpha \\ge 0

is solved by its equality-constrained KKT system ``[G 1; 1^T 0] [alpha; tau] = [bt; 1]``
and ratio steps that drop a vertex whose weight would turn negative (the primal active-set
method, Nocedal & Wright, Algorithm 16.3).  One plain function, compiled by numba's JIT
when numba imports (:func:`structlp.compiled.jit`), else run as it is on NumPy.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ..compiled import jit

#: status codes of :func:`add_vertex`
ADDED, DUPLICATE, STALLED = 0, 1, 2


def add_vertex(V: np.ndarray, G: np.ndarray, bt: np.ndarray, alpha: np.ndarray, k: int,
               v: np.ndarray, theta: np.ndarray, mu: np.ndarray, r: np.ndarray) -> Any:
    """Add ``v`` to the ``k`` active vertices (row ``k`` of ``V``, ``G``... must exist), solve
    the restricted QP, and write ``mu = alpha V`` and ``r = theta - mu``.

    Returns ``(k, status, r . mu)``: the new number of active vertices, ADDED, DUPLICATE
    (``v`` is already active: nothing changed) or STALLED (``v`` left at once: rounding),
    and ``r . mu`` (for the next Frank-Wolfe gap).
    """
    nv = v @ v
    Vv = V[:k] @ v
    for j in range(k):
        if Vv[j] == nv and G[j, j] == nv:
            return k, DUPLICATE, 0.0
    V[k] = v
    for j in range(k):
        G[k, j] = Vv[j]
        G[j, k] = Vv[j]
    G[k, k] = nv
    bt[k] = v @ theta
    alpha[k] = 0.0
    entering = k
    k += 1
    status = ADDED
    while True:
        K = np.zeros((k + 1, k + 1))
        rhs = np.zeros(k + 1)
        for i in range(k):
            for j in range(k):
                K[i, j] = G[i, j]
            K[i, k] = 1.0
            K[k, i] = 1.0
            rhs[i] = bt[i]
        rhs[k] = 1.0
        ah = np.linalg.solve(K, rhs)
        q = -1
        t = 2.0
        for i in range(k):
            if ah[i] <= 0.0:
                ti = alpha[i] / (alpha[i] - ah[i])
                if ti < t:
                    t, q = ti, i
        if q < 0:
            for i in range(k):
                alpha[i] = ah[i]
            break
        for i in range(k):
            alpha[i] += t * (ah[i] - alpha[i])
        if q == entering and t <= 0.0:
            status = STALLED
        last = k - 1                      # drop q: the last active vertex takes its place
        if q != last:
            V[q] = V[last]
            for j in range(k):
                G[q, j] = G[last, j]
            for j in range(k):
                G[j, q] = G[j, last]
            G[q, q] = G[last, last]
            bt[q] = bt[last]
            alpha[q] = alpha[last]
            if entering == last:
                entering = q
        k -= 1
        if status == STALLED:
            break
    mu[:] = alpha[:k] @ V[:k]
    r[:] = theta - mu
    return k, status, r @ mu


_COMPILED: Optional[Callable[..., Any]] = None


def step_function() -> Callable[..., Any]:
    """:func:`add_vertex` compiled by numba (on first use, cached on disk), or the plain
    function without numba."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = jit(add_vertex) or add_vertex
    return _COMPILED
