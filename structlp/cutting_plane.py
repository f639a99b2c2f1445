"""Cutting-plane max-margin learning (n-slack and one-slack) with exact combinatorial oracles."""

from __future__ import annotations

import numbers
import time
import warnings

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ._validation import check_bool, check_scalar
from .base import BaseEstimator, StructuredPredictorMixin
from .compiler import matvec, prepare, transposes
from .inference import loss_augmented
from .solvers import solve
from .exceptions import ConvergenceWarning  # noqa: F401  (re-exported: older imports)


def _needs_polytopes(model):
    # models that offer the min-max formulation can build their polytopes (and
    # validate y against them); certificate-only models validate y in encode
    return "minmax" in tuple(getattr(model, "formulations", ("minmax",)))


class CuttingPlaneLearner(StructuredPredictorMixin, BaseEstimator):
    """Structured max-margin learning by a cutting-plane method (n-slack or one-slack).

    Solves the same problem as :class:`~structlp.MaxMarginLearner`,

    .. math::

        \\min_{w}\\; \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m \\xi_i(w),\\qquad
        \\xi_i(w) = \\max_{y\\in\\mathcal Y_i}\\big[w\\cdot f_i(y) + \\ell_i(y)\\big]
                    - w\\cdot f_i(y_i),

    without any compact formulation of the inner maximum: it keeps a working
    set ``W_i`` of outputs per example and alternates

    1. the master QP ``min 1/2|w|^2 + C sum xi`` s.t.
       ``w.(f_i(y_i) - f_i(y)) + xi_i >= loss_i(y)`` for ``y in W_i``
       (``y_i`` itself is in ``W_i``, so ``xi_i >= loss_i(y_i)``);
    2. exact loss-augmented inference of every example with the model's
       combinatorial oracle (:meth:`StructuredModel.inference`: Hungarian
       algorithm, blossom algorithm, maximum spanning tree, ...; the inference
       LP where the model has none), adding the maximizer to ``W_i`` when its
       hinge exceeds ``xi_i + tol``,

    until no example is violated by more than ``tol`` (Tsochantaridis et al.
    2005).  At that point the objective is within ``C * m * tol`` of the
    optimum.  It is the exact reference for certificate QPs (whose
    certificate may be conservative) and a learner for training sets too large
    for one QP.

    With ``one_slack=True`` (Joachims, Finley & Yu 2009) the working set holds
    *joint* outputs: one row per round, the average over the examples of
    ``f_i(y_i) - f_i(y)`` and of ``loss_i(y)`` at their maximizers, with one
    slack ``xi``: ``min 1/2|w|^2 + C m xi`` s.t.
    ``w . mean_i(f_i(y_i) - f_i(ybar_i)) + xi >= mean_i loss_i(ybar_i)`` for
    every stored ``ybar``.  The master QP then has one row per round instead
    of up to one per example and round (but usually needs more rounds); it
    stops when the mean hinge exceeds ``xi`` by at most ``tol``, with the same
    bound ``C * m * tol``.

    Parameters
    ----------
    model : StructuredModel
    C : float > 0, default=1.0
        Weight of the slacks.
    tol : float > 0, default=1e-4
        Stop when every hinge loss exceeds its master-QP slack by at most ``tol``
        (in loss units).
    max_iter : int >= 1, default=200
        Maximum number of (master QP, inference sweep) rounds.
    one_slack : bool, default=False
        The one-slack formulation (one joint constraint per round).
    solver : str or None, default=None
        cvxpy solver for the master QPs (None: CLARABEL).
    solver_opts : dict or None
        Passed untouched to ``cvxpy.Problem.solve``.

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    objective_ : float
        ``1/2 |w|^2 + C sum_i hinge_i(w)`` at ``coef_``, with the hinge losses from
        exact loss-augmented inference: the objective of MaxMarginLearner.
    slack_ : ndarray, shape (n_examples,)
        The exact structured hinge losses ``xi_i(coef_)``.
    master_objective_ : float
        Optimal value of the last master QP (a lower bound on the optimum).
    n_iter_ : int
    n_constraints_ : int
        Size of the final working set (all examples; joint rows with ``one_slack``).
    converged_ : bool
    history_ : list of dict
        Per iteration: ``master_objective``, ``n_constraints``, and at the oracle
        pass that follows the master QP, the exact ``objective`` of its ``w``, the
        ``max_violation`` and ``time`` (seconds since fit began).
    solver_ : str
    problem_ : cvxpy.Problem
        The last master QP.
    n_features_in_ : int
    fit_time_ : dict
        Seconds in the master QPs ("solve"), in inference ("inference"), total.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=20, n_rows=4, random_state=0)
    >>> cpl = structlp.CuttingPlaneLearner(model, C=0.1).fit(X, Y)
    >>> qp = structlp.MaxMarginLearner(model, C=0.1).fit(X, Y)   # the same objective
    >>> cpl.converged_, bool(abs(cpl.objective_ - qp.objective_) <= 1e-3 * qp.objective_)
    (True, True)
    """

    def __init__(self, model, C=1.0, tol=1e-4, max_iter=200, one_slack=False, solver=None,
                 solver_opts=None):
        self.model = model
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.one_slack = one_slack
        self.solver = solver
        self.solver_opts = solver_opts

    def _check_params(self):
        name = type(self).__name__
        C, solver, opts = self._check_model_C_solver()
        tol = check_scalar(self.tol, "tol", kind=numbers.Real, low=0, low_inclusive=False,
                           owner=name)
        max_iter = check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                owner=name)
        check_bool(self.one_slack, "one_slack", owner=name)
        return C, tol, max_iter, solver, opts

    def _oracle(self, data, w, polys):
        """Loss-augmented maximizers (as 0/1 vectors) and exact hinge losses at ``w``."""
        _, hinge, mus = loss_augmented(self.model, data, w, polytopes=polys, return_mus=True)
        return mus, hinge

    def fit(self, X, Y):
        """Run the cutting-plane method on ``(X, Y)``.

        Parameters
        ----------
        X : list of m examples
        Y : list of m outputs

        Returns
        -------
        self
        """
        C, tol, max_iter, solver, opts = self._check_params()
        t0 = time.perf_counter()
        data = prepare(self.model, X, Y, need_polytopes=_needs_polytopes(self.model))
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        m, d = data.n_examples, data.n_features
        Phi_T = transposes(data.Phi)
        ftrue = [matvec(PT, mt) for PT, mt in zip(Phi_T, data.mu_true)]
        one = bool(self.one_slack)
        # working set, stored as rows  D w + xi_ex >= rhs  with D = f(y_i) - f(y); sparse
        # features give sparse rows (outputs differ in a few parts), stacked sparse
        sparse_rows = any(sp.issparse(P) for P in data.Phi) and not one
        n_slack = 1 if one else m
        rhs = [float(dd + c @ mt) for dd, c, mt in zip(data.d, data.c, data.mu_true)]
        if one:   # the truth of every example: D = 0, rhs = mean loss of the truths
            rhs, ex = [float(np.mean(rhs))], [0]
        else:
            ex = list(range(m))
        D_rows = [sp.csr_array((1, d)) if sparse_rows else np.zeros(d) for _ in ex]
        seen = [set() for _ in range(n_slack)]
        for i, mt in enumerate(data.mu_true[:n_slack]):
            seen[i].add(b"truth" if one else mt.astype(np.int8).tobytes())
        w = np.zeros(d)
        xi_master = np.array(rhs)

        def violation(hinge):   # hinge losses beyond the master slacks
            return np.array([hinge.mean()]) - xi_master if one else hinge - xi_master

        def cut(i, mu):         # the row of output mu of example i: (f_i(y_i) - f_i(y), loss)
            return (ftrue[i] - matvec(Phi_T[i], mu),
                    float(data.d[i] + data.c[i] @ mu))

        def record(obj, viol):  # the exact objective of the last master QP's w
            if history:
                history[-1].update(objective=float(obj), max_violation=float(viol.max()),
                                   time=time.perf_counter() - t0)

        history = []
        t_solve = t_inf = 0.0
        converged = False
        problem = None
        it = 0
        for it in range(1, max_iter + 1):
            ti = time.perf_counter()
            mus, hinge = self._oracle(data, w, polys)
            t_inf += time.perf_counter() - ti
            viol = violation(hinge)
            obj = 0.5 * w @ w + C * hinge.sum()
            record(obj, viol)
            if viol.max() <= tol:
                converged = True
                break
            added = 0
            if one:
                key = b"".join(mu.astype(np.int8).tobytes() for mu in mus)
                if key not in seen[0]:
                    seen[0].add(key)
                    rows, losses = zip(*(cut(i, mu) for i, mu in enumerate(mus)))
                    D_rows.append(np.mean(rows, axis=0))
                    rhs.append(float(np.mean(losses)))
                    ex.append(0)
                    added = 1
            for i in ([] if one else np.flatnonzero(viol > tol)):
                key = mus[i].astype(np.int8).tobytes()
                if key in seen[i]:
                    continue
                seen[i].add(key)
                row, loss = cut(i, mus[i])
                D_rows.append(sp.csr_array(row[None, :]) if sparse_rows else row)
                rhs.append(loss)
                ex.append(int(i))
                added += 1
            if not added:  # violations only from master-QP inaccuracy
                converged = True
                break
            wv = cp.Variable(d, name="w")
            xiv = cp.Variable(n_slack, name="xi")
            Dm = sp.vstack(D_rows, format="csr") if sparse_rows else np.vstack(D_rows)
            S = sp.csr_array((np.ones(len(ex)), (np.arange(len(ex)), ex)),
                             shape=(len(ex), n_slack))
            problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(wv)
                                             + C * (m / n_slack) * cp.sum(xiv)),
                                 [Dm @ wv + S @ xiv >= np.array(rhs)])
            t_solve += solve(problem, solver, opts, what="the cutting-plane master QP")
            w = np.asarray(wv.value, dtype=float)
            xi_master = np.asarray(xiv.value, dtype=float)
            history.append(dict(iteration=it, master_objective=float(problem.value),
                                n_constraints=len(ex)))
        else:
            mus, hinge = self._oracle(data, w, polys)
            obj = 0.5 * w @ w + C * hinge.sum()
            viol = violation(hinge)
            record(obj, viol)
            converged = bool(viol.max() <= tol)
        if not converged:
            warnings.warn(
                f"CuttingPlaneLearner stopped after max_iter={max_iter} rounds with a "
                f"violation of {float(viol.max()):.3g} > tol={tol:g}; raise "
                "max_iter or tol.", ConvergenceWarning, stacklevel=2)
        self.coef_ = w
        self.slack_ = hinge
        self.objective_ = float(obj)
        self.master_objective_ = float(problem.value) if problem is not None else float(
            C * (m / n_slack) * xi_master.sum())
        self.n_iter_ = it
        self.n_constraints_ = len(ex)
        self.converged_ = converged
        self.history_ = history
        self.solver_ = solver
        self.problem_ = problem
        self.n_features_in_ = d
        self.fit_time_ = {"solve": t_solve, "inference": t_inf,
                          "total": time.perf_counter() - t0}
        return self

    def hinge_losses(self, X, Y):
        """Structured hinge loss of each example under ``coef_`` (exact inference).

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted()
        data = prepare(self.model, X, Y, need_polytopes=_needs_polytopes(self.model))
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        return self._oracle(data, self.coef_, polys)[1]

