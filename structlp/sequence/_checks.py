"""Argument checks specific to sequences (alphabet symbols, lengths)."""

from __future__ import annotations

import math
import numbers
from typing import Any, List, Optional

import numpy as np

from ..utils.validation import check_scalar
from ..exceptions import InvalidInputError, InvalidParameterError

#: Largest magnitude of an integer cost (the DP columns are int64 with 2**40 as infinity).
MAX_COST = 1 << 30


def check_alphabet_size(k: Any, name: str = "alphabet_size", owner: Optional[str] = None) -> int:
    """Check that ``k`` is an int >= 1 and return it."""
    return check_scalar(k, name, kind=numbers.Integral, low=1, owner=owner)


def check_sequence(y: Any, name: str, alphabet_size: int, *, allow_empty: bool = False,
                   ndim: int = 1) -> np.ndarray:
    """Return ``y`` as a 1-D int64 array of symbols in ``{0, ..., alphabet_size - 1}``.

    Raises :class:`InvalidInputError` naming ``name`` when ``y`` is not a
    1-D sequence of integers, is empty, or holds a symbol outside the alphabet.
    With ``ndim=2``, ``y`` is a 2-D array of sequences (one per row).
    """
    what = "a 1-D sequence" if ndim == 1 else "a 2-D array (N, l) of sequences"
    if isinstance(y, (str, bytes)):
        raise InvalidInputError(
            f"{name} must be {what} of integer symbols; got a {type(y).__name__}.")
    try:
        arr = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be {what} of integers ({exc}).") from None
    if arr.ndim != ndim:
        raise InvalidInputError(
            f"{name} must be {what} of integer symbols; got an array of shape {arr.shape}.")
    if arr.size == 0:
        if allow_empty:
            return arr.astype(np.int64)
        raise InvalidInputError(f"{name} must be a non-empty sequence; got an empty sequence.")
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer)
                                 or (np.issubdtype(arr.dtype, np.floating)
                                     and np.all(np.isfinite(arr))
                                     and np.all(arr == np.round(arr)))):
        raise InvalidInputError(
            f"{name} must contain integer symbols; got dtype {arr.dtype} "
            f"(first entry {arr.flat[0]!r}).")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= alphabet_size)
    if np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = index[0] if ndim == 1 else index
        raise InvalidInputError(
            f"{name} must contain symbols in {{0, ..., {alphabet_size - 1}}} (alphabet of size "
            f"{alphabet_size}); got symbol {int(arr[bad][0])} at position {where}.")
    return arr


def check_integer_cost(value: Any, name: str, owner: str, *, low: Optional[int] = 0) -> int:
    """Check an edit/alignment cost: an integer (or integer-valued float) >= ``low``."""
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool)
          and (isinstance(value, numbers.Integral)
               or (math.isfinite(float(value)) and float(value).is_integer())))
    if not ok or (low is not None and value < low) or abs(value) > MAX_COST:
        bound = f" >= {low}" if low is not None else ""
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be an integer{bound} of magnitude at most "
            f"2**30 (exact integer costs keep automaton states exact). Got {value!r} instead.")
    return int(value)


def check_optional_positive(value: Any, name: str, owner: str) -> Optional[float]:
    """``None`` or a float > 0."""
    if value is None:
        return None
    return check_scalar(value, name, low=0, low_inclusive=False, owner=owner)


def check_lengths(lengths: Any, n_examples: int) -> List[Optional[int]]:
    """``lengths`` of ``predict``: None (one None per example) or one length per example."""
    if lengths is None:
        return [None] * n_examples
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__"):
        raise InvalidInputError(
            f"lengths must be None or a list of {n_examples} output lengths (ints >= 1); got "
            f"{type(lengths).__name__}.")
    if len(lengths) != n_examples:
        raise InvalidInputError(
            f"lengths must have one entry per example ({n_examples}); got {len(lengths)}.")
    return list(lengths)
