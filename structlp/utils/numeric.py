"""Numerical helpers shared across structlp."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

Axis = Union[None, int, Tuple[int, ...]]


def logsumexp(x: np.ndarray, axis: Axis = None) -> Union[float, np.ndarray]:
    """``log(sum(exp(x)))`` along ``axis``, shifted by the maximum for stability.

    A lean numpy version (scipy's costs about a millisecond per call in array-API
    dispatch, which dominates small lattices and trees).

    Parameters
    ----------
    x : ndarray
    axis : None, int or tuple of int
        None reduces everything and returns a float; an empty tuple returns ``x``.

    Returns
    -------
    float or ndarray
        ``x`` with the ``axis`` dimensions reduced.
    """
    if isinstance(axis, tuple) and not axis:
        return x
    mx = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - mx), axis=axis, keepdims=True)) + mx
    if axis is None:
        return float(out.ravel()[0])
    return np.squeeze(out, axis=axis)


def max_over(x: np.ndarray, axis: Optional[Tuple[int, ...]]) -> np.ndarray:
    """``x.max(axis)``; an empty tuple returns ``x`` (the max-product twin of
    :func:`logsumexp`)."""
    return np.max(x, axis=axis) if axis else x
