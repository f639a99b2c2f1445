"""Polytope extraction from cvxpy constraints, checked against matrices written by hand."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
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


# ---------------------------------------------------------------- implied bounds
def _lp_range(P, j):
    """min and max of column j over P by two LPs (scipy's HiGHS): the independent oracle."""
    from scipy.optimize import linprog
    out = []
    for sign in (1, -1):
        c = np.zeros(P.n_columns)
        c[j] = sign
        res = linprog(c, A_ub=P.A if P.n_ineq else None, b_ub=P.b if P.n_ineq else None,
                      A_eq=P.E if P.n_eq else None, b_eq=P.e if P.n_eq else None,
                      bounds=list(zip(np.where(np.isfinite(P.lb), P.lb, None),
                                      np.where(np.isfinite(P.ub), P.ub, None))),
                      method="highs-ds", options={"presolve": False})
        assert res.status in (0, 3)
        out.append(sign * res.fun if res.status == 0 else -sign * np.inf)
    return out


def test_flow_bounded_through_its_capacities_is_accepted():
    """f >= 0, f <= mu, 0 <= mu <= 1: f has no bound of its own but is bounded by 1."""
    mu, f = cp.Variable(3, name="mu"), cp.Variable(3, name="f")
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, f >= 0, f <= mu, cp.sum(f) == 1])
    assert np.isinf(P.ub[3:]).all()                  # no explicit bound on f
    P.check_bounded()
    lo, hi = P.implied_bounds()
    np.testing.assert_allclose(lo, 0.0)
    np.testing.assert_allclose(hi, 1.0)


def test_bounds_that_only_an_lp_finds_are_accepted():
    """|g0 + g1| <= 1, |g0 - g1| <= 1: every row has two unbounded columns, so propagation
    alone finds nothing; the LP does (g in [-1, 1])."""
    from structlp.utils.polyhedra import propagate_bounds
    mu, g = cp.Variable(2, name="mu"), cp.Variable(2, name="g")
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, g[0] + g[1] <= mu[0], -g[0] - g[1] <= 1,
                                 g[0] - g[1] <= 1, g[1] - g[0] <= 1])
    lo, hi = propagate_bounds(P.A, P.b, P.E, P.e, P.lb, P.ub)
    assert np.isinf(lo[2:]).all() and np.isinf(hi[2:]).all()
    P.check_bounded()
    lo, hi = P.implied_bounds()
    for j in range(P.n_columns):
        lp_lo, lp_hi = _lp_range(P, j)
        assert lo[j] <= lp_lo + 1e-7 and hi[j] >= lp_hi - 1e-7
        assert np.isfinite(lo[j]) and np.isfinite(hi[j])


def test_truly_unbounded_polytope_is_refused_naming_the_variable():
    mu, g = cp.Variable(2, name="mu"), cp.Variable(2, name="g")
    # g0 - g1 is bounded, g0 + g1 is not (from below)
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, g[0] + g[1] <= mu[0], g[0] - g[1] <= 1,
                                 g[1] - g[0] <= 1])
    with pytest.raises(DeclarationError, match=r"entry \(0,\) of the auxiliary variable 'g' "
                                               r"\(and 1 more\) has no finite lower bound"):
        P.check_bounded()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
@example(8)     # HiGHS's presolve calls one of its unbounded LPs infeasible
def test_implied_bounds_are_valid_and_finite_exactly_where_the_lp_is_bounded(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 6)), int(rng.integers(1, 7))
    A = rng.integers(-2, 3, size=(m, n)).astype(float)
    x0 = rng.uniform(-1, 1, size=n)                   # a feasible point
    b = A @ x0 + rng.uniform(0, 1, size=m)
    lb = np.where(rng.random(n) < 0.4, -1.0 - rng.random(n), -np.inf)
    ub = np.where(rng.random(n) < 0.4, 1.0 + rng.random(n), np.inf)
    P = Polytope(A=A, b=b, lb=lb, ub=ub)
    lo, hi = P.implied_bounds()
    for j in range(n):
        lp_lo, lp_hi = _lp_range(P, j)
        # valid (never tighter than the LP's range), and finite exactly where it is
        assert np.isfinite(lo[j]) == np.isfinite(lp_lo)
        assert np.isfinite(hi[j]) == np.isfinite(lp_hi)
        if np.isfinite(lp_lo):
            assert lo[j] <= lp_lo + 1e-6 * (1 + abs(lp_lo))
        if np.isfinite(lp_hi):
            assert hi[j] >= lp_hi - 1e-6 * (1 + abs(lp_hi))
    # refused as unbounded exactly when it is (never as empty: x0 is feasible)
    if np.isfinite(lo).all() and np.isfinite(hi).all():
        P.check_bounded()
    else:
        with pytest.raises(DeclarationError, match="must be bounded"):
            P.check_bounded()


# ---------------------------------------------------------------- what is refused, named
def test_violated_constraint_is_named():
    mu = cp.Variable(3, name="mu")
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, cp.sum(mu) <= 1, mu[0] + mu[2] == 1])
    with pytest.raises(InvalidOutputError, match=r"inequality row 0 .*from constraint 2 "
                                                 r"`Sum\(mu.*<= 1.0` by 1"):
        P.check_output(np.array([1.0, 1.0, 0.0]))
    with pytest.raises(InvalidOutputError, match=r"equality row 0 .*from constraint 3 "
                                                 r"`mu\[0\] \+ mu\[2\] == 1.0` by 1"):
        P.check_output(np.array([0.0, 1.0, 0.0]))
    # a vector constraint: the entry that fails
    Q = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, np.ones((2, 3)) @ mu <= [2, 1]])
    with pytest.raises(InvalidOutputError, match=r"from constraint 2 .*entry \(1,\) by 1"):
        Q.check_output(np.array([1.0, 1.0, 0.0]))
    # matrices: by kind and index
    R = Polytope(A=np.array([[0.0, 0, 1], [1, 1, 0]]), b=[1.0, 1.0])
    with pytest.raises(InvalidOutputError, match=r"inequality row 1 \(A\[1\] @ mu <= b\[1\] = 1\)"):
        R.check_output(np.array([1.0, 1.0, 0.0]))
    S = Polytope(E=np.ones((1, 2)), e=[1.0], lb=0.0, ub=[1.0, 0.0])
    with pytest.raises(InvalidOutputError, match=r"the upper bound of part 1 \(<= 0\)"):
        S.check_output(np.array([0.0, 1.0]))


def test_extended_polytope_names_a_violated_row_of_the_parts():
    mu, f = cp.Variable(3, name="mu"), cp.Variable(3, name="f")
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, f >= 0, f <= mu, cp.sum(f) == 1,
                                 mu[1] == 0])
    with pytest.raises(InvalidOutputError, match=r"from constraint 5 `mu\[1\] == 0.0` by 1"):
        P.check_output(np.array([0.0, 1.0, 0.0]))
    with pytest.raises(InvalidOutputError, match="no auxiliary variables complete it"):
        P.check_output(np.array([0.0, 0.0, 0.0]))


def test_constraints_that_never_involve_mu_are_refused():
    mu, other = cp.Variable(3, name="mu"), cp.Variable(2, name="other")
    with pytest.raises(DeclarationError, match="None of the 1 constraints involves the "
                                               "part-indicator variable 'mu'.*'other'"):
        Polytope.from_cvxpy(mu, [other >= 0])
    with pytest.raises(DeclarationError, match="None of the 0 constraints"):
        Polytope.from_cvxpy(mu, [])


def test_auxiliary_variable_not_linked_to_mu_is_refused():
    mu, g, h = cp.Variable(3, name="mu"), cp.Variable(2, name="g"), cp.Variable(name="h")
    with pytest.raises(DeclarationError, match=r"'g' of constraint\(s\) \[2, 3\] is not linked"):
        Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, g >= 0, g <= 1])
    # linked through another auxiliary variable: accepted
    P = Polytope.from_cvxpy(mu, [mu >= 0, mu <= 1, h <= mu[0], g >= 0, g <= h])
    assert P.n_aux == 3


def test_attributes_of_mu_are_read_or_refused():
    mu = cp.Variable(3, nonneg=True, name="mu")
    P = Polytope.from_cvxpy(mu, [mu <= 1, cp.sum(mu) == 2])
    np.testing.assert_array_equal(P.lb, 0.0)
    b = cp.Variable(3, boolean=True, name="b")
    with pytest.raises(DeclarationError, match="part-indicator variable 'b' has the "
                                               "attribute 'boolean'"):
        Polytope.from_cvxpy(b, [b <= 1, b >= 0])


def test_an_empty_polytope_found_by_its_implied_bounds_is_named():
    P = Polytope(A=[[1.0, 1.0]], b=[-1.0], lb=[0.0, 0.0], ub=[np.inf, np.inf])
    with pytest.raises(DeclarationError, match=r"infeasible \(empty\).*imply 0 <= part 0 <= -1"):
        P.check_bounded()
