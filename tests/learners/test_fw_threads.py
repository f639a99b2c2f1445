"""FrankWolfeLearner(n_jobs=K) on chains and trees: the compiled epochs on K threads
(CoCoA+ rounds over K partitions of the blocks), certified and deterministic."""

import itertools
import threading
import time

import numpy as np
import pytest

from structlp.learners.frank_wolfe import FrankWolfeLearner


def tree_data(seed, m=12, n=4, k=3, tree="chain"):
    from structlp.datasets import make_tree_labeling
    X, Y, _, model = make_tree_labeling(n_samples=m, n_nodes=n, n_labels=k, tree=tree,
                                        n_node_features=3, n_edge_features=2, noise=0.5,
                                        random_state=seed)
    return X, Y, model


def explicit(model, X, Y, k, n):
    """Per example: the explicit part features, the encoded truth, the loss ``(c, d)`` and
    every labelling's encoding (brute force)."""
    from structlp.compiler import prepare
    out = []
    for x, y in zip(prepare(model, X, Y, need_polytopes=False, operators=True).X, Y):
        Phi = model.features(x)
        y = np.asarray(y)
        c, d = model.loss_coefficients(x, y)
        outs = np.array([model.encode(x, np.array(z))
                         for z in itertools.product(range(k), repeat=n)])
        out.append((Phi, model.encode(x, y), c, d, outs))
    return out


def brute_objective(ex, w, C):
    """``F(w)`` with every hinge by enumerating all labellings."""
    hinge = 0.0
    for Phi, mu, c, d, outs in ex:
        s = Phi @ w
        hinge += np.max(outs @ (s + c)) + d - s @ mu
    return 0.5 * w @ w + C * hinge


def brute_dual(ex, blocks, C):
    """``D(m) = C sum_i (d_i + c_i . m_i) - |w(m)|^2 / 2``, ``w(m) = C sum_i Phi_i^T (mu_i -
    m_i)``, from the blocks' marginals and the explicit features."""
    w = 0.0
    lin = 0.0
    for i, (Phi, mu, c, d, _) in enumerate(ex):
        m_i = blocks.marginal(i, Phi.shape[0])
        w = w + C * Phi.T @ (mu - m_i)
        lin += C * (d + c @ m_i)
    return lin - 0.5 * w @ w, w


@pytest.mark.parametrize("tree", ["chain", "random"])
def test_two_threads_certify_the_optimum_of_one(tree):
    """n_jobs=2 and n_jobs=1: both certified, by their own gap and by a brute-force
    objective and dual from the blocks; each one's certified lower bound below the other's
    objective, so both objectives are within the tolerance of the optimum."""
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    from structlp.learners._fw_tree_store import _TreeBlocks
    k, n, C, tol = 3, 4, 1.0, 1e-6
    X, Y, model = tree_data(1, m=24, n=n, k=k, tree=tree)
    ex = explicit(model, X, Y, k, n)
    fits = {}
    for n_jobs in (1, 2):
        fw = FrankWolfeLearner(model, C=C, tol=tol, max_iter=5000, random_state=0,
                               n_jobs=n_jobs).fit(X, Y)
        blocks = fw._warm[1]
        assert isinstance(blocks, _ThreadedTreeBlocks if n_jobs == 2 else _TreeBlocks)
        assert fw.converged_ and fw.duality_gap_ <= tol * fw.objective_
        F = brute_objective(ex, fw.coef_, C)
        D, w_blocks = brute_dual(ex, blocks, C)
        np.testing.assert_allclose(fw.coef_, w_blocks, atol=1e-10)
        assert F == pytest.approx(fw.objective_, rel=1e-10)
        assert D == pytest.approx(fw.dual_objective_, rel=1e-10)
        assert F - D <= tol * F
        fits[n_jobs] = (F, D)
    (F1, D1), (F2, D2) = fits[1], fits[2]
    assert D1 <= F2 + 1e-9 and D2 <= F1 + 1e-9
    assert abs(F1 - F2) <= tol * F1


def test_two_threads_rerun_identical():
    """The partition, the epochs' orders and the order of the additions depend on
    random_state and n_jobs only: reruns give the same iterates, bit for bit."""
    X, Y, model = tree_data(2, m=80, n=5, k=3)
    runs = [FrankWolfeLearner(model, C=1.0, tol=1e-5, max_iter=2000, random_state=3,
                              n_jobs=2).fit(X, Y) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].coef_, runs[1].coef_)
    assert runs[0].n_iter_ == runs[1].n_iter_
    assert runs[0].objective_ == runs[1].objective_
    assert [h["gap_estimate"] for h in runs[0].history_] == \
        [h["gap_estimate"] for h in runs[1].history_]


def test_threaded_rounds_keep_w_equal_to_the_blocks():
    """After threaded epochs (CoCoA+ adding with the rounds' sigma') and passes without
    oracle, the running w is C sum_i Phi_i^T (mu_i - m_i) of the blocks and ell the dual's
    linear part: the combination is exact, not an approximation."""
    from structlp.compiler import prepare
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    k, n, C = 3, 4, 2.0
    X, Y, model = tree_data(4, m=40, n=n, k=k, tree="random")
    ex = explicit(model, X, Y, k, n)
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    blocks = _ThreadedTreeBlocks(model, data, 2, np.random.default_rng(0))
    blocks.round_blocks = 4                      # several rounds per epoch
    w, ell = blocks.primal(None, None, data.d, C, None)
    g = np.zeros(len(X))
    r = np.random.default_rng(1)
    sigmas = set()
    for _ in range(5):
        ell = blocks.epoch(r.permutation(len(X)).astype(np.int64), w, C, 3, ell, g)
        sigmas.add(blocks.sigma)
        ell = blocks.cache_pass(w, C, ell)
        D, w_blocks = brute_dual(ex, blocks, C)
        np.testing.assert_allclose(w, w_blocks, atol=1e-10)
        assert ell - 0.5 * w @ w == pytest.approx(D, abs=1e-9)
        for i in range(len(X)):
            a = blocks.weights(i)
            assert np.all(a >= 0) and a.sum() == pytest.approx(1.0, abs=1e-12)
    assert len(sigmas) > 1 or sigmas != {2.0}    # the rounds' sigma' was measured


def test_threaded_pass_takes_the_steps_asked():
    """``cache_pass(steps=0)`` moves nothing (no pairwise step in any block); with the
    stores' default steps the same pass moves ``w``: the argument reaches the kernels."""
    from structlp.compiler import prepare
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    X, Y, model = tree_data(4, m=40, n=4, k=3, tree="random")
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    blocks = _ThreadedTreeBlocks(model, data, 2, np.random.default_rng(0))
    w, ell = blocks.primal(None, None, data.d, 2.0, None)
    g = np.zeros(len(X))
    r = np.random.default_rng(1)
    for _ in range(3):
        ell = blocks.epoch(r.permutation(len(X)).astype(np.int64), w, 2.0, 3, ell, g)
    before = w.copy()
    assert blocks.cache_pass(w, 2.0, ell, steps=0) == ell
    np.testing.assert_array_equal(w, before)
    blocks.cache_pass(w, 2.0, ell)
    assert not np.array_equal(w, before)


def test_partitions_balanced_and_disjoint():
    from structlp.learners._fw_threads import split
    sizes = np.random.default_rng(0).integers(1, 20, size=101)
    for K in (2, 3, 7):
        parts = split(sizes, K, np.random.default_rng(5))
        assert len(parts) == K and all(len(p) for p in parts)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(101))
        loads = [sizes[p].sum() for p in parts]
        assert max(loads) - min(loads) <= 2 * sizes.max()
    a = split(sizes, 2, np.random.default_rng(5))
    b = split(sizes, 2, np.random.default_rng(5))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert len(split(np.ones(2), 2, np.random.default_rng(0))[0]) == 1


def test_threaded_warm_start_and_kind_change():
    """A warm refit with the same n_jobs continues from the threads' blocks; another n_jobs
    starts afresh (the stores differ) and still certifies."""
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    X, Y, model = tree_data(5, m=30, n=4, k=3)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-6, max_iter=3000, random_state=0, n_jobs=2,
                           warm_start=True).fit(X, Y)
    first = fw.n_iter_
    fw.fit(X, Y)
    assert isinstance(fw._warm[1], _ThreadedTreeBlocks) and fw.n_iter_ < first
    fw.set_params(n_jobs=1).fit(X, Y)
    assert not isinstance(fw._warm[1], _ThreadedTreeBlocks) and fw.converged_


def test_tree_kernels_release_the_gil():
    """The kernels the threads run are compiled with nogil (numba's JIT) or built ahead of
    time with the GIL released."""
    from structlp import compiled
    from structlp.learners import _fw_trees
    kernels = _fw_trees._kernels()
    if compiled.status() == "ahead of time":
        pytest.skip("kernels built ahead of time (the build releases the GIL)")
    for name in ("_tree_epoch", "_tree_cache_passes", "_tree_check", "_tree_primal"):
        assert kernels[name].targetoptions.get("nogil") is True, name
    from structlp.learners import _fw_rounds
    rounds = _fw_rounds._kernels()
    assert rounds["together"] is True
    for name in ("_tree_rounds", "_tree_pass_rounds", "_combine"):
        assert rounds[name].targetoptions.get("nogil") is True, name


def _fit_blocks(model, X, Y, C, epochs, round_blocks, seed=0, passes=20):
    """Threaded blocks after ``epochs`` epochs, each followed by up to ``passes`` passes
    without oracle: ``(w, ell, g, blocks)``."""
    from structlp.compiler import prepare
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    blocks = _ThreadedTreeBlocks(model, data, 2, np.random.default_rng(seed))
    blocks.round_blocks = round_blocks
    w, ell = blocks.primal(None, None, data.d, C, None)
    g = np.zeros(len(X))
    r = np.random.default_rng(seed + 1)
    dual = ell - 0.5 * w @ w
    for _ in range(epochs):
        ell = blocks.epoch(r.permutation(len(X)).astype(np.int64), w, C, 3, ell, g)
        now = ell - 0.5 * w @ w
        ell, dual = blocks.run_passes(w, C, ell, now, now - dual, passes,
                                      r.permutation(len(X)).astype(np.int64))
    return w, ell, g, blocks


@pytest.mark.parametrize("tree", ["chain", "random"])
def test_threads_equal_one_thread_running_the_rounds_in_turn(tree, monkeypatch):
    """The threads meet inside the compiled code; run one partition after the other in
    one thread (the same compiled kernels, not ``together``), the rounds give the same
    iterates bit for bit, blocks that outgrew their slots included.  The Python kernels
    (numba off) agree to rounding over epochs (with passes, whose choices between active
    outputs of equal value the compiled sums' rounding decides, the paths part: both stay
    exact, as the other tests check)."""
    from structlp.learners import _fw_rounds, _fw_trees
    X, Y, model = tree_data(8, m=60, n=6, k=4, tree=tree)
    C = 5.0
    w2, ell2, g2, b2 = _fit_blocks(model, X, Y, C, 6, 3)
    assert max(int(s.cap.max()) for s in b2.stores) > 4        # some block outgrew 4 slots
    assert sum(s.n_passes for s in b2.stores) > 12             # passes beyond the first
    compiled = dict(_fw_rounds._kernels(), together=False)
    monkeypatch.setitem(_fw_rounds._CACHE, "numba", compiled)
    w1, ell1, g1, b1 = _fit_blocks(model, X, Y, C, 6, 3)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(g1, g2)
    assert ell1 == ell2 and b1.sigma == b2.sigma
    for s1, s2 in zip(b1.stores, b2.stores):
        np.testing.assert_array_equal(s1.ns, s2.ns)
        np.testing.assert_array_equal(s1.alpha, s2.alpha)
    w3, ell3, _, b3 = _fit_blocks(model, X, Y, C, 6, 3, passes=0)
    assert max(int(s.cap.max()) for s in b3.stores) > 4
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", False)
    w0, ell0, _, _ = _fit_blocks(model, X, Y, C, 6, 3, passes=0)
    np.testing.assert_allclose(w0, w3, rtol=1e-9, atol=1e-12)
    assert ell0 == pytest.approx(ell3, rel=1e-12)


def test_a_thread_that_fails_releases_the_others(monkeypatch):
    """A thread that raises before it reaches the compiled rounds sets the abort flag: the
    others stop waiting for it and the error reaches the caller (no hang)."""
    from structlp.learners import _fw_rounds
    X, Y, model = tree_data(9, m=20, n=4, k=3)
    kernels = _fw_rounds._kernels()
    if not kernels["together"]:
        pytest.skip("numba absent: the rounds run in one thread")
    real = kernels["_tree_rounds"]

    def failing(p, *args):
        if p == 1:
            raise MemoryError("thread 1")
        return real(p, *args)

    monkeypatch.setitem(_fw_rounds._CACHE, "numba", dict(kernels, _tree_rounds=failing))
    caught = []

    def fit():
        try:
            FrankWolfeLearner(model, C=1.0, tol=1e-6, random_state=0, n_jobs=2).fit(X, Y)
        except MemoryError as exc:
            caught.append(exc)

    t = threading.Thread(target=fit, daemon=True)
    t.start()
    t.join(120)           # not a timing: a thread left waiting would never end
    assert not t.is_alive(), "thread 0 kept waiting for the thread that failed"
    assert caught and "thread 1" in str(caught[0])


@pytest.mark.slow
def test_tree_epoch_overlaps_python_in_another_thread():
    """While a compiled epoch runs in one thread, this thread runs Python and sees the
    epoch's output half written: ``g_est[i]`` (NaN before) is written block by block inside
    the one kernel call (from a fresh store no block outgrows its slots: one call), so a
    kernel holding the GIL could only be seen before or after the whole call.  Not a
    timing: what this thread observed."""
    from structlp.compiler import prepare
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y, model = tree_data(6, m=4000, n=10, k=8)
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    m = len(X)
    perm = np.arange(m, dtype=np.int64)
    seen = []
    for _ in range(3):
        blocks = _TreeBlocks(model, data)
        w, ell = blocks.primal(None, None, data.d, 1.0, None)
        blocks.epoch(perm[:0], w, 1.0, 3, ell, np.zeros(m))      # compiled before
        g = np.full(m, np.nan)
        t = threading.Thread(target=blocks.epoch, args=(perm, w, 1.0, 3, ell, g))
        t.start()
        while t.is_alive():
            left = int(np.isnan(g).sum())
            if 0 < left < m:
                seen.append(left)
            time.sleep(0)
        t.join()
        assert not np.isnan(g).any()
        if seen:
            break
    assert seen, "the epoch kernel held the GIL: this thread never ran during the call"


def test_more_threads_than_examples():
    """n_jobs above the number of examples: as many threads as examples (one: serial)."""
    from structlp.learners._fw_threads import _ThreadedTreeBlocks
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y, model = tree_data(7, m=3, n=3, k=2)
    for m, kind in ((1, _TreeBlocks), (3, _ThreadedTreeBlocks)):
        fw = FrankWolfeLearner(model, C=1.0, tol=1e-8, max_iter=3000, random_state=0,
                               n_jobs=8).fit(X[:m], Y[:m])
        assert type(fw._warm[1]) is kind and fw.converged_
        assert fw.duality_gap_ <= 1e-8 * fw.objective_
    assert fw._warm[1].K == 3
