"""The inference-LP oracle of models without a fast path: HiGHS compiled once per polytope
(same vertices as the cvxpy LP), interior-point solvers refused, slow oracles announced."""

import warnings

import numpy as np
import pytest
import test_declared_model

import structlp.inference as inf
from structlp import (FractionalSolutionError, FrankWolfeLearner, InvalidParameterError,
                      MaxMarginLearner, SubgradientLearner)
from structlp.learners.cutting_plane import CuttingPlaneLearner


class DeclaredMatching(test_declared_model.DeclaredMatching):
    """A perfect bipartite matching declared with cvxpy constraints (no fast path)."""

    def decode(self, x, mu):
        return np.rint(mu)

    def polytope_key(self, x):
        return x.shape[:2]


def data(rng, m=8, n=4, d=3):
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    Y = []
    for x in X:
        s = (x @ w0).ravel() + rng.normal(size=n * n)
        sol = inf.solve_stacked_lp([DeclaredMatching().polytope(x)], [s])[0]
        Y.append(np.rint(sol))
    return X, Y


def test_direct_highs_equals_cvxpy_lp(rng):
    model = DeclaredMatching()
    x = rng.normal(size=(5, 5, 2))
    poly = model.polytope(x)
    for trial in range(20):
        s = rng.normal(size=25)
        direct = inf.solve_stacked_lp([poly], [s])[0]
        via_cvxpy = inf.solve_stacked_lp([poly], [s], solver="HIGHS",
                                         solver_opts={"verbose": False})[0]
        assert np.array_equal(np.rint(direct), np.rint(via_cvxpy))
        assert np.abs(direct - np.rint(direct)).max() <= 1e-9     # a vertex
    # tied scores (all zero): still a vertex, from the warm-started simplex
    sol = inf.solve_stacked_lp([poly], [np.zeros(25)])[0]
    assert np.abs(sol - np.rint(sol)).max() <= 1e-9
    assert np.allclose(np.rint(sol).reshape(5, 5).sum(axis=0), 1)


def test_first_order_learners_reach_the_qp_optimum(rng):
    X, Y = data(rng)
    qp = MaxMarginLearner(DeclaredMatching(), C=1.0).fit(X, Y)
    fw = FrankWolfeLearner(DeclaredMatching(), C=1.0, tol=1e-6, random_state=0,
                           max_iter=2000).fit(X, Y)
    assert qp.objective_ <= fw.objective_ * (1 + 1e-6)
    assert fw.objective_ - fw.duality_gap_ <= qp.objective_ * (1 + 1e-6)
    assert fw.objective_ <= qp.objective_ + fw.duality_gap_ + 1e-6
    cpl = CuttingPlaneLearner(DeclaredMatching(), C=1.0, tol=1e-7, one_slack=True,
                              max_iter=2000).fit(X, Y)
    assert abs(cpl.objective_ - qp.objective_) <= 1e-5 * qp.objective_


@pytest.mark.parametrize("learner", [FrankWolfeLearner, SubgradientLearner])
@pytest.mark.parametrize("solver", ["CLARABEL", "ECOS", "SCS"])
def test_interior_point_oracle_solver_is_refused(learner, solver, rng):
    X, Y = data(rng, m=3)
    with pytest.raises(InvalidParameterError, match="interior-point.*solver='HIGHS'"):
        learner(DeclaredMatching(), solver=solver, max_iter=2).fit(X, Y)


def test_interior_point_is_fine_with_a_fast_path(rng):
    """Models with a combinatorial oracle never solve an LP: any solver name is accepted."""
    from structlp.structures import BipartiteMatching
    import itertools
    X = [rng.normal(size=(3, 3, 2)) for _ in range(3)]
    Y = [np.eye(3)[rng.permutation(3)] for _ in range(3)]
    fw = FrankWolfeLearner(BipartiteMatching(), solver="CLARABEL", C=1.0, tol=1e-8,
                           max_iter=500, random_state=0).fit(X, Y)
    # the solver name changes nothing: the same iterates as the default, bit for bit
    ref = FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-8, max_iter=500,
                            random_state=0).fit(X, Y)
    np.testing.assert_array_equal(fw.coef_, ref.coef_)
    # and they are the optimum: objective_ is the exact objective of coef_ (the hinge by
    # enumerating the 6 assignments), within the certified gap of the joint QP's optimum
    perms = [np.eye(3)[list(p)] for p in itertools.permutations(range(3))]
    hinge = sum(max(np.tensordot(p - y, x, axes=2) @ fw.coef_ + np.abs(p - y).sum() / 2
                    for p in perms) for x, y in zip(X, Y))
    exact = 0.5 * fw.coef_ @ fw.coef_ + hinge
    assert fw.objective_ == pytest.approx(exact, rel=1e-9)
    qp = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    assert qp.objective_ <= exact * (1 + 1e-6)
    assert exact - qp.objective_ <= max(fw.duality_gap_, 1e-6 * qp.objective_)
    np.testing.assert_allclose(fw.coef_, qp.coef_, atol=1e-3 * max(1, np.abs(qp.coef_).max()))


def test_fractional_error_blames_the_interior_point_solver():
    model = DeclaredMatching()
    x = np.zeros((3, 3, 1))
    with pytest.raises(FractionalSolutionError, match="CLARABEL, an interior-point method"):
        inf.argmax_parts(model, [x], [np.zeros(9)], solver="CLARABEL")


def test_slow_oracle_warns_with_the_measured_cost(rng, monkeypatch):
    X, Y = data(rng, m=3)
    monkeypatch.setattr(inf, "SLOW_ORACLE_SECONDS", 0.0)
    with pytest.warns(UserWarning, match=r"ms per call measured.*MaxMarginLearner"):
        FrankWolfeLearner(DeclaredMatching(), max_iter=2).fit(X, Y)
    monkeypatch.setattr(inf, "SLOW_ORACLE_SECONDS", 10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            FrankWolfeLearner(DeclaredMatching(), max_iter=2).fit(X, Y)
        except Warning as w:          # only a ConvergenceWarning (max_iter=2) may come
            assert "ms per call" not in str(w)


def test_highs_banner_not_on_stdout(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    code = ("import numpy as np, structlp.inference as inf\n"
            "from structlp import Polytope\n"
            "p = Polytope(E=np.ones((1, 3)), e=[1.0])\n"
            "print(inf.solve_stacked_lp([p], [np.array([0.0, 2.0, 1.0])])[0].tolist())\n")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0.0, 1.0, 0.0]"
