"""Brute-force oracles for the inference beyond the argmax: every output of a tiny example."""

import itertools

import numpy as np

from structlp.exceptions import StructlpError


def labellings(n, k):
    return [np.array(y) for y in itertools.product(range(k), repeat=n)]


def heads(n, root=0):
    """Every head array of an arborescence on n nodes rooted at ``root``."""
    out = []
    others = [m for m in range(n) if m != root]
    for hs in itertools.product(range(n), repeat=len(others)):
        y = np.full(n, -1)
        y[others] = hs
        if any(y[m] == m for m in others):
            continue
        ok = True
        for m in others:                       # every node reaches the root
            seen, v = set(), m
            while v != root:
                if v in seen:
                    ok = False
                    break
                seen.add(v)
                v = y[v]
            if not ok:
                break
        if ok:
            out.append(y)
    return out


def assignments(n_rows, n_cols):
    out = []
    for rows in itertools.permutations(range(n_rows), n_cols):
        y = np.zeros((n_rows, n_cols), dtype=int)
        y[list(rows), np.arange(n_cols)] = 1
        out.append(y)
    return out


def table(model, xc, outputs, s):
    """(part vectors (N, L), scores (N,)) of the given outputs."""
    M = np.array([model.encode(xc, y) for y in outputs], dtype=float)
    return M, M @ s


def gibbs(M, v):
    """log Z and marginals by enumeration."""
    top = v.max()
    w = np.exp(v - top)
    return top + np.log(w.sum()), (w / w.sum()) @ M, w / w.sum()


def is_error(f):
    try:
        f()
    except StructlpError:
        return True
    return False
