"""Issue 14: bad input to the sequence module gets a clear error naming the argument."""

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

from structlp import ConvergenceWarning, InvalidInputError, InvalidParameterError
from structlp.sequence import (AutomatonTooLargeError, BigramFeatures, EditDistance,
                               HammingLoss, SequenceSSVM, SmithWaterman, SoftmaxMarginLearner,
                               build_loss_automaton, softmax_margin)


@pytest.fixture
def ssvm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SequenceSSVM(HammingLoss(), BigramFeatures(3), max_iter=2).fit(
            [None, None], [[0, 1, 2], [2, 1, 0]])


@pytest.mark.parametrize("lengths", [[3], [3, 3, 3]])
def test_ssvm_predict_lengths_must_match_the_examples(ssvm, lengths):
    with pytest.raises(InvalidInputError, match="lengths must have one entry per example \\(2\\)"):
        ssvm.predict([None, None], lengths)
    assert [len(p) for p in ssvm.predict([None, None], [3, 4])] == [3, 4]


def test_ssvm_stopped_by_max_iter_warns():
    with pytest.warns(ConvergenceWarning, match="SequenceSSVM stopped after max_iter=1.*raise "
                                                "max_iter"):
        est = SequenceSSVM(HammingLoss(), BigramFeatures(3), max_iter=1).fit(
            [None, None], [[0, 1, 2], [2, 1, 0]])
    assert not est.converged_


def test_ssvm_fit_checks_its_examples():
    est = SequenceSSVM(HammingLoss(), BigramFeatures(3))
    with pytest.raises(InvalidInputError, match="X must contain at least one example"):
        est.fit([], [])
    with pytest.raises(InvalidInputError, match="same number of examples"):
        est.fit([None], [[0, 1], [1, 0]])


@pytest.mark.parametrize("Y, match", [([[0, 5, 1]], "symbol 5 at position \\(0, 1\\)"),
                                      ([[0, -1, 1]], "symbol -1"),
                                      ([[0.5, 1.0, 1.0]], "integer symbols"),
                                      ([["0", "1", "1"]], "integer symbols"),
                                      ([0, 1, 2], "2-D array")])
def test_loss_values_check_the_symbols(Y, match):
    with pytest.raises(InvalidInputError, match="^Y must .*" + match):
        EditDistance().values(Y, [0, 1, 2], alphabet_size=3)


def test_loss_values_without_alphabet_refuse_negatives():
    with pytest.raises(InvalidInputError, match="symbol -1"):
        HammingLoss().values([[0, -1]], [0, 1])
    assert HammingLoss().values([[0, 2]], [0, 1]).tolist() == [1.0]


@pytest.mark.parametrize("args, match", [
    (("edit", [0, 1], 2, 2), "'loss' parameter of build_loss_automaton"),
    ((EditDistance(), [0, 7], 2, 2), "y_ref must contain symbols in \\{0, ..., 1\\}"),
    ((EditDistance(), [0, 1], -2, 2), "'length' parameter of build_loss_automaton"),
    ((EditDistance(), [0, 1], 2, 0), "'alphabet_size' parameter of build_loss_automaton"),
    ((EditDistance(), [0, 1], 2.5, 2), "'length' parameter")])
def test_build_loss_automaton_validates(args, match):
    with pytest.raises((InvalidInputError, InvalidParameterError), match=match):
        build_loss_automaton(*args)


def test_build_loss_automaton_flags_and_max_states():
    with pytest.raises(InvalidParameterError, match="'minimize' parameter.*bool"):
        build_loss_automaton(EditDistance(), [0, 1], 2, 2, minimize="no")
    with pytest.raises(InvalidParameterError, match="'max_states' parameter"):
        build_loss_automaton(EditDistance(), [0, 1], 2, 2, max_states=0)


def test_naive_enumeration_is_guarded():
    feats = BigramFeatures(4)
    y = np.arange(40) % 4
    with pytest.raises(InvalidParameterError, match="4\\*\\*40 outputs.*method='automata'"):
        softmax_margin(np.zeros(16), None, y, HammingLoss(), feats, method="naive")
    with pytest.raises(InvalidParameterError, match="method='automata'"):
        SoftmaxMarginLearner(HammingLoss(), feats, method="naive").fit([None], [y])


@pytest.mark.parametrize("loss", [EditDistance(), SmithWaterman()])
def test_uncapped_long_reference_stops_with_cap_remedy(loss):
    y = np.random.default_rng(0).integers(0, 4, 60)
    with pytest.raises(AutomatonTooLargeError, match="cap="):
        build_loss_automaton(loss, y, 60, 4)
    capped = type(loss)(cap=3)                    # the remedy works
    assert build_loss_automaton(capped, y, 60, 4).n_states > 0


def test_softmax_margin_return_info_is_a_bool():
    with pytest.raises(InvalidParameterError, match="'return_info' parameter.*bool"):
        softmax_margin(np.zeros(4), None, [0, 1], HammingLoss(), BigramFeatures(2),
                       return_info="yes")


@pytest.mark.parametrize("how", ["complex", "str"])
def test_complex_or_string_weights_are_refused(how):
    w = np.zeros(4) + 1j if how == "complex" else np.zeros(4).astype(str)
    with pytest.raises(InvalidInputError, match="^w must be"):
        softmax_margin(w, None, [0, 1], HammingLoss(), BigramFeatures(2))


def test_softmax_margin_learner_warns_with_convergence_warning():
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        SoftmaxMarginLearner(EditDistance(), BigramFeatures(3), max_iter=1).fit(
            [None, None], [[0, 1, 2, 1], [2, 1, 0, 0]])


@pytest.mark.parametrize("C", [0, -1.0, float("inf"), "1", True])
def test_sequence_alignment_problem_checks_C(C):
    path = Path(__file__).resolve().parents[2] / "problems" / "sequence_alignment.py"
    spec = importlib.util.spec_from_file_location("_seq_alignment_problem", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(InvalidParameterError, match="'C' option of sequence_alignment"):
        module.run(C=C, repeats=1, n_train=2, n_val=1, n_test=1, length=3)


@pytest.mark.parametrize("make", [lambda v: EditDistance(sub=v), lambda v: EditDistance(ins=v),
                                  lambda v: SmithWaterman(mismatch=-v),
                                  lambda v: SmithWaterman(gap=-v)])
@pytest.mark.parametrize("v", [2**31, 10**400])
def test_integer_costs_are_bounded(make, v):
    """Huge integer costs (beyond the int64 DP's range) are refused, not overflowed."""
    with pytest.raises(InvalidParameterError, match="magnitude at most 2\\*\\*30"):
        make(v)
    make(2**30)      # the largest allowed
