"""Polytope extraction from cvxpy constraints, checked against matrices written by hand."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from structlp import DeclarationError, InvalidOutputError, Polytope
from structlp.structures import BipartiteMatching


def _dense(P):
    return P.A.toarray(), P.b, P.E.toarray(), P.e, P.lb, P.ub


def test_from_cvxpy_matches_handwritten_bipartite_polytope():
    n_rows, n_cols, R, P = 4, 3, 2, 2
    mu = cp.Variable(n_rows * n_cols)
    M = cp.reshape(mu, (n_rows, n_cols), order="C")
    declared = Polytope.from_cvxpy(mu, [cp.sum(M, axis=0) == R, cp.sum(M, axis=1) <= P,
                                        mu >= 0, mu <= 1])
    built = BipartiteMatching(R=R, P=P).polytope(np.zeros((n_rows, n_cols, 1)))
    for a, b in zip(_dense(declared), _dense(built)):
        np.testing.assert_allclose(a, b)


def test_bounds_are_split_from_single_coefficient_rows():
    mu = cp.Variable(3)
    P = Polytope.from_cvxpy(mu, [2 * mu[0] <= 1, -mu[1] <= 0.5, mu[2] >= 0.25,
                                 mu[0] + mu[1] + mu[2] <= 2])
    np.testing.assert_allclose(P.ub, [0.5, np.inf, np.inf])
    np.testing.assert_allclose(P.lb, [-np.inf, -0.5, 0.25])
    assert P.n_ineq == 1 and P.n_eq == 0
    np.testing.assert_allclose(P.A.toarray(), [[1, 1, 1]])


def test_matrix_constraint_is_flattened_consistently():
    # a 2-D constraint expression: cvxpy flattens in column-major order
    mu = cp.Variable(6)
    M = cp.reshape(mu, (2, 3), order="C")
    G = np.arange(6.0).reshape(2, 3) + 1
    P = Polytope.from_cvxpy(mu, [cp.multiply(G, M) <= np.ones((2, 3)) * 3, mu >= 0])
    # every row is single-coefficient: mu_jk <= 3 / G_jk
    np.testing.assert_allclose(P.ub, (3 / G).ravel())


def test_implied_bounds_drop_redundant_upper_bounds():
    P = BipartiteMatching(R=1, P=1).polytope(np.zeros((3, 3, 1)))
    np.testing.assert_allclose(P.implied_upper_bounds(), 1.0)
    assert np.all(np.isinf(P.nonredundant_ub()))
    P2 = BipartiteMatching(R=2, P=2).polytope(np.zeros((3, 3, 1)))
    np.testing.assert_allclose(P2.nonredundant_ub(), 1.0)  # implied bound is 2 > 1
    assert P.in_unit_box() and P2.in_unit_box()


def test_non_affine_constraint_is_rejected():
    mu = cp.Variable(3)
    with pytest.raises(DeclarationError, match="not affine"):
        Polytope.from_cvxpy(mu, [cp.square(mu[0]) <= 1])


def test_cone_constraint_is_rejected():
    mu = cp.Variable(3)
    with pytest.raises(DeclarationError, match="only affine"):
        Polytope.from_cvxpy(mu, [cp.SOC(mu[0], mu[1:])])


def test_empty_polytope_is_reported_as_infeasible_when_an_output_is_checked():
    mu = cp.Variable(3)
    P = Polytope.from_cvxpy(mu, [mu >= 0, cp.sum(mu) == 1, mu[0] >= 2])
    assert P.is_empty()
    with pytest.raises(DeclarationError, match="infeasible"):
        P.check_output(np.array([1.0, 0, 0]))


def test_other_variables_are_auxiliary_columns_and_must_be_bounded():
    mu, t = cp.Variable(2), cp.Variable(name="t")
    P = Polytope.from_cvxpy(mu, [mu[0] + t <= 1, mu >= 0, mu <= 1])
    assert (P.n_parts, P.n_aux) == (2, 1)
    with pytest.raises(DeclarationError, match="auxiliary variable 't'.*no finite lower bound"):
        P.check_bounded()


def test_mu_must_be_a_vector():
    with pytest.raises(DeclarationError, match="1-D cvxpy.Variable"):
        Polytope.from_cvxpy(cp.Variable((2, 2)), [])


def test_contradictory_bounds_are_infeasible():
    with pytest.raises(DeclarationError, match="infeasible"):
        Polytope(n_parts=2, lb=[0, 2], ub=[1, 1])


def test_check_output_accepts_vertices_and_rejects_the_rest():
    P = BipartiteMatching(R=1, P=1).polytope(np.zeros((2, 2, 1)))
    P.check_output(np.array([1, 0, 0, 1.0]))
    with pytest.raises(InvalidOutputError, match="violates"):
        P.check_output(np.array([1, 1, 0, 0.0]))
    with pytest.raises(InvalidOutputError, match="0/1"):
        P.check_output(np.array([0.5, 0.5, 0.5, 0.5]))
    with pytest.raises(InvalidOutputError, match=r"\(4,\)"):
        P.check_output(np.array([1, 0, 0.0]))


def test_check_output_detects_a_non_vertex_outside_the_unit_box():
    # {0 <= mu <= 2}: mu = 1 is a 0/1 point but not a vertex
    P = Polytope(n_parts=1, lb=0.0, ub=2.0)
    with pytest.raises(InvalidOutputError, match="not one of its vertices"):
        P.check_output(np.array([1.0]))
    P.check_output(np.array([0.0]))


def test_matrix_arguments_are_validated():
    with pytest.raises(DeclarationError, match="columns"):
        Polytope(A=np.ones((2, 3)), b=np.ones(2), E=sp.csr_array(np.ones((1, 4))), e=[1.0])
    with pytest.raises(DeclarationError, match="shape"):
        Polytope(A=np.ones((2, 3)), b=np.ones(3))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(0, 4), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_extraction_recovers_random_matrices(n, n_ineq, n_eq, seed):
    """Property: cvxpy constraints built from random dense matrices extract to those matrices."""
    g = np.random.default_rng(seed)
    A = g.normal(size=(n_ineq, n)) * (g.random((n_ineq, n)) < 0.8)
    A[:, 0] += 1.0 + (A[:, 0] == 0)  # at least two non-zeros per row: no row becomes a bound
    A[:, 1] -= 1.0 + (A[:, 1] == 0)
    E = g.normal(size=(n_eq, n)) + 0.1
    b, e = g.normal(size=n_ineq), g.normal(size=n_eq)
    mu = cp.Variable(n)
    cons = [mu >= -1, mu <= 2]
    if n_ineq:
        cons.append(A @ mu <= b)
    if n_eq:
        cons.append(E @ mu - e == 0)
    P = Polytope.from_cvxpy(mu, cons)
    np.testing.assert_allclose(P.A.toarray(), A.reshape(n_ineq, n), atol=1e-12)
    np.testing.assert_allclose(P.b, b, atol=1e-12)
    np.testing.assert_allclose(P.E.toarray(), E.reshape(n_eq, n), atol=1e-12)
    np.testing.assert_allclose(P.e, e, atol=1e-12)
    np.testing.assert_allclose(P.lb, -1)
    np.testing.assert_allclose(P.ub, 2)
