"""Graph inputs of the graph structures: edge lists, adjacency outputs, the common base
:class:`GraphStructure` of spanning trees and matchings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Tuple, Union

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.sparse.csgraph import connected_components

from ..utils.validation import check_binary, check_finite_array, check_real
from ..exceptions import InvalidInputError, InvalidOutputError
from ..model import StructuredModel
from .base import Certificate, CertificateRows

if TYPE_CHECKING:  # pragma: no cover
    from ..polytope import Polytope


#: Relative tolerance of the symmetry check of edge features.
SYMMETRY_RTOL = 1e-9


# --------------------------------------------------------------------------- graphs
@dataclass(eq=False)
class Graph:
    """An undirected graph with edge features, as the graph structures use it.

    Attributes
    ----------
    features : ndarray, shape (n, n, d)
        ``features[j, k]`` are the features of edge ``jk`` (symmetric in j, k).
    mask : ndarray of bool, shape (n, n)
        Symmetric adjacency of the graph (no self-loops).
    u, v : ndarray of int, shape (L,)
        End points of the edges, ``u < v``, in row-major order; edge ``e`` is part ``e``.
    index : ndarray of int, shape (n, n)
        Part index of edge ``jk`` (symmetric), -1 where there is no edge.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import SpanningTree
    >>> # a checked example is a Graph
    >>> g = SpanningTree().check_x(np.ones((4, 4, 1)))
    >>> type(g).__name__, g.n_nodes, g.n_edges
    ('Graph', 4, 6)
    >>> # edge e = (u[e], v[e]), row-major
    >>> g.u, g.v
    (array([0, 0, 0, 1, 1, 2]), array([1, 2, 3, 2, 3, 3]))
    """

    features: np.ndarray
    mask: np.ndarray
    u: np.ndarray
    v: np.ndarray
    index: np.ndarray

    @property
    def n_nodes(self) -> int:
        return self.mask.shape[0]

    @property
    def n_edges(self) -> int:
        return len(self.u)

    def edge_features(self) -> np.ndarray:
        """Features of the edges, shape (L, d)."""
        return self.features[self.u, self.v]

    def to_adjacency(self, mu: ArrayLike) -> np.ndarray:
        """0/1 symmetric (n, n) int adjacency of the edge indicator ``mu`` (L,)."""
        n = self.n_nodes
        y = np.zeros((n, n), dtype=int)
        on = np.rint(np.asarray(mu, dtype=float)).astype(bool)
        y[self.u[on], self.v[on]] = 1
        y[self.v[on], self.u[on]] = 1
        return y

    def score_matrix(self, scores: ArrayLike) -> np.ndarray:
        """Symmetric (n, n) matrix of edge scores (0 off the graph)."""
        n = self.n_nodes
        S = np.zeros((n, n))
        S[self.u, self.v] = scores
        S[self.v, self.u] = scores
        return S

    def __repr__(self):
        return (f"Graph(n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                f"n_features={self.features.shape[2]})")


def check_graph(x: Any, owner: str, min_nodes: int = 2) -> Graph:
    """Validate an example of a graph structure and return it as a :class:`Graph`.

    Parameters
    ----------
    x : ndarray of shape (n, n, d), or a pair ``(features, mask)`` with a boolean
        (n, n) symmetric ``mask`` restricting the complete graph, or a Graph.
    owner : str
        Name of the structure, for error messages.

    Raises
    ------
    InvalidInputError
        Wrong shape, NaN/inf on an edge, asymmetric features or mask, a self-loop.
    """
    if isinstance(x, Graph):
        return x
    mask = None
    if isinstance(x, (tuple, list)) and len(x) == 2 and np.ndim(x[1]) == 2:
        x, mask = x
    check_real(x, f"x (edge features) of {owner}")
    try:
        feats = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"x (edge features) of {owner} must be a numeric array of shape (n, n, d) or a "
            f"pair (features, mask); could not convert it ({exc}).") from None
    if feats.ndim != 3 or feats.shape[0] != feats.shape[1]:
        raise InvalidInputError(
            f"x (edge features) of {owner} must have shape (n, n, d); got {feats.shape}.")
    n, _, d = feats.shape
    if n < min_nodes or d < 1:
        raise InvalidInputError(
            f"x (edge features) of {owner} must have at least {min_nodes} nodes and one "
            f"feature; got shape {feats.shape}.")
    if mask is None:
        mask = ~np.eye(n, dtype=bool)
    else:
        m = np.asarray(mask)
        if m.shape != (n, n):
            raise InvalidInputError(
                f"The mask of x of {owner} must have shape ({n}, {n}); got {m.shape}.")
        if m.dtype != bool:
            m = check_binary(m, f"The mask of x of {owner}").astype(bool)
        if not np.array_equal(m, m.T):
            j, k = np.argwhere(m != m.T)[0]
            raise InvalidInputError(
                f"The mask of x of {owner} must be symmetric; mask[{j}, {k}] != mask[{k}, {j}].")
        if np.any(np.diag(m)):
            j = int(np.flatnonzero(np.diag(m))[0])
            raise InvalidInputError(
                f"The mask of x of {owner} must have no self-loops; mask[{j}, {j}] is set.")
        mask = m.copy()
    u, v = np.nonzero(np.triu(mask, 1))
    fu, fv = feats[u, v], feats[v, u]
    if not (np.all(np.isfinite(fu)) and np.all(np.isfinite(fv))):
        raise InvalidInputError(f"x (edge features) of {owner} contains NaN or infinite "
                                "values on an edge of the graph.")
    if not np.allclose(fu, fv, rtol=SYMMETRY_RTOL, atol=1e-12):
        bad = int(np.flatnonzero(~np.all(np.isclose(fu, fv, rtol=SYMMETRY_RTOL, atol=1e-12),
                                         axis=1))[0])
        raise InvalidInputError(
            f"x (edge features) of {owner} must be symmetric, x[j, k] == x[k, j], for an "
            f"undirected graph; x[{u[bad]}, {v[bad]}] != x[{v[bad]}, {u[bad]}].")
    index = np.full((n, n), -1, dtype=np.int64)
    index[u, v] = np.arange(len(u))
    index[v, u] = np.arange(len(u))
    return Graph(feats, mask, u.astype(np.int64), v.astype(np.int64), index)


def n_components(n: int, u: np.ndarray, v: np.ndarray) -> int:
    """Number of connected components of the graph with edges (u, v) on n nodes."""
    A = sp.csr_array((np.ones(len(u)), (u, v)), shape=(n, n))
    return int(connected_components(A, directed=False)[0])


def check_adjacency(g: Graph, y: Any, owner: str) -> np.ndarray:
    """Check that ``y`` is a 0/1 symmetric adjacency of a subgraph of ``g``; return mu (L,).

    Raises
    ------
    InvalidOutputError
    """
    n = g.n_nodes
    try:
        Y = check_finite_array(y, "y")
    except InvalidInputError as exc:
        raise InvalidOutputError(str(exc)) from None
    if Y.shape != (n, n):
        raise InvalidOutputError(
            f"y of {owner} must be a 0/1 adjacency matrix of shape ({n}, {n}); got {Y.shape}.")
    if not np.all((Y == 0) | (Y == 1)):
        raise InvalidOutputError(f"y of {owner} must contain only 0 and 1.")
    if not np.array_equal(Y, Y.T):
        j, k = np.argwhere(Y != Y.T)[0]
        raise InvalidOutputError(
            f"y of {owner} must be symmetric (an undirected adjacency); y[{j}, {k}] != "
            f"y[{k}, {j}].")
    if np.any(np.diag(Y)):
        j = int(np.flatnonzero(np.diag(Y))[0])
        raise InvalidOutputError(f"y of {owner} has a self-loop at node {j}.")
    off = (Y == 1) & ~g.mask
    if np.any(off):
        j, k = np.argwhere(off)[0]
        raise InvalidOutputError(
            f"y of {owner} uses edge ({j}, {k}), which is not in the graph (mask).")
    return Y[g.u, g.v].astype(float)


class GraphStructure(StructuredModel):
    """Base of the graph structures: parts are the edges of an undirected graph.

    An example ``x`` is an array of shape (n, n, d) of symmetric edge features
    (the complete graph), or a pair ``(features, mask)`` with a symmetric
    boolean (n, n) ``mask`` selecting the edges.  An output ``y`` is the 0/1
    symmetric (n, n) adjacency of the chosen edge set.  Parts are the edges
    ``j < k`` of the graph in row-major order; the loss is the Hamming loss of
    #2, the number of true edges missing from ``y``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import GraphStructure
    >>> from structlp.structures import PerfectMatching, SpanningTree
    >>> issubclass(SpanningTree, GraphStructure), issubclass(PerfectMatching, GraphStructure)
    (True, True)
    >>> model = SpanningTree()
    >>> # the complete graph on 4 nodes
    >>> x = model.check_x(np.ones((4, 4, 1)))
    >>> model.n_parts(x)                               # its 6 edges
    6
    """

    formulations = ("certificate",)
    _min_nodes = 2

    def check_x(self, x: Any) -> Any:
        return check_graph(x, type(self).__name__, self._min_nodes)

    def n_parts(self, x: Any) -> int:
        return self.check_x(x).n_edges

    def features(self, x: Any) -> np.ndarray:
        return self.check_x(x).edge_features()

    def encode(self, x: Any, y: Any) -> np.ndarray:
        g = self.check_x(x)
        mu = check_adjacency(g, y, type(self).__name__)
        self._check_structure(g, mu)
        return mu

    def decode(self, x: Any, mu: np.ndarray) -> np.ndarray:
        return self.check_x(x).to_adjacency(mu)

    def _check_structure(self, g, mu):  # pragma: no cover - overridden
        raise NotImplementedError

    def polytope(self, x: Any) -> Polytope:
        from ..exceptions import DeclarationError
        raise DeclarationError(
            f"{type(self).__name__} has no compact output polytope; train it with "
            "formulation='certificate' (MaxMarginLearner) or with CuttingPlaneLearner.")

    def formulation(self, name: str) -> Certificate:
        if name == "certificate":
            return Certificate(self)
        raise KeyError(name)

    def certificate_rows(self, x: Any, mu_true: np.ndarray
                         ) -> Union[CertificateRows, Tuple[Any, Any]]:  # pragma: no cover
        raise NotImplementedError


def degrees(g: Graph, mu: ArrayLike) -> np.ndarray:
    """Degree of every node in the edge set ``mu`` of graph ``g``, shape (n,)."""
    on = np.asarray(mu) > 0.5
    return np.bincount(np.concatenate([g.u[on], g.v[on]]), minlength=g.n_nodes)
