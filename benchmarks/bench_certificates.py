"""Certificate QPs (each slack) vs the exact structured hinge: gap, size, time, growth.

Three tables (every QP solved by CLARABEL; times are wall and CPU seconds of ``fit``,
build + solve, CPU by ``time.process_time``):

1. **slacks** (default): noisy planted data (a planted ``w0``; in 25% of the examples
   the true output is replaced by the best output for random scores), C = 1, on
   spanning trees, perfect matchings, square and rectangular bipartite matchings
   and matchings (perfect matchings and matchings with either certificate).  For each slack (``two_sided``, ``part``,
   ``shared``): the QP's size (variables, constraint rows), time, its objective
   relative to the exact structured-hinge optimum (``CuttingPlaneLearner``,
   tol 1e-7, blossom / spanning-tree / Hungarian oracles), the exact objective at
   the slack's ``w`` relative to the same optimum, and how often ``w = 0``
   (collapse) while the exact ``w`` is not; over ``--seeds`` training sets.
2. **trees**: spanning trees of the complete graph on n = 5..30 nodes: the exact
   min-max QP through the rooted-flow extended formulation
   (``formulation="minmax"``) vs the two-sided certificate QP vs the cutting
   plane: size, time, objective.
3. **matchings**: perfect matchings of the complete graph on n = 6..14 nodes: Edmonds'
   odd-set certificate (the default) vs the alternating cycles of Taskar's Eq. 13, both
   two-sided, vs the cutting plane: odd sets per example, size, time, gaps.
4. ``--growth``: the separable hard-margin growth table of the previous release
   (bipartite min-max / certificate / cutting plane, trees, perfect matchings,
   disulfide).

    python benchmarks/bench_certificates.py            # tables 1, 2 and 3
    python benchmarks/bench_certificates.py --quick
    python benchmarks/bench_certificates.py --growth [--noisy]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from structlp import MaxMarginLearner
from structlp.learners.cutting_plane import CuttingPlaneLearner
from structlp.structures import BipartiteMatching, Matching, PerfectMatching, SpanningTree


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


def fit_cpu(est, X, Y):
    """Fit; return (wall s, CPU s)."""
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(X, Y)
    return time.perf_counter() - t0, time.process_time() - c0


def exact_objective(est, X, Y):
    """1/2 |w|^2 + sum_i hinge_i(w) (C = 1) at a fitted learner's w, exact hinges."""
    return 0.5 * est.coef_ @ est.coef_ + est.hinge_losses(X, Y).sum()


def mean_max(values):
    """``mean [max]`` of relative gaps, as the tables print them."""
    return f"{np.mean(values):>+8.4f} [{np.max(values):>+7.4f}]"


def qp_size(est):
    """(variables, constraint rows) of a fitted learner's compiled QP."""
    p = getattr(est, "problem_", None)
    if p is None:                        # a learner without one compiled QP
        return None, None
    return sum(v.size for v in p.variables()), sum(c.size for c in p.constraints)


def noisy(model, rng, m, n, d, flip=0.25):
    """Planted data with a fraction ``flip`` of true outputs replaced by random ones."""
    w0 = rng.normal(size=d)
    X, Y = [], []
    for _ in range(m):
        if isinstance(model, BipartiteMatching):
            x = rng.normal(size=(n[0], n[1], d))
        else:
            x = rng.normal(size=(n, n, d))
            x = (x + x.transpose(1, 0, 2)) / 2
        if isinstance(model, Matching):
            x = np.concatenate([x, np.ones(x.shape[:2] + (1,))], axis=-1)
        s = model.features(model.check_x(x)) @ np.concatenate(
            [w0, [-0.5]] if isinstance(model, Matching) else [w0])
        if rng.random() < flip:
            s = rng.normal(size=s.shape)
        X.append(x)
        Y.append(model.inference(x, s))
    return X, Y


SLACKS = ("two_sided", "part", "shared")


def slack_table(cases, m, seeds, d=4):
    """Table 1 rows: per case and slack, means over seeds."""
    rows = []
    for name, model, n in cases:
        acc = {sl: dict(gap=[], at_w=[], collapse=0, wall=[], cpu=[], size=None)
               for sl in SLACKS}
        acc["exact"] = dict(wall=[], cpu=[], zero=0)
        for seed in range(seeds):
            X, Y = noisy(model, np.random.default_rng(seed), m, n, d)
            ref = CuttingPlaneLearner(model, C=1.0, tol=1e-7)
            wall, cpu = fit_cpu(ref, X, Y)
            acc["exact"]["wall"].append(wall)
            acc["exact"]["cpu"].append(cpu)
            if np.linalg.norm(ref.coef_) < 1e-6:
                acc["exact"]["zero"] += 1
            for sl in SLACKS:
                est = MaxMarginLearner(model, C=1.0, formulation="certificate", slack=sl)
                wall, cpu = fit_cpu(est, X, Y)
                exact_at_w = exact_objective(est, X, Y)
                a = acc[sl]
                a["wall"].append(wall)
                a["cpu"].append(cpu)
                a["size"] = qp_size(est)
                a["gap"].append(est.objective_ / ref.objective_ - 1)
                a["at_w"].append(exact_at_w / ref.objective_ - 1)
                a["collapse"] += int(np.linalg.norm(est.coef_) < 1e-6 <= np.linalg.norm(ref.coef_))
        rows.append(dict(structure=name, n=n, m=m, seeds=seeds, exact=acc["exact"],
                         **{sl: acc[sl] for sl in SLACKS}))
    return rows


def print_slack_table(rows):
    print("Table 1. Certificate slacks on noisy data (C=1): objective and exact objective at w "
          "relative to the exact-hinge optimum (cutting plane), mean [max] over seeds")
    print(f"{'structure':<23} {'n':>6} {'slack':>9} {'vars':>6} {'rows':>6} {'wall s':>7} "
          f"{'CPU s':>6} {'QP obj/exact-1':>17} {'exact(w)/opt-1':>17} {'w=0':>5}")
    for r in rows:
        for sl in SLACKS:
            a = r[sl]
            print(f"{r['structure']:<23} {str(r['n']):>6} {sl:>9} {a['size'][0]:>6} "
                  f"{a['size'][1]:>6} {np.mean(a['wall']):>7.3f} {np.mean(a['cpu']):>6.3f} "
                  f"{mean_max(a['gap'])} {mean_max(a['at_w'])} "
                  f"{a['collapse']:>2}/{r['seeds']}")
        e = r["exact"]
        print(f"{'':<23} {'':>6} {'(exact)':>9} {'':>6} {'':>6} {np.mean(e['wall']):>7.3f} "
              f"{np.mean(e['cpu']):>6.3f}   cutting plane; exact w = 0 in {e['zero']}/{r['seeds']}")


def tree_table(sizes, m, d=4):
    """Table 2 rows: spanning trees, exact min-max QP vs certificate vs cutting plane."""
    rows = []
    for n in sizes:
        X, Y = noisy(SpanningTree(), np.random.default_rng(n), m, n, d)
        row = {"n": n, "m": m}
        for label, est in (("minmax", MaxMarginLearner(SpanningTree(), C=1.0,
                                                       formulation="minmax")),
                           ("certificate", MaxMarginLearner(SpanningTree(), C=1.0,
                                                            formulation="certificate")),
                           ("cutting plane", CuttingPlaneLearner(SpanningTree(), C=1.0,
                                                                 tol=1e-6))):
            wall, cpu = fit_cpu(est, X, Y)
            size = qp_size(est)
            row[label] = dict(wall=wall, cpu=cpu, objective=est.objective_, size=size)
        rows.append(row)
    return rows


def print_tree_table(rows):
    print("\nTable 2. Spanning trees (complete graph, noisy, C=1): exact min-max QP (extended "
          "formulation) vs two-sided certificate QP vs cutting plane")
    print(f"{'n':>3} {'m':>3} | {'minmax vars/rows':>17} {'wall':>7} {'CPU':>7} {'objective':>11} | "
          f"{'cert vars/rows':>15} {'wall':>6} {'CPU':>6} {'obj/exact-1':>11} | "
          f"{'cut wall':>8} {'CPU':>6} {'obj/minmax-1':>12}")
    for r in rows:
        a, b, c = r["minmax"], r["certificate"], r["cutting plane"]
        print(f"{r['n']:>3} {r['m']:>3} | {a['size'][0]:>8}/{a['size'][1]:<8} {a['wall']:>7.2f} "
              f"{a['cpu']:>7.2f} {a['objective']:>11.5f} | {b['size'][0]:>7}/{b['size'][1]:<7} "
              f"{b['wall']:>6.2f} {b['cpu']:>6.2f} {b['objective'] / a['objective'] - 1:>+11.2e} | "
              f"{c['wall']:>8.2f} {c['cpu']:>6.2f} {c['objective'] / a['objective'] - 1:>+12.2e}")
    print("growth exponent p in CPU time ~ n**p: " + ", ".join(
        f"{lab}: {growth([dict(n=r['n'], t=(r[lab]['cpu'],)) for r in rows], 't'):.2f}"
        for lab in ("minmax", "certificate", "cutting plane")))


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


#: Table 3's label of each perfect-matching certificate.
MATCHING_LABELS = {"odd_sets": "odd_sets", "alt_cycle": "alternating_cycle"}


def matching_table(sizes, m, seeds, d=4):
    """Table 3 rows: perfect matchings of n nodes, noisy data, C = 1: the odd-set and the
    alternating-cycle certificates (two-sided slack) against the cutting plane."""
    from structlp.certificates import n_tight_odd_sets
    rows = []
    for n in sizes:
        row = dict(n=n, m=m, seeds=seeds,
                   n_odd_sets=sum(n_tight_odd_sets(n, n // 2, j, perfect=True)
                                  for j in range(1, n // 2 + 1)))
        for label in MATCHING_LABELS:
            row[label] = dict(cpu=[], gap=[], at_w=[], size=None)
        row["exact"] = dict(cpu=[])
        for seed in range(seeds):
            X, Y = noisy(PerfectMatching(), np.random.default_rng(1000 + seed), m, n, d)
            ref = CuttingPlaneLearner(PerfectMatching(), C=1.0, tol=1e-7)
            row["exact"]["cpu"].append(fit_cpu(ref, X, Y)[1])
            for label, cert in MATCHING_LABELS.items():
                est = MaxMarginLearner(PerfectMatching(certificate=cert), C=1.0,
                                       formulation="certificate")
                a = row[label]
                a["cpu"].append(fit_cpu(est, X, Y)[1])
                a["size"] = qp_size(est)
                a["gap"].append(est.objective_ / ref.objective_ - 1)
                a["at_w"].append(exact_objective(est, X, Y) / ref.objective_ - 1)
        rows.append(row)
    return rows


def print_matching_table(rows):
    print("\nTable 3. Perfect matchings of complete graphs, noisy data (C=1, two-sided slack): "
          "Edmonds' odd-set certificate vs the alternating cycles (Eq. 13) vs the cutting "
          "plane; CPU s of fit, mean; gaps mean [max] over seeds")
    print(f"{'n':>3} {'odd sets':>8} {'certificate':>12} {'vars':>6} {'rows':>7} {'CPU s':>6} "
          f"{'QP obj/exact-1':>17} {'exact(w)/opt-1':>17} {'cut. plane CPU s':>17}")
    for r in rows:
        for label in MATCHING_LABELS:
            a = r[label]
            print(f"{r['n']:>3} {r['n_odd_sets'] if label == 'odd_sets' else '':>8} {label:>12} "
                  f"{a['size'][0]:>6} {a['size'][1]:>7} {np.mean(a['cpu']):>6.3f} "
                  f"{mean_max(a['gap'])} {mean_max(a['at_w'])} "
                  f"{np.mean(r['exact']['cpu']) if label == 'odd_sets' else '':>17.5}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--growth", action="store_true",
                    help="the separable growth table of the previous release instead")
    ap.add_argument("--noisy", action="store_true", help="with --growth: noisy data, C=1")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--cases", default=None,
                    help="comma-separated words of the structures of table 1 to run (e.g. "
                         "'matching,5x3'); table 2 is then skipped")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.growth:
        return growth_main(args)
    seeds = args.seeds or (2 if args.quick else 5)
    alt, odd = dict(certificate="alternating_cycle"), dict(certificate="odd_sets")
    cases = [("spanning tree", SpanningTree(), 5), ("spanning tree", SpanningTree(), 8),
             ("perfect m., odd sets", PerfectMatching(**odd), 6),
             ("perfect m., alt. cycles", PerfectMatching(**alt), 6),
             ("perfect m., odd sets", PerfectMatching(**odd), 10),
             ("perfect m., alt. cycles", PerfectMatching(**alt), 10),
             ("bipartite", BipartiteMatching(), (5, 5)),
             ("bipartite", BipartiteMatching(), (5, 3)),
             ("matching, odd sets", Matching(**odd), 4),
             ("matching, graph copy", Matching(**alt), 4),
             ("matching, odd sets", Matching(**odd), 6),
             ("matching, graph copy", Matching(**alt), 6)]
    if not args.quick:
        cases.insert(2, ("spanning tree", SpanningTree(), 10))
    if args.cases:
        words = args.cases.split(",")
        cases = [c for c in cases if any(
            w in f"{c[0]} {c[2][0]}x{c[2][1]}" if isinstance(c[2], tuple) else w in c[0]
            for w in words)]
    print("(machine shared with other jobs: wall seconds are inflated, CPU seconds less so)")
    rows1 = slack_table(cases, 10, seeds)
    print_slack_table(rows1)
    rows2 = [] if args.cases else tree_table([5, 8, 12] if args.quick else [5, 10, 15, 20, 30], 8)
    if rows2:
        print_tree_table(rows2)
    rows3 = [] if args.cases else matching_table(
        [6, 8, 10] if args.quick else [6, 8, 10, 12, 14], 8, seeds)
    if rows3:
        print_matching_table(rows3)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"slacks": rows1, "trees": rows2, "matchings": rows3}, fh, indent=1,
                      default=str)


def growth_main(args):
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
