"""Frank–Wolfe on data sharded across a dask cluster, each worker holding only its part.

:class:`ShardedFrankWolfeLearner` solves the problem of
:class:`~structlp.frank_wolfe.FrankWolfeLearner` when the training set does not fit
one machine: the examples arrive as a :class:`dask.bag.Bag` of ``(x, y)`` pairs (or a
list of :func:`dask.delayed` partitions), each partition is made, prepared and kept
on a worker together with its blocks' dual state, and only ``w`` (d floats) and a
few numbers per partition cross the network in a round.

The combination rule is CoCoA+ "adding" (Ma, Smith, Jaggi, Jordan, Richtárik &
Takáč, *Adding vs. averaging in distributed primal-dual optimization*, ICML 2015;
Smith et al., *CoCoA: a general framework for communication-efficient distributed
optimization*, JMLR 2018) with block-coordinate Frank–Wolfe (Lacoste-Julien et al.
2013) as the local solver: with ``K`` partitions, partition ``p`` improves the local
subproblem

.. math::

    \\max_{\\Delta m_{[p]}}\\; C\\sum_{i\\in p} c_i\\cdot\\Delta m_i
        - w\\cdot\\Delta w_p - \\tfrac{K}{2}\\|\\Delta w_p\\|^2,\\qquad
    \\Delta w_p = -C\\sum_{i\\in p}\\Phi_i^T\\Delta m_i ,

which is the ordinary BCFW dual of its blocks with ``C' = K C`` started at the
global ``w`` (so the single-process block steps, oracles and passes without oracle
are reused unchanged), and the driver adds the partitions' changes,
``w = sum_p w_p``.  Since ``|sum_p v_p|^2 <= K sum_p |v_p|^2``, the global dual
gains at least the sum of the local gains: the dual objective never decreases
(CoCoA+'s safe aggregation, no line search needed), and the rates of CoCoA+ with a
Theta-approximate local solver hold.  The stopping rule is the certified duality
gap ``F(w) - D(m)``, with ``F(w)`` from an exact loss-augmented pass run on the
workers (the hinge sums of the partitions) and ``D(m) = sum_p ell_p - |w|^2 / 2``
from each partition's exact ``(w_p, ell_p)``; it holds whatever happened to a
partition, because every reported ``(w_p, ell_p)`` belongs to a feasible dual point
of that partition and ``w = sum_p w_p``.

Chains and trees (:class:`~structlp.structures.TreeLabeling` with dense features, pairwise
steps) keep their blocks as in the single-process fit's compiled path: a worker's pass
over its partition, its passes without oracle and its exact check are each one call of a
compiled kernel, with no Python per example.

Faults: the driver keeps every partition's contribution ``(w_p, ell_p)`` (d + 1
floats).  A worker lost mid-fit loses its partitions; dask recomputes them from
their lineage (the bag's graph: a file read or a seeded generator) with their blocks
at the valid dual point ``m_i = mu_i``, their contribution is replaced by the new
one, and the fit goes on from that (lower, still valid) dual point.
"""

from __future__ import annotations

import numbers
import time
import warnings
from typing import Any, Callable, List, Optional

import numpy as np

from ..base import BaseEstimator, StructuredPredictorMixin
from ..compiler import needs_polytopes, prepare
from ..exceptions import (ConvergenceWarning, DeclarationError, InvalidInputError,
                          InvalidParameterError, OracleError)
from ..model import StructuredModel
from ..parallel import BackendError, call_supervised, is_cluster_failure, solve_chunk
from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import check_bool, check_objective, check_scalar, check_scale
from ..solvers import check_solver
from ._first_order import _augment
from ._fw_blocks import run_cache_passes
from ._fw_tree_store import _TreeBlocks
from ._fw_threads import tree_local_round
from .frank_wolfe import new_blocks


# ---------------------------------------------------------------- worker side
class _Shard:
    """One partition on its worker: the prepared examples and their blocks' dual state.

    Made by :func:`_make_shard` from the partition's ``(x, y)`` pairs; the tasks of a
    fit change its blocks in place (each task runs where the shard is held)."""

    def __init__(self, model, items, part, solver, opts, pairwise=True):
        xs, ys = _split_pairs(items, part)
        from ..structures.tree_labeling import TreeLabeling
        # chains and trees with pairwise steps: max-sum on the compiled path, no polytopes
        # (as FrankWolfeLearner); the arrays made by TreeLabeling.prepare_batch
        need = needs_polytopes(model) and not (pairwise and type(model) is TreeLabeling)
        try:
            data = prepare(model, xs, ys, need_polytopes=need, operators=True)
        except (InvalidInputError, DeclarationError) as exc:   # (OracleError included)
            raise type(exc)(f"Partition {part} of X: {exc}") from None
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        self.part = part
        self.model = model
        self.data = data
        self.state = (model, data.X, polys, solver, opts, data.mu_true)  # what solve_chunk takes
        m, d = data.n_examples, data.n_features
        # chains and trees: whole passes in one compiled kernel
        self.tree = pairwise and _TreeBlocks.applicable(model, data)
        self.blocks, self.c = new_blocks(model, data, self.tree)
        self.rounds = 0
        # the prepared examples (feature operators, losses, truths) and the blocks:
        # about 5 kB per small example as measured, more for large ones
        self.nbytes = int(sum(np.asarray(x).nbytes for x in xs) + m * (4096 + 32 * d))

    def contribution(self, C):
        """``(w_p, ell_p)``: this partition's exact share of ``w`` and of the dual's
        linear part, from its block variables."""
        return self.blocks.primal(self.data.Phi, self.data.mu_true, self.data.d, C,
                                  self.data.n_features)

    def oracle(self, i, a):
        """The loss-augmented maximizer of the partition's example ``i`` (a decoder of the
        model's own is checked: an OracleError names the partition and the example)."""
        try:
            return solve_chunk(self.state, [i], [a])[0]
        except OracleError as exc:
            raise OracleError(f"Partition {self.part} of X: {exc}") from None


def _split_pairs(items, part):
    if not isinstance(items, (list, tuple)):
        try:
            items = list(items)
        except TypeError:
            raise InvalidInputError(
                f"Partition {part} of X must be a sequence of (x, y) pairs; got "
                f"{type(items).__name__}.") from None
    if len(items) == 0:
        raise InvalidInputError(
            f"Partition {part} of X is empty; every partition needs at least one (x, y) "
            "pair (repartition the bag, or drop its empty partitions).")
    xs, ys = [], []
    for j, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidInputError(
                f"Item {j} of partition {part} of X must be an (x, y) pair; got "
                f"{type(item).__name__}"
                f"{f' of length {len(item)}' if isinstance(item, (tuple, list)) else ''}.")
        xs.append(item[0])
        ys.append(item[1])
    return xs, ys


def _make_shard(items, model, part, solver, opts, pairwise=True):
    """Task: the partition's shard and its starting contribution (``m_i = mu_i``)."""
    return _Shard(model, items, part, solver, opts, pairwise)


def _shard_info(shard, C):
    """Task: what the driver keeps of a (new) shard: its size, feature count, round
    counter and contribution."""
    # the scale check with C, on this partition's examples (the data alone: in prepare)
    check_scale(shard.data.Phi, shard.data.c, shard.data.d, C=C,
                owner=f"ShardedFrankWolfeLearner (partition {shard.part})",
                bounds=shard.data.scale_bounds)
    w_p, ell_p = shard.contribution(C)
    return dict(n=shard.data.n_examples, d=shard.data.n_features, rounds=shard.rounds,
                w=w_p, ell=ell_p, nbytes=shard.nbytes, compiled=shard.tree)


def _local_pass(shard, w, C, K, seed, epochs, pairwise, inner_steps, cache_passes, expect):
    """Task: ``epochs`` BCFW passes over the shard's blocks on the local subproblem
    (``C' = K C`` from the global ``w``), then the shard's exact contribution.

    ``expect`` is the number of rounds the driver believes the shard has done: a shard
    recomputed from its lineage (a lost worker) reports ``restarted``."""
    restarted = shard.rounds != expect
    data, blocks, c = shard.data, shard.blocks, shard.c
    ops = data.Phi
    m = data.n_examples
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(m) for _ in range(epochs)]
    g_sum = 0.0
    if shard.tree:      # the epochs and passes in compiled kernel calls (as the threads of
        g_est = np.zeros(m)         # FrankWolfeLearner(n_jobs=K) on chains and trees)
        tree_local_round(blocks, w, C, K, [p.astype(np.int64) for p in perms], inner_steps,
                         cache_passes, g_est)
        g_sum = float(g_est.sum())
    else:
        w_loc = np.array(w, dtype=float)
        Cp = K * C
        _, ell = blocks.primal(ops, data.mu_true, data.d, Cp, data.n_features)
        dual_before = ell - 0.5 * float(w_loc.dot(w_loc))
        for perm in perms:
            g_sum = 0.0
            for i in perm.tolist():
                a = _augment(ops[i].scores(w_loc), c[i])
                mu = shard.oracle(i, a)
                g, dl = blocks.step(i, mu, a, w_loc, ops[i], c[i], Cp, pairwise, inner_steps)
                g_sum += g if g > 0.0 else 0.0
                ell += Cp * dl
        dual_now = ell - 0.5 * float(w_loc.dot(w_loc))
        run_cache_passes(blocks, w_loc, Cp, ell, dual_now, dual_now - dual_before,
                         cache_passes)
    shard.rounds += 1
    # the scale check with C, on this partition's examples (the data alone: in prepare)
    check_scale(shard.data.Phi, shard.data.c, shard.data.d, C=C,
                owner=f"ShardedFrankWolfeLearner (partition {shard.part})",
                bounds=shard.data.scale_bounds)
    w_p, ell_p = shard.contribution(C)
    return dict(w=w_p, ell=ell_p, gap_estimate=g_sum / K, restarted=restarted,
                rounds=shard.rounds, oracle_calls=epochs * m)


def _exact_check(shard, w, C):
    """Task: the shard's exact hinge losses and block gaps at ``w`` (one oracle per
    example), summed."""
    data, blocks = shard.data, shard.blocks
    if shard.tree:                     # one compiled pass
        h, g = blocks.check(np.asarray(w, dtype=float), C, np.asarray(data.d, dtype=float))
        return dict(hinge=float(h.sum()), block_gaps=float(g.sum()), rounds=shard.rounds)
    hinge = gaps = 0.0
    for i in range(data.n_examples):
        s = data.Phi[i].scores(w)
        t_idx, t_val = data.mu_true.nonzeros(i)
        truth = s[t_idx].dot(t_val)
        a = _augment(s, shard.c[i])
        mu = shard.oracle(i, a)
        amu = a.dot(mu)
        hinge += amu + data.d[i] - truth
        gaps += max(C * (amu - blocks.value(i, a, w)), 0.0)
    return dict(hinge=hinge, block_gaps=gaps, rounds=shard.rounds)


def _register_sizeof():
    """Tell dask a shard's size (the scheduler then keeps tasks beside it)."""
    try:
        from dask.sizeof import sizeof
    except ImportError:  # pragma: no cover - dask is checked before
        return
    sizeof.register(_Shard)(lambda shard: shard.nbytes)


_register_sizeof()


# ---------------------------------------------------------------- driver side
def _partitions(X):
    """The delayed partitions of ``X`` (a dask Bag, or a list of dask Delayed)."""
    try:
        import dask.bag as db
        from dask.delayed import Delayed
    except ImportError:
        raise BackendError("ShardedFrankWolfeLearner needs dask: pip install "
                           "'structlp[dask]' (or 'dask[distributed]').") from None
    if isinstance(X, db.Bag):
        return list(X.to_delayed())
    if isinstance(X, (list, tuple)) and X and all(isinstance(p, Delayed) for p in X):
        return list(X)
    raise InvalidInputError(
        "X must be a dask.bag.Bag of (x, y) pairs or a non-empty list of dask.delayed "
        f"partitions (each a list of (x, y) pairs); got {type(X).__name__}. For data that "
        "fit one process, use FrankWolfeLearner.")


class ShardedFrankWolfeLearner(StructuredPredictorMixin, BaseEstimator):
    """Structured max-margin learning on data sharded across a dask cluster.

    Solves the problem of :class:`~structlp.MaxMarginLearner` and
    :class:`~structlp.frank_wolfe.FrankWolfeLearner`,

    .. math::

        \\min_{w\\in\\mathbb R^d}\\; F(w) = \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m H_i(w),
        \\qquad H_i(w) = \\max_{\\mu\\in P_i}\\big[(\\Phi_i w + c_i)\\cdot\\mu + d_i\\big]
                         - (\\Phi_i w)\\cdot\\mu_i ,

    (``w`` shape (d,), ``Phi_i`` (L_i, d)) through its dual over the blocks
    ``m_i in P_i``, with the examples split into ``K`` partitions that stay on the
    workers where they are made.  A round: the driver sends ``w`` (d floats); each
    partition runs ``local_epochs`` block-coordinate Frank–Wolfe passes on its CoCoA+
    local subproblem (``C' = K C``) and returns its contribution ``(w_p, ell_p)``;
    the driver sets ``w = sum_p w_p`` (the dual never decreases; see
    :mod:`structlp.learners.sharded`).  The **duality gap** ``F(w) - D(m)``, ``F``
    from an exact pass of loss-augmented inference on the workers, is evaluated
    when the running estimate (the block gaps met in the round) falls below
    ``tol * F`` or every ``check_every`` rounds; training stops when it is below
    ``tol * F(w)``.  The iterates depend on the partitioning and ``random_state``
    only (bit-identical reruns), not on the number of workers or the order in which
    the tasks finish.

    Parameters
    ----------
    model : StructuredModel
    C : float > 0, default=1.0
        Weight of the hinge losses.
        A C at which the objective could overflow float64 with these features is refused
        (``InvalidParameterError``; the learners guide, "Scale").
    tol : float > 0, default=1e-3
        Stop when ``duality_gap_ <= tol * objective_``.
    max_iter : int >= 1, default=100
        Maximum number of rounds.
    client : distributed.Client or None, default=None
        The cluster; None: the current client (``distributed.get_client()``).
    local_epochs : int >= 1, default=1
        BCFW passes over a partition's blocks per round.
    random_state : None or int >= 0, default=None
        Seeds the order of the blocks (partition ``p``, round ``r``: seed
        ``(random_state, p, r)``).
    pairwise, inner_steps, cache_passes :
        The block steps of :class:`~structlp.frank_wolfe.FrankWolfeLearner`
        (pairwise steps, inner steps, passes without oracle per round).
    check_every : int >= 1 or None, default=None
        Exact gap every ``check_every`` rounds; None: when the estimate is below
        ``tol * F``.
    solver, solver_opts : LP solver for models without a combinatorial oracle.
    scheduler_timeout : float > 0, default=30.0
        A scheduler that does not answer, or a cluster without workers, for this
        long is a :class:`~structlp.parallel.BackendError`.
    max_restarts : int >= 0, default=3
        Partitions recomputed after lost workers before the fit gives up.
    verbose, callback : as :class:`~structlp.frank_wolfe.FrankWolfeLearner`.

    Attributes
    ----------
    coef_ : ndarray, shape (d,)
    objective_, dual_objective_, duality_gap_ : float
        ``F(coef_)``, ``D(m)`` and their difference, a certified bound on
        ``objective_ - optimum``.
    block_gap_sum_ : float
        The sum of the block gaps computed on the workers (equals ``duality_gap_`` up
        to rounding).
    n_iter_ : int
        Rounds run.
    n_examples_ : int
    n_partitions_ : int
    partition_sizes_ : list of int
    n_oracle_calls_ : int
    n_restarts_ : int
        Partitions recomputed from their lineage during the fit.
    bytes_per_round_ : dict
        Bytes of the driver's messages in one round: ``sent`` (w to each partition),
        ``received`` (the contributions), per round, excluding dask's own framing.
    converged_ : bool
    history_ : list of dict
        Per round: ``round``, ``time``, ``gap_estimate``, ``dual_objective``, and at
        exact checks ``objective`` and ``duality_gap``.
    n_features_in_ : int

    Examples
    --------
    >>> import dask.bag as db                                       # doctest: +SKIP
    >>> def shard(seed):                                            # doctest: +SKIP
    ...     X, Y, _, _ = make_bipartite_matching(200, 3, random_state=seed)
    ...     return list(zip(X, Y))
    >>> bag = db.from_sequence(range(8), npartitions=8).map_partitions(
    ...     lambda seeds: [p for s in seeds for p in shard(s)])      # doctest: +SKIP
    >>> ShardedFrankWolfeLearner(BipartiteMatching(), C=0.01,
    ...                          client=client).fit(bag)             # doctest: +SKIP
    """

    def __init__(self, model: StructuredModel, C: float = 1.0, tol: float = 1e-3,
                 max_iter: int = 100, client: Any = None, local_epochs: int = 1,
                 random_state: Optional[int] = None, pairwise: bool = True,
                 inner_steps: int = 3, cache_passes: int = 10,
                 check_every: Optional[int] = None, solver: Optional[str] = None,
                 solver_opts: Optional[dict] = None, scheduler_timeout: float = 30.0,
                 max_restarts: int = 3, verbose: int = 0,
                 callback: Optional[Callable[..., Any]] = None) -> None:
        self.model = model
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.client = client
        self.local_epochs = local_epochs
        self.random_state = random_state
        self.pairwise = pairwise
        self.inner_steps = inner_steps
        self.cache_passes = cache_passes
        self.check_every = check_every
        self.solver = solver
        self.solver_opts = solver_opts
        self.scheduler_timeout = scheduler_timeout
        self.max_restarts = max_restarts
        self.verbose = verbose
        self.callback = callback

    # ------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        C, _, opts = self._check_model_C_solver()
        solver = check_solver(self.solver, owner=name, kind="LP")
        p = dict(
            C=C, opts=opts, solver=solver,
            tol=check_scalar(self.tol, "tol", kind=numbers.Real, low=0,
                             low_inclusive=False, owner=name),
            max_iter=check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                  owner=name),
            local_epochs=check_scalar(self.local_epochs, "local_epochs",
                                      kind=numbers.Integral, low=1, owner=name),
            inner_steps=check_scalar(self.inner_steps, "inner_steps", kind=numbers.Integral,
                                     low=0, owner=name),
            cache_passes=check_scalar(self.cache_passes, "cache_passes",
                                      kind=numbers.Integral, low=0, owner=name),
            timeout=check_scalar(self.scheduler_timeout, "scheduler_timeout",
                                 kind=numbers.Real, low=0, low_inclusive=False, owner=name),
            max_restarts=check_scalar(self.max_restarts, "max_restarts",
                                      kind=numbers.Integral, low=0, owner=name),
            check_every=None if self.check_every is None else check_scalar(
                self.check_every, "check_every", kind=numbers.Integral, low=1, owner=name))
        check_bool(self.pairwise, "pairwise", owner=name)
        check_verbose(self.verbose, owner=name)
        check_callback(self.callback, owner=name)
        rs = self.random_state
        if rs is not None and (isinstance(rs, bool) or not isinstance(rs, numbers.Integral)
                               or rs < 0):
            raise InvalidParameterError(
                f"The 'random_state' parameter of {name} must be None or an int >= 0 (each "
                f"partition seeds its own generator from it). Got {rs!r} instead.")
        return p

    def _get_client(self):
        try:
            import distributed
        except ImportError:
            raise BackendError("ShardedFrankWolfeLearner needs dask.distributed: pip "
                               "install 'structlp[dask]' (or 'dask[distributed]').") from None
        if self.client is None:
            try:
                return distributed.get_client()
            except ValueError:
                raise InvalidParameterError(
                    "The 'client' parameter of ShardedFrankWolfeLearner is None and no "
                    "dask.distributed Client is running: pass client=distributed.Client("
                    "address) (the data stay on its workers).") from None
        if not isinstance(self.client, distributed.Client):
            raise InvalidParameterError(
                "The 'client' parameter of ShardedFrankWolfeLearner must be a "
                f"distributed.Client or None; got {type(self.client).__name__}.")
        if self.client.status not in ("running", "connecting"):
            raise BackendError(f"The dask Client is not running (status "
                               f"{self.client.status!r}).")
        return self.client

    # ------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any = None) -> "ShardedFrankWolfeLearner":
        """Train on the partitions of ``X`` until the relative duality gap is below ``tol``.

        Parameters
        ----------
        X : dask.bag.Bag of (x, y) pairs, or list of dask.delayed partitions
            Each partition (a list of ``(x, y)`` pairs) is made on a worker and stays
            there; the driver never holds the examples.
        y : None
            The outputs travel with the examples, in the pairs.

        Returns
        -------
        self
        """
        p = self._check_params()
        if y is not None:
            raise InvalidInputError(
                "y must be None for ShardedFrankWolfeLearner.fit: the outputs come with the "
                "examples, as the (x, y) pairs of X's partitions.")
        parts = _partitions(X)
        client = self._get_client()
        t0 = time.perf_counter()
        C, timeout = p["C"], p["timeout"]
        K = len(parts)
        import dask

        # partition k made and prepared on worker k mod W (its generation and its shard on
        # one worker, the partitions spread evenly; another worker if that one is lost):
        # no partition's examples or shard cross the network, which doubles their memory
        try:
            workers = sorted(call_supervised(client, timeout, client.scheduler_info)
                             .get("workers", {}))
        except Exception:
            workers = []

        def build(k):
            where = (dict(workers=[workers[k % len(workers)]], allow_other_workers=True)
                     if workers else {})
            return client.compute(dask.delayed(_make_shard)(
                parts[k], self.model, k, p["solver"], p["opts"], bool(self.pairwise)),
                **where)

        shards = [build(k) for k in range(K)]
        infos = self._gather_each(client, timeout, [client.submit(_shard_info, s, C)
                                                    for s in shards])
        for k, info in enumerate(infos):
            if isinstance(info, BaseException):
                raise info
        d = infos[0]["d"]
        for k, info in enumerate(infos):
            if info["d"] != d:
                raise InvalidInputError(
                    f"Partition {k} of X has {info['d']} features per part; partition 0 has "
                    f"{d}: every example needs the same feature count.")
        sizes = [info["n"] for info in infos]
        self._compiled_partitions = [bool(info["compiled"]) for info in infos]
        w_parts = np.array([info["w"] for info in infos])         # (K, d)
        ell_parts = np.array([info["ell"] for info in infos])     # (K,)
        rounds = [0] * K
        progress = Progress(self, self.verbose, self.callback, total=p["max_iter"])
        history: List[dict] = []
        seed0 = 0 if self.random_state is None else int(self.random_state)
        n_calls = restarts = 0
        converged = stopped = False
        obj = gap = np.inf
        hinge = block_gaps = np.nan
        r = 0
        w = w_parts.sum(axis=0)
        sent = received = 0
        for r in range(1, p["max_iter"] + 1):
            seeds = [[seed0, k, r] if self.random_state is not None else None
                     for k in range(K)]
            holders = self._holders(client, shards, timeout)
            futs = [client.submit(_local_pass, shards[k], w, C, K, seeds[k],
                                  p["local_epochs"], bool(self.pairwise), p["inner_steps"],
                                  p["cache_passes"], rounds[k], pure=False,
                                  workers=holders[k], allow_other_workers=True)
                    for k in range(K)]
            outs = self._gather_each(client, timeout, futs)
            sent, received = K * w.nbytes, K * (w.nbytes + 8 * 4)
            gap_est = 0.0
            for k, out in enumerate(outs):
                if isinstance(out, BaseException) or out["restarted"]:
                    restarts += 1
                    if restarts > p["max_restarts"]:
                        raise BackendError(
                            f"{restarts} partitions were lost with their workers (more than "
                            f"max_restarts={p['max_restarts']}); the cluster is failing.")
                    if isinstance(out, BaseException):   # recompute, from its lineage
                        shards[k] = build(k)
                        [out] = self._gather_each(client, timeout,
                                                  [client.submit(_shard_info, shards[k], C)])
                        if isinstance(out, BaseException):
                            raise BackendError(f"Partition {k} could not be rebuilt after "
                                               f"its worker was lost: {out}") from None
                    gap_est = np.inf                     # a restarted partition: check
                else:
                    gap_est += out["gap_estimate"]
                    n_calls += out.get("oracle_calls", 0)
                w_parts[k] = out["w"]
                ell_parts[k] = out["ell"]
                rounds[k] = out["rounds"]
            w = w_parts.sum(axis=0)
            dual = float(ell_parts.sum()) - 0.5 * float(w.dot(w))
            obj_est = dual + gap_est
            rec = dict(round=r, gap_estimate=gap_est, dual_objective=dual)
            due = (r == p["max_iter"] or gap_est <= p["tol"] * obj_est
                   if p["check_every"] is None else r % p["check_every"] == 0
                   or r == p["max_iter"])
            if due:
                obj, gap, hinge, block_gaps, ok = self._check(client, timeout, shards, w, C,
                                                              rounds, dual)
                n_calls += sum(sizes)
                if ok:
                    rec.update(objective=obj, duality_gap=gap)
                    converged = gap <= p["tol"] * max(obj, 0.0)
            rec["time"] = time.perf_counter() - t0
            history.append(rec)
            info = dict(iteration=r, gap_estimate=gap_est, time=rec["time"])
            if due and np.isfinite(obj):
                info.update(objective=obj, duality_gap=gap)
            if converged:
                progress.update(**info)
                break
            if progress.update(**info):
                stopped = True
                if not due:
                    obj, gap, hinge, block_gaps, _ = self._check(client, timeout, shards, w,
                                                                 C, rounds, dual)
                    n_calls += sum(sizes)
                break
        progress.close()
        if not np.isfinite(obj):      # the last check lost a partition: check w again
            obj, gap, hinge, block_gaps, _ = self._check(client, timeout, shards, w, C,
                                                         rounds, dual)
        check_objective(obj, w, C, type(self).__name__)
        if not converged and not stopped:
            warnings.warn(
                f"ShardedFrankWolfeLearner stopped after max_iter={p['max_iter']} rounds with "
                f"a relative duality gap of {gap / max(obj, 1e-300):.3g} > tol={p['tol']:g}; "
                "raise max_iter or tol.", ConvergenceWarning, stacklevel=2)
        for s in shards:
            s.release()
        self.coef_ = w
        self.objective_ = float(obj)
        self.dual_objective_ = float(dual)
        self.duality_gap_ = float(gap)
        self.block_gap_sum_ = float(block_gaps)
        self.n_iter_ = r
        self.n_examples_ = int(sum(sizes))
        self.n_partitions_ = K
        self.partition_sizes_ = sizes
        self.n_oracle_calls_ = n_calls
        self.n_restarts_ = restarts
        self.bytes_per_round_ = {"sent": int(sent), "received": int(received)}
        self.converged_ = bool(converged)
        self.history_ = history
        self.n_features_in_ = int(d)
        self.fit_time_ = {"total": time.perf_counter() - t0}
        return self

    def _check(self, client, timeout, shards, w, C, rounds, dual):
        """The exact objective and duality gap at ``w`` (a pass on the workers); ``ok`` is
        False when a partition was lost meanwhile (its dual share changed: no
        certificate this round)."""
        holders = self._holders(client, shards, timeout)
        outs = self._gather_each(client, timeout, [
            client.submit(_exact_check, s, w, C, pure=False, workers=h,
                          allow_other_workers=True) for s, h in zip(shards, holders)])
        if any(isinstance(o, BaseException) or o["rounds"] != rounds[k]
               for k, o in enumerate(outs)):
            return np.inf, np.inf, np.nan, np.nan, False
        hinge = float(sum(o["hinge"] for o in outs))
        obj = 0.5 * float(w.dot(w)) + C * hinge
        return obj, max(obj - dual, 0.0), hinge, float(sum(o["block_gaps"] for o in outs)), True

    @staticmethod
    def _holders(client, futs, timeout):
        """The worker holding each future (a task on a shard runs there), or None: one
        question to the scheduler (its failures are caught by the gather that follows)."""
        try:
            who = call_supervised(client, timeout, client.who_has, futs)
        except Exception:
            return [None] * len(futs)
        return [list(who.get(f.key) or ())[:1] or None for f in futs]

    @staticmethod
    def _gather_each(client, timeout, futs):
        """Each future's result in order; a partition lost with its worker gives its
        exception instead (the caller rebuilds it); other errors are raised."""
        def each():
            out: List[Any] = []
            for f in futs:
                try:
                    out.append(f.result())
                except Exception as exc:
                    if not is_cluster_failure(exc):
                        raise
                    out.append(exc)
            return out

        return call_supervised(client, timeout, each)
