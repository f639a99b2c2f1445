"""The compiled dual decomposition: what it certifies is an optimum of the local-polytope LP
(HiGHS over the whole LP as the oracle), and its numba and numpy loops agree."""

import numpy as np
import pytest

from structlp.exceptions import InvalidInputError
from structlp.graphical.dual_decomposition import tree_dual_decomposition
from structlp.graphical.maxsum import BACKENDS
from structlp.inference import solve_stacked_lp
from structlp.structures._graph import Decomposition, _forest_potentials, local_polytope
from structlp.structures.graph_labeling import grid_edges


def _run(dec, b, B, backend, max_iter=250):
    k = b.shape[1]
    orders, parents, edge_ofs = dec.stacked()
    Bts = np.stack([_forest_potentials(f, B, k) for f in dec.forests])
    return tree_dual_decomposition(orders, parents, edge_ofs, Bts, b, B, dec.edges, max_iter,
                                   8, backend=backend)


def _instances(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        r, c = (int(v) for v in rng.integers(2, 7, size=2))
        k = int(rng.integers(2, 5))
        edges = grid_edges(r, c)
        b = rng.normal(size=(r * c, k))
        B = rng.normal(size=(len(edges), k, k)) * rng.uniform(0.0, 3.0)
        yield Decomposition.of(r * c, edges), b, B


@pytest.mark.parametrize("backend", BACKENDS)
def test_certified_labellings_are_lp_optima_and_uncertified_ones_are_not_above(backend):
    certified = 0
    for dec, b, B in _instances(0, 40):
        n, k = b.shape
        y, ok, iterations = _run(dec, b, B, backend)
        assert 1 <= iterations <= 250
        s = np.concatenate([b.ravel(), B.ravel()])
        lp = solve_stacked_lp([local_polytope(n, dec.edges, k)], [s])[0]
        value = b[np.arange(n), y].sum() + B[np.arange(len(dec.edges)), y[dec.edges[:, 0]],
                                             y[dec.edges[:, 1]]].sum()
        assert value <= s @ lp + 1e-9 * (1 + abs(s @ lp))
        if ok:
            certified += 1
            assert value == pytest.approx(s @ lp, rel=1e-9, abs=1e-9)
    assert 10 <= certified < 40            # both outcomes occur on these instances


@pytest.mark.skipif("numba" not in BACKENDS, reason="numba not installed")
def test_numba_and_numpy_loops_agree():
    same = 0
    for dec, b, B in _instances(1, 30):
        y1, ok1, it1 = _run(dec, b, B, "numba")
        y2, ok2, it2 = _run(dec, b, B, "numpy")
        assert ok1 == ok2
        if ok1:                         # the certified optimum is unique on continuous data
            np.testing.assert_array_equal(y1, y2)
        same += (it1 == it2)
    assert same >= 25                   # the iterates differ only by rounding


def test_zero_steps_certify_nothing_and_bad_scores_are_refused():
    dec, b, B = next(_instances(2, 1))
    assert _run(dec, b, B, "auto", max_iter=0)[1:] == (False, 0)
    b[0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="finite"):
        _run(dec, b, B, "auto")
    with pytest.raises(InvalidInputError, match="backend"):
        _run(dec, np.zeros_like(b), B, "fortran")
