"""The inner maximization of AGM for one example and fixed potentials (Eq. 6).

.. math::

    \\max_{Q, r}\\; \\sum_i \\Big[ r_i\\cdot b_i + \\min_{p_i\\in\\Delta} p_i^T L_i r_i \\Big]
    + \\sum_e \\langle Q_e, B_e\\rangle

over the tree's local marginal polytope (``r_i`` node marginals, ``Q_e`` edge
marginals with ``Q_e 1 = r_parent``, ``Q_e^T 1 = r_child``).  Two solvers:

* :func:`inner_lp` — the LP over ``(r, Q, v)`` with ``v_i <= (L_i r_i)_j`` (HiGHS); exact.
* :func:`inner_dual_decomposition` — the paper's Eq. 7: minimize over the
  multipliers ``u`` of the consistency constraints a sum of independent node
  games (closed forms), by subgradient steps (Polyak step sizes, warm starts),
  recovering a primal point by averaging ``r`` and solving Eq. 9 per edge with
  ``ot.emd``.  The dual value is an upper bound and the recovered point a lower
  bound; when they do not meet within ``tol`` the exact LP is used instead.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from ..exceptions import SolverError
from .game import node_games
from .recovery import emd_max
from .trees import game_polytope


def primal_value(ex, b, B, R, Q, node_losses):
    """Objective of Eq. 6 at a feasible point ``(R (n, k), Q (n-1, k, k))``."""
    LR = np.einsum("ijb,ib->ij", node_losses, R)
    return float(np.sum(R * b) + np.sum(Q * B) + LR.min(axis=1).sum())


def inner_lp(ex, b, B, node_losses, polytope=None):
    """Exact inner maximum by one LP (HiGHS through scipy).

    Returns
    -------
    value : float; R : ndarray (n, k); Q : ndarray (n-1, k, k)
    """
    n, k = b.shape
    P = polytope if polytope is not None else game_polytope(ex, k, node_losses)
    s = np.concatenate([b.ravel(), B.ravel(), np.ones(n)])
    res = linprog(-s, A_ub=P.A, b_ub=P.b, A_eq=P.E, b_eq=P.e,
                  bounds=np.column_stack([P.lb, P.ub]), method="highs")
    if res.status != 0:
        raise SolverError(f"HiGHS failed on the AGM inner LP: {res.message}")
    x = res.x
    R = np.clip(x[:n * k].reshape(n, k), 0, None)
    Q = np.clip(x[n * k:n * k + (n - 1) * k * k].reshape(n - 1, k, k), 0, None)
    return -float(res.fun), R, Q


def _recover(ex, B, R):
    Q = np.empty((len(ex.edge_child), R.shape[1], R.shape[1]))
    for e, (p, c) in enumerate(zip(ex.edge_parent, ex.edge_child)):
        Q[e] = emd_max(R[p] / R[p].sum(), R[c] / R[c].sum(), B[e])
    return Q


def inner_dual_decomposition(ex, b, B, loss, weights, L, node_losses, u0=None,
                             max_iter=200, tol=1e-6, check_every=5):
    """Eq. 7 by subgradient on the multipliers ``u`` (see the module docstring).

    Parameters
    ----------
    loss : str or None
        Named loss for the closed-form node games (None: a general matrix ``L``).
    weights : ndarray (n,)
        Node weights (the loss of node i is ``weights[i] * L``).
    node_losses : ndarray (n, k, k)
    u0 : ndarray (n - 1, k), optional
        Warm start.

    Returns
    -------
    value : float
        The objective at the returned primal point (a lower bound of the maximum,
        within ``tol`` of it when ``converged``).
    R : ndarray (n, k); Q : ndarray (n - 1, k, k); u : ndarray (n - 1, k)
    converged : bool
    n_iter : int
    """
    n, k = b.shape
    m = n - 1
    if m == 0:
        vals, R = node_games(b, loss, weights, L)
        return float(vals.sum()), R, np.zeros((0, k, k)), np.zeros((0, k)), True, 0
    child, par = ex.edge_child, ex.edge_parent
    root = ex.order[0]
    u = np.zeros((m, k)) if u0 is None else u0.copy()
    R_sum = np.zeros((n, k))
    best_ub, best_u = np.inf, u.copy()
    lb, best_primal = -np.inf, None
    ar_m = np.arange(m)[:, None]
    it = 0
    for it in range(1, max_iter + 1):
        csum = np.zeros((n, k))
        np.add.at(csum, par, u)
        A = B + (b[child] - 0.0)[:, None, :] - u[:, :, None] + csum[child][:, None, :]
        a = np.empty((n, k))
        idm = np.argmax(A, axis=1)                       # (m, k): best parent label per child label
        a[child] = np.take_along_axis(A, idm[:, None, :], axis=1)[:, 0, :]
        a[root] = b[root] + csum[root]
        vals, R = node_games(a, loss, weights, L)
        g = float(vals.sum())
        if g < best_ub:
            best_ub, best_u = g, u.copy()
        R_sum += R
        # row sums of Q_e (Q_e[idm[e, m], m] = R[child, m])
        rows = np.zeros((m, k))
        np.add.at(rows, (np.repeat(np.arange(m), k), idm.ravel()), R[child].ravel())
        sg = R[par] - rows
        nrm = float(np.sum(sg * sg))
        if nrm <= 1e-18:        # consistent: the node-game strategies are primal optimal
            Q = np.zeros((m, k, k))
            Q[ar_m, idm, np.arange(k)[None, :]] = R[child]
            return primal_value(ex, b, B, R, Q, node_losses), R, Q, u, True, it
        if it % check_every == 0 or it == max_iter:
            for cand in (R_sum / it, R):
                Qc = _recover(ex, B, cand)
                pv = primal_value(ex, b, B, cand, Qc, node_losses)
                if pv > lb:
                    lb, best_primal = pv, (cand.copy(), Qc)
            if best_ub - lb <= tol * max(1.0, abs(best_ub)):
                return lb, best_primal[0], best_primal[1], best_u, True, it
        target = lb if np.isfinite(lb) else g - 1.0
        u = u - max(g - target, 1e-12) / nrm * sg
    return lb, best_primal[0], best_primal[1], best_u, False, it
