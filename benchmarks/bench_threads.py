"""Both cores in one fit: FrankWolfeLearner on the 6,251 OCR words with n_jobs=1 and n_jobs=2.

Problem: ``min_w F(w) = 1/2 |w|^2 + C sum_i hinge_i(w)`` (Hamming loss, ``C = 0.1``) on the
OCR letters of all folds but fold 0 (6,251 words, each a chain; loaded as
``benchmarks/bench_ocr.py --scale`` loads them), certified to ``tol = 1e-3`` by the
learner's exact duality gap.  With ``n_jobs=2`` the compiled epochs run on two threads of
one process (CoCoA+ rounds over two partitions of the blocks); with ``n_jobs=1`` on one.

Every fit runs in a fresh process (BLAS on one thread), after a warm-up fit on 50 words with
the same ``n_jobs`` (numba's cached kernels loaded, the threads started), the two settings
alternating, ``--repeats`` times each.  Per fit: wall and CPU seconds (``time.perf_counter``,
``time.process_time``: the process's CPU, both threads), epochs, the certified objective,
its duality gap, ``F`` recomputed independently (numpy Viterbi,
``bench_ocr.exact_objective``) and the 1-minute load average after the fit.  The speed-up
is the median wall time with one thread over the median with two.  The threads meet twice
a round inside the compiled code and wait for each other there by spinning, so the CPU of
``n_jobs=2`` counts both cores for the whole of the rounds, and the wall time needs two
free cores: on a machine shared with other work it is noisy (the load average says how busy
the machine was).

With ``--python PYTHON`` the fits are those of the structlp installed for that interpreter
(its wheel's kernels, built ahead of time) instead of this tree's; with ``--previous
PYTHON`` the previous release's fits of both settings run too, each just before this
release's, and the table gives the ratio of the wall times.

Run: ``python benchmarks/bench_threads.py --json benchmarks/results/threads.json
[--repeats 3] [--data scale|fold1] [--python PYTHON] [--previous PYTHON]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
C, TOL = 0.1, 1e-3


def child(n_jobs, data, installed=False):
    if installed:           # the interpreter's installed structlp, not this tree's
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
        os.chdir(Path.home())
    else:
        sys.path.insert(0, str(ROOT))
    from bench_ocr import exact_objective, words

    from structlp import FrankWolfeLearner
    from structlp.structures import TreeLabeling
    X, Y = words(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FrankWolfeLearner(TreeLabeling(26), C=C, tol=1e-1, random_state=0,
                          n_jobs=n_jobs).fit(X[:50], Y[:50])
    fw = FrankWolfeLearner(TreeLabeling(26), C=C, tol=TOL, max_iter=1000, random_state=0,
                           n_jobs=n_jobs)
    t0, c0 = time.perf_counter(), time.process_time()
    fw.fit(X, Y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    import structlp.compiled
    return {"n_jobs": n_jobs, "wall": wall, "cpu": cpu,
            "epochs": int(fw.n_iter_),
            "objective": fw.objective_, "duality_gap": fw.duality_gap_,
            "relative_gap": fw.duality_gap_ / fw.objective_, "converged": fw.converged_,
            "exact_F": float(exact_objective(fw.coef_, X, Y)),
            "inference": fw.fit_time_["inference"], "check": fw.fit_time_["check"],
            "load_average": list(os.getloadavg()), "n_words": len(X),
            "kernels": structlp.compiled.status()}


def run_child(n_jobs, data, python=None):
    """One fit in a fresh process: this tree's structlp, or with ``python`` (an
    interpreter) the structlp installed there."""
    env = dict(os.environ, **ENV)
    env.pop("PYTHONPATH", None)
    if python is None:
        env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([python or sys.executable, str(Path(__file__).resolve()), "--child",
                          str(n_jobs), "--data", data]
                         + (["--installed"] if python else []), capture_output=True,
                         text=True, env=env, cwd=ROOT if python is None else Path.home())
    if out.returncode:
        raise RuntimeError(f"n_jobs={n_jobs} failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per setting")
    ap.add_argument("--data", default="scale", choices=("scale", "fold1"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--python", default=None,
                    help="an interpreter with this release installed (its wheel's kernels "
                         "built ahead of time): its fits instead of this tree's")
    ap.add_argument("--previous", default=None,
                    help="an interpreter with the previous release installed: its fits with "
                         "n_jobs=2 (and 1) too, each just before this release's")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--installed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.data, args.installed)))
        return
    import report
    started = report.machine()
    runs, prev = [], []
    for r in range(args.repeats):
        for n_jobs in (1, 2):
            if args.previous:
                res = run_child(n_jobs, args.data, args.previous)
                prev.append(res)
                print(f"previous release, n_jobs={n_jobs}: wall {res['wall']:.2f} s, "
                      f"{res['epochs']} epochs", flush=True)
            res = run_child(n_jobs, args.data, args.python)
            runs.append(res)
            print(f"n_jobs={n_jobs}: wall {res['wall']:.2f} s, CPU {res['cpu']:.2f} s, "
                  f"{res['epochs']} epochs, F {res['objective']:.6f} (gap "
                  f"{res['relative_gap']:.2e}), load {res['load_average'][0]:.2f}",
                  flush=True)
    rows = []
    med = {}
    for n_jobs in (1, 2):
        rs = [r for r in runs if r["n_jobs"] == n_jobs]
        m = {k: float(np.median([r[k] for r in rs]))
             for k in ("wall", "cpu", "epochs", "objective", "relative_gap",
                  "exact_F")}
        m["load"] = float(np.median([r["load_average"][0] for r in rs]))
        med[n_jobs] = m
        rows.append({"n_jobs": n_jobs, "wall": m["wall"], "cpu": m["cpu"],
                     "epochs": m["epochs"], "objective": m["objective"],
                     "relative_gap": m["relative_gap"],
                     "all_certified": all(r["converged"] and r["relative_gap"] <= TOL
                                          for r in rs),
                     "speedup": med[1]["wall"] / m["wall"], "load": m["load"]})
    for n_jobs, row in zip((1, 2), rows):
        ps = [r["wall"] for r in prev if r["n_jobs"] == n_jobs]
        row["prev_wall"] = float(np.median(ps)) if ps else None
        row["vs_previous"] = row["wall"] / row["prev_wall"] if ps else None
    rel = abs(med[2]["objective"] - med[1]["objective"]) / med[1]["objective"]
    print(f"speed-up (median wall, 1 thread / 2 threads): {rows[1]['speedup']:.2f}x; "
          f"objectives differ by {rel:.2e} (relative)"
          + (f"; n_jobs=2 against the previous release: {rows[1]['vs_previous']:.2f}x its "
             "wall time" if prev else ""))
    if args.json:
        path = Path(args.json)
        label = "6,251 words" if args.data == "scale" else "fold 1 (704 words)"
        report.write(
            path, name="threads", title="Both cores in one fit: FrankWolfeLearner n_jobs=2",
            runs=args.repeats, runs_note="median",
            description=(f"OCR letters, {label}, chains, C = 0.1, certified to tol = 1e-3 by "
                         "the exact duality gap: the compiled epochs on one thread (n_jobs=1) "
                         "and on two threads of one process (n_jobs=2, CoCoA+ rounds over two "
                         "partitions of the blocks). Fresh process per fit, after a warm-up "
                         f"fit; medians of {args.repeats} fits per setting, alternating"
                         + (", each just after the previous release's fit of the same "
                            "setting" if prev else "")
                         + (" (this release: its installed wheel, kernels built ahead of "
                            "time)." if args.python else " (this tree, numba's JIT).")),
            floor=("n_jobs=1", "the same fit on one thread; speed-up = its median wall time "
                               "over this row's"),
            tables=[{"caption": "Medians per setting (wall and CPU seconds of the fit; CPU "
                                "counts both threads)",
                     "columns": [{"key": "n_jobs", "label": "n_jobs"},
                                 {"key": "wall", "label": "wall", "unit": "s"},
                                 {"key": "cpu", "label": "CPU", "unit": "s"},
                                 {"key": "epochs", "label": "epochs"},
                                 {"key": "objective", "label": "certified F",
                                  "format": ".6f"},
                                 {"key": "relative_gap", "label": "gap / F", "format": ".2e"},
                                 {"key": "all_certified", "label": "all certified"},
                                 {"key": "speedup", "label": "wall speed-up", "ratio": True},
                                 {"key": "prev_wall", "label": "previous release: wall",
                                  "unit": "s"},
                                 {"key": "vs_previous", "label": "wall / previous release's",
                                  "ratio": True},
                                 {"key": "load", "label": "load (1 min)", "format": ".2f"}],
                     "rows": rows}],
            notes=["The two threads run an epoch's rounds in one compiled call each and meet "
                   "twice a round inside it, waiting for each other by spinning: the CPU of "
                   "n_jobs=2 counts both cores for the whole of the rounds, and its wall "
                   "time needs two free cores.",
                   f"Relative difference of the two certified objectives: {rel:.1e} (both "
                   "within 1e-3 of the optimum).", "Each fit: " + "; ".join(
                       f"n_jobs={r['n_jobs']} wall {r['wall']:.2f} s load "
                       f"{r['load_average'][0]:.1f}" for r in runs)],
            command=report.command_with({"--python": "THIS_RELEASE_PYTHON",
                                         "--previous": "PREVIOUS_PYTHON"}),
            started=started, modules=("numba",))
        (path.parent / "raw").mkdir(exist_ok=True)
        (path.parent / "raw" / path.name).write_text(json.dumps({"this": runs,
                                                                 "previous": prev}, indent=1))


if __name__ == "__main__":
    main()
