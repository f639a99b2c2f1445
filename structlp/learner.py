"""Max-margin learning of a declared structured model by one joint QP."""

from __future__ import annotations

import numbers
import time

import cvxpy as cp
import numpy as np

from ._validation import check_scalar, check_sequence_of_examples
from .base import BaseEstimator
from .compiler import compile_primal, prepare
from .exceptions import InvalidInputError, InvalidParameterError
from .formulations import get_formulation
from .inference import loss_augmented, maximize
from .model import StructuredModel
from .solvers import check_solver, check_solver_opts, solve


class MaxMarginLearner(BaseEstimator):
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
    """

    def __init__(self, model, C=1.0, formulation="minmax", solver=None, solver_opts=None):
        self.model = model
        self.C = C
        self.formulation = formulation
        self.solver = solver
        self.solver_opts = solver_opts

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        if not isinstance(self.model, StructuredModel):
            raise InvalidParameterError(
                f"The 'model' parameter of {name} must be a structlp StructuredModel; "
                f"got {type(self.model).__name__}.")
        C = check_scalar(self.C, "C", kind=numbers.Real, low=0, low_inclusive=False, owner=name)
        formulation = get_formulation(self.formulation, self.model, owner=name)
        solver = check_solver(self.solver, owner=name)
        opts = check_solver_opts(self.solver_opts, owner=name)
        return C, formulation, solver, opts

    # ------------------------------------------------------------------ fit
    def fit(self, X, Y):
        """Compile the training set into one QP, solve it, and store the weights.

        Parameters
        ----------
        X : list of m examples, in the model's format
        Y : list of m outputs, each a vertex of its example's output polytope

        Returns
        -------
        self
        """
        C, formulation, solver, opts = self._check_params()
        t0 = time.perf_counter()
        data = prepare(self.model, X, Y,
                       need_polytopes=getattr(formulation, "needs_polytopes", True))
        t1 = time.perf_counter()
        blocks = formulation.blocks(data)
        qp = compile_primal(blocks, data.n_features, data.n_examples, C)
        t2 = time.perf_counter()
        solve_s = solve(qp.problem, solver, opts, what="the training QP",
                        hints={cp.INFEASIBLE: " An output polytope is probably unbounded: "
                                              "give every part finite bounds.",
                               cp.UNBOUNDED: " This should not happen for a QP with "
                                             "a positive definite objective."})
        self.coef_ = np.asarray(qp.w.value, dtype=float)
        self.slack_ = np.asarray(qp.xi.value, dtype=float)
        self.objective_ = float(qp.problem.value)
        self.solver_ = solver
        self.problem_ = qp.problem
        self.n_features_in_ = data.n_features
        self.fit_time_ = {"prepare": t1 - t0, "build": t2 - t1, "solve": solve_s,
                          "total": time.perf_counter() - t0}
        return self

    # ------------------------------------------------------------------ predict
    def _checked_X(self, X):
        X = check_sequence_of_examples(X, "X")
        Xc, Phis = [], []
        for i, x in enumerate(X):
            x = self.model.check_x(x)
            Phi = self.model.checked_features(x, name=f"features of X[{i}]")
            if Phi.shape[1] != self.n_features_in_:
                raise InvalidInputError(
                    f"X[{i}] has {Phi.shape[1]} features per part; the learner was fitted "
                    f"with {self.n_features_in_}.")
            Xc.append(x)
            Phis.append(Phi)
        return Xc, Phis

    def decision_scores(self, X):
        """Part scores ``Phi_i w`` of every example: list of (L_i,) arrays."""
        self._check_fitted()
        X, Phis = self._checked_X(X)
        return [np.asarray(P @ self.coef_, dtype=float).ravel() for P in Phis]

    def predict(self, X):
        """The highest-scoring output of each example.

        Uses the model's combinatorial fast path where it has one, otherwise
        the inference LP ``max_{mu in P_i} (Phi_i w) . mu`` for all examples
        at once.

        Parameters
        ----------
        X : list of m examples

        Returns
        -------
        list of m outputs
        """
        self._check_fitted()
        X, Phis = self._checked_X(X)
        scores = [np.asarray(P @ self.coef_, dtype=float).ravel() for P in Phis]
        outputs, _ = maximize(self.model, X, scores)
        return outputs

    def loss(self, X, Y):
        """Mean task loss of the predictions on ``(X, Y)``."""
        Y = check_sequence_of_examples(Y, "Y")
        pred = self.predict(X)
        if len(pred) != len(Y):
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(pred)} and {len(Y)}.")
        X = [self.model.check_x(x) for x in X]
        return float(np.mean([self.model.task_loss(x, y, p) for x, y, p in zip(X, Y, pred)]))

    def score(self, X, Y):
        """Negated mean task loss on ``(X, Y)`` (higher is better, as scikit-learn expects)."""
        return -self.loss(X, Y)

    def hinge_losses(self, X, Y):
        """Structured hinge loss of each example under ``coef_``, by loss-augmented inference.

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted()
        data = prepare(self.model, X, Y)
        _, hinge = loss_augmented(self.model, data, self.coef_)
        return hinge
