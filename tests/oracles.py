"""Independent oracles for the tests: brute-force enumeration."""

import itertools

import numpy as np


def enumerate_bmatchings(n_rows, n_cols, R, P):
    """Every 0/1 (n_rows, n_cols) matrix with column sums R and row sums <= P."""
    cols = [np.array(c) for c in itertools.combinations(range(n_rows), R)]
    out = []
    for choice in itertools.product(cols, repeat=n_cols):
        y = np.zeros((n_rows, n_cols), dtype=int)
        for k, rows in enumerate(choice):
            y[rows, k] = 1
        if np.all(y.sum(axis=1) <= P):
            out.append(y)
    return out


def brute_force_hinge(x, y_true, w, outputs, loss):
    """max_y [w.f(y) + loss(y)] - w.f(y_true) over an explicit list of outputs."""
    S = x @ w
    best = max(float(np.sum(S * y)) + loss(y) for y in outputs)
    return best - float(np.sum(S * y_true))
