"""Fit cost of each SRL model on pruned CoNLL-2005 trees (``problems/srl_conll05.py``).

Fits AGM exact (cutting plane), AGM-SG (subgradient), the CRF and the SSVM (Frank-Wolfe
on trees) on the same ``--n-train`` propositions of test.wsj at a fixed ``--reg`` (default
400 and 0.1, the regularization cross-validation picks for the AGM there), each as the
problem fits it (``fit_model``), in this process, ``--repeats`` times, and scores them on
test.brown.  Prints CPU and
wall seconds per model (the median over repeats) and the ratio of each model's CPU
time to the CRF's (the floor: the one model without an inner LP or QP per round).
``--frank-wolfe`` also fits the exact AGM by ``method="frank_wolfe"`` (the same objective)
and reports its CPU ratio to the cutting plane's.
``--json PATH`` writes the benchmarks page's file (``benchmarks/report.py``'s schema) to
PATH and the raw timings (machine, date, per-model seconds, rounds, ratios) to ``raw/``
beside it.  The test losses are printed only: the JSON holds timings, nothing derived from
the data.

Needs the CoNLL-2005 test sets (``../shared/data/conll05_srl`` or
``$STRUCTLP_CONLL05_PATH``; research use only, not shipped).

Run: python benchmarks/bench_srl_conll05.py [--n-train 400] [--reg 0.1] [--repeats 1]
     [--frank-wolfe] [--json PATH]
"""

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # this checkout's structlp, not an installed one
sys.path.insert(0, str(ROOT / "problems"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # benchmarks/report.py: the results schema


def started(doc):
    """The schema's machine dict from a raw document (older ones hold only the platform:
    the CPU model and cores are then this machine's, where they were converted)."""
    m = doc["machine"]
    if isinstance(m, dict):
        return m
    return {"cpu": doc.get("processor") or report.cpu_model(),
            "cores": doc.get("cores", os.cpu_count()), "platform": m,
            "python": doc.get("python"), "load": None}


def write_schema(path, doc):
    """The benchmarks page's file (``benchmarks/report.py``'s schema) from the raw timings."""
    res, ratios = doc["results"], doc["ratios"]
    rows = [{"model": m, "cpu": r["cpu"], "wall": r["wall"], "rounds": r["rounds"] or None,
             "ratio": ratios[m], "wall_ratio": r["wall"] / res["CRF"]["wall"]}
            for m, r in res.items()]
    if FW in res:
        rows[list(res).index(FW)]["vs_cp"] = res[FW]["cpu"] / res["AGM"]["cpu"]
    columns = [{"key": "model", "label": "model"},
               {"key": "cpu", "label": "fit", "unit": "CPU s"},
               {"key": "wall", "label": "fit", "unit": "wall s"},
               {"key": "rounds", "label": "rounds"},
               {"key": "ratio", "label": "CPU / CRF CPU", "ratio": True},
               {"key": "wall_ratio", "label": "wall / CRF wall", "ratio": True}]
    if FW in res:
        columns.append({"key": "vs_cp", "label": "CPU / AGM cutting plane CPU",
                        "ratio": True})
    notes = [f"{doc['n_train']} training propositions, regularization {doc['reg']:g}, "
             f"median of {doc['repeats']} fit(s) per model, each in the benchmark's process; "
             "AGM = adversarial graphical model (cutting plane), AGM-SG = the same by "
             "subgradient, SSVM = structured SVM (block-coordinate Frank-Wolfe on the trees, "
             "certified duality gap at most 1e-4 in loss units; rounds = epochs), AGM-FW = the "
             "exact AGM by Frank-Wolfe (method='frank_wolfe', relative duality gap 1e-3; the "
             "cutting plane stops at 1e-4 in loss units).",
             "BLAS runs on one thread during every fit (its idle threads would otherwise "
             "count as CPU time: the CRF's L-BFGS on the default threads costs several times "
             "the CPU seconds). The machine is shared: wall seconds include the time spent "
             "waiting for a core, CPU seconds are the comparable figure.",
             "The CoNLL-2005 data are research use only and not shipped; these are timings "
             "only.",
             f"Raw timings: benchmarks/results/raw/{Path(path).name}."]
    if not isinstance(doc["machine"], dict):
        notes.insert(1, "The load average at the start of this run was not recorded.")
    data = report.write(path, name="srl_conll05",
                        title="Semantic role labelling (CoNLL-2005): fit cost per model",
                        description="Each SRL model (problems/srl_conll05.py) fitted on "
                                    "the same pruned-tree propositions of test.wsj: CPU and "
                                    "wall seconds, rounds, and the ratios to the CRF's fit.",
                        floor=("TreeCRF fit", "one fit of the tree-structured CRF (L-BFGS) "
                               "on the same propositions; each ratio divides a model's CPU "
                               "(wall) seconds by the CRF's"),
                        tables=[{"columns": columns, "rows": [
                            {k: v for k, v in r.items() if v is not None} for r in rows]}],
                        command=doc.get("command"), notes=notes, started=started(doc),
                        runs=doc.get("repeats", 1),
                        runs_note="median" if doc.get("repeats", 1) > 1 else "a single fit")
    data["date"] = datetime.datetime.fromisoformat(doc["date"]).astimezone(
        datetime.timezone.utc).replace(microsecond=0).isoformat()   # the run's date
    report.validate(data, Path(path).name)
    Path(path).write_text(json.dumps(data, indent=1) + "\n")
    return data


FW = "AGM-FW"


def _make(P, model, reg, cfg):
    """The problem's model, or the exact AGM by Frank–Wolfe (``FW``) to the relative
    duality gap 1e-3."""
    if model == FW:
        from structlp.agm import AdversarialGraphicalModel
        return AdversarialGraphicalModel(len(P.LABELS), loss=cfg["L"], normalize_weights=True,
                                         reg=reg, method="frank_wolfe", tol=1e-3,
                                         max_iter=1000, random_state=cfg["seed"])
    return P._make(model, reg, cfg["m"], cfg)


def _fit(P, model, reg, X, Y, cfg):
    if model == FW:
        return _make(P, model, reg, cfg).fit(X, Y)
    return P.fit_model(model, reg, X, Y, cfg)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-train", type=int, default=400)
    ap.add_argument("--reg", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--frank-wolfe", action="store_true",
                    help="also fit the exact AGM by method='frank_wolfe' (the same objective "
                         "as the cutting plane's) and report its CPU ratio to it")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    machine = report.machine()
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    import srl_conll05 as P

    from structlp.datasets.conll05 import load_conll05
    from structlp.learners.master import single_threaded_blas
    from structlp.datasets.conll05_features import SRLFeatures, ordinal_loss_matrix

    D = load_conll05()
    F = SRLFeatures().fit(D["test.wsj"])
    Xw, Yw, _ = F.transform(D["test.wsj"])
    Xb, Yb, _ = F.transform(D["test.brown"])
    L, _ = ordinal_loss_matrix(0)
    idx = np.random.default_rng(a.seed).choice(len(Xw), a.n_train, replace=False)
    Xtr, Ytr = [Xw[i] for i in idx], [Yw[i] for i in idx]
    cfg = {"L": L, "epochs": 10, "seed": a.seed, "m": len(Xtr)}
    out = {}
    for model in P.MODELS + ((FW,) if a.frank_wolfe else ()):
        cpu, wall = [], []
        for _ in range(a.repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            with single_threaded_blas():    # CPU seconds of one core for every model
                est = _fit(P, model, a.reg, Xtr, Ytr, cfg)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
        out[model] = {"cpu": float(np.median(cpu)), "wall": float(np.median(wall)),
                      "rounds": int(getattr(est, "n_iter_", 0) or 0),
                      "objective": float(getattr(est, "objective_", np.nan)),
                      "gap": (a.reg * float(est.duality_gap_) if hasattr(est, "duality_gap_")
                              else float(getattr(est, "objective_", np.nan)
                                         - getattr(est, "lower_bound_", np.nan))),
                      "test_loss": P.mean_loss(est.predict(Xb), Yb, L)}
    floor = out["CRF"]["cpu"]
    print(f"SRL fits on {a.n_train} test.wsj propositions, reg {a.reg:g}; ratio = CPU / CRF CPU")
    print(f"{'model':<7} {'cpu s':>8} {'wall s':>8} {'ratio':>7} {'rounds':>7} {'brown loss':>11}"
          f" {'certified gap':>14}")
    for m, r in out.items():
        print(f"{m:<7} {r['cpu']:8.2f} {r['wall']:8.2f} {r['cpu'] / floor:7.2f} "
              f"{r['rounds']:7d} {r['test_loss']:11.4f} {r['gap']:14.2e}")
    print(f"load average at the start {machine.get('load')}, at the end "
          f"{[round(x, 2) for x in os.getloadavg()]}")
    if FW in out:
        print(f"{FW}: CPU {out[FW]['cpu'] / out['AGM']['cpu']:.3f} x the cutting plane's; "
              f"objectives {out[FW]['objective']:.6f} (gap {out[FW]['gap']:.2e}) and "
              f"{out['AGM']['objective']:.6f} (gap {out['AGM']['gap']:.2e})")
    if a.json:
        path = Path(a.json)
        raw = path.parent / "raw" / path.name
        raw.parent.mkdir(parents=True, exist_ok=True)
        doc = {"name": "bench_srl_conll05", "machine": machine, "date": date,
               "command": " ".join(["python", "benchmarks/bench_srl_conll05.py"]
                                   + (sys.argv[1:] if argv is None else list(argv))),
               "floor": "TreeCRF fit (L-BFGS), CPU seconds", "n_train": a.n_train,
               "reg": a.reg, "repeats": a.repeats, "seed": a.seed,
               "results": {m: {k: v for k, v in r.items()
                               if k not in ("test_loss", "objective", "gap")}
                           for m, r in out.items()},
               "ratios": {m: r["cpu"] / floor for m, r in out.items()}}
        raw.write_text(json.dumps(doc, indent=1) + "\n")
        write_schema(path, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
