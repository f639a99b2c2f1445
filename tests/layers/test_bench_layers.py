"""The layer benchmarks' own pieces, against independent oracles, and their quick runs.

* the user-declared grid model of ``bench_layers_spo.py`` (PyEPO's shortest paths): its
  arcs are PyEPO's, its decoder is the shortest path of networkx and of brute force over the
  70 paths, its polytope's vertices are those paths (scipy's LP), and ``spo_plus`` on it is
  SPO+ by its definition over the enumerated paths;
* the conversions to the peers' layouts: torch-struct's edge potentials and marginals
  (``bench_layers_ocr.py``) against brute-force marginals of a 3-letter chain, the JAX
  Viterbi of ``bench_layers_perturbed.py`` against structlp's max-sum;
* the matching benchmark's reference (CLARABEL polished on its face) against OSQP's
  polished projection;
* each benchmark's ``--quick`` run (slow; skipped where its peer is not installed).
"""

import importlib.util
import itertools
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from structlp.layers import spo_plus
from structlp.structures import TreeLabeling

ROOT = Path(__file__).resolve().parents[2]


def load(name):
    import sys
    bench = str(ROOT / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


spo = load("bench_layers_spo")


def all_paths(model):
    """Every path's part vector, by walking the 8 steps (4 of them down) of a 5 x 5 grid."""
    arcs = model.arcs()
    out = []
    for downs in itertools.combinations(range(8), 4):
        i = j = 0
        mu = np.zeros(len(arcs))
        for s in range(8):
            ni, nj = (i + 1, j) if s in downs else (i, j + 1)
            mu[arcs.index((i * 5 + j, ni * 5 + nj))] = 1
            i, j = ni, nj
        out.append(mu)
    return np.array(out)


def test_grid_arcs_are_pyepos():
    model = spo.GridShortestPath()
    arcs = model.arcs()
    assert len(arcs) == model.n_parts(None) == 40
    assert len(set(arcs)) == 40
    assert all(v - u in (1, 5) for u, v in arcs)          # right or down, on a 5 x 5 grid
    pyepo_bases = pytest.importorskip("pyepo.model.bases")
    assert arcs == pyepo_bases._get_grid_arcs((5, 5))


def test_grid_decoder_is_networkx_and_brute_force():
    model = spo.GridShortestPath()
    arcs, paths = model.arcs(), all_paths(model)
    assert len(paths) == 70
    rng = np.random.default_rng(0)
    for _ in range(100):
        s = rng.standard_normal(40)
        mu = model.inference(None, s)
        np.testing.assert_array_equal(mu, paths[np.argmax(paths @ s)])
        G = nx.DiGraph()
        for p, (u, v) in enumerate(arcs):
            G.add_edge(u, v, weight=-s[p])
        path = nx.bellman_ford_path(G, 0, 24)
        assert mu @ s == pytest.approx(-nx.path_weight(G, path, "weight"), abs=1e-12)


def test_grid_polytope_vertices_are_the_paths():
    model = spo.GridShortestPath()
    P = model.polytope(None)
    paths = all_paths(model)
    E = np.asarray(P.E.todense()) if hasattr(P.E, "todense") else np.asarray(P.E)
    np.testing.assert_allclose(E @ paths.T, np.asarray(P.e)[:, None] * np.ones(70))
    rng = np.random.default_rng(1)
    for _ in range(20):                         # the LP over the polytope is integral
        s = rng.standard_normal(40)
        res = linprog(-s, A_eq=E, b_eq=P.e, bounds=(0, 1), method="highs")
        assert -res.fun == pytest.approx((paths @ s).max(), abs=1e-9)


def test_spo_plus_on_the_grid_model_is_its_definition():
    model = spo.GridShortestPath()
    paths = all_paths(model)
    rng = np.random.default_rng(2)
    for _ in range(20):
        c, c_hat = rng.random(40), rng.standard_normal(40)
        w_star = paths[np.argmin(paths @ c)]
        worst = paths[np.argmax(paths @ (c - 2 * c_hat))]
        expected = (c - 2 * c_hat) @ worst + 2 * c_hat @ w_star - c @ w_star
        loss, grad = spo_plus(model, rng.standard_normal(5), c_hat, c)
        assert loss == pytest.approx(expected, abs=1e-12)
        np.testing.assert_allclose(grad, 2 * (w_star - worst))


def test_torch_struct_layout_matches_brute_force_marginals():
    pytest.importorskip("torch_struct")
    ocr = load("bench_layers_ocr")
    rng = np.random.default_rng(3)
    K, n = ocr.K, 3
    theta = rng.standard_normal(n * K + (n - 1) * K * K)
    node, edge = ocr.split(theta, n)
    joint = (node[0][:, None, None] + node[1][None, :, None] + node[2][None, None, :]
             + edge[0][:, :, None] + edge[1][None, :, :])            # (a, b, c)
    p = np.exp(joint - joint.max())
    p /= p.sum()
    expected = np.concatenate([p.sum((1, 2)), p.sum((0, 2)), p.sum((0, 1)),
                               p.sum(2).ravel(), p.sum(0).ravel()])
    # a second, longer word in the batch exercises the padding
    other = rng.standard_normal(5 * K + 4 * K * K)
    out = ocr.torchstruct_side([theta, other], [n, 5], repeats=1)
    np.testing.assert_allclose(out["marginals"][0], expected, atol=1e-12)


def test_jax_viterbi_matches_structlp_max_sum():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    pert = load("bench_layers_perturbed")
    model = TreeLabeling(pert.K)
    rng = np.random.default_rng(4)
    for n in (2, 5):
        x = model.check_x({"node_features": np.zeros((n, 1)),
                           "edge_features": np.ones((n - 1, 1)),
                           "parents": np.arange(-1, n - 1)})
        decode = jax.jit(pert.jax_viterbi(n))
        for _ in range(3):
            theta = rng.standard_normal(model.n_parts(x))
            mu = np.asarray(decode(theta))
            np.testing.assert_array_equal(mu, model.encode(x, model.inference(x, theta)))


def test_matching_reference_is_the_projection():
    import cvxpy as cp
    match = load("bench_layers_matching")
    thetas, _ = match.make_batch(2, seed=5)
    ref, bound = match.reference(thetas)
    assert bound < 1e-6
    A = match.constraint_matrix()
    for th, mu in zip(thetas, ref):           # OSQP, polished: another solver, another method
        m = cp.Variable(100)
        cp.Problem(cp.Minimize(cp.sum_squares(m - th)), [A @ m == 1, m >= 0]).solve(
            solver="OSQP", eps_abs=1e-10, eps_rel=1e-10, polishing=True, max_iter=100000)
        np.testing.assert_allclose(mu, m.value, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("name, needs", [
    ("bench_layers_matching", ("torch", "cvxpylayers")),
    ("bench_layers_ocr", ("torch", "torch_struct")),
    ("bench_layers_perturbed", ("jax", "optax")),
    ("bench_layers_spo", ("torch", "pyepo", "ortools")),
], ids=["matching", "ocr", "perturbed", "spo"])
def test_quick_run(name, needs, tmp_path):
    for module in needs:
        pytest.importorskip(module)
    bench = load(name)
    path = tmp_path / f"{name}.json"
    rows = bench.main(["--quick", "--json", str(path)])
    assert path.exists() and rows
    if name == "bench_layers_matching":
        assert rows[0]["err"] <= 1e-6 and rows[0]["off"] == 0
    elif name == "bench_layers_ocr":
        assert rows[1]["diff"] <= 1e-9
    elif name == "bench_layers_spo":
        r = rows[0]
        assert r["dweights"] <= 1e-6
        assert r["structlp_regret"] == pytest.approx(r["pyepo_regret"], abs=1e-6)
