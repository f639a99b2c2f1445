"""Fenchel-Young losses of part scores (Blondel, Martins & Niculae, JMLR 2020) and SPO+.

For one example ``x`` with outputs ``Y(x)`` (0/1 part vectors), part scores ``theta``
(L,) and the true output ``y`` (part vector ``mu_y``), a Fenchel-Young loss is

.. math::

    L_\\Omega(\\theta; y) = \\Omega^*(\\theta) + \\Omega(\\mu_y) - \\theta \\cdot \\mu_y
    \\;\\ge 0, \\qquad \\nabla_\\theta L_\\Omega = \\hat\\mu_\\Omega(\\theta) - \\mu_y ,

with ``Omega`` a regulariser restricted to the hull of ``Y(x)`` and ``mu_hat_Omega(theta)
= grad Omega*(theta)`` its regularised prediction.  The kinds of :func:`fy_loss`:

========== ================================= ============================================
kind       ``Omega``                         prediction ``mu_hat`` (gradient + ``mu_y``)
========== ================================= ============================================
sparsemap  ``1/2 |mu|^2``                    the projection of ``theta`` (SparseMAP)
crf        ``-entropy``                      the marginals of the Gibbs distribution
perceptron ``0``                             the MAP output ``argmax theta . mu``
hinge      ``-loss(mu)`` (cost-augmented)    ``argmax (theta + c) . mu`` (Taskar's hinge)
perturbed  Berthet et al. (2020)             ``E argmax (theta + sigma Z) . mu``
========== ================================= ============================================
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..exceptions import InvalidParameterError
from ..utils.validation import check_part_scores, check_random_state, check_scalar
from .oracle import (ExampleOracle, check_model, dot, encode_solution,
                     prepare_example)
from .projection import DEFAULT_MAX_ITER, DEFAULT_TOL, check_options, project

#: The kinds of :func:`fy_loss`.
KINDS = ("sparsemap", "hinge", "perceptron", "crf", "perturbed")
#: Options each kind takes (beyond the arguments).
OPTIONS: Dict[str, Tuple[str, ...]] = {
    "sparsemap": ("tol", "max_iter"), "hinge": (), "perceptron": (), "crf": (),
    "perturbed": ("n_samples", "sigma", "random_state")}
#: Default Monte-Carlo samples of the perturbed loss.
DEFAULT_N_SAMPLES = 100


class LossResult(tuple):
    """``(loss, grad)`` of one example, with the certificate as attributes.

    Unpacks as the pair ``loss, grad = fy_loss(...)``.

    Attributes
    ----------
    loss : float
    grad : ndarray, shape (L,)
        Gradient with respect to ``theta`` (``c_hat`` for SPO+).
    kind : str
    prediction : ndarray, shape (L,)
        The regularised prediction ``mu_hat`` (``grad + mu_y``).
    gap : float or None
        ``"sparsemap"``: the projection's Frank-Wolfe gap, which bounds the loss's error
        (the loss computed is at most ``gap`` below the exact one).  None for the kinds
        computed exactly (one call of an exact oracle, or exact marginals): nothing was
        iterated, so no gap exists.
    certified : bool
        ``"sparsemap"``: the projection is certified (``gap`` under its threshold); the
        exact kinds: True; ``"perturbed"``: False (a Monte-Carlo estimate; see
        ``stderr``).
    stderr : float or None
        ``"perturbed"``: the Monte-Carlo standard error of ``loss``.
    grad_stderr : ndarray or None
        ``"perturbed"``: the standard error of each entry of ``grad``.
    n_oracle_calls : int
    projection : SparseMAPResult or None
        ``"sparsemap"``: the projection (support, weights).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import LossResult, fy_loss
    >>> res = fy_loss(BipartiteMatching(), np.zeros((2, 2, 1)), np.array([1.0, 0.6, 0.0, 0.8]),
    ...               np.eye(2), kind="sparsemap")
    >>> isinstance(res, LossResult), round(res.loss, 6), res.certified
    (True, 0.08, True)
    >>> loss, grad = res                      # unpacks as a pair
    >>> res.prediction.round(3).tolist()      # mu_hat = grad + mu_y
    [0.8, 0.2, 0.2, 0.8]
    """

    loss: float
    grad: np.ndarray
    kind: str
    prediction: np.ndarray
    gap: Optional[float]
    certified: bool
    stderr: Optional[float]
    grad_stderr: Optional[np.ndarray]
    n_oracle_calls: int
    projection: Any

    def __new__(cls, loss: float, grad: np.ndarray, **info: Any) -> "LossResult":
        self = super().__new__(cls, (float(loss), grad))
        self.loss, self.grad = float(loss), grad
        self.kind = info.pop("kind")
        self.prediction = info.pop("prediction")
        self.gap = info.pop("gap", None)
        self.certified = info.pop("certified", True)
        self.stderr = info.pop("stderr", None)
        self.grad_stderr = info.pop("grad_stderr", None)
        self.n_oracle_calls = info.pop("n_oracle_calls", 0)
        self.projection = info.pop("projection", None)
        if info:
            raise TypeError(f"LossResult got unknown fields {sorted(info)}.")
        return self

    def __repr__(self) -> str:
        extra = f", gap={self.gap:.3g}" if self.gap is not None else ""
        if self.stderr is not None:
            extra += f", stderr={self.stderr:.3g}"
        return (f"LossResult(kind={self.kind!r}, loss={self.loss:.6g}{extra}, "
                f"certified={self.certified})")


def check_kind_options(kind: Any, opts: Dict[str, Any], owner: str) -> Dict[str, Any]:
    """Check ``kind`` and its options; return them with defaults filled in."""
    if kind not in KINDS:
        raise InvalidParameterError(
            f"The 'kind' parameter of {owner} must be one of {list(KINDS)}; got {kind!r}.")
    allowed = OPTIONS[kind]
    extra = sorted(set(opts) - set(allowed))
    if extra:
        raise InvalidParameterError(
            f"{owner} with kind={kind!r} takes the options {list(allowed) or 'none'}; got "
            f"{extra}.")
    out = dict(opts)
    if kind == "sparsemap":
        out["tol"], out["max_iter"] = check_options(
            opts.get("tol", DEFAULT_TOL), opts.get("max_iter", DEFAULT_MAX_ITER), owner)
    elif kind == "perturbed":
        out["n_samples"] = check_scalar(opts.get("n_samples", DEFAULT_N_SAMPLES), "n_samples",
                                        kind=numbers.Integral, low=2, owner=owner)
        out["sigma"] = check_scalar(opts.get("sigma", 1.0), "sigma", low=0.0,
                                    low_inclusive=False, owner=owner)
        out["random_state"] = check_random_state(opts.get("random_state"), owner=owner)
    return out


def fy_loss(model: Any, x: Any, theta: Any, y: Any, kind: str = "sparsemap",
            **opts: Any) -> LossResult:
    """A Fenchel-Young loss of part scores ``theta`` against the output ``y``, and its gradient.

    .. math::

        L(\\theta; y) = \\Omega^*(\\theta) + \\Omega(\\mu_y) - \\theta \\cdot \\mu_y,
        \\qquad \\nabla_\\theta L = \\hat\\mu(\\theta) - \\mu_y

    (``mu_y`` the part vector of ``y``), for the regulariser ``Omega`` of ``kind``:

    * ``"sparsemap"``: ``Omega = 1/2 |mu|^2`` on the hull, so ``L = theta . mu* - 1/2
      |mu*|^2 + 1/2 |mu_y|^2 - theta . mu_y`` with ``mu*`` the SparseMAP projection
      (:func:`~structlp.layers.sparsemap`); options ``tol``, ``max_iter``.
    * ``"hinge"``: Taskar's structured hinge ``max_mu (theta + c) . mu + d - theta .
      mu_y`` with the model's task loss ``loss(mu) = d + c . mu``
      (``model.loss_coefficients(x, y)``); gradient ``mu_hat - mu_y``, ``mu_hat`` the
      loss-augmented argmax.
    * ``"perceptron"``: ``max_mu theta . mu - theta . mu_y``.
    * ``"crf"``: ``log Z(theta) - theta . mu_y``, ``log Z = log sum_{y'} exp(theta .
      mu_y')``; gradient: the marginals minus ``mu_y``.  Exact on chains and trees
      (:class:`~structlp.structures.TreeLabeling`), junction trees and arborescences
      (the models with a ``log_partition`` hook, see
      :func:`structlp.inference.log_partition`); other models raise an error naming
      ``"sparsemap"`` and ``"perturbed"``.
    * ``"perturbed"``: ``F(theta) - theta . mu_y`` with ``F(theta) = E max_mu (theta +
      sigma Z) . mu``, ``Z`` standard Gaussian (Berthet et al. 2020; the constant
      ``sigma Omega(mu_y)`` is left out: it does not depend on ``theta``), estimated on
      ``n_samples`` draws; gradient ``E argmax - mu_y`` on the same draws; options
      ``n_samples`` (default 100), ``sigma`` (1.0), ``random_state``.  The Monte-Carlo
      standard errors are reported.

    Parameters
    ----------
    model : StructuredModel
    x : one example of ``model``
    theta : array, shape (L,)
        Part scores, ``L = model.n_parts(x)``, in the model's part order.
    y : an output of ``x`` (as the model holds outputs: ``model.encode(x, y)`` is its
        part vector), checked to be a vertex of the declared polytope.
    kind : {"sparsemap", "hinge", "perceptron", "crf", "perturbed"}

    Returns
    -------
    LossResult
        Unpacks as ``(loss, grad)``, ``grad`` of shape (L,); attributes ``gap``,
        ``certified``, ``stderr``, ``prediction`` (see :class:`LossResult`).

    Raises
    ------
    InvalidInputError
        ``theta`` of the wrong length, NaN, infinite, complex or integer.
    InvalidOutputError
        ``y`` is not an output of ``x``.
    InvalidParameterError
        An unknown ``kind`` or option; ``"crf"`` on a model without exact marginals.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import fy_loss
    >>> x, y = np.zeros((2, 2, 1)), np.eye(2)
    >>> theta = np.array([1.0, 0.6, 0.0, 0.8])
    >>> loss, grad = fy_loss(BipartiteMatching(), x, theta, y, kind="sparsemap")
    >>> round(loss, 6), grad.round(3).tolist()
    (0.08, [-0.2, 0.2, 0.2, -0.2])
    >>> loss, grad = fy_loss(BipartiteMatching(), x, theta, y, kind="hinge")
    >>> round(loss, 6), grad.tolist()          # the swap: 0.6 + 0 + loss 2 - 1.8
    (0.8, [-1.0, 1.0, 1.0, -1.0])
    """
    owner = "fy_loss"
    check_model(model, owner)
    opts = check_kind_options(kind, opts, owner)
    _, theta, oracle = prepare_example(model, x, theta)
    mu_y = oracle.encode_output(y)
    return example_loss(oracle, theta, y, mu_y, kind, opts)


def example_loss(oracle: ExampleOracle, theta: np.ndarray, y: Any, mu_y: np.ndarray,
                 kind: str, opts: Dict[str, Any]) -> LossResult:
    """:func:`fy_loss` on a prepared example (checked ``theta``, ``y`` and its encoding)."""
    ty = dot(theta, mu_y)
    if kind == "sparsemap":
        res = project(oracle, theta, opts["tol"], opts["max_iter"])
        mu = res.mu
        loss = dot(theta, mu) - 0.5 * dot(mu, mu) + 0.5 * dot(mu_y, mu_y) - ty
        return LossResult(max(loss, 0.0), mu - mu_y, kind=kind, prediction=mu, gap=res.gap,
                          certified=res.certified, n_oracle_calls=oracle.n_calls,
                          projection=res)
    if kind in ("hinge", "perceptron"):
        nz = np.flatnonzero(mu_y)
        if kind == "hinge":
            model = oracle.model
            c, d = model.checked_loss(oracle.x, y, mu_y)
            aug = theta + c
        else:
            aug, d = theta, 0.0
        mu = oracle(aug, truth=(nz, mu_y[nz]))
        loss = dot(aug, mu) + d - ty
        return LossResult(max(loss, 0.0), mu - mu_y, kind=kind, prediction=mu,
                          n_oracle_calls=oracle.n_calls)
    if kind == "crf":
        from .crf import log_partition_of
        logz, marg = log_partition_of(oracle.model, oracle.x, theta)
        return LossResult(max(logz - ty, 0.0), marg - mu_y, kind=kind, prediction=marg)
    # perturbed
    rng, n, sigma = opts["random_state"], opts["n_samples"], opts["sigma"]
    Z = rng.standard_normal((n, theta.size))
    P = theta + sigma * Z
    mus = np.empty_like(P)
    for k in range(n):
        mus[k] = oracle(P[k])
    vals = np.einsum("ij,ij->i", P, mus)
    mean = mus.mean(axis=0)
    root = math.sqrt(n)
    return LossResult(float(vals.mean()) - ty, mean - mu_y, kind=kind, prediction=mean,
                      certified=False, stderr=float(vals.std(ddof=1)) / root,
                      grad_stderr=mus.std(axis=0, ddof=1) / root,
                      n_oracle_calls=oracle.n_calls)


def spo_plus(model: Any, x: Any, c_hat: Any, c: Any, w: Any = None) -> LossResult:
    """Elmachtoub & Grigas's SPO+ loss of a predicted cost ``c_hat`` against the true cost ``c``.

    Costs are *minimised* over the outputs of ``x`` (PyEPO's convention): with ``w*(c) =
    argmin_{mu in Y(x)} c . mu``,

    .. math::

        \\ell_{SPO+}(\\hat c, c) = \\max_{\\mu \\in \\mathcal Y(x)} (c - 2\\hat c) \\cdot \\mu
        + 2 \\hat c \\cdot w^*(c) - c \\cdot w^*(c) \\;\\ge 0,

    a convex upper bound of the regret ``c . w*(c_hat) - c . w*(c)``, with the
    subgradient ``2 (w*(c) - w*(2 c_hat - c))``.  Two oracle calls (one when ``w`` is
    given).

    Parameters
    ----------
    model : StructuredModel
    x : one example of ``model``
    c_hat, c : arrays, shape (L,)
        Predicted and true part costs, ``L = model.n_parts(x)``.
    w : an output of ``x``, optional
        ``w*(c)`` when already known (solved once per training instance): an output as the
        model holds them, or its 0/1 part vector (L,); checked to be an output of ``x``
        (not to be optimal).

    Returns
    -------
    LossResult
        Unpacks as ``(loss, grad)``, ``grad`` the subgradient with respect to ``c_hat``;
        ``prediction`` is ``w*(2 c_hat - c)``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import spo_plus
    >>> x = np.zeros((2, 2, 1))
    >>> c = np.array([1.0, 3.0, 2.0, 1.0])          # the identity costs 2, the swap 5
    >>> loss, grad = spo_plus(BipartiteMatching(), x, c_hat=-c, c=c)
    >>> loss, grad.tolist()                        # (c - 2c_hat) . swap + 2c_hat . w* - c . w*
    (9.0, [2.0, -2.0, -2.0, 2.0])
    """
    owner = "spo_plus"
    check_model(model, owner)
    x, c_hat, oracle = prepare_example(model, x, c_hat, "c_hat")
    c = check_part_scores(c, oracle.L, "c")
    w_true = None if w is None else encode_solution(oracle, w, "w")
    return example_spo(oracle, c_hat, c, w_true)


def example_spo(oracle: ExampleOracle, c_hat: np.ndarray, c: np.ndarray,
                w_true: Optional[np.ndarray] = None) -> LossResult:
    """:func:`spo_plus` on a prepared example."""
    if w_true is None:
        w_true = oracle(-c)
    w_tilde = oracle(c - 2.0 * c_hat)             # argmax (c - 2c_hat) = argmin (2c_hat - c)
    loss = dot(c - 2.0 * c_hat, w_tilde) + dot(2.0 * c_hat - c, w_true)
    return LossResult(max(loss, 0.0), 2.0 * (w_true - w_tilde), kind="spo+",
                      prediction=w_tilde, n_oracle_calls=oracle.n_calls)
