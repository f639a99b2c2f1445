"""Block-coordinate Frank–Wolfe (Lacoste-Julien et al. 2013) on the structured hinge."""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np

from ._validation import check_bool, check_choice, check_scalar
from .base import BaseEstimator, StructuredPredictorMixin
from .compiler import matvec, prepare, stacked_scores, transposes
from .cutting_plane import _needs_polytopes
from .exceptions import ConvergenceWarning
from .exceptions import InvalidInputError, InvalidParameterError
from .inference import check_oracle_solver
from .parallel import OraclePool, check_backend, check_n_jobs
from .solvers import check_solver


def check_random_state(random_state, owner=None):
    """A numpy Generator from None, an int >= 0 or a Generator."""
    where = f" of {owner}" if owner else ""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) \
            and random_state >= 0:
        return np.random.default_rng(int(random_state))
    raise InvalidParameterError(
        f"The 'random_state' parameter{where} must be None, an int >= 0 or a "
        f"numpy.random.Generator. Got {random_state!r} instead.")


class _FirstOrderLearner(StructuredPredictorMixin, BaseEstimator):
    """Data handling, exact passes and prediction shared by the first-order learners."""

    # ------------------------------------------------------------ checks
    def _check_common(self):
        name = type(self).__name__
        C, _, opts = self._check_model_C_solver()
        # the solver is only for the inference LPs of models without a fast path
        solver = check_solver(self.solver, owner=name, kind="LP")
        tol = check_scalar(self.tol, "tol", kind=numbers.Real, low=0, low_inclusive=False,
                           owner=name)
        max_iter = check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                owner=name)
        batch_size = check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1,
                                  owner=name)
        check_n_jobs(self.n_jobs, owner=name)
        check_backend(self.backend, owner=name)
        timeout = check_scalar(self.scheduler_timeout, "scheduler_timeout", kind=numbers.Real,
                               low=0, low_inclusive=False, owner=name)
        rng = check_random_state(self.random_state, owner=name)
        return C, tol, max_iter, batch_size, solver, opts, timeout, rng

    def _prepare(self, X, Y):
        data = prepare(self.model, X, Y, need_polytopes=_needs_polytopes(self.model))
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        return data, polys

    def _fit(self, X, Y, solver, opts, timeout, run):
        """Prepare the data, open the oracle pool, ``run(pool, data, t0)``, record timings."""
        t0 = time.perf_counter()
        data, polys = self._prepare(X, Y)
        check_oracle_solver(self.model, data.X, polys, self.solver, type(self).__name__)
        t_prep = time.perf_counter() - t0
        with self._pool(data, polys, solver, opts, timeout) as pool:
            run(pool, data, t0)
        self.solver_ = solver
        self.n_features_in_ = data.n_features
        self.fit_time_["prepare"] = t_prep
        self.fit_time_["total"] = time.perf_counter() - t0
        return self

    def _pool(self, data, polys, solver, opts, timeout):
        return OraclePool(self.model, data.X, polys, solver, opts, n_jobs=self.n_jobs,
                          backend=self.backend, timeout=timeout, owner=type(self).__name__)

    @staticmethod
    def _exact_pass(pool, data, w):
        """Loss-augmented maximizers, exact hinge losses and augmented scores at ``w``."""
        s = stacked_scores(data.Phi, w)
        aug = [si + ci for si, ci in zip(s, data.c)]
        mus = pool.argmax(range(data.n_examples), aug)
        hinge = np.array([a @ mu + dd - si @ mt for a, mu, dd, si, mt
                          in zip(aug, mus, data.d, s, data.mu_true)])
        return mus, hinge, aug

    def hinge_losses(self, X, Y):
        """Structured hinge loss of each example under ``coef_`` (exact inference).

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted()
        data, polys = self._prepare(X, Y)
        if data.n_features != self.n_features_in_:
            raise InvalidInputError(
                f"X has {data.n_features} features per part; the learner was fitted with "
                f"{self.n_features_in_}.")
        pool = OraclePool(self.model, data.X, polys, self.solver_, self.solver_opts)
        return self._exact_pass(pool, data, self.coef_)[1]


class FrankWolfeLearner(_FirstOrderLearner):
    """Structured max-margin learning by block-coordinate Frank–Wolfe (BCFW).

    Solves the problem of :class:`~structlp.MaxMarginLearner`,

    .. math::

        \\min_{w\\in\\mathbb R^d}\\; F(w) = \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m H_i(w),
        \\qquad H_i(w) = \\max_{\\mu\\in P_i}\\big[(\\Phi_i w + c_i)\\cdot\\mu + d_i\\big]
                         - (\\Phi_i w)\\cdot\\mu_i ,

    (``Phi_i`` (L_i, d) part features, ``mu_i`` (L_i,) the true output, the loss
    ``d_i + c_i . mu``) through its dual over one distribution per example on
    the outputs, written with the averaged part vectors ``m_i`` (L_i,) in
    ``P_i``:

    .. math::

        \\max_{m_i\\in P_i}\\; D(m) = C\\sum_i (d_i + c_i\\cdot m_i) - \\tfrac12\\|w(m)\\|^2,
        \\qquad w(m) = C\\sum_i \\Phi_i^T(\\mu_i - m_i).

    Each step (Lacoste-Julien, Jaggi, Schmidt & Pletscher 2013, Algorithm 3)
    takes one example ``i`` (drawn as ``sampling`` says), finds the
    loss-augmented maximizer ``mu* = argmax_{mu in P_i} (Phi_i w + c_i) . mu``
    with the model's exact oracle (:meth:`~structlp.model.StructuredModel.inference`:
    Hungarian, blossom, maximum spanning tree, max-sum on trees; the inference LP
    where the model has none) and moves ``m_i`` towards ``mu*`` with the exact
    line search ``gamma = clip(g_i / ||C Phi_i^T (mu* - m_i)||^2, 0, 1)``, where
    ``g_i = C (Phi_i w + c_i) . (mu* - m_i) >= 0`` is the block's duality gap.
    Blocks are stored as part vectors, so sparse features are never densified
    and memory is that of the data, not ``m x d``.

    The stopping rule is the **duality gap** ``F(w) - D(m) >= F(w) - F(w*)``,
    evaluated exactly by a pass of loss-augmented inference over all examples
    at the current ``w``: training stops when ``gap <= tol * F(w)``.  So
    ``objective_`` is within a relative ``tol`` of the optimum of
    MaxMarginLearner, and ``duality_gap_`` is a certified bound.

    Parameters
    ----------
    model : StructuredModel
    C : float > 0, default=1.0
        Weight of the hinge losses.
    tol : float > 0, default=1e-4
        Stop when ``duality_gap_ <= tol * objective_`` (relative duality gap).
    max_iter : int >= 1, default=200
        Maximum number of epochs (passes over the examples).
    n_jobs : int or None, default=None
        Local worker processes for the oracles (None or 1: serial, -1: all cores).
    backend : None, "loky", "dask", a scheduler address or a distributed.Client
        Where the oracles run (see :mod:`structlp.parallel`); "dask" uses the
        current ``distributed`` client.
    random_state : None, int or numpy Generator
        Seeds the order of the blocks.
    batch_size : int >= 1, default=1
        Blocks whose oracles are called at the same ``w`` (and in parallel, with
        ``n_jobs``/``backend``); their updates are then applied one after the
        other, each with its own exact line search.  1 is the classical BCFW.
        The iterates depend on ``random_state`` and ``batch_size`` only, never
        on ``n_jobs`` or ``backend``.
    pairwise : bool, default=True
        Pairwise steps (Osokin et al. 2016): each block keeps its active outputs
        and their weights, and a step moves weight from the worst active output
        (lowest loss-augmented score) to the oracle's output, with the exact
        line search capped by that weight.  Much faster than the classical
        Frank–Wolfe step (``False``) when the optimum mixes several outputs.
    inner_steps : int >= 0, default=3
        With ``pairwise``: after each oracle call, up to this many further
        pairwise steps between the best and worst outputs already active in the
        block (no oracle call).
    sampling : {"gap", "uniform"}, default="gap"
        Order of the blocks in an epoch.  "uniform": a random permutation.
        "gap": after every block has a gap estimate (the first epoch), ``m``
        draws with probabilities proportional to the blocks' last known
        Frank–Wolfe gaps (Osokin et al. 2016), refreshed exactly for every
        block at each duality-gap check; blocks already at their optimum are
        then hardly visited.  On noisy bipartite data (m = 1000, 10 x 10) it
        needed 18-22 instead of 30-34 epochs at C = 0.01 and 61 instead of 205
        at C = 0.1 (``benchmarks/bench_frank_wolfe.py``).
    check_every : int >= 1 or None, default=None
        Evaluate the exact duality gap every ``check_every`` epochs; None: only
        when the running estimate (the block gaps met during the epoch) falls
        below ``tol * objective`` (and after the last epoch).
    solver, solver_opts : LP solver (cvxpy name; None: HiGHS, a simplex method that
        returns vertices) and options for models without a combinatorial oracle.
    scheduler_timeout : float > 0, default=10.0
        Seconds to wait for a dask scheduler given by address.

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    objective_ : float
        ``1/2 |w|^2 + C sum_i H_i(w)`` at ``coef_`` with exact hinge losses: the
        objective of MaxMarginLearner.
    dual_objective_ : float
        ``D(m)``, a lower bound on the optimum.
    duality_gap_ : float
        ``objective_ - dual_objective_ >= objective_ - optimum``.
    slack_ : ndarray, shape (n_examples,)
        The exact hinge losses ``H_i(coef_)``.
    n_iter_ : int
        Epochs run.
    n_oracle_calls_ : int
        Loss-augmented inferences, the gap passes included.
    converged_ : bool
    history_ : list of dict
        Per epoch: ``epoch``, ``time`` (s since fit began), ``check_time`` (s
        spent so far in exact gap passes), ``gap_estimate``, and at exact checks
        ``objective``, ``dual_objective``, ``duality_gap``.
    n_features_in_ : int
    fit_time_ : dict
        Seconds preparing the data ("prepare"), in inference ("inference", gap
        passes included), in the exact gap passes ("check") and in total ("total").
    """

    def __init__(self, model, C=1.0, tol=1e-4, max_iter=200, n_jobs=None, backend=None,
                 random_state=None, batch_size=1, pairwise=True, inner_steps=3, sampling="gap",
                 check_every=None, solver=None, solver_opts=None, scheduler_timeout=10.0):
        self.model = model
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.backend = backend
        self.random_state = random_state
        self.batch_size = batch_size
        self.pairwise = pairwise
        self.inner_steps = inner_steps
        self.sampling = sampling
        self.check_every = check_every
        self.solver = solver
        self.solver_opts = solver_opts
        self.scheduler_timeout = scheduler_timeout

    def fit(self, X, Y):
        """Run BCFW on ``(X, Y)`` until the relative duality gap is below ``tol``.

        Parameters
        ----------
        X : list of m examples
        Y : list of m outputs

        Returns
        -------
        self
        """
        name = type(self).__name__
        C, tol, max_iter, batch_size, solver, opts, timeout, rng = self._check_common()
        check_bool(self.pairwise, "pairwise", owner=name)
        inner_steps = check_scalar(self.inner_steps, "inner_steps", kind=numbers.Integral,
                                   low=0, owner=name)
        check_choice(self.sampling, "sampling", ("gap", "uniform"), owner=name)
        check_every = None if self.check_every is None else check_scalar(
            self.check_every, "check_every", kind=numbers.Integral, low=1, owner=name)
        return self._fit(X, Y, solver, opts, timeout, lambda pool, data, t0: self._run(
            pool, data, C, tol, max_iter, batch_size, check_every, rng, t0,
            bool(self.pairwise), inner_steps if self.pairwise else 0,
            self.sampling == "gap"))

    def _run(self, pool, data, C, tol, max_iter, batch_size, check_every, rng, t0,
             pairwise, inner_steps, gap_sampling):
        m, d = data.n_examples, data.n_features
        Phi, c, dd, mt = data.Phi, data.c, data.d, data.mu_true
        PhiT = transposes(Phi)
        blocks = [_Block(v, ci) for v, ci in zip(mt, c)]   # m_i = alpha_i @ V_i: the truth
        w = np.zeros(d)
        # ell = C sum_i (d_i + c_i . m_i), so that D(m) = ell - |w|^2 / 2
        ell = C * float(sum(di + b.loss() for di, b in zip(dd, blocks)))
        g_est = np.full(m, np.inf)
        history, t_inf, t_check, n_calls = [], 0.0, 0.0, 0
        converged = False
        obj = dual = gap = np.inf
        hinge = None
        epoch = 0
        clock = time.perf_counter
        oracle = pool.argmax_one
        for epoch in range(1, max_iter + 1):
            if gap_sampling and np.isfinite(g_est).all() and g_est.sum() > 0:
                # blocks drawn in proportion to their last known gaps (Osokin et al. 2016)
                # mixed with uniform draws, so that no block starves on a stale estimate
                p = (1.0 - _UNIFORM_SHARE) * g_est / g_est.sum() + _UNIFORM_SHARE / m
                perm = rng.choice(m, size=m, p=p / p.sum()).tolist()
            else:
                perm = rng.permutation(m).tolist()
            if batch_size == 1:               # classical BCFW: one oracle call, one step
                for i in perm:
                    ti = clock()
                    a = matvec(Phi[i], w) + c[i]
                    mu = oracle(i, a)
                    t_inf += clock() - ti
                    g, dl = blocks[i].step(mu, a, w, Phi[i], PhiT[i], c[i], C, pairwise,
                                           inner_steps)
                    g_est[i] = g if g > 0.0 else 0.0
                    ell += C * dl
            else:                             # the batch's oracles at the same w
                for k in range(0, m, batch_size):
                    batch = perm[k:k + batch_size]
                    ti = clock()
                    mus = pool.argmax(batch, [matvec(Phi[i], w) + c[i] for i in batch])
                    t_inf += clock() - ti
                    for i, mu in zip(batch, mus):
                        g, dl = blocks[i].step(mu, matvec(Phi[i], w) + c[i], w, Phi[i],
                                               PhiT[i], c[i], C, pairwise, inner_steps)
                        g_est[i] = g if g > 0.0 else 0.0
                        ell += C * dl
            n_calls += m
            self._after_epoch(epoch, w)
            gap_est = float(g_est.sum())
            # the duality gap is the sum of the block gaps: F(w) = D(m) + gap
            obj_est = ell - 0.5 * float(w.dot(w)) + gap_est
            rec = dict(epoch=epoch, gap_estimate=gap_est)
            due = (epoch == max_iter or gap_est <= tol * obj_est if check_every is None
                   else epoch % check_every == 0 or epoch == max_iter)
            if due:
                tc = time.perf_counter()
                # exact w and D from the block variables (no drift), then the exact gap
                w = np.zeros(d)
                ell = 0.0
                margs = []
                for PT, t, di, blk in zip(PhiT, mt, dd, blocks):
                    blk.normalize()
                    margs.append(blk.marginal())
                    w += C * matvec(PT, t - margs[-1])
                    ell += C * (di + blk.loss())
                ti = time.perf_counter()
                mus, hinge, aug = self._exact_pass(pool, data, w)
                t_inf += time.perf_counter() - ti
                g_est = np.array([max(C * float(a @ (mu - mi)), 0.0)     # exact block gaps
                                  for a, mu, mi in zip(aug, mus, margs)])
                n_calls += m
                obj = 0.5 * float(w @ w) + C * float(hinge.sum())
                dual = ell - 0.5 * float(w @ w)
                gap = max(obj - dual, 0.0)
                rec.update(objective=obj, dual_objective=dual, duality_gap=gap)
                converged = gap <= tol * max(obj, 0.0)
                t_check += time.perf_counter() - tc
            rec["time"] = time.perf_counter() - t0
            rec["check_time"] = t_check
            history.append(rec)
            if converged:
                break
        if not converged:
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={max_iter} epochs with a "
                f"relative duality gap of {gap / max(obj, 1e-300):.3g} > tol={tol:g}; raise "
                "max_iter or tol.", ConvergenceWarning, stacklevel=3)
        self.coef_ = w
        self.slack_ = hinge
        self.objective_ = float(obj)
        self.dual_objective_ = float(dual)
        self.duality_gap_ = float(gap)
        self.n_iter_ = epoch
        self.n_oracle_calls_ = n_calls
        self.converged_ = bool(converged)
        self.history_ = history
        self.fit_time_ = {"inference": t_inf, "check": t_check}

    def _after_epoch(self, epoch, w):
        """Called with the running ``w`` after each epoch (a hook for monitoring, e.g. the
        benchmarks' objective curves; it must not change ``w``)."""


_UNIFORM_SHARE = 0.2   # share of the uniform distribution in gap sampling


class _Block:
    """One example's dual variable ``m_i = alpha @ V[:n]``: active outputs and weights.

    ``V`` (rows: the active part vectors), ``alpha`` (their weights, summing to
    one) and ``lv`` (their loss coefficients ``c_i . v``) are stored with spare
    capacity; outputs are found by the bit pattern of their part vector.
    """

    __slots__ = ("V", "alpha", "lv", "n", "keys", "rowkeys")

    def __init__(self, mu, c):
        mu = np.asarray(mu, dtype=float)
        self.V = np.zeros((4, mu.size))
        self.alpha = np.zeros(4)
        self.lv = np.zeros(4)
        self._clear()
        self.add(mu, 1.0, c)

    def _clear(self):
        self.alpha[:] = 0.0
        self.n = 0
        self.keys, self.rowkeys = {}, []

    def step(self, mu, a, w, P, PT, c, C, pairwise, inner_steps):
        """One Frank–Wolfe step of this block towards the oracle's output ``mu``.

        ``a = Phi_i w + c_i`` are the loss-augmented scores at the current ``w``,
        which is updated in place (``w = C sum_i Phi_i^T (mu_i - m_i)``).  With
        ``pairwise``, weight moves from the worst active output to ``mu``, then up
        to ``inner_steps`` pairwise steps between the best and the worst active
        outputs follow.  Returns the block's Frank–Wolfe gap
        ``C a . (mu - m_i)`` before the step and the change of ``c_i . m_i``.
        """
        n = self.n
        V, alpha, lv = self.V, self.alpha, self.lv
        vals = V[:n].dot(a)
        amu = a.dot(mu)
        g = C * (amu - alpha[:n].dot(vals))
        if g <= 0.0:
            return g, 0.0
        if pairwise:
            # move weight from the worst active output to mu (Osokin et al. 2016)
            k = int(vals.argmin())
            g_dir, cap = C * (amu - vals[k]), alpha[k]
            delta = mu - V[k]
            lost = lv[k]
        else:
            g_dir, cap = g, 1.0
            delta = mu - self.marginal()
            lost = self.loss()
        if g_dir <= 0.0:
            return g, 0.0
        gamma = self._line_search(w, PT, delta, g_dir, cap, C)
        if gamma <= 0.0:
            return g, 0.0
        if pairwise:
            alpha[k] -= gamma
        elif gamma >= 1.0:                            # a full step: mu alone remains
            self._clear()
        else:
            alpha[:n] *= 1.0 - gamma
        dl = gamma * (self.add(mu, gamma, c) - lost)
        if pairwise:
            if self.alpha[k] <= 1e-12:                # drop step: the output leaves
                self.remove(k)
            elif self.n == 2:      # the only pair is (V[k], mu), just line-searched exactly
                return g, dl
            for _ in range(inner_steps):             # pairwise steps inside the active set
                n = self.n
                if n < 2:
                    break
                vals = self.V[:n].dot(matvec(P, w) + c)
                kf, ka = int(vals.argmax()), int(vals.argmin())
                g2 = C * (vals[kf] - vals[ka])
                if g2 <= 1e-3 * g:
                    break
                gamma = self._line_search(w, PT, self.V[kf] - self.V[ka], g2,
                                          self.alpha[ka], C)
                self.alpha[kf] += gamma
                self.alpha[ka] -= gamma
                dl += gamma * (self.lv[kf] - self.lv[ka])
                if self.alpha[ka] <= 1e-12:
                    self.remove(ka)
        return g, dl

    @staticmethod
    def _line_search(w, PT, delta, g_dir, cap, C):
        """Exact line search along ``m_i += gamma delta``, ``gamma <= cap``; moves ``w``.

        ``w`` changes by ``-gamma v`` with ``v = C Phi_i^T delta``, and the dual
        objective by ``gamma g_dir - gamma^2 |v|^2 / 2``."""
        v = matvec(PT, delta)
        den = C * C * v.dot(v)
        gamma = cap if den <= 0.0 else min(cap, g_dir / den)
        if gamma > 0.0:
            w -= (gamma * C) * v
        return gamma

    def add(self, mu, weight, c):
        """Add ``weight`` to output ``mu`` (made active if new); returns ``c . mu``."""
        key = (mu > 0.5).tobytes()
        j = self.keys.get(key)
        if j is None:
            j = self.n
            if j == len(self.alpha):                  # grow the capacity
                self.V = np.vstack([self.V, np.zeros_like(self.V)])
                self.alpha = np.concatenate([self.alpha, np.zeros(j)])
                self.lv = np.concatenate([self.lv, np.zeros(j)])
            self.V[j] = mu
            self.alpha[j] = 0.0
            self.lv[j] = c.dot(mu)
            self.keys[key] = j
            self.rowkeys.append(key)
            self.n += 1
        self.alpha[j] += weight
        return self.lv[j]

    def remove(self, j):
        last = self.n - 1
        del self.keys[self.rowkeys[j]]
        if j != last:                                  # the last row takes its place
            self.V[j], self.alpha[j], self.lv[j] = self.V[last], self.alpha[last], self.lv[last]
            self.rowkeys[j] = self.rowkeys[last]
            self.keys[self.rowkeys[j]] = j
        self.rowkeys.pop()
        self.alpha[last] = 0.0
        self.n = last

    def normalize(self):
        self.alpha[:self.n] /= self.alpha[:self.n].sum()

    def marginal(self):
        return self.alpha[:self.n].dot(self.V[:self.n])

    def loss(self):
        """``c_i . m_i``."""
        return float(self.alpha[:self.n].dot(self.lv[:self.n]))
