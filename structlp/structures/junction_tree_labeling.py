"""Labellings of low-treewidth graphs: the clique-marginal polytope of a junction tree."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Hashable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_bool, check_scalar
from ..graphical.losses import check_loss
from ..graphical.junction import (MAX_TREEWIDTH, GraphExample, check_example, check_graph_example,
                            clique_polytope, encode_cliques, jt_marginals_cliques,
                            jt_max_sum_cliques, pairwise_marginals, tree_as_graph)
from ..graphical.jt_sampling import jt_sample
from ..graphical.kbest import jt_k_best
from ..graphical.trees import check_labels, node_weights_of, part_features
from ..exceptions import InvalidParameterError
from ..model import StructuredModel
from ..polytope import Polytope


class JunctionTreeLabeling(StructuredModel):
    """Labellings ``y`` (n,) in ``0..k-1`` of a graph's nodes, scored by node and edge parts.

    An example is a graph dict (``node_features`` (n, d_v), ``edges`` (E, 2),
    ``edge_features`` (E, d_e); see :mod:`structlp.graphical.junction`) or a tree dict
    (read as a graph with edges ``(parent, child)``).  The score of ``y`` is
    ``sum_i theta_v[y_i] . v_i + sum_e theta_e[y_u, y_v] . f_e`` (the parameters of
    :class:`~structlp.structures.TreeLabeling`).  Parts are the clique tables
    ``mu_C(y_C)`` of the example's junction tree (``k^{|C|}`` entries per clique),
    and the output polytope is the clique-marginal polytope

    .. math::

        \\sum_{y_C} \\mu_C(y_C) = 1,\\quad
        \\sum_{y_C \\sim s} \\mu_C(y_C) = \\sum_{y_D \\sim s} \\mu_D(y_D)\\;
        \\text{(each junction-tree edge } (C, D)\\text{, separator labelling } s),
        \\quad \\mu \\ge 0,

    the graph's marginal polytope (integral).  A part's features are the sum of
    the node and edge features assigned to its clique.  The loss is additive over
    nodes, ``loss(y_true, y) = sum_i w_i L[y_i, y_true_i]``.  Inference is exact
    max-sum on the junction tree, O(m_cliques k^(w+1)).

    Parameters
    ----------
    n_labels : int >= 2
    loss : {"zero_one", "absolute", "squared"} or array (k, k), non-negative
    node_weights : None, "position" or callable ``x -> (n,)``
    normalize_weights : bool
    max_treewidth : int, default 8
        Refuse junction trees wider than this (error with the width and k^(w+1)).

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.structures import JunctionTreeLabeling, grid_example
    >>> rng = np.random.default_rng(0)
    >>> model = JunctionTreeLabeling(n_labels=2)
    >>> # a loopy 2 x 3 grid
    >>> x = model.check_x(grid_example(rng.normal(size=(2, 3, 2))))
    >>> Phi = model.features(x)                  # (clique-table entries, features)
    >>> s = Phi @ rng.normal(size=Phi.shape[1])  # part scores
    >>> # exact max-sum on the junction tree
    >>> model.inference(x, s)
    array([0, 1, 0, 1, 0, 1])
    >>> def score(y):
    ...     return s @ model.encode(x, np.array(y))
    >>> max(itertools.product(range(2), repeat=6), key=score)   # brute force agrees
    (0, 1, 0, 1, 0, 1)
    """

    formulations = ("minmax",)

    def __init__(self, n_labels: int, loss: Union[str, ArrayLike] = "zero_one",
                 node_weights: Union[None, str, Callable[..., Any]] = None,
                 normalize_weights: bool = False,
                 max_treewidth: int = MAX_TREEWIDTH) -> None:
        self.n_labels = n_labels
        self.loss = loss  # type: ignore[method-assign, assignment]  # shadows the hook
        self.node_weights = node_weights
        self.normalize_weights = normalize_weights
        self.max_treewidth = max_treewidth

    def _k(self):
        return check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=2,
                            owner="JunctionTreeLabeling")

    def check_x(self, x: Any) -> Any:
        k = self._k()
        check_loss(self.loss, k, owner="JunctionTreeLabeling")
        check_bool(self.normalize_weights, "normalize_weights", owner="JunctionTreeLabeling")
        if not (self.node_weights is None or self.node_weights == "position"
                or callable(self.node_weights)):
            raise InvalidParameterError(
                "The 'node_weights' parameter of JunctionTreeLabeling must be None, "
                f"'position' or a callable; got {self.node_weights!r}.")
        ex = check_example(x, k, self.max_treewidth)
        if not isinstance(ex, GraphExample):
            ex = check_graph_example(tree_as_graph(ex), k, self.max_treewidth)
        return ex

    def n_parts(self, x: Any) -> int:
        return x.tables(self._k()).n_parts

    def features(self, x: Any) -> Any:
        k = self._k()
        return x.tables(k).PT @ part_features(x, k)

    def polytope(self, x: Any) -> Polytope:
        return clique_polytope(x, self._k())

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return x.key() + (self._k(),)

    def encode(self, x: Any, y: Any) -> np.ndarray:
        k = self._k()
        return encode_cliques(x, check_labels(y, x.n_nodes, k), k)

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        node, _ = pairwise_marginals(x, np.asarray(mu, dtype=float), self._k())
        return np.argmax(node, axis=1)

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        k = self._k()
        y = check_labels(y_true, x.n_nodes, k, "y_true")
        _, L = check_loss(self.loss, k, owner="JunctionTreeLabeling")
        w = node_weights_of(x, self.node_weights, bool(self.normalize_weights))
        T = x.tables(k)
        c = np.zeros(T.P.shape[0])
        c[:x.n_nodes * k] = (w[:, None] * L[:, y].T).ravel()   # node i, label a: w_i L[a, y_i]
        return T.PT @ c, 0.0

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        return jt_max_sum_cliques(x, scores, self._k())[0]

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        k = int(self.n_labels)             # checked with x by check_x
        return encode_cliques(x, jt_max_sum_cliques(x, scores, k)[0], k)

    def log_partition(self, x: Any, scores: np.ndarray) -> Tuple[float, np.ndarray]:
        """``log Z`` and the clique marginals of the Gibbs distribution: sum-product on the
        junction tree (:func:`structlp.inference.log_partition`)."""
        return jt_marginals_cliques(x, scores, self._k())

    def sample(self, x: Any, scores: np.ndarray, n: int, rng: Any) -> List[np.ndarray]:
        """``n`` exact samples of the Gibbs distribution: forward filtering-backward
        sampling on the junction tree (:func:`structlp.inference.sample`)."""
        return list(jt_sample(x, scores, self._k(), n, rng))

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best labellings: Lawler-Murty partitioning with max-sum on the junction
        tree as the oracle (:func:`structlp.inference.k_best`)."""
        return jt_k_best(x, scores, self._k(), k)
