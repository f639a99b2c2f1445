"""Benchmarks of structlp.agm: closed-form vs LP node games; one subgradient epoch vs chain length.

Run: python benchmarks/bench_agm.py
"""

import time

import numpy as np

from structlp.agm import AdversarialGraphicalModel, game_value
from structlp.agm.game import _game_lp_scipy, loss_matrix, node_games


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


def bench_epoch(lengths=(10, 30, 100, 300, 1000), rng=np.random.default_rng(1)):
    print("One subgradient epoch (5 chains, zero-one loss, inner LP) vs chain length n")
    print(f"{'n':>6} {'seconds':>9} {'s per node':>11}")
    for n in lengths:
        X = [{"node_features": rng.normal(size=(n, 4)), "edge_features": rng.normal(size=(n - 1, 2)),
              "parents": np.arange(-1, n - 1)} for _ in range(5)]
        Y = [rng.integers(0, 3, size=n) for _ in range(5)]
        m = AdversarialGraphicalModel(3, max_epochs=1, average=False, random_state=0)
        t = time.perf_counter()
        m._check_params()
        from structlp.agm.model import check_tree_dataset
        exs, Ys, dv, de = check_tree_dataset(X, Y, 3, "bench")
        W = [np.ones(n)] * 5
        NL = [np.ones(n)[:, None, None] * loss_matrix("zero_one", 3)[None]] * 5
        m.inner_stats_ = {"solves": 0, "lp_fallbacks": 0, "dd_iterations": 0}
        m._fit_subgradient(exs, Ys, W, NL, 3, dv, de, "zero_one", loss_matrix("zero_one", 3))
        dt = time.perf_counter() - t
        print(f"{n:6d} {dt:9.3f} {dt / n * 1e3:9.3f}ms")


if __name__ == "__main__":
    bench_games()
    bench_epoch()
