"""The node game of adversarial graphical models (Fathony et al. 2018, Eq. 8).

For a potential vector ``a`` (shape (k,)) and a loss matrix ``L`` (shape (k, k),
``L[j, b]`` = loss of predicting ``j`` when the adversary's label is ``b``), the
game is

.. math::

    \\mathrm{value}(a, L) = \\max_{r\\in\\Delta_k}\\; a\\cdot r + \\min_{p\\in\\Delta_k} p^T L r
    = \\min_{p\\in\\Delta_k} \\max_{b}\\; a_b + (L^T p)_b ,

an LP for any ``L``: ``max a.r + v  s.t.  v <= (L r)_j for all j, r in the simplex``;
the predictor's ``p`` is the dual of ``v <= L r``.  For the zero-one, absolute
(ordinal) and squared losses, scaled by a node weight ``w >= 0``, closed forms
(vectorized over many nodes) give the value and the adversary's ``r``:

* zero-one ``L = w (1 1^T - I)``: sort ``a`` descending, value
  ``max_t (sum of the top t entries + w (t - 1)) / t``, ``r`` uniform on the top t;
* absolute ``L[j, b] = w |j - b|``: value ``max_{i<=j} (a_i + a_j + w (j - i)) / 2``,
  ``r`` = 1/2 on ``i`` and on ``j``;
* squared ``L[j, b] = w (j - b)^2``: the best of the pure strategies and of the
  two-label mixtures whose optimal prediction sits at an intermediate label.
"""

from __future__ import annotations

import numbers

from typing import Any, Dict, Optional, Tuple, Union

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linprog

from ..utils.validation import check_choice, check_finite_array, check_scalar
from ..exceptions import InvalidInputError, InvalidParameterError, SolverError
from ..graphical.losses import NAMED_LOSSES, check_loss, loss_matrix  # noqa: F401  (defined there)
from ..solvers import check_solver, check_solver_opts, solve


def _as_batch(a, weight):
    a = check_finite_array(a, "a")
    single = a.ndim == 1
    A = np.atleast_2d(a)
    if a.ndim == 0 or A.ndim != 2 or A.shape[1] == 0:
        raise InvalidInputError(f"a must have shape (k,) or (n, k) with k >= 1; got {a.shape}.")
    w = np.full(A.shape[0], check_scalar(weight, "weight", low=0)) if np.ndim(weight) == 0 \
        else check_finite_array(weight, "weight", shape=(A.shape[0],))
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise InvalidParameterError(f"The 'weight' parameter must be >= 0; got {weight!r}.")
    return A, np.asarray(w, dtype=float), single


def _out(values, R, single):
    return (float(values[0]), R[0]) if single else (values, R)


def zero_one_game(a: ArrayLike, weight: Union[float, ArrayLike] = 1.0
                  ) -> Tuple[Union[float, np.ndarray], np.ndarray]:
    """Closed-form node game for the zero-one loss ``weight * (1 1^T - I)``.

    Solves ``max_{r in simplex} a.r + weight * (1 - max_j r_j)``.

    Parameters
    ----------
    a : array, shape (k,) or (n, k)
    weight : float >= 0 or array of shape (n,)

    Returns
    -------
    value : float or ndarray (n,)
    r : ndarray (k,) or (n, k)
        The adversary's optimal distribution (uniform on the top-t labels).

    Examples
    --------
    >>> from structlp.agm import zero_one_game
    >>> value, r = zero_one_game([0.0, 1.0, 0.5])
    >>> # the adversary mixes its two best labels
    >>> print(f"{value:.3f}", r.round(3))
    1.250 [0.  0.5 0.5]
    """
    A, w, single = _as_batch(a, weight)
    values, R = _zero_one(A, w)
    return _out(values, R, single)


def _zero_one(A, w):
    n, k = A.shape
    order = np.argsort(-A, axis=1, kind="stable")
    S = np.cumsum(np.take_along_axis(A, order, axis=1), axis=1)
    t = np.arange(1, k + 1)
    vals = (S + w[:, None] * (t - 1)) / t
    best = np.argmax(vals, axis=1)
    values = vals[np.arange(n), best]
    R = np.zeros((n, k))
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(k)[None, :].repeat(n, 0), axis=1)
    R = (ranks <= best[:, None]) / (best[:, None] + 1.0)
    return values, R


def absolute_game(a: ArrayLike, weight: Union[float, ArrayLike] = 1.0
                  ) -> Tuple[Union[float, np.ndarray], np.ndarray]:
    """Closed-form node game for the absolute (ordinal) loss ``weight * |j - b|``.

    Solves ``max_{r in simplex} a.r + min_j sum_b weight |j - b| r_b``; the value is
    ``max_{i <= j} (a_i + a_j + weight (j - i)) / 2``.

    Parameters and returns as :func:`zero_one_game`.

    Examples
    --------
    >>> from structlp.agm import absolute_game, game_value
    >>> value, r = absolute_game([0.0, 1.0, 0.5])
    >>> print(f"{value:.3f}", r.round(3))
    1.250 [0.5 0.  0.5]
    >>> # the LP agrees
    >>> print(f"{game_value([0.0, 1.0, 0.5], 'absolute', method='lp')[0]:.3f}")
    1.250
    """
    A, w, single = _as_batch(a, weight)
    values, R = _absolute(A, w)
    return _out(values, R, single)


def _absolute(A, w):
    n, k = A.shape
    idx = np.arange(k)
    M = (A[:, :, None] + A[:, None, :] + w[:, None, None] * np.abs(idx[:, None] - idx[None, :])) / 2
    flat = M.reshape(n, -1)
    best = np.argmax(flat, axis=1)
    values = flat[np.arange(n), best]
    i, j = np.divmod(best, k)
    R = np.zeros((n, k))
    np.add.at(R, (np.arange(n), i), 0.5)
    np.add.at(R, (np.arange(n), j), 0.5)
    return values, R


_SQ_CACHE: dict = {}


def _squared_triples(k):
    if k not in _SQ_CACHE:
        tr = [(i, j, m) for i in range(k) for j in range(i + 1, k) for m in range(i + 1, j + 1)]
        _SQ_CACHE[k] = np.array(tr, dtype=int).reshape(-1, 3)
    return _SQ_CACHE[k]


def squared_game(a: ArrayLike, weight: Union[float, ArrayLike] = 1.0
                 ) -> Tuple[Union[float, np.ndarray], np.ndarray]:
    """Closed-form node game for the squared loss ``weight * (j - b)^2``.

    Solves ``max_{r in simplex} a.r + min_j sum_b weight (j - b)^2 r_b``.  The optimum
    is a pure strategy or a mixture of two labels ``i < j`` whose best response is
    a label ``m`` in ``(i, j]`` (Fathony et al.'s ``al_quad``).

    Parameters and returns as :func:`zero_one_game`.

    Examples
    --------
    >>> from structlp.agm import squared_game, game_value
    >>> value, r = squared_game([0.0, 1.0, 0.5])
    >>> print(f"{value:.3f}", r.round(3))
    1.375 [0.25 0.   0.75]
    >>> # the LP agrees
    >>> print(f"{game_value([0.0, 1.0, 0.5], 'squared', method='lp')[0]:.3f}")
    1.375
    """
    A, w, single = _as_batch(a, weight)
    values, R = _squared(A, w)
    return _out(values, R, single)


def _squared(A, w):
    n, k = A.shape
    pure_best = np.argmax(A, axis=1)
    values = A[np.arange(n), pure_best]
    R = np.zeros((n, k))
    R[np.arange(n), pure_best] = 1.0
    T = _squared_triples(k)
    if len(T):
        i, j, m = T[:, 0], T[:, 1], T[:, 2]
        den = 2.0 * (j - i)
        ci = (2 * (j - m) + 1) / den
        cj = (2 * (m - i) - 1) / den
        vals = (ci * (A[:, i] + w[:, None] * (m - i) ** 2)
                + cj * (A[:, j] + w[:, None] * (j - m) ** 2))
        tb = np.argmax(vals, axis=1)
        tv = vals[np.arange(n), tb]
        mix = tv > values
        rows = np.flatnonzero(mix)
        if len(rows):
            values = np.where(mix, tv, values)
            R[rows] = 0.0
            R[rows, i[tb[rows]]] = ci[tb[rows]]
            R[rows, j[tb[rows]]] += cj[tb[rows]]
    return values, R


_CLOSED = {"zero_one": _zero_one, "absolute": _absolute, "squared": _squared}


def node_games(A, loss, weights, L=None):
    """Values and adversary strategies of many node games at once (internal, no checks).

    Parameters
    ----------
    A : ndarray (n, k)
    loss : str in NAMED_LOSSES, or None for a general matrix ``L`` (shape (k, k))
    weights : ndarray (n,), the per-node loss scale

    Returns
    -------
    values : ndarray (n,); R : ndarray (n, k)
    """
    if loss is not None:
        return _CLOSED[loss](A, weights)
    values = np.empty(A.shape[0])
    R = np.empty_like(A)
    for t in range(A.shape[0]):
        values[t], R[t], _ = _game_lp_scipy(A[t], weights[t] * L)
    return values, R


def _game_lp_scipy(a, L):
    """Eq. 8 by HiGHS through scipy (fast path of the LP method); returns value, r, p."""
    k = len(a)
    # variables (r_1..r_k, v); minimize -(a.r + v)
    c = np.concatenate([-a, [-1.0]])
    A_ub = np.hstack([-L, np.ones((k, 1))])  # v - (L r)_j <= 0
    A_eq = np.concatenate([np.ones(k), [0.0]])[None, :]
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(k), A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * k + [(None, None)], method="highs")
    if res.status != 0:
        raise SolverError(f"HiGHS failed on the node game LP: {res.message}")
    p = -np.asarray(res.ineqlin.marginals)
    return -res.fun, res.x[:k], p / max(p.sum(), 1e-300)


def predictor_strategy(a, L, value=None):
    """An optimal predictor strategy ``p = argmin_{p in simplex} max_b a_b + (L^T p)_b``.

    Returns
    -------
    p : ndarray (k,)
    """
    k = len(a)
    c = np.concatenate([np.zeros(k), [1.0]])
    A_ub = np.hstack([L.T, -np.ones((k, 1))])  # a_b + (L^T p)_b <= t
    res = linprog(c, A_ub=A_ub, b_ub=-a, A_eq=np.concatenate([np.ones(k), [0.0]])[None, :],
                  b_eq=[1.0], bounds=[(0, None)] * k + [(None, None)], method="highs")
    if res.status != 0:
        raise SolverError(f"HiGHS failed on the predictor's LP: {res.message}")
    p = np.clip(res.x[:k], 0, None)
    return p / p.sum()


def game_value_lp(a, L, solver=None, solver_opts=None):
    """Eq. 8 as a cvxpy LP, for any loss matrix.

    Solves ``max_{r, v} a.r + v  s.t.  v <= (L r)_j for all j,  sum(r) = 1,  r >= 0``.

    Returns
    -------
    value : float; r : ndarray (k,); p : ndarray (k,), the dual of ``v <= L r``.
    """
    k = len(a)
    r = cp.Variable(k, nonneg=True, name="r")
    v = cp.Variable(name="v")
    con = v <= L @ r
    prob = cp.Problem(cp.Maximize(a @ r + v), [con, cp.sum(r) == 1])
    solve(prob, check_solver(solver, kind="LP"), solver_opts, what="the node game LP")
    p = np.clip(np.asarray(con.dual_value, dtype=float).ravel(), 0, None)
    return float(prob.value), np.clip(np.asarray(r.value, dtype=float), 0, None), p / p.sum()


def game_value(a: ArrayLike, L: Union[str, ArrayLike] = "zero_one", weight: float = 1.0,
               method: str = "auto", solver: Optional[str] = None,
               solver_opts: Optional[Dict[str, Any]] = None
               ) -> Tuple[float, np.ndarray, np.ndarray]:
    """Value and optimal strategies of the AGM node game (Fathony et al. 2018, Eq. 8).

    Solves

    .. math::

        \\max_{r\\in\\Delta_k} a\\cdot r + \\min_{p\\in\\Delta_k} p^T (w L) r

    Parameters
    ----------
    a : array, shape (k,)
        Potentials of the adversary's labels.
    L : {"zero_one", "absolute", "squared"} or array, shape (k, k)
        Loss matrix, ``L[j, b]`` = loss of predicting ``j`` against label ``b``
        (any real matrix; named losses use labels 0..k-1).
    weight : float >= 0
        Scale ``w`` of the loss (the node weight).
    method : {"auto", "closed_form", "lp"}
        "auto" uses the closed form for named losses and the LP otherwise.
    solver, solver_opts
        cvxpy LP solver (default HiGHS) and its options, for ``method="lp"``.

    Returns
    -------
    value : float
    r : ndarray, shape (k,)
        The adversary's optimal distribution.
    p : ndarray, shape (k,)
        An optimal predictor distribution (closed form for zero-one; a small
        HiGHS LP for the other closed forms; the LP's dual for ``method="lp"``).

    Examples
    --------
    >>> from structlp.agm import game_value
    >>> value, r, p = game_value([0.0, 1.0, 0.5], "zero_one")
    >>> print(f"{value:.3f}", r.round(3), p.round(3))
    1.250 [0.  0.5 0.5] [0.   0.75 0.25]
    >>> # the same game as an LP
    >>> value_lp, _, _ = game_value([0.0, 1.0, 0.5], "zero_one", method="lp")
    >>> print(f"{value_lp:.3f}")
    1.250
    """
    a = np.asarray(check_finite_array(a, "a", ndim=1))
    k = a.shape[0]
    if k == 0:
        raise InvalidInputError("a must have at least one entry.")
    weight = check_scalar(weight, "weight", kind=numbers.Real, low=0, owner="game_value")
    check_choice(method, "method", ("auto", "closed_form", "lp"), owner="game_value")
    name, Lm = check_loss(L, k, owner="game_value", allow_negative=True)
    Lw = weight * Lm
    if method == "closed_form" and name is None:
        raise InvalidParameterError(
            "method='closed_form' of game_value needs a named loss "
            f"({list(NAMED_LOSSES)}); a matrix needs method='lp' or 'auto'.")
    if method == "lp" or name is None:
        return game_value_lp(a, Lw, solver, check_solver_opts(solver_opts, "game_value"))
    values, R = _CLOSED[name](a[None, :], np.array([weight]))
    value, r = float(values[0]), R[0]
    if name == "zero_one" and weight > 0:
        p = np.clip((a + weight - value) / weight, 0, None)
        p = p / p.sum()
    else:
        p = predictor_strategy(a, Lw)
    return value, r, p
