"""MultiLabel against enumeration; the label-Hamming loss; the loss() hook contract."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from oracles import enumerated_qp
from structlp import FrankWolfeLearner, MaxMarginLearner, StructuredModel
from structlp.exceptions import InvalidInputError, InvalidOutputError, InvalidParameterError
from structlp.inference import solve_stacked_lp
from structlp.structures.multilabel import MultiLabel, chow_liu_tree


def _data(rng, m=8, L=4, d=3):
    W = rng.normal(size=(L, d))
    X = [rng.normal(size=d) for _ in range(m)]
    Y = [((W @ x + 0.5 * rng.normal(size=L)) > 0).astype(int) for x in X]
    return X, Y


@pytest.mark.parametrize("edges", [None, "chain", "full", np.array([[0, 2], [1, 3], [0, 3]])])
def test_inference_equals_enumeration(edges, rng):
    model = MultiLabel(5, edges=edges)
    x = rng.normal(size=2)
    outs = [np.array(y) for y in itertools.product((0, 1), repeat=5)]
    P = model.polytope(x)
    for _ in range(5):
        s = rng.normal(size=model.n_parts(x))
        best = max(outs, key=lambda y: s @ model.encode(x, y))
        np.testing.assert_array_equal(model.inference(x, s), best)
        lp = solve_stacked_lp([P], [s])[0]                  # exact polytope: integral
        assert s @ lp == pytest.approx(s @ model.encode(x, best), abs=1e-8)


@pytest.mark.parametrize("edges", ["chain", "full"])
def test_joint_qp_equals_enumerated_qp(edges, rng):
    X, Y = _data(rng, L=4)
    model = MultiLabel(4, edges=edges)
    outs = [np.array([model.encode(x, np.array(y)) for y in itertools.product((0, 1), repeat=4)])
            for x in X]
    mts = [model.encode(x, y) for x, y in zip(X, Y)]
    losses = [np.abs(o[:, :4] - mt[:4]).sum(axis=1) for o, mt in zip(outs, mts)]
    enum = enumerated_qp([model.features(x).toarray() for x in X], mts, outs, losses, 1.0)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    np.testing.assert_allclose(qp.objective_, enum, rtol=1e-6)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-5, max_iter=3000, random_state=0).fit(X, Y)
    assert enum * (1 - 1e-6) <= fw.objective_ <= enum + fw.duality_gap_ + 1e-7
    # the LP relaxation of the full label graph is above the exact QP
    relaxed = MaxMarginLearner(MultiLabel(4, edges=edges, max_exact_labels=0), C=1.0).fit(X, Y)
    assert relaxed.objective_ >= enum * (1 - 1e-6)


def test_label_hamming_loss_counts_false_positives(rng):
    model = MultiLabel(4, edges="full")
    x = rng.normal(size=2)
    y = np.array([1, 0, 0, 1])
    assert model.task_loss(x, y, np.array([1, 1, 1, 1])) == 2.0          # two false positives
    assert model.task_loss(x, y, np.array([0, 0, 0, 1])) == 1.0          # one false negative
    assert model.task_loss(x, y, y) == 0.0
    for z in itertools.product((0, 1), repeat=4):
        assert model.task_loss(x, y, np.array(z)) == np.sum(np.array(z) != y)


def test_bad_label_vectors_and_edges(rng):
    model = MultiLabel(3)
    x = rng.normal(size=2)
    with pytest.raises(InvalidOutputError, match="shape \\(3,\\)"):
        model.encode(x, np.array([1, 0]))
    with pytest.raises(InvalidOutputError, match="0/1"):
        model.encode(x, np.array([1, 2, 0]))
    with pytest.raises(InvalidParameterError, match="chow_liu_tree"):
        MultiLabel(3, edges="tree").check_x(x)
    with pytest.raises(InvalidParameterError, match="self-loop"):
        MultiLabel(3, edges=[[1, 1]]).check_x(x)
    with pytest.raises(InvalidParameterError, match="outside 0..2"):
        MultiLabel(3, edges=[[0, 3]]).check_x(x)


def test_chow_liu_tree_links_dependent_labels(rng):
    a = rng.integers(0, 2, size=200)
    c = rng.integers(0, 2, size=200)
    Y = np.column_stack([a, c, a, 1 - c])             # 0 ~ 2 and 1 ~ 3 exactly
    T = {tuple(sorted(e)) for e in chow_liu_tree(Y).tolist()}
    assert len(T) == 3 and (0, 2) in T and (1, 3) in T


class _Recorder(StructuredModel):
    """Records what its loss() hook receives."""

    seen: list = []

    def n_parts(self, x):
        return 3

    def features(self, x):
        return x

    def constraints(self, x, mu):
        return [cp.sum(mu) == 1, mu >= 0, mu <= 1]

    def check_x(self, x):
        return np.asarray(x, dtype=float) * 2.0          # a converted example

    def encode(self, x, y):
        return np.eye(3)[int(y)]                         # y is a class index, not a vector

    def decode(self, x, mu):
        return int(np.argmax(mu))

    def loss(self, x, y_true, mu):
        type(self).seen.append((x, y_true, mu))
        return 1 - self.encode(x, y_true) @ mu


def test_loss_hook_receives_the_checked_x_the_raw_y_and_the_mu_variable(rng):
    X = [rng.normal(size=(3, 2)) for _ in range(4)]
    Y = [0, 2, 1, 2]
    _Recorder.seen = []
    MaxMarginLearner(_Recorder(), C=1.0).fit(X, Y)
    assert len(_Recorder.seen) == 4
    for (x, y_true, mu), x0, y0 in zip(_Recorder.seen, X, Y):
        np.testing.assert_array_equal(x, 2.0 * x0)      # check_x's conversion
        assert y_true == y0 and isinstance(y_true, int)  # as given, not encoded
        assert isinstance(mu, cp.Variable) and mu.shape == (3,)


@pytest.mark.parametrize("Y", [np.ones((2, 2)) + 1j, np.zeros((0, 3)), np.array([[0, 2]]),
                               np.array([[0.0, np.nan]]), np.ones(3)])
def test_chow_liu_tree_refuses_bad_labels(Y):
    # found by the fuzz suite: complex labels lost their imaginary part and an empty
    # label matrix gave a tree of NaN mutual informations, both silently
    with pytest.raises(InvalidInputError, match="Y"):
        chow_liu_tree(Y)


def test_empty_feature_vector_is_refused():
    # found by the fuzz suite: x of shape (0,) was accepted, giving a model without
    # label weights (every label scored by its edges only)
    with pytest.raises(InvalidInputError, match="x must be a feature vector"):
        MultiLabel(3).check_x(np.zeros(0))


@pytest.mark.parametrize("L", [3, 4, 7, 9])
def test_exact_inference_is_the_first_best_of_all_outputs(L, rng):
    """The exact route (no 2^L table: a product of the two halves' tables) returns the
    best output of the enumeration and, on ties (integer scores), the first in
    itertools.product order, as an argmax over all outputs."""
    for edges in ("full", np.array([(i, j) for i, j in itertools.combinations(range(L), 2)
                                    if rng.random() < 0.5] + [(0, 1), (1, 2), (0, 2)])):
        edges = edges if isinstance(edges, str) else np.unique(edges, axis=0)
        model = MultiLabel(L, edges=edges, max_exact_labels=L)
        x = rng.normal(size=2)
        assert model._kind() == "hull"
        outs = [np.array(y) for y in itertools.product((0, 1), repeat=L)]
        enc = np.array([model.encode(x, y) for y in outs])
        for trial in range(6):
            s = rng.normal(size=model.n_parts(x))
            if trial % 2:
                s = np.round(s)                  # ties between outputs
            first = outs[int(np.argmax(enc @ s))]
            y = model.inference(x, s)
            np.testing.assert_array_equal(y, first)
            np.testing.assert_array_equal(model.inference_parts(x, s), model.encode(x, first))


def test_exact_tables_are_built_once_per_label_count_and_never_saved(rng, monkeypatch,
                                                                    tmp_path):
    import pickle

    from structlp import persistence
    from structlp.structures import multilabel

    built = []
    real = multilabel._bits
    monkeypatch.setattr(multilabel, "_bits", lambda L: built.append(L) or real(L))
    model = MultiLabel(6, edges="full")
    x = rng.normal(size=2)
    for _ in range(4):
        model.inference(x, rng.normal(size=model.n_parts(x)))
    assert built == [3, 3]                       # the two halves, once
    model.polytope(x)
    model.polytope(x)
    assert built == [3, 3, 6]                    # the hull's 2^L outputs, once
    model.n_labels = 7
    model.inference(x, rng.normal(size=model.n_parts(x)))
    assert built[3:] == [3, 4]                   # another label count: new tables
    # the cache is private: not a parameter, not saved, not pickled
    assert "_exact_tables" in vars(model)
    assert set(persistence.init_params(model)) == {"n_labels", "edges", "max_exact_labels"}
    persistence.save(model, tmp_path / "m.structlp")
    loaded = persistence.load(tmp_path / "m.structlp")
    assert "_exact_tables" not in vars(loaded)
    assert persistence.init_params(loaded) == persistence.init_params(model)
    clone = pickle.loads(pickle.dumps(model))
    assert "_exact_tables" not in vars(clone)
    s = rng.normal(size=model.n_parts(x))
    np.testing.assert_array_equal(clone.inference(x, s), model.inference(x, s))
    np.testing.assert_array_equal(loaded.inference(x, s), model.inference(x, s))


def test_exact_inference_on_20_labels_builds_no_table_of_all_outputs(rng, monkeypatch):
    """20 labels, all pairs: the 2^20 outputs are never listed (the earlier table was
    2^20 x 210 floats, 1.7 GB, rebuilt on every call)."""
    model = MultiLabel(20, edges="full", max_exact_labels=20)
    monkeypatch.setattr(MultiLabel, "_configs", lambda self: pytest.fail("2^L table built"))
    x = rng.normal(size=2)
    s = rng.normal(size=model.n_parts(x))
    mu = model.inference_parts(x, s)
    y = model.inference(x, s)
    np.testing.assert_array_equal(mu, model.encode(x, y))
    # no single flip of a label improves it (a necessary condition of the optimum)
    for j in range(20):
        z = y.copy()
        z[j] = 1 - z[j]
        assert s @ model.encode(x, z) <= s @ mu + 1e-12
