"""ShardedFrankWolfeLearner: partitions kept on dask workers, certified against the
single-process Frank-Wolfe fit, deterministic, with clear errors for bad partitions."""

import os
import signal
import warnings

import numpy as np
import pytest

from structlp import InvalidInputError, InvalidParameterError
from structlp.exceptions import ConvergenceWarning
from structlp.learners.frank_wolfe import FrankWolfeLearner
from structlp.learners import CuttingPlaneLearner, MaxMarginLearner, SubgradientLearner
from structlp.structures import BipartiteMatching, TreeLabeling
from test_frank_wolfe import assignments, chains

distributed = pytest.importorskip("distributed")
db = pytest.importorskip("dask.bag")
dask = pytest.importorskip("dask")

from structlp.learners.sharded import ShardedFrankWolfeLearner  # noqa: E402

# the partition generators below run on the workers, which cannot import this test module
import cloudpickle  # noqa: E402
import sys  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as cl:
        yield cl


def _bag(X, Y, npartitions):
    return db.from_sequence(list(zip(X, Y)), npartitions=npartitions)


def _serial(model, X, Y, C):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return FrankWolfeLearner(model, C=C, tol=1e-9, max_iter=3000,
                                 random_state=0).fit(X, Y)


def _within_gap(sh, ser):
    """Both fits certify the same optimum: the objectives agree within the two gaps, and
    each dual value is below the other's objective (weak duality across the fits)."""
    assert sh.converged_ and sh.duality_gap_ <= sh.tol * sh.objective_
    assert abs(sh.objective_ - ser.objective_) <= sh.duality_gap_ + ser.duality_gap_ + 1e-9
    assert sh.dual_objective_ <= ser.objective_ + 1e-9
    assert ser.dual_objective_ <= sh.objective_ + 1e-9
    # the certificate is the sum of the block gaps computed on the workers
    assert sh.block_gap_sum_ == pytest.approx(sh.duality_gap_, rel=1e-6, abs=1e-9)


def test_bag_fit_equals_serial_within_gap_and_reruns_are_identical(rng, client):
    X, Y = assignments(rng, 60)
    model = BipartiteMatching()
    kw = dict(C=0.02, tol=1e-3, max_iter=200, random_state=3, client=client)
    sh = ShardedFrankWolfeLearner(model, **kw).fit(_bag(X, Y, 3))
    _within_gap(sh, _serial(model, X, Y, 0.02))
    assert sh.n_partitions_ == 3 and sh.n_examples_ == 60 and sum(sh.partition_sizes_) == 60
    assert sh.bytes_per_round_["sent"] == 3 * 8 * sh.coef_.size
    # the dual never decreases (CoCoA+ adding with sigma' = K)
    duals = [h["dual_objective"] for h in sh.history_]
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(duals, duals[1:]))
    again = ShardedFrankWolfeLearner(model, **kw).fit(_bag(X, Y, 3))
    np.testing.assert_array_equal(sh.coef_, again.coef_)
    assert sh.objective_ == again.objective_ and sh.n_iter_ == again.n_iter_
    # prediction as any learner
    pred = sh.predict(X[:3])
    assert len(pred) == 3
    _saved_loads_in_a_fresh_process(sh, X[:5])


def _saved_loads_in_a_fresh_process(est, X, tmp=None):
    """save here, load and predict in a new interpreter (the client is a runtime parameter:
    neither saved nor needed to predict)."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import structlp
    folder = Path(tempfile.mkdtemp())
    structlp.save(est, folder / "sharded.slp")
    np.save(folder / "X.npy", np.stack(X))
    code = ("import json, sys, numpy as np, structlp\n"
            "m = structlp.load(sys.argv[1])\n"
            "print(json.dumps([y.tolist() for y in m.predict(list(np.load(sys.argv[2])))]))")
    root = Path(structlp.__file__).resolve().parents[1]
    env = dict(__import__("os").environ, PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, "-c", code, str(folder / "sharded.slp"),
                        str(folder / "X.npy")], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for g, y in zip(got, est.predict(X), strict=True):
        np.testing.assert_array_equal(np.asarray(g), y)


def _chain_partition(seed, m, theta):
    """A partition generated on a worker from its own seed (shared planted theta)."""
    from structlp.graphical.trees import chain
    rng = np.random.default_rng(seed)
    model = TreeLabeling(3)
    out = []
    for _ in range(m):
        x = chain(rng.normal(size=(4, 3)), np.ones((3, 1)))
        ex = model.check_x(x)
        s = model.features(ex) @ theta
        out.append((x, model.inference(ex, s + 0.5 * rng.normal(size=s.shape))))
    return out


def test_delayed_partitions_made_on_the_workers(rng, client):
    """Partitions given as dask.delayed generators (seeded per partition); the serial fit
    on the same examples (made here, for the comparison only) certifies the optimum."""
    theta = rng.normal(size=3 * 3 + 3 * 3)
    parts = [dask.delayed(_chain_partition)(100 + k, 15, theta) for k in range(4)]
    sh = ShardedFrankWolfeLearner(TreeLabeling(3), C=0.02, tol=1e-3, max_iter=300,
                                  random_state=0, client=client).fit(parts)
    pairs = [p for k in range(4) for p in _chain_partition(100 + k, 15, theta)]
    X, Y = [p[0] for p in pairs], [p[1] for p in pairs]
    serial = _serial(TreeLabeling(3), X, Y, 0.02)
    _within_gap(sh, serial)
    # chains: each worker runs its passes as one compiled kernel call (the tree blocks);
    # the per-block Python path (pairwise=False: classical steps) certifies the same optimum
    assert sh._compiled_partitions == [True] * 4
    again = ShardedFrankWolfeLearner(TreeLabeling(3), C=0.02, tol=1e-3, max_iter=300,
                                     random_state=0, client=client).fit(parts)
    np.testing.assert_array_equal(sh.coef_, again.coef_)
    classic = ShardedFrankWolfeLearner(TreeLabeling(3), C=0.02, tol=1e-3, max_iter=3000,
                                       random_state=0, pairwise=False, client=client).fit(parts)
    assert classic._compiled_partitions == [False] * 4
    _within_gap(classic, serial)


def test_bad_partitions(rng, client):
    X, Y = assignments(rng, 6)
    model = BipartiteMatching()
    fit = ShardedFrankWolfeLearner(model, client=client, max_iter=2).fit
    with pytest.raises(InvalidInputError, match=r"Item 0 of partition 0 of X must be an "
                                                r"\(x, y\) pair; got ndarray"):
        fit(db.from_sequence(X, npartitions=2))
    with pytest.raises(InvalidInputError, match="length 3"):
        fit(db.from_sequence([(x, y, 0) for x, y in zip(X, Y)], npartitions=2))
    X4, Y4 = assignments(rng, 3, d=4)
    mixed = [dask.delayed(list)(list(zip(X[:3], Y[:3]))),
             dask.delayed(list)(list(zip(X4, Y4)))]
    with pytest.raises(InvalidInputError, match="Partition 1 of X has 4 features per part; "
                                                "partition 0 has 3"):
        fit(mixed)
    empty = [dask.delayed(list)(list(zip(X, Y))), dask.delayed(list)([])]
    with pytest.raises(InvalidInputError, match="Partition 1 of X is empty"):
        fit(empty)
    with pytest.raises(InvalidInputError, match="X must be a dask.bag.Bag"):
        fit(list(zip(X, Y)))
    with pytest.raises(InvalidInputError, match="y must be None"):
        fit(_bag(X, Y, 2), Y)
    with pytest.raises(InvalidParameterError, match="'client' parameter"):
        ShardedFrankWolfeLearner(model, client="tcp://127.0.0.1:1").fit(_bag(X, Y, 2))
    with pytest.raises(InvalidParameterError, match="'random_state' parameter"):
        ShardedFrankWolfeLearner(model, client=client, random_state=1.5).fit(_bag(X, Y, 2))


def test_no_client(rng):
    """Runs with no default client (the module's client is not the default)."""
    try:
        distributed.get_client()
        pytest.skip("a default dask client exists")
    except ValueError:
        pass
    X, Y = assignments(rng, 4)
    with pytest.raises(InvalidParameterError, match="'client' parameter .* is None and no "
                                                    "dask.distributed Client is running"):
        ShardedFrankWolfeLearner(BipartiteMatching()).fit(_bag(X, Y, 2))


@pytest.mark.slow
def test_worker_lost_mid_fit(rng):
    """A worker killed after the second round: its partitions are recomputed from their
    lineage with their blocks at m_i = mu_i, and the fit still certifies the optimum."""
    X, Y = assignments(rng, 80)
    model = BipartiteMatching()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as cl:
        pid = list(cl.run(os.getpid).values())[0]

        def kill(info):
            if info["iteration"] == 2:
                os.kill(pid, signal.SIGKILL)

        sh = ShardedFrankWolfeLearner(model, C=0.1, tol=1e-3, max_iter=300, random_state=0,
                                      client=cl, callback=kill).fit(_bag(X, Y, 4))
    assert sh.n_restarts_ >= 1
    _within_gap(sh, _serial(model, X, Y, 0.1))


def test_frank_wolfe_given_a_bag_names_the_sharded_learner(rng):
    """FrankWolfeLearner.fit(bag) is not 'missing Y': the error names the learner that
    takes bags (and a list of delayed partitions); fit(X) without Y still says Y."""
    X, Y = assignments(rng, 4)
    bag = _bag(X, Y, 2)
    for learner in (FrankWolfeLearner, CuttingPlaneLearner, SubgradientLearner,
                    MaxMarginLearner):
        for data in (bag, bag.to_delayed()):
            with pytest.raises(InvalidInputError,
                               match="ShardedFrankWolfeLearner.*fit\\(bag\\)"):
                learner(BipartiteMatching()).fit(data)
        with pytest.raises(InvalidInputError, match="X is a dask Bag"):
            learner(BipartiteMatching()).fit(bag, Y)
        with pytest.raises(TypeError,
                           match=f"{learner.__name__}.fit\\(\\) missing the outputs Y"):
            learner(BipartiteMatching()).fit(X)
