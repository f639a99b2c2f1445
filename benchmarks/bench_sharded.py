"""ShardedFrankWolfeLearner on a LocalCluster: memory of the driver and the workers,
bytes per round, time per round, on synthetic assignments generated on the workers.

Each partition makes its own 3 x 3 assignment examples (3 features per edge, a planted
w shared by all, Gaussian noise) from its own seed, so the driver never holds an
example.  Reported: the driver's peak RSS (this process, which also runs the local
scheduler), each worker's peak RSS before and after the fit, the bytes the driver
sends and receives per round, the seconds per round and per exact check, the rounds
and the certified gap.  With ``--kill-after R`` one worker process is killed after
round R, and the fit must still certify its objective.

    nice -n 10 python benchmarks/bench_sharded.py --n-examples 1000000 --json out.json
"""

import argparse
import json
import os
import platform
import resource
import signal
import sys
import time
from datetime import datetime, timezone

import numpy as np


def make_partition(seed, m, w0, noise=0.5):
    """``m`` planted 3 x 3 assignments, made on the worker from ``seed``."""
    from scipy.optimize import linear_sum_assignment
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3, 3, w0.size))
    S = X @ w0 + noise * rng.normal(size=(m, 3, 3))
    out = []
    for x, s in zip(X, S):
        r, c = linear_sum_assignment(s, maximize=True)
        y = np.zeros((3, 3), dtype=int)
        y[r, c] = 1
        out.append((x, y))
    return out


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-examples", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--C", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--max-iter", type=int, default=30)
    ap.add_argument("--kill-after", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import dask
    import distributed
    from structlp.learners.sharded import ShardedFrankWolfeLearner
    from structlp.structures import BipartiteMatching

    w0 = np.random.default_rng(0).normal(size=3)
    K, m = args.partitions, args.n_examples
    sizes = [m // K + (k < m % K) for k in range(K)]
    rss_start = peak_rss_mb()
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                  processes=True, dashboard_address=None,
                                  memory_limit=0) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.run(lambda: None)
        rss_idle = client.run(peak_rss_mb)
        pids = list(client.run(os.getpid).values())
        parts = [dask.delayed(make_partition)(1000 + k, sizes[k], w0) for k in range(K)]
        rounds = []

        def on_round(info):
            rounds.append(dict(info))
            print(f"round {info['iteration']}: {info['time']:.1f} s, "
                  f"gap estimate {info['gap_estimate']:.4g}"
                  + (f", objective {info['objective']:.6g}, gap {info['duality_gap']:.3g}"
                     if "objective" in info else ""), flush=True)
            if args.kill_after and info["iteration"] == args.kill_after:
                os.kill(pids[0], signal.SIGKILL)
                print("killed worker", pids[0], flush=True)

        cpu0, t0 = time.process_time(), time.perf_counter()
        est = ShardedFrankWolfeLearner(BipartiteMatching(), C=args.C, tol=args.tol,
                                       max_iter=args.max_iter, random_state=0,
                                       client=client, scheduler_timeout=120,
                                       callback=on_round)
        est.fit(parts)
        wall, driver_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        rss_workers = client.run(peak_rss_mb)
    hist = est.history_
    times = [h["time"] for h in hist]
    result = dict(
        name="bench_sharded",
        machine=dict(platform=platform.platform(), python=sys.version.split()[0],
                     cpus=os.cpu_count(), load=os.getloadavg()),
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        floor=("driver peak RSS independent of the number of examples, < 300 MB; "
               "each worker about its share"),
        n_examples=est.n_examples_, partitions=K, workers=args.workers, C=args.C,
        tol=args.tol, rounds=est.n_iter_, converged=est.converged_,
        objective=est.objective_, duality_gap=est.duality_gap_,
        relative_gap=est.duality_gap_ / est.objective_, restarts=est.n_restarts_,
        wall_s=wall, driver_cpu_s=driver_cpu, round_end_times_s=times,
        driver_peak_rss_mb=peak_rss_mb(), driver_rss_before_cluster_mb=rss_start,
        worker_peak_rss_mb=sorted(rss_workers.values()),
        worker_rss_idle_mb=sorted(rss_idle.values()),
        bytes_per_round=est.bytes_per_round_,
        ratios=dict(driver_peak_over_floor=peak_rss_mb() / 300.0),
    )
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
