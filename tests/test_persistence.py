"""Safe persistence, pickling, deep copies, clones and atomic fits of every estimator.

Oracle: the original fitted estimator.  A loaded (or unpickled, or deep-copied)
estimator must predict exactly what the original predicts, with bit-identical
weights; a tampered file must be refused without running anything from it.
"""

import copy
import hashlib
import io
import json
import pickle
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import structlp
from structlp import (CuttingPlaneLearner, FrankWolfeLearner, InvalidOutputError,
                      MaxMarginLearner, PersistenceError, Polytope, StructlpError,
                      SubgradientLearner)
from structlp.agm import AdversarialGraphicalModel, TreeCRF
from structlp.persistence import FORMAT_VERSION, fitted_attributes, library_classes
from structlp.sequence import (BigramFeatures, EditDistance, EmissionFeatures, FunctionFeatures,
                               HammingLoss, NGramLoss, SequenceSSVM, SmithWaterman,
                               SoftmaxMarginLearner, StackedFeatures, ZeroLoss)
from structlp.structures import (BipartiteMatching, Matching, PerfectMatching, SpanningTree,
                                 TreeLabeling)

sys.path.insert(0, str(Path(__file__).parent))
from agm_oracles import random_tree_data  # noqa: E402
from test_kernels import assignments as noisy_assignments  # noqa: E402


class ScaledAssignment(BipartiteMatching):
    """A user-declared model: an assignment whose part features are scaled."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale

    def features(self, x):
        return self.scale * super().features(x)


def assignments(rng, m=10, n=4, d=3):
    w0 = rng.normal(size=d)
    return noisy_assignments(rng, m, n, d, lambda x: x @ w0, noise=1.0)


def sequences(rng, m=6, l=5, k=3):
    Y = [rng.integers(0, k, l) for _ in range(m)]
    X = [np.where(rng.random(l) < 0.8, y, rng.integers(0, k, l)) for y in Y]
    return X, Y


def _precomputed(X, Y, Xn):
    from structlp.compiler import prepare
    Phi = prepare(BipartiteMatching(), X, Y).stacked_features().toarray()
    Pn = np.vstack([x.reshape(-1, x.shape[-1]) for x in Xn])
    return Phi @ Phi.T + 1.0, Pn @ Phi.T + 1.0


def _cases():
    """name -> (estimator, X, Y, X_new, fit kwargs, predict kwargs)."""
    rng = np.random.default_rng(7)
    X, Y = assignments(rng)
    Xn, _ = assignments(rng, m=4)
    K, Kn = _precomputed(X, Y, Xn)
    Xt, Yt = random_tree_data(rng, 4, 4)
    Xtn, _ = random_tree_data(rng, 3, 4)
    Xs, Ys = sequences(rng)
    Xsn, _ = sequences(rng, m=3)
    feats = StackedFeatures([EmissionFeatures(3, 3), BigramFeatures(3)])
    bm = BipartiteMatching()
    return {
        "primal": (MaxMarginLearner(bm), X, Y, Xn, {}, {}),
        "dual_linear": (MaxMarginLearner(bm, dual=True), X, Y, Xn, {}, {}),
        "rbf": (MaxMarginLearner(bm, dual=True, kernel="rbf", gamma=0.3), X, Y, Xn, {}, {}),
        "poly": (MaxMarginLearner(bm, dual=True, kernel="poly", degree=2), X, Y, Xn, {}, {}),
        "precomputed": (MaxMarginLearner(bm, dual=True, kernel="precomputed"), X, Y, Xn,
                        {"kernel_matrix": K}, {"kernel_matrix": Kn}),
        "certificate": (MaxMarginLearner(bm, formulation="certificate"), X, Y, Xn, {}, {}),
        "frank_wolfe": (FrankWolfeLearner(bm, max_iter=20), X, Y, Xn, {}, {}),
        "cutting_plane": (CuttingPlaneLearner(bm), X, Y, Xn, {}, {}),
        "subgradient": (SubgradientLearner(bm, max_iter=20), X, Y, Xn, {}, {}),
        "user_model": (MaxMarginLearner(ScaledAssignment(scale=2.0)), X, Y, Xn, {}, {}),
        "agm_qp": (AdversarialGraphicalModel(3, method="qp"), Xt, Yt, Xtn, {}, {}),
        "agm_subgradient": (AdversarialGraphicalModel(3, max_epochs=5, random_state=0),
                            Xt, Yt, Xtn, {}, {}),
        "tree_crf": (TreeCRF(3), Xt, Yt, Xtn, {}, {}),
        "softmax_margin": (SoftmaxMarginLearner(EditDistance(cap=3), feats, max_iter=30),
                           Xs, Ys, Xsn, {}, {}),
        "sequence_ssvm": (SequenceSSVM(NGramLoss(2), feats, max_iter=10), Xs, Ys, Xsn, {}, {}),
    }


CASES = _cases()


@pytest.fixture(scope="module")
def fitted():
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter warnings of the deliberately short fits
        for name, (est, X, Y, Xn, fit_kw, pred_kw) in CASES.items():
            out[name] = (est.fit(X, Y, **fit_kw), Xn, pred_kw)
    return out


def _outputs(est, Xn, kw):
    """Everything an estimator computes on new data: predictions and scores."""
    out = {"predict": est.predict(Xn, **kw)}
    for method in ("decision_scores", "decision_potentials", "predict_proba"):
        if hasattr(est, method):
            out[method] = getattr(est, method)(Xn, **kw)
    return out


def assert_same(a, b, where="value"):
    """Exact (bitwise) equality of nested plain data, types included."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif sp.issparse(a):
        assert a.format == b.format and a.shape == b.shape, where
        assert (a != b).nnz == 0, where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif structlp.persistence._is_persistable(a):
        assert_same(structlp.persistence.init_params(a), structlp.persistence.init_params(b),
                    f"{where} params")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def _same_fit(est, other, Xn, kw):
    assert_same(fitted_attributes(est), fitted_attributes(other), "fitted attributes")
    assert_same(_outputs(est, Xn, kw), _outputs(other, Xn, kw), "outputs")
    assert_same(est.get_params(), other.get_params(), "params")


# ------------------------------------------------------------------ save / load
@pytest.mark.parametrize("name", list(CASES))
def test_save_load_predicts_identically(fitted, name, tmp_path):
    est, Xn, kw = fitted[name]
    path = tmp_path / f"{name}.structlp"
    structlp.save(est, path)
    classes = [ScaledAssignment] if name == "user_model" else None
    loaded = structlp.load(path, classes=classes)
    assert type(loaded) is type(est) and loaded is not est
    _same_fit(est, loaded, Xn, kw)
    for attr in ("coef_", "dual_coef_"):
        if hasattr(est, attr):
            np.testing.assert_array_equal(getattr(loaded, attr), getattr(est, attr))
    assert "problem_" not in vars(loaded) and "_compiled" not in vars(loaded)
    # the file holds no pickle: every array member loads with allow_pickle=False
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read("structlp.json"))
        for member in meta["arrays"]:
            np.load(io.BytesIO(z.read(member)), allow_pickle=False)
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["class"] == f"{type(est).__module__}.{type(est).__qualname__}"
    assert set(meta["fitted"]) == set(fitted_attributes(est))


@pytest.mark.parametrize("model", [
    BipartiteMatching(R=2, P=1, edge_weights=np.arange(4.0).reshape(2, 2)), SpanningTree(),
    PerfectMatching(), Matching(), TreeLabeling(3, loss="absolute", node_weights=[1.0, 2.0]),
    Polytope(A=sp.csr_array(np.array([[1.0, 1.0, 0.0]])), b=[1.0], E=[[0.0, 1.0, 1.0]],
             e=[1.0], ub=[1.0, np.inf, 1.0]),
    EditDistance(sub=2, cap=4), SmithWaterman(match=3, band=2), NGramLoss(n=3, smoothing=0.5),
    HammingLoss(), ZeroLoss(), BigramFeatures(4), EmissionFeatures(3, 5, window=1),
    StackedFeatures([EmissionFeatures(2, 2), BigramFeatures(2)]),
    CuttingPlaneLearner(SpanningTree(), C=2.0, solver="ECOS", solver_opts={"max_iters": 50}),
])
def test_every_model_object_round_trips(model, tmp_path):
    structlp.save(model, tmp_path / "m")
    loaded = structlp.load(tmp_path / "m")
    assert type(loaded) is type(model)
    assert_same(structlp.persistence.init_params(model), structlp.persistence.init_params(loaded))
    if isinstance(model, Polytope):
        for attr in ("A", "b", "E", "e", "lb", "ub"):
            assert_same(getattr(model, attr), getattr(loaded, attr), attr)


def test_library_allow_list_covers_every_public_class():
    allowed = set(library_classes().values())
    for module in (structlp, structlp.structures, structlp.agm, structlp.sequence):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and structlp.persistence._is_persistable_class(obj):
                assert obj in allowed, name


def test_file_objects_and_values_of_every_plain_type(tmp_path):
    """Every plain type of fitted state survives exactly (types included)."""
    est = MaxMarginLearner(BipartiteMatching())
    est.misc_ = {"int": 3, "float": 0.1, "nan": float("nan"), "inf": -float("inf"),
                 "bool": True, "none": None, "str": "é", "tuple": (1, (2.5, "a")),
                 "list": [np.int64(4), np.float32(1.5), np.arange(3, dtype=np.int16),
                          np.str_("s"), np.float64(2.0), np.bool_(True)],
                 7: "int key", (1, 2): "tuple key",
                 "csr": sp.csr_array(np.eye(3)), "csc_matrix": sp.csc_matrix(np.eye(2)),
                 "coo": sp.coo_array(np.ones((2, 3))), "bool_array": np.array([True, False]),
                 "empty": np.zeros((0, 4)), "fortran": np.asfortranarray(np.ones((2, 3)))}
    buf = io.BytesIO()
    structlp.save(est, buf)
    loaded = structlp.load(io.BytesIO(buf.getvalue()))
    assert_same(est.misc_, loaded.misc_)


def test_unsaveable_values_are_named(tmp_path):
    est = MaxMarginLearner(BipartiteMatching(), dual=True, kernel=lambda A, B: A @ B.T)
    with pytest.raises(PersistenceError, match=r"MaxMarginLearner\.kernel.*callable"):
        structlp.save(est, tmp_path / "f")
    feats = FunctionFeatures(lambda x, t, gram: np.zeros(2), 2, 1, 2)
    with pytest.raises(PersistenceError, match=r"FunctionFeatures\.psi.*callable"):
        structlp.save(SoftmaxMarginLearner(ZeroLoss(), feats), tmp_path / "f")
    est = MaxMarginLearner(BipartiteMatching())
    est.bad_ = np.array([object()], dtype=object)
    with pytest.raises(PersistenceError, match="object array"):
        structlp.save(est, tmp_path / "f")
    with pytest.raises(PersistenceError, match="expects a structlp estimator"):
        structlp.save({"a": 1}, tmp_path / "f")


# ------------------------------------------------------------------ refusing files
def _rewrite(path, edit_meta=None, members=None, fix_checksum=True):
    """Rewrite a saved file: edit its metadata and/or replace or add members."""
    with zipfile.ZipFile(path) as z:
        content = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(content["structlp.json"])
    if edit_meta:
        edit_meta(meta)
    text = json.dumps(meta).encode()
    content["structlp.json"] = text
    if fix_checksum:
        content["SHA256"] = hashlib.sha256(text).hexdigest().encode()
    content.update(members or {})
    with zipfile.ZipFile(path, "w") as z:
        for n, b in content.items():
            z.writestr(n, b)
    return meta


@pytest.fixture
def saved(fitted, tmp_path):
    path = tmp_path / "model.structlp"
    structlp.save(fitted["primal"][0], path)
    return path


def _set_class(name):
    def edit(meta):
        meta["root"]["class"] = name
    return edit


def test_persistence_error_is_a_structlp_error_and_value_error():
    assert issubclass(PersistenceError, StructlpError) and issubclass(PersistenceError, ValueError)


def test_refuses_a_file_edited_to_name_another_class(saved):
    _rewrite(saved, _set_class("structlp.learners.frank_wolfe.FrankWolfeLearner"), fix_checksum=False)
    with pytest.raises(PersistenceError, match="checksum"):
        structlp.load(saved)
    _rewrite(saved, _set_class("os.system"))
    with pytest.raises(PersistenceError, match="'os.system'.*not one of structlp's classes"):
        structlp.load(saved)
    _rewrite(saved, _set_class("structlp.learners.frank_wolfe.FrankWolfeLearner"))
    with pytest.raises(PersistenceError, match="FrankWolfeLearner takes no parameters"):
        structlp.load(saved)


def test_refuses_a_file_carrying_a_pickle(saved):
    payload = pickle.dumps(MaxMarginLearner(BipartiteMatching()))
    _rewrite(saved, members={"payload.pkl": payload})
    with pytest.raises(PersistenceError, match=r"payload\.pkl.*pickle"):
        structlp.load(saved)


def test_refuses_an_object_array_even_with_matching_checksums(saved):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    blob = buf.getvalue()

    def edit(meta):
        first = sorted(meta["arrays"])[0]
        meta["arrays"][first]["sha256"] = hashlib.sha256(blob).hexdigest()
        edit.member = first
    _rewrite(saved, edit)
    _rewrite(saved, members={edit.member: blob})
    with pytest.raises(PersistenceError, match="not a plain numpy array"):
        structlp.load(saved)


def test_refuses_a_modified_array(saved):
    with zipfile.ZipFile(saved) as z:
        member = sorted(json.loads(z.read("structlp.json"))["arrays"])[0]
        arr = np.load(io.BytesIO(z.read(member)))
    buf = io.BytesIO()
    np.save(buf, arr + 1.0)
    _rewrite(saved, members={member: buf.getvalue()})
    with pytest.raises(PersistenceError, match="checksum"):
        structlp.load(saved)


def test_refuses_a_newer_format_and_non_structlp_files(saved, tmp_path):
    def newer(meta):
        meta["format_version"] = FORMAT_VERSION + 1
    _rewrite(saved, newer)
    with pytest.raises(PersistenceError, match=f"format version {FORMAT_VERSION + 1}.*Upgrade"):
        structlp.load(saved)
    junk = tmp_path / "junk"
    junk.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(PersistenceError, match="zip archive written by structlp.save"):
        structlp.load(junk)
    with zipfile.ZipFile(junk, "w") as z:
        z.writestr("data.pkl", b"x")
    with pytest.raises(PersistenceError, match="not a structlp file"):
        structlp.load(junk)


def test_refuses_unknown_nodes_and_attribute_names(saved):
    def bad_node(meta):
        meta["root"]["attributes"]["coef_"] = {"type": "pickle", "data": "gASV"}
    _rewrite(saved, bad_node)
    with pytest.raises(PersistenceError, match="unknown node type 'pickle'"):
        structlp.load(saved)

    def bad_file(meta):
        meta["root"]["attributes"]["coef_"] = {"type": "ndarray", "file": ["arrays/0.npy"]}
    _rewrite(saved, bad_file)
    with pytest.raises(PersistenceError, match="no array"):
        structlp.load(saved)

    def dunder(meta):
        meta["root"]["attributes"]["__class__"] = "x"
    _rewrite(saved, dunder)
    with pytest.raises(PersistenceError, match="not fitted-attribute names"):
        structlp.load(saved)


def test_user_declared_class_needs_to_be_passed_or_allowed(fitted, tmp_path):
    est, Xn, kw = fitted["user_model"]
    path = tmp_path / "user.structlp"
    structlp.save(est, path)
    with pytest.raises(PersistenceError, match="ScaledAssignment.*classes=.*allowed="):
        structlp.load(path)
    by_class = structlp.load(path, classes=[ScaledAssignment])
    by_path = structlp.load(path, allowed=[f"{__name__}.ScaledAssignment"])
    for loaded in (by_class, by_path):
        assert type(loaded.model) is ScaledAssignment and loaded.model.scale == 2.0
        _same_fit(est, loaded, Xn, kw)
    with pytest.raises(PersistenceError, match="Refusing to load class"):
        structlp.load(path, allowed=["no_such_module_h14a.ScaledAssignment"])

    def elsewhere(meta):
        meta["root"]["params"]["model"]["class"] = "no_such_module_h14a.ScaledAssignment"
    _rewrite(path, elsewhere)
    with pytest.raises(PersistenceError, match="Cannot import the allowed class"):
        structlp.load(path, allowed=["no_such_module_h14a.ScaledAssignment"])
    # a class passed by the user matches by name when it was saved from another module
    assert type(structlp.load(path, classes=[ScaledAssignment]).model) is ScaledAssignment


# ------------------------------------------------------------------ pickle, deepcopy, clone
@pytest.mark.parametrize("name", list(CASES))
def test_pickle_and_deepcopy_of_every_fitted_learner(fitted, name):
    est, Xn, kw = fitted[name]
    blob = pickle.dumps(est)
    for other in (pickle.loads(blob), copy.deepcopy(est)):
        _same_fit(est, other, Xn, kw)
        assert "problem_" not in vars(other) and "_compiled" not in vars(other)
    assert "problem_" in vars(est) or not hasattr(est, "problem_")  # the original keeps it


@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS"])
def test_pickle_carries_no_training_problem(fitted, solver):
    X, Y = CASES["primal"][1:3]
    est = MaxMarginLearner(BipartiteMatching(), solver=solver).fit(X, Y)
    size = len(pickle.dumps(est))
    assert size < 8 * len(pickle.dumps((est.coef_, est.slack_, est.get_params())))


def test_clone_deep_copies_parameters(fitted):
    est, _, _ = fitted["rbf"]
    twin = structlp.clone(est)
    assert type(twin) is type(est) and not hasattr(twin, "dual_coef_")
    assert twin.model is not est.model and type(twin.model) is type(est.model)
    assert_same(twin.get_params(), est.get_params())
    seq = structlp.clone(fitted["softmax_margin"][0])
    assert seq.features is not fitted["softmax_margin"][0].features
    with pytest.raises(PersistenceError, match="expects a structlp estimator"):
        structlp.clone(MaxMarginLearner)


def test_sklearn_clone_works():
    sklearn_base = pytest.importorskip("sklearn.base")
    est = MaxMarginLearner(BipartiteMatching(R=2), C=0.5, solver_opts={"max_iter": 50})
    twin = sklearn_base.clone(est)
    assert twin.model is not est.model and twin.solver_opts is not est.solver_opts
    assert_same(twin.get_params(), est.get_params())


# ------------------------------------------------------------------ a failed fit changes nothing
@pytest.mark.parametrize("name", ["primal", "rbf", "frank_wolfe", "cutting_plane",
                                  "agm_qp", "tree_crf", "sequence_ssvm"])
def test_failed_refit_leaves_the_estimator_as_before(fitted, name):
    est, Xn, kw = fitted[name]
    before = dict(vars(est))
    outputs = _outputs(est, Xn, kw)
    X, Y = CASES[name][1:3]
    bad_Y = [np.zeros_like(Y[0])] + list(Y[1:])   # not an output of the first example
    if name in ("tree_crf", "sequence_ssvm") or name.startswith("agm"):
        bad_Y = [np.full_like(Y[0], 99)] + list(Y[1:])
    with pytest.raises(StructlpError):
        est.fit(X, bad_Y, **CASES[name][4])
    assert list(vars(est)) == list(before)
    for k, v in before.items():
        assert vars(est)[k] is v, k
    assert_same(outputs, _outputs(est, Xn, kw))


def test_failed_solve_restores_a_half_updated_learner(fitted):
    """A refit that fails in the solver (not in validation) also restores everything."""
    est = copy.deepcopy(fitted["primal"][0])
    X, Y = CASES["primal"][1:3]
    est.fit(X, Y)
    before = dict(vars(est))
    with pytest.raises(structlp.SolverError, match="badly scaled"):
        est.set_params(C=1e300).fit(X, Y)
    assert set(vars(est)) == set(before)
    for k, v in before.items():
        if k.endswith("_") or k.startswith("_"):
            assert vars(est)[k] is v, k


def test_invalid_output_refit_of_an_unfitted_learner_stays_unfitted():
    X, Y = CASES["primal"][1:3]
    est = MaxMarginLearner(BipartiteMatching())
    with pytest.raises(InvalidOutputError):
        est.fit(X, [np.zeros_like(Y[0])] + list(Y[1:]))
    assert not [k for k in vars(est) if k.endswith("_") or k.startswith("_")]


class _InPlaceLearner(MaxMarginLearner):
    """A learner whose fit updates its weights in place (as a warm start might), then fails."""

    def fit(self, X, Y):
        if hasattr(self, "coef_"):
            self.coef_ *= 0.0
            self.extra_ = 1
            raise structlp.SolverError("failed after touching coef_")
        return super().fit(X, Y)


def test_failed_fit_puts_back_arrays_changed_in_place():
    X, Y = CASES["primal"][1:3]
    est = _InPlaceLearner(BipartiteMatching()).fit(X, Y)
    coef, saved = est.coef_, est.coef_.copy()
    with pytest.raises(structlp.SolverError):
        est.fit(X, Y)
    assert est.coef_ is coef and not hasattr(est, "extra_")
    np.testing.assert_array_equal(est.coef_, saved)


def test_refuses_metadata_nested_too_deeply_or_not_json(saved):
    n = 2 * sys.getrecursionlimit()
    deep = '{"type": "list", "items": [' * n + "1" + "]}" * n
    for text in (('{"format": "structlp", "format_version": 1, "arrays": {}, "root": {"type": '
                  '"object", "class": "structlp.learners.joint_qp.MaxMarginLearner", "params": {}, '
                  '"attributes": {"deep_": ' + deep + "}}}"), "{not json"):
        with zipfile.ZipFile(saved, "w") as z:
            z.writestr("structlp.json", text)
            z.writestr("SHA256", hashlib.sha256(text.encode()).hexdigest())
        with pytest.raises(PersistenceError, match="nested too deeply|not JSON"):
            structlp.load(saved)
