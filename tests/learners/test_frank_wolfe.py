"""FrankWolfeLearner: the objective of MaxMarginLearner, certified by the duality gap."""

import importlib.util
import itertools
import logging
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from oracles import brute_force_hinge, enumerate_bmatchings, enumerate_spanning_trees
from structlp import (DeclarationError, InvalidInputError, InvalidParameterError,
                      MaxMarginLearner, NotFittedError)
from structlp.graphical.trees import chain
from structlp.learners.cutting_plane import ConvergenceWarning, CuttingPlaneLearner
from structlp.learners.frank_wolfe import FrankWolfeLearner
from structlp.model import StructuredModel
from structlp.part_features import PartFeatures
from structlp.structures import BipartiteMatching, SpanningTree, TreeLabeling


# ---------------------------------------------------------------- data
def assignments(rng, m, n=4, d=3, noise=0.3):
    """Planted assignments: y = Hungarian(x @ w0 + noise)."""
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    Y = [BipartiteMatching().inference(x, (x @ w0).ravel() + noise * rng.normal(size=n * n))
         for x in X]
    return X, Y


def trees(rng, m, n=5, d=3, noise=0.5):
    """Planted maximum spanning trees of complete graphs with symmetric edge features."""
    model = SpanningTree()
    w0 = rng.normal(size=d)
    X = []
    for _ in range(m):
        x = rng.normal(size=(n, n, d))
        X.append((x + x.transpose(1, 0, 2)) / 2)
    Y = []
    for x in X:
        s = model.features(model.check_x(x)) @ w0
        Y.append(model.inference(x, s + noise * rng.normal(size=s.shape)))
    return X, Y


def chains(rng, m, n=4, k=3, d_v=3, noise=0.5):
    """Planted chain labellings: y = max-sum(theta . features + noise)."""
    model = TreeLabeling(k)
    X = [chain(rng.normal(size=(n, d_v)), np.ones((n - 1, 1))) for _ in range(m)]
    theta = rng.normal(size=k * d_v + k * k)
    Y = []
    for x in X:
        ex = model.check_x(x)
        s = model.features(ex) @ theta
        Y.append(model.inference(ex, s + noise * rng.normal(size=s.shape)))
    return X, Y


class SparseBipartite(BipartiteMatching):
    """BipartiteMatching whose part features come as a scipy.sparse CSR matrix."""

    def features(self, x):
        return sp.csr_array(x.reshape(-1, x.shape[2]))


def fit_quiet(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, Y)


def check_certified(fw, optimum, atol=1e-7):
    """optimum <= objective_ <= optimum + duality_gap_, and |w - w*| <= sqrt(2 gap)."""
    assert fw.objective_ >= optimum - atol * max(1.0, abs(optimum))
    assert fw.objective_ - optimum <= fw.duality_gap_ + atol * max(1.0, abs(optimum))
    assert fw.dual_objective_ <= optimum + atol * max(1.0, abs(optimum))


# ---------------------------------------------------------------- same objective
def test_bipartite_same_objective_as_qp(rng):
    X, Y = assignments(rng, 12)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    fw = FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-5, max_iter=3000,
                           random_state=0).fit(X, Y)
    assert fw.converged_
    assert fw.duality_gap_ <= 1e-5 * fw.objective_
    check_certified(fw, qp.objective_)
    # 1-strong convexity: |w - w*|^2 / 2 <= F(w) - F(w*) <= gap
    assert np.linalg.norm(fw.coef_ - qp.coef_) <= np.sqrt(2 * fw.duality_gap_) + 1e-4
    np.testing.assert_allclose(fw.objective_, 0.5 * fw.coef_ @ fw.coef_ + fw.slack_.sum())


def test_slack_is_enumerated_hinge(rng):
    """slack_ and objective_ against brute force over all 24 assignments of 4 x 4."""
    X, Y = assignments(rng, 6)
    fw = FrankWolfeLearner(BipartiteMatching(), C=2.0, tol=1e-3, random_state=1).fit(X, Y)
    outputs = [np.eye(4, dtype=int)[list(p)] for p in itertools.permutations(range(4))]
    enum = [brute_force_hinge(x, y, fw.coef_, outputs,
                              lambda o, y=y: float(4 - np.sum(o * y))) for x, y in zip(X, Y)]
    np.testing.assert_allclose(fw.slack_, enum, atol=1e-10)
    np.testing.assert_allclose(fw.objective_, 0.5 * fw.coef_ @ fw.coef_ + 2.0 * np.sum(enum))
    np.testing.assert_allclose(fw.hinge_losses(X, Y), enum, atol=1e-10)


def test_spanning_tree_same_objective_as_cutting_plane_and_enumeration(rng):
    """Noisy trees: the exact max-margin optimum comes from the cutting plane (the
    certificate QP's slack is not the hinge); hinge losses from enumerating trees."""
    X, Y = trees(rng, 8, n=5)
    cpl = CuttingPlaneLearner(SpanningTree(), C=1.0, tol=1e-7).fit(X, Y)
    fw = FrankWolfeLearner(SpanningTree(), C=1.0, tol=1e-5, max_iter=3000,
                           random_state=0).fit(X, Y)
    assert fw.converged_ and cpl.slack_.max() > 0.1
    check_certified(fw, cpl.objective_, atol=1e-6)
    g = SpanningTree().check_x(X[0])
    outputs = [g.to_adjacency(t) for t in enumerate_spanning_trees(5, g.u, g.v)]
    for x, y, h in zip(X, Y, fw.slack_):
        F = np.zeros_like(x)
        F[g.u, g.v] = x[g.u, g.v]   # each edge once
        want = brute_force_hinge(F, y, fw.coef_, outputs,
                                 lambda o, x=x, y=y: SpanningTree().task_loss(x, y, o))
        assert h == pytest.approx(want, abs=1e-10)


def test_spanning_tree_same_objective_as_certificate_qp(rng):
    """Separable trees and a C at which the certificate QP's slacks vanish: there the
    certificate QP is the exact max-margin QP."""
    X, Y = trees(rng, 6, n=4, d=6, noise=0.0)
    qp = MaxMarginLearner(SpanningTree(), C=100.0, formulation="certificate").fit(X, Y)
    assert qp.slack_.max() < 1e-6
    fw = FrankWolfeLearner(SpanningTree(), C=100.0, tol=1e-4, max_iter=5000,
                           random_state=0).fit(X, Y)
    assert fw.converged_
    check_certified(fw, qp.objective_, atol=1e-6)


def test_chain_same_objective_as_qp(rng):
    X, Y = chains(rng, 8)
    model = TreeLabeling(3)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-5, max_iter=3000, random_state=0).fit(X, Y)
    assert fw.converged_
    check_certified(fw, qp.objective_)
    assert fw.predict(X)[0].shape == (4,)


def test_lp_oracle_when_no_fast_path(rng):
    """R = P = 2 has no combinatorial oracle: the inference LP (stacked per batch)."""
    w0 = rng.normal(size=3)
    X = [rng.normal(size=(4, 3, 3)) for _ in range(6)]
    outs = enumerate_bmatchings(4, 3, 2, 2)
    Y = [outs[int(np.argmax([np.sum((x @ w0 + rng.normal(size=(4, 3))) * o) for o in outs]))]
         for x in X]
    model = BipartiteMatching(R=2, P=2)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-3, max_iter=500, batch_size=5,
                           random_state=0).fit(X, Y)
    check_certified(fw, qp.objective_, atol=1e-6)


class CostlyMatching(BipartiteMatching):
    """The same model, declaring its decoder as costly as an LP."""
    costly_inference = True


def test_costly_inference_keeps_joint_features_and_the_same_optimum(rng):
    """d = 600 features beside 4 nonzeros per output: active outputs are kept by their
    nonzeros only (Gram blocks), unless the model declares a costly decoder (or has none):
    then also by their joint features, with passes without oracle calls.  Both certify
    the joint QP's optimum."""
    from structlp.learners._fw_blocks import _GramBlocks, _PsiBlocks
    from structlp.learners.frank_wolfe import new_blocks
    w0 = rng.normal(size=600)
    X = [rng.normal(size=(4, 4, 600)) / 20 for _ in range(12)]
    Y = [BipartiteMatching().inference(x, (x @ w0 + rng.normal(size=(4, 4))).ravel())
         for x in X]
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    two = enumerate_bmatchings(4, 4, 2, 2)[0]     # an output of the model without decoder
    calls = {}
    for model, kind in ((BipartiteMatching(), _GramBlocks), (CostlyMatching(), _PsiBlocks),
                        (BipartiteMatching(R=2, P=2), _PsiBlocks)):
        fw = FrankWolfeLearner(model, C=1.0, tol=1e-6, random_state=0)
        data, _ = fw._prepare(X, Y if model.R == 1 else [two] * len(X))
        assert isinstance(new_blocks(model, data, False)[0], kind)
        if model.R == 1:
            fw.fit(X, Y)
            check_certified(fw, qp.objective_, atol=1e-6)
            calls[kind] = fw.n_oracle_calls_
    # the passes without oracle replace oracle calls
    assert calls[_PsiBlocks] < calls[_GramBlocks]


# ---------------------------------------------------------------- the gap is a bound
@pytest.mark.parametrize("max_iter", [1, 2, 5, 20])
def test_duality_gap_bounds_suboptimality_early(rng, max_iter):
    X, Y = assignments(rng, 10, noise=0.5)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    for pairwise in (True, False):
        fw = fit_quiet(FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-12,
                                         max_iter=max_iter, pairwise=pairwise,
                                         random_state=3), X, Y)
        assert not fw.converged_
        check_certified(fw, qp.objective_)
        if max_iter <= 5:     # really suboptimal, the bound is not void (20 epochs reach
            assert fw.objective_ - qp.objective_ > 0     # the QP's accuracy, 1e-10)


@pytest.mark.parametrize("layout", ["span", "spread", "empty"])
def test_compact_loss_adds_exactly(rng, layout):
    """The loss vector held by its nonzeros (a slice over their span, or their indices)
    gives exactly the dense ``s + c``, and ``c . mu`` of a 0/1 vector."""
    from structlp.learners._first_order import _augment
    from structlp.learners._fw_blocks import _compact_loss
    L = 300
    c = np.zeros(L)
    if layout == "span":                        # e.g. node losses: zeros at the truth only
        c[40:120] = rng.uniform(0.5, 2.0, size=80)
        c[rng.choice(np.arange(40, 120), size=10, replace=False)] = 0.0
    elif layout == "spread":
        c[rng.choice(L, size=12, replace=False)] = rng.normal(size=12)
    idx = np.flatnonzero(c)
    cz = _compact_loss(idx, c[idx])
    assert isinstance(cz[0], slice) == (layout == "span")
    s = rng.normal(size=L)
    assert np.array_equal(_augment(s.copy(), cz), s + c)
    mu = (rng.uniform(size=L) < 0.3).astype(float)
    assert float(cz[1].dot(mu[cz[0]])) == pytest.approx(float(c @ mu), rel=1e-14, abs=1e-14)


def block_store(psi_mode, ops, truths, c):
    """The learner's block store: the psi pool, or one Gram block per example."""
    from structlp.compiler import SparseVectors
    from structlp.learners._fw_blocks import _GramBlocks, _PsiBlocks
    mt = SparseVectors(truths)
    return (_PsiBlocks(ops, mt, c) if psi_mode else _GramBlocks(mt, c)), mt


@pytest.mark.parametrize("psi_mode", [True, False])
@pytest.mark.parametrize("pairwise, inner_steps", [(True, 0), (True, 3), (False, 0)])
def test_block_step_bookkeeping(rng, pairwise, inner_steps, psi_mode):
    """A block step moves w by C Phi^T (m_before - m_after), returns the exact change of
    c . m, keeps the weights on the simplex, and never lowers the dual objective; the
    active outputs are stored compactly (nonzeros, and psi = Phi^T v in psi mode), and
    without psi the block's Gram matrix is that of its active outputs."""
    from structlp.part_features import MatrixFeatures
    n, d, C = 4, 3, 0.7
    L = n * n
    P = rng.normal(size=(L, d))
    op = MatrixFeatures(P)
    c = rng.normal(size=L)
    cz = (np.flatnonzero(c), c[c != 0])          # the learner holds c by its nonzeros
    perms = [np.eye(n)[list(p)].ravel() for p in itertools.permutations(range(n))]
    blocks, mt = block_store(psi_mode, [op], [perms[0]], [cz])
    w = rng.normal(size=d)
    for _ in range(30):
        m_before, loss_before, w_before = blocks.marginal(0, L), blocks.loss(0), w.copy()
        a = P @ w + c
        mu = max(perms, key=lambda v: a @ v)                    # the exact oracle
        g, dl = blocks.step(0, mu, a.copy(), w, op, cz, C, pairwise, inner_steps)
        assert g == pytest.approx(C * a @ (mu - m_before), abs=1e-12)
        m_after = blocks.marginal(0, L)
        np.testing.assert_allclose(w - w_before, C * P.T @ (m_before - m_after), atol=1e-12)
        assert dl == pytest.approx(blocks.loss(0) - loss_before, abs=1e-12)
        assert blocks.loss(0) == pytest.approx(c @ m_after, abs=1e-12)
        assert blocks.value(0, a, w_before) == pytest.approx(a @ m_after, abs=1e-12)
        if psi_mode:
            r = blocks.active(0)
            alpha = blocks.alpha[r]
            # compact storage: n nonzeros per output, no (L,) rows; psi = Phi^T v
            assert blocks.idx.shape[1] == n and np.all(blocks.nnz[r] == n)
            for row in r:
                v = np.zeros(L)
                v[blocks.idx[row]] = blocks.val[row]
                np.testing.assert_allclose(blocks.psi[row], P.T @ v, atol=1e-12)
            # the free rows and the active ones partition the pool
            free = blocks.free[:blocks.nfree[0]]
            assert sorted(np.concatenate([free, r])) == list(range(len(blocks.alpha)))
        else:
            blk = blocks.blocks[0]
            alpha = blk.alpha[:blk.n]
            assert blk.idx.shape[1] == n and blk.val.shape[1] == n
            if pairwise:      # the Gram matrix of the active outputs (drops, swaps)
                V = np.zeros((blk.n, L))
                for j in range(blk.n):
                    V[j, blk.idx[j]] = blk.val[j]
                assert blk.ng == blk.n
                np.testing.assert_allclose(blk.G[:blk.n, :blk.n], V @ P @ (V @ P).T,
                                           rtol=1e-12, atol=1e-10)
        assert np.all(alpha > 0) and alpha.sum() == pytest.approx(1.0)
        # the dual restricted to this block, C c.m - |w|^2 / 2, does not decrease
        assert C * dl - 0.5 * (w @ w - w_before @ w_before) >= -1e-12
        w += rng.normal(scale=0.3, size=d)          # the other blocks move w meanwhile
    # w from the block variables: C Phi^T (mu_true - m)
    w_blocks, ell = blocks.primal([op], mt, [0.5], C, d)
    np.testing.assert_allclose(w_blocks, C * P.T @ (perms[0] - blocks.marginal(0, L)),
                               atol=1e-12)
    assert ell == pytest.approx(C * (0.5 + c @ blocks.marginal(0, L)), abs=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_pairwise_kernel_numba_equals_python_exactly(rng):
    """The compiled pairwise-step kernel gives bit-identical weights, values and loss
    changes to the plain Python function (the fallback without numba)."""
    from structlp.learners import _fw_kernels as fw
    compiled = fw._kernel()
    assert compiled is not fw._pairwise_steps
    for trial in range(200):
        n = int(rng.integers(1, 7))
        Psi = rng.normal(size=(n, 3))
        if trial % 5 == 0 and n > 1:
            Psi[1] = Psi[0]                 # a zero direction: den = 0
        G = Psi @ Psi.T
        alpha = rng.dirichlet(np.ones(n))
        if trial % 4 == 0:
            alpha[rng.integers(n)] = 0.0     # an output of weight 0 (just added)
        act = rng.normal(size=n)
        if trial % 7 == 0:
            act[:] = act[0]                  # ties
        lv = rng.normal(size=n)
        j = int(rng.integers(-1, n))
        C = float(rng.uniform(0.01, 3.0))
        k = int(rng.integers(0, 5))
        g_min = float(rng.uniform(0, 0.1))
        ra, rb = (alpha.copy(), act.copy()), (alpha.copy(), act.copy())
        out_a = fw._pairwise_steps(rb[1], G, rb[0], lv, n, j, C, k, g_min)
        out_b = compiled(ra[1], G, ra[0], lv, n, j, C, k, g_min)
        assert out_a[1] == out_b[1] and out_a[0] == out_b[0]
        np.testing.assert_array_equal(ra[0], rb[0])
        np.testing.assert_array_equal(ra[1], rb[1])
        # the weights stay on the simplex
        assert ra[0].sum() == pytest.approx(alpha.sum()) and np.all(ra[0] >= -1e-15)


def python_kernels(monkeypatch):
    """Make the learner use the plain Python kernels (the path without numba)."""
    from structlp.learners import _fw_kernels as fw
    monkeypatch.setattr(fw, "_compiled", lambda fn: fn)


def same_fit(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.n_iter_ == b.n_iter_ and a.objective_ == b.objective_
    assert a.dual_objective_ == b.dual_objective_
    assert [h["gap_estimate"] for h in a.history_] == [h["gap_estimate"] for h in b.history_]


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
@pytest.mark.parametrize("case", ["pairwise", "classical", "ties", "batch", "growth"])
def test_psi_kernels_numba_equal_python_exactly(rng, monkeypatch, case):
    """In psi mode a block step (pairwise or classical, with its inner steps) and a pass
    without oracle are compiled kernels; the plain Python kernels give bit-identical
    fits: coefficients, epochs, objectives, gap estimates.  "ties": integer features and
    no noise, so that outputs tie in the oracle and in the pairwise choices; "growth":
    large active sets (the block slots and the row pool grow)."""
    m, n, kw = 20, 4, dict(C=1.0)
    if case == "ties":
        w0 = rng.integers(-1, 2, size=3).astype(float)
        X = [rng.integers(-1, 2, size=(n, n, 3)).astype(float) for _ in range(m)]
        Y = [BipartiteMatching().inference(x, (x @ w0).ravel()) for x in X]
    else:
        X, Y = assignments(rng, 6 if case == "growth" else m, n=5 if case == "growth" else n,
                           noise=2.0 if case == "growth" else 0.3)
    kw.update({"classical": dict(pairwise=False), "batch": dict(batch_size=4),
               "growth": dict(C=30.0, inner_steps=5)}.get(case, {}))
    est = FrankWolfeLearner(BipartiteMatching(), tol=1e-10, max_iter=25, random_state=1, **kw)
    compiled = fit_quiet(est, X, Y)
    ref_coef, store = compiled.coef_.copy(), compiled._warm[1]
    if case == "growth":
        assert store.rows.shape[1] > 4 and len(store.alpha) > 2 * len(X) + 1
    python_kernels(monkeypatch)
    plain = fit_quiet(FrankWolfeLearner(BipartiteMatching(), tol=1e-10, max_iter=25,
                                        random_state=1, **kw), X, Y)
    same_fit(compiled, plain)
    np.testing.assert_array_equal(plain.coef_, ref_coef)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
def test_psi_step_kernel_equals_python_on_random_outputs(rng):
    """The compiled psi step on random 0/1 vectors (repeats among them, more nonzeros than
    the truth: rows widen; many outputs: slots and rows grow) leaves the pool arrays,
    gaps and loss changes bit-identical to the Python kernel."""
    from structlp.learners import _fw_kernels as fw
    from structlp.part_features import MatrixFeatures
    L, d = 12, 4
    op = MatrixFeatures(rng.normal(size=(L, d)))
    c = rng.normal(size=L)
    cz = (np.flatnonzero(c), c[c != 0])
    truth = (rng.uniform(size=L) < 0.2).astype(float)
    outputs = [(rng.uniform(size=L) < p).astype(float) for p in rng.uniform(0.1, 0.6, 15)]
    outputs.append(np.zeros(L))                                 # no nonzeros at all
    stores = [block_store(True, [op], [truth], [cz])[0] for _ in range(2)]
    stores[1]._step = fw._psi_step                              # plain Python
    assert stores[0]._step is not fw._psi_step
    ws = [rng.normal(size=d)] * 2
    ws = [w.copy() for w in ws]
    for t in range(120):
        mu = outputs[int(rng.integers(len(outputs)))]
        pairwise = t % 5 != 0
        res = [s.step(0, mu, None, w, op, cz, 0.8, pairwise, int(t % 4))
               for s, w in zip(stores, ws)]
        assert res[0] == res[1]
        np.testing.assert_array_equal(ws[0], ws[1])
        for name in ("rows", "n", "psi", "idx", "val", "nnz", "alpha", "lv", "free", "nfree"):
            np.testing.assert_array_equal(getattr(stores[0], name), getattr(stores[1], name))
        if t % 3 == 0:
            ws[0] += 0.1
            ws[1] += 0.1
        if t % 7 == 0:     # a pass without oracle
            ells = [s.cache_pass(w, 0.8, 1.0) for s, w in zip(stores, ws)]
            assert ells[0] == ells[1]
    assert stores[0].idx.shape[1] > np.count_nonzero(truth)
    assert stores[0].rows.shape[1] > 4


def test_without_numba_the_python_kernels_give_the_same_fit(rng, monkeypatch, no_aot):
    """numba missing: no ImportError, the plain Python kernels run, with the same fit."""
    import sys
    from structlp.learners import _fw_kernels as fw
    X, Y = assignments(rng, 10)
    ref = fit_quiet(FrankWolfeLearner(BipartiteMatching(), tol=1e-8, max_iter=10,
                                      random_state=0), X, Y)
    monkeypatch.setitem(sys.modules, "numba", None)      # import numba fails
    monkeypatch.setattr(fw, "_COMPILED", {})
    plain = fit_quiet(FrankWolfeLearner(BipartiteMatching(), tol=1e-8, max_iter=10,
                                        random_state=0), X, Y)
    assert fw._COMPILED["_psi_step"] is fw._psi_step
    same_fit(ref, plain)


def test_max_iter_warns(rng):
    X, Y = assignments(rng, 6)
    with pytest.warns(ConvergenceWarning, match="max_iter=1 epochs"):
        fw = FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=1).fit(X, Y)
    assert fw.n_iter_ == 1 and not fw.converged_


def test_check_every_and_history(rng):
    X, Y = assignments(rng, 8)
    fw = fit_quiet(FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=6,
                                     check_every=2, random_state=0), X, Y)
    checked = [h for h in fw.history_ if "duality_gap" in h]
    assert [h["epoch"] for h in checked] == [2, 4, 6]
    assert all(h["duality_gap"] >= 0 for h in checked)
    assert fw.n_oracle_calls_ == 6 * 8 + 3 * 8
    duals = [h["dual_objective"] for h in checked]
    assert all(b >= a - 1e-9 for a, b in zip(duals, duals[1:]))   # dual ascent


def test_batch_size_and_standard_steps_reach_the_same_objective(rng):
    X, Y = assignments(rng, 10)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    for kw in (dict(batch_size=4), dict(pairwise=False), dict(inner_steps=0),
               dict(sampling="uniform"), dict(sampling="uniform", batch_size=3)):
        fw = fit_quiet(FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-4, max_iter=3000,
                                         random_state=0, **kw), X, Y)
        check_certified(fw, qp.objective_)
        assert fw.objective_ <= qp.objective_ * (1 + 1e-4) + 1e-9


def test_same_seed_same_result(rng):
    X, Y = assignments(rng, 8)
    a = fit_quiet(FrankWolfeLearner(BipartiteMatching(), max_iter=5, random_state=7), X, Y)
    b = fit_quiet(FrankWolfeLearner(BipartiteMatching(), max_iter=5, random_state=7), X, Y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


# ---------------------------------------------------------------- sparse features
def test_sparse_and_dense_features_same_model(rng):
    """Same iterates up to round-off for a few epochs; the same certified optimum."""
    X, Y = assignments(rng, 10)
    # classical steps: no choice among near-equal active outputs, so round-off stays small
    kw = dict(tol=1e-5, max_iter=3, pairwise=False, random_state=0)
    dense = fit_quiet(FrankWolfeLearner(BipartiteMatching(), **kw), X, Y)
    sparse = fit_quiet(FrankWolfeLearner(SparseBipartite(), **kw), X, Y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-9, atol=1e-12)
    dense = FrankWolfeLearner(BipartiteMatching(), tol=1e-5, max_iter=3000,
                              random_state=0).fit(X, Y)
    sparse = FrankWolfeLearner(SparseBipartite(), tol=1e-5, max_iter=3000,
                               random_state=0).fit(X, Y)
    qp = MaxMarginLearner(BipartiteMatching()).fit(X, Y)
    for fw in (sparse, dense):
        check_certified(fw, qp.objective_)
    assert np.linalg.norm(sparse.coef_ - dense.coef_) <= \
        np.sqrt(2 * sparse.duality_gap_) + np.sqrt(2 * dense.duality_gap_) + 1e-6
    assert all(np.array_equal(a, b) for a, b in zip(sparse.predict(X), dense.predict(X)))
    qp_dense = qp
    qp_sparse = MaxMarginLearner(SparseBipartite()).fit(X, Y)
    np.testing.assert_allclose(qp_sparse.coef_, qp_dense.coef_, atol=1e-7)
    cp_dense = CuttingPlaneLearner(BipartiteMatching(), tol=1e-7).fit(X, Y)
    cp_sparse = CuttingPlaneLearner(SparseBipartite(), tol=1e-7).fit(X, Y)
    np.testing.assert_allclose(cp_sparse.coef_, cp_dense.coef_, atol=1e-6)


class WideSparseModel(BipartiteMatching):
    """Text-like features: each edge has 5 non-zeros among D columns."""

    D = 200_000

    def features(self, x):
        L = x.shape[0] * x.shape[1]
        seed = int(abs(x[0, 0, 0]) * 1e6)
        cols = np.random.default_rng(seed).integers(0, self.D, size=(L, 5))
        vals = np.repeat(x.reshape(L, -1)[:, :1], 5, axis=1)
        return sp.csr_array((vals.ravel(), (np.repeat(np.arange(L), 5), cols.ravel())),
                            shape=(L, self.D))


def test_wide_sparse_features_are_not_densified(rng):
    """d = 200,000: dense part features would take 12 x 16 x 200,000 x 8 B = 300 MB."""
    X, Y = assignments(rng, 12)
    tracemalloc.start()
    fw = fit_quiet(FrankWolfeLearner(WideSparseModel(), max_iter=3, random_state=0), X, Y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert fw.coef_.shape == (200_000,)
    assert peak < 40e6, peak


def test_sparse_features_of_the_wrong_shape():
    class BadRows(SparseBipartite):
        def features(self, x):
            return sp.csr_array(np.ones((x.shape[0] * x.shape[1] + 1, 2)))

    class BadCols(SparseBipartite):
        def features(self, x):
            return sp.csr_array(x.reshape(-1, x.shape[2])[:, :1 + int(x[0, 0, 0] > 0)])

    X = [np.full((3, 3, 2), -1.0), np.full((3, 3, 2), 1.0)]
    Y = [np.eye(3, dtype=int)] * 2
    with pytest.raises(DeclarationError, match="one row per part"):
        FrankWolfeLearner(BadRows()).fit(X, Y)
    with pytest.raises(InvalidInputError, match="X\\[1\\] has 2 features per part"):
        FrankWolfeLearner(BadCols()).fit(X, Y)
    fw = fit_quiet(FrankWolfeLearner(SparseBipartite(), max_iter=2), X, Y)
    with pytest.raises(InvalidInputError, match="features per part; the learner was fitted"):
        fw.predict([np.ones((3, 3, 5))])


# ---------------------------------------------------------------- contract and errors
def test_estimator_contract(rng):
    X, Y = assignments(rng, 5)
    fw = FrankWolfeLearner(BipartiteMatching(), C=0.5)
    params = fw.get_params()
    assert params["C"] == 0.5 and params["n_jobs"] is None and params["backend"] is None
    assert fw.set_params(tol=1e-3) is fw and fw.tol == 1e-3
    with pytest.raises(NotFittedError):
        fw.predict(X)
    assert fw.fit(X, Y) is fw
    for attr in ("coef_", "objective_", "dual_objective_", "duality_gap_", "slack_",
                 "n_iter_", "n_oracle_calls_", "converged_", "history_", "n_features_in_",
                 "fit_time_", "solver_"):
        assert hasattr(fw, attr), attr
    assert fw.coef_.shape == (3,) and fw.slack_.shape == (5,)
    assert len(fw.predict(X)) == 5
    assert fw.score(X, Y) == -fw.loss(X, Y)
    assert len(fw.decision_scores(X)[0]) == 16
    with pytest.raises(InvalidParameterError, match="Invalid parameter 'nope'"):
        fw.set_params(nope=1)


@pytest.mark.parametrize("param, value, match", [
    ("C", 0, "'C' parameter of FrankWolfeLearner must be a float > 0"),
    ("tol", 0, "'tol' parameter of FrankWolfeLearner must be a float > 0"),
    ("tol", -1e-3, "'tol' parameter of FrankWolfeLearner must be a float > 0"),
    ("max_iter", 0, "'max_iter' parameter of FrankWolfeLearner must be an int >= 1"),
    ("max_iter", 2.5, "'max_iter' parameter"),
    ("n_jobs", 0, "'n_jobs' parameter of FrankWolfeLearner must be None or a non-zero int"),
    ("n_jobs", 1.5, "'n_jobs' parameter"),
    ("backend", "spark", "'backend' parameter of FrankWolfeLearner"),
    ("random_state", -1, "'random_state' parameter"),
    ("random_state", "x", "'random_state' parameter"),
    ("batch_size", 0, "'batch_size' parameter of FrankWolfeLearner must be an int >= 1"),
    ("check_every", 0, "'check_every' parameter"),
    ("pairwise", "yes", "'pairwise' parameter"),
    ("sampling", "random", "'sampling' parameter of FrankWolfeLearner must be one of"),
    ("inner_steps", -1, "'inner_steps' parameter of FrankWolfeLearner must be an int >= 0"),
    ("solver", "NOPE", "'solver' parameter of FrankWolfeLearner"),
    ("scheduler_timeout", 0, "'scheduler_timeout' parameter"),
])
def test_bad_parameters(param, value, match, rng):
    X, Y = assignments(rng, 2)
    with pytest.raises(InvalidParameterError, match=match):
        FrankWolfeLearner(BipartiteMatching(), **{param: value}).fit(X, Y)


def test_bad_model_and_data():
    with pytest.raises(InvalidParameterError, match="'model' parameter of FrankWolfeLearner"):
        FrankWolfeLearner("chain").fit([np.zeros((2, 2, 1))], [np.eye(2)])
    with pytest.raises(InvalidInputError, match="same number of examples"):
        FrankWolfeLearner(BipartiteMatching()).fit([np.zeros((2, 2, 1))], [np.eye(2)] * 2)


# ---------------------------------------------------------------- factored part features
class ExplicitTreeLabeling(TreeLabeling):
    """TreeLabeling through its explicit sparse part-feature matrix (the default operator)."""

    feature_operator = StructuredModel.feature_operator


def random_tree_example(rng, n, d_v, d_e, sparse=False, chain_=False):
    parents = np.arange(-1, n - 1) if chain_ else np.array(
        [-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    V = rng.normal(size=(n, d_v))
    V[rng.random(size=V.shape) < 0.5] = 0.0
    return {"node_features": sp.csr_array(V) if sparse else V,
            "edge_features": rng.normal(size=(n - 1, d_e)), "parents": parents}


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("chain_", [True, False])
def test_tree_features_operator_equals_explicit_matrix(rng, sparse, chain_):
    """TreeFeatures: the scores Phi w and joint features Phi^T mu of the explicit matrix."""
    model = TreeLabeling(3)
    for n in (1, 2, 6):
        ex = model.check_x(random_tree_example(rng, n, 4, 2, sparse, chain_))
        op = model.checked_feature_operator(ex, verify=True)
        Phi = model.features(ex).toarray()
        assert op.shape == Phi.shape == (model.n_parts(ex), 3 * 4 + 9 * 2)
        w, mu = rng.normal(size=Phi.shape[1]), rng.normal(size=Phi.shape[0])
        np.testing.assert_allclose(op.scores(w), Phi @ w, rtol=0, atol=1e-12)
        np.testing.assert_allclose(op.joint(mu), Phi.T @ mu, rtol=0, atol=1e-12)
        np.testing.assert_allclose(op.toarray(), Phi, rtol=0, atol=0)
        y = rng.integers(0, 3, size=n)
        v = model.encode(ex, y)
        idx = np.flatnonzero(v)
        np.testing.assert_allclose(op.joint_sparse(idx, v[idx]), Phi.T @ v, atol=1e-12)


class FactoredBipartite(BipartiteMatching):
    """BipartiteMatching with its edge features as a hand-written operator (einsum)."""

    def feature_operator(self, x):
        return _EinsumFeatures(x)


class _EinsumFeatures(PartFeatures):
    def __init__(self, x):
        self.x = x
        self.shape = (x.shape[0] * x.shape[1], x.shape[2])

    def scores(self, w):
        return np.einsum("jkf,f->jk", self.x, w).ravel()

    def joint(self, mu):
        return np.einsum("jkf,jk->f", self.x, np.reshape(mu, self.x.shape[:2]))


def _same_fit(make, factored, explicit, X, Y, **kw):
    a = fit_quiet(make(factored, **kw), X, Y)
    b = fit_quiet(make(explicit, **kw), X, Y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=0, atol=1e-10)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-10, abs=1e-10)
    return a, b


@pytest.mark.parametrize("learner", ["fw", "fw_classical", "subgradient", "cutting_plane"])
def test_factored_and_explicit_features_give_the_same_fit(rng, learner, monkeypatch):
    """Chains, trees (dense and sparse node features) and bipartite models: the same
    coefficients and objective (1e-10) through the operator as through the matrix (the
    per-block path; the compiled tree path is compared by its certified optimum in
    :func:`test_tree_path_reaches_the_qp_optimum`)."""
    from structlp.learners import _fw_tree_store
    monkeypatch.setattr(_fw_tree_store, "ENABLED", False)
    from structlp.learners.subgradient import SubgradientLearner
    make = {"fw": lambda mdl, **kw: FrankWolfeLearner(mdl, C=1.0, max_iter=4,
                                                      random_state=0, **kw),
            "fw_classical": lambda mdl, **kw: FrankWolfeLearner(
                mdl, C=1.0, max_iter=4, pairwise=False, random_state=0, **kw),
            "subgradient": lambda mdl, **kw: SubgradientLearner(mdl, C=1.0, max_iter=4,
                                                                random_state=0, **kw),
            "cutting_plane": lambda mdl, **kw: CuttingPlaneLearner(mdl, C=1.0, max_iter=4,
                                                                   **kw)}[learner]
    cases = []
    for sparse, chain_ in ((False, True), (True, True), (False, False), (True, False)):
        exs = [random_tree_example(rng, int(rng.integers(2, 6)), 3, 2, sparse, chain_)
               for _ in range(6)]
        model = TreeLabeling(3)
        theta = rng.normal(size=3 * 3 + 9 * 2)
        Y = [model.inference(model.check_x(x), model.features(model.check_x(x)) @ theta
                             + rng.normal(size=model.n_parts(model.check_x(x))))
             for x in exs]
        cases.append((TreeLabeling(3), ExplicitTreeLabeling(3), exs, Y))
    X, Y = assignments(rng, 8)
    cases.append((FactoredBipartite(), BipartiteMatching(), X, Y))
    for factored, explicit, X, Y in cases:
        _same_fit(make, factored, explicit, X, Y)


def test_sparse_and_dense_node_features_same_fit(rng, monkeypatch):
    """The per-block path: the same iterates with sparse and dense node features; the
    compiled tree path (dense only) certifies the same optimum."""
    from structlp.learners import _fw_tree_store
    exs = [random_tree_example(rng, 5, 4, 1, sparse=False, chain_=True) for _ in range(6)]
    Y = [rng.integers(0, 3, size=5) for _ in exs]
    sparse = [dict(x, node_features=sp.csr_array(x["node_features"])) for x in exs]
    fast = FrankWolfeLearner(TreeLabeling(3), tol=1e-6, max_iter=2000, random_state=0)
    fast.fit(exs, Y)
    slow = FrankWolfeLearner(TreeLabeling(3), tol=1e-6, max_iter=2000, random_state=0)
    slow.fit(sparse, Y)
    assert isinstance(fast._warm[1], _fw_tree_store._TreeBlocks)
    assert not isinstance(slow._warm[1], _fw_tree_store._TreeBlocks)
    assert abs(fast.objective_ - slow.objective_) <= fast.duality_gap_ + slow.duality_gap_
    monkeypatch.setattr(_fw_tree_store, "ENABLED", False)
    a = fit_quiet(FrankWolfeLearner(TreeLabeling(3), max_iter=5, random_state=0), exs, Y)
    b = fit_quiet(FrankWolfeLearner(TreeLabeling(3), max_iter=5, random_state=0), sparse, Y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=0, atol=1e-10)
    qp = MaxMarginLearner(TreeLabeling(3)).fit(sparse, Y)
    assert qp.objective_ == pytest.approx(MaxMarginLearner(TreeLabeling(3)).fit(
        exs, Y).objective_, rel=1e-6)
    assert all(np.array_equal(p, q) for p, q in zip(b.predict(sparse), a.predict(exs)))


def test_inconsistent_feature_operator_is_a_declaration_error(rng):
    X, Y = assignments(rng, 3)

    class NotAnOperator(BipartiteMatching):
        def feature_operator(self, x):
            return x.reshape(-1, x.shape[2])

    class WrongRows(FactoredBipartite):
        def feature_operator(self, x):
            op = _EinsumFeatures(x)
            op.shape = (op.shape[0] + 1, op.shape[1])
            return op

    class WrongCols(FactoredBipartite):
        def feature_operator(self, x):
            op = _EinsumFeatures(x)
            op.shape = (op.shape[0], op.shape[1] + 1)
            return op

    class WrongNumbers(FactoredBipartite):
        def feature_operator(self, x):
            return _EinsumFeatures(2.0 * x)

    for model, match in ((NotAnOperator(), "feature_operator\\(x\\) must return"),
                         (WrongRows(), "feature_operator\\(x\\) must have shape"),
                         (WrongCols(), "feature_operator\\(x\\) has shape"),
                         (WrongNumbers(), "feature_operator\\(x\\).scores\\(w\\) differs")):
        with pytest.raises(DeclarationError, match=match):
            FrankWolfeLearner(model, max_iter=1).fit(X, Y)


# ---------------------------------------------------------------- progress and warm start
def test_verbose_logs_one_line_per_epoch(rng, caplog):
    X, Y = assignments(rng, 6)
    with caplog.at_level(logging.INFO, logger="structlp.learners.frank_wolfe"):
        fw = fit_quiet(FrankWolfeLearner(BipartiteMatching(), tol=1e-12, max_iter=4,
                                         check_every=2, verbose=1, random_state=0), X, Y)
    lines = [r.getMessage() for r in caplog.records if r.name == "structlp.learners.frank_wolfe"]
    assert len(lines) == fw.n_iter_ == 4
    assert all(line.startswith("FrankWolfeLearner: iteration ") for line in lines)
    assert "duality_gap" in lines[1] and "objective" in lines[1] and "time" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="structlp.learners.frank_wolfe"):
        fit_quiet(FrankWolfeLearner(BipartiteMatching(), max_iter=2, random_state=0), X, Y)
    assert not [r for r in caplog.records if r.name == "structlp.learners.frank_wolfe"]


def test_callback_stops_early_with_a_certified_gap(rng):
    X, Y = assignments(rng, 8)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    seen = []

    def stop_at_3(info):
        seen.append(dict(info))
        return info["iteration"] == 3

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)     # a stop asked for: no warning
        fw = FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-12, max_iter=50,
                               callback=stop_at_3, random_state=0).fit(X, Y)
    assert fw.n_iter_ == 3 and not fw.converged_ and len(fw.history_) == 3
    assert [s["iteration"] for s in seen] == [1, 2, 3]
    assert all({"time", "gap_estimate"} <= set(s) for s in seen)
    check_certified(fw, qp.objective_)          # the w returned is certified by its gap
    assert "duality_gap" in fw.history_[-1]
    with pytest.raises(InvalidParameterError, match="'callback' parameter"):
        FrankWolfeLearner(BipartiteMatching(), callback=3).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'verbose' parameter"):
        FrankWolfeLearner(BipartiteMatching(), verbose=-1).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'warm_start' parameter"):
        FrankWolfeLearner(BipartiteMatching(), warm_start="yes").fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'cache_passes' parameter"):
        FrankWolfeLearner(BipartiteMatching(), cache_passes=-1).fit(X, Y)


def test_warm_start_continues_the_dual_state(rng):
    X, Y = assignments(rng, 10)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    fw = fit_quiet(FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-12, max_iter=3,
                                     warm_start=True, random_state=0), X, Y)
    gap3 = fw.duality_gap_
    fw.set_params(max_iter=200, tol=1e-6)
    fw.fit(X, Y)                                # continues: far fewer epochs than cold
    cold = FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-6, max_iter=200,
                             random_state=0).fit(X, Y)
    assert fw.converged_ and fw.n_iter_ < cold.n_iter_
    check_certified(fw, qp.objective_)
    assert fw.duality_gap_ < gap3
    # other data (another number of examples): a cold start, as without warm_start
    again = fit_quiet(fw.set_params(max_iter=1, tol=1e-12), X[:8], Y[:8])
    ref = fit_quiet(FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-12, max_iter=1,
                                      random_state=0), X[:8], Y[:8])
    np.testing.assert_array_equal(again.coef_, ref.coef_)
    # warm_start=False (the default) always starts cold
    a = fit_quiet(FrankWolfeLearner(BipartiteMatching(), max_iter=2, random_state=0), X, Y)
    coef = a.coef_.copy()
    np.testing.assert_array_equal(fit_quiet(a, X, Y).coef_, coef)


def test_prepare_with_operators_keeps_the_same_data(rng):
    """prepare(operators=True): operators equal to the matrices, c and mu_true by their
    nonzeros but item by item the same dense vectors."""
    from structlp.compiler import SparseVectors, prepare
    X, Y = chains(rng, 5)
    model = TreeLabeling(3)
    a = prepare(model, X, Y)
    b = prepare(model, X, Y, operators=True)
    assert isinstance(b.c, SparseVectors) and isinstance(b.mu_true, SparseVectors)
    assert len(b.c) == 5 and len(b.mu_true[1:3]) == 2
    for i in range(5):
        np.testing.assert_array_equal(b.c[i], a.c[i])
        np.testing.assert_array_equal(b.mu_true[i], a.mu_true[i])
        np.testing.assert_allclose(b.Phi[i].toarray(), a.Phi[i].toarray(), atol=1e-15)
    np.testing.assert_array_equal(b.n_parts, a.n_parts)
    assert b.n_features == a.n_features


# ---------------------------------------------------------------- the compiled tree path
def tree_data(rng, m=6, n=4, k=3, tree="random", seed=None):
    from structlp.datasets import make_tree_labeling
    X, Y, _, model = make_tree_labeling(n_samples=m, n_nodes=n, n_labels=k, tree=tree,
                                        n_node_features=3, n_edge_features=2, noise=0.5,
                                        random_state=int(rng.integers(1 << 30)))
    return X, Y, model


def tree_store(model, X, Y):
    from structlp.compiler import prepare
    from structlp.learners._fw_tree_store import _TreeBlocks
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    assert _TreeBlocks.applicable(model, data)
    return data, _TreeBlocks(model, data)


@pytest.mark.parametrize("tree", ["chain", "random"])
def test_tree_path_reaches_the_qp_optimum(rng, tree):
    """Chains and random trees: the compiled path certifies the joint QP's optimum."""
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y, model = tree_data(rng, m=10, n=5, tree=tree)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-6, max_iter=3000, random_state=0).fit(X, Y)
    assert isinstance(fw._warm[1], _TreeBlocks)          # the compiled path ran
    assert fw.converged_
    check_certified(fw, qp.objective_, atol=1e-6)
    generic = FrankWolfeLearner(model, C=1.0, tol=1e-6, max_iter=3000, random_state=0,
                                batch_size=2).fit(X, Y)   # the per-block Python path
    assert not isinstance(generic._warm[1], _TreeBlocks)
    check_certified(generic, qp.objective_, atol=1e-6)


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_check_pass_is_the_enumerated_hinge(rng, monkeypatch, use_numba):
    """The exact pass (batched scores, max-sum) against enumerating every labelling with
    the explicit part features; the block gaps against the marginals' values."""
    from structlp.learners import _fw_trees
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", use_numba)
    X, Y, model = tree_data(rng, m=4, n=4, k=3)
    data, blocks = tree_store(model, X, Y)
    w = rng.normal(size=data.n_features)
    hinge, gaps = blocks.check(w, 0.5, data.d)
    for i, x in enumerate(data.X):
        Phi = model.features(x)
        s = Phi @ w
        c, d = model.loss_coefficients(x, Y[i])
        vals = [s @ model.encode(x, np.array(y)) + c @ model.encode(x, np.array(y)) + d
                for y in itertools.product(range(3), repeat=4)]
        truth = s @ model.encode(x, Y[i])
        assert hinge[i] == pytest.approx(max(vals) - truth, rel=1e-10, abs=1e-10)
        m_i = blocks.marginal(i, Phi.shape[0])
        assert gaps[i] == pytest.approx(0.5 * (max(vals) - d - (s + c) @ m_i), abs=1e-10)


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_epoch_keeps_w_equal_to_its_blocks(rng, monkeypatch, use_numba):
    """After epochs and passes without oracle (sparse updates of w), the running w is
    C sum_i Phi_i^T (mu_i - m_i) from the explicit features, and the blocks stay in their
    simplices; the dual value ell matches."""
    from structlp.learners import _fw_trees
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", use_numba)
    X, Y, model = tree_data(rng, m=5, n=4, k=3)
    data, blocks = tree_store(model, X, Y)
    C = 2.0
    w, ell = blocks.primal(None, None, data.d, C, None)
    g = np.zeros(5)
    r = np.random.default_rng(0)
    for _ in range(6):
        ell = blocks.epoch(r.permutation(5).astype(np.int64), w, C, 3, ell, g)
        ell = blocks.cache_pass(w, C, ell)
    ref = np.zeros(data.n_features)
    loss = 0.0
    for i, x in enumerate(data.X):
        Phi = model.features(x)
        m_i = blocks.marginal(i, Phi.shape[0])
        ref += C * Phi.T @ (model.encode(x, Y[i]) - m_i)
        c, d = model.loss_coefficients(x, Y[i])
        loss += C * (c @ m_i + d)
        assert blocks.weights(i).sum() == pytest.approx(1.0, abs=1e-12)
        assert (blocks.weights(i) > 0).all()
    np.testing.assert_allclose(w, ref, atol=1e-10)
    assert ell == pytest.approx(loss, abs=1e-10)
    assert g.max() > 0


@pytest.mark.parametrize("use_numba", [True, False])
@pytest.mark.parametrize("edges", ["random", "constant"])
def test_tree_epoch_block_gap_is_the_enumerated_one(rng, monkeypatch, use_numba, edges):
    """An epoch of one block at a time: the block's gap ``C (max_y a . psi(y) - a . m_i)``
    (``a``: the loss-augmented scores at the w before its step) against enumerating every
    labelling with the explicit part features, and the dual objective ``ell - |w|^2 / 2``
    not decreasing by the block's line-searched steps.  With constant edge features (a
    chain's or tree's OCR-like edges) the epoch scores the active labellings by max-sum's
    one table of edge scores; with random ones edge by edge."""
    from structlp.learners import _fw_trees
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", use_numba)
    X, Y, model = tree_data(rng, m=5, n=4, k=3)
    if edges == "constant":
        X = [dict(x, edge_features=np.tile([0.7, -1.3], (len(x["parents"]) - 1, 1)))
             for x in X]
    data, blocks = tree_store(model, X, Y)
    assert (blocks.uniform == (edges == "constant")).all()      # the one-table path runs
    C = 3.0
    w, ell = blocks.primal(None, None, data.d, C, None)
    g = np.zeros(5)
    r = np.random.default_rng(2)
    for _ in range(3):                   # several outputs per block
        ell = blocks.epoch(r.permutation(5).astype(np.int64), w, C, 3, ell, g)
    assert blocks.ns.max() >= 2
    labellings = list(itertools.product(range(3), repeat=4))
    for sweep in range(2):
        for i in r.permutation(5):
            x = data.X[i]
            Phi = model.features(x)
            c, d = model.loss_coefficients(x, Y[i])
            a = Phi @ w + c
            vals = [a @ model.encode(x, np.array(y)) for y in labellings]
            gap = C * (max(vals) - a @ blocks.marginal(i, Phi.shape[0]))
            g[:] = -1.0
            dual = ell - 0.5 * w @ w
            ell = blocks.epoch(np.array([i], dtype=np.int64), w, C, 3, ell, g)
            assert g[i] == pytest.approx(max(gap, 0.0), rel=1e-10, abs=1e-10)
            assert (g[np.arange(5) != i] == -1.0).all()
            assert ell - 0.5 * w @ w >= dual - 1e-10 * max(1.0, abs(dual))


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_blocks_grow_their_own_slots(rng, monkeypatch, use_numba):
    """A block that needs more than its slots moves to the pools' free ends with twice as
    many, the pools doubling when full: after many epochs at a large C (large active
    sets), every block's Gram matrix in the pool is still psi_s . psi_t of its outputs
    (from the explicit part features), its weights a distribution, w the one of its
    blocks; blocks with few outputs kept their 4 slots."""
    from structlp.learners import _fw_trees
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", use_numba)
    X, Y, model = tree_data(rng, m=6, n=6, k=4)
    data, blocks = tree_store(model, X, Y)
    C = 50.0
    w, ell = blocks.primal(None, None, data.d, C, None)
    start = (len(blocks.alpha), len(blocks.G))
    g = np.zeros(6)
    r = np.random.default_rng(1)
    for _ in range(40):
        ell = blocks.epoch(r.permutation(6).astype(np.int64), w, C, 3, ell, g)
        ell = blocks.cache_pass(w, C, ell)
    assert blocks.cap.max() >= 16 and blocks.ns.max() > 8       # blocks grew twice or more
    assert len(blocks.alpha) > start[0] and len(blocks.G) > start[1]  # the pools doubled
    assert (blocks.cap[blocks.ns <= 4] == 4).all()
    assert (blocks.ns <= blocks.cap).all()
    ref = np.zeros(data.n_features)
    for i, x in enumerate(data.X):
        Phi = model.features(x)
        psi = np.array([Phi.T @ model.encode(x, y) for y in blocks.labellings(i)])
        c, o = int(blocks.cap[i]), int(blocks.go[i])
        ns = int(blocks.ns[i])
        Gi = blocks.G[o:o + c * c].reshape(c, c)[:ns, :ns]
        np.testing.assert_allclose(Gi, psi @ psi.T, rtol=1e-12, atol=1e-10)
        assert len({tuple(y) for y in blocks.labellings(i)}) == ns     # no output twice
        assert blocks.weights(i).sum() == pytest.approx(1.0, abs=1e-12)
        assert (blocks.weights(i) > 0).all()
        ref += C * (Phi.T @ model.encode(x, Y[i]) - blocks.weights(i) @ psi)
    np.testing.assert_allclose(w, ref, atol=1e-8 * max(1.0, np.abs(ref).max()))


def test_tree_path_compiled_and_python_kernels_certify_the_same_optimum(rng, monkeypatch):
    """The numba kernels sum the unary scores in another order than the Python ones (SIMD):
    the iterates may differ in rounding, the certified objectives agree within the gaps."""
    from structlp.learners import _fw_trees
    X, Y, model = tree_data(rng, m=6, n=4, tree="chain")
    fits = []
    for use in (True, False):
        monkeypatch.setattr(_fw_trees, "USE_NUMBA", use)
        fits.append(FrankWolfeLearner(model, C=1.0, tol=1e-7, max_iter=2000,
                                      random_state=0).fit(X, Y))
    a, b = fits
    assert a.converged_ and b.converged_
    assert abs(a.objective_ - b.objective_) <= a.duality_gap_ + b.duality_gap_ + 1e-9
    np.testing.assert_array_equal(np.concatenate(a.predict(X)), np.concatenate(b.predict(X)))


def test_tree_path_warm_start_resumes_from_its_blocks(rng):
    """A refit on rescaled features starts from the previous fit's labellings and weights
    (the data and Gram matrices made afresh) and certifies the new optimum."""
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y, model = tree_data(rng, m=8, n=4, tree="random")
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-6, max_iter=3000, random_state=0,
                           warm_start=True).fit(X, Y)
    blocks = fw._warm[1]
    assert isinstance(blocks, _TreeBlocks) and blocks.ns.max() > 1
    X2 = [dict(x, node_features=1.1 * np.asarray(x["node_features"])) for x in X]
    fw.fit(X2, Y)
    assert fw._warm[1] is blocks and fw.converged_
    check_certified(fw, MaxMarginLearner(model, C=1.0).fit(X2, Y).objective_, atol=1e-6)


def explicit_values(model, data, blocks, i, w):
    """``psi(y) . w + c_i . y`` of block ``i``'s active labellings, from the explicit part
    features."""
    x = data.X[i]
    Phi = model.features(x)
    idx, vals = data.c.nonzeros(i)
    c = np.zeros(Phi.shape[0])
    c[idx] = vals
    return np.array([(Phi @ w + c) @ model.encode(x, y) for y in blocks.labellings(i)])


def warmed_tree_store(rng, monkeypatch, use_numba, m, seed, epochs):
    """A tree store of ``m`` random trees (4 nodes, 3 labels, C = 20) after ``epochs``
    epochs in random orders (Python or compiled kernels, as ``use_numba`` says): its model,
    data, blocks, C, w, ell and the block gaps."""
    from structlp.learners import _fw_trees
    monkeypatch.setattr(_fw_trees, "USE_NUMBA", use_numba)
    X, Y, model = tree_data(rng, m=m, n=4, k=3)
    data, blocks = tree_store(model, X, Y)
    C = 20.0
    w, ell = blocks.primal(None, None, data.d, C, None)
    g = np.zeros(m)
    r = np.random.default_rng(seed)
    for _ in range(epochs):
        ell = blocks.epoch(r.permutation(m).astype(np.int64), w, C, 0, ell, g)
    return model, data, blocks, C, w, ell, g


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_pass_without_oracle_leaves_the_enumerated_gaps(rng, monkeypatch, use_numba):
    """A pass without oracle records in ``hg`` the gap ``C (max - min)`` between a block's
    best and worst active labellings after its steps: for the last block visited, at the
    final ``w``, against the explicit part features; the dual does not decrease, ``w`` stays
    the one of the blocks, and the node-score scratch is NaN again."""
    model, data, blocks, C, w, ell, g = warmed_tree_store(rng, monkeypatch, use_numba, m=4,
                                                          seed=3, epochs=4)
    assert np.isinf(blocks.hg).all()                 # an epoch: the next pass visits all
    assert blocks.ns.max() >= 3
    dual = ell - 0.5 * w @ w
    ell = blocks.cache_pass(w, C, ell, steps=2)
    assert ell - 0.5 * w @ w >= dual - 1e-10 * abs(dual)
    assert np.isnan(blocks.SC).all()
    last = int(np.flatnonzero(blocks.ns >= 2).max())
    vals = explicit_values(model, data, blocks, last, w)
    assert blocks.hg[last] == pytest.approx(C * (vals.max() - vals.min()), rel=1e-9, abs=1e-9)
    assert (blocks.hg[blocks.ns < 2] == 0.0).all()
    w_ref, ell_ref = blocks.primal(None, None, data.d, C, None)
    np.testing.assert_allclose(w, w_ref, atol=1e-9)
    assert ell == pytest.approx(ell_ref, abs=1e-9)


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_later_pass_skips_the_blocks_left_below_the_mean_gap(rng, monkeypatch, use_numba):
    """With the gaps of a previous pass known, a pass visits only the blocks whose gap is at
    least ``skip_share`` times their mean: the others keep their weights and gaps."""
    model, data, blocks, C, w, ell, g = warmed_tree_store(rng, monkeypatch, use_numba, m=6,
                                                          seed=4, epochs=4)
    multi = np.flatnonzero(blocks.ns >= 2)
    assert len(multi) >= 2
    skipped, visited = multi[::2], multi[1::2]
    blocks.hg[:] = 0.0
    blocks.hg[visited] = 1.0                         # the mean is below 1, above 0
    before = {int(i): blocks.weights(i).copy() for i in skipped}
    monkeypatch.setattr(type(blocks), "skip_share", 1.0)
    blocks.cache_pass(w, C, ell)
    for i in skipped:
        np.testing.assert_array_equal(blocks.weights(i), before[int(i)])
        assert blocks.hg[i] == 0.0
    assert (blocks.hg[visited] != 1.0).all()         # visited: their gaps measured afresh


def test_tree_store_packs_the_examples_as_the_per_example_reference(rng):
    """The block store's arrays (node losses, true labels, uniform-edge flags, starting
    slots and losses), made over all the letters at once, against a loop over the
    examples; words of one letter (no edge) included."""
    from structlp.datasets import make_tree_labeling
    X, Y, _, model = make_tree_labeling(n_samples=5, n_nodes=4, n_labels=3, tree="chain",
                                        n_node_features=3, n_edge_features=2,
                                        random_state=int(rng.integers(1 << 30)))
    X = list(X) + [dict(node_features=rng.normal(size=(1, 3)),
                        edge_features=np.zeros((0, 2)), parents=np.array([-1]))]
    X[1] = dict(X[1], edge_features=np.tile([0.5, 2.0], (3, 1)))     # uniform edges
    Y = list(Y) + [np.array([2])]
    data, blocks = tree_store(model, X, Y)
    k = 3
    for i, x in enumerate(data.X):
        b, e = int(blocks.noff[i]), int(blocks.noff[i + 1])
        n = e - b
        c = np.zeros(data.Phi[i].shape[0])
        idx, vals = data.c.nonzeros(i)
        c[idx] = vals
        np.testing.assert_array_equal(blocks.cn[b:e].ravel(), c[:n * k])
        np.testing.assert_array_equal(blocks.ytrue[b:e], Y[i])
        ef = np.asarray(X[i]["edge_features"], float)
        assert blocks.uniform[i] == int(n <= 1 or (ef == ef[0]).all())
        np.testing.assert_array_equal(blocks.labellings(i), [Y[i]])
        assert blocks.loss(i) == pytest.approx(c @ model.encode(x, Y[i]), abs=1e-12)
    assert blocks.uniform[1] == 1 and blocks.uniform[5] == 1


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_passes_in_one_call_are_the_single_passes(rng, monkeypatch, use_numba):
    """The passes after an epoch run in one kernel call: the same iterates as single passes
    one after the other, and they stop at the first pass gaining less than the share."""
    import copy
    model, data, blocks, C, w, ell, g = warmed_tree_store(rng, monkeypatch, use_numba, m=6,
                                                          seed=5, epochs=3)
    other, w2 = copy.deepcopy(blocks), w.copy()
    dual = ell - 0.5 * w @ w
    ell1, dual1 = blocks.run_passes(w, C, ell, dual, 0.0, 3)   # gain 0: all three run
    ell2 = ell
    for _ in range(3):
        ell2 = other.cache_pass(w2, C, ell2)
    np.testing.assert_allclose(w, w2, rtol=1e-12, atol=1e-14)
    assert ell1 == pytest.approx(ell2, rel=1e-12)
    assert dual1 == pytest.approx(ell1 - 0.5 * w @ w, rel=1e-12)
    np.testing.assert_array_equal(blocks.ns, other.ns)
    # a gain no pass can reach: one pass only
    third = copy.deepcopy(other)
    w3 = w2.copy()
    d3 = ell2 - 0.5 * w3 @ w3
    e3, _ = third.run_passes(w3, C, ell2, d3, 1e300, 5)
    e4 = other.cache_pass(w2, C, ell2)
    np.testing.assert_allclose(w3, w2, rtol=1e-12, atol=1e-14)
    assert e3 == pytest.approx(e4, rel=1e-12)


@pytest.mark.parametrize("use_numba", [True, False])
def test_tree_pass_visits_the_blocks_in_the_given_order(rng, monkeypatch, use_numba):
    """A pass in the order ``order`` is the blocks' single visits one after the other in
    that order (each emulated by a pass that skips every other block), not those by index;
    it counts its passes and visits."""
    import copy
    model, data, blocks, C, w, ell, g = warmed_tree_store(rng, monkeypatch, use_numba, m=6,
                                                          seed=7, epochs=3)
    multi = np.flatnonzero(blocks.ns >= 2)
    assert len(multi) >= 3
    order = np.array([5, 2, 0, 4, 1, 3], dtype=np.int64)
    single, w2 = copy.deepcopy(blocks), w.copy()
    by_index, w3 = copy.deepcopy(blocks), w.copy()
    visits = blocks.n_visits
    ell1 = blocks.cache_pass(w, C, ell, order=order)
    assert blocks.n_visits - visits == len(multi)
    ell2 = ell
    for i in order:
        if single.ns[i] >= 2:
            single.hg[:] = 0.0
            single.hg[i] = 1.0          # the mean 1/6: block i alone is visited
            ell2 = single.cache_pass(w2, C, ell2)
    np.testing.assert_allclose(w, w2, rtol=1e-12, atol=1e-14)
    assert ell1 == pytest.approx(ell2, rel=1e-12)
    for i in range(6):
        np.testing.assert_allclose(blocks.weights(i), single.weights(i), atol=1e-14)
    by_index.cache_pass(w3, C, ell)
    assert np.abs(w3 - w).max() > 1e-9          # the order matters: the test can fail


@pytest.mark.parametrize("order", [np.array([0, 1, 2, 3, 4, 4]), np.arange(5),
                                   np.arange(6.0), np.arange(6, dtype=np.int32),
                                   np.array([0, 1, 2, 3, 4, 6])])
def test_tree_pass_refuses_an_order_that_is_not_a_permutation(rng, order):
    X, Y, model = tree_data(rng, m=6, n=4, k=3)
    data, blocks = tree_store(model, X, Y)
    w, ell = blocks.primal(None, None, data.d, 1.0, None)
    with pytest.raises(ValueError, match="order must be a permutation of the 6 blocks"):
        blocks.cache_pass(w, 1.0, ell, order=order)
    with pytest.raises(ValueError, match="order must be a permutation"):
        blocks.run_passes(w, 1.0, ell, ell - 0.5 * w @ w, 0.0, 2, order)


def test_tree_fit_draws_each_epochs_pass_order_from_random_state(rng, monkeypatch):
    """The learner's passes visit the blocks in a random order drawn afresh each epoch from
    ``random_state``: reruns draw the same orders and give identical iterates; the fit is
    certified against the joint QP."""
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y, model = tree_data(rng, m=12, n=5, k=3)
    seen = []
    run = _TreeBlocks.run_passes

    def record(self, w, C, ell, dual, gain, max_passes, order=None):
        seen[-1].append(None if order is None else order.copy())
        return run(self, w, C, ell, dual, gain, max_passes, order)

    monkeypatch.setattr(_TreeBlocks, "run_passes", record)
    fits = []
    for _ in range(2):
        seen.append([])
        fits.append(FrankWolfeLearner(model, C=1.0, tol=1e-6, max_iter=3000,
                                      random_state=3).fit(X, Y))
    a, b = fits
    assert isinstance(a._warm[1], _TreeBlocks)
    assert len(seen[0]) == a.n_iter_ >= 3
    for o in seen[0]:
        np.testing.assert_array_equal(np.sort(o), np.arange(12))
    assert len({tuple(o) for o in seen[0]}) > 1             # afresh each epoch
    assert all(np.array_equal(o, p) for o, p in zip(seen[0], seen[1]))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.duality_gap_ == b.duality_gap_
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    assert a.converged_
    check_certified(a, qp.objective_, atol=1e-6)
