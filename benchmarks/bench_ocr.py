"""OCR letters (chain SSVM, 26 labels, C = 0.1): each learner's exact objective over time.

Problem: ``min_w F(w) = 1/2 |w|^2 + C sum_i hinge_i(w)`` on OCR fold 1 (704 words) or on
all folds but fold 0 (6,251 words, ``--scale``).  Each learner runs in its own subprocess
(so that the peak RSS, ``resource.getrusage``, is that of one fit); it snapshots ``coef_``
through its ``callback`` (or, for learners without one, reads its own exact checks in
``history_``), and every snapshot's ``F`` is recomputed afterwards by an independent exact
pass (Viterbi written here in numpy on the node/edge potentials, not the library's oracle).
Reported: the optimum bracketed by a certified lower bound (the best master dual value of a
cutting plane, or a Frank-Wolfe objective minus its duality gap) and the best exact ``F``;
CPU seconds until ``F <= (1 + 1e-2)`` and ``(1 + 1e-3)`` times that lower bound (so within
those of the optimum), peak RSS (and RSS and CPU seconds right after the imports), CPU
seconds per epoch/round beside one bare loss-augmented oracle pass over the data (the
floor), and a plot of ``F`` vs CPU time (``--plot FILE``).

``--base PATH`` also runs the previous release's FrankWolfeLearner (a checkout at PATH)
in the same run; ``--before PATH`` runs every selected learner from the checkout at PATH too,
each just before the same learner of this tree.  Timings are CPU seconds
(``time.process_time``) beside wall seconds.

Run: ``python benchmarks/bench_ocr.py --plot ocr.png [--base ../base] [--before ../prev]
[--scale]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
C = 0.1
K = 26
LEARNERS = {
    "FrankWolfeLearner": "FrankWolfeLearner(TreeLabeling(26), C=C, tol=1e-3, max_iter=1000, "
                         "random_state=0)",
    "CuttingPlane one-slack (cache)": "CuttingPlaneLearner(TreeLabeling(26), C=C, tol=tol, "
                                       "one_slack=True, max_iter=100000)",
    "CuttingPlane one-slack (no cache)": "CuttingPlaneLearner(TreeLabeling(26), C=C, "
                                          "tol=tol, one_slack=True, inference_cache=0, "
                                          "max_iter=100000)",
    "CuttingPlane (n-slack)": "CuttingPlaneLearner(TreeLabeling(26), C=C, tol=tol, "
                              "max_iter=1000)",
}


def words(scale):
    from structlp.datasets import load_ocr_letters
    d = load_ocr_letters()
    idx = np.flatnonzero(d["folds"] != 0) if scale else np.flatnonzero(d["folds"] == 1)
    X = [{"node_features": np.asarray(d["data"][i], dtype=float),
          "edge_features": np.ones((len(d["data"][i]) - 1, 1)),
          "parents": np.arange(-1, len(d["data"][i]) - 1)} for i in idx]
    return X, [np.asarray(d["labels"][i]) for i in idx]


def viterbi(b, B):
    """max_y sum_t b[t, y_t] + B[y_t, y_t+1] (chain, B shared), plain numpy."""
    v = b[0].copy()
    for t in range(1, len(b)):
        v = (v[:, None] + B).max(axis=0) + b[t]
    return float(v.max())


def exact_objective(w, X, Y):
    """F(w) with Hamming loss, independently of the library."""
    d_v = X[0]["node_features"].shape[1]
    Wv, B = w[:K * d_v].reshape(K, d_v), w[K * d_v:].reshape(K, K)
    total = 0.0
    for x, y in zip(X, Y):
        b = x["node_features"] @ Wv.T
        truth = b[np.arange(len(y)), y].sum() + B[y[:-1], y[1:]].sum()
        aug = b + 1.0
        aug[np.arange(len(y)), y] -= 1.0
        total += viterbi(aug, B) - truth
    return 0.5 * w @ w + C * total


def oracle_floor(X, Y, repeats=5):
    """CPU seconds of one bare loss-augmented oracle pass (scores + max-sum, every word):
    the median of ``repeats`` passes (one pass is short beside the load's swings)."""
    from structlp.structures import TreeLabeling
    from structlp.compiler import prepare
    model = TreeLabeling(K)
    data = prepare(model, X, Y, need_polytopes=False)
    w = np.random.default_rng(0).normal(size=data.n_features) * 0.01
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        for x, P, c in zip(data.X, data.Phi, data.c):
            model.inference_parts(x, P.dot(w) + c)
        times.append(time.process_time() - t0)
    return float(np.median(times))


def child(name, spec, scale, tol_rel, budget):
    t_imp, w_imp = time.process_time(), time.perf_counter()
    from structlp import CuttingPlaneLearner, FrankWolfeLearner  # noqa: F401
    from structlp.structures import TreeLabeling  # noqa: F401
    imports = {"import_cpu": time.process_time() - t_imp,
               "import_wall": time.perf_counter() - w_imp,
               "import_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    X, Y = words(scale)
    tol = tol_rel * 250.0 / (C * len(X))        # F is about 250 on fold 1: loss units
    est = eval(spec, {"FrankWolfeLearner": FrankWolfeLearner, "CuttingPlaneLearner":
                      CuttingPlaneLearner, "TreeLabeling": TreeLabeling, "C": C, "tol": tol})
    snaps = []
    t0, w0 = time.process_time(), time.perf_counter()

    def callback(info):           # coef_ is the iterate the learner just evaluated
        if "objective" in info and hasattr(est, "coef_"):
            snaps.append((time.process_time() - t0, time.perf_counter() - w0,
                          np.array(est.coef_)))
        return time.process_time() - t0 > budget

    has_cb = "callback" in est.get_params()
    if has_cb:
        est.set_params(callback=callback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, Y)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if has_cb:
        curve = [(c, wl, exact_objective(w, X, Y)) for c, wl, w in snaps]
    else:                         # its own exact checks (no callback in this version)
        scale_t = cpu / max(wall, 1e-9)
        curve = [(h["time"] * scale_t, h["time"], h["objective"]) for h in est.history_
                 if "objective" in h]
    curve.append((cpu, wall, exact_objective(est.coef_, X, Y)))
    n_ep = int(getattr(est, "n_iter_", 1))
    # a certified lower bound on the optimum: the cutting plane's master dual value, or
    # Frank-Wolfe's objective minus its duality gap
    lower = getattr(est, "master_objective_", None)
    if hasattr(est, "duality_gap_"):
        lower = float(est.objective_ - est.duality_gap_)
    return {"name": name, "cpu": cpu, "wall": wall, "rss_mb": rss, "curve": curve, **imports,
            "lower": lower,
            "epochs": n_ep, "oracle_calls": int(getattr(est, "n_oracle_calls_", n_ep))
            if hasattr(est, "n_oracle_calls_") and not hasattr(est, "duality_gap_") else n_ep,
            "floor": oracle_floor(X, Y)}


def run_child(name, spec, scale, tol_rel, budget, pythonpath):
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, __file__, "--child", name, spec, str(int(scale)),
                          str(tol_rel), str(budget)], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    if out.returncode:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_to(curve, target):
    hit = [c for c, _, f in curve if f <= target]
    return hit[0] if hit else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", action="store_true", help="6,251 words instead of fold 1")
    ap.add_argument("--base", default=None, help="checkout of the previous release")
    ap.add_argument("--before", default=None,
                    help="another checkout: each selected learner also runs from it, just "
                         "before the same learner of this tree")
    ap.add_argument("--plot", default=None, help="file for the objective-vs-time plot")
    ap.add_argument("--learners", default=";".join(LEARNERS),
                    help="semicolon-separated subset of: " + "; ".join(LEARNERS))
    ap.add_argument("--tol", type=float, default=1e-4, help="relative tolerance of the fits")
    ap.add_argument("--budget", type=float, default=600.0, help="CPU seconds per fit")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    runs = []
    if args.base:
        runs.append(run_child("FrankWolfeLearner (previous release)",
                              LEARNERS["FrankWolfeLearner"], args.scale, args.tol, args.budget,
                              Path(args.base).resolve()))
    for name in args.learners.split(";"):
        if name not in LEARNERS:
            raise SystemExit(f"unknown learner {name!r}; choose from {list(LEARNERS)}")
        trees = ([(f"{name} (before)", Path(args.before).resolve())] if args.before else []) \
            + [(name, ROOT)]
        for label, tree in trees:
            runs.append(run_child(label, LEARNERS[name], args.scale, args.tol, args.budget,
                                  tree))
            print(f"{label}: {runs[-1]['cpu']:.1f} CPU s, final F "
                  f"{runs[-1]['curve'][-1][2]:.6f}", file=sys.stderr, flush=True)
    best = min(f for r in runs for _, _, f in r["curve"])
    lows = [r["lower"] for r in runs if r.get("lower") is not None]
    low = max(lows) if lows else best
    print(f"OCR letters, {'6,251 words (all folds but 0)' if args.scale else 'fold 1 (704 words)'}"
          f", C = {C}; optimum F* in [{low:.6f}, {best:.6f}] (certified lower bound: the best "
          "master dual value or Frank-Wolfe objective minus its gap; upper: the best exact F); "
          "times to F <= (1 + eps) x the lower bound; CPU seconds (wall in brackets); loaded "
          "machine\n")
    print("| learner | to 1e-2 | to 1e-3 | final F / lower - 1 | fit CPU s (wall) | peak RSS MB | "
          "after imports MB (CPU s) | epochs/rounds (oracle passes) | CPU s per epoch/round | "
          "bare oracle pass |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        final = r["curve"][-1][2]
        per = r["cpu"] / max(r["epochs"], 1)
        print(f"| {r['name']} | {time_to(r['curve'], low * 1.01):.1f} | "
              f"{time_to(r['curve'], low * 1.001):.1f} | {final / low - 1:.1e} | "
              f"{r['cpu']:.1f} ({r['wall']:.1f}) | {r['rss_mb']:.0f} | "
              f"{r.get('import_rss_mb', float('nan')):.0f} "
              f"({r.get('import_cpu', float('nan')):.2f}) | {r['epochs']} "
              f"({r['oracle_calls']}) | {per:.2f} | {r['floor']:.2f} |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in runs:
            c = np.array([(t, f) for t, _, f in r["curve"]])
            ax.semilogy(c[:, 0], np.maximum(c[:, 1] / best - 1, 1e-6), label=r["name"])
        ax.axhline(1e-2, color="grey", lw=0.5)
        ax.axhline(1e-3, color="grey", lw=0.5)
        ax.set_xlabel("CPU seconds")
        ax.set_ylabel("F(w) / F_best - 1")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(runs, fh)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, name, spec, scale, tol_rel, budget = sys.argv
        print(json.dumps(child(name, spec, bool(int(scale)), float(tol_rel), float(budget))))
    else:
        main()
