"""Joint max-margin QP: structlp (declared model -> cvxpy -> Clarabel) vs raw Clarabel.

The same QP — bipartite 10x10 assignments (R = P = 1), d = 20 edge features,
Hamming loss, C = 1 —

    min  1/2 |w|^2 + C sum_i xi_i
    s.t. lam_ij + nu_ik >= phi_ijk . w + c_ijk        (every edge of every example)
         y_i . (Phi_i w) + xi_i >= d_i + sum(lam_i) + sum(nu_i)
         lam >= 0

is built (a) by structlp.MaxMarginLearner.fit from the declared BipartiteMatching
model and (b) directly with Clarabel's Python API from sparse matrices stacked
here, with no cvxpy.  Both objectives are printed (they must agree) with build
and solve times and the ratio of structlp's whole fit to the raw build + solve.

Run:  python benchmarks/bench_joint_qp.py [--sizes 10 100 1000] [--repeats 1] [--json PATH]

``--json PATH`` writes the table in the schema of ``benchmarks/report.py`` (machine, date,
the floor and the ratios).
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse
import time

import clarabel
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/report.py
import report
import structlp
from structlp.structures import BipartiteMatching


def make_data(m, n=10, d=20, seed=0):
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    Y = []
    for x in X:
        S = x @ w0 + 0.5 * rng.normal(size=(n, n))  # noisy: not separable
        r, c = linear_sum_assignment(S, maximize=True)
        y = np.zeros((n, n))
        y[r, c] = 1
        Y.append(y)
    return X, Y


def raw_clarabel(X, Y, C=1.0):
    """Build the min-max QP with scipy.sparse only and solve it with Clarabel."""
    t0 = time.perf_counter()
    m = len(X)
    n, _, d = X[0].shape
    L = n * n
    Phi = np.vstack([x.reshape(L, d) for x in X])          # (m L, d)
    ytrue = np.concatenate([y.ravel() for y in Y])          # (m L,)
    # variable z = [w (d), xi (m), lam (m n), nu (m n)]
    nz = d + m + 2 * m * n
    o_lam, o_nu = d + m, d + m + m * n          # xi occupies d .. d + m
    part = np.arange(m * L)
    ex, jk = np.divmod(part, L)
    j, k = np.divmod(jk, n)
    lam_col = o_lam + ex * n + j
    nu_col = o_nu + ex * n + k
    # rows 0..mL-1:  -(lam + nu - Phi w) + s = c   <=>  lam + nu - Phi w >= -c ... with c = -y
    Aw = sp.csr_array(-(-Phi))  # coefficient of w in "-(lam+nu) + Phi w" is +Phi
    A_parts = sp.hstack([
        Aw,
        sp.csr_array((m * L, m)),
        sp.csr_array((-np.ones(m * L), (part, lam_col - o_lam)), shape=(m * L, m * n)),
        sp.csr_array((-np.ones(m * L), (part, nu_col - o_nu)), shape=(m * L, m * n)),
    ], format="csc")
    b_parts = ytrue.copy()  # -c = y_true
    # example rows: -(y.Phi w + xi - sum lam - sum nu) + s = -d,  d = n (R n_cols)
    F = sp.csr_array((ytrue, (ex, part)), shape=(m, m * L)) @ Phi
    rows_lam = np.repeat(np.arange(m), n)
    A_ex = sp.hstack([
        sp.csr_array(-F), -sp.eye_array(m),
        sp.csr_array((np.ones(m * n), (rows_lam, np.arange(m * n))), shape=(m, m * n)),
        sp.csr_array((np.ones(m * n), (rows_lam, np.arange(m * n))), shape=(m, m * n)),
    ], format="csc")
    b_ex = -np.full(m, float(n))
    A_nn = sp.hstack([sp.csr_array((m * n, d + m)), -sp.eye_array(m * n),
                      sp.csr_array((m * n, m * n))], format="csc")
    A = sp.vstack([A_parts, A_ex, A_nn], format="csc")
    b = np.concatenate([b_parts, b_ex, np.zeros(m * n)])
    P = sp.csc_array((np.ones(d), (np.arange(d), np.arange(d))), shape=(nz, nz))
    q = np.concatenate([np.zeros(d), np.full(m, C), np.zeros(2 * m * n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solver = clarabel.DefaultSolver(sp.csc_matrix(P), q, sp.csc_matrix(A), b,
                                    [clarabel.NonnegativeConeT(A.shape[0])], settings)
    t1 = time.perf_counter()
    sol = solver.solve()
    t2 = time.perf_counter()
    return dict(build=t1 - t0, solve=t2 - t1, total=t2 - t0, objective=sol.obj_val,
                status=str(sol.status), iterations=sol.iterations,
                w=np.asarray(sol.x[:d]))


def structlp_fit(X, Y, C=1.0):
    learner = structlp.MaxMarginLearner(BipartiteMatching(), C=C, solver="CLARABEL")
    t0 = time.perf_counter()
    learner.fit(X, Y)
    total = time.perf_counter() - t0
    ft = learner.fit_time_
    return dict(prepare=ft["prepare"], build=ft["build"], solve=ft["solve"], total=total,
                objective=learner.objective_, w=learner.coef_)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--repeats", "--repeat", dest="repeat", type=int, default=1,
                    help="runs per size (the fastest of each side is kept)")
    ap.add_argument("--json", default=None, help="write the results to this JSON file")
    args = ap.parse_args(argv)
    started = report.machine()
    print("joint min-max QP, bipartite 10x10, d = 20, C = 1; times in seconds (best of "
          f"{args.repeat})")
    head = (f"{'m':>6} | {'structlp prep':>13} {'build':>7} {'solve*':>8} {'fit':>8} | "
            f"{'raw build':>9} {'solve':>8} {'total':>8} | {'fit/raw':>7} | {'rel. obj diff':>13}")
    print(head)
    print("-" * len(head))
    rows = []
    for m in args.sizes:
        X, Y = make_data(m)
        best_s = best_r = None
        for _ in range(args.repeat):
            s = structlp_fit(X, Y)
            r = raw_clarabel(X, Y)
            best_s = s if best_s is None or s["total"] < best_s["total"] else best_s
            best_r = r if best_r is None or r["total"] < best_r["total"] else best_r
        s, r = best_s, best_r
        diff = abs(s["objective"] - r["objective"]) / abs(r["objective"])
        ratio = s["total"] / r["total"]
        rows.append((m, s, r, ratio, diff))
        print(f"{m:>6} | {s['prepare']:>13.3f} {s['build']:>7.3f} {s['solve']:>8.3f} "
              f"{s['total']:>8.3f} | {r['build']:>9.3f} {r['solve']:>8.3f} {r['total']:>8.3f} | "
              f"{ratio:>7.3f} | {diff:>13.2e}")
    print("* structlp 'solve' is cvxpy.Problem.solve: cvxpy's compilation to Clarabel's form "
          "plus Clarabel itself.")
    print("fit/raw = structlp's whole fit (validation, dualization, cvxpy, Clarabel) over the raw "
          "Clarabel build + solve of the same QP.")
    if args.json:
        write_json(args.json, rows, args.repeat, started)
    return rows


def write_json(path, rows, repeat, started):
    """The table in the schema of benchmarks/report.py."""
    cols = [("m", "examples m", None), ("prepare", "structlp prepare", "s"),
            ("build", "build", "s"), ("solve", "cvxpy solve", "s"), ("fit", "structlp fit", "s"),
            ("raw_total", "raw build + solve", "s"), ("ratio", "fit / raw", None),
            ("rel_obj_diff", "relative objective difference", None)]
    table = {"columns": [dict(key=k, label=lab, **({"unit": u} if u else {}),
                              **({"ratio": True} if k == "ratio" else {}),
                              **({"format": ".1e"} if k == "rel_obj_diff" else {}),
                              **({"plot": True} if k in ("fit", "raw_total") else {}))
                         for k, lab, u in cols],
             "rows": [{"m": m, "prepare": s["prepare"], "build": s["build"], "solve": s["solve"],
                       "fit": s["total"], "raw_total": r["total"], "ratio": ratio,
                       "rel_obj_diff": diff} for m, s, r, ratio, diff in rows]}
    report.write(
        path, name="joint_qp", title="Joint QP: structlp against the raw solver",
        description=("The joint min-max QP of m bipartite 10x10 assignments (d = 20 edge "
                     "features, noisy planted model, Hamming loss, C = 1), fitted by "
                     "MaxMarginLearner (validation, dualization, cvxpy, Clarabel), against the "
                     f"same QP built with scipy.sparse and solved by Clarabel. Wall seconds, "
                     f"best of {repeat}; the objectives must agree."),
        floor=("raw Clarabel", "the same QP assembled from stacked sparse matrices and solved "
               "with Clarabel's Python API, no cvxpy; the ratio is structlp's whole fit over "
               "its build + solve"),
        tables=[table], modules=("clarabel",), started=started, runs=repeat,
        runs_note=(f"the fastest of {repeat} runs of each side, alternating" if repeat > 1
                   else "a single run"),
        notes=["cvxpy solve is cvxpy.Problem.solve: cvxpy's compilation to Clarabel's form "
               "plus Clarabel itself."])


if __name__ == "__main__":
    main()
