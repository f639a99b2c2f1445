"""Semi-Markov segmentation: labelled segments of a sequence, scored per segment."""

from __future__ import annotations

import functools
import numbers
from typing import Any, Hashable, List, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from ..exceptions import InvalidInputError, InvalidOutputError
from ..model import StructuredModel
from ..part_features import PartFeatures
from ..polytope import Polytope
from ..utils.validation import check_finite_array, check_scalar
from ._semi_markov_dp import (n_parts_of, segment_layout, semi_markov_k_best,
                              semi_markov_marginals, semi_markov_sample, semi_markov_viterbi)

Segment = Tuple[int, int, int]


def check_segments(y: Any, T: int, n_labels: int, max_length: int,
                   name: str = "y") -> np.ndarray:
    """Validate a segmentation of ``0..T-1``: ``(start, end, label)`` segments (``end``
    exclusive) that cover every position exactly once, each of ``1..max_length``
    positions, with labels in ``0..n_labels-1``.

    Parameters
    ----------
    y : sequence of (start, end, label) triples, or an int array (n_segments, 3)
        In any order.
    T, n_labels, max_length : int

    Returns
    -------
    int64 array (n_segments, 3), sorted by start.

    Raises
    ------
    InvalidOutputError
        Naming the first segment that is malformed, out of range, too long, or that
        overlaps another or leaves a gap.

    Examples
    --------
    >>> from structlp.structures import check_segments
    >>> check_segments([(2, 5, 1), (0, 2, 0)], T=5, n_labels=2, max_length=3)
    array([[0, 2, 0],
           [2, 5, 1]])
    >>> try:
    ...     check_segments([(0, 2, 0), (3, 5, 1)], T=5, n_labels=2, max_length=3)   # 2 left out
    ... except ValueError as e:
    ...     print(type(e).__name__)
    InvalidOutputError
    """
    want = f"{name} must be a list of (start, end, label) segments covering 0..{T}"
    try:
        raw = np.asarray(y)
    except (TypeError, ValueError) as exc:
        raise InvalidOutputError(f"{want}; could not convert it ({exc}).") from None
    if raw.size == 0:
        raise InvalidOutputError(f"{want}; got no segment.")
    if raw.ndim != 2 or raw.shape[1] != 3:
        raise InvalidOutputError(f"{want}; got an array of shape {raw.shape}.")
    if not (np.issubdtype(raw.dtype, np.integer) or (
            np.issubdtype(raw.dtype, np.floating) and np.all(np.isfinite(raw))
            and np.all(raw == np.round(raw)))):
        raise InvalidOutputError(f"{want}; got entries of dtype {raw.dtype}, not integers.")
    seg = raw.astype(np.int64)
    seg = seg[np.argsort(seg[:, 0], kind="stable")]

    def show(s):
        return f"({int(s[0])}, {int(s[1])}, {int(s[2])})"

    for s in seg:
        if s[1] <= s[0]:
            raise InvalidOutputError(f"{name}: the segment {show(s)} is empty: its end must "
                                     "exceed its start (end exclusive).")
        if s[1] - s[0] > max_length:
            raise InvalidOutputError(
                f"{name}: the segment {show(s)} has {int(s[1] - s[0])} positions, more than "
                f"max_length={max_length}.")
        if not 0 <= s[2] < n_labels:
            raise InvalidOutputError(f"{name}: the segment {show(s)} has the label "
                                     f"{int(s[2])}, not in 0..{n_labels - 1}.")
    if seg[0, 0] != 0:
        what = ("starts before position 0" if seg[0, 0] < 0 else
                f"leaves a gap: positions 0..{int(seg[0, 0]) - 1} are in no segment")
        raise InvalidOutputError(f"{name}: the segmentation {what} (first segment "
                                 f"{show(seg[0])}).")
    for a, b in zip(seg[:-1], seg[1:]):
        if b[0] < a[1]:
            raise InvalidOutputError(f"{name}: the segments {show(a)} and {show(b)} overlap.")
        if b[0] > a[1]:
            raise InvalidOutputError(
                f"{name}: the segments {show(a)} and {show(b)} leave a gap: positions "
                f"{int(a[1])}..{int(b[0]) - 1} are in no segment.")
    if seg[-1, 1] != T:
        what = (f"ends after the sequence of T={T} positions" if seg[-1, 1] > T else
                f"leaves a gap: positions {int(seg[-1, 1])}..{T - 1} are in no segment")
        raise InvalidOutputError(f"{name}: the segmentation {what} (last segment "
                                 f"{show(seg[-1])}).")
    return seg


class SemiMarkov(StructuredModel):
    """Segmentations of a sequence into labelled segments (a semi-Markov model).

    An example ``x`` is an array (T, d) of position features; an output ``y`` is a list
    of ``(start, end, label)`` segments (``end`` exclusive) that cover ``0..T-1`` without
    gaps or overlaps, each of ``1..max_length`` positions and labelled in
    ``0..n_labels-1``.  With weights ``w = (W (K, d), V (K, max_length), A (K, K))``
    the score of ``y`` is

    .. math::

        \\sum_{(s, e, c) \\in y} \\Big( W_c \\cdot \\sum_{t=s}^{e-1} x_t
        + V_{c,\\, e - s} \\Big) + \\sum_{\\text{consecutive } (c, c')} A_{c c'} ,

    the features of a segment's positions and its length, per label, plus the
    transitions between the labels of consecutive segments.  The task loss is the
    Hamming loss over positions, ``sum_t [label of t in y != label of t in y_true]``.

    **Parts** (for ``L = min(max_length, T)``): the segments ``(end e, length l, label
    c)`` (``1 <= l <= min(L, e)``), ``O(T L K)``, ordered by end, then length, then
    label; then the transitions ``(t, a, b)`` at the boundaries ``t = 1..T-1``,
    ``(T-1) K^2``, ordered by ``t``, ``a``, ``b``.  An output is a path of the layered DAG
    whose nodes are "a segment labelled c starts (ends) at t", and the **output
    polytope** is that DAG's unit-flow polytope (flow conservation at every node, one
    unit out of position 0, ``0 <= mu <= 1``): a network matrix, totally unimodular, so
    the polytope is integral and exact for the joint QP.  The loss is affine in the
    segment parts (a segment's coefficient counts its positions whose true label differs).

    **Inference** is Viterbi over segments, ``O(T (L K + K^2))`` (compiled,
    :mod:`structlp.compiled`), and the model also offers the log-partition function with
    the part marginals (forward-backward), exact samples (forward filtering, backward
    sampling) and the k best outputs (k-best Viterbi) of ``p(y) ~ exp(score(y))``.

    Parameters
    ----------
    n_labels : int >= 1
    max_length : int >= 1
        The longest segment, in positions.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import SemiMarkov
    >>> model = SemiMarkov(n_labels=2, max_length=3)
    >>> x = np.array([[1.0, 0], [1, 0], [0, 1], [0, 1], [0, 1]])   # T = 5 positions, d = 2
    >>> model.n_parts(x), model.n_features(x)           # K d + K max_length + K^2 weights
    (40, 14)
    >>> w = np.r_[1.0, -1, -1, 1, np.full(6, -0.5), np.zeros(4)]     # W, V, A
    >>> y = model.inference(x, model.features(x) @ w)   # Viterbi over segments
    >>> y
    [(0, 2, 0), (2, 5, 1)]
    >>> model.decode(x, model.encode(x, y)) == y
    True
    >>> model.task_loss(x, y, [(0, 3, 0), (3, 5, 1)])   # positions labelled differently
    1.0
    """

    formulations = ("minmax",)

    def __init__(self, n_labels: int, max_length: int) -> None:
        self.n_labels = n_labels
        self.max_length = max_length

    # ------------------------------------------------------------ sizes
    def _KL(self) -> Tuple[int, int]:
        K, L = self.n_labels, self.max_length
        if type(K) is int and type(L) is int and K >= 1 and L >= 1:   # the common case
            return K, L
        return (check_scalar(K, "n_labels", kind=numbers.Integral, low=1, owner="SemiMarkov"),
                check_scalar(L, "max_length", kind=numbers.Integral, low=1,
                             owner="SemiMarkov"))

    def _sizes(self, x: Any) -> Tuple[int, int, int]:
        """``(T, L, K)``: positions, the longest segment that fits, labels."""
        K, L = self._KL()
        T = int(np.shape(x)[0])
        return T, min(L, T), K

    def n_features(self, x: Any = None) -> int:
        """``K d + K max_length + K^2`` (``d`` the number of columns of ``x``)."""
        K, L = self._KL()
        return K * int(np.shape(x)[1]) + K * L + K * K

    def check_x(self, x: Any) -> Any:
        self._KL()
        x = check_finite_array(x, "x", ndim=2)
        if x.shape[0] < 1:
            raise InvalidInputError(f"x must be an array (T, d) of position features with "
                                    f"T >= 1; got shape {x.shape}.")
        return np.ascontiguousarray(x, dtype=float)

    def n_parts(self, x: Any) -> int:
        return n_parts_of(*self._sizes(x))

    # ------------------------------------------------------------ features
    def features(self, x: Any) -> Any:
        T, L, K = self._sizes(x)
        Lmax = self._KL()[1]
        x = np.asarray(x, dtype=float)
        d = x.shape[1]
        first, end, length = segment_layout(T, L)
        n_slots = len(end)
        cum = np.vstack([np.zeros((1, d)), np.cumsum(x, axis=0)])
        F = cum[end] - cum[end - length]                                  # (n_slots, d)
        rows = np.arange(n_slots * K).reshape(n_slots, K)
        labels = np.arange(K)
        emis = (np.repeat(rows.ravel(), d),
                (labels[None, :, None] * d + np.arange(d)).repeat(n_slots, 0).ravel(),
                np.repeat(F, K, axis=0).ravel())
        lens = (rows.ravel(), (K * d + labels[None, :] * Lmax + (length - 1)[:, None]).ravel(),
                np.ones(n_slots * K))
        n_tr = (T - 1) * K * K
        trans = (n_slots * K + np.arange(n_tr),
                 K * d + K * Lmax + np.tile(np.arange(K * K), T - 1), np.ones(n_tr))
        r, c, v = (np.concatenate(a) for a in zip(emis, lens, trans))
        return sp.csr_array((v, (r, c)), shape=(n_slots * K + n_tr, self.n_features(x)))

    def feature_operator(self, x: Any) -> PartFeatures:
        T, L, K = self._sizes(x)
        return SegmentFeatures(np.asarray(x, dtype=float), L, K, self._KL()[1])

    # ------------------------------------------------------------ polytope
    def polytope(self, x: Any) -> Polytope:
        return segment_polytope(*self._sizes(x))

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return ("semi_markov",) + self._sizes(x)

    # ------------------------------------------------------------ outputs and loss
    def encode(self, x: Any, y: Any) -> np.ndarray:
        T, L, K = self._sizes(x)
        seg = check_segments(y, T, K, self._KL()[1])
        mu = np.zeros(n_parts_of(T, L, K))
        mu[_part_indices(seg, T, L, K)] = 1.0
        return mu

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        T, L, K = self._sizes(x)
        return _segments_of(np.flatnonzero(np.asarray(mu) > 0.5), T, L, K)

    def labels(self, x: Any, y: Any) -> np.ndarray:
        """The label of every position (T,) of the segmentation ``y``."""
        T, L, K = self._sizes(x)
        seg = check_segments(y, T, K, self._KL()[1])
        return np.repeat(seg[:, 2], seg[:, 1] - seg[:, 0])

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        T, L, K = self._sizes(x)
        truth = self.labels(x, y_true)
        wrong = np.vstack([np.zeros((1, K)), np.cumsum(truth[:, None] != np.arange(K), 0)])
        first, end, length = segment_layout(T, L)
        c = np.zeros(n_parts_of(T, L, K))
        c[:len(end) * K] = (wrong[end] - wrong[end - length]).ravel()
        return c, 0.0

    # ------------------------------------------------------------ inference
    def inference(self, x: Any, scores: np.ndarray) -> Any:
        T, L, K = self._sizes(x)
        return _segments_of(semi_markov_viterbi(scores, T, L, K)[0], T, L, K)

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        T, L, K = self._sizes(x)
        mu = np.zeros(len(scores))
        mu[semi_markov_viterbi(scores, T, L, K)[0]] = 1.0
        return mu

    def score(self, x: Any, scores: ArrayLike, y: Any) -> float:
        """The score ``scores . mu(y)`` of the segmentation ``y``."""
        return float(np.asarray(scores, dtype=float) @ self.encode(x, y))

    def log_partition(self, x: Any, scores: ArrayLike) -> Tuple[float, np.ndarray]:
        """``log Z = log sum_y exp(scores . mu(y))`` and the part marginals
        ``E[mu]`` (n_parts,) of ``p(y) = exp(scores . mu(y)) / Z`` (forward-backward).

        Returns
        -------
        log_z : float
        marginals : ndarray, shape (n_parts,)
        """
        mu, logZ = semi_markov_marginals(scores, *self._sizes(x))
        return logZ, mu

    def sample(self, x: Any, scores: ArrayLike, n: int,
               rng: np.random.Generator) -> List[List[Segment]]:
        """``n`` exact samples of ``p(y) ~ exp(scores . mu(y))`` (forward filtering,
        backward sampling), as segmentations."""
        T, L, K = self._sizes(x)
        return [_segments_of(p, T, L, K) for p in semi_markov_sample(scores, T, L, K, n, rng)]

    def k_best(self, x: Any, scores: ArrayLike, k: int) -> Tuple[List[List[Segment]], np.ndarray]:
        """The ``k`` highest-scoring segmentations and their scores, non-increasing (fewer
        when there are fewer), by k-best Viterbi over the segments: every node of the
        segment DAG keeps its ``k`` best partial paths (a sort of ``(L + K) k`` candidates
        per node and label, ``O(T (L + K) K k log((L + K) k))``)."""
        T, L, K = self._sizes(x)
        outs, values = semi_markov_k_best(scores, T, L, K, k)
        return [_segments_of(p, T, L, K) for p in outs], values


def _part_indices(seg: np.ndarray, T: int, L: int, K: int) -> np.ndarray:
    """The parts (segments and transitions) of a checked segmentation."""
    first = segment_layout(T, L)[0]
    start, end, lab = seg[:, 0], seg[:, 1], seg[:, 2]
    parts = (first[end] + end - start - 1) * K + lab
    n_seg = int(first[-1]) * K
    trans = n_seg + (start[1:] - 1) * K * K + lab[:-1] * K + lab[1:]
    return np.concatenate([parts, trans])


def _segments_of(parts: np.ndarray, T: int, L: int, K: int) -> List[Segment]:
    """The segments ``(start, end, label)`` among the part indices ``parts``, by start."""
    first, end, length = segment_layout(T, L)
    parts = np.asarray(parts, dtype=np.int64)
    parts = parts[parts < len(end) * K]
    slot, lab = np.divmod(parts, K)
    order = np.argsort(end[slot] - length[slot])
    return [(int(end[j] - length[j]), int(end[j]), int(c))
            for j, c in zip(slot[order], lab[order])]


def segment_polytope(T: int, L: int, K: int) -> Polytope:
    """The output polytope of :class:`SemiMarkov`: the unit flows of the segment DAG.

    For ``T`` positions, segments of ``1..L`` positions (``L <= T``) and ``K`` labels,
    in the part layout of :class:`SemiMarkov`: one unit leaves position 0,

    .. math::

        \\sum_{l, c} \\mu_{(l, l, c)} = 1,\\quad
        \\sum_l \\mu_{(t, l, c)} = \\sum_b \\mu_{(t, c, b)},\\quad
        \\sum_a \\mu_{(t, a, c)} = \\sum_l \\mu_{(t + l, l, c)}\\quad (1 \\le t < T),
        \\quad 0 \\le \\mu \\le 1,

    (segments ``(end, length, label)``, transitions ``(t, a, b)``): ``1 + 2 (T-1) K``
    equalities, a node-arc incidence matrix, so the polytope is integral and its vertices
    are the segmentations.

    Raises
    ------
    InvalidParameterError
        ``T``, ``L`` or ``K`` not an int >= 1, or ``L > T``.

    Examples
    --------
    >>> from structlp.structures import segment_polytope
    >>> P = segment_polytope(T=4, L=2, K=2)
    >>> P.n_parts, P.n_eq                  # 1 + 2 (T - 1) K equalities
    (26, 13)
    """
    T = check_scalar(T, "T", kind=numbers.Integral, low=1, owner="segment_polytope")
    K = check_scalar(K, "K", kind=numbers.Integral, low=1, owner="segment_polytope")
    L = check_scalar(L, "L", kind=numbers.Integral, low=1, high=T, owner="segment_polytope")
    return _segment_polytope(T, L, K)


@functools.lru_cache(maxsize=32)
def _segment_polytope(T: int, L: int, K: int) -> Polytope:
    first, end, length = segment_layout(T, L)
    n_slots = len(end)
    n_seg = n_slots * K
    n = n_parts_of(T, L, K)
    seg_part = np.arange(n_seg).reshape(n_slots, K)
    lab = np.broadcast_to(np.arange(K), (n_slots, K))
    start = np.broadcast_to((end - length)[:, None], (n_slots, K))
    endb = np.broadcast_to(end[:, None], (n_slots, K))
    rows, cols, vals = [], [], []
    # source row 0: the segments starting at 0
    src = start == 0
    rows.append(np.zeros(int(src.sum()), dtype=np.int64))
    cols.append(seg_part[src])
    vals.append(np.ones(int(src.sum())))
    # E(t, c), row 1 + (t-1) K + c: segments ending at t minus transitions leaving
    inner = endb < T
    rows.append(1 + (endb[inner] - 1) * K + lab[inner])
    cols.append(seg_part[inner])
    vals.append(np.ones(int(inner.sum())))
    # S(t, c), row 1 + (T-1) K + (t-1) K + c: transitions entering minus segments leaving
    later = start > 0
    rows.append(1 + (T - 1) * K + (start[later] - 1) * K + lab[later])
    cols.append(seg_part[later])
    vals.append(-np.ones(int(later.sum())))
    if T > 1:
        t, a, b = (g.ravel() for g in np.meshgrid(np.arange(1, T), np.arange(K), np.arange(K),
                                                  indexing="ij"))
        tp = n_seg + np.arange(len(t))
        rows += [1 + (t - 1) * K + a, 1 + (T - 1) * K + (t - 1) * K + b]
        cols += [tp, tp]
        vals += [-np.ones(len(t)), np.ones(len(t))]
    E = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(1 + 2 * (T - 1) * K, n))
    e = np.zeros(E.shape[0])
    e[0] = 1.0
    return Polytope(E=E, e=e, lb=0.0, ub=1.0, n_parts=n)


class SegmentFeatures(PartFeatures):
    """The part features of a :class:`SemiMarkov` example in factored form.

    With ``w = (W (K, d), V (K, max_length), A (K, K))``: the emission scores are prefix
    sums of ``x W^T`` (T, K), a segment scores their difference over its positions plus
    ``V[c, l - 1]``, a transition ``A[a, b]``; the joint feature of ``mu`` is ``m^T x``
    with ``m`` (T, K) the mass of the segments covering each position (a difference
    array), the mass per (label, length), and the transition mass per label pair.

    Parameters
    ----------
    x : ndarray (T, d); L : the longest segment that fits; K : labels;
    max_length : the model's (the width of the length block)
    """

    __slots__ = ("x", "n_pos", "L", "K", "Lmax", "n_slots", "end", "length", "diff", "by_len",
                 "cum", "shape")

    def __init__(self, x: np.ndarray, L: int, K: int, max_length: int) -> None:
        self.x, self.n_pos, self.L, self.K, self.Lmax = x, x.shape[0], L, K, max_length
        _, self.end, self.length = segment_layout(self.n_pos, L)
        self.n_slots = n = len(self.end)
        j = np.arange(n)
        # (T + 1, n_slots): +1 at a segment's start, -1 at its end
        self.diff = sp.csr_array((np.r_[np.ones(n), -np.ones(n)],
                                  (np.r_[self.end - self.length, self.end], np.r_[j, j])),
                                 shape=(self.n_pos + 1, n))
        self.by_len = sp.csr_array((np.ones(n), (self.length - 1, j)), shape=(max_length, n))
        self.cum: Optional[np.ndarray] = None        # prefix sums of x, on first use
        d = x.shape[1]
        self.shape = (n * K + (self.n_pos - 1) * K * K, K * d + K * max_length + K * K)

    def scores(self, w: np.ndarray) -> np.ndarray:
        K, Lm = self.K, self.Lmax
        kd = K * self.x.shape[1]
        w = np.asarray(w, dtype=float)
        P = np.zeros((self.n_pos + 1, K))
        np.cumsum(self.x.dot(w[:kd].reshape(K, -1).T), axis=0, out=P[1:])
        seg = P[self.end] - P[self.end - self.length] + w[kd:kd + K * Lm].reshape(K, Lm).T[
            self.length - 1]
        return np.concatenate((seg.ravel(), np.tile(w[kd + K * Lm:], self.n_pos - 1)))

    def joint(self, mu: np.ndarray) -> np.ndarray:
        K = self.K
        mu = np.asarray(mu, dtype=float)
        ms = mu[:self.n_slots * K].reshape(self.n_slots, K)
        cover = np.cumsum(self.diff @ ms, axis=0)[:self.n_pos]              # (T, K)
        return np.concatenate(((cover.T @ self.x).ravel(), (self.by_len @ ms).T.ravel(),
                               mu[self.n_slots * K:].reshape(-1, K * K).sum(0)))

    def joint_sparse(self, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``Phi^T mu`` from the nonzeros of ``mu``: each segment adds its positions'
        feature sum (a difference of prefix sums) to its label's block."""
        K, Lm, d = self.K, self.Lmax, self.x.shape[1]
        idx = np.asarray(idx, dtype=np.int64)
        vals = np.asarray(vals, dtype=float)
        if self.cum is None:
            self.cum = np.vstack([np.zeros((1, d)), np.cumsum(self.x, axis=0)])
        seg = idx < self.n_slots * K
        j, c = np.divmod(idx[seg], K)
        v = vals[seg]
        by_label = np.zeros((K, len(j)))
        by_label[c, np.arange(len(j))] = v
        emis = by_label @ (self.cum[self.end[j]] - self.cum[self.end[j] - self.length[j]])
        lens = np.bincount(c * Lm + self.length[j] - 1, v, minlength=K * Lm)
        trans = np.bincount((idx[~seg] - self.n_slots * K) % (K * K), vals[~seg],
                            minlength=K * K)
        return np.concatenate((emis.ravel(), lens, trans))
