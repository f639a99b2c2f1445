"""Tiny latent problems and brute-force oracles for the LatentSSVM tests."""

import itertools

import cvxpy as cp
import numpy as np

from structlp import StructuredModel
from structlp.latent import LatentGraphLabeling


class LatentMulticlass(StructuredModel):
    """A latent multiclass model declared from the docs alone, with no completion hook
    (the completion is the inference LP restricted by ``observe``): ``S`` states, state
    ``s`` of label ``state_label[s]``; an example is a feature vector (d,), an output the
    one-hot (S,) vector of its state."""

    def __init__(self, state_label=(0, 0, 1, 1)):
        self.state_label = state_label

    def n_parts(self, x):
        return len(self.state_label)

    def features(self, x):
        return np.kron(np.eye(len(self.state_label)), np.asarray(x, dtype=float)[None, :])

    def constraints(self, x, mu):
        return [cp.sum(mu) == 1, mu >= 0, mu <= 1]

    def polytope_key(self, x):
        return 0

    def observe(self, x, mu, y):
        idx = [s for s, lab in enumerate(self.state_label) if lab == y]
        return [cp.sum(mu[idx]) == 1]

    def label(self, x, output):
        return self.state_label[int(np.argmax(output))]

    def loss_coefficients(self, x, y_true):
        lab = self.state_label[int(np.argmax(y_true))]
        return np.array([float(s != lab) for s in self.state_label]), 0.0


class LPCompletion(LatentGraphLabeling):
    """LatentGraphLabeling without its ``complete`` hook: completion by the LP."""

    complete = None


def xor_data(n, seed, noise=0.3):
    """Points around four centres; the label is 0 for (1, 1) and (-1, -1), 1 for the
    others (XOR): no linear classifier separates them."""
    rng = np.random.default_rng(seed)
    centers = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], dtype=float)
    k = rng.integers(4, size=n)
    pts = centers[k] + noise * rng.standard_normal((n, 2))
    X = [node_example(np.append(p, 1.0)) for p in pts]
    Y = [np.array([kk // 2]) for kk in k]
    return X, Y


def node_example(v):
    """A one-node graph example with node features ``v``."""
    return {"node_features": np.asarray(v, dtype=float)[None], "edges": np.zeros((0, 2), int),
            "edge_features": np.zeros((0, 0))}


def small_graph(rng, n_visible=3, hidden=True, d=2):
    """A chain of ``n_visible`` nodes and, with ``hidden``, one hidden node joined to all
    of them (a loopy graph: exact by its junction tree)."""
    edges = [[i, i + 1] for i in range(n_visible - 1)]
    n = n_visible + int(hidden)
    if hidden:
        edges += [[n_visible, i] for i in range(n_visible)]
    edges = np.array(edges, dtype=int)
    V = rng.standard_normal((n, d))
    if hidden:
        V[-1] = 0.0
    E = np.ones((len(edges), 1)) if not hidden else np.column_stack(
        [(edges[:, 0] != n_visible), (edges[:, 0] == n_visible)]).astype(float)
    x = {"node_features": V, "edges": edges, "edge_features": E}
    if hidden:
        x["n_hidden"] = 1
    return x


def all_outputs(model, x):
    """Every output of the (checked) example ``x`` of a LatentGraphLabeling, encoded."""
    S = model.n_states
    return [(np.array(s), model.encode(x, np.array(s)))
            for s in itertools.product(range(S), repeat=x.n_nodes)]


def brute_completion(model, x, scores, y):
    """The best score of an output of label ``y``."""
    return max(float(scores @ mu) for s, mu in all_outputs(model, x)
               if np.array_equal(model.label(x, s), y))


def brute_objective(model, X, Y, w, C):
    """The latent objective at ``w`` by enumeration of every output of every example."""
    total = 0.0
    for x, y in zip(X, Y):
        x = model.check_x(x)
        outs = all_outputs(model, x)
        s = np.asarray(model.features(x) @ w, dtype=float)
        aug = max(float(s @ mu) + sum(np.asarray(model.label(x, o)) != np.asarray(y))
                  for o, mu in outs)
        comp = max(float(s @ mu) for o, mu in outs if np.array_equal(model.label(x, o), y))
        total += aug - comp
    return 0.5 * float(w @ w) + C * total
