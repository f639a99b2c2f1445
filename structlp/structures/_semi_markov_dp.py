"""Dynamic programs over segmentations (semi-Markov): Viterbi, forward-backward, sampling
and k-best, on the part scores of :class:`~structlp.structures.SemiMarkov`.

The parts of a sequence of ``T`` positions, ``K`` labels and segments of at most ``L``
positions (``L <= T``) are

* the **segments** ``(e, l, y)``: positions ``e - l .. e - 1`` labelled ``y``
  (``1 <= e <= T``, ``1 <= l <= min(L, e)``); part ``slot(e, l) K + y`` with
  ``slot(e, l) = first[e] + l - 1`` and ``first[e] = sum_{e' < e} min(L, e')``
  (:func:`segment_layout`), ``n_slots = first[T + 1]``;
* the **transitions** ``(t, a, b)`` at a boundary ``t`` (``1 <= t <= T - 1``) between a
  segment labelled ``a`` ending at ``t`` and one labelled ``b`` starting there; part
  ``n_slots K + (t - 1) K^2 + a K + b``.

An output is a path of the layered DAG whose nodes are ``S(t, y)`` (a segment labelled
``y`` starts at ``t``) and ``E(t, y)`` (one ends at ``t``), whose arcs are the segments
``S(e - l, y) -> E(e, y)`` and the transitions ``E(t, a) -> S(t, b)``, from the
``S(0, .)`` to the ``E(T, .)``.  Separating the two kinds of arcs makes every pass
``O(T (L K + K^2))``, not the ``O(T L K^2)`` of a recursion over (segment, previous label):

.. math::

    \\alpha_S(0, y) = 0,\\quad
    \\alpha_E(e, y) = \\bigoplus_{l} \\alpha_S(e - l, y) \\otimes s_{(e, l, y)},\\quad
    \\alpha_S(t, b) = \\bigoplus_{a} \\alpha_E(t, a) \\otimes s_{(t, a, b)},

in the (max, +) semiring for Viterbi and the (logsumexp, +) one for the log-partition
function, the marginals (with the backward recursion) and exact sampling (forward
filtering, backward sampling).

The kernels are compiled by numba (ahead of time with the wheel, else by its JIT;
:mod:`structlp.compiled`); without numba the same functions run as Python.  They trust
their arguments: the public functions check them first (:func:`check_scores`).
"""

from __future__ import annotations

import functools
from typing import Any, List, Tuple

import numpy as np

from ..compiled import ahead_of_time, jit, numba_module
from ..exceptions import InvalidInputError

_COMPILED: dict = {}


@functools.lru_cache(maxsize=64)
def segment_layout(T: int, L: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The segment slots of ``T`` positions with lengths ``1..L`` (``L <= T``).

    Returns
    -------
    first : int64 array (T + 2,)
        ``first[e]`` the slot of the segment ``(e, l = 1)``; ``first[T + 1] = n_slots``.
    end, length : int64 arrays (n_slots,)
        Each slot's end ``e`` and length ``l`` (its start is ``e - l``).
    """
    per_end = np.minimum(np.arange(1, T + 1), L)
    first = np.zeros(T + 2, dtype=np.int64)
    first[2:] = np.cumsum(per_end)
    end = np.repeat(np.arange(1, T + 1, dtype=np.int64), per_end)
    length = np.arange(len(end), dtype=np.int64) - first[end] + 1
    for a in (first, end, length):
        a.setflags(write=False)
    return first, end, length


def n_parts_of(T: int, L: int, K: int) -> int:
    """The number of parts: ``n_slots K`` segments and ``(T - 1) K^2`` transitions."""
    return int(segment_layout(T, L)[0][-1]) * K + (T - 1) * K * K


def check_scores(scores: Any, T: Any, L: Any, K: Any, owner: str,
                 finite: bool = True) -> np.ndarray:
    """The part scores as the kernels take them (a C-contiguous float64 vector of
    :func:`n_parts_of` entries, finite), or InvalidInputError naming what is wrong.
    ``finite=False`` leaves the finiteness to the caller (Viterbi's kernel reports it)."""
    for name, v, low in (("T", T, 1), ("L", L, 1), ("K", K, 1)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < low:
            raise InvalidInputError(f"{owner}: {name} must be an int >= {low}; got {v!r}.")
    if L > T:
        raise InvalidInputError(f"{owner}: L (the longest segment) must be at most T = {T}; "
                                f"got {L}.")
    s = np.ascontiguousarray(scores, dtype=np.float64)
    n = n_parts_of(int(T), int(L), int(K))
    if s.shape != (n,):
        raise InvalidInputError(f"{owner}: the part scores must have shape ({n},) for T={T}, "
                                f"L={L}, K={K}; got shape {s.shape}.")
    if finite and not np.isfinite(s).all():
        raise _not_finite(owner)
    return s


def _not_finite(owner):
    return InvalidInputError(f"{owner}: the part scores must be finite; got NaN or infinite "
                             "values.")


# ------------------------------------------------------------------ kernels
def _first_slots(T, L):
    first = np.empty(T + 2, dtype=np.int64)
    first[0] = 0
    c = 0
    for e in range(1, T + 2):
        first[e] = c
        c += min(L, e)
    return first


def _sm_viterbi(scores, T, L, K):  # compiled by numba when available
    """argmax over the segmentations: (its part indices, its score, all scores finite)."""
    first = _first_slots(T, L)
    n_seg = first[T + 1] * K
    aE = np.empty((T + 1, K))
    aS = np.zeros((T, K))
    arg_len = np.zeros((T + 1, K), dtype=np.int64)
    arg_prev = np.zeros((T, K), dtype=np.int64)
    nan = 0.0
    for e in range(1, T + 1):
        for y in range(K):
            aE[e, y] = -np.inf
        for l in range(1, min(L, e) + 1):          # ties: the shortest segment
            base = (first[e] + l - 1) * K
            s = e - l
            for y in range(K):
                v = aS[s, y] + scores[base + y]
                nan += v * 0.0
                if v > aE[e, y]:
                    aE[e, y] = v
                    arg_len[e, y] = l
        if e < T:
            tb = n_seg + (e - 1) * K * K
            for b in range(K):
                best = aE[e, 0] + scores[tb + b]
                nan += best * 0.0
                arg = 0
                for a in range(1, K):                # ties: the smallest previous label
                    v = aE[e, a] + scores[tb + a * K + b]
                    nan += v * 0.0
                    if v > best:
                        best = v
                        arg = a
                aS[e, b] = best
                arg_prev[e, b] = arg
    y = 0
    for b in range(1, K):
        if aE[T, b] > aE[T, y]:
            y = b
    value = aE[T, y]
    out = np.empty(2 * T, dtype=np.int64)
    n = 0
    e = T
    while True:
        l = arg_len[e, y]
        out[n] = (first[e] + l - 1) * K + y
        n += 1
        s = e - l
        if s <= 0:
            break
        a = arg_prev[s, y]
        out[n] = n_seg + (s - 1) * K * K + a * K + y
        n += 1
        y = a
        e = s
    return out[:n].copy(), value, nan == 0.0


def _sm_forward(scores, T, L, K, first):
    """The forward recursion in the log semiring: ``aE`` (T + 1, K), ``aS`` (T, K)."""
    n_seg = first[T + 1] * K
    aE = np.full((T + 1, K), -np.inf)
    aS = np.zeros((T, K))
    acc = np.zeros(K)
    for e in range(1, T + 1):
        for y in range(K):
            acc[y] = 0.0
        for l in range(1, min(L, e) + 1):          # online logsumexp over the lengths
            base = (first[e] + l - 1) * K
            s = e - l
            for y in range(K):
                v = aS[s, y] + scores[base + y]
                if v > aE[e, y]:
                    acc[y] = acc[y] * np.exp(aE[e, y] - v) + 1.0
                    aE[e, y] = v
                else:
                    acc[y] += np.exp(v - aE[e, y])
        for y in range(K):
            aE[e, y] += np.log(acc[y])
        if e < T:
            tb = n_seg + (e - 1) * K * K
            for b in range(K):
                m = -np.inf
                for a in range(K):
                    v = aE[e, a] + scores[tb + a * K + b]
                    if v > m:
                        m = v
                t = 0.0
                for a in range(K):
                    t += np.exp(aE[e, a] + scores[tb + a * K + b] - m)
                aS[e, b] = m + np.log(t)
    return aE, aS


def _sm_log_z(aE, T, K):
    """``log Z = logsumexp_y aE[T, y]``: the forward table's end column summed."""
    m = -np.inf
    for y in range(K):
        if aE[T, y] > m:
            m = aE[T, y]
    t = 0.0
    for y in range(K):
        t += np.exp(aE[T, y] - m)
    return m + np.log(t)


def _sm_marginals(scores, T, L, K):  # compiled by numba when available
    """The marginal of every part under ``p(y) ~ exp(score(y))``, and ``log Z``."""
    first = _first_slots(T, L)
    n_seg = first[T + 1] * K
    aE, aS = _sm_forward(scores, T, L, K, first)
    logZ = _sm_log_z(aE, T, K)
    bE = np.zeros((T + 1, K))                    # bE[T] = 0: the path ends there
    bS = np.empty((T, K))
    mu = np.empty(len(scores))
    for s in range(T - 1, -1, -1):
        for y in range(K):                       # segments starting at s
            mx = -np.inf
            for l in range(1, min(L, T - s) + 1):
                v = scores[(first[s + l] + l - 1) * K + y] + bE[s + l, y]
                if v > mx:
                    mx = v
            tot = 0.0
            for l in range(1, min(L, T - s) + 1):
                part = (first[s + l] + l - 1) * K + y
                v = scores[part] + bE[s + l, y]
                tot += np.exp(v - mx)
                mu[part] = np.exp(aS[s, y] + v - logZ)
            bS[s, y] = mx + np.log(tot)
        if s >= 1:
            tb = n_seg + (s - 1) * K * K
            for a in range(K):
                mx = -np.inf
                for b in range(K):
                    v = scores[tb + a * K + b] + bS[s, b]
                    if v > mx:
                        mx = v
                tot = 0.0
                for b in range(K):
                    v = scores[tb + a * K + b] + bS[s, b]
                    tot += np.exp(v - mx)
                    mu[tb + a * K + b] = np.exp(aE[s, a] + v - logZ)
                bE[s, a] = mx + np.log(tot)
    return mu, logZ, np.isfinite(logZ)


def _sm_sample(scores, T, L, K, U):  # compiled by numba when available
    """Exact samples by forward filtering, backward sampling: row ``i`` holds the part
    indices of sample ``i`` (padded with -1), drawn with the uniforms ``U[i]`` (2T + 1)."""
    first = _first_slots(T, L)
    n_seg = first[T + 1] * K
    aE, aS = _sm_forward(scores, T, L, K, first)
    n = U.shape[0]
    out = np.full((n, 2 * T), -1, dtype=np.int64)
    logZ = _sm_log_z(aE, T, K)
    for i in range(n):
        u = U[i, 0]
        c = 0.0
        y = K - 1
        for b in range(K):
            c += np.exp(aE[T, b] - logZ)
            if u < c:
                y = b
                break
        e = T
        k = 0
        j = 1
        while True:
            u = U[i, j]
            j += 1
            c = 0.0
            ll = min(L, e)
            for l in range(1, min(L, e) + 1):
                c += np.exp(aS[e - l, y] + scores[(first[e] + l - 1) * K + y] - aE[e, y])
                if u < c:
                    ll = l
                    break
            out[i, k] = (first[e] + ll - 1) * K + y
            k += 1
            s = e - ll
            if s <= 0:
                break
            u = U[i, j]
            j += 1
            c = 0.0
            tb = n_seg + (s - 1) * K * K
            a_ = K - 1
            for a in range(K):
                c += np.exp(aE[s, a] + scores[tb + a * K + y] - aS[s, y])
                if u < c:
                    a_ = a
                    break
            out[i, k] = tb + a_ * K + y
            k += 1
            y = a_
            e = s
    return out


def _jit_helpers() -> bool:
    """Make :func:`_sm_forward` and :func:`_sm_log_z` callable from the compiled kernels (once); False when
    numba does not import."""
    if "helpers" not in _COMPILED:
        if numba_module() is None:
            return False
        from numba.extending import register_jitable
        for helper in (_first_slots, _sm_forward, _sm_log_z):
            register_jitable(helper)
        _COMPILED["helpers"] = True
    return True


def _compiled(fn):
    """``fn`` compiled: ahead of time (:mod:`structlp.compiled`), else by numba's JIT,
    else ``fn`` itself (Python)."""
    name = fn.__name__
    if name not in _COMPILED:
        _COMPILED[name] = (ahead_of_time("semi_markov_" + name[4:], fn)
                           or (jit(fn) if _jit_helpers() else None) or fn)
    return _COMPILED[name]


# ------------------------------------------------------------------ public functions
def semi_markov_viterbi(scores: Any, T: int, L: int, K: int) -> Tuple[np.ndarray, float]:
    """The best segmentation ``argmax_y s . mu(y)`` for the part scores ``s``.

    Parameters
    ----------
    scores : array (n_parts,)
        Part scores in the order of the module docstring.
    T, L, K : int
        Positions, longest segment (``L <= T``), labels.

    Returns
    -------
    parts : int64 array
        The indices of the maximizer's parts (its segments and transitions), from the
        last segment backwards.  Ties go to the shortest last segment, then to the
        smallest previous label.
    value : float
        Its score.
    """
    s = check_scores(scores, T, L, K, "semi_markov_viterbi", finite=False)
    parts, value, finite = _compiled(_sm_viterbi)(s, int(T), int(L), int(K))
    if not finite:               # the kernel met a NaN or an infinity (in one pass)
        raise _not_finite("semi_markov_viterbi")
    return parts, float(value)


def semi_markov_marginals(scores: Any, T: int, L: int, K: int) -> Tuple[np.ndarray, float]:
    """The part marginals and the log-partition function of ``p(y) ~ exp(s . mu(y))``.

    ``log Z = log sum_y exp(s . mu(y))`` and ``E_p[mu]`` (n_parts,) by forward-backward
    over the segments, in ``O(T (L K + K^2))``.

    Returns
    -------
    marginals : float64 array (n_parts,)
    log_z : float
    """
    s = check_scores(scores, T, L, K, "semi_markov_marginals")
    mu, logZ, finite = _compiled(_sm_marginals)(s, int(T), int(L), int(K))
    if not finite:       # pragma: no cover - finite scores give a finite log Z
        raise InvalidInputError("semi_markov_marginals: log Z is not finite.")
    return mu, float(logZ)


def semi_markov_sample(scores: Any, T: int, L: int, K: int, n: int,
                       rng: np.random.Generator) -> List[np.ndarray]:
    """``n`` exact samples of ``p(y) ~ exp(s . mu(y))`` (forward filtering, backward
    sampling), each as the int64 array of its part indices."""
    s = check_scores(scores, T, L, K, "semi_markov_sample")
    U = rng.random((int(n), 2 * int(T) + 1))
    rows = _compiled(_sm_sample)(s, int(T), int(L), int(K), U)
    return [r[r >= 0] for r in rows]


def semi_markov_k_best(scores: Any, T: int, L: int, K: int,
                       k: int) -> Tuple[List[np.ndarray], np.ndarray]:
    """The ``k`` best segmentations (fewer when there are fewer), by k-best Viterbi: every
    node of the segment DAG keeps its ``k`` best partial paths.

    Returns
    -------
    outputs : list of int64 arrays, the part indices of each output
    values : float64 array, their scores, non-increasing
    """
    s = check_scores(scores, T, L, K, "semi_markov_k_best")
    T, L, K, k = int(T), int(L), int(K), int(k)
    first = segment_layout(T, L)[0]
    n_seg = int(first[-1]) * K
    vS = np.full((T, K, k), -np.inf)
    vS[0, :, 0] = 0.0
    vE = np.full((T + 1, K, k), -np.inf)
    pS = np.zeros((T, K, k, 2), dtype=np.int64)        # (previous label, its rank)
    pE = np.zeros((T + 1, K, k, 2), dtype=np.int64)    # (length, rank at the start)
    for e in range(1, T + 1):
        m = min(L, e)
        seg = s[(first[e] + np.arange(m))[:, None] * K + np.arange(K)]        # (m, K)
        cand = vS[e - np.arange(1, m + 1)] + seg[:, :, None]                  # (m, K, k)
        cand = cand.transpose(1, 0, 2).reshape(K, m * k)
        top = np.argsort(-cand, axis=1, kind="stable")[:, :k]
        vE[e, :, :top.shape[1]] = np.take_along_axis(cand, top, axis=1)
        pE[e, :, :top.shape[1], 0] = top // k + 1
        pE[e, :, :top.shape[1], 1] = top % k
        if e < T:
            tr = s[n_seg + (e - 1) * K * K + np.arange(K * K)].reshape(K, K)    # (a, b)
            cand = vE[e][:, None, :] + tr[:, :, None]                            # (a, b, k)
            cand = cand.transpose(1, 0, 2).reshape(K, K * k)
            top = np.argsort(-cand, axis=1, kind="stable")[:, :k]
            vS[e, :, :top.shape[1]] = np.take_along_axis(cand, top, axis=1)
            pS[e, :, :top.shape[1], 0] = top // k
            pS[e, :, :top.shape[1], 1] = top % k
    final = vE[T].ravel()
    order = np.argsort(-final, kind="stable")[:k]
    order = order[np.isfinite(final[order])]
    outputs = []
    for o in order:
        y, r = divmod(int(o), k)
        e, parts = T, []
        while True:
            l, r = pE[e, y, r]
            parts.append((int(first[e]) + int(l) - 1) * K + y)
            e -= int(l)
            if e == 0:
                break
            a, r = pS[e, y, r]
            parts.append(n_seg + (e - 1) * K * K + int(a) * K + y)
            y = int(a)
        outputs.append(np.array(parts, dtype=np.int64))
    return outputs, final[order]


def _check_kernel_args(scores, T, L, K, *rest):
    """The value check of the compiled kernels' arguments (:func:`structlp.compiled.aot`)."""
    check_scores(scores, T, L, K, "semi_markov")
    if rest and (rest[0].ndim != 2 or rest[0].shape[1] != 2 * T + 1):
        raise InvalidInputError(f"semi_markov_sample: U must have shape (n, {2 * T + 1}); "
                                f"got {rest[0].shape}.")
