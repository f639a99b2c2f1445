"""Command line: ``structlp run PROBLEM.py`` and ``structlp solvers``.

A problem file is a Python file that defines

* ``DESCRIPTION`` (str): one paragraph saying what the problem is;
* ``run(solver=None, C=None, seed=0, **options) -> dict``: runs the problem on
  its embedded default data and returns JSON-serializable results; the key
  ``"report"`` holds a human-readable text that the CLI prints.  ``solver``, ``C``
  and ``seed`` are optional: the CLI reads ``run``'s signature and passes
  ``--solver``, ``--C`` and ``--seed`` only when they are given and ``run`` names
  them (given for a ``run`` without them, they are a one-line error); a
  parameter that ``run`` does not name is never passed.

The options of a problem are the keyword parameters of its ``run`` (with
their defaults; a ``**kwargs`` catch-all takes the keys of a module-level
``DEFAULTS`` dict when there is one); ``structlp run FILE --help`` lists them and
``-o KEY=VALUE`` sets one: VALUE is converted to the type of the option's default
(an int, float, bool or str; a one-line error when it is not one), and read as
JSON, else kept as a string, when the default is None, a list or a dict.  A
``run`` that names ``verbose`` receives the CLI's level: 1 on a terminal, 0
with ``--quiet``, more with ``-v``.  The problem file's folder is put first on
``sys.path``, so it can import modules beside it.

Standard output carries only the result (the report, or the JSON results):
progress lines, warnings and anything a solver prints (HiGHS's banner) go to
standard error.  Bad usage (unknown option, a file that is not a problem file,
an unwritable ``--json`` path, a full disk) is one line on standard error and exit
status 2, with no traceback unless ``--debug``; Ctrl-C is one line and exit status
130; a closed output pipe (``| head``) exits quietly with status 141.  The
``--json`` file is written before the report is printed, atomically (a temporary
file beside it, then a rename): it is complete or absent, never truncated.
"""

from __future__ import annotations

import argparse
import datetime
import errno
import importlib.util
import inspect
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .exceptions import StructlpError

logger = logging.getLogger("structlp.cli")    # also under python -m structlp.cli

#: Parameters of ``run`` that the CLI sets with its own flags.
_CLI_PARAMS = ("solver", "C", "seed")
#: Python package of each solver (for the versions in the JSON output).
_SOLVER_PACKAGES = {"CLARABEL": "clarabel", "ECOS": "ecos", "OSQP": "osqp", "SCS": "scs",
                    "HIGHS": "highspy", "PIQP": "piqp", "PROXQP": "proxsuite", "QOCO": "qoco",
                    "MOSEK": "mosek", "GUROBI": "gurobipy", "CPLEX": "cplex", "GLPK": "cvxopt",
                    "SCIPY": "scipy"}


# ------------------------------------------------------------ problem files
def load_problem(path: Any) -> Any:
    """Import a problem file by path and check it defines ``run``.

    The file's folder is put first on ``sys.path``.  A missing file, a file that
    is not ``.py``, one that does not import (syntax error, missing module...) or
    that defines no ``run`` raises :class:`~structlp.exceptions.StructlpError`
    with one line saying so.
    """
    path = Path(path)
    if not path.is_file():
        raise StructlpError(f"Problem file {str(path)!r} does not exist.")
    if path.suffix != ".py":
        raise StructlpError(f"Problem file {str(path)!r} must be a Python file ending in .py.")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"structlp_problem_{path.stem}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - .py files always have one
        raise StructlpError(f"Cannot import problem file {str(path)!r}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(spec.name, None)
        raise StructlpError(f"Problem file {str(path)!r} has a syntax error at line "
                            f"{exc.lineno}: {exc.msg}.") from exc
    except Exception as exc:
        sys.modules.pop(spec.name, None)
        raise StructlpError(f"Problem file {str(path)!r} failed to import: "
                            f"{type(exc).__name__}: {exc}") from exc
    if not callable(getattr(module, "run", None)):
        raise StructlpError(f"Problem file {str(path)!r} must define run(solver, C, seed).")
    return module


def problem_options(module: Any) -> Optional[Dict[str, Any]]:
    """The options of a problem (name -> default), or None when ``run`` takes any keyword
    (a ``**kwargs`` catch-all without a ``DEFAULTS`` dict)."""
    params = inspect.signature(module.run).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params) \
            and not isinstance(getattr(module, "DEFAULTS", None), dict):
        return None
    return {k: v for k, v in run_parameters(module).items() if k not in _CLI_PARAMS}


def run_parameters(module: Any) -> Dict[str, Any]:
    """The parameters that the problem's ``run`` names (name -> default), with the keys of
    its ``DEFAULTS`` dict when ``run`` has a ``**kwargs`` catch-all (never the catch-all
    itself: a ``**kwargs`` without ``DEFAULTS`` accepts nothing the CLI can know of)."""
    params = inspect.signature(module.run).parameters.values()
    named = {p.name: p.default for p in params
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    defaults = getattr(module, "DEFAULTS", None)
    if any(p.kind is p.VAR_KEYWORD for p in params) and isinstance(defaults, dict):
        named.update({k: v for k, v in defaults.items() if k not in named})
    return named


def _cli_arguments(module: Any, args: argparse.Namespace, level: int,
                   options: Dict[str, Any]) -> Dict[str, Any]:
    """The CLI's own settings that the problem's ``run`` takes: ``solver``, ``C`` and
    ``seed`` when given on the command line, ``verbose`` (the CLI's level) unless ``-o
    verbose=`` sets it.  A flag given for a ``run`` without that parameter is an error
    (the problem would ignore or refuse it); nothing ``run`` does not name is passed."""
    takes = run_parameters(module)
    out: Dict[str, Any] = {}
    for name in _CLI_PARAMS:
        value = getattr(args, name)
        if value is None:
            continue
        if name not in takes:
            raise StructlpError(
                f"--{name} does not apply to {Path(args.problem).name}: its run() has no "
                f"{name!r} parameter (it sets its own); its options: "
                f"{', '.join(problem_options(module) or []) or 'none'}.")
        out[name] = value
    if "verbose" in takes and "verbose" not in options:
        out["verbose"] = level
    return out


def _default_text(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "(required)"
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _options_help(module: Any) -> str:
    options = problem_options(module)
    desc = getattr(module, "DESCRIPTION", "")
    lines = [desc.strip(), ""] if desc else []
    if options is None:
        lines.append("problem options (-o KEY=VALUE): any keyword of its run() (see the file)")
    elif not options:
        lines.append("problem options (-o KEY=VALUE): none")
    else:
        lines.append("problem options (-o KEY=VALUE, VALUE read as JSON), with defaults:")
        width = max(len(k) for k in options)
        lines += [f"  {k:<{width}}  {_default_text(v)}" for k, v in options.items()]
    return "\n".join(lines)


def parse_options(items: Sequence[str], module: Any) -> Dict[str, Any]:
    """``-o KEY=VALUE`` items as a dict, checked against the problem's options."""
    options = problem_options(module)
    valid = "none" if options == {} else ", ".join(options or [])
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise StructlpError(f"malformed option {item!r}: expected -o KEY=VALUE with KEY one "
                                f"of: {valid}.")
        if key in _CLI_PARAMS:
            raise StructlpError(f"option {key!r} is set with --{key}, not -o.")
        if options is not None and key not in options:
            raise StructlpError(f"unknown option {key!r} for this problem; valid options: "
                                f"{valid}.")
        default = options.get(key, None) if options is not None else None
        words = getattr(module, "OPTION_WORDS", {})
        words = words.get(key, ()) if isinstance(words, dict) else ()
        out[key] = value.strip() if value.strip() in words else _convert(key, value, default)
    return out


def _convert(key: str, value: str, default: Any) -> Any:
    """``value`` as the type of ``default`` (bool, int, float, str); JSON otherwise."""
    kind = type(default)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    if kind is bool:
        text = value.strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        expected = "true or false"
    elif kind is int:
        if isinstance(parsed, int) and not isinstance(parsed, bool):
            return parsed
        if isinstance(parsed, float) and parsed.is_integer():
            return int(parsed)
        expected = "an integer"
    elif kind is float:
        if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
            return float(parsed)
        try:
            return float(value)          # also inf, nan
        except ValueError:
            pass
        expected = "a number"
    elif kind is str:
        return value
    else:
        return parsed
    raise StructlpError(f"option {key!r} expects {expected} (its default is "
                        f"{_default_text(default)}); got {value!r}.")


# ------------------------------------------------------------ output
def _jsonable(obj: Any) -> Any:
    import numpy as np
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _check_writable(path: str) -> None:
    """Fail before the run when ``--json PATH`` cannot be written."""
    p = Path(path)
    existed = p.exists()
    if p.is_dir():
        raise StructlpError(f"--json {path!r} is a directory; give a file path.")
    try:
        with open(p, "a"):
            pass
    except OSError as exc:
        raise StructlpError(f"--json {path!r} cannot be written: {exc.strerror}.") from None
    if not existed:
        p.unlink()


def _versions() -> Dict[str, Optional[str]]:
    from importlib import metadata

    from .utils.version import __version__
    from .solvers import installed_solvers
    out: Dict[str, Optional[str]] = {"structlp": __version__, "python": sys.version.split()[0]}
    for dist in ["cvxpy", "numpy", "scipy"] + [_SOLVER_PACKAGES[s] for s in installed_solvers()
                                               if s in _SOLVER_PACKAGES]:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _configure_logging(level: int) -> None:
    root = logging.getLogger("structlp")
    if level <= 0:
        root.setLevel(logging.WARNING)
        return
    from .utils.progress import ensure_handler
    ensure_handler()
    root.setLevel(logging.DEBUG if level >= 3 else logging.INFO)


# ------------------------------------------------------------ commands
def _cmd_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.help:
        print(parser.format_help().rstrip())
        if args.problem:
            print()
            print(_options_help(load_problem(args.problem)))
        return 0
    if not args.problem:
        raise StructlpError("structlp run needs a problem file, e.g. "
                            "structlp run problems/reviewer_assignment.py")
    if args.json:
        _check_writable(args.json)
    level = 0 if args.quiet else (args.verbose or (1 if sys.stderr.isatty() else 0))
    _configure_logging(level)
    module = load_problem(args.problem)
    options = parse_options(args.option or [], module)
    kwargs = {**_cli_arguments(module, args, level, options), **options}
    from .solvers import stdout_to_stderr, time_limit
    logger.info("running %s (solver %s, C %s, seed %s%s)", args.problem,
                args.solver or "default", args.C if args.C is not None else "default",
                args.seed if args.seed is not None else "default",
                "".join(f", {k}={v!r}" for k, v in options.items()))
    t0 = time.perf_counter()
    with stdout_to_stderr(), time_limit(args.time_limit):
        results = _jsonable(module.run(**kwargs))
    logger.info("finished in %.1f s", time.perf_counter() - t0)
    report = results.get("report") if isinstance(results, dict) else None
    if args.json:   # before the report: a closed pipe on stdout must not lose it
        meta = {"problem": Path(args.problem).stem, "problem_file": str(args.problem),
                "options": _jsonable(options), "solver_requested": args.solver, "C_requested":
                args.C, "seed": kwargs.get("seed", run_parameters(module).get("seed")),
                "time_limit": args.time_limit,
                "versions": _versions(),
                "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds")}
        body = {**results, **meta} if isinstance(results, dict) else {"results": results, **meta}
        text = (json.dumps(body, indent=2) + "\n").encode("utf-8")
        from .persistence import atomic_write
        atomic_write(args.json, lambda f: f.write(text))
        logger.info("results written to %s", args.json)
    print(report if report else json.dumps(results, indent=2))
    sys.stdout.flush()
    return 0


def _cmd_solvers(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .solvers import TIME_LIMIT_OPTION, installed_solvers, solver_kind, suitable_qp_solver
    kinds = {"QP": "training QPs and inference LPs",
             "LP": "inference LPs only (not the training QPs)",
             "other": "not used by structlp"}
    print("installed cvxpy solvers:")
    for name in installed_solvers():
        limit = TIME_LIMIT_OPTION.get(name, "mosek_params" if name == "MOSEK" else None)
        extra = f"time limit option {limit!r}" if limit else "no time limit option"
        print(f"  {name:<10} {kinds[solver_kind(name)]:<42} {extra}")
    print(f"default for the training QPs: {suitable_qp_solver()}")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    from .utils.version import __version__
    parser = argparse.ArgumentParser(prog="structlp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"structlp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", add_help=False,
                           help="run a problem file on its default data",
                           description="Run a problem file; FILE --help lists its options.")
    p_run.add_argument("problem", nargs="?",
                       help="path to a problem file, e.g. problems/reviewer_assignment.py")
    p_run.add_argument("-h", "--help", action="store_true",
                       help="show this help (and the problem's options when FILE is given)")
    p_run.add_argument("--solver", default=None, help="cvxpy solver name (default CLARABEL)")
    p_run.add_argument("--C", type=float, default=None, help="slack weight C")
    p_run.add_argument("--seed", type=int, default=None,
                       help="random seed (default: the problem's)")
    p_run.add_argument("--json", default=None, metavar="PATH",
                       help="also write results (with problem, options, versions, time) as JSON")
    p_run.add_argument("--option", "-o", action="append", metavar="KEY=VALUE",
                       help="a problem option (VALUE read as JSON); FILE --help lists them")
    p_run.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                       help="wall-clock limit of every solver call (solvers that have one)")
    p_run.add_argument("--quiet", "-q", action="store_true",
                       help="print only the result (no progress lines)")
    p_run.add_argument("--verbose", "-v", action="count", default=0,
                       help="progress lines (the default on a terminal); -vv more")
    p_run.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    p_run.set_defaults(func=_cmd_run, subparser=p_run)
    p_sol = sub.add_parser("solvers", help="list the installed solvers and what they suit")
    p_sol.set_defaults(func=_cmd_solvers, subparser=p_sol)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``structlp`` console script."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    debug = getattr(args, "debug", False)
    try:
        return args.func(args, args.subparser)
    except StructlpError as exc:
        if debug:
            raise
        _error(f"structlp: error: {exc}")
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        _error("structlp: interrupted")
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except OSError as exc:
        if debug or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS):
            raise
        _silence_stdout()
        _error(f"structlp: error: cannot write the output: {exc.strerror or exc}.")
        return 2


def _error(line: str) -> None:
    try:
        print(line, file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):   # stderr itself is closed or full
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what could not
    be written raises nothing at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
