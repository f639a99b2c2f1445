"""Cutting-plane max-margin learning (n-slack and one-slack) with exact combinatorial oracles."""

from __future__ import annotations

import numbers
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, cast

import numpy as np
import scipy.sparse as sp

from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import (check_bool, check_fit_args, check_objective, check_scalar,
                                check_scale)
from ..base import BaseEstimator, StructuredPredictorMixin
from ..compiler import needs_polytopes, prepare
from ..exceptions import ConvergenceWarning  # noqa: F401  (re-exported: older imports)
from ..parallel import solve_chunk
from ..solvers import solve
from ..utils.fingerprint import training_fingerprint
from ._cp_cache import _Cache, _key, _nonzeros, _Parts
from .master import RIDGE, single_threaded_blas, solve_master_dual  # noqa: F401  (RIDGE: here in 0.1.0)

if TYPE_CHECKING:  # pragma: no cover
    from ..model import StructuredModel

#: Largest n-slack working set whose master QP is solved by the built-in dual method
#: (dense KKT systems over the free rows and the examples; its Gram matrix, 8 T^2 bytes,
#: 128 MB here); larger ones use cvxpy (CLARABEL).  The one-slack working set (one row
#: per round) always uses it.
MAX_DUAL_ROWS = 4000
#: One-slack rows without dual weight for this many consecutive rounds leave the master QP.
INACTIVE_ROUNDS = 50
#: n-slack rows (never an example's truth) without dual weight for this many consecutive
#: rounds leave the master QP; the oracle's output of such a row may join again.
INACTIVE_ROUNDS_NSLACK = 5
#: One-slack master QPs are solved to this fraction of the last exact violation (and at
#: least to ``1e-3 tol``): a looser master only changes the path, never the certificate,
#: which compares the exact objective with the master's dual value.
MASTER_TOL = 5e-2
#: One-slack: the cache is exhausted (the next round calls the oracle) when its best cut is
#: violated by less than this fraction of the last exact violation.
CACHE_FRACTION = 0.5


class CuttingPlaneLearner(StructuredPredictorMixin, BaseEstimator):
    """Structured max-margin learning by a cutting-plane method (n-slack or one-slack).

    Solves the same problem as :class:`~structlp.MaxMarginLearner`,

    .. math::

        \\min_{w}\\; \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m \\xi_i(w),\\qquad
        \\xi_i(w) = \\max_{y\\in\\mathcal Y_i}\\big[w\\cdot f_i(y) + \\ell_i(y)\\big]
                    - w\\cdot f_i(y_i),

    without any compact formulation of the inner maximum: it keeps a working
    set ``W_i`` of outputs per example and alternates

    1. the master QP ``min 1/2|w|^2 + C sum xi`` s.t.
       ``w.(f_i(y_i) - f_i(y)) + xi_i >= loss_i(y)`` for ``y in W_i``
       (``y_i`` itself is in ``W_i``, so ``xi_i >= loss_i(y_i)``);
    2. exact loss-augmented inference of every example with the model's
       combinatorial oracle (:meth:`StructuredModel.inference`: Hungarian
       algorithm, blossom algorithm, maximum spanning tree, max-sum, ...; the
       inference LP where the model has none), adding the maximizer to ``W_i``
       when its hinge exceeds ``xi_i + tol``,

    until no example is violated by more than ``tol`` (Tsochantaridis et al.
    2005).  At that point the objective is within ``C * m * tol`` of the
    optimum.  It is the exact reference for certificate QPs (whose
    certificate may be conservative) and a learner for training sets too large
    for one QP.

    With ``one_slack=True`` (Joachims, Finley & Yu 2009) the working set holds
    *joint* outputs: one row per round, the average over the examples of
    ``f_i(y_i) - f_i(y)`` and of ``loss_i(y)`` at their maximizers, with one
    slack ``xi``: ``min 1/2|w|^2 + C m xi`` s.t.
    ``w . mean_i(f_i(y_i) - f_i(ybar_i)) + xi >= mean_i loss_i(ybar_i)`` for
    every stored ``ybar``.  The master QP then has one row per round instead
    of up to one per example and round (but needs more rounds); it stops when
    the certified gap, the exact objective minus the master's dual value (a
    lower bound on the optimum), is at most ``C * m * tol``.  An **inference
    cache** (``inference_cache`` outputs per example, as in Joachims et al.)
    makes most rounds cheap; the stopping test and ``objective_`` always come
    from the real oracle, so the certificate is unchanged.

    How the cache is used and how the master QP is solved (in its dual, warm-started
    from round to round): :doc:`/guide/learners`.

    Parameters
    ----------
    model : StructuredModel
    C : float > 0, default=1.0
        Weight of the slacks.
        A C at which the objective could overflow float64 with these features is refused
        (``InvalidParameterError``; the learners guide, "Scale").
    tol : float > 0, default=1e-4
        Stop when every hinge loss exceeds its master-QP slack by at most ``tol``
        (in loss units); one-slack: when ``objective_ - master_objective_ <=
        C * m * tol``.
    max_iter : int >= 1, default=200
        Maximum number of rounds (master QP + cut: from the cache or an
        inference sweep).
    one_slack : bool, default=False
        The one-slack formulation (one joint constraint per round).
    inference_cache : int >= 0, default=10
        Outputs kept per example for the one-slack cache (0: no cache; the
        n-slack method does not use it).
    solver : str or None, default=None
        None: the built-in dual method for the master QPs (n-slack working sets
        larger than :data:`MAX_DUAL_ROWS` rows: CLARABEL); a cvxpy solver name:
        the master QP as a cvxpy problem solved by it.  The inference LPs of
        models without a combinatorial oracle are solved by HiGHS.
    solver_opts : dict or None
        Passed untouched to ``cvxpy.Problem.solve``.
    verbose : int >= 0 or bool, default=0
        1: one log line per round (``structlp.learners.cutting_plane`` logger).
    callback : callable or None
        ``callback(info)`` after every round (``iteration``, ``time``,
        ``master_objective``, ``n_constraints``, ``oracle``, and at oracle
        rounds ``objective`` and ``max_violation``, with ``coef_`` set to the
        iterate they belong to); returning True stops.
    warm_start : bool, default=False
        Start from the previous fit's working set (and cache) when fitted again
        on the same training set (e.g. with another ``C``); on other data the
        fit starts afresh.

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    objective_ : float
        ``1/2 |w|^2 + C sum_i hinge_i(w)`` at ``coef_``, with the hinge losses from
        exact loss-augmented inference: the objective of MaxMarginLearner.
    slack_ : ndarray, shape (n_examples,)
        The exact structured hinge losses ``xi_i(coef_)``.
    master_objective_ : float
        Dual value of the last master QP (a lower bound on the optimum).
    n_iter_ : int
        Rounds run.
    n_oracle_calls_ : int
        Inference sweeps over the training set.
    n_constraints_ : int
        Size of the final working set (all examples; joint rows with ``one_slack``).
    converged_ : bool
    history_ : list of dict
        Per round: ``master_objective``, ``n_constraints``, ``oracle`` (whether
        the next cut came from the real oracle), and at the oracle pass that
        follows the master QP, the exact ``objective`` of its ``w``, the
        ``max_violation`` and ``time`` (seconds since fit began).
    solver_ : str
        "dual" (built-in) or the cvxpy solver of the master QPs.
    problem_ : cvxpy.Problem or None
        The last master QP when solved by cvxpy.
    n_features_in_ : int
    fit_time_ : dict
        Seconds in the master QPs ("solve"), in inference ("inference"), in the
        cache ("cache"), total.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=20, n_rows=4, random_state=0)
    >>> cpl = structlp.CuttingPlaneLearner(model, C=0.1).fit(X, Y)
    >>> qp = structlp.MaxMarginLearner(model, C=0.1).fit(X, Y)   # the same objective
    >>> cpl.converged_, bool(abs(cpl.objective_ - qp.objective_) <= 1e-3 * qp.objective_)
    (True, True)
    """

    def __init__(self, model: StructuredModel, C: float = 1.0, tol: float = 1e-4,
                 max_iter: int = 200, one_slack: bool = False, inference_cache: int = 10,
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                 verbose: int = 0, callback: Optional[Callable[..., Any]] = None,
                 warm_start: bool = False) -> None:
        self.model = model
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.one_slack = one_slack
        self.inference_cache = inference_cache
        self.solver = solver
        self.solver_opts = solver_opts
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def _check_params(self):
        name = type(self).__name__
        C, solver, opts = self._check_model_C_solver()
        tol = check_scalar(self.tol, "tol", kind=numbers.Real, low=0, low_inclusive=False,
                           owner=name)
        max_iter = check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                owner=name)
        check_bool(self.one_slack, "one_slack", owner=name)
        cache = check_scalar(self.inference_cache, "inference_cache", kind=numbers.Integral,
                             low=0, owner=name)
        check_verbose(self.verbose, owner=name)
        check_callback(self.callback, owner=name)
        check_bool(self.warm_start, "warm_start", owner=name)
        return C, tol, max_iter, (None if self.solver is None else solver), opts, int(cache)

    def _oracle(self, data, parts, w, polys):
        """Loss-augmented maximizers and exact hinge losses at ``w``: ``(sups, losses,
        hinge)``, each maximizer by its nonzeros ``(idx, vals)`` with its loss.

        The dense part vectors (scores, maximizers) are made for a group of examples at a
        time (:meth:`_Parts.score_chunks`), never for the whole training set."""
        m = data.n_examples
        sups, losses, hinge = [], np.empty(m), np.empty(m)
        state = (self.model, data.X, polys, None, None, data.mu_true)
        for idx, s in parts.score_chunks(w):
            i0, i1 = idx.start, idx.stop
            off = parts.offsets[i0:i1 + 1] - parts.offsets[i0]   # the group's own offsets
            s = np.concatenate(s)
            c = parts.chunk_dense(data.c, idx)
            aug = s + c
            # the fast path, checked when it is the model's own; one LP for the others
            mus = solve_chunk(state, list(idx), np.split(aug, off[1:-1]))
            mu = np.concatenate(mus)
            z = np.flatnonzero(mu)
            v = mu[z]
            owner = np.searchsorted(off, z, side="right") - 1
            tz, tv, towner = parts.chunk_support(data.mu_true, idx)
            dd = data.d[i0:i1]
            losses[i0:i1] = dd + np.bincount(owner, c[z] * v, minlength=len(idx))
            # score difference plus loss (not aug . mu + d - s . mu_true: the rounding of
            # s + c, C times, would make the hinge of an example whose maximizer is its
            # truth nonzero, even negative); at least 0, the truth being an output
            hinge[i0:i1] = np.maximum(
                np.bincount(owner, s[z] * v, minlength=len(idx))
                - np.bincount(towner, s[tz] * tv, minlength=len(idx)) + losses[i0:i1], 0.0)
            cuts = np.searchsorted(z, off[1:-1])
            sups += [(zi - o, vi) for zi, vi, o in zip(np.split(z, cuts), np.split(v, cuts),
                                                        off[:-1])]
        return sups, losses, hinge

    def fit(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> "CuttingPlaneLearner":
        """Run the cutting-plane method on ``(X, Y)``.

        Parameters
        ----------
        X : list of m examples
        Y : list of m outputs

        Returns
        -------
        self
        """
        check_fit_args(X, Y, type(self).__name__)
        with single_threaded_blas():
            return self._fit(X, Y)

    def _fit(self, X, Y):
        C, tol, max_iter, solver, opts, cache_size = self._check_params()
        t0 = time.perf_counter()
        data = prepare(self.model, X, Y, need_polytopes=needs_polytopes(self.model),
                       operators=True)   # data.Phi: PartFeatures (factored where offered)
        check_scale(data.Phi, data.c, data.d, C=C, owner=type(self).__name__,
                    bounds=data.scale_bounds)
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        m, d = data.n_examples, data.n_features
        parts = _Parts(data)
        one = bool(self.one_slack)
        ws = _WorkingSet(data, parts, one, C, cache_size if one else 0)
        previous = getattr(self, "_warm", None)
        if self.warm_start:
            ws.fingerprint = training_fingerprint(data)
            if previous is not None and previous.fingerprint == ws.fingerprint \
                    and previous.one == one:
                ws = previous.reattach(data, parts, C)
        progress = Progress(self, verbose=self.verbose, callback=self.callback, total=max_iter)
        history: List[Dict[str, Any]] = []
        t_solve = t_inf = t_cache = 0.0
        converged = stopped = False
        problem = None
        n_oracle = 0
        w = ws.w.copy()
        use_oracle = True
        last_gap = np.inf
        tighten = 1.0            # shrinks when the master QP was solved too loosely
        untrusted = False
        obj = hinge = viol = cast(Any, None)     # set by the first oracle pass
        it = 0
        for it in range(1, max_iter + 2):
            if use_oracle or it == max_iter + 1:
                ti = time.perf_counter()
                sups, losses, hinge = self._oracle(data, parts, w, polys)
                t_inf += time.perf_counter() - ti
                n_oracle += 1
                viol = ws.violation(hinge)
                obj = 0.5 * w @ w + C * hinge.sum()
                last_gap = float(viol.max())
                if history:
                    history[-1].update(objective=float(obj), max_violation=last_gap,
                                       time=time.perf_counter() - t0)
                self.coef_ = np.array(w)     # the iterate just evaluated (for callbacks)
                if history and not stopped and progress.update(
                        iteration=it - 1, objective=float(obj), max_violation=last_gap,
                        master_objective=history[-1]["master_objective"],
                        n_constraints=history[-1]["n_constraints"], oracle=True):
                    stopped = True
                # the certified gap: the exact objective of w minus the master's dual value
                # (a lower bound on the optimum), in units of C * m * tol, so that the test
                # does not depend on the scale of the features or of C.  One-slack masters
                # are solved only as tightly as the outer gap needs (MASTER_TOL).
                gap_ok = obj - ws.master_value <= (1.0 if one else 2.0) * C * m * tol
                if viol.max() <= tol and gap_ok:
                    converged = True
                    break
                if it == max_iter + 1 or stopped:
                    break
                ti = time.perf_counter()
                added = ws.add_oracle_cuts(sups, losses, viol, tol, it)
                t_cache += time.perf_counter() - ti
                if not added:
                    # every violating output is already a row of the master QP: its
                    # solution is not accurate enough (badly scaled features or C).  Solve
                    # it again more tightly; when that cannot help, say so, never claim
                    # convergence on a point the oracle does not certify.
                    tighten *= 1e-3
                    if solver is not None or tighten < 1e-9:
                        untrusted = True
                        break
            ti = time.perf_counter()
            problem = ws.solve_master(solver, opts, tighten * (max(
                1e-3 * tol, MASTER_TOL * last_gap) if one else 1e-3 * tol))
            t_solve += time.perf_counter() - ti
            w = ws.w
            history.append(dict(iteration=it, master_objective=ws.master_value,
                                n_constraints=ws.n_rows))
            use_oracle = True
            if one and cache_size:   # the next cut from the cache, if violated enough
                ti = time.perf_counter()
                use_oracle = not ws.add_cache_cut(max(tol, CACHE_FRACTION * last_gap), it)
                t_cache += time.perf_counter() - ti
            history[-1]["oracle"] = use_oracle
            if not use_oracle and progress.update(
                    iteration=it, master_objective=ws.master_value, n_constraints=ws.n_rows,
                    oracle=False):
                stopped = use_oracle = True   # a last oracle pass: the exact objective of w
        progress.close()
        check_objective(float(obj), w, C, type(self).__name__)
        if untrusted:
            norms = float(np.diag(ws._gram()).max(initial=0.0))
            warnings.warn(
                f"CuttingPlaneLearner stopped without converging: its master QP, solved as "
                f"tightly as double precision allows, leaves a violation of "
                f"{float(viol.max()):.3g} > tol={tol:g} on constraints it already holds. The "
                f"problem is badly scaled (C={C:g} times squared feature norms up to "
                f"{norms:.3g}); scale the features (e.g. to unit norm) or lower C.",
                ConvergenceWarning, stacklevel=2)
        elif not converged and not stopped:
            warnings.warn(
                f"CuttingPlaneLearner stopped after max_iter={max_iter} rounds with a "
                f"violation of {float(viol.max()):.3g} and a certified gap of "
                f"{float(obj - ws.master_value) / (C * m):.3g} per example (both must be <= "
                f"tol={tol:g}); raise max_iter or tol.", ConvergenceWarning, stacklevel=2)
        ws.detach()
        self._warm = ws if self.warm_start else None   # plain arrays: rows, weights, cache
        self.coef_ = np.array(w)
        self.slack_ = hinge
        self.objective_ = float(obj)
        self.master_objective_ = float(ws.master_value)
        self.n_iter_ = min(it, max_iter)
        self.n_oracle_calls_ = n_oracle
        self.n_constraints_ = ws.n_rows
        self.converged_ = converged
        self.history_ = history
        self.solver_ = "dual" if problem is None else (solver or "CLARABEL")
        self.problem_ = problem
        self.n_features_in_ = d
        self.fit_time_ = {"solve": t_solve, "inference": t_inf, "cache": t_cache,
                          "total": time.perf_counter() - t0}
        return self


    def hinge_losses(self, X: Sequence[Any], Y: Sequence[Any]) -> np.ndarray:
        """Structured hinge loss of each example under ``coef_`` (exact inference).

        Returns
        -------
        ndarray, shape (m,)
        """
        self._check_fitted()
        data = self._check_feature_count(
            prepare(self.model, X, Y, need_polytopes=needs_polytopes(self.model),
                    operators=True))
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        return self._oracle(data, _Parts(data), self.coef_, polys)[2]


class _WorkingSet:
    """The rows ``g_t . w + xi_{group_t} >= b_t`` of the master QP, their dual weights,
    Gram matrix and (one-slack) the inference cache.

    One-slack: one group, rows dense (d,) (averages over the examples), weights
    summing to ``C m``.  n-slack: one group per example, rows sparse, weights
    of each example summing to ``C``.  Row 0 of each group is its truth
    (``g = 0``, ``b`` = loss of the truth).  Rows without weight for
    :data:`INACTIVE_ROUNDS` (one-slack; Joachims et al. 2009) or
    :data:`INACTIVE_ROUNDS_NSLACK` (n-slack) rounds are dropped, truths never."""

    def __init__(self, data, parts, one, C, cache_size):
        m, d = data.n_examples, data.n_features
        self.m, self.d, self.one, self.C = m, d, one, C
        self.fingerprint = None
        truth = [_nonzeros(data.mu_true, i) for i in range(m)]
        self.loss_true = np.array([float(data.d[i] + data.c[i][z] @ v)
                                   for i, (z, v) in enumerate(truth)])
        self.n_groups = 1 if one else m
        self.cap = np.full(self.n_groups, C * m if one else C)
        if one:
            self.R = np.zeros((16, d))
            self.b = [float(self.loss_true.mean())]
            self.group = [0]
        else:
            self.R = sp.csr_array((m, d))
            self.b = list(self.loss_true)
            self.group = list(range(m))
        self.n_rows = len(self.b)
        self.alpha = self.cap.copy()
        self.idle = np.zeros(self.n_rows, dtype=np.int64)    # rounds without weight
        self.Gbuf = np.zeros((max(16, self.n_rows), max(16, self.n_rows)))
        self.n_gram = self.n_rows                            # rows of Gbuf filled (all 0)
        self.w = np.zeros(d)
        self.xi = np.array(self.b[:self.n_groups])
        self.master_value = float(self.cap @ self.xi)
        self.truth_keys = [_key(z, v) for z, v in truth]
        self.seen = [{key} for key in self.truth_keys] if not one else None
        self.keys = None if one else list(self.truth_keys)    # n-slack: each row's output
        self.cache = _Cache(m, cache_size) if cache_size else None
        self.reattach(data, parts, C, truth)

    # ------------------------------------------------------------ data
    def reattach(self, data, parts, C, truth=None):
        """Use the data of a new fit (the same training set), with weight ``C``
        (``truth``: the true outputs by their nonzeros, when already read)."""
        self.data, self.parts = data, parts
        if truth is None:
            truth = [_nonzeros(data.mu_true, i) for i in range(self.m)]
        # one-slack: the true outputs as stacked rows (the cuts are formed from part
        # counts); n-slack: their joint features, one sparse row per example
        self.truth = parts.stacked_rows(truth, range(self.m)) if self.one else None
        self.ftrue = None if self.one else parts.joint(truth)
        if self.cache is not None:
            self.cache.set_truth(self.truth)
        if C != self.C:                                  # the same rows, scaled weights
            self.alpha = self.alpha * (C / self.C)
            self.cap = self.cap * (C / self.C)
            self.C = C
            self.w = np.asarray(self._rows().T @ self.alpha, dtype=float).ravel()
        return self

    def detach(self):
        self.data = self.parts = self.ftrue = self.truth = None

    def _rows(self):
        return self.R[:self.n_rows] if self.one else self.R

    def _cuts(self, idx, sups):
        """n-slack: rows ``f_i(y_i) - f_i(y)`` (sparse (k, d)) of the outputs ``sups`` (by
        their nonzeros) of the examples ``idx``."""
        rows = self.ftrue[idx] - self.parts.joint(sups, idx) if len(idx) else \
            sp.csr_array((0, self.d))
        return sp.csr_array(rows)

    # ------------------------------------------------------------ rows
    def _append(self, rows, b, group):
        """Append rows (dense (k, d) for one-slack, sparse for n-slack)."""
        k = len(b)
        if self.one:
            if self.n_rows + k > len(self.R):   # the unused rows stay untouched (calloc)
                R = np.zeros((self.n_rows + max(k, len(self.R)), self.d))
                R[:self.n_rows] = self.R[:self.n_rows]
                self.R = R
            self.R[self.n_rows:self.n_rows + k] = rows
        else:
            self.R = sp.vstack([self.R, rows], format="csr")
        self.b += list(b)
        self.group += list(group)
        self.alpha = np.concatenate([self.alpha, np.zeros(k)])
        self.idle = np.concatenate([self.idle, np.zeros(k, dtype=np.int64)])
        self.n_rows += k

    def violation(self, hinge):
        """Hinge losses beyond the master slacks: (1,) one-slack, (m,) n-slack."""
        return np.array([hinge.mean()]) - self.xi if self.one else hinge - self.xi

    def add_oracle_cuts(self, sups, losses, viol, tol, now):
        """Add the oracle's outputs (by their nonzeros ``sups``, with their ``losses``) and
        feed the cache; returns the number of rows added."""
        m = self.m
        if self.one:
            rows, vals, owner = self.parts.stacked_rows(sups, range(m))
            if self.cache is not None:      # the outputs other than the truth
                keys = [_key(z, v) for z, v in sups]
                new = [i for i in range(m) if keys[i] != self.truth_keys[i]]
                pos = np.full(m, -1)
                pos[new] = np.arange(len(new))
                e = pos[owner] >= 0
                self.cache.add(new, [keys[i] for i in new], rows[e], vals[e], pos[owner[e]],
                               losses[new], now)
            # the joint cut mean_i (f_i(y_i) - f_i(y)) from part counts (the parts shared
            # with the truth cancel before any product).  A cut violated beyond tol is not
            # in the master QP (solved to 1e-3 tol).
            trows, tvals, _ = self.truth
            g = self.parts.joint_at(np.concatenate((trows, rows)),
                                    np.concatenate((tvals, -vals))) / m
            self._append(g[None, :], [float(losses.mean())], [0])
            return 1
        todo, keys = [], []
        for i in np.flatnonzero(viol > tol):
            key = _key(*sups[i])
            if key not in self.seen[i]:
                self.seen[i].add(key)
                todo.append(int(i))
                keys.append(key)
        if todo:
            rows = self._cuts(np.array(todo), [sups[i] for i in todo])
            self._append(rows, list(losses[todo]), todo)
            self.keys += keys
        return len(todo)

    def add_cache_cut(self, threshold, now):
        """One-slack: add the cut of the most violating cached outputs when it is violated
        by more than ``threshold``; returns whether it was added."""
        g, b, mean_hinge = self.cache.best(self.parts, self.w, self.loss_true, now)
        if mean_hinge - self.xi[0] <= threshold:
            return False
        self._append(g[None, :], [b], [0])
        return True

    # ------------------------------------------------------------ master QP
    def _gram(self):
        """The Gram matrix of the rows (T, T), grown in place."""
        T, k = self.n_rows, self.n_gram
        if T > len(self.Gbuf):
            size = max(T, 2 * len(self.Gbuf))
            G = np.zeros((size, size))
            G[:k, :k] = self.Gbuf[:k, :k]
            self.Gbuf = G
        if k < T:
            R = self._rows()
            cross = R @ R[k:T].T
            cross = cross.toarray() if sp.issparse(cross) else np.asarray(cross)
            self.Gbuf[:T, k:T] = cross
            self.Gbuf[k:T, :T] = cross.T
            self.n_gram = T
        return self.Gbuf[:T, :T]

    def _prune(self):
        """Drop the rows idle for INACTIVE_ROUNDS (one-slack) or INACTIVE_ROUNDS_NSLACK
        (n-slack) rounds, never a truth (one-slack: row 0; n-slack: rows 0..m-1).  A
        relaxation: the master's value stays a lower bound."""
        drop = self.idle >= (INACTIVE_ROUNDS if self.one else INACTIVE_ROUNDS_NSLACK)
        drop[:self.n_groups] = False
        if not drop.any():
            return
        keep = np.flatnonzero(~drop)
        T = len(keep)
        G = self._gram()[np.ix_(keep, keep)]
        self.Gbuf[:T, :T] = G
        self.n_gram = T
        if self.one:
            for t, r in enumerate(keep):       # in place (keep increases): no copy of R
                if t != r:
                    self.R[t] = self.R[r]
        else:                                  # their outputs may be found (and join) again
            for t in np.flatnonzero(drop):
                self.seen[self.group[t]].discard(self.keys[t])
            self.R = sp.csr_array(self.R[keep])
            self.keys = [self.keys[t] for t in keep]
        self.b = [self.b[t] for t in keep]
        self.group = [self.group[t] for t in keep]
        self.alpha, self.idle = self.alpha[keep], self.idle[keep]
        self.n_rows = T

    def solve_master(self, solver, opts, tol):
        """Solve the master QP (the dual method to the violation ``tol``, in loss units);
        sets ``w``, ``xi``, ``master_value``; returns the cvxpy problem when cvxpy solved it
        (else None)."""
        if solver is None and (self.one or self.n_rows <= MAX_DUAL_ROWS):
            self._prune()
            G = self._gram()
            group = np.array(self.group)
            self.alpha, grad, self.master_value, _ = solve_master_dual(
                G, np.array(self.b), group, self.cap, alpha=self.alpha, tol=tol)
            self.idle = np.where(self.alpha > 0.0, 0, self.idle + 1)
            self.w = np.asarray(self._rows().T @ self.alpha, dtype=float).ravel()
            xi = np.full(self.n_groups, -np.inf)
            np.maximum.at(xi, group, grad)
            self.xi = xi
            return None
        return self._solve_cvxpy(solver or "CLARABEL", opts)

    def _solve_cvxpy(self, solver, opts):
        T, d = self.n_rows, self.d
        import cvxpy as cp      # lazily: only the primal master builds a cvxpy problem
        wv = cp.Variable(d, name="w")
        xiv = cp.Variable(self.n_groups, name="xi")
        S = sp.csr_array((np.ones(T), (np.arange(T), self.group)), shape=(T, self.n_groups))
        cons = self._rows() @ wv + S @ xiv >= np.array(self.b)
        problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(wv) + self.cap @ xiv), [cons])
        solve(problem, solver, opts, what="the cutting-plane master QP")
        self.w = np.asarray(wv.value, dtype=float)
        self.xi = np.asarray(xiv.value, dtype=float)
        self.alpha = np.maximum(np.asarray(cons.dual_value, dtype=float), 0.0)
        self.master_value = float(problem.value)
        return problem
