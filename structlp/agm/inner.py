"""The inner maximization of AGM for one example and fixed potentials (Eq. 6).

.. math::

    \\max_{Q, r}\\; \\sum_i \\Big[ r_i\\cdot b_i + \\min_{p_i\\in\\Delta} p_i^T L_i r_i \\Big]
    + \\sum_e \\langle Q_e, B_e\\rangle

over the tree's local marginal polytope (``r_i`` node marginals, ``Q_e`` edge
marginals with ``Q_e 1 = r_parent``, ``Q_e^T 1 = r_child``).  Two solvers:

* :func:`inner_lp` — the LP over ``(r, Q, v)`` with ``v_i <= (L_i r_i)_j`` (HiGHS); exact.
  :class:`InnerLP` keeps it in a HiGHS instance and hot-starts each new objective.
* :func:`inner_dual_decomposition` — the paper's Eq. 7: minimize over the
  multipliers ``u`` of the consistency constraints a sum of independent node
  games (closed forms), by subgradient steps (Polyak steps towards a target
  level ``best upper bound - delta``, ``delta`` halved when the bound stalls,
  kept between ``_DELTA_FLOOR`` times the certified gap and the gap itself —
  without the floor ``delta`` shrinks geometrically, the steps vanish and the
  upper bound can stall above the optimum; warm starts), recovering a primal point from
  step-weighted averages of ``r`` (restarted at iterations 2^j) and Eq. 9 per edge
  with ``ot.emd``.  The dual value is an upper bound and the recovered point a
  lower bound; when they do not meet within ``tol`` the exact LP is used instead.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
from scipy.optimize import linprog

from ..exceptions import SolverError
from ..formulations import block_diag
from ..inference import new_highs
from .game import node_games
from ..graphical.junction import GraphExample, clique_scores, pairwise_marginals
from .recovery import emd_max
from .polytopes import clique_game_polytope, game_polytope

#: Lower bound of the level gap ``delta`` as a fraction of the certified gap
#: ``best upper bound - best lower bound`` (0 = the plain halving rule).
_DELTA_FLOOR = 0.1


def inner_polytope(ex, k, node_losses):
    """The inner LP's polytope: tree local marginals, or junction-tree clique marginals, + v."""
    if isinstance(ex, GraphExample):
        return clique_game_polytope(ex, k, node_losses)
    return game_polytope(ex, k, node_losses)


def _lp_costs(ex, b, B):
    """Objective of the inner LP over its parts (marginals, then v)."""
    s = clique_scores(ex, b, B) if isinstance(ex, GraphExample) else np.concatenate(
        [b.ravel(), B.ravel()])
    return np.concatenate([s, np.ones(ex.n_nodes)])


def _lp_marginals(ex, x, k):
    """Node (n, k) and edge (E, k, k) marginals of an inner LP solution ``x``."""
    x = np.clip(x, 0, None)
    n = ex.n_nodes
    if isinstance(ex, GraphExample):
        return pairwise_marginals(ex, x[:ex.tables(k).n_parts], k)
    return x[:n * k].reshape(n, k), x[n * k:n * k + (n - 1) * k * k].reshape(n - 1, k, k)


def primal_value(ex, b, B, R, Q, node_losses):
    """Objective of Eq. 6 at a feasible point ``(R (n, k), Q (n-1, k, k))``."""
    LR = np.einsum("ijb,ib->ij", node_losses, R)
    return float(np.sum(R * b) + np.sum(Q * B) + LR.min(axis=1).sum())


class InnerLP:
    """The inner LP of one example, kept in a HiGHS instance between solves.

    The polytope (local marginals plus game epigraph) does not change while
    ``theta`` does, so only the objective is replaced and HiGHS's dual simplex
    restarts from the previous optimal basis (a hot start).  Exact, like
    :func:`inner_lp`.

    Parameters
    ----------
    ex : TreeExample or GraphExample; k : int; node_losses : ndarray (n, k, k)
    polytope : Polytope, optional
        The example's :func:`inner_polytope`, when already built (it depends on the
        example's shape and node losses only, so equal examples can share one).
    keep_solver : bool, default True
        Keep the HiGHS instance, with its solver data (about 0.9 MB for a pruned SRL
        tree), between solves; False keeps the model and the optimal basis only and
        builds the instance for each solve (slower by about a fifth, no memory held).
    """

    def __init__(self, ex, k, node_losses, polytope=None, keep_solver=True):
        import highspy
        import scipy.sparse as sp
        P = inner_polytope(ex, k, node_losses) if polytope is None else polytope
        self.ex, self.k = ex, k
        self.n_cols = P.A.shape[1]
        self.bounds = (P.lb, P.ub)
        M = sp.vstack([P.A, P.E], format="csc")
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n_cols, M.shape[0]
        lp.col_cost_ = np.zeros(self.n_cols)
        lp.col_lower_, lp.col_upper_ = P.lb, P.ub
        lp.row_lower_ = np.concatenate([np.full(P.A.shape[0], -highspy.kHighsInf), P.e])
        lp.row_upper_ = np.concatenate([P.b, P.e])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = \
            M.indptr, M.indices, M.data
        lp.sense_ = highspy.ObjSense.kMaximize
        self._lp, self._basis, self.keep_solver = lp, None, bool(keep_solver)
        self.h = self._instance() if self.keep_solver else None
        self._idx = np.arange(self.n_cols, dtype=np.int32)
        self._ok = highspy.HighsModelStatus.kOptimal

    def _instance(self):
        h = new_highs()   # quiet, its banner kept off stdout
        # no presolve: each solve after the first restarts from the last optimal basis
        h.setOptionValue("presolve", "off")
        h.passModel(self._lp)
        if self._basis is not None:
            h.setBasis(self._basis)
        return h

    def solve(self, b, B):
        """Maximum of Eq. 6 for potentials ``b`` (n, k), ``B`` (E, k, k): value, R, Q."""
        value, x = self.solve_costs(_lp_costs(self.ex, b, B))
        R, Q = _lp_marginals(self.ex, x, self.k)
        return value, R, Q

    def solve_costs(self, c):
        """``max c . x`` over the polytope, ``c`` (n_cols,) in its column order (the
        marginal parts, then ``v``): the value and the optimal vertex ``x`` (n_cols,)."""
        h = self.h if self.keep_solver else self._instance()
        h.changeColsCost(self.n_cols, self._idx, c)
        h.run()
        if h.getModelStatus() != self._ok:
            raise SolverError("HiGHS failed on the AGM inner LP: "
                              f"{h.modelStatusToString(h.getModelStatus())}")
        out = (float(h.getInfo().objective_function_value),
               np.asarray(h.getSolution().col_value, dtype=float))
        if not self.keep_solver:
            self._basis = h.getBasis()   # the instance and its solver data are freed
        return out


def _maximize(c, A, b, E, e, lb, ub, what):
    """``max c . x`` s.t. ``A x <= b, E x = e, lb <= x <= ub`` (HiGHS through scipy):
    (value, x); a SolverError naming ``what`` unless it ends optimal."""
    res = linprog(-c, A_ub=A, b_ub=b, A_eq=E, b_eq=e, bounds=np.column_stack([lb, ub]),
                  method="highs")
    if res.status != 0:
        raise SolverError(f"HiGHS failed on {what}: {res.message}")
    return -float(res.fun), res.x


def inner_lp(ex, b, B, node_losses):
    """Exact inner maximum by one LP (HiGHS through scipy).

    Solves ``max_{(r, Q, v)} b.r + <B, Q> + sum_i v_i`` over the local marginal
    polytope of a tree (or, for a graph example, over the clique marginals of its
    junction tree, ``r`` and ``Q`` their marginals) with ``v_i <= (L_i r_i)_j`` for
    every label ``j``.

    Returns
    -------
    value : float; R : ndarray (n, k); Q : ndarray (E, k, k)
    """
    k = b.shape[1]
    P = inner_polytope(ex, k, node_losses)
    value, x = _maximize(_lp_costs(ex, b, B), P.A, P.b, P.E, P.e, P.lb, P.ub,
                         "the AGM inner LP")
    R, Q = _lp_marginals(ex, x, k)
    return value, R, Q


def inner_lp_total(exs, potentials, polytopes):
    """Sum over examples of the exact inner maxima, by one LP (HiGHS through scipy).

    The examples' LPs (:func:`inner_lp`) are independent, so their block-diagonal
    union has the sum of their optimal values: one solver call instead of one per
    example.

    Parameters
    ----------
    exs : list of TreeExample or GraphExample
    potentials : list of ``(b (n, k), B (E, k, k))``, one per example
    polytopes : list of Polytope, each example's :func:`inner_polytope`

    Returns
    -------
    float
    """
    c = np.concatenate([_lp_costs(ex, b, B) for ex, (b, B) in zip(exs, potentials)])
    return _maximize(c, block_diag([P.A for P in polytopes]),
                     np.concatenate([P.b for P in polytopes]),
                     block_diag([P.E for P in polytopes]),
                     np.concatenate([P.e for P in polytopes]),
                     np.concatenate([P.lb for P in polytopes]),
                     np.concatenate([P.ub for P in polytopes]), "the AGM inner LPs")[0]


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
    best_ub, best_u = np.inf, u.copy()
    lb, best_primal = -np.inf, None
    ar_m = np.arange(m)[:, None]
    # ergodic primal averages, step-weighted, restarted at iterations 2^j (the
    # early iterates of a warm-started or far-off u are discarded)
    R_win, w_win, R_prev, restart, prev_new = np.zeros((n, k)), 0.0, None, 2, False
    delta, last_improve, ub_ref = None, 0, np.inf   # level-target step rule
    it = 0
    for it in range(1, max_iter + 1):
        csum = np.zeros((n, k))
        np.add.at(csum, par, u)
        A = B + b[child][:, None, :] - u[:, :, None] + csum[child][:, None, :]
        a = np.empty((n, k))
        idm = np.argmax(A, axis=1)                       # (m, k): best parent label per child label
        a[child] = np.take_along_axis(A, idm[:, None, :], axis=1)[:, 0, :]
        a[root] = b[root] + csum[root]
        vals, R = node_games(a, loss, weights, L)
        g = float(vals.sum())
        if g < best_ub:
            best_ub, best_u = g, u.copy()
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
            cands = [R] + ([R_win / w_win] if w_win > 0 else []) + \
                    ([R_prev] if prev_new else [])
            prev_new = False
            for cand in cands:
                Qc = _recover(ex, B, cand)
                pv = primal_value(ex, b, B, cand, Qc, node_losses)
                if pv > lb:
                    lb, best_primal = pv, (cand.copy(), Qc)
            if best_ub - lb <= tol * max(1.0, abs(best_ub)):
                return lb, best_primal[0], best_primal[1], best_u, True, it
        # level target (Polyak step towards best_ub - delta, never below the lower
        # bound); delta halves when best_ub stalls for 2 * check_every iterations,
        # but stays >= _DELTA_FLOOR * (best_ub - lb) so that the steps do not vanish
        # while the gap is open
        if delta is None:
            delta = 0.5 * (best_ub - lb) if np.isfinite(lb) else 0.1 * abs(g) + 1.0
            ub_ref = best_ub
        if best_ub <= ub_ref - 0.5 * delta:
            ub_ref, last_improve = best_ub, it
        elif it - last_improve >= 2 * check_every:
            delta *= 0.5
            ub_ref, last_improve = best_ub, it
        if np.isfinite(lb):
            delta = min(delta, best_ub - lb)
            delta = max(delta, _DELTA_FLOOR * (best_ub - lb))
        target = best_ub - max(delta, 1e-12)
        step = max(g - target, 1e-12) / nrm
        u = u - step * sg
        R_win += step * R
        w_win += step
        if it == restart:
            R_prev, R_win, w_win, restart = R_win / w_win, np.zeros((n, k)), 0.0, 2 * restart
            prev_new = True
    return lb, best_primal[0], best_primal[1], best_u, False, it


def inner_junction_decomposition(gx, b, B, loss, weights, L, node_losses, u0=None,
                                 max_iter=200, tol=1e-6, check_every=5):
    """The inner maximum on a junction tree by dual decomposition: node games + max-sum.

    Relaxing ``r_i = (marginal of node i)`` with multipliers ``u`` (n, k) splits
    Eq. 6 into independent node games (Eq. 8, closed forms) and one max-sum on
    the junction tree:

    .. math::

        D(u) = \\sum_i \\mathrm{value}(b_i + u_i, L_i)
        + \\max_y \\Big[\\sum_e B_e(y_u, y_v) - \\sum_i u_i(y_i)\\Big]
        \\;\\ge\\; \\text{the inner maximum},

    minimized by subgradient steps (``r_i - e_{y_i}``) towards the level halfway
    between the best upper bound and the best primal value.  Primal points, from
    step-weighted averages restarted at iterations 2^j (as
    :func:`inner_dual_decomposition`): the node marginals of the averaged max-sum
    labellings and the averaged node-game strategies, each completed by the
    multi-marginal recovery LP (:func:`~structlp.agm.recovery.recover_cliques`,
    Eq. 9 on the junction tree).

    Returns
    -------
    value, R (n, k), Q (E, k, k), u (n, k), converged, n_iter
        As :func:`inner_dual_decomposition`.
    """
    from ..graphical.junction import encode_pairwise, jt_max_sum
    from .recovery import recover_cliques
    n, k = b.shape
    u = np.zeros((n, k)) if u0 is None else u0.copy()
    best_ub, best_u, lb, best = np.inf, u.copy(), -np.inf, None
    win = np.zeros((2, n, k))        # step-weighted sums of R and of the labellings' one-hots
    w_win, prev, restart = 0.0, [], 2
    it = 0
    for it in range(1, max_iter + 1):
        vals, R = node_games(b + u, loss, weights, L)
        y, s = jt_max_sum(gx, -u, B)
        g = float(vals.sum()) + s
        if g < best_ub:
            best_ub, best_u = g, u.copy()
        onehot = np.eye(k)[y]
        sg = R - onehot
        nrm = float(np.sum(sg * sg))
        if nrm <= 1e-18:          # the node games agree with the labelling: optimal
            Q = encode_pairwise(gx, y, k)[n * k:].reshape(-1, k, k)
            return primal_value(gx, b, B, R, Q, node_losses), R, Q, u, True, it
        if it % check_every == 0 or it == max_iter:
            Q_y = encode_pairwise(gx, y, k)[n * k:].reshape(-1, k, k)   # its only coupling
            cands = [(onehot, Q_y)] + [(Rc, None) for Rc in
                                       ([*(win / w_win)] if w_win > 0 else []) + prev]
            prev = []
            for Rc, Qc in cands:
                Qc = recover_cliques(gx, Rc, B) if Qc is None else Qc
                pv = primal_value(gx, b, B, Rc, Qc, node_losses)
                if pv > lb:
                    lb, best = pv, (Rc.copy(), Qc)
            if best_ub - lb <= tol * max(1.0, abs(best_ub)):
                return lb, best[0], best[1], best_u, True, it
        target = lb + 0.02 * (best_ub - lb) if np.isfinite(lb) else g - 0.1 * abs(g) - 1.0
        step = max(g - target, 1e-12) / nrm
        u = u - step * sg
        win[0] += step * R
        win[1] += step * onehot
        w_win += step
        if it == restart:
            prev, win, w_win, restart = [*(win / w_win)], np.zeros((2, n, k)), 0.0, 2 * restart
    return lb, best[0], best[1], best_u, False, it


def shared_inner_polytopes(exs, NL, k):
    """Each example's :func:`~structlp.agm.inner.inner_polytope`, built once per distinct
    (shape, node losses): the polytope depends on nothing else, so equal examples share it."""
    built: Dict[Any, Any] = {}
    out = []
    for ex, nl in zip(exs, NL):
        key = (ex.key(), nl.tobytes())
        if key not in built:
            built[key] = inner_polytope(ex, k, nl)
        out.append(built[key])
    return out
