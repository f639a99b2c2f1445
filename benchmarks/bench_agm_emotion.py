"""Where the exact emotion protocol's time goes, and before/after on one split's final fits.

Runs ``problems/emotion_intensity.py``'s final-fit tasks of one split (12 AGM / SSVM
tasks of 6 per-class QPs each, and the CRF) at a fixed reg, serially (``--n-jobs 1``,
the default, Clarabel then using its threads) or in the experiment's worker pool
(``--n-jobs 2``: one solver thread per worker, as the full run), in fresh
subprocesses, once per checkout given (``--tree A --tree B``: e.g. the code
before a change and after it), interleaved ``--repeats`` times.  Prints CPU seconds
(``time.process_time`` of the subprocess, children included) beside wall seconds,
the per-model solver seconds, and whether the results equal the first tree's.

Needs the CK+ data (``../shared/data/ck_emotion`` or ``$STRUCTLP_CK_PATH``).

Run: python benchmarks/bench_agm_emotion.py [--tree PATH ...] [--split S] [--reg R]
     [--repeats N] [--n-jobs J]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, resource
sys.path.insert(0, sys.argv[1] + "/problems")
import numpy as np
import emotion_intensity as E
c0 = time.process_time(); t0 = time.perf_counter()
res = E.run(splits=1, reg_grid=[float(sys.argv[2])], n_jobs=int(sys.argv[3]),
            data_path=sys.argv[4] if len(sys.argv) > 4 else None)
wall = time.perf_counter() - t0
print(json.dumps({"cpu": res["cpu_seconds"], "wall": wall,
                  "breakdown": {k: {"fit_cpu": v["fit_cpu"], "solver": v["solver"]}
                                for k, v in res["breakdown"].items()},
                  "table": {m: {n: row[n]["per_split"] for n in row}
                            for m, row in res["table"].items()}}))
"""


def run_tree(tree, reg, data_path, n_jobs=1):
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", CHILD, str(tree), str(reg), str(n_jobs)]
    if data_path:
        args.append(data_path)
    out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", action="append", default=None,
                    help="checkout roots to compare (default: this one)")
    ap.add_argument("--reg", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--data-path", default=None)
    ap.add_argument("--n-jobs", type=int, default=1,
                    help="worker processes of the experiment (2: one solver thread each)")
    a = ap.parse_args()
    trees = [Path(t).resolve() for t in (a.tree or [ROOT])]
    print(f"one split's final fits (reg={a.reg:g}, n_jobs={a.n_jobs}); load average at start "
          f"{os.getloadavg()[0]:.1f}")
    results = {t: [] for t in trees}
    for _ in range(a.repeats):
        for t in trees:
            results[t].append(run_tree(t, a.reg, a.data_path, a.n_jobs))
    ref = results[trees[0]][0]["table"]
    print(f"{'tree':<28} {'CPU s':>8} {'wall s':>8}   per model: fit CPU s (solver wall s)"
          "   same results")
    for t in trees:
        for r in results[t]:
            per = ", ".join(f"{k.split('/')[1]} {v['fit_cpu']:.1f} ({v['solver']:.1f})"
                            for k, v in sorted(r["breakdown"].items()))
            print(f"{str(t)[-28:]:<28} {r['cpu']:8.1f} {r['wall']:8.1f}   {per}   "
                  f"{r['table'] == ref}")
    print(f"load average at end {os.getloadavg()[0]:.1f}; {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
