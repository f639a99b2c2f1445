"""Roof duality by maximum flow: the two-label LP over the local polytope, checked against
HiGHS over the whole LP and, on attractive models, against enumeration."""

import itertools

import numpy as np
import pytest

from structlp.graphical import roof_duality
from structlp.graphical.maxsum import BACKENDS
from structlp.graphical.roof_duality import FlowGraph, binary_lp
from structlp.inference import solve_stacked_lp
from structlp.structures._graph import Decomposition, local_polytope, relaxed_map
from structlp.structures.graph_labeling import grid_edges

pytestmark = pytest.mark.skipif("numba" not in BACKENDS, reason="numba not installed")


def _graphs(rng, count):
    for i in range(count):
        if i % 3 == 0:                       # random graphs, dense enough for odd cycles
            n = int(rng.integers(3, 10))
            pairs = np.array(list(itertools.combinations(range(n), 2)))
            keep = rng.random(len(pairs)) < 0.6
            edges = pairs[keep] if keep.any() else pairs[:1]
        else:
            r, c = (int(v) for v in rng.integers(2, 7, size=2))
            n, edges = r * c, grid_edges(r, c)
        yield n, edges


def _point(n, edges, z, mu_e):
    return np.concatenate([np.column_stack([1 - z, z]).ravel(), mu_e.ravel()])


def test_the_cut_point_is_an_optimal_vertex_of_the_local_polytope():
    rng = np.random.default_rng(0)
    fractional = 0
    for n, edges in _graphs(rng, 90):
        b = rng.normal(size=(n, 2))
        B = rng.normal(size=(len(edges), 2, 2)) * rng.uniform(0.1, 3.0)
        z, mu_e, certified = binary_lp(FlowGraph.of(n, edges), b, B, edges)
        assert certified
        assert set(np.unique(z)) <= {0.0, 0.5, 1.0}
        poly = local_polytope(n, edges, 2)
        mu = _point(n, edges, z, mu_e)
        np.testing.assert_allclose(poly.E @ mu, poly.e, atol=1e-12)
        assert mu.min() >= 0.0 and mu.max() <= 1.0
        s = np.concatenate([b.ravel(), B.ravel()])
        lp = solve_stacked_lp([poly], [s])[0]
        assert s @ mu == pytest.approx(s @ lp, rel=1e-9, abs=1e-9)
        fractional += bool(np.any(z == 0.5))
    assert 3 <= fractional < 90            # both integral and fractional optima occur


def test_attractive_models_are_solved_exactly():
    """Submodular energies: the cut is a MAP labelling (enumerated)."""
    rng = np.random.default_rng(1)
    for n, edges in _graphs(rng, 30):
        if n > 12:
            continue
        b = rng.normal(size=(n, 2))
        B = np.zeros((len(edges), 2, 2))
        B[:, 0, 0] = rng.uniform(0, 2, size=len(edges))
        B[:, 1, 1] = rng.uniform(0, 2, size=len(edges))
        B[:, 0, 1] = -rng.uniform(0, 1, size=len(edges))
        z, mu_e, certified = binary_lp(FlowGraph.of(n, edges), b, B, edges)
        assert certified and np.all((z == 0) | (z == 1))
        ys = np.array(list(itertools.product([0, 1], repeat=n)))
        scores = (b[np.arange(n), ys].sum(1)
                  + B[np.arange(len(edges)), ys[:, edges[:, 0]], ys[:, edges[:, 1]]].sum(1))
        best = ys[np.argmax(scores)]
        np.testing.assert_array_equal(z.astype(int), best)


def test_relaxed_map_uses_the_flow_for_two_labels_and_the_others_without_numba(monkeypatch):
    rng = np.random.default_rng(2)
    r = 12
    dec = Decomposition.of(r * r, grid_edges(r, r))
    b = rng.normal(size=(r * r, 2))
    B = rng.normal(size=(len(dec.edges), 2, 2))
    s = np.concatenate([b.ravel(), B.ravel()])
    mu, y, how = relaxed_map(dec, b, B)
    assert how.startswith("max flow")
    monkeypatch.setattr(roof_duality, "_kernel", lambda: None)
    mu2, y2, how2 = relaxed_map(Decomposition.of(r * r, grid_edges(r, r)), b, B)
    assert not how2.startswith("max flow")
    assert s @ mu == pytest.approx(s @ mu2, rel=1e-9)


def test_an_uncertified_flow_falls_back(monkeypatch):
    """If the flow's point did not attain its bound the LP would be solved another way."""
    rng = np.random.default_rng(3)
    dec = Decomposition.of(16, grid_edges(4, 4))
    b, B = rng.normal(size=(16, 2)), rng.normal(size=(len(dec.edges), 2, 2))
    real = roof_duality.binary_lp
    monkeypatch.setattr("structlp.structures._graph.binary_lp",
                        lambda *a: real(*a)[:2] + (False,))
    mu, y, how = relaxed_map(dec, b, B)
    assert not how.startswith("max flow")


# ------------------------------------------------ the plain-Python Dinic and the numpy path
def _networkx_cut(g, cap, s, t):
    """Max-flow value and the nodes reachable from ``s`` in the residual graph (the minimum
    cut's smallest source side, the same for every maximum flow), by networkx."""
    import networkx as nx
    tails = np.repeat(np.arange(len(g.start) - 1), np.diff(g.start))
    G = nx.DiGraph()
    G.add_nodes_from(range(len(g.start) - 1))
    for u, v, c in zip(tails.tolist(), g.head.tolist(), cap.tolist()):
        if G.has_edge(u, v):
            G[u][v]["capacity"] += c
        else:
            G.add_edge(u, v, capacity=c)
    value, flow = nx.maximum_flow(G, s, t)
    scale = max(1.0, float(cap.max()))
    seen, stack = {s}, [s]
    while stack:
        u = stack.pop()
        for v in set(G.successors(u)) | set(G.predecessors(u)):
            res = ((G[u][v]["capacity"] - flow[u][v] if G.has_edge(u, v) else 0.0)
                   + (flow[v][u] if G.has_edge(v, u) else 0.0))
            if v not in seen and res > 1e-9 * scale:
                seen.add(v)
                stack.append(v)
    side = np.zeros(len(g.start) - 1, dtype=np.int64)
    side[sorted(seen)] = 1
    return value, side


def _capacities(rng, g, n):
    """Random residual capacities on the roof-duality layout, zero on about a third."""
    cap = rng.uniform(0, 2, size=len(g.head))
    cap[rng.random(len(cap)) < 0.3] = 0.0
    return cap


def test_plain_python_dinic_equals_the_compiled_kernel_and_networkx():
    """The plain Python of ``_dinic`` (what runs where nothing compiles it) gives the
    compiled kernel's flow and cut bit for bit, and both equal networkx's maximum flow and
    its minimum cut (the nodes reachable from the source in the residual graph)."""
    rng = np.random.default_rng(4)
    compiled = roof_duality._kernel()
    assert compiled is not None and compiled is not roof_duality._dinic
    for n, edges in _graphs(rng, 24):
        g = FlowGraph.of(n, edges)
        s, t = 2 * n, 2 * n + 1
        cap = _capacities(rng, g, n)
        f_py, side_py = roof_duality._dinic(g.start, g.head, g.rev, cap.copy(), s, t, 1e-15)
        f_c, side_c = compiled(g.start, g.head, g.rev, cap.copy(), s, t, 1e-15)
        assert f_py == f_c
        np.testing.assert_array_equal(side_py, side_c)
        f_nx, side_nx = _networkx_cut(g, cap, s, t)
        assert f_py == pytest.approx(f_nx, rel=1e-9, abs=1e-12)
        np.testing.assert_array_equal(side_py, side_nx)


def test_plain_python_dinic_gives_the_labellings_of_the_compiled_one(monkeypatch):
    """binary_lp with the uncompiled Dinic: the same half-integral labelling, edge marginals
    and certificate as with the compiled kernel, on random scores (fractional ones too)."""
    rng = np.random.default_rng(5)
    results = []
    for n, edges in _graphs(rng, 24):
        b = rng.normal(size=(n, 2))
        B = rng.normal(size=(len(edges), 2, 2)) * rng.uniform(0.1, 3.0)
        results.append((n, edges, b, B, binary_lp(FlowGraph.of(n, edges), b, B, edges)))
    monkeypatch.setattr(roof_duality, "_kernel", lambda: roof_duality._dinic)
    fractional = 0
    for n, edges, b, B, (z, mu_e, certified) in results:
        z2, mu_e2, certified2 = binary_lp(FlowGraph.of(n, edges), b, B, edges)
        np.testing.assert_array_equal(z2, z)
        np.testing.assert_array_equal(mu_e2, mu_e)
        assert certified2 == certified
        fractional += bool(np.any(z == 0.5))
    assert fractional >= 1


def test_without_kernels_the_labellings_are_identical(monkeypatch):
    """What learners.md says: where no kernel is available, the two-label oracle (dual
    decomposition, else HiGHS) gives the labellings of the maximum flow, fractional
    optima included."""
    rng = np.random.default_rng(6)
    cases, hows = [], set()
    for i, (n, edges) in enumerate(_graphs(rng, 60)):
        b = rng.normal(size=(n, 2))
        B = rng.normal(size=(len(edges), 2, 2)) * rng.uniform(0.1, 3.0)
        mu, y, how = relaxed_map(Decomposition.of(n, edges), b, B)
        cases.append((n, edges, b, B, y))
        hows.add(how)
    assert {"max flow", "max flow fractional"} <= hows
    monkeypatch.setattr(roof_duality, "_kernel", lambda: None)
    for n, edges, b, B, y in cases:
        mu2, y2, how2 = relaxed_map(Decomposition.of(n, edges), b, B)
        assert not how2.startswith("max flow")
        np.testing.assert_array_equal(y2, y)
