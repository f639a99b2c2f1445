"""Inference: the best output of every example, by fast path or by one stacked LP.

For scores ``s_i`` (shape (L_i,)) the inference problem of example ``i`` is

.. math::

    \\max_{\\mu \\in P_i} s_i \\cdot \\mu ,

an LP whose optimum is attained at a vertex, i.e. an output, when ``P_i`` is
integral.  Examples whose model offers a combinatorial fast path
(:meth:`~structlp.model.StructuredModel.inference`) use it; the others are solved
together as one block-diagonal LP (a simplex solver, HiGHS, is preferred: it
returns vertices).  A fractional LP solution raises
:class:`~structlp.exceptions.FractionalSolutionError` instead of being rounded
silently.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import scipy.sparse as sp

from ..compiler import stacked_scores
from ..exceptions import FractionalSolutionError, InvalidParameterError, SolverError
from ..formulations import block_diag
from ..solvers import check_solver, check_solver_opts, solve

if TYPE_CHECKING:  # pragma: no cover
    from ..model import StructuredModel
    from ..polytope import Polytope

#: Largest distance to {0, 1} accepted for an LP solution read as an output.
INTEGRALITY_TOL = 1e-5
#: LP solvers that return a point inside the optimal face (not a vertex) when scores tie:
#: unusable as output oracles.
INTERIOR_POINT_SOLVERS = ("CLARABEL", "ECOS", "SCS", "OSQP", "PIQP", "PROXQP", "QOCO",
                          "CVXOPT", "SCIP_IPM", "NAG", "DAQP")
#: An inference LP slower than this (seconds per call, measured at fit time) draws a
#: warning from the first-order learners.
SLOW_ORACLE_SECONDS = 2e-3
#: A warm-started inference LP whose nonbasic reduced costs are all farther than this
#: (relative to the largest score, at least 1) from zero has a unique optimum; otherwise it
#: is solved again cold (see ``_HighsLP``).
TIE_TOL = 1e-6

_HIGHS: dict = {}      # id(polytope) -> (polytope, Highs): one compiled LP per polytope
_BANNER_SILENCED = False


def new_highs():
    """A quiet ``highspy.Highs`` (its banner, printed on the first construction in a
    process, goes to stdout from C++: silenced at the file-descriptor level)."""
    import highspy
    global _BANNER_SILENCED
    if not _BANNER_SILENCED:
        _BANNER_SILENCED = True
        try:
            saved = os.dup(1)
        except OSError:            # pragma: no cover - no stdout descriptor
            saved = None
        if saved is not None:
            try:
                with open(os.devnull, "w") as null:
                    os.dup2(null.fileno(), 1)
                    h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            h.setOptionValue("output_flag", False)
            return h
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


class _HighsLP:
    """``max s . mu, mu in P`` for one polytope, compiled once into HiGHS (dual simplex, no
    presolve).  The auxiliary columns of an extended formulation (``Polytope.n_aux``) score 0
    and are dropped from the solution.

    Every answer is a function of the polytope and the scores only, never of what this
    process solved before: a parallel or dask fit, whose workers each solve a different
    subset of the examples, then gets the serial fit's answers bit for bit.  Without a
    ``warm`` dict every solve starts cold (:meth:`highspy.Highs.clearSolver`).  With one (an
    example's own last basis), a warm solve whose optimum is unique (no nonbasic reduced
    cost within :data:`TIE_TOL` of zero) is kept, since it is the vertex a cold solve finds;
    a possible tie is solved again cold, so that the tie is broken as a cold solve breaks it.
    """

    def __init__(self, poly):
        import highspy
        L = poly.n_parts
        h = new_highs()
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("presolve", "off")
        inf = highspy.kHighsInf
        lb = np.where(np.isfinite(poly.lb), poly.lb, -inf)
        ub = np.where(np.isfinite(poly.ub), poly.ub, inf)
        h.addVars(poly.n_columns, lb.astype(float), ub.astype(float))
        M = sp.vstack([poly.A, poly.E], format="csr")
        lo = np.concatenate([np.full(poly.A.shape[0], -inf), poly.e])
        hi = np.concatenate([poly.b, poly.e])
        if M.shape[0]:
            h.addRows(M.shape[0], lo.astype(float), hi.astype(float), M.nnz,
                      M.indptr.astype(np.int32), M.indices.astype(np.int32),
                      M.data.astype(float))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.h, self.L, self.idx = h, L, np.arange(L, dtype=np.int32)
        self.n_rows = int(M.shape[0])
        self.lb, self.ub = np.asarray(poly.lb, float)[:L], np.asarray(poly.ub, float)[:L]
        self.optimal = highspy.HighsModelStatus.kOptimal

    def _run(self):
        h = self.h
        h.run()
        status = h.getModelStatus()
        if status != self.optimal:
            # a warm start (from this example's or the last solve's basis) can end short of
            # optimal (status 'Unknown', dual infeasible after cleanup): solve again, cold
            h.clearSolver()
            h.run()
            status = h.getModelStatus()
        if status != self.optimal:
            text = h.modelStatusToString(status)
            hint = " A declared output polytope is empty." if "nfeasible" in text else \
                " A declared output polytope is unbounded; give every part finite bounds." \
                if "nbounded" in text else ""
            raise SolverError(f"HiGHS ended with status {text!r} on the inference LP.{hint}")
        return h.getSolution()

    def _maybe_tied(self, sol, s):
        """Whether another optimal vertex may exist: more reduced costs (columns and rows)
        near zero than basic variables (exactly ``n_rows`` are basic, with reduced cost
        0), i.e. a nonbasic one too, along which the objective does not change."""
        tol = TIE_TOL * max(1.0, float(np.max(np.abs(s), initial=0.0)))
        near = int(np.count_nonzero(np.abs(np.asarray(sol.col_dual)) <= tol))
        if self.n_rows:
            near += int(np.count_nonzero(np.abs(np.asarray(sol.row_dual)) <= tol))
        return near > self.n_rows

    def solve(self, s, warm=None):
        """The LP's optimum for scores ``s``.  ``warm``: a dict the caller keeps for one
        example (whose polytope other examples may share): the solve starts from the
        example's own last optimal basis, stored there, which after a small change of the
        scores (a learner's next pass) needs few pivots; the answer is a cold solve's all
        the same (see the class)."""
        h = self.h
        s = np.asarray(s, dtype=float)
        # HiGHS's optimality tolerance (1e-7) is absolute: scores scaled to a largest
        # magnitude of 1e6 (the argmax is unchanged) make it 1e-13 relative, so that a
        # vertex worse than the optimum by 1e-8 (a hinge 1e-8 short, C = 1e8 times) is not
        # accepted as optimal
        top = float(np.max(np.abs(s))) if s.size else 0.0
        s = s * (_COST_SCALE / top) if top > 0 else s
        h.changeColsCost(self.L, self.idx, s)
        last = warm.get("highs") if warm is not None else None
        if last is not None and last[0] is self:
            h.setBasis(last[1])
            sol = self._run()
            if self._maybe_tied(sol, s):
                h.clearSolver()
                sol = self._run()
        else:
            h.clearSolver()
            sol = self._run()
        if warm is not None:
            warm["highs"] = (self, h.getBasis())
        mu = np.array(sol.col_value, dtype=float)[:self.L]
        # within HiGHS's feasibility tolerance of the bounds, rounded to 12 decimals (the
        # same vertex read from two bases of a degenerate vertex may differ in its last
        # bits), and no -0.0 (without presolve the simplex can return either)
        return np.clip(np.round(mu, 12), self.lb, self.ub) + 0.0


#: The largest score magnitude of an inference LP as HiGHS sees it (see _HighsLP.solve).
_COST_SCALE = 1e6


def _compiled_lp(poly):
    # one HiGHS instance per polytope and thread: a HiGHS model is not thread-safe, and
    # dask workers in threads (processes=False) share this module
    key = (id(poly), threading.get_ident())
    entry = _HIGHS.get(key)
    if entry is None or entry[0] is not poly:
        entry = (poly, _HighsLP(poly))
        if len(_HIGHS) > 10_000:          # a bound on what is kept alive
            _HIGHS.clear()
        _HIGHS[key] = entry
    return entry[1]


def _direct_highs(solver, solver_opts):
    """Whether the inference LPs go to HiGHS directly (default solver, no options)."""
    if solver_opts or solver not in (None, "HIGHS"):
        return False
    try:
        import highspy  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency
        return False
    return True


def solve_stacked_lp(polytopes: Sequence[Polytope], scores: Sequence[np.ndarray],
                     solver: Optional[str] = None,
                     solver_opts: Optional[Dict[str, Any]] = None,
                     warm: Optional[Sequence[Dict[str, Any]]] = None) -> List[np.ndarray]:
    """Solve ``max s_i . mu_i, mu_i in P_i`` for all i.

    With the default solver (HiGHS) and no options, each polytope is compiled
    once into HiGHS and re-solved warm from its last basis for every new score
    vector (no cvxpy problem per call); otherwise all examples form one
    block-diagonal cvxpy LP.

    Parameters
    ----------
    polytopes : list of Polytope
    scores : list of (L_i,) arrays
    warm : list of dict, optional
        One dict per example, kept by the caller between calls: on the direct HiGHS path
        each example's solve starts from that example's last optimal basis (kept there),
        not from the basis of whichever example last shared its polytope.

    Returns
    -------
    list of (L_i,) arrays
        The LP solutions (not rounded).
    """
    for p in polytopes:
        p.check_bounded()
    if _direct_highs(solver, solver_opts):
        return [_compiled_lp(p).solve(sc, None if warm is None else warm[i])
                for i, (p, sc) in enumerate(zip(polytopes, scores))]
    solver = check_solver(solver, kind="LP")
    A = block_diag([p.A for p in polytopes])
    E = block_diag([p.E for p in polytopes])
    b = np.concatenate([p.b for p in polytopes])
    e = np.concatenate([p.e for p in polytopes])
    lb = np.concatenate([p.lb for p in polytopes])
    ub = np.concatenate([p.ub for p in polytopes])
    # auxiliary columns of extended formulations (Polytope.n_aux) score 0
    s = np.concatenate([np.pad(sc, (0, p.n_columns - len(sc))) for p, sc in zip(polytopes, scores)])
    import cvxpy as cp      # lazily: the direct HiGHS path above needs no cvxpy
    mu = cp.Variable(len(s), name="mu")
    cons = []
    if A.shape[0]:
        cons.append(sp.csr_array(A) @ mu <= b)
    if E.shape[0]:
        cons.append(sp.csr_array(E) @ mu == e)
    fl, fu = np.flatnonzero(np.isfinite(lb)), np.flatnonzero(np.isfinite(ub))
    if len(fl):
        cons.append(mu[fl] >= lb[fl])
    if len(fu):
        cons.append(mu[fu] <= ub[fu])
    problem = cp.Problem(cp.Maximize(s @ mu), cons)
    solve(problem, solver, solver_opts, what="the inference LP",
          hints={cp.INFEASIBLE: " A declared output polytope is empty.",
                 cp.UNBOUNDED: " A declared output polytope is unbounded; give every "
                               "part finite bounds."})
    sizes = np.cumsum([p.n_columns for p in polytopes])[:-1]
    return [v[:p.n_parts] for p, v in zip(polytopes, np.split(np.asarray(mu.value, dtype=float),
                                                               sizes))]


def _check_integral(model, i, sol, solver=None):
    """``sol`` rounded to 0/1, or FractionalSolutionError (blaming the right culprit)."""
    r = np.rint(sol)
    gap = float(np.max(np.abs(sol - r))) if len(sol) else 0.0
    if gap > INTEGRALITY_TOL:
        head = (f"The inference LP of example {i} has a fractional solution (an entry "
                f"{gap:.3g} away from 0/1)")
        if solver is not None and str(solver).upper() in INTERIOR_POINT_SOLVERS:
            raise FractionalSolutionError(
                f"{head}, solved by {str(solver).upper()}, an interior-point method: on "
                "tied scores it returns a point inside the optimal face, not a vertex, "
                "whether or not the polytope is integral. Use a simplex solver "
                "(solver='HIGHS', the default) for the inference LPs.")
        raise FractionalSolutionError(
            f"{head}: the output polytope of {type(model).__name__} is not integral for "
            "these scores. Define inference(x, scores) for an exact combinatorial decoder.")
    return r


def argmax_parts(model: StructuredModel, X: Sequence[Any], scores: Sequence[np.ndarray],
                 polytopes: Optional[Sequence[Polytope]] = None, solver: Optional[str] = None,
                 solver_opts: Optional[Dict[str, Any]] = None) -> List[np.ndarray]:
    """The best output of every example as its 0/1 part vector.

    As :func:`maximize` without decoding: each example's fast path
    (:meth:`~structlp.model.StructuredModel.inference_parts`), one LP for the others.

    Returns
    -------
    list of m 0/1 arrays, shape (L_i,)
    """
    mus: List[Any] = [model.inference_parts(x, s) for x, s in zip(X, scores)]
    pending = [i for i, mu in enumerate(mus) if mu is None]
    if pending:
        polys = [polytopes[i] if polytopes is not None else model.polytope(X[i])
                 for i in pending]
        sols = solve_stacked_lp(polys, [scores[i] for i in pending], solver, solver_opts)
        for i, sol in zip(pending, sols):
            mus[i] = _check_integral(model, i, sol, solver)
    return mus


def maximize_checked(model: StructuredModel, X: Sequence[Any], scores: Sequence[np.ndarray],
             polytopes: Optional[Sequence[Polytope]] = None, solver: Optional[str] = None,
             solver_opts: Optional[Dict[str, Any]] = None) -> Tuple[List[Any], List[np.ndarray]]:
    """The best output of every example for the given part scores.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples (already checked by ``model.check_x``)
    scores : list of m arrays, shape (L_i,)
    polytopes : list of Polytope, optional
        Built from the model when needed and not given.

    Returns
    -------
    outputs : list of m outputs (as ``model.decode`` gives them)
    mus : list of m 0/1 arrays, shape (L_i,)

    Raises
    ------
    OracleError
        A decoder of the model's own (``inference`` defined outside structlp, and
        ``check_inference`` left True) returned an output outside the example's declared
        polytope (``polytopes[i]``, else built once per ``polytope_key``), naming
        ``X[i]`` and the hook.
    """
    from ..compiler import PolytopeCache, needs_polytopes
    from ..model import is_builtin
    outputs: List[Any] = [None] * len(X)
    mus: List[Any] = [None] * len(X)
    cache = None
    if polytopes is None and not is_builtin(model, "inference") and model.check_inference \
            and needs_polytopes(model):
        cache = PolytopeCache(model)
    pending = []
    for i, (x, s) in enumerate(zip(X, scores)):
        poly = polytopes[i] if polytopes is not None else \
            cache.get(x, i, len(s)) if cache is not None else None
        y, mu = model.checked_inference(x, s, index=i, polytope=poly)
        if y is None:
            pending.append(i)
        else:
            outputs[i], mus[i] = y, mu
    if pending:
        polys = [polytopes[i] if polytopes is not None else model.checked_polytope(X[i])
                 for i in pending]
        sols = solve_stacked_lp(polys, [scores[i] for i in pending], solver, solver_opts)
        for i, sol in zip(pending, sols):
            r = _check_integral(model, i, sol, solver)
            outputs[i] = model.decode(X[i], r)
            mus[i] = r
    return outputs, mus


def maximize(model: StructuredModel, X: Sequence[Any], scores: Sequence[Any],
             solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None
             ) -> Tuple[List[Any], List[np.ndarray]]:
    """The best output of every example under given part scores (exact inference).

    For each example ``i`` solves

    .. math::

        \\mu_i^* = \\arg\\max_{\\mu \\in \\mathcal M(x_i)} s_i \\cdot \\mu,

    by the model's decoder (``inference``) when it has one, else as the LP over its
    polytope (integral optima are checked: a fractional one raises
    :class:`~structlp.exceptions.FractionalSolutionError`).

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples
    scores : list of m arrays, shape (L_i,), with ``L_i = model.n_parts(x_i)``
    solver, solver_opts : optional
        The LP solver (a cvxpy solver name) for models without a decoder.

    Returns
    -------
    outputs : list of m outputs (as ``model.decode`` gives them)
    mus : list of m 0/1 part vectors, shape (L_i,)

    Examples
    --------
    >>> import numpy as np, structlp
    >>> from structlp.structures import BipartiteMatching
    >>> x = np.zeros((2, 2, 1))
    >>> Y, _ = structlp.maximize(BipartiteMatching(), [x], [np.array([0.0, 1.0, 2.0, 0.0])])
    >>> Y[0].astype(int).tolist()
    [[0, 1], [1, 0]]
    """
    from ..utils.validation import check_finite_array, check_sequence_of_examples
    X = [model.check_x(x) for x in check_sequence_of_examples(X, "X")]
    if not isinstance(scores, (list, tuple)) and not (isinstance(scores, np.ndarray)
                                                      and scores.ndim == 2):
        raise InvalidParameterError(
            f"scores must be a list of m part-score arrays (one per example); got "
            f"{type(scores).__name__}.")
    if len(scores) != len(X):
        raise InvalidParameterError(
            f"scores must have one array per example: {len(X)} examples, {len(scores)} "
            "score arrays.")
    checked = []
    for i, (x, s) in enumerate(zip(X, scores)):
        L = model.n_parts(x)
        checked.append(check_finite_array(s, f"scores[{i}]", shape=(L,)))
    if solver is not None:
        check_solver(solver)
    solver_opts = check_solver_opts(solver_opts, "maximize") or None
    return maximize_checked(model, X, checked, solver=solver, solver_opts=solver_opts)


def loss_augmented(model: StructuredModel, data: Any, w: Optional[np.ndarray] = None,
                   solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                   scores: Optional[Sequence[np.ndarray]] = None,
                   polytopes: Optional[Sequence[Polytope]] = None,
                   return_mus: bool = False) -> Tuple[Any, ...]:
    """Loss-augmented inference and the structured hinge loss of every example.

    Solves ``max_y w.f_i(y) + loss_i(y)`` and returns the maximizers and
    ``hinge_i = max_y [w.f_i(y) + loss_i(y)] - w.f_i(y_i)``.

    Parameters
    ----------
    model : StructuredModel
    data : TrainingData
    w : array, shape (d,), optional
        Weights; the part scores are ``Phi_i w``.
    scores : list of (L_i,) arrays, optional
        Part scores given directly (e.g. a kernel expansion) instead of ``w``.
    polytopes : list of Polytope, optional
        Defaults to ``data.polytopes`` (built from the model where missing).
    return_mus : bool
        Also return the maximizers as 0/1 part vectors.

    Returns
    -------
    outputs : list of m outputs
    hinge : ndarray, shape (m,)
    mus : list of m (L_i,) arrays, only with ``return_mus``
    """
    base = scores if scores is not None else stacked_scores(data.Phi, cast(np.ndarray, w))
    aug = [s + c for s, c in zip(base, data.c)]
    polys = polytopes if polytopes is not None else data.polytopes
    if polys is not None and any(p is None for p in polys):
        polys = None
    outputs, mus = maximize_checked(model, data.X, aug, polys, solver, solver_opts)
    hinge = np.array([a @ mu + d - s @ mt for a, mu, d, s, mt
                      in zip(aug, mus, data.d, base, data.mu_true)])
    return (outputs, hinge, mus) if return_mus else (outputs, hinge)


def has_fast_path(model: StructuredModel, x: Any, n_parts: int) -> bool:
    """Whether ``model`` answers ``inference_parts`` for example ``x`` (no LP needed)."""
    return model.inference_parts(x, np.zeros(n_parts)) is not None


def check_oracle_solver(model: StructuredModel, X: Sequence[Any],
                        polytopes: Optional[Sequence[Polytope]] = None,
                        solver: Optional[str] = None, owner: Optional[str] = None,
                        n_calls: Optional[int] = None) -> Optional[float]:
    """Fit-time checks of the loss-augmented oracle of a first-order learner.

    For a model without a combinatorial fast path (every oracle call is an
    inference LP):

    * an interior-point ``solver`` (:data:`INTERIOR_POINT_SOLVERS`) is refused
      with :class:`~structlp.exceptions.InvalidParameterError`: oracles need
      vertices, and these solvers return non-vertices on tied scores;
    * one LP is timed, and when it takes more than :data:`SLOW_ORACLE_SECONDS`
      a warning gives the measured cost (CPU seconds) and the remedies.

    Parameters
    ----------
    model : StructuredModel
    X : list of checked examples
    polytopes : list of Polytope or None
    solver : str or None
        The LP solver requested for the oracles (None: HiGHS).
    owner : str
    n_calls : int, optional
        Oracle calls per pass (default ``len(X)``), for the estimate in the warning.

    Returns
    -------
    float or None
        Seconds per oracle LP (None when the model has a fast path).
    """
    if not len(X):
        return None
    if has_fast_path(model, X[0], int(model.n_parts(X[0]))):
        return None
    poly = polytopes[0] if polytopes is not None else model.polytope(X[0])
    L = poly.n_parts
    name = type(model).__name__
    who = owner or "The learner"
    if solver is not None and str(solver).upper() in INTERIOR_POINT_SOLVERS:
        raise InvalidParameterError(
            f"The 'solver' parameter of {who} is {str(solver).upper()!r}, an interior-point "
            f"method, but {name} has no inference(x, scores) fast path, so every oracle call "
            "is an inference LP whose solution must be a vertex (an output); interior-point "
            "solvers return non-vertices when scores tie. Use solver='HIGHS' (simplex, the "
            "default) or None.")
    rng = np.random.default_rng(0)
    solve_stacked_lp([poly], [rng.normal(size=L)], solver)      # compile / warm up
    t0 = time.process_time()              # CPU seconds: fair on a loaded machine
    for _ in range(5):
        solve_stacked_lp([poly], [rng.normal(size=L)], solver)
    seconds = (time.process_time() - t0) / 5
    if seconds > SLOW_ORACLE_SECONDS:
        n = len(X) if n_calls is None else int(n_calls)
        warnings.warn(
            f"{who}: {name} has no inference(x, scores) fast path, so every oracle call "
            f"solves the inference LP: {seconds * 1e3:.1f} ms per call measured, about "
            f"{seconds * n:.1f} s per pass over the {n} examples. Define "
            f"{name}.inference(x, scores) (an exact combinatorial decoder), or use "
            "MaxMarginLearner (one joint QP) or CuttingPlaneLearner.", UserWarning,
            stacklevel=3)
    return seconds


from .distribution import log_partition, marginals, sample  # noqa: E402  (the Gibbs distribution)
