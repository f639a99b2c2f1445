"""Bad input to the structured layers: clear errors naming the argument."""

import numpy as np
import pytest
from layer_cases import case

from structlp import InvalidInputError, InvalidOutputError, InvalidParameterError
from structlp.layers import fy_loss, fy_loss_batch, sparsemap, sparsemap_batch, spo_plus


@pytest.fixture
def matching():
    model, x, outs, M = case("matching")
    return model, x, outs[0], M.shape[1]


@pytest.mark.parametrize("bad, match", [
    (np.zeros(5), r"theta must have shape \(16,\).*got shape \(5,\)"),
    (np.zeros((4, 4)), r"theta must have shape \(16,\)"),
    (np.r_[np.nan, np.zeros(15)], "theta contains NaN or infinite"),
    (np.r_[np.inf, np.zeros(15)], "theta contains NaN or infinite"),
    (np.zeros(16, dtype=complex), "theta must be real; got complex"),
    (np.zeros(16, dtype=int), "theta must hold floating-point part scores; got integer"),
    (np.zeros(16, dtype=bool), "theta must hold floating-point part scores; got boolean"),
    (["a"] * 16, "theta must be a numeric array"),
])
@pytest.mark.parametrize("fn", ["sparsemap", "fy_loss"])
def test_bad_theta_is_refused_naming_it(matching, bad, match, fn):
    model, x, y, _ = matching
    with pytest.raises(InvalidInputError, match=match):
        if fn == "sparsemap":
            sparsemap(model, x, bad)
        else:
            fy_loss(model, x, bad, y, kind="hinge")


def test_crf_on_a_matching_names_the_alternatives(matching):
    model, x, y, L = matching
    with pytest.raises(InvalidParameterError, match="crf.*'sparsemap'.*'perturbed'"):
        fy_loss(model, x, np.zeros(L), y, kind="crf")


def test_y_not_an_output_of_x(matching):
    model, x, _, L = matching
    with pytest.raises(InvalidOutputError, match="y.*must be an output of x"):
        fy_loss(model, x, np.zeros(L), np.ones((4, 4)), kind="sparsemap")
    with pytest.raises(InvalidOutputError, match="Y\\[1\\]"):
        fy_loss_batch(model, [x, x], np.zeros((2, L)), [np.eye(4), np.ones((4, 4))])
    with pytest.raises(InvalidOutputError, match="w.*must be an output of x"):
        spo_plus(model, x, np.zeros(L), np.zeros(L), w=np.ones((4, 4)))
    with pytest.raises(InvalidOutputError, match="w.*must be an output of x"):
        spo_plus(model, x, np.zeros(L), np.zeros(L), w=np.ones(L))        # a part vector


def test_unknown_kind_and_options(matching):
    model, x, y, L = matching
    with pytest.raises(InvalidParameterError, match="'kind'.*must be one of.*'hinge'.*'svm'"):
        fy_loss(model, x, np.zeros(L), y, kind="svm")
    with pytest.raises(InvalidParameterError, match="kind='hinge' takes the options none.*"
                                                     "n_samples"):
        fy_loss(model, x, np.zeros(L), y, kind="hinge", n_samples=3)
    with pytest.raises(InvalidParameterError, match="'sigma'"):
        fy_loss(model, x, np.zeros(L), y, kind="perturbed", sigma=0.0)
    with pytest.raises(InvalidParameterError, match="'tol'"):
        sparsemap(model, x, np.zeros(L), tol=-1.0)
    with pytest.raises(InvalidParameterError, match="'model'.*StructuredModel"):
        sparsemap("matching", x, np.zeros(L))


def test_a_2d_batch_refuses_examples_of_other_part_counts(matching):
    model, x, _, L = matching
    small = np.zeros((3, 3, 1))
    with pytest.raises(InvalidInputError, match=r"X\[1\] has 9 parts.*equal part counts"):
        sparsemap_batch(model, [x, small], np.zeros((2, L)))
    with pytest.raises(InvalidInputError, match="one row per example: 3 examples, 2 rows"):
        sparsemap_batch(model, [x, x, x], np.zeros((2, L)))
    with pytest.raises(InvalidInputError, match=r"thetas\[1\] must have shape \(9,\)"):
        sparsemap_batch(model, [x, small], [np.zeros(L), np.zeros(L)])
    with pytest.raises(InvalidInputError, match=r"X\[1\]"):      # not an example of the model
        sparsemap_batch(model, [x, np.zeros((3, 3))], [np.zeros(L), np.zeros(9)])


def test_changed_model_parameters_are_not_served_a_stale_polytope():
    """A b-matching (R=1, P=2) then, the same model object set to P=1: y with a row of two
    ones is an output of the first and not of the second."""
    from structlp.structures import BipartiteMatching
    model = BipartiteMatching(R=1, P=2)
    x, y = np.zeros((3, 3, 1)), np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]])
    fy_loss(model, x, np.zeros(9), y, kind="hinge")
    model.P = 1
    with pytest.raises(InvalidOutputError, match="must be an output of x"):
        fy_loss(model, x, np.zeros(9), y, kind="hinge")
