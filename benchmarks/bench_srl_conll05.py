"""Fit cost of each SRL model on pruned CoNLL-2005 trees (``problems/srl_conll05.py``).

Fits AGM exact (cutting plane), AGM-SG (subgradient), the CRF and the SSVM (cutting
plane) on the same ``--n-train`` propositions of test.wsj at a fixed ``--reg``, each
in this process, ``--repeats`` times, and scores them on test.brown.  Prints CPU and
wall seconds per model (the median over repeats) and the ratio of each model's CPU
time to the CRF's (the floor: the one model without an inner LP or QP per round).
``--json PATH`` writes name, machine, date, floor, per-model seconds, ratios, rounds
and test losses.

Needs the CoNLL-2005 test sets (``../shared/data/conll05_srl`` or
``$STRUCTLP_CONLL05_PATH``; research use only, not shipped).

Run: python benchmarks/bench_srl_conll05.py [--n-train 30] [--reg 10] [--repeats 1]
     [--json PATH]
"""

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "problems"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-train", type=int, default=30)
    ap.add_argument("--reg", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    import srl_conll05 as P
    from structlp.datasets.conll05 import load_conll05
    from structlp.datasets.conll05_features import SRLFeatures, ordinal_loss_matrix

    D = load_conll05()
    F = SRLFeatures().fit(D["test.wsj"])
    Xw, Yw, _ = F.transform(D["test.wsj"])
    Xb, Yb, _ = F.transform(D["test.brown"])
    L, _ = ordinal_loss_matrix(0)
    idx = np.random.default_rng(a.seed).choice(len(Xw), a.n_train, replace=False)
    Xtr, Ytr = [Xw[i] for i in idx], [Yw[i] for i in idx]
    cfg = {"L": L, "epochs": 10, "seed": a.seed}
    out = {}
    for model in P.MODELS:
        cpu, wall = [], []
        for _ in range(a.repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            est = P._make(model, a.reg, len(Xtr), cfg).fit(Xtr, Ytr)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
        out[model] = {"cpu": float(np.median(cpu)), "wall": float(np.median(wall)),
                      "rounds": int(getattr(est, "n_iter_", 0) or 0),
                      "test_loss": P.mean_loss(est.predict(Xb), Yb, L)}
    floor = out["CRF"]["cpu"]
    print(f"SRL fits on {a.n_train} test.wsj propositions, reg {a.reg:g}; ratio = CPU / CRF CPU")
    print(f"{'model':<7} {'cpu s':>8} {'wall s':>8} {'ratio':>7} {'rounds':>7} {'brown loss':>11}")
    for m, r in out.items():
        print(f"{m:<7} {r['cpu']:8.2f} {r['wall']:8.2f} {r['cpu'] / floor:7.2f} "
              f"{r['rounds']:7d} {r['test_loss']:11.4f}")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "name": "bench_srl_conll05", "machine": platform.platform(),
            "processor": platform.processor(), "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "floor": "TreeCRF fit (L-BFGS), CPU seconds", "n_train": a.n_train, "reg": a.reg,
            "repeats": a.repeats, "results": out,
            "ratios": {m: r["cpu"] / floor for m, r in out.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
