"""The cutting plane's view of the part features, and its one-slack inference cache.

:class:`_Parts` is the one place where the cutting plane touches the part features
``Phi_i`` (scores ``Phi_i w``, joint features ``Phi_i^T mu``); :class:`_Cache` keeps the
outputs already found by their part supports and scores them from part scores.
"""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..part_features import MatrixFeatures, PartFeatures, StackedFeatures

#: The oracle's dense per-example vectors (part scores, loss-augmented scores, maximizers)
#: are made for groups of examples with at most this many parts in all, never for the
#: whole training set at once.
CHUNK_PARTS = 1 << 16

Support = Tuple[np.ndarray, np.ndarray]


def _nonzeros(vectors: Any, i: int) -> Support:
    """``(idx, vals)`` (int64, float) of the nonzeros of ``vectors[i]`` (a list of arrays or
    :class:`~structlp.compiler.SparseVectors`)."""
    if hasattr(vectors, "nonzeros"):
        idx, vals = vectors.nonzeros(i)
        return np.asarray(idx, dtype=np.int64), np.asarray(vals, dtype=float)
    return _support(vectors[i])


def _support(mu: np.ndarray) -> Support:
    """The nonzeros ``(idx, vals)`` of a part vector (indices increasing)."""
    mu = np.asarray(mu, dtype=float)
    idx = np.flatnonzero(mu)
    return idx, mu[idx]


def _key(idx: np.ndarray, vals: np.ndarray) -> bytes:
    """Hashable identity of an integral output given by its nonzeros (its active parts)."""
    return np.asarray(idx[vals > 0.5], dtype=np.int64).tobytes()


class _Parts:
    """Part scores ``Phi_i w`` and joint features ``Phi_i^T mu_i`` of a training set.

    Explicit ``Phi_i`` are stacked into one sparse matrix (one product for all
    examples); factored operators (:meth:`~structlp.model.StructuredModel.feature_operator`,
    e.g. :class:`~structlp.structures.tree_labeling.TreeFeatures`) are stacked by their
    own :meth:`~structlp.part_features.PartFeatures.stack` when they offer it (the first
    time a stacked product is asked for), and otherwise called per example.

    The parts of all examples are numbered in one sequence, *stacked rows*
    (:meth:`stacked_rows`), on which :meth:`scores_at` and :meth:`joint_at` act: the rows
    of the stacked operator when there is one, else part ``j`` of example ``i`` is row
    ``offsets[i] + j``.
    """

    def __init__(self, data: Any) -> None:
        self.d = data.n_features
        self.sizes = np.array([P.shape[0] for P in data.Phi], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.ops: Optional[List[PartFeatures]] = None
        self.Phi: Any = None
        self._stacked: Any = False              # False: not made yet; None: no stacked form
        if all(isinstance(P, MatrixFeatures) for P in data.Phi):
            self.Phi = sp.vstack([sp.csr_array(P.matrix) for P in data.Phi], format="csr")
        else:
            self.ops = list(data.Phi)

    # ------------------------------------------------------------ per example
    def score_chunks(self, w: np.ndarray) -> Iterator[Tuple[range, List[np.ndarray]]]:
        """``[Phi_i w]`` by groups of consecutive examples (at most :data:`CHUNK_PARTS`
        parts per group, at least one example): ``(examples, their score arrays)``."""
        m = len(self.sizes)
        full = None if self.ops is not None else self.Phi @ w
        start = 0
        while start < m:
            stop = int(np.searchsorted(self.offsets, self.offsets[start] + CHUNK_PARTS,
                                       side="right")) - 1
            stop = min(max(stop, start + 1), m)
            idx = range(start, stop)
            if full is None:
                yield idx, [self.ops[i].scores(w) for i in idx]  # type: ignore[index]
            else:
                yield idx, [full[self.offsets[i]:self.offsets[i + 1]] for i in idx]
            start = stop

    def chunk_support(self, vectors: Any, idx: range
                      ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The nonzeros of ``vectors[i]`` for the consecutive examples ``idx`` of a group of
        :meth:`score_chunks`, numbered within the group: ``(positions, vals, owner)``,
        ``owner`` the example's position in ``idx``."""
        nz = [_nonzeros(vectors, i) for i in idx]
        lens = [len(z) for z, _ in nz]
        off = self.offsets[idx.start:idx.stop] - self.offsets[idx.start]
        pos = np.concatenate([z for z, _ in nz]) + np.repeat(off, lens)
        return (pos, np.concatenate([v for _, v in nz]),
                np.repeat(np.arange(len(idx), dtype=np.int64), lens))

    def chunk_dense(self, vectors: Any, idx: range) -> np.ndarray:
        """``vectors[i]`` for the consecutive examples ``idx``, concatenated (dense)."""
        pos, vals, _ = self.chunk_support(vectors, idx)
        out = np.zeros(int(self.offsets[idx.stop] - self.offsets[idx.start]))
        out[pos] = vals
        return out

    def joint(self, sups: Sequence[Support], idx: Any = None) -> sp.csr_array:
        """``Phi_i^T mu_i`` of the examples ``idx`` (default: all), each ``mu_i`` given by its
        nonzeros ``sups[t] = (idx, vals)``: sparse (len(sups), d)."""
        k = len(sups)
        idx = range(k) if idx is None else idx
        if not k:
            return sp.csr_array((0, self.d))
        if self.ops is not None:
            return sp.csr_array(np.vstack([self.ops[i].joint_sparse(z, v)
                                           for i, (z, v) in zip(idx, sups)]))
        rows, vals, owner = self.stacked_rows(sups, idx)
        S = sp.csr_array((vals, (owner, rows)), shape=(k, self.Phi.shape[0]))
        return S @ self.Phi

    # ------------------------------------------------------------ stacked rows
    def stacked_rows(self, sups: Sequence[Support], idx: Any
                     ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The supports ``sups`` of the examples ``idx`` as stacked rows: ``(rows, vals,
        owner)``, ``owner`` the position in ``sups`` of each entry.

        Stacked rows number the parts of all examples: ``offsets[i] + j`` for part ``j``
        of example ``i``, or the stacked operator's own numbering
        (:meth:`~structlp.part_features.StackedFeatures.rows`) when there is one."""
        idx = np.asarray(list(idx), dtype=np.int64)
        if not len(idx):
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
        lens = [len(z) for z, _ in sups]
        owner = np.repeat(np.arange(len(idx), dtype=np.int64), lens)
        local = np.concatenate([z for z, _ in sups]).astype(np.int64)
        vals = np.concatenate([v for _, v in sups]).astype(float)
        st = self.stacked() if self.ops is not None else None
        rows = st.rows(idx[owner], local) if st is not None else local + self.offsets[idx][owner]
        return rows, vals, owner

    def stacked(self) -> Optional[StackedFeatures]:
        """The factored operators stacked (:meth:`PartFeatures.stack`), or None."""
        if self._stacked is False:
            ops = self.ops or []
            kinds = {type(P) for P in ops}
            self._stacked = kinds.pop().stack(ops) if len(kinds) == 1 else None
        return self._stacked

    def _by_example(self, rows: np.ndarray) -> Iterator[Tuple[int, np.ndarray]]:
        """Positions in ``rows`` grouped by example: ``(i, positions)``."""
        ex = np.searchsorted(self.offsets, rows, side="right") - 1
        order = np.argsort(ex, kind="stable")
        cuts = np.flatnonzero(np.diff(ex[order])) + 1
        for pos in np.split(order, cuts) if len(order) else []:
            yield int(ex[pos[0]]), pos

    def scores_at(self, w: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Part scores ``(Phi w)[rows]`` of stacked rows (repeats allowed)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.ops is None:
            return np.asarray(self.Phi @ w)[rows]
        st = self.stacked()
        if st is not None:
            return st.scores_at(w, rows)
        out = np.empty(len(rows))
        for i, pos in self._by_example(rows):
            out[pos] = self.ops[i].scores_at(w, rows[pos] - self.offsets[i])
        return out

    def joint_at(self, rows: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``sum_r vals_r Phi[rows_r]`` over stacked rows (repeats add up): dense (d,)."""
        rows = np.asarray(rows, dtype=np.int64)
        vals = np.asarray(vals, dtype=float)
        if self.ops is None:
            S = sp.csr_array((vals, (np.zeros(len(rows), dtype=np.int64), rows)),
                             shape=(1, self.Phi.shape[0]))
            return np.asarray((S @ self.Phi).toarray(), dtype=float).ravel()
        st = self.stacked()
        if st is not None:
            return np.asarray(st.joint_sparse(rows, vals), dtype=float).ravel()
        g = np.zeros(self.d)
        for i, pos in self._by_example(rows):
            g += self.ops[i].joint_sparse(rows[pos] - self.offsets[i], vals[pos])
        return g


class _Cache:
    """Per-example inference cache (Joachims, Finley & Yu 2009): outputs already found,
    at most ``size`` per example, the least recently used dropped first.

    An output is stored by its part support (its nonzeros as stacked rows of
    :class:`_Parts` and their values: for a chain about ``2n`` entries) with its loss,
    never as a joint-feature row.  The supports of the cached and of the true outputs
    index the distinct stacked rows they use, ``u``, through two sparse count matrices
    (cached outputs x ``u`` and examples x ``u``), so that :meth:`best` scores every
    cached output from the part scores ``(Phi w)[u]`` (one :meth:`_Parts.scores_at` for
    all examples) and forms the joint cut from the chosen outputs' part counts (one
    :meth:`_Parts.joint_at`, the parts they share with the truth cancelled first).
    Outputs are kept grouped by example, in the order they came.
    """

    def __init__(self, m: int, size: int) -> None:
        self.m, self.size = m, size
        self.ex = np.zeros(0, dtype=np.int64)       # example of each cached output
        self.loss = np.zeros(0)
        self.used = np.zeros(0)
        self.rows = np.zeros(0, dtype=np.int64)     # the supports, concatenated
        self.vals = np.zeros(0)
        self.owner = np.zeros(0, dtype=np.int64)    # the output of each support entry
        self.keys: List[set] = [set() for _ in range(m)]
        self.rowkeys: List[bytes] = []
        self.truth: Any = None
        self._index: Any = None                     # (u, A, T), made by best when None

    def __len__(self) -> int:
        return len(self.ex)

    def set_truth(self, truth: Tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """The true outputs' supports as stacked rows ``(rows, vals, owner)``, ``owner``
        their examples (set by every fit: stacked rows may be renumbered)."""
        self.truth = truth
        self._index = None

    def add(self, ex: Sequence[int], keys: Sequence[bytes], rows: np.ndarray,
            vals: np.ndarray, owner: np.ndarray, losses: np.ndarray, now: float) -> None:
        """Add new outputs (output ``t`` of example ``ex[t]``: the entries ``owner == t`` of
        ``rows``, ``vals``) and drop the excess."""
        new = [k for k, (i, key) in enumerate(zip(ex, keys)) if key not in self.keys[i]]
        if not new:
            return
        for k in new:
            self.keys[ex[k]].add(keys[k])
        fresh = np.zeros(len(keys), dtype=bool)
        fresh[new] = True
        rank = np.cumsum(fresh) - 1 + len(self.ex)    # the new outputs' positions
        entries = fresh[owner]
        self.rows = np.concatenate([self.rows, rows[entries]])
        self.vals = np.concatenate([self.vals, vals[entries]])
        self.owner = np.concatenate([self.owner, rank[owner[entries]]])
        self.ex = np.concatenate([self.ex, np.asarray(ex, dtype=np.int64)[new]])
        self.loss = np.concatenate([self.loss, np.asarray(losses, dtype=float)[new]])
        self.used = np.concatenate([self.used, np.full(len(new), float(now))])
        self.rowkeys += [keys[k] for k in new]
        keep = np.ones(len(self.ex), dtype=bool)
        if np.bincount(self.ex, minlength=self.m).max() > self.size:   # least recently used
            order = np.lexsort((-self.used, self.ex))                      # out
            rank = np.arange(len(order)) - np.searchsorted(self.ex[order], self.ex[order])
            keep[:] = False
            keep[order[rank < self.size]] = True
            for t in np.flatnonzero(~keep):
                self.keys[self.ex[t]].discard(self.rowkeys[t])
        # keep the outputs grouped by example (stable: in the order they came)
        order = np.flatnonzero(keep)[np.argsort(self.ex[keep], kind="stable")]
        pos = np.full(len(self.ex), -1)
        pos[order] = np.arange(len(order))
        entries = keep[self.owner]
        self.owner = pos[self.owner[entries]]
        self.rows, self.vals = self.rows[entries], self.vals[entries]
        self.ex, self.loss, self.used = self.ex[order], self.loss[order], self.used[order]
        self.rowkeys = [self.rowkeys[t] for t in order]
        self._index = None

    def _counts(self):
        """``(u, A, T)``: the distinct stacked rows ``u`` of the cached and true supports,
        the cached outputs' counts ``A`` (n, len(u)) and the true outputs' ``T`` (m, len(u))."""
        if self._index is None:
            trows, tvals, towner = self.truth
            n, P = len(self.ex), len(self.rows)
            u, inv = np.unique(np.concatenate((self.rows, trows)), return_inverse=True)
            inv = inv.ravel()
            A = sp.csr_array((self.vals, (self.owner, inv[:P])), shape=(n, len(u)))
            T = sp.csr_array((tvals, (towner, inv[P:])), shape=(self.m, len(u)))
            self._index = (u, A, T)
        return self._index

    def best(self, parts: _Parts, w: np.ndarray, base_loss: np.ndarray, now: float
             ) -> Tuple[np.ndarray, float, float]:
        """The most violating cached output of every example (the truth if none is).

        Parameters
        ----------
        parts : _Parts
        w : ndarray, shape (d,)
        base_loss : ndarray, shape (m,)
            The loss of each true output.
        now : float
            The round (marks the chosen outputs as used).

        Returns
        -------
        g : ndarray, shape (d,)
            The joint cut's row ``mean_i (f_i(y_i) - f_i(ybar_i))``.
        b : float
            Its loss ``mean_i loss_i(ybar_i)``.
        mean_hinge : float
            ``mean_i [loss_i(ybar_i) - w . (f_i(y_i) - f_i(ybar_i))]``.
        """
        m, n = self.m, len(self.ex)
        best = np.asarray(base_loss, dtype=float).copy()    # the truth's hinge: its loss
        if not n:
            return np.zeros(parts.d), float(best.mean()), float(best.mean())
        u, A, T = self._counts()
        su = parts.scores_at(w, u)
        h = self.loss + A @ su - (T @ su)[self.ex]      # loss - w . (f_i(y_i) - f_i(y))
        # the first best output of each example (outputs grouped by example)
        starts = np.flatnonzero(np.r_[True, self.ex[1:] != self.ex[:-1]])
        top = np.maximum.reduceat(h, starts)
        at = np.flatnonzero(h == np.repeat(top, np.diff(np.r_[starts, n])))
        first = at[np.r_[True, self.ex[at][1:] != self.ex[at][:-1]]]
        first = first[h[first] > best[self.ex[first]]]
        pick = np.full(m, -1)
        best[self.ex[first]] = h[first]
        pick[self.ex[first]] = first
        chosen = pick[pick >= 0]
        self.used[chosen] = now
        if not len(chosen):
            return np.zeros(parts.d), float(best.mean()), float(best.mean())
        # the counts of mean_i (f_i(y_i) - f_i(ybar_i)) on u: shared parts cancel here
        counts = T.T @ (pick >= 0).astype(float) - A.T @ np.bincount(
            chosen, minlength=n).astype(float)
        nz = np.flatnonzero(counts)
        g = parts.joint_at(u[nz], counts[nz]) / m
        lsum = float(base_loss[pick < 0].sum() + self.loss[chosen].sum()) / m
        return g, lsum, float(best.mean())
