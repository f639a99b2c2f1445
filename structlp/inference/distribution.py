"""The Gibbs distribution of a structured model: log-partition, marginals, exact samples.

For an example ``x`` with part scores ``s`` (shape (L,), ``L = model.n_parts(x)``) the
Gibbs distribution over the outputs ``y`` of ``x`` is

.. math::

    p(y) = \\exp(s \\cdot \\mu(y) - \\log Z(s)),\\qquad
    \\log Z(s) = \\log \\sum_{y} \\exp(s \\cdot \\mu(y)),

and its marginals are ``E_p[mu(y)] = grad log Z(s)`` (a point of the output polytope).

A model offers them through optional hooks (a structure declared in one file gets the
public functions by defining them; nothing in structlp needs editing):

``log_partition(x, scores) -> (log_Z: float, marginals: (L,) array)``
    ``x`` as ``model.check_x`` returns it, ``scores`` a finite float array (L,).
``sample(x, scores, n, rng) -> list of n outputs``
    Independent exact draws from ``p`` (outputs as ``model.decode`` gives them),
    ``rng`` a :class:`numpy.random.Generator`.

The built-in structures with these hooks: :class:`~structlp.structures.TreeLabeling`
(chains and trees: sum-product, forward filtering-backward sampling),
:class:`~structlp.structures.JunctionTreeLabeling` (the same on the junction tree) and
:class:`~structlp.structures.Arborescence` (the matrix-tree theorem, Koo et al. 2007;
sampling by sequential conditioning).  Elsewhere (loopy graphs, general matchings) the
functions raise :class:`~structlp.exceptions.InvalidParameterError` naming the alternatives.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, List, Tuple

import numpy as np

from ..exceptions import InvalidParameterError, OracleError
from ..utils.validation import check_part_scores, check_random_state, check_scalar

if TYPE_CHECKING:  # pragma: no cover
    from ..model import StructuredModel

#: What to use where a structure has no exact log-partition or sampler.
ALTERNATIVES = ("the SparseMAP layer (structlp.layers.sparsemap: sparse marginals over a few "
                "outputs) or perturb-and-MAP (structlp.layers.fy_loss(kind='perturbed'): "
                "argmaxes of Gaussian-perturbed scores, through the model's MAP oracle)")


def check_example_scores(model: "StructuredModel", x: Any, scores: Any,
                         owner: str) -> Tuple[Any, np.ndarray]:
    """``(model.check_x(x), scores)`` with ``scores`` a finite float array of shape
    ``(model.n_parts(x),)``; a clear error otherwise."""
    from ..model import StructuredModel
    if not isinstance(model, StructuredModel):
        raise InvalidParameterError(
            f"model of {owner} must be a structlp StructuredModel; got {type(model).__name__}.")
    xc = model.check_x(x)
    L = int(model.n_parts(xc))
    return xc, check_part_scores(scores, L, "scores", allow_int=True,
                                 context=f"(model.n_parts(x) = {L} for {type(model).__name__})")


def _missing(model, what, owner):
    name = type(model).__name__
    return InvalidParameterError(
        f"{owner}: {name} has no exact {what} (it defines no {owner}(x, scores...) hook; "
        "exact ones exist for TreeLabeling (chains, trees), JunctionTreeLabeling, "
        "GraphLabeling with a junction tree, SemiMarkov and Arborescence, and for loopy "
        "graphs or general matchings the problem is #P-hard). "
        f"Use {ALTERNATIVES}.")


def log_partition(model: "StructuredModel", x: Any, scores: Any) -> Tuple[float, np.ndarray]:
    """The log-partition function of the Gibbs distribution of ``x`` and its marginals.

    .. math::

        \\log Z(s) = \\log \\sum_{y \\in \\mathcal Y(x)} \\exp(s \\cdot \\mu(y)),
        \\qquad \\nabla \\log Z(s) = E_{p_s}[\\mu(y)] ,

    computed exactly in log space (stable for large scores) by the model's
    ``log_partition(x, scores)`` hook: sum-product on chains and trees
    (:class:`~structlp.structures.TreeLabeling`) and junction trees
    (:class:`~structlp.structures.JunctionTreeLabeling`), the matrix-tree theorem on
    arborescences (:class:`~structlp.structures.Arborescence`), forward-backward over
    segments (:class:`~structlp.structures.SemiMarkov`).

    Parameters
    ----------
    model : StructuredModel
    x : an example of ``model`` (as passed to ``fit``)
    scores : array, shape (L,)
        The example's part scores, ``L = model.n_parts(x)``, in the model's part order.

    Returns
    -------
    log_Z : float
    marginals : ndarray, shape (L,)
        ``E_p[mu(y)]``, the probability of each part.

    Raises
    ------
    InvalidInputError
        ``scores`` of the wrong shape or not finite.
    InvalidParameterError
        A model without the hook (the message names the alternatives: SparseMAP,
        perturb-and-MAP).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.graphical.trees import chain
    >>> from structlp.inference import log_partition
    >>> from structlp.structures import TreeLabeling
    >>> model = TreeLabeling(n_labels=2)
    >>> x = chain(np.zeros((3, 1)), np.zeros((2, 1)))     # 3 nodes: 8 labellings
    >>> log_Z, mu = log_partition(model, x, np.zeros(model.n_parts(model.check_x(x))))
    >>> bool(np.isclose(log_Z, np.log(8))), np.round(mu[:2], 6).tolist()
    (True, [0.5, 0.5])
    """
    xc, s = check_example_scores(model, x, scores, "log_partition")
    hook = getattr(model, "log_partition", None)
    if hook is None:
        raise _missing(model, "log-partition function", "log_partition")
    log_Z, mu = hook(xc, s)
    mu = np.asarray(mu, dtype=float)
    if mu.shape != s.shape or not np.isfinite(log_Z) or not np.all(np.isfinite(mu)):
        raise OracleError(
            f"{type(model).__name__}.log_partition(x, scores) must return a finite log Z and "
            f"finite marginals of shape {s.shape}; got log Z = {log_Z!r} and marginals of "
            f"shape {mu.shape}.")
    return float(log_Z), mu


def marginals(model: "StructuredModel", x: Any, scores: Any) -> np.ndarray:
    """The marginals ``E_p[mu(y)]`` of the Gibbs distribution ``p(y) ∝ exp(s . mu(y))``.

    The second output of :func:`log_partition` (the gradient of ``log Z``): the
    probability of each part, a point of the output polytope.

    Parameters
    ----------
    model : StructuredModel
    x : an example of ``model``
    scores : array, shape (L,)

    Returns
    -------
    ndarray, shape (L,)

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.graphical.trees import chain
    >>> from structlp.inference import marginals
    >>> from structlp.structures import TreeLabeling
    >>> model = TreeLabeling(n_labels=2)
    >>> x = chain(np.zeros((2, 1)), np.zeros((1, 1)))
    >>> s = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])        # node 0 prefers label 0
    >>> np.round(marginals(model, x, s)[:2], 4).tolist()
    [0.7311, 0.2689]
    """
    return log_partition(model, x, scores)[1]


def sample(model: "StructuredModel", x: Any, scores: Any, n: int = 1,
           random_state: Any = None) -> List[Any]:
    """``n`` independent exact samples of the Gibbs distribution ``p(y) ∝ exp(s . mu(y))``.

    By the model's ``sample(x, scores, n, rng)`` hook: forward filtering-backward
    sampling on chains, trees, junction trees and semi-Markov segmentations, sequential
    conditioning with the matrix-tree theorem on arborescences.

    Parameters
    ----------
    model : StructuredModel
    x : an example of ``model``
    scores : array, shape (L,)
    n : int >= 1
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    list of n outputs (as ``model.decode`` gives them)

    Raises
    ------
    InvalidInputError
        ``scores`` of the wrong shape or not finite.
    InvalidParameterError
        Bad ``n``; a model without an exact sampler (the message names the
        alternatives: SparseMAP, perturb-and-MAP).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.graphical.trees import chain
    >>> from structlp.inference import sample
    >>> from structlp.structures import TreeLabeling
    >>> model = TreeLabeling(n_labels=3)
    >>> x = chain(np.zeros((4, 1)), np.zeros((3, 1)))
    >>> ys = sample(model, x, np.zeros(4 * 3 + 3 * 9), n=5, random_state=0)
    >>> len(ys), ys[0].shape
    (5, (4,))
    """
    xc, s = check_example_scores(model, x, scores, "sample")
    n = check_scalar(n, "n", kind=numbers.Integral, low=1, owner="sample")
    rng = check_random_state(random_state)
    hook = getattr(model, "sample", None)
    if hook is None:
        raise _missing(model, "sampler", "sample")
    draws = list(hook(xc, s, int(n), rng))
    if len(draws) != n:
        raise OracleError(f"{type(model).__name__}.sample(x, scores, n, rng) must return n = "
                          f"{n} outputs; got {len(draws)}.")
    return draws
