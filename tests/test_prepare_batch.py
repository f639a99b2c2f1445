"""The vectorised preparation (``prepare_batch`` of TreeLabeling and BipartiteMatching)
against the per-example hooks (``compiler.BATCH = False``): the same prepared data on good
sets, and on every bad input the per-example checks refuse (collected from
``graphical.trees.check_tree_example / check_parents / check_labels``,
``utils.validation.check_finite_array / check_real / check_scale``,
``BipartiteMatching.check_x / encode``, ``Polytope.check_output`` and the refusals of
tests/test_errors.py), the same exception type and message."""

import numpy as np
import pytest
import scipy.sparse as sp

import structlp.compiler as compiler
from structlp.compiler import prepare
from structlp.structures import BipartiteMatching, TreeLabeling

K = 3


def chains(m=8, dv=4, de=2, seed=0, trees=False):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for i in range(m):
        n = int(rng.integers(1, 7))
        par = np.arange(-1, n - 1)
        if trees and n > 2:                         # a random tree on the same nodes
            par = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
        X.append({"node_features": rng.normal(size=(n, dv)),
                  "edge_features": rng.normal(size=(n - 1, de)), "parents": par})
        Y.append(rng.integers(0, K, size=n))
    return X, Y


def assignments(m=8, n=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    Y = []
    for _ in range(m):
        y = np.zeros((n, n), dtype=int)
        y[np.arange(n), rng.permutation(n)] = 1
        Y.append(y)
    return X, Y


def both(model, X, Y, **kw):
    """``prepare`` by the hooks, then by the vectorised path: (result or exception) each."""
    out = []
    for batch in (False, True):
        compiler.BATCH = batch
        try:
            out.append(prepare(model, X, Y, **kw))
        except Exception as exc:                     # compared below
            out.append(exc)
        finally:
            compiler.BATCH = True
    return out


def assert_same_data(a, b):
    assert a.n_examples == b.n_examples and a.n_features == b.n_features
    assert np.array_equal(a.d, b.d)
    rng = np.random.default_rng(0)
    for i in range(a.n_examples):
        for f in ("c", "mu_true"):
            u, v = getattr(a, f), getattr(b, f)
            if hasattr(u, "nonzeros"):
                for s, t in zip(u.nonzeros(i), v.nonzeros(i)):
                    assert np.array_equal(s, t)
            else:
                assert np.array_equal(u[i], v[i])
        w = rng.normal(size=a.n_features)
        mu = rng.normal(size=a.Phi[i].shape[0])
        for op in ("scores", "joint"):
            got = [getattr(P, op)(w if op == "scores" else mu) if hasattr(P, op)
                   else (P @ w if op == "scores" else P.T @ mu) for P in (a.Phi[i], b.Phi[i])]
            np.testing.assert_allclose(np.ravel(got[0]), np.ravel(got[1]), rtol=1e-12)
        pa, pb = a.polytopes[i], b.polytopes[i]
        assert (pa is None) == (pb is None)
        if pa is not None:
            assert pa.n_parts == pb.n_parts
            assert (pa.E != pb.E).nnz == 0 and np.array_equal(pa.e, pb.e)
    for s, t in zip(a.scale_bounds, b.scale_bounds):
        np.testing.assert_allclose(s, t, rtol=1e-12)


def assert_same_refusal(ref, got, model=None, X=None, Y=None, **kw):
    assert isinstance(ref, Exception), "the per-example hooks accept this set"
    assert type(got) is type(ref), (type(ref), ref, type(got), got)
    assert str(got) == str(ref)
    if model is not None:           # the vectorised checks found the example themselves
        try:
            suspect = model.prepare_batch(X, Y, **kw)
        except type(ref) as exc:    # the scale check: raised from the packed bounds
            assert str(exc) == str(ref)
            return
        assert isinstance(suspect, int) and f"[{suspect}]" in str(ref), (suspect, ref)


# ---------------------------------------------------------------- good sets
@pytest.mark.parametrize("kw", [dict(need_polytopes=True, operators=True),
                                dict(need_polytopes=False, operators=True)])
@pytest.mark.parametrize("model", [TreeLabeling(K), TreeLabeling(K, loss="absolute"),
                                   TreeLabeling(K, node_weights="position",
                                                normalize_weights=True),
                                   TreeLabeling(K, loss=np.arange(9.0).reshape(3, 3) % 4
                                                * (1 - np.eye(3))),
                                   # normalized weights taking some losses to zero
                                   TreeLabeling(K, loss=5e-324 * (1 - np.eye(3)),
                                                node_weights="position",
                                                normalize_weights=True)])
@pytest.mark.parametrize("trees", [False, True])
def test_trees_same_data(model, kw, trees):
    X, Y = chains(trees=trees)
    ref, got = both(model, X, Y, **kw)
    assert got.c._packed is not None            # made by the vectorised path
    assert_same_data(ref, got)


@pytest.fixture(params=["default chunks", "small chunks"])
def chunks(request, monkeypatch):
    """The vectorised path by its own chunks of examples, or by chunks of 3 examples (2
    for the trees' orders), so that a set of 8 spans several."""
    if request.param == "small chunks":
        from structlp.structures import _batch
        monkeypatch.setattr(_batch, "CHUNK", 3)
        monkeypatch.setattr(_batch, "TREE_CHUNK", 2)
    return request.param


@pytest.mark.parametrize("m", [8, 40])
def test_trees_same_data_by_chunks(chunks, m):
    """Chains and trees mixed, in chunks of chains only and chunks of both."""
    X, Y = chains(m=m, trees=True, seed=m)
    X[:4] = chains(m=4, seed=1)[0]
    Y[:4] = chains(m=4, seed=1)[1]
    for model in (TreeLabeling(K), TreeLabeling(K, node_weights="position",
                                                normalize_weights=True)):
        ref, got = both(model, X, Y, operators=True)
        assert got.X.tree is not None and not got.X.chain.all()
        assert_same_data(ref, got)


@pytest.mark.parametrize("kw", [dict(need_polytopes=True, operators=True),
                                dict(need_polytopes=True, operators=False),
                                dict(need_polytopes=False, operators=True)])
@pytest.mark.parametrize("model", [BipartiteMatching(), BipartiteMatching(R=1, P=2)])
def test_matchings_same_data(model, kw):
    X, Y = assignments()
    ref, got = both(model, X, Y, **kw)
    if kw["operators"]:
        assert got.c._packed is not None
    assert_same_data(ref, got)


def test_inputs_only_the_hooks_take_give_the_same_data():
    """Sparse node features, lists, int32 parents, float labels: the vectorised path
    suspects them and the per-example hooks prepare the set (or it takes them itself)."""
    X, Y = chains()
    X[2] = dict(X[2], node_features=sp.csr_array(X[2]["node_features"]))
    X[3] = dict(X[3], parents=X[3]["parents"].astype(np.int32))
    Y[4] = Y[4].astype(float)
    Y[5] = list(Y[5])
    ref, got = both(TreeLabeling(K), X, Y, operators=True)
    assert_same_data(ref, got)
    Xb, Yb = assignments()
    Xb[3] = Xb[3].tolist()
    Yb[4] = Yb[4].astype(bool)
    ref, got = both(BipartiteMatching(), Xb, Yb, operators=True)
    assert_same_data(ref, got)


def test_a_subclass_overriding_a_hook_goes_through_its_hooks():
    calls = []

    class Counted(TreeLabeling):
        def check_x(self, x):
            calls.append(1)
            return super().check_x(x)

    X, Y = chains()
    assert Counted(K).prepare_batch(X, Y, operators=True) is None
    data = prepare(Counted(K), X, Y, operators=True)
    assert len(calls) == len(X) + 1            # X[0] first, then every example
    assert data.c._packed is None

    class OwnLoss(BipartiteMatching):
        def loss(self, x, y_true, mu):
            return float(np.sum(mu)) - float(np.sum(mu * np.ravel(y_true)))

    Xb, Yb = assignments()
    assert OwnLoss().prepare_batch(Xb, Yb, operators=True) is None
    assert BipartiteMatching(edge_weights=np.ones((3, 3))).prepare_batch(
        Xb, Yb, operators=True) is None


# ---------------------------------------------------------------- bad sets
def _x(i, **kw):
    return lambda X, Y: X.__setitem__(i, dict(X[i], **kw))


def _nodes(i, f):
    return lambda X, Y: X.__setitem__(i, dict(X[i], node_features=f(X[i]["node_features"])))


def _edges(i, f):
    return lambda X, Y: X.__setitem__(i, dict(X[i], edge_features=f(X[i]["edge_features"])))


def _y(i, f):
    return lambda X, Y: Y.__setitem__(i, f(Y[i]))


def _nan(a):
    a = np.array(a, dtype=float)
    a.flat[-1] = np.nan
    return a


def _inf(a):
    a = np.array(a, dtype=float)
    a.flat[0] = -np.inf
    return a


def _set(a, j, v):
    a = np.array(a)
    a[j] = v
    return a


def _missing(i, key):
    return lambda X, Y: X.__setitem__(i, {k: v for k, v in X[i].items() if k != key})


def _tree(i, par):
    def go(X, Y):
        n = len(par)
        X[i] = {"node_features": np.ones((n, 4)), "edge_features": np.ones((max(n - 1, 0), 2)),
                "parents": np.array(par)}
        Y[i] = np.zeros(n, dtype=int)
    return go


TREE_BAD = {
    "x not a dict": lambda X, Y: X.__setitem__(5, [1, 2, 3]),
    "x missing parents": _missing(5, "parents"),
    "x missing node_features": _missing(5, "node_features"),
    "two roots": _tree(5, [-1, -1, 1]),
    "no root": _tree(5, [1, 2, 0]),
    "parent out of range": _tree(5, [-1, 0, 7]),
    "parent below -1": _tree(5, [-1, -3, 1]),
    "own parent": _tree(5, [-1, 1, 1]),
    "cycle": _tree(5, [-1, 2, 3, 1]),
    "parents counting up without a root": _tree(5, [0, 1, 2]),
    "parents counting up from -2": _tree(5, [-2, -1, 0]),
    "parents not integers": _x(5, parents=np.array([-1.0, 0.5, 1.0])),
    "parents not integers, one per node": lambda X, Y: X.__setitem__(5, dict(
        X[5], parents=_set(X[5]["parents"].astype(float), -1, X[5]["parents"][-1] + 0.5))),
    "parents empty": _tree(5, []),
    "parents 2-D": _x(5, parents=np.array([[-1, 0]])),
    "parents strings": _x(5, parents=np.array(["-1", "0"])),
    "node features NaN": _nodes(5, _nan),
    "node features inf": _nodes(5, _inf),
    "node features one row too many": _nodes(5, lambda V: np.vstack([V, V[:1]])),
    "node features 1-D": _nodes(5, lambda V: V.ravel()),
    "node features complex": _nodes(5, lambda V: V + 1j),
    "node features strings": _nodes(5, lambda V: V.astype(str)),
    "node features of another width": _nodes(5, lambda V: np.hstack([V, V])),
    "edge features one row too few": _edges(5, lambda E: E[1:]),
    "edge features NaN": lambda X, Y: (_tree(5, [-1, 0, 1])(X, Y),
                                       _edges(5, _nan)(X, Y)),
    "edge features 3-D": _edges(5, lambda E: E[None]),
    "edge features of another width": _edges(5, lambda E: np.hstack([E, E])),
    "y too short": _y(5, lambda y: y[1:]),
    "y label out of range": _y(5, lambda y: _set(y, 0, K)),
    "y negative label": _y(5, lambda y: _set(y, -1, -1)),
    "y not integers": _y(5, lambda y: y + 0.5),
    "y NaN": _y(5, lambda y: _nan(y)),
    "y inf": _y(5, lambda y: _set(y.astype(float), 0, np.inf)),
    "y complex": _y(5, lambda y: y + 0j),
    "y 2-D": _y(5, lambda y: y[None]),
    "y strings": _y(5, lambda y: y.astype(str)),
    "y None": _y(5, lambda y: None),
    "features too large": _nodes(5, lambda V: V * 1e200),
    "bad at 0": _y(0, lambda y: _set(y, 0, K)),
    "bad at the end": _nodes(7, _nan),
    # an earlier example refused by a later check than a later example: the earlier one
    "y of X[2], x of X[5]": lambda X, Y: (_y(2, lambda y: _set(y, 0, K))(X, Y),
                                          X.__setitem__(5, "no")),
    "NaN of X[3], tree of X[6]": lambda X, Y: (_nodes(3, _nan)(X, Y),
                                               _tree(6, [-1, -1])(X, Y)),
    "too large X[1], y of X[6]": lambda X, Y: (_nodes(1, lambda V: V * 1e200)(X, Y),
                                               _y(6, lambda y: _set(y, 0, -2))(X, Y)),
    "x None": lambda X, Y: X.__setitem__(5, None),
    "x missing edge_features": _missing(5, "edge_features"),
    "parents None": _x(5, parents=None),
    "parents NaN": _x(5, parents=np.array([-1.0, np.nan, 1.0])),
    "parents inf": _x(5, parents=np.array([-1.0, 0.0, np.inf])),
    "parents complex": _x(5, parents=np.array([-1, 0, 1]) + 0j),
    "parents wrapping to two roots": _tree(5, np.array([2 ** 64 - 1, 2 ** 64 - 1, 0],
                                                       dtype=np.uint64)),
    "node features None": _x(5, node_features=None),
    "node features 3-D": _nodes(5, lambda V: V[None]),
    "node features an object None": _nodes(5, lambda V: _set(V.astype(object), 0, None)),
    "node features longdouble beyond float64": _nodes(
        5, lambda V: _set(V.astype(np.longdouble), 0, np.longdouble(1e308) * 10)),
    "node features large (squares overflow)": _nodes(5, lambda V: V * 1e160),
    "edge features None": _x(5, edge_features=None),
    "edge features inf": lambda X, Y: (_tree(5, [-1, 0, 1])(X, Y),
                                       _edges(5, _inf)(X, Y)),
    "edge features complex": _edges(5, lambda E: E + 1j),
    "edge features strings": _edges(5, lambda E: E.astype(str)),
    "edge features 1-D": lambda X, Y: (_tree(5, [-1, 0, 1])(X, Y),
                                       _edges(5, lambda E: E.ravel())(X, Y)),
    "edge features too large": lambda X, Y: (_tree(5, [-1, 0, 1])(X, Y),
                                             _edges(5, lambda E: E * 1e200)(X, Y)),
    "one node, edge features empty 1-D": lambda X, Y: (_tree(5, [-1])(X, Y),
                                                       _x(5, edge_features=np.zeros(0))(X, Y)),
    "one node, edge features of no width": lambda X, Y: (
        _tree(5, [-1])(X, Y), _x(5, edge_features=np.zeros((0, 0)))(X, Y)),
    "y too long": _y(5, lambda y: np.append(y, 0)),
    "y 0-d": _y(5, lambda y: np.int64(0)),
    "y objects": _y(5, lambda y: y.astype(object)),
    "y huge float": _y(5, lambda y: _set(y.astype(float), 0, 1e300)),
    "y huge unsigned": _y(5, lambda y: _set(y.astype(np.uint64), 0, 2 ** 64 - 1)),
    "y label k - 0.5": _y(5, lambda y: _set(y.astype(float), 0, K - 0.5)),
    "node features NaN at 0": _nodes(0, _nan),
    "node features NaN in every example": lambda X, Y: [_nodes(i, _nan)(X, Y)
                                                        for i in range(1, len(X))],
}


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("trees", [False, True])
@pytest.mark.parametrize("case", sorted(TREE_BAD))
def test_trees_refuse_alike(case, trees, chunks):
    X, Y = chains(trees=trees)
    TREE_BAD[case](X, Y)
    ref, got = both(TreeLabeling(K), X, Y, operators=True)
    assert_same_refusal(ref, got, TreeLabeling(K), X, Y, operators=True)


@pytest.mark.parametrize("model", [TreeLabeling(1), TreeLabeling(K, normalize_weights="no"),
                                   TreeLabeling(K, loss="bogus"),
                                   TreeLabeling(K, loss=-np.ones((K, K))),
                                   TreeLabeling(K, node_weights="bogus")])
def test_trees_refuse_bad_parameters_alike(model):
    X, Y = chains()
    assert_same_refusal(*both(model, X, Y, operators=True))


def _shape(i, shape):
    def go(X, Y):
        X[i] = np.ones(shape)
        Y[i] = np.eye(*shape[:2], dtype=int)
    return go


MATCHING_BAD = {
    "x 2-D": lambda X, Y: X.__setitem__(5, X[5][0]),
    "x NaN": lambda X, Y: X.__setitem__(5, _nan(X[5])),
    "x inf": lambda X, Y: X.__setitem__(5, _inf(X[5])),
    "x complex": lambda X, Y: X.__setitem__(5, X[5] + 1j),
    "x strings": lambda X, Y: X.__setitem__(5, X[5].astype(str)),
    "x of another width": lambda X, Y: X.__setitem__(5, np.concatenate([X[5], X[5]], 2)),
    "x without columns": _shape(5, (3, 0, 2)),
    "x without an assignment": _shape(5, (2, 3, 2)),
    "y not 0/1": lambda X, Y: Y.__setitem__(5, Y[5] * 0.5),
    "y of another shape": lambda X, Y: Y.__setitem__(5, Y[5][:2]),
    "y NaN": lambda X, Y: Y.__setitem__(5, _nan(Y[5])),
    "y two rows to a column": lambda X, Y: Y.__setitem__(5, _set(Y[5], 0, 1)),
    "y empty": lambda X, Y: Y.__setitem__(5, np.zeros_like(Y[5])),
    "y strings": lambda X, Y: Y.__setitem__(5, Y[5].astype(str)),
    "features too large": lambda X, Y: X.__setitem__(5, X[5] * 1e200),
    "bad at 0": lambda X, Y: Y.__setitem__(0, np.zeros_like(Y[0])),
    "y of X[2], x of X[6]": lambda X, Y: (Y.__setitem__(2, Y[2] * 2),
                                          X.__setitem__(6, X[6][0])),
    "x None": lambda X, Y: X.__setitem__(5, None),
    "x 4-D": lambda X, Y: X.__setitem__(5, X[5][None]),
    "x longdouble beyond float64": lambda X, Y: X.__setitem__(
        5, _set(X[5].astype(np.longdouble), 0, np.longdouble(1e308) * 10)),
    "x large (squares overflow)": lambda X, Y: X.__setitem__(5, X[5] * 1e160),
    "y None": lambda X, Y: Y.__setitem__(5, None),
    "y inf": lambda X, Y: Y.__setitem__(5, _inf(Y[5])),
    "y complex": lambda X, Y: Y.__setitem__(5, Y[5] + 0j),
    "y 3-D": lambda X, Y: Y.__setitem__(5, Y[5][None]),
    "y negative": lambda X, Y: Y.__setitem__(5, -Y[5]),
    "y a 2": lambda X, Y: Y.__setitem__(5, 2 * Y[5]),
    "y a row taking two columns": lambda X, Y: Y.__setitem__(
        5, np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]])),
    "x NaN at 0": lambda X, Y: X.__setitem__(0, _nan(X[0])),
}


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("kw", [dict(need_polytopes=True, operators=True),
                                dict(need_polytopes=True, operators=False)])
@pytest.mark.parametrize("case", sorted(MATCHING_BAD))
def test_matchings_refuse_alike(case, kw):
    X, Y = assignments()
    MATCHING_BAD[case](X, Y)
    ref, got = both(BipartiteMatching(), X, Y, **kw)
    assert_same_refusal(ref, got, BipartiteMatching(), X, Y, **kw)


#: the refusals that need the polytopes (the unit box takes these outputs)
POLYTOPE_ONLY = {"y two rows to a column", "y empty", "y a row taking two columns",
                 "bad at 0"}


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("case", sorted(set(MATCHING_BAD) - POLYTOPE_ONLY))
def test_matchings_refuse_alike_without_polytopes(case):
    kw = dict(need_polytopes=False, operators=True)
    X, Y = assignments()
    MATCHING_BAD[case](X, Y)
    ref, got = both(BipartiteMatching(), X, Y, **kw)
    assert_same_refusal(ref, got, BipartiteMatching(), X, Y, **kw)


@pytest.mark.parametrize("change", [
    _nodes(5, lambda V: V.astype(object)), _nodes(5, lambda V: (V * 8).astype(np.int16)),
    _nodes(5, lambda V: V > 0), _edges(5, lambda E: E.astype(np.float32)),
    _y(5, lambda y: y.astype(np.uint8)),
    _y(5, lambda y: y.astype(np.float16)),
    # not C-contiguous: copied by numpy rather than joined as bytes
    _nodes(5, np.asfortranarray), _edges(5, lambda E: np.asfortranarray(E)[:, ::-1]),
    lambda X, Y: X.__setitem__(5, dict(X[5], parents=np.repeat(X[5]["parents"], 2)[::2])),
    _y(5, lambda y: np.repeat(y, 2)[::2]), _y(5, lambda y: y.astype(np.int32))])
def test_tree_inputs_of_other_dtypes_give_the_same_data(change):
    """Node features of objects, ints or bools, float32 edge features, labels of uint8,
    float16 or int32, arrays that are not C-contiguous: the vectorised path takes them (or
    suspects them and the per-example hooks take the set), with the hooks' data."""
    X, Y = chains()
    change(X, Y)
    ref, got = both(TreeLabeling(K), X, Y, operators=True)
    assert_same_data(ref, got)


@pytest.mark.parametrize("change", [
    lambda X, Y: X.__setitem__(5, X[5].astype(object)),
    lambda X, Y: Y.__setitem__(5, Y[5].astype(object)),
    lambda X, Y: X.__setitem__(5, (X[5] * 8).astype(np.int8)),
    lambda X, Y: (X.__setitem__(5, np.ones((4, 4, 2))), Y.__setitem__(5, np.eye(4)))])
def test_matching_inputs_of_other_dtypes_or_shapes_give_the_same_data(change):
    """Edge features or assignments of objects, int8 features, an example of another
    shape: taken by the vectorised path or by the hooks, with the hooks' data."""
    X, Y = assignments()
    change(X, Y)
    ref, got = both(BipartiteMatching(), X, Y, operators=True)
    assert_same_data(ref, got)


def test_box_only_without_polytopes():
    """Without polytopes an output is checked against the unit box only: the two rows to
    a column are accepted by both paths, a 0.5 refused by both."""
    X, Y = assignments()
    Y[5] = _set(Y[5], 0, 1)
    ref, got = both(BipartiteMatching(), X, Y, need_polytopes=False, operators=True)
    assert_same_data(ref, got)
    Y[5] = Y[5] * 0.5
    assert_same_refusal(*both(BipartiteMatching(), X, Y, need_polytopes=False,
                              operators=True))


def test_packed_examples_behave_as_lists():
    """The prepared examples and features of the vectorised path: read by index (kept),
    negative index, slice, iteration (made afresh), pickled, and the same as the hooks'."""
    import pickle
    X, Y = chains(trees=True)
    ref, got = both(TreeLabeling(K), X, Y, operators=True)
    assert len(got.X) == len(got.Phi) == len(X)
    with pytest.raises(IndexError):
        got.X[len(X)]
    assert got.X[-1] is got.X[len(X) - 1]               # kept once read by index
    assert [x.n_nodes for x in got.X[2:5]] == [x.n_nodes for x in ref.X[2:5]]
    for a, b in zip(got.X, ref.X):
        assert np.array_equal(a.node_features, b.node_features)
        assert np.array_equal(a.edge_features, b.edge_features)
        for f in ("parents", "order", "edge_child", "edge_of"):
            assert np.array_equal(getattr(a, f), getattr(b, f))
    assert np.array_equal(got.n_parts, ref.n_parts)
    again = pickle.loads(pickle.dumps(got))
    w = np.random.default_rng(1).normal(size=got.n_features)
    for i in range(len(X)):
        np.testing.assert_array_equal(again.Phi[i].scores(w), ref.Phi[i].scores(w))
        np.testing.assert_array_equal(again.c[i], ref.c[i])
    Xb, Yb = assignments()
    ref, got = both(BipartiteMatching(), Xb, Yb, operators=False)
    assert all(np.array_equal(a, b) for a, b in zip(got.X, ref.X))
    assert all(np.array_equal(a, b) for a, b in zip(got.Phi, ref.Phi))


@pytest.mark.parametrize("trees", [False, True])
def test_compiled_tree_blocks_and_fit_identical(trees, chunks):
    """The compiled tree blocks packed from either path hold the same arrays, and a
    sharded partition (no cluster: its tasks called in process) reaches the same
    contribution after a pass."""
    from structlp.learners import _fw_tree_store, sharded
    from structlp.learners._fw_tree_store import _TreeBlocks
    X, Y = chains(m=12, trees=trees, seed=3)
    if trees:                       # chains only in the first chunks
        X[:4], Y[:4] = chains(m=4, seed=1)
    shards = []
    for batch in (False, True):
        compiler.BATCH = batch
        try:
            shards.append(sharded._make_shard(list(zip(X, Y)), TreeLabeling(K), 0, None, {}))
        finally:
            compiler.BATCH = True
    a, b = shards
    assert a.tree and b.tree and isinstance(b.blocks, _TreeBlocks)
    # the vectorised set is packed from its arrays, the hooks' from their examples
    assert _fw_tree_store._packed_trees(b.data) and not _fw_tree_store._packed_trees(a.data)
    for f in ("V", "E", "noff", "order", "parents", "edge_of", "cn", "ytrue", "uniform"):
        assert np.array_equal(getattr(a.blocks, f), getattr(b.blocks, f)), f
    outs = [sharded._local_pass(s, np.zeros(a.data.n_features), 1.0, 1, [0, 0, 1], 1, True,
                                3, 2, 0) for s in shards]
    np.testing.assert_array_equal(outs[0]["w"], outs[1]["w"])
    assert outs[0]["ell"] == outs[1]["ell"]


@pytest.mark.parametrize("batch", [False, True])
def test_tree_blocks_packed_by_chunks_hold_each_example(batch, monkeypatch):
    """The compiled tree blocks' arrays, packed by chunks of 3 examples, against each
    example on its own: its node losses and true labels (from the dense c_i and y_i), its
    shape (graphical.trees.tree_shape), whether its edges share their features."""
    from structlp.graphical.trees import tree_shape
    from structlp.learners import _fw_tree_store
    monkeypatch.setattr(_fw_tree_store, "_CHUNK", 3)
    X, Y = chains(m=11, trees=True, seed=5)
    for i in (1, 4, 8):                          # constant edge features
        X[i] = dict(X[i], edge_features=np.ones_like(X[i]["edge_features"]))
    model = TreeLabeling(K, loss="absolute", node_weights="position")
    compiler.BATCH = batch
    try:
        data = prepare(model, X, Y, need_polytopes=False, operators=True)
    finally:
        compiler.BATCH = True
    assert _fw_tree_store._packed_trees(data) == batch
    blocks = _fw_tree_store._TreeBlocks(model, data)
    for i, (x, y) in enumerate(zip(X, Y)):
        b, e = blocks.noff[i], blocks.noff[i + 1]
        n = len(y)
        assert e - b == n
        np.testing.assert_array_equal(blocks.cn[b:e].ravel(), data.c[i][:n * K])
        np.testing.assert_array_equal(blocks.ytrue[b:e], y)
        par, order, _, edge_of = tree_shape(x["parents"])
        for got, ref in ((blocks.parents, par), (blocks.order, order),
                         (blocks.edge_of, edge_of)):
            np.testing.assert_array_equal(got[b:e], ref)
        E = x["edge_features"]
        assert blocks.uniform[i] == (E == E[:1]).all()


@pytest.mark.parametrize("hook", ["check_x", "encode", "loss", "loss_coefficients", "features",
                                  "feature_operator", "inference", "inference_parts",
                                  "polytope"])
@pytest.mark.parametrize("base", [TreeLabeling, BipartiteMatching])
def test_any_overridden_hook_means_the_per_example_path(base, hook):
    """The lowest override wins: a subclass overriding any hook (here calling the base's
    own) is prepared through its hooks, and gets the same data as the built-in."""
    own = getattr(base, hook)
    sub = type(f"Own{hook}", (base,), {hook: lambda self, *a, _f=own: _f(self, *a)})
    model = sub(K) if base is TreeLabeling else sub()
    X, Y = chains() if base is TreeLabeling else assignments()
    assert model.prepare_batch(X, Y, operators=True) is None
    if hook == "loss":            # below loss_coefficients: the default loss, another loss
        return
    got = prepare(model, X, Y, operators=True)
    assert got.c._packed is None
    ref = prepare(TreeLabeling(K) if base is TreeLabeling else BipartiteMatching(), X, Y,
                  operators=True)
    assert ref.c._packed is not None
    assert_same_data(got, ref)


def test_tree_shapes_at_once_match_the_per_tree_check():
    """The breadth-first orders and edge numbering of many trees at once (roots anywhere,
    a deep one too) are those of graphical.trees.tree_shape, tree by tree; a parent array
    that is not a tree is found."""
    from structlp.graphical.trees import tree_shape
    from structlp.structures._batch import _tree_shapes
    rng = np.random.default_rng(0)
    Ps = []
    for n in list(rng.integers(2, 15, size=300)) + [200]:
        perm = rng.permutation(n)
        par = np.full(n, -1)
        for j in range(1, n):
            par[perm[j]] = perm[rng.integers(max(0, j - 2), j)]   # deep: near the last
        Ps.append(par)
    P, O, C, E, off, eoff = _tree_shapes(np.concatenate(Ps), np.array([len(p) for p in Ps]))
    for i, p in enumerate(Ps):
        got = (P[off[i]:off[i + 1]], O[off[i]:off[i + 1]], C[eoff[i]:eoff[i + 1]],
               E[off[i]:off[i + 1]])
        for a, b in zip(tree_shape(p.astype(np.int64)), got):
            np.testing.assert_array_equal(a, b)
    for bad in ([-1, 2, 1, 2], [-1, -1, 0], [0, 1, 2], [-1, 5, 0], [-1, 1, 0], [-1, 0, -3]):
        assert _tree_shapes(np.array([-1, 0, 0] + bad), np.array([3, len(bad)])) == 1


@pytest.mark.parametrize("junk", ["junk", True, -1, 99, 2.5])
def test_a_prepare_batch_returning_something_else_is_ignored(junk):
    class Odd(BipartiteMatching):
        def prepare_batch(self, X, Y, need_polytopes=True, operators=False):
            return junk

    X, Y = assignments()
    assert_same_data(prepare(Odd(), X, Y, operators=True),
                     prepare(BipartiteMatching(), X, Y, operators=True))
