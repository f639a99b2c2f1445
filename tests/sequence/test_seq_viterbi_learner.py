"""Tropical decoding and the softmax-margin learner."""

import itertools

import numpy as np
import pytest

import seq_oracles as orc
from structlp.exceptions import InvalidInputError, InvalidParameterError, NotFittedError
from structlp.sequence import (BigramFeatures, EditDistance, EmissionFeatures, HammingLoss,
                               NGramLoss, SmithWaterman, SoftmaxMarginLearner, StackedFeatures,
                               ZeroLoss, compile_example, loss_augmented_viterbi,
                               structured_hinge, viterbi)

LOSSES = [(EditDistance(), orc.oracle_loss("EditDistance", {})),
          (SmithWaterman(), orc.oracle_loss("SmithWaterman", {})),
          (NGramLoss(), orc.oracle_loss("NGramLoss", {})),
          (EditDistance(cap=2), orc.oracle_loss("EditDistance", {"cap": 2})),
          (HammingLoss(), orc.hamming)]


@pytest.mark.parametrize("loss,oracle", LOSSES)
@pytest.mark.parametrize("seed", range(4))
def test_loss_augmented_viterbi_matches_brute_force(loss, oracle, seed):
    rng = np.random.default_rng(seed)
    k, l = 3, 5
    y_true = rng.integers(0, k, l)
    w = rng.normal(size=k * k) * 2
    best = max(float(w @ orc.bigram_counts(y, k)) + oracle(list(y), list(y_true))
               for y in itertools.product(range(k), repeat=l))
    y_hat, value = loss_augmented_viterbi(w, None, y_true, loss, BigramFeatures(k))
    assert value == pytest.approx(best, abs=1e-9)
    assert float(w @ orc.bigram_counts(y_hat, k)) + oracle(list(y_hat), list(y_true)) == \
        pytest.approx(best, abs=1e-9)
    h, g = structured_hinge(w, None, y_true, loss, BigramFeatures(k))
    assert h == pytest.approx(best - w @ orc.bigram_counts(y_true, k), abs=1e-9)
    assert np.allclose(g, orc.bigram_counts(y_hat, k) - orc.bigram_counts(y_true, k))


def test_viterbi_matches_brute_force():
    rng = np.random.default_rng(0)
    k, l = 3, 6
    feats = StackedFeatures([EmissionFeatures(k, 4, window=1), BigramFeatures(k)])
    x = rng.integers(0, 4, l)
    w = rng.normal(size=feats.n_features)
    y = viterbi(w, x, feats)
    scores = {ys: float(w @ feats.joint_feature(x, ys))
              for ys in itertools.product(range(k), repeat=l)}
    assert float(w @ feats.joint_feature(x, y)) == pytest.approx(max(scores.values()))


def test_joint_feature_of_bigrams_counts_bigrams():
    y = [0, 1, 1, 2, 0]
    assert np.array_equal(BigramFeatures(3).joint_feature(None, y), orc.bigram_counts(y, 3))


def test_stacked_features_concatenate():
    k = 3
    f = StackedFeatures([EmissionFeatures(k, 2), BigramFeatures(k)])
    x, y = [0, 1, 1], [2, 0, 1]
    both = f.joint_feature(x, y)
    assert np.array_equal(both, np.concatenate([EmissionFeatures(k, 2).joint_feature(x, y),
                                                BigramFeatures(k).joint_feature(x, y)]))


def _toy_data(rng, m=12, l=6, k=3):
    Y = [rng.integers(0, k, l) for _ in range(m)]
    X = [np.where(rng.random(l) < 0.8, y, rng.integers(0, k, l)) for y in Y]
    return X, Y


def test_learner_sklearn_conventions():
    feats = BigramFeatures(3)
    est = SoftmaxMarginLearner(loss=EditDistance(), features=feats, reg=0.5)
    assert est.get_params()["reg"] == 0.5
    assert est.set_params(reg=2.0) is est and est.reg == 2.0
    assert not hasattr(est, "coef_")
    with pytest.raises(NotFittedError):
        est.predict([[0, 1]])
    with pytest.raises(InvalidParameterError, match="Invalid parameter"):
        est.set_params(C=1.0)


@pytest.mark.parametrize("kwargs,name", [({"reg": 0}, "reg"), ({"max_iter": 0}, "max_iter"),
                                         ({"method": "x"}, "method"), ({"tol": -1}, "tol")])
def test_learner_bad_params(kwargs, name):
    est = SoftmaxMarginLearner(loss=EditDistance(), features=BigramFeatures(3), **kwargs)
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        est.fit([[0, 1]], [[0, 1]])


def test_learner_bad_data():
    est = SoftmaxMarginLearner(loss=EditDistance(), features=BigramFeatures(3))
    with pytest.raises(InvalidInputError, match="same number"):
        est.fit([[0, 1]], [[0, 1], [1, 1]])
    with pytest.raises(InvalidInputError, match="symbols in"):
        est.fit([[0, 1]], [[0, 3]])
    with pytest.raises(InvalidInputError, match="at least one"):
        est.fit([], [])


@pytest.mark.parametrize("loss", [ZeroLoss(), HammingLoss(), EditDistance(), SmithWaterman(cap=4),
                                  NGramLoss()])
def test_learner_reaches_a_stationary_point_and_matches_naive(loss):
    rng = np.random.default_rng(0)
    k = 3
    X, Y = _toy_data(rng, m=8, l=5, k=k)
    feats = StackedFeatures([EmissionFeatures(k, k), BigramFeatures(k)])
    est = SoftmaxMarginLearner(loss=loss, features=feats, reg=0.1, tol=1e-8, max_iter=500)
    est.fit(X, Y)
    examples = [compile_example(x, y, loss, feats) for x, y in zip(X, Y)]
    value, grad = est.objective(est.coef_, examples)
    assert np.linalg.norm(grad) < 1e-5 * np.sqrt(len(grad)) and value == pytest.approx(est.objective_)
    # convex objective: the naive-gradient learner finds the same minimizer
    naive = SoftmaxMarginLearner(loss=loss, features=feats, reg=0.1, tol=1e-8, max_iter=500,
                                 method="naive").fit(X, Y)
    assert np.allclose(naive.coef_, est.coef_, atol=1e-4)
    assert len(est.automaton_info_) == len(X) and est.n_iter_ >= 1
    preds = est.predict(X)
    assert all(len(p) == len(x) for p, x in zip(preds, X))
    assert est.score(X, Y, loss=EditDistance()) <= 0


def test_learner_objective_gradient_finite_differences():
    rng = np.random.default_rng(2)
    X, Y = _toy_data(rng, m=4, l=5)
    feats = StackedFeatures([EmissionFeatures(3, 3), BigramFeatures(3)])
    est = SoftmaxMarginLearner(loss=EditDistance(), features=feats, reg=0.3)
    ex = [compile_example(x, y, est.loss, feats) for x, y in zip(X, Y)]
    w = rng.normal(size=feats.n_features)
    _, g = est.objective(w, ex)
    eps = 1e-6
    for i in rng.choice(len(w), 8, replace=False):
        e = np.zeros_like(w)
        e[i] = eps
        fd = (est.objective(w + e, ex)[0] - est.objective(w - e, ex)[0]) / (2 * eps)
        assert fd == pytest.approx(g[i], abs=1e-7)


def test_learner_learns_identity_mapping():
    rng = np.random.default_rng(1)
    X, Y = _toy_data(rng, m=30, l=6)
    feats = StackedFeatures([EmissionFeatures(3, 3), BigramFeatures(3)])
    est = SoftmaxMarginLearner(loss=EditDistance(cap=3), features=feats, reg=0.01).fit(X, Y)
    Xt, Yt = _toy_data(np.random.default_rng(5), m=20, l=6)
    assert -est.score(Xt, Yt, loss=EditDistance()) < 2.0  # noisy copy: ~1.2 errors of 6
