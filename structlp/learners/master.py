"""The dual active-set master of the cutting planes, shared by :class:`CuttingPlaneLearner`
and the adversarial graphical models' cutting plane (:mod:`structlp.agm`).

The master QP over a working set of cuts ``g_t . w + xi_{group_t} >= b_t`` is solved in its
dual, a QP over weights ``alpha >= 0`` that sum to a cap per group
(:func:`solve_master_dual`), with the free rows' KKT system, reduced to the null space of
the group sums, kept inverted as rows enter and leave.
"""

from __future__ import annotations

import contextlib
from typing import Optional, Tuple

import numpy as np
import scipy.sparse as sp

try:  # BLAS thread control (a dependency; without it BLAS keeps its threads)
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

#: A full pricing of :func:`solve_master_dual` keeps this many violating rows as the
#: candidates of the next ones (checked from their rows of ``G`` alone).
CANDIDATES = 32
#: Relative ridge added to the master dual's Gram matrix (see :func:`solve_master_dual`).
RIDGE = 1e-12
#: :class:`RowGram` takes the products with at most this many rows of ``R`` from CSR
#: slices (no sparse matrix built: its overhead outweighs the few rows), the others by scipy.
FEW_ROWS = 64
#: Refinement steps of a free-rows solve through the kept inverse before it is rebuilt.
REFINE = 3


def single_threaded_blas():
    """A context in which BLAS/LAPACK run on one thread (threadpoolctl, when installed).

    The master QP's dense systems have a few hundred rows: OpenBLAS's threads cost far
    more than they save there, most of all on a loaded machine."""
    if threadpool_limits is None:   # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


class RowGram:
    """The Gram matrix ``G = R R^T`` of the rows of ``R`` (T, D), never formed.

    :func:`solve_master_dual` takes it in place of a dense ``G`` when ``8 T^2`` bytes
    would not fit: it reads ``G`` only through products with ``R`` and ``R^T``
    (``O(nnz(R))`` per product with the whole of ``G``) and through the blocks of the
    free rows.

    With ``dense`` (``G`` itself, when the caller keeps it) its blocks and rows are read
    from it, while the products with many rows of ``G`` still go through ``R``: for sparse
    rows they cost ``O(nnz(R))`` instead of ``O(T^2)``.

    Parameters
    ----------
    R : scipy sparse array or ndarray (T, D)
    dense : ndarray (T, T), optional
        ``R R^T``.
    """

    def __init__(self, R, dense=None):
        self.R = sp.csr_array(R, dtype=float)
        self.shape = (self.R.shape[0],) * 2
        self.dense = dense
        self.diagonal = (np.diag(dense).copy() if dense is not None else
                         np.asarray(self.R.multiply(self.R).sum(axis=1)).ravel())

    def __matmul__(self, a):
        """``G a``."""
        return self.R @ (self.R.T @ a)

    def _take(self, idx):
        """The positions of the stored entries of the rows ``idx`` of ``R`` and each row's
        count (CSR slices: no sparse matrix built, as the many small products below
        would pay for)."""
        R = self.R
        idx = np.asarray(idx, dtype=np.int64)
        start = R.indptr[idx]
        count = R.indptr[idx + 1] - start
        head = np.cumsum(count) - count
        return np.repeat(start - head, count) + np.arange(int(count.sum())), count

    def rows_times(self, idx, x):
        """``R[idx] @ x`` for a dense ``x`` (D,) or (D, k)."""
        if len(idx) > FEW_ROWS:
            return self.R[idx] @ x
        pos, count = self._take(idx)
        row = np.repeat(np.arange(len(count)), count)
        prod = self.R.data[pos] * (x[self.R.indices[pos]].T if x.ndim == 2 else
                                   x[self.R.indices[pos]])
        if x.ndim == 1:
            return np.bincount(row, prod, len(count))
        out = np.zeros((len(count), x.shape[1]))
        for c, p in enumerate(prod):
            out[:, c] = np.bincount(row, p, len(count))
        return out

    def rows_t_times(self, idx, v):
        """``R[idx].T @ v`` (D,)."""
        if len(idx) > FEW_ROWS:
            return self.R[idx].T @ v
        pos, count = self._take(idx)
        return np.bincount(self.R.indices[pos], self.R.data[pos] * np.repeat(v, count),
                           self.R.shape[1])

    def rows_dot(self, idx, rows, d):
        """``G[idx][:, rows] @ d``."""
        if self.dense is not None:
            return self.dense[np.ix_(idx, rows)] @ d
        return self.rows_times(idx, self.rows_t_times(rows, d))

    def dot_rows(self, J, d):
        """``d @ G[J]`` (``G[:, J] @ d``: ``G`` is symmetric)."""
        return self.R @ self.rows_t_times(J, d)

    def block(self, I, J):
        """``G[np.ix_(I, J)]``, dense."""
        if self.dense is not None:
            return self.dense[np.ix_(I, J)]
        if len(I) <= 8:         # a few rows (a row entering): their dense rows times R[J]
            X = np.zeros((self.R.shape[1], len(I)))
            for c, i in enumerate(I):
                lo, hi = self.R.indptr[i], self.R.indptr[i + 1]
                X[self.R.indices[lo:hi], c] = self.R.data[lo:hi]
            return self.rows_times(J, X).T
        return (self.R[I] @ self.R[J].T).toarray()


class _DenseGram:
    """A dense ``G`` behind :class:`RowGram`'s methods."""

    def __init__(self, G):
        self.G = G
        self.shape = G.shape
        self.diagonal = np.diag(G)

    def __matmul__(self, a):
        return self.G @ a

    def rows_dot(self, idx, rows, d):
        return self.G[np.ix_(idx, rows)] @ d

    def dot_rows(self, J, d):
        return d @ self.G[J]

    def block(self, I, J):
        return self.G[np.ix_(I, J)]


def solve_master_dual(G, b: np.ndarray, group: np.ndarray, cap: np.ndarray,
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
    (with a ridge of :data:`RIDGE` times ``max diag G``: ``G`` is singular), solved in the
    null space of the group sums (``_FreeRowsKKT``), blocking steps fix rows at 0, and a
    fixed row whose gradient ``b_t - (G alpha)_t`` exceeds its group's level by
    more than ``tol`` is freed, until none does (Nocedal & Wright, Algorithm
    16.3).  Rows to free are taken first from the :data:`CANDIDATES` most violating rows
    of the last full pricing (their gradients from their rows of ``G``); a full pricing,
    one product with ``G``, follows when none of them violates, and only it ends the
    solve.  Warm-started from the previous round's weights it takes a few steps.
    Then ``xi_g = max_{t in g} grad_t`` with ``w`` is feasible for the primal,
    and its value exceeds the dual value by at most ``tol * sum(cap)``.

    Parameters
    ----------
    G : ndarray (T, T), positive semidefinite, or :class:`RowGram`
        ``G``, or the rows ``R`` of ``G = R R^T`` (memory ``O(nnz(R))``).
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
    G = G if isinstance(G, RowGram) else _DenseGram(np.asarray(G, dtype=float))
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
    rho = RIDGE * max(1.0, float(G.diagonal.max(initial=0.0)))
    viol = np.inf
    kkt = _FreeRowsKKT(G, b, rho, group, n_groups, np.flatnonzero(free), a)
    cand = np.zeros(0, dtype=np.int64)     # rows that violated at the last full pricing
    on_face_optimum = False
    for it in range(steps):
        if not on_face_optimum:
            # KKT of the free rows: (G_FF + rho) p + E_F^T nu = grad_F,  E_F p = 0
            F, p, q = kkt.step()
            on_face_optimum = bool(np.abs(p).max(initial=0.0) <= 1e-13 * cap.max())
        if on_face_optimum:
            # optimal on the free rows: their level xi_g = grad there (at the group's
            # reference); free a violating row, first among the last pricing's candidates
            # (their gradients from their rows of G), else by a full pricing, which alone
            # may end the solve
            j = -1
            cand = cand[~free[cand]]
            if len(cand):
                excess = kkt.row_grad(cand) - kkt.row_grad(kkt.ref[group[cand]])
                k = int(excess.argmax())
                if excess[k] > tol:
                    j = int(cand[k])
            if j < 0:
                out = np.flatnonzero(~free)
                excess = kkt.price(out)
                viol = float(excess.max(initial=0.0))
                if viol <= tol and not kkt.grad_exact:   # the end, if the exact one agrees
                    excess = kkt.price(out, exact=True)
                    viol = float(excess.max(initial=0.0))
                if viol <= tol:
                    break
                top = np.flatnonzero(excess > tol)
                top = out[top[np.argsort(-excess[top], kind="stable")][:CANDIDATES]]
                j, cand = int(top[0]), top[1:]
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
        a[F] += t * p
        kkt.advance(t, q)
        if blocking is not None:
            a[blocking] = 0.0
            free[blocking] = False
            kkt.remove(blocking)
        else:            # a full step: the optimum of this face (no second solve)
            on_face_optimum = True
    a = np.maximum(a, 0.0)
    a *= cap[group] / np.maximum(np.bincount(group, a, n_groups), 1e-300)[group]
    # polish: a Newton step of the unregularized objective on the final face (removes the
    # ridge's bias; its reduced matrix is the kept one, the ridge's, so the step is taken
    # only when it keeps the weights feasible and raises the dual value)
    grad = b - G @ a
    F, p, _ = kkt.step(grad)
    if len(F) and np.all(np.isfinite(p)) and np.all(a[F] + p >= 0.0):
        trial = a.copy()
        trial[F] += p
        tgrad = b - G @ trial
        if 0.5 * trial @ (b + tgrad) >= 0.5 * a @ (b + grad):
            a, grad = trial, tgrad
    return a, grad, float(0.5 * a @ (b + grad)), float(viol)


class _FreeRowsKKT:
    """The free rows' KKT system of :func:`solve_master_dual` in the null space of the group
    sums, its inverse kept up to date as rows are freed and fixed.

    Each group keeps one free row as its reference ``r_g``; every other free row ``s`` of
    the group is a coordinate ``q_s`` of the step ``p = Z q`` (``p_s = q_s``,
    ``p_{r_g} = -sum_{s in g} q_s``), which keeps each group's sum.  The step solves the
    reduced system ``(Z^T (G + rho I) Z) q = Z^T grad``: symmetric positive definite, of
    order (free rows - groups) instead of the (free rows + groups) of the full KKT matrix.
    A row freed or fixed is one bordering or Schur-complement update of the inverse
    (``O(n^2)``, in place); a group's reference that leaves hands its part to the group's
    heaviest other free row (its coordinates are taken out and put back).  The reduced
    matrix is kept beside the inverse: every step checks its residual and refines the
    solution through the inverse (up to :data:`REFINE` times: the updates' rounding errors
    make it drift slowly); a residual still above ``1e-9`` of the right-hand side rebuilds
    the inverse (:meth:`_matrix`), then solves by LU if that is not accurate either."""

    def __init__(self, G, b, rho, group, n_groups, rows, a):
        self.G, self.b, self.rho, self.group, self.n_groups = G, b, rho, group, n_groups
        self.a = a
        rows = np.asarray(rows, dtype=np.int64)
        self.ref = np.full(n_groups, -1, dtype=np.int64)
        order = rows[np.lexsort((-a[rows], group[rows]))]     # by group, heaviest first
        firsts = np.r_[True, group[order][1:] != group[order][:-1]] if len(order) else []
        self.ref[group[order[firsts]]] = order[firsts]
        others = order[~np.asarray(firsts, dtype=bool)] if len(order) else order
        self.pos = np.full(len(group), -1, dtype=np.int64)
        self.n = 0
        size = max(16, 2 * len(others))
        self.cols = np.zeros(size, dtype=np.int64)
        self.H, self.inv = np.zeros((size, size)), np.zeros((size, size))
        self.z = np.zeros(size)
        self.a0 = None
        self.checkpoint()
        self._rebuild(others)

    def checkpoint(self, exact=False):
        """The gradient ``b - (G + rho I) alpha``, kept with ``alpha``: later rows'
        gradients are updated from it (:meth:`row_grad`).  The first checkpoint and an
        ``exact`` one take one product with ``G``; the others update the last one from
        the rows of ``G`` whose weights changed since (``G`` is symmetric), unless more
        than a quarter of them did; ``grad_exact`` says which it was."""
        a, a0 = self.a, self.a0
        J = None if exact or a0 is None else np.flatnonzero(a != a0)
        self.grad_exact = J is None or 4 * len(J) > len(a)
        if self.grad_exact:
            self.grad0 = self.b - self.G @ a - self.rho * a
        else:
            d = a[J] - a0[J]
            self.grad0 = self.grad0 - self.G.dot_rows(J, d)
            self.grad0[J] -= self.rho * d
        self.a0 = a.copy()
        self.moved = a > 0.0     # the rows whose weights may change until the next one
        S = self.cols[:self.n]
        self.z[:self.n] = self.grad0[S] - self.grad0[self.ref[self.group[S]]]
        return self.grad0

    def price(self, out, exact=False):
        """The excess of the rows ``out``' gradients over their groups' levels (the
        gradient at each group's reference), from a :meth:`checkpoint`."""
        grad = self.checkpoint(exact=exact)
        level = np.where(self.ref >= 0, grad[self.ref], -np.inf)
        return grad[out] - level[self.group[out]]

    def row_grad(self, idx):
        """The gradient at the rows ``idx`` now (their rows of ``G`` only)."""
        M = np.flatnonzero(self.moved)
        d = self.a[M] - self.a0[M]
        keep = d != 0.0
        M, d = M[keep], d[keep]
        return (self.grad0[idx] - self.G.rows_dot(idx, M, d)
                - self.rho * (self.a[idx] - self.a0[idx]))

    def advance(self, t, q):
        """The coordinates' reduced gradient after the step ``t Z q``."""
        n = self.n
        self.z[:n] -= t * (self.H[:n, :n] @ q)

    @property
    def rows(self):
        """The free rows: the coordinates, then the groups' references."""
        return np.concatenate([self.cols[:self.n], self.ref[self.ref >= 0]])

    def _kernel(self, j, S):
        """Reduced-matrix entries of row ``j`` (a coordinate, or about to be one) against
        the coordinates ``S``, and its diagonal entry."""
        g, n = self.group[j], len(S)
        r = self.ref[g]
        B = self.G.block([j, r], np.concatenate([S, self.ref[self.group[S]], [j, r]]))
        k = B[0, :n] - B[1, :n] - B[0, n:2 * n] + B[1, n:2 * n] + self.rho * (self.group[S] == g)
        return k, B[0, -2] - 2.0 * B[0, -1] + B[1, -1] + 2.0 * self.rho

    def _matrix(self, S):
        """The reduced matrix ``Z^T (G + rho I) Z`` of the coordinates ``S``."""
        n = len(S)
        U = np.concatenate([S, self.ref[self.group[S]]])
        B = self.G.block(U, U)
        H = B[:n, :n] - B[:n, n:] - B[n:, :n] + B[n:, n:]
        H[np.arange(len(S)), np.arange(len(S))] += self.rho
        H += self.rho * (self.group[S][:, None] == self.group[S][None, :])
        return H

    def _grow(self, n):
        if n > len(self.cols):
            size = max(n, 2 * len(self.cols))
            for name in ("H", "inv"):
                M = np.zeros((size, size))
                M[:self.n, :self.n] = getattr(self, name)[:self.n, :self.n]
                setattr(self, name, M)
            self.cols = np.pad(self.cols, (0, size - len(self.cols)))
            self.z = np.pad(self.z, (0, size - len(self.z)))

    def _rebuild(self, S):
        S = np.asarray(S, dtype=np.int64)
        n = len(S)
        self._grow(n)
        self.pos[self.cols[:self.n]] = -1
        self.cols[:n] = S
        self.pos[S] = np.arange(n)
        self.n = n
        self.z[:n] = self.row_grad(S) - self.row_grad(self.ref[self.group[S]])
        H = self._matrix(S)
        self.H[:n, :n] = H
        try:
            self.inv[:n, :n] = np.linalg.inv(H)
        except np.linalg.LinAlgError:   # pragma: no cover - numerically singular
            self.inv[:n, :n] = np.linalg.pinv(H)

    def step(self, grad=None):
        """The free rows ``F``, the Newton step ``p`` on them and its coordinates ``q``
        (``grad``: the reduced gradient from this full gradient instead of the kept one)."""
        n, S = self.n, self.cols[:self.n]
        z = self.z[:n] if grad is None else grad[S] - grad[self.ref[self.group[S]]]
        H = self.H[:n, :n]
        inv = self.inv[:n, :n]
        q = inv @ z
        scale = 1e-9 * (1.0 + np.abs(z).max(initial=0.0))
        r = z - H @ q
        for _ in range(REFINE):     # iterative refinement: the kept inverse drifts slowly
            if np.abs(r).max(initial=0.0) <= scale:
                break
            q = q + inv @ r
            r = z - H @ q
        if np.abs(r).max(initial=0.0) > scale:
            z = z.copy()
            self._rebuild(S.copy())
            q = self.inv[:n, :n] @ z
            if np.abs(H @ q - z).max(initial=0.0) > scale:
                q = _solve_or_lstsq(self.H[:n, :n], z)
        refs = self.ref >= 0
        p_ref = -np.bincount(self.group[S], q, self.n_groups)
        return np.concatenate([S, self.ref[refs]]), np.concatenate([q, p_ref[refs]]), q

    def add(self, j):
        self.moved[j] = True
        g = self.group[j]
        if self.ref[g] < 0:              # the group's only free row: its reference
            self.ref[g] = j
            return
        n = self.n
        k, d = self._kernel(j, self.cols[:n])
        self._grow(n + 1)
        inv = self.inv[:n, :n]
        u = inv @ k
        s = d - k @ u
        self.cols[n], self.pos[j], self.n = j, n, n + 1
        gj = self.row_grad(np.array([j, self.ref[g]]))
        self.z[n] = gj[0] - gj[1]
        self.H[:n, n] = self.H[n, :n] = k
        self.H[n, n] = d
        if not s > 1e-10 * abs(d):     # (nearly) dependent on the coordinates: rebuild
            self._rebuild(self.cols[:n + 1].copy())
            return
        inv += np.outer(u / s, u)
        self.inv[:n, n] = self.inv[n, :n] = -u / s
        self.inv[n, n] = 1.0 / s

    def _drop(self, j):
        """Take the coordinate ``j`` out (a Schur-complement update of the inverse)."""
        q, last = int(self.pos[j]), self.n - 1
        if q != last:                   # swap it to the end, then drop the end
            jl = self.cols[last]
            for M in (self.H, self.inv):
                M[[q, last], :self.n] = M[[last, q], :self.n]
                M[:self.n, [q, last]] = M[:self.n, [last, q]]
            self.z[[q, last]] = self.z[[last, q]]
            self.cols[q], self.cols[last] = jl, j
            self.pos[jl] = q
        self.pos[j] = -1
        self.n = last
        d = self.inv[last, last]
        if not d > 0.0:                 # pragma: no cover - a lost inverse: rebuild
            self._rebuild(self.cols[:last].copy())
            return
        u = self.inv[:last, last]
        self.inv[:last, :last] -= np.outer(u / d, u)

    def remove(self, j):
        if self.pos[j] >= 0:
            self._drop(j)
            return
        g = self.group[j]                # a reference: the group's heaviest other row
        members = self.cols[:self.n][self.group[self.cols[:self.n]] == g]
        for s in members:
            self._drop(s)
        if len(members) == 0:
            self.ref[g] = -1
            return
        new = members[int(np.argmax(self.a[members]))]
        self.ref[g] = new
        for s in members:
            if s != new:
                self.add(s)


def _solve_or_lstsq(K, rhs):
    """``K^{-1} rhs`` by LU, by least squares where ``K`` is singular."""
    try:
        return np.linalg.solve(K, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(K, rhs, rcond=None)[0]
