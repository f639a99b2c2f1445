"""Kernels between parts, and the low-rank factor that keeps the dual QP small.

A kernel ``k(phi, phi')`` scores pairs of part feature vectors.  The dual QP
needs ``u^T K u`` for the kernel matrix ``K`` of all training parts (thousands
of them), which must never enter cvxpy as a dense quadratic form.  Instead
:func:`incomplete_cholesky` computes a factor ``G`` (n_parts, rank) with
``K ≈ G G^T`` by pivoted incomplete Cholesky, evaluating only ``rank`` columns
of ``K``; the QP then carries ``|G^T u|^2``.  At tolerance 0 the factor is exact
(up to round-off); memory is ``O(n_parts * rank)``.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from ._validation import check_finite_array, check_scalar
from .exceptions import InvalidInputError, InvalidParameterError

KERNELS = ("linear", "rbf", "poly", "precomputed")


def _dense(A):
    return A.toarray() if sp.issparse(A) else np.asarray(A, dtype=float)


def _sqnorms(A):
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


class Kernel:
    """A kernel between part feature vectors.

    Parameters
    ----------
    kernel : {"linear", "rbf", "poly"} or callable
        ``"linear"``: ``phi . phi'``; ``"rbf"``: ``exp(-gamma |phi - phi'|^2)``;
        ``"poly"``: ``(gamma phi . phi' + coef0)^degree``; a callable is called
        as ``kernel(Phi_a, Phi_b)`` with dense arrays (n_a, d) and (n_b, d) and
        must return the (n_a, n_b) matrix.
    gamma : float > 0 or None
        None means ``1 / n_features``.
    degree : int >= 1
    coef0 : float
    """

    def __init__(self, kernel="linear", gamma=None, degree=3, coef0=1.0):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0

    def check(self, owner=None):
        """Validate the parameters; return self."""
        where = f" of {owner}" if owner else ""
        if not callable(self.kernel) and self.kernel not in KERNELS:
            raise InvalidParameterError(
                f"The 'kernel' parameter{where} must be one of {list(KERNELS)} or a callable; "
                f"got {self.kernel!r}.")
        if self.gamma is not None:
            check_scalar(self.gamma, "gamma", low=0, low_inclusive=False, owner=owner)
        check_scalar(self.degree, "degree", kind=numbers.Integral, low=1, owner=owner)
        check_scalar(self.coef0, "coef0", owner=owner)
        return self

    def _gamma(self, n_features):
        return 1.0 / max(n_features, 1) if self.gamma is None else float(self.gamma)

    def __call__(self, A, B):
        """The kernel matrix between the rows of A (n_a, d) and of B (n_b, d)."""
        if callable(self.kernel):
            K = check_finite_array(self.kernel(_dense(A), _dense(B)),
                                   "The output of the kernel callable")
            if K.shape != (A.shape[0], B.shape[0]) or not np.all(np.isfinite(K)):
                raise InvalidInputError(
                    f"The kernel callable must return a finite ({A.shape[0]}, {B.shape[0]}) "
                    f"matrix; got shape {K.shape}.")
            return K
        G = A @ B.T
        G = _dense(G)
        if self.kernel == "linear":
            return G
        gamma = self._gamma(A.shape[1])
        if self.kernel == "rbf":
            D = _sqnorms(A)[:, None] + _sqnorms(B)[None, :] - 2 * G
            return np.exp(-gamma * np.maximum(D, 0.0))
        if self.kernel == "poly":
            return (gamma * G + self.coef0) ** self.degree
        raise InvalidParameterError(f"kernel {self.kernel!r} has no feature-space evaluation.")

    def diagonal(self, A):
        """``k(phi_p, phi_p)`` for every row of A, shape (n,)."""
        if callable(self.kernel):
            return np.array([self(A[i:i + 1], A[i:i + 1])[0, 0] for i in range(A.shape[0])])
        if self.kernel == "rbf":
            return np.ones(A.shape[0])
        sq = _sqnorms(A)
        if self.kernel == "linear":
            return sq
        return (self._gamma(A.shape[1]) * sq + self.coef0) ** self.degree


def incomplete_cholesky(diag, column, tol=1e-8, max_rank=None):
    """Pivoted incomplete Cholesky factor ``G`` with ``K ≈ G G^T``.

    Greedy: at each step the part with the largest residual diagonal is the
    pivot, its kernel column is evaluated, and the factor gains one column.
    Stops when the largest residual diagonal is at most ``tol * max(diag)``
    (the trace of the residual ``K - G G^T`` is then at most
    ``n * tol * max(diag)``) or the rank reaches ``max_rank``.

    Parameters
    ----------
    diag : ndarray, shape (n,)
        Diagonal of K.
    column : callable
        ``column(j)`` returns column j of K, shape (n,).
    tol : float >= 0
        Relative tolerance; 0 means exact (up to round-off).
    max_rank : int or None

    Returns
    -------
    G : ndarray, shape (n, rank)
    pivots : ndarray of int, shape (rank,)
    residual : float
        Largest residual diagonal when it stopped.
    """
    n = len(diag)
    d = np.array(diag, dtype=float)
    scale = max(float(d.max()), 1e-300) if n else 1.0
    max_rank = n if max_rank is None else min(int(max_rank), n)
    stop = max(tol * scale, 1e-12 * scale)
    pivots = []
    Gt = np.zeros((min(max_rank, 64), n))  # the factor, transposed: rows are contiguous
    r = 0
    while r < max_rank:
        j = int(np.argmax(d))
        if d[j] <= stop:
            break
        if r == Gt.shape[0]:  # grow by doubling: O(n * rank) memory overall
            Gt = np.vstack([Gt, np.zeros((min(Gt.shape[0], max_rank - r), n))])
        g = np.asarray(column(j), dtype=float).ravel() - Gt[:r].T @ Gt[:r, j]
        g /= np.sqrt(d[j])
        Gt[r] = g
        pivots.append(j)
        r += 1
        d -= g * g
        d[j] = 0.0
    G = Gt[:r].T
    return G, np.array(pivots, dtype=int), float(max(d.max(), 0.0) if n else 0.0)


def factor_kernel(kernel, Phi, tol=1e-8, max_rank=None):
    """``G`` with ``K(Phi, Phi) ≈ G G^T`` for a :class:`Kernel` (linear: ``G = Phi``).

    Returns
    -------
    G : ndarray or sparse, shape (n_parts, rank)
    info : dict with ``rank``, ``residual`` (largest residual diagonal) and ``pivots``
    """
    if kernel.kernel == "linear":
        return Phi, {"rank": Phi.shape[1], "residual": 0.0, "pivots": None}
    if sp.issparse(Phi) and Phi.nnz > 0.1 * Phi.shape[0] * Phi.shape[1]:
        Phi = Phi.toarray()  # dense enough: BLAS matrix-vector products are faster
    Phi_rows = sp.csr_array(Phi) if sp.issparse(Phi) else np.asarray(Phi, dtype=float)
    sq = _sqnorms(Phi_rows)
    gamma = kernel._gamma(Phi_rows.shape[1])

    def column(j):
        if callable(kernel.kernel):
            return kernel(Phi_rows, Phi_rows[j:j + 1]).ravel()
        g = np.asarray(Phi_rows @ (Phi_rows[j:j + 1].T if sp.issparse(Phi_rows)
                                   else Phi_rows[j]), dtype=float).ravel()
        if kernel.kernel == "rbf":
            return np.exp(-gamma * np.maximum(sq + sq[j] - 2 * g, 0.0))
        return (gamma * g + kernel.coef0) ** kernel.degree

    G, piv, res = incomplete_cholesky(kernel.diagonal(Phi_rows), column, tol, max_rank)
    return G, {"rank": G.shape[1], "residual": res, "pivots": piv}


def factor_precomputed(K, tol=1e-8, max_rank=None, psd_tol=1e-8):
    """Check a precomputed kernel matrix (symmetric PSD) and factor it.

    Raises
    ------
    InvalidInputError
        When K is not square, not symmetric or not positive semidefinite
        (an eigenvalue below ``-psd_tol * max|K|``).
    """
    K = check_finite_array(K, "kernel_matrix")
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise InvalidInputError(f"kernel_matrix must be a square 2-D array; got shape {K.shape}.")
    if not np.all(np.isfinite(K)):
        raise InvalidInputError("kernel_matrix contains NaN or infinite values.")
    scale = max(np.abs(K).max(), 1e-300) if K.size else 1.0
    asym = np.abs(K - K.T).max() if K.size else 0.0
    if asym > 1e-10 * scale:
        raise InvalidInputError(
            f"kernel_matrix must be symmetric; max |K - K^T| = {asym:.3g}.")
    if K.size:
        low = float(np.linalg.eigvalsh((K + K.T) / 2).min())
        if low < -psd_tol * scale:
            raise InvalidInputError(
                f"kernel_matrix must be positive semidefinite; its smallest eigenvalue is "
                f"{low:.3g} (tolerance {psd_tol * scale:.3g}).")
    G, piv, res = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol, max_rank)
    return G, {"rank": G.shape[1], "residual": res, "pivots": piv}
