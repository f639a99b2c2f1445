"""Frank–Wolfe block stores: each example's active outputs and their weights, with the
Gram (many features) or psi (few features) bookkeeping of the block-coordinate steps."""

from __future__ import annotations

import numpy as np

from ._fw_kernels import _DROP, _compiled, _kernel, _line_search, _psi_pass, _psi_step


def _compact_loss(idx, vals):
    """A loss vector ``c`` by its nonzeros ``(idx, vals)``, as ``(slice, values)`` over the
    span of its nonzeros (zeros included) when that span is at most twice their count
    (an add over a slice is much cheaper than one over indices), else as it came."""
    if idx.size and idx[-1] - idx[0] < 2 * idx.size:
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        span = np.zeros(hi - lo)
        span[idx - lo] = vals
        return slice(lo, hi), span
    return idx.astype(np.intp), vals


def _loss_of(mu, c):
    """``c . mu`` for ``c`` given by its nonzeros (see :func:`_compact_loss`)."""
    return float(c[1].dot(mu[c[0]]))


def _vertex(mu, c):
    """An oracle output in compact form: ``(idx, vals, key, loss c . mu)`` with
    ``mu[idx] = vals`` its nonzeros (``c`` is given by its nonzeros ``(idx, vals)``)."""
    idx = (mu != 0).nonzero()[0]      # (a bool array: much faster than a float one)
    vals = mu[idx]
    return idx, vals, idx.tobytes() + vals.tobytes(), _loss_of(mu, c)


class _GramBlocks:
    """The blocks without psi rows (many features): one :class:`_Block` per example.

    ``step``, ``value``, ``primal`` and ``restart`` are those of :class:`_PsiBlocks`;
    there are no passes without oracle (a visit needs the block's part scores)."""

    cache_passes = False
    cache_share = 0.05

    def __init__(self, truths, c):
        self.blocks = [_Block(_vertex(t, ci)) for t, ci in zip(truths, c)]

    def restart(self, ops, mu_true):
        """Warm start: the features may differ, so the Gram matrices are made afresh."""
        for blk in self.blocks:
            blk.ng = 0

    def step(self, i, mu, a, w, op, c, C, pairwise, inner_steps):
        """Block ``i``'s Frank–Wolfe step towards the oracle's output ``mu`` (see
        :meth:`_Block.step`); returns the block's gap and the change of ``c_i . m_i``."""
        return self.blocks[i].step(_vertex(mu, c), a, w, op, C, pairwise, inner_steps)

    def value(self, i, a, w):
        """``a . m_i`` at the loss-augmented scores ``a`` of ``w``."""
        return self.blocks[i].value(a)

    def loss(self, i):
        """``c_i . m_i``."""
        return self.blocks[i].loss()

    def marginal(self, i, L):
        """``m_i`` as a dense part vector (L,) (for tests and inspection)."""
        return self.blocks[i].marginal(L)

    def primal(self, ops, mu_true, dd, C, d):
        """``w = C sum_i Phi_i^T (mu_i - m_i)`` and ``ell = C sum_i (d_i + c_i . m_i)``
        afresh from the block variables (normalized first)."""
        w = np.zeros(d)
        ell = 0.0
        for i, (blk, op, di) in enumerate(zip(self.blocks, ops, dd)):
            blk.normalize()
            w += C * blk.joint(op, mu_true.nonzeros(i))
            ell += C * (di + blk.loss())
        return w, ell


class _Block:
    """One example's dual variable ``m_i = sum_j alpha_j v_j``: its active outputs.

    An active output ``v_j`` (a vertex, a 0/1 part vector) is stored compactly:
    its nonzeros (``idx`` and ``val``, rows padded with zero values) and its loss
    coefficient ``lv_j = c_i . v_j``; never as a dense (L_i,) vector.  Rows have spare
    capacity; outputs are found by the bytes of their nonzeros.  The Gram matrix
    ``G[j, l] = psi_j . psi_l`` of the active outputs (rows ``< ng`` known) lets the
    pairwise steps inside the active set run on ``n``-vectors
    (:func:`_pairwise_steps`), with one product by ``Phi_i^T`` per visit to move ``w``
    instead of a part-score and a joint-feature product per step.
    """

    __slots__ = ("idx", "val", "alpha", "lv", "n", "keys", "rowkeys", "G", "ng")

    def __init__(self, vertex):
        idx = vertex[0]
        self.idx = np.zeros((4, idx.size), dtype=np.intp)
        self.val = np.zeros((4, idx.size))
        self.alpha = np.zeros(4)
        self.lv = np.zeros(4)
        self.G = np.zeros((4, 4))
        self._clear()
        self.add(vertex, 1.0)

    def _clear(self):
        self.alpha[:] = 0.0
        self.n = self.ng = 0
        self.keys, self.rowkeys = {}, []

    def values(self, a):
        """``a . v_j`` of the active outputs at the loss-augmented scores ``a = Phi_i w + c_i``."""
        n = self.n
        return np.einsum("ij,ij->i", a[self.idx[:n]], self.val[:n])

    def value(self, a):
        """``a . m_i`` from the nonzeros."""
        return float(self.alpha[:self.n].dot(self.values(a)))

    def step(self, vertex, a, w, op, C, pairwise, inner_steps):
        """One Frank–Wolfe step of this block towards the oracle's output ``mu``.

        ``vertex`` is ``mu`` in compact form (:func:`_vertex`), ``a = Phi_i w + c_i`` the
        loss-augmented scores at the current ``w``, which is updated in place
        (``w = C sum_i Phi_i^T (mu_i - m_i)``; ``op`` is ``Phi_i``).  With ``pairwise``,
        weight moves from the worst active output to ``mu``, then up to
        ``inner_steps`` pairwise steps between the best and the worst active outputs
        follow.  Returns the block's Frank–Wolfe gap ``C a . (mu - m_i)`` before the
        step and the change of ``c_i . m_i``.
        """
        idx, vals, key, _ = vertex
        n = self.n
        alpha = self.alpha
        act = self.values(a)
        amu = a[idx].dot(vals)
        g = C * (amu - alpha[:n].dot(act))
        if g <= 0.0:
            return g, 0.0
        if not pairwise:
            return g, self._classical(vertex, w, op, C, g)
        j = self.keys.get(key)
        if j is None:                     # mu joins with weight 0
            j = self.add(vertex, 0.0)
            act = np.append(act, amu)
        return g, self._pairwise(act, j, w, op, C, inner_steps, 1e-3 * g)

    def _classical(self, vertex, w, op, C, g):
        """The classical Frank–Wolfe step ``m_i += gamma (mu - m_i)`` of gap ``g``."""
        lost = self.loss()
        gamma = _line_search(w, self.joint(op, vertex[:2]), g, 1.0, C)
        if gamma <= 0.0:
            return 0.0
        if gamma >= 1.0:                              # a full step: mu alone remains
            self._clear()
        else:
            self.alpha[:self.n] *= 1.0 - gamma
        j = self.add(vertex, gamma)
        return gamma * (self.lv[j] - lost)

    def _pairwise(self, act, j, w, op, C, inner_steps, g_min):
        """Pairwise steps by :func:`_pairwise_steps` on the values ``act`` (n,) at ``w``
        (towards output ``j`` first), then ``w`` moved by the change of the weights and
        the outputs left without weight dropped.  Returns the change of ``c_i . m_i``."""
        n = self.n
        if self.ng < n:
            self._gram(op)
        alpha = self.alpha
        before = alpha[:n].copy()
        dl, steps = _kernel()(act, self.G, alpha, self.lv, n, j, C, inner_steps, g_min)
        if steps == 0:
            if alpha[j] <= _DROP:
                self.remove(j)
            return 0.0
        delta = alpha[:n] - before      # rows without change add exact zeros: all rows go
        w -= C * op.joint_sparse(self.idx[:n].ravel(), (delta[:, None] * self.val[:n]).ravel())
        if alpha[:n].min() <= _DROP:
            for r in np.flatnonzero(alpha[:n] <= _DROP)[::-1]:   # drop steps
                self.remove(int(r))
        return dl

    def _gram(self, op):
        """Fill the Gram rows (and columns) ``ng..n-1``: ``psi_j . psi_l`` as
        ``(Phi_i Phi_i^T v_j) . v_l`` from the nonzeros (two operator products)."""
        n = self.n
        for r in range(self.ng, n):
            s = op.scores(op.joint_sparse(self.idx[r], self.val[r]))
            row = np.einsum("ij,ij->i", s[self.idx[:n]], self.val[:n])
            self.G[r, :n] = row
            self.G[:n, r] = row
        self.ng = n

    def add(self, vertex, weight):
        """Add ``weight`` to the output ``vertex`` (made active if new); returns its row."""
        idx, vals, key, lmu = vertex
        j = self.keys.get(key)
        if j is None:
            j = self.n
            if j == len(self.alpha):                  # grow the capacity
                self.idx = np.vstack([self.idx, np.zeros_like(self.idx)])
                self.val = np.vstack([self.val, np.zeros_like(self.val)])
                self.alpha = np.concatenate([self.alpha, np.zeros(j)])
                self.lv = np.concatenate([self.lv, np.zeros(j)])
                G = np.zeros((2 * j, 2 * j))
                G[:j, :j] = self.G
                self.G = G
            width = self.idx.shape[1]
            if idx.size > width:                      # more nonzeros: wider rows
                pad = idx.size - width
                self.idx = np.hstack([self.idx, np.zeros((len(self.alpha), pad), np.intp)])
                self.val = np.hstack([self.val, np.zeros((len(self.alpha), pad))])
            self.idx[j, :idx.size] = idx
            self.idx[j, idx.size:] = 0
            self.val[j, :idx.size] = vals
            self.val[j, idx.size:] = 0.0
            self.alpha[j] = 0.0
            self.lv[j] = lmu
            self.keys[key] = j
            self.rowkeys.append(key)
            self.n += 1
        self.alpha[j] += weight
        return j

    def remove(self, j):
        last = self.n - 1
        del self.keys[self.rowkeys[j]]
        if j != last:                                  # the last row takes its place
            self.idx[j], self.val[j] = self.idx[last], self.val[last]
            self.alpha[j], self.lv[j] = self.alpha[last], self.lv[last]
            self.rowkeys[j] = self.rowkeys[last]
            self.keys[self.rowkeys[j]] = j
        if j < self.ng:
            if self.ng == self.n:                      # the Gram matrix follows
                G = self.G
                G[j, :last], G[:last, j] = G[last, :last], G[:last, last]
                G[j, j] = G[last, last]
                self.ng = last
            else:
                self.ng = j
        self.rowkeys.pop()
        self.alpha[last] = 0.0
        self.n = last

    def normalize(self):
        self.alpha[:self.n] /= self.alpha[:self.n].sum()

    def marginal(self, L):
        """``m_i`` as a dense part vector (L,) (for tests and inspection)."""
        n = self.n
        return np.bincount(self.idx[:n].ravel(), (self.alpha[:n, None] * self.val[:n]).ravel(),
                           minlength=L)

    def joint(self, op, minus=None):
        """``Phi_i^T m_i`` (d,); with ``minus = (idx, vals)`` (a part vector's nonzeros),
        ``Phi_i^T (that vector - m_i)`` in one product."""
        n = self.n
        idx, vals = self.idx[:n].ravel(), (self.alpha[:n, None] * self.val[:n]).ravel()
        if minus is None:
            return op.joint_sparse(idx, vals)
        return op.joint_sparse(np.concatenate((minus[0], idx)),
                               np.concatenate((minus[1], -vals)))

    def loss(self):
        """``c_i . m_i``."""
        return float(self.alpha[:self.n].dot(self.lv[:self.n]))


class _PsiBlocks:
    """The blocks of psi mode (few features): all the active outputs in one pool of rows.

    Block ``i``'s active outputs are the pool rows ``rows[i, :n[i]]``; a row ``r``
    holds an output's joint feature ``psi[r] = Phi_i^T v`` (d,), its nonzeros
    (``idx[r, :nnz[r]]``, ``val[r, :nnz[r]]``), its loss ``lv[r] = c_i . v`` and its
    weight ``alpha[r]``; ``free[:nfree[0]]`` are the unused rows.  A step
    (:func:`_psi_step`, pairwise or classical, with its inner steps) and a whole pass
    without oracle (:func:`_psi_pass`) are each one call of a kernel on these arrays,
    compiled by numba when it imports, plain Python otherwise (the same operations in
    the same order: the same iterates).  Memory: the rows in use, their count at most
    twice the largest active set seen.
    """

    cache_passes = True
    cache_share = 0.05     # a pass without oracle must gain this share of the epoch's gain

    def __init__(self, ops, mu_true, c):
        self._step = _compiled(_psi_step)
        m, d = len(ops), ops[0].shape[1] if ops else 0
        nz = [mu_true.nonzeros(i) for i in range(m)]
        width = max((t.size for t, _ in nz), default=0)
        self.rows = np.zeros((m, 4), dtype=np.intp)
        self.rows[:, 0] = np.arange(m)
        self.n = np.ones(m, dtype=np.intp)
        R = 2 * m + 1
        self.psi = np.zeros((R, d))
        self.idx = np.zeros((R, width), dtype=np.intp)
        self.val = np.zeros((R, width))
        self.nnz = np.zeros(R, dtype=np.intp)
        self.alpha = np.zeros(R)
        self.lv = np.zeros(R)
        self.alpha[:m] = 1.0
        for i, (t_idx, t_val) in enumerate(nz):
            self.idx[i, :t_idx.size] = t_idx
            self.val[i, :t_idx.size] = t_val
            self.nnz[i] = t_idx.size
            self.lv[i] = _loss_of(np.bincount(t_idx, t_val, minlength=ops[i].shape[0]), c[i])
        self.free = np.arange(R - 1, m - 1, -1, dtype=np.intp)
        self.nfree = np.array([R - m], dtype=np.intp)
        # the losses by their nonzeros as index arrays (a span's zeros included)
        self.c = [(np.arange(ci[0].start, ci[0].stop) if isinstance(ci[0], slice) else ci[0],
                   ci[1]) for ci in c]
        self.restart(ops, mu_true)
        self._state()

    def restart(self, ops, mu_true):
        """The joint features of the active outputs and the sum of the truths' from their
        nonzeros (at the start, and at a warm start, where the features may differ)."""
        for i, op in enumerate(ops):
            for r in self.rows[i, :self.n[i]]:
                self.psi[r] = op.joint_sparse(self.idx[r, :self.nnz[r]], self.val[r, :self.nnz[r]])
        self.psi_true = sum((op.joint_sparse(*mu_true.nonzeros(i)) for i, op in
                             enumerate(ops)), np.zeros(self.psi.shape[1]))

    def _state(self):
        """The pool arrays, in the kernels' order (remade when they grow)."""
        self.state = (self.rows, self.n, self.psi, self.idx, self.val, self.nnz, self.alpha,
                      self.lv, self.free, self.nfree)

    def step(self, i, mu, a, w, op, c, C, pairwise, inner_steps):
        """Block ``i``'s Frank–Wolfe step towards the oracle's output ``mu`` (L_i,) at the
        current ``w`` (moved in place; ``a`` is not needed here): see :meth:`_Block.step`.
        Returns the block's gap and the change of ``c_i . m_i``."""
        mu = np.asarray(mu, dtype=float)
        psi_mu = op.joint(mu)
        c_idx, c_val = self.c[i]
        while True:
            g, dl, room = self._step(i, mu, psi_mu, c_idx, c_val, w, C, pairwise, inner_steps,
                                     *self.state)
            if room == 0:
                return g, dl
            self._grow(room)
            self._state()

    def _grow(self, room):
        """More room for a new output (nothing was changed): ``room`` = its nonzeros when
        the rows are too narrow, -1 when the block's slots or the free rows are used up."""
        if room > self.idx.shape[1]:
            pad = room - self.idx.shape[1]
            self.idx = np.hstack([self.idx, np.zeros((len(self.idx), pad), np.intp)])
            self.val = np.hstack([self.val, np.zeros((len(self.val), pad))])
            return
        if self.nfree[0] == 0:                    # twice the rows
            R = len(self.alpha)
            self.psi, self.idx, self.val = (np.concatenate([x, np.zeros_like(x)])
                                            for x in (self.psi, self.idx, self.val))
            self.nnz, self.alpha, self.lv = (np.concatenate([x, np.zeros_like(x)])
                                             for x in (self.nnz, self.alpha, self.lv))
            self.free = np.concatenate([np.arange(2 * R - 1, R - 1, -1, dtype=np.intp),
                                        self.free])
            self.nfree[0] = R
        else:                                     # twice the slots of every block
            self.rows = np.hstack([self.rows, np.zeros_like(self.rows)])

    def cache_pass(self, w, C, ell):
        """One pass without oracle: each block with two or more active outputs takes a
        pairwise step between its best and worst at the current ``w`` (moved in place).
        Returns ``ell`` plus ``C`` times the changes of the ``c_i . m_i``."""
        return _compiled(_psi_pass)(w, C, ell, *self.state)

    def active(self, i):
        """Block ``i``'s rows in the pool."""
        return self.rows[i, :self.n[i]]

    def value(self, i, a, w):
        """``a . m_i`` at the loss-augmented scores ``a`` of ``w``, as
        ``sum_j alpha_j (psi_j . w + lv_j)``."""
        r = self.active(i)
        return float(self.alpha[r].dot(self.psi[r].dot(w) + self.lv[r]))

    def primal(self, ops, mu_true, dd, C, d):
        """``w = C sum_i (psi_i(y_i) - psi_i(m_i))`` and ``ell = C sum_i (d_i + c_i . m_i)``
        afresh from the block variables (normalized first)."""
        blk = np.repeat(np.arange(len(self.n)), self.n)
        r = self.rows[np.arange(self.rows.shape[1]) < self.n[:, None]]   # block by block
        self.alpha[r] /= np.bincount(blk, self.alpha[r])[blk]
        w = C * (self.psi_true - self.alpha[r].dot(self.psi[r]))
        return w, C * (float(np.sum(dd)) + float(self.alpha[r].dot(self.lv[r])))

    def loss(self, i):
        """``c_i . m_i``."""
        r = self.active(i)
        return float(self.alpha[r].dot(self.lv[r]))

    def marginal(self, i, L):
        """``m_i`` as a dense part vector (L,) (for tests and inspection)."""
        r = self.active(i)
        return np.bincount(self.idx[r].ravel(), (self.alpha[r, None] * self.val[r]).ravel(),
                           minlength=L)


def run_cache_passes(blocks, w, C, ell, dual_before, gain, max_passes, order=None):
    """Passes without oracle (Shah et al. 2015): pairwise steps inside each block's active
    set at the current ``w``, while a pass gains at least ``blocks.cache_share`` of what the
    epoch of oracle calls gained in the dual (``gain``).  Where the store passes all in one
    kernel call (tree labellings), its passes visit the blocks in the order ``order`` (a
    permutation of them; None: by index).  Returns ``(ell, dual_before)`` after the
    passes."""
    run = getattr(blocks, "run_passes", None)
    if run is not None and max_passes > 0:      # all the passes in one kernel call
        return run(w, C, ell, dual_before, gain, max_passes, order)
    for _ in range(max_passes if blocks.cache_passes else 0):
        ell = blocks.cache_pass(w, C, ell)
        dual_now = ell - 0.5 * float(w.dot(w))
        pass_gain, dual_before = dual_now - dual_before, dual_now
        if pass_gain < blocks.cache_share * gain:
            break
    return ell, dual_before
