"""First-order learners vs the joint QP: time to the objective, curves, time per epoch.

Planted bipartite assignments (``n x n`` edge features, ``d`` features per
edge, the outputs the Hungarian assignments of ``x @ w0`` plus Gaussian score
noise), ``C = 0.01`` (``--C``), Hamming loss:

1. **Time to a relative objective.**  MaxMarginLearner (the joint min-max QP,
   CLARABEL) gives the optimum ``F*``.  Reported for each learner: wall-clock
   seconds until its objective (exact hinge losses) is within ``1e-4 F*``, and
   the seconds of a ``fit`` that *certifies* that accuracy by itself (this
   machine's speed drifts by up to 2x over minutes, so Frank–Wolfe is timed
   ``repeats`` times, interleaved with a QP run every other round; the table
   gives the fastest run and the median):
   FrankWolfeLearner with ``tol=1e-4`` (relative duality gap),
   CuttingPlaneLearner with ``tol = 1e-4 F* / (C m)`` (its bound is
   ``C m tol``).  The Frank–Wolfe curve is the exact objective of the running
   ``w`` after every epoch of the default fit (same iterates), with the time
   of those evaluations left out; the cutting plane is timed as it runs (its
   oracle pass is part of the method).
2. **Curves.**  Relative suboptimality ``(F - F*) / F*`` against seconds for
   FrankWolfeLearner, CuttingPlaneLearner, SubgradientLearner, and the QP as
   one point, saved to ``benchmarks/results/frank_wolfe_curves.png`` (git-ignored).
3. **Time per epoch against m** (one BCFW pass over the examples, no gap
   pass), up to ``m = 20,000``, with the growth exponent ``time ~ m**p``.
4. **Parallel oracles.**  b-matchings (``R = P = 2``) have no combinatorial
   oracle, so every batch of examples is one inference LP; serial against
   ``n_jobs=2`` processes (same iterates, checked).

5. **Before / after** (``--before PATH``, a checkout of an earlier structlp):
   FrankWolfeLearner of that code and of this one on the same data, each fit in
   its own process (``PYTHONPATH`` first), interleaved with each other and with
   the joint QP (this code, every other round), at ``C = 0.01`` and ``C = 0.1``;
   CPU (``time.process_time``) and wall seconds to ``F <= (1 + rel) F*`` and of
   a certified fit, fastest and median of ``repeats``.  Each process fits twice: the
   certified figure is the second fit, and the first fit of the fresh process (which
   pays numba's first compiled call, about 0.4 s CPU, where the learner uses numba) is
   reported beside it; whether the imports had loaded numba before is printed.

    python benchmarks/bench_frank_wolfe.py            # a few minutes
    python benchmarks/bench_frank_wolfe.py --quick    # m = 200, epochs up to 2,000
    python benchmarks/bench_frank_wolfe.py --before ../old-structlp --only-before-after
    python benchmarks/bench_frank_wolfe.py --quick --json benchmarks/results/frank_wolfe.json

``--json PATH`` writes tables 1, 3 and 4 in the schema of ``benchmarks/report.py``
(machine, date, the floor -- the joint QP, and the serial oracles -- and the ratios).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/report.py
import report
from structlp import MaxMarginLearner
from structlp.compiler import prepare
from structlp import ConvergenceWarning, CuttingPlaneLearner
from structlp.learners.frank_wolfe import FrankWolfeLearner
from structlp.inference import loss_augmented
from structlp.structures import BipartiteMatching
from structlp.learners.subgradient import SubgradientLearner
from structlp.parallel import CHUNK

OUT = Path(__file__).resolve().parent / "results"   # git-ignored


def planted(rng, m, n, d, noise):
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    model = BipartiteMatching()
    Y = [model.inference(x, (x @ w0).ravel() + noise * rng.normal(size=n * n)) for x in X]
    return X, Y


class TimedCuttingPlane(CuttingPlaneLearner):
    """CuttingPlaneLearner recording (seconds, exact objective) at every oracle pass."""

    def _oracle(self, data, parts, w, polys):
        out = super()._oracle(data, parts, w, polys)      # (maximizers, losses, hinge)
        self.trace_.append((time.perf_counter() - self.start_,
                            0.5 * float(w @ w) + self.C * float(out[-1].sum())))
        return out

    def fit(self, X, Y):
        self.trace_, self.start_ = [], time.perf_counter()
        return super().fit(X, Y)


class MonitoredFrankWolfe(FrankWolfeLearner):
    """FrankWolfeLearner recording (seconds, exact objective) after every epoch.

    The same iterates as an unmonitored fit with the same seed; the time of
    the objective evaluations is left out of the seconds."""

    def _after_epoch(self, epoch, w):
        t0, c0 = time.perf_counter(), time.process_time()
        hinge = loss_augmented(self.model, self.data_, w)[1]
        obj = 0.5 * float(w @ w) + self.C * float(hinge.sum())
        self.spent_ += time.perf_counter() - t0
        self.cpu_spent_ += time.process_time() - c0
        self.trace_.append((time.perf_counter() - self.start_ - self.spent_, obj))
        self.cpu_trace_.append((time.process_time() - self.cpu_start_ - self.cpu_spent_, obj))

    def fit(self, X, Y):
        self.data_ = prepare(self.model, X, Y, need_polytopes=False)
        self.trace_, self.cpu_trace_, self.spent_, self.cpu_spent_ = [], [], 0.0, 0.0
        self.start_, self.cpu_start_ = time.perf_counter(), time.process_time()
        return super().fit(X, Y)


def first_below(trace, target):
    for t, obj in trace:
        if obj <= target:
            return t
    return float("nan")


def seconds(fit):
    """Wall-clock seconds of ``fit()`` and its result."""
    t0 = time.perf_counter()
    out = fit()
    return time.perf_counter() - t0, out


def time_to_objective(m, n, d, noise, C, rel, seed, plot, repeats):
    rng = np.random.default_rng(seed)
    X, Y = planted(rng, m, n, d, noise)
    model = BipartiteMatching()
    # this machine's speed drifts by up to 2x over minutes: the runs of the QP (every
    # other round) and of Frank-Wolfe are interleaved, so that both meet the same
    # conditions, and the table gives the fastest and the median run of each
    qp_ts, fw_ts, hits, qp = [], [], [], None
    for r in range(repeats):
        if r % 2 == 0:
            t, qp = seconds(lambda: MaxMarginLearner(model, C=C).fit(X, Y))
            qp_ts.append(t)
            F = qp.objective_
            target = F * (1 + rel)
        t, fw = seconds(lambda: FrankWolfeLearner(model, C=C, tol=rel, max_iter=10_000,
                                                  random_state=0).fit(X, Y))
        fw_ts.append(t)
        # the same fit, its exact objective evaluated (untimed) after every epoch
        fwc = MonitoredFrankWolfe(model, C=C, tol=rel, max_iter=10_000, random_state=0)
        fwc.fit(X, Y)
        fw_trace = fwc.trace_
        assert np.array_equal(fwc.coef_, fw.coef_), "monitoring changed the iterates"
        hits.append(first_below(fw_trace, target))
    t_qp, t_fw = min(qp_ts), min(fw_ts)
    rows = [("MaxMarginLearner (joint QP, CLARABEL)", t_qp, t_qp, qp.objective_,
             f"median {np.median(qp_ts):.2f} s of {len(qp_ts)}")]
    hit_epoch = next((k + 1 for k, (_, obj) in enumerate(fw_trace) if obj <= target), None)
    rows.append(("FrankWolfeLearner (BCFW, pairwise)", min(hits), t_fw, fw.objective_,
                 f"F reached after epoch {hit_epoch}; certified after {fw.n_iter_} epochs, "
                 f"gap {fw.duality_gap_ / fw.objective_:.1e}; median "
                 f"{np.median(hits):.2f} s to F, {np.median(fw_ts):.2f} s certified, "
                 f"of {repeats}"))

    cp_tol = rel * F / (C * m)
    cpl = TimedCuttingPlane(model, C=C, tol=cp_tol, max_iter=500)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cpl.fit(X, Y)
    t_cp = time.perf_counter() - t0
    rows.append(("CuttingPlaneLearner (n-slack)", first_below(cpl.trace_, target), t_cp,
                 cpl.objective_, f"{cpl.n_iter_} rounds, {cpl.n_constraints_} constraints"))

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        sg = SubgradientLearner(model, C=C, tol=1e-6, max_iter=60, n_iter_no_change=60,
                                random_state=0).fit(X, Y)
    t_sg = time.perf_counter() - t0
    # the subgradient history times include its per-epoch evaluation passes (~half)
    sg_trace = [(h["time"], h["objective"]) for h in sg.history_]
    rows.append(("SubgradientLearner (Pegasos, averaged)", first_below(sg_trace, target),
                 float("nan"), sg.objective_,
                 f"{sg.n_iter_} epochs in {t_sg:.1f} s, rel. gap to F* "
                 f"{(sg.objective_ - F) / F:.1e}"))

    print(f"\n## Time to a {rel:g} relative objective: m = {m} bipartite {n}x{n}, d = {d}, "
          f"noise {noise}, C = {C}  (F* = {F:.6f})\n")
    print("| learner | s to F <= (1+rel) F* | s of a certified fit | objective | notes |")
    print("|---|---:|---:|---:|---|")
    for name, t_hit, t_cert, obj, note in rows:
        print(f"| {name} | {t_hit:.2f} | {t_cert:.2f} | {obj:.6f} | {note} |")
    print(f"\nspeed-up of FrankWolfeLearner over the joint QP, fastest runs: "
          f"{t_qp / rows[1][1]:.1f}x (to the objective), {t_qp / t_fw:.1f}x (certified fit); "
          f"median runs: {np.median(qp_ts) / np.median(hits):.1f}x, "
          f"{np.median(qp_ts) / np.median(fw_ts):.1f}x")
    table = {
        "caption": (f"Time to a {rel:g} relative objective: m = {m} bipartite {n}x{n}, d = {d}, "
                    f"noise {noise}, C = {C}; F* = {F:.6f} from the joint QP. "
                    + (f"Fastest of {repeats} interleaved runs for Frank–Wolfe (the QP every "
                       "other run); " if repeats > 1 else "One run of each; ")
                    + "speed-up = the QP's seconds over the learner's."),
        "columns": [{"key": "learner", "label": "learner"},
                    {"key": "to_F", "label": "to (1 + rel) F*", "unit": "s"},
                    {"key": "certified", "label": "certified fit", "unit": "s"},
                    {"key": "speedup_F", "label": "speed-up to F", "ratio": True},
                    {"key": "speedup_cert", "label": "speed-up certified", "ratio": True},
                    {"key": "objective", "label": "objective", "format": ".6f"},
                    {"key": "notes", "label": "notes"}],
        "rows": []}
    for name, t_hit, t_cert, obj, note in rows:
        table["rows"].append({
            "learner": name, "to_F": t_hit, "objective": obj, "notes": note,
            "certified": None if np.isnan(t_cert) else t_cert,
            "speedup_F": t_qp / t_hit if t_hit and np.isfinite(t_hit) else None,
            "speedup_cert": (t_qp / t_cert if np.isfinite(t_cert) and t_cert
                             and not name.startswith("SubgradientLearner") else None)})
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, tr, style in (("FrankWolfeLearner", fw_trace, "o-"),
                                 ("CuttingPlaneLearner", cpl.trace_, "s-"),
                                 ("SubgradientLearner", sg_trace, "^-")):
            t = np.array([a for a, _ in tr])
            r = np.maximum((np.array([b for _, b in tr]) - F) / F, 1e-12)
            ax.loglog(np.maximum(t, 1e-3), r, style, ms=3, label=label)
        ax.loglog([t_qp], [max((qp.objective_ - F) / F, 1e-9)], "k*", ms=12,
                  label="MaxMarginLearner (joint QP)")
        ax.axhline(rel, color="gray", lw=0.8, ls="--")
        ax.set_xlabel("seconds")
        ax.set_ylabel("(F(w) - F*) / F*")
        ax.set_title(f"bipartite {n}x{n}, d={d}, m={m}, C={C}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = OUT / "frank_wolfe_curves.png"
        fig.savefig(path, dpi=120)
        print(f"\ncurves saved to {path}")
    return table


def fw_worker(m, n, d, noise, C, rel, seed):
    """Two certified Frank-Wolfe fits and one monitored fit (same iterates) of whatever
    structlp comes first on the path: a JSON line with CPU and wall seconds.  The first
    fit in the fresh process also pays one-time costs (numba's first compiled call, about
    0.4 s CPU, where the learner uses numba); the second and the monitored fit do not."""
    numba_imported = "numba" in sys.modules          # (structlp's imports may load it)
    rng = np.random.default_rng(seed)
    X, Y = planted(rng, m, n, d, noise)
    model = BipartiteMatching()
    kw = dict(C=C, tol=rel, max_iter=10_000, random_state=0)
    fits = []
    for _ in range(2):
        t0, c0 = time.perf_counter(), time.process_time()
        fw = FrankWolfeLearner(model, **kw).fit(X, Y)
        fits.append((time.perf_counter() - t0, time.process_time() - c0))
    mon = MonitoredFrankWolfe(model, **kw).fit(X, Y)
    assert np.array_equal(mon.coef_, fw.coef_), "monitoring changed the iterates"
    print(json.dumps(dict(wall=fits[1][0], cpu=fits[1][1], first_wall=fits[0][0],
                          first_cpu=fits[0][1], numba_imported=numba_imported,
                          epochs=fw.n_iter_, objective=fw.objective_, trace=mon.trace_,
                          cpu_trace=mon.cpu_trace_)))


def _run_worker(root, m, n, d, noise, C, rel, seed):
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, __file__, "--worker", "--m", str(m), "--n", str(n),
                          "--d", str(d), "--noise", str(noise), "--C", str(C), "--rel",
                          str(rel), "--seed", str(seed)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def before_after(before, m, n, d, noise, Cs, rel, seed, repeats):
    """FrankWolfeLearner of an earlier checkout against this one (see the docstring)."""
    here = Path(__file__).resolve().parent.parent
    rng = np.random.default_rng(seed)
    X, Y = planted(rng, m, n, d, noise)
    print(f"\n## Before / after: FrankWolfeLearner of {Path(before).name} and of this "
          f"checkout, bipartite m = {m}, {n}x{n}, d = {d}, noise {noise}, rel {rel:g}; "
          f"{repeats} interleaved runs each; seconds as median (fastest)\n")
    print("| C | code | epochs | CPU s to F | wall s to F | CPU s certified | "
          "wall s certified | CPU s certified, first fit of the process | QP CPU s | "
          "QP wall s | speed-up to F, CPU (median / fastest) | speed-up certified, CPU, "
          "first fit (median) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    numba_imported = set()
    for C in Cs:
        qp_wall, qp_cpu, runs = [], [], {"before": [], "after": []}
        for r in range(repeats):
            if r % 2 == 0:
                t0, c0 = time.perf_counter(), time.process_time()
                qp = MaxMarginLearner(BipartiteMatching(), C=C).fit(X, Y)
                qp_wall.append(time.perf_counter() - t0)
                qp_cpu.append(time.process_time() - c0)
                target = qp.objective_ * (1 + rel)
            order = [("before", before), ("after", here)]
            for label, root in (order if r % 2 == 0 else order[::-1]):
                res = _run_worker(root, m, n, d, noise, C, rel, seed)
                res["to_F"] = first_below(res["trace"], target)
                res["cpu_to_F"] = first_below(res["cpu_trace"], target)
                runs[label].append(res)

        def med(xs):
            return f"{np.median(xs):.2f} ({min(xs):.2f})"
        for label in ("before", "after"):
            rs = runs[label]
            cpu_F = [x["cpu_to_F"] for x in rs]
            print(f"| {C:g} | {label} | {rs[0]['epochs']} | {med(cpu_F)} | "
                  f"{med([x['to_F'] for x in rs])} | {med([x['cpu'] for x in rs])} | "
                  f"{med([x['wall'] for x in rs])} | {med([x['first_cpu'] for x in rs])} | "
                  f"{med(qp_cpu)} | {med(qp_wall)} | "
                  f"{np.median(qp_cpu) / np.median(cpu_F):.1f}x / "
                  f"{min(qp_cpu) / min(cpu_F):.1f}x | "
                  f"{np.median(qp_cpu) / np.median([x['first_cpu'] for x in rs]):.1f}x |")
        numba_imported |= {x["numba_imported"] for r in runs.values() for x in r}
    print(f"\nnumba imported by the imports, before the first fit: {sorted(numba_imported)}")


def epoch_times(ms, n, d, noise, seed, repeats=1):
    print(f"\n## Time per BCFW epoch against m (bipartite {n}x{n}, d = {d})\n")
    print("| m | s per epoch | us per example | prepare s |")
    print("|---:|---:|---:|---:|")
    ts = []
    for m in ms:
        rng = np.random.default_rng(seed)
        X, Y = planted(rng, m, n, d, noise)
        pers = []
        for _ in range(repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fw = FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=3,
                                       check_every=3, random_state=0).fit(X, Y)
            h = fw.history_
            pers.append((h[1]["time"] - h[0]["time"] + h[2]["time"] - h[2]["check_time"]
                         - h[1]["time"]) / 2)   # epochs 2 and 3, without the gap pass
        per = float(np.median(pers))
        ts.append(per)
        print(f"| {m} | {per:.3f} | {1e6 * per / m:.0f} | {fw.fit_time_['prepare']:.2f} |")
    p = np.polyfit(np.log(ms), np.log(ts), 1)[0]
    print(f"\ngrowth: time per epoch ~ m^{p:.2f}")
    return {"caption": (f"Time per BCFW epoch against m (bipartite {n}x{n}, d = {d}; epochs 2 "
                        f"and 3, without the gap pass): time per epoch ~ m^{p:.2f}."),
            "columns": [{"key": "m", "label": "m"},
                        {"key": "epoch", "label": "per epoch", "unit": "s"},
                        {"key": "per_example", "label": "per example", "unit": "µs"}],
            "rows": [{"m": mm, "epoch": t, "per_example": 1e6 * t / mm}
                     for mm, t in zip(ms, ts)],
            "runs": repeats, "runs_note": "median of the fits" if repeats > 1 else "one fit"}


def parallel_oracles(m, n, d, seed, batch_size=64, n_jobs=2, repeats=1):
    """Serial against n_jobs local processes, where the oracle is the inference LP; the
    runs of the two alternate, each figure the median of ``repeats``."""
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    model = BipartiteMatching(R=2, P=2)     # b-matchings: no fast path, one LP per chunk
    scores = [(x @ w0).ravel() + rng.normal(size=n * n) for x in X]
    from structlp.inference import maximize
    Y = maximize(model, X, scores)[0]
    print(f"\n## Parallel oracles: b-matchings {n}x{n} (R = P = 2, the inference LP as "
          f"oracle), m = {m}, batch_size = {batch_size}, 3 epochs\n")
    print("| oracles | seconds (workers already started) | s in inference | "
          "same coef_ as serial |")
    print("|---|---:|---:|---|")
    configs = (("serial", {}), (f"n_jobs={n_jobs} (joblib processes)", {"n_jobs": n_jobs}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _, kw in configs:   # a first short fit starts the worker processes (reused later)
            FrankWolfeLearner(model, max_iter=1, batch_size=batch_size, **kw).fit(X[:8], Y[:8])
        runs = {label: [] for label, _ in configs}
        for r in range(repeats):     # serial and parallel alternate: the same conditions
            for label, kw in (configs if r % 2 == 0 else configs[::-1]):
                fw = FrankWolfeLearner(model, C=0.01, tol=1e-12, max_iter=3, check_every=3,
                                       batch_size=batch_size, random_state=0, **kw)
                t0 = time.perf_counter()
                fw.fit(X, Y)
                runs[label].append((time.perf_counter() - t0, fw.fit_time_["inference"],
                                    fw.coef_))
    chunks = -(-batch_size // CHUNK)
    what = (f"the oracles of each batch of {batch_size} examples (one inference LP each) are "
            f"cut into {chunks} chunk{'s' * (chunks > 1)} of {CHUNK} and solved in {n_jobs} "
            f"joblib worker processes (started once and reused), so at most "
            f"{min(chunks, n_jobs)} of them {'is' if min(chunks, n_jobs) == 1 else 'are'} busy "
            "at once; so are "
            f"the oracles of the exact duality-gap pass; the Frank–Wolfe steps, their line "
            "searches and the updates of w stay in the main process, in the serial order")
    rows, ref = [], None
    for label, kw in configs:
        ts, tis, coefs = zip(*runs[label])
        t, ti = float(np.median(ts)), float(np.median(tis))
        same = "" if ref is None else str(all(np.array_equal(c, ref[1]) for c in coefs))
        if ref is None:
            ref = (t, coefs[0])
        print(f"| {label} | {t:.2f} | {ti:.2f} | {same} |")
        rows.append({"oracles": label, "seconds": t, "inference": ti, "speedup": ref[0] / t,
                     "same": same or "–", "n_jobs": kw.get("n_jobs", 1), "parallel_part": ti,
                     **({"what": what} if kw else {})})
    print(f"\nspeed-up of n_jobs={n_jobs}: {ref[0] / t:.2f}x")
    return {"caption": (f"Parallel oracles: b-matchings {n}x{n} (R = P = 2, the inference LP as "
                        f"oracle), m = {m}, batch_size = {batch_size}, 3 epochs; workers "
                        "already started; speed-up over the serial run; in inference: the "
                        "seconds the fit spent waiting for its oracles."),
            "columns": [{"key": "oracles", "label": "oracles"},
                        {"key": "seconds", "label": "fit", "unit": "s"},
                        {"key": "inference", "label": "in inference", "unit": "s"},
                        {"key": "speedup", "label": "speed-up", "ratio": True},
                        {"key": "same", "label": "same coef_ as serial"}],
            "rows": rows, "runs": repeats,
            "runs_note": "median of alternating runs" if repeats > 1 else "a single run"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--C", type=float, default=0.01)
    ap.add_argument("--rel", type=float, default=1e-4)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--repeats", type=int, default=None,
                    help="Frank-Wolfe runs timed (the QP: every other one), and runs of the "
                         "epoch and parallel tables (medians); default 5, 1 with --quick")
    ap.add_argument("--before", default=None,
                    help="a checkout of an earlier structlp: compare its FrankWolfeLearner")
    ap.add_argument("--only-before-after", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="write tables 1, 3 and 4 to this JSON file")
    args = ap.parse_args()
    if args.worker:
        return fw_worker(args.m, args.n, args.d, args.noise, args.C, args.rel, args.seed)
    m = 200 if args.quick else args.m
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    ms = [250, 500, 1000, 2000] if args.quick else [1000, 2000, 5000, 10_000, 20_000]
    if args.before:
        before_after(args.before, m, args.n, args.d, args.noise, (0.01, 0.1), args.rel, 0,
                     args.repeats)
        if args.only_before_after:
            return
    started = report.machine()
    tables = [time_to_objective(m, args.n, args.d, args.noise, args.C, args.rel, 0,
                                not args.no_plot, args.repeats),
              epoch_times(ms, args.n, args.d, args.noise, 1, args.repeats),
              parallel_oracles(128 if args.quick else 512, args.n, args.d, 2,
                               repeats=args.repeats)]
    if args.json:
        report.write(
            args.json, name="frank_wolfe",
            title="First-order learners against the joint QP",
            description=("Planted bipartite assignments, Hamming loss: the time each learner "
                         "needs to come within a relative tolerance of the optimum F* given by "
                         "the joint QP, and the time of a fit that certifies it by itself; the "
                         "time per Frank–Wolfe epoch as m grows; and the oracles of a batch in "
                         "parallel processes where the oracle is an inference LP. Wall "
                         "seconds."),
            floor=("the joint QP; the serial oracles",
                   "MaxMarginLearner (one QP, CLARABEL) on the same data for the first table, "
                   "the same Frank–Wolfe fit with serial oracles for the last"),
            tables=tables, started=started, modules=("numba",), runs=args.repeats,
            runs_note=(f"Frank–Wolfe the fastest of {args.repeats} runs interleaved with "
                       f"{(args.repeats + 1) // 2} of the QP; the cutting plane and the "
                       "subgradient one run each" if args.repeats > 1 else "one run each"))


if __name__ == "__main__":
    main()
