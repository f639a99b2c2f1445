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
