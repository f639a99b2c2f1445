"""The cutting plane's part view and one-slack inference cache (outputs stored by their
part supports), checked against explicit joint-feature vectors ``Phi_i^T mu``."""

import numpy as np
import pytest
import scipy.sparse as sp

from structlp import CuttingPlaneLearner, MaxMarginLearner
from structlp.compiler import prepare
from structlp.learners import _cp_cache
from structlp.learners._cp_cache import _Cache, _Parts
from structlp.structures import BipartiteMatching, TreeLabeling
from structlp.structures.graph_labeling import GraphLabeling, grid_example
# a BipartiteMatching whose features are an operator without a stacked form (the cutting
# plane then calls it example by example), and small random trees
from test_frank_wolfe import FactoredBipartite
from test_stacked_features import tree_example


def instance(kind, rng, m=7):
    """(model, X, Y): small random instances with continuous features."""
    if kind in ("chain", "tree", "sparse chain"):
        model = TreeLabeling(3)
        X = [tree_example(rng, int(n), sparse=kind == "sparse chain", chain=kind != "tree")
             for n in rng.integers(1, 6, size=m)]
    elif kind == "graph":
        model = GraphLabeling(3, mode="relaxed")
        X = [grid_example(rng.normal(size=(2, 3, 2)), rng.normal(size=(7, 2)))
             for _ in range(m)]
    else:
        model = BipartiteMatching() if kind == "matching" else FactoredBipartite()
        X = [rng.normal(size=(4, 4, 3)) for _ in range(m)]
    Y = [model.decode(model.check_x(x), random_output(model, model.check_x(x), rng))
         for x in X]
    return model, X, Y


def random_output(model, cx, rng):
    """A random output's part vector (0/1; fractional where a relaxation's is)."""
    return np.asarray(model.inference_parts(cx, rng.normal(size=model.n_parts(cx))), float)


def explicit(model, X, Y):
    """Per example: the dense part-feature matrix, the true part vector and the loss."""
    out = []
    for x, y in zip(X, Y):
        cx = model.check_x(x)
        Phi = model.features(cx)
        c, d = model.loss_coefficients(cx, y)
        out.append((np.asarray(Phi.toarray() if sp.issparse(Phi) else Phi),
                    np.asarray(model.encode(cx, y), float), np.asarray(c), float(d)))
    return out


def key(mu):
    return np.flatnonzero(mu > 0.5).astype(np.int64).tobytes()


class ReferenceCache:
    """The cache by definition: per example a list of outputs (insertion order) with their
    explicit rows ``Phi^T (mu_true - mu)``; the least recently used beyond ``size`` out."""

    def __init__(self, ex_data, size):
        self.ex_data, self.size = ex_data, size
        self.items = [[] for _ in ex_data]
        self.dropped = 0

    def add(self, i, mu, now):
        Phi, mt, c, d = self.ex_data[i]
        if any(it["key"] == key(mu) for it in self.items[i]):
            return
        self.items[i].append(dict(key=key(mu), row=Phi.T @ (mt - mu), loss=d + c @ mu,
                                  used=float(now)))
        if len(self.items[i]) > self.size:
            ranked = sorted(range(len(self.items[i])), key=lambda t: -self.items[i][t]["used"])
            keep = sorted(ranked[:self.size])
            self.dropped += len(self.items[i]) - len(keep)
            self.items[i] = [self.items[i][t] for t in keep]

    def best(self, w, now):
        m, d = len(self.items), len(w)
        g, b, hinge = np.zeros(d), 0.0, 0.0
        for i, items in enumerate(self.items):
            Phi, mt, c, dd = self.ex_data[i]
            h_true = dd + c @ mt
            hs = [it["loss"] - w @ it["row"] for it in items]
            t = int(np.argmax(hs)) if hs else -1
            if t >= 0 and hs[t] > h_true:
                items[t]["used"] = float(now)
                g += items[t]["row"]
                b += items[t]["loss"]
                hinge += hs[t]
            else:
                b += h_true
                hinge += h_true
        return g / m, b / m, hinge / m


KINDS = ["chain", "tree", "sparse chain", "graph", "matching", "factored matching"]


@pytest.mark.parametrize("kind", KINDS)
def test_parts_scores_and_joint_equal_explicit_matrices(kind, rng):
    """_Parts on stacked rows: scores_at and joint_at of the explicit matrices, whichever
    path it takes (stacked operator, explicit stacked matrix, or example by example)."""
    model, X, Y = instance(kind, rng)
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    parts = _Parts(data)
    assert (parts.ops is None) == (kind == "matching")
    assert (parts.ops is not None and parts.stacked() is None) == (kind == "factored matching")
    ref = explicit(model, X, Y)
    w = rng.normal(size=data.n_features)
    mus = [rng.normal(size=len(r[1])) * (rng.random(len(r[1])) < 0.5) for r in ref]
    sups = [(np.flatnonzero(mu), mu[np.flatnonzero(mu)]) for mu in mus]
    rows, vals, owner = parts.stacked_rows(sups, range(len(X)))
    assert len(np.unique(rows)) == len(rows)      # one row per part of each example
    want = np.concatenate([Phi @ w for Phi, *_ in ref])[
        np.concatenate([z + o for (z, _), o in zip(sups, np.cumsum([0] + [len(r[1]) for r in
                                                                           ref])[:-1])])]
    np.testing.assert_allclose(parts.scores_at(w, rows), want, rtol=0, atol=1e-12)
    joint = sum(Phi.T @ mu for (Phi, *_), mu in zip(ref, mus))
    np.testing.assert_allclose(parts.joint_at(rows, vals), joint, rtol=0, atol=1e-12)
    # repeated rows add up; the per-example joint rows (n-slack) too
    np.testing.assert_allclose(parts.joint_at(np.r_[rows, rows], np.r_[vals, -2 * vals]),
                               -joint, rtol=0, atol=1e-12)
    J = parts.joint(sups).toarray()
    np.testing.assert_allclose(J, [Phi.T @ mu for (Phi, *_), mu in zip(ref, mus)],
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [2, 10])
def test_cache_best_equals_explicit_rows(kind, size, rng):
    """The cache's cut, loss and mean hinge, the outputs it chooses and keeps (least
    recently used dropped), against the same cache holding explicit rows."""
    model, X, Y = instance(kind, rng)
    m = len(X)
    data = prepare(model, X, Y, need_polytopes=False, operators=True)
    parts = _Parts(data)
    ex_data = explicit(model, X, Y)
    truth = [(np.flatnonzero(mt), mt[np.flatnonzero(mt)]) for _, mt, _, _ in ex_data]
    loss_true = np.array([d + c @ mt for _, mt, c, d in ex_data])
    cache, ref = _Cache(m, size), ReferenceCache(ex_data, size)
    cache.set_truth(parts.stacked_rows(truth, range(m)))
    seen = [[] for _ in range(m)]
    n_picked = 0
    for now in range(1, 16):
        ex, mus = [], []
        for i in rng.permutation(m)[:int(rng.integers(1, m + 1))]:
            cx = model.check_x(X[i])
            mu = seen[i][int(rng.integers(len(seen[i])))] if seen[i] and rng.random() < 0.3 \
                else random_output(model, cx, rng)
            if key(mu) == key(ex_data[i][1]):
                continue                                  # the learner never caches a truth
            seen[i].append(mu)
            ex.append(int(i))
            mus.append(mu)
        sups = [(np.flatnonzero(mu), mu[np.flatnonzero(mu)]) for mu in mus]
        rows, vals, owner = parts.stacked_rows(sups, ex)
        losses = np.array([ex_data[i][3] + ex_data[i][2] @ mu for i, mu in zip(ex, mus)])
        cache.add(ex, [key(mu) for mu in mus], rows, vals, owner, losses, now)
        for i, mu in zip(ex, mus):
            ref.add(i, mu, now)
        w = 3 * rng.normal(size=data.n_features)
        g, b, hinge = cache.best(parts, w, loss_true, now + 0.5)
        g_ref, b_ref, hinge_ref = ref.best(w, now + 0.5)
        np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-12)
        assert b == pytest.approx(b_ref, abs=1e-12)
        assert hinge == pytest.approx(hinge_ref, abs=1e-12)
        kept = sorted((int(i), k, u) for i, k, u in zip(cache.ex, cache.rowkeys, cache.used))
        want = sorted((i, it["key"], it["used"]) for i, items in enumerate(ref.items)
                      for it in items)
        assert kept == want
        n_picked += sum(it["used"] == now + 0.5 for items in ref.items for it in items)
    assert n_picked > 0 and (size > 2 or ref.dropped > 0)     # LRU exercised at size 2


@pytest.mark.parametrize("kind", ["factored matching", "graph", "tree"])
def test_one_slack_equals_joint_qp(kind, rng):
    """One-slack with the cache on the per-example path (an operator without a stacked
    form), on a loopy graph's relaxation (fractional outputs) and on trees: the joint
    QP's optimum."""
    model, X, Y = instance(kind, rng, m=12)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    one = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=True, max_iter=5000).fit(X, Y)
    assert one.converged_ and qp.slack_.max() > 0.1
    assert one.n_oracle_calls_ < one.n_iter_            # the cache made some cuts
    assert abs(one.objective_ - qp.objective_) <= 1e-6 * qp.objective_
    assert one.master_objective_ <= qp.objective_ * (1 + 1e-8)
    np.testing.assert_allclose(one.coef_, qp.coef_, atol=1e-4)


@pytest.mark.parametrize("one_slack", [True, False])
def test_oracle_in_groups_of_examples_changes_nothing(one_slack, rng, monkeypatch):
    """The oracle's dense vectors made a few examples at a time (CHUNK_PARTS parts): the
    same fit, hinge for hinge."""
    model, X, Y = instance("chain", rng, m=15)
    whole = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=one_slack,
                                max_iter=5000).fit(X, Y)
    monkeypatch.setattr(_cp_cache, "CHUNK_PARTS", 40)
    parts = _Parts(prepare(model, X, Y, need_polytopes=False, operators=True))
    groups = [len(idx) for idx, _ in parts.score_chunks(np.zeros(parts.d))]
    assert len(groups) > 3 and sum(groups) == len(X)
    grouped = CuttingPlaneLearner(model, C=1.0, tol=1e-7, one_slack=one_slack,
                                  max_iter=5000).fit(X, Y)
    np.testing.assert_array_equal(grouped.coef_, whole.coef_)
    np.testing.assert_array_equal(grouped.slack_, whole.slack_)
    np.testing.assert_array_equal(grouped.hinge_losses(X, Y), whole.slack_)
