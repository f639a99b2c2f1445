"""SequenceSSVM: the structured SVM trained with edit distance / n-gram losses, checked against
the same QP with every output of Delta^l enumerated."""

import itertools

import cvxpy as cp
import numpy as np
import pytest

from structlp import InvalidParameterError
from structlp.sequence import (BigramFeatures, EditDistance, HammingLoss, NGramLoss,
                               SequenceSSVM, SmithWaterman)


def enumerated_qp(loss, feats, Y, C):
    """min 1/2|w|^2 + C sum xi  s.t. every y in Delta^l: w.(Psi_i - Psi_y) >= L(y, y_i) - xi_i."""
    k = feats.alphabet_size
    w, xi = cp.Variable(feats.n_features), cp.Variable(len(Y), nonneg=True)
    cons = []
    for i, yi in enumerate(Y):
        psi_i = feats.joint_feature(None, yi)
        rows, rhs = [], []
        for y in itertools.product(range(k), repeat=len(yi)):
            y = np.array(y)
            rows.append(psi_i - feats.joint_feature(None, y))
            rhs.append(loss(y, yi))
        cons.append(np.array(rows) @ w + xi[i] >= np.array(rhs))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), cons)
    prob.solve(solver="CLARABEL")
    return prob.value, w.value


@pytest.mark.parametrize("loss", [EditDistance(), NGramLoss(n=2), HammingLoss(),
                                  SmithWaterman()])
def test_cutting_plane_reaches_the_enumerated_optimum(loss):
    rng = np.random.default_rng(3)
    k, l = 3, 4
    feats = BigramFeatures(k)
    Y = [rng.integers(k, size=l) for _ in range(5)]
    est = SequenceSSVM(loss, feats, C=1.0, tol=1e-7, max_iter=100).fit([None] * len(Y), Y)
    ref_value, ref_w = enumerated_qp(lambda y, yi: loss(y, yi), feats, Y, 1.0)
    assert est.converged_
    assert abs(est.objective_ - ref_value) <= 1e-5 * max(1.0, abs(ref_value))
    np.testing.assert_allclose(est.coef_, ref_w, atol=1e-4)
    assert est.n_constraints_ < len(Y) * k ** l  # far fewer than every output


def test_predict_and_bad_input():
    feats = BigramFeatures(2)
    Y = [np.array([0, 1, 0, 1]), np.array([0, 1, 0, 1])]
    est = SequenceSSVM(EditDistance(), feats, C=10.0).fit([None, None], Y)
    np.testing.assert_array_equal(est.predict([None], lengths=[4])[0], [0, 1, 0, 1])
    with pytest.raises(InvalidParameterError, match="'C'"):
        SequenceSSVM(EditDistance(), feats, C=0).fit([None], Y[:1])
    with pytest.raises(InvalidParameterError, match="'tol'"):
        SequenceSSVM(EditDistance(), feats, tol=-1).fit([None], Y[:1])
    with pytest.raises(ValueError, match="same number of examples"):
        SequenceSSVM(EditDistance(), feats).fit([None], Y)


def test_callback_sees_every_round_and_can_stop():
    import warnings

    from structlp.sequence import structured_hinge
    rng = np.random.default_rng(8)
    feats = BigramFeatures(3)
    Y = [rng.integers(3, size=4) for _ in range(5)]
    full = SequenceSSVM(EditDistance(), feats, tol=1e-7).fit([None] * 5, Y)
    assert full.n_iter_ > 3
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a stop by the callback does not warn
        est = SequenceSSVM(EditDistance(), feats, tol=1e-7, callback=lambda info: seen.append(
            info) or info["iteration"] == 2).fit([None] * 5, Y)
    assert [s["iteration"] for s in seen] == [1, 2] and est.n_iter_ == 2
    assert not est.converged_ and {"master_objective", "violated", "constraints"} <= set(seen[0])
    hinge = [structured_hinge(est.coef_, None, y, EditDistance(), feats)[0] for y in Y]
    assert est.objective_ == pytest.approx(0.5 * est.coef_ @ est.coef_ + np.maximum(hinge, 0).sum(),
                                           rel=1e-9)
    assert seen[1]["master_objective"] <= est.objective_ * (1 + 1e-6)   # a lower bound at w
    with pytest.raises(InvalidParameterError, match="'callback' parameter"):
        SequenceSSVM(EditDistance(), feats, callback="no").fit([None] * 5, Y)
