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
  the scores.  The results are taken in submission order (never in the order
  the tasks finish), and every blocking call on the cluster is watched: a
  scheduler that does not answer, a cluster without workers, or workers lost
  with the training data raise :class:`BackendError` within the timeout
  (``scheduler_timeout`` of the learners), while an error raised by the
  model's own code on a worker is raised as itself.

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
    """A parallel or distributed backend could not be reached or failed.

    Examples
    --------
    >>> import structlp
    >>> from structlp.parallel import BackendError
    >>> # e.g. no dask scheduler at the address
    >>> issubclass(BackendError, structlp.StructlpError)
    True
    """


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


def fast_path(state, i, aug):
    """Example ``i``'s fast path (``inference_parts``) for the scores ``aug``, or None; a
    decoder of the model's own checked against the example's polytope and, when the state
    holds the truths, its true output."""
    model, X, polys, _, _, truths = state
    return model.checked_inference_parts(
        X[i], aug, index=i, polytope=None if polys is None else polys[i],
        truth=None if truths is None else truths.nonzeros(i))


def solve_chunk(state, idx, aug):
    """Each example's fast path (``inference_parts``) where it has one, one LP for the rest.

    A decoder of the model's own has each output checked
    (:meth:`~structlp.model.StructuredModel.checked_inference_parts`: against the
    example's polytope, and against its true output when the state holds the truths)."""
    model, X, polys, solver, opts, truths = state
    mus = [fast_path(state, i, a) for i, a in zip(idx, aug)]
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
    return solve_chunk(state, idx, aug)


def _dask_task(state, idx, aug):
    return solve_chunk(state, idx, aug)


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
    truths : SparseVectors, optional
        The true outputs of the examples (``TrainingData.mu_true``): the outputs of a
        decoder of the model's own are checked to score at least as much as these.

    Use as a context manager (or call :meth:`close`): worker processes and
    scattered data are released on exit.
    """

    def __init__(self, model: Any, X: Sequence[Any], polytopes: Optional[Sequence[Any]] = None,
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                 n_jobs: Optional[int] = None, backend: Any = None, timeout: float = 10.0,
                 owner: Optional[str] = None, truths: Any = None) -> None:
        self.state = (model, list(X), polytopes, solver, solver_opts, truths)
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
            self._client = _connect(distributed, self.backend, self.timeout)
            self._own_client = True
        else:
            self._client = self.backend
        if getattr(self._client, "status", "running") not in ("running", "connecting"):
            raise BackendError(f"The dask Client is not running (status "
                               f"{self._client.status!r}).")
        try:
            [self._state_future] = call_supervised(
                self._client, self.timeout, lambda: self._client.scatter(
                    [self.state], broadcast=True, hash=False, timeout=self.timeout))
        except BackendError:
            self.close(wait=False)
            raise
        except Exception as exc:
            self.close(wait=False)
            raise BackendError(f"Could not send the training data to the dask workers "
                               f"within {self.timeout:g} s ({type(exc).__name__}: {exc}). "
                               "Check that the cluster has workers.") from None

    def close(self, wait: bool = True) -> None:
        """Stop local workers / release scattered data (and a client made from an address;
        ``wait=False``: closed in the background, after a cluster failure)."""
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
            if wait:
                _close_quietly(self._client, self.timeout)
            else:
                import threading
                threading.Thread(target=_close_quietly, args=(self._client, self.timeout),
                                 daemon=True).start()
        self._client = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # after a cluster failure, closing the client must not delay the error
        self.close(wait=not (exc_type is not None and issubclass(exc_type, BackendError)))

    # ------------------------------------------------------------ work
    def argmax_one(self, i: int, aug: np.ndarray) -> np.ndarray:
        """``argmax_{mu in P_i} aug . mu`` for one example: its fast path, served here
        when the pool is serial, without chunking (the step of block-coordinate methods)."""
        if self.kind == "serial":
            mu = fast_path(self.state, i, aug)
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
            out = [solve_chunk(self.state, i, a) for i, a in pieces]
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
            out = self._dask_map(pieces)
        return [mu for part in out for mu in part]

    def _dask_map(self, pieces):
        """The chunks' results in submission order; a cluster that fails (no workers, a
        scheduler that stops answering, the scattered data lost) is a BackendError within
        ``timeout`` seconds; an error raised by the model itself is raised as is."""
        client = self._client

        def run():
            futs = [client.submit(_dask_task, self._state_future, i, a, pure=False)
                    for i, a in pieces]
            # gather keeps the order of ``futs`` (submission order), whatever the order
            # in which the tasks finished
            return client.gather(futs)

        try:
            return call_supervised(client, self.timeout, run)
        except BackendError:
            raise
        except Exception as exc:
            if is_cluster_failure(exc):
                raise BackendError(
                    f"The dask cluster failed during the fit ({type(exc).__name__}: {exc}); "
                    "the training data held by its workers may have been lost with them. "
                    "Check the cluster and fit again.") from None
            raise


def _close_quietly(client: Any, timeout: float) -> None:
    try:
        client.close(timeout=timeout)
    except Exception:  # pragma: no cover - the scheduler is gone already
        pass


def is_cluster_failure(exc: BaseException) -> bool:
    """A failure of the cluster (lost workers or data, closed connections, timeouts), as
    opposed to an error raised by the task's own code."""
    import asyncio

    if isinstance(exc, StructlpError):
        return False
    return (isinstance(exc, (asyncio.CancelledError, TimeoutError, ConnectionError))
            or type(exc).__module__.split(".")[0] in ("distributed", "tornado"))


def call_supervised(client: Any, timeout: float, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` (a blocking call on ``client``), run in a helper thread while this one
    watches the cluster: between short waits it asks the scheduler (within 0.8 ``timeout``)
    how many workers it has.  No answer, or no workers or a client that is not running for
    0.8 ``timeout`` seconds, is a BackendError, so the error comes within
    ``timeout`` seconds of the failure (the helper thread is then abandoned); what ``fn``
    raises is raised here."""
    import threading
    import time

    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # raised in the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=run, name="structlp-dask-call", daemon=True)
    thread.start()
    poll = min(0.5, timeout / 10)
    patience = 0.8 * timeout    # + one poll: within ``timeout`` of the failure
    bad_since = None
    while True:
        thread.join(poll)
        if not thread.is_alive():
            if "error" in box:
                raise box["error"]
            return box["value"]
        now = time.monotonic()
        problem = None
        if client.status != "running":
            problem = f"the dask client lost its scheduler (status {client.status!r})"
        else:
            try:
                info = client.sync(client.scheduler.identity, n_workers=0,
                                   callback_timeout=patience)
            except Exception as exc:
                raise BackendError(
                    f"The dask scheduler stopped answering ({type(exc).__name__}; waited "
                    f"{patience:.3g} s of scheduler_timeout={timeout:g} s); the fit cannot go "
                    "on. Check the scheduler, or raise scheduler_timeout.") from None
            if not info.get("n_workers", 0):
                problem = "the dask cluster has no workers"
        if problem is None:
            bad_since = None
        elif bad_since is None:
            bad_since = now
        elif now - bad_since >= patience:
            raise BackendError(f"{problem[0].upper()}{problem[1:]} for {now - bad_since:.1f} s "
                               f"(scheduler_timeout={timeout:g} s); the fit cannot go on.")


def _connect(distributed, address, timeout):
    """``distributed.Client(address)``, or a BackendError within ``timeout`` seconds.

    The client's own timeout covers the TCP connection, but not a peer that accepts it and
    never answers the handshake: the client is made in a helper thread and abandoned
    (closed when it ever connects) past the deadline."""
    import threading

    box: dict = {}
    lock = threading.Lock()

    def make():
        try:
            client = distributed.Client(address, timeout=timeout, set_as_default=False)
        except BaseException as exc:  # reported to the caller below
            with lock:
                box["error"] = exc
            return
        with lock:
            if box.get("abandoned"):
                client.close()
            else:
                box["client"] = client

    thread = threading.Thread(target=make, name="structlp-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    with lock:
        if "client" not in box and "error" not in box:
            box["abandoned"] = True
            raise BackendError(
                f"Could not reach the dask scheduler at {address!r} within {timeout:g} s "
                "(it accepted the connection but did not answer). Check the address and "
                "that the scheduler is running, or raise scheduler_timeout.")
    if "error" in box:
        exc = box["error"]
        raise BackendError(
            f"Could not reach the dask scheduler at {address!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}). Check the address and that the scheduler is "
            "running, or raise scheduler_timeout.") from None
    return box["client"]
