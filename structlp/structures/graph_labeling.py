"""Labellings of general graphs (pystruct's GraphCRF / EdgeFeatureGraphCRF / GridCRF):
the local marginal polytope (LP relaxation) or, when narrow, the junction-tree polytope."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from ..utils.validation import check_choice, check_finite_array, check_scalar
from ..graphical.losses import check_loss
from ..graphical.junction import (check_graph_example, clique_polytope, encode_cliques,
                            jt_marginals_cliques, jt_max_sum_cliques)
from ..graphical.jt_sampling import jt_sample
from ..graphical.kbest import jt_k_best
from ..graphical.trees import check_labels, part_features
from ..exceptions import InvalidInputError, InvalidParameterError
from ..model import StructuredModel
from ..part_features import PartFeatures
from ..polytope import Polytope
from ._graph import (Decomposition, check_edge_list, encode_labels, grid_edges, grid_example,
                     is_forest, relaxed_map)
from .tree_labeling import TreeFeatures

#: ``inference="auto"`` tries a junction tree only on graphs with at most this many nodes
#: (networkx's tree-decomposition heuristics are superlinear).
AUTO_JUNCTION_MAX_NODES = 200

_JUNCTIONS: dict = {}     # (graph key, k, max_treewidth) -> junction-tree example or refusal


@dataclass(eq=False)
class GraphLabelingExample:
    """A validated graph example: features, edges, and (lazily) its forest decomposition
    and junction tree."""

    node_features: Any
    edge_features: np.ndarray
    edges: np.ndarray
    forest: bool
    _dec: Any = field(default=None, repr=False)
    _jt: Dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def n_nodes(self) -> int:
        return self.node_features.shape[0]

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def edge_parent(self) -> np.ndarray:
        return self.edges[:, 0]

    @property
    def edge_child(self) -> np.ndarray:
        return self.edges[:, 1]

    def key(self) -> Tuple[Any, ...]:
        return ("graph_labeling", self.n_nodes, self.edges.tobytes())

    def decomposition(self) -> Decomposition:
        if self._dec is None:
            self._dec = Decomposition.of(self.n_nodes, self.edges)
        return self._dec

    def junction(self, k: int, max_treewidth: int) -> Any:
        """The junction-tree example (agm.junction.GraphExample) or None when too wide."""
        if max_treewidth not in self._jt:
            # one junction tree (or refusal) per distinct graph: a data set of images
            # shares one grid, whose tree decomposition is the costly part
            key = self.key() + (k, max_treewidth)
            if key not in _JUNCTIONS:
                if len(_JUNCTIONS) > 256:
                    _JUNCTIONS.clear()
                try:
                    _JUNCTIONS[key] = check_graph_example(
                        {"node_features": np.zeros((self.n_nodes, 0)), "edges": self.edges,
                         "edge_features": np.zeros((self.n_edges, 0))}, k, max_treewidth,
                        connected=False)
                except InvalidInputError as exc:
                    _JUNCTIONS[key] = exc
            self._jt[max_treewidth] = _JUNCTIONS[key]
        jt = self._jt[max_treewidth]
        return None if isinstance(jt, InvalidInputError) else jt


class GraphLabeling(StructuredModel):
    """Labellings ``y`` (n,) in ``0..k-1`` of a general graph's nodes, by node and edge parts.

    The score of ``y`` is ``sum_i theta_v[y_i] . v_i + sum_e theta_e[y_u, y_v] . f_e``
    (the parameters of :class:`~structlp.structures.TreeLabeling`; with constant edge
    features, pystruct's ``GraphCRF``; with edge features, its ``EdgeFeatureGraphCRF``;
    on :func:`grid_example` images, its ``GridCRF``).  Parts are the node indicators
    ``mu_i(a)`` (n k) and edge indicators ``mu_e(a, c)`` (E k^2, ``a`` the label of
    ``edges[e, 0]``).  The output polytope depends on ``mode``:

    * ``"relaxed"``: the local marginal polytope
      ``{mu >= 0 : sum_a mu_i(a) = 1, sum_c mu_e(a, c) = mu_u(a), sum_a mu_e(a, c) = mu_v(c)}``,
      exact on forests, an outer relaxation on loopy graphs.  The joint QP is then
      Taskar's M3N with the LP relaxation, and the first-order learners use an exact LP
      oracle over it (for two labels roof duality, one maximum flow; otherwise dual
      decomposition into forests with a certificate; HiGHS when neither certifies: see
      :mod:`structlp.structures._graph`), whose maximizer may be
      fractional: training optimizes the *relaxed* max-margin problem (Finley & Joachims
      2008), with certified duality gaps for that problem.  Prediction returns the
      labels of the oracle's optimum, rounded (argmax of the node marginals) when it is
      fractional; :attr:`inference_counts_` counts how often.
    * ``"exact"``: the marginal polytope as an extended formulation through a junction
      tree (its clique tables are auxiliary variables; the parts stay pairwise), with
      exact max-sum on the junction tree; refused when wider than ``max_treewidth``.
    * ``"auto"``: exact on forests (the local polytope is then exact) and on graphs of at
      most :data:`AUTO_JUNCTION_MAX_NODES` nodes whose junction tree has width at most
      ``max_treewidth``; relaxed otherwise.  A graph need not be connected: its junction
      tree joins one per connected component (by empty separators), so each component
      is solved exactly and the width is the widest component's.

    An example is a dict ``{"node_features": (n, d_v), "edges": (E, 2), "edge_features":
    (E, d_e)}`` (the format of :class:`JunctionTreeLabeling`; :func:`grid_example` builds
    it from an image).  The loss is additive over nodes, ``sum_i L[y_i, y_true_i]``
    (``"zero_one"``: the number of wrong labels).

    Parameters
    ----------
    n_labels : int >= 2
    mode : {"auto", "relaxed", "exact"}, default "auto"
        (Not called ``inference``: that is the name of the model's decoding hook.)
    loss : {"zero_one", "absolute", "squared"} or array (k, k), non-negative
    max_treewidth : int, default 4

    Attributes
    ----------
    inference_counts_ : dict
        How the inferences of this model object were solved: ``"tree"``, ``"junction
        tree"``, ``"max flow"`` / ``"max flow fractional"`` (two labels: roof duality's
        certified LP optimum, integral or half-integral), ``"dual decomposition"``
        (certified integral LP optimum), ``"lp"`` (integral LP vertex) and ``"lp
        fractional"``; the fractional ones are rounded at prediction.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures.graph_labeling import GraphLabeling, grid_example
    >>> x = grid_example(np.random.default_rng(0).normal(size=(3, 4, 2)))
    >>> x["edges"].shape, GraphLabeling(2).n_parts(GraphLabeling(2).check_x(x))
    ((17, 2), 92)
    """

    formulations = ("minmax",)

    def __init__(self, n_labels: int, mode: str = "auto",
                 loss: Union[str, ArrayLike] = "zero_one", max_treewidth: int = 4) -> None:
        self.n_labels = n_labels
        self.mode = mode
        self.loss = loss  # type: ignore[method-assign, assignment]  # shadows the hook
        self.max_treewidth = max_treewidth

    @property
    def inference_counts_(self) -> Dict[str, int]:
        return dict(self.__dict__.get("_counts", {}))

    def _count(self, how):
        counts = self.__dict__.setdefault("_counts", {})
        counts[how] = counts.get(how, 0) + 1

    def _k(self):
        return check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=2,
                            owner="GraphLabeling")

    def check_x(self, x: Any) -> Any:
        k = self._k()
        check_choice(self.mode, "mode", ("auto", "relaxed", "exact"),
                     owner="GraphLabeling")
        check_scalar(self.max_treewidth, "max_treewidth", kind=numbers.Integral, low=1,
                     owner="GraphLabeling")
        check_loss(self.loss, k, owner="GraphLabeling")
        if isinstance(x, GraphLabelingExample):
            return x
        if not isinstance(x, dict):
            raise InvalidInputError(
                "x must be a dict with keys 'node_features', 'edges' and 'edge_features'; "
                f"got {type(x).__name__}.")
        missing = [key for key in ("node_features", "edges", "edge_features") if key not in x]
        if missing:
            raise InvalidInputError(f"x is missing the key(s) {missing}.")
        V = check_finite_array(x["node_features"], "x['node_features']", ndim=2,
                               allow_sparse=True)
        n = V.shape[0]
        if n == 0:
            raise InvalidInputError("x['node_features'] must have at least one row (node).")
        E = check_edge_list(x["edges"], n, "x['edges']")
        Ef = check_finite_array(x["edge_features"], "x['edge_features']")
        if Ef.ndim == 1 and Ef.size == 0:
            Ef = Ef.reshape(0, 0)
        if Ef.ndim != 2 or Ef.shape[0] != len(E):
            raise InvalidInputError(
                f"x['edge_features'] must have shape (n_edges, d_e) = ({len(E)}, d_e), one row "
                f"per row of x['edges']; got {Ef.shape}.")
        return GraphLabelingExample(V, Ef, E, is_forest(n, E))

    def _mode(self, x):
        """'local' (forest or relaxed), or the junction-tree example (exact)."""
        k = self._k()
        mode = self.mode
        if x.forest or mode == "relaxed":
            return "local"
        if mode == "auto" and x.n_nodes > AUTO_JUNCTION_MAX_NODES:
            return "local"
        jt = x.junction(k, int(self.max_treewidth))
        if jt is None:
            if mode == "exact":
                x._jt.pop(int(self.max_treewidth))
                check_graph_example({"node_features": np.zeros((x.n_nodes, 0)),
                                     "edges": x.edges,
                                     "edge_features": np.zeros((x.n_edges, 0))},
                                    k, int(self.max_treewidth),
                                    connected=False)              # raises, with the width
            return "local"
        return jt

    def n_parts(self, x: Any) -> int:
        k = self._k()
        return x.n_nodes * k + x.n_edges * k * k

    def features(self, x: Any) -> Any:
        V = x.node_features.toarray() if sp.issparse(x.node_features) else x.node_features
        return part_features(_Dense(V, x.edge_features, x.edges), self._k())

    def feature_operator(self, x: Any) -> PartFeatures:
        return TreeFeatures(x, self._k())

    def polytope(self, x: Any) -> Polytope:
        k = self._k()
        mode = self._mode(x)
        if isinstance(mode, str):
            return x.decomposition().polytope(k)
        jt = mode
        T = jt.tables(k)
        C = clique_polytope(jt, k)
        Lp, Lc = T.P.shape[0], T.n_parts
        link = sp.hstack([sp.eye_array(Lp, format="csr"), -T.P], format="csr")
        rows = sp.hstack([sp.csr_array((C.E.shape[0], Lp)), C.E], format="csr")
        E = sp.vstack([link, rows], format="csr")
        e = np.concatenate([np.zeros(Lp), C.e])

        def lift(mu, jt=jt, k=k, n=x.n_nodes):
            y = np.argmax(np.asarray(mu)[:n * k].reshape(n, k), axis=1)
            return np.concatenate([np.asarray(mu, dtype=float), encode_cliques(jt, y, k)])

        return Polytope(E=E, e=e, lb=0.0, ub=1.0, n_parts=Lp, n_aux=Lc, lift=lift)

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return x.key() + (self._k(), self.mode, int(self.max_treewidth))

    def encode(self, x: Any, y: Any) -> np.ndarray:
        k = self._k()
        return encode_labels(x.n_nodes, x.edges, check_labels(y, x.n_nodes, k), k)

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        k = self._k()
        return np.argmax(np.asarray(mu)[:x.n_nodes * k].reshape(x.n_nodes, k), axis=1)

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        k = self._k()
        y = check_labels(y_true, x.n_nodes, k, "y_true")
        _, L = check_loss(self.loss, k, owner="GraphLabeling")
        c = np.zeros(self.n_parts(x))
        c[:x.n_nodes * k] = L[:, y].T.ravel()          # node i, label a: L[a, y_i]
        return c, 0.0

    def _solve(self, x, scores):
        k = self._k()
        n = x.n_nodes
        s = np.asarray(scores, dtype=float)
        mode = self._mode(x)
        if not isinstance(mode, str):
            y = jt_max_sum_cliques(mode, mode.tables(k).PT @ s, k)[0]
            self._count("junction tree")
            return encode_labels(n, x.edges, y, k), y
        mu, y, how = relaxed_map(x.decomposition(), s[:n * k].reshape(n, k),
                                 s[n * k:].reshape(-1, k, k))
        self._count(how)
        return mu, y

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        """The best labelling (rounded when the LP optimum is fractional)."""
        return self._solve(x, scores)[1]

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        """An exact maximizer over the output polytope (fractional when the relaxation's
        optimum is): the oracle of the first-order learners."""
        return self._solve(x, scores)[0]

    def encoded_inference(self, x: Any, y: Any, n_parts: int) -> np.ndarray:
        return self.encode(x, y)

    # ------------------------------------------ beyond the argmax (structlp.inference)
    def _exact_junction(self, x, what):
        """The junction tree on which ``what`` is exact (a forest's, or a narrow graph's
        in mode "exact"/"auto"), or a clear refusal on the local polytope."""
        mode = self._mode(x)
        if not isinstance(mode, str):
            return mode
        jt = x.junction(self._k(), int(self.max_treewidth)) if x.forest else None
        if jt is None:
            from ..inference.distribution import ALTERNATIVES
            raise InvalidParameterError(
                f"{what}: this GraphLabeling example is a loopy graph solved on the local "
                f"polytope (mode={self.mode!r}, max_treewidth={self.max_treewidth}), where "
                f"the exact {what} is intractable in general (#P-hard). Use mode='exact' "
                "with max_treewidth at least the graph's treewidth (sum-product on a "
                f"junction tree), or {ALTERNATIVES}.")
        return jt

    def log_partition(self, x: Any, scores: np.ndarray) -> Tuple[float, np.ndarray]:
        """``log Z`` and the node and edge marginals: sum-product on the junction tree
        (forests, narrow graphs); refused on the local polytope of a loopy graph."""
        jt = self._exact_junction(x, "log_partition")
        T = jt.tables(self._k())
        log_Z, mu = jt_marginals_cliques(jt, T.PT @ np.asarray(scores, dtype=float), self._k())
        return log_Z, T.P @ mu

    def sample(self, x: Any, scores: np.ndarray, n: int, rng: Any) -> List[np.ndarray]:
        """Exact samples by forward filtering-backward sampling on the junction tree;
        refused on the local polytope of a loopy graph."""
        jt = self._exact_junction(x, "sample")
        T = jt.tables(self._k())
        return list(jt_sample(jt, T.PT @ np.asarray(scores, dtype=float), self._k(), n, rng))

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best labellings: Lawler-Murty with max-sum on the junction tree, or
        over the inference LP on the local polytope (exact where every LP answer is
        integral, which is checked)."""
        try:
            jt = self._exact_junction(x, "k_best")
        except InvalidParameterError:
            from ..inference.kbest import lawler_murty_lp
            return lawler_murty_lp(self, x, scores, k)
        T = jt.tables(self._k())
        return jt_k_best(jt, T.PT @ np.asarray(scores, dtype=float), self._k(), k)


@dataclass
class _Dense:
    """The attributes :func:`structlp.graphical.trees.part_features` reads."""

    node_features: np.ndarray
    edge_features: np.ndarray
    edges: np.ndarray

    @property
    def n_nodes(self):
        return self.node_features.shape[0]


__all__ = ["GraphLabeling", "GraphLabelingExample", "grid_edges", "grid_example"]
