"""Bad input to the graph structures and the certificate formulation: clear errors."""

import numpy as np
import pytest

from structlp import (DeclarationError, InvalidInputError, InvalidOutputError,
                      InvalidParameterError, MaxMarginLearner)
from structlp.structures import BipartiteMatching, Matching, PerfectMatching, SpanningTree


def sym(x):
    return (x + x.transpose(1, 0, 2)) / 2


def adj(n, pairs):
    y = np.zeros((n, n), dtype=int)
    for a, b in pairs:
        y[a, b] = y[b, a] = 1
    return y


@pytest.fixture
def x4(rng):
    return sym(rng.normal(size=(4, 4, 2)))


def fit(model, X, Y):
    return MaxMarginLearner(model, formulation="certificate").fit(X, Y)


def test_spanning_tree_with_cycle(x4):
    y = adj(4, [(0, 1), (1, 2), (2, 0)])  # 3 edges, cycle, node 3 isolated
    with pytest.raises(InvalidOutputError, match="not a spanning tree.*contains a cycle"):
        fit(SpanningTree(), [x4], [y])
    y = adj(4, [(0, 1), (1, 2), (2, 3), (3, 0)])
    with pytest.raises(InvalidOutputError, match="4 edges.*cycle"):
        fit(SpanningTree(), [x4], [y])


def test_spanning_tree_too_few_edges(x4):
    with pytest.raises(InvalidOutputError, match="2 edges.*disconnected"):
        fit(SpanningTree(), [x4], [adj(4, [(0, 1), (2, 3)])])


def test_disconnected_mask(x4):
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 1] = mask[1, 0] = mask[2, 3] = mask[3, 2] = True
    with pytest.raises(InvalidInputError, match="disconnected.*no spanning tree"):
        fit(SpanningTree(), [(x4, mask)], [adj(4, [(0, 1), (2, 3)])])


def test_mask_errors(x4):
    m = ~np.eye(4, dtype=bool)
    m[0, 1] = False
    with pytest.raises(InvalidInputError, match="mask.*symmetric"):
        SpanningTree().check_x((x4, m))
    with pytest.raises(InvalidInputError, match="self-loops"):
        SpanningTree().check_x((x4, np.ones((4, 4), dtype=bool)))
    with pytest.raises(InvalidInputError, match=r"mask.*shape \(4, 4\)"):
        SpanningTree().check_x((x4, np.ones((3, 3), dtype=bool)))


def test_y_uses_edge_outside_mask(x4):
    mask = ~np.eye(4, dtype=bool)
    mask[0, 3] = mask[3, 0] = False
    with pytest.raises(InvalidOutputError, match=r"edge \(0, 3\).*not in the graph"):
        fit(SpanningTree(), [(x4, mask)], [adj(4, [(0, 3), (0, 1), (1, 2)])])


@pytest.mark.parametrize("model", [SpanningTree(), PerfectMatching(), Matching()])
def test_asymmetric_x(model, rng):
    x = rng.normal(size=(4, 4, 2))
    with pytest.raises(InvalidInputError, match=r"must be symmetric.*x\[0, 1\] != x\[1, 0\]"):
        model.check_x(x)


@pytest.mark.parametrize("model", [SpanningTree(), PerfectMatching(), Matching()])
def test_x_shape_and_values(model, rng):
    with pytest.raises(InvalidInputError, match=r"shape \(n, n, d\)"):
        model.check_x(rng.normal(size=(4, 3, 2)))
    with pytest.raises(InvalidInputError, match=r"shape \(n, n, d\)"):
        model.check_x(rng.normal(size=(4, 4)))
    x = sym(rng.normal(size=(4, 4, 2)))
    x[0, 1, 0] = x[1, 0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        model.check_x(x)


@pytest.mark.parametrize("model", [SpanningTree(), PerfectMatching(), Matching()])
def test_y_not_an_adjacency(model, x4):
    y = adj(4, [(0, 1), (2, 3)])
    with pytest.raises(InvalidOutputError, match=r"shape \(4, 4\)"):
        fit(model, [x4], [y[:3]])
    y2 = y.copy()
    y2[0, 1] = 0
    with pytest.raises(InvalidOutputError, match="symmetric"):
        fit(model, [x4], [y2])
    y3 = y.astype(float)
    y3[0, 1] = y3[1, 0] = 0.5
    with pytest.raises(InvalidOutputError, match="only 0 and 1"):
        fit(model, [x4], [y3])
    y4 = y.copy()
    y4[2, 2] = 1
    with pytest.raises(InvalidOutputError, match="self-loop"):
        fit(model, [x4], [y4])


def test_perfect_matching_wrong_degree(x4):
    with pytest.raises(InvalidOutputError, match="not a perfect matching: node 2 has degree 0"):
        fit(PerfectMatching(), [x4], [adj(4, [(0, 1)])])
    with pytest.raises(InvalidOutputError, match="not a perfect matching: node 0 has degree 2"):
        fit(PerfectMatching(), [x4], [adj(4, [(0, 1), (0, 2), (3, 1)])])


def test_perfect_matching_odd_n(rng):
    x = sym(rng.normal(size=(5, 5, 2)))
    with pytest.raises(InvalidInputError, match="odd number of nodes"):
        fit(PerfectMatching(), [x], [adj(5, [(0, 1), (2, 3)])])


def test_perfect_matching_mask_without_perfect_matching(x4):
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 1:] = mask[1:, 0] = True  # a star has no perfect matching
    with pytest.raises(InvalidInputError, match="no perfect matching"):
        PerfectMatching().check_x((x4, mask))


def test_matching_wrong_degree(x4):
    with pytest.raises(InvalidOutputError, match="not a matching: node 1 has degree 2"):
        fit(Matching(), [x4], [adj(4, [(0, 1), (1, 2)])])


@pytest.mark.parametrize("model", [PerfectMatching(), Matching()])
def test_minmax_not_offered(model, x4):
    with pytest.raises(InvalidParameterError,
                       match=r"'formulation'.*\['certificate'\].*no compact LP.*certificate"):
        MaxMarginLearner(model).fit([x4], [adj(4, [(0, 1), (2, 3)])])
    with pytest.raises(DeclarationError, match="no compact output polytope"):
        model.polytope(x4)


def test_spanning_tree_offers_minmax(x4):
    """Spanning trees have a compact extended formulation, hence formulation='minmax'."""
    assert SpanningTree().formulations == ("certificate", "minmax")
    assert SpanningTree().polytope(x4).n_aux == 2 * 4 * 6


@pytest.mark.parametrize("slack", ["one", "", 3, "Two_sided"])
def test_unknown_slack(slack, x4):
    with pytest.raises(InvalidParameterError,
                       match=r"'slack'.*\['two_sided', 'part', 'shared'\].*got"):
        MaxMarginLearner(SpanningTree(), formulation="certificate",
                         slack=slack).fit([x4], [adj(4, [(0, 1), (1, 2), (2, 3)])])


@pytest.mark.parametrize("model, y", [(SpanningTree(), [(0, 1), (1, 2), (2, 3)]),
                                      (BipartiteMatching(), None)])
def test_slack_on_a_formulation_without_one(model, y, x4, rng):
    x, Y = (x4, adj(4, y)) if y else (rng.normal(size=(3, 3, 2)), np.eye(3, dtype=int))
    with pytest.raises(InvalidParameterError,
                       match=r"'slack'.*only to formulation='certificate'.*'minmax'.*"
                             r"slack=None; got slack='part'"):
        MaxMarginLearner(model, formulation="minmax", slack="part").fit([x], [Y])


def test_tree_output_checked_against_the_extended_polytope(x4):
    """A 0/1 point that is no tree is rejected by the extended polytope's projection check
    (through its lift, and through the feasibility LP when there is no lift)."""
    from structlp import InvalidOutputError
    from structlp.polytope import Polytope
    P = SpanningTree().polytope(x4)
    g = SpanningTree().check_x(x4)
    tree = adj(4, [(0, 1), (1, 2), (2, 3)])[g.u, g.v].astype(float)
    cycle = adj(4, [(0, 1), (1, 2), (0, 2)])[g.u, g.v].astype(float)
    bare = Polytope(E=P.E, e=P.e, lb=P.lb, ub=P.ub, n_parts=P.n_parts, n_aux=P.n_aux)
    for poly in (P, bare):
        np.testing.assert_array_equal(poly.check_output(tree), tree)
        with pytest.raises(InvalidOutputError, match="not an output of the declared extended"):
            poly.check_output(cycle)


def test_bipartite_certificate_needs_one_to_one(rng):
    x = rng.normal(size=(4, 2, 2))
    y = np.zeros((4, 2), dtype=int)
    y[[0, 1, 2, 3], [0, 0, 1, 1]] = 1
    with pytest.raises(InvalidParameterError, match="certificate.*R == P == 1.*R=2"):
        MaxMarginLearner(BipartiteMatching(R=2, P=1), formulation="certificate").fit([x], [y])


def test_bipartite_certificate_checks_y(rng):
    x = rng.normal(size=(3, 3, 2))
    with pytest.raises(InvalidOutputError):
        MaxMarginLearner(BipartiteMatching(), formulation="certificate").fit(
            [x], [np.ones((3, 3))])


@pytest.mark.parametrize("cls", [PerfectMatching, Matching])
@pytest.mark.parametrize("param, value, match", [
    ("certificate", "blossom", r"'certificate' parameter of \w*Matching must be one of "
                               r"\['alternating_cycle', 'odd_sets'\]. Got 'blossom'"),
    ("certificate", None, r"'certificate' parameter.*Got None"),
    ("max_odd_sets", -1, r"'max_odd_sets' parameter of \w*Matching must be an int >= 0. "
                         r"Got -1"),
    ("max_odd_sets", 2.5, r"'max_odd_sets'.*an int >= 0. Got 2.5"),
    ("max_odd_sets", True, r"'max_odd_sets'.*Got True")])
def test_bad_matching_certificate_parameters(cls, param, value, match, x4):
    """The certificate's parameters are checked when the certificate is built (fit), with
    the parameter, the options and the value in the message."""
    model = cls(**{param: value})
    assert getattr(model, param) is value                 # __init__ only stores
    with pytest.raises(InvalidParameterError, match=match):
        fit(model, [x4], [adj(4, [(0, 1), (2, 3)])])
