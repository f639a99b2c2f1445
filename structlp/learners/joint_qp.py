"""Max-margin learning of a declared structured model by one joint QP."""

from __future__ import annotations

import numbers
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

import scipy.sparse as sp

from ..utils.progress import Progress, check_verbose
from ..utils.validation import check_bool, check_finite_array, check_fit_args, check_scalar
from ..base import BaseEstimator, StructuredPredictorMixin
from ..compiler import compile_primal, prepare, stacked_scores
from ..dual import compile_dual
from ..kernels import Kernel, factor_kernel, factor_precomputed
from ..exceptions import (FractionalSolutionError, InvalidInputError, InvalidParameterError,
                          RelaxationWarning, StructlpError)
from ..formulations import get_formulation
from ..inference import INTEGRALITY_TOL, loss_augmented, solve_stacked_lp
from ..model import StructuredModel
from ..utils.fingerprint import fingerprint
from ..solvers import scaling_note, solve, verify_solution

#: The attributes a fit sets from the QP's solution (all dropped before a new one is read).
_SOLUTION_ATTRS = ("coef_", "slack_", "objective_", "dual_coef_", "support_",
                   "support_features_", "kernel_rank_", "kernel_residual_", "kernel_params_",
                   "verification_")


#: An example's hinge over the polytope (the LP relaxation of its outputs) above its exact
#: hinge over the outputs by more than this, relative to ``max(1, |hinge|)``, means the joint
#: QP trained the relaxation there.
RELAXATION_TOL = 1e-6
#: Seconds allowed, over a whole fit, to the integer programs that find the exact hinge of
#: the examples whose inference LP is fractional at the optimum (models without an
#: ``inference`` hook); examples left when it runs out are reported as undecided.
MILP_TIME_LIMIT = 30.0


def _has_fast_path(model):
    """Whether ``model`` declares a combinatorial ``inference`` (then the exact hinge of a
    solution costs one oracle call per example)."""
    return type(model).inference is not StructuredModel.inference


def _best_output(poly, scores, seconds):
    """The best 0/1 point ``mu`` of ``poly`` for ``scores`` (auxiliary columns continuous)
    by a mixed-integer program (HiGHS), or None when it is not solved in ``seconds``."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    k = poly.n_parts
    cons = []
    if poly.n_ineq:
        cons.append(LinearConstraint(poly.A, -np.inf, poly.b))
    if poly.n_eq:
        cons.append(LinearConstraint(poly.E, poly.e, poly.e))
    lb, ub = poly.lb.copy(), poly.ub.copy()
    lb[:k], ub[:k] = np.maximum(lb[:k], 0.0), np.minimum(ub[:k], 1.0)
    res = milp(-np.concatenate([scores, np.zeros(poly.n_aux)]), constraints=cons,
               integrality=np.concatenate([np.ones(k), np.zeros(poly.n_aux)]),
               bounds=Bounds(lb, ub), options={"time_limit": seconds})
    return None if res.status != 0 or res.x is None else np.rint(res.x[:k])


def integrality_check(model: StructuredModel, data: Any, scores: Sequence[np.ndarray],
                      slack: np.ndarray) -> Dict[str, Any]:
    """Whether the min-max QP's solution trained the outputs or only their LP relaxation.

    The min-max QP maximizes each example's loss-augmented score over its polytope: when
    the polytope is not integral, its slack ``xi_i`` is the hinge over the *relaxation*,
    which a fractional vertex can make larger than the exact hinge over the outputs.  At
    the solution's part ``scores``, this compares the two for every example whose
    relaxation may differ: with an ``inference`` hook (exact over the outputs), the
    examples whose ``slack`` exceeds the hook's hinge, whose inference LP (HiGHS, a
    vertex) is then solved; without one, every example's inference LP, and where its
    vertex is fractional the best 0/1 point by a mixed-integer program (HiGHS, at most
    :data:`MILP_TIME_LIMIT` seconds in all).

    Parameters
    ----------
    model : StructuredModel
    data : TrainingData (with its polytopes)
    scores : list of (L_i,) arrays, the part scores of the solution (without the loss)
    slack : ndarray, shape (m,), the QP's ``xi``

    Returns
    -------
    dict
        ``exact``: (m,) exact hinges (NaN where undecided); ``relaxed``: {example: hinge
        over the relaxation} where it exceeds the exact one by more than
        :data:`RELAXATION_TOL`; ``undecided``: examples whose fractional LP optimum the
        integer programs did not settle within :data:`MILP_TIME_LIMIT` seconds.
    """
    m = data.n_examples
    aug = [s + c for s, c in zip(scores, data.c)]
    true = np.array([s @ mt for s, mt in zip(scores, data.mu_true)])
    hinge = None
    if _has_fast_path(model):
        try:
            hinge = loss_augmented(model, data, scores=scores)[1]
        except FractionalSolutionError:    # a hook that returned None, then a fractional LP
            hinge = None
    if hinge is not None:
        exact = np.array(hinge, dtype=float)
        suspects = np.flatnonzero(np.asarray(slack) - exact
                                  > RELAXATION_TOL * np.maximum(1.0, np.abs(exact)))
    else:
        exact, suspects = np.full(m, np.nan), np.arange(m)
    relaxed, undecided = {}, []
    deadline = time.perf_counter() + MILP_TIME_LIMIT
    sols = solve_stacked_lp([data.polytopes[i] for i in suspects], [aug[i] for i in suspects]) \
        if len(suspects) else []
    for i, sol in zip(map(int, suspects), sols):
        value = float(aug[i] @ sol + data.d[i] - true[i])
        r = np.rint(sol)
        if np.max(np.abs(sol - r), initial=0.0) <= INTEGRALITY_TOL:
            if np.isnan(exact[i]):
                exact[i] = float(aug[i] @ r + data.d[i] - true[i])
            continue
        if np.isnan(exact[i]):
            left = deadline - time.perf_counter()
            best = _best_output(data.polytopes[i], aug[i], left) if left > 0 else None
            if best is None:
                undecided.append(i)
                continue
            exact[i] = float(aug[i] @ best + data.d[i] - true[i])
        if value - exact[i] > RELAXATION_TOL * max(1.0, abs(exact[i])):
            relaxed[i] = value
    return {"exact": exact, "relaxed": relaxed, "undecided": undecided}


@dataclass
class _Compiled:
    """A prepared training set and its compiled QP, kept (privately, never pickled or
    saved) so that a re-fit with a new ``C`` re-solves it."""

    data: object
    Phi: object
    C: cp.Parameter
    formulation: str = ""
    key: object = None
    qp: object = None
    problem: object = None
    G: object = None
    kernel_info: dict = field(default_factory=dict)
    kernel_params: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)


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
    slack : {"two_sided", "part", "shared"} or None, default=None
        The slack of ``formulation="certificate"`` (None: ``"two_sided"``);
        see :class:`structlp.certificates.Certificate`.  ``"two_sided"`` and
        ``"part"`` bound the structured hinge from above; ``"shared"`` (one
        slack per example, Taskar et al.'s relaxation) collapses to ``w = 0``
        under label noise.  Other formulations take no slack (an error).
    verbose : int >= 0 or bool, default=0
        1: log (logger ``structlp.learners.joint_qp``) the compile and solve times and the
        objective; 2: also the solver's own output (cvxpy's ``verbose=True``).

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
        The weights ``w``.
    objective_ : float
        Optimal value of the QP.
    slack_ : ndarray, shape (n_examples,)
        ``xi`` at the optimum: the structured hinge loss of each example
        (``"minmax"``); for ``"certificate"`` the sum of the example's slacks,
        an upper bound of its hinge (:meth:`hinge_losses` gives the exact one)
        except with ``slack="shared"``.
    solver_ : str
        The solver used.
    problem_ : cvxpy.Problem
        The compiled QP (``C`` is its Parameter).  Not pickled, deep-copied or saved
        (:func:`structlp.save`): it holds solver objects and the whole training set.
    n_features_in_ : int
    fit_time_ : dict
        Seconds spent preparing the data, building, solving and verifying the QP
        (preparing and building are 0 when the compiled QP was reused); ``"solve"``
        is split into cvxpy's ``"canonicalize"`` (small on a reuse) and the solver's
        own ``"solver"`` time as they report them.
    reused_compiled_ : bool
        Whether this fit re-solved the QP compiled by the previous fit (a re-fit with
        only ``C`` or the solver changed, on the same data).
    verification_ : dict
        The check of the solver's answer (:func:`structlp.solvers.verify_solution`):
        constraint ``violation``, ``reported`` and ``recomputed`` objectives (the latter
        from the solution with the exact hinge, for models with a fast path),
        ``relative_gap``, ``ok``.
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
    kernel_params_ : dict
        With ``dual=True``: the kernel as fitted (``kernel``, ``gamma`` resolved to a
        number, ``degree``, ``coef0``); prediction uses it, so ``set_params`` changes
        nothing until the next fit.

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

    objective_: float     # set by fit (with the other solution attributes)

    def __init__(self, model: StructuredModel, C: float = 1.0, formulation: str = "minmax",
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                 dual: bool = False, kernel: Union[str, Callable[..., Any]] = "linear",
                 gamma: Optional[float] = None, degree: int = 3, coef0: float = 1.0,
                 kernel_tol: float = 1e-8, max_rank: Optional[int] = None,
                 slack: Optional[str] = None, verbose: int = 0) -> None:
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
        self.slack = slack
        self.verbose = verbose

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        C, solver, opts = self._check_model_C_solver()
        formulation = get_formulation(self.formulation, self.model, owner=name, slack=self.slack)
        check_bool(self.dual, "dual", owner=name)
        if self.dual:
            Kernel(self.kernel, self.gamma, self.degree, self.coef0).check(owner=name)
            check_scalar(self.kernel_tol, "kernel_tol", low=0, high=1, high_inclusive=False,
                         owner=name)
            if self.max_rank is not None:
                check_scalar(self.max_rank, "max_rank", kind=numbers.Integral, low=1, owner=name)
        elif self.kernel != "linear":
            raise InvalidParameterError(
                f"The 'kernel' parameter of {name} needs dual=True; got kernel="
                f"{self.kernel!r} with dual=False.")
        check_verbose(self.verbose, owner=name)
        return C, formulation, solver, opts

    def _compile_key(self, X, Y, kernel_matrix):
        """What the compiled QP depends on (everything but C and the solver), or None
        when some input cannot be fingerprinted (then nothing is reused)."""
        return fingerprint((type(self.model), vars(self.model), self.formulation, self.slack,
                            self.dual,
                            self.kernel, self.gamma, self.degree, self.coef0, self.kernel_tol,
                            self.max_rank, X, Y, kernel_matrix))

    def _compile(self, X, Y, kernel_matrix, formulation, precomputed):
        """Prepare the training set and build the (primal or dual) QP with ``C`` a
        :class:`cvxpy.Parameter`."""
        t0 = time.perf_counter()
        data = prepare(self.model, X, Y,
                       need_polytopes=getattr(formulation, "needs_polytopes", True))
        t1 = time.perf_counter()
        blocks = formulation.blocks(data)
        Phi = data.stacked_features()
        C = cp.Parameter(nonneg=True, name="C")
        c = _Compiled(data=data, Phi=Phi, C=C, formulation=getattr(formulation, "name", ""))
        if not self.dual:
            c.qp = compile_primal(blocks, data.n_features, data.n_examples, C, features=Phi)
            c.problem = c.qp.problem
        else:
            c.kernel_params = Kernel(self.kernel, self.gamma, self.degree,
                                     self.coef0).frozen(data.n_features)
            if precomputed:
                if np.shape(kernel_matrix) != (Phi.shape[0], Phi.shape[0]):
                    raise InvalidInputError(
                        f"kernel_matrix must have shape ({Phi.shape[0]}, {Phi.shape[0]}) "
                        f"(training parts x training parts); got {np.shape(kernel_matrix)}.")
                c.G, c.kernel_info = factor_precomputed(kernel_matrix, self.kernel_tol,
                                                        self.max_rank)
            else:
                c.G, c.kernel_info = factor_kernel(Kernel(**c.kernel_params), Phi,
                                                   self.kernel_tol, self.max_rank)
            c.qp = compile_dual(blocks, Phi.shape[0], data.n_examples, C, c.G,
                                formulation_name=getattr(formulation, "name", ""))
            c.problem = c.qp.problem
        c.times = {"prepare": t1 - t0, "build": time.perf_counter() - t1}
        return c

    # ------------------------------------------------------------------ fit
    def fit(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None,
            kernel_matrix: Optional[ArrayLike] = None) -> "MaxMarginLearner":
        """Compile the training set into one QP, solve it, and store the weights.

        ``C`` enters the QP as a :class:`cvxpy.Parameter`: a re-fit with another ``C``
        on the same data (same content of ``X``, ``Y``, ``kernel_matrix`` and the same
        other parameters) re-solves the compiled QP without preparing or compiling it
        again.  The solver's answer is verified (constraint violation, and the objective
        recomputed from the solution by exact loss-augmented inference when the model
        has a fast path); a :class:`~structlp.exceptions.ConvergenceWarning` says when it
        is off.

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
        check_fit_args(X, Y, type(self).__name__)
        C, formulation, solver, opts = self._check_params()
        verbose = check_verbose(self.verbose)
        progress = Progress(self, verbose)
        precomputed = self.dual and self.kernel == "precomputed"
        if precomputed and kernel_matrix is None:
            raise InvalidParameterError("kernel='precomputed' needs fit(X, Y, kernel_matrix=K).")
        if not precomputed and kernel_matrix is not None:
            raise InvalidParameterError("kernel_matrix is only used with kernel='precomputed'.")
        t0 = time.perf_counter()
        key = self._compile_key(X, Y, kernel_matrix)
        c: Any = getattr(self, "_compiled", None)
        reused = c is not None and key is not None and c.key == key
        if not reused:
            self.__dict__.pop("_compiled", None)
            c = self._compile(X, Y, kernel_matrix, formulation, precomputed)
            c.key = key
        data, Phi = c.data, c.Phi
        progress.message(
            f"{'reused the compiled QP' if reused else 'compiled the QP'} of "
            f"{data.n_examples} examples, {Phi.shape[0]} parts, {data.n_features} features"
            + ("" if reused else f" (prepare {c.times['prepare']:.3g} s, build "
                                 f"{c.times['build']:.3g} s)"))
        note = scaling_note(C, Phi)
        hints = {} if note else {
            cp.INFEASIBLE: " An output polytope is probably unbounded: give every part finite "
                           "bounds.",
            cp.UNBOUNDED: " This should not happen for a QP with a positive definite "
                          "objective."}
        if verbose >= 2:
            opts.setdefault("verbose", True)
        c.C.value = C
        what = "the dual training QP" if self.dual else "the training QP"
        solve_s = solve(c.problem, solver, opts, what=what, hints=hints, note=note)
        progress.message(f"solved {what} with {solver} in {solve_s:.3g} s")
        t2 = time.perf_counter()
        state = self._read_solution(c, C, solver, what, note, precomputed)
        state["verification_"]["seconds"] = time.perf_counter() - t2
        for attr in _SOLUTION_ATTRS:
            self.__dict__.pop(attr, None)
        self.__dict__.update(state)
        self.problem_ = c.problem
        self.solver_ = solver
        self.n_features_in_ = data.n_features
        self.n_training_parts_ = Phi.shape[0]
        stats = c.problem.solver_stats
        self.fit_time_ = {"prepare": 0.0 if reused else c.times["prepare"],
                          "build": 0.0 if reused else c.times["build"], "solve": solve_s,
                          "canonicalize": float(c.problem.compilation_time or 0.0),
                          "solver": float(getattr(stats, "solve_time", None) or 0.0),
                          "verify": state["verification_"]["seconds"],
                          "total": time.perf_counter() - t0}
        self.reused_compiled_ = reused
        self._compiled = c
        progress.message(f"objective {self.objective_:.8g}, total {self.fit_time_['total']:.3g} s")
        return self

    def _read_solution(self, c, C, solver, what, note, precomputed):
        """The fitted attributes from the solved QP, after verifying the solver's answer."""
        data, Phi = c.data, c.Phi
        # the min-max QP's slacks bound the hinge over the polytope from above: its optimum
        # cannot be below the objective of its own weights with that hinge, which is the
        # exact hinge when the polytope is integral (checked: integrality_check)
        exact = c.formulation == "minmax"
        if not self.dual:
            w = np.asarray(c.qp.w.value, dtype=float)
            state = {"coef_": w, "slack_": np.asarray(c.qp.xi.value, dtype=float),
                     "objective_": float(c.problem.value)}
            scores = (lambda: stacked_scores(data.Phi, w)) if exact else None
            norm2 = float(w @ w)
            scale = 1.0
        else:
            u = np.asarray(c.qp.u.value, dtype=float).ravel()
            top = np.abs(u).max() if u.size else 0.0
            support = np.flatnonzero(np.abs(u) > 1e-9 * max(top, 1e-300))
            state = {"dual_coef_": u, "support_": support,
                     "support_features_": Phi[support] if not precomputed else None,
                     "kernel_rank_": int(c.kernel_info["rank"]),
                     "kernel_residual_": float(c.kernel_info["residual"]),
                     "kernel_params_": dict(c.kernel_params),
                     "objective_": c.qp.objective,
                     "slack_": np.abs(np.asarray(c.qp.xi_constraint.dual_value,
                                                 dtype=float)).ravel()}
            if self.kernel == "linear":
                state["coef_"] = np.asarray(Phi.T @ u, dtype=float).ravel()
            t = np.asarray(c.G.T @ u, dtype=float).ravel()  # the QP's own kernel, G G^T
            scores = (lambda: np.split(np.asarray(c.G @ t, dtype=float).ravel(),
                                       np.cumsum(data.n_parts)[:-1])) if exact else None
            norm2 = float(t @ t)
            scale = max(1.0, C)
        recomputed, check = None, None
        if scores is not None:
            try:
                check = integrality_check(self.model, data, scores(), state["slack_"])
            except StructlpError:   # an inference that cannot decide: verify feasibility only
                check = None
            if check is not None and not check["undecided"]:
                recomputed = 0.5 * norm2 + C * float(np.sum(check["exact"]))
        report = verify_solution(c.problem, solver, what, state["objective_"], recomputed,
                                 scale=scale, note=note, stacklevel=5)
        report["relaxation"] = None
        if check is not None and (check["relaxed"] or check["undecided"]):
            report["ok"] = False
            report["relaxation"] = self._relaxation_report(check, state["objective_"],
                                                           recomputed)
        state["verification_"] = report
        return state

    def _relaxation_report(self, check, objective, recomputed):
        """``verification_['relaxation']``, and the :class:`RelaxationWarning` saying it."""
        name = type(self.model).__name__
        relaxed = sorted(check["relaxed"])
        info = {"examples": relaxed,
                "relaxed_hinge": [check["relaxed"][i] for i in relaxed],
                "exact_hinge": [float(check["exact"][i]) for i in relaxed],
                "undecided": list(check["undecided"])}
        shown = ", ".join(f"{i} (relaxed hinge {check['relaxed'][i]:.6g}, exact "
                          f"{check['exact'][i]:.6g})" for i in relaxed[:5])
        more = f" and {len(relaxed) - 5} more" if len(relaxed) > 5 else ""
        source = (f"{name}.inference" if _has_fast_path(self.model)
                  else "an integer program over the polytope")
        if relaxed:
            head = (f"{type(self).__name__} trained the LP relaxation of {name}'s output "
                    "polytope, not its outputs: the polytope is not integral, and at the "
                    "optimum a fractional vertex beats every output in the inference LP of "
                    f"example(s) {shown}{more}. objective_ = {objective:.8g} is the "
                    "relaxation's optimum; the objective of coef_ with the exact hinge (the "
                    f"best output by {source}) is "
                    + (f"{recomputed:.8g}" if recomputed is not None else "not known")
                    + " (verification_['recomputed']), an upper bound of the true optimum.")
        else:
            head = (f"{type(self).__name__} may have trained the LP relaxation of {name}'s "
                    "output polytope: at the optimum the inference LP of example(s) "
                    f"{info['undecided'][:5]} has a fractional vertex, and the integer "
                    f"programs deciding whether an output is as good did not finish in "
                    f"{MILP_TIME_LIMIT:g} s.")
        warnings.warn(
            f"{head} Declare the convex hull of the outputs (an integral polytope), or give "
            f"{name} an exact inference(x, scores) and train with CuttingPlaneLearner or "
            "FrankWolfeLearner, which use it.", RelaxationWarning, stacklevel=5)
        return info

    # ------------------------------------------------------------------ predict
    def _fitted_attr(self):
        return "dual_coef_" if hasattr(self, "dual_coef_") else "coef_"

    def _scores(self, Phis, kernel_matrix=None):
        """Part scores of already checked examples."""
        if not hasattr(self, "dual_coef_"):
            if kernel_matrix is not None:
                raise InvalidParameterError("kernel_matrix is only used with kernel='precomputed'.")
            return stacked_scores(Phis, self.coef_)
        sizes = [P.shape[0] for P in Phis]
        coef = self.dual_coef_[self.support_]
        kernel = self.kernel_params_   # as fitted: set_params changes nothing until a refit
        if kernel["kernel"] == "precomputed":
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
            kern = Kernel(**kernel)
            Phi = sp.vstack([sp.csr_array(P) for P in Phis], format="csr") \
                if any(sp.issparse(P) for P in Phis) else np.vstack(Phis)
            flat = kern(Phi, self.support_features_) @ coef
        return np.split(np.asarray(flat, dtype=float).ravel(), np.cumsum(sizes)[:-1])

    def decision_scores(self, X: Sequence[Any],  # type: ignore[override]
                        kernel_matrix: Optional[ArrayLike] = None) -> List[np.ndarray]:
        """Part scores of every example: list of (L_i,) arrays.

        ``Phi_i w`` for the primal; the kernel expansion
        ``sum_p u_p k(phi_p, phi)`` over the support parts with ``dual=True``
        (``kernel_matrix``: new parts x training parts, for "precomputed").
        """
        return super().decision_scores(X, kernel_matrix=kernel_matrix)

    def hinge_losses(self, X: Sequence[Any], Y: Sequence[Any],
                     kernel_matrix: Optional[ArrayLike] = None) -> np.ndarray:
        """Structured hinge loss of each example under the fitted scores.

        ``max_y [s_i . mu(y) + loss_i(y)] - s_i . mu(y_i)`` by loss-augmented
        inference, with ``s_i`` the part scores (:meth:`decision_scores`).

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted(self._fitted_attr())
        formulation = get_formulation(self.formulation, self.model)
        data = self._check_feature_count(prepare(
            self.model, X, Y, need_polytopes=getattr(formulation, "needs_polytopes", True)))
        scores = self._scores(data.Phi, kernel_matrix)
        _, hinge = loss_augmented(self.model, data, scores=scores)
        return hinge
