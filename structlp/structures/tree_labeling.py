"""Labellings of tree-structured examples (chains, trees): the local marginal polytope."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Callable, Hashable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from ..utils.validation import (check_bool, check_finite_array, check_scalar,
                                row_norm_sums)
from ..graphical.losses import check_loss
from ..graphical.trees import (check_labels, check_tree_example, encode, local_polytope,
                         node_weights_of, part_features, score, tree_marginals,
                         tree_sample)
from ..exceptions import InvalidInputError, InvalidParameterError
from ..graphical.kbest import tree_k_best
from ..graphical.maxsum import max_sum
from ..model import StructuredModel
from ..polytope import Polytope
from ..part_features import PartFeatures, StackedFeatures


class TreeLabeling(StructuredModel):
    """Labellings ``y`` (n,) in ``0..k-1`` of the nodes of a tree, scored by node and edge parts.

    An example is a tree dict (``node_features`` (n, d_v), dense or scipy.sparse,
    ``edge_features`` (n-1, d_e), ``parents`` (n,); see :mod:`structlp.graphical.trees`).  Parts are the
    node indicators ``mu[i, a]`` (n k) followed by the edge indicators
    ``mu[e, a, b]`` ((n-1) k^2, parent label ``a``, child label ``b``); the edge
    indicator of a labelling is the product of its node indicators.  The output
    polytope is the local marginal polytope

    .. math::

        \\sum_a \\mu_i(a) = 1,\\quad \\sum_b \\mu_e(a, b) = \\mu_{pt}(a),\\quad
        \\sum_a \\mu_e(a, b) = \\mu_{c}(b),\\quad 0 \\le \\mu \\le 1,

    which is integral on trees.  The loss is additive over nodes:
    ``loss(y_true, y) = sum_i w_i L[y_i, y_true_i]`` (only node parts carry
    loss coefficients).  Inference is max-sum on the tree.

    The part features are offered in factored form (:meth:`feature_operator`,
    :class:`TreeFeatures`): the first-order learners compute part scores and joint
    features from the node and edge features directly, never the
    ``(n k + (n-1) k^2) x (k d_v + k^2 d_e)`` matrix that :meth:`features` builds
    for the joint QP.

    Parameters
    ----------
    n_labels : int >= 2
    loss : {"zero_one", "absolute", "squared"} or array (k, k), non-negative
        ``L[j, b]`` = loss of predicting ``j`` when the true label is ``b``.
    node_weights : None, "position" or callable ``x -> (n,)``
    normalize_weights : bool
        Divide each example's node weights by their sum.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_tree_labeling
    >>> X, Y, w, model = make_tree_labeling(n_samples=10, n_nodes=5, n_labels=3, random_state=0)
    >>> model
    TreeLabeling(n_labels=3, loss='zero_one', node_weights=None, normalize_weights=False)
    >>> learner = structlp.MaxMarginLearner(model, C=1.0).fit(X, Y)
    >>> learner.predict(X[:1])[0].shape          # max-sum on the tree
    (5,)
    """

    formulations = ("minmax",)

    def __init__(self, n_labels: int, loss: Union[str, ArrayLike] = "zero_one",
                 node_weights: Union[None, str, Callable[..., Any]] = None,
                 normalize_weights: bool = False) -> None:
        self.n_labels = n_labels
        self.loss = loss  # type: ignore[method-assign, assignment]  # shadows the hook
        self.node_weights = node_weights
        self.normalize_weights = normalize_weights

    def _k(self):
        k = self.n_labels
        if type(k) is int and k >= 2:       # the common case, checked per call cheaply
            return k
        return check_scalar(k, "n_labels", kind=numbers.Integral, low=2, owner="TreeLabeling")

    def check_x(self, x: Any) -> Any:
        self._k()
        check_bool(self.normalize_weights, "normalize_weights", owner="TreeLabeling")
        check_loss(self.loss, self._k(), owner="TreeLabeling")
        if not (self.node_weights is None or self.node_weights == "position"
                or callable(self.node_weights)):
            raise InvalidParameterError(
                "The 'node_weights' parameter of TreeLabeling must be None, 'position' or a "
                f"callable; got {self.node_weights!r}.")
        if isinstance(x, dict) and sp.issparse(x.get("node_features")):
            V = check_finite_array(x["node_features"], "x['node_features']", ndim=2,
                                   allow_sparse=True)
            if V.shape[0] != len(np.asarray(x.get("parents", ()))):
                raise InvalidInputError(
                    "x['node_features'] must have one row per node "
                    f"({len(np.asarray(x.get('parents', ())))}); got shape {V.shape}.")
            ex = check_tree_example(dict(x, node_features=np.zeros((V.shape[0], 0))))
            return dataclasses.replace(ex, node_features=V)
        return check_tree_example(x)

    def n_parts(self, x: Any) -> int:
        k = self._k()
        return x.n_nodes * k + (x.n_nodes - 1) * k * k

    #: The hooks :meth:`prepare_batch` computes at once: a subclass (or instance) that
    #: overrides any of them is prepared example by example (the lowest override wins).
    BATCH_HOOKS = ("check_x", "n_parts", "features", "feature_operator", "polytope",
                   "polytope_key", "encode", "loss", "loss_coefficients", "inference",
                   "inference_parts", "checked_output", "checked_loss", "checked_features",
                   "checked_feature_operator", "checked_polytope", "loss_hook",
                   "decoder_hook", "_k", "prepare_batch")

    def prepare_batch(self, X: Any, Y: Any, need_polytopes: bool = True,
                      operators: bool = False) -> Any:
        """What :func:`structlp.compiler.prepare` computes through the hooks, for all
        examples at once from their packed node features, edge features and labels (the
        checks as array operations): the :class:`~structlp.formulations.TrainingData`;
        or the index of the first example the vectorised checks cannot accept (``prepare``
        words its refusal through the hooks); or None where it does not apply (the
        explicit features, ``operators=False``; callable node weights; a subclass
        overriding one of :attr:`BATCH_HOOKS`)."""
        from ..compiler import own_hooks
        from ._batch import prepare_trees
        if not own_hooks(self, TreeLabeling, self.BATCH_HOOKS):
            return None
        return prepare_trees(self, list(X), list(Y), need_polytopes, operators)

    def features(self, x: Any) -> Any:
        if sp.issparse(x.node_features):    # one example's node features, densified here
            x = dataclasses.replace(x, node_features=x.node_features.toarray())
        return part_features(x, self._k())

    def feature_operator(self, x: Any) -> PartFeatures:
        return TreeFeatures(x, self._k())

    def polytope(self, x: Any) -> Polytope:
        return local_polytope(x, self._k())

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return x.key() + (self._k(),)

    def encode(self, x: Any, y: Any) -> np.ndarray:
        return encode(x, check_labels(y, x.n_nodes, self._k()), self._k())

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        k = self._k()
        return np.argmax(np.asarray(mu)[:x.n_nodes * k].reshape(x.n_nodes, k), axis=1)

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        k = self._k()
        y = check_labels(y_true, x.n_nodes, k, "y_true")
        _, L = check_loss(self.loss, k, owner="TreeLabeling")
        w = node_weights_of(x, self.node_weights, bool(self.normalize_weights))
        c = np.zeros(self.n_parts(x))
        c[:x.n_nodes * k] = (w[:, None] * L[:, y].T).ravel()   # node i, label a: w_i L[a, y_i]
        return c, 0.0

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        return max_sum(x, *_potentials(x, scores, self._k()))[0]

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        k = int(self.n_labels)             # checked with x by check_x
        return encode(x, max_sum(x, *_potentials(x, scores, k))[0], k)

    def log_partition(self, x: Any, scores: np.ndarray) -> Tuple[float, np.ndarray]:
        """``log Z`` and the part marginals of the Gibbs distribution: sum-product on the
        tree (:func:`structlp.inference.log_partition`)."""
        k = self._k()
        log_Z, node, edge = tree_marginals(x, *_potentials(x, scores, k))
        return log_Z, np.concatenate([node.ravel(), edge.ravel()])

    def sample(self, x: Any, scores: np.ndarray, n: int, rng: Any) -> List[np.ndarray]:
        """``n`` exact samples of the Gibbs distribution: forward filtering-backward
        sampling on the tree (:func:`structlp.inference.sample`)."""
        b, B = _potentials(x, scores, self._k())
        return list(tree_sample(x, b, B, n, rng))

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best labellings: Lawler-Murty partitioning valued by max-marginal
        messages (:func:`structlp.inference.k_best`)."""
        b, B = _potentials(x, scores, self._k())
        return tree_k_best(x, b, B, k)

    def score(self, x: Any, scores: np.ndarray, y: ArrayLike) -> float:
        """Score of labelling ``y`` under part scores."""
        # the module function agm.trees.score (mypy resolves the name to this method)
        return score(  # type: ignore[call-arg]
            x, *_potentials(x, scores, self._k()), np.asarray(y))


def _potentials(x, scores, k):
    """Part scores (n k + (n-1) k^2,) as node (n, k) and edge (n-1, k, k) potentials."""
    n = x.n_nodes
    s = np.asarray(scores, dtype=float)
    return s[:n * k].reshape(n, k), s[n * k:].reshape(n - 1, k, k)


class TreeFeatures(PartFeatures):
    """The part features of a tree example in factored form (no ``L x d`` matrix).

    With ``w = (theta_v (k, d_v), theta_e (k, k, d_e))`` (the order of
    :func:`~structlp.graphical.trees.split_theta`), the part scores are the node
    scores ``V theta_v^T`` (n, k) and the edge scores ``E_f theta_e^T``
    (n-1, k, k); the joint feature of ``mu = (mu_v (n, k), mu_e (n-1, k, k))`` is
    ``(mu_v^T V, mu_e^T E_f)``, shapes (k, d_v) and (k, k, d_e).  ``V`` (the node
    features) may be dense or scipy.sparse.

    Parameters
    ----------
    ex : TreeExample
    k : int, the number of labels
    """

    __slots__ = ("V", "Ef", "n", "m", "k", "nk", "kdv", "shape")

    def __init__(self, ex: Any, k: int) -> None:
        self.V, self.Ef = ex.node_features, ex.edge_features
        self.n, self.k = ex.n_nodes, int(k)
        self.nk = self.n * self.k
        self.kdv = self.k * self.V.shape[1]
        self.m = self.Ef.shape[0]          # edges: n - 1 on a tree, any number on a graph
        self.shape = (self.nk + self.m * self.k * self.k,
                      self.kdv + self.k * self.k * self.Ef.shape[1])

    def scores(self, w: np.ndarray) -> np.ndarray:
        k, kdv = self.k, self.kdv
        node = self.V.dot(w[:kdv].reshape(k, -1).T)                       # (n, k)
        edge = self.Ef.dot(w[kdv:].reshape(k * k, -1).T)                  # (m, k^2)
        return np.concatenate((np.asarray(node).ravel(), edge.ravel()))

    def norm_bound(self) -> float:
        """The sum of the rows' norms of the part features, ``k sum_i |V_i| + k^2 sum_e
        |E_e|`` (each node's features are in ``k`` rows, each edge's in ``k^2``): the
        bound of :func:`~structlp.utils.validation.check_scale`."""
        return float(feature_norm_sums(self.V, self.Ef, [0], [0], self.k)[0])

    def joint(self, mu: np.ndarray) -> np.ndarray:
        k, nk = self.k, self.nk
        mu = np.asarray(mu, dtype=float)
        mv = mu[:nk].reshape(self.n, k)
        me = mu[nk:].reshape(self.m, k * k)
        gv = self.V.T.dot(mv).T if sp.issparse(self.V) else mv.T.dot(self.V)  # (k, d_v)
        return np.concatenate((np.asarray(gv).ravel(), me.T.dot(self.Ef).ravel()))

    @classmethod
    def stack(cls, ops: Any) -> Optional[StackedFeatures]:
        """Several examples' tree features stacked (see :meth:`PartFeatures.stack`):
        their node and edge features packed into one matrix each (a copy of the node
        features), or None when they differ in labels or feature sizes."""
        ops = list(ops)
        if not ops or any(type(op) is not cls for op in ops):
            return None
        first = ops[0]
        if any((op.k, op.V.shape[1], op.Ef.shape[1]) != (first.k, first.V.shape[1],
                                                          first.Ef.shape[1]) for op in ops):
            return None
        return _StackedTreeFeatures(ops)


def feature_norm_sums(V: Any, Ef: Any, node_starts: Any, edge_starts: Any,
                      k: int) -> np.ndarray:
    """:meth:`TreeFeatures.norm_bound` of several examples whose node features (N, d_v) and
    edge features (M, d_e) are packed, example ``i``'s starting at rows ``node_starts[i]``
    and ``edge_starts[i]``: shape (m,)."""
    return (k * row_norm_sums(V, node_starts)
            + (k * k) * row_norm_sums(Ef, edge_starts))


def _vstack(blocks):
    """Row blocks, dense or scipy.sparse, as one matrix (CSR when any is sparse)."""
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_array(b) for b in blocks], format="csr")
    return np.vstack([np.asarray(b, dtype=float) for b in blocks])


class _StackedTreeFeatures(StackedFeatures):
    """The part features of several tree examples stacked, in factored form.

    The node features ``V`` (N, d_v) and edge features ``Ef`` (M, d_e) of all examples
    are packed (nodes and edges numbered across the examples); the rows are all node
    parts, ``r k + a`` for label ``a`` of packed node ``r``, then all edge parts,
    ``N k + e k^2 + a k + b`` for labels ``(a, b)`` of packed edge ``e``.  The scores of
    any parts (:meth:`scores_at`: the node scores ``V theta_v^T`` (N, k) as one product,
    edge parts' scores as row products) and the joint feature of part counts spread over
    the examples (:meth:`joint_sparse`: one sparse product per kind of part) take a few
    array operations for all examples.  Made by :meth:`TreeFeatures.stack`.
    """

    __slots__ = ("V", "Ef", "k", "kdv", "n_node_parts", "node_start", "edge_start", "shape")

    def __init__(self, ops: Any) -> None:
        k = ops[0].k
        self.k = k
        self.kdv = ops[0].kdv
        self.V = _vstack([op.V for op in ops])
        self.Ef = _vstack([op.Ef for op in ops])
        self.n_node_parts = np.array([op.nk for op in ops], dtype=np.int64)
        self.node_start = np.concatenate([[0], np.cumsum([op.n for op in ops])])[:-1]
        self.edge_start = np.concatenate([[0], np.cumsum([op.m for op in ops])])[:-1]
        self.shape = (self.V.shape[0] * k + self.Ef.shape[0] * k * k, ops[0].shape[1])

    def rows(self, ex: np.ndarray, idx: np.ndarray) -> np.ndarray:
        ex = np.asarray(ex, dtype=np.int64)
        j = np.asarray(idx, dtype=np.int64)
        k, nk = self.k, self.n_node_parts[ex]
        return np.where(j < nk, self.node_start[ex] * k + j,
                        self.V.shape[0] * k + self.edge_start[ex] * (k * k) + (j - nk))

    def scores_at(self, w: np.ndarray, idx: np.ndarray) -> np.ndarray:
        k, kdv = self.k, self.kdv
        idx = np.asarray(idx, dtype=np.int64)
        Nk = self.V.shape[0] * k
        node = idx < Nk
        out = np.empty(len(idx))
        NS = np.asarray(self.V.dot(w[:kdv].reshape(k, -1).T))              # (N, k)
        out[node] = NS.ravel()[idx[node]]
        edge = ~node
        if edge.any():
            We = w[kdv:].reshape(k * k, -1)                                  # (k^2, d_e)
            er, ep = np.divmod(idx[edge] - Nk, k * k)
            if sp.issparse(self.Ef) or len(er) * We.shape[1] > self.Ef.shape[0] * k * k:
                out[edge] = np.asarray(self.Ef.dot(We.T))[er, ep]          # (M, k^2)
            else:                      # the parts' rows only: fewer products than all
                out[edge] = np.einsum("ij,ij->i", self.Ef[er], We[ep])
        return out

    def scores(self, w: np.ndarray) -> np.ndarray:
        return self.scores_at(w, np.arange(self.shape[0]))

    def joint_sparse(self, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
        k = self.k
        idx = np.asarray(idx, dtype=np.int64)
        vals = np.asarray(vals, dtype=float)
        Nk = self.V.shape[0] * k
        node = idx < Nk
        r, a = np.divmod(idx[node], k)
        e, p = np.divmod(idx[~node] - Nk, k * k)
        # column-major counts: the products then read V and Ef once, in order
        Sv = sp.csc_array((vals[node], (a, r)), shape=(k, self.V.shape[0]))
        Se = sp.csc_array((vals[~node], (p, e)), shape=(k * k, self.Ef.shape[0]))
        gv, ge = Sv @ self.V, Se @ self.Ef                      # (k, d_v), (k^2, d_e)
        gv = gv.toarray() if sp.issparse(gv) else gv
        ge = ge.toarray() if sp.issparse(ge) else ge
        return np.concatenate((np.asarray(gv).ravel(), np.asarray(ge).ravel()))

    def joint(self, mu: np.ndarray) -> np.ndarray:
        mu = np.asarray(mu, dtype=float)
        idx = np.flatnonzero(mu)
        return self.joint_sparse(idx, mu[idx])
