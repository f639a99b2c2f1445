"""Benchmarks of structlp.agm.

1. Closed-form vs LP node games (the issue asks for >= 50x).
2. One epoch of the subgradient method vs chain length n = 10..1000 (inner LP and
   Eq. 7 dual decomposition): seconds per node should stay flat (linear growth).
3. The Eq. 7 dual decomposition: how often it certifies the inner maximum, in how
   many iterations; for the squared loss with position weights, with and without
   the floor on the level gap.
4. The tree CRF's vectorized (level-synchronous) sum-product vs per-node messages.
5. The full CK+ emotion-intensity experiment (20 splits; skipped when the data are
   absent), wall time against the 20-minute budget.
6. Junction trees (§3.2.4): one subgradient epoch vs the number of cliques (cycles,
   width 2), grown by longer cycles and by more 10-node cycles, with HiGHS's pivots per
   clique and CPU per pivot and the fitted growth exponents (linear in the number of
   examples; about quadratic in one example's cliques, because one LP per example puts
   O(cliques) pivots of O(cliques) work each in every solve), and vs the treewidth (path
   powers, n = 12: k^(w+1) per clique); the hot-started inner LP's pivots per solve after
   small steps vs the cycle's length;
   the exact QP vs the stochastic path on 20-node cycles; AGM, SSVM and CRF on
   planted loopy data against their chain versions.

Run: python benchmarks/bench_agm.py [--emotion-splits N] [--n-jobs J] [--skip-emotion]
     [--only-junction]
"""

import argparse
import time
from pathlib import Path

import numpy as np

from structlp.utils.progress import Progress
from structlp.agm import AdversarialGraphicalModel, check_tree_example, game_value
from structlp.agm.crf import tree_marginals
from structlp.agm.game import _game_lp_scipy, loss_matrix, node_games
from structlp.agm.inner import inner_dual_decomposition, inner_lp
from structlp.graphical.trees import Forest, forest_marginals, n_params, potentials

ROOT = Path(__file__).resolve().parents[1]


def bench_games(n=2000, k=3, rng=np.random.default_rng(0)):
    A = rng.normal(size=(n, k))
    w = np.ones(n)
    print(f"Node games, {n} nodes, k={k}: seconds and ratio LP / closed form")
    print(f"{'loss':<10} {'closed(vec)':>12} {'LP(HiGHS)':>12} {'LP(cvxpy)':>12} {'ratio':>8}")
    for loss in ("zero_one", "absolute", "squared"):
        t = time.perf_counter(); node_games(A, loss, w); tc = time.perf_counter() - t
        L = loss_matrix(loss, k)
        t = time.perf_counter()
        for a in A[:200]:
            _game_lp_scipy(a, L)
        tl = (time.perf_counter() - t) * n / 200
        t = time.perf_counter()
        for a in A[:20]:
            game_value(a, L, method="lp")
        tv = (time.perf_counter() - t) * n / 20
        print(f"{loss:<10} {tc:12.4f} {tl:12.3f} {tv:12.2f} {tl / tc:8.0f}x")


def _chains(rng, m, n, d_v=4, d_e=2, k=3):
    X = [{"node_features": rng.normal(size=(n, d_v)),
          "edge_features": rng.normal(size=(n - 1, d_e)),
          "parents": np.arange(-1, n - 1)} for _ in range(m)]
    Y = [rng.integers(0, k, size=n) for _ in range(m)]
    return X, Y


def _epoch_seconds(X, Y, inner, cpu=False, k=3):
    """Wall (or CPU) time of exactly one epoch of ``_fit_subgradient`` (no final objective)."""
    from structlp.agm.model import check_tree_dataset
    m = AdversarialGraphicalModel(k, max_epochs=1, average=False, random_state=0, inner=inner)
    k, loss_name, L = m._check_params()
    exs, Ys, dv, de = check_tree_dataset(X, Y, k, "bench", graphs=True)
    W = [np.ones(ex.n_nodes) for ex in exs]
    NL = [w[:, None, None] * L[None] for w in W]
    m.inner_stats_ = {"solves": 0, "lp_fallbacks": 0, "dd_iterations": 0}
    clock = time.process_time if cpu else time.perf_counter
    t = clock()
    m._fit_subgradient(exs, Ys, W, NL, k, dv, de, loss_name, L, Progress(m))
    return clock() - t, m.inner_stats_


def bench_epoch(lengths=(10, 30, 100, 300, 1000), m=5, rng=np.random.default_rng(1)):
    print(f"One subgradient epoch ({m} chains, zero-one loss) vs chain length n")
    print(f"{'n':>6} {'inner=lp s':>11} {'ms/node':>8} {'inner=dd s':>11} {'ms/node':>8} "
          f"{'dd its':>7} {'LP fallbacks':>13}")
    for n in lengths:
        X, Y = _chains(rng, m, n)
        t_lp, _ = _epoch_seconds(X, Y, "lp")
        t_dd, st = _epoch_seconds(X, Y, "dual_decomposition")
        print(f"{n:6d} {t_lp:11.3f} {t_lp / (m * n) * 1e3:8.3f} {t_dd:11.3f} "
              f"{t_dd / (m * n) * 1e3:8.3f} {st['dd_iterations']:7.0f} "
              f"{st['lp_fallbacks']:6d}/{st['solves']}")


def bench_dual_decomposition(trials=30, rng=np.random.default_rng(2)):
    print(f"Eq. 7 dual decomposition vs the exact inner LP ({trials} random trees/chains, "
          "n = 4..14, k = 3, max_iter = 300, tol = 1e-6)")
    print(f"{'loss':<10} {'certified':>10} {'mean its':>9} {'median gap':>11} {'max gap':>9} "
          f"{'ms (dd)':>8} {'ms (LP)':>8}")
    for loss in ("zero_one", "absolute", "squared"):
        its, ok_count, gaps, t_dd, t_lp = [], 0, [], 0.0, 0.0
        for trial in range(trials):
            n, k = int(rng.integers(4, 15)), 3
            par = np.arange(-1, n - 1) if trial % 2 else np.array(
                [-1] + [int(rng.integers(0, j)) for j in range(1, n)])
            ex = check_tree_example({"node_features": rng.normal(size=(n, 3)),
                                     "edge_features": rng.normal(size=(n - 1, 2)),
                                     "parents": par})
            b, B = potentials(ex, rng.normal(size=n_params(3, 2, k)), k)
            w = rng.uniform(0.5, 2, size=n)
            NL = w[:, None, None] * loss_matrix(loss, k)[None]
            t = time.perf_counter(); v = inner_lp(ex, b, B, NL)[0]; t_lp += time.perf_counter() - t
            t = time.perf_counter()
            v2, _, _, _, ok, it = inner_dual_decomposition(ex, b, B, loss, w, None, NL,
                                                           max_iter=300, tol=1e-6)
            t_dd += time.perf_counter() - t
            its.append(it); ok_count += ok; gaps.append((v - v2) / max(1.0, abs(v)))
        print(f"{loss:<10} {ok_count:6d}/{trials:<3d} {np.mean(its):9.1f} {np.median(gaps):11.1e} "
              f"{np.max(gaps):9.1e} {t_dd / trials * 1e3:8.1f} {t_lp / trials * 1e3:8.1f}")


def bench_level_floor(trials=100, max_iter=200):
    """Squared loss with normalized position weights on random chains (n = 8..19), the
    case the paper's experiment uses: certified fraction with the plain halving rule
    (floor 0) and with the level floor, as a function of the iteration budget."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import structlp.agm.inner as inner
    from agm_oracles import squared_chain_case
    L = loss_matrix("squared", 3)
    cases = [squared_chain_case(seed) for seed in range(trials)]
    default = inner._DELTA_FLOOR
    print(f"Eq. 7, squared loss, position weights, {trials} random chains (tol 1e-6): certified")
    print(f"{'floor':>6} " + " ".join(f"{'its<=' + str(m):>10}" for m in (max_iter, 5 * max_iter)))
    try:
        for floor in (0.0, default):
            inner._DELTA_FLOOR = floor
            row = []
            for m in (max_iter, 5 * max_iter):
                ok = sum(inner_dual_decomposition(ex, b, B, "squared", w, None,
                                                  w[:, None, None] * L[None], max_iter=m)[4]
                         for ex, b, B, w in cases)
                row.append(f"{ok:6d}/{trials:<3d}")
            print(f"{floor:6.2f} " + " ".join(row))
    finally:
        inner._DELTA_FLOOR = default


def bench_crf(m=120, n=18, rng=np.random.default_rng(3)):
    X, _ = _chains(rng, m, n, d_v=26, d_e=26)
    exs = [check_tree_example(x) for x in X]
    theta = rng.normal(size=n_params(26, 26, 3)) * 0.1
    F = Forest(exs)
    t = time.perf_counter()
    for _ in range(10):
        forest_marginals(F, *F.potentials(theta, 3))
    t_f = (time.perf_counter() - t) / 10
    t = time.perf_counter()
    for ex in exs:
        tree_marginals(ex, *potentials(ex, theta, 3))
    t_1 = time.perf_counter() - t
    print(f"CRF sum-product, {m} chains of {n} nodes (one objective+gradient's marginals): "
          f"forest (batched) {t_f * 1e3:.1f} ms, one tree at a time {t_1 * 1e3:.1f} ms")


def bench_emotion(splits=20, n_jobs=2):
    from structlp.agm.data import DataNotFoundError, ck_path
    from structlp.cli import load_problem
    try:
        ck_path()
    except DataNotFoundError as exc:
        print(f"Emotion experiment skipped: {exc}")
        return
    run = load_problem(ROOT / "problems" / "emotion_intensity.py").run
    t = time.perf_counter()
    res = run(splits=splits, n_jobs=n_jobs)
    dt = time.perf_counter() - t
    print(res["report"])
    print(f"Emotion experiment, {splits} splits, n_jobs={n_jobs}: {dt:.0f} s wall "
          f"({'within' if dt <= 1200 else 'OVER'} the 20-minute budget)")


def _graphs(rng, edges, m, k=3, d_v=4, d_e=2):
    n = int(np.max(edges)) + 1
    X = [{"node_features": rng.normal(size=(n, d_v)), "edges": edges,
          "edge_features": rng.normal(size=(len(edges), d_e))} for _ in range(m)]
    return X, [rng.integers(0, k, size=n) for _ in range(m)]


def _two_epochs(X, Y, inner, k=3):
    """CPU and wall seconds of one epoch (the second of two, so the LPs are built and hot),
    the first epoch's CPU seconds, the examples, the inner stats and the second epoch's
    simplex pivots (summed over its inner LP solves)."""
    from structlp.agm.inner import InnerLP
    from structlp.agm.model import check_tree_dataset
    exs, Ys, dv, de = check_tree_dataset(X, Y, k, "bench", graphs=True)
    m = AdversarialGraphicalModel(k, max_epochs=2, average=False, random_state=0, inner=inner)
    _, loss_name, L = m._check_params()
    W = [np.ones(ex.n_nodes) for ex in exs]
    NL = [w[:, None, None] * L[None] for w in W]
    m.inner_stats_ = {"solves": 0, "lp_fallbacks": 0, "dd_iterations": 0}
    pivots = [0]
    solve = InnerLP.solve

    def counting_solve(lp, b, B):          # HiGHS's count is per run: add it up
        out = solve(lp, b, B)
        pivots[0] += lp.h.getInfo().simplex_iteration_count
        return out
    InnerLP.solve = counting_solve
    try:
        c1, w1 = time.process_time(), time.perf_counter()
        m.max_epochs = 1
        m._fit_subgradient(exs, Ys, W, NL, k, dv, de, loss_name, L, Progress(m))
        c2, w2 = time.process_time(), time.perf_counter()
        pivots[0] = 0
        m._fit_subgradient(exs, Ys, W, NL, k, dv, de, loss_name, L, Progress(m))
        c3, w3 = time.process_time(), time.perf_counter()
    finally:
        InnerLP.solve = solve
    return (c3 - c2), (w3 - w2), (c2 - c1), exs, m.inner_stats_, pivots[0]


def _slope(x, y):
    """Least-squares growth exponent: the slope of log y against log x."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def bench_junction_cliques(lengths=(10, 30, 100, 300), m=3, dd_max=100, small=10,
                           rng=np.random.default_rng(5)):
    """One epoch vs the number of cliques, grown two ways: longer cycles (one LP per
    example, of ~28 columns per clique) and more cycles of ``small`` nodes (the same
    clique count in small LPs).  Where the time goes: HiGHS's dual simplex (over 95 %
    of the epoch), whose pivots per clique grow slowly with the LP and whose CPU per
    pivot grows about linearly with it, so one long cycle costs about cliques^2 while
    many small ones cost cliques^1."""
    from structlp.agm.synthetic import loopy_edges
    print(f"One subgradient epoch on junction trees vs the number of cliques ({m} cycles of "
          f"n nodes, or the same clique count in {small}-node cycles; width 2, k = 3, zero-one "
          "loss; epoch 1 builds the LPs, epoch 2 is hot and timed)")
    print(f"{'n':>5} {'cliques':>8} {'build s':>8} {'lp cpu s':>9} {'lp wall':>8} "
          f"{'ms/clique':>10} {'piv/clique':>11} {'us/pivot':>9} {'small cpu s':>12} "
          f"{'ms/clique':>10} {'dd cpu s':>9} {'ms/clique':>10} {'dd its':>7} {'fallbacks':>10}")
    rows = []
    for n in lengths:
        X, Y = _graphs(rng, loopy_edges("cycle", n)[0], m)
        c, w, build, exs, _, piv = _two_epochs(X, Y, "lp")
        cl = sum(len(ex.cliques) for ex in exs)
        Xs, Ys = _graphs(rng, loopy_edges("cycle", small)[0], max(1, round(m * n / small)))
        cs, _, _, exs_s, _, _ = _two_epochs(Xs, Ys, "lp")
        cl_s = sum(len(ex.cliques) for ex in exs_s)
        rows.append((cl, c, cl_s, cs))
        head = (f"{n:5d} {cl // m:8d} {build:8.3f} {c:9.3f} {w:8.3f} {c / cl * 1e3:10.3f} "
                f"{piv / cl:11.1f} {c / max(piv, 1) * 1e6:9.1f} {cs:12.3f} "
                f"{cs / cl_s * 1e3:10.3f}")
        if n > dd_max:               # the dual decomposition's recovery LPs: too slow here
            print(head + f" {'-':>9} {'-':>10} {'-':>7} {'-':>10}", flush=True)
            continue
        cd, _, _, _, st, _ = _two_epochs(X, Y, "dual_decomposition")
        its = st["dd_iterations"] / max(st["solves"], 1)
        print(head + f" {cd:9.3f} {cd / cl * 1e3:10.3f} {its:7.0f} "
              f"{st['lp_fallbacks']:4d}/{st['solves']}", flush=True)
    cl, c, cl_s, cs = map(np.array, zip(*rows))
    print(f"growth exponent of the epoch's CPU in the cliques (least squares, log-log): "
          f"longer cycles {_slope(cl, c):.2f} (last two points {_slope(cl[-2:], c[-2:]):.2f}), "
          f"more {small}-node cycles {_slope(cl_s, cs):.2f}")


def bench_inner_lp_pivots(lengths=(10, 30, 100, 300), steps=20, k=3,
                          rng=np.random.default_rng(0)):
    """The hot-started inner LP after small steps of theta (inner="lp"): simplex pivots.

    One cycle of n nodes is one example, hence one LP of ~28 columns per clique.  After a
    small step of theta (every clique's costs change) HiGHS's hot-started dual simplex
    needs more pivots per clique the larger the LP.  (In a real epoch the steps are
    larger, the pivots per clique grow more slowly and the CPU per pivot grows with the
    LP: see :func:`bench_junction_cliques`.)
    """
    from structlp.agm.game import loss_matrix
    from structlp.agm.inner import InnerLP
    from structlp.graphical.junction import check_graph_example
    from structlp.agm.synthetic import loopy_edges
    print(f"Hot-started inner LP on one n-cycle after {steps} steps theta += 0.05 N(0, I): "
          "pivots and CPU per solve")
    print(f"{'n':>5} {'cliques':>8} {'columns':>8} {'pivots':>8} {'pivots/clique':>14} "
          f"{'ms/solve':>9} {'us/pivot':>9} {'ms/clique':>10}")
    for n in lengths:
        edges = loopy_edges("cycle", n)[0]
        ex = check_graph_example({"node_features": rng.normal(size=(n, 3)), "edges": edges,
                                  "edge_features": rng.normal(size=(len(edges), 2))}, k)
        lp = InnerLP(ex, k, np.ones(n)[:, None, None] * loss_matrix("zero_one", k)[None])
        theta = rng.normal(size=n_params(3, 2, k))
        lp.solve(*potentials(ex, theta, k))
        pivots, cpu = 0, 0.0
        for _ in range(steps):
            theta = theta + 0.05 * rng.normal(size=theta.shape)
            b, B = potentials(ex, theta, k)
            c0 = time.process_time()
            lp.solve(b, B)
            cpu += time.process_time() - c0
            pivots += lp.h.getInfo().simplex_iteration_count
        cl = len(ex.cliques)
        print(f"{n:5d} {cl:8d} {lp.n_cols:8d} {pivots / steps:8.1f} {pivots / steps / cl:14.2f} "
              f"{cpu / steps * 1e3:9.3f} {cpu / max(pivots, 1) * 1e6:9.1f} "
              f"{cpu / steps / cl * 1e3:10.4f}")


def bench_junction_width(widths=(1, 2, 3, 4, 5), n=12, m=3, k=3, rng=np.random.default_rng(6)):
    print(f"One subgradient epoch vs the treewidth (path powers on {n} nodes: edges (i, j), "
          f"0 < j - i <= w, mixed orientations; {m} examples, k = {k}, inner LP, hot)")
    print(f"{'w':>3} {'exact':>6} {'cliques':>8} {'k^(w+1)':>8} {'parts':>7} {'cpu s':>8} "
          f"{'wall s':>8} {'us/clique-entry':>16}")
    for w in widths:
        # mixed orientations, so that w = 1 (a path) also takes the junction-tree code
        edges = np.array([(i, j) if i % 2 == 0 else (j, i)
                          for i in range(n) for j in range(i + 1, min(n, i + w + 1))])
        X, Y = _graphs(rng, edges, m, k=k)
        c, wall, _, exs, _, _ = _two_epochs(X, Y, "lp", k=k)
        ex = exs[0]
        cl = len(ex.cliques)
        parts = ex.tables(k).n_parts
        print(f"{ex.width:3d} {str(ex.width_exact):>6} {cl:8d} {k ** (ex.width + 1):8d} "
              f"{parts:7d} {c:8.3f} {wall:8.3f} {c / (m * parts) * 1e6:16.2f}")


def bench_cycle_qp_vs_subgradient(m=20, n=20, epochs=100, dd_epochs=5):
    from structlp.agm.synthetic import make_loopy_data
    X, _, Y = make_loopy_data("cycle", n_examples=m, n_nodes=n, random_state=0)
    print(f"Exact QP vs stochastic path, {m} examples on {n}-node cycles (k = 3, zero-one, "
          "reg = 0.1)")
    print(f"{'method':<28} {'cpu s':>8} {'wall s':>8} {'objective':>11} {'rel. excess':>12}")
    rows = []
    for label, kw in (("qp (CLARABEL)", dict(method="qp")),
                      (f"subgradient lp, {epochs} ep", dict(max_epochs=epochs)),
                      (f"subgradient dd, {dd_epochs} ep",
                       dict(max_epochs=dd_epochs, inner="dual_decomposition"))):
        c, w = time.process_time(), time.perf_counter()
        est = AdversarialGraphicalModel(3, reg=0.1, random_state=0, **kw).fit(X, Y)
        c, w = time.process_time() - c, time.perf_counter() - w
        if not rows:
            best = est.objective_
        print(f"{label:<28} {c:8.2f} {w:8.2f} {est.objective_:11.6f} "
              f"{(est.objective_ - best) / abs(best):12.2e}", flush=True)
        rows.append(label)


def bench_loopy_demo(n_train=100, n_test=100, n=8):
    import structlp
    from structlp.agm import JunctionTreeCRF
    from structlp.agm.synthetic import make_loopy_data
    from structlp.structures import JunctionTreeLabeling
    print(f"Planted loopy dependencies (make_loopy_data, n = {n}, k = 3, {n_train} train / "
          f"{n_test} test): test Hamming error (fraction of nodes), loopy graph vs its chain")
    print(f"{'structure':<11} {'AGM loopy':>10} {'AGM chain':>10} {'SSVM loopy':>11} "
          f"{'SSVM chain':>11} {'CRF loopy':>10} {'CRF chain':>10} {'cpu s':>7}")
    makers = (lambda: AdversarialGraphicalModel(3, reg=0.05, method="qp"),
              lambda: structlp.MaxMarginLearner(JunctionTreeLabeling(3), C=1.0),
              lambda: JunctionTreeCRF(3, reg=0.05))
    for structure in ("cycle", "skip_chain", "grid"):
        X, Xc, Y = make_loopy_data(structure, n_examples=n_train + n_test, n_nodes=n,
                                   random_state=0)
        c = time.process_time()
        errs = []
        for mk in makers:
            for XX in (X, Xc):
                P = mk().fit(XX[:n_train], Y[:n_train]).predict(XX[n_train:])
                errs.append(np.mean([np.mean(p != y) for p, y in zip(P, Y[n_train:])]))
        print(f"{structure:<11} " + " ".join(f"{e:10.3f}" for e in errs)
              + f" {time.process_time() - c:7.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emotion-splits", type=int, default=20)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--skip-emotion", action="store_true")
    ap.add_argument("--only-junction", action="store_true")
    args = ap.parse_args()
    for bench in (bench_junction_cliques, bench_inner_lp_pivots, bench_junction_width,
                  bench_cycle_qp_vs_subgradient, bench_loopy_demo):
        bench()
        print()
    if args.only_junction:
        raise SystemExit
    bench_games()
    print()
    bench_epoch()
    print()
    bench_dual_decomposition()
    print()
    bench_level_floor()
    print()
    bench_crf()
    if not args.skip_emotion:
        print()
        bench_emotion(args.emotion_splits, args.n_jobs)
