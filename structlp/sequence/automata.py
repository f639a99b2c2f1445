"""Layered weighted automata: the loss automaton B and the composition C = A o B.

All automata here accept exactly the sequences of a fixed length ``l`` over
``{0..k-1}``, so their states come in layers ``0..l`` (layer ``t`` = after
``t`` symbols) and arcs go from layer ``t`` to layer ``t + 1``.  Weights are
kept in log space (``log`` of the probability-semiring weight), i.e.
``B(y) = exp(initial + sum of arc weights + final)``.

``B`` (:class:`LossAutomaton`)
    deterministic, complete, minimal: ``B(y) = exp(L(y, y_ref))``.  Built by
    running the loss's left-to-right machine (see :mod:`.losses`) over all
    reachable states (= weighted determinization of ``Pi_1(Y o U o Y_ref)``),
    then tropical weight pushing and minimization (merging states whose
    futures are equal).
``A``
    implicit: its state at layer ``t`` is the last ``min(q-1, t)`` symbols,
    and the arc reading ``b`` after context ``c`` has weight ``theta_t[c b]``.
``C`` (:class:`Lattice`)
    the reachable part of ``A x B``, built once per (example, loss) and
    independent of ``w``; only the ``theta`` weights change between calls.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_bool, check_scalar
from ..exceptions import InvalidInputError, InvalidParameterError, StructlpError
from ..utils.numeric import logsumexp
from ._checks import check_alphabet_size, check_sequence

if TYPE_CHECKING:  # pragma: no cover - losses imports this module
    from .losses import SequenceLoss

__all__ = ["LossAutomaton", "build_loss_automaton", "Lattice", "AutomatonTooLargeError"]


#: Largest expansion of one layer (states x symbols x state width, int64) before
#: :func:`build_loss_automaton` stops with :class:`AutomatonTooLargeError`.
MAX_LAYER_BYTES = 1 << 28


class AutomatonTooLargeError(StructlpError, MemoryError):
    """A loss automaton layer exceeded ``max_states`` (use ``cap=`` or ``band=`` on the loss).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import AutomatonTooLargeError, EditDistance, build_loss_automaton
    >>> try:
    ...     build_loss_automaton(EditDistance(), np.arange(12) % 3, 12, 3, max_states=10)
    ... except AutomatonTooLargeError as e:
    ...     print(type(e).__name__)
    AutomatonTooLargeError
    """


class LossAutomaton:
    """Deterministic layered WFA with ``B(y) = exp(L(y, y_ref))`` for every ``y`` of length l.

    Attributes
    ----------
    next : list of l int arrays, ``next[t]`` of shape (n_t, k)
        destination (index in layer t+1) of the arc reading each symbol.
    weight : list of l float arrays, shape (n_t, k)
        log-weights of the arcs (loss increments after pushing).
    final : float array, shape (n_l,)
        final log-weights.
    initial : float
        initial log-weight.
    states_per_layer : list of int
        sizes ``n_0..n_l`` of the minimal automaton.
    determinized_states_per_layer : list of int
        sizes before minimization (the states of the loss's own DP).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.sequence import HammingLoss, LossAutomaton, build_loss_automaton
    >>> B = build_loss_automaton(HammingLoss(), np.array([0, 1, 1]), length=3, alphabet_size=2)
    >>> isinstance(B, LossAutomaton), B.length, B.n_states, B.n_arcs
    (True, 3, 4, 6)
    >>> B.log_weight([1, 1, 0])                   # the Hamming loss, 2
    2.0
    """

    def __init__(self, next_: List[np.ndarray], weight: List[np.ndarray], final: np.ndarray,
                 initial: float, determinized_sizes: Sequence[int]) -> None:
        self.next, self.weight, self.final, self.initial = next_, weight, final, initial
        self.states_per_layer = [len(w) for w in weight] + [len(final)]
        self.determinized_states_per_layer = list(determinized_sizes)

    @property
    def length(self) -> int:
        """Length ``l`` of the sequences the automaton reads."""
        return len(self.next)

    @property
    def n_states(self) -> int:
        """Total number of states of the minimal automaton."""
        return int(sum(self.states_per_layer))

    @property
    def n_arcs(self) -> int:
        """Total number of arcs (``k`` per state of layers ``0..l-1``)."""
        return int(sum(w.size for w in self.weight))

    def info(self) -> Dict[str, Any]:
        """Size report: states and arcs, minimal and before minimization."""
        return {"n_states": self.n_states, "n_arcs": self.n_arcs,
                "max_states_per_layer": int(max(self.states_per_layer)),
                "states_per_layer": list(map(int, self.states_per_layer)),
                "determinized_states": int(sum(self.determinized_states_per_layer)),
                "max_determinized_states_per_layer":
                    int(max(self.determinized_states_per_layer))}

    def log_weight(self, y: ArrayLike) -> float:
        """``log B(y) = L(y, y_ref)`` by following the unique path labelled ``y``."""
        y = np.asarray(y, dtype=np.int64)
        if y.shape != (self.length,):
            raise InvalidInputError(
                f"y must have length {self.length} (the automaton's); got shape {y.shape}.")
        state, total = 0, self.initial
        for t, sym in enumerate(y):
            total += self.weight[t][state, sym]
            state = self.next[t][state, sym]
        return float(total + self.final[state])


def build_loss_automaton(loss: SequenceLoss, y_ref: ArrayLike, length: int, alphabet_size: int,
                         *, minimize: bool = True, max_states: int = 500_000) -> LossAutomaton:
    """Build the deterministic loss automaton ``B`` with ``B(y) = exp(L(y, y_ref))``.

    Parameters
    ----------
    loss : SequenceLoss
    y_ref : int array, shape (m,)
        Reference sequence (already validated).
    length : int
        Length ``l`` of the outputs ``y``.
    alphabet_size : int
    minimize : bool
        Push weights (tropical) and merge equivalent states.
    max_states : int
        Raise :class:`AutomatonTooLargeError` when a layer of the
        determinized automaton exceeds this many states.

    Returns
    -------
    LossAutomaton

    Raises
    ------
    AutomatonTooLargeError
        When a layer exceeds ``max_states`` states, or before expanding a layer
        whose successors would need more than :data:`MAX_LAYER_BYTES` of memory
        (so an uncapped edit distance on a long reference stops with this error,
        never a raw ``MemoryError``); the message names ``cap=``.

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.sequence import EditDistance, build_loss_automaton
    >>> B = build_loss_automaton(EditDistance(), np.array([0, 1]), length=3, alphabet_size=2)
    >>> B.states_per_layer
    [1, 2, 2, 1]
    >>> all(np.isclose(B.log_weight(y), EditDistance()(y, [0, 1]))
    ...     for y in itertools.product(range(2), repeat=3))      # B(y) = exp(L(y, y_ref))
    True
    """
    from .losses import SequenceLoss
    owner = "build_loss_automaton"
    if not isinstance(loss, SequenceLoss):
        raise InvalidParameterError(
            "The 'loss' parameter of build_loss_automaton must be a structlp.sequence loss "
            f"(EditDistance, SmithWaterman, NGramLoss, HammingLoss, ZeroLoss); got {loss!r}.")
    k = check_alphabet_size(alphabet_size, owner=owner)
    y_ref = check_sequence(y_ref, "y_ref", k)
    length = check_scalar(length, "length", kind=numbers.Integral, low=1, owner=owner)
    check_bool(minimize, "minimize", owner=owner)
    max_states = check_scalar(max_states, "max_states", kind=numbers.Integral, low=1, owner=owner)
    dp = loss.dynamic_program(y_ref, length, k)
    states = dp.start()
    nexts, weights, sizes = [], [], [1]
    for t in range(1, length + 1):
        if len(states) * k * states.shape[1] * 8 > MAX_LAYER_BYTES:
            raise AutomatonTooLargeError(
                f"The automaton of {loss!r} has {len(states)} states in layer {t - 1} of "
                f"{length}; expanding them would need more than {MAX_LAYER_BYTES >> 20} MiB. "
                "Use cap= (exact min(L, c)) or band= (approximate) on the loss.")
        symbols = np.tile(np.arange(k, dtype=np.int64), len(states))
        new, w = dp.advance(np.repeat(states, k, axis=0), symbols, t)
        states, _, inverse = unique_rows(new)
        if len(states) > max_states:
            raise AutomatonTooLargeError(
                f"The automaton of {loss!r} has {len(states)} states in layer {t} of {length} "
                f"(max_states={max_states}); use cap= (exact min(L, c)) or band= (approximate) "
                "on the loss, or raise max_states.")
        nexts.append(inverse.reshape(-1, k))
        weights.append(np.asarray(w, dtype=float).reshape(-1, k))
        sizes.append(len(states))
    final = np.asarray(dp.final(states), dtype=float)
    if not minimize:
        return LossAutomaton(nexts, weights, final, 0.0, sizes)
    return _push_and_minimize(nexts, weights, final, sizes)


def _push_and_minimize(nexts, weights, final, sizes, decimals=12):
    """Tropical weight pushing followed by bottom-up merging of equivalent states.

    After pushing, every state's cheapest completion has weight 0, so two
    states have the same future function iff they have, symbol by symbol,
    equal arc weights and equivalent destinations (Mohri's minimization of
    deterministic weighted automata, on a layered acyclic automaton).
    """
    l = len(nexts)
    # potentials d_t = cheapest completion from each state
    pot = [None] * (l + 1)
    pot[l] = final
    for t in range(l - 1, -1, -1):
        pot[t] = np.min(weights[t] + pot[t + 1][nexts[t]], axis=1)
    pushed = [weights[t] + pot[t + 1][nexts[t]] - pot[t][:, None] for t in range(l)]
    # the last layer: every state accepts with weight 0 after pushing -> one class
    cls = np.zeros(len(final), dtype=np.int64)
    new_next, new_weight = [None] * l, [None] * l
    for t in range(l - 1, -1, -1):
        dest = cls[nexts[t]]
        weight_code = np.unique(np.round(pushed[t], decimals), return_inverse=True)[1]
        key = np.concatenate([dest, weight_code.reshape(dest.shape)], axis=1)
        _, first, inverse = unique_rows(key)
        new_next[t] = dest[first]
        new_weight[t] = pushed[t][first]
        cls = inverse
    return LossAutomaton(new_next, new_weight, np.zeros(1), float(pot[0][0]), sizes)


class Lattice:
    """The composition ``C = A o B`` restricted to its reachable states.

    ``C`` depends on the loss automaton ``B`` and on (k, q, l) only; the
    features enter through ``theta`` at evaluation time, so a lattice is
    built once per training example and reused across iterations.

    Attributes
    ----------
    gram : list of l int arrays, shape (n_t, k)
        q-gram index (into ``theta_t``) read by each arc of layer t.
    loss_weight : list of l float arrays, shape (n_t, k)
        log-weight of each arc in ``B``.
    dest : list of l int arrays, shape (n_t, k)
        destination state (index in layer t+1).
    final : float array, shape (n_l,)
    initial : float

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.sequence import BigramFeatures, HammingLoss, Lattice, build_loss_automaton
    >>> from scipy.special import logsumexp
    >>> f, y_ref = BigramFeatures(2), np.array([0, 1, 1])
    >>> C = Lattice(build_loss_automaton(HammingLoss(), y_ref, 3, 2), alphabet_size=2, order=2)
    >>> w = np.random.default_rng(0).normal(size=4)
    >>> # q-gram scores per position
    >>> thetas = [t @ w for t in f.tables(None, 3)]
    >>> print(f"{C.log_partition(thetas)[0]:.6f}")
    4.523039
    >>> # brute force: log sum_y exp(L + w.Psi)
    >>> ys = list(itertools.product(range(2), repeat=3))
    >>> print(f"{logsumexp([HammingLoss()(y, y_ref) + w @ f.joint_feature(None, np.array(y)) for y in ys]):.6f}")
    4.523039
    """

    def __init__(self, automaton: LossAutomaton, alphabet_size: int, order: int) -> None:
        k, q, B = alphabet_size, order, automaton
        self.alphabet_size, self.order, self.length = k, q, B.length
        self.automaton = B
        ctx = np.zeros(1, dtype=np.int64)    # A-state of each C state
        bst = np.zeros(1, dtype=np.int64)    # B-state of each C state
        self.gram, self.loss_weight, self.dest = [], [], []
        for t in range(B.length):
            n_ctx_next = k ** min(q - 1, t + 1)
            gram = ctx[:, None] * k + np.arange(k)[None, :]
            ctx_next = gram % n_ctx_next
            b_next = B.next[t][bst]
            n_b_next = B.states_per_layer[t + 1]
            key = ctx_next * n_b_next + b_next
            uniq, inverse = np.unique(key.ravel(), return_inverse=True)
            self.gram.append(gram)
            self.loss_weight.append(B.weight[t][bst])
            self.dest.append(inverse.reshape(-1, k))
            ctx, bst = uniq // n_b_next, uniq % n_b_next
        self.final = B.final[bst]
        self.initial = B.initial
        self.states_per_layer = [len(g) for g in self.gram] + [len(self.final)]

    @property
    def n_states(self) -> int:
        """Total number of reachable states of ``C``."""
        return int(sum(self.states_per_layer))

    @property
    def n_arcs(self) -> int:
        """Total number of arcs of ``C``."""
        return int(sum(g.size for g in self.gram))

    def _arc_scores(self, thetas, t):
        return thetas[t][self.gram[t]] + self.loss_weight[t]

    def log_partition(self, thetas: Sequence[np.ndarray]) -> Tuple[float, List[np.ndarray]]:
        """``log sum_y exp(L(y, y_ref) + sum_t theta_t[z_t(y)])`` and the backward log-potentials."""
        beta: List[Any] = [None] * (self.length + 1)
        beta[-1] = self.final
        for t in range(self.length - 1, -1, -1):
            beta[t] = logsumexp(self._arc_scores(thetas, t) + beta[t + 1][self.dest[t]], axis=1)
        return float(self.initial + beta[0][0]), beta

    def expected_grams(self, thetas: Sequence[np.ndarray]) -> Tuple[float, List[np.ndarray]]:
        """``log Z`` and ``Q_t[z]`` = probability that the q-gram ending at t is z.

        The distribution is ``p(y) ∝ exp(L(y, y_ref) + w . Psi(x, y))``.
        Backward pass in log space, then a forward pass of *probabilities*
        with locally normalized arc probabilities (all in [0, 1]), so nothing
        overflows whatever the size of ``w``.
        """
        logz, beta = self.log_partition(thetas)
        k = self.alphabet_size
        p: np.ndarray = np.ones(1)
        Q = []
        for t in range(self.length):
            arc = np.exp(self._arc_scores(thetas, t) + beta[t + 1][self.dest[t]]
                         - beta[t][:, None]) * p[:, None]
            Q.append(np.bincount(self.gram[t].ravel(), weights=arc.ravel(),
                                 minlength=k ** min(self.order, t + 1)))
            p = np.bincount(self.dest[t].ravel(), weights=arc.ravel(),
                            minlength=len(beta[t + 1]))
        return logz, Q

    def best_path(self, thetas: Sequence[np.ndarray]) -> Tuple[np.ndarray, float]:
        """Tropical (max, +) pass: ``argmax_y L(y, y_ref) + sum_t theta_t[z_t(y)]`` and its value."""
        delta = self.final
        choice: List[Any] = [None] * self.length
        for t in range(self.length - 1, -1, -1):
            scores = self._arc_scores(thetas, t) + delta[self.dest[t]]
            choice[t] = np.argmax(scores, axis=1)
            delta = scores[np.arange(len(scores)), choice[t]]
        y = np.empty(self.length, dtype=np.int64)
        state = 0
        for t in range(self.length):
            y[t] = choice[t][state]
            state = self.dest[t][state, y[t]]
        return y, float(self.initial + delta[0])



def unique_rows(a: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of an int 2-D array: ``(rows, first_index, inverse)`` like ``np.unique(axis=0)``.

    Each column is shifted to start at 0 (entries >= 2**39, the "infinite"
    DP entries, share one extra value) and the columns are packed, mixed
    radix, into as few int64 words as possible; rows are then deduplicated
    with ``np.unique`` (one word) or ``np.lexsort`` (several).  Much faster
    than sorting a void view of the rows.
    """
    n, c = a.shape
    if c == 0 or n == 0:
        return a[:1], np.zeros(min(1, n), np.int64), np.zeros(n, np.int64)
    big = a >= (1 << 39)
    lo = a.min(axis=0)
    shifted = np.where(big, 0, a - lo)
    top = shifted.max(axis=0) + 1
    shifted = np.where(big, top, shifted)
    bases = [int(b) + 1 for b in top]
    words, start, capacity = [], 0, 1
    for j, base in enumerate(bases + [None]):
        if base is None or capacity * base >= (1 << 62):
            mult = np.ones(j - start, dtype=np.int64)
            for i in range(j - start - 2, -1, -1):
                mult[i] = mult[i + 1] * bases[start + i + 1]
            words.append(shifted[:, start:j] @ mult)
            start, capacity = j, 1
        if base is not None:
            capacity *= base
    if len(words) == 1:
        _, first, inverse = np.unique(words[0], return_index=True, return_inverse=True)
        return a[first], first, inverse.ravel()
    order = np.lexsort(words[::-1])
    packed = np.stack(words, axis=1)[order]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = np.any(packed[1:] != packed[:-1], axis=1)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new_group) - 1
    first = order[new_group]
    return a[first], first, inverse


