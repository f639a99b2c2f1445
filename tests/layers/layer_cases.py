"""Tiny examples of the structured layers' tests, each with every output enumerated."""

import itertools

import cvxpy as cp
import numpy as np
from oracles import ChooseK, ChooseKDecoded, enumerate_arborescences, enumerate_bmatchings

from structlp.structures import (Arborescence, BipartiteMatching, JunctionTreeLabeling,
                                 TreeLabeling)


def tree_x(parents, rng, dv=2, de=1):
    n = len(parents)
    return {"node_features": rng.normal(size=(n, dv)), "edge_features": rng.normal(
        size=(n - 1, de)), "parents": np.array(parents)}


class AtMostK(ChooseK):
    """At most k of n items (the empty output included), by constraints alone."""

    def constraints(self, x, mu):
        return [cp.sum(mu) <= self.k, mu >= 0, mu <= 1]


def case(name, seed=0):
    """(model, checked x, outputs as the model holds them, their part vectors (N, L))."""
    rng = np.random.default_rng(seed)
    if name == "matching":
        model, x = BipartiteMatching(), np.zeros((4, 4, 1))
        outs = enumerate_bmatchings(4, 4, 1, 1)
    elif name == "matching6":                       # 720 assignments
        model, x = BipartiteMatching(), np.zeros((6, 6, 1))
        outs = [np.eye(6)[list(p)] for p in itertools.permutations(range(6))]
    elif name == "chain5":                          # 3^5 = 243 labellings
        model = TreeLabeling(3)
        x = tree_x([-1, 0, 1, 2, 3], rng)
        outs = [np.array(y) for y in itertools.product(range(3), repeat=5)]
    elif name == "bmatching":                       # no decoder: the inference LP
        model, x = BipartiteMatching(R=1, P=2), np.zeros((3, 3, 1))
        outs = enumerate_bmatchings(3, 3, 1, 2)
    elif name in ("chain", "tree"):
        model = TreeLabeling(3 if name == "chain" else 2)
        x = tree_x([-1, 0, 1] if name == "chain" else [-1, 0, 0, 1], rng)
        n, k = len(x["parents"]), model.n_labels
        outs = [np.array(y) for y in itertools.product(range(k), repeat=n)]
    elif name == "cycle":                           # a loopy graph: junction trees
        model = JunctionTreeLabeling(2)
        x = {"node_features": rng.normal(size=(4, 2)),
             "edges": np.array([[0, 1], [1, 2], [2, 3], [0, 3]]),
             "edge_features": rng.normal(size=(4, 1))}
        outs = [np.array(y) for y in itertools.product(range(2), repeat=4)]
    elif name == "arborescence":
        model, x = Arborescence(), rng.normal(size=(4, 4, 1))
        outs = enumerate_arborescences(4)
    elif name in ("choosek", "choosek_decoded"):
        model = ChooseK(2) if name == "choosek" else ChooseKDecoded(2)
        x = rng.normal(size=(5, 1))
        outs = []
        for c in itertools.combinations(range(5), 2):
            y = np.zeros(5)
            y[list(c)] = 1
            outs.append(y)
    elif name == "atmostk":                         # outputs of 0, 1 or 2 ones: the LP
        model, x = AtMostK(2), rng.normal(size=(5, 1)) - 1.0
        outs = [np.zeros(5)]
        for size in (1, 2):
            for c in itertools.combinations(range(5), size):
                y = np.zeros(5)
                y[list(c)] = 1
                outs.append(y)
    else:
        raise KeyError(name)
    x = model.check_x(x)
    M = np.array([model.encode(x, y) for y in outs], dtype=float)
    return model, x, outs, M


CASES = ["matching", "bmatching", "chain", "tree", "cycle", "arborescence", "choosek",
         "choosek_decoded", "atmostk"]
#: The cases with an exact log-partition function (the "crf" loss).
CRF_CASES = ["chain", "tree", "cycle", "arborescence"]


def hull_projection(M, theta):
    """argmin_{mu in conv(rows of M)} |mu - theta|^2 by cvxpy (CLARABEL, tight)."""
    a = cp.Variable(M.shape[0], nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(M.T @ a - theta)), [cp.sum(a) == 1])
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return M.T @ a.value
