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

Run: python benchmarks/bench_agm.py [--emotion-splits N] [--n-jobs J] [--skip-emotion]
"""

import argparse
import time
from pathlib import Path

import numpy as np

from structlp.agm import AdversarialGraphicalModel, check_tree_example, game_value
from structlp.agm.crf import tree_marginals
from structlp.agm.game import _game_lp_scipy, loss_matrix, node_games
from structlp.agm.inner import inner_dual_decomposition, inner_lp
from structlp.agm.trees import Forest, forest_marginals, n_params, potentials

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


def _epoch_seconds(X, Y, inner):
    """Wall time of exactly one epoch of ``_fit_subgradient`` (no final objective)."""
    from structlp.agm.model import check_tree_dataset
    m = AdversarialGraphicalModel(3, max_epochs=1, average=False, random_state=0, inner=inner)
    k, loss_name, L = m._check_params()
    exs, Ys, dv, de = check_tree_dataset(X, Y, k, "bench")
    W = [np.ones(ex.n_nodes) for ex in exs]
    NL = [w[:, None, None] * L[None] for w in W]
    m.inner_stats_ = {"solves": 0, "lp_fallbacks": 0, "dd_iterations": 0}
    t = time.perf_counter()
    m._fit_subgradient(exs, Ys, W, NL, k, dv, de, loss_name, L)
    return time.perf_counter() - t, m.inner_stats_


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


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emotion-splits", type=int, default=20)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--skip-emotion", action="store_true")
    args = ap.parse_args()
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
