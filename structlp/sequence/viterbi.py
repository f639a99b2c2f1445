"""Decoding in the tropical semiring: Viterbi and loss-augmented Viterbi over C = A o B.

``loss_augmented_viterbi`` solves ``max_y w . Psi(x, y) + L(y, y_true)`` over
``y in Delta^l`` (``l = len(y_true)``) by a (max, +) pass over the lattice
``C``; this is the separation oracle of structured-SVM learners, so they can
train with edit distance, Smith-Waterman or n-gram losses.  ``viterbi`` is the
same pass with no loss (``argmax_y w . Psi(x, y)``).
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple, cast

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_scalar
from .automata import Lattice, build_loss_automaton
from .features import MarkovFeatures
from .losses import SequenceLoss, ZeroLoss
from .softmax_margin import _check_loss_features, check_weights, compile_example

__all__ = ["viterbi", "loss_augmented_viterbi", "structured_hinge"]


def viterbi(w: ArrayLike, x: Any, features: MarkovFeatures,
            length: Optional[int] = None) -> np.ndarray:
    """Highest-scoring output ``argmax_{y in Delta^l} w . Psi(x, y)``.

    Parameters
    ----------
    w : array, shape (d,)
    x : input read by ``features``
    features : MarkovFeatures
    length : int >= 1 or None
        Output length ``l``; default ``features.output_length(x)`` (``len(x)``).

    Returns
    -------
    y : int array, shape (l,)

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, viterbi
    >>> # bigram weights: repeating a symbol scores 1
    >>> w = np.array([1.0, -1.0, -1.0, 1.0])
    >>> viterbi(w, None, BigramFeatures(2), length=4)
    array([0, 0, 0, 0])
    >>> # changing scores 1: alternate
    >>> viterbi(-w, None, BigramFeatures(2), length=4)
    array([0, 1, 0, 1])
    """
    _check_loss_features(ZeroLoss(), features)
    w = check_weights(w, features)
    x = features.check_input(x)
    l = features.output_length(x) if length is None else check_scalar(
        length, "length", kind=numbers.Integral, low=1, owner="viterbi")
    tables = features.tables(x, l)
    lattice = _plain_lattice(features.alphabet_size, features.order, l)
    y, _ = lattice.best_path([tab @ w for tab in tables])
    return y


def _plain_lattice(k, q, l, _cache={}):
    key = (k, q, l)
    if key not in _cache:
        B = build_loss_automaton(ZeroLoss(), np.zeros(l, np.int64), l, k)
        _cache[key] = Lattice(B, k, q)
    return _cache[key]


def loss_augmented_viterbi(w: ArrayLike, x: Any, y_true: ArrayLike, loss: SequenceLoss,
                           features: MarkovFeatures) -> Tuple[np.ndarray, float]:
    """Most violating output ``argmax_{y in Delta^l} w . Psi(x, y) + L(y, y_true)``.

    A (max, +) dynamic program over ``C = A o B`` (``B`` the deterministic loss
    automaton), exact for every loss of :mod:`structlp.sequence.losses`.

    Returns
    -------
    y : int array, shape (l,) with ``l = len(y_true)``
    value : float
        ``w . Psi(x, y) + L(y, y_true)`` at the maximizer.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, HammingLoss, loss_augmented_viterbi
    >>> w = np.array([1.0, -1.0, -1.0, 1.0])           # rewards repeating a symbol
    >>> y, value = loss_augmented_viterbi(w, None, np.array([0, 0, 0]), HammingLoss(), BigramFeatures(2))
    >>> y, value                       # all ones: 3 mistakes and 2 repeats
    (array([1, 1, 1]), 5.0)
    """
    _check_loss_features(loss, features)
    w = check_weights(w, features)
    ex = compile_example(x, y_true, loss, features, "automata")
    return cast(Lattice, ex.lattice).best_path(ex.thetas(w))


def structured_hinge(w: ArrayLike, x: Any, y_true: ArrayLike, loss: SequenceLoss,
                     features: MarkovFeatures) -> Tuple[float, np.ndarray]:
    """Structured hinge ``max_y [w . Psi(x, y) + L(y, y_true)] - w . Psi(x, y_true)`` and a subgradient.

    Returns
    -------
    value : float
    subgradient : array, shape (d,)
        ``Psi(x, y_hat) - Psi(x, y_true)`` at the loss-augmented maximizer ``y_hat``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, HammingLoss, structured_hinge
    >>> w = np.array([1.0, -1.0, -1.0, 1.0])
    >>> h, g = structured_hinge(w, None, np.array([0, 0, 0]), HammingLoss(), BigramFeatures(2))
    >>> # max_y [w.Psi(y) + L] - w.Psi(y_true) = 5 - 2
    >>> h, g
    (3.0, array([-2.,  0.,  0.,  2.]))
    """
    _check_loss_features(loss, features)
    w = check_weights(w, features)
    ex = compile_example(x, y_true, loss, features, "automata")
    y_hat, best = cast(Lattice, ex.lattice).best_path(ex.thetas(w))
    psi_hat = features.joint_feature(x, y_hat)
    return best - float(w @ ex.psi_true), psi_hat - ex.psi_true
