"""The inference LP against brute-force enumeration and the Hungarian algorithm."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from oracles import enumerate_bmatchings
from structlp.inference import maximize, solve_stacked_lp
from structlp.structures import BipartiteMatching

LP_SOLVERS = ["HIGHS", "CLARABEL", "ECOS"]


@pytest.mark.parametrize("lp_solver", LP_SOLVERS)
@pytest.mark.parametrize("n_rows, n_cols, R, P", [(3, 3, 1, 1), (4, 3, 2, 2), (4, 2, 1, 2),
                                                  (3, 4, 2, 3), (5, 2, 2, 1)])
def test_inference_lp_equals_brute_force(lp_solver, n_rows, n_cols, R, P, rng):
    model = BipartiteMatching(R=R, P=P)
    outputs = enumerate_bmatchings(n_rows, n_cols, R, P)
    X = [model.check_x(rng.normal(size=(n_rows, n_cols, 2))) for _ in range(4)]
    scores = [rng.normal(size=n_rows * n_cols) for _ in X]
    polys = [model.polytope(x) for x in X]
    sols = solve_stacked_lp(polys, scores, solver=lp_solver)
    for x, s, sol in zip(X, scores, sols):
        S = s.reshape(n_rows, n_cols)
        values = [float(np.sum(S * y)) for y in outputs]
        best = outputs[int(np.argmax(values))]
        # the LP optimum is integral and is the enumerated optimum
        np.testing.assert_allclose(sol, np.rint(sol), atol=1e-6)
        np.testing.assert_array_equal(np.rint(sol).reshape(n_rows, n_cols), best)
        assert abs(s @ sol - max(values)) <= 1e-6 * (1 + abs(max(values)))


@pytest.mark.parametrize("n_rows, n_cols", [(5, 5), (8, 5), (12, 12)])
def test_fast_path_and_lp_equal_linear_sum_assignment(n_rows, n_cols, rng):
    model = BipartiteMatching()
    X = [rng.normal(size=(n_rows, n_cols, 3)) for _ in range(5)]
    scores = [rng.normal(size=n_rows * n_cols) for _ in X]
    fast, _ = maximize(model, X, scores)
    lp = solve_stacked_lp([model.polytope(x) for x in X], scores)
    for s, y, sol in zip(scores, fast, lp):
        r, c = linear_sum_assignment(s.reshape(n_rows, n_cols), maximize=True)
        ref = np.zeros((n_rows, n_cols), dtype=int)
        ref[r, c] = 1
        np.testing.assert_array_equal(y, ref)
        np.testing.assert_array_equal(np.rint(sol).reshape(n_rows, n_cols), ref)


def _random_chain(rng, n, d_v=3, d_e=2):
    return {"node_features": rng.normal(size=(n, d_v)),
            "edge_features": rng.normal(size=(n - 1, d_e)), "parents": np.arange(-1, n - 1)}


def test_inference_parts_equals_encoded_inference(rng):
    """The built-ins' direct part vectors = encode(inference) = the inference LP's vertex."""
    from structlp.model import StructuredModel
    from structlp.structures import TreeLabeling
    cases = [(BipartiteMatching(), rng.normal(size=(6, 4, 2))),
             (TreeLabeling(3), _random_chain(rng, 5)),
             (TreeLabeling(4, loss="absolute"), {"node_features": rng.normal(size=(6, 2)),
                                                 "edge_features": rng.normal(size=(5, 2)),
                                                 "parents": np.array([-1, 0, 0, 1, 1, 2])})]
    for model, x in cases:
        x = model.check_x(x)
        for _ in range(5):
            s = rng.normal(size=model.n_parts(x))
            mu = model.inference_parts(x, s)
            generic = StructuredModel.inference_parts(model, x, s)   # encode(inference)
            lp = solve_stacked_lp([model.polytope(x)], [s])[0]
            assert mu.dtype == float and mu.shape == (model.n_parts(x),)
            np.testing.assert_array_equal(mu, generic)
            np.testing.assert_allclose(mu, lp, atol=1e-7)


def test_inference_parts_without_fast_path_is_none(rng):
    x = rng.normal(size=(4, 3, 2))
    assert BipartiteMatching(R=2, P=2).inference_parts(x, rng.normal(size=12)) is None


def test_each_example_restarts_from_its_own_basis():
    """Two examples share one polytope (one compiled HiGHS model): with ``warm`` dicts, an
    example solved again after the other starts from its own last basis (no pivot for the
    same scores), and every answer equals a cold solve's."""
    from structlp.inference import _compiled_lp
    from structlp.structures._graph import grid_edges, local_polytope
    rng = np.random.default_rng(0)
    poly = local_polytope(9, grid_edges(3, 3), 3)
    s_a, s_b = rng.normal(size=(2, poly.n_parts))
    warm_a, warm_b = {}, {}
    solve_stacked_lp([poly], [s_a], warm=[warm_a])
    solve_stacked_lp([poly], [s_b], warm=[warm_b])
    again = solve_stacked_lp([poly], [s_a], warm=[warm_a])[0]
    h = _compiled_lp(poly).h
    assert h.getInfo().simplex_iteration_count == 0
    solve_stacked_lp([poly], [s_b])
    solve_stacked_lp([poly], [s_a])             # from s_b's basis: it must pivot
    assert h.getInfo().simplex_iteration_count > 0
    for s, mu in [(s_a, again), (s_b, solve_stacked_lp([poly], [s_b], warm=[warm_b])[0])]:
        cold = solve_stacked_lp([local_polytope(9, grid_edges(3, 3), 3)], [s])[0]
        assert s @ mu == pytest.approx(s @ cold, rel=1e-12)


def test_an_examples_first_solve_is_cold_so_ties_do_not_depend_on_history():
    """A tie between two vertices: an example's first solve (an empty ``warm`` dict) picks
    what a fresh HiGHS model picks, whatever the shared model solved before -- so that a
    refit repeats itself (GraphLabeling's LP fallback keeps one dict per example)."""
    from structlp import Polytope
    tied, other = np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 0.0])
    poly = Polytope(E=np.ones((1, 3)), e=[1.0], lb=0.0, ub=1.0)
    fresh = solve_stacked_lp([Polytope(E=np.ones((1, 3)), e=[1.0], lb=0.0, ub=1.0)], [tied])[0]
    for history in (tied, other, np.array([1.0, 0.0, 0.0])):
        solve_stacked_lp([poly], [history], warm=[{}])
        np.testing.assert_array_equal(solve_stacked_lp([poly], [tied], warm=[{}])[0], fresh)
