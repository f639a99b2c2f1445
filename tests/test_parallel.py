"""Serial, local processes (n_jobs) and dask give the same learners, bit for bit."""

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
