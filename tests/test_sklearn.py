"""scikit-learn interoperability: tags, clone, model selection, pipelines, the scorer.

The tests that need scikit-learn skip without it; CI runs them against the newest
release (the test extra) and the oldest supported one (a step of .ci/run).
Oracles: hand-written fold loops over the same folds and scorer.
"""

import inspect
import warnings

import numpy as np
import pytest

import structlp
from structlp import (CuttingPlaneLearner, FrankWolfeLearner, InvalidInputError,
                      InvalidParameterError, MaxMarginLearner, NotFittedError, PartTransformer,
                      SubgradientLearner, make_scorer)
from structlp.datasets import make_bipartite_matching

LEARNERS = [MaxMarginLearner, FrankWolfeLearner, CuttingPlaneLearner, SubgradientLearner]


@pytest.fixture(scope="module")
def data():
    X, Y, w, model = make_bipartite_matching(n_samples=15, n_rows=4, n_features=4, noise=1.0,
                                             random_state=3)
    return X, Y, model


def sklearn_or_skip():
    return pytest.importorskip("sklearn")


def fw(model, C):
    return FrankWolfeLearner(model, C=C, tol=1e-3, max_iter=300, random_state=0)


# ------------------------------------------------------------ without scikit-learn
def test_repr_shows_only_non_default_parameters(data):
    model = data[2]
    assert repr(MaxMarginLearner(model)) == "MaxMarginLearner(model=BipartiteMatching(R=1, P=1, " \
                                            "edge_weights=None))"
    r = repr(MaxMarginLearner(model, C=2.0, solver="ECOS", solver_opts={"max_iters": 50}))
    assert "C=2.0" in r and "solver='ECOS'" in r and "solver_opts={'max_iters': 50}" in r
    assert "formulation" not in r and "kernel" not in r
    assert "C=" not in repr(FrankWolfeLearner(model, C=1))        # 1 == 1.0: the default


def test_decision_function_is_decision_scores(data):
    X, Y, model = data
    for est in (MaxMarginLearner(model).fit(X, Y), fw(model, 1.0).fit(X, Y)):
        a, b = est.decision_function(X[:3]), est.decision_scores(X[:3])
        assert len(a) == 3 and all(np.array_equal(u, v) for u, v in zip(a, b))
    with pytest.raises(NotFittedError):
        MaxMarginLearner(model).decision_function(X)


def test_nested_params_and_bad_names(data):
    model = data[2]
    pt = PartTransformer(_Center(shift=1.0))
    assert pt.get_params()["transformer__shift"] == 1.0
    pt.set_params(transformer__shift=2.0)
    assert pt.transformer.shift == 2.0
    assert "transformer__shift" not in pt.get_params(deep=False)
    with pytest.raises(InvalidParameterError, match="no parameters to set"):
        MaxMarginLearner(model).set_params(model__R=2)
    with pytest.raises(InvalidParameterError, match="valid parameters"):
        MaxMarginLearner(model).set_params(bogus=1)


class _Center:
    """A minimal transformer without scikit-learn."""

    def __init__(self, shift=0.0):
        self.shift = shift

    def get_params(self, deep=True):
        return {"shift": self.shift}

    def set_params(self, **p):
        self.shift = p.get("shift", self.shift)
        return self

    def fit(self, F):
        self.mean_ = F.mean(axis=0)
        return self

    def transform(self, F):
        return F - self.mean_ + self.shift


def test_part_transformer_stacks_parts_and_keeps_shapes(data):
    X, _, _ = data
    pt = PartTransformer(_Center()).fit(X)
    F = np.concatenate([x.reshape(-1, 4) for x in X])
    np.testing.assert_allclose(pt.transformer_.mean_, F.mean(axis=0))
    assert pt.transformer.__dict__.get("mean_") is None         # the parameter is not fitted
    out = pt.transform(X[:2])
    assert [o.shape for o in out] == [x.shape for x in X[:2]]
    np.testing.assert_allclose(out[0], X[0] - F.mean(axis=0))
    mask = np.ones((4, 4), dtype=bool)
    g, m = pt.transform([(X[0], mask)])[0]
    assert m is mask and np.allclose(g, out[0])
    with pytest.raises(InvalidInputError, match="features per part"):
        pt.transform([np.zeros((4, 4, 3))])
    with pytest.raises(NotFittedError):
        PartTransformer(_Center()).transform(X)
    with pytest.raises(InvalidParameterError, match="fit and transform"):
        PartTransformer(object()).fit(X)


def test_make_scorer_losses(data):
    X, Y, model = data
    est = MaxMarginLearner(model, C=1.0).fit(X, Y)
    pred = est.predict(X)
    ham = np.mean([np.mean(y != p) for y, p in zip(Y, pred)])
    assert make_scorer()(est, X, Y) == pytest.approx(-ham)
    assert make_scorer("task")(est, X, Y) == pytest.approx(-est.loss(X, Y))
    exact = np.mean([np.array_equal(y, p) for y, p in zip(Y, pred)])
    assert make_scorer("zero_one")(est, X, Y) == pytest.approx(exact - 1)
    acc = make_scorer(lambda y, p: float(np.mean(y == p)), greater_is_better=True)
    assert acc(est, X, Y) == pytest.approx(1 - ham)
    with pytest.raises(InvalidParameterError, match="'loss' parameter of make_scorer"):
        make_scorer("hinge")
    with pytest.raises(InvalidParameterError, match="'greater_is_better'"):
        make_scorer(greater_is_better="yes")


def _iterative(name, data):
    """(estimator with warm_start=True, X, Y) for each iterative learner."""
    from structlp import sequence as seq
    from structlp.datasets import make_sequences
    X, Y, model = data
    if name in ("SoftmaxMarginLearner", "SequenceSSVM"):
        X, Y, _, feats = make_sequences(n_samples=6, length=4, n_labels=3, n_inputs=3,
                                        noise=0.3, random_state=0)
        return getattr(seq, name)(seq.HammingLoss(), feats, warm_start=True), X, Y
    kw = {"random_state": 0} if name in ("FrankWolfeLearner", "SubgradientLearner") else {}
    return getattr(structlp, name)(model, C=0.5, warm_start=True, **kw), X, Y


ITERATIVE = ["FrankWolfeLearner", "SubgradientLearner", "CuttingPlaneLearner",
             "SoftmaxMarginLearner", "SequenceSSVM"]


@pytest.mark.parametrize("name", ITERATIVE)
def test_warm_start_the_scikit_learn_way(name, data):
    """warm_start is a plain parameter (default False, in get_params, kept by clone, checked
    at fit); a warm refit on the same data needs fewer iterations to the cold optimum;
    a clone carries no fitted state, so it starts cold."""
    est, X, Y = _iterative(name, data)
    assert inspect.signature(type(est)).parameters["warm_start"].default is False
    cold = structlp.clone(est).set_params(warm_start=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", structlp.ConvergenceWarning)
        cold.fit(X, Y)
        est.fit(X, Y)
        assert est.n_iter_ == cold.n_iter_ and est.objective_ == cold.objective_
        est.fit(X, Y)                                 # warm: from the previous solution
        if name != "SubgradientLearner":              # (its steps go on shrinking: no optimum)
            assert est.n_iter_ < cold.n_iter_
            assert est.objective_ == pytest.approx(cold.objective_, rel=1e-4)
        twin = structlp.clone(est)
        assert twin.get_params()["warm_start"] is True and not hasattr(twin, "coef_")
        twin.fit(X, Y)
    assert twin.n_iter_ == cold.n_iter_ and twin.objective_ == cold.objective_
    with pytest.raises(InvalidParameterError, match="'warm_start' parameter"):
        structlp.clone(est).set_params(warm_start="yes").fit(X, Y)


# ------------------------------------------------------------ with scikit-learn
@pytest.mark.parametrize("cls", LEARNERS)
def test_tags_and_estimator_type(cls, data):
    sklearn_or_skip()
    from sklearn.base import is_classifier, is_regressor
    est = cls(data[2])
    assert not is_classifier(est) and not is_regressor(est)
    try:
        from sklearn.utils import get_tags
    except ImportError:                      # scikit-learn < 1.6: the dict protocol
        assert est._get_tags()["requires_y"]
    else:
        tags = get_tags(est)
        assert tags.target_tags.required and tags.estimator_type is None


@pytest.mark.parametrize("cls", LEARNERS)
def test_sklearn_clone(cls, data):
    sklearn_or_skip()
    from sklearn.base import clone
    est = cls(data[2], C=0.5, solver_opts={"max_iters": 100} if cls is MaxMarginLearner else None)
    c = clone(est)
    assert type(c) is cls and c is not est
    assert c.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    assert c.C == 0.5 and c.model is not est.model and repr(c) == repr(est)


def _manual_cv(make, X, Y, cv, scorer):
    scores = []
    for train, test in cv.split(X):
        est = make().fit([X[i] for i in train], [Y[i] for i in train])
        scores.append(scorer(est, [X[i] for i in test], [Y[i] for i in test]))
    return np.array(scores)


@pytest.mark.parametrize("make", [lambda m, C: MaxMarginLearner(m, C=C), fw],
                         ids=["MaxMarginLearner", "FrankWolfeLearner"])
def test_grid_search_over_C_matches_a_hand_written_loop(make, data):
    sklearn_or_skip()
    from sklearn.model_selection import GridSearchCV, KFold
    X, Y, model = data
    grid = [0.01, 0.1, 1.0, 3.0]
    cv = KFold(3, shuffle=True, random_state=0)
    scorer = make_scorer("hamming")
    gs = GridSearchCV(make(model, 1.0), {"C": grid}, scoring=scorer, cv=cv,
                      error_score="raise").fit(X, Y)
    means = [_manual_cv(lambda: make(model, C), X, Y, cv, scorer).mean() for C in grid]
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], means, rtol=0, atol=1e-12)
    assert len(set(np.round(means, 12))) > 1            # C matters on these data
    assert gs.best_params_["C"] == grid[int(np.argmax(means))]
    best = make(model, gs.best_params_["C"]).fit(X, Y)
    assert all(np.array_equal(a, b) for a, b in zip(gs.predict(X), best.predict(X)))


def test_cross_val_score_equals_a_manual_fold_loop(data):
    sklearn_or_skip()
    from sklearn.model_selection import KFold, cross_val_score
    X, Y, model = data
    scorer = make_scorer("task")
    got = cross_val_score(MaxMarginLearner(model, C=0.3), X, Y, scoring=scorer, cv=3,
                          error_score="raise")
    want = _manual_cv(lambda: MaxMarginLearner(model, C=0.3), X, Y, KFold(3), scorer)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # without scoring=, the estimator's own score (negated task loss) is used
    got = cross_val_score(MaxMarginLearner(model, C=0.3), X, Y, cv=3, error_score="raise")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_pipeline_with_a_part_transformer(data):
    sklearn_or_skip()
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    X, Y, model = data
    X = [3.0 * x + 5.0 for x in X]                     # badly scaled features
    pipe = Pipeline([("scale", PartTransformer(StandardScaler())),
                     ("learn", MaxMarginLearner(model, C=1.0))]).fit(X, Y)
    F = np.concatenate([x.reshape(-1, 4) for x in X])
    Xs = [(x - F.mean(axis=0)) / F.std(axis=0) for x in X]
    ref = MaxMarginLearner(model, C=1.0).fit(Xs, Y)
    np.testing.assert_allclose(pipe.named_steps["learn"].coef_, ref.coef_, atol=1e-6)
    assert all(np.array_equal(a, b) for a, b in zip(pipe.predict(X), ref.predict(Xs)))
    gs = GridSearchCV(pipe, {"learn__C": [0.1, 1.0], "scale__transformer__with_mean": [True]},
                      scoring=make_scorer(), cv=3, error_score="raise").fit(X, Y)
    assert gs.best_params_["learn__C"] in (0.1, 1.0)


def test_nested_params_of_objects_whose_get_params_takes_no_argument():
    from structlp.sequence import BigramFeatures, EditDistance, SequenceSSVM
    est = SequenceSSVM(EditDistance(cap=2), BigramFeatures(3))
    params = est.get_params()
    assert params["loss__cap"] == 2 and params["loss"] is est.loss
    assert "loss__cap" not in est.get_params(deep=False)
    assert repr(est) == ("SequenceSSVM(loss=EditDistance(sub=1, ins=1, dele=1, cap=2, "
                         "band=None), features=BigramFeatures(alphabet_size=3, order=2))")
