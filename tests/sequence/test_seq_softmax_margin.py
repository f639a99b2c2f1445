"""Softmax-margin value and gradient: automata vs naive vs brute force vs finite differences."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seq_oracles as orc
import structlp.sequence as S
from structlp.exceptions import InvalidInputError, InvalidParameterError
from structlp.sequence import (BigramFeatures, EditDistance, FunctionFeatures, NGramLoss,
                               SmithWaterman, build_loss_automaton, softmax_margin)

LOSSES = [
    ("EditDistance", {}), ("EditDistance", {"sub": 2, "ins": 1, "dele": 3}),
    ("EditDistance", {"cap": 2}), ("EditDistance", {"band": 1}),
    ("SmithWaterman", {}), ("SmithWaterman", {"match": 3, "mismatch": -2, "gap": -2}),
    ("SmithWaterman", {"cap": 3}), ("SmithWaterman", {"band": 1}),
    ("NGramLoss", {}), ("NGramLoss", {"n": 1, "smoothing": 0.5}),
    ("NGramLoss", {"n": 3, "smoothing": 2.0}), ("NGramLoss", {"n": 2, "cap": -0.5}),
    ("HammingLoss", {}), ("ZeroLoss", {}),
]


def make_loss(name, params):
    return getattr(S, name)(**params)


def random_features(rng, k, q, l, d=3):
    """FunctionFeatures with a random position-dependent table psi(z, s)."""
    table = {}
    for s in range(1, l + 1):
        for z in itertools.product(range(k), repeat=min(q, s)):
            table[z, s] = rng.normal(size=d)
    feats = FunctionFeatures(lambda x, z, s: table[tuple(z), s], k, q, d)

    def psi(y):
        return sum(table[tuple(y[max(0, s - q):s]), s] for s in range(1, len(y) + 1))
    return feats, psi


def close(a, b, rtol=1e-9):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(1.0, float(np.max(np.abs(b))))
    return np.allclose(a, b, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("name,params", LOSSES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_automata_equals_naive(name, params, data):
    k = data.draw(st.integers(1, 4), "k")
    l = data.draw(st.integers(1, 6), "l")
    q = data.draw(st.sampled_from([1, 2]), "q")
    seed = data.draw(st.integers(0, 2**32 - 1), "seed")
    scale = data.draw(st.sampled_from([0.1, 1.0, 5.0]), "scale")
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, k, l)
    if q == 2 and data.draw(st.booleans(), "bigram"):
        feats = BigramFeatures(k)
    else:
        feats, _ = random_features(rng, k, q, l)
    w = scale * rng.normal(size=feats.n_features)
    loss = make_loss(name, params)
    v1, g1 = softmax_margin(w, None, y_true, loss, feats, method="automata")
    v2, g2 = softmax_margin(w, None, y_true, loss, feats, method="naive")
    assert close(v1, v2) and close(g1, g2)


@pytest.mark.parametrize("name,params", LOSSES)
@pytest.mark.parametrize("q", [1, 2])
def test_naive_and_automata_equal_brute_force(name, params, q):
    """The library's naive sum is itself checked against a plain python sum with oracle losses."""
    rng = np.random.default_rng(hash((name, q)) % 2**32)
    k, l = 3, 4
    y_true = rng.integers(0, k, l)
    feats, psi = random_features(rng, k, q, l)
    w = rng.normal(size=feats.n_features)
    v0, g0 = orc.brute_force_softmax_margin(w, psi, y_true, k, orc.oracle_loss(name, params))
    for method in ("naive", "automata"):
        v, g = softmax_margin(w, None, y_true, make_loss(name, params), feats, method=method)
        assert close(v, v0) and close(g, g0)


@pytest.mark.parametrize("name,params", LOSSES)
def test_gradient_matches_finite_differences(name, params):
    rng = np.random.default_rng(1)
    k, l = 3, 5
    y_true = rng.integers(0, k, l)
    feats = BigramFeatures(k)
    w = rng.normal(size=feats.n_features)
    loss = make_loss(name, params)
    _, g = softmax_margin(w, None, y_true, loss, feats)
    eps = 1e-6
    fd = np.empty_like(w)
    for i in range(len(w)):
        e = np.zeros_like(w)
        e[i] = eps
        fd[i] = (softmax_margin(w + e, None, y_true, loss, feats)[0]
                 - softmax_margin(w - e, None, y_true, loss, feats)[0]) / (2 * eps)
    assert np.allclose(g, fd, atol=1e-7)


@pytest.mark.parametrize("name,params", LOSSES)
@pytest.mark.parametrize("k,l", [(2, 5), (3, 4)])
def test_automaton_weight_equals_exp_loss_for_every_y(name, params, k, l):
    """B(y) = exp(L(y, y_ref)) for every y in Delta^l: the automaton is right, not just the sums."""
    rng = np.random.default_rng(7)
    oracle = orc.oracle_loss(name, params)
    for _ in range(3):
        ref = list(rng.integers(0, k, l))
        B = build_loss_automaton(make_loss(name, params), np.array(ref), l, k)
        assert all(n <= d for n, d in zip(B.states_per_layer, B.determinized_states_per_layer))
        for y in itertools.product(range(k), repeat=l):
            assert math.isclose(math.exp(B.log_weight(y)), math.exp(oracle(list(y), ref)),
                                rel_tol=1e-12)


def test_minimized_automaton_is_smaller_and_equivalent():
    rng = np.random.default_rng(3)
    ref = rng.integers(0, 3, 6)
    big = build_loss_automaton(EditDistance(), ref, 6, 3, minimize=False)
    small = build_loss_automaton(EditDistance(), ref, 6, 3)
    assert small.n_states < big.n_states
    for y in itertools.product(range(3), repeat=6):
        assert big.log_weight(y) == pytest.approx(small.log_weight(y), abs=1e-12)


@pytest.mark.parametrize("loss", [EditDistance(), SmithWaterman(), NGramLoss(),
                                  EditDistance(cap=2)])
@pytest.mark.parametrize("scale", [1e2, 1e4, 1e8])
def test_stable_for_large_weights(loss, scale):
    rng = np.random.default_rng(0)
    k, l = 4, 6
    y_true = rng.integers(0, k, l)
    feats = BigramFeatures(k)
    w = scale * rng.normal(size=feats.n_features)
    v, g = softmax_margin(w, None, y_true, loss, feats)
    assert np.isfinite(v) and np.all(np.isfinite(g))
    vn, gn = softmax_margin(w, None, y_true, loss, feats, method="naive")
    assert close(v, vn) and close(g, gn)
    # the gradient is E[Psi] - Psi(y_true): each bigram count is in [-(l-1), l-1]
    assert np.all(np.abs(g) <= l - 1 + 1e-9)


def test_longer_sequences_agree_with_naive():
    rng = np.random.default_rng(11)
    k, l = 2, 12
    y_true = rng.integers(0, k, l)
    feats = BigramFeatures(k)
    w = rng.normal(size=4)
    for loss in (EditDistance(), SmithWaterman(), NGramLoss(n=3)):
        v1, g1 = softmax_margin(w, None, y_true, loss, feats)
        v2, g2 = softmax_margin(w, None, y_true, loss, feats, method="naive")
        assert close(v1, v2) and close(g1, g2)


def test_return_info_reports_automaton_size():
    v, g, info = softmax_margin(np.zeros(9), None, [0, 1, 2, 0], EditDistance(), BigramFeatures(3),
                                return_info=True)
    assert info["n_states"] == sum(info["states_per_layer"])
    assert info["lattice_states"] >= info["n_states"] - 1
    assert {"n_arcs", "determinized_states", "max_states_per_layer"} <= set(info)


def test_too_large_automaton_raises_clear_error():
    with pytest.raises(S.AutomatonTooLargeError, match="cap="):
        build_loss_automaton(SmithWaterman(), np.arange(8) % 5, 8, 5, max_states=10)


# ------------------------------------------------------------------ bad input

def test_w_of_wrong_length():
    with pytest.raises(InvalidInputError, match="w must be a vector of length 9.*shape \\(8,\\)"):
        softmax_margin(np.zeros(8), None, [0, 1], EditDistance(), BigramFeatures(3))


def test_w_with_nan():
    with pytest.raises(InvalidInputError, match="NaN"):
        softmax_margin(np.full(9, np.nan), None, [0, 1], EditDistance(), BigramFeatures(3))


@pytest.mark.parametrize("y,what", [([], "non-empty"), ([0, 3], "symbols in"),
                                    ([0.5], "integer")])
def test_bad_reference(y, what):
    with pytest.raises(InvalidInputError, match=f"y_true.*{what}|{what}"):
        softmax_margin(np.zeros(9), None, y, EditDistance(), BigramFeatures(3))


def test_bad_method_loss_features():
    with pytest.raises(InvalidParameterError, match="'method'"):
        softmax_margin(np.zeros(9), None, [0], EditDistance(), BigramFeatures(3), method="fast")
    with pytest.raises(InvalidParameterError, match="'loss'"):
        softmax_margin(np.zeros(9), None, [0], "edit", BigramFeatures(3))
    with pytest.raises(InvalidParameterError, match="'features'"):
        softmax_margin(np.zeros(9), None, [0], EditDistance(), 3)


def test_bad_feature_function_output():
    feats = FunctionFeatures(lambda x, z, s: np.zeros(2), 2, 1, 3)
    with pytest.raises(InvalidInputError, match=r"shape \(3,\)"):
        softmax_margin(np.zeros(3), None, [0, 1], EditDistance(), feats)
