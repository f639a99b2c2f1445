"""OCR letters (chain and tree SSVMs, 26 labels, C = 0.1): time to the optimum, fresh processes.

Problem: ``min_w F(w) = 1/2 |w|^2 + C sum_i hinge_i(w)`` (Hamming loss) on OCR fold 1 (704
words) or on all folds but fold 0 (6,251 words, ``--scale``), each word a chain; or on fold
1 with each word's letters joined as a random tree (``--tree``: each letter's parent a
uniformly drawn earlier letter, seeded; the same kernels as chains, on non-chain trees, and
a floor pass of tree max-sum).  Every fit runs in a fresh
subprocess, its imports and the first call of its compiled kernels included (each figure
says whether it counts the imports).  Reported per learner, medians over ``--repeats``
processes:

* CPU seconds (``time.process_time``) from the start of ``fit`` until the running iterate's
  ``F`` (recomputed afterwards by an independent exact pass: Viterbi written here in numpy,
  not the library's oracle) is within ``1e-2`` and ``1e-3`` of the optimum's certified
  lower bound (fold 1: ``246.17405``, certified in project issue #25; otherwise the best
  lower bound of the run), and of the whole certified fit (``tol=1e-3``: the learner's own
  duality gap), with the process's import CPU seconds beside;
* the peak RSS of the process (``/usr/bin/time``-equivalent ``ru_maxrss``, imports included);
* the epochs, and the passes without oracle and their block visits (deterministic counts,
  where the learner records them);
* the **floor**: one loss-augmented Viterbi pass over the words written independently here
  (numba: the unary scores as one matrix product, Viterbi with back-pointers per word), and
  structlp's bare oracle pass, epoch and pass without oracle at the fitted state, measured in
  the same process in 25 interleaved rounds (one of each per round, so that a drift of the
  machine's speed falls on all alike), with the medians of their per-round ratios.

pystruct does not install here without patches; its figures from issue #25 (same harness,
another loaded 2-core machine) are quoted as the reference in the JSON.  BLAS runs one
thread in the children (``OPENBLAS_NUM_THREADS=1`` etc.: the machine has 2 shared cores).

Against the previous release, in the same run: ``--previous PYTHON`` names an interpreter
(a virtual environment's) with the previous release installed; each of its fits runs just
before this one's, the same learner and data, and the JSON reports this release's figures
over the previous one's.

Run: ``python benchmarks/bench_ocr.py --json benchmarks/results/ocr.json [--scale | --tree]
[--repeats 3] [--learners "FrankWolfeLearner;CuttingPlane one-slack (cache)"]
[--installed] [--previous PYTHON]``.  ``--json`` writes the benchmarks page's schema
(``benchmarks/report.py``) to the path and the raw measurements (curves, every process) to
``raw/`` beside it; the results of the other data sets are kept from the raw file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
C = 0.1
K = 26
FOLD1_LOWER = 246.17405      # the certified optimum bracket of fold 1 (issue #25)
FOLD1_UPPER = 246.17429
PYSTRUCT = {                 # pystruct 0.3.2 FrankWolfeSSVM, issue #25 (CPU s, peak RSS)
    "source": "project issue #25 (same harness, loaded 2-core machine)",
    "fold1": {"to_1e-2": 5.4, "to_1e-3": 29.2, "peak_rss_mb": 211},
    "scale": {"to_1e-2": 18.3, "to_1e-3": 77.9},
}
LEARNERS = {
    "FrankWolfeLearner": "FrankWolfeLearner(TreeLabeling(26), C=C, tol=1e-3, max_iter=1000, "
                         "random_state=0)",
    "CuttingPlane one-slack (cache)": "CuttingPlaneLearner(TreeLabeling(26), C=C, tol=tol, "
                                       "one_slack=True, max_iter=100000)",
    "CuttingPlane (n-slack)": "CuttingPlaneLearner(TreeLabeling(26), C=C, tol=tol, "
                              "max_iter=1000)",
}
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


#: the data sets: key -> (label, OCR folds, structure)
DATA = {"fold1": ("fold 1 (704 words)", "fold 1", "chain"),
        "scale": ("6,251 words", "all folds but fold 0", "chain"),
        "tree": ("fold 1 as random trees (704 words)", "fold 1", "tree")}


def random_parents(n, rng):
    """A random recursive tree on ``n`` nodes: node ``j``'s parent uniform in ``0..j-1``."""
    return np.concatenate(([-1], [rng.integers(0, j) for j in range(1, n)])).astype(np.int64)


def words(data):
    """The words of ``data`` (a key of :data:`DATA`): chains, or (``"tree"``) each word's
    letters joined as a random recursive tree (seeded), the edges' feature a constant."""
    from structlp.datasets import load_ocr_letters
    d = load_ocr_letters()
    idx = np.flatnonzero(d["folds"] != 0) if data == "scale" else np.flatnonzero(d["folds"] == 1)
    rng = np.random.default_rng(25)
    X = []
    for i in idx:
        n = len(d["data"][i])
        par = random_parents(n, rng) if DATA[data][2] == "tree" else np.arange(-1, n - 1)
        X.append({"node_features": np.asarray(d["data"][i], dtype=float),
                  "edge_features": np.ones((n - 1, 1)), "parents": par})
    return X, [np.asarray(d["labels"][i]) for i in idx]


def exact_objective(w, X, Y):
    """F(w) with Hamming loss, independently of the library: numpy Viterbi on the chains,
    the words of one length at a time; max-sum word by word on trees."""
    d_v = X[0]["node_features"].shape[1]
    if any(np.any(x["parents"][1:] != np.arange(len(x["parents"]) - 1)) for x in X):
        return exact_objective_trees(w, X, Y)
    Wv, B = w[:K * d_v].reshape(K, d_v), w[K * d_v:].reshape(K, K)
    groups = {}
    for x, y in zip(X, Y):
        groups.setdefault(len(y), []).append((x["node_features"], y))
    total = 0.0
    for n, items in groups.items():
        V = np.stack([v for v, _ in items])                  # (g, n, d_v)
        Yg = np.stack([y for _, y in items])                 # (g, n)
        b = V @ Wv.T                                         # (g, n, K)
        rows = np.arange(len(items))[:, None]
        truth = b[rows, np.arange(n), Yg].sum() + B[Yg[:, :-1], Yg[:, 1:]].sum()
        aug = b + 1.0
        aug[rows, np.arange(n), Yg] -= 1.0
        v = aug[:, 0]
        for t in range(1, n):
            v = (v[:, :, None] + B[None]).max(axis=1) + aug[:, t]
        total += v.max(axis=1).sum() - truth
    return 0.5 * w @ w + C * total


def exact_objective_trees(w, X, Y):
    """:func:`exact_objective` on trees whose parents precede their children: messages
    from the last node to the first, in numpy, word by word."""
    d_v = X[0]["node_features"].shape[1]
    Wv, B = w[:K * d_v].reshape(K, d_v), w[K * d_v:].reshape(K, K)
    total = 0.0
    for x, y in zip(X, Y):
        par = x["parents"]
        b = x["node_features"] @ Wv.T                         # (n, K)
        truth = b[np.arange(len(y)), y].sum() + B[y[par[1:]], y[1:]].sum()
        msg = b + 1.0
        msg[np.arange(len(y)), y] -= 1.0
        for j in range(len(y) - 1, 0, -1):
            msg[par[j]] += (B + msg[j][None, :]).max(axis=1)
        total += msg[0].max() - truth
    return 0.5 * w @ w + C * total


def floor_kernel():
    """The floor pass, compiled by numba: unary scores of all letters as one matrix product,
    then per word loss-augmented Viterbi (Hamming loss) with back-pointers and the
    maximizer decoded: what an oracle pass must at least do."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def floor_pass(V, noff, Wv, T, ytrue, out, yout):
        k = Wv.shape[0]
        SA = np.dot(V, Wv.T)
        msg = np.empty(k)
        new = np.empty(k)
        back = np.empty((64, k), dtype=np.int64)
        for i in range(noff.shape[0] - 1):
            b = noff[i]
            n = noff[i + 1] - b
            for a in range(k):
                msg[a] = SA[b, a] + (0.0 if a == ytrue[b] else 1.0)
            for j in range(1, n):
                for c in range(k):
                    best = msg[0] + T[0, c]
                    arg = 0
                    for a in range(1, k):
                        v = msg[a] + T[a, c]
                        if v > best:
                            best = v
                            arg = a
                    back[j, c] = arg
                    new[c] = best + SA[b + j, c] + (0.0 if c == ytrue[b + j] else 1.0)
                for c in range(k):
                    msg[c] = new[c]
            r = 0
            for a in range(1, k):
                if msg[a] > msg[r]:
                    r = a
            out[i] = msg[r]
            yout[b + n - 1] = r
            for j in range(n - 1, 0, -1):
                yout[b + j - 1] = back[j, yout[b + j]]
        return out

    return floor_pass


def floor_tree_kernel():
    """The floor pass on trees whose parents precede their children, compiled by numba:
    unary scores as one matrix product, then per word loss-augmented max-sum from the last
    node to the first with back-pointers, and the maximizer decoded."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def floor_tree_pass(V, noff, par, Wv, T, ytrue, out, yout):
        k = Wv.shape[0]
        SA = np.dot(V, Wv.T)
        msg = np.empty((64, k))
        back = np.empty((64, k), dtype=np.int64)
        for i in range(noff.shape[0] - 1):
            b = noff[i]
            n = noff[i + 1] - b
            for j in range(n):
                for a in range(k):
                    msg[j, a] = SA[b + j, a] + (0.0 if a == ytrue[b + j] else 1.0)
            for j in range(n - 1, 0, -1):
                p = par[b + j]
                for a in range(k):
                    best = T[a, 0] + msg[j, 0]
                    arg = 0
                    for c in range(1, k):
                        v = T[a, c] + msg[j, c]
                        if v > best:
                            best = v
                            arg = c
                    back[j, a] = arg
                    msg[p, a] += best
            r = 0
            for a in range(1, k):
                if msg[0, a] > msg[0, r]:
                    r = a
            out[i] = msg[0, r]
            yout[b] = r
            for j in range(1, n):
                yout[b + j] = back[j, yout[b + par[b + j]]]
        return out

    return floor_tree_pass


def cpu_of(fn):
    """CPU seconds of one call of ``fn``."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


ROUNDS = 25


def floors(est, X, Y):
    """CPU seconds of the floor pass, structlp's bare oracle pass, epoch and pass without
    oracle (the same process, at the fitted w and dual state), measured in ``ROUNDS``
    interleaved rounds (one of each per round: a drift of the machine's speed falls on all
    alike): the medians of each, and the medians of the per-round ratios."""
    V = np.ascontiguousarray(np.concatenate([x["node_features"] for x in X]))
    noff = np.concatenate(([0], np.cumsum([len(y) for y in Y]))).astype(np.int64)
    yt = np.concatenate(Y).astype(np.int64)
    w = np.array(est.coef_)
    d_v = V.shape[1]
    Wv, T = w[:K * d_v].reshape(K, d_v), np.ascontiguousarray(w[K * d_v:].reshape(K, K))
    out, yout = np.empty(len(X)), np.empty(len(yt), dtype=np.int64)
    par = np.concatenate([x["parents"] for x in X]).astype(np.int64)
    if np.array_equal(par, np.concatenate([np.arange(-1, len(y) - 1) for y in Y])):
        chain = floor_kernel()
        fp = lambda: chain(V, noff, Wv, T, yt, out, yout)             # noqa: E731
    else:
        tree = floor_tree_kernel()
        fp = lambda: tree(V, noff, par, Wv, T, yt, out, yout)         # noqa: E731
    fp()
    passes = {"floor_pass": fp}
    warm = getattr(est, "_warm", None)        # Frank-Wolfe's (fingerprint, blocks)
    blocks = warm[1] if warm else None
    has_blocks = blocks is not None and hasattr(blocks, "oracle_pass")
    if has_blocks:
        h = blocks.oracle_pass(w)
        g = np.zeros(len(X))
        rng = np.random.default_rng(0)
        wc = w.copy()
        passes.update(
            bare_pass=lambda: blocks.oracle_pass(w),
            epoch=lambda: blocks.epoch(rng.permutation(len(X)).astype(np.int64), wc, C, 3,
                                       0.0, g),
            cache_pass=lambda: blocks.cache_pass(wc, C, 0.0))
    rounds = {key: [] for key in passes}
    for _ in range(ROUNDS):
        for key, fn in passes.items():
            rounds[key].append(cpu_of(fn))
    res = {key: float(np.median(v)) for key, v in rounds.items()}
    res["pass_rounds"] = rounds
    if has_blocks:
        t = {key: np.array(v) for key, v in rounds.items()}
        res["round_ratios"] = {
            "bare_pass / floor_pass": float(np.median(t["bare_pass"] / t["floor_pass"])),
            "epoch / bare_pass": float(np.median(t["epoch"] / t["bare_pass"]))}
        res["bare_pass_hinge_sum"] = float(h.sum())
    res["floor_value_sum"] = float(out.sum())
    return res


def child(name, spec, data, tol_rel, budget):
    t_imp, w_imp = time.process_time(), time.perf_counter()
    from structlp import CuttingPlaneLearner, FrankWolfeLearner  # noqa: F401
    from structlp.structures import TreeLabeling  # noqa: F401
    imports = {"import_cpu": time.process_time() - t_imp,
               "import_wall": time.perf_counter() - w_imp,
               "import_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    X, Y = words(data)
    tol = tol_rel * 250.0 / (C * len(X))        # F is about 250 on fold 1: loss units
    snaps = []
    clock = [0.0]

    class Recorded(FrankWolfeLearner):
        def _after_epoch(self, epoch, w):       # the running w, its time left out
            t = time.process_time()
            snaps.append((t - clock[0], time.perf_counter() - w0, w.copy()))
            clock[0] += time.process_time() - t

    est = eval(spec, {"FrankWolfeLearner": Recorded, "CuttingPlaneLearner":
                      CuttingPlaneLearner, "TreeLabeling": TreeLabeling, "C": C, "tol": tol})
    w0 = time.perf_counter()
    clock[0] = t0 = time.process_time()
    snaps_cb = []

    def callback(info):           # the cutting plane: its iterate at its exact checks
        if "objective" in info and hasattr(est, "coef_"):
            snaps_cb.append((time.process_time() - t0, time.perf_counter() - w0,
                             np.array(est.coef_)))
        return time.process_time() - t0 > budget

    if not isinstance(est, Recorded) and "callback" in est.get_params():
        est.set_params(callback=callback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, Y)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    process_cpu = time.process_time() - (clock[0] - t0)   # interpreter start to fit end
    cpu -= clock[0] - t0                        # the snapshots' copies left out
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    curve = [(c, wl, exact_objective(w, X, Y)) for c, wl, w in snaps + snaps_cb]
    curve.append((cpu, wall, exact_objective(est.coef_, X, Y)))
    n_ep = int(getattr(est, "n_iter_", 1))
    n_calls = getattr(est, "n_oracle_calls_", None)
    lower = getattr(est, "master_objective_", None)
    certified = None
    if hasattr(est, "duality_gap_"):
        lower = float(est.objective_ - est.duality_gap_)
        certified = {"objective": float(est.objective_), "duality_gap": float(est.duality_gap_),
                     "relative_gap": float(est.duality_gap_ / est.objective_),
                     "converged": bool(est.converged_)}
    out = {"name": name, "cpu": cpu, "wall": wall, "rss_mb": rss, "curve": curve, **imports,
           "lower": lower, "certified": certified, "epochs": n_ep,
           "oracle_calls": None if n_calls is None else int(n_calls),
           "load_average": list(os.getloadavg()),
           "n_words": len(X), "n_letters": int(sum(len(y) for y in Y))}
    out["process_cpu"] = process_cpu
    blocks = (getattr(est, "_warm", None) or (None, None))[1]
    if hasattr(blocks, "n_visits"):    # the passes without oracle: passes, block visits
        out["cache_passes"] = int(blocks.n_passes)
        out["pass_visits"] = int(blocks.n_visits)
    import structlp.compiled
    out["kernels"] = structlp.compiled.status()     # ahead of time, or numba's JIT
    out["kernels_target"] = getattr(structlp.compiled, "target", lambda: None)()  # (older)
    out.update(floors(est, X, Y))
    return out


PREVIOUS = " (previous release)"


def run_child(name, spec, data, tol_rel, budget, pythonpath, python=None):
    """One fit in a fresh process of ``python`` (default: this one): structlp from
    ``pythonpath`` (a source tree), or with ``pythonpath=None`` the installed one (run from
    a temporary folder)."""
    env = dict(os.environ, **ENV)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["nice", "-n", "10", python or sys.executable,
                              str(Path(__file__).resolve()),
                              "--child", name, spec, data, str(tol_rel),
                              str(budget)], capture_output=True, text=True, env=env,
                             cwd=ROOT if pythonpath is not None else tmp)
    if out.returncode:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_to(curve, target):
    hit = [c for c, _, f in curve if f <= target]
    return hit[0] if hit else float("nan")


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(line.split(":", 1)[1].strip() for line in fh
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "load_average": list(os.getloadavg())}


def med_load(rs):
    """The median 1-minute load average at the end of the fits (None for older runs)."""
    loads = [r["load_average"][0] for r in rs if "load_average" in r]
    return float(np.median(loads)) if loads else None


def summarize(runs, data):
    """Medians over the repeats of each learner, with the ratios to the floor."""
    lows = [r["lower"] for r in runs if r.get("lower") is not None]
    low = FOLD1_LOWER if data == "fold1" else (max(lows) if lows else
                                         min(f for r in runs for _, _, f in r["curve"]))
    out = {}
    for name in dict.fromkeys(r["name"] for r in runs):
        rs = [r for r in runs if r["name"] == name]
        med = lambda key: float(np.median([r[key] for r in rs if key in r]))  # noqa: E731
        row = {"repeats": len(rs),
               "to_1e-2_cpu": float(np.median([time_to(r["curve"], low * 1.01) for r in rs])),
               "to_1e-3_cpu": float(np.median([time_to(r["curve"], low * 1.001) for r in rs])),
               "certified_fit_cpu": med("cpu"), "fit_wall": med("wall"),
               "import_cpu": med("import_cpu"), "peak_rss_mb": med("rss_mb"),
               "import_rss_mb": med("import_rss_mb"), "process_cpu": med("process_cpu"),
               "epochs": med("epochs"), "floor_pass_cpu": med("floor_pass"),
               "load_average_1min": med_load(rs),
               "final_F_over_lower_minus_1": float(np.median([r["curve"][-1][2] / low - 1
                                                              for r in rs]))}
        if all("pass_visits" in r for r in rs):
            row["cache_passes"] = med("cache_passes")
            row["pass_visits_per_example"] = med("pass_visits") / rs[0]["n_words"]
        if all(r.get("oracle_calls") is not None for r in rs):
            row["oracle_calls"] = med("oracle_calls")
            row["oracle_calls_per_example"] = row["oracle_calls"] / rs[0]["n_words"]
        if all("bare_pass" in r for r in rs):
            row.update(bare_pass_cpu=med("bare_pass"), epoch_cpu=med("epoch"),
                       cache_pass_cpu=med("cache_pass"))
            # each process's median of its per-round ratios, their median over the processes
            rr = lambda key: float(np.median([r["round_ratios"][key] for r in rs]))  # noqa: E731
            row["ratios"] = {
                "bare_pass / floor_pass": rr("bare_pass / floor_pass"),
                "epoch / bare_pass": rr("epoch / bare_pass"),
                "certified_fit / floor_pass": row["certified_fit_cpu"] / row["floor_pass_cpu"]}
        ref = PYSTRUCT.get(data)
        if ref is not None:
            row["speedup_vs_pystruct"] = {
                "to_1e-2": ref["to_1e-2"] / row["to_1e-2_cpu"],
                "to_1e-3": ref["to_1e-3"] / row["to_1e-3_cpu"],
                "to_1e-3 (certified fit, imports included)":
                    ref["to_1e-3"] / (row["certified_fit_cpu"] + row["import_cpu"])}
        if rs[0].get("certified"):
            row["certified"] = [r["certified"] for r in rs]
        out[name] = row
    for name, row in out.items():       # this release over the previous one
        prev = out.get(name + PREVIOUS)
        if prev is not None:
            row["vs_previous"] = {
                key: row[key] / prev[key]
                for key in ("to_1e-2_cpu", "to_1e-3_cpu", "certified_fit_cpu", "epoch_cpu",
                            "peak_rss_mb") if key in row and key in prev}
    return low, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", action="store_true", help="6,251 words instead of fold 1")
    ap.add_argument("--tree", action="store_true",
                    help="fold 1's words as random trees (each letter's parent an earlier "
                         "letter, seeded) instead of chains")
    ap.add_argument("--learners", default="FrankWolfeLearner",
                    help="semicolon-separated subset of: " + "; ".join(LEARNERS))
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="relative tolerance of the cutting planes")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per learner")
    ap.add_argument("--budget", type=float, default=600.0, help="CPU seconds per fit")
    ap.add_argument("--installed", action="store_true",
                    help="fit with the installed structlp (its wheel's kernels), not this tree")
    ap.add_argument("--previous", default=None, metavar="PYTHON",
                    help="an interpreter with the previous release installed: its fit of "
                         "each learner runs just before this one's")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.scale and args.tree:
        raise SystemExit("--scale and --tree: choose one")
    data = "scale" if args.scale else "tree" if args.tree else "fold1"
    runs = []
    for rep in range(args.repeats):
        for name in args.learners.split(";"):
            if name not in LEARNERS:
                raise SystemExit(f"unknown learner {name!r}; choose from {list(LEARNERS)}")
            if args.previous:
                runs.append(run_child(name, LEARNERS[name], data, args.tol, args.budget,
                                      None, python=args.previous))
                runs[-1]["name"] = name + PREVIOUS
            runs.append(run_child(name, LEARNERS[name], data, args.tol, args.budget,
                                  None if args.installed else ROOT))
            for r in runs[-2 if args.previous else -1:]:
                print(f"{r['name']} #{rep}: fit {r['cpu']:.2f} CPU s "
                      f"(+{r['import_cpu']:.2f} imports), peak RSS {r['rss_mb']:.0f} MB, final F {r['curve'][-1][2]:.6f}",
                      file=sys.stderr, flush=True)
    low, rows = summarize(runs, data)
    key = data
    print(f"OCR letters, {DATA[data][0]}, C = {C}; "
          f"lower bound on F* {low:.6f}; CPU seconds, medians of {args.repeats} fresh "
          "processes; loaded machine\n")
    print("| learner | to 1e-2 | to 1e-3 | certified fit (+imports) | peak RSS MB | epochs | "
          "oracle calls / example | floor pass | bare pass | epoch | bare/floor | epoch/bare | "
          "fit / floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        ra = r.get("ratios", {})
        print(f"| {name} | {r['to_1e-2_cpu']:.2f} | {r['to_1e-3_cpu']:.2f} | "
              f"{r['certified_fit_cpu']:.2f} (+{r['import_cpu']:.2f}) | {r['peak_rss_mb']:.0f} | "
              f"{r['epochs']:.0f} | {r.get('oracle_calls_per_example', np.nan):.0f} | "
              f"{1e3 * r['floor_pass_cpu']:.1f} ms | "
              f"{1e3 * r.get('bare_pass_cpu', np.nan):.1f} ms | "
              f"{1e3 * r.get('epoch_cpu', np.nan):.1f} ms | "
              f"{ra.get('bare_pass / floor_pass', np.nan):.2f} | "
              f"{ra.get('epoch / bare_pass', np.nan):.2f} | "
              f"{ra.get('certified_fit / floor_pass', np.nan):.0f} |")
    if args.json:
        path = Path(args.json)
        raw_path = path.parent / "raw" / path.name
        doc = json.loads(raw_path.read_text()) if raw_path.exists() else {}
        doc.update({"name": "ocr_letters_chain", "machine": machine(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "problem": "OCR letters, chain and tree SSVMs, 26 labels, C = 0.1, "
                               "Hamming loss",
                    "floor": "numba loss-augmented max-sum pass with back-pointers (unary "
                             "scores as one matrix product; Viterbi on chains), same process",
                    "blas_threads": 1, "reference_pystruct": PYSTRUCT})
        doc.setdefault("results", {})[key] = {
            "lower_bound": low, "learners": rows, "runs": runs, "machine": machine(),
            "date": doc["date"],
            "command": _report().command_with({"--previous": "PREVIOUS_PYTHON"}, argv)}
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        raw_path.write_text(json.dumps(doc, indent=1))
        write_schema(path, doc)


def kernels_note(doc):
    """How the measured processes ran the kernels (built ahead of time, or numba's JIT)."""
    status = {r.get("kernels") for res in doc.get("results", {}).values()
              for r in res.get("runs", []) if not r["name"].endswith(PREVIOUS)}
    if status == {"ahead of time"}:
        return ("The kernels were built ahead of time (the installed wheel's): no fit, the "
                "first after installing included, compiles anything.")
    return ("Kernels: " + ", ".join(sorted(str(x) for x in status)) + ". Where numba compiles "
            "them, the first fit after installing does so once (numba caches them on disk); "
            "that compilation is not in these figures.")


def previous_table(doc):
    """The table of this release's figures over the previous one's (``--previous``), if
    any run had them."""
    rows = []
    for key, (label, _, _) in DATA.items():
        res = doc.get("results", {}).get(key) or {}
        for name, r in res.get("learners", {}).items():
            vs = r.get("vs_previous")
            if vs:
                prev = res["learners"][name + PREVIOUS]
                rows.append({"data": label, "learner": name,
                             "p_cert": prev["certified_fit_cpu"], "cert": r["certified_fit_cpu"],
                             "r_cert": vs.get("certified_fit_cpu"),
                             "p_epoch": 1e3 * prev["epoch_cpu"] if "epoch_cpu" in prev else None,
                             "epoch": 1e3 * r["epoch_cpu"] if "epoch_cpu" in r else None,
                             "r_epoch": vs.get("epoch_cpu"),
                             "p_rss": prev["peak_rss_mb"], "rss": r["peak_rss_mb"],
                             "r_rss": vs.get("peak_rss_mb")})
    if not rows:
        return []
    rows = [{k: v for k, v in row.items() if v is not None} for row in rows]
    return [{"caption": "This release against the previous one (--previous: its fit of each "
                        "learner in a fresh process just before this one's; medians)",
             "columns": [{"key": "data", "label": "data"}, {"key": "learner", "label": "learner"},
                         {"key": "p_cert", "label": "previous: certified fit", "unit": "CPU s"},
                         {"key": "cert", "label": "this: certified fit", "unit": "CPU s"},
                         {"key": "r_cert", "label": "this / previous", "ratio": True},
                         {"key": "p_epoch", "label": "previous: epoch", "unit": "ms",
                          "format": ".1f"},
                         {"key": "epoch", "label": "this: epoch", "unit": "ms", "format": ".1f"},
                         {"key": "r_epoch", "label": "this / previous", "ratio": True},
                         {"key": "p_rss", "label": "previous: peak RSS", "unit": "MB",
                          "format": ".0f"},
                         {"key": "rss", "label": "this: peak RSS", "unit": "MB", "format": ".0f"},
                         {"key": "r_rss", "label": "this / previous", "ratio": True}],
             "rows": rows}]


def _report():
    """``benchmarks/report.py`` (imported when results are written, not in the timed
    children)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import report
    return report


def write_schema(path, doc):
    """The benchmarks page's file (``benchmarks/report.py``'s schema) from the raw results."""
    report = _report()
    columns = [{"key": "data", "label": "data"}, {"key": "learner", "label": "learner"},
               {"key": "t2", "label": "to 1e-2", "unit": "CPU s"},
               {"key": "t3", "label": "to 1e-3", "unit": "CPU s"},
               {"key": "cert", "label": "certified 1e-3 fit", "unit": "CPU s"},
               {"key": "imp", "label": "imports", "unit": "CPU s"},
               {"key": "rss", "label": "peak RSS", "unit": "MB", "format": ".0f"},
               {"key": "epochs", "label": "epochs", "format": ".0f"},
               {"key": "floor", "label": "floor pass", "unit": "ms", "format": ".1f"},
               {"key": "bare", "label": "bare pass", "unit": "ms", "format": ".1f"},
               {"key": "epoch", "label": "epoch", "unit": "ms", "format": ".1f"},
               {"key": "r_bare", "label": "bare / floor", "ratio": True},
               {"key": "r_epoch", "label": "epoch / bare", "ratio": True},
               {"key": "r_cert", "label": "certified fit / floor pass", "format": ".0f"}]
    rows = []
    for key, (label, _, _) in DATA.items():
        res = doc.get("results", {}).get(key)
        if not res:
            continue
        for name, r in res["learners"].items():
            ra = r.get("ratios", {})
            floor = r.get("floor_pass_cpu")
            rows.append({"data": label, "learner": name, "t2": r.get("to_1e-2_cpu"),
                         "t3": r.get("to_1e-3_cpu"), "cert": r.get("certified_fit_cpu"),
                         "imp": r.get("import_cpu"), "rss": r.get("peak_rss_mb"),
                         "epochs": r.get("epochs"),
                         "floor": None if floor is None else 1e3 * floor,
                         "bare": 1e3 * r["bare_pass_cpu"] if "bare_pass_cpu" in r else None,
                         "epoch": 1e3 * r["epoch_cpu"] if "epoch_cpu" in r else None,
                         "r_bare": ra.get("bare_pass / floor_pass"),
                         "r_epoch": ra.get("epoch / bare_pass"),
                         "r_cert": ra.get("certified_fit / floor_pass")})
        rows = [{k: v for k, v in row.items() if v is not None} for row in rows]
    ref = [{"data": "fold 1", "learner": "pystruct FrankWolfeSSVM",
            "t2": PYSTRUCT["fold1"]["to_1e-2"], "t3": PYSTRUCT["fold1"]["to_1e-3"],
            "rss": PYSTRUCT["fold1"]["peak_rss_mb"]},
           {"data": "6,251 words", "learner": "pystruct FrankWolfeSSVM",
            "t2": PYSTRUCT["scale"]["to_1e-2"], "t3": PYSTRUCT["scale"]["to_1e-3"]}]
    started = dict(doc["machine"])
    started.setdefault("load", started.pop("load_average", None))
    runs_at = [f"{DATA[key][0]}: {res['date']}, load {res['machine']['load_average'][0]:.2f}"
               for key, res in doc.get("results", {}).items() if "date" in res]
    reps = {DATA[key][0]: sorted({r.get("repeats") for r in res["learners"].values()
                                  if r.get("repeats")})
            for key, res in doc.get("results", {}).items()}
    counts = [n for ns in reps.values() for n in ns]
    runs_note = "medians of fresh processes: " + "; ".join(
        f"{label}: {' or '.join(map(str, ns))}" for label, ns in reps.items() if ns)
    report.write(path, name="ocr_letters_chain",
                 title="OCR letters, chain and tree SSVMs: time to the certified optimum",
                 description="FrankWolfeLearner on OCR letters (26 labels, C = 0.1), each fit "
                             "a fresh process (imports counted separately); F measured by an "
                             "independent Viterbi against the certified lower bound; medians "
                             "over the processes.",
                 floor=("numba max-sum pass", doc["floor"]),
                 tables=[{"caption": "structlp (medians, CPU seconds)", "columns": columns,
                          "rows": rows},
                         {"caption": "pystruct 0.3.2, measured earlier with the same harness "
                                     "on another loaded 2-core machine (CPU seconds)",
                          "runs_note": "not recorded (an earlier measurement)",
                          "columns": [c for c in columns
                                      if c["key"] in ("data", "learner", "t2", "t3", "rss")],
                          "rows": ref}] + previous_table(doc),
                 notes=[kernels_note(doc)]
                 + (["Each data set's run: " + "; ".join(runs_at) + "."] if runs_at else [])
                 + [f"Raw measurements: benchmarks/results/raw/{Path(path).name}."],
                 command="; ".join(res["command"] for res in doc.get("results", {}).values()
                                   if "command" in res) or None,
                 started=started, runs=min(counts) if counts else None,
                 runs_note=runs_note if counts else None)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, name, spec, data, tol_rel, budget = sys.argv
        print(json.dumps(child(name, spec, data, float(tol_rel), float(budget))))
    else:
        main()
