"""Tree-structured labelling data: validation, potentials, polytopes and max-sum.

An example ``x`` is a dict with

* ``node_features`` — array (n, d_v);
* ``edge_features`` — array (n - 1, d_e); row ``e`` belongs to the edge joining
  the ``e``-th non-root node (in index order) to its parent;
* ``parents`` — int array (n,), ``-1`` at the (single) root; a chain is
  ``[-1, 0, 1, ..., n - 2]``.

An output ``y`` is an int array (n,) of labels in ``0..k-1``.  With
``theta_v`` (k, d_v) and ``theta_e`` (k, k, d_e) the node potential of label
``a`` at node ``i`` is ``theta_v[a] . node_features[i]`` and the edge potential
of labels ``(a, b)`` (parent, child) on edge ``e`` is
``theta_e[a, b] . edge_features[e]``; the parameter vector is
``concatenate([theta_v.ravel(), theta_e.ravel()])``.

Part vectors (used by the LPs and QPs) list the node indicators
``mu[i, a]`` (n * k, node-major) and then the edge indicators ``mu[e, a, b]``
((n - 1) * k * k); the edge indicator of an output is the product of its two node
indicators.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from typing import Any, Dict, List, Tuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..utils.validation import check_finite_array, check_real
from ..exceptions import InvalidInputError, InvalidOutputError
from ..utils.numeric import logsumexp
from .maxsum import max_sum as _max_sum
from ._kernel_args import frozen
from ..polytope import Polytope


@dataclass(eq=False)
class TreeExample:
    """A validated tree example (see the module docstring)."""

    node_features: np.ndarray
    edge_features: np.ndarray
    parents: np.ndarray
    order: np.ndarray        # BFS order from the root, shape (n,)
    edge_child: np.ndarray   # child node of each edge, shape (n - 1,)
    edge_of: np.ndarray      # edge index of each node's parent edge (-1 at the root), (n,)

    @property
    def n_nodes(self):
        return len(self.parents)

    @property
    def root(self):
        return int(self.order[0])

    @property
    def edge_parent(self):
        return self.parents[self.edge_child]

    def key(self):
        """Hashable key of the tree shape (equal keys, equal polytopes)."""
        return ("tree", self.parents.tobytes())


def check_parents(parents: ArrayLike, name: str = "parents") -> Tuple[np.ndarray, np.ndarray]:
    """Validate a parent array; return ``(parents, bfs_order)``.

    Raises
    ------
    InvalidInputError
        Unless ``parents`` is a 1-D int array with exactly one ``-1`` (the
        root), every other entry a node index, and no cycle.

    Examples
    --------
    >>> from structlp.agm import check_parents
    >>> parents, order = check_parents([-1, 0, 0, 1])
    >>> order                       # breadth-first from the root
    array([0, 1, 2, 3])
    >>> try:
    ...     check_parents([1, 0, -1])
    ... except ValueError as e:
    ...     print(type(e).__name__)
    InvalidInputError
    """
    check_real(parents, name)
    raw = np.asarray(parents)
    if raw.ndim != 1 or raw.size == 0:
        raise InvalidInputError(f"{name} must be a non-empty 1-D array; got shape {raw.shape}.")
    if not (np.issubdtype(raw.dtype, np.integer)
            or (np.issubdtype(raw.dtype, np.floating) and np.all(np.isfinite(raw))
                and np.all(raw == np.round(raw)))):
        raise InvalidInputError(f"{name} must contain integers; got dtype {raw.dtype}.")
    par = raw.astype(np.int64)
    n = len(par)
    roots = np.flatnonzero(par == -1)
    if len(roots) != 1:
        raise InvalidInputError(
            f"{name} is not a tree: it must have exactly one root (entry -1); got {len(roots)}.")
    bad = np.flatnonzero((par < -1) | (par >= n))
    if len(bad):
        raise InvalidInputError(
            f"{name} is not a tree: node {bad[0]} has parent {par[bad[0]]}, not in -1..{n - 1}.")
    if np.any(par == np.arange(n)):
        j = int(np.flatnonzero(par == np.arange(n))[0])
        raise InvalidInputError(f"{name} is not a tree: node {j} is its own parent.")
    children: List[List[int]] = [[] for _ in range(n)]
    for j, p in enumerate(par):
        if p >= 0:
            children[p].append(j)
    order = []
    queue = deque([int(roots[0])])
    while queue:
        j = queue.popleft()
        order.append(j)
        queue.extend(children[j])
    if len(order) != n:
        unreached = sorted(set(range(n)) - set(order))
        raise InvalidInputError(
            f"{name} is not a tree: nodes {unreached[:5]} are on a cycle, not connected "
            "to the root.")
    return par, np.array(order, dtype=np.int64)


def check_tree_example(x: Any, name: str = "x") -> TreeExample:
    """Validate one example (a dict or a :class:`TreeExample`); return a TreeExample.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import chain, check_tree_example
    >>> ex = check_tree_example(chain(np.zeros((3, 2)), np.ones((2, 1))))
    >>> type(ex).__name__, ex.parents if hasattr(ex, "parents") else None
    ('TreeExample', array([-1,  0,  1]))
    """
    if isinstance(x, TreeExample):
        return x
    if not isinstance(x, dict):
        raise InvalidInputError(
            f"{name} must be a dict with keys 'node_features', 'edge_features' and "
            f"'parents'; got {type(x).__name__}.")
    missing = [k for k in ("node_features", "edge_features", "parents") if k not in x]
    if missing:
        raise InvalidInputError(f"{name} is missing the key(s) {missing}.")
    par, order, edge_child, edge_of = tree_shape(x["parents"], f"{name}['parents']")
    n = len(par)
    V = check_finite_array(x["node_features"], f"{name}['node_features']", ndim=2)
    if V.shape[0] != n:
        raise InvalidInputError(
            f"{name}['node_features'] must have one row per node ({n}); got shape {V.shape}.")
    Ef = check_finite_array(x["edge_features"], f"{name}['edge_features']")
    if Ef.ndim == 1 and Ef.size == 0:
        Ef = Ef.reshape(0, 0)
    if Ef.ndim != 2 or Ef.shape[0] != n - 1:
        raise InvalidInputError(
            f"{name}['edge_features'] must have shape (n_nodes - 1, d_e) = ({n - 1}, d_e); "
            f"got {Ef.shape}.")
    return TreeExample(V, Ef, par, order, edge_child, edge_of)


_TREE_SHAPES: dict = {}     # parent array's bytes -> its checked shape arrays (read-only)


def tree_shape(parents: ArrayLike, name: str = "parents") -> Tuple[np.ndarray, ...]:
    """``(parents, order, edge_child, edge_of)`` of a parent array (:func:`check_parents`,
    the same errors), checked once per distinct integer array (a data set of chains has
    one per length) and shared (read-only)."""
    key = None
    if isinstance(parents, np.ndarray) and parents.ndim == 1 and parents.dtype.kind in "iu":
        key = (parents.dtype.str, parents.tobytes())
        hit = _TREE_SHAPES.get(key)
        if hit is not None:
            return hit
    par, order = check_parents(parents, name)
    edge_child = np.flatnonzero(par >= 0)
    edge_of = np.full(len(par), -1, dtype=np.int64)
    edge_of[edge_child] = np.arange(len(par) - 1)
    shape: Tuple[np.ndarray, ...] = (par, order, edge_child, edge_of)
    if key is not None:
        shape = tuple(frozen(a) for a in shape)     # immutable: the kernels check it once
        if len(_TREE_SHAPES) > 4096:
            _TREE_SHAPES.clear()
        _TREE_SHAPES[key] = shape
    return shape


def check_labels(y, n_nodes, n_labels, name="y"):
    """Validate a labelling: int array (n_nodes,) with entries in 0..n_labels-1."""
    try:
        check_real(y, name)
    except InvalidInputError as exc:
        raise InvalidOutputError(str(exc)) from None
    raw = np.asarray(y)
    if raw.shape != (n_nodes,):
        raise InvalidOutputError(f"{name} must have shape ({n_nodes},); got {raw.shape}.")
    if raw.size and not (np.issubdtype(raw.dtype, np.integer) or np.all(raw == np.round(raw))):
        raise InvalidOutputError(f"{name} must contain integer labels; got {raw.dtype}.")
    lab = raw.astype(np.int64)
    bad = np.flatnonzero((lab < 0) | (lab >= n_labels))
    if len(bad):
        raise InvalidOutputError(
            f"{name} has label {lab[bad[0]]} at node {bad[0]}, out of range 0..{n_labels - 1}.")
    return lab


def chain(node_features: ArrayLike, edge_features: ArrayLike) -> Dict[str, Any]:
    """A chain example ``{node_features, edge_features, parents=[-1, 0, 1, ...]}``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import chain
    >>> x = chain(np.zeros((4, 2)), np.ones((3, 1)))     # 4 nodes, 3 edges
    >>> x["parents"]
    array([-1,  0,  1,  2])
    """
    n = len(node_features)  # type: ignore[arg-type]  # checked by check_tree_example
    return {"node_features": node_features, "edge_features": edge_features,
            "parents": np.arange(-1, n - 1)}


# ---------------------------------------------------------------- parameters
def n_params(d_v, d_e, k):
    return k * d_v + k * k * d_e


def split_theta(theta, d_v, d_e, k):
    """``theta`` (k d_v + k^2 d_e,) -> ``(theta_v (k, d_v), theta_e (k, k, d_e))``."""
    return theta[:k * d_v].reshape(k, d_v), theta[k * d_v:].reshape(k, k, d_e)


def potentials(ex, theta, k):
    """Node potentials b (n, k) and edge potentials B (n - 1, k, k) of ``ex``."""
    d_v, d_e = ex.node_features.shape[1], ex.edge_features.shape[1]
    tv, te = split_theta(theta, d_v, d_e, k)
    b = ex.node_features @ tv.T
    B = (ex.edge_features @ te.reshape(k * k, d_e).T).reshape(-1, k, k)
    return b, B


def part_features(ex, k):
    """Feature matrix of the parts (sparse, (n k + (n-1) k^2, k d_v + k^2 d_e)).

    Row ``i k + a`` (node ``i``, label ``a``) holds ``node_features[i]`` in the
    columns ``a d_v + f``; row ``n k + e k^2 + ab`` (edge ``e``, labels ``ab``)
    holds ``edge_features[e]`` in the columns ``k d_v + ab d_e + f`` (the
    label-major order of :func:`split_theta`).  Built from the nonzeros by index
    arithmetic.
    """
    def blocks(F, n_lab, row0, col0):
        i, f = np.nonzero(F)
        lab = np.arange(n_lab)
        d = F.shape[1]
        rows = (row0 + i[:, None] * n_lab + lab[None, :]).ravel()
        cols = (col0 + lab[None, :] * d + f[:, None]).ravel()
        return rows, cols, np.repeat(F[i, f], n_lab)

    V, Ef = ex.node_features, ex.edge_features
    n, d_v = V.shape
    d_e = Ef.shape[1]
    rv, cv, vv = blocks(V, k, 0, 0)
    re, ce, ve = blocks(Ef, k * k, n * k, k * d_v)
    shape = (n * k + Ef.shape[0] * k * k, k * d_v + k * k * d_e)
    return sp.csr_array((np.concatenate([vv, ve]), (np.concatenate([rv, re]),
                                                     np.concatenate([cv, ce]))), shape=shape)


def encode(ex, y, k):
    """Part vector (n k + (n-1) k^2,) of a labelling ``y``."""
    n = ex.n_nodes
    mu_v = np.zeros((n, k))
    mu_v[np.arange(n), y] = 1.0
    mu_e = np.zeros((n - 1, k, k))
    mu_e[np.arange(n - 1), y[ex.edge_parent], y[ex.edge_child]] = 1.0
    return np.concatenate([mu_v.ravel(), mu_e.ravel()])


def local_polytope_rows(ex, k):
    """Equality rows ``E mu = e`` of the local marginal polytope of ``ex``."""
    n = ex.n_nodes
    m = n - 1
    nv = n * k
    rows, cols, vals = [], [], []
    # normalization of the nodes
    rows.append(np.repeat(np.arange(n), k)); cols.append(np.arange(nv)); vals.append(np.ones(nv))
    r0 = n
    e_idx = np.arange(m)
    a = np.arange(k)
    # sum_b mu_e[a, b] - mu_parent[a] = 0     (rows r0 + e*k + a)
    ea = (e_idx[:, None, None] * k + a[None, :, None])  # (m, k, 1)
    cols_e = nv + (e_idx[:, None, None] * k * k + a[None, :, None] * k + a[None, None, :])
    rows.append(np.broadcast_to(r0 + ea, (m, k, k)).ravel()); cols.append(cols_e.ravel())
    vals.append(np.ones(m * k * k))
    rows.append((r0 + ea).ravel()); cols.append((ex.edge_parent[:, None] * k + a[None, :]).ravel())
    vals.append(-np.ones(m * k))
    r1 = r0 + m * k
    # sum_a mu_e[a, b] - mu_child[b] = 0      (rows r1 + e*k + b)
    eb = (e_idx[:, None, None] * k + a[None, None, :])  # (m, 1, k) for b
    rows.append(np.broadcast_to(r1 + eb, (m, k, k)).ravel()); cols.append(cols_e.ravel())
    vals.append(np.ones(m * k * k))
    rows.append((r1 + e_idx[:, None] * k + a[None, :]).ravel())
    cols.append((ex.edge_child[:, None] * k + a[None, :]).ravel())
    vals.append(-np.ones(m * k))
    n_rows = r1 + m * k
    E = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(n_rows, nv + m * k * k))
    e = np.zeros(n_rows)
    e[:n] = 1.0
    return E, e


def local_polytope(ex, k):
    """The local marginal polytope (exact on trees): node and edge marginals."""
    E, e = local_polytope_rows(ex, k)
    return Polytope(E=E, e=e, lb=0.0, ub=1.0)


# ---------------------------------------------------------------- max-sum
def max_sum(ex: Any, b: ArrayLike, B: ArrayLike) -> Tuple[np.ndarray, float]:
    """Highest-scoring labelling on a tree (max-sum / Viterbi).

    Solves ``max_y sum_i b[i, y_i] + sum_e B[e, y_parent(e), y_child(e)]``.

    Parameters
    ----------
    ex : TreeExample or a tree dict (see :func:`check_tree_example`)
    b : ndarray (n, k); B : ndarray (n - 1, k, k)
        Finite node and edge scores.

    Returns
    -------
    y : ndarray (n,) of ints; score : float

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.agm import chain, max_sum
    >>> rng = np.random.default_rng(0)
    >>> ex = chain(rng.normal(size=(4, 1)), rng.normal(size=(3, 1)))
    >>> # node and edge scores
    >>> b, B = rng.normal(size=(4, 3)), rng.normal(size=(3, 3, 3))
    >>> y, score = max_sum(ex, b, B)
    >>> y, round(score, 4)
    (array([0, 0, 0, 2]), 2.5949)
    >>> def total(z):
    ...     return sum(b[i, z[i]] for i in range(4)) + sum(B[i, z[i], z[i + 1]] for i in range(3))
    >>> # brute force over 81 labellings
    >>> max(itertools.product(range(3), repeat=4), key=total)
    (0, 0, 0, 2)
    """
    ex = check_tree_example(ex, "ex")
    nb, eb = check_scores(b, B, ex.n_nodes, ex.n_nodes - 1, "max_sum")
    return _max_sum(ex, nb, eb)   # structlp.graphical.maxsum: compiled with numba when installed


def check_scores(b, B, n_nodes, n_edges, owner):
    """Node scores b (n_nodes, k >= 1) and edge scores B (n_edges, k, k), finite, as floats."""
    b = check_finite_array(b, "b (node scores)", ndim=2)
    if b.shape[0] != n_nodes or b.shape[1] == 0:
        raise InvalidInputError(
            f"b (node scores) of {owner} must have shape (n_nodes, n_labels) with "
            f"n_nodes={n_nodes} and n_labels >= 1; got {b.shape}.")
    k = b.shape[1]
    shape_B = np.shape(B)
    if len(shape_B) == 3 and shape_B[1:] != (k, k):
        raise InvalidInputError(
            f"B (edge scores) must have shape ({n_edges}, {k}, {k}): b (node scores) and B "
            f"of {owner} must have the same number of labels, but b has {k} labels (shape "
            f"{b.shape}) and B's tables are {shape_B[1]} x {shape_B[2]} (shape {shape_B}).")
    return b, check_finite_array(B, "B (edge scores)", shape=(n_edges, k, k))


def score(ex, b, B, y):
    """Score ``sum_i b[i, y_i] + sum_e B[e, y_parent, y_child]`` of a labelling."""
    y = np.asarray(y)
    return float(b[np.arange(len(y)), y].sum()
                 + B[np.arange(len(y) - 1), y[ex.edge_parent], y[ex.edge_child]].sum())


def node_weights_of(ex, node_weights, normalize):
    """Per-node loss weights (n,) from None / "position" / callable / array."""
    n = ex.n_nodes
    if node_weights is None:
        w = np.ones(n)
    elif isinstance(node_weights, str):
        if node_weights != "position":
            from ..exceptions import InvalidParameterError
            raise InvalidParameterError(
                "The 'node_weights' parameter must be None, 'position', a callable x -> "
                f"(n,) weights, or an array; got {node_weights!r}.")
        w = np.arange(1, n + 1, dtype=float)
    else:
        w = node_weights(ex) if callable(node_weights) else node_weights
        w = check_finite_array(w, "node_weights", shape=(n,))
        if np.any(w < 0):
            from ..exceptions import InvalidParameterError
            raise InvalidParameterError(f"node_weights must be >= 0; got minimum {w.min():g}.")
    if normalize:
        s = w.sum()
        w = w / s if s > 0 else w
    return np.asarray(w, dtype=float)


# ---------------------------------------------------------------- forests (batched trees)
class Forest:
    """Many tree examples as one forest, for level-synchronous (vectorized) message passing.

    Nodes of example ``i`` get global indices ``node_offset[i] + j``, its edges
    ``edge_offset[i] + e``.  ``levels[d]`` lists the (global) non-root nodes at
    depth ``d + 1``; message passing visits the levels instead of the nodes, so a
    pass costs O(depth) numpy operations whatever the number of examples.

    Parameters
    ----------
    exs : list of TreeExample
    """

    def __init__(self, exs):
        sizes = np.array([ex.n_nodes for ex in exs], dtype=np.int64)
        self.n_examples = len(exs)
        self.node_offset = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.edge_offset = np.concatenate([[0], np.cumsum(sizes - 1)[:-1]]).astype(np.int64)
        self.n_nodes = int(sizes.sum())
        self.example_of_node = np.repeat(np.arange(len(exs)), sizes)
        par, edge_of, depth, edge_child = [], [], [], []
        for ex, no, eo in zip(exs, self.node_offset, self.edge_offset):
            p = ex.parents
            par.append(np.where(p >= 0, p + no, -1))
            edge_of.append(np.where(ex.edge_of >= 0, ex.edge_of + eo, -1))
            d = np.zeros(ex.n_nodes, dtype=np.int64)
            for j in ex.order[1:]:
                d[j] = d[p[j]] + 1
            depth.append(d)
            edge_child.append(ex.edge_child + no)
        self.parents = np.concatenate(par)
        self.edge_of = np.concatenate(edge_of)
        self.depth = np.concatenate(depth)
        self.edge_child = np.concatenate(edge_child) if exs else np.zeros(0, dtype=np.int64)
        self.edge_parent = self.parents[self.edge_child]
        self.roots = self.node_offset.copy() + np.array(
            [ex.root for ex in exs], dtype=np.int64)
        max_d = int(self.depth.max()) if self.n_nodes else 0
        order = np.argsort(self.depth, kind="stable")
        bounds = np.searchsorted(self.depth[order], np.arange(1, max_d + 2))
        self.levels = [order[bounds[d]:bounds[d + 1]] for d in range(max_d)]
        self.node_features = np.vstack([ex.node_features for ex in exs])
        self.edge_features = np.vstack([ex.edge_features for ex in exs])

    def potentials(self, theta, k):
        """Node potentials (N, k) and edge potentials (N - m, k, k) of every example."""
        return potentials(self, theta, k)  # the stacked features, as for one example

    def split_nodes(self, A):
        """Per-example pieces of a node array (N, ...)."""
        return np.split(A, self.node_offset[1:])


def forest_inside(F, b, B):
    """Upward sum-product pass on every tree of a :class:`Forest` (log space).

    Parameters
    ----------
    F : Forest; b : ndarray (N, k); B : ndarray (N - m, k, k)

    Returns
    -------
    inc : ndarray (N, k)
        ``log`` of the node's potential times the messages of its children: the inside
        score of the subtree below each node for each of its labels.
    msg : ndarray (N, k)
        ``log`` of the message from each node to its parent (indexed by parent labels).
    log_Z : ndarray (m,)
    """
    N, k = b.shape
    inc = b.copy()                     # node potential + messages from children
    msg = np.zeros((N, k))             # message from a node to its parent (parent labels)
    for J in reversed(F.levels):
        msg[J] = logsumexp(B[F.edge_of[J]] + inc[J][:, None, :], axis=2)
        np.add.at(inc, F.parents[J], msg[J])
    return inc, msg, logsumexp(inc[F.roots], axis=1)


def forest_marginals(F, b, B):
    """Sum-product on every tree of a :class:`Forest` at once (log space).

    Computes ``log Z = log sum_y exp(sum_i b[i, y_i] + sum_e B[e, y_pt, y_c])``
    per example and the node and edge marginals of the Gibbs distribution.

    Parameters
    ----------
    F : Forest; b : ndarray (N, k); B : ndarray (N - m, k, k)

    Returns
    -------
    log_Z : ndarray (m,); node : ndarray (N, k); edge : ndarray (N - m, k, k)
    """
    N, k = b.shape
    inc, msg, log_Z = forest_inside(F, b, B)
    lz = log_Z[F.example_of_node]
    down = np.zeros((N, k))
    edge = np.zeros(B.shape)
    for J in F.levels:
        p = F.parents[J]
        e = F.edge_of[J]
        outside = inc[p] + down[p] - msg[J]                       # (|J|, k) parent labels
        down[J] = logsumexp(B[e] + outside[:, :, None], axis=1)
        edge[e] = np.exp(outside[:, :, None] + B[e] + inc[J][:, None, :] - lz[J][:, None, None])
    node = np.exp(inc + down - lz[:, None])
    return log_Z, node, edge


def bare(ex):
    """``ex`` (a TreeExample) without its features: the tree shape only (for message passing)."""
    n = ex.n_nodes
    return TreeExample(np.zeros((n, 0)), np.zeros((max(n - 1, 0), 0)), ex.parents, ex.order,
                       ex.edge_child, ex.edge_of)


def tree_marginals(ex, b, B):
    """Sum-product on one tree (log space): ``log Z`` and node (n, k) and edge (n - 1, k, k)
    marginals of ``p(y) ∝ exp(sum_i b[i, y_i] + sum_e B[e, y_pt(e), y_e])``
    (:func:`forest_marginals` of a forest of one tree)."""
    from .sumproduct import tree_sum_product     # the compiled per-node loops, when numba is
    k = b.shape[1]
    if ex.n_nodes > 1:
        out = tree_sum_product(ex.order, ex.parents, ex.edge_of, b, B)
        if out is not None:
            return out
    log_Z, node, edge = forest_marginals(Forest([bare(ex)]), np.asarray(b, dtype=float),
                                         np.asarray(B, dtype=float).reshape(-1, k, k))
    return float(log_Z[0]), node, edge


def draw(logits, rng):
    """One draw per row of ``softmax(logits)`` (m, k) by the inverse CDF: int array (m,)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    c = np.cumsum(p, axis=1)
    u = rng.random(len(c)) * c[:, -1]
    return np.minimum((c < u[:, None]).sum(axis=1), logits.shape[1] - 1)


def tree_sample(ex, b, B, n, rng):
    """``n`` exact samples of ``p(y) ∝ exp(sum_i b[i, y_i] + sum_e B[e, y_pt(e), y_e])`` on a
    tree: forward filtering (the inside pass, :func:`forest_inside`), then backward sampling
    from the root down (each node given its parent's label).

    Returns
    -------
    Y : int array (n, n_nodes)
    """
    k = b.shape[1]
    b = np.asarray(b, dtype=float)
    B = np.asarray(B, dtype=float).reshape(-1, k, k)
    inc, _, _ = forest_inside(Forest([bare(ex)]), b, B)
    Y = np.empty((n, ex.n_nodes), dtype=np.int64)
    root = ex.root
    Y[:, root] = draw(np.broadcast_to(inc[root], (n, k)), rng)
    for j in ex.order[1:]:
        Y[:, j] = draw(B[ex.edge_of[j]][Y[:, ex.parents[j]]] + inc[j][None, :], rng)
    return Y
