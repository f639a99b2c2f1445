"""Learning with the task loss: edit-distance softmax-margin vs CRF on a shift/indel task.

A synthetic version of the alignment experiment of Cortes et al. (2018, §6).
Each output ``y`` (length ``l`` over ``k`` symbols) is drawn from a sticky
Markov chain; the input ``x`` is a corrupted copy of ``y``: symbols are
deleted or inserted at random (which shifts the rest of the sequence by one
position), then substituted with a small probability, and the result is
truncated / padded to length ``l``.  So the errors a model has to undo are
shifts and indels, which edit distance forgives and Hamming does not.

Three linear models with the same features (emission features of the
observation window ``x_{s-2..s+2}`` and label bigrams) and the same Viterbi
decoder are trained by minimizing the softmax-margin objective with

* ``ZeroLoss``      — the plain CRF (cross-entropy surrogate),
* ``HammingLoss``   — the Hamming softmax-margin surrogate,
* ``EditDistance``  — the task loss (exact; automata gradients),

and judged on held-out data by edit distance (lower is better), plus the
Smith-Waterman score (higher is better, the paper's metric) and Hamming
distance.  The regularization of every model is picked from ``regs`` on a
validation split.  ``C`` (CLI) maps to a single ``reg = 1 / C`` (no search).

Options: ``length`` (10), ``alphabet`` (4), ``n_train`` (60), ``n_val`` (100),
``n_test`` (300), ``repeats`` (5 random draws), ``indel`` (0.15 per position),
``substitution`` (0.1), ``regs`` ([0.003, 0.03]), ``max_iter`` (150).
Bigger run: ``structlp run problems/sequence_alignment.py --option repeats=10
--option n_train=150``.
"""

from __future__ import annotations

import time

import numpy as np

from structlp import InvalidParameterError
from structlp.sequence import (BigramFeatures, EditDistance, EmissionFeatures, HammingLoss,
                               SmithWaterman, SoftmaxMarginLearner, StackedFeatures, ZeroLoss)

DESCRIPTION = (
    "Sequence alignment with shifts and indels: linear-chain models trained with the "
    "softmax-margin objective of the edit distance (exact gradients through weighted "
    "automata, Cortes et al. 2018) vs a CRF and a Hamming surrogate, judged by edit "
    "distance on held-out data.")


def make_data(n, length, k, rng, indel=0.15, substitution=0.1, stay=0.6):
    """``n`` pairs (x, y): y from a sticky Markov chain, x = y with indels then substitutions."""
    trans = rng.dirichlet(np.ones(k) * 0.5, size=k)
    trans = stay * np.eye(k) + (1 - stay) * trans
    X, Y = [], []
    for _ in range(n):
        y = [rng.integers(k)]
        for _ in range(length - 1):
            y.append(rng.choice(k, p=trans[y[-1]]))
        x = []
        for sym in y:
            u = rng.random()
            if u < indel / 2:            # deletion: the rest shifts left
                continue
            x.append(sym)
            if u > 1 - indel / 2:        # insertion: the rest shifts right
                x.append(rng.integers(k))
        x = [s if rng.random() > substitution else rng.integers(k) for s in x]
        x = (x + list(rng.integers(0, k, length)))[:length]
        X.append(np.array(x, dtype=np.int64))
        Y.append(np.array(y, dtype=np.int64))
    return X, Y


def evaluate(model, X, Y):
    preds = model.predict(X, lengths=[len(y) for y in Y])
    edit, sw, ham = EditDistance(), SmithWaterman(), HammingLoss()
    k = model.features.alphabet_size
    return {
        "edit": float(np.mean([edit(p, y, alphabet_size=k) for p, y in zip(preds, Y)])),
        # SW score = SW(y, y) - loss
        "smith_waterman": float(np.mean([2 * len(y) - sw(p, y, alphabet_size=k)
                                         for p, y in zip(preds, Y)])),
        "hamming": float(np.mean([ham(p, y, alphabet_size=k) for p, y in zip(preds, Y)])),
    }


def run(solver=None, C=None, seed=0, length=10, alphabet=4, n_train=60, n_val=100, n_test=300,
        repeats=5, indel=0.15, substitution=0.1, regs=(0.003, 0.03), max_iter=150, verbose=0):
    """Train the three models on ``repeats`` random draws and report held-out losses.

    ``solver`` is ignored (L-BFGS); ``C`` fixes ``reg = 1 / C``; ``verbose`` logs one
    line per trained model.
    """
    from structlp.utils import Progress, check_verbose
    progress = Progress("sequence_alignment", check_verbose(verbose), total=int(repeats))
    k = int(alphabet)
    feats = StackedFeatures([EmissionFeatures(k, k, window=2), BigramFeatures(k)])
    losses = {"CRF (no loss)": ZeroLoss(), "Hamming softmax-margin": HammingLoss(),
              "edit-distance softmax-margin": EditDistance()}
    if C is not None and not (isinstance(C, (int, float)) and not isinstance(C, bool)
                              and 0 < C < float("inf")):
        raise InvalidParameterError(
            f"The 'C' option of sequence_alignment must be a float > 0 (reg = 1 / C); got {C!r}.")
    regs = [1.0 / float(C)] if C is not None else [float(r) for r in regs]
    per_model = {name: [] for name in losses}
    timing = {name: 0.0 for name in losses}
    chosen = {name: [] for name in losses}
    b_size = []
    for r in range(int(repeats)):
        rng = np.random.default_rng([int(seed), r])
        X, Y = make_data(int(n_train) + int(n_val) + int(n_test), int(length), k, rng,
                         indel=indel, substitution=substitution)
        tr = slice(0, int(n_train))
        va = slice(int(n_train), int(n_train) + int(n_val))
        te = slice(int(n_train) + int(n_val), None)
        for name, loss in losses.items():
            best = None
            for reg in regs:
                t0 = time.perf_counter()
                model = SoftmaxMarginLearner(loss=loss, features=feats, reg=reg,
                                             max_iter=int(max_iter)).fit(X[tr], Y[tr])
                timing[name] += time.perf_counter() - t0
                progress.message(f"draw {r + 1}/{repeats}: {name}, reg {reg:g}, "
                                 f"{time.perf_counter() - t0:.1f} s")
                score = evaluate(model, X[va], Y[va])["edit"] if len(regs) > 1 else 0.0
                if best is None or score < best[0]:
                    best = (score, reg, model)
            chosen[name].append(best[1])
            per_model[name].append(evaluate(best[2], X[te], Y[te]))
            if isinstance(loss, EditDistance):
                b_size.extend(info["max_states_per_layer"] for info in best[2].automaton_info_)
    summary = {}
    for name, runs in per_model.items():
        summary[name] = {metric: {"mean": float(np.mean([r[metric] for r in runs])),
                                  "std": float(np.std([r[metric] for r in runs]))}
                         for metric in runs[0]}
        summary[name]["train_seconds"] = timing[name]
        summary[name]["chosen_reg"] = chosen[name]
    base = summary["CRF (no loss)"]["edit"]["mean"]
    ours = summary["edit-distance softmax-margin"]["edit"]["mean"]
    diffs = [per_model["CRF (no loss)"][i]["edit"] - per_model["edit-distance softmax-margin"][i]["edit"]
             for i in range(int(repeats))]
    lines = [f"held-out results, l={length}, |Delta|={k}, n_train={n_train}, n_test={n_test}, "
             f"{repeats} random draws (mean ± std over draws)",
             f"{'model':<30} {'edit dist (lower)':>18} {'Smith-Waterman (higher)':>24} "
             f"{'Hamming':>14} {'train s':>8}"]
    for name, s in summary.items():
        lines.append(f"{name:<30} {s['edit']['mean']:>9.3f} ± {s['edit']['std']:.3f} "
                     f"{s['smith_waterman']['mean']:>15.3f} ± {s['smith_waterman']['std']:.3f} "
                     f"{s['hamming']['mean']:>7.3f} ± {s['hamming']['std']:.3f} "
                     f"{s['train_seconds']:>8.1f}")
    lines.append("edit distance, CRF minus edit-trained, per draw: "
                 + ", ".join(f"{d:+.3f}" for d in diffs)
                 + f"  (mean {base - ours:+.3f}; positive = gain from training with the task loss)")
    if b_size:
        lines.append(f"edit-distance automaton B: max states per layer over training examples "
                     f"{int(np.max(b_size))} (median {int(np.median(b_size))})")
    return {"report": "\n".join(lines), "summary": summary, "per_draw": per_model,
            "edit_gain_per_draw": diffs, "edit_gain_mean": base - ours,
            "settings": {"length": length, "alphabet": k, "n_train": n_train, "n_val": n_val,
                         "n_test": n_test, "repeats": repeats, "indel": indel,
                         "substitution": substitution, "regs": regs, "max_iter": max_iter}}


if __name__ == "__main__":
    print(run()["report"])
