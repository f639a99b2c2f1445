"""Maximum directed spanning trees (dependency parsing): the arborescence polytope."""

from __future__ import annotations

import functools
import numbers
from typing import Any, Hashable, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..utils.validation import check_finite_array, check_scalar
from ..exceptions import InvalidInputError, InvalidOutputError
from ..model import StructuredModel
from ..polytope import Polytope


def arc_index(n: int, root: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arcs ``(h, m)`` of the complete digraph on ``n`` nodes that may be in an
    arborescence rooted at ``root`` (``h != m``, ``m != root``), in row-major order.

    Returns
    -------
    heads, mods : int arrays, shape ((n-1)^2,)
    index : int array (n, n), the part of arc ``(h, m)`` or -1

    Raises
    ------
    InvalidParameterError
        ``n`` not an int >= 1 or ``root`` not an int in ``0..n-1``.

    Examples
    --------
    >>> from structlp.structures import arc_index
    >>> heads, mods, index = arc_index(3, root=0)
    >>> list(zip(heads.tolist(), mods.tolist()))
    [(0, 1), (0, 2), (1, 2), (2, 1)]
    >>> index
    array([[-1,  0,  1],
           [-1, -1,  2],
           [-1,  3, -1]])
    """
    n, root = _check_n_root(n, root, "arc_index", low=1)
    H, M = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = (H != M) & (M != root)
    index = np.full((n, n), -1, dtype=np.int64)
    index[keep] = np.arange(int(keep.sum()))
    return H[keep], M[keep], index


def _check_n_root(n, root, owner, low):
    n = check_scalar(n, "n", kind=numbers.Integral, low=low, owner=owner)
    root = check_scalar(root, "root", kind=numbers.Integral, low=0, high=n - 1, owner=owner)
    return n, root


def flow_polytope(n: int, root: int) -> Polytope:
    """The arborescence polytope of the complete digraph, as a multi-commodity flow.

    Parts: the arc indicators ``x[h, m]`` (``L = (n-1)^2`` arcs, :func:`arc_index`).
    Auxiliary variables: for every commodity ``k != root`` and arc ``a``, the flow
    ``f[k, a]`` of the unit that the root sends to ``k`` (``(n-1) L`` columns).
    Constraints

    .. math::

        \\sum_h x_{h m} = 1\\;(m \\ne r),\\qquad
        \\sum_{a \\in \\delta^{out}(i)} f_{k a} - \\sum_{a \\in \\delta^{in}(i)} f_{k a}
        = [i = r] - [i = k]\\;(\\forall k, i),\\qquad
        0 \\le f_{k a} \\le x_a \\le 1 ,

    ``(n-1)`` in-degree and ``(n-1) n`` conservation equalities, ``(n-1) L``
    capacity inequalities: ``(n-1)^3`` auxiliary columns and ``O(n^3)`` rows
    (Magnanti & Wolsey 1995; Martins, Smith & Xing 2009).  Its projection on
    ``x`` is the arborescence polytope: by max-flow/min-cut the flows exist iff
    every node set ``S`` without the root has ``x(delta^in(S)) >= 1``, and the
    directed-cut polytope with unit in-degrees is integral (Edmonds 1967).

    Returns
    -------
    Polytope with ``n_parts = (n-1)^2``, ``n_aux = (n-1)^3`` and a ``lift``.

    Raises
    ------
    InvalidParameterError
        ``n`` not an int >= 2 or ``root`` not an int in ``0..n-1``.

    Examples
    --------
    >>> from structlp.structures import flow_polytope
    >>> P = flow_polytope(4, root=0)
    >>> P.n_parts, P.n_aux
    (9, 27)
    """
    return _flow_polytope(*_check_n_root(n, root, "flow_polytope", low=2))


@functools.lru_cache(maxsize=32)
def _flow_polytope(n: int, root: int) -> Polytope:
    heads, mods, _ = arc_index(n, root)
    L = len(heads)
    ks = np.array([k for k in range(n) if k != root])
    K = len(ks)
    col = L + np.arange(K * L).reshape(K, L)               # column of f[k, a]
    # in-degree rows: sum_h x[h, m] = 1 for m != root
    mrow = np.searchsorted(ks, mods)
    indeg = sp.csr_array((np.ones(L), (mrow, np.arange(L))), shape=(K, L + K * L))
    # conservation rows (k, i): out - in = [i = root] - [i = k]
    r_out = (np.arange(K)[:, None] * n + heads[None, :]).ravel()
    r_in = (np.arange(K)[:, None] * n + mods[None, :]).ravel()
    cons = sp.csr_array((np.concatenate([np.ones(K * L), -np.ones(K * L)]),
                         (np.concatenate([r_out, r_in]), np.concatenate([col.ravel()] * 2))),
                        shape=(K * n, L + K * L))
    rhs = np.zeros((K, n))
    rhs[:, root] = 1.0
    rhs[np.arange(K), ks] = -1.0
    # capacities f[k, a] - x[a] <= 0
    rows = np.arange(K * L)
    cap = sp.csr_array((np.concatenate([np.ones(K * L), -np.ones(K * L)]),
                        (np.concatenate([rows, rows]),
                         np.concatenate([col.ravel(), np.tile(np.arange(L), K)]))),
                       shape=(K * L, L + K * L))
    E = sp.vstack([indeg, cons], format="csr")
    e = np.concatenate([np.ones(K), rhs.ravel()])
    return Polytope(A=cap, b=np.zeros(K * L), E=E, e=e, lb=0.0, ub=1.0, n_parts=L,
                    n_aux=K * L, lift=functools.partial(_lift, n, root))


def _lift(n, root, mu):
    """The point of :func:`flow_polytope` above an arborescence ``mu``, or None."""
    heads, mods, index = arc_index(n, root)
    on = np.flatnonzero(np.asarray(mu) > 0.5)
    head = np.full(n, -1)
    head[mods[on]] = heads[on]
    try:
        check_heads(head, n, root)
    except InvalidOutputError:
        return None
    ks = [k for k in range(n) if k != root]
    f = np.zeros((len(ks), len(heads)))
    for r, k in enumerate(ks):                      # the path root -> k, walked backwards
        m = k
        while m != root:
            f[r, index[head[m], m]] = 1.0
            m = head[m]
    return np.concatenate([np.asarray(mu, dtype=float), f.ravel()])


def check_heads(heads: Any, n: int, root: int, name: str = "y") -> np.ndarray:
    """Validate a head vector: ``heads[root] = -1``, every other node has a head in
    ``0..n-1`` other than itself, and following heads from any node reaches the root.

    Raises
    ------
    InvalidOutputError

    Examples
    --------
    >>> from structlp.structures import check_heads
    >>> check_heads([-1, 0, 1], n=3, root=0)
    array([-1,  0,  1])
    >>> try:
    ...     check_heads([-1, 2, 1], n=3, root=0)           # 1 and 2 head each other: a cycle
    ... except ValueError as e:
    ...     print(type(e).__name__)
    InvalidOutputError
    """
    try:
        h = np.asarray(heads)
    except (TypeError, ValueError) as exc:
        raise InvalidOutputError(
            f"{name} must be a head vector of shape ({n},), one head per word; could not "
            f"convert it ({exc}).") from None
    if h.ndim != 1 or h.shape[0] != n:
        raise InvalidOutputError(
            f"{name} must be a head vector of shape ({n},), one head per word; got shape "
            f"{h.shape}.")
    if not (np.issubdtype(h.dtype, np.integer) or (
            np.issubdtype(h.dtype, np.floating) and np.all(np.isfinite(h))
            and np.all(h == np.round(h)))):
        raise InvalidOutputError(f"{name} must contain integer heads; got dtype {h.dtype}.")
    h = h.astype(np.int64)
    if h[root] != -1:
        raise InvalidOutputError(f"{name}[{root}] (the root) must be -1; got {h[root]}.")
    others = np.delete(np.arange(n), root)
    bad = others[(h[others] < 0) | (h[others] >= n) | (h[others] == others)]
    if len(bad):
        raise InvalidOutputError(
            f"{name}[{bad[0]}] = {h[bad[0]]} is not a head: every word but the root needs a "
            f"head in 0..{n - 1} other than itself.")
    depth = np.full(n, -1)
    depth[root] = 0
    for m in others:                                 # walk up until a known depth or a cycle
        path: List[Any] = []
        v = m
        while depth[v] < 0:
            if v in path:
                cyc = path[path.index(v):]
                raise InvalidOutputError(
                    f"{name} is not a tree: the heads of words {cyc} form a cycle, which never "
                    f"reaches the root {root}.")
            path.append(v)
            v = h[v]
        for j, u in enumerate(reversed(path)):
            depth[u] = depth[v] + j + 1
    return h


def arc_weights(n: int, root: int, scores: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Arc weights ``W[h, m] = exp(s_hm - c_m)`` (n, n), 0 off the arcs, and the column
    shifts ``c_m = max_h s_hm`` (0 at the root) that keep them in ``(0, 1]``."""
    heads, mods, _ = arc_index(n, root)
    S = np.full((n, n), -np.inf)
    S[heads, mods] = np.asarray(scores, dtype=float)
    c = np.max(S, axis=0)
    c[root] = 0.0
    return np.exp(S - c[None, :]), c


def _reduced_laplacian(W, root):
    """The Laplacian ``diag(sum_h W[h, m]) - W`` without the root's row and column (..., n-1,
    n-1), for one weight matrix or a stack of them."""
    keep = np.delete(np.arange(W.shape[-1]), root)
    Lap = -W
    idx = np.arange(W.shape[-1])
    Lap[..., idx, idx] += W.sum(axis=-2)
    return Lap[..., keep[:, None], keep[None, :]]


def matrix_tree(n: int, root: int, scores: Any) -> Tuple[float, np.ndarray]:
    """``log Z`` and the arc marginals of ``p(y) ∝ exp(sum_m s[y_m, m])`` over the
    arborescences rooted at ``root``: the matrix-tree theorem (Koo et al. 2007).

    ``Z = det(L_hat)`` for the reduced Laplacian of the weights ``exp(s)``, and the arc
    marginals are its gradient, ``mu_hm = W_hm (L_hat^-1[m, m] - [h != root]
    L_hat^-1[m, h])``.  Each modifier's incoming weights are scaled by their largest (the
    scale factors out of ``Z``), so that no weight overflows.

    Parameters
    ----------
    n : int >= 2; root : int
    scores : array ((n-1)^2,), the arc scores in :func:`arc_index` order

    Returns
    -------
    log_Z : float; mu : ndarray ((n-1)^2,)
    """
    heads, mods, _ = arc_index(n, root)
    W, c = arc_weights(n, root, scores)
    Lh = _reduced_laplacian(W, root)
    sign, logdet = np.linalg.slogdet(Lh)
    inv = np.linalg.inv(Lh)
    pos = np.full(n, -1)
    pos[np.delete(np.arange(n), root)] = np.arange(n - 1)
    pm, ph = pos[mods], pos[heads]
    mu = W[heads, mods] * (inv[pm, pm] - np.where(heads != root, inv[pm, np.maximum(ph, 0)], 0.0))
    per_word = np.bincount(mods, weights=mu, minlength=n)[np.delete(np.arange(n), root)]
    if sign <= 0 or not np.isfinite(logdet) or not np.all(np.isfinite(mu)) \
            or np.max(np.abs(per_word - 1.0)) > 1e-6:
        from ..exceptions import SolverError
        spread = float(np.ptp(np.asarray(scores, dtype=float))) if len(heads) else 0.0
        raise SolverError(
            "The matrix-tree theorem lost its precision on these arc scores (their range is "
            f"{spread:.3g}: the reduced Laplacian of exp(scores) is singular to machine "
            "precision). Scale the scores down, or use the argmax or k-best instead.")
    return float(logdet + c.sum()), np.clip(mu, 0.0, 1.0)


def sample_arborescences(n: int, root: int, scores: Any, size: int,
                         rng: np.random.Generator) -> np.ndarray:
    """``size`` exact samples of ``p(y) ∝ exp(sum_m s[y_m, m])`` (head vectors) by
    sequential conditioning: each modifier's head is drawn from its marginal (the
    matrix-tree theorem, :func:`matrix_tree`) given the heads drawn before it, then its
    other incoming arcs are removed.  O(n^4) per sample, the samples batched.

    Returns
    -------
    Y : int array (size, n), ``Y[:, root] = -1``
    """
    W, _ = arc_weights(n, root, scores)
    Wb = np.repeat(W[None], size, axis=0)
    Y = np.full((size, n), -1, dtype=np.int64)
    others = np.delete(np.arange(n), root)
    rows = np.arange(size)
    for t, m in enumerate(others):
        Lh = _reduced_laplacian(Wb, root)
        e = np.zeros((size, n - 1))
        e[:, t] = 1.0
        z = np.linalg.solve(np.swapaxes(Lh, 1, 2), e[:, :, None])[:, :, 0]  # row t of inv
        zf = np.zeros((size, n))
        zf[:, others] = z
        p = Wb[:, :, m] * (z[:, t:t + 1] - zf)           # (size, n): P(head of m = h | ...)
        p = np.clip(p, 0.0, None)
        cdf = np.cumsum(p, axis=1)
        u = rng.random(size) * cdf[:, -1]
        h = np.minimum((cdf < u[:, None]).sum(axis=1), n - 1)
        Y[:, m] = h
        Wb[:, :, m] = 0.0
        Wb[rows, h, m] = 1.0
    return Y


def k_best_arborescences(n: int, root: int, scores: Any, k: int
                         ) -> Tuple[List[np.ndarray], np.ndarray]:
    """The ``k`` best arborescences rooted at ``root`` for arc scores ``scores``
    ((n-1)^2, :func:`arc_index` order): Lawler's partitioning over the heads of the
    non-root words, each subproblem one Chu-Liu-Edmonds
    (:func:`networkx.maximum_spanning_arborescence`) on the arcs it allows.

    Returns
    -------
    Y : list of min(k, n^(n-2)) head vectors (n,); values : ndarray, non-increasing
    """
    import networkx as nx
    from ..inference.kbest import lawler, oracle_branch
    heads, mods, index = arc_index(n, root)
    s = np.asarray(scores, dtype=float)
    words = np.delete(np.arange(n), root)

    def solve(y, j, F):                          # y[t]: the head of words[t]
        allowed = np.ones(len(heads), dtype=bool)
        for t in range(j):
            allowed[(mods == words[t]) & (heads != y[t])] = False
        for h in F:
            allowed[index[h, words[j]]] = False
        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        G.add_weighted_edges_from(zip(heads[allowed].tolist(), mods[allowed].tolist(),
                                      s[allowed].tolist()))
        try:
            T = nx.maximum_spanning_arborescence(G, attr="weight", preserve_attrs=False)
        except nx.NetworkXException:             # no arborescence left
            return None
        head = np.full(n, -1, dtype=np.int64)
        for h, m in T.edges:
            head[m] = h
        return head[words], float(s[index[head[words], words]].sum())

    found = lawler(solve(np.zeros(n - 1, dtype=np.int64), 0, frozenset()),
                   oracle_branch(solve, n - 1), k)
    Y = []
    for y, _ in found:
        head = np.full(n, -1, dtype=np.int64)
        head[words] = y
        Y.append(head)
    return Y, np.array([float(s[index[h[words], words]].sum()) for h in Y])


class Arborescence(StructuredModel):
    """Maximum directed spanning trees rooted at ``root``: dependency parsing.

    Inference is

    .. math::

        \\max_{y \\text{ arborescence rooted at } r}\\; \\sum_{m \\ne r} s_{y_m, m},
        \\qquad s_{h m} = w \\cdot x[h, m],

    solved exactly by Chu–Liu–Edmonds (:func:`networkx.maximum_spanning_arborescence`).
    An example ``x`` is an array (n, n, d) of arc features, ``x[h, m]`` for the arc
    from head ``h`` to modifier ``m`` (the diagonal and the arcs into the root are
    ignored); an output ``y`` is a head vector (n,) of ints with ``y[root] = -1``.
    Parts are the ``(n-1)^2`` arcs ``h != m``, ``m != root`` in row-major order
    (:func:`arc_index`); the loss is the number of words with a wrong head.

    The output polytope is exact: the multi-commodity flow formulation of
    :func:`flow_polytope`, ``(n-1)^2`` parts plus ``(n-1)^3`` auxiliary flows
    and ``O(n^3)`` rows per example, dualized by the joint QP like any polytope.

    Parameters
    ----------
    root : int, default 0
        The root word (index into each example's nodes).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures.arborescence import Arborescence
    >>> model = Arborescence(root=0)
    >>> x = np.random.default_rng(0).normal(size=(4, 4, 2))     # 4 words, 2 arc features
    >>> heads = model.inference(x, model.features(x) @ np.array([1.0, -1.0]))
    >>> int(heads[0]), model.n_parts(x)                         # the root has no head
    (-1, 9)
    """

    formulations = ("minmax",)

    def __init__(self, root: int = 0) -> None:
        self.root = root

    def _root(self, n):
        return check_scalar(self.root, "root", kind=numbers.Integral, low=0, high=n - 1,
                            owner="Arborescence")

    def check_x(self, x: Any) -> Any:
        x = check_finite_array(x, "x")
        if x.ndim != 3 or x.shape[0] != x.shape[1] or x.shape[0] < 2:
            raise InvalidInputError(
                f"x must be an array (n, n, d) of arc features x[head, modifier] with n >= 2; "
                f"got shape {x.shape}.")
        self._root(x.shape[0])
        return x

    def n_parts(self, x: Any) -> int:
        return (x.shape[0] - 1) ** 2

    def features(self, x: Any) -> Any:
        heads, mods, _ = arc_index(x.shape[0], int(self.root))
        return x[heads, mods]

    def polytope(self, x: Any) -> Polytope:
        return flow_polytope(x.shape[0], self._root(x.shape[0]))

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return ("arborescence", x.shape[0], int(self.root))

    def encode(self, x: Any, y: Any) -> np.ndarray:
        n = x.shape[0]
        root = self._root(n)
        h = check_heads(y, n, root)
        _, _, index = arc_index(n, root)
        mu = np.zeros((n - 1) ** 2)
        m = np.delete(np.arange(n), root)
        mu[index[h[m], m]] = 1.0
        return mu

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        n = x.shape[0]
        heads, mods, _ = arc_index(n, int(self.root))
        on = np.asarray(mu) > 0.5
        y = np.full(n, -1, dtype=np.int64)
        y[mods[on]] = heads[on]
        return y

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        import networkx as nx
        n = x.shape[0]
        root = int(self.root)
        heads, mods, _ = arc_index(n, root)
        G = nx.DiGraph()
        G.add_nodes_from(range(n))
        G.add_weighted_edges_from(zip(heads.tolist(), mods.tolist(),
                                      np.asarray(scores, dtype=float).tolist()))
        T = nx.maximum_spanning_arborescence(G, attr="weight", preserve_attrs=False)
        y = np.full(n, -1, dtype=np.int64)
        for h, m in T.edges:
            y[m] = h
        return y

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best arborescences (:func:`structlp.inference.k_best`): Lawler-Murty
        partitioning over the words' heads with Chu-Liu-Edmonds as the oracle (a barred
        head's arc removed, a fixed head's arc the only one into its word)."""
        return k_best_arborescences(x.shape[0], self._root(x.shape[0]), scores, k)

    def log_partition(self, x: Any, scores: np.ndarray) -> Tuple[float, np.ndarray]:
        """``log Z`` and the arc marginals of the Gibbs distribution over the
        arborescences: the matrix-tree theorem (:func:`structlp.inference.log_partition`)."""
        return matrix_tree(x.shape[0], self._root(x.shape[0]), scores)

    def sample(self, x: Any, scores: np.ndarray, n: int, rng: Any) -> List[np.ndarray]:
        """``n`` exact samples (head vectors) of the Gibbs distribution over the
        arborescences, by sequential conditioning (:func:`structlp.inference.sample`)."""
        return list(sample_arborescences(x.shape[0], self._root(x.shape[0]), scores, n, rng))
