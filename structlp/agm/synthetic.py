"""Synthetic labellings with planted loopy dependencies, where a chain model is misspecified."""

from __future__ import annotations

import numbers

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..utils.validation import check_choice, check_scalar
from ..graphical.junction import check_graph_example, graph, jt_max_sum

#: Structures of :func:`make_loopy_data`.
STRUCTURES = ("cycle", "skip_chain", "grid")


def loopy_edges(structure, n_nodes):
    """Edges, edge types and the spanning chain of a planted structure.

    Returns
    -------
    edges : int array (E, 2); types : int array (E,);
    chain : int array (n - 1,), the rows of ``edges`` forming the spanning chain
    (a path through all nodes: the cycle without its closing edge, the skip chain
    without its skip edges, the 2 x (n/2) grid's snake).
    """
    n = n_nodes
    t = np.arange(n)
    if structure == "cycle":
        edges = np.column_stack([t, (t + 1) % n])
        return edges, np.zeros(n, dtype=np.int64), np.arange(n - 1)
    if structure == "skip_chain":
        edges = np.vstack([np.column_stack([t[:-1], t[1:]]), np.column_stack([t[:-2], t[2:]])])
        return edges, np.repeat([0, 1], [n - 1, n - 2]), np.arange(n - 1)
    c = n // 2                                    # grid 2 x c: node (r, j) = r * c + j
    row = [(r * c + j, r * c + j + 1) for r in range(2) for j in range(c - 1)]
    rung = [(j, c + j) for j in range(c)]
    edges = np.array(row + rung)
    types = np.repeat([0, 1], [len(row), len(rung)])
    # snake: row 0 left to right, the last rung, row 1 right to left
    chain = np.concatenate([np.arange(c - 1), [len(row) + c - 1], np.arange(c - 1, 2 * c - 2)])
    return edges, types, chain


def _orient_chain(edges, chain, n):
    """The chain's edges ordered and directed along the path from its first end."""
    nb = {v: [] for v in range(n)}
    for r in chain:
        u, v = edges[r]
        nb[u].append((v, r)); nb[v].append((u, r))
    start = next(v for v in range(n) if len(nb[v]) == 1)
    order, rows, prev, v = [], [], -1, start
    while True:
        nxt = [(w, r) for w, r in nb[v] if w != prev]
        if not nxt:
            break
        w, r = nxt[0]
        order.append((v, w)); rows.append(r)
        prev, v = v, w
    return np.array(order, dtype=np.int64), np.array(rows, dtype=np.int64)


def make_loopy_data(structure: str = "skip_chain", n_examples: int = 50, n_nodes: int = 8,
                    n_labels: int = 3, n_features: int = 4, coupling: float = 1.5,
                    noise: float = 0.5, random_state: Optional[int] = None
                    ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], List[np.ndarray]]:
    """Labellings drawn by perturb-and-MAP from a planted model on a loopy graph.

    Each example has node features ``x_i ~ N(0, I)`` (plus a constant 1) and the
    label vector

    .. math::

        y = \\arg\\max_y \\sum_i (\\theta_{y_i}\\cdot x_i + \\sigma g_i(y_i))
        + c \\sum_{(u,v)\\in E_{\\text{planted}}} [y_u = y_v]

    (``g`` Gumbel noise, ``c`` the coupling), solved exactly by max-sum on the
    junction tree.  The planted Potts edges are: ``"cycle"`` — every edge of the
    n-cycle; ``"skip_chain"`` — the skip edges ``(t, t + 2)`` only (the chain edges
    carry no planted dependence); ``"grid"`` — every edge of the 2 x (n/2) grid.
    A chain model (the spanning chain: the cycle without its closing edge, the
    skip chain without its skip edges, the grid's snake) cannot represent the
    missing edges, so it is misspecified.

    Parameters
    ----------
    structure : {"cycle", "skip_chain", "grid"}
    n_examples, n_nodes : int (n_nodes even for "grid", >= 3)
    n_labels, n_features : int
    coupling : float >= 0; noise : float >= 0
    random_state : int or None

    Returns
    -------
    X : list of graph example dicts (all edges, one-hot edge-type features)
    X_chain : list of graph example dicts (the spanning chain's edges, directed
        along it: a tree, so the tree fast path is used)
    Y : list of int arrays (n_nodes,)

    Examples
    --------
    >>> from structlp.agm import make_loopy_data
    >>> X, X_chain, Y = make_loopy_data("skip_chain", n_examples=3, n_nodes=6, random_state=0)
    >>> len(X), X[0]["edges"].shape, X_chain[0]["edges"].shape, Y[0]
    (3, (9, 2), (5, 2), array([2, 2, 2, 2, 2, 2]))
    """
    check_choice(structure, "structure", STRUCTURES, owner="make_loopy_data")
    n = check_scalar(n_nodes, "n_nodes", kind=numbers.Integral, low=3, owner="make_loopy_data")
    if structure == "grid" and n % 2:
        from ..exceptions import InvalidParameterError
        raise InvalidParameterError(
            f"make_loopy_data(structure='grid') needs an even n_nodes (a 2 x n/2 grid); got {n}.")
    m = check_scalar(n_examples, "n_examples", kind=numbers.Integral, low=1,
                     owner="make_loopy_data")
    k = check_scalar(n_labels, "n_labels", kind=numbers.Integral, low=2, owner="make_loopy_data")
    d = check_scalar(n_features, "n_features", kind=numbers.Integral, low=1,
                     owner="make_loopy_data")
    c = check_scalar(coupling, "coupling", low=0, owner="make_loopy_data")
    sigma = check_scalar(noise, "noise", low=0, owner="make_loopy_data")
    rng = np.random.default_rng(random_state)
    edges, types, chain = loopy_edges(structure, n)
    planted = types == 1 if structure == "skip_chain" else np.ones(len(edges), dtype=bool)
    n_types = int(types.max()) + 1
    Ef = np.eye(n_types)[types]
    chain_edges, chain_rows = _orient_chain(edges, chain, n)
    theta = rng.normal(size=(k, d))
    B = np.where(planted[:, None, None], c * np.eye(k)[None], 0.0)
    X, X_chain, Y = [], [], []
    for _ in range(m):
        F = rng.normal(size=(n, d))
        b = F @ theta.T + sigma * rng.gumbel(size=(n, k))
        x = graph(np.hstack([F, np.ones((n, 1))]), edges, Ef)
        y, _ = jt_max_sum(check_graph_example(x, k), b, B)
        X.append(x)
        X_chain.append(graph(x["node_features"], chain_edges, Ef[chain_rows]))
        Y.append(y)
    return X, X_chain, Y
