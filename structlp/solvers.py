"""Solver choice and solving, with every failure turned into a clear structlp error.

Solver names are cvxpy's (``"CLARABEL"``, ``"ECOS"``, ``"OSQP"``, ``"SCS"``,
``"HIGHS"``, ...); options are passed to ``cvxpy.Problem.solve`` untouched.

Two kinds of program are solved: the *training QPs* (the joint QP of
:class:`~structlp.MaxMarginLearner`, the cutting-plane master QPs) and the
*inference LPs* of models without a combinatorial fast path.
:func:`solver_kind` says which an installed solver suits: HiGHS accepts a QP
through cvxpy, but its active-set QP method is far slower than the
interior-point solvers on the training QPs (and failed on a 300-example
assignment QP that CLARABEL solves quickly), so it is listed for LPs only, and
naming it (or any LP-only solver) for a QP warns and names a suitable one.

A wall-clock limit per solve: :func:`time_limit_options` maps seconds to the
solver's own option name, and the context manager :func:`time_limit` applies
it to every solve inside it (the CLI's ``--time-limit``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import logging
import math
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

from .exceptions import ConvergenceWarning, InvalidParameterError, SolverError

logger = logging.getLogger(__name__)

#: Default solver for the quadratic programs structlp compiles.
DEFAULT_QP_SOLVER = "CLARABEL"
#: Solvers suited to the training QPs, in order of preference.
QP_SOLVERS = ("CLARABEL", "ECOS", "SCS", "OSQP", "PIQP", "PROXQP", "QOCO", "MOSEK",
              "GUROBI", "CPLEX")
#: The Python module of the two preferred QP and LP solvers (see :func:`check_solver`).
_SOLVER_MODULES = {"CLARABEL": "clarabel", "ECOS": "ecos", "HIGHS": "highspy"}
#: Preferred solvers for the inference LPs (a simplex method returns vertices).
LP_SOLVERS = ("HIGHS", "CLARABEL", "ECOS", "SCS", "GLPK", "MOSEK", "GUROBI", "CPLEX")
#: Solvers for LPs only: HiGHS's QP method is unsuited to the training QPs; GLPK, CBC and
#: SCIPY take no quadratic objective at all.
LP_ONLY_SOLVERS = ("HIGHS", "GLPK", "GLPK_MI", "CBC", "SCIPY", "COPT", "XPRESS")

#: Option name of each solver's wall-clock limit in seconds (cvxpy passes it through).
#: ECOS has none.
TIME_LIMIT_OPTION = {"CLARABEL": "time_limit", "OSQP": "time_limit", "SCS": "time_limit_secs",
                     "HIGHS": "time_limit", "GUROBI": "TimeLimit"}

#: Solvers that print a banner on standard output whatever their options (sent to stderr).
_BANNER_SOLVERS = ("HIGHS",)

_ACCEPTED = ("optimal",)        # cvxpy.OPTIMAL (cvxpy is imported when first needed)
_TIME_LIMIT: contextvars.ContextVar[Optional[float]] = contextvars.ContextVar(
    "structlp_time_limit", default=None)


def installed_solvers() -> List[str]:
    """Names of the solvers cvxpy can use on this machine.

    Examples
    --------
    >>> import structlp
    >>> {"CLARABEL", "HIGHS"} <= set(structlp.installed_solvers())
    True
    """
    import cvxpy as cp
    return list(cp.installed_solvers())


def solver_kind(name: str) -> str:
    """``"QP"`` (suits the training QPs and the LPs), ``"LP"`` (the inference LPs only) or
    ``"other"`` (neither, e.g. a conic-only or MIP-only solver).

    Examples
    --------
    >>> from structlp.solvers import solver_kind
    >>> solver_kind("CLARABEL"), solver_kind("HIGHS")
    ('QP', 'LP')
    """
    name = name.upper()
    if name in QP_SOLVERS:
        return "QP"
    if name in LP_ONLY_SOLVERS or name in LP_SOLVERS:
        return "LP"
    return "other"


def time_limit_options(solver: str, seconds: Optional[float]) -> Dict[str, Any]:
    """The solver option that limits one solve to ``seconds`` of wall-clock time.

    Parameters
    ----------
    solver : str
        A cvxpy solver name.
    seconds : float > 0 or None
        None gives no option.

    Returns
    -------
    dict
        e.g. ``{"time_limit": 60.0}`` for CLARABEL, OSQP and HIGHS,
        ``{"time_limit_secs": 60.0}`` for SCS; empty for a solver without a
        time limit (ECOS), which is then logged.

    Examples
    --------
    >>> from structlp.solvers import time_limit_options
    >>> time_limit_options("SCS", 60)
    {'time_limit_secs': 60.0}
    >>> time_limit_options("ECOS", 60)
    {}
    """
    if seconds is None:
        return {}
    seconds = check_time_limit(seconds)
    name = solver.upper()
    if name == "MOSEK":
        return {"mosek_params": {"MSK_DPAR_OPTIMIZER_MAX_TIME": seconds}}
    option = TIME_LIMIT_OPTION.get(name)
    if option is None:
        logger.warning("solver %s has no time limit option; solving without a time limit",
                       name)
        return {}
    return {option: seconds}


def check_time_limit(seconds: Any, owner: Optional[str] = None) -> float:
    """``seconds`` as a finite float > 0."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds) or seconds <= 0:
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'time_limit' parameter{where} must be a number of seconds > 0; got "
            f"{seconds!r}.")
    return float(seconds)


@contextlib.contextmanager
def time_limit(seconds: Optional[float]) -> Iterator[None]:
    """Limit every solve inside the ``with`` block to ``seconds`` (None: no limit).

    A limit already in a call's ``solver_opts`` wins.  A solve stopped by the
    limit raises :class:`~structlp.exceptions.SolverError` saying so.

    Examples
    --------
    >>> import cvxpy as cp
    >>> from structlp.solvers import solve, time_limit
    >>> x = cp.Variable()
    >>> problem = cp.Problem(cp.Minimize(cp.square(x - 1)))
    >>> # every solve inside gets at most 10 s
    >>> with time_limit(10.0):
    ...     seconds = solve(problem, "CLARABEL")
    >>> round(float(x.value), 6)
    1.0
    """
    if seconds is not None:
        seconds = check_time_limit(seconds)
    token = _TIME_LIMIT.set(seconds)
    try:
        yield
    finally:
        _TIME_LIMIT.reset(token)


_LIBC: List[Any] = []


def _flush_c_stdio() -> None:
    """Flush the C library's stdout buffer (what a solver wrote through printf/cout)."""
    try:
        _libc().fflush(None)
    except (OSError, AttributeError, TypeError):  # pragma: no cover - no C library handle
        pass


_REDIRECT_LOCK = threading.Lock()
_REDIRECT: Dict[str, int] = {"depth": 0, "saved": -1}
_HIGHS_BANNER = {"shown": False}


def silence_highs_banner(solver: Optional[str] = None) -> None:
    """Keep HiGHS's banner ("Running HiGHS ...") out of every output of this process.

    HiGHS prints it on standard output, from C++ and whatever its options
    (``output_flag``, ``log_to_console``), when the first ``highspy.Highs`` of a process is
    made. That first one is made here, once, with file descriptor 1 pointed at the null
    device; every later one (structlp's inference LPs, cvxpy's HiGHS interface) prints
    nothing. Called before each of structlp's HiGHS solves; without highspy it does nothing.
    With ``solver`` (a cvxpy solver name) it does something only for a solver that prints
    such a banner (HiGHS).
    """
    if solver is not None and solver not in _BANNER_SOLVERS:
        return
    with _REDIRECT_LOCK:
        if _HIGHS_BANNER["shown"]:
            return
        _HIGHS_BANNER["shown"] = True
        try:
            import highspy
        except ImportError:        # pragma: no cover - a dependency
            return
        try:
            sys.stdout.flush()
            saved = os.dup(1)
        except (OSError, AttributeError, ValueError):   # pragma: no cover - no descriptor 1
            highspy.Highs()
            return
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                highspy.Highs()
                _flush_c_stdio()
        finally:
            os.dup2(saved, 1)
            os.close(saved)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to standard output (Python or C level) to standard error.

    Solver banners (HiGHS prints one from C whatever its options) then never mix
    with a program's results.  Nested and concurrent uses (threads) share one
    redirection, undone when the last one ends.
    """
    sys.stdout.flush()
    fd: Optional[int] = None
    try:
        fd, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):   # captured streams (tests): Python level only
        fd = None
    if fd is not None:
        with _REDIRECT_LOCK:
            if _REDIRECT["depth"] == 0:
                _REDIRECT["saved"] = os.dup(fd)
                os.dup2(err, fd)
            _REDIRECT["depth"] += 1
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if fd is not None:
            sys.stdout.flush()
            _flush_c_stdio()
            with _REDIRECT_LOCK:
                _REDIRECT["depth"] -= 1
                if _REDIRECT["depth"] == 0:
                    os.dup2(_REDIRECT["saved"], fd)
                    os.close(_REDIRECT["saved"])


def suitable_qp_solver() -> str:
    """The preferred installed solver for the training QPs."""
    inst = installed_solvers()
    for name in QP_SOLVERS:
        if name in inst:
            return name
    raise SolverError("No QP solver is installed; install clarabel (pip install clarabel).")


def check_solver(solver: Optional[str], owner: Optional[str] = None, kind: str = "QP") -> str:
    """Validate a solver name (as cvxpy spells it); None gives the default.

    Returns the name in cvxpy's spelling.
    """
    if solver is None and "cvxpy" not in sys.modules:
        # the default, without importing cvxpy (a second of CPU and 60 MB): a learner whose
        # model never needs a solver (a compiled oracle) then never loads it
        for name in (QP_SOLVERS if kind == "QP" else LP_SOLVERS)[:2]:
            if importlib.util.find_spec(_SOLVER_MODULES[name]) is not None:
                return name
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
    import cvxpy as cp
    known = {s.upper() for s in getattr(cp.settings, "SOLVERS", [])}
    if name in known:
        raise InvalidParameterError(
            f"The solver {solver!r}{where} is known to cvxpy but not installed here. "
            f"Installed solvers: {installed}.")
    raise InvalidParameterError(
        f"The 'solver' parameter{where} must be one of the installed solvers {installed}; "
        f"got {solver!r}.")


def check_solver_opts(solver_opts: Optional[Dict[str, Any]],
                      owner: Optional[str] = None) -> Dict[str, Any]:
    """Validate ``solver_opts`` (None or a dict whose keys are option names, str); return a
    dict."""
    if solver_opts is None:
        return {}
    if not isinstance(solver_opts, dict):
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'solver_opts' parameter{where} must be a dict of solver options or None; "
            f"got {type(solver_opts).__name__}.")
    bad = [k for k in solver_opts if not isinstance(k, str)]
    if bad:
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'solver_opts' parameter{where} must map option names (str, passed to the "
            f"solver as keyword arguments) to values; got the key {bad[0]!r} "
            f"({type(bad[0]).__name__}).")
    if "solver" in solver_opts:
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'solver_opts' parameter{where} holds options passed to the solver; the "
            f"solver itself is chosen by the 'solver' parameter (solver="
            f"{solver_opts['solver']!r}), not by solver_opts['solver'].")
    return dict(solver_opts)


def _has_time_limit(solver: str, opts: Dict[str, Any]) -> bool:
    option = TIME_LIMIT_OPTION.get(solver.upper())
    return (option is not None and option in opts) or "mosek_params" in opts


def _limit_value(solver: str, opts: Dict[str, Any]) -> Any:
    option = TIME_LIMIT_OPTION.get(solver.upper())
    return opts.get(option, "set") if option else "set"


def _alternatives(solver: str) -> str:
    others = [s for s in QP_SOLVERS if s in installed_solvers() and s != solver]
    return ", ".join(others[:3]) if others else "another solver"


#: Solvers that catch SIGINT themselves (their C code installs its own handler for the
#: length of a solve): a Ctrl-C caught there is lost (SCS runs on) or ends the solve in a
#: SolverError (ECOS, OSQP) instead of a KeyboardInterrupt.
SIGINT_CATCHING_SOLVERS = frozenset({"SCS", "ECOS", "ECOS_BB", "OSQP"})

#: Seconds between two checks that no solver replaced Python's SIGINT handler.
SIGINT_WATCH_PERIOD = 1e-3
#: Bytes reserved for a C ``struct sigaction`` (152 on Linux x86-64), copied, never read.
_SIGACTION_BYTES = 512
_SIGINT_LOCK = threading.Lock()
_SIGINT_STATE: Dict[str, Any] = {"depth": 0}


def _libc() -> Any:
    if not _LIBC:
        import ctypes
        _LIBC.append(ctypes.CDLL(None))
    return _LIBC[0]


def _sigint_action() -> Any:
    """The process's current SIGINT disposition (a raw ``struct sigaction``), or None."""
    import ctypes
    buf = ctypes.create_string_buffer(_SIGACTION_BYTES)
    try:
        if _libc().sigaction(int(signal.SIGINT), None, buf) != 0:
            return None
    except (OSError, AttributeError, TypeError):   # pragma: no cover - no C sigaction
        return None
    return buf


def _watch_sigint(saved: Any, stop: threading.Event) -> None:
    """Put Python's SIGINT disposition ``saved`` back whenever a solver replaced it."""
    import ctypes
    size = ctypes.sizeof(ctypes.c_void_p)      # the handler: the struct's first member
    head = saved.raw[:size]
    libc = _libc()
    now = ctypes.create_string_buffer(_SIGACTION_BYTES)
    while not stop.wait(SIGINT_WATCH_PERIOD):
        if libc.sigaction(int(signal.SIGINT), None, now) == 0 and now.raw[:size] != head:
            libc.sigaction(int(signal.SIGINT), saved, None)


@contextlib.contextmanager
def interrupts_deferred(solver: str) -> Iterator[None]:
    """Ctrl-C means stop, also in a solver that catches SIGINT itself, whatever thread the
    signal reaches.

    While such a solver runs (:data:`SIGINT_CATCHING_SOLVERS`):

    * a watcher thread puts Python's own SIGINT disposition back within
      :data:`SIGINT_WATCH_PERIOD` seconds each time the solver installs its handler (the
      solvers release the GIL), so a Ctrl-C delivered to any thread of the process (a
      timer, a progress bar, a BLAS pool) reaches Python's handler, never the solver's;
    * SIGINT is blocked on the main thread, so a Ctrl-C aimed at it (the kernel's first
      choice) waits until the solve ends.

    The solve then runs to its end and Python raises KeyboardInterrupt as soon as it
    returns (the learner sets no fitted attribute).  Other solvers do not catch SIGINT:
    Python raises KeyboardInterrupt as soon as they return.
    """
    if solver.upper() not in SIGINT_CATCHING_SOLVERS or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    with _SIGINT_LOCK:
        state = _SIGINT_STATE
        if state["depth"] == 0:                 # no solver running: Python's disposition
            state["saved"] = _sigint_action()
            state["stop"] = threading.Event()
            if state["saved"] is not None:
                threading.Thread(target=_watch_sigint, args=(state["saved"], state["stop"]),
                                 name="structlp-sigint", daemon=True).start()
        state["depth"] += 1
        saved, stop = state["saved"], state["stop"]
    main = threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if main else None
    try:
        yield
    finally:
        with _SIGINT_LOCK:
            if saved is not None:               # before unblocking: a pending Ctrl-C
                _libc().sigaction(int(signal.SIGINT), saved, None)   # reaches Python
            state["depth"] -= 1
            if state["depth"] == 0:
                stop.set()
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def solve(problem: Any, solver: str, solver_opts: Optional[Dict[str, Any]] = None,
          what: str = "the problem", hints: Optional[Dict[str, str]] = None,
          note: str = "") -> float:
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

    Examples
    --------
    >>> import cvxpy as cp
    >>> import structlp
    >>> from structlp.solvers import solve
    >>> x = cp.Variable()
    >>> seconds = solve(cp.Problem(cp.Minimize(cp.square(x - 1))), "CLARABEL")
    >>> round(float(x.value), 6)
    1.0
    >>> try:
    ...     solve(cp.Problem(cp.Minimize(x), [x >= 1, x <= 0]), "CLARABEL", what="a toy problem")
    ... except structlp.SolverError as e:
    ...     print(type(e).__name__)
    SolverError
    """
    import cvxpy as cp      # a cvxpy problem was built, so cvxpy is already imported
    silence_highs_banner(solver)
    opts = dict(solver_opts or {})
    shown = ", ".join(f"{k}={v!r}" for k, v in opts.items())
    limit = _TIME_LIMIT.get()
    if limit is not None and not _has_time_limit(solver, opts):
        opts.update(time_limit_options(solver, limit))
    if solver_kind(solver) != "QP" and not problem.objective.expr.is_affine():
        warnings.warn(
            f"Solver {solver} is not suited to {what}, a QP: it suits LPs only (inference). "
            f"Use solver={suitable_qp_solver()!r} (see `structlp solvers`).", UserWarning,
            stacklevel=3)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # cvxpy warns "Solution may be inaccurate"; the status check below raises instead
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            with stdout_to_stderr() if solver in _BANNER_SOLVERS else \
                    contextlib.nullcontext(), interrupts_deferred(solver):
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
                                   "(for OSQP/SCS raise max_iter or loosen eps"
                                   + (", or raise the time limit" if _has_time_limit(solver, opts)
                                      else "") + ").",
            cp.USER_LIMIT: " The solver stopped at a user limit (the time limit "
                           f"{_limit_value(solver, opts)} s, or an iteration limit).",
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


def scaling_note(C: float, features: Any) -> str:
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


def max_violation(problem: Any) -> float:
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


def verify_solution(problem: Any, solver: str, what: str, reported: float,
                    recomputed: Optional[float] = None, scale: float = 1.0, note: str = "",
                    stacklevel: int = 3) -> Dict[str, Any]:
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
