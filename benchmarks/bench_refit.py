"""Re-fit with a new C: the compiled QP reused (C is a cvxpy Parameter) vs a fresh fit.

The joint min-max QP of m bipartite 10x10 assignments (d = 20 edge features,
noisy, Hamming loss) is fitted at C = 1, then re-fitted at C = 2 on the same
data.  Since C enters the QP as a ``cvxpy.Parameter``, the re-fit skips
``prepare`` (validation, features, polytopes), the block assembly and cvxpy's
canonicalization, and only re-solves.  Compared, each in its own subprocess and
interleaved so that both meet the same machine load:

- ``previous``: the previous release (a pristine checkout given by --base, if any):
  every fit compiles from scratch;
- ``fresh``: this checkout, a new learner at C = 2 (compiles from scratch);
- ``refit``: this checkout, ``set_params(C=2).fit(X, Y)`` after a fit at C = 1.

Wall-clock and CPU seconds (``time.process_time``) are printed per phase; the
objectives of the fresh fit and of the re-fit must agree.

Run:  python benchmarks/bench_refit.py [--m 1000] [--repeat 2] [--base ../base]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_joint_qp import make_data  # noqa: E402  (the same data as the joint-QP benchmark)


def _timed(f):
    t0, c0 = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t0, time.process_time() - c0


def run(mode, m):
    """One measurement in this process; returns a dict."""
    import structlp
    from structlp.structures import BipartiteMatching
    X, Y = make_data(m)
    est = structlp.MaxMarginLearner(BipartiteMatching(), C=1.0)
    if mode == "refit":
        est.fit(X, Y)
        est.set_params(C=2.0)
    else:
        est.set_params(C=2.0)
    _, wall, cpu = _timed(lambda: est.fit(X, Y))
    return {"mode": mode, "m": m, "wall": wall, "cpu": cpu, "objective": est.objective_,
            "canonicalize": float(est.problem_.compilation_time or 0.0),
            "solver": float(est.problem_.solver_stats.solve_time or 0.0),
            "phases": {k: v for k, v in est.fit_time_.items()},
            "reused": getattr(est, "reused_compiled_", False)}


def _subprocess(mode, m, path):
    env = dict(os.environ, PYTHONPATH=str(path))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", mode,
                          "--m", str(m)], env=env, capture_output=True, text=True,
                         check=True, cwd=str(HERE.parent))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--base", default=None,
                    help="a checkout of the previous release, measured alongside")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run(args.child, args.m)))
        return
    here = HERE.parent
    plan = [("fresh", here), ("refit", here)]
    if args.base:
        plan.insert(0, ("previous", Path(args.base).resolve()))
    rows = []
    for r in range(args.repeat):
        for mode, path in plan:
            res = _subprocess("fresh" if mode == "previous" else mode, args.m, path)
            res["mode"] = mode
            rows.append(res)
            ph = res["phases"]
            print(f"[{r}] {mode:8s} m={args.m}: wall {res['wall']:7.2f} s, cpu "
                  f"{res['cpu']:7.2f} s (wall: prepare {ph.get('prepare', 0):.2f}, build "
                  f"{ph.get('build', 0):.2f}, solve {ph.get('solve', 0):.2f} of which cvxpy "
                  f"canonicalization {res['canonicalize']:.2f} and solver "
                  f"{res['solver']:.2f}, verify {ph.get('verify', 0):.2f}), objective "
                  f"{res['objective']:.10g}", flush=True)
    print("\nmode       fastest wall  median wall  fastest cpu  vs fresh (wall, cpu)")
    best = {}
    for mode, _ in plan:
        rs = [r for r in rows if r["mode"] == mode]
        best[mode] = (min(r["wall"] for r in rs), float(np.median([r["wall"] for r in rs])),
                      min(r["cpu"] for r in rs))
    for mode, (w, med, c) in best.items():
        print(f"{mode:9s} {w:12.2f} {med:12.2f} {c:12.2f}   "
              f"{w / best['fresh'][0]:.3f}, {c / best['fresh'][2]:.3f}")
    objs = {r["mode"]: r["objective"] for r in rows}
    gap = abs(objs["refit"] - objs["fresh"]) / abs(objs["fresh"])
    print(f"\nrelative objective difference re-fit vs fresh: {gap:.2e}")


if __name__ == "__main__":
    main()
