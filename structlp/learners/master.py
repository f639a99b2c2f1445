"""The dual active-set master of the cutting planes, shared by :class:`CuttingPlaneLearner`
and the adversarial graphical models' cutting plane (:mod:`structlp.agm`).

The master QP over a working set of cuts ``g_t . w + xi_{group_t} >= b_t`` is solved in its
dual, a QP over weights ``alpha >= 0`` that sum to a cap per group
(:func:`solve_master_dual`), with the free rows' KKT system kept factored as rows enter and
leave.
"""

from __future__ import annotations

import contextlib
from typing import Optional, Tuple

import numpy as np

try:  # BLAS thread control (a dependency; without it BLAS keeps its threads)
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

#: Relative ridge added to the master dual's Gram matrix (see :func:`solve_master_dual`).
RIDGE = 1e-12


def single_threaded_blas():
    """A context in which BLAS/LAPACK run on one thread (threadpoolctl, when installed).

    The master QP's dense systems have a few hundred rows: OpenBLAS's threads cost far
    more than they save there, most of all on a loaded machine."""
    if threadpool_limits is None:   # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def solve_master_dual(G: np.ndarray, b: np.ndarray, group: np.ndarray, cap: np.ndarray,
                      alpha: Optional[np.ndarray] = None, tol: float = 1e-10,
                      max_iter: Optional[int] = None
                      ) -> Tuple[np.ndarray, np.ndarray, float, float]:
    r"""The dual of a cutting-plane master QP, by a primal active-set method.

    Solves

    .. math::

        \max_{\alpha \ge 0}\; b\cdot\alpha - \tfrac12 \alpha^T G \alpha
        \quad\text{s.t.}\quad \sum_{t:\,\mathrm{group}_t = g} \alpha_t = \mathrm{cap}_g
        \;\; \text{for every group } g,

    the dual of ``min_w 1/2 |w|^2 + sum_g cap_g xi_g`` s.t.
    ``g_t . w + xi_{group_t} >= b_t`` (``G = [g_s . g_t]``, ``w = sum_t alpha_t g_t``).
    The free rows (``alpha_t > 0``) are optimized exactly by their KKT system
    (with a ridge of :data:`RIDGE` times ``max diag G``: ``G`` is singular), blocking steps fix rows at 0, and a
    fixed row whose gradient ``b_t - (G alpha)_t`` exceeds its group's level by
    more than ``tol`` is freed, until none does (Nocedal & Wright, Algorithm
    16.3).  Warm-started from the previous round's weights it takes a few steps.
    Then ``xi_g = max_{t in g} grad_t`` with ``w`` is feasible for the primal,
    and its value exceeds the dual value by at most ``tol * sum(cap)``.

    Parameters
    ----------
    G : ndarray (T, T), positive semidefinite
    b : ndarray (T,)
    group : int ndarray (T,), values in 0..n_groups-1 (every group non-empty)
    cap : ndarray (n_groups,), > 0
    alpha : ndarray (T,), optional
        A feasible start; default: each group's weight on its first row.
    tol : float
    max_iter : int, optional
        Default ``10 T + 100`` active-set changes.

    Returns
    -------
    alpha : ndarray (T,)
    grad : ndarray (T,)
        ``b - G alpha``.
    dual_value : float
    violation : float
        The largest ``grad_t - xi_{group_t}`` left (<= tol unless max_iter was reached).
    """
    G = np.asarray(G, dtype=float)
    b = np.asarray(b, dtype=float)
    group = np.asarray(group, dtype=np.int64)
    cap = np.asarray(cap, dtype=float)
    T, n_groups = len(b), len(cap)
    if alpha is None:
        alpha = np.zeros(T)
        first = np.full(n_groups, -1)
        first[group[::-1]] = np.arange(T)[::-1]
        alpha[first] = cap
    a = np.array(alpha, dtype=float)
    free = a > 0.0
    steps = 10 * T + 100 if max_iter is None else int(max_iter)
    # a tiny ridge makes the QP strictly concave (G is singular: rows outnumber features,
    # the truths' rows are 0), so that every KKT system below is regular
    rho = RIDGE * max(1.0, float(np.diag(G).max(initial=0.0)))
    grad = b - G @ a - rho * a
    viol = np.inf
    kkt = _FreeRowsKKT(G, rho, group, n_groups, np.flatnonzero(free))
    on_face_optimum = False
    for it in range(steps):
        if not on_face_optimum:
            # KKT of the free rows: (G_FF + rho) p + E_F^T nu = grad_F,  E_F p = 0
            F, p = kkt.step(grad)
            on_face_optimum = bool(np.abs(p).max(initial=0.0) <= 1e-13 * cap.max())
        if on_face_optimum:
            # optimal on the free rows: their level xi_g = grad there; free a violating row
            if it % 20 == 19:
                grad = b - G @ a - rho * a             # no drift from the updates
            F = kkt.rows
            level = np.full(n_groups, -np.inf)
            np.maximum.at(level, group[F], grad[F])
            out = np.flatnonzero(~free)
            excess = grad[out] - level[group[out]]
            viol = float(excess.max(initial=0.0))
            if viol <= tol:
                break
            j = int(out[int(excess.argmax())])
            free[j] = True
            kkt.add(j)
            on_face_optimum = False
            continue
        neg = p < 0.0
        t, blocking = 1.0, None
        if neg.any():
            ratios = -a[F[neg]] / p[neg]
            k = int(ratios.argmin())
            if ratios[k] < 1.0:
                t, blocking = float(ratios[k]), int(F[neg][k])
        step = t * p
        a[F] += step
        grad -= step @ G[F]                     # G is symmetric: rows, not columns
        grad[F] -= rho * step
        if blocking is not None:
            a[blocking] = 0.0
            free[blocking] = False
            kkt.remove(blocking)
        else:            # a full step: the optimum of this face (no second solve)
            on_face_optimum = True
    a = np.maximum(a, 0.0)
    a *= cap[group] / np.maximum(np.bincount(group, a, n_groups), 1e-300)[group]
    # polish: the unregularized optimum on the final face (removes the ridge's bias when
    # it stays feasible; G_FF may be singular, so least squares when LU fails)
    F = np.flatnonzero(a > 0.0)
    gF = group[F]
    grad = b - G @ a
    p = _solve_kkt(_kkt_matrix(G, 0.0, group, n_groups, F), grad[F], n_groups)
    if np.all(np.isfinite(p)) and np.all(a[F] + p >= 0.0) and np.abs(
            np.bincount(gF, p, n_groups)).max(initial=0.0) <= 1e-12 * cap.max():
        trial = a.copy()
        trial[F] += p
        tgrad = b - G @ trial
        if 0.5 * trial @ (b + tgrad) >= 0.5 * a @ (b + grad):
            a, grad = trial, tgrad
    return a, grad, float(0.5 * a @ (b + grad)), float(viol)


def _kkt_matrix(G, rho, group, n_groups, rows):
    """The KKT matrix ``[[G_FF + rho I, E_F^T], [E_F, 0]]`` of the rows ``F`` of
    :func:`solve_master_dual` (variables: those rows, then one multiplier per group)."""
    n = len(rows)
    K = np.zeros((n + n_groups, n + n_groups))
    K[:n, :n] = G[np.ix_(rows, rows)]
    K[np.arange(n), np.arange(n)] += rho
    K[np.arange(n), n + group[rows]] = 1.0
    K[n + group[rows], np.arange(n)] = 1.0
    return K


def _solve_kkt(K, rhs, n_groups):
    """The rows' part of ``K^{-1} [rhs; 0]`` by LU, by least squares where ``K`` is
    singular."""
    n = len(rhs)
    full = np.concatenate([rhs, np.zeros(n_groups)])
    try:
        return np.linalg.solve(K, full)[:n]
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(K, full, rcond=None)[0][:n]


class _FreeRowsKKT:
    """The inverse of the free rows' KKT matrix ``[[G_FF + rho I, E_F^T], [E_F, 0]]`` of
    :func:`solve_master_dual`, kept up to date as rows are freed and fixed.

    Each change is a bordering (add) or a Schur-complement (remove) update of the inverse,
    O(n^2) instead of a new O(n^3) factorization; the inverse is recomputed from ``G`` every
    :data:`REFRESH` changes, and whenever an update's pivot is too small to trust."""

    REFRESH = 32

    def __init__(self, G, rho, group, n_groups, rows):
        self.G, self.rho, self.group, self.n_groups = G, rho, group, n_groups
        self.direct = False      # True: LU solves (the inverse is not accurate enough)
        self._factor(np.asarray(rows, dtype=np.int64))

    def _matrix(self, rows):
        return _kkt_matrix(self.G, self.rho, self.group, self.n_groups, rows)

    def _factor(self, rows):
        """Variables: the free rows, then one multiplier per group."""
        self.rows = rows
        self.changes = 0
        if self.direct:
            return
        K = self._matrix(rows)
        try:
            self.inv = np.linalg.inv(K)
        except np.linalg.LinAlgError:   # pragma: no cover - numerically singular
            self.inv = np.linalg.pinv(K)

    def step(self, grad):
        """The free rows ``F`` and the Newton step ``p`` on them.

        From the kept inverse when its solution's residual is small; otherwise (a nearly
        singular system, where an updated inverse loses its accuracy) by LU, and by LU for
        the rest of this solve."""
        rows, n = self.rows, len(self.rows)
        rhs = grad[rows]
        if not self.direct:
            x = self.inv[:, :n] @ rhs                # the rhs is 0 on the multipliers
            p, nu = x[:n], x[n:]
            res = self.G[np.ix_(rows, rows)] @ p + self.rho * p + nu[self.group[rows]] - rhs
            drift = np.abs(np.bincount(self.group[rows], p, self.n_groups)).max(initial=0.0)
            scale = 1.0 + np.abs(rhs).max(initial=0.0)
            if max(np.abs(res).max(initial=0.0), drift) <= 1e-9 * scale:
                return rows, p
            self.direct = True
        return rows, _solve_kkt(self._matrix(rows), rhs, self.n_groups)

    def add(self, j):
        rows, n = self.rows, len(self.rows)
        self.changes += 1
        if self.direct or self.changes >= self.REFRESH:
            self._factor(np.append(rows, j))
            return
        k = np.zeros(n + self.n_groups)
        k[:n] = self.G[j, rows]
        k[n + self.group[j]] = 1.0
        u = self.inv @ k
        s = self.G[j, j] + self.rho - k @ u
        if abs(s) <= 1e-10 * (abs(self.G[j, j]) + self.rho):
            self._factor(np.append(rows, j))
            return
        # the new variable goes before the multipliers: permute into place after bordering
        inv = np.empty((n + self.n_groups + 1,) * 2)
        inv[:-1, :-1] = self.inv + np.outer(u, u) / s
        inv[:-1, -1] = inv[-1, :-1] = -u / s
        inv[-1, -1] = 1.0 / s
        order = np.r_[np.arange(n), n + self.n_groups, np.arange(n, n + self.n_groups)]
        self.inv = inv[np.ix_(order, order)]
        self.rows = np.append(rows, j)

    def remove(self, j):
        rows = self.rows
        q = int(np.flatnonzero(rows == j)[0])
        self.changes += 1
        if self.direct or self.changes >= self.REFRESH or abs(self.inv[q, q]) <= 1e-300:
            self._factor(np.delete(rows, q))
            return
        keep = np.r_[np.arange(q), np.arange(q + 1, len(self.inv))]
        d = self.inv[q, q]
        col = self.inv[keep, q]
        self.inv = self.inv[np.ix_(keep, keep)] - np.outer(col, col) / d
        self.rows = np.delete(rows, q)
