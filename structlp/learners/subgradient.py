"""Stochastic subgradient (Pegasos-style) learning on the structured hinge."""

from __future__ import annotations

import numbers
import time
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from ..utils.progress import Progress
from ..utils.validation import check_bool, check_fit_args, check_objective, check_scalar
from ..exceptions import ConvergenceWarning
from ._first_order import _FirstOrderLearner
from ..model import StructuredModel


class SubgradientLearner(_FirstOrderLearner):
    """Structured max-margin learning by stochastic subgradient descent.

    Minimizes the objective of :class:`~structlp.MaxMarginLearner`,

    .. math::

        \\min_{w\\in\\mathbb R^d}\\; F(w) = \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m H_i(w),
        \\qquad H_i(w) = \\max_{\\mu\\in P_i}\\big[(\\Phi_i w + c_i)\\cdot\\mu + d_i\\big]
                         - (\\Phi_i w)\\cdot\\mu_i ,

    (``Phi_i`` (L_i, d) part features, ``mu_i`` (L_i,) the true output, the
    loss ``d_i + c_i . mu``).  ``F`` is 1-strongly convex, so the step after
    ``t`` mini-batches ``B`` (random permutations, ``batch_size`` examples) is
    Pegasos' (Shalev-Shwartz et al. 2011; Ratliff et al. 2007 for the
    structured hinge)

    .. math::

        w \\leftarrow \\Pi_R\\Big(w - \\tfrac1t\\big(w + \\tfrac{Cm}{|B|}\\sum_{i\\in B}
        \\Phi_i^T(\\mu_i^\\star - \\mu_i)\\big)\\Big),

    with ``mu_i*`` the loss-augmented maximizer from the model's exact oracle,
    ``Pi_R`` the projection on the ball of radius ``R = sqrt(2 F(0))`` that
    contains the optimum, and the weighted average ``w_bar`` (weights ``t``;
    Lacoste-Julien et al. 2012) as the returned iterate when ``averaging``.

    After every epoch a pass of exact loss-augmented inference gives
    ``F(w_bar)`` and a full subgradient ``g``, hence the certified bound
    ``F(w_bar) - F(w*) <= |g|^2 / 2`` (strong convexity).  Training converges
    when that bound falls below ``tol * objective`` (relative, so the test does
    not depend on the scale of the features or of C).  It also stops, without
    claiming convergence (``converged_ = False`` and a ConvergenceWarning that
    states the bound), when the best objective has not decreased by more than
    ``tol`` (relative) for ``n_iter_no_change`` epochs (counted once an iterate
    beats ``w = 0``).  The best iterate seen is returned.  Subgradient
    methods converge slowly (``O(1/t)``); prefer
    :class:`~structlp.learners.frank_wolfe.FrankWolfeLearner`, which has a duality gap.

    Parameters
    ----------
    model : StructuredModel
    C : float > 0, default=1.0
        Weight of the hinge losses.
        A C at which the objective could overflow float64 with these features is refused
        (``InvalidParameterError``; the learners guide, "Scale").
    tol : float > 0, default=1e-4
        Relative improvement of the objective that counts as progress.
    max_iter : int >= 1, default=200
        Maximum number of epochs.
    n_jobs, backend : where the oracles run (see :mod:`structlp.parallel`).
    random_state : None, int or numpy Generator
    batch_size : int >= 1, default=1
        Examples per step (their oracles run at the same ``w``, in parallel
        with ``n_jobs``/``backend``); results never depend on ``n_jobs`` or
        ``backend``.
    averaging : bool, default=True
        Return the weighted average of the iterates (else the last iterate).
    n_iter_no_change : int >= 1, default=5
    solver, solver_opts : LP solver for models without a combinatorial oracle.
    scheduler_timeout : float > 0, default=10.0
    verbose : int >= 0 or bool, default=0
        1: one log line per epoch (logger ``structlp.learners.subgradient``, INFO) with the
        objective, the suboptimality bound and the time; 2: also a progress bar.
    callback : callable or None, default=None
        Called after every epoch as ``callback(info)`` (``iteration``, ``time``,
        ``objective``, ``suboptimality_bound``); returning True stops the fit (the
        best iterate so far is returned, ``converged_ = False``, no warning).
    warm_start : bool, default=False
        A refit continues the previous fit of this estimator in this process (its
        last iterate, average and step counter: Pegasos' steps ``1/t`` go on
        shrinking) when the number of examples and of features match; otherwise
        (or after unpickling) it starts from ``w = 0``.

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
        The best evaluated iterate.
    objective_ : float
        ``F(coef_)`` with exact hinge losses (the objective of MaxMarginLearner).
    suboptimality_bound_ : float
        ``|g|^2 / 2 >= objective_ - optimum`` for the full subgradient ``g`` at ``coef_``.
    slack_ : ndarray, shape (n_examples,)
        Exact hinge losses at ``coef_``.
    n_iter_ : int
    n_oracle_calls_ : int
    converged_ : bool
    history_ : list of dict
        Per epoch: ``epoch``, ``time``, ``objective``, ``suboptimality_bound``
        (epoch 0: the start point).
    n_features_in_ : int
    fit_time_ : dict

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=20, n_rows=4, random_state=0)
    >>> sg = structlp.SubgradientLearner(model, C=0.1, max_iter=100, random_state=0).fit(X, Y)
    >>> qp = structlp.MaxMarginLearner(model, C=0.1).fit(X, Y)
    >>> bool(qp.objective_ <= sg.objective_ <= qp.objective_ + sg.suboptimality_bound_ + 1e-6)
    True
    """

    def __init__(self, model: StructuredModel, C: float = 1.0, tol: float = 1e-4,
                 max_iter: int = 200, n_jobs: Optional[int] = None,
                 backend: Any = None,
                 random_state: Union[None, int, np.random.Generator] = None,
                 batch_size: int = 1, averaging: bool = True, n_iter_no_change: int = 5,
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
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
        self.averaging = averaging
        self.n_iter_no_change = n_iter_no_change
        self.solver = solver
        self.solver_opts = solver_opts
        self.scheduler_timeout = scheduler_timeout
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def fit(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> "SubgradientLearner":
        """Run stochastic subgradient descent on ``(X, Y)``.

        Parameters
        ----------
        X : list of m examples
        Y : list of m outputs

        Returns
        -------
        self
        """
        check_fit_args(X, Y, type(self).__name__)
        name = type(self).__name__
        C, tol, max_iter, batch_size, solver, opts, timeout, rng = self._check_common()
        check_bool(self.averaging, "averaging", owner=name)
        patience = check_scalar(self.n_iter_no_change, "n_iter_no_change",
                                kind=numbers.Integral, low=1, owner=name)
        return self._fit(X, Y, solver, opts, timeout, lambda pool, data, t0: self._run(
            pool, data, C, tol, max_iter, batch_size, patience, rng, t0))

    def _evaluate(self, pool, data, w, C):
        g = w.copy()

        def subgradient(i, a, mu):
            g[:] += C * data.Phi[i].joint(mu - data.mu_true[i])

        hinge = self._exact_pass(pool, data, w, subgradient)
        obj = 0.5 * float(w @ w) + C * float(hinge.sum())
        return obj, hinge, 0.5 * float(g @ g)

    def _run(self, pool, data, C, tol, max_iter, batch_size, patience, rng, t0):
        m, d = data.n_examples, data.n_features
        ops, c, mt = data.Phi, data.c, data.mu_true
        w, w_avg, wsum, t = self._start(m, d)
        t_inf = time.perf_counter()
        obj0, hinge0, bound0 = self._evaluate(pool, data, w_avg if self.averaging else w, C)
        t_inf = time.perf_counter() - t_inf
        # |w*|^2 / 2 <= F(w*) <= F(start): the optimum is in the ball of this radius
        radius = np.sqrt(2.0 * max(obj0, 0.0))
        best = (obj0, (w_avg if self.averaging else w).copy(), hinge0, bound0)
        history = [dict(epoch=0, time=time.perf_counter() - t0, objective=obj0,
                        suboptimality_bound=bound0)]
        n_calls, stall, converged, stopped, epoch = m, 0, False, False, 0
        plateau = False
        progress = Progress(self, self.verbose, self.callback, total=max_iter)
        for epoch in range(1, max_iter + 1):
            perm = rng.permutation(m)
            for k in range(0, m, batch_size):
                batch = perm[k:k + batch_size]
                ti = time.perf_counter()
                mus = pool.argmax(batch, [ops[i].scores(w) + c[i] for i in batch])
                t_inf += time.perf_counter() - ti
                n_calls += len(batch)
                t += 1
                grad = w.copy()
                scale = C * m / len(batch)
                for i, mu in zip(batch, mus):
                    grad += scale * ops[i].joint(mu - mt[i])
                w = w - grad / t
                nrm = float(np.linalg.norm(w))
                if nrm > radius:
                    w *= radius / nrm
                wsum += t
                w_avg += (t / wsum) * (w - w_avg)
            point = w_avg if self.averaging else w
            ti = time.perf_counter()
            obj, hinge, bound = self._evaluate(pool, data, point, C)
            t_inf += time.perf_counter() - ti
            n_calls += m
            history.append(dict(epoch=epoch, time=time.perf_counter() - t0, objective=obj,
                                suboptimality_bound=bound))
            if obj < best[0] * (1 - tol):
                stall = 0
            elif best[0] < obj0:   # patience starts once the start w = 0 has been beaten
                stall += 1
            if obj < best[0]:
                best = (obj, point.copy(), hinge, bound)
            converged = bool(best[3] <= tol * best[0])   # certified, relative
            plateau = stall >= patience and not converged
            stopped = progress.update(iteration=epoch, objective=obj, suboptimality_bound=bound,
                                      time=history[-1]["time"]) and not converged
            if converged or stopped or plateau:
                break
        progress.close()
        self._state = (m, d, w, w_avg, wsum, t)
        if plateau and not stopped:
            warnings.warn(
                f"{type(self).__name__} stopped on a plateau (the objective did not decrease "
                f"by more than tol={tol:g} for n_iter_no_change={patience} epochs) without "
                f"certifying convergence: its objective {best[0]:.6g} may exceed the optimum "
                f"by up to {best[3]:.3g}. Subgradient steps converge slowly; use "
                "FrankWolfeLearner or CuttingPlaneLearner for a certified optimum.",
                ConvergenceWarning, stacklevel=3)
        elif not converged and not stopped:
            warnings.warn(
                f"{type(self).__name__} stopped after max_iter={max_iter} epochs while the "
                f"objective was still decreasing by more than tol={tol:g}; raise max_iter.",
                ConvergenceWarning, stacklevel=3)
        check_objective(float(best[0]), best[1], C, type(self).__name__)
        self.objective_, self.coef_, self.slack_, self.suboptimality_bound_ = \
            float(best[0]), best[1], best[2], float(best[3])
        self.n_iter_ = epoch
        self.n_oracle_calls_ = n_calls
        self.converged_ = converged
        self.history_ = history
        self.fit_time_ = {"inference": t_inf}

    def _start(self, m, d):
        """``(w, w_avg, weight sum, step counter)`` to start from (see ``warm_start``)."""
        state = getattr(self, "_state", None) if self.warm_start else None
        if state is not None and state[:2] == (m, d):
            return state[2].copy(), state[3].copy(), state[4], state[5]
        return np.zeros(d), np.zeros(d), 0.0, 0
