"""Solver choice and solving, with every failure turned into a clear structlp error.

Solver names are cvxpy's (``"CLARABEL"``, ``"ECOS"``, ``"OSQP"``, ``"SCS"``,
``"HIGHS"``, ...); options are passed to ``cvxpy.Problem.solve`` untouched.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np

from .exceptions import ConvergenceWarning, InvalidParameterError, SolverError

#: Default solver for the quadratic programs structlp compiles.
DEFAULT_QP_SOLVER = "CLARABEL"
#: Solvers that handle the QPs structlp compiles, in order of preference.
QP_SOLVERS = ("CLARABEL", "ECOS", "SCS", "OSQP", "PIQP", "PROXQP", "QOCO", "MOSEK",
              "GUROBI", "CPLEX", "HIGHS")
#: Preferred solvers for the inference LPs (a simplex method returns vertices).
LP_SOLVERS = ("HIGHS", "CLARABEL", "ECOS", "SCS", "GLPK", "MOSEK", "GUROBI", "CPLEX")

_ACCEPTED = (cp.OPTIMAL,)


def installed_solvers():
    """Names of the solvers cvxpy can use on this machine."""
    return list(cp.installed_solvers())


def check_solver(solver, owner=None, kind="QP"):
    """Validate a solver name (as cvxpy spells it); None gives the default.

    Returns the name in cvxpy's spelling.
    """
    installed = installed_solvers()
    if solver is None:
        prefs = QP_SOLVERS if kind == "QP" else LP_SOLVERS
        for name in prefs:
            if name in installed:
                return name
        raise SolverError(f"No {kind} solver is installed; install clarabel (pip install clarabel).")
    where = f" of {owner}" if owner else ""
    if not isinstance(solver, str):
        raise InvalidParameterError(
            f"The 'solver' parameter{where} must be a solver name (str) such as "
            f"'CLARABEL'; got {type(solver).__name__} {solver!r}.")
    name = solver.upper()
    if name in installed:
        return name
    known = {s.upper() for s in getattr(cp.settings, "SOLVERS", [])}
    if name in known:
        raise InvalidParameterError(
            f"The solver {solver!r}{where} is known to cvxpy but not installed here. "
            f"Installed solvers: {installed}.")
    raise InvalidParameterError(
        f"The 'solver' parameter{where} must be one of the installed solvers {installed}; "
        f"got {solver!r}.")


def check_solver_opts(solver_opts, owner=None):
    """Validate ``solver_opts`` (None or a dict); return a dict."""
    if solver_opts is None:
        return {}
    if not isinstance(solver_opts, dict):
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'solver_opts' parameter{where} must be a dict of solver options or None; "
            f"got {type(solver_opts).__name__}.")
    return dict(solver_opts)


def _alternatives(solver):
    others = [s for s in QP_SOLVERS if s in installed_solvers() and s != solver]
    return ", ".join(others[:3]) if others else "another solver"


def solve(problem, solver, solver_opts=None, what="the problem", hints=None, note=""):
    """Solve a cvxpy problem; raise :class:`SolverError` unless it ends optimal.

    Parameters
    ----------
    hints : dict, optional
        Extra sentence per cvxpy status, appended to the error message.
    note : str
        A sentence appended to every error message (e.g. a scaling diagnosis).

    Returns
    -------
    seconds : float
        Wall-clock time of ``problem.solve``.
    """
    opts = dict(solver_opts or {})
    shown = ", ".join(f"{k}={v!r}" for k, v in opts.items())
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # cvxpy warns "Solution may be inaccurate"; the status check below raises instead
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(solver=solver, **opts)
    except cp.error.SolverError as exc:
        with_opts = f" with solver_opts ({shown})" if shown else ""
        raise SolverError(
            f"Solver {solver} failed on {what}{with_opts}: {str(exc).rstrip('.')}. Try "
            f"another solver ({_alternatives(solver)}) or different solver_opts.{note}") from None
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise SolverError(
            f"Solver {solver} rejected {what} or its solver_opts ({shown or 'none'}): {exc}. "
            f"Check solver_opts, or try {_alternatives(solver)}.{note}") from None
    seconds = time.perf_counter() - t0
    status = problem.status
    if status not in _ACCEPTED:
        hint = {
            cp.INFEASIBLE: " The program is infeasible.",
            cp.UNBOUNDED: " The program is unbounded.",
            cp.OPTIMAL_INACCURATE: " The solver stopped before reaching its accuracy "
                                   "(for OSQP/SCS raise max_iter or loosen eps).",
        }.get(status, "")
        hint += (hints or {}).get(status, "")
        raise SolverError(
            f"Solver {solver} ended with status {status!r} on {what}.{hint} Try another "
            f"solver ({_alternatives(solver)}) or different solver_opts.{note}")
    return seconds


# ---------------------------------------------------------------- verification
#: Tolerance of the checks of a solver's answer (:func:`verify_solution`): relative for
#: the objective, and in units of ``scale`` for the constraint violation.
VERIFY_TOL = 1e-3


def scaling_note(C, features):
    """A sentence diagnosing a badly scaled training QP, or "" when the scales are sane.

    The QP's data span ``C``, the features and their products (the optimal ``w`` grows
    like ``C |phi|``, the objective like ``C^2 |phi|^2``): beyond about ``1e8`` (or below
    ``1e-8``) the solvers lose all accuracy.
    """
    fmax = float(abs(features).max()) if features.shape[0] * features.shape[1] else 0.0
    big = max(C, fmax, C * fmax * fmax)
    if big <= 1e8 and C >= 1e-8 and (fmax == 0.0 or fmax >= 1e-8):
        return ""
    return (f" The QP is badly scaled (C = {C:.3g}, largest |feature| = {fmax:.3g}): rescale "
            "the features to about unit size and keep C within about [1e-6, 1e6].")


def max_violation(problem):
    """Largest violation of the constraints of a solved cvxpy problem at its point
    (``inf`` when the solver returned no point)."""
    worst = 0.0
    for con in problem.constraints:
        v = con.violation()
        if v is None:
            return float("inf")
        v = np.asarray(v, dtype=float)
        if v.size:
            worst = max(worst, float(np.max(v)))
    return worst if np.isfinite(worst) else float("inf")


def verify_solution(problem, solver, what, reported, recomputed=None, scale=1.0, note="",
                    stacklevel=3):
    """Check a solver's answer instead of trusting its status.

    Checks that the returned point satisfies the constraints (violation at most
    ``VERIFY_TOL * scale``) and, when ``recomputed`` is given, that ``reported`` is not
    below it by more than ``VERIFY_TOL`` relative.  ``recomputed`` is the primal objective
    of the returned weights evaluated independently (with the exact structured hinge of
    loss-augmented inference), which no exact optimum of a QP whose slacks bound the
    hinge from above can undercut: a reported optimum below it means the solver stopped
    short (loose tolerances), whatever its status says.

    Returns
    -------
    report : dict
        ``violation``, ``reported``, ``recomputed``, ``relative_gap`` and ``ok``;
        a :class:`~structlp.exceptions.ConvergenceWarning` naming the solver and the
        remedy is issued when not ``ok``.

    Raises
    ------
    SolverError
        When the solver returned no point or a non-finite one.
    """
    violation = max_violation(problem)
    if not np.isfinite(violation) or not np.isfinite(reported):
        raise SolverError(
            f"Solver {solver} reported 'optimal' on {what} but returned no finite point. Try "
            f"another solver ({_alternatives(solver)}).{note}")
    gap = None
    if recomputed is not None:
        gap = (recomputed - reported) / max(1.0, abs(recomputed))
    issues = []
    if violation > VERIFY_TOL * scale:
        issues.append(f"its point violates a constraint by {violation:.3g}")
    if gap is not None and gap > VERIFY_TOL:
        issues.append(f"its objective {reported:.8g} is below the objective of its own "
                      f"solution recomputed by exact inference, {recomputed:.8g} (relative "
                      f"gap {gap:.2g})")
    if issues:
        warnings.warn(
            f"Solver {solver} reported 'optimal' on {what}, but {' and '.join(issues)}: its "
            "tolerances are too loose. Tighten them in solver_opts (e.g. eps_abs/eps_rel for "
            f"SCS or OSQP) or use another solver ({_alternatives(solver)}).{note}",
            ConvergenceWarning, stacklevel=stacklevel)
    return {"violation": violation, "reported": float(reported),
            "recomputed": None if recomputed is None else float(recomputed),
            "relative_gap": gap, "ok": not issues}
