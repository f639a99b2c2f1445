"""The softmax-margin objective of one example and its exact gradient (Cortes et al. 2018, Eq. 1).

    F_i(w) = log sum_{y in Delta^l} exp( L(y, y_i) - w . (Psi(x_i, y_i) - Psi(x_i, y)) )

    grad F_i(w) = sum_{s, z} Q_w(z, s) psi(x_i, z, s) - Psi(x_i, y_i)

with ``Q_w(z, s)`` the probability, under ``p(y) ∝ exp(L(y, y_i) + w . Psi(x_i, y))``,
that the q-gram ending at position ``s`` is ``z``.

Two methods:

``"automata"``
    the paper's construction: the minimal deterministic loss automaton ``B``,
    the composition ``C = A o B`` and forward-backward on ``C`` —
    time ``O(|C|)``, linear in ``l`` when ``B`` has a bounded number of
    states per layer.
``"naive"``
    enumeration of all ``k**l`` outputs (vectorized, in chunks) — the oracle,
    for tests and tiny ``l``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_bool, check_choice, check_finite_array
from ..exceptions import InvalidInputError, InvalidParameterError
from ._checks import check_sequence
from .automata import Lattice, build_loss_automaton
from .features import MarkovFeatures, gram_index
from .losses import SequenceLoss

__all__ = ["softmax_margin", "CompiledExample", "compile_example"]

METHODS = ("automata", "naive")
#: Largest number of outputs ``k**l`` that ``method="naive"`` enumerates.
NAIVE_MAX_OUTPUTS = 1 << 24


class CompiledExample:
    """One training example prepared for repeated evaluations of ``F_i`` and its gradient.

    Holds the position tables of the features (shape ``(k**min(q, s+1), d)``
    each), ``Psi(x_i, y_i)`` and, for ``method="automata"``, the lattice
    ``C = A o B`` (built once; only ``w`` changes between calls).

    Attributes
    ----------
    tables : list of l arrays
    psi_true : array, shape (d,)
    lattice : Lattice or None
    automaton_info : dict or None
        Size of the loss automaton ``B`` and of ``C``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, EditDistance, compile_example, softmax_margin
    >>> y_true = np.array([0, 1, 1])
    >>> ex = compile_example(None, y_true, EditDistance(), BigramFeatures(2))
    >>> w = np.random.default_rng(0).normal(size=4)
    >>> # the lattice is built once, reused per w
    >>> value, grad = ex.value_and_grad(w)
    >>> bool(np.isclose(value, softmax_margin(w, None, y_true, EditDistance(), BigramFeatures(2))[0]))
    True
    >>> ex.psi_true
    array([0., 1., 0., 1.])
    """

    def __init__(self, x: Any, y_true: np.ndarray, loss: SequenceLoss, features: MarkovFeatures,
                 method: str = "automata", max_states: int = 500_000) -> None:
        self.loss, self.features, self.method = loss, features, method
        self.y_true = y_true
        self.length = len(y_true)
        self.tables = features.tables(x, self.length)
        k, q = features.alphabet_size, features.order
        self.psi_true = sum(self.tables[t][gram_index(y_true, t, k, q)]
                            for t in range(self.length))
        self.lattice: Optional[Lattice] = None
        self.automaton_info: Optional[Dict[str, Any]] = None
        if method == "automata":
            B = build_loss_automaton(loss, y_true, self.length, k, max_states=max_states)
            self.lattice = Lattice(B, k, q)
            self.automaton_info = dict(B.info(), lattice_states=self.lattice.n_states,
                                       lattice_arcs=self.lattice.n_arcs)

    def thetas(self, w: np.ndarray) -> List[np.ndarray]:
        """Per-position q-gram scores ``theta_t = tables[t] @ w``."""
        return [tab @ w for tab in self.tables]

    def value_and_grad(self, w: np.ndarray) -> Tuple[float, np.ndarray]:
        """``(F_i(w), grad F_i(w))``."""
        thetas = self.thetas(w)
        if self.lattice is not None:     # method "automata"
            logz, Q = self.lattice.expected_grams(thetas)
        else:
            logz, Q = _naive_expected_grams(thetas, self.loss, self.y_true,
                                            self.features.alphabet_size, self.features.order)
        value = logz - float(w @ self.psi_true)
        grad = sum(Qt @ tab for Qt, tab in zip(Q, self.tables)) - self.psi_true
        return value, grad


def compile_example(x: Any, y_true: ArrayLike, loss: SequenceLoss, features: MarkovFeatures,
                    method: str = "automata", max_states: int = 500_000) -> CompiledExample:
    """Validate one example and return its :class:`CompiledExample`.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, HammingLoss, compile_example
    >>> ex = compile_example(None, np.array([0, 1, 1]), HammingLoss(), BigramFeatures(2))
    >>> type(ex).__name__, ex.psi_true
    ('CompiledExample', array([0., 1., 0., 1.]))
    """
    _check_loss_features(loss, features)
    check_choice(method, "method", METHODS, owner="softmax_margin")
    y_true = check_sequence(y_true, "y_true", features.alphabet_size)
    k = features.alphabet_size
    if method == "naive" and len(y_true) * math.log2(k) > math.log2(NAIVE_MAX_OUTPUTS):
        raise InvalidParameterError(
            f"method='naive' would enumerate k**l = {k}**{len(y_true)} outputs (more than "
            f"NAIVE_MAX_OUTPUTS = {NAIVE_MAX_OUTPUTS}); use method='automata' (exact, linear "
            "in l), which gives the same value and gradient.")
    x = features.check_input(x)
    return CompiledExample(x, y_true, loss, features, method, max_states=max_states)


def softmax_margin(w: ArrayLike, x: Any, y_true: ArrayLike, loss: SequenceLoss,
                   features: MarkovFeatures, method: str = "automata", return_info: bool = False
                   ) -> Union[Tuple[float, np.ndarray], Tuple[float, np.ndarray, Dict[str, Any]]]:
    r"""Softmax-margin objective of one example and its exact gradient.

    Computes

    .. math::

        F(w) = \log \sum_{y \in \Delta^l} \exp\big(L(y, y_{true})
               - w \cdot (\Psi(x, y_{true}) - \Psi(x, y))\big),
        \qquad \nabla F(w) = \mathbb{E}_{p_w}[\Psi(x, y)] - \Psi(x, y_{true}),

    with ``p_w(y) ∝ exp(L(y, y_true) + w . Psi(x, y))`` and ``l = len(y_true)``.

    Parameters
    ----------
    w : array, shape (d,)
        Weights, ``d = features.n_features``.
    x : object
        The input (whatever ``features`` reads; ignored by ``BigramFeatures``).
    y_true : int array, shape (l,)
        Reference output, symbols in ``{0..k-1}``, ``l >= 1``.
    loss : SequenceLoss
        ``EditDistance``, ``SmithWaterman``, ``NGramLoss``, ``HammingLoss``, ``ZeroLoss``.
    features : MarkovFeatures
        ``BigramFeatures(k)``, ``FunctionFeatures(psi, k, q, d)``, ...
    method : {"automata", "naive"}
        Weighted automata (linear in ``|C|``) or enumeration of ``k**l`` outputs.
    return_info : bool
        Also return a dict with the sizes of the loss automaton ``B`` and of ``C``.

    Returns
    -------
    value : float
    gradient : array, shape (d,)
    info : dict (only if ``return_info``)

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from scipy.special import logsumexp
    >>> from structlp.sequence import BigramFeatures, HammingLoss, softmax_margin
    >>> f, y_true = BigramFeatures(2), np.array([0, 1, 1])
    >>> w = np.random.default_rng(0).normal(size=4)
    >>> value, grad = softmax_margin(w, None, y_true, HammingLoss(), f)
    >>> print(f"{value:.6f}")
    4.550244
    >>> def term(y):                 # brute force over the 8 outputs y
    ...     y = np.array(y)
    ...     return HammingLoss()(y, y_true) - w @ (f.joint_feature(None, y_true) - f.joint_feature(None, y))
    >>> print(f"{logsumexp([term(y) for y in itertools.product(range(2), repeat=3)]):.6f}")
    4.550244
    """
    _check_loss_features(loss, features)
    w = check_weights(w, features)
    check_bool(return_info, "return_info", owner="softmax_margin")
    ex = compile_example(x, y_true, loss, features, method)
    value, grad = ex.value_and_grad(w)
    if return_info:
        return value, grad, (ex.automaton_info or {})
    return value, grad


def check_weights(w: ArrayLike, features: MarkovFeatures) -> np.ndarray:
    """``w`` as a finite float vector of length ``features.n_features``."""
    arr = check_finite_array(w, "w")
    if arr.shape != (features.n_features,):
        raise InvalidInputError(
            f"w must be a vector of length {features.n_features} (features.n_features of "
            f"{features!r}); got an array of shape {arr.shape}.")
    return arr


def _check_loss_features(loss: Any, features: Any) -> None:
    if not isinstance(loss, SequenceLoss):
        raise InvalidParameterError(
            "The 'loss' parameter must be a structlp.sequence loss (EditDistance, SmithWaterman, "
            f"NGramLoss, HammingLoss, ZeroLoss). Got {loss!r} instead.")
    if not isinstance(features, MarkovFeatures):
        raise InvalidParameterError(
            "The 'features' parameter must be a structlp.sequence.MarkovFeatures "
            f"(e.g. BigramFeatures(k)). Got {features!r} instead.")


def all_sequences(k: int, l: int, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
    """Rows ``start..stop-1`` of the lexicographic list of ``Delta^l``; shape (n, l)."""
    stop = k ** l if stop is None else stop
    idx = np.arange(start, stop, dtype=np.int64)
    out = np.empty((len(idx), l), dtype=np.int64)
    for t in range(l - 1, -1, -1):
        out[:, t] = idx % k
        idx //= k
    return out


def _naive_expected_grams(thetas, loss, y_true, k, q, chunk=1 << 17):
    """Enumerate ``Delta^l`` in chunks: ``log Z`` and the q-gram marginals ``Q_t``."""
    l = len(thetas)
    total = k ** l
    run_max = -np.inf
    acc = [np.zeros(len(th)) for th in thetas]   # sums scaled by exp(-run_max)
    scaled_z = 0.0
    for start in range(0, total, chunk):
        Y = all_sequences(k, l, start, min(total, start + chunk))
        grams = [gram_index(Y, t, k, q) for t in range(l)]
        v = loss.values(Y, y_true, alphabet_size=k) + sum(thetas[t][grams[t]] for t in range(l))
        m = v.max()
        if m > run_max:
            shift = np.exp(run_max - m) if np.isfinite(run_max) else 0.0
            acc = [a * shift for a in acc]
            scaled_z *= shift
            run_max = m
        p = np.exp(v - run_max)
        scaled_z += p.sum()
        for t in range(l):
            acc[t] += np.bincount(grams[t], weights=p, minlength=len(acc[t]))
    logz = run_max + np.log(scaled_z)
    return float(logz), [a / scaled_z for a in acc]

