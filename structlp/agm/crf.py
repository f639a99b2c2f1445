"""A conditional random field on trees: the log-linear baseline of Fathony et al. (2018)."""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import minimize

from .._validation import check_scalar
from ..base import BaseEstimator
from ..exceptions import InvalidInputError
from .game import check_loss
from .trees import n_params, potentials, split_theta


def logsumexp(x, axis=None):
    """log(sum(exp(x))) along ``axis``, stable (a lean numpy version)."""
    mx = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - mx), axis=axis, keepdims=True)) + mx
    return np.squeeze(out, axis=axis) if axis is not None else float(out.ravel()[0])


def tree_marginals(ex, b, B):
    """Sum-product (forward–backward on a tree) in log space.

    Parameters
    ----------
    ex : TreeExample; b : ndarray (n, k); B : ndarray (n - 1, k, k)

    Returns
    -------
    log_Z : float
    node : ndarray (n, k)
        ``P(y_i = a | x)``.
    edge : ndarray (n - 1, k, k)
        ``P(y_parent = a, y_child = b | x)`` per edge.
    """
    n, k = b.shape
    inc = b.copy()                      # node potential + messages from children
    msg = np.zeros((n, k))              # message from node j to its parent (in parent labels)
    for j in ex.order[::-1][:-1]:
        msg[j] = logsumexp(B[ex.edge_of[j]] + inc[j][None, :], axis=1)
        inc[ex.parents[j]] += msg[j]
    root = ex.order[0]
    log_Z = float(logsumexp(inc[root]))
    down = np.zeros((n, k))
    edge = np.zeros((n - 1, k, k))
    for j in ex.order[1:]:
        p = ex.parents[j]
        e = ex.edge_of[j]
        outside = inc[p] + down[p] - msg[j]          # (k,) over parent labels
        down[j] = logsumexp(B[e] + outside[:, None], axis=0)
        edge[e] = np.exp(outside[:, None] + B[e] + inc[j][None, :] - log_Z)
    node = np.exp(inc + down - log_Z)
    return log_Z, node, edge


class TreeCRF(BaseEstimator):
    """Log-linear model on trees, L2-regularized, fitted by L-BFGS.

    Solves

    .. math::

        \\min_\\theta\\; \\frac{\\lambda}{2}\\|\\theta\\|^2 + \\frac1m\\sum_i
        \\big[\\log Z_\\theta(x_i) - \\theta\\cdot\\Phi(x_i, y_i)\\big]

    with the features of :mod:`structlp.agm.trees`; the log-partition function
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

    Attributes
    ----------
    coef_ : ndarray; objective_ : float; n_iter_ : int
    """

    def __init__(self, n_labels, loss="zero_one", reg=1e-2, max_iter=500):
        self.n_labels = n_labels
        self.loss = loss
        self.reg = reg
        self.max_iter = max_iter

    def _check_params(self):
        name = type(self).__name__
        k = check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=2, owner=name)
        _, L = check_loss(self.loss, k, owner=name)
        reg = check_scalar(self.reg, "reg", kind=numbers.Real, low=0, owner=name)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1, owner=name)
        return k, L, reg

    def fit(self, X, Y):
        """Fit by L-BFGS on the regularized mean negative log-likelihood; returns self."""
        from .model import check_tree_dataset, _edge_onehot
        k, L, reg = self._check_params()
        exs, Ys, d_v, d_e = check_tree_dataset(X, Y, k, type(self).__name__)
        m = len(exs)
        Z = [(np.eye(k)[y], _edge_onehot(ex, y, k)) for ex, y in zip(exs, Ys)]

        def fg(theta):
            f = 0.5 * reg * theta @ theta
            gv = np.zeros((k, d_v))
            ge = np.zeros((k, k, d_e))
            for ex, y, (zv, ze) in zip(exs, Ys, Z):
                b, B = potentials(ex, theta, k)
                log_Z, node, edge = tree_marginals(ex, b, B)
                f += (log_Z - np.sum(b * zv) - np.sum(B * ze)) / m
                gv += (node - zv).T @ ex.node_features / m
                ge += np.einsum("eab,ef->abf", edge - ze, ex.edge_features) / m
            return f, np.concatenate([gv.ravel(), ge.ravel()]) + reg * theta

        res = minimize(fg, np.zeros(n_params(d_v, d_e, k)), jac=True, method="L-BFGS-B",
                       options={"maxiter": int(self.max_iter), "gtol": 1e-7})
        self.coef_ = res.x
        self.theta_node_, self.theta_edge_ = split_theta(res.x, d_v, d_e, k)
        self.objective_ = float(res.fun)
        self.n_iter_ = int(res.nit)
        self.n_features_in_ = (d_v, d_e)
        self._fg = fg
        return self

    def _checked(self, X):
        from .model import check_tree_dataset
        self._check_fitted()
        k = self._check_params()[0]
        exs, _, d_v, d_e = check_tree_dataset(X, None, k, type(self).__name__)
        if d_v != self.n_features_in_[0]:
            raise InvalidInputError(
                f"X has {d_v} node features; the model was fitted with {self.n_features_in_[0]}.")
        return exs, k

    def predict_proba(self, X):
        """Node marginals ``P(y_i = a | x)`` of each example: list of (n_i, k) arrays."""
        exs, k = self._checked(X)
        return [tree_marginals(ex, *potentials(ex, self.coef_, k))[1] for ex in exs]

    def predict(self, X, loss=None):
        """Bayes-optimal labelling for ``loss`` (default: the ``loss`` parameter).

        Returns
        -------
        list of int arrays (n_i,): ``argmin_a sum_b L[a, b] P(y_i = b | x)`` per node.
        """
        k = self._check_params()[0]
        L = self._check_params()[1] if loss is None else check_loss(loss, k, "TreeCRF.predict")[1]
        return [np.argmin(P @ L.T, axis=1) for P in self.predict_proba(X)]
