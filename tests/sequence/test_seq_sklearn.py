"""SoftmaxMarginLearner as a structlp BaseEstimator: clone, params, scikit-learn, progress.

Oracles: a hand-written fold loop for GridSearchCV; the callback's reports against the
learner's own objective; an early stop against a fit with the same iteration budget.
"""

import logging

import numpy as np
import pytest

import structlp
from structlp.base import BaseEstimator
from structlp.exceptions import InvalidParameterError
from structlp.sequence import (BigramFeatures, EditDistance, EmissionFeatures,
                               SoftmaxMarginLearner, StackedFeatures, compile_example)


def _data(seed=0, m=9, l=5, k=3):
    rng = np.random.default_rng(seed)
    Y = [rng.integers(0, k, l) for _ in range(m)]
    X = [np.where(rng.random(l) < 0.7, y, rng.integers(0, k, l)) for y in Y]
    return X, Y, StackedFeatures([EmissionFeatures(k, k), BigramFeatures(k)])


def test_clone_and_params():
    X, Y, feats = _data()
    est = SoftmaxMarginLearner(EditDistance(), feats, reg=0.3, verbose=1)
    assert isinstance(est, BaseEstimator)
    twin = structlp.clone(est)
    assert twin is not est and twin.get_params(deep=False).keys() == est.get_params(
        deep=False).keys() and twin.reg == 0.3 and twin.verbose == 1
    assert est.set_params(reg=0.1, callback=None) is est and est.reg == 0.1
    assert "reg=0.1" in repr(est) and "max_iter" not in repr(est)
    with pytest.raises(InvalidParameterError, match="valid parameters"):
        est.set_params(C=1.0)


def test_fit_is_atomic():
    X, Y, feats = _data()
    est = SoftmaxMarginLearner(EditDistance(), feats, reg=0.3).fit(X, Y)
    coef = est.coef_.copy()
    with pytest.raises(structlp.InvalidInputError):
        est.fit(X, Y[:-1])
    assert np.array_equal(est.coef_, coef)


@pytest.mark.parametrize("bad", [{"verbose": -1}, {"verbose": 1.5}, {"callback": 3}])
def test_bad_progress_parameters(bad):
    X, Y, feats = _data()
    name = next(iter(bad))
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        SoftmaxMarginLearner(EditDistance(), feats, **bad).fit(X, Y)


def test_verbose_lines_and_callback_reports(caplog):
    X, Y, feats = _data()
    infos = []
    est = SoftmaxMarginLearner(EditDistance(), feats, reg=0.3, verbose=1,
                               callback=infos.append)
    with caplog.at_level(logging.INFO, logger="structlp"):
        est.fit(X, Y)
    lines = [r.getMessage() for r in caplog.records if "SoftmaxMarginLearner" in r.getMessage()]
    assert len(lines) == est.n_iter_ == len(infos) and "objective" in lines[0]
    assert [i["iteration"] for i in infos] == list(range(1, est.n_iter_ + 1))
    examples = [compile_example(x, y, est.loss, feats) for x, y in zip(X, Y)]
    assert infos[-1]["objective"] == pytest.approx(est.objective(est.coef_, examples)[0],
                                                   rel=1e-12)
    obj = [i["objective"] for i in infos]
    assert all(b <= a + 1e-12 for a, b in zip(obj, obj[1:]))      # L-BFGS descends


def test_callback_stops_early():
    X, Y, feats = _data()
    calls = []

    def stop_at_3(info):
        calls.append(info["iteration"])
        return info["iteration"] >= 3

    est = SoftmaxMarginLearner(EditDistance(), feats, reg=0.3, tol=1e-10, max_iter=200,
                               callback=stop_at_3).fit(X, Y)
    assert calls == [1, 2, 3] and est.n_iter_ == 3 and not est.converged_
    examples = [compile_example(x, y, est.loss, feats) for x, y in zip(X, Y)]
    assert est.objective_ == pytest.approx(est.objective(est.coef_, examples)[0], rel=1e-12)
    full = SoftmaxMarginLearner(EditDistance(), feats, reg=0.3, tol=1e-10, max_iter=200).fit(X, Y)
    assert full.n_iter_ > 3 and full.objective_ < est.objective_


def test_sklearn_clone_and_grid_search():
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, KFold
    X, Y, feats = _data(m=9)
    est = SoftmaxMarginLearner(EditDistance(), feats, reg=1.0, max_iter=500)
    twin = clone(est)
    assert twin is not est and twin.reg == 1.0 and twin.features is not None
    grid = [1e-2, 1.0, 30.0]
    cv = KFold(3, shuffle=True, random_state=0)
    scorer = structlp.make_scorer("hamming")
    gs = GridSearchCV(est, {"reg": grid}, scoring=scorer, cv=cv, error_score="raise").fit(X, Y)
    means = []
    for reg in grid:
        scores = []
        for train, test in cv.split(X):
            fitted = SoftmaxMarginLearner(EditDistance(), feats, reg=reg, max_iter=500).fit(
                [X[i] for i in train], [Y[i] for i in train])
            scores.append(scorer(fitted, [X[i] for i in test], [Y[i] for i in test]))
        means.append(np.mean(scores))
    np.testing.assert_allclose(gs.cv_results_["mean_test_score"], means, rtol=0, atol=1e-12)
    assert len(set(np.round(means, 12))) > 1            # reg matters on these data
    assert gs.best_params_["reg"] == grid[int(np.argmax(means))]
