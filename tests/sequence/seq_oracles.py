"""Independent oracles for the structlp.sequence tests.

Plain textbook dynamic programs and brute force, written without the
library's code: Levenshtein by the full (n+1) x (m+1) table, Smith-Waterman by
its table, n-gram counts with collections.Counter, the softmax-margin sum by
itertools.product and math.exp.
"""

import itertools
import math
from collections import Counter

import numpy as np


def edit_distance(a, b, sub=1, ins=1, dele=1, band=None):
    """Cost of turning a into b (sub: substitute, ins: insert a symbol of b, dele: delete one of a)."""
    n, m = len(a), len(b)
    INF = float("inf")
    D = [[INF] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if band is not None and abs(i - j) > band:
                continue
            if i == 0 and j == 0:
                D[i][j] = 0
                continue
            best = INF
            if i > 0:
                best = min(best, D[i - 1][j] + dele)
            if j > 0:
                best = min(best, D[i][j - 1] + ins)
            if i > 0 and j > 0:
                best = min(best, D[i - 1][j - 1] + (0 if a[i - 1] == b[j - 1] else sub))
            D[i][j] = best
    return D[n][m]


def smith_waterman(a, b, match=2, mismatch=-1, gap=-1, band=None):
    """Best local alignment score of a and b with a linear gap penalty (cells |i-j| <= band)."""
    n, m = len(a), len(b)
    H = [[0] * (m + 1) for _ in range(n + 1)]
    best = 0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if band is not None and abs(i - j) > band:
                continue
            s = match if a[i - 1] == b[j - 1] else mismatch
            H[i][j] = max(0, H[i - 1][j - 1] + s, H[i - 1][j] + gap, H[i][j - 1] + gap)
            best = max(best, H[i][j])
    return best


def sw_loss(y, ref, match=2, mismatch=-1, gap=-1, band=None):
    return (smith_waterman(ref, ref, match, mismatch, gap)
            - smith_waterman(y, ref, match, mismatch, gap, band))


def ngram_loss(y, ref, n=2, smoothing=1.0):
    cy = Counter(tuple(y[i:i + n]) for i in range(len(y) - n + 1))
    cr = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
    return -math.log(smoothing + sum(c * cr[u] for u, c in cy.items()))


def hamming(y, ref):
    return sum(int(a != b) for a, b in zip(y, ref))


def oracle_loss(name, params):
    """A python function L(y, ref) for a loss described by name and constructor params."""
    p = dict(params)
    cap = p.pop("cap", None)
    band = p.pop("band", None)
    if name == "EditDistance":
        f = lambda y, r: edit_distance(y, r, p.get("sub", 1), p.get("ins", 1), p.get("dele", 1),
                                       band=band)
    elif name == "SmithWaterman":
        f = lambda y, r: sw_loss(y, r, p.get("match", 2), p.get("mismatch", -1), p.get("gap", -1),
                                 band)
    elif name == "NGramLoss":
        f = lambda y, r: ngram_loss(y, r, p.get("n", 2), p.get("smoothing", 1.0))
    elif name == "HammingLoss":
        f = hamming
    elif name == "ZeroLoss":
        f = lambda y, r: 0.0
    else:
        raise KeyError(name)
    if cap is None:
        return f
    return lambda y, r: min(f(y, r), cap)


def brute_force_softmax_margin(w, psi, y_true, k, loss_fn):
    """F(w) and its gradient by enumerating Delta^l, with Psi given as a python function psi(y)."""
    l = len(y_true)
    psi_true = psi(tuple(y_true))
    terms, feats = [], []
    for y in itertools.product(range(k), repeat=l):
        f = psi(y)
        terms.append(loss_fn(list(y), list(y_true)) + float(w @ f))
        feats.append(f)
    m = max(terms)
    weights = [math.exp(t - m) for t in terms]
    z = sum(weights)
    value = m + math.log(z) - float(w @ psi_true)
    grad = sum(wt * f for wt, f in zip(weights, feats)) / z - psi_true
    return value, np.asarray(grad)


def bigram_counts(y, k):
    out = np.zeros(k * k)
    for a, b in zip(y[:-1], y[1:]):
        out[a * k + b] += 1
    return out
