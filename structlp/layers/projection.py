"""SparseMAP: the Euclidean projection of part scores onto the hull of an example's outputs.

For one example ``x`` with outputs ``Y(x)`` (0/1 part vectors of length ``L``) and part
scores ``theta`` (L,),

.. math::

    \\mu^\\star = \\arg\\min_{\\mu \\in \\operatorname{conv} \\mathcal Y(x)}
    \\tfrac12 \\|\\mu - \\theta\\|^2
    = \\arg\\max_{\\mu \\in \\operatorname{conv} \\mathcal Y(x)}
    \\theta \\cdot \\mu - \\tfrac12 \\|\\mu\\|^2 ,

solved by the active-set method of Martins et al. (2015) and Niculae et al. (ICML 2018)
with the model's MAP oracle as the only access to the polytope: the small QP over the
active vertices is solved exactly (its KKT system), and the oracle's vertex for the
gradient ``theta - mu`` enters the active set.  The Frank-Wolfe gap

.. math::

    g(\\mu) = \\max_{v \\in \\mathcal Y(x)} (\\theta - \\mu) \\cdot (v - \\mu)
    \\;\\ge\\; f(\\mu) - f(\\mu^\\star) \\;\\ge\\; \\tfrac12 \\|\\mu - \\mu^\\star\\|^2

(``f`` the squared distance halved, 1-strongly convex) is computed at every iteration from
that same oracle call; it certifies the answer.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
import warnings
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np

from ..exceptions import ConvergenceWarning
from ..utils.validation import check_bool, check_part_scores, check_scalar
from ..exceptions import InvalidInputError
from .oracle import ExampleOracle, check_model, dot, prepare_example
from .qp import CERTIFIED, DUPLICATE, FULL, STALLED, step_function

#: Default relative tolerance of the certificate: stop when the Frank-Wolfe gap is at most
#: ``tol * max(1, |theta|^2)``.
DEFAULT_TOL = 1e-10
#: Default cap on the active-set iterations (oracle calls).
DEFAULT_MAX_ITER = 1000


@dataclasses.dataclass
class SparseMAPResult:
    """The SparseMAP projection of one example's part scores, with its certificate.

    Attributes
    ----------
    mu : ndarray, shape (L,)
        The projection, ``weights @ support``.
    support_parts : list of n_active int arrays
        The active vertices (outputs of the example, affinely independent) by their parts:
        vertex ``j`` is the 0/1 part vector with ones at ``support_parts[j]``.
    support : ndarray, shape (n_active, L)
        The same as dense 0/1 rows (made on first access).
    weights : ndarray, shape (n_active,)
        Their convex weights (positive, summing to 1).
    gap : float
        The Frank-Wolfe gap ``max_v (theta - mu) . (v - mu)`` computed at ``mu`` with the
        oracle's vertex ``v``: an upper bound on ``1/2|mu - theta|^2`` minus its minimum,
        and so ``|mu - mu*| <= sqrt(2 gap)`` (a value below 0 by rounding is reported
        as 0).  NaN when no gap was computed (``max_iter``
        of 0).
    n_iter : int
        Active-set iterations (each one oracle call after the first).
    certified : bool
        Whether ``gap <= threshold``.
    threshold : float
        The gap required: ``tol * max(1, |theta|^2)``.
    n_oracle_calls : int

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import SparseMAPResult, sparsemap
    >>> res = sparsemap(BipartiteMatching(), np.zeros((2, 2, 1)), np.array([1.0, 0.6, 0.0, 0.8]))
    >>> isinstance(res, SparseMAPResult), res.support_parts, res.weights.round(3).tolist()
    (True, [array([0, 3]), array([1, 2])], [0.8, 0.2])
    >>> bool(np.allclose(res.weights @ res.support, res.mu)), res.gap <= res.threshold
    (True, True)
    """

    mu: np.ndarray
    support_parts: List[np.ndarray]
    weights: np.ndarray
    gap: float
    n_iter: int
    certified: bool
    threshold: float
    n_oracle_calls: int

    @functools.cached_property
    def support(self) -> np.ndarray:
        """The active vertices as rows (n_active, L) of 0/1 floats."""
        S = np.zeros((len(self.support_parts), self.mu.size))
        for j, parts in enumerate(self.support_parts):
            S[j, parts] = 1.0
        return S

    def jacobian(self) -> np.ndarray:
        """``d mu / d theta`` (L, L) on the active face: the orthogonal projector onto the
        directions of the affine hull of :attr:`support` (symmetric)."""
        Hinv, D = face_projector(self.support)
        return D.T @ Hinv @ D if D.shape[0] else np.zeros((self.mu.size, self.mu.size))

    def vjp(self, cotangent: Any) -> np.ndarray:
        """``J^T g`` for a cotangent ``g`` (L,) or a stack of them (n, L) (``J`` is
        symmetric, :meth:`jacobian`)."""
        return make_vjp(self.support_parts, self.mu.size)(cotangent)


def face_projector(support: np.ndarray,
                   gram: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(Hinv, D)`` with ``D`` (k-1, L) the differences ``s_j - s_0`` of the support's
    vertices and ``Hinv = (D D^T)^{-1}``: ``J = D^T Hinv D`` (L, L) is the orthogonal
    projector onto the directions of their affine hull.

    This is the Jacobian of Niculae et al. (2018, Prop. 1), ``M (I - 1 1^T G^{-1} /
    (1^T G^{-1} 1)) G^{-1} M^T`` with ``M`` the vertices as columns and ``G = M^T M``
    (derived from the KKT system of the QP restricted to the active face, ``G alpha +
    tau 1 = M^T theta``, ``1^T alpha = 1``: ``alpha`` moves with ``theta`` in the
    affine hull, ``mu`` by the projection onto its directions), written without
    ``G^{-1}``: it needs the vertices affinely (not linearly) independent, which the active
    set keeps.  ``gram``, the support's Gram matrix, saves forming ``D D^T``.
    """
    S = np.asarray(support, dtype=float)
    D = S[1:] - S[0]
    if not D.shape[0]:
        return np.zeros((0, 0)), D
    if gram is None:
        H = D @ D.T
    else:
        g0 = gram[0]
        H = gram[1:, 1:] - g0[1:, None] - g0[None, 1:] + g0[0]
    try:
        Hinv = np.linalg.inv(H)
    except np.linalg.LinAlgError:             # pragma: no cover - affinely dependent
        Hinv = np.linalg.pinv(H)
    return Hinv, D


def make_vjp(support_parts: List[np.ndarray], n_parts: int,
             gram: Optional[np.ndarray] = None,
             kkt_block: Optional[np.ndarray] = None) -> Callable[[Any], np.ndarray]:
    """The vector-Jacobian product ``g -> J g`` of the projection on the face spanned by the
    0/1 vertices with ones at ``support_parts`` (``J = D^T (D D^T)^{-1} D`` symmetric, see
    :func:`face_projector`), in O(k nnz + k^2) per product: ``D g`` and ``D^T c`` are sums
    over the vertices' parts.  ``gram``: the vertices' Gram matrix (else computed).

    ``kkt_block``: the vertices' block ``B`` (k, k) of the inverse of the restricted QP's
    KKT matrix ``[0 1^T; 1 G]``, as the active set keeps it: then ``J = V^T B V`` (``V``
    the vertices as rows; ``alpha = B V theta + const`` on the face), no factorisation."""
    L = n_parts
    k = len(support_parts)
    rows = np.repeat(np.arange(k), [len(p) for p in support_parts])
    cols = np.concatenate(support_parts) if k else np.zeros(0, dtype=np.int64)
    factors: list = []
    B = np.zeros((k, k)) if kkt_block is None else kkt_block

    def direct(g: np.ndarray) -> np.ndarray:
        sg = np.bincount(rows, weights=g[cols], minlength=k)       # V g
        return np.bincount(cols, weights=(B @ sg)[rows], minlength=L)

    def hinv() -> np.ndarray:
        if not factors:
            G = gram
            if G is None:
                S = np.zeros((k, L))
                S[rows, cols] = 1.0
                G = S @ S.T
            g0 = G[0]
            H = G[1:, 1:] - g0[1:, None] - g0[None, 1:] + g0[0]
            try:
                factors.append(np.linalg.inv(H))
            except np.linalg.LinAlgError:     # pragma: no cover - affinely dependent
                factors.append(np.linalg.pinv(H))
        return factors[0]

    def via_face(g: np.ndarray) -> np.ndarray:
        if k < 2:
            return np.zeros(L)
        sg = np.bincount(rows, weights=g[cols], minlength=k)       # S g
        c = hinv() @ (sg[1:] - sg[0])
        w = np.empty(k)
        w[0] = -c.sum()
        w[1:] = c
        return np.bincount(cols, weights=w[rows], minlength=L)     # D^T c

    one = direct if kkt_block is not None else via_face     # the same product

    def vjp(cotangent: Any) -> np.ndarray:
        g = cotangent
        if type(g) is not np.ndarray or g.dtype != np.float64 or g.shape != (L,):
            g = np.asarray(cotangent, dtype=float)
            if g.ndim == 2 and g.shape[1] == L:
                if not np.isfinite(g).all():
                    raise InvalidInputError("cotangent contains NaN or infinite values.")
                return np.vstack([one(gi) for gi in g]) if len(g) else np.zeros((0, L))
        return one(check_part_scores(g, L, "cotangent"))
    return vjp


def active_set(oracle: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, tol: float,
               max_iter: int) -> Tuple[SparseMAPResult, np.ndarray]:
    """The active-set loop (see the module); returns the result and the vertices' block of
    the inverse KKT matrix of its support (see :func:`make_vjp`).  Each iteration: one oracle call for the
    gradient ``theta - mu``, its Frank-Wolfe gap, and :func:`~structlp.layers.qp.add_vertex`
    (compiled)."""
    step = step_function()
    theta = np.ascontiguousarray(theta)
    L = theta.size
    cap = 8
    v = np.ascontiguousarray(oracle(theta), dtype=float)
    I = np.empty((cap, max(int(np.count_nonzero(v)), 1)), dtype=np.int64)  # vertices' ones
    nI = np.empty(cap, dtype=np.int64)       # how many (0/1 vertices, rows 0..k-1)
    G = np.empty((cap, cap))                 # their Gram matrix
    bt = np.empty(cap)                       # their scores theta . v
    alpha = np.empty(cap)                    # their weights
    Kinv = np.empty((cap + 1, cap + 1))      # the inverse of their KKT matrix
    n_updates = np.zeros(1, dtype=np.int64)
    mu = np.zeros(L)
    r = theta.copy()
    mark = np.zeros(L)
    k, _, _, rmu = step(v, I, nI, G, bt, alpha, 0, theta, mu, r, mark, 0.0, -np.inf, Kinv,
                        n_updates)
    threshold = tol * max(1.0, dot(theta, theta))
    gap = float("nan")
    certified = False
    n_iter = 0
    stalled = None
    while n_iter < max_iter:
        n_iter += 1
        v = oracle(r)
        if type(v) is not np.ndarray or not v.flags.c_contiguous:
            v = np.ascontiguousarray(v, dtype=float)
        k, status, gap, rmu = step(v, I, nI, G, bt, alpha, k, theta, mu, r, mark, rmu,
                                   threshold, Kinv, n_updates)
        if status == FULL:                       # room for one more vertex, then again
            nv = int(np.count_nonzero(v))
            if nv > I.shape[1]:
                I = np.concatenate([I, np.empty((cap, nv - I.shape[1]), np.int64)], axis=1)
            if k == cap:
                cap *= 2
                I = np.concatenate([I, np.empty_like(I)])
                G2 = np.empty((cap, cap))
                G2[:k, :k] = G[:k, :k]
                G = G2
                K2 = np.empty((cap + 1, cap + 1))
                K2[:k + 1, :k + 1] = Kinv[:k + 1, :k + 1]
                Kinv = K2
                nI, bt, alpha = (np.concatenate([a, np.empty_like(a)])
                                 for a in (nI, bt, alpha))
            k, status, gap, rmu = step(v, I, nI, G, bt, alpha, k, theta, mu, r, mark, rmu,
                                       threshold, Kinv, n_updates)
        gap = max(float(gap), 0.0)               # (rounding below 0: clipped)
        if status == CERTIFIED:
            certified = True
            break
        if status == DUPLICATE:
            stalled = "the oracle returned a vertex already in the active set"
            break
        if status == STALLED:
            stalled = ("the entering vertex is in the active vertices' affine hull or left "
                       "the active set at once (rounding)")
            break
    result = SparseMAPResult(mu=mu, support_parts=[I[j, :nI[j]].copy() for j in range(k)], weights=alpha[:k].copy(), gap=gap,
                             n_iter=n_iter, certified=certified, threshold=threshold,
                             n_oracle_calls=n_iter + 1)
    if not certified:
        why = stalled or f"max_iter={max_iter} iterations"
        warnings.warn(
            f"sparsemap stopped ({why}) with the Frank-Wolfe gap {gap:.3g} above the "
            f"certified threshold {threshold:.3g} (tol times max(1, |theta|^2)); the "
            "projection is not certified (result.certified is False). Raise max_iter or "
            "tol.", ConvergenceWarning, stacklevel=3)
    return result, Kinv[1:k + 1, 1:k + 1].copy()


def check_options(tol: Any, max_iter: Any, owner: str) -> Tuple[float, int]:
    tol = check_scalar(tol, "tol", low=0.0, owner=owner)
    max_iter = check_scalar(max_iter, "max_iter", kind=numbers.Integral, low=0, owner=owner)
    return tol, max_iter


def sparsemap(model: Any, x: Any, theta: Any, tol: float = DEFAULT_TOL,
              max_iter: int = DEFAULT_MAX_ITER, with_vjp: bool = False
              ) -> Union[SparseMAPResult, Tuple[SparseMAPResult, Callable[[Any], np.ndarray]]]:
    """SparseMAP: the Euclidean projection of ``theta`` onto the hull of the outputs of ``x``.

    Solves

    .. math::

        \\mu^\\star = \\arg\\min_{\\mu \\in \\operatorname{conv} \\mathcal Y(x)}
        \\tfrac12 \\|\\mu - \\theta\\|^2

    by the active-set method driven by the model's MAP oracle (its decoder, or the
    inference LP for a model without one), until the Frank-Wolfe gap
    ``max_v (theta - mu) . (v - mu)`` (an upper bound on the objective's excess, so
    ``|mu - mu*| <= sqrt(2 gap)``) is at most ``tol * max(1, |theta|^2)``.  The answer is a
    sparse convex combination of outputs.

    Parameters
    ----------
    model : StructuredModel
        Any built-in or declared model.
    x : one example of ``model`` (checked by ``model.check_x``)
    theta : array, shape (L,)
        Part scores of ``x``, ``L = model.n_parts(x)``, in the model's part order (as
        ``model.encode`` lays the parts out); real floating-point values.
    tol : float >= 0
        Relative gap at which the projection is certified.
    max_iter : int >= 0
        Oracle calls after the first; reaching it uncertified warns
        (:class:`~structlp.ConvergenceWarning`) and leaves ``certified`` False.
    with_vjp : bool
        Also return the vector-Jacobian product ``g -> J^T g`` of ``theta -> mu*``, exact
        on the active face (``J`` is the orthogonal projector onto the directions of the
        support's affine hull).

    Returns
    -------
    result : SparseMAPResult
        ``mu`` (L,), ``support`` (n_active, L), ``weights`` (n_active,), ``gap``,
        ``n_iter``, ``certified``.
    vjp : callable, only with ``with_vjp``
        Maps a cotangent (L,) (or (n, L)) to the gradient with respect to ``theta``.

    Raises
    ------
    InvalidInputError
        ``theta`` of the wrong length, NaN or infinite, complex, integer; a bad ``x``.

    Examples
    --------
    The projection of scores onto the 2x2 assignments (the Birkhoff polytope):

    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import sparsemap
    >>> x = np.zeros((2, 2, 1))                     # a 2x2 example (features unused here)
    >>> res = sparsemap(BipartiteMatching(), x, np.array([1.0, 0.6, 0.0, 0.8]))
    >>> res.mu.round(3).tolist()
    [0.8, 0.2, 0.2, 0.8]
    >>> res.support.tolist(), res.weights.round(3).tolist(), res.certified
    ([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]], [0.8, 0.2], True)
    """
    owner = "sparsemap"
    check_model(model, owner)
    tol, max_iter = check_options(tol, max_iter, owner)
    with_vjp = check_bool(with_vjp, "with_vjp", owner=owner)
    _, theta, oracle = prepare_example(model, x, theta)
    return project(oracle, theta, tol, max_iter, with_vjp)


def project(oracle: ExampleOracle, theta: np.ndarray, tol: float, max_iter: int,
            with_vjp: bool = False) -> Any:
    """:func:`sparsemap` on a prepared example (checked ``theta`` and its oracle)."""
    result, block = active_set(oracle, theta, tol, max_iter)
    result.n_oracle_calls = oracle.n_calls
    if with_vjp:
        return result, make_vjp(result.support_parts, result.mu.size, kkt_block=block)
    return result
