"""Sequence losses L(y, y_ref) written as left-to-right dynamic programs.

Every loss is a deterministic machine that reads the predicted sequence ``y``
one symbol at a time (the reference ``y_ref`` is fixed):

* ``start()`` gives the state before any symbol,
* ``advance(states, symbols, t)`` gives the next states and the loss added by
  the step (``t`` symbols have been read after it),
* ``final(states)`` gives the loss added at the end,

so that ``L(y, y_ref) = sum of step weights + final weight``.  States are rows
of an int64 array, so equal rows are equal states.  This is exactly the
determinized loss automaton of Cortes et al. (2018) restricted to outputs of a
fixed length: :func:`structlp.sequence.automata.build_loss_automaton` expands
the reachable states layer by layer, pushes the weights and minimizes, which
gives the deterministic WFA with ``B(y) = exp(L(y, y_ref))``.  The same
machine, run over a batch of sequences, evaluates the loss directly
(``loss(y, y_ref)`` and ``loss.values(Y, y_ref)``).

Losses
------
``EditDistance(sub, ins, dele)``
    weighted Levenshtein distance (tropical loss).
``SmithWaterman(match, mismatch, gap)``
    ``SW(y_ref, y_ref) - SW(y, y_ref)`` with the best local-alignment score SW.
``NGramLoss(n, smoothing)``
    ``-log(smoothing + sum_u c_y(u) c_ref(u))`` (rational loss).
``HammingLoss()`` and ``ZeroLoss()``
    surrogates: Hamming softmax-margin, and the plain CRF (no loss).

``cap=c`` replaces a loss by ``min(L, c)`` exactly (and keeps the automaton
small); ``band=b`` (edit distance, Smith-Waterman) restricts alignments to
``|i - j| <= b``, an approximation that over-estimates the loss when every
optimal alignment leaves the band.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Optional, Protocol, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_scalar
from ..exceptions import DeclarationError, InvalidInputError, InvalidParameterError
from ._checks import (check_alphabet_size, check_integer_cost, check_optional_positive,
                      check_sequence)

__all__ = ["SequenceLoss", "EditDistance", "SmithWaterman", "NGramLoss", "HammingLoss",
           "ZeroLoss"]

_INF = 1 << 40  # "unreachable" entry of an int64 DP column (never overflows)


class LossMachine(Protocol):
    """What :meth:`SequenceLoss.dynamic_program` returns: a left-to-right machine.

    States are the rows of an int64 array of shape (n_states, width).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import HammingLoss
    >>> # reference (0, 1)
    >>> machine = HammingLoss().dynamic_program(np.array([0, 1]), 2, 2)
    >>> states = machine.start()
    >>> # read y_1 = 1
    >>> states, step = machine.advance(states, np.array([1]), 1)
    >>> step
    array([1.])
    >>> # read y_2 = 1
    >>> states, step = machine.advance(states, np.array([1]), 2)
    >>> step, machine.final(states)
    (array([0.]), array([0.]))
    """

    def start(self) -> np.ndarray:
        """The state before any symbol, shape (1, width)."""

    def advance(self, states: np.ndarray, symbols: np.ndarray,
                t: int) -> Tuple[np.ndarray, np.ndarray]:
        """Next states (n, width) and step losses (n,) after reading ``symbols`` (n,)."""

    def final(self, states: np.ndarray) -> np.ndarray:
        """The loss added at the end, shape (n,)."""


class SequenceLoss:
    """Base class: a loss ``L(y, y_ref)`` between two integer sequences.

    Subclasses implement :meth:`dynamic_program`.  Calling the loss,
    ``loss(y, y_ref)``, evaluates it for one pair; :meth:`values` for many
    predictions of the same length against one reference.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import SequenceLoss
    >>> class FirstSymbolLoss(SequenceLoss):      # 1 when the first symbols differ
    ...     kind = "tropical"
    ...     def __init__(self):
    ...         self._params = {}
    ...     def dynamic_program(self, y_ref, length, alphabet_size):
    ...         return FirstSymbolMachine(int(y_ref[0]))
    >>> # one state; the loss is paid at t = 1
    >>> class FirstSymbolMachine:
    ...     def __init__(self, first):
    ...         self.first = first
    ...     def start(self):
    ...         return np.zeros((1, 1), dtype=np.int64)
    ...     def advance(self, states, symbols, t):
    ...         return states, (t == 1) * (symbols != self.first).astype(float)
    ...     def final(self, states):
    ...         return np.zeros(len(states))
    >>> loss = FirstSymbolLoss()
    >>> loss([1, 0, 0], [0, 0, 0]), loss([0, 1, 1], [0, 0, 0])
    (1.0, 0.0)
    """

    #: "tropical" (min-plus machine) or "rational" (-log of a count).
    kind = "tropical"
    _params: Dict[str, Any]

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        """Return the machine (start/advance/final) for reference ``y_ref``."""
        raise DeclarationError(
            f"{type(self).__name__} must define dynamic_program(y_ref, length, alphabet_size) "
            "(SequenceLoss is a base class; use EditDistance, SmithWaterman, NGramLoss, ...).")

    def _alphabet_for(self, *seqs):
        return int(max(int(np.max(s)) for s in seqs if len(s)) + 1)

    def __call__(self, y: ArrayLike, y_ref: ArrayLike,
                 alphabet_size: Optional[int] = None) -> float:
        """Loss ``L(y, y_ref)`` of prediction ``y`` (1-D ints) against ``y_ref``."""
        k = np.iinfo(np.int64).max if alphabet_size is None else check_alphabet_size(
            alphabet_size)
        yy = check_sequence(y, "y", k)
        ref = check_sequence(y_ref, "y_ref", k)
        if alphabet_size is None:
            k = self._alphabet_for(yy, ref)
        return float(self.values(yy[None, :], ref, alphabet_size=k)[0])

    def values(self, Y: ArrayLike, y_ref: ArrayLike,
               alphabet_size: Optional[int] = None) -> np.ndarray:
        """Losses of the rows of ``Y`` (shape (N, l)) against ``y_ref``; shape (N,)."""
        limit = np.iinfo(np.int64).max if alphabet_size is None else check_alphabet_size(
            alphabet_size)
        Y = check_sequence(Y, "Y", limit, ndim=2)
        if Y.shape[1] == 0:
            raise InvalidInputError(
                f"Y must be a 2-D array (N, l) of sequences with l >= 1; got shape {Y.shape}.")
        ref = check_sequence(y_ref, "y_ref", limit)
        k = max(self._alphabet_for(ref), int(Y.max()) + 1) if alphabet_size is None else limit
        dp = self.dynamic_program(ref, Y.shape[1], k)
        states = np.repeat(dp.start(), Y.shape[0], axis=0)
        total = np.zeros(Y.shape[0])
        for t in range(Y.shape[1]):
            states, w = dp.advance(states, Y[:, t], t + 1)
            total += w
        return total + dp.final(states)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """Constructor parameters as a dict (``deep`` is accepted for scikit-learn's clone)."""
        return dict(self._params)


# --------------------------------------------------------------------------- edit distance

class EditDistance(SequenceLoss):
    """Weighted Levenshtein distance from ``y`` to ``y_ref`` (a tropical loss).

    ``L(y, y_ref)`` is the minimum total cost of edits turning ``y`` into
    ``y_ref``: ``sub`` to substitute a symbol, ``ins`` to insert a symbol of
    ``y_ref``, ``dele`` to delete a symbol of ``y``.

    Parameters
    ----------
    sub, ins, dele : int >= 0
        Edit costs.  They must be integers: the automaton merges states by
        exact equality of integer DP columns.
    cap : float > 0 or None
        Use ``min(L, cap)`` instead of ``L`` (exact).  The deterministic
        automaton of the uncapped loss grows exponentially with the reference
        length (about 1.9**l states per layer for unit costs); with a cap it
        is bounded by a constant per layer, so the cost is linear in ``l``.
    band : int >= 0 or None
        Approximation: only alignments with ``|i - j| <= band`` (positions in
        ``y`` and ``y_ref``) are allowed.  The banded distance is >= the true
        one and equal whenever some optimal alignment stays in the band.  The
        automaton is then bounded per layer.  Requires ``band >= |l - len(y_ref)|``.

    Examples
    --------
    >>> from structlp.sequence import EditDistance
    >>> EditDistance()([0, 1, 2], [0, 2])                   # one deletion
    1.0
    >>> # a deletion now costs 2
    >>> EditDistance(sub=1, ins=1, dele=2)([0, 1, 2], [0, 2])
    2.0
    >>> EditDistance(cap=1)([0, 0, 0], [1, 1, 1])             # min(3, cap)
    1.0
    """

    def __init__(self, sub: int = 1, ins: int = 1, dele: int = 1, *,
                 cap: Optional[float] = None, band: Optional[int] = None) -> None:
        owner = "EditDistance"
        self.sub = check_integer_cost(sub, "sub", owner)
        self.ins = check_integer_cost(ins, "ins", owner)
        self.dele = check_integer_cost(dele, "dele", owner)
        self.cap = check_optional_positive(cap, "cap", owner)
        self.band = None if band is None else check_scalar(
            band, "band", kind=numbers.Integral, low=0, owner=owner)
        self._params = dict(sub=sub, ins=ins, dele=dele, cap=cap, band=band)

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        return _EditDP(self, np.asarray(y_ref, dtype=np.int64), int(length))


class _EditDP:
    """State: the DP column D[t, 0..m] (edit distances from y[:t] to every prefix of y_ref).

    Without cap the column is stored minus its minimum and the minimum's
    increase is emitted as the step weight (this is what weighted
    determinization of the edit transducer produces).  With a cap the column
    is clipped at ``ceil(cap)`` and the whole loss is emitted at the end.
    """

    def __init__(self, loss, ref, length):
        self.loss, self.ref, self.length, self.m = loss, ref, length, len(ref)
        if loss.band is not None and loss.band < abs(length - self.m):
            raise InvalidInputError(
                f"EditDistance(band={loss.band}) cannot align a prediction of length {length} "
                f"with a reference of length {self.m}: band must be >= {abs(length - self.m)}.")
        self.clip = None if loss.cap is None else int(math.ceil(loss.cap))
        self.j = np.arange(self.m + 1)

    def _canonical(self, cols, t):
        L = self.loss
        if L.band is not None:
            cols = np.where(np.abs(self.j - t)[None, :] > L.band, _INF, cols)
        # Exact pruning: an entry whose cheapest conceivable completion costs more
        # than some entry's guaranteed completion is on no optimal alignment.
        rem_y, rem_r = self.length - t, self.m - self.j
        short = np.maximum(rem_r - rem_y, 0) * L.ins + np.maximum(rem_y - rem_r, 0) * L.dele
        lower = short if L.band is None else short * 0
        upper = np.minimum(np.minimum(rem_y, rem_r) * L.sub + short,
                           rem_y * L.dele + rem_r * L.ins)
        if L.band is None:
            best = np.min(cols + upper[None, :], axis=1)
            cols = np.where(cols + lower[None, :] > best[:, None], _INF, cols)
        if self.clip is not None:
            return np.minimum(cols, self.clip), np.zeros(len(cols))
        low = cols.min(axis=1)
        return np.minimum(cols - low[:, None], _INF), low.astype(float)

    def start(self):
        states, _ = self._canonical((self.j * self.loss.ins)[None, :].astype(np.int64), 0)
        return states

    def advance(self, states, symbols, t):
        L = self.loss
        sub = np.where(symbols[:, None] != self.ref[None, :], L.sub, 0)
        base = np.empty_like(states)
        base[:, 0] = states[:, 0] + L.dele
        base[:, 1:] = np.minimum(states[:, :-1] + sub, states[:, 1:] + L.dele)
        # insertions: D[j] = min_{i <= j} base[i] + (j - i) * ins  (a running minimum)
        ramp = self.j * L.ins
        new = np.minimum.accumulate(base - ramp[None, :], axis=1) + ramp[None, :]
        return self._canonical(np.minimum(new, _INF), t)

    def final(self, states):
        last = states[:, self.m].astype(float)
        if self.loss.cap is not None:
            last = np.minimum(last, self.loss.cap)
        return last


# --------------------------------------------------------------------------- Smith-Waterman

class SmithWaterman(SequenceLoss):
    """Smith-Waterman loss ``L(y, y_ref) = SW(y_ref, y_ref) - SW(y, y_ref)`` (tropical).

    ``SW(a, b)`` is the best local-alignment score of ``a`` and ``b`` with
    score ``match`` for equal aligned symbols, ``mismatch`` for different ones
    and a linear gap penalty ``gap`` per unaligned symbol (empty alignment
    scores 0).  ``L >= 0`` and ``L(y_ref, y_ref) = 0``.

    Parameters
    ----------
    match : int > 0
    mismatch : int < match
    gap : int <= 0
        Integer scores (exact state merging in the automaton).
    cap : float > 0 or None
        Use ``min(L, cap)`` (exact; prunes the alignment states that can no
        longer matter).
    band : int >= 0 or None
        Approximation: only cells with ``|i - j| <= band`` may be aligned
        (the banded SW score is <= the true one, so the loss is >=).

    Examples
    --------
    >>> from structlp.sequence import SmithWaterman
    >>> loss = SmithWaterman()                     # match 2, mismatch -1, gap -1
    >>> loss([0, 1, 2], [0, 1, 2]), loss([0, 1, 0], [0, 1, 2]), loss([2, 2, 2], [0, 1, 2])
    (0.0, 2.0, 4.0)
    """

    def __init__(self, match: int = 2, mismatch: int = -1, gap: int = -1, *,
                 cap: Optional[float] = None, band: Optional[int] = None) -> None:
        owner = "SmithWaterman"
        self.match = check_integer_cost(match, "match", owner, low=1)
        self.mismatch = check_integer_cost(mismatch, "mismatch", owner, low=None)
        self.gap = check_integer_cost(gap, "gap", owner, low=None)
        if self.mismatch >= self.match:
            raise InvalidParameterError(
                f"The 'mismatch' parameter of SmithWaterman must be an integer < match={match}. "
                f"Got {mismatch!r} instead.")
        if self.gap > 0:
            raise InvalidParameterError(
                f"The 'gap' parameter of SmithWaterman must be an integer <= 0. Got {gap!r} instead.")
        self.cap = check_optional_positive(cap, "cap", owner)
        self.band = None if band is None else check_scalar(
            band, "band", kind=numbers.Integral, low=0, owner=owner)
        self._params = dict(match=match, mismatch=mismatch, gap=gap, cap=cap, band=band)

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        return _SmithWatermanDP(self, np.asarray(y_ref, dtype=np.int64), int(length))


class _SmithWatermanDP:
    """State: ``[M, H_1, ..., H_m]`` — best score so far and the current DP row.

    Cells whose best possible continuation cannot beat ``max(M, threshold)``
    are reset to 0 (exact: such paths cannot change the final maximum).
    """

    def __init__(self, loss, ref, length):
        self.loss, self.ref, self.length, self.m = loss, ref, length, len(ref)
        self.jj = np.arange(1, self.m + 1)
        self.self_score = loss.match * self.m  # SW(ref, ref): the full diagonal
        self.floor = (None if loss.cap is None
                      else int(math.floor(self.self_score - loss.cap)))

    def start(self):
        return np.zeros((1, self.m + 1), dtype=np.int64)

    def advance(self, states, symbols, t):
        L = self.loss
        best, H = states[:, 0], states[:, 1:]
        score = np.where(symbols[:, None] == self.ref[None, :], L.match, L.mismatch)
        prev = np.concatenate([np.zeros((len(H), 1), np.int64), H], axis=1)
        base = np.maximum(np.maximum(prev[:, :-1] + score, H + L.gap), 0)
        if L.band is not None:
            base = np.where(np.abs(self.jj - t)[None, :] > L.band, 0, base)
        # gaps in y: H[j] = max_{i <= j} base[i] + (j - i) * gap  (base[0] = 0)
        ramp = np.arange(self.m + 1) * L.gap
        full = np.concatenate([np.zeros((len(H), 1), np.int64), base], axis=1)
        newH = (np.maximum.accumulate(full - ramp[None, :], axis=1) + ramp[None, :])[:, 1:]
        if L.band is not None:
            newH = np.where(np.abs(self.jj - t)[None, :] > L.band, 0, newH)
        best = np.maximum(best, newH.max(axis=1, initial=0))
        threshold = best if self.floor is None else np.maximum(best, self.floor)
        reach = newH + L.match * np.minimum(self.length - t, self.m - self.jj)[None, :]
        newH = np.where(reach <= threshold[:, None], 0, newH)
        if self.floor is not None:
            best = np.maximum(best, self.floor)
        return np.concatenate([best[:, None], newH], axis=1), np.zeros(len(H))

    def final(self, states):
        loss = (self.self_score - states[:, 0]).astype(float)
        if self.loss.cap is not None:
            loss = np.minimum(loss, self.loss.cap)
        return loss


# --------------------------------------------------------------------------- n-gram

class NGramLoss(SequenceLoss):
    """Rational n-gram loss ``L(y, y_ref) = -log(smoothing + sum_u c_y(u) c_ref(u))``.

    ``c_y(u)`` counts the occurrences of the n-gram ``u`` in ``y``.  The
    deterministic automaton has ``O(l * |Delta|**(n-1))`` states per layer at
    most (history, shared-count so far), so its total size grows like ``l**2``.

    Parameters
    ----------
    n : int >= 1
    smoothing : float > 0
        Keeps the loss finite when no n-gram is shared.
    cap : float or None
        Use ``min(L, cap)``.

    Examples
    --------
    >>> from structlp.sequence import NGramLoss
    >>> # -log(1 + shared bigrams): lower is closer
    >>> loss = NGramLoss(n=2)
    >>> print(f"{loss([0, 1, 2], [0, 1, 2]):.3f} {loss([0, 1, 0], [0, 1, 2]):.3f} {loss([2, 2, 2], [0, 1, 2]):.3f}")
    -1.099 -0.693 0.000
    """

    kind = "rational"

    def __init__(self, n: int = 2, smoothing: float = 1.0, *,
                 cap: Optional[float] = None) -> None:
        owner = "NGramLoss"
        self.n = check_scalar(n, "n", kind=numbers.Integral, low=1, owner=owner)
        self.smoothing = check_scalar(smoothing, "smoothing", low=0, low_inclusive=False,
                                      owner=owner)
        self.cap = None if cap is None else check_scalar(cap, "cap", owner=owner)
        self._params = dict(n=n, smoothing=smoothing, cap=cap)

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        return _NGramDP(self, np.asarray(y_ref, dtype=np.int64), int(length), int(alphabet_size))


class _NGramDP:
    """State: ``[S, h_1, ..., h_{n-1}]`` — shared count so far and the last n-1 symbols (-1 = none)."""

    def __init__(self, loss, ref, length, k):
        self.loss, self.n, self.k = loss, loss.n, max(k, int(ref.max()) + 1)
        grams = np.lib.stride_tricks.sliding_window_view(ref, self.n) if len(ref) >= self.n \
            else np.zeros((0, self.n), np.int64)
        codes, counts = np.unique(self._encode(grams), return_counts=True)
        self.codes, self.counts = codes, counts

    def _encode(self, grams):
        code = np.zeros(len(grams), dtype=np.int64)
        for c in range(grams.shape[1]):
            code = code * self.k + grams[:, c]
        return code

    def start(self):
        return np.concatenate([[0], -np.ones(self.n - 1, np.int64)])[None, :].astype(np.int64)

    def advance(self, states, symbols, t):
        shared, hist = states[:, 0], states[:, 1:]
        grams = np.concatenate([hist, symbols[:, None]], axis=1)
        complete = np.all(grams >= 0, axis=1)
        code = self._encode(np.maximum(grams, 0))
        pos = np.clip(np.searchsorted(self.codes, code), 0, max(len(self.codes) - 1, 0))
        hit = complete & (len(self.codes) > 0)
        if len(self.codes):
            hit &= self.codes[pos] == code
            shared = shared + np.where(hit, self.counts[pos], 0)
        return np.concatenate([shared[:, None], grams[:, 1:]], axis=1), np.zeros(len(states))

    def final(self, states):
        loss = -np.log(self.loss.smoothing + states[:, 0])
        if self.loss.cap is not None:
            loss = np.minimum(loss, self.loss.cap)
        return loss


# --------------------------------------------------------------------------- surrogates

class HammingLoss(SequenceLoss):
    """Hamming loss ``L(y, y_ref) = #{s : y_s != y_ref_s}`` (same lengths).

    Examples
    --------
    >>> from structlp.sequence import HammingLoss
    >>> HammingLoss()([0, 1, 2, 2], [0, 2, 2, 1])
    2.0
    """

    def __init__(self) -> None:
        self._params: Dict[str, Any] = {}

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        if length != len(y_ref):
            raise InvalidInputError(
                f"HammingLoss needs a prediction of the reference's length {len(y_ref)}; "
                f"got length {length}.")
        return _HammingDP(np.asarray(y_ref, dtype=np.int64))


class _HammingDP:
    def __init__(self, ref):
        self.ref = ref

    def start(self):
        return np.zeros((1, 1), dtype=np.int64)

    def advance(self, states, symbols, t):
        return states, (symbols != self.ref[t - 1]).astype(float)

    def final(self, states):
        return np.zeros(len(states))


class ZeroLoss(SequenceLoss):
    """``L = 0``: the softmax-margin objective becomes the CRF negative log-likelihood.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, ZeroLoss, softmax_margin
    >>> w = np.random.default_rng(0).normal(size=4)
    >>> value, grad = softmax_margin(w, None, np.array([0, 1, 1]), ZeroLoss(), BigramFeatures(2))
    >>> print(f"{value:.4f}")          # the CRF negative log-likelihood of y_true
    2.5179
    """

    def __init__(self) -> None:
        self._params: Dict[str, Any] = {}

    def dynamic_program(self, y_ref: np.ndarray, length: int,
                        alphabet_size: int) -> LossMachine:
        return _ZeroDP()


class _ZeroDP:
    def start(self):
        return np.zeros((1, 1), dtype=np.int64)

    def advance(self, states, symbols, t):
        return states, np.zeros(len(states))

    def final(self, states):
        return np.zeros(len(states))
