"""The inference-LP oracle of a declared model without a fast path: before/after.

A user-declared DAG-path model (a source-to-sink path in a layered DAG, declared only by
its flow constraints, no ``inference``): FrankWolfeLearner's every oracle call is the LP
``max s . mu, mu in P``.  Measured in one run, each in a subprocess: CPU seconds per
oracle call and of a FrankWolfeLearner fit, with this checkout (HiGHS compiled once per
polytope, warm-started) and with the previous release (a cvxpy LP per call), beside
MaxMarginLearner (the joint QP).

Run: ``python benchmarks/bench_lp_oracle.py [--base ../base] [--m 40]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import json, sys, time, warnings
import numpy as np, scipy.sparse as sp
from structlp import FrankWolfeLearner, MaxMarginLearner, Polytope, StructuredModel
from structlp.inference import solve_stacked_lp

LAYERS, WIDTH, D = 5, 4, 6

class DagPath(StructuredModel):
    """Paths source -> one node per layer -> sink; parts are the DAG's arcs."""
    def arcs(self):
        a = [(-1, (0, j)) for j in range(WIDTH)]
        a += [((l, i), (l + 1, j)) for l in range(LAYERS - 1) for i in range(WIDTH)
              for j in range(WIDTH)]
        return a + [((LAYERS - 1, i), -2) for i in range(WIDTH)]
    def n_parts(self, x):
        return len(self.arcs())
    def features(self, x):
        return x
    def polytope(self, x):
        arcs = self.arcs()
        nodes = [-1, -2] + [(l, i) for l in range(LAYERS) for i in range(WIDTH)]
        E = np.zeros((len(nodes), len(arcs)))
        for k, (u, v) in enumerate(arcs):
            E[nodes.index(u), k] += 1.0
            E[nodes.index(v), k] -= 1.0
        e = np.zeros(len(nodes)); e[0], e[1] = 1.0, -1.0
        return Polytope(E=E, e=e)
    def polytope_key(self, x):
        return "dag"

m = int(sys.argv[1])
rng = np.random.default_rng(0)
model = DagPath()
L = model.n_parts(None)
w0 = rng.normal(size=D)
X = [rng.normal(size=(L, D)) for _ in range(m)]
poly = model.polytope(None)
Y = [np.rint(solve_stacked_lp([poly], [x @ w0 + rng.normal(size=L)])[0]) for x in X]
s = [rng.normal(size=L) for _ in range(50)]
solve_stacked_lp([poly], [s[0]])
t0 = time.process_time()
for si in s:
    solve_stacked_lp([poly], [si])
per_call = (time.process_time() - t0) / len(s)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-3, max_iter=500, random_state=0).fit(X, Y)
    t_fw = time.process_time() - t0
    t0 = time.process_time()
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    t_qp = time.process_time() - t0
print(json.dumps({"per_call": per_call, "fw": t_fw, "fw_obj": fw.objective_,
                  "fw_epochs": fw.n_iter_, "qp": t_qp, "qp_obj": qp.objective_}))
'''


def run(pythonpath, m):
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    # cwd outside any checkout: "python -c" puts the cwd first on sys.path
    out = subprocess.run([sys.executable, "-c", CHILD, str(m)], capture_output=True, text=True,
                         env=env, cwd=tempfile.gettempdir())
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=None, help="checkout of the previous release")
    ap.add_argument("--m", type=int, default=10, help="training examples")
    args = ap.parse_args(argv)
    rows = [("this checkout", run(ROOT, args.m))]
    if args.base:
        rows.insert(0, ("previous release", run(Path(args.base).resolve(), args.m)))
    print(f"Declared DAG-path model (5 layers of 4 nodes, 72 arcs), m = {args.m}, C = 1, "
          "CPU seconds (loaded machine)\n")
    print("| code | ms per oracle LP | FrankWolfe fit s (epochs) | FW objective | "
          "MaxMargin QP s | QP objective |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {1e3 * r['per_call']:.2f} | {r['fw']:.2f} ({r['fw_epochs']}) | "
              f"{r['fw_obj']:.5f} | {r['qp']:.2f} | {r['qp_obj']:.5f} |")


if __name__ == "__main__":
    with warnings.catch_warnings():
        main()
