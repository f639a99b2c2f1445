"""Facial emotion intensity (Fathony et al. 2018, §4.1, Table 1): AGM vs CRF vs SSVM on CK+ chains.

Each of the 167 CK+ sequences is a chain of frames with 25 PCA'd Haar features
and an intensity label (neutral < increasing < apex).  Features as the authors
built them: node ``[x_t; 1]``, edge ``[|x_t - x_{t-1}|; 1]``, each in the block
of the sequence's emotion class.  Because those blocks never interact (a
sequence only touches its class's block and the L2 regularizer is separable),
every model is trained *exactly* as six independent per-class problems (the
same optimum as the joint program, and much faster).  Six metrics (zero-one,
absolute, squared; unweighted and weighted by position), the authors' 20
random splits (first 120 train, last 47 test), regularization chosen per model
and metric on the first split's training set (fit on its first 70 %, validate
on the rest, as the authors' main_emotion_cv.jl does) from 10^-3..10^1,
Wilcoxon signed-rank test at alpha = 0.05.  The regularization ``reg`` is that
of ``reg/2 |theta|^2 + mean_i loss_i``, the authors' ``lambda``; their grid was
10^-5..10^-1 and 0, but they stopped AdaGrad after at most 100 passes from
``theta = -0.5``, far from the optimum, whereas here every model is solved
exactly, and on split 1's validation part the exact AGM and SSVM do best at
``reg = 10`` for every metric and the CRF at 0.1..10 (AGM: 0.40-0.44
validation loss at reg = 10 against 0.44-0.62 at 10^-3..10^-5; at reg = 100
mixed, e.g. 0.39 zero-one but 0.69 weighted squared).  AGM and SSVM predict by
max-sum on the potentials, the CRF by the Bayes decision for the metric, as in
the paper.

The data (research use only) are read from ``data_path`` (option), else
``$STRUCTLP_CK_PATH``, else ``../shared/data/ck_emotion``; never copied here.
Run: ``structlp run problems/emotion_intensity.py -o splits=20 [-o n_jobs=2]``
(tasks = one model fitted on one split, run in forked worker processes).  All
20 splits took 19 min 41 s on two otherwise idle cores (n_jobs=2).
"""

from __future__ import annotations

import time

import numpy as np

import structlp
from structlp.agm import AdversarialGraphicalModel, TreeCRF
from structlp.agm.data import emotion_examples, load_ck_emotion
from structlp.structures import TreeLabeling

DESCRIPTION = __doc__.split("\n\n")[0]

METRICS = [("zero_one", False), ("absolute", False), ("squared", False),
           ("zero_one", True), ("absolute", True), ("squared", True)]
#: Table 1 of the paper (as read in ../shared/DESIGN.md): AGM, CRF, SSVM.
PAPER = {("zero_one", False): (0.34, 0.32, 0.37), ("absolute", False): (0.33, 0.34, 0.40),
         ("squared", False): (0.38, 0.38, 0.40), ("zero_one", True): (0.28, 0.32, 0.29),
         ("absolute", True): (0.29, 0.36, 0.29), ("squared", True): (0.36, 0.40, 0.33),
         "average": (0.33, 0.35, 0.35)}
MODELS = ("AGM", "CRF", "SSVM")


def metric_name(loss, weighted):
    return f"{loss.replace('_', '-')}, {'weighted' if weighted else 'unweighted'}"


def sequence_loss(y_pred, y_true, loss, weighted):
    """Weighted average per-node loss of one sequence (weights = position if weighted)."""
    d = np.abs(np.asarray(y_pred) - np.asarray(y_true)).astype(float)
    per = (d > 0).astype(float) if loss == "zero_one" else (d if loss == "absolute" else d ** 2)
    w = np.arange(1, len(d) + 1, dtype=float) if weighted else np.ones(len(d))
    return float(np.sum(w * per) / np.sum(w))


class PerClass:
    """Train one estimator per emotion class (exact block decomposition) and predict."""

    def __init__(self, make):
        self.make = make

    def fit(self, X, Y, Z):
        self.models = {}
        m = len(X)
        for z in np.unique(Z):
            idx = np.flatnonzero(Z == z)
            self.models[z] = self.make(len(idx), m).fit([X[i] for i in idx], [Y[i] for i in idx])
        return self

    def predict(self, X, Z, **kw):
        out = [None] * len(X)
        for z, model in self.models.items():
            idx = np.flatnonzero(Z == z)
            if len(idx):
                for i, p in zip(idx, model.predict([X[i] for i in idx], **kw)):
                    out[i] = p
        return out


def _agm(loss, weighted, reg, solver, method, solver_opts=None):
    # per-class objective reg/2 |theta_z|^2 + (1/m) sum_{i in z} f_i  <=>  reg * m / m_z
    return lambda m_z, m: AdversarialGraphicalModel(
        3, loss=loss, node_weights="position" if weighted else None, normalize_weights=True,
        reg=reg * m / m_z, method=method, solver=solver, solver_opts=solver_opts,
        max_epochs=30, random_state=0)


def _ssvm(loss, weighted, reg, solver, solver_opts=None):
    # 1/2 |w|^2 + C sum xi with C = 1 / (reg m): the same scaling as reg/2 |w|^2 + mean xi
    return lambda m_z, m: structlp.MaxMarginLearner(
        TreeLabeling(3, loss=loss, node_weights="position" if weighted else None,
                     normalize_weights=True), C=1.0 / (reg * m), solver=solver,
        solver_opts=solver_opts)


def _crf(reg):
    return lambda m_z, m: TreeCRF(3, reg=reg * m / m_z, max_iter=300)


def _evaluate(pred, Y, loss, weighted):
    return float(np.mean([sequence_loss(p, y, loss, weighted) for p, y in zip(pred, Y)]))


#: Clarabel without iterative refinement of its KKT solves: 20-30 % faster on these
#: QPs, optimal values within 2e-6 relative of the defaults (split 1, per-class QPs);
#: a QP that then fails is solved again with Clarabel's defaults.
FAST_CLARABEL = {"iterative_refinement_enable": False}

# ------------------------------------------------------------------ tasks
# One task = one model (and one metric for AGM / SSVM) fitted on a train set and
# scored on a test set; tasks are independent, so they run in a process pool.
_DATA = {}


def _task(job):
    """Run one task; returns (job key, {metric key: mean test loss})."""
    model, key, reg, train, test, solver, method, tag = job
    X, Y, Z = _DATA["X"], _DATA["Y"], _DATA["Z"]
    Xtr, Ytr, Ztr = [X[i] for i in train], [Y[i] for i in train], Z[train]
    Xte, Yte, Zte = [X[i] for i in test], [Y[i] for i in test], Z[test]
    t0 = time.perf_counter()
    if model == "CRF":
        crf = PerClass(_crf(reg)).fit(Xtr, Ytr, Ztr)
        out = {k: _evaluate(crf.predict(Xte, Zte, loss=k[0]), Yte, *k) for k in METRICS}
    else:
        clarabel = solver is None or str(solver).upper() == "CLARABEL"
        opts = dict(FAST_CLARABEL) if clarabel else None
        if clarabel and _DATA.get("n_jobs", 1) > 1:
            opts["max_threads"] = 1   # one solver thread per worker process
        try:
            fitted = PerClass(_make(model, key, reg, solver, method, opts)).fit(Xtr, Ytr, Ztr)
        except structlp.SolverError:
            if not clarabel:
                raise
            # without iterative refinement Clarabel may stop short: redo with its defaults
            opts = {k: v for k, v in opts.items() if k not in FAST_CLARABEL}
            fitted = PerClass(_make(model, key, reg, solver, method, opts)).fit(Xtr, Ytr, Ztr)
        out = {key: _evaluate(fitted.predict(Xte, Zte), Yte, *key)}
    return (model, key, reg, tag), out, time.perf_counter() - t0


def _make(model, key, reg, solver, method, opts):
    return (_agm(*key, reg, solver, method, opts) if model == "AGM"
            else _ssvm(*key, reg, solver, opts))


def _run_tasks(jobs, n_jobs, log=None):
    """Run tasks in order (n_jobs=1) or in a pool of forked worker processes."""
    def report(r):
        if log is not None:
            (model, key, reg, tag), out, sec = r
            log(f"  [{tag}] {model} reg={reg:g} ({sec:.1f} s): "
                + ", ".join(f"{metric_name(*k)} {v:.4f}" for k, v in out.items()))
        return r

    if n_jobs == 1 or len(jobs) <= 1:
        return [report(_task(j)) for j in jobs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    # split by split; within a split the long tasks first (AGM and SSVM fit 6 QPs each)
    def rank(i):
        tag = jobs[i][7]
        return (tag if isinstance(tag, int) else -1, jobs[i][0] == "CRF")

    order = sorted(range(len(jobs)), key=rank)
    out = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context("fork")) as pool:
        futures = {pool.submit(_task, jobs[i]): i for i in order}
        for f in as_completed(futures):
            out[futures[f]] = report(f.result())
    return out


def _jobs(train, test, regs, solver, method, tag=None):
    """The tasks of one train/test partition; ``regs[(model, key)]`` is the reg to use."""
    jobs = [("CRF", None, r, train, test, solver, method, tag)
            for r in sorted({regs[("CRF", k)] for k in METRICS})]
    for model in ("AGM", "SSVM"):
        jobs += [(model, k, regs[(model, k)], train, test, solver, method, tag)
                 for k in METRICS]
    return jobs


def select_regularization(train, grid, solver, method, n_jobs, log):
    """Choose reg per (model, metric) on a 70/30 split of the first split's training set."""
    n_tr = int(round(0.7 * len(train)))
    fit_ids, val_ids = train[:n_tr], train[n_tr:]
    jobs = []
    for reg in grid:
        jobs += _jobs(fit_ids, val_ids, {(n, k): reg for n in MODELS for k in METRICS},
                      solver, method, tag="val")
    best = {}
    for (model, key, reg, _), out, _ in _run_tasks(jobs, n_jobs, log):
        for k, v in out.items():
            if (model, k) not in best or v < best[(model, k)][1] - 1e-12:
                best[(model, k)] = (reg, v)
    log("  validation: " + ", ".join(f"{n}/{metric_name(*k)}: reg={best[(n, k)][0]:g}"
                                     for n in MODELS for k in METRICS))
    return {k: v[0] for k, v in best.items()}


def run(solver=None, C=None, seed=0, splits=1, data_path=None,
        reg_grid=(10.0, 1.0, 0.1, 0.01, 0.001), method="qp", n_jobs=2, verbose=False, **options):
    """Run the experiment on ``splits`` of the authors' 20 splits (in order).

    Options: ``splits`` (1..20), ``data_path`` (default ``$STRUCTLP_CK_PATH`` or
    ../shared/data/ck_emotion), ``reg_grid`` (regularization values tried on a
    70/30 split of split 1's training set, per model and metric, as the paper
    does, default 10^-3..10^1; one value = no selection; ``C`` given fixes
    reg = C), ``method`` of AGM
    ("qp": exact; "subgradient": the paper's stochastic algorithm, 30 AdaGrad
    epochs, far from the optimum here), ``n_jobs`` (forked worker processes, each
    task being one model fitted on one split; Clarabel then runs one thread per
    worker, without iterative refinement, see ``FAST_CLARABEL``), ``verbose``
    (print every finished task).
    """
    from scipy.stats import wilcoxon
    log = print if verbose else (lambda *a: None)
    if options:
        raise structlp.InvalidParameterError(
            f"Unknown option(s) {sorted(options)} of emotion_intensity; known: splits, "
            "data_path, reg_grid, method, n_jobs, verbose.")
    if (isinstance(splits, bool) or not isinstance(splits, (int, np.integer))
            or not 1 <= splits <= 20):
        raise structlp.InvalidParameterError(f"splits must be an integer in 1..20; got {splits!r}.")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs < 1:
        raise structlp.InvalidParameterError(f"n_jobs must be an integer >= 1; got {n_jobs!r}.")
    if method not in ("qp", "subgradient"):
        raise structlp.InvalidParameterError(
            f"method must be 'qp' or 'subgradient'; got {method!r}.")
    try:
        grid = [float(C)] if C is not None else [float(r) for r in np.atleast_1d(reg_grid)]
    except (TypeError, ValueError):
        grid = []
    if not grid or any(not np.isfinite(r) or r <= 0 for r in grid):
        raise structlp.InvalidParameterError(
            f"reg_grid must hold positive regularization values; got {reg_grid!r}.")
    t0 = time.perf_counter()
    D = load_ck_emotion(data_path)
    n_split = int(splits)
    _DATA.update(X=emotion_examples(D["frames"], np.zeros(len(D["frames"]), dtype=int),
                                    n_classes=1),
                 Y=D["labels"], Z=D["emotion"], n_jobs=int(n_jobs))
    first = D["splits"][0]
    if len(grid) == 1:
        chosen = {(n, key): grid[0] for n in MODELS for key in METRICS}
    else:
        chosen = select_regularization(first[:120], grid, solver, method, n_jobs, log)
    t_val = time.perf_counter() - t0
    jobs = []
    for s in range(n_split):
        ids = D["splits"][s]
        jobs += _jobs(ids[:120], ids[120:], chosen, solver, method, tag=s)
    results = {(n, key): [None] * n_split for n in MODELS for key in METRICS}
    task_seconds = {n: 0.0 for n in MODELS}
    for (model, key, reg, s), out, sec in _run_tasks(jobs, n_jobs, log):
        task_seconds[model] += sec
        for k, v in out.items():
            if chosen[(model, k)] == reg:
                results[(model, k)][s] = v
    log(f"{n_split} split(s) done ({time.perf_counter() - t0:.0f} s)")
    # table with Wilcoxon "bold" marks: best mean or not significantly worse than it
    lines = [f"Emotion intensity (CK+), mean test loss over {n_split} split(s); "
             "* = best or not significantly worse (Wilcoxon, alpha=0.05)",
             f"{'loss metric':<22} {'AGM':>7} {'CRF':>7} {'SSVM':>7}   | paper: AGM  CRF  SSVM"]
    table, bold_count = {}, {n: 0 for n in MODELS}
    for key in METRICS:
        means = {n: float(np.mean(results[(n, key)])) for n in MODELS}
        best = min(means, key=means.get)
        marks = {}
        for n in MODELS:
            ok = n == best
            if not ok and n_split >= 5:
                a, b = np.array(results[(n, key)]), np.array(results[(best, key)])
                ok = bool(np.allclose(a, b)) or wilcoxon(a, b).pvalue >= 0.05
            marks[n] = ok
            bold_count[n] += ok
        table[metric_name(*key)] = {n: {"mean": means[n], "best": marks[n],
                                        "per_split": results[(n, key)],
                                        "reg": chosen[(n, key)]} for n in MODELS}
        cells = " ".join(f"{means[n]:6.3f}{'*' if marks[n] else ' '}" for n in MODELS)
        pap = "  ".join(f"{v:.2f}" for v in PAPER[key])
        lines.append(f"{metric_name(*key):<22} {cells}  | {pap}")
    avg = {n: float(np.mean([table[metric_name(*k)][n]["mean"] for k in METRICS])) for n in MODELS}
    lines.append(f"{'average':<22} " + " ".join(f"{avg[n]:6.3f} " for n in MODELS)
                 + " | " + "  ".join(f"{v:.2f}" for v in PAPER["average"]))
    lines.append(f"{'# best':<22} " + " ".join(f"{bold_count[n]:6d} " for n in MODELS)
                 + " | 4     2     2")
    if n_split < 5:
        lines.append("(fewer than 5 splits: no significance test, only the best is marked)")
    elapsed = time.perf_counter() - t0
    lines.append(f"AGM method={method}; reg chosen on split 1 from {grid}: " + ", ".join(
        f"{n}:{sorted({chosen[(n, k)] for k in METRICS})}" for n in MODELS))
    lines.append(f"wall time {elapsed:.0f} s (validation {t_val:.0f} s) with n_jobs={n_jobs}; "
                 "fit+predict seconds summed over tasks: "
                 + ", ".join(f"{n} {task_seconds[n]:.0f}" for n in MODELS))
    return {"report": "\n".join(lines), "table": table, "average": avg, "splits": n_split,
            "seconds": elapsed, "validation_seconds": t_val, "task_seconds": task_seconds,
            "reg": {f"{n}/{metric_name(*k)}": chosen[(n, k)] for n in MODELS for k in METRICS},
            "paper": {metric_name(*k): PAPER[k] for k in METRICS}}
