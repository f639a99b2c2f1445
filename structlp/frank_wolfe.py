"""Block-coordinate Frank–Wolfe (Lacoste-Julien et al. 2013) on the structured hinge."""

from __future__ import annotations

import numbers
import time
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from ._validation import check_bool, check_choice, check_random_state, check_scalar
from .base import BaseEstimator, StructuredPredictorMixin
from ._progress import Progress, check_callback, check_verbose
from .compiler import prepare
from .cutting_plane import _needs_polytopes
from .exceptions import ConvergenceWarning
from .exceptions import InvalidInputError, InvalidParameterError
from .inference import check_oracle_solver
from .model import StructuredModel
from .parallel import CHUNK, OraclePool, check_backend, check_n_jobs
from .solvers import check_solver


class _FirstOrderLearner(StructuredPredictorMixin, BaseEstimator):
    """Data handling, exact passes and prediction shared by the first-order learners."""

    solver_opts: Optional[Dict[str, Any]]    # a constructor parameter of each subclass

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
        check_verbose(self.verbose, owner=name)
        check_callback(self.callback, owner=name)
        check_bool(self.warm_start, "warm_start", owner=name)
        return C, tol, max_iter, batch_size, solver, opts, timeout, rng

    def _prepare(self, X, Y):
        data = prepare(self.model, X, Y, need_polytopes=_needs_polytopes(self.model),
                       operators=True)
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
    def _exact_pass(pool, data, w, visit=None):
        """Exact hinge losses (m,) at ``w`` by loss-augmented inference, chunk by chunk
        (the part vectors of a chunk only are held; ``c`` and the truths by their
        nonzeros); ``visit(i, a_i, mu_i)`` is called with each example's augmented
        scores and maximizer."""
        hinge = np.empty(data.n_examples)
        # a serial pool solves one task (CHUNK examples) at a time: larger chunks would
        # only hold more part vectors
        chunk = CHUNK if pool.kind == "serial" else _PASS_CHUNK
        for k in range(0, data.n_examples, chunk):
            idx = range(k, min(k + chunk, data.n_examples))
            truth = np.empty(len(idx))                # (Phi_i w) . mu_i
            aug = []
            for r, i in enumerate(idx):
                s = data.Phi[i].scores(w)
                t_idx, t_val = data.mu_true.nonzeros(i)
                truth[r] = s[t_idx].dot(t_val)
                aug.append(_augment(s, data.c.nonzeros(i)))
            for i, t, a, mu in zip(idx, truth, aug, pool.argmax(idx, aug)):
                hinge[i] = a.dot(mu) + data.d[i] - t
                if visit is not None:
                    visit(i, a, mu)
        return hinge

    def hinge_losses(self, X: Sequence[Any], Y: Sequence[Any]) -> np.ndarray:
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
        return self._exact_pass(pool, data, self.coef_)


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
    The features are used through the model's
    :meth:`~structlp.model.StructuredModel.feature_operator` (factored where the
    model offers it: chains and trees never build their part-feature matrices), and
    a block's active outputs are stored compactly, as their nonzeros (and, for up
    to 256 features or 4 times the nonzeros of an output, as their joint feature
    vectors ``Phi_i^T v`` (d,)), never as dense part vectors: memory is that of
    the data plus ``O(m d)``.  With joint features, a block's step (with its inner
    steps) and a pass without oracle are each one call of a kernel compiled by
    numba (a dependency; about 0.4 s CPU on its first call in a process, loading
    the compiled code cached on disk), the same code run as Python where numba
    cannot be imported, with bit-identical iterates.

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
    cache_passes : int >= 0, default=100
        With ``pairwise``: after each epoch of oracle calls, up to this many passes
        over the blocks without any oracle call, each block taking one pairwise
        step between its best and worst active outputs at the current ``w``
        (multi-plane BCFW, Shah, Kolmogorov & Lampert 2015); the passes stop as
        soon as one raises the dual objective by less than 5% of what the epoch of
        oracle calls did.  0 disables them.  They run only when the active outputs
        keep their joint features (up to 256 features or 4 times an output's
        nonzeros), where a whole pass is one compiled kernel call costing a small
        share of an epoch: on noisy bipartite data (m = 1000, 10 x 10, d = 20, C = 0.1;
        random_state 0-5) they cut the epochs from 34-46 (at most 10 passes) to
        23-27, and on small chains (k = 4, 4 node features, C = 1) from 112 (at most 10)
        to about 32.  Without joint features a visit needs the block's part scores,
        about the cost of an oracle step, and on OCR letters (4,004 features) the
        passes cost more time than they saved.
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
    verbose : int >= 0 or bool, default=0
        1: one log line per epoch (logger ``structlp.frank_wolfe``, INFO) with the
        gap estimate, the time and, at exact checks, the objective and the duality
        gap; 2: also a progress bar (tqdm, on a terminal).
    callback : callable or None, default=None
        Called after every epoch as ``callback(info)`` with ``info`` a dict
        (``iteration``, ``time``, ``gap_estimate``, and ``objective`` and
        ``duality_gap`` at exact checks); returning True stops the fit, which then
        certifies its last ``w`` by an exact gap pass and records ``converged_ = False``
        (no warning).
    warm_start : bool, default=False
        A refit starts from the dual state (the blocks' active outputs and weights)
        of the previous fit of this estimator, in this process, when the model, the
        number of examples, their part counts, true outputs and the feature count
        match (the features themselves may differ: ``w`` and the dual objective are
        recomputed from the blocks); otherwise, or after unpickling, it starts from
        ``m_i = mu_i`` (``w = 0``).  Iterates then differ from a cold fit.

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

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=20, n_rows=4, random_state=0)
    >>> fw = structlp.FrankWolfeLearner(model, C=0.1, tol=1e-4, random_state=0).fit(X, Y)
    >>> fw.converged_, bool(fw.duality_gap_ <= 1e-4 * fw.objective_)
    (True, True)
    >>> qp = structlp.MaxMarginLearner(model, C=0.1).fit(X, Y)   # the same objective
    >>> bool(abs(fw.objective_ - qp.objective_) <= 1e-3 * qp.objective_)
    True
    """

    def __init__(self, model: StructuredModel, C: float = 1.0, tol: float = 1e-4,
                 max_iter: int = 200, n_jobs: Optional[int] = None,
                 backend: Any = None,
                 random_state: Union[None, int, np.random.Generator] = None,
                 batch_size: int = 1, pairwise: bool = True, inner_steps: int = 3,
                 cache_passes: int = 100, sampling: str = "gap",
                 check_every: Optional[int] = None, solver: Optional[str] = None,
                 solver_opts: Optional[Dict[str, Any]] = None,
                 scheduler_timeout: float = 10.0, verbose: int = 0,
                 callback: Optional[Callable[..., Any]] = None,
                 warm_start: bool = False) -> None:
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
        self.cache_passes = cache_passes
        self.sampling = sampling
        self.check_every = check_every
        self.solver = solver
        self.solver_opts = solver_opts
        self.scheduler_timeout = scheduler_timeout
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def fit(self, X: Sequence[Any], Y: Sequence[Any]) -> "FrankWolfeLearner":
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
        cache_passes = check_scalar(self.cache_passes, "cache_passes", kind=numbers.Integral,
                                    low=0, owner=name)
        check_every = None if self.check_every is None else check_scalar(
            self.check_every, "check_every", kind=numbers.Integral, low=1, owner=name)
        return self._fit(X, Y, solver, opts, timeout, lambda pool, data, t0: self._run(
            pool, data, C, tol, max_iter, batch_size, check_every, rng, t0,
            bool(self.pairwise), inner_steps if self.pairwise else 0,
            self.sampling == "gap", cache_passes if self.pairwise else 0))

    def _run(self, pool, data, C, tol, max_iter, batch_size, check_every, rng, t0,
             pairwise, inner_steps, gap_sampling, max_cache_passes):
        m, d = data.n_examples, data.n_features
        ops, dd, mt = data.Phi, data.d, data.mu_true
        c = [_compact_loss(*data.c.nonzeros(i)) for i in range(m)]   # no dense (L_i,) c
        # an active output is kept as its nonzeros, and also as its joint feature psi (d,)
        # when d is small beside its support (then inner steps need no part scores)
        width = max(mt.nonzeros(i)[0].size for i in range(m))
        psi_mode = d <= max(_PSI_MAX_D, 4 * width)
        blocks = self._warm_blocks(data)
        if blocks is None:     # m_i = the truth
            blocks = _PsiBlocks(ops, mt, c) if psi_mode else _GramBlocks(mt, c)
        else:                  # the features may differ: what depends on them made afresh
            blocks.restart(ops, mt)
        w, ell = blocks.primal(ops, mt, dd, C, d)
        dual_before = ell - 0.5 * float(w.dot(w))
        g_est = np.full(m, np.inf)
        history, t_inf, t_check, n_calls = [], 0.0, 0.0, 0
        converged = stopped = False
        obj = dual = gap = np.inf
        hinge = None
        epoch = 0
        clock = time.perf_counter
        oracle = pool.argmax_one
        progress = Progress(self, self.verbose, self.callback, total=max_iter)
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
                    op, ci = ops[i], c[i]
                    a = _augment(op.scores(w), ci)
                    mu = oracle(i, a)
                    t_inf += clock() - ti
                    g, dl = blocks.step(i, mu, a, w, op, ci, C, pairwise, inner_steps)
                    g_est[i] = g if g > 0.0 else 0.0
                    ell += C * dl
            else:                             # the batch's oracles at the same w
                for k in range(0, m, batch_size):
                    batch = perm[k:k + batch_size]
                    ti = clock()
                    mus = pool.argmax(batch, [_augment(ops[i].scores(w), c[i])
                                              for i in batch])
                    t_inf += clock() - ti
                    for i, mu in zip(batch, mus):
                        op, ci = ops[i], c[i]
                        a = _augment(op.scores(w), ci)
                        g, dl = blocks.step(i, mu, a, w, op, ci, C, pairwise, inner_steps)
                        g_est[i] = g if g > 0.0 else 0.0
                        ell += C * dl
            n_calls += m
            # passes without oracle (Shah et al. 2015): pairwise steps inside each block's
            # active set at the current w, while a pass gains at least a share of what the
            # epoch of oracle calls gained in the dual
            dual_now = ell - 0.5 * float(w.dot(w))
            gain, dual_before = dual_now - dual_before, dual_now
            # (in psi mode only: otherwise a visit costs a part-score product, about what
            # the oracle's step costs, and on OCR the passes cost more than they gained)
            for _ in range(max_cache_passes if blocks.cache_passes else 0):
                ell = blocks.cache_pass(w, C, ell)
                dual_now = ell - 0.5 * float(w.dot(w))
                pass_gain, dual_before = dual_now - dual_before, dual_now
                if pass_gain < _CACHE_SHARE * gain:
                    break
            self._after_epoch(epoch, w)
            gap_est = float(g_est.sum())
            # the duality gap is the sum of the block gaps: F(w) = D(m) + gap
            obj_est = ell - 0.5 * float(w.dot(w)) + gap_est
            rec = dict(epoch=epoch, gap_estimate=gap_est)
            due = (epoch == max_iter or gap_est <= tol * obj_est if check_every is None
                   else epoch % check_every == 0 or epoch == max_iter)
            if due:
                w, ell, hinge, g_est, obj, dual, gap, dt, dc = self._exact_check(
                    pool, data, blocks, C)
                t_inf, t_check, n_calls = t_inf + dt, t_check + dc, n_calls + m
                rec.update(objective=obj, dual_objective=dual, duality_gap=gap)
                converged = gap <= tol * max(obj, 0.0)
            rec["time"] = clock() - t0
            rec["check_time"] = t_check
            history.append(rec)
            info = dict(iteration=epoch, gap_estimate=gap_est, time=rec["time"])
            if due:
                info.update(objective=obj, duality_gap=gap)
            if converged:
                progress.update(**info)
                break
            if progress.update(**info):       # the callback asks to stop
                stopped = True
                if not due:                   # certify the w returned
                    w, ell, hinge, g_est, obj, dual, gap, dt, dc = self._exact_check(
                        pool, data, blocks, C)
                    t_inf, t_check, n_calls = t_inf + dt, t_check + dc, n_calls + m
                    rec.update(objective=obj, dual_objective=dual, duality_gap=gap,
                               check_time=t_check)
                break
        progress.close()
        if not converged and not stopped:
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={max_iter} epochs with a "
                f"relative duality gap of {gap / max(obj, 1e-300):.3g} > tol={tol:g}; raise "
                "max_iter or tol.", ConvergenceWarning, stacklevel=3)
        self._warm = (_data_key(self.model, data), blocks)
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

    def _exact_check(self, pool, data, blocks, C):
        """Exact ``w`` and ``D`` from the block variables (no drift), then the exact duality
        gap by a pass of loss-augmented inference; the exact block gaps refresh ``g_est``.

        Returns ``w, ell, hinge, g_est, objective, dual, gap`` and the seconds spent in
        inference and in the whole check."""
        tc = time.perf_counter()
        w, ell = blocks.primal(data.Phi, data.mu_true, data.d, C, data.n_features)
        ti = time.perf_counter()
        g_est = np.empty(data.n_examples)

        def block_gap(i, a, mu):      # the exact block gaps
            g_est[i] = max(C * (a.dot(mu) - blocks.value(i, a, w)), 0.0)

        hinge = self._exact_pass(pool, data, w, block_gap)
        t_inf = time.perf_counter() - ti
        obj = 0.5 * float(w @ w) + C * float(hinge.sum())
        dual = ell - 0.5 * float(w @ w)
        return (w, ell, hinge, g_est, obj, dual, max(obj - dual, 0.0), t_inf,
                time.perf_counter() - tc)

    def _warm_blocks(self, data):
        """The dual state of the previous fit, when ``warm_start`` and the data match."""
        warm = getattr(self, "_warm", None) if self.warm_start else None
        if warm is None or warm[0] != _data_key(self.model, data):
            return None
        return warm[1]

    def _after_epoch(self, epoch, w):
        """Called with the running ``w`` after each epoch (a hook for monitoring, e.g. the
        benchmarks' objective curves; it must not change ``w``)."""


def _data_key(model, data):
    """What a dual state depends on: the model and each example's part count and truth
    (the blocks' outputs are vertices of the same polytopes)."""
    return (repr(model), data.n_features, tuple(int(t.size) for t in data.mu_true),
            b"".join(np.flatnonzero(t).tobytes() for t in data.mu_true))


_PASS_CHUNK = 64       # examples per chunk of an exact pass (parallel pools)
_UNIFORM_SHARE = 0.2   # share of the uniform distribution in gap sampling
_CACHE_SHARE = 0.05     # a pass without oracle must gain this share of the epoch's gain


_PSI_MAX_D = 256       # up to this many features, active outputs also keep their psi


def _augment(s, c):
    """``s + c`` in place for ``c`` given by its nonzeros ``(idx, vals)`` (``s`` a fresh
    array of part scores; ``idx`` may be a slice, see :func:`_compact_loss`): the
    loss-augmented scores."""
    s[c[0]] += c[1]
    return s


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


_DROP = 1e-12          # an output whose weight falls to this leaves the active set


def _pairwise_steps(act, G, alpha, lv, n, j, C, inner_steps, g_min):
    """Pairwise Frank–Wolfe steps inside a block's active set, on ``n``-vectors only.

    ``act[l] = a . v_l`` (n,) are the loss-augmented values of the active outputs at the
    current ``w`` and ``G[l, r] = psi_l . psi_r`` their Gram matrix, so that a step of
    ``gamma`` from output ``f`` to ``b`` (``w -= gamma C (psi_b - psi_f)``) changes the
    values by ``-gamma C (G[:, b] - G[:, f])`` and the dual objective by
    ``gamma g - gamma^2 C^2 |psi_b - psi_f|^2 / 2`` with ``g = C (act[b] - act[f])``: the
    exact line search is ``gamma = min(alpha[f], g / (C^2 |psi_b - psi_f|^2))``.

    If ``j >= 0``: first a step from the worst active output (lowest value, weight
    above ``_DROP``) to ``j`` (the oracle's output, possibly of weight 0), and no more
    if it leaves exactly two outputs; then (or if ``j < 0``) up to ``inner_steps`` steps
    from the worst to the best active output, while their gap exceeds ``g_min``.
    ``alpha`` and ``act`` are updated in place (outputs whose weight falls to ``_DROP``
    are skipped, for the caller to drop).  Returns the change of ``c . m`` and the number
    of steps taken.

    Plain scalar loops: compiled by numba when it is installed, run as Python otherwise,
    with the same operations in the same order (the same results).
    """
    dl = 0.0
    steps = 0
    pair_only = False
    for s in range(inner_steps + 1):
        if s == 0 and j < 0:
            continue
        lo = -1
        hi = -1
        count = 0
        for l in range(n):
            if alpha[l] > _DROP:
                count += 1
                if lo < 0 or act[l] < act[lo]:
                    lo = l
                if hi < 0 or act[l] > act[hi]:
                    hi = l
        if s == 0:
            hi = j
            # mu and one other output: that pair is exactly line-searched by this step
            pair_only = count + (0 if alpha[j] > _DROP else 1) == 2
        elif count < 2 or pair_only:
            break
        if lo < 0:
            break
        g = C * (act[hi] - act[lo])
        if g <= (0.0 if s == 0 else g_min):
            break
        den = C * C * (G[hi, hi] + G[lo, lo] - 2.0 * G[hi, lo])
        cap = alpha[lo]
        gamma = cap if den <= 0.0 else min(cap, g / den)
        if gamma <= 0.0:
            break
        alpha[hi] += gamma
        alpha[lo] -= gamma
        dl += gamma * (lv[hi] - lv[lo])
        t = gamma * C
        for l in range(n):
            act[l] -= t * (G[l, hi] - G[l, lo])
        steps += 1
        if s == 0 and alpha[lo] <= _DROP:
            pair_only = False          # a drop step: the others may still move
    return dl, steps


def _line_search(w, v, g_dir, cap, C):
    """Exact line search along ``m_i += gamma delta``, ``gamma <= cap``; moves ``w``.

    ``v = Phi_i^T delta``: ``w`` changes by ``-gamma C v`` and the dual objective by
    ``gamma g_dir - gamma^2 C^2 |v|^2 / 2``."""
    den = C * C * v.dot(v)
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        w -= (gamma * C) * v
    return gamma


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


# ---------------------------------------------------------------- psi-mode kernels
# Plain scalar loops over the pool arrays of _PsiBlocks (see there): compiled by numba
# when it imports (_compiled), run as Python otherwise, with the same operations in the
# same order (bit-identical iterates): elementwise array operations, and every sum of
# products in order, as a cumulative sum (:func:`_dot`; numpy's and numba's ``cumsum``
# add in order, whereas ``dot`` may not).  The helpers are inlined into the two kernels.

def _dot(a, b):
    """``a . b`` (1-D) summed in index order (compiled: :func:`_dot_loop`)."""
    return (a * b).cumsum()[-1] if a.shape[0] else 0.0


def _dot_loop(a, b):
    """:func:`_dot` as a loop, the same additions in the same order (no temporaries)."""
    if a.shape[0] == 0:
        return 0.0
    v = a[0] * b[0]
    for t in range(1, a.shape[0]):
        v += a[t] * b[t]
    return v


def _psi_values(i, w, rows, n, psi, lv, act):
    """``act[s] = psi_r . w + lv_r`` for the active rows ``r = rows[i, s]``."""
    for s in range(n[i]):
        r = rows[i, s]
        act[s] = _dot(psi[r], w) + lv[r]


def _psi_line(w, p, q, g_dir, cap, C):
    """:func:`_line_search` along ``v = p - q`` (two (d,) vectors; compiled:
    :func:`_psi_line_loop`)."""
    v = p - q
    den = C * C * _dot(v, v)
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        w -= (gamma * C) * v
    return gamma


def _psi_line_loop(w, p, q, g_dir, cap, C):
    """:func:`_psi_line` as loops, the same operations in the same order (no
    temporaries)."""
    den = 0.0
    for t in range(w.shape[0]):
        v = p[t] - q[t]
        den = v * v if t == 0 else den + v * v
    den = C * C * den
    gamma = cap if den <= 0.0 else min(cap, g_dir / den)
    if gamma > 0.0:
        gc = gamma * C
        for t in range(w.shape[0]):
            w[t] -= gc * (p[t] - q[t])
    return gamma


def _psi_remove(i, s, rows, n, alpha, free, nfree):
    """Block ``i``'s slot ``s`` leaves (its last slot takes the place); the row is freed."""
    r = rows[i, s]
    last = n[i] - 1
    rows[i, s] = rows[i, last]
    n[i] = last
    alpha[r] = 0.0
    free[nfree[0]] = r
    nfree[0] += 1


def _psi_inner(i, w, C, g_min, rows, n, psi, lv, alpha, free, nfree, act):
    """A pairwise step of block ``i`` between its best and worst active outputs at ``w``
    (``act``: scratch space for their values).  Returns the change of ``c_i . m_i`` and
    whether a step was taken (not if fewer than two outputs are active or their gap is
    at most ``g_min``)."""
    ni = n[i]
    if ni < 2:
        return 0.0, False
    _psi_values(i, w, rows, n, psi, lv, act)
    kf = 0
    ka = 0
    for s in range(1, ni):
        if act[s] > act[kf]:
            kf = s
        if act[s] < act[ka]:
            ka = s
    g2 = C * (act[kf] - act[ka])
    if g2 <= g_min:
        return 0.0, False
    rf = rows[i, kf]
    ra = rows[i, ka]
    gamma = _psi_line(w, psi[rf], psi[ra], g2, alpha[ra], C)
    alpha[rf] += gamma
    alpha[ra] -= gamma
    dl = gamma * (lv[rf] - lv[ra])
    if alpha[ra] <= _DROP:
        _psi_remove(i, ka, rows, n, alpha, free, nfree)
    return dl, True


def _psi_step(i, mu, psi_mu, c_idx, c_val, w, C, pairwise, inner_steps, rows, n, psi, idx,
              val, nnz, alpha, lv, free, nfree):
    """Block ``i``'s Frank–Wolfe step towards the oracle's output ``mu`` (L_i,), of joint
    feature ``psi_mu`` and loss ``c_i . mu`` (``c_i[c_idx] = c_val``), at ``w`` (moved in
    place).

    Pairwise (Osokin et al. 2016): weight moves from the worst active output to ``mu``
    (exact line search capped by that weight), then, unless exactly two outputs remain,
    up to ``inner_steps`` steps between the best and worst (:func:`_psi_inner`, while
    their gap exceeds ``1e-3`` of this block's gap).  Classical: ``m_i += gamma (mu -
    m_i)``.  Returns the block's gap ``C (a . mu - a . m_i)`` before the step, the change
    of ``c_i . m_i`` and ``room``: 0, or (nothing changed) the nonzeros of ``mu`` when
    the rows are narrower, -1 when a new output finds no free slot or row.
    """
    nz = np.flatnonzero(mu)
    k = nz.shape[0]
    if k > idx.shape[1]:
        return 0.0, 0.0, k
    vals = mu[nz]
    ni = n[i]
    j = -1                                   # mu among the active outputs?
    for s in range(ni):
        r = rows[i, s]
        if nnz[r] == k and np.array_equal(idx[r, :k], nz) and np.array_equal(val[r, :k], vals):
            j = s
            break
    if j < 0 and (ni == rows.shape[1] or nfree[0] == 0):
        return 0.0, 0.0, -1
    lmu = _dot(c_val, mu[c_idx])
    act = np.empty(rows.shape[1])
    _psi_values(i, w, rows, n, psi, lv, act)
    amu = _dot(psi_mu, w) + lmu
    mean = 0.0
    for s in range(ni):
        mean += alpha[rows[i, s]] * act[s]
    g = C * (amu - mean)
    if g <= 0.0:
        return g, 0.0, 0
    kk = 0
    if pairwise:
        for s in range(1, ni):
            if act[s] < act[kk]:
                kk = s
        rk = rows[i, kk]
        g_dir = C * (amu - act[kk])
        if g_dir <= 0.0:
            return g, 0.0, 0
        gamma = _psi_line(w, psi_mu, psi[rk], g_dir, alpha[rk], C)
        lost = lv[rk]
    else:
        mix = np.zeros(w.shape[0])           # Phi_i^T m_i
        lost = 0.0
        for s in range(ni):
            r = rows[i, s]
            lost += alpha[r] * lv[r]
            mix += alpha[r] * psi[r]
        gamma = _psi_line(w, psi_mu, mix, g, 1.0, C)
    if gamma <= 0.0:
        return g, 0.0, 0
    if pairwise:
        alpha[rows[i, kk]] -= gamma
    elif gamma >= 1.0:                       # a full step: mu alone remains
        for s in range(ni - 1, -1, -1):
            _psi_remove(i, s, rows, n, alpha, free, nfree)
        j = -1
    else:
        for s in range(ni):
            alpha[rows[i, s]] *= 1.0 - gamma
    if j < 0:                                # mu joins as a new row
        j = n[i]
        nfree[0] -= 1
        r = free[nfree[0]]
        rows[i, j] = r
        n[i] = j + 1
        idx[r, :k] = nz
        idx[r, k:] = 0
        val[r, :k] = vals
        val[r, k:] = 0.0
        nnz[r] = k
        psi[r] = psi_mu
        lv[r] = lmu
        alpha[r] = 0.0
    alpha[rows[i, j]] += gamma
    dl = gamma * (lmu - lost)
    if not pairwise:
        return g, dl, 0
    if alpha[rows[i, kk]] <= _DROP:          # a drop step: the output leaves
        _psi_remove(i, kk, rows, n, alpha, free, nfree)
    elif n[i] == 2:          # the only pair is (v_k, mu), just line-searched exactly
        return g, dl, 0
    for _ in range(inner_steps):
        step, took = _psi_inner(i, w, C, 1e-3 * g, rows, n, psi, lv, alpha, free, nfree,
                                act)
        if not took:
            break
        dl += step
    return g, dl, 0


def _psi_pass(w, C, ell, rows, n, psi, idx, val, nnz, alpha, lv, free, nfree):
    """A pass without oracle over the blocks (see :meth:`_PsiBlocks.cache_pass`)."""
    act = np.empty(rows.shape[1])
    for i in range(n.shape[0]):
        if n[i] > 1:
            dl, took = _psi_inner(i, w, C, 0.0, rows, n, psi, lv, alpha, free, nfree, act)
            if took:
                ell += C * dl
    return ell


_JITABLE = (_psi_values, _psi_remove, _psi_inner)   # inlined by numba
_COMPILED: Dict[str, Callable[..., Any]] = {}


def _compiled(fn):
    """``fn`` compiled by numba (on first use; cached on disk) when numba imports, else
    ``fn`` itself."""
    kernel = _COMPILED.get(fn.__name__)
    if kernel is None:
        try:
            import numba
            from numba.extending import overload, register_jitable
        except ImportError:  # pragma: no cover - the Python kernels are tested directly
            kernel = fn
        else:
            if not _COMPILED:
                for helper in _JITABLE:
                    register_jitable(helper)
                overload(_dot)(lambda a, b: _dot_loop)
                overload(_psi_line)(lambda w, p, q, g_dir, cap, C: _psi_line_loop)
            kernel = numba.njit(cache=True, nogil=True)(fn)
        _COMPILED[fn.__name__] = kernel
    return kernel


def _kernel():
    """:func:`_pairwise_steps`, compiled by numba when it imports (else the Python one)."""
    return _compiled(_pairwise_steps)
