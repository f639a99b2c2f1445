"""Loss matrices over labels, shared by the labelling structures and the adversarial models.

A per-node loss between a predicted and a true label is a ``(n_labels, n_labels)`` matrix
``L[predicted, true]``; :func:`loss_matrix` builds the three named ones and
:func:`check_loss` validates a name or a matrix.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from ..exceptions import InvalidParameterError
from ..utils.validation import check_choice, check_finite_array, check_scalar

#: Losses with a closed-form node game.
NAMED_LOSSES = ("zero_one", "absolute", "squared")


def loss_matrix(loss: str, n_labels: int) -> np.ndarray:
    """The (k, k) matrix of a named loss (labels 0..k-1), or the given matrix checked.

    Parameters
    ----------
    loss : {"zero_one", "absolute", "squared"} or array of shape (k, k)
    n_labels : int

    Returns
    -------
    ndarray, shape (n_labels, n_labels)
        ``L[j, b]`` = loss of predicting ``j`` when the true label is ``b``.

    Examples
    --------
    >>> from structlp.agm import loss_matrix
    >>> loss_matrix("absolute", 3)
    array([[0., 1., 2.],
           [1., 0., 1.],
           [2., 1., 0.]])
    """
    k = check_scalar(n_labels, "n_labels", kind=numbers.Integral, low=1, owner="loss_matrix")
    if isinstance(loss, str):
        check_choice(loss, "loss", NAMED_LOSSES)
        return _named(loss, int(k))
    L = check_finite_array(loss, "loss matrix", ndim=2)
    if L.shape != (k, k):
        raise InvalidParameterError(
            f"The loss matrix must have shape (n_labels, n_labels) = ({k}, {k}); got {L.shape}.")
    return L


@functools.lru_cache(maxsize=64)
def _named(loss: str, k: int) -> np.ndarray:
    """A named loss matrix, built once per (name, k) (read-only: it is shared)."""
    idx = np.arange(k)
    if loss == "zero_one":
        L = 1.0 - np.eye(k)
    else:
        diff = np.abs(idx[:, None] - idx[None, :]).astype(float)
        L = diff if loss == "absolute" else diff ** 2
    L.setflags(write=False)
    return L


def check_loss(loss, n_labels, owner=None, allow_negative=False):
    """Validate ``loss`` (a name or a matrix); return ``(name_or_None, L)``."""
    if isinstance(loss, str):
        if loss not in NAMED_LOSSES:
            where = f" of {owner}" if owner else ""
            raise InvalidParameterError(
                f"The 'loss' parameter{where} must be one of {list(NAMED_LOSSES)} or a "
                f"(n_labels, n_labels) matrix; got {loss!r}.")
        return loss, loss_matrix(loss, n_labels)
    L = loss_matrix(loss, n_labels)
    if not allow_negative and np.any(L < 0):
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The loss matrix{where} must have non-negative entries; got minimum {L.min():g}.")
    return None, L
