"""Where the exact emotion protocol's time goes, and before/after on one split's final fits.

Runs ``problems/emotion_intensity.py``'s final-fit tasks of one split (12 AGM / SSVM
tasks of 6 per-class fits each, and the CRF) at a fixed reg, with each ``--exact-solver``
(default both: the cutting planes, then the Clarabel QPs of the previous release; a
checkout from before the option always solves QPs), serially (``--n-jobs 1``,
the default, Clarabel then using its threads) or in the experiment's worker pool
(``--n-jobs 2``: one solver thread per worker, as the full run), in fresh
subprocesses, once per checkout given (``--tree A --tree B``: e.g. the code
before a change and after it), interleaved ``--repeats`` times.  Prints CPU seconds
(``time.process_time`` of the subprocess, children included) beside wall seconds,
the per-model solver seconds, and whether the results equal the first tree's.

``--kkt``: instead, the structure of Clarabel's KKT matrix for the largest class
of split 1 (AGM and SSVM QPs at ``--reg``): its size, the share of its nonzeros that
couple the shared parameters, and the nonzeros and flops (sum of squared column
counts) of its LDL factor under a minimum-degree ordering (SuperLU's MMD on the
pattern) and under an ordering that eliminates the shared parameters last:
numbers independent of the machine's load.

``--compare A.json B.json``: instead, the paired comparison of two runs' ``--json``
outputs (e.g. ``-o edges=chain`` and ``-o edges=skip2`` at the same ``-o regs=...``):
per model and metric the two means, their difference and the Wilcoxon p-value
(``emotion_intensity.compare``); no data needed.

Needs the CK+ data (``../shared/data/ck_emotion`` or ``$STRUCTLP_CK_PATH``).

Run: python benchmarks/bench_agm_emotion.py [--tree PATH ...] [--exact-solver S ...] [--reg R]
     [--repeats N] [--n-jobs J] [--kkt] [--compare A.json B.json]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, resource
sys.path.insert(0, sys.argv[1] + "/problems")
import numpy as np
import emotion_intensity as E
c0 = time.process_time(); t0 = time.perf_counter()
# checkouts from before the exact_solver option solve QPs
kw = {"exact_solver": sys.argv[4]} if hasattr(E, "EXACT_SOLVERS") else {}
res = E.run(splits=1, reg_grid=[float(sys.argv[2])], n_jobs=int(sys.argv[3]),
            data_path=sys.argv[5] if len(sys.argv) > 5 else None, **kw)
wall = time.perf_counter() - t0
print(json.dumps({"cpu": res["cpu_seconds"], "wall": wall,
                  "exact_solver": kw.get("exact_solver", "qp (no option)"),
                  "breakdown": {k: {"fit_cpu": v["fit_cpu"], "solver": v["solver"]}
                                for k, v in res["breakdown"].items()},
                  "table": {m: {n: row[n]["per_split"] for n in row}
                            for m, row in res["table"].items()}}))
"""


def run_tree(tree, reg, data_path, n_jobs=1, exact_solver="cutting_plane"):
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", CHILD, str(tree), str(reg), str(n_jobs), exact_solver]
    if data_path:
        args.append(data_path)
    out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def kkt_structure(reg, data_path):
    """KKT statistics of the largest class's AGM and SSVM QPs (see the module docstring)."""
    import cvxpy as cp
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu
    sys.path.insert(0, str(ROOT / "problems"))
    import emotion_intensity as E
    from structlp.agm.data import emotion_examples, load_ck_emotion

    def factor(S, spec):
        lu = splu(S, permc_spec=spec, diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        counts = np.diff(lu.L.tocsc().indptr).astype(float)
        return lu.L.nnz, float(np.sum(counts ** 2))

    D = load_ck_emotion(data_path)
    X = emotion_examples(D["frames"], np.zeros(len(D["frames"]), dtype=int), n_classes=1)
    train = D["splits"][0][:E.N_TRAIN]
    zs, counts = np.unique(D["emotion"][train], return_counts=True)
    idx = [i for i in train if D["emotion"][i] == zs[np.argmax(counts)]]
    print(f"largest class of split 1: {len(idx)} sequences, "
          f"{sum(len(D['labels'][i]) for i in idx)} frames; reg {reg:g}")
    print(f"{'model':<6} {'KKT dim':>8} {'nnz(A)':>8} {'coupling':>9} {'L nnz MMD':>10} "
          f"{'GFlop MMD':>10} {'L nnz theta last':>17} {'GFlop':>6}")
    for model in ("AGM", "SSVM"):
        est = E._make(model, ("zero_one", False), reg, None, dict(E.FAST_CLARABEL),
                      exact_solver="qp")(len(idx), E.N_TRAIN)
        est.fit([X[i] for i in idx], [D["labels"][i] for i in idx])
        data = est.problem_.get_problem_data(cp.CLARABEL)[0]
        P, A = sp.csc_matrix(data["P"]), sp.csc_matrix(data["A"])
        n, m = P.shape[0], A.shape[0]
        # the pattern of the quasi-definite KKT matrix, made positive definite
        K = abs(sp.bmat([[P + sp.eye(n), A.T], [A, sp.eye(m)]], format="csc"))
        K.data[:] = 1.0
        K = (K + sp.diags(np.asarray(K.sum(axis=1)).ravel() + 1.0)).tocsc()
        # the shared parameters: the columns of A with the most nonzeros (312)
        n_theta = P.nnz
        theta = np.argsort(-np.diff(A.indptr))[:n_theta]
        rest = np.setdiff1d(np.arange(n + m), theta)
        inner = splu(K[rest][:, rest].tocsc(), permc_spec="MMD_AT_PLUS_A",
                     diag_pivot_thresh=0.0, options={"SymmetricMode": True}).perm_c
        order = np.concatenate([rest[np.argsort(inner)], theta])
        mmd = factor(K, "MMD_AT_PLUS_A")
        last = factor(K[order][:, order].tocsc(), "NATURAL")
        coupling = A[:, theta].nnz / A.nnz
        print(f"{model:<6} {n + m:8d} {A.nnz:8d} {coupling:9.0%} {mmd[0]:10d} "
              f"{mmd[1] / 1e9:10.3f} {last[0]:17d} {last[1] / 1e9:6.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=None,
                    help="checkout roots to compare (default: this one)")
    ap.add_argument("--reg", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--data-path", default=None)
    ap.add_argument("--n-jobs", type=int, default=1,
                    help="worker processes of the experiment (2: one solver thread each)")
    ap.add_argument("--exact-solver", action="append", choices=("cutting_plane", "qp"),
                    default=None, help="the protocol's exact_solver option(s) to time "
                    "(default both: the cutting planes, then the Clarabel QPs)")
    ap.add_argument("--kkt", action="store_true",
                    help="the KKT matrix's structure and factor fill instead of timings")
    ap.add_argument("--compare", nargs=2, metavar="JSON",
                    help="two runs' --json outputs: their paired comparison")
    a = ap.parse_args()
    if a.compare:
        sys.path.insert(0, str(ROOT / "problems"))
        import emotion_intensity
        runs = [json.loads(Path(f).read_text()) for f in a.compare]
        labels = [f"{r['edges']}/{r['protocol']}" for r in runs]
        if labels[0] == labels[1]:
            labels = [Path(f).stem for f in a.compare]
        print("\n".join(emotion_intensity.compare(*runs, labels=labels)))
        return
    if a.kkt:
        return kkt_structure(a.reg, a.data_path)
    trees = [Path(t).resolve() for t in (a.tree or [ROOT])]
    print(f"one split's final fits (reg={a.reg:g}, n_jobs={a.n_jobs}); load average at start "
          f"{os.getloadavg()[0]:.1f}")
    variants = [(t, es) for t in trees for es in (a.exact_solver or ["cutting_plane", "qp"])]
    results = {v: [] for v in variants}
    for _ in range(a.repeats):
        for t, es in variants:
            results[(t, es)].append(run_tree(t, a.reg, a.data_path, a.n_jobs, es))
    first = results[variants[0]][0]
    print(f"{'tree':<28} {'exact_solver':<15} {'CPU s':>8} {'wall s':>8} {'CPU / first':>11}"
          "   per model: fit CPU s (solver wall s)   same results")
    for v in variants:
        for r in results[v]:
            per = ", ".join(f"{k.split('/')[1]} {x['fit_cpu']:.1f} ({x['solver']:.1f})"
                            for k, x in sorted(r["breakdown"].items()))
            print(f"{str(v[0])[-28:]:<28} {r['exact_solver']:<15} {r['cpu']:8.1f} "
                  f"{r['wall']:8.1f} {r['cpu'] / first['cpu']:11.2f}   {per}   "
                  f"{r['table'] == first['table']}")
    print(f"load average at end {os.getloadavg()[0]:.1f}; {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
