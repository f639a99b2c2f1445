"""SubgradientLearner: the objective of MaxMarginLearner with a certified bound."""

import numpy as np
import pytest

from structlp import InvalidParameterError, MaxMarginLearner, NotFittedError
from structlp.learners.cutting_plane import ConvergenceWarning
from structlp.learners.subgradient import SubgradientLearner
from structlp.structures import BipartiteMatching, TreeLabeling
from test_frank_wolfe import assignments, chains, fit_quiet, SparseBipartite


def check_bound(sg, optimum, atol=1e-7):
    assert sg.objective_ >= optimum - atol * max(1.0, abs(optimum))
    assert sg.objective_ - optimum <= sg.suboptimality_bound_ + atol * max(1.0, abs(optimum))


@pytest.mark.parametrize("batch_size", [1, 4])
def test_bipartite_close_to_qp_and_bounded(rng, batch_size):
    X, Y = assignments(rng, 12)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    sg = fit_quiet(SubgradientLearner(BipartiteMatching(), C=1.0, tol=1e-6, max_iter=300,
                                      batch_size=batch_size, random_state=0), X, Y)
    check_bound(sg, qp.objective_)
    assert sg.objective_ <= qp.objective_ * (1 + 1e-2)
    np.testing.assert_allclose(sg.objective_, 0.5 * sg.coef_ @ sg.coef_ + sg.slack_.sum())
    np.testing.assert_allclose(sg.hinge_losses(X, Y), sg.slack_, atol=1e-10)


def test_chain_close_to_qp(rng):
    X, Y = chains(rng, 8)
    qp = MaxMarginLearner(TreeLabeling(3), C=1.0).fit(X, Y)
    sg = fit_quiet(SubgradientLearner(TreeLabeling(3), C=1.0, max_iter=200, random_state=0),
                   X, Y)
    check_bound(sg, qp.objective_)
    assert sg.objective_ <= qp.objective_ * (1 + 2e-2)


@pytest.mark.parametrize("max_iter", [1, 3, 10])
def test_bound_holds_early(rng, max_iter):
    X, Y = assignments(rng, 10, noise=0.5)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    for averaging in (True, False):
        sg = fit_quiet(SubgradientLearner(BipartiteMatching(), max_iter=max_iter,
                                          averaging=averaging, random_state=2), X, Y)
        check_bound(sg, qp.objective_)
        hist = [h["objective"] for h in sg.history_]
        assert sg.objective_ == pytest.approx(min(hist))   # the best iterate is kept


def test_sparse_and_dense_same_model(rng):
    X, Y = assignments(rng, 8)
    a = fit_quiet(SubgradientLearner(BipartiteMatching(), max_iter=4, random_state=0), X, Y)
    b = fit_quiet(SubgradientLearner(SparseBipartite(), max_iter=4, random_state=0), X, Y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)


def test_estimator_contract_and_warning(rng):
    X, Y = assignments(rng, 5)
    sg = SubgradientLearner(BipartiteMatching(), C=0.5, max_iter=2)
    assert sg.get_params()["n_iter_no_change"] == 5
    with pytest.raises(NotFittedError):
        sg.predict(X)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        assert sg.fit(X, Y) is sg
    for attr in ("coef_", "objective_", "suboptimality_bound_", "slack_", "n_iter_",
                 "n_oracle_calls_", "converged_", "history_", "n_features_in_", "fit_time_"):
        assert hasattr(sg, attr), attr
    assert len(sg.predict(X)) == 5 and sg.score(X, Y) == -sg.loss(X, Y)


@pytest.mark.parametrize("param, value, match", [
    ("C", -1, "'C' parameter of SubgradientLearner must be a float > 0"),
    ("tol", 0, "'tol' parameter of SubgradientLearner must be a float > 0"),
    ("max_iter", 0, "'max_iter' parameter of SubgradientLearner must be an int >= 1"),
    ("n_jobs", 0, "'n_jobs' parameter of SubgradientLearner must be None or a non-zero int"),
    ("backend", 3, "'backend' parameter of SubgradientLearner"),
    ("batch_size", -2, "'batch_size' parameter"),
    ("averaging", 1, "'averaging' parameter"),
    ("n_iter_no_change", 0, "'n_iter_no_change' parameter"),
    ("random_state", 1.5, "'random_state' parameter"),
])
def test_bad_parameters(param, value, match, rng):
    X, Y = assignments(rng, 2)
    with pytest.raises(InvalidParameterError, match=match):
        SubgradientLearner(BipartiteMatching(), **{param: value}).fit(X, Y)


def test_verbose_callback_and_warm_start(rng, caplog):
    import logging
    X, Y = assignments(rng, 8)
    seen = []
    with caplog.at_level(logging.INFO, logger="structlp.learners.subgradient"):
        sg = fit_quiet(SubgradientLearner(BipartiteMatching(), tol=1e-12, max_iter=20,
                                          verbose=True, random_state=0,
                                          callback=lambda info: seen.append(info) or
                                          info["iteration"] == 4), X, Y)
    lines = [r.getMessage() for r in caplog.records if r.name == "structlp.learners.subgradient"]
    assert len(lines) == 4 and all("objective" in line for line in lines)
    assert sg.n_iter_ == 4 and not sg.converged_
    assert [s["iteration"] for s in seen] == [1, 2, 3, 4]
    assert seen[-1]["objective"] == pytest.approx(sg.history_[-1]["objective"])
    # warm start: the refit starts where the first fit ended (its averaged iterate)
    warm = fit_quiet(SubgradientLearner(BipartiteMatching(), tol=1e-12, max_iter=4,
                                        n_iter_no_change=100, warm_start=True,
                                        random_state=0), X, Y)
    last = warm.history_[-1]["objective"]
    warm.set_params(random_state=1)
    fit_quiet(warm, X, Y)
    assert warm.history_[0]["objective"] == pytest.approx(last, rel=1e-12)
    assert warm.history_[0]["objective"] < sg.history_[0]["objective"]     # not w = 0
    cold = fit_quiet(SubgradientLearner(BipartiteMatching(), tol=1e-12, max_iter=4,
                                        n_iter_no_change=100, random_state=1), X, Y)
    assert warm.objective_ < cold.objective_
    with pytest.raises(InvalidParameterError, match="'callback' parameter"):
        SubgradientLearner(BipartiteMatching(), callback="no").fit(X, Y)
