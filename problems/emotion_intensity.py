"""Facial emotion intensity (Fathony et al. 2018, §4.1, Table 1): AGM vs CRF vs SSVM on CK+ chains.

Each of the 167 CK+ sequences is a chain of frames with 25 PCA'd Haar features
and an intensity label (neutral < increasing < apex).  Features as the authors
built them: node ``[x_t; 1]``, edge ``[|x_t - x_{t-1}|; 1]``, each in the block
of the sequence's emotion class.  Because those blocks never interact (a
sequence only touches its class's block and the L2 regularizer is separable),
every model is trained *exactly* as six independent per-class problems (the
same optimum as the joint program, and much faster).  Six metrics (zero-one,
absolute, squared; unweighted and weighted by position), the authors' 20
random splits (first 120 train, last 47 test), regularization chosen on the
first split's training set (70/30), Wilcoxon signed-rank test at alpha = 0.05.

The data (research use only) are read from ``data_path`` (option), else
``$STRUCTLP_CK_PATH``, else ``../shared/data/ck_emotion``; never copied here.
Run: ``structlp run problems/emotion_intensity.py -o splits=20``.
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


def _agm(loss, weighted, reg, solver, method):
    # per-class objective reg/2 |theta_z|^2 + (1/m) sum_{i in z} f_i  <=>  reg * m / m_z
    return lambda m_z, m: AdversarialGraphicalModel(
        3, loss=loss, node_weights="position" if weighted else None, normalize_weights=True,
        reg=reg * m / m_z, method=method, solver=solver, max_epochs=30, random_state=0)


def _ssvm(loss, weighted, reg, solver):
    # 1/2 |w|^2 + C sum xi with C = 1 / (reg m): the same scaling as reg/2 |w|^2 + mean xi
    return lambda m_z, m: structlp.MaxMarginLearner(
        TreeLabeling(3, loss=loss, node_weights="position" if weighted else None,
                     normalize_weights=True), C=1.0 / (reg * m), solver=solver)


def _crf(reg):
    return lambda m_z, m: TreeCRF(3, reg=reg * m / m_z, max_iter=300)


def _evaluate(pred, Y, loss, weighted):
    return float(np.mean([sequence_loss(p, y, loss, weighted) for p, y in zip(pred, Y)]))


def select_regularization(X, Y, Z, grid, solver, method, log):
    """Choose reg per (model, metric) on a 70/30 split of the training set."""
    n_tr = int(round(0.7 * len(X)))
    Xa, Ya, Za = X[:n_tr], Y[:n_tr], Z[:n_tr]
    Xb, Yb, Zb = X[n_tr:], Y[n_tr:], Z[n_tr:]
    best = {}
    for reg in grid:
        crf = PerClass(_crf(reg)).fit(Xa, Ya, Za)
        for loss, weighted in METRICS:
            key = (loss, weighted)
            scores = {
                "CRF": _evaluate(crf.predict(Xb, Zb, loss=loss), Yb, loss, weighted),
                "AGM": _evaluate(PerClass(_agm(loss, weighted, reg, solver, method))
                                 .fit(Xa, Ya, Za).predict(Xb, Zb), Yb, loss, weighted),
                "SSVM": _evaluate(PerClass(_ssvm(loss, weighted, reg, solver))
                                  .fit(Xa, Ya, Za).predict(Xb, Zb), Yb, loss, weighted),
            }
            for name, v in scores.items():
                if (name, key) not in best or v < best[(name, key)][1]:
                    best[(name, key)] = (reg, v)
        log(f"  validation done for reg={reg:g}")
    return {k: v[0] for k, v in best.items()}


def run(solver=None, C=None, seed=0, splits=1, data_path=None, reg_grid=(1e-2,),
        method="qp", verbose=False, **options):
    """Run the experiment on ``splits`` of the authors' 20 splits (in order).

    Options: ``splits`` (1..20), ``data_path``, ``reg_grid`` (regularization values
    tried on split 1, default a single value = no selection; ``C`` given fixes reg = C;
    the paper-like selection is ``reg_grid=[0.1, 0.01, 0.001]``), ``method`` of AGM
    ("qp": exact; "subgradient": the paper's stochastic algorithm, slower).
    """
    from scipy.stats import wilcoxon
    log = print if verbose else (lambda *a: None)
    t0 = time.perf_counter()
    D = load_ck_emotion(data_path)
    n_split = int(splits)
    if not 1 <= n_split <= D["splits"].shape[0]:
        raise structlp.InvalidParameterError(f"splits must be in 1..20; got {splits!r}.")
    X_all = emotion_examples(D["frames"], np.zeros(len(D["frames"]), dtype=int), n_classes=1)
    Y_all, Z_all = D["labels"], D["emotion"]

    def part(ids):
        return [X_all[i] for i in ids], [Y_all[i] for i in ids], Z_all[ids]

    first = D["splits"][0]
    Xtr, Ytr, Ztr = part(first[:120])
    if C is not None or len(reg_grid) == 1:
        reg0 = float(C) if C is not None else float(reg_grid[0])
        chosen = {(n, key): reg0 for n in MODELS for key in METRICS}
    elif False:
        chosen = {(n, key): float(C) for n in MODELS for key in METRICS}
    else:
        chosen = select_regularization(Xtr, Ytr, Ztr, list(reg_grid), solver, method, log)
    results = {(n, key): [] for n in MODELS for key in METRICS}
    for s in range(n_split):
        ids = D["splits"][s]
        Xtr, Ytr, Ztr = part(ids[:120])
        Xte, Yte, Zte = part(ids[120:])
        crfs = {}
        for loss, weighted in METRICS:
            key = (loss, weighted)
            reg = chosen[("CRF", key)]
            if reg not in crfs:
                crfs[reg] = PerClass(_crf(reg)).fit(Xtr, Ytr, Ztr)
            results[("CRF", key)].append(_evaluate(crfs[reg].predict(Xte, Zte, loss=loss),
                                                   Yte, loss, weighted))
            agm = PerClass(_agm(loss, weighted, chosen[("AGM", key)], solver, method))
            results[("AGM", key)].append(_evaluate(agm.fit(Xtr, Ytr, Ztr).predict(Xte, Zte),
                                                   Yte, loss, weighted))
            ssvm = PerClass(_ssvm(loss, weighted, chosen[("SSVM", key)], solver))
            results[("SSVM", key)].append(_evaluate(ssvm.fit(Xtr, Ytr, Ztr).predict(Xte, Zte),
                                                    Yte, loss, weighted))
        log(f"split {s + 1}/{n_split} done ({time.perf_counter() - t0:.0f} s)")
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
    lines.append(f"AGM method={method}; reg chosen on split 1: " + ", ".join(
        f"{n}:{sorted({chosen[(n, k)] for k in METRICS})}" for n in MODELS)
        + f"; {elapsed:.0f} s")
    return {"report": "\n".join(lines), "table": table, "average": avg, "splits": n_split,
            "seconds": elapsed, "paper": {metric_name(*k): PAPER[k] for k in METRICS}}
