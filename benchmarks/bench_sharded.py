"""ShardedFrankWolfeLearner on a LocalCluster: memory of the driver and the workers,
bytes per round, time per round, on synthetic examples generated on the workers.

Each partition makes its own examples from its own seed, so the driver never holds an
example: 3 x 3 assignments (3 features per edge, a planted w shared by all, Gaussian
noise; ``--model assignment``, the default) or chains (6 letters, 4 labels, 5 node
features; ``--model chain``, whose passes run as compiled kernels on the workers).
Reported: the driver's peak RSS (this process, which also runs the local scheduler),
each worker's peak RSS before and after the fit, the bytes the driver sends and receives
per round, the seconds per round and per exact check, the rounds and the certified gap.
With ``--kill-after R`` one worker process is killed after round R, and the fit must
still certify its objective.

    nice -n 10 python benchmarks/bench_sharded.py --model chain --n-examples 1000000 \
        --C 1e-5 --json benchmarks/results/sharded.json

``--json PATH`` adds this run to the raw runs in ``raw/`` beside PATH (replacing an
earlier run of the same model, examples, partitions, workers, C and kill) and writes the
benchmarks page's file (``benchmarks/report.py``'s schema) to PATH: one row per run.  The
floor is the driver's own memory before the cluster starts: the driver's peak should stay
near it whatever the number of examples, while each worker grows with its share.
"""

import argparse
import json
import os
import resource
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))          # this checkout's structlp, not an installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # benchmarks/report.py: the results schema

RUN_KEY = ("model", "n_examples", "partitions", "workers", "C", "kill_after")


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


def make_chain_partition(seed, m, theta, n=6, k=4, dv=5, noise=0.5):
    """``m`` planted chains (``n`` letters, ``k`` labels, ``dv`` node features, one constant
    edge feature), made on the worker from ``seed``: the labels are the Viterbi labelling
    of the planted scores plus Gaussian noise, all examples at once."""
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(m, n, dv))
    Wv, T = theta[:k * dv].reshape(k, dv), theta[k * dv:].reshape(k, k)
    S = V @ Wv.T + noise * rng.normal(size=(m, n, k))
    msg, back = S[:, 0], np.zeros((m, n, k), dtype=np.int64)
    for t in range(1, n):
        cand = msg[:, :, None] + T[None]                 # (m, parent label, child label)
        back[:, t] = cand.argmax(axis=1)
        msg = cand.max(axis=1) + S[:, t]
    y = np.zeros((m, n), dtype=np.int64)
    y[:, -1] = msg.argmax(axis=1)
    rows = np.arange(m)
    for t in range(n - 1, 0, -1):
        y[:, t - 1] = back[rows, t, y[:, t]]
    edge, parents = np.ones((n - 1, 1)), np.arange(-1, n - 1)
    return [({"node_features": V[i], "edge_features": edge, "parents": parents}, y[i])
            for i in range(m)]


def structlp_dir():
    """The directory of the structlp a process imports."""
    import structlp
    return str(Path(structlp.__file__).resolve().parent)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def held_mb(*roots):
    """MB held by ``roots``: numpy buffers (each base array once, however many views share
    it) and the Python objects that reach them (containers, instances' attributes), each
    counted once by ``sys.getsizeof``; classes, modules and functions are not followed."""
    import types
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType)
    seen, total, stack = set(), 0, list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, skip):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, np.ndarray):
            if o.base is not None:
                stack.append(o.base)
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        else:
            attrs = getattr(o, "__dict__", None)
            if isinstance(attrs, dict):
                stack.extend(attrs.values())
            for k in type(o).__mro__:
                for slot in getattr(k, "__slots__", ()):
                    if hasattr(o, slot):
                        stack.append(getattr(o, slot))
    return total / 2 ** 20


def worker_prepared_mb(dask_worker):
    """On a worker: MB held by the prepared partitions it keeps (their TrainingData and
    block stores), and their number."""
    shards = [v for v in dask_worker.data.values() if type(v).__name__ == "_Shard"]
    others = [v for v in dask_worker.data.values() if type(v).__name__ != "_Shard"]
    return dict(mb=held_mb(*[(sh.data, sh.blocks) for sh in shards]), shards=len(shards),
                parts=sorted(sh.part for sh in shards),
                rss_mb=current_rss_mb(), other_results=len(others),
                other_mb=held_mb(*others) if others else 0.0)


def started(run):
    """The schema's machine dict from a raw run (older runs lack the CPU model: they were
    converted on the machine that ran them; their load was read at the end, so the table
    shows it per run instead)."""
    m = dict(run["machine"])
    if "cpus" in m:
        m.setdefault("cores", m.pop("cpus"))
    m.setdefault("cpu", report.cpu_model())
    load = m.get("load") if run.get("load_when") == "start" else None
    m["load"] = [round(x, 2) for x in load] if load else None
    return m


def row_of(run):
    """One run as a row of the schema's table."""
    times = run["round_end_times_s"]
    idle, peak = run["worker_rss_idle_mb"], run["worker_peak_rss_mb"]
    m = run["n_examples"]
    row = {"model": run.get("model", "assignment"), "m": m, "parts": run["partitions"],
           "workers": run["workers"], "C": run["C"],
           "kill": run.get("kill_after") or None, "rounds": run["rounds"],
           "restarts": run["restarts"], "gap": run["relative_gap"],
           "converged": "yes" if run["converged"] else "no",
           "first": times[0] if times else None,
           "later": ((times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None),
           "wall": run["wall_s"], "dcpu": run["driver_cpu_s"],
           "before": run["driver_rss_before_cluster_mb"], "dpeak": run["driver_peak_rss_mb"],
           "ratio": run["driver_peak_rss_mb"] / run["driver_rss_before_cluster_mb"],
           "wpeak": ", ".join(f"{x:.0f}" for x in peak),
           "wprep": (", ".join(f"{w['mb']:.0f}" for w in run["worker_prepared"])
                     if run.get("worker_prepared") else None),
           "wratio": (", ".join(f"{(w['peak_rss_mb'] - w['idle_rss_mb']) / w['mb']:.2f}"
                                for w in run["worker_prepared"] if w["mb"] > 0)
                      if run.get("worker_prepared") else None),
           "grow": 1024.0 * (sum(peak) - sum(idle)) / m,
           "sent": run["bytes_per_round"]["sent"],
           "received": run["bytes_per_round"]["received"],
           "load": (run["machine"].get("load") or [None])[0],
           "date": run["date"].replace("T", " ").replace("+00:00", "")}
    return {k: v for k, v in row.items() if v is not None}


def write_schema(path, doc):
    """The benchmarks page's file (``benchmarks/report.py``'s schema) from the raw runs."""
    runs = sorted(doc["runs"], key=lambda r: (r.get("model", "assignment"), r["n_examples"],
                                              r.get("kill_after") or 0))
    columns = [{"key": "model", "label": "examples of"},
               {"key": "m", "label": "examples"},
               {"key": "parts", "label": "partitions"},
               {"key": "workers", "label": "workers"},
               {"key": "C", "label": "C", "format": "g"},
               {"key": "kill", "label": "worker killed after round"},
               {"key": "rounds", "label": "rounds"},
               {"key": "restarts", "label": "partitions recomputed"},
               {"key": "gap", "label": "relative gap", "format": ".2g"},
               {"key": "converged", "label": "converged"},
               {"key": "first", "label": "first round", "unit": "wall s"},
               {"key": "later", "label": "later rounds", "unit": "wall s each"},
               {"key": "wall", "label": "fit", "unit": "wall s"},
               {"key": "dcpu", "label": "driver", "unit": "CPU s"},
               {"key": "before", "label": "driver before the cluster", "unit": "MB",
                "format": ".0f"},
               {"key": "dpeak", "label": "driver peak RSS", "unit": "MB", "format": ".0f"},
               {"key": "ratio", "label": "driver peak / floor", "ratio": True},
               {"key": "wpeak", "label": "workers' peak RSS", "unit": "MB"},
               {"key": "wprep", "label": "workers' prepared data (at round 1)",
                "unit": "MB"},
               {"key": "wratio", "label": "workers' (peak - idle RSS) / prepared data"},
               {"key": "grow", "label": "workers' growth per example", "unit": "kB",
                "format": ".1f"},
               {"key": "sent", "label": "sent per round", "unit": "bytes"},
               {"key": "received", "label": "received per round", "unit": "bytes"},
               {"key": "load", "label": "load average", "format": ".1f"},
               {"key": "date", "label": "finished (UTC)"}]
    notes = ["Each partition generates its own examples on its worker from a seed, so the "
             "driver never holds an example; the first round includes that generation.  "
             "assignment: 3 x 3 assignments, 3 features per edge, each BCFW step with its "
             "Hungarian oracle in Python; chain: chains of 6 letters, 4 labels, 5 node "
             "features and a constant edge feature, each worker's pass over its partition one "
             "compiled kernel call.  The driver process also runs the local scheduler.",
             "Workers' growth per example: the workers' peak RSS summed, less their RSS "
             "when idle, over the number of examples.",
             "Workers' prepared data (later runs): what the prepared partitions a worker "
             "holds after the first round reach (their TrainingData and block stores: numpy "
             "buffers, each once, and the Python objects holding them, by sys.getsizeof; "
             "preallocated but untouched pool pages count, so it can exceed the resident "
             "memory); the ratio divides each worker's peak RSS less its idle RSS (with "
             "--warmup: its RSS after a fit of 500 examples per partition, which loads the "
             "imports and compiles the kernels) by it.",
             "Relative gap: the certified duality gap over the objective at the end of "
             "the fit; with a worker killed, its partitions are recomputed from their "
             "lineage and that round runs an exact gap check.",
             "Load average: the 1-minute load of the shared 2-core machine, read when the "
             "run finished" + (" (older runs) or started (later runs)." if any(
                 r.get("load_when") == "start" for r in runs) else "."),
             f"Raw measurements: benchmarks/results/raw/{Path(path).name}."]
    last = max(runs, key=lambda r: r["date"])
    data = report.write(path, name="sharded",
                        title="ShardedFrankWolfeLearner on a dask LocalCluster: memory, "
                              "traffic, rounds",
                        description="ShardedFrankWolfeLearner (BipartiteMatching on 3 x 3 "
                                    "assignments, TreeLabeling on chains) on a LocalCluster "
                                    "of worker processes, one "
                                    "thread each: the driver's and the workers' peak RSS, the "
                                    "bytes the driver sends and receives per round, rounds, "
                                    "certified gap and wall seconds, one row per run.",
                        floor=("driver memory independent of m",
                               "the driver process's peak RSS before the cluster starts (its "
                               "imports); the driver's peak over it should stay near 1 "
                               "whatever the number of examples m, while the workers grow "
                               "with their share"),
                        tables=[{"columns": columns, "rows": [row_of(r) for r in runs]}],
                        command="; ".join(r["command"] for r in runs if r.get("command"))
                        or None,
                        notes=notes, modules=("dask", "distributed"), started=started(last),
                        runs=1, runs_note=("one run per row: the peak RSS is per process, so "
                                           "runs cannot share one; run a command again to "
                                           "add a row"))
    data["date"] = last["date"]            # the last run's date, not the conversion's
    report.validate(data, Path(path).name)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    return data


def add_run(path, run):
    """Add ``run`` to the raw runs beside ``path`` and rewrite the schema file."""
    path = Path(path)
    raw = path.parent / "raw" / path.name
    doc = json.loads(raw.read_text()) if raw.exists() else {"name": "sharded", "runs": []}
    def key(r):     # (runs recorded before chains were benchmarked name no model)
        return tuple((r.get(k) or ("assignment" if k == "model" else 0)) for k in RUN_KEY)

    doc["runs"] = [r for r in doc["runs"] if key(r) != key(run)]
    doc["runs"].append(run)
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(doc, indent=1) + "\n")
    return write_schema(path, doc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-examples", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--C", type=float, default=1e-4)
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--max-iter", type=int, default=30)
    ap.add_argument("--kill-after", type=int, default=0)
    ap.add_argument("--model", choices=("assignment", "chain"), default="assignment",
                    help="3 x 3 assignments (per-example oracles in Python) or chains of 6 "
                         "letters, 4 labels, 5 features (whole passes compiled)")
    ap.add_argument("--warmup", action="store_true",
                    help="fit 500 examples per partition first (imports, compiled kernels): "
                         "the workers' RSS after it is the floor of the prepared-data ratio")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import dask
    import distributed
    from structlp.learners.sharded import ShardedFrankWolfeLearner
    from structlp.structures import BipartiteMatching, TreeLabeling

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if args.model == "chain":
        model, make = TreeLabeling(4), make_chain_partition
        w0 = np.random.default_rng(0).normal(size=4 * 5 + 4 * 4)
    else:
        model, make = BipartiteMatching(), make_partition
        w0 = np.random.default_rng(0).normal(size=3)
    K, m = args.partitions, args.n_examples
    sizes = [m // K + (k < m % K) for k in range(K)]
    rss_start = peak_rss_mb()
    machine = report.machine()
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                  processes=True, dashboard_address=None,
                                  memory_limit=0) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.run(lambda: None)
        where = set(client.run(structlp_dir).values())
        if where != {str(ROOT / "structlp")}:
            raise RuntimeError(f"the workers import structlp from {where}, not {ROOT}")
        rss_idle = client.run(peak_rss_mb)
        rss_warm = None
        if args.warmup:
            ShardedFrankWolfeLearner(model, C=args.C, max_iter=2, random_state=0,
                                     client=client, scheduler_timeout=120).fit(
                [dask.delayed(make)(7 + k, 500, w0) for k in range(K)])
            rss_warm = client.run(current_rss_mb)
        pids = list(client.run(os.getpid).values())
        parts = [dask.delayed(make)(1000 + k, sizes[k], w0) for k in range(K)]
        rounds = []

        prepared = {}

        def on_round(info):
            rounds.append(dict(info))
            if info["iteration"] == 1:        # the partitions are prepared and held
                prepared.update(client.run(worker_prepared_mb))
            print(f"round {info['iteration']}: {info['time']:.1f} s, "
                  f"gap estimate {info['gap_estimate']:.4g}"
                  + (f", objective {info['objective']:.6g}, gap {info['duality_gap']:.3g}"
                     if "objective" in info else ""), flush=True)
            if args.kill_after and info["iteration"] == args.kill_after:
                os.kill(pids[0], signal.SIGKILL)
                print("killed worker", pids[0], flush=True)

        cpu0, t0 = time.process_time(), time.perf_counter()
        est = ShardedFrankWolfeLearner(model, C=args.C, tol=args.tol,
                                       max_iter=args.max_iter, random_state=0,
                                       client=client, scheduler_timeout=120,
                                       callback=on_round)
        est.fit(parts)
        wall, driver_cpu = time.perf_counter() - t0, time.process_time() - cpu0
        rss_workers = client.run(peak_rss_mb)
    hist = est.history_
    times = [h["time"] for h in hist]
    result = dict(
        name="bench_sharded", machine=machine, load_when="start",
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=" ".join(["python", "benchmarks/bench_sharded.py"]
                         + (sys.argv[1:] if argv is None else list(argv))),
        floor=("driver peak RSS independent of the number of examples: the driver's RSS "
               "before the cluster starts; each worker about its share"),
        model=args.model, n_examples=est.n_examples_, partitions=K, workers=args.workers,
        C=args.C,
        tol=args.tol, kill_after=args.kill_after, rounds=est.n_iter_,
        converged=est.converged_,
        objective=est.objective_, duality_gap=est.duality_gap_,
        relative_gap=est.duality_gap_ / est.objective_, restarts=est.n_restarts_,
        wall_s=wall, driver_cpu_s=driver_cpu, round_end_times_s=times,
        driver_peak_rss_mb=peak_rss_mb(), driver_rss_before_cluster_mb=rss_start,
        worker_peak_rss_mb=sorted(rss_workers.values()),
        worker_prepared=[dict(prepared[k], peak_rss_mb=rss_workers[k],
                              idle_rss_mb=(rss_warm or rss_idle).get(k))
                         for k in sorted(prepared) if k in rss_workers],   # (not a killed one)
        warmup=bool(args.warmup),
        worker_rss_idle_mb=sorted(rss_idle.values()),
        bytes_per_round=est.bytes_per_round_,
        ratios=dict(driver_peak_over_floor=peak_rss_mb() / rss_start),
    )
    print(json.dumps(result, indent=1))
    if args.json:
        add_run(args.json, json.loads(json.dumps(result, default=float)))


if __name__ == "__main__":
    main()
