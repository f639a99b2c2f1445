"""Serial, local processes (n_jobs) and dask give the same learners, bit for bit."""

import os

import numpy as np
import pytest

from structlp import InvalidParameterError
from structlp.learners.frank_wolfe import FrankWolfeLearner
from structlp.parallel import CHUNK, BackendError, OraclePool, check_backend, check_n_jobs
from structlp.structures import BipartiteMatching, TreeLabeling
from structlp.learners.subgradient import SubgradientLearner
from test_frank_wolfe import assignments, chains, fit_quiet


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="module")
def dask_processes():
    """Two worker processes (the results travel between processes, pickled)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client


def _learners(seed=4):
    return [
        lambda **kw: FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=4,
                                       batch_size=2 * CHUNK + 3, random_state=seed, **kw),
        lambda **kw: FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=3,
                                       random_state=seed, **kw),
        lambda **kw: SubgradientLearner(BipartiteMatching(), max_iter=3, batch_size=8,
                                        random_state=seed, **kw),
    ]


def _same(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.slack_, b.slack_)
    assert a.objective_ == b.objective_ and a.n_oracle_calls_ == b.n_oracle_calls_


def test_n_jobs_equals_serial(rng):
    X, Y = assignments(rng, 40)
    for make in _learners():
        _same(fit_quiet(make(), X, Y), fit_quiet(make(n_jobs=2), X, Y))
    # all cores, and the explicit loky backend
    _same(fit_quiet(_learners()[0](), X, Y), fit_quiet(_learners()[0](n_jobs=-1), X, Y))
    _same(fit_quiet(_learners()[1](), X, Y), fit_quiet(_learners()[1](backend="loky"), X, Y))


def test_dask_without_client(rng):
    """Runs before the module's LocalCluster exists (file order)."""
    distributed = pytest.importorskip("distributed")
    try:
        distributed.get_client()
        pytest.skip("a default dask client exists")
    except ValueError:
        pass
    X, Y = assignments(rng, 4)
    with pytest.raises(BackendError, match="none is running"):
        FrankWolfeLearner(BipartiteMatching(), backend="dask").fit(X, Y)


def test_dask_equals_serial(rng, dask_client):
    X, Y = assignments(rng, 40)
    for make in _learners():
        _same(fit_quiet(make(), X, Y), fit_quiet(make(backend=dask_client), X, Y))
    # "dask" picks the current client
    _same(fit_quiet(_learners()[1](), X, Y), fit_quiet(_learners()[1](backend="dask"), X, Y))


def test_dask_repeated_fits_are_bit_identical(rng, dask_processes):
    """Worker processes finish the chunks in any order; the results are taken in submission
    order, so five fits equal the serial one (and each other) bit for bit."""
    X, Y = assignments(rng, 50)
    kw = dict(tol=1e-12, max_iter=3, batch_size=CHUNK, random_state=7)
    ser = fit_quiet(FrankWolfeLearner(BipartiteMatching(), **kw), X, Y)
    for _ in range(5):
        _same(ser, fit_quiet(FrankWolfeLearner(BipartiteMatching(), backend=dask_processes,
                                               **kw), X, Y))


def test_dask_model_errors_are_not_backend_errors(rng, dask_processes):
    """An error raised by the model's own code on a worker reaches the caller as itself."""
    from structlp.exceptions import DeclarationError

    class Fractional(BipartiteMatching):
        def inference_parts(self, x, scores):
            return np.full(len(scores), 0.5)

    X, Y = assignments(rng, 4)
    with pytest.raises(DeclarationError, match="inference_parts"):
        FrankWolfeLearner(Fractional(), batch_size=4, backend=dask_processes).fit(X, Y)


def test_dask_scheduler_address_and_lp_oracle(rng, dask_client):
    """A scheduler address, and a model without fast path (stacked LPs per chunk)."""
    X, Y = chains(rng, 20)

    class LPChain(TreeLabeling):
        def inference(self, x, scores):
            return None     # force the inference LP

    model = LPChain(3)
    ser = fit_quiet(FrankWolfeLearner(model, max_iter=2, batch_size=20, random_state=0), X, Y)
    par = fit_quiet(FrankWolfeLearner(model, max_iter=2, batch_size=20, random_state=0,
                                      backend=dask_client.scheduler.address), X, Y)
    _same(ser, par)


def test_unreachable_scheduler_times_out(rng):
    pytest.importorskip("distributed")
    X, Y = assignments(rng, 4)
    with pytest.raises(BackendError, match="Could not reach the dask scheduler at "
                                           "'tcp://127.0.0.1:1' within 1 s"):
        FrankWolfeLearner(BipartiteMatching(), backend="tcp://127.0.0.1:1",
                          scheduler_timeout=1).fit(X, Y)


def test_silent_scheduler_times_out(rng):
    """A port that accepts TCP connections but never answers (not a dask scheduler, or a
    hung one) is a BackendError, not a hang."""
    import socket
    import threading

    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []

    def accept():
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    X, Y = assignments(rng, 4)
    try:
        with pytest.raises(BackendError, match=f"Could not reach the dask scheduler at "
                                               f"'{address}' within 1 s"):
            FrankWolfeLearner(BipartiteMatching(), backend=address,
                              scheduler_timeout=1).fit(X, Y)
        assert accepted        # the connection was accepted: the handshake is what hung
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def test_cluster_without_workers(rng):
    """No worker to send the training data to: a BackendError, not a wait for ever."""
    distributed = pytest.importorskip("distributed")
    X, Y = assignments(rng, 4)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl, set_as_default=False) as client:
        with pytest.raises(BackendError, match="has no workers"):
            FrankWolfeLearner(BipartiteMatching(), backend=client, batch_size=4,
                              scheduler_timeout=1).fit(X, Y)


class _KillAfterFirstEpoch(FrankWolfeLearner):
    """Runs ``kill()`` (stored on the class) after the first epoch."""

    kill = None

    def _after_epoch(self, epoch, w):
        if epoch == 1:
            type(self).kill()


@pytest.mark.slow
def test_all_workers_killed_mid_fit(rng):
    """Both worker processes killed mid-fit: the scattered training data are lost with them,
    and the fit ends in a BackendError saying so (not a raw FutureCancelledError)."""
    import signal

    distributed = pytest.importorskip("distributed")
    X, Y = assignments(rng, 40)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cl, \
            distributed.Client(cl, set_as_default=False) as client:
        pids = list(client.run(os.getpid).values())
        _KillAfterFirstEpoch.kill = staticmethod(
            lambda: [os.kill(pid, signal.SIGKILL) for pid in pids])
        with pytest.raises(BackendError, match="dask cluster failed during the fit"):
            _KillAfterFirstEpoch(BipartiteMatching(), backend=client, batch_size=8,
                                 max_iter=50, tol=1e-12, scheduler_timeout=5).fit(X, Y)


_CLUSTER = """
import distributed, time
cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                   dashboard_address=None, host="127.0.0.1")
print(cluster.scheduler_address, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGSTOP", "SIGKILL"])
def test_scheduler_lost_mid_fit(rng, how):
    """The scheduler stops answering (SIGSTOP) or dies (SIGKILL) mid-fit: BackendError."""
    import signal
    import subprocess
    import sys

    pytest.importorskip("distributed")
    proc = subprocess.Popen([sys.executable, "-c", _CLUSTER], stdout=subprocess.PIPE,
                            text=True)
    try:
        address = proc.stdout.readline().strip()
        _KillAfterFirstEpoch.kill = staticmethod(
            lambda: os.kill(proc.pid, getattr(signal, how)))
        X, Y = assignments(rng, 40)
        with pytest.raises(BackendError, match="dask"):
            _KillAfterFirstEpoch(BipartiteMatching(), backend=address, batch_size=8,
                                 max_iter=50, tol=1e-12, scheduler_timeout=8).fit(X, Y)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_pool_chunks_are_backend_independent(rng):
    X, Y = assignments(rng, 3 * CHUNK + 1)
    model = BipartiteMatching()
    scores = [rng.normal(size=16) for _ in X]
    with OraclePool(model, X) as serial, OraclePool(model, X, n_jobs=2) as procs:
        assert serial.kind == "serial" and procs.kind == "loky"
        idx = list(range(len(X)))[::-1]
        a, b = serial.argmax(idx, scores), procs.argmax(idx, scores)
    assert len(a) == len(X) and all(np.array_equal(u, v) for u, v in zip(a, b))


class HalfFastMatching(BipartiteMatching):
    """The Hungarian fast path for even-sized examples only; the others take the LP."""

    def inference(self, x, scores):
        return super().inference(x, scores) if x.shape[0] % 2 == 0 else None

    def inference_parts(self, x, scores):
        return super().inference_parts(x, scores) if x.shape[0] % 2 == 0 else None


def test_pool_mixes_fast_paths_and_the_lp(rng):
    """A chunk where some examples have a fast path and some need the inference LP gives
    the LP's answer for every example, in order; argmax_one agrees with argmax."""
    from scipy.optimize import linear_sum_assignment
    X = [rng.normal(size=(n, n, 3)) for n in (3, 4, 5, 4, 3, 6)]
    scores = [rng.normal(size=x.shape[0] ** 2) for x in X]
    with OraclePool(HalfFastMatching(), X) as pool:
        mus = pool.argmax(range(len(X)), scores)
        ones = [pool.argmax_one(i, s) for i, s in enumerate(scores)]
    for x, s, mu, one in zip(X, scores, mus, ones):
        n = x.shape[0]
        r, c = linear_sum_assignment(s.reshape(n, n), maximize=True)
        ref = np.zeros((n, n))
        ref[r, c] = 1.0
        np.testing.assert_array_equal(mu, ref.ravel())
        np.testing.assert_array_equal(one, ref.ravel())


@pytest.mark.parametrize("n_jobs", [0, 1.0, True, "2"])
def test_bad_n_jobs(n_jobs):
    with pytest.raises(InvalidParameterError, match="'n_jobs' parameter"):
        check_n_jobs(n_jobs)


def test_n_jobs_values():
    assert check_n_jobs(None) == 1 and check_n_jobs(3) == 3 and check_n_jobs(-1) >= 1


@pytest.mark.parametrize("backend", ["spark", 5, object()])
def test_bad_backend(backend):
    with pytest.raises(InvalidParameterError, match="'backend' parameter"):
        check_backend(backend)


# ---------------------------------------------------------------- LP oracles
def _bmatchings(m=32):
    """b-matchings (R = P = 2): no combinatorial fast path, every oracle is the inference
    LP, and every example of a size shares one polytope (one compiled HiGHS model)."""
    from structlp.datasets import make_bipartite_matching
    X, Y, _, model = make_bipartite_matching(n_samples=m, n_rows=4, R=2, P=2, noise=1.0,
                                             random_state=0)
    return model, X, Y


def _fits(model, X, Y, **kw):
    """The serial fit, then the fit with ``kw`` (n_jobs or backend), same random_state."""
    make = lambda **extra: FrankWolfeLearner(model, C=1, tol=1e-12, max_iter=20,  # noqa: E731
                                             batch_size=CHUNK, random_state=0, **extra)
    return fit_quiet(make(), X, Y), fit_quiet(make(**kw), X, Y)


def test_lp_oracle_n_jobs_equals_serial():
    """Worker processes solve different subsets of the examples (and keep their HiGHS
    models between tasks); the serial fit solves all of them in one process: the answers,
    hence coef_ and objective_, are equal bit for bit all the same."""
    model, X, Y = _bmatchings()
    ser, par = _fits(model, X, Y, n_jobs=2)
    _same(ser, par)
    assert ser.n_iter_ == par.n_iter_ and ser.duality_gap_ == par.duality_gap_


def test_lp_and_combinatorial_oracles_dask_equal_serial(rng, dask_processes):
    """Two dask worker processes: an LP-oracle model (b-matchings) and a combinatorial one
    (Hungarian assignments) give the serial fit's coef_ and objective_ exactly."""
    model, X, Y = _bmatchings()
    _same(*_fits(model, X, Y, backend=dask_processes))
    Xa, Ya = assignments(rng, 40)
    _same(*_fits(BipartiteMatching(), Xa, Ya, backend=dask_processes))


def test_inference_lp_answer_does_not_depend_on_what_was_solved_before():
    """Tied scores (many optimal vertices): a compiled HiGHS model shared by the examples of
    a size answers what a fresh model answers, whatever it solved before, with or without
    an example's own warm basis."""
    from structlp import Polytope
    from structlp.inference import solve_stacked_lp
    model, X, _ = _bmatchings(2)
    poly = model.polytope(X[0])
    assert poly.n_aux == 0
    gen = np.random.default_rng(3)
    tied = [gen.integers(-1, 2, size=poly.n_parts).astype(float) for _ in range(60)]
    warm: dict = {}
    for s in tied:
        fresh = solve_stacked_lp([Polytope(A=poly.A, b=poly.b, E=poly.E, e=poly.e,
                                           lb=poly.lb, ub=poly.ub)], [s])[0]
        solve_stacked_lp([poly], [gen.normal(size=poly.n_parts)])       # other history
        np.testing.assert_array_equal(solve_stacked_lp([poly], [s])[0], fresh)
        np.testing.assert_array_equal(solve_stacked_lp([poly], [s], warm=[warm])[0], fresh)
