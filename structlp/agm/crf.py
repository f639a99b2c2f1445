"""A conditional random field on trees: the log-linear baseline of Fathony et al. (2018)."""

from __future__ import annotations

import numbers
from typing import Any, Callable, List, Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike
from ..utils.lbfgs import minimize_lbfgs
from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import check_bool, check_scalar
from ..base import BaseEstimator
from ..exceptions import InvalidInputError
from ..utils.numeric import logsumexp  # noqa: F401  (public here in 0.1.0)
from ..graphical.losses import check_loss
from ..graphical.trees import Forest, forest_marginals, n_params, split_theta
from ..graphical.trees import tree_marginals  # noqa: F401  (public here in 0.1.0)


def labels_statistic(F, Ys, k):
    """``Psi = sum_i Phi(x_i, y_i)``, the summed joint features of the labels of a Forest."""
    y_all = np.concatenate(Ys)
    zv = np.eye(k)[y_all]                                   # (N, k) one-hot labels
    ze = np.zeros((F.edge_child.size, k, k))
    ze[np.arange(F.edge_child.size), y_all[F.edge_parent], y_all[F.edge_child]] = 1.0
    return np.concatenate([(zv.T @ F.node_features).ravel(),
                           np.einsum("eab,ef->abf", ze, F.edge_features).ravel()])


def forest_objective(theta, F, Psi, k, reg):
    """Regularized mean negative log-likelihood of the trees of a Forest, and its gradient.

    ``0.5 reg |theta|^2 + (1/m) sum_i [log Z(x_i) - theta . Psi_i]`` by batched
    sum-product (:func:`structlp.graphical.trees.forest_marginals`).

    Returns
    -------
    f : float; g : ndarray like theta
    """
    b, B = F.potentials(theta, k)
    log_Z, node, edge = forest_marginals(F, b, B)
    m = F.n_examples
    f = 0.5 * reg * theta @ theta + (log_Z.sum() - theta @ Psi) / m
    g = np.concatenate([(node.T @ F.node_features).ravel(),
                        np.einsum("eab,ef->abf", edge, F.edge_features).ravel()])
    return f, (g - Psi) / m + reg * theta


class TreeCRF(BaseEstimator):
    """Log-linear model on trees, L2-regularized, fitted by L-BFGS.

    Solves

    .. math::

        \\min_\\theta\\; \\frac{\\lambda}{2}\\|\\theta\\|^2 + \\frac1m\\sum_i
        \\big[\\log Z_\\theta(x_i) - \\theta\\cdot\\Phi(x_i, y_i)\\big]

    with the features of :mod:`structlp.graphical.trees`; the log-partition function
    and the marginals come from sum-product on the tree.  Prediction is the
    Bayes-optimal decision for the (additive) loss: at each node
    ``argmin_a sum_b L[a, b] P(y_i = b | x)``.

    Parameters
    ----------
    n_labels : int >= 2
    loss : {"zero_one", "absolute", "squared"} or array (n_labels, n_labels)
        Loss used for the decision (not for training).
    reg : float >= 0, default 1e-2
    max_iter : int, default 500
    verbose : int >= 0, default 0
        1: one log line per L-BFGS iteration (objective, time).
    callback : callable or None, default None
        ``callback(info)`` after every L-BFGS iteration (``iteration``, ``objective``,
        ``time``); returning True stops the fit (``converged_`` is then False).
    warm_start : bool, default False
        When True and the model is fitted with a ``coef_`` of the same length, a
        re-fit starts L-BFGS from ``coef_`` instead of zero.

    Attributes
    ----------
    coef_ : ndarray
    objective_ : float
    n_iter_ : int
    converged_ : bool
        L-BFGS met its tolerance.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import TreeCRF, chain, make_loopy_data
    >>> _, X_chain, Y = make_loopy_data("skip_chain", n_examples=40, n_nodes=5, random_state=0)
    >>> # tree dicts
    >>> X = [chain(x["node_features"], x["edge_features"]) for x in X_chain]
    >>> # exact sum-product on each chain
    >>> crf = TreeCRF(3, reg=0.1).fit(X[:20], Y[:20])
    >>> crf.converged_, crf.predict(X[20:])[0].shape
    (True, (5,))
    >>> print(f"{np.mean([np.mean(p != y) for p, y in zip(crf.predict(X[20:]), Y[20:])]):.2f}")
    0.25
    """

    def __init__(self, n_labels: int, loss: Union[str, ArrayLike] = "zero_one", reg: float = 1e-2,
                 max_iter: int = 500, verbose: int = 0,
                 callback: Optional[Callable[..., Any]] = None, warm_start: bool = False) -> None:
        self.n_labels = n_labels
        self.loss = loss
        self.reg = reg
        self.max_iter = max_iter
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def _check_params(self):
        name = type(self).__name__
        k = check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=2, owner=name)
        _, L = check_loss(self.loss, k, owner=name)
        reg = check_scalar(self.reg, "reg", kind=numbers.Real, low=0, owner=name)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1, owner=name)
        check_verbose(self.verbose, name)
        check_callback(self.callback, name)
        check_bool(self.warm_start, "warm_start", owner=name)
        return k, L, reg

    def _lbfgs(self, objective, n, args):
        """L-BFGS from zero (or ``coef_`` with ``warm_start``), reporting each iteration.

        See :mod:`structlp.utils.lbfgs`.
        """
        progress = Progress(self, check_verbose(self.verbose), self.callback,
                            total=int(self.max_iter))
        prev = getattr(self, "coef_", None)
        start = (prev.copy() if self.warm_start and isinstance(prev, np.ndarray)
                 and prev.shape == (n,) else np.zeros(n))
        return minimize_lbfgs(objective, start, args=args, progress=progress,
                              options={"maxiter": int(self.max_iter), "gtol": 1e-7})

    def fit(self, X: Sequence[Any], Y: Sequence[ArrayLike]) -> "TreeCRF":
        """Fit by L-BFGS on the regularized mean negative log-likelihood; returns self."""
        k, L, reg = self._check_params()
        exs, Ys, d_v, d_e = self._examples(X, Y, k)
        F = Forest(exs)
        res = self._lbfgs(forest_objective, n_params(d_v, d_e, k),
                          (F, labels_statistic(F, Ys, k), k, reg))
        return self._fitted(res, d_v, d_e, k)

    def _fitted(self, res, d_v, d_e, k):
        self.coef_ = res["x"]
        self.theta_node_, self.theta_edge_ = split_theta(res["x"], d_v, d_e, k)
        self.objective_ = res["fun"]
        self.n_iter_ = res["nit"]
        self.converged_ = res["success"]
        self.n_features_in_ = (d_v, d_e)
        return self

    def _examples(self, X, Y, k):
        from .model import check_tree_dataset
        return check_tree_dataset(X, Y, k, type(self).__name__)

    def _checked(self, X):
        self._check_fitted()
        k = self._check_params()[0]
        exs, _, d_v, d_e = self._examples(X, None, k)
        if d_v != self.n_features_in_[0]:
            raise InvalidInputError(
                f"X has {d_v} node features; the model was fitted with {self.n_features_in_[0]}.")
        return exs, k

    def predict_proba(self, X: Sequence[Any]) -> List[np.ndarray]:
        """Node marginals ``P(y_i = a | x)`` of each example: list of (n_i, k) arrays."""
        exs, k = self._checked(X)
        F = Forest(exs)
        return F.split_nodes(forest_marginals(F, *F.potentials(self.coef_, k))[1])

    def predict(self, X: Sequence[Any], loss: Union[None, str, ArrayLike] = None
                ) -> List[np.ndarray]:
        """Bayes-optimal labelling for ``loss`` (default: the ``loss`` parameter).

        Returns
        -------
        list of int arrays (n_i,): ``argmin_a sum_b L[a, b] P(y_i = b | x)`` per node.
        """
        k = self._check_params()[0]
        L = self._check_params()[1] if loss is None else check_loss(loss, k, "TreeCRF.predict")[1]
        return [np.argmin(P @ L.T, axis=1) for P in self.predict_proba(X)]


def _graph_examples(X, Y, k, max_treewidth, owner):
    """Graph examples (tree dicts become graphs with edges (parent, child)), checked."""
    from ..graphical.junction import GraphExample, check_graph_example, tree_as_graph
    from .model import check_tree_dataset
    exs, Ys, d_v, d_e = check_tree_dataset(X, Y, k, owner, graphs=True,
                                           max_treewidth=max_treewidth)
    out = [ex if isinstance(ex, GraphExample)
           else check_graph_example(tree_as_graph(ex), k, max_treewidth, f"X[{i}]")
           for i, ex in enumerate(exs)]
    return out, Ys, d_v, d_e


def crf_objective(theta, exs, Psi, k, reg):
    """Regularized mean negative log-likelihood on graph examples and its gradient.

    ``0.5 reg |theta|^2 + (1/m) sum_i [log Z(x_i) - theta . Psi_i]`` with
    ``Psi`` the summed joint features of the labels; ``log Z`` and the marginals by
    sum-product on each junction tree.

    Returns
    -------
    f : float; g : ndarray like theta
    """
    from ..graphical.junction import jt_marginals
    from ..graphical.trees import potentials
    total, g = 0.0, np.zeros_like(theta)
    for ex in exs:
        b, B = potentials(ex, theta, k)
        log_Z, _, node, edge = jt_marginals(ex, b, B)
        total += log_Z
        g += np.concatenate([(node.T @ ex.node_features).ravel(),
                             np.einsum("eab,ef->abf", edge, ex.edge_features).ravel()])
    m = len(exs)
    return 0.5 * reg * theta @ theta + (total - theta @ Psi) / m, (g - Psi) / m + reg * theta


class JunctionTreeCRF(TreeCRF):
    """Log-linear model on low-treewidth graphs (sum-product on the junction tree), by L-BFGS.

    Solves

    .. math::

        \\min_\\theta\\; \\frac{\\lambda}{2}\\|\\theta\\|^2 + \\frac1m\\sum_i
        \\big[\\log Z_\\theta(x_i) - \\theta\\cdot\\Phi(x_i, y_i)\\big]

    for graph examples (:mod:`structlp.graphical.junction`: ``node_features`` (n, d_v),
    ``edges`` (E, 2), ``edge_features`` (E, d_e)) or tree examples (read as graphs
    with edges ``(parent, child)``), with the features of
    :mod:`structlp.graphical.trees`; ``log Z`` and the marginals come from sum-product on
    each example's junction tree, in O(m_cliques k^(w+1)).  Prediction as
    :class:`TreeCRF`: per node ``argmin_a sum_b L[a, b] P(y_i = b | x)``.

    Parameters
    ----------
    n_labels : int >= 2
    loss : {"zero_one", "absolute", "squared"} or array (n_labels, n_labels)
    reg : float >= 0, default 1e-2
    max_iter : int, default 500
    max_treewidth : int, default 8
        Refuse wider junction trees (see :func:`structlp.graphical.junction.check_graph_example`).
    verbose, callback, warm_start :
        As :class:`TreeCRF` (one report per L-BFGS iteration; a warm re-fit starts
        L-BFGS from ``coef_``).

    Attributes
    ----------
    coef_ : ndarray; theta_node_, theta_edge_; objective_ : float; n_iter_ : int;
    converged_ : bool; n_features_in_ : (d_v, d_e)

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import JunctionTreeCRF, make_loopy_data
    >>> X, _, Y = make_loopy_data("skip_chain", n_examples=40, n_nodes=5, random_state=0)
    >>> # the skip edges are kept
    >>> crf = JunctionTreeCRF(3, reg=0.1).fit(X[:20], Y[:20])
    >>> crf.converged_, crf.predict(X[20:])[0].shape
    (True, (5,))
    >>> print(f"{np.mean([np.mean(p != y) for p, y in zip(crf.predict(X[20:]), Y[20:])]):.2f}")
    0.23
    """

    def __init__(self, n_labels: int, loss: Union[str, ArrayLike] = "zero_one", reg: float = 1e-2,
                 max_iter: int = 500, max_treewidth: int = 8, verbose: int = 0,
                 callback: Optional[Callable[..., Any]] = None, warm_start: bool = False) -> None:
        super().__init__(n_labels, loss=loss, reg=reg, max_iter=max_iter, verbose=verbose,
                         callback=callback, warm_start=warm_start)
        self.max_treewidth = max_treewidth

    def _check_params(self):
        out = super()._check_params()
        check_scalar(self.max_treewidth, "max_treewidth", kind=numbers.Integral, low=0,
                     owner=type(self).__name__)
        return out

    def fit(self, X: Sequence[Any], Y: Sequence[ArrayLike]) -> "JunctionTreeCRF":
        """Fit by L-BFGS on the regularized mean negative log-likelihood; returns self."""
        from ..graphical.junction import encode_pairwise
        from ..graphical.trees import part_features
        k, L, reg = self._check_params()
        exs, Ys, d_v, d_e = self._examples(X, Y, k)
        Psi = sum(part_features(ex, k).T @ encode_pairwise(ex, y, k) for ex, y in zip(exs, Ys))
        res = self._lbfgs(crf_objective, n_params(d_v, d_e, k),
                          (exs, np.asarray(Psi, dtype=float), k, reg))
        return self._fitted(res, d_v, d_e, k)

    def _examples(self, X, Y, k):
        return _graph_examples(X, Y, k, self.max_treewidth, type(self).__name__)

    def predict_proba(self, X: Sequence[Any]) -> List[np.ndarray]:
        """Node marginals ``P(y_i = a | x)`` of each example: list of (n_i, k) arrays."""
        from ..graphical.junction import jt_marginals
        from ..graphical.trees import potentials
        exs, k = self._checked(X)
        return [jt_marginals(ex, *potentials(ex, self.coef_, k))[2] for ex in exs]
