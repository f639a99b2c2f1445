"""Block-coordinate Frank–Wolfe (Lacoste-Julien et al. 2013) on the structured hinge."""

from __future__ import annotations

import numbers
import time
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from ..utils.validation import check_bool, check_choice, check_objective, check_scalar
from ..utils.progress import Progress
from ..exceptions import ConvergenceWarning
from ..model import StructuredModel
from ..utils.fingerprint import output_fingerprint

from ._first_order import _FirstOrderLearner, _augment
from ._fw_blocks import _GramBlocks, _PsiBlocks, _compact_loss, run_cache_passes
from ._fw_tree_store import _TreeBlocks
from ._fw_threads import _ThreadedTreeBlocks, n_threads


_UNIFORM_SHARE = 0.2   # share of the uniform distribution in gap sampling
_PSI_MAX_D = 256       # up to this many features, active outputs also keep their psi


def compact_losses(data):
    """Each example's loss vector by its nonzeros (no dense (L_i,) c)."""
    return [_compact_loss(*data.c.nonzeros(i)) for i in range(data.n_examples)]


def store_kind(blocks):
    """``(tree, threads)`` of a block store: whether it is the compiled tree store, and on
    how many threads its epochs run."""
    if isinstance(blocks, _ThreadedTreeBlocks):
        return True, blocks.K
    return isinstance(blocks, _TreeBlocks), 1


def costly_oracle(model, data):
    """Whether an oracle call is an LP (or costs as much): the model says so
    (``costly_inference``), or it has no decoder and the inference LP answers."""
    from ..inference import has_fast_path
    return bool(getattr(model, "costly_inference", False)) or not has_fast_path(
        model, data.X[0], data.Phi[0].shape[0])


def new_blocks(model, data, tree):
    """The block store of ``data`` at ``m_i = mu_i``, and the compact losses it steps with.

    ``tree``: the compiled tree blocks (whole passes in one kernel call; no losses
    returned).  Otherwise an active output is kept as its nonzeros, and also as its joint
    feature psi (d,) when d is small beside its support or the oracle is costly (then
    inner steps and passes without oracle need no part scores)."""
    if tree:
        return _TreeBlocks(model, data), None
    c = compact_losses(data)
    mt = data.mu_true
    width = max(mt.nonzeros(i)[0].size for i in range(data.n_examples))
    if data.n_features <= max(_PSI_MAX_D, 4 * width) or costly_oracle(model, data):
        return _PsiBlocks(data.Phi, mt, c), c
    return _GramBlocks(mt, c), c


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
    Memory is that of the data plus ``O(m d)`` per active output (the features are
    used through the model's
    :meth:`~structlp.model.StructuredModel.feature_operator`; active outputs are kept
    by their nonzeros, never as dense part vectors).  How blocks are stored and which
    steps run as compiled kernels: :doc:`/guide/learners`.

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
        A C at which the objective could overflow float64 with these features is refused
        (``InvalidParameterError``; the learners guide, "Scale").
    tol : float > 0, default=1e-4
        Stop when ``duality_gap_ <= tol * objective_`` (relative duality gap).
    max_iter : int >= 1, default=200
        Maximum number of epochs (passes over the examples).
    n_jobs : int or None, default=None
        Local worker processes for the oracles (None or 1: serial, -1: all cores).  On the
        compiled route of chains and trees (:doc:`/guide/learners`): threads of this process running the
        epochs, each on a partition of the blocks, combined by CoCoA+ (no worker processes;
        the iterates then depend on ``n_jobs`` and ``random_state``, reruns are identical,
        and the certificate is the same exact duality gap).
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
        on ``n_jobs`` or ``backend`` (except on the compiled route of chains and trees,
        where ``n_jobs`` threads split the blocks).
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
        over the blocks without any oracle call, each block taking a pairwise step
        between its best and worst active outputs at the current ``w`` (multi-plane
        BCFW, Shah, Kolmogorov & Lampert 2015); they stop early once a pass gains
        little dual objective compared with the epoch before it, and visit the blocks
        in a random order drawn afresh after each epoch (from ``random_state``).
        0 disables them.
        They run only where the active outputs keep their joint features (see
        :doc:`/guide/learners`, "Passes without oracle", for when that is and what
        they save).
    sampling : {"gap", "uniform"}, default="gap"
        Order of the blocks in an epoch.  "uniform": a random permutation.
        "gap": after every block has a gap estimate (the first epoch), ``m``
        draws with probabilities proportional to the blocks' last known
        Frank–Wolfe gaps (Osokin et al. 2016), refreshed exactly for every
        block at each duality-gap check; blocks already at their optimum are
        then hardly visited (:doc:`/guide/learners`).
    check_every : int >= 1 or None, default=None
        Evaluate the exact duality gap every ``check_every`` epochs; None: only
        when the running estimate (the block gaps met during the epoch) falls
        below ``tol * objective`` (and after the last epoch).
    solver, solver_opts : LP solver (cvxpy name; None: HiGHS, a simplex method that
        returns vertices) and options for models without a combinatorial oracle.
    scheduler_timeout : float > 0, default=10.0
        Seconds to wait for a dask scheduler given by address.
    verbose : int >= 0 or bool, default=0
        1: one log line per epoch (logger ``structlp.learners.frank_wolfe``, INFO) with the
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

    def fit(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> "FrankWolfeLearner":
        """Run BCFW on ``(X, Y)`` until the relative duality gap is below ``tol``.

        Parameters
        ----------
        X : list of m examples
            (A dask Bag of ``(x, y)`` pairs is refused with an error naming
            :class:`~structlp.ShardedFrankWolfeLearner`, which trains on it.)
        Y : list of m outputs
            Required.

        Returns
        -------
        self
        """
        from ..utils.validation import check_fit_args
        name = type(self).__name__
        check_fit_args(X, Y, name)
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
        # tree labellings: whole epochs in one compiled kernel (_fw_trees)
        # (the oracles run in this process whatever backend: one compiled epoch is faster
        # than dispatching its oracles; n_jobs > 1 there are threads, _fw_threads)
        tree = pairwise and batch_size == 1 and _TreeBlocks.applicable(self.model, data)
        # with n_jobs > 1 there, the epochs run on n_jobs threads (CoCoA+, _fw_threads)
        threads = min(n_threads(self.n_jobs), m) if tree else 1
        blocks = self._warm_blocks(data)
        if blocks is not None and (store_kind(blocks) != (tree, threads)):
            blocks = None          # another kind of store: start afresh
        if blocks is None and threads > 1:
            blocks, c = _ThreadedTreeBlocks(self.model, data, threads, rng), None
        elif blocks is None:       # m_i = the truth
            blocks, c = new_blocks(self.model, data, tree)
        elif tree:                 # the features may differ: what depends on them made afresh
            c = None
            blocks.restart(data)
        else:
            c = compact_losses(data)
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
                perm = rng.choice(m, size=m, p=p / p.sum())
            else:
                perm = rng.permutation(m)
            if tree:                          # the epoch in one kernel call
                ti = clock()
                ell = blocks.epoch(perm.astype(np.int64), w, C, inner_steps, ell, g_est)
                t_inf += clock() - ti
            elif batch_size == 1:             # classical BCFW: one oracle call, one step
                perm = perm.tolist()
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
                perm = perm.tolist()
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
            # (on tree labellings in a random order of the blocks, drawn afresh each epoch:
            # the passes in one fixed order took more epochs)
            order = rng.permutation(m).astype(np.int64) if tree and max_cache_passes else None
            ell, dual_before = run_cache_passes(blocks, w, C, ell, dual_before, gain,
                                                max_cache_passes, order)
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
        check_objective(obj, w, C, type(self).__name__)
        self._warm = (output_fingerprint(self.model, data), blocks)
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

    def _pool(self, data, polys, solver, opts, timeout):
        if (self.backend is None and self._tree_path()
                and _TreeBlocks.applicable(self.model, data)):
            # the compiled tree route calls no oracle of the pool (n_jobs are its threads):
            # no worker processes started
            from ..parallel import OraclePool
            return OraclePool(self.model, data.X, polys, solver, opts, timeout=timeout,
                              owner=type(self).__name__, truths=data.mu_true)
        return super()._pool(data, polys, solver, opts, timeout)

    def _tree_path(self):
        """Whether a fit may take the compiled tree-labelling path (:mod:`._fw_trees`; the
        data decide at fit time): then no output polytopes are built and the oracle is not
        probed (max-sum is exact on trees)."""
        from ..structures.tree_labeling import TreeLabeling
        return (type(self.model) is TreeLabeling and self.pairwise is True
                and self.batch_size == 1)

    def _exact_check(self, pool, data, blocks, C):
        """Exact ``w`` and ``D`` from the block variables (no drift), then the exact duality
        gap by a pass of loss-augmented inference; the exact block gaps refresh ``g_est``.

        Returns ``w, ell, hinge, g_est, objective, dual, gap`` and the seconds spent in
        inference and in the whole check."""
        tc = time.perf_counter()
        w, ell = blocks.primal(data.Phi, data.mu_true, data.d, C, data.n_features)
        ti = time.perf_counter()
        if store_kind(blocks)[0]:                 # one compiled pass (per thread)
            hinge, g_est = blocks.check(w, C, np.asarray(data.d, dtype=float))
            t_inf = time.perf_counter() - ti
            obj = 0.5 * float(w @ w) + C * float(hinge.sum())
            dual = ell - 0.5 * float(w @ w)
            return (w, ell, hinge, g_est, obj, dual, max(obj - dual, 0.0), t_inf,
                    time.perf_counter() - tc)
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
        if warm is None or warm[0] != output_fingerprint(self.model, data):
            return None
        return warm[1]

    def _after_epoch(self, epoch, w):
        """Called with the running ``w`` after each epoch (a hook for monitoring, e.g. the
        benchmarks' objective curves; it must not change ``w``)."""
