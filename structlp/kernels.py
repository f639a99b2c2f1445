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
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from .utils.validation import check_finite_array, check_scalar
from .exceptions import InvalidInputError, InvalidParameterError

KERNELS = ("linear", "rbf", "poly", "precomputed")
#: A callable kernel on at most this many training parts is evaluated in full and
#: checked (symmetric, positive semidefinite) like a precomputed matrix; on more, only
#: the diagonals met by the incomplete Cholesky factor are checked.
CALLABLE_FULL_CHECK = 2000


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

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.kernels import Kernel
    >>> k = Kernel("rbf", gamma=0.5)
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> k(A, A).round(4)                    # exp(-0.5 |a - b|^2)
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """

    def __init__(self, kernel: Union[str, Callable[..., Any]] = "linear",
                 gamma: Optional[float] = None, degree: int = 3, coef0: float = 1.0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0

    def check(self, owner: Optional[str] = None) -> "Kernel":
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

    def frozen(self, n_features: int) -> Dict[str, Any]:
        """The parameters as a plain dict, ``gamma`` resolved for ``n_features``
        (``Kernel(**kernel.frozen(d))`` evaluates the same kernel)."""
        return {"kernel": self.kernel, "gamma": self._gamma(n_features),
                "degree": int(self.degree), "coef0": float(self.coef0)}

    def __call__(self, A: Any, B: Any) -> np.ndarray:
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

    def diagonal(self, A: Any) -> np.ndarray:
        """``k(phi_p, phi_p)`` for every row of A, shape (n,)."""
        if callable(self.kernel):
            return np.array([self(A[i:i + 1], A[i:i + 1])[0, 0] for i in range(A.shape[0])])
        if self.kernel == "rbf":
            return np.ones(A.shape[0])
        sq = _sqnorms(A)
        if self.kernel == "linear":
            return sq
        return (self._gamma(A.shape[1]) * sq + self.coef0) ** self.degree


def incomplete_cholesky(diag: np.ndarray, column: Callable[[int], np.ndarray], tol: float = 1e-8,
                        max_rank: Optional[int] = None, psd_tol: float = 1e-8
                        ) -> Tuple[np.ndarray, np.ndarray, float]:
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
    psd_tol : float
        A diagonal of K, or a residual diagonal of ``K - G G^T``, below
        ``-psd_tol * max(diag)`` proves that K is not positive semidefinite.

    Returns
    -------
    G : ndarray, shape (n, rank)
    pivots : ndarray of int, shape (rank,)
    residual : float
        Largest residual diagonal when it stopped.

    Raises
    ------
    InvalidInputError
        When the diagonal or a column is not finite, or K is provably not
        positive semidefinite (the message says which).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.kernels import incomplete_cholesky
    >>> Z = np.random.default_rng(0).normal(size=(6, 2))
    >>> K = Z @ Z.T                                   # rank 2
    >>> G, pivots, residual = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j])
    >>> G.shape, bool(np.allclose(G @ G.T, K))
    ((6, 2), True)
    """
    n = len(diag)
    d = np.array(diag, dtype=float)
    if not np.all(np.isfinite(d)):
        raise InvalidInputError(
            "The kernel matrix has non-finite diagonal entries (an overflow: for 'poly' or "
            "'rbf' lower gamma, or rescale the features to about unit size).")
    scale = max(float(np.abs(d).max()), 1e-300) if n else 1.0
    if n and d.min() < -psd_tol * scale:
        raise InvalidInputError(
            f"The kernel is not positive semidefinite: k(phi, phi) = {d.min():.3g} < 0 for "
            f"training part {int(d.argmin())}.")
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
        col = np.asarray(column(j), dtype=float).ravel()
        if not np.all(np.isfinite(col)):
            raise InvalidInputError(
                f"Column {j} of the kernel matrix is not finite (an overflow: lower gamma, "
                "or rescale the features to about unit size).")
        g = col - Gt[:r].T @ Gt[:r, j]
        g /= np.sqrt(d[j])
        Gt[r] = g
        pivots.append(j)
        r += 1
        d -= g * g
        d[j] = 0.0
        if d.min() < -psd_tol * scale * max(n, 1):
            raise InvalidInputError(
                "The kernel is not positive semidefinite: after pivoting on "
                f"{r} parts a residual diagonal of K - G G^T is {d.min():.3g} < 0 "
                f"(max |k(phi, phi)| = {scale:.3g}).")
    G = Gt[:r].T
    return G, np.array(pivots, dtype=int), float(max(d.max(), 0.0) if n else 0.0)


def _nonzero_rank(G, info, what):
    """Refuse a factor of rank 0: the dual QP would have no kernel term at all."""
    if G.shape[1] == 0:
        raise InvalidInputError(
            f"The kernel factor of {what} has rank 0: every k(phi_p, phi_p) is at most "
            "kernel_tol times the largest one (or all are 0). Lower kernel_tol (it must be "
            "< 1), check that the kernel is not identically zero on the training parts, or "
            "rescale the features.")
    return G, info


def factor_kernel(kernel: Kernel, Phi: Any, tol: float = 1e-8,
                  max_rank: Optional[int] = None) -> Tuple[Any, Dict[str, Any]]:
    """``G`` with ``K(Phi, Phi) ≈ G G^T`` for a :class:`Kernel` (linear: ``G = Phi``).

    Returns
    -------
    G : ndarray or sparse, shape (n_parts, rank)
    info : dict with ``rank``, ``residual`` (largest residual diagonal) and ``pivots``

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.kernels import Kernel, factor_kernel
    >>> Phi = np.random.default_rng(0).normal(size=(8, 3))
    >>> G, info = factor_kernel(Kernel("poly", degree=2, gamma=1.0), Phi, tol=1e-10)
    >>> info["rank"], bool(np.allclose(G @ G.T, (Phi @ Phi.T + 1) ** 2))
    (8, True)
    """
    if kernel.kernel == "linear":
        return Phi, {"rank": Phi.shape[1], "residual": 0.0, "pivots": None}
    if callable(kernel.kernel) and Phi.shape[0] <= CALLABLE_FULL_CHECK:
        # a user's kernel: evaluate it once in full and check it as a precomputed matrix
        return factor_precomputed(kernel(Phi, Phi), tol, max_rank,
                                  what="the kernel callable's matrix of the training parts")
    if sp.issparse(Phi) and Phi.nnz > 0.1 * Phi.shape[0] * Phi.shape[1]:
        Phi = Phi.toarray()  # dense enough: BLAS matrix-vector products are faster
    Phi_rows = sp.csr_array(Phi) if sp.issparse(Phi) else np.asarray(Phi, dtype=float)
    sq = _sqnorms(Phi_rows)
    gamma = kernel._gamma(Phi_rows.shape[1])

    def column(j):
        if callable(kernel.kernel):
            return kernel(Phi_rows, Phi_rows[j:j + 1]).ravel()
        g = _dense(Phi_rows @ (Phi_rows[j:j + 1].T if sp.issparse(Phi_rows)
                               else Phi_rows[j])).ravel()
        if kernel.kernel == "rbf":
            return np.exp(-gamma * np.maximum(sq + sq[j] - 2 * g, 0.0))
        return (gamma * g + kernel.coef0) ** kernel.degree

    with np.errstate(over="ignore", invalid="ignore"):  # overflows are reported below
        G, piv, res = incomplete_cholesky(kernel.diagonal(Phi_rows), column, tol, max_rank)
    return _nonzero_rank(G, {"rank": G.shape[1], "residual": res, "pivots": piv},
                         f"the {kernel.kernel!r} kernel" if not callable(kernel.kernel)
                         else "the kernel callable")


def factor_precomputed(K: Any, tol: float = 1e-8, max_rank: Optional[int] = None,
                       psd_tol: float = 1e-8, what: str = "kernel_matrix"
                       ) -> Tuple[np.ndarray, Dict[str, Any]]:
    """Check a precomputed kernel matrix (symmetric PSD) and factor it.

    ``what`` names the matrix in error messages.

    Raises
    ------
    InvalidInputError
        When K is not square, not finite, not symmetric or not positive
        semidefinite (an eigenvalue below ``-psd_tol * max|K|``), or the factor
        has rank 0.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.kernels import factor_precomputed
    >>> K = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]])
    >>> G, info = factor_precomputed(K)
    >>> info["rank"], bool(np.allclose(G @ G.T, K))
    (3, True)
    >>> try:
    ...     factor_precomputed(np.array([[1.0, 2.0], [2.0, 1.0]]))   # eigenvalue -1
    ... except ValueError as e:
    ...     print(type(e).__name__)
    InvalidInputError
    """
    K = check_finite_array(K, "kernel_matrix")
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise InvalidInputError(f"{what} must be a square 2-D array; got shape {K.shape}.")
    if not np.all(np.isfinite(K)):
        raise InvalidInputError(f"{what} contains NaN or infinite values.")
    scale = max(np.abs(K).max(), 1e-300) if K.size else 1.0
    asym = np.abs(K - K.T).max() if K.size else 0.0
    if asym > 1e-10 * scale:
        raise InvalidInputError(
            f"{what} must be symmetric; max |K - K^T| = {asym:.3g}.")
    if K.size:
        low = float(np.linalg.eigvalsh((K + K.T) / 2).min())
        if low < -psd_tol * scale:
            raise InvalidInputError(
                f"{what} must be positive semidefinite; its smallest eigenvalue is "
                f"{low:.3g} (tolerance {psd_tol * scale:.3g}).")
    G, piv, res = incomplete_cholesky(np.diag(K).copy(), lambda j: K[:, j], tol, max_rank)
    return _nonzero_rank(G, {"rank": G.shape[1], "residual": res, "pivots": piv}, what)
