"""Runtime of the softmax-margin gradient: weighted automata vs naive enumeration.

The setting of Cortes et al. (2018), Fig. 5: alphabet |Delta| = 10, bigram
features (d = 100), y_i uniform in Delta^l, w ~ N(0, I), l = 2..30.  For every
loss we time one full gradient computation ``softmax_margin(..., method=...)``,
which for "automata" includes building the loss automaton B and the lattice
C = A o B (the learner builds them once per example and then pays only the
"cached" column).  The naive method enumerates the 10**l outputs (vectorized in
chunks) and runs up to ``--naive-max`` (default 7).

Prints one table per loss with the time per gradient, the ratio naive/automata
in the same run, the size of B (max states per layer, total states), and the
fitted growth: ``time ~ l**p`` (least squares on log-log for l >= 8) and the
per-step factor ``time(l+1)/time(l)`` (log-linear fit) — a polynomial shows a
steady p and a falling factor, an exponential a steady factor > 1.

    python benchmarks/bench_sequence.py                 # full run (~3-4 minutes)
    python benchmarks/bench_sequence.py --quick         # l <= 12, naive <= 5
    python benchmarks/bench_sequence.py --json out.json

``--json PATH`` writes the tables in the schema of ``benchmarks/report.py`` (machine, date,
the floor -- naive enumeration -- and the ratios).
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse
import json
import time

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/report.py
import report as bench_report  # benchmarks/report.py: the JSON schema
from structlp.sequence import (AutomatonTooLargeError, BigramFeatures, EditDistance, NGramLoss,
                               SmithWaterman, compile_example, softmax_margin)

LOSSES = {
    "edit": EditDistance(),
    "edit cap=3": EditDistance(cap=3),
    "edit band=2 (approx)": EditDistance(band=2),
    "smith-waterman": SmithWaterman(),
    "smith-waterman cap=4": SmithWaterman(cap=4),
    "bigram (n-gram n=2)": NGramLoss(n=2),
}
NAIVE_FOR = ("edit", "smith-waterman", "bigram (n-gram n=2)")


def time_call(fn, repeats):
    """The median seconds of ``repeats`` calls of ``fn`` and its last result."""
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def fit_growth(ls, ts, lmin=8):
    ls, ts = np.asarray(ls, float), np.asarray(ts, float)
    keep = ls >= lmin
    if keep.sum() < 3:
        return None, None
    p = np.polyfit(np.log(ls[keep]), np.log(ts[keep]), 1)[0]
    factor = np.exp(np.polyfit(ls[keep], np.log(ts[keep]), 1)[0])
    return float(p), float(factor)


def run(max_l=30, naive_max=7, trials=5, budget=4.0, seed=0, losses=None, repeats=1):
    k = 10
    feats = BigramFeatures(k)
    rng = np.random.default_rng(seed)
    lengths = list(range(2, max_l + 1))
    data = {l: [(rng.integers(0, k, l), rng.normal(size=k * k)) for _ in range(trials)]
            for l in lengths}
    results = {}
    for name, loss in LOSSES.items():
        if losses and name not in losses:
            continue
        rows = []
        stopped = None
        for l in lengths:
            y, w = data[l][0]
            row = {"l": l}
            if stopped is None:
                try:
                    # mean over `trials` random instances (y_i, w) of this length
                    t_auto, t_cached, infos = [], [], []
                    for yt, wt in data[l]:
                        t, (_, _, info) = time_call(
                            lambda: softmax_margin(wt, None, yt, loss, feats, return_info=True),
                            repeats)
                        ex = compile_example(None, yt, loss, feats)
                        tc, _ = time_call(lambda: ex.value_and_grad(wt), repeats)
                        t_auto.append(t)
                        t_cached.append(tc)
                        infos.append(info)
                except AutomatonTooLargeError:
                    stopped = f"B too large at l={l}"
                    t_auto = None
                if t_auto:
                    row.update(automata=float(np.mean(t_auto)), cached=float(np.mean(t_cached)),
                               B_max_layer=int(np.max([i["max_states_per_layer"] for i in infos])),
                               B_states=int(np.mean([i["n_states"] for i in infos])),
                               C_states=int(np.mean([i["lattice_states"] for i in infos])))
                    if row["automata"] > budget:
                        stopped = f"stopped after l={l} (> {budget:.0f} s per gradient)"
            if name in NAIVE_FOR and l <= naive_max:
                t_naive, (vn, gn) = time_call(
                    lambda: softmax_margin(w, None, y, loss, feats, method="naive"), repeats)
                row["naive"] = t_naive
                if "automata" in row:
                    va, ga = softmax_margin(w, None, y, loss, feats)
                    row["max_rel_err"] = float(max(
                        abs(va - vn) / max(1, abs(vn)),
                        np.max(np.abs(ga - gn)) / max(1, np.max(np.abs(gn)))))
            rows.append(row)
        auto = [(r["l"], r["automata"]) for r in rows if "automata" in r]
        cached = [(r["l"], r["cached"]) for r in rows if "cached" in r]
        naive = [(r["l"], r["naive"]) for r in rows if "naive" in r]
        results[name] = {
            "rows": rows, "stopped": stopped,
            "growth_automata": fit_growth(*zip(*auto)) if auto else (None, None),
            "growth_cached": fit_growth(*zip(*cached)) if cached else (None, None),
            "growth_naive": fit_growth(*zip(*naive), lmin=4) if naive else (None, None),
        }
    return results


def fmt(t):
    return "-" if t is None else (f"{t * 1e3:9.2f}ms" if t < 1 else f"{t:9.2f}s ")


def report(results):
    lines = ["softmax-margin gradient, |Delta| = 10, bigram features (d = 100); "
             "time per gradient (automata includes building B and C; cached = C reused),"
             " mean over --trials random (y_i, w); naive: one instance; max rel err = automata vs naive"]
    for name, res in results.items():
        lines.append("")
        lines.append(f"== {name} ==" + (f"   [{res['stopped']}]" if res["stopped"] else ""))
        lines.append(f"{'l':>3} {'automata':>11} {'cached':>11} {'naive':>11} {'naive/auto':>11}"
                     f" {'naive/cached':>12}"
                     f" {'B max/layer':>11} {'B states':>9} {'C states':>9} {'max rel err':>11}")
        for r in res["rows"]:
            if "automata" not in r and "naive" not in r:
                continue
            both = "naive" in r and "automata" in r
            ratio = (f"{r['naive'] / r['automata']:11.0f} {r['naive'] / r['cached']:12.0f}"
                     if both else f"{'-':>11} {'-':>12}")
            err = f"{r['max_rel_err']:11.1e}" if "max_rel_err" in r else f"{'-':>11}"
            lines.append(
                f"{r['l']:>3} {fmt(r.get('automata')):>11} {fmt(r.get('cached')):>11} "
                f"{fmt(r.get('naive')):>11} {ratio} {r.get('B_max_layer', '-'):>11} "
                f"{r.get('B_states', '-'):>9} {r.get('C_states', '-'):>9} {err}")
        for key, label in (("growth_automata", "automata"), ("growth_cached", "cached"),
                           ("growth_naive", "naive")):
            p, f = res[key]
            if p is not None:
                lines.append(f"   growth {label:>8}: time ~ l^{p:.2f}  "
                             f"(per-step factor {f:.2f}; fitted on l >= "
                             f"{8 if label != 'naive' else 4})")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-l", type=int, default=30)
    ap.add_argument("--naive-max", type=int, default=7)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--budget", type=float, default=4.0,
                    help="stop a loss once one gradient takes longer than this (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1,
                    help="timings of each call (the median is kept)")
    ap.add_argument("--quick", action="store_true", help="l <= 12, naive <= 5, 2 trials")
    ap.add_argument("--losses", nargs="*", choices=list(LOSSES), metavar="NAME",
                    help=f"only these losses (default all): {', '.join(LOSSES)}")
    ap.add_argument("--json", help="write the measurements to this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.max_l, args.naive_max, args.trials = 12, 5, 2
    started = bench_report.machine()
    results = run(args.max_l, args.naive_max, args.trials, args.budget, args.seed, args.losses,
                  args.repeats)
    print(report(results))
    if args.json:
        write_json(args.json, results, args, started)


def write_json(path, results, args, started):
    """One table per loss, in the schema of benchmarks/report.py."""
    cols = [("l", "length l", None), ("automata", "automata", "ms"), ("cached", "cached", "ms"),
            ("naive", "naive", "ms"), ("naive_over_automata", "naive / automata", None),
            ("naive_over_cached", "naive / cached", None), ("B_max_layer", "B max per layer", None),
            ("B_states", "B states", None), ("C_states", "C states", None),
            ("max_rel_err", "max relative error", None)]
    columns = []
    for key, label, unit in cols:
        col = {"key": key, "label": label}
        if unit:
            col["unit"] = unit
        if key.startswith("naive_over"):
            col["ratio"] = True
        if key == "max_rel_err":
            col["format"] = ".1e"
        columns.append(col)
    tables, notes = [], []
    for name, res in results.items():
        rows = []
        for r in res["rows"]:
            if "automata" not in r and "naive" not in r:
                continue
            row = {k: v for k, v in r.items()}
            for key in ("automata", "cached", "naive"):
                if key in row:
                    row[key] = row[key] * 1e3
            if "naive" in r and "automata" in r:
                row["naive_over_automata"] = r["naive"] / r["automata"]
                row["naive_over_cached"] = r["naive"] / r["cached"]
            rows.append(row)
        growth = []
        for key, label in (("growth_automata", "automata"), ("growth_cached", "cached"),
                           ("growth_naive", "naive")):
            p, f = res[key]
            if p is not None:
                growth.append(f"{label} time ~ l^{p:.2f} (per-step factor {f:.2f})")
        caption = f"Loss: {name}." + (f" {res['stopped']}." if res["stopped"] else "")
        if growth:
            caption += " Fitted growth: " + "; ".join(growth) + "."
        tables.append({"caption": caption, "columns": columns, "rows": rows})
    bench_report.write(
        path, name="sequence", title="Softmax-margin gradients: automata against enumeration",
        description=("Cortes et al. (2018), Fig. 5: alphabet of 10 labels, bigram features "
                     "(d = 100), y_i uniform, w ~ N(0, I). Time of one gradient of the "
                     "softmax margin: automata (building the loss automaton B and the lattice "
                     "C = A o B included), cached (C reused, as the learner does), and naive "
                     f"enumeration of the 10**l outputs (up to l = {args.naive_max}); mean over "
                     f"{args.trials} random instances per length (naive: one)."),
        floor=("naive enumeration", "softmax_margin(..., method='naive'), every output of "
               "length l enumerated; the ratios divide its time by the automata's"),
        tables=tables, started=started, notes=notes, runs=args.repeats,
        runs_note=(f"median of {args.repeats} timings of each call" if args.repeats > 1
                   else "one timing of each call") + f"; automata and cached: mean over "
                  f"{args.trials} instances per length, naive: one instance")


if __name__ == "__main__":
    main()
