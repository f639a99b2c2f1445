"""Sequence losses against independent textbook dynamic programs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seq_oracles as orc
from structlp.exceptions import InvalidInputError, InvalidParameterError
from structlp.sequence import EditDistance, HammingLoss, NGramLoss, SmithWaterman, ZeroLoss

seqs = st.lists(st.integers(0, 3), min_size=1, max_size=7)

LOSSES = [
    ("EditDistance", {}), ("EditDistance", {"sub": 2, "ins": 1, "dele": 3}),
    ("EditDistance", {"sub": 3, "ins": 1, "dele": 1}), ("EditDistance", {"cap": 2}),
    ("SmithWaterman", {}), ("SmithWaterman", {"match": 3, "mismatch": -2, "gap": -2}),
    ("SmithWaterman", {"match": 1, "mismatch": 0, "gap": 0}), ("SmithWaterman", {"cap": 3}),
    ("NGramLoss", {}), ("NGramLoss", {"n": 1, "smoothing": 0.5}),
    ("NGramLoss", {"n": 3, "smoothing": 2.0}), ("NGramLoss", {"n": 2, "cap": -0.5}),
]


def make(name, params):
    import structlp.sequence as S
    return getattr(S, name)(**params)


@pytest.mark.parametrize("name,params", LOSSES)
@settings(max_examples=60, deadline=None)
@given(y=seqs, ref=seqs)
def test_loss_matches_oracle(name, params, y, ref):
    loss = make(name, params)
    expected = orc.oracle_loss(name, params)(y, ref)
    assert loss(y, ref, alphabet_size=4) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), band=st.integers(0, 3))
def test_banded_edit_distance_matches_banded_oracle(data, band):
    ref = data.draw(seqs)
    y = data.draw(st.lists(st.integers(0, 3), min_size=max(1, len(ref) - band),
                           max_size=len(ref) + band))
    got = EditDistance(band=band)(y, ref, alphabet_size=4)
    assert got == orc.edit_distance(y, ref, band=band)
    assert got >= orc.edit_distance(y, ref)


@settings(max_examples=40, deadline=None)
@given(ref=seqs)
def test_zero_at_the_reference(ref):
    assert EditDistance()(ref, ref) == 0
    assert SmithWaterman()(ref, ref) == 0
    assert HammingLoss()(ref, ref) == 0


def test_values_batch_equals_single_calls():
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 4, 5)
    Y = rng.integers(0, 4, (50, 5))
    for loss in (EditDistance(), SmithWaterman(), NGramLoss(), HammingLoss(), ZeroLoss()):
        batch = loss.values(Y, ref, alphabet_size=4)
        assert np.allclose(batch, [loss(y, ref, alphabet_size=4) for y in Y])


def test_hamming_and_zero():
    assert HammingLoss()([0, 1, 2], [0, 2, 2]) == 1
    assert ZeroLoss()([0, 1], [1, 1]) == 0
    with pytest.raises(InvalidInputError, match="length"):
        HammingLoss()([0, 1], [0, 1, 2])


@pytest.mark.parametrize("kwargs", [{"sub": 1.5}, {"ins": 0.5}, {"dele": "1"}, {"sub": -1},
                                    {"ins": True}, {"dele": float("nan")}])
def test_non_integer_edit_costs_rejected(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of EditDistance"):
        EditDistance(**kwargs)


def test_integer_valued_float_costs_accepted():
    assert EditDistance(sub=2.0)([0], [1]) == 2


@pytest.mark.parametrize("smoothing", [0, -1.0, float("inf")])
def test_bad_smoothing(smoothing):
    with pytest.raises(InvalidParameterError, match="'smoothing' parameter of NGramLoss"):
        NGramLoss(smoothing=smoothing)


@pytest.mark.parametrize("kwargs,name", [({"match": 0}, "match"), ({"mismatch": 3}, "mismatch"),
                                         ({"gap": 1}, "gap"), ({"match": 1.5}, "match")])
def test_bad_smith_waterman_scores(kwargs, name):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of SmithWaterman"):
        SmithWaterman(**kwargs)


def test_bad_cap_band_n():
    with pytest.raises(InvalidParameterError, match="'cap'"):
        EditDistance(cap=0)
    with pytest.raises(InvalidParameterError, match="'band'"):
        EditDistance(band=-1)
    with pytest.raises(InvalidParameterError, match="'n'"):
        NGramLoss(n=0)


@pytest.mark.parametrize("bad,what", [([], "non-empty"), ([0, -1], "symbols in"),
                                      ([0.5, 1], "integer"), ([[0, 1]], "1-D"), ("ab", "1-D")])
def test_bad_sequences(bad, what):
    with pytest.raises(InvalidInputError, match=what):
        EditDistance()(bad, [0, 1])
    with pytest.raises(InvalidInputError, match=what):
        EditDistance()([0, 1], bad)


def test_symbol_outside_given_alphabet():
    with pytest.raises(InvalidInputError, match=r"symbols in \{0, ..., 2\}"):
        EditDistance()([0, 5], [0, 1], alphabet_size=3)


def test_band_too_narrow_for_lengths():
    with pytest.raises(InvalidInputError, match="band must be >= 2"):
        EditDistance(band=1)([0, 1, 2], [0])
