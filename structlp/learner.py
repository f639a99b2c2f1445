"""Max-margin learning of a declared structured model by one joint QP."""

from __future__ import annotations

import numbers
import time

import cvxpy as cp
import numpy as np

import scipy.sparse as sp

from ._validation import check_bool, check_finite_array, check_scalar
from .base import BaseEstimator, StructuredPredictorMixin
from .compiler import compile_primal, prepare, stacked_scores
from .dual import compile_dual
from .kernels import Kernel, factor_kernel, factor_precomputed
from .exceptions import InvalidInputError, InvalidParameterError
from .formulations import get_formulation
from .inference import loss_augmented
from .solvers import solve


class MaxMarginLearner(StructuredPredictorMixin, BaseEstimator):
    """Structured max-margin learner: the whole training set as one convex QP.

    Solves (Taskar et al. 2005, Eq. 5–12)

    .. math::

        \\min_{w,\\xi}\\; \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m \\xi_i
        \\quad\\text{s.t.}\\quad
        w\\cdot f_i(y_i) + \\xi_i \\ge \\max_{y\\in\\mathcal Y_i}
        \\big[w\\cdot f_i(y) + \\ell_i(y)\\big] \\quad \\forall i,

    where the inner maximum is replaced by the formulation's convex
    constraints — its LP dual for ``formulation="minmax"`` — so that the
    program is one QP in ``w``, ``xi`` and auxiliary variables.

    Parameters
    ----------
    model : StructuredModel
        The declared structured model (output space, features, loss).
    C : float > 0, default=1.0
        Weight of the slacks.
    formulation : str, default="minmax"
        How the inner maximum becomes constraints; one of ``model.formulations``.
    solver : str or None, default=None
        A cvxpy solver name (``"CLARABEL"``, ``"ECOS"``, ``"OSQP"``, ``"SCS"``...);
        None means CLARABEL.
    solver_opts : dict or None
        Keyword arguments passed untouched to ``cvxpy.Problem.solve``.
    dual : bool, default=False
        Solve the kernelized dual (:mod:`structlp.dual`) instead of the primal:
        ``max h.alpha + k.beta - 1/2 u^T K u`` over the formulation's
        multipliers, with ``K`` the kernel between training parts and
        ``w = sum_p u_p phi_p``.  Same optimum as the primal for the linear kernel.
    kernel : {"linear", "rbf", "poly", "precomputed"} or callable, default="linear"
        Kernel between part feature vectors (used when ``dual=True``).  With
        "precomputed", pass ``kernel_matrix`` to fit (training parts x training
        parts) and to predict (new parts x training parts), parts stacked in
        example order.
    gamma : float > 0 or None
        RBF/poly scale; None means ``1 / n_features``.
    degree : int >= 1, default=3
        Degree of the "poly" kernel ``(gamma phi.phi' + coef0)^degree``.
    coef0 : float, default=1.0
    kernel_tol : float >= 0, default=1e-8
        Relative tolerance of the pivoted incomplete Cholesky factor
        ``K ≈ G G^T`` (0: exact up to round-off).
    max_rank : int or None
        Cap on the factor's rank (memory is n_parts x rank).

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
        The weights ``w``.
    objective_ : float
        Optimal value of the QP.
    slack_ : ndarray, shape (n_examples,)
        ``xi`` at the optimum: the structured hinge loss of each example.
    solver_ : str
        The solver used.
    problem_ : cvxpy.Problem
        The compiled QP.
    n_features_in_ : int
    fit_time_ : dict
        Seconds spent preparing the data, building and solving the QP.
    dual_coef_ : ndarray, shape (n_training_parts,)
        With ``dual=True``: the coefficient ``u_p`` of every training part
        (stacked in example order); ``coef_`` exists only for the linear kernel.
    support_ : ndarray of int
        With ``dual=True``: indices of the training parts with non-zero ``u_p``,
        the only ones prediction needs.
    support_features_ : array or sparse, shape (n_support, n_features)
    kernel_rank_ : int
        Rank of the kernel factor used by the dual.
    kernel_residual_ : float
        Largest diagonal entry of ``K - G G^T`` (0 when exact).

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=20, n_rows=4, random_state=0)
    >>> learner = structlp.MaxMarginLearner(model, C=0.1).fit(X, Y)
    >>> learner.coef_.shape, learner.slack_.shape
    ((5,), (20,))
    >>> Y_hat = learner.predict(X)            # Hungarian algorithm (R = P = 1)
    >>> Y_hat[0].sum(axis=0).tolist()
    [1, 1, 1, 1]
    """

    def __init__(self, model, C=1.0, formulation="minmax", solver=None, solver_opts=None,
                 dual=False, kernel="linear", gamma=None, degree=3, coef0=1.0,
                 kernel_tol=1e-8, max_rank=None):
        self.model = model
        self.C = C
        self.formulation = formulation
        self.solver = solver
        self.solver_opts = solver_opts
        self.dual = dual
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_tol = kernel_tol
        self.max_rank = max_rank

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        C, solver, opts = self._check_model_C_solver()
        formulation = get_formulation(self.formulation, self.model, owner=name)
        check_bool(self.dual, "dual", owner=name)
        if self.dual:
            Kernel(self.kernel, self.gamma, self.degree, self.coef0).check(owner=name)
            check_scalar(self.kernel_tol, "kernel_tol", low=0, owner=name)
            if self.max_rank is not None:
                check_scalar(self.max_rank, "max_rank", kind=numbers.Integral, low=1, owner=name)
        elif self.kernel != "linear":
            raise InvalidParameterError(
                f"The 'kernel' parameter of {name} needs dual=True; got kernel="
                f"{self.kernel!r} with dual=False.")
        return C, formulation, solver, opts

    # ------------------------------------------------------------------ fit
    def fit(self, X, Y, kernel_matrix=None):
        """Compile the training set into one QP, solve it, and store the weights.

        Parameters
        ----------
        X : list of m examples, in the model's format
        Y : list of m outputs, each a vertex of its example's output polytope
        kernel_matrix : array, shape (n_training_parts, n_training_parts), optional
            Only with ``kernel="precomputed"``.

        Returns
        -------
        self
        """
        C, formulation, solver, opts = self._check_params()
        precomputed = self.dual and self.kernel == "precomputed"
        if precomputed and kernel_matrix is None:
            raise InvalidParameterError("kernel='precomputed' needs fit(X, Y, kernel_matrix=K).")
        if not precomputed and kernel_matrix is not None:
            raise InvalidParameterError("kernel_matrix is only used with kernel='precomputed'.")
        t0 = time.perf_counter()
        data = prepare(self.model, X, Y,
                       need_polytopes=getattr(formulation, "needs_polytopes", True))
        t1 = time.perf_counter()
        blocks = formulation.blocks(data)
        Phi = data.stacked_features()
        hints = {cp.INFEASIBLE: " An output polytope is probably unbounded: give every "
                                "part finite bounds.",
                 cp.UNBOUNDED: " This should not happen for a QP with a positive definite "
                               "objective."}
        for attr in ("coef_", "dual_coef_", "support_", "support_features_",
                     "kernel_rank_", "kernel_residual_"):
            self.__dict__.pop(attr, None)
        if not self.dual:
            qp = compile_primal(blocks, data.n_features, data.n_examples, C, features=Phi)
            t2 = time.perf_counter()
            solve_s = solve(qp.problem, solver, opts, what="the training QP", hints=hints)
            self.coef_ = np.asarray(qp.w.value, dtype=float)
            self.slack_ = np.asarray(qp.xi.value, dtype=float)
            self.objective_ = float(qp.problem.value)
            self.problem_ = qp.problem
        else:
            kern = Kernel(self.kernel, self.gamma, self.degree, self.coef0)
            if precomputed:
                if np.shape(kernel_matrix) != (Phi.shape[0], Phi.shape[0]):
                    raise InvalidInputError(
                        f"kernel_matrix must have shape ({Phi.shape[0]}, {Phi.shape[0]}) "
                        f"(training parts x training parts); got {np.shape(kernel_matrix)}.")
                G, info = factor_precomputed(kernel_matrix, self.kernel_tol, self.max_rank)
            else:
                G, info = factor_kernel(kern, Phi, self.kernel_tol, self.max_rank)
            cd = compile_dual(blocks, Phi.shape[0], data.n_examples, C, G,
                              formulation_name=getattr(formulation, "name", ""))
            t2 = time.perf_counter()
            solve_s = solve(cd.problem, solver, opts, what="the dual training QP", hints=hints)
            u = np.asarray(cd.u.value, dtype=float).ravel()
            self.dual_coef_ = u
            scale = np.abs(u).max() if u.size else 0.0
            self.support_ = np.flatnonzero(np.abs(u) > 1e-9 * max(scale, 1e-300))
            self.support_features_ = Phi[self.support_] if not precomputed else None
            self.kernel_rank_ = int(info["rank"])
            self.kernel_residual_ = float(info["residual"])
            self.objective_ = cd.objective
            self.slack_ = np.abs(np.asarray(cd.xi_constraint.dual_value, dtype=float)).ravel()
            self.problem_ = cd.problem
            if self.kernel == "linear":
                self.coef_ = np.asarray(Phi.T @ u, dtype=float).ravel()
        self.solver_ = solver
        self.n_features_in_ = data.n_features
        self.n_training_parts_ = Phi.shape[0]
        self.fit_time_ = {"prepare": t1 - t0, "build": t2 - t1, "solve": solve_s,
                          "total": time.perf_counter() - t0}
        return self

    # ------------------------------------------------------------------ predict
    def _fitted_attr(self):
        return "dual_coef_" if getattr(self, "dual", False) and hasattr(self, "dual_coef_") \
            else "coef_"

    def _scores(self, Phis, kernel_matrix=None):
        """Part scores of already checked examples."""
        if not hasattr(self, "dual_coef_"):
            if kernel_matrix is not None:
                raise InvalidParameterError("kernel_matrix is only used with kernel='precomputed'.")
            return stacked_scores(Phis, self.coef_)
        sizes = [P.shape[0] for P in Phis]
        coef = self.dual_coef_[self.support_]
        if self.kernel == "precomputed":
            want = (sum(sizes), self.n_training_parts_)
            if kernel_matrix is None:
                raise InvalidParameterError(
                    "kernel='precomputed' needs kernel_matrix (new parts x training parts).")
            Kn = check_finite_array(kernel_matrix, "kernel_matrix", ndim=2)
            if Kn.shape != want:
                raise InvalidInputError(
                    f"kernel_matrix must have shape {want} (new parts x training parts); "
                    f"got {Kn.shape}.")
            flat = Kn[:, self.support_] @ coef
        else:
            if kernel_matrix is not None:
                raise InvalidParameterError("kernel_matrix is only used with kernel='precomputed'.")
            kern = Kernel(self.kernel, self.gamma, self.degree, self.coef0)
            Phi = sp.vstack([sp.csr_array(P) for P in Phis], format="csr") \
                if any(sp.issparse(P) for P in Phis) else np.vstack(Phis)
            flat = kern(Phi, self.support_features_) @ coef
        return np.split(np.asarray(flat, dtype=float).ravel(), np.cumsum(sizes)[:-1])

    def decision_scores(self, X, kernel_matrix=None):
        """Part scores of every example: list of (L_i,) arrays.

        ``Phi_i w`` for the primal; the kernel expansion
        ``sum_p u_p k(phi_p, phi)`` over the support parts with ``dual=True``
        (``kernel_matrix``: new parts x training parts, for "precomputed").
        """
        return super().decision_scores(X, kernel_matrix=kernel_matrix)

    def hinge_losses(self, X, Y, kernel_matrix=None):
        """Structured hinge loss of each example under the fitted scores.

        ``max_y [s_i . mu(y) + loss_i(y)] - s_i . mu(y_i)`` by loss-augmented
        inference, with ``s_i`` the part scores (:meth:`decision_scores`).

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted(self._fitted_attr())
        formulation = get_formulation(self.formulation, self.model)
        data = prepare(self.model, X, Y,
                       need_polytopes=getattr(formulation, "needs_polytopes", True))
        scores = self._scores(data.Phi, kernel_matrix)
        _, hinge = loss_augmented(self.model, data, scores=scores)
        return hinge
