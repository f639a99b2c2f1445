"""Command line: ``structlp run PROBLEM.py`` and ``structlp solvers``.

A problem file is a Python file that defines

* ``DESCRIPTION`` (str): one paragraph saying what the problem is;
* ``run(solver=None, C=None, seed=0, **options) -> dict``: runs the problem on
  its embedded default data and returns JSON-serializable results; the key
  ``"report"`` holds a human-readable text that the CLI prints.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from .exceptions import StructlpError
from .solvers import QP_SOLVERS, installed_solvers


def load_problem(path):
    """Import a problem file by path and check it defines ``run``."""
    path = Path(path)
    if not path.is_file():
        raise StructlpError(f"Problem file {str(path)!r} does not exist.")
    spec = importlib.util.spec_from_file_location(f"structlp_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise StructlpError(f"Problem file {str(path)!r} must define run(solver, C, seed).")
    return module


def _jsonable(obj):
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


def _cmd_run(args):
    module = load_problem(args.problem)
    kwargs = {"solver": args.solver, "C": args.C, "seed": args.seed}
    for item in args.option or []:
        key, _, value = item.partition("=")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    results = _jsonable(module.run(**kwargs))
    report = results.get("report") if isinstance(results, dict) else None
    if report:
        print(report)
    else:
        print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0


def _cmd_solvers(args):
    inst = installed_solvers()
    print("installed cvxpy solvers:")
    for name in inst:
        kind = "QP and LP" if name in QP_SOLVERS else "LP or other"
        print(f"  {name:<10} {kind}")
    return 0


def main(argv=None):
    """Entry point of the ``structlp`` console script."""
    parser = argparse.ArgumentParser(prog="structlp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run a problem file on its default data")
    p_run.add_argument("problem", help="path to a problem file, e.g. problems/reviewer_assignment.py")
    p_run.add_argument("--solver", default=None, help="cvxpy solver name (default CLARABEL)")
    p_run.add_argument("--C", type=float, default=None, help="slack weight C")
    p_run.add_argument("--seed", type=int, default=0, help="random seed")
    p_run.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    p_run.add_argument("--option", "-o", action="append", metavar="KEY=VALUE",
                       help="extra keyword argument for the problem's run() (JSON value)")
    p_run.set_defaults(func=_cmd_run)
    p_sol = sub.add_parser("solvers", help="list the installed solvers")
    p_sol.set_defaults(func=_cmd_solvers)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except StructlpError as exc:
        print(f"structlp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
