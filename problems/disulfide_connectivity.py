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

Run it with ``structlp run problems/disulfide_connectivity.py`` (about two
minutes); ``-o folds=2`` or ``-o max_train=100`` for a quicker look.
"""

from __future__ import annotations

import math
import time

import numpy as np

import structlp
from structlp.datasets import load_disulfide
from structlp.structures import PerfectMatching

DESCRIPTION = __doc__.split("\n\n")[0]

#: Taskar et al. (2005), Table 1(a): precision/accuracy on SP39, K = 2..5.
PAPER = {"SVM": {2: (0.63, 0.63), 3: (0.51, 0.38), 4: (0.34, 0.12), 5: (0.31, 0.07)},
         "PROFILE": {2: (0.77, 0.77), 3: (0.62, 0.52), 4: (0.51, 0.36), 5: (0.43, 0.13)},
         "DAG-RNN": {2: (0.74, 0.74), 3: (0.61, 0.51), 4: (0.44, 0.27), 5: (0.41, 0.11)}}


def stratified_folds(K, n_folds, rng):
    """Fold index of every protein, folds balanced within each K."""
    fold = np.empty(len(K), dtype=int)
    for k in np.unique(K):
        idx = rng.permutation(np.flatnonzero(K == k))
        fold[idx] = np.arange(len(idx)) % n_folds
    return fold


def standardizer(X):
    """Mean and standard deviation of the edge features of the examples in X."""
    F = np.concatenate([x[np.triu_indices(len(x), 1)] for x in X])
    return F.mean(axis=0), F.std(axis=0) + 1e-6


def run(solver=None, C=None, seed=0, folds=4, max_train=None, learner="certificate",
        path=None):
    """Cross-validate the certificate QP on the disulfide data; return per-K results.

    Options: ``folds`` (int), ``max_train`` (cap on training proteins per fold),
    ``learner`` ("certificate" or "cutting_plane"), ``path`` (data directory).
    """
    C = 0.1 if C is None else float(C)
    data = load_disulfide(path)
    X, Y, K = data["X"], data["Y"], data["K"]
    rng = np.random.default_rng(seed)
    fold = stratified_folds(K, int(folds), rng)
    model = PerfectMatching()
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
        Xte = [(X[i] - mean) / sd for i in test]
        t0 = time.perf_counter()
        if learner == "certificate":
            est = structlp.MaxMarginLearner(model, C=C, formulation="certificate", solver=solver)
        elif learner == "cutting_plane":
            from structlp.cutting_plane import CuttingPlaneLearner
            est = CuttingPlaneLearner(model, C=C, tol=1e-3, solver=solver)
        else:
            raise structlp.InvalidParameterError(
                f"The 'learner' option must be 'certificate' or 'cutting_plane'; got {learner!r}.")
        est.fit(Xtr, [Y[i] for i in train])
        fits.append(dict(fold=f, n_train=len(train), seconds=time.perf_counter() - t0,
                         objective=est.objective_))
        for i, p in zip(test, est.predict(Xte)):
            correct_bonds[i] = (p * Y[i]).sum() / 2
            exact[i] = np.array_equal(p, Y[i])
    rows = []
    for k in range(2, 6):
        sel = K == k
        if not sel.any():
            continue
        rows.append(dict(K=k, n=int(sel.sum()), precision=float(correct_bonds[sel].sum() /
                                                               (k * sel.sum())),
                         accuracy=float(exact[sel].mean()), chance_precision=1 / (2 * k - 1),
                         chance_accuracy=1 / math.prod(range(1, 2 * k, 2)),
                         paper_profile=PAPER["PROFILE"][k], paper_svm=PAPER["SVM"][k]))
    lines = [f"disulfide connectivity (known bonding state): {len(X)} proteins, "
             f"{int(folds)}-fold CV, linear PerfectMatching, {learner}, C={C}",
             f"fit per fold: " + ", ".join(f"{r['seconds']:.1f} s" for r in fits)
             + f" ({fits[0]['n_train']} training proteins)",
             "",
             f"{'K':>2} {'proteins':>8} {'precision':>10} {'accuracy':>9} {'chance P/A':>12} "
             f"{'Taskar PROFILE':>15} {'Taskar SVM':>11}"]
    for r in rows:
        lines.append(f"{r['K']:>2} {r['n']:>8} {r['precision']:>10.3f} {r['accuracy']:>9.3f} "
                     f"{r['chance_precision']:>6.2f}/{r['chance_accuracy']:<5.3f} "
                     f"{r['paper_profile'][0]:>8.2f}/{r['paper_profile'][1]:<6.2f} "
                     f"{r['paper_svm'][0]:>5.2f}/{r['paper_svm'][1]:<5.2f}")
    lines.append("(Taskar et al. 2005 Table 1a: SP39, RBF kernel, PSI-BLAST windows of 9, "
                 "similarity-split folds; a reference, not the same data)")
    return dict(report="\n".join(lines), C=C, seed=seed, folds=int(folds), learner=learner,
                results=rows, fits=fits)


if __name__ == "__main__":
    print(run()["report"])
