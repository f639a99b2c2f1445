"""Disulfide connectivity (Taskar et al. 2005, §7, known bonding state) as perfect matching.

Each protein of DISULFIND's connectivity data (Debian package
``disulfinder-data``) has ``K`` = 2..5 disulfide bonds between its ``2K`` bonded
cysteines; the task is to predict which cysteines pair up, a perfect matching
of the complete graph on the cysteines.  Pair features are symmetric functions
of the two cysteines' profile windows and positions
(:func:`structlp.datasets.disulfide_pair_features`).  A linear
:class:`~structlp.structures.PerfectMatching` model is trained with the
certificate QP (``formulation="certificate"``: Taskar's alternating cycles,
Eq. 13, or ``-o certificate=odd_sets``, Edmonds' odd-set certificate, exact on
these non-bipartite graphs) under 4-fold
cross-validation (folds keep protein families together), and evaluated per ``K``
by precision (fraction of bonds right) and accuracy (fraction of proteins whose
whole pattern is right), next to chance and the numbers of Taskar et al.
(Table 1a: SP39, RBF kernel, similarity-split folds — not the same data or
split, so a reference, not a replication).

The certificate's slack is ``-o slack=two_sided`` by default (a slack on every
pair score: an upper bound of the structured hinge), ``part`` (true pairs only)
or ``shared`` (one slack per protein, the paper's relaxation, which is no bound
of the hinge; :class:`structlp.certificates.Certificate`).  ``-o learner=exact``
trains the exact structured hinge instead (cutting plane with the blossom
oracle, linear), ``-o learner=pairs`` the paper's baseline on the same features
and kernel: every pair classified on its own (an SVM: box output polytope,
symmetric Hamming loss), then the pairs matched by maximum-weight perfect
matching; ``both`` = certificate and pairs, ``all`` = every slack, exact and
pairs.  With ``-o kernel=rbf`` the models are the kernelized duals with an RBF
kernel (Taskar §6–7), ``gamma = 1 / (2 sigma^2 m)`` with ``m`` the median
squared distance between training pair features, the kernel factored to rank
``max_rank``.

``C`` and ``sigma`` are chosen per outer fold and per learner on an inner split
of that fold's training proteins that keeps families together (a quarter held
out; sigma at the middle C, then C at that sigma), from the grids
:data:`C_GRID` and :data:`SIGMAS`, each extended beyond an edge while the best
value lies on it (up to :data:`MAX_EXTEND` points; the report says where), so
that the choices are interior (pass ``C`` or ``sigma`` to fix them).  The fits
at one sigma share one compiled QP and kernel factor (a new C only re-solves
it), and the learners x folds run in ``n_jobs`` worker processes (default: all
cores; one solver thread each, so the results equal the serial run's).  With the baseline in the run, the table ends with a
paired bootstrap (over proteins, and over families) of structured minus pairs
precision, per K and over all bonds.

Run it with ``structlp run problems/disulfide_connectivity.py`` (add
``-o learner=both``, ``-o kernel=rbf``...); ``-o folds=2`` or ``-o max_train=100``
for a quicker look.  Runtimes of the default runs are in the README.
"""

from __future__ import annotations

import logging
import math
import resource
import time

import numpy as np

import structlp
from structlp.datasets import load_disulfide
from structlp.polytope import Polytope
from structlp.structures import PerfectMatching
from structlp.structures.perfect_matching import MATCHING_CERTIFICATES

DESCRIPTION = __doc__.split("\n\n")[0]
logger = logging.getLogger("structlp.problems.disulfide_connectivity")

#: Taskar et al. (2005), Table 1(a): precision/accuracy on SP39, K = 2..5.
PAPER = {"SVM": {2: (0.63, 0.63), 3: (0.51, 0.38), 4: (0.34, 0.12), 5: (0.31, 0.07)},
         "PROFILE": {2: (0.77, 0.77), 3: (0.62, 0.52), 4: (0.51, 0.36), 5: (0.43, 0.13)},
         "DAG-RNN": {2: (0.74, 0.74), 3: (0.61, 0.51), 4: (0.44, 0.27), 5: (0.41, 0.11)}}


def family_folds(names, n_folds, rng):
    """Fold index of every protein, keeping each protein family in one fold.

    A family is the Swiss-Prot mnemonic before the species (``LYC`` for
    ``LYC_HUMAN``, ``LYC_BOVIN``, ...): orthologs of one protein never sit on both
    sides of a split — a coarse stand-in for the similarity-split folds of
    Taskar et al. (whose SP39 set keeps sequence identity below 39%).
    Families are assigned largest first to the fold with the fewest proteins.
    """
    fam = np.array([n.split("_")[0] for n in names])
    uniq, counts = np.unique(fam, return_counts=True)
    order = rng.permutation(len(uniq))
    order = order[np.argsort(-counts[order], kind="stable")]
    size = np.zeros(n_folds, dtype=int)
    fold_of = {}
    for j in order:
        f = int(np.argmin(size))
        fold_of[uniq[j]] = f
        size[f] += counts[j]
    return np.array([fold_of[f] for f in fam])


def stratified_folds(K, n_folds, rng):
    """Fold index of every protein, folds balanced within each K."""
    fold = np.empty(len(K), dtype=int)
    for k in np.unique(K):
        idx = rng.permutation(np.flatnonzero(K == k))
        fold[idx] = np.arange(len(idx)) % n_folds
    return fold


class IndependentPairs(PerfectMatching):
    """The baseline: each pair of cysteines is classified on its own.

    Same parts and features as :class:`PerfectMatching`, but the output
    polytope is the unit box (any set of pairs) and the loss counts both
    missed and spurious bonds, so the structured hinge splits into one binary
    SVM hinge per pair.  Predictions are matched afterwards (:func:`match`).
    """

    formulations = ("minmax",)

    def polytope(self, x):
        return Polytope(n_parts=self.n_parts(x), lb=0.0, ub=1.0)

    def polytope_key(self, x):
        return ("box", self.n_parts(x))

    def loss_coefficients(self, x, y_true):
        mu = super().encode(x, y_true)
        return 1.0 - 2.0 * mu, float(mu.sum())

    def inference(self, x, scores):
        return None  # the box LP: every pair with a positive score


def match(x, scores):
    """Maximum-weight perfect matching of the pair scores (the baseline's decoder)."""
    return PerfectMatching().inference(x, scores)


def median_sqdist(X, rng, n=600):
    """Median squared distance between the pair features of the examples in X."""
    F = np.concatenate([x[np.triu_indices(len(x), 1)] for x in X])
    S = F[rng.choice(len(F), size=min(n, len(F)), replace=False)]
    sq = (S ** 2).sum(1)
    D = sq[:, None] + sq[None, :] - 2 * S @ S.T
    return float(np.median(D[np.triu_indices(len(S), 1)]))


#: Learners of ``-o learner=...``: structured certificate QPs (one per slack), the exact
#: structured hinge (cutting plane with the blossom oracle, linear), the pairs baseline.
LEARNERS = {"certificate": None, "exact": ["exact"], "cutting_plane": ["exact"],
            "pairs": ["pairs"], "both": None, "all": None}
SLACKS = ("two_sided", "part", "shared")
#: Default grids (C for the linear and the RBF models; sigma in units of the median pair
#: distance), wide enough that the choices made on the inner splits are interior.
C_GRID = {"linear": (0.003, 0.01, 0.03, 0.1, 0.3), "rbf": (0.3, 1.0, 3.0, 10.0, 30.0)}
SIGMAS = (0.025, 0.05, 0.1, 0.2, 0.4)


def _solver_opts(solver):
    """One thread per CLARABEL solve: parallelism comes from the processes of ``n_jobs``,
    and every run, serial or parallel, then does the same arithmetic (same results)."""
    from structlp.solvers import check_solver
    return {"max_threads": 1} if check_solver(solver) == "CLARABEL" else None


def _estimator(learner, kernel, gamma, C, solver, max_rank):
    if learner == "exact":
        from structlp.learners.cutting_plane import CuttingPlaneLearner
        return CuttingPlaneLearner(PerfectMatching(), C=C, tol=1e-3, solver=solver)
    model = IndependentPairs() if learner == "pairs" else PerfectMatching(
        certificate=_RUN.get("certificate", PerfectMatching().certificate))
    kw = dict(formulation="minmax") if learner == "pairs" else dict(
        formulation="certificate", slack=learner)
    kw.update(C=C, solver=solver, solver_opts=_solver_opts(solver))
    if kernel == "linear":
        return structlp.MaxMarginLearner(model, **kw)
    return structlp.MaxMarginLearner(model, dual=True, kernel="rbf", gamma=gamma,
                                     kernel_tol=1e-4, max_rank=max_rank, **kw)


def _predict(est, learner, X):
    if learner != "pairs":
        return est.predict(X)
    return [match(x, s) for x, s in zip(X, est.decision_scores(X))]


def _precision(pred, Y):
    return sum((p * y).sum() / 2 for p, y in zip(pred, Y)) / sum(y.sum() / 2 for y in Y)


def standardizer(X):
    """Mean and standard deviation of the edge features of the examples in X."""
    F = np.concatenate([x[np.triu_indices(len(x), 1)] for x in X])
    return F.mean(axis=0), F.std(axis=0) + 1e-6


#: At most this many grid points are added beyond an edge of the C or sigma grid when the
#: best choice lies on that edge (:func:`select`).
MAX_EXTEND = 3


def _extend(grid, score, max_extend=MAX_EXTEND):
    """Best point of a 1-D ``grid`` by ``score``, the grid extended while the best is on an edge.

    ``grid`` is sorted and geometric at its ends: a best first (last) point adds one point
    below (above) it at the ratio of the two end points, up to ``max_extend`` times.
    Returns ``(best, grid)``, the grid as extended.
    """
    grid = sorted(grid)
    best = max(grid, key=score)
    for _ in range(max_extend if len(grid) > 1 else 0):
        if best == grid[0]:
            grid.insert(0, grid[0] ** 2 / grid[1])
        elif best == grid[-1]:
            grid.append(grid[-1] ** 2 / grid[-2])
        else:
            break
        best = max(grid, key=score)
    return best, grid


def select(name, kernel, Xtr, Ytr, names, Cs, sigmas, med, solver, max_rank, seed):
    """C (and sigma) of one learner on an inner family-keeping split of a training fold.

    A quarter of the training proteins (whole families, :func:`family_folds`) is held
    out; precision on it picks sigma at the middle C of the grid, then C at that sigma
    (a coordinate search).  When the best value is on an edge of its grid the grid is
    extended beyond it (:func:`_extend`), so that the choice is interior or
    :data:`MAX_EXTEND` points past the grid.  The fits at one sigma share one compiled
    QP (and kernel factor): a re-fit with another C only re-solves it.  Returns
    ``(C, sigma, {(C, sigma): precision}, C_grid, sigma_grid)`` with the grids as searched.
    """
    inner = family_folds(names, 4, np.random.default_rng(seed))
    fit_i, val_i = np.flatnonzero(inner != 0), np.flatnonzero(inner == 0)
    Xf, Yf = [Xtr[i] for i in fit_i], [Ytr[i] for i in fit_i]
    Xv, Yv = [Xtr[i] for i in val_i], [Ytr[i] for i in val_i]
    scores = {}
    compiled = {}          # sigma -> estimator holding the compiled QP of that sigma

    def score(C, sg):
        if (C, sg) not in scores:
            est = compiled.get(sg)
            if est is None:
                g = None if sg is None else 1.0 / (2.0 * sg ** 2 * med)
                est = _estimator(name, kernel, g, C, solver, max_rank)
            est.set_params(C=C)
            try:
                est.fit(Xf, Yf)
            except structlp.SolverError as exc:   # e.g. 'optimal_inaccurate' at an extreme
                logger.warning("disulfide %s: C=%g, sigma=%s skipped in the selection: %s",
                               name, C, sg, exc)
                scores[(C, sg)] = -np.inf           # of the grid: the point is never chosen
                return scores[(C, sg)]
            scores[(C, sg)] = _precision(_predict(est, name, Xv), Yv)
            # keep the compiled QP of the best sigma so far only (memory)
            if max(scores, key=scores.get)[1] == sg and sg not in compiled:
                compiled.clear()
                compiled[sg] = est
        return scores[(C, sg)]

    C = sorted(Cs)[len(Cs) // 2]
    sigma, sigma_grid = _extend(sigmas, lambda sg: score(C, sg)) if len(sigmas) > 1 \
        else (sigmas[0], list(sigmas))
    C, C_grid = _extend(Cs, lambda c: score(c, sigma)) if len(Cs) > 1 \
        else (Cs[0], list(Cs))
    return C, sigma, scores, C_grid, sigma_grid


def bootstrap(diff_bonds, n_bonds, groups, n_boot, rng):
    """Percentile 95% interval of ``sum(diff_bonds) / sum(n_bonds)`` resampling groups.

    ``diff_bonds`` (n,): per protein, the structured model's correct bonds minus the
    baseline's; ``groups`` (n,): the resampling unit of each protein (itself, or its
    family).  Returns (estimate, low, high).
    """
    uniq, inv = np.unique(groups, return_inverse=True)
    d = np.bincount(inv, weights=diff_bonds, minlength=len(uniq))
    b = np.bincount(inv, weights=n_bonds, minlength=len(uniq))
    draw = rng.integers(0, len(uniq), size=(n_boot, len(uniq)))
    stats = d[draw].sum(1) / b[draw].sum(1)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(d.sum() / b.sum()), float(lo), float(hi)


#: The data of the current run, read by :func:`_fold_task` (in this process, or in the
#: forked worker processes, which inherit it).
_RUN: dict = {}


def _fold_task(key):
    """Select C (and sigma), fit and predict one learner on one outer fold (of ``_RUN``)."""
    name, f = key
    r = _RUN
    X, Y, kernel, seed = r["X"], r["Y"], r["kernel"], r["seed"]
    train, test = r["trains"][key], np.flatnonzero(r["fold"] == f)
    t0, c0 = time.perf_counter(), time.process_time()
    mean, sd = standardizer([X[i] for i in train])
    Xtr = [(X[i] - mean) / sd for i in train]
    Ytr = [Y[i] for i in train]
    Xte = [(X[i] - mean) / sd for i in test]
    med = median_sqdist(Xtr, np.random.default_rng(seed + f)) if kernel == "rbf" else None
    Cs, sigmas = r["Cs"], r["sigmas"]
    if len(Cs) > 1 or len(sigmas) > 1:
        C_f, sigma_f, scores, C_grid, sigma_grid = select(
            name, kernel, Xtr, Ytr, r["names"][train], Cs, sigmas, med, r["solver"],
            r["max_rank"], seed + 100 + f)
    else:
        C_f, sigma_f, scores, C_grid, sigma_grid = Cs[0], sigmas[0], {}, list(Cs), list(sigmas)
    gamma = None if sigma_f is None else 1.0 / (2.0 * sigma_f ** 2 * med)
    est = _estimator(name, kernel, gamma, C_f, r["solver"], r["max_rank"])
    est.fit(Xtr, Ytr)
    pred = _predict(est, name, Xte)
    fit = dict(fold=f, n_train=len(train), seconds=time.perf_counter() - t0,
               cpu_seconds=time.process_time() - c0, objective=est.objective_,
               C=C_f, sigma=sigma_f, C_grid=C_grid, sigma_grid=sigma_grid,
               validation={f"C={c:g},sigma={sg:g}" if sg is not None else f"C={c:g}": v
                           for (c, sg), v in scores.items()},
               rank=getattr(est, "kernel_rank_", None),
               peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return dict(learner=name, fold=f, test=test, fit=fit,
                correct_bonds=np.array([(p * Y[i]).sum() / 2 for p, i in zip(pred, test)]),
                exact=np.array([np.array_equal(p, Y[i]) for p, i in zip(pred, test)]))


def _n_workers(n_jobs, n_tasks):
    """Worker processes for ``n_jobs`` (-1: all cores) and ``n_tasks`` tasks."""
    import os
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise structlp.InvalidParameterError(
            f"The 'n_jobs' option must be a non-zero int (-1: all cores); got {n_jobs!r}.")
    cores = os.cpu_count() or 1
    return max(1, min(n_tasks, n_jobs if n_jobs > 0 else cores + 1 + n_jobs))


def _map(task, keys, n_workers):
    """``task(key)`` for every key: in this process, or in ``n_workers`` forked processes
    (results are the same: each task seeds its own randomness).  Yields as they finish."""
    import multiprocessing
    if n_workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(task, keys)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed
    with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("fork")) as ex:
        for fut in as_completed([ex.submit(task, k) for k in keys]):
            yield fut.result()


def _children_cpu():
    """CPU seconds of the finished worker processes of this process."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run(solver=None, C=None, sigma=None, seed=0, folds=4, max_train=None,
        learner="certificate", slack="two_sided", kernel="linear", Cs=None, sigmas=SIGMAS,
        max_rank=150, split="family", path=None, n_boot=2000, n_jobs=-1, verbose=0,
        certificate="alternating_cycle"):
    """Cross-validate on the disulfide data; return per-K results.

    Options: ``folds`` (int), ``max_train`` (cap on training proteins per fold),
    ``learner`` ("certificate": the certificate QP with ``slack``; "exact": the
    exact structured hinge by the cutting plane with the blossom oracle, linear
    only; "pairs": the independent-pairs baseline; "both": certificate and pairs;
    "all": the certificate with each slack, exact (linear) and pairs), ``slack``
    ("two_sided", the default, "part" or "shared": see
    :class:`structlp.certificates.Certificate`), ``certificate``
    ("alternating_cycle": Taskar's Eq. 13, conservative on these non-bipartite
    graphs, the default, or "odd_sets": Edmonds' exact odd-set certificate,
    :class:`~structlp.structures.PerfectMatching`), ``kernel`` ("linear" or "rbf"),
    ``C`` and ``sigma`` (fixed values; by default each is chosen per outer fold
    and per learner from ``Cs`` / ``sigmas`` on an inner family-keeping split,
    :func:`select`), ``sigmas`` (RBF widths in units of the median pair
    distance), ``max_rank`` (rank of the kernel factor), ``split`` ("family":
    protein families kept within one fold, the default; "random": folds
    stratified by K, which lets orthologs of a test protein into its training
    set), ``n_boot`` (bootstrap resamples of the structured-minus-pairs
    differences), ``path`` (data directory), ``n_jobs`` (worker processes over
    the learners x folds, -1: all cores; the results do not depend on it),
    ``verbose`` (1: one progress line per learner and fold, on the ``structlp``
    logger; the CLI shows them on a terminal).
    """
    from structlp.utils import Progress, check_verbose
    verbose = check_verbose(verbose)
    if split not in ("family", "random"):
        raise structlp.InvalidParameterError(
            f"The 'split' option must be 'family' or 'random'; got {split!r}.")
    if learner not in LEARNERS:
        raise structlp.InvalidParameterError(
            f"The 'learner' option must be one of {sorted(LEARNERS)}; got {learner!r}.")
    if slack not in SLACKS:
        raise structlp.InvalidParameterError(
            f"The 'slack' option must be one of {list(SLACKS)}; got {slack!r}.")
    if certificate not in MATCHING_CERTIFICATES:
        raise structlp.InvalidParameterError(
            f"The 'certificate' option must be one of {list(MATCHING_CERTIFICATES)}; got "
            f"{certificate!r}.")
    if kernel not in ("linear", "rbf"):
        raise structlp.InvalidParameterError(
            f"The 'kernel' option must be 'linear' or 'rbf'; got {kernel!r}.")
    if kernel == "rbf" and learner in ("exact", "cutting_plane"):
        raise structlp.InvalidParameterError(
            "The exact (cutting-plane) learner has no kernel; use learner='certificate' "
            "with kernel='rbf'.")
    learners = {"certificate": [slack], "both": [slack, "pairs"],
                "all": list(SLACKS) + (["exact"] if kernel == "linear" else []) + ["pairs"]
                }.get(learner, LEARNERS[learner])
    n_workers = _n_workers(n_jobs, len(learners) * int(folds))
    progress = Progress("disulfide_connectivity", verbose, total=len(learners) * int(folds))
    Cs = tuple(float(c) for c in (C_GRID[kernel] if Cs is None else Cs)) if C is None \
        else (float(C),)
    sigmas = (None,) if kernel == "linear" else (
        tuple(float(s) for s in sigmas) if sigma is None else (float(sigma),))
    data = load_disulfide(path)
    X, Y, K = data["X"], data["Y"], data["K"]
    names = np.asarray(data["names"])
    rng = np.random.default_rng(seed)
    fold = (family_folds(names, int(folds), rng) if split == "family"
            else stratified_folds(K, int(folds), rng))
    trains = {}
    for name in learners:       # the training subsets first, drawn in the serial order
        for f in range(int(folds)):
            train = np.flatnonzero(fold != f)
            if max_train is not None:
                train = np.sort(rng.permutation(train)[:int(max_train)])
            trains[name, f] = train
    _RUN.update(X=X, Y=Y, K=K, names=names, fold=fold, trains=trains, kernel=kernel, Cs=Cs,
                sigmas=sigmas, solver=solver, max_rank=max_rank, seed=seed,
                certificate=certificate)
    t_start, c_start = time.perf_counter(), time.process_time()
    c_children = _children_cpu()
    results = {name: (np.zeros(len(X)), np.zeros(len(X), dtype=bool), [None] * int(folds))
               for name in learners}
    try:
        for out in _map(_fold_task, list(trains), n_workers):
            name, f = out["learner"], out["fold"]
            correct_bonds, exact, fits = results[name]
            correct_bonds[out["test"]] = out["correct_bonds"]
            exact[out["test"]] = out["exact"]
            fits[f] = out["fit"]
            progress.update(learner=name, fold=f, C=out["fit"]["C"], sigma=out["fit"]["sigma"],
                            fold_precision=float(out["correct_bonds"].sum()
                                                 / max(K[out["test"]].sum(), 1)),
                            cpu_seconds=out["fit"]["cpu_seconds"])
    finally:
        _RUN.clear()
    progress.close()
    total_s = time.perf_counter() - t_start
    total_cpu = time.process_time() - c_start + _children_cpu() - c_children
    return _report(results, learners, K, names, folds, split, kernel, max_rank, Cs, sigmas,
                   total_s, total_cpu, n_boot, seed, n_workers, certificate)


def _report(results, learners, K, names, folds, split, kernel, max_rank, Cs, sigmas,
            total_s, total_cpu, n_boot, seed, n_workers=1, certificate="alternating_cycle"):
    """The result dict and its printed table (precision/accuracy per K, bootstrap CIs)."""
    fam = np.array([n.split("_")[0] for n in names])
    rows = []
    selections = list(range(2, 6)) + ["all"]
    boot = {}
    for k in selections:
        sel = K == k if k != "all" else np.ones(len(K), dtype=bool)
        if not sel.any():
            continue
        n_bonds = K[sel].astype(float)
        row = dict(K=k, n=int(sel.sum()))
        first = results[learners[0]]     # the first learner also under the plain keys
        row.update(precision=float(first[0][sel].sum() / n_bonds.sum()),
                   accuracy=float(first[1][sel].mean()))
        for name in learners:
            cb, ex, _ = results[name]
            row[f"{name}_precision"] = float(cb[sel].sum() / n_bonds.sum())
            row[f"{name}_accuracy"] = float(ex[sel].mean())
            if name != "pairs" and "pairs" in learners:
                diff = cb[sel] - results["pairs"][0][sel]
                r = np.random.default_rng(seed + 7)
                row[f"{name}_minus_pairs_protein_ci"] = bootstrap(
                    diff, n_bonds, np.flatnonzero(sel), n_boot, r)
                row[f"{name}_minus_pairs_family_ci"] = bootstrap(
                    diff, n_bonds, fam[sel], n_boot, r)
        if k != "all":
            row.update(chance_precision=1 / (2 * k - 1),
                       chance_accuracy=1 / math.prod(range(1, 2 * k, 2)),
                       paper_profile=PAPER["PROFILE"][k], paper_svm=PAPER["SVM"][k])
        rows.append(row)
    lines = [f"disulfide connectivity (known bonding state): {len(K)} proteins, "
             f"{int(folds)}-fold CV ({split} split), {kernel} kernel"
             + (f" (rank {max_rank})" if kernel == "rbf" else "")
             + f"; learners: {', '.join(learners)}"
             + (f" ({certificate} certificate)" if set(learners) & set(SLACKS) else ""),
             f"total {total_s:.1f} s wall, {total_cpu:.1f} s CPU (this process and its "
             f"{n_workers} worker process{'es' * (n_workers > 1)}); C from "
             f"{list(Cs)}" + (f", sigma from {list(sigmas)}" if kernel == "rbf" else "")
             + " per fold on an inner family-keeping split" * (len(Cs) + len(sigmas) > 2)]
    for name in learners:
        fits = results[name][2]
        lines.append(f"  {name:>9}: fit per fold (incl. selection) "
                     + ", ".join(f"{r['seconds']:.0f}/{r['cpu_seconds']:.0f}" for r in fits)
                     + " s wall/CPU; chosen C " + ", ".join(f"{r['C']:.3g}" for r in fits)
                     + ("; sigma " + ", ".join(f"{r['sigma']:.3g}" for r in fits)
                        if kernel == "rbf" else ""))
        for what, grid, key in (("C", Cs, "C_grid"), ("sigma", sigmas, "sigma_grid")):
            ext = [(r["fold"], r[key]) for r in fits if len(r[key]) > len(grid)]
            if ext:
                lines.append(f"  {'':>9}  the {what} grid was extended (best on its edge) in "
                             + "; ".join(f"fold {f} to [{', '.join(f'{v:.3g}' for v in g)}]"
                                         for f, g in ext))
    head = "".join(f" {n[:11]:>11}" for n in learners)
    lines += ["", "precision/accuracy per K (all: over every bond)",
              f"{'K':>3} {'n':>4}{head} {'chance':>11} {'PROFILE':>10} {'Tsk SVM':>10}"]
    for r in rows:
        cells = "".join(f" {r[n + '_precision']:.3f}/{r[n + '_accuracy']:.3f}"
                        for n in learners)
        ref = (f" {r['chance_precision']:.2f}/{r['chance_accuracy']:.3f} "
               f"{r['paper_profile'][0]:>5.2f}/{r['paper_profile'][1]:.2f} "
               f"{r['paper_svm'][0]:>5.2f}/{r['paper_svm'][1]:.2f}") if r["K"] != "all" else ""
        lines.append(f"{r['K']:>3} {r['n']:>4}{cells}{ref}")
    structured = [n for n in learners if n != "pairs"]
    if "pairs" in learners and structured:
        lines += ["", f"precision of structured minus pairs with 95% paired bootstrap intervals "
                      f"({n_boot} resamples of proteins / of families)",
                  f"{'':>16}" + "".join(f" {('K=' + str(r['K'])) if r['K'] != 'all' else 'all':>22}"
                                        for r in rows)]
        for n in structured:
            for unit in ("protein", "family"):
                cells = "".join(
                    f" {r[f'{n}_minus_pairs_{unit}_ci'][0]:+.3f} "
                    f"[{r[f'{n}_minus_pairs_{unit}_ci'][1]:+.3f},"
                    f"{r[f'{n}_minus_pairs_{unit}_ci'][2]:+.3f}]" for r in rows)
                lines.append(f"{n if unit == 'protein' else '':>9} {unit:>6}{cells}")
    peak_mb = max([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
                  + [r["peak_mb"] for n in learners for r in results[n][2]])
    lines.append(f"peak memory (max resident set of one process): {peak_mb:.0f} MB")
    lines.append("(Taskar et al. 2005 Table 1a: SP39, RBF kernel, PSI-BLAST windows of 9, "
                 "similarity-split folds; a reference, not the same data)")
    first = learners[0]
    return dict(report="\n".join(lines), seed=seed, folds=int(folds), learners=learners,
                certificate=certificate,
                kernel=kernel, split=split, results=[r for r in rows if r["K"] != "all"],
                overall=rows[-1], seconds=total_s,
                cpu_seconds=total_cpu, peak_mb=peak_mb,
                fits={n: results[n][2] for n in learners}, first=first,
                per_protein={n: dict(correct_bonds=results[n][0].tolist(),
                                     exact=results[n][1].tolist()) for n in learners})


if __name__ == "__main__":
    print(run()["report"])
