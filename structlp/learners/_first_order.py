"""The base of the first-order learners: data handling, exact passes, prediction."""

from __future__ import annotations

import numbers
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np

from ..utils.validation import check_bool, check_random_state, check_scalar, check_scale
from ..base import BaseEstimator, StructuredPredictorMixin
from ..utils.progress import check_callback, check_verbose
from ..compiler import needs_polytopes, prepare
from ..exceptions import InvalidInputError
from ..inference import check_oracle_solver
from ..parallel import CHUNK, OraclePool, check_backend, check_n_jobs
from ..solvers import check_solver


_PASS_CHUNK = 64       # examples per chunk of an exact pass (parallel pools)


def _augment(s, c):
    """``s + c`` in place for ``c`` given by its nonzeros ``(idx, vals)`` (``s`` a fresh
    array of part scores; ``idx`` may be a slice, see :func:`_compact_loss`): the
    loss-augmented scores."""
    s[c[0]] += c[1]
    return s


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

    def _tree_path(self):
        """Whether the fit may run the compiled tree-labelling path (no polytopes, no oracle
        probe); the learners that have one say so."""
        return False

    def _prepare(self, X, Y):
        need = needs_polytopes(self.model) and not self._tree_path()
        data = prepare(self.model, X, Y, need_polytopes=need, operators=True)
        polys = data.polytopes if all(p is not None for p in data.polytopes) else None
        return data, polys

    def _fit(self, X, Y, solver, opts, timeout, run):
        """Prepare the data, open the oracle pool, ``run(pool, data, t0)``, record timings."""
        t0 = time.perf_counter()
        data, polys = self._prepare(X, Y)
        check_scale(data.Phi, data.c, data.d, C=float(self.C), owner=type(self).__name__,
                    bounds=data.scale_bounds)
        if not self._tree_path():
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
                          backend=self.backend, timeout=timeout, owner=type(self).__name__,
                          truths=data.mu_true)

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
        pool = OraclePool(self.model, data.X, polys, self.solver_, self.solver_opts,
                          truths=data.mu_true)
        return self._exact_pass(pool, data, self.coef_)
