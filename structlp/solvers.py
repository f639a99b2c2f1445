"""Solver choice and solving, with every failure turned into a clear structlp error.

Solver names are cvxpy's (``"CLARABEL"``, ``"ECOS"``, ``"OSQP"``, ``"SCS"``,
``"HIGHS"``, ...); options are passed to ``cvxpy.Problem.solve`` untouched.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp

from .exceptions import InvalidParameterError, SolverError

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


def solve(problem, solver, solver_opts=None, what="the problem", hints=None):
    """Solve a cvxpy problem; raise :class:`SolverError` unless it ends optimal.

    Parameters
    ----------
    hints : dict, optional
        Extra sentence per cvxpy status, appended to the error message.

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
            f"Solver {solver} failed on {what}{with_opts}: {exc}. Try another solver "
            f"({_alternatives(solver)}) or different solver_opts.") from None
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise SolverError(
            f"Solver {solver} rejected {what} or its solver_opts ({shown or 'none'}): {exc}. "
            f"Check solver_opts, or try {_alternatives(solver)}.") from None
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
            f"solver ({_alternatives(solver)}) or different solver_opts.")
    return seconds
