"""Preparation of a training set (``structlp.compiler.prepare``): the vectorised path
(``prepare_batch`` of TreeLabeling and BipartiteMatching: packed arrays, the checks as
array operations) against the per-example hooks (``compiler.BATCH = False``, the path of
the previous release), in the same run, as the first-order learners prepare
(``operators=True``; the output polytopes built for assignments, not for tree labellings,
whose compiled path needs none).

Cases: OCR-like chains (4 to 12 letters, 26 labels, 128 node features, a constant edge
feature), the sharded benchmark's chains (6 letters, 4 labels, 5 features), random trees
(4 to 12 nodes, 5 labels, 16 node and 2 edge features) and 10 x 10 assignments (8
features per edge).  Reported per example: CPU microseconds (median of ``--repeats``
runs; the machine's load average at the start and the end), and from one more run of
each path under ``tracemalloc`` the bytes the prepared set keeps and the peak while
preparing it (the input examples not counted).

Then a sharded worker's first round in this process, for the sharded benchmark's chains,
the random trees and the 10 x 10 assignments: two partitions made one after the other as
ShardedFrankWolfeLearner makes them on a worker, with CPU per example of the generation,
the preparation (the checks, the prepared set, its block store), the starting contribution
with the scale check, and the first pass; everything between receiving a partition and its
first pass is what issue 39 bounds.

    python benchmarks/bench_prepare.py --examples 10000 --repeats 3 \
        --worker-examples 250000 --json benchmarks/results/prepare.json
"""

import argparse
import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))          # this checkout's structlp, not an installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # benchmarks/report.py: the results schema

GOAL_US = 30.0          # issue 39's goal per example


def chains(m, k, dv, lengths, seed=0, trees=False, de=1):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(m):
        n = int(rng.integers(lengths[0], lengths[1] + 1))
        par = np.arange(-1, n - 1)
        if trees:
            par = np.concatenate([[-1], [int(rng.integers(0, j)) for j in range(1, n)]])
        X.append({"node_features": rng.normal(size=(n, dv)),
                  "edge_features": (np.ones((n - 1, de)) if not trees
                                    else rng.normal(size=(n - 1, de))),
                  "parents": par})
        Y.append(rng.integers(0, k, size=n))
    return X, Y


def assignments(m, n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = list(rng.normal(size=(m, n, n, d)))
    Y = []
    for _ in range(m):
        y = np.zeros((n, n), dtype=np.int64)
        y[np.arange(n), rng.permutation(n)] = 1
        Y.append(y)
    return X, Y


def cases(m):
    from structlp.structures import BipartiteMatching, TreeLabeling
    return [
        ("OCR-like chains (26 labels, 128 features)", TreeLabeling(26),
         lambda: chains(m, 26, 128, (4, 12))),
        ("sharded benchmark's chains (4 labels, 5 features)", TreeLabeling(4),
         lambda: chains(m, 4, 5, (6, 6))),
        ("random trees (5 labels, 16 + 2 features)", TreeLabeling(5),
         lambda: chains(m, 5, 16, (4, 12), trees=True, de=2)),
        ("10 x 10 assignments (8 features)", BipartiteMatching(),
         lambda: assignments(m, 10, 8)),
    ]


def run(model, X, Y, batch):
    """``prepare`` as FrankWolfeLearner and the sharded learner call it: no polytopes for
    tree labellings (their compiled path uses max-sum), polytopes for assignments."""
    import structlp.compiler as compiler
    from structlp.structures import TreeLabeling
    compiler.BATCH = batch
    try:
        return compiler.prepare(model, X, Y, need_polytopes=not isinstance(model, TreeLabeling),
                                operators=True)
    finally:
        compiler.BATCH = True


def cpu_us(model, X, Y, batch, repeats):
    times = []
    for _ in range(repeats):
        gc.collect()
        t = time.process_time()
        data = run(model, X, Y, batch)
        times.append(time.process_time() - t)
        del data
    return 1e6 * float(np.median(times)) / len(X)


def memory_kb(model, X, Y, batch):
    """(kept, peak) kB per example: what the prepared set holds, and the peak over the
    input while preparing (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    data = run(model, X, Y, batch)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del data
    return (kept - base) / 1024 / len(X), (peak - base) / 1024 / len(X)


def worker_cases():
    """The in-process worker rounds: (name, model, make(seed, m) -> (x, y) pairs, share of
    --worker-examples per partition)."""
    from bench_sharded import make_chain_partition
    from structlp.structures import BipartiteMatching, TreeLabeling
    theta = np.random.default_rng(0).normal(size=4 * 5 + 4 * 4)

    def pairs(make):
        return lambda seed, m: list(zip(*make(m, seed)))

    return [
        ("chains of bench_sharded (6 letters, 4 labels, 5 features)", TreeLabeling(4),
         lambda seed, m: make_chain_partition(seed, m, theta), 1.0),
        ("random trees (5 labels, 16 + 2 features)", TreeLabeling(5),
         pairs(lambda m, seed: chains(m, 5, 16, (4, 12), seed=seed, trees=True, de=2)), 1.0),
        ("10 x 10 assignments (8 features)", BipartiteMatching(),
         pairs(lambda m, seed: assignments(m, 10, 8, seed=seed)), 0.2),
    ]


def worker_round(name, model, make, m, parts=2):
    """A sharded worker's first round, in this process: ``parts`` partitions of ``m``
    examples generated, prepared (ShardedFrankWolfeLearner's _make_shard: the checks, the
    prepared set and its block store), their starting contribution and the scale check
    (_shard_info) and passed once (_local_pass), one after the other as on a worker; CPU
    per example of each step, RSS over the warm process, and what the shards hold
    (bench_sharded.held_mb)."""
    from bench_sharded import current_rss_mb, held_mb
    from structlp.learners import sharded
    C = 1e-5
    warm = sharded._make_shard(make(1, 500), model, 0, None, {})
    info = sharded._shard_info(warm, C)
    sharded._local_pass(warm, info["w"], C, parts, [0, 0, 1], 1, True, 3, 10, 0)
    del warm
    gc.collect()
    base, peak = current_rss_mb(), 0.0
    cpu = dict(generate=0.0, prepare=0.0, start=0.0, first_pass=0.0, system=0.0)
    shards = []
    for k in range(parts):
        t = time.process_time()
        items = make(1000 + k, m)
        t1, s1 = time.process_time(), os.times().system
        shards.append(sharded._make_shard(items, model, k, None, {}))
        del items
        t2 = time.process_time()
        info = sharded._shard_info(shards[-1], C)
        t3 = time.process_time()
        cpu["system"] += os.times().system - s1
        sharded._local_pass(shards[-1], info["w"], C, parts, [0, k, 1], 1, True, 3, 10, 0)
        t4 = time.process_time()
        cpu["generate"] += t1 - t
        cpu["prepare"] += t2 - t1
        cpu["start"] += t3 - t2
        cpu["first_pass"] += t4 - t3
        peak = max(peak, current_rss_mb())
    held = held_mb(*[(sh.data, sh.blocks) for sh in shards])
    n = parts * m
    us = {k: 1e6 * v / n for k, v in cpu.items()}
    setup = us["prepare"] + us["start"]
    del shards
    gc.collect()
    return dict(case=f"{name}: {parts} partitions of {m}", m=n, **us, setup=setup,
                goal="yes" if setup <= GOAL_US else "no", held=held, grown=peak - base,
                ratio=(peak - base) / held, load=os.getloadavg()[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10000)
    ap.add_argument("--worker-examples", type=int, default=100000,
                    help="chains and trees per partition of the in-process worker rounds, "
                         "a fifth of it for the assignments (0: none)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=None,
                    help="run only the cases whose name contains this text (e.g. 'trees'); "
                         "for trying changes, not for the recorded results")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    started = report.machine()
    rows = []
    for name, model, make in cases(args.examples):
        if args.only and args.only not in name:
            continue
        X, Y = make()
        run(model, X[:50], Y[:50], True)            # imports and caches
        hooks = cpu_us(model, X, Y, False, args.repeats)
        vec = cpu_us(model, X, Y, True, args.repeats)
        kh, ph = memory_kb(model, X, Y, False)
        kv, pv = memory_kb(model, X, Y, True)
        row = dict(case=name, m=len(X), hooks=hooks, vec=vec, ratio=hooks / vec,
                   goal="yes" if vec <= GOAL_US else "no", kept_hooks=kh, kept_vec=kv,
                   peak_vec=pv, peak_ratio=pv / kv, load=os.getloadavg()[0])
        print(row, flush=True)
        rows.append(row)
    worker = []
    for name, model, make, share in (worker_cases() if args.worker_examples else []):
        if args.only and args.only not in name:
            continue
        worker.append(worker_round(name, model, make, max(1, int(share * args.worker_examples))))
        print(worker[-1], flush=True)
    end = [round(x, 2) for x in os.getloadavg()]
    columns = [{"key": "case", "label": "examples of"},
               {"key": "m", "label": "examples"},
               {"key": "hooks", "label": "per-example hooks", "unit": "CPU µs / example",
                "format": ".1f"},
               {"key": "vec", "label": "vectorised", "unit": "CPU µs / example",
                "format": ".1f"},
               {"key": "ratio", "label": "hooks / vectorised", "ratio": True},
               {"key": "goal", "label": f"vectorised <= {GOAL_US:g} µs"},
               {"key": "kept_hooks", "label": "kept, hooks", "unit": "kB / example",
                "format": ".2f"},
               {"key": "kept_vec", "label": "kept, vectorised", "unit": "kB / example",
                "format": ".2f"},
               {"key": "peak_vec", "label": "peak while preparing, vectorised",
                "unit": "kB / example", "format": ".2f"},
               {"key": "peak_ratio", "label": "peak / kept, vectorised", "ratio": True},
               {"key": "load", "label": "load average after the case", "format": ".1f"}]
    wcolumns = [{"key": "case", "label": "worker's share"},
                {"key": "m", "label": "examples"},
                {"key": "generate", "label": "generation", "unit": "CPU µs / example",
                 "format": ".1f"},
                {"key": "prepare", "label": "preparation (shard)", "unit": "CPU µs / example",
                 "format": ".1f"},
                {"key": "start", "label": "scale check and starting contribution",
                 "unit": "CPU µs / example", "format": ".1f"},
                {"key": "setup", "label": "all before the first pass",
                 "unit": "CPU µs / example", "format": ".1f"},
                {"key": "system", "label": "of which system time (first touches of memory)",
                 "unit": "CPU µs / example", "format": ".1f"},
                {"key": "goal", "label": f"before the first pass <= {GOAL_US:g} µs"},
                {"key": "first_pass", "label": "first pass",
                 "unit": "CPU µs / example", "format": ".1f"},
                {"key": "held", "label": "prepared data held", "unit": "MB", "format": ".0f"},
                {"key": "grown", "label": "RSS over the warm process, at most", "unit": "MB",
                 "format": ".0f"},
                {"key": "ratio", "label": "peak growth / prepared data", "ratio": True},
                {"key": "load", "label": "load average", "format": ".1f"}]
    notes = [f"CPU time (time.process_time), median of {args.repeats} runs per path; the "
             "machine is shared, so the ratios (same run) mean more than the microseconds. "
             f"Load average at the start {started.get('load')}, at the end {end}.",
             "Memory by tracemalloc (numpy's buffers included), over the input examples: "
             "'kept' is what the prepared TrainingData holds (for chains and trees their "
             "features packed as float, the given arrays not referenced), 'peak' the most "
             "held at once while preparing it.",
             "The per-example hooks are the path of the previous release (compiler.BATCH = "
             "False); the vectorised path refuses the same examples with the same messages "
             "(tests/test_prepare_batch.py).",
             "The worker rounds: CPU per example of each step; 'all before the first pass' "
             "is the preparation and the starting contribution (the issue's bound), its "
             "system part mostly the kernel's page faults on the new arrays (they grow "
             "with the machine's load and memory pressure); RSS "
             "growth over the process after a warm-up round of 500 examples, against what "
             "the shards hold (bench_sharded.held_mb)."]
    if args.json:
        report.write(args.json, name="prepare",
                     title="Preparing a training set: vectorised against per-example hooks",
                     description="structlp.compiler.prepare(model, X, Y, operators=True) on "
                                 "chains, trees and assignments: CPU per example and memory "
                                 "of the vectorised path (prepare_batch) and of the "
                                 "per-example hooks, in one run.",
                     floor=("per-example hooks", "the same prepare through the model's "
                            "hooks one example at a time (compiler.BATCH = False): the "
                            "previous release's path"),
                     tables=[{"columns": columns, "rows": rows}]
                     + ([{"caption": "A sharded worker's first round, in one process (its "
                                     "partitions one after the other)",
                          "columns": wcolumns, "rows": worker}] if worker else []),
                     notes=notes,
                     started=started, runs=args.repeats, runs_note="median")


if __name__ == "__main__":
    main()
