"""Loss-augmented inference over many examples: serially, in local processes, or on dask.

The first-order learners (:class:`~structlp.learners.frank_wolfe.FrankWolfeLearner`,
:class:`~structlp.learners.subgradient.SubgradientLearner`) spend their time in the
per-example oracle

.. math::

    \\mu_i^\\star = \\arg\\max_{\\mu \\in P_i} a_i \\cdot \\mu ,\\qquad
    a_i = \\Phi_i w + c_i \\quad (\\text{shape } (L_i,)),

solved by the model's combinatorial fast path
(:meth:`~structlp.model.StructuredModel.inference`) or by its inference LP.
:class:`OraclePool` runs it for a list of example indices:

* ``backend=None`` and ``n_jobs`` None or 1: in this process;
* ``n_jobs > 1`` (or ``-1``: all cores) or ``backend="loky"``: in local worker
  processes (joblib's loky executor); the model, the examples and their
  polytopes are sent to each worker once, when the pool starts;
* ``backend="dask"`` (the current ``distributed`` client), a
  ``distributed.Client``, or a scheduler address such as
  ``"tcp://10.0.0.5:8786"``: on a dask cluster; the data are scattered to every
  worker once (``broadcast=True``) and each task receives only the indices and
  the scores.

The indices are always cut into the same chunks of :data:`CHUNK` consecutive
examples, whatever the backend, and every chunk is solved by the same code, so
the results do not depend on ``n_jobs`` or on the backend.
"""

from __future__ import annotations

import numbers
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .exceptions import InvalidParameterError, StructlpError
from .inference import maximize_checked

#: Examples per task (fixed, so that every backend stacks the same inference LPs).
CHUNK = 16

#: Worker-side state of the loky pools, by token.
_STATE: dict = {}


class BackendError(StructlpError, RuntimeError):
    """A parallel or distributed backend could not be reached or failed."""


def check_n_jobs(n_jobs: Any, owner: Optional[str] = None) -> int:
    """Validate ``n_jobs`` (None, or a non-zero int); return the number of processes.

    ``None`` and ``1`` mean serial; ``-1`` means all cores, ``-2`` all but one, ...
    """
    where = f" of {owner}" if owner else ""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise InvalidParameterError(
            f"The 'n_jobs' parameter{where} must be None or a non-zero int (-1: all cores). "
            f"Got {n_jobs!r} instead.")
    n_jobs = int(n_jobs)
    if n_jobs < 0:
        n_jobs = max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return n_jobs


def check_backend(backend: Any, owner: Optional[str] = None) -> Any:
    """Validate ``backend``: None, "loky", "dask", a scheduler address or a dask Client."""
    where = f" of {owner}" if owner else ""
    if backend is None or backend in ("loky", "dask"):
        return backend
    if isinstance(backend, str):
        if "://" in backend or ":" in backend:
            return backend
    elif type(backend).__name__ == "Client" and hasattr(backend, "submit"):
        return backend
    raise InvalidParameterError(
        f"The 'backend' parameter{where} must be None, 'loky', 'dask', a dask scheduler "
        f"address such as 'tcp://host:8786', or a distributed.Client. Got {backend!r} instead.")


def _chunks(idx):
    return [idx[k:k + CHUNK] for k in range(0, len(idx), CHUNK)]


def _solve_chunk(state, idx, aug):
    """Each example's fast path (``inference_parts``) where it has one, one LP for the rest."""
    model, X, polys, solver, opts = state
    mus = [model.checked_inference_parts(X[i], a) for i, a in zip(idx, aug)]
    pending = [k for k, mu in enumerate(mus) if mu is None]
    if pending:
        sub_p = None if polys is None else [polys[idx[k]] for k in pending]
        _, sols = maximize_checked(model, [X[idx[k]] for k in pending],
                                   [aug[k] for k in pending], sub_p, solver, opts)
        for k, mu in zip(pending, sols):
            mus[k] = np.asarray(mu, dtype=float)
    return mus


def _loky_task(token, path, idx, aug):
    state = _STATE.get(token)
    if state is None:             # first task of this fit in this worker: load the data
        import pickle
        with open(path, "rb") as fh:
            state = pickle.load(fh)
        _STATE.clear()            # keep only the current training set
        _STATE[token] = state
    return _solve_chunk(state, idx, aug)


def _dask_task(state, idx, aug):
    return _solve_chunk(state, idx, aug)


class OraclePool:
    """Loss-augmented argmax for subsets of a training set, on one of the backends.

    Parameters
    ----------
    model : StructuredModel
    X : list of m checked examples
    polytopes : list of m Polytope, or None (built by the model where needed)
    solver, solver_opts : LP solver for examples without a fast path
    n_jobs : int or None
    backend : None, "loky", "dask", address or distributed.Client
    timeout : float
        Seconds to wait for a dask scheduler given by address.
    owner : str
        Name used in error messages.

    Use as a context manager (or call :meth:`close`): worker processes and
    scattered data are released on exit.
    """

    def __init__(self, model: Any, X: Sequence[Any], polytopes: Optional[Sequence[Any]] = None,
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                 n_jobs: Optional[int] = None, backend: Any = None, timeout: float = 10.0,
                 owner: Optional[str] = None) -> None:
        self.state = (model, list(X), polytopes, solver, solver_opts)
        self.n_jobs = check_n_jobs(n_jobs, owner)
        self.backend = check_backend(backend, owner)
        self.timeout = timeout
        self.owner = owner or "the learner"
        self.kind = "serial"
        self._executor: Any = None
        self._client: Any = None
        self._state_future: Any = None
        self._own_client = False
        if self.backend == "loky" or (self.backend is None and self.n_jobs > 1):
            self._start_loky()
        elif self.backend is not None:
            self._start_dask()

    # ------------------------------------------------------------ start / stop
    def _start_loky(self):
        import tempfile
        import uuid

        try:
            import cloudpickle  # a dependency of joblib
            from joblib.externals.loky import get_reusable_executor
        except ImportError:
            raise BackendError(
                "n_jobs > 1 needs joblib: pip install 'structlp[parallel]' (or joblib).") from None
        self.kind = "loky"
        self._token = uuid.uuid4().hex
        fd, self._path = tempfile.mkstemp(prefix="structlp-oracle-", suffix=".pkl")
        with os.fdopen(fd, "wb") as fh:
            fh.write(cloudpickle.dumps(self.state))
        # workers persist between fits (their start-up, imports included, is paid once);
        # each loads this fit's data from the file on its first task
        self._executor = get_reusable_executor(max_workers=self.n_jobs, timeout=300)

    def _start_dask(self):
        try:
            import distributed
        except ImportError:
            raise BackendError(
                f"backend={self.backend!r} needs dask.distributed: pip install "
                "'structlp[dask]' (or 'dask[distributed]').") from None
        self.kind = "dask"
        if self.backend == "dask":
            try:
                self._client = distributed.get_client()
            except ValueError:
                raise BackendError(
                    "backend='dask' uses the current dask.distributed Client, but none is "
                    "running: create one (distributed.Client(address)) or pass the Client "
                    "or the scheduler address as backend.") from None
        elif isinstance(self.backend, str):
            try:
                self._client = distributed.Client(self.backend, timeout=self.timeout,
                                                  set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise BackendError(
                    f"Could not reach the dask scheduler at {self.backend!r} within "
                    f"{self.timeout:g} s ({type(exc).__name__}: {exc}). Check the address "
                    "and that the scheduler is running, or raise scheduler_timeout.") from None
            self._own_client = True
        else:
            self._client = self.backend
        if getattr(self._client, "status", "running") not in ("running", "connecting"):
            raise BackendError(f"The dask Client is not running (status "
                               f"{self._client.status!r}).")
        try:
            [self._state_future] = self._client.scatter([self.state], broadcast=True,
                                                        hash=False)
        except Exception as exc:  # pragma: no cover - cluster failures
            self.close()
            raise BackendError(f"Could not send the training data to the dask workers: "
                               f"{exc}") from None

    def close(self) -> None:
        """Stop local workers / release scattered data (and a client made from an address)."""
        if self._executor is not None:
            self._executor = None
            try:
                os.unlink(self._path)
            except OSError:  # pragma: no cover
                pass
        if self._state_future is not None:
            try:
                self._state_future.release()
            except Exception:  # pragma: no cover
                pass
            self._state_future = None
        if self._client is not None and self._own_client:
            self._client.close()
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ work
    def argmax_one(self, i: int, aug: np.ndarray) -> np.ndarray:
        """``argmax_{mu in P_i} aug . mu`` for one example: its fast path, served here
        when the pool is serial, without chunking (the step of block-coordinate methods)."""
        if self.kind == "serial":
            mu = self.state[0].checked_inference_parts(self.state[1][i], aug)
            if mu is not None:
                return mu
        return self.argmax([i], [aug])[0]

    def argmax(self, idx: Sequence[int], aug: Sequence[np.ndarray]) -> List[np.ndarray]:
        """``argmax_{mu in P_i} aug_i . mu`` for each ``i`` in ``idx``.

        Parameters
        ----------
        idx : sequence of int, length n
        aug : list of n arrays, shape (L_i,), the (loss-augmented) part scores

        Returns
        -------
        list of n 0/1 arrays, shape (L_i,)
        """
        idx = [int(i) for i in idx]
        pieces = list(zip(_chunks(idx), _chunks(list(aug))))
        if self.kind == "serial":
            out = [_solve_chunk(self.state, i, a) for i, a in pieces]
        elif self.kind == "loky":
            try:
                futs = [self._executor.submit(_loky_task, self._token, self._path, i, a)
                        for i, a in pieces]
                out = [f.result() for f in futs]
            except StructlpError:
                raise
            except Exception as exc:
                if type(exc).__module__.startswith(("joblib", "concurrent")):
                    raise BackendError(f"A local worker process failed: {exc}") from None
                raise
        else:
            futs = [self._client.submit(_dask_task, self._state_future, i, a, pure=False)
                    for i, a in pieces]
            out = self._client.gather(futs)
        return [mu for part in out for mu in part]
