"""Certificate QP vs cutting plane vs min-max QP: time to the objective, and growth.

Synthetic planted data (``m`` examples, random symmetric edge features, the
outputs a planted ``w0`` plus Gaussian score noise picks) on graphs of growing
size ``n``, for each structure:

* bipartite matching (n x n): min-max QP, certificate QP (both exact), cutting plane;
* spanning tree (complete graph on n nodes): certificate QP (exact), cutting plane;
* perfect matching (complete graph, n even): certificate QP (conservative), cutting plane;

and the disulfide data (if ``disulfinder-data`` is installed).  Every QP is
solved by CLARABEL; the cutting plane (``tol=1e-4``) solves its master QPs
with CLARABEL and its oracles are the combinatorial algorithms.  Reported:
wall-clock seconds of ``fit`` (build + solve), the objective reached, its
relative difference to the first exact method of the row, and the growth
exponent ``time ~ n**p`` (log-log least squares over the sizes).

By default the data are separable (no noise, d = max(5, 2n) features) and
C=1e4, so the optimal slacks
vanish and every exact method must reach the same objective; the perfect-matching
gap then measures the certificate's conservatism.  With ``--noisy`` (score noise
1, C=1) slacks are active, and the certificate's slack (one per example, on
every certificate row) is not the hinge loss, so its objective is a different
number: only the times compare.

    python benchmarks/bench_certificates.py            # ~2 minutes
    python benchmarks/bench_certificates.py --quick
    python benchmarks/bench_certificates.py --noisy
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from structlp import MaxMarginLearner
from structlp.cutting_plane import CuttingPlaneLearner
from structlp.structures import BipartiteMatching, PerfectMatching, SpanningTree


def planted(model, rng, m, n, d, noise, bipartite=False):
    w0 = rng.normal(size=d)
    X = []
    for _ in range(m):
        x = rng.normal(size=(n, n, d))
        X.append(x if bipartite else (x + x.transpose(1, 0, 2)) / 2)
    Y = []
    for x in X:
        s = model.features(model.check_x(x)) @ w0
        Y.append(model.inference(x, s + noise * rng.normal(size=s.shape)))
    return X, Y


def timed(est, X, Y):
    t0 = time.perf_counter()
    est.fit(X, Y)
    return time.perf_counter() - t0, est.objective_


def run_structure(name, model, methods, sizes, m, d, C, noise, seed, bipartite=False):
    rows = []
    for n in sizes:
        rng = np.random.default_rng(seed)
        # separable mode: enough features that a moderate w separates every example
        # with margin, so optimal slacks vanish and exact methods share the objective
        dn = d if noise else max(d, 2 * n)
        X, Y = planted(model, rng, m, n, dn, noise, bipartite)
        row = {"structure": name, "n": n, "m": m, "d": dn}
        for label, make in methods:
            sec, obj = timed(make(model, C), X, Y)
            row[label] = (sec, obj)
        rows.append(row)
    return rows


def growth(rows, label):
    ns = np.array([r["n"] for r in rows if label in r], dtype=float)
    ts = np.array([r[label][0] for r in rows if label in r])
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


QP = ("minmax QP", lambda mo, C: MaxMarginLearner(mo, C=C))
CERT = ("certificate QP", lambda mo, C: MaxMarginLearner(mo, C=C, formulation="certificate"))
CUT = ("cutting plane", lambda mo, C: CuttingPlaneLearner(mo, C=C, tol=1e-4))


def disulfide_rows(C, max_train):
    from structlp.datasets import DISULFIDE_DIR, load_disulfide
    if not (DISULFIDE_DIR / "dataset").is_file():
        return []
    D = load_disulfide()
    idx = np.random.default_rng(0).permutation(len(D["X"]))[:max_train]
    X = [D["X"][i] for i in idx]
    F = np.concatenate([x[np.triu_indices(len(x), 1)] for x in X])
    mu, sd = F.mean(0), F.std(0) + 1e-6
    X = [(x - mu) / sd for x in X]
    Y = [D["Y"][i] for i in idx]
    row = {"structure": "disulfide (PM)", "n": len(X), "m": len(X)}
    for label, make in (CERT, CUT):
        row[label] = timed(make(PerfectMatching(), C), X, Y)
    return [row]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--noisy", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    m, d = (10, 5) if args.quick else (20, 5)
    C, noise = (1.0, 1.0) if args.noisy else (1e4, 0.0)
    sizes_b = [4, 8, 12] if args.quick else [4, 8, 16, 24]
    sizes_t = [5, 8, 12] if args.quick else [5, 10, 20, 30]
    sizes_p = [6, 8, 12] if args.quick else [6, 10, 16, 24]
    rows = []
    rows += run_structure("bipartite", BipartiteMatching(), [QP, CERT, CUT], sizes_b, m, d, C,
                          noise, 0, bipartite=True)
    rows += run_structure("spanning tree", SpanningTree(), [CERT, CUT], sizes_t, m, d, C,
                          noise, 0)
    rows += run_structure("perfect matching", PerfectMatching(), [CERT, CUT], sizes_p, m, d, C,
                          noise, 0)
    rows += disulfide_rows(0.1, 60 if args.quick else 200)
    labels = [QP[0], CERT[0], CUT[0]]
    print(f"m={m} examples, d={'max(5, 2n)' if not noise else d} features, C={C}, score noise "
          f"{noise}; seconds (objective)")
    print(f"{'structure':<17} {'n':>4} " + " ".join(f"{lab:>26}" for lab in labels))
    for r in rows:
        cells = []
        for lab in labels:
            cells.append(f"{r[lab][0]:>9.2f} s ({r[lab][1]:>11.5g})" if lab in r else " " * 26)
        print(f"{r['structure']:<17} {r['n']:>4} " + " ".join(cells))
    print("\ngrowth exponent p in time ~ n**p:")
    for s in ("bipartite", "spanning tree", "perfect matching"):
        sub = [r for r in rows if r["structure"] == s]
        print(f"  {s:<17} " + ", ".join(f"{lab}: {growth(sub, lab):.2f}" for lab in labels
                                         if lab in sub[0]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
