"""Markov features of order q: ``Psi(x, y) = sum_s psi(x, y[s-q+1:s], s)``.

A feature map is described, for one input ``x`` and output length ``l``, by
the list ``tables`` of its position tables: ``tables[s]`` (0-based position
``s``) has shape ``(k**min(q, s+1), d)`` and row ``z`` is ``psi(x, z, s+1)``
for the q-gram ``z`` ending at position ``s``, encoded in base ``k`` with the
oldest symbol most significant.  At the first positions the q-gram is shorter
(the paper's convention ``y_s = epsilon`` for ``s <= 0``).

Then ``w . Psi(x, y) = sum_s theta_s[z_s(y)]`` with ``theta_s = tables[s] @ w``,
which is all the weighted automaton ``A`` needs.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_scalar
from ..exceptions import InvalidInputError, InvalidParameterError
from ._checks import check_alphabet_size, check_sequence

__all__ = ["MarkovFeatures", "BigramFeatures", "FunctionFeatures", "EmissionFeatures",
           "StackedFeatures", "gram_index"]


def gram_index(y: ArrayLike, t: int, k: int, q: int) -> np.ndarray:
    """Base-``k`` index of the q-gram of ``y`` (int array, shape (..., l)) ending at 0-based ``t``."""
    y = np.asarray(y)
    idx = np.zeros(y.shape[:-1], dtype=np.int64)
    for s in range(max(0, t - q + 1), t + 1):
        idx = idx * k + y[..., s]
    return idx


class MarkovFeatures:
    """Base class of feature maps of Markov order ``order`` over ``alphabet_size`` symbols.

    Subclasses define ``alphabet_size``, ``order``, ``n_features`` and
    :meth:`tables`.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, MarkovFeatures
    >>> f = BigramFeatures(3)
    >>> isinstance(f, MarkovFeatures), f.alphabet_size, f.order, f.n_features
    (True, 3, 2, 9)
    >>> # a table per position: (k**min(q, s+1), d)
    >>> [t.shape for t in f.tables(None, 3)]
    [(3, 9), (9, 9), (9, 9)]
    """

    alphabet_size: int
    order: int
    n_features: int

    def tables(self, x: Any, length: int) -> List[np.ndarray]:
        """List of ``length`` arrays; entry s has shape ``(k**min(q, s+1), n_features)``."""
        raise NotImplementedError  # pragma: no cover

    def check_input(self, x: Any) -> Any:
        """Validate one input ``x`` (default: anything)."""
        return x

    def output_length(self, x: Any) -> int:
        """Default output length for input ``x`` (its length)."""
        try:
            return len(x)
        except TypeError:
            raise InvalidInputError(
                f"{type(self).__name__} cannot infer an output length from x of type "
                f"{type(x).__name__}; pass the length explicitly.") from None

    def joint_feature(self, x: Any, y: ArrayLike) -> np.ndarray:
        """``Psi(x, y)``, shape (n_features,), for one output ``y`` (1-D ints)."""
        y = check_sequence(y, "y", self.alphabet_size)
        tabs = self.tables(self.check_input(x), len(y))
        return sum(tabs[t][gram_index(y, t, self.alphabet_size, self.order)]
                   for t in range(len(y)))

    def __repr__(self):
        return f"{type(self).__name__}(alphabet_size={self.alphabet_size}, order={self.order})"


class BigramFeatures(MarkovFeatures):
    """Counts of the ``k**2`` bigrams ``(y_{s-1}, y_s)``, ``s = 2..l`` (the paper's experiment).

    ``Psi(y)[a * k + b]`` is the number of positions where ``a`` is followed
    by ``b``; the input ``x`` is ignored.  Order ``q = 2``, ``n_features = k**2``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures
    >>> f = BigramFeatures(2)                       # k**2 = 4 bigram counts
    >>> f.n_features, f.joint_feature(None, np.array([0, 1, 1, 1]))
    (4, array([0., 1., 0., 2.]))
    """

    order = 2

    def __init__(self, alphabet_size: int) -> None:
        self.alphabet_size = check_alphabet_size(alphabet_size, owner="BigramFeatures")
        self.n_features = self.alphabet_size ** 2

    def tables(self, x: Any, length: int) -> List[np.ndarray]:
        k = self.alphabet_size
        first = np.zeros((k, k * k))
        rest = np.eye(k * k)
        return [first] + [rest] * (length - 1)


class EmissionFeatures(MarkovFeatures):
    """Label-observation features for tagging: ``1[y_s = a] * 1[x_{s+o} = v]`` for offsets ``o``.

    ``x`` is a 1-D int sequence over ``n_inputs`` symbols with the output's
    length.  With ``window=w`` the offsets are ``-w..w`` (out-of-range
    positions see a padding symbol), so the model can look at neighbouring
    observations.  Order 1; ``n_features = (2 w + 1) * (n_inputs + 1) * k``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import EmissionFeatures
    >>> # window 0: (n_inputs + 1) k features
    >>> f = EmissionFeatures(alphabet_size=2, n_inputs=3)
    >>> f.n_features
    8
    >>> x = np.array([0, 2, 1])
    >>> f.joint_feature(x, np.array([1, 0, 1]))
    array([0., 1., 0., 1., 1., 0., 0., 0.])
    """

    order = 1

    def __init__(self, alphabet_size: int, n_inputs: int, window: int = 0) -> None:
        owner = "EmissionFeatures"
        self.alphabet_size = check_alphabet_size(alphabet_size, owner=owner)
        self.n_inputs = check_scalar(n_inputs, "n_inputs", kind=numbers.Integral, low=1,
                                     owner=owner)
        self.window = check_scalar(window, "window", kind=numbers.Integral, low=0, owner=owner)
        self.n_features = (2 * self.window + 1) * (self.n_inputs + 1) * self.alphabet_size

    def check_input(self, x: ArrayLike) -> np.ndarray:
        return check_sequence(x, "x", self.n_inputs)

    def tables(self, x: Any, length: int) -> List[np.ndarray]:
        x = self.check_input(x)
        if len(x) != length:
            raise InvalidInputError(
                f"EmissionFeatures needs len(x) == output length; got len(x)={len(x)} "
                f"and length={length}.")
        k, V, W = self.alphabet_size, self.n_inputs + 1, self.window
        out = []
        for s in range(length):
            tab = np.zeros((k, self.n_features))
            for o in range(-W, W + 1):
                v = x[s + o] if 0 <= s + o < length else self.n_inputs  # padding symbol
                block = ((o + W) * V + v) * k
                tab[np.arange(k), block + np.arange(k)] = 1.0
            out.append(tab)
        return out


class FunctionFeatures(MarkovFeatures):
    """User-supplied ``psi(x, z, s)`` of order ``order``.

    Parameters
    ----------
    psi : callable
        ``psi(x, z, s) -> array of shape (n_features,)``, with ``z`` a tuple of
        the last ``min(order, s)`` symbols ending at the 1-based position ``s``.
    alphabet_size, order, n_features : int >= 1

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import FunctionFeatures
    >>> # one feature: 1 when the symbol repeats the previous one
    >>> def psi(x, z, s):
    ...     return np.array([float(len(z) == 2 and z[0] == z[1])])
    >>> f = FunctionFeatures(psi, alphabet_size=2, order=2, n_features=1)
    >>> f.joint_feature(None, np.array([0, 0, 1, 1]))
    array([2.])
    """

    def __init__(self, psi: Callable[[Any, tuple, int], ArrayLike], alphabet_size: int,
                 order: int, n_features: int) -> None:
        owner = "FunctionFeatures"
        if not callable(psi):
            raise InvalidParameterError(
                f"The 'psi' parameter of {owner} must be callable psi(x, z, s). "
                f"Got {type(psi).__name__} instead.")
        self.psi = psi
        self.alphabet_size = check_alphabet_size(alphabet_size, owner=owner)
        self.order = check_scalar(order, "order", kind=numbers.Integral, low=1, owner=owner)
        self.n_features = check_scalar(n_features, "n_features", kind=numbers.Integral, low=1,
                                       owner=owner)

    def tables(self, x: Any, length: int) -> List[np.ndarray]:
        k, q, d = self.alphabet_size, self.order, self.n_features
        out = []
        for t in range(length):
            n = min(q, t + 1)
            tab = np.empty((k ** n, d))
            for i, z in enumerate(itertools.product(range(k), repeat=n)):
                v = np.asarray(self.psi(x, z, t + 1), dtype=float)
                if v.shape != (d,) or not np.all(np.isfinite(v)):
                    raise InvalidInputError(
                        f"psi(x, z={z}, s={t + 1}) must return a finite array of shape ({d},); "
                        f"got shape {v.shape}.")
                tab[i] = v
            out.append(tab)
        return out


class StackedFeatures(MarkovFeatures):
    """Concatenation of feature maps over the same alphabet (order = the largest order).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, EmissionFeatures, StackedFeatures
    >>> f = StackedFeatures([EmissionFeatures(2, 3), BigramFeatures(2)])
    >>> f.n_features, f.order
    (12, 2)
    >>> f.joint_feature(np.array([0, 2, 1]), np.array([1, 0, 0]))
    array([0., 1., 1., 0., 1., 0., 0., 0., 1., 0., 1., 0.])
    """

    def __init__(self, parts: Sequence[MarkovFeatures]) -> None:
        parts = list(parts)
        if not parts or not all(isinstance(p, MarkovFeatures) for p in parts):
            raise InvalidParameterError(
                "The 'parts' parameter of StackedFeatures must be a non-empty list of "
                f"MarkovFeatures. Got {parts!r} instead.")
        ks = {p.alphabet_size for p in parts}
        if len(ks) != 1:
            raise InvalidParameterError(
                f"The parts of StackedFeatures must share one alphabet size; got {sorted(ks)}.")
        self.parts = parts
        self.alphabet_size = ks.pop()
        self.order = max(p.order for p in parts)
        self.n_features = sum(p.n_features for p in parts)

    def check_input(self, x: Any) -> Any:
        return x

    def output_length(self, x: Any) -> int:
        return self.parts[0].output_length(x)

    def tables(self, x: Any, length: int) -> List[np.ndarray]:
        k, q = self.alphabet_size, self.order
        per_part = [p.tables(x, length) for p in self.parts]
        out = []
        for t in range(length):
            n = min(q, t + 1)
            blocks = []
            for p, tabs in zip(self.parts, per_part):
                m = min(p.order, t + 1)
                # a row of the order-n table sees the last m symbols: drop the older ones
                rows = np.arange(k ** n) % (k ** m)
                blocks.append(tabs[t][rows])
            out.append(np.concatenate(blocks, axis=1))
        return out
