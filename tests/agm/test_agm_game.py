"""Node games (Eq. 8) and pairwise recovery (Eq. 9) against independent formulations."""

import numpy as np
import pytest

from structlp.agm import absolute_game, game_value, loss_matrix, recover_pairwise, squared_game, zero_one_game
from structlp.exceptions import InvalidInputError, InvalidParameterError

from agm_oracles import game_value_dual_scipy


@pytest.mark.parametrize("loss", ["zero_one", "absolute", "squared"])
def test_closed_forms_equal_lp(loss, rng):
    for _ in range(15):
        k = int(rng.integers(2, 7))
        a = 2 * rng.normal(size=k)
        w = float(rng.uniform(0.1, 3))
        v, r, p = game_value(a, loss, w)
        v2, r2, p2 = game_value(a, loss, w, method="lp")
        L = w * loss_matrix(loss, k)
        assert v == pytest.approx(v2, rel=1e-6, abs=1e-7)
        np.testing.assert_allclose(r, r2, atol=1e-6)
        # both predictor strategies are minimax optimal
        for q in (p, p2):
            assert q.min() >= -1e-9 and q.sum() == pytest.approx(1)
            assert np.max(a + L.T @ q) == pytest.approx(v, abs=1e-6)
        # the adversary's strategy attains the value
        assert a @ r + np.min(L @ r) == pytest.approx(v, abs=1e-9)


def test_vectorized_closed_forms_match_single(rng):
    A = rng.normal(size=(8, 4))
    w = rng.uniform(0.5, 2, size=8)
    for f in (zero_one_game, absolute_game, squared_game):
        vals, R = f(A, w)
        for t in range(8):
            v, r = f(A[t], w[t])
            assert vals[t] == pytest.approx(v)
            np.testing.assert_allclose(R[t], r)


def test_random_loss_matrix_lp_equals_dual(rng):
    for _ in range(10):
        k = int(rng.integers(2, 6))
        a = rng.normal(size=k)
        L = rng.normal(size=(k, k))  # any real matrix
        v, r, p = game_value(a, L, solver="ECOS")
        assert v == pytest.approx(game_value_dual_scipy(a, L), abs=1e-6)
        assert v == pytest.approx(game_value(a, L, solver="CLARABEL")[0], abs=1e-6)


def test_recover_pairwise_emd_equals_lp(rng):
    for _ in range(10):
        k1, k2 = rng.integers(2, 5, size=2)
        rp, rc = rng.dirichlet(np.ones(k1)), rng.dirichlet(np.ones(k2))
        B = rng.normal(size=(k1, k2))
        Qe = recover_pairwise(rp, rc, B, "emd")
        Ql = recover_pairwise(rp, rc, B, "lp")
        Qs = recover_pairwise(rp, rc, B, "sinkhorn", reg=1e-3)
        for Q, tol in ((Qe, 1e-9), (Ql, 1e-7), (Qs, 1e-6)):
            np.testing.assert_allclose(Q.sum(1), rp, atol=tol)
            np.testing.assert_allclose(Q.sum(0), rc, atol=tol)
        assert np.sum(Qe * B) == pytest.approx(np.sum(Ql * B), abs=1e-7)
        assert np.sum(Qs * B) <= np.sum(Qe * B) + 1e-9
        assert np.sum(Qs * B) == pytest.approx(np.sum(Qe * B), abs=1e-2)


def test_game_bad_inputs():
    with pytest.raises(InvalidParameterError, match="loss matrix"):
        game_value(np.zeros(3), np.zeros((2, 3)))
    with pytest.raises(InvalidParameterError, match="loss"):
        game_value(np.zeros(3), "hinge")
    with pytest.raises(InvalidParameterError, match="weight"):
        game_value(np.zeros(3), "zero_one", weight=-1.0)
    with pytest.raises(InvalidParameterError, match="closed_form"):
        game_value(np.zeros(2), np.ones((2, 2)), method="closed_form")
    with pytest.raises(InvalidInputError, match="r_parent"):
        recover_pairwise([0.5, 0.6], [0.5, 0.5], np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match="B"):
        recover_pairwise([0.5, 0.5], [0.5, 0.5], np.zeros((3, 2)))
    with pytest.raises(InvalidParameterError, match="method"):
        recover_pairwise([0.5, 0.5], [0.5, 0.5], np.zeros((2, 2)), method="greedy")
