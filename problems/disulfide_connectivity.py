"""Disulfide connectivity (Taskar et al. 2005, §7, known bonding state) as perfect matching.

Each protein of DISULFIND's connectivity data (Debian package
``disulfinder-data``) has ``K`` = 2..5 disulfide bonds between its ``2K`` bonded
cysteines; the task is to predict which cysteines pair up, a perfect matching
of the complete graph on the cysteines.  Pair features are symmetric functions
of the two cysteines' profile windows and positions
(:func:`structlp.datasets.disulfide_pair_features`).  A linear
:class:`~structlp.structures.PerfectMatching` model is trained with the
alternating-cycle certificate QP (``formulation="certificate"``) under 4-fold
cross-validation (random folds stratified by ``K``), and evaluated per ``K`` by
precision (fraction of bonds right) and accuracy (fraction of proteins whose
whole pattern is right), next to chance and the numbers of Taskar et al.
(Table 1a: SP39, RBF kernel, similarity-split folds — not the same data or
split, so a reference, not a replication).

With ``-o kernel=rbf`` the model is the kernelized dual of the same
certificate QP with an RBF kernel (Taskar §6–7): ``gamma = 1 / (2 sigma^2 m)``
with ``m`` the median squared distance between training pair features, ``sigma``
chosen per outer fold from ``sigmas`` by a 75/25 split of that fold's training
proteins (precision on the held-out quarter), and the kernel factored to rank
``max_rank`` (pivoted incomplete Cholesky).  ``-o learner=pairs`` runs the
paper's baseline on the same features and kernel: every pair classified on its
own (an SVM: box output polytope, symmetric Hamming loss, dual with the same
kernel), then the pairs matched by maximum-weight perfect matching.

Run it with ``structlp run problems/disulfide_connectivity.py`` (linear, about
four minutes); ``-o kernel=rbf`` (about five); ``-o learner=both -o kernel=rbf``
prints the structured model beside the baseline; ``-o folds=2`` or
``-o max_train=100`` for a quicker look.
"""

from __future__ import annotations

import math
import resource
import time

import numpy as np

import structlp
from structlp.datasets import load_disulfide
from structlp.polytope import Polytope
from structlp.structures import PerfectMatching

DESCRIPTION = __doc__.split("\n\n")[0]

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


def _estimator(learner, kernel, gamma, C, solver, max_rank):
    if learner == "cutting_plane":
        from structlp.cutting_plane import CuttingPlaneLearner
        return CuttingPlaneLearner(PerfectMatching(), C=C, tol=1e-3, solver=solver)
    model = IndependentPairs() if learner == "pairs" else PerfectMatching()
    formulation = "minmax" if learner == "pairs" else "certificate"
    if kernel == "linear":
        return structlp.MaxMarginLearner(model, C=C, formulation=formulation, solver=solver)
    return structlp.MaxMarginLearner(model, C=C, formulation=formulation, solver=solver,
                                     dual=True, kernel="rbf", gamma=gamma, kernel_tol=1e-4,
                                     max_rank=max_rank)


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


def run(solver=None, C=None, seed=0, folds=4, max_train=None, learner="certificate",
        kernel="linear", sigmas=(0.1, 0.25, 0.5), max_rank=150, split="family", path=None):
    """Cross-validate on the disulfide data; return per-K results.

    Options: ``folds`` (int), ``max_train`` (cap on training proteins per fold),
    ``learner`` ("certificate", "cutting_plane", "pairs" or "both" =
    certificate and pairs), ``kernel`` ("linear" or "rbf"), ``sigmas`` (RBF
    widths tried, in units of the median pair distance), ``max_rank`` (rank
    of the kernel factor), ``split`` ("family": protein families kept within
    one fold, the default; "random": folds stratified by K, which lets
    orthologs of a test protein into its training set), ``path`` (data
    directory).
    """
    if split not in ("family", "random"):
        raise structlp.InvalidParameterError(
            f"The 'split' option must be 'family' or 'random'; got {split!r}.")
    if learner not in ("certificate", "cutting_plane", "pairs", "both"):
        raise structlp.InvalidParameterError(
            "The 'learner' option must be 'certificate', 'cutting_plane', 'pairs' or 'both'; "
            f"got {learner!r}.")
    if kernel not in ("linear", "rbf"):
        raise structlp.InvalidParameterError(
            f"The 'kernel' option must be 'linear' or 'rbf'; got {kernel!r}.")
    if kernel == "rbf" and learner == "cutting_plane":
        raise structlp.InvalidParameterError("The cutting-plane learner has no kernel; use "
                                             "learner='certificate' with kernel='rbf'.")
    C = (0.1 if kernel == "linear" else 1.0) if C is None else float(C)
    learners = ["certificate", "pairs"] if learner == "both" else [learner]
    data = load_disulfide(path)
    X, Y, K = data["X"], data["Y"], data["K"]
    rng = np.random.default_rng(seed)
    fold = (family_folds(data["names"], int(folds), rng) if split == "family"
            else stratified_folds(K, int(folds), rng))
    t_start = time.perf_counter()
    results = {}
    for name in learners:
        correct_bonds = np.zeros(len(X))
        exact = np.zeros(len(X), dtype=bool)
        fits = []
        for f in range(int(folds)):
            train = np.flatnonzero(fold != f)
            test = np.flatnonzero(fold == f)
            if max_train is not None:
                train = rng.permutation(train)[:int(max_train)]
            mean, sd = standardizer([X[i] for i in train])
            Xtr = [(X[i] - mean) / sd for i in train]
            Ytr = [Y[i] for i in train]
            Xte = [(X[i] - mean) / sd for i in test]
            t0 = time.perf_counter()
            sigma, gamma, scores = None, None, {}
            if kernel == "rbf":
                med = median_sqdist(Xtr, np.random.default_rng(seed + f))
                inner = np.random.default_rng(seed + 100 + f).permutation(len(train))
                cut = (3 * len(inner)) // 4
                fit_i, val_i = inner[:cut], inner[cut:]
                for sg in sigmas:
                    g = 1.0 / (2.0 * float(sg) ** 2 * med)
                    est = _estimator(name, kernel, g, C, solver, max_rank)
                    est.fit([Xtr[i] for i in fit_i], [Ytr[i] for i in fit_i])
                    pred = _predict(est, name, [Xtr[i] for i in val_i])
                    scores[float(sg)] = _precision(pred, [Ytr[i] for i in val_i])
                sigma = max(scores, key=scores.get)
                gamma = 1.0 / (2.0 * sigma ** 2 * med)
            est = _estimator(name, kernel, gamma, C, solver, max_rank)
            est.fit(Xtr, Ytr)
            fits.append(dict(fold=f, n_train=len(train), seconds=time.perf_counter() - t0,
                             objective=est.objective_, sigma=sigma, validation=scores,
                             rank=getattr(est, "kernel_rank_", None)))
            for i, p in zip(test, _predict(est, name, Xte)):
                correct_bonds[i] = (p * Y[i]).sum() / 2
                exact[i] = np.array_equal(p, Y[i])
        results[name] = (correct_bonds, exact, fits)
    total_s = time.perf_counter() - t_start
    first = learners[0]
    correct_bonds, exact, fits = results[first]
    rows = []
    for k in range(2, 6):
        sel = K == k
        if not sel.any():
            continue
        row = dict(K=k, n=int(sel.sum()), precision=float(correct_bonds[sel].sum() /
                                                          (k * sel.sum())),
                   accuracy=float(exact[sel].mean()))
        for other in learners[1:]:
            cb, ex, _ = results[other]
            row[f"{other}_precision"] = float(cb[sel].sum() / (k * sel.sum()))
            row[f"{other}_accuracy"] = float(ex[sel].mean())
        rows.append(dict(row, chance_precision=1 / (2 * k - 1),
                         chance_accuracy=1 / math.prod(range(1, 2 * k, 2)),
                         paper_profile=PAPER["PROFILE"][k], paper_svm=PAPER["SVM"][k]))
    lines = [f"disulfide connectivity (known bonding state): {len(X)} proteins, "
             f"{int(folds)}-fold CV ({split} split), {kernel} kernel, {' + '.join(learners)}, "
             f"C={C}"
             + (f", kernel rank {max_rank}" if kernel == "rbf" else ""),
             f"total {total_s:.1f} s; fit per fold ({first}, incl. sigma selection): "
             + ", ".join(f"{r['seconds']:.1f} s" for r in fits)
             + f" ({fits[0]['n_train']} training proteins)"]
    if kernel == "rbf":
        for name in learners:
            lines.append(f"sigma chosen per fold ({name}): "
                         + ", ".join(f"{r['sigma']:g}" for r in results[name][2]))
    extra = "".join(f" {'pairs P/A':>11}" for _ in learners[1:])
    lines += ["", f"{'K':>2} {'proteins':>8} {'precision':>10} {'accuracy':>9}{extra} "
                  f"{'chance P/A':>12} {'Taskar PROFILE':>15} {'Taskar SVM':>11}"]
    for r in rows:
        more = "".join(f" {r[o + '_precision']:>5.3f}/{r[o + '_accuracy']:<5.3f}"
                       for o in learners[1:])
        lines.append(f"{r['K']:>2} {r['n']:>8} {r['precision']:>10.3f} {r['accuracy']:>9.3f}"
                     f"{more} "
                     f"{r['chance_precision']:>6.2f}/{r['chance_accuracy']:<5.3f} "
                     f"{r['paper_profile'][0]:>8.2f}/{r['paper_profile'][1]:<6.2f} "
                     f"{r['paper_svm'][0]:>5.2f}/{r['paper_svm'][1]:<5.2f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines.append(f"peak memory (max resident set of this process): {peak_mb:.0f} MB")
    lines.append("(Taskar et al. 2005 Table 1a: SP39, RBF kernel, PSI-BLAST windows of 9, "
                 "similarity-split folds; a reference, not the same data)")
    return dict(report="\n".join(lines), C=C, seed=seed, folds=int(folds), learner=learner,
                kernel=kernel, split=split, results=rows, fits=fits, seconds=total_s, peak_mb=peak_mb,
                baseline_fits=results[learners[1]][2] if len(learners) > 1 else None)


if __name__ == "__main__":
    print(run()["report"])
