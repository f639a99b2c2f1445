"""warm_start of the sequence learners, the scikit-learn way.

A warm refit starts from the previous solution (SoftmaxMarginLearner: its
``coef_``; SequenceSSVM: its working set, rebuilt on the new data) when the shapes
match, and otherwise starts afresh. Oracles: the cold fit of the same estimator
(the optimum is unique: both objectives are strictly convex in ``w``) and, for the
SSVM, the QP with every output of Delta^l enumerated.
"""

import pickle

import numpy as np
import pytest

from structlp import InvalidParameterError
from structlp.sequence import (BigramFeatures, EditDistance, HammingLoss, SequenceSSVM,
                               SoftmaxMarginLearner)

from test_seq_ssvm import enumerated_qp

K, L = 3, 4


def data(seed, n=5, length=L, k=K):
    rng = np.random.default_rng(seed)
    Y = [rng.integers(k, size=length) for _ in range(n)]
    return [None] * n, Y


def ssvm(**kw):
    return SequenceSSVM(**{"loss": EditDistance(), "features": BigramFeatures(K), "tol": 1e-7,
                           "max_iter": 100, **kw})


def smm(**kw):
    return SoftmaxMarginLearner(**{"loss": HammingLoss(), "features": BigramFeatures(K),
                                   "tol": 1e-8, **kw})


@pytest.mark.parametrize("make", [ssvm, smm])
def test_warm_start_is_a_validated_parameter(make):
    assert make().get_params()["warm_start"] is False
    assert make(warm_start=True).get_params()["warm_start"] is True
    X, Y = data(0)
    with pytest.raises(InvalidParameterError, match="'warm_start' parameter"):
        make(warm_start="yes").fit(X, Y)


def test_ssvm_warm_refit_on_the_same_data_stops_at_once():
    X, Y = data(1)
    cold = ssvm().fit(X, Y)
    warm = ssvm(warm_start=True).fit(X, Y)
    assert warm.n_iter_ == cold.n_iter_ > 1                 # the first fit is a cold one
    warm.fit(X, Y)
    assert warm.converged_ and warm.n_iter_ == 1            # one pass: nothing violated
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-6)


@pytest.mark.parametrize("make, param, first, second", [(ssvm, "C", 0.3, 1.0),
                                                       (smm, "reg", 0.1, 0.05)])
def test_warm_refit_along_a_path_reaches_the_cold_optimum(make, param, first, second):
    X, Y = data(2)
    warm = make(**{param: first, "warm_start": True}).fit(X, Y)
    warm.set_params(**{param: second}).fit(X, Y)
    cold = make(**{param: second}).fit(X, Y)
    assert warm.converged_ and warm.n_iter_ < cold.n_iter_
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-6)
    np.testing.assert_allclose(warm.coef_, cold.coef_, atol=1e-3)
    if make is ssvm:
        oracle, _ = enumerated_qp(EditDistance(), BigramFeatures(K), Y, second)
        assert warm.objective_ == pytest.approx(oracle, rel=1e-6)


def test_ssvm_warm_working_set_is_rebuilt_on_new_data():
    """Same shapes, other outputs: the stored outputs' constraints are rebuilt for the new
    data (valid constraints of the new QP), so the warm fit reaches the new optimum."""
    X, Y = data(3)
    _, Y2 = data(4)
    warm = ssvm(warm_start=True).fit(X, Y).fit(X, Y2)
    oracle, _ = enumerated_qp(EditDistance(), BigramFeatures(K), Y2, 1.0)
    assert warm.converged_ and warm.objective_ == pytest.approx(oracle, rel=1e-6)


@pytest.mark.parametrize("other", [dict(n=3), dict(length=L + 1)])
def test_ssvm_warm_start_on_other_shapes_starts_afresh(other):
    X, Y = data(5)
    X2, Y2 = data(6, **other)
    warm = ssvm(warm_start=True).fit(X, Y).fit(X2, Y2)
    cold = ssvm().fit(X2, Y2)
    assert warm.n_iter_ == cold.n_iter_
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=1e-6, atol=1e-8)


def test_ssvm_without_warm_start_and_after_pickling_starts_afresh():
    X, Y = data(7)
    cold = ssvm().fit(X, Y)
    again = ssvm().fit(X, Y).fit(X, Y)                      # warm_start=False: a cold refit
    assert again.n_iter_ == cold.n_iter_
    restored = pickle.loads(pickle.dumps(ssvm(warm_start=True).fit(X, Y)))
    assert restored.fit(X, Y).n_iter_ == cold.n_iter_       # the working set is not pickled


def test_softmax_margin_warm_refit_on_the_same_data():
    X, Y = data(8)
    cold = smm().fit(X, Y)
    warm = smm(warm_start=True).fit(X, Y)
    assert warm.n_iter_ == cold.n_iter_ > 2
    warm.fit(X, Y)
    assert warm.n_iter_ <= 1 and warm.converged_
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-9)


def test_softmax_margin_warm_start_with_other_features_starts_afresh():
    X, Y = data(10)
    X4, Y4 = data(11, k=4)
    warm = smm(warm_start=True).fit(X, Y)
    warm.set_params(features=BigramFeatures(4)).fit(X4, Y4)     # coef_ has another shape
    cold = smm(features=BigramFeatures(4)).fit(X4, Y4)
    assert warm.n_iter_ == cold.n_iter_
    np.testing.assert_array_equal(warm.coef_, cold.coef_)
