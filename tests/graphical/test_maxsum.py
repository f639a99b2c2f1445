"""structlp.graphical.maxsum: numba and numpy max-sum agree exactly, with each other and with
enumeration; numba missing means the numpy path, silently identical."""

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import structlp.graphical.maxsum as ms
from structlp import FrankWolfeLearner, InvalidInputError
from structlp.graphical.trees import check_tree_example, score
from structlp.structures import TreeLabeling

HAVE_NUMBA = "numba" in ms.BACKENDS
ROOT = Path(__file__).resolve().parents[2]


def random_tree(rng, n, chain=False):
    parents = np.arange(-1, n - 1) if chain else np.array(
        [-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    perm = rng.permutation(n)          # relabel the nodes: the root is not always node 0
    inv = np.argsort(perm)
    par = np.array([-1 if parents[inv[j]] < 0 else perm[parents[inv[j]]] for j in range(n)])
    return check_tree_example({"node_features": np.zeros((n, 1)),
                               "edge_features": np.zeros((n - 1, 1)), "parents": par})


def both(ex, b, B):
    out = [ms.max_sum(ex, b, B, backend="numpy")]
    if HAVE_NUMBA:
        out.append(ms.max_sum(ex, b, B, backend="numba"))
    return out


def brute(ex, b, B):
    n, k = b.shape
    vals = {y: score(ex, b, B, np.array(y)) for y in itertools.product(range(k), repeat=n)}
    best = max(vals.values())
    return best, [y for y, v in vals.items() if v == best]


@pytest.mark.parametrize("seed", range(30))
def test_random_trees_against_enumeration(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 6)), int(rng.integers(2, 4))
    ex = random_tree(rng, n, chain=seed % 3 == 0)
    b, B = rng.normal(size=(n, k)), rng.normal(size=(n - 1, k, k))
    best, argmaxes = brute(ex, b, B)
    assert len(argmaxes) == 1                     # continuous data: a unique optimum
    for y, v in both(ex, b, B):
        assert tuple(y) == argmaxes[0]
        assert abs(v - best) <= 1e-12


@pytest.mark.parametrize("seed", range(20))
def test_tied_scores_same_choice_and_optimal(seed):
    """Integer scores in {0, 1} (many ties): both paths return the same maximizer, one of
    the enumerated maximizers, with the same value, bit for bit."""
    rng = np.random.default_rng(100 + seed)
    n, k = int(rng.integers(2, 6)), int(rng.integers(2, 4))
    ex = random_tree(rng, n, chain=seed % 2 == 0)
    b = rng.integers(0, 2, size=(n, k)).astype(float)
    B = rng.integers(0, 2, size=(n - 1, k, k)).astype(float)
    best, argmaxes = brute(ex, b, B)
    res = both(ex, b, B)
    for y, v in res:
        assert v == best and tuple(y) in argmaxes
    for y, v in res[1:]:
        assert np.array_equal(y, res[0][0]) and v == res[0][1]
    # all-zero scores: every labelling ties; the rule picks label 0 everywhere
    for y, v in both(ex, np.zeros((n, k)), np.zeros((n - 1, k, k))):
        assert not y.any() and v == 0.0


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
def test_numba_equals_numpy_bitwise_ocr_sized():
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(1, 15))
        ex = random_tree(rng, n, chain=trial % 2 == 0)
        b = rng.normal(size=(n, 26)) * 10.0 ** rng.integers(-3, 3)
        B = rng.normal(size=(n - 1, 26, 26))
        if trial % 4 == 0:
            b, B = np.round(b), np.round(B)       # ties
        (y1, v1), (y2, v2) = both(ex, b, B)
        assert np.array_equal(y1, y2) and v1 == v2


def test_same_as_previous_release_algorithm():
    """The numpy path is the previous release's algorithm (kept here as the reference)."""
    def old(ex, b, B):
        n, k = b.shape
        msg_in = b.copy()
        back = np.zeros((n, k), dtype=np.int64)
        for j in ex.order[::-1][:-1]:
            e = ex.edge_of[j]
            M = B[e] + msg_in[j][None, :]
            back[j] = np.argmax(M, axis=1)
            msg_in[ex.parents[j]] += M[np.arange(k), back[j]]
        y = np.empty(n, dtype=np.int64)
        root = ex.order[0]
        y[root] = int(np.argmax(msg_in[root]))
        for j in ex.order[1:]:
            y[j] = back[j, y[ex.parents[j]]]
        return y, float(msg_in[root, y[root]])

    rng = np.random.default_rng(3)
    for trial in range(50):
        n = int(rng.integers(1, 10))
        ex = random_tree(rng, n, chain=trial % 2 == 0)
        b, B = rng.normal(size=(n, 5)), rng.normal(size=(n - 1, 5, 5))
        if trial % 3 == 0:
            b, B = np.round(b), np.round(B)
        y0, v0 = old(ex, b, B)
        for y, v in both(ex, b, B):
            assert np.array_equal(y, y0) and v == v0


def test_bad_input():
    ex = random_tree(np.random.default_rng(0), 3)
    with pytest.raises(InvalidInputError, match=r"B \(edge scores\) must have shape \(2, 2, 2\)"):
        ms.max_sum(ex, np.zeros((3, 2)), np.zeros((3, 2, 2)))
    with pytest.raises(InvalidInputError, match="finite"):
        ms.max_sum(ex, np.full((3, 2), np.nan), np.zeros((2, 2, 2)))
    with pytest.raises(InvalidInputError, match="backend must be"):
        ms.max_sum(ex, np.zeros((3, 2)), np.zeros((2, 2, 2)), backend="cython")


def test_forced_fallback_in_process(monkeypatch, no_aot):
    """With the kernel unavailable, "auto" is the numpy path (no error), same result."""
    rng = np.random.default_rng(5)
    ex = random_tree(rng, 8, chain=True)
    b, B = rng.normal(size=(8, 26)), rng.normal(size=(7, 26, 26))
    ref = ms.max_sum(ex, b, B)
    import structlp.compiled as compiled
    monkeypatch.setattr(compiled, "_numba", None)
    monkeypatch.setattr(compiled, "_JITTED", {})
    y, v = ms.max_sum(ex, b, B)
    assert np.array_equal(y, ref[0]) and v == ref[1]
    with pytest.raises(InvalidInputError, match="needs numba"):
        ms.max_sum(ex, b, B, backend="numba")


FIT = """
import sys, numpy as np
sys.modules['numba'] = None                      # numba absent: import numba raises
sys.modules['structlp._kernels'] = None          # and no kernels built ahead of time
sys.modules['structlp._kernels_v3'] = None
import structlp.graphical.maxsum as ms
assert ms.BACKENDS == ('numpy',)
from structlp import FrankWolfeLearner
from structlp.structures import TreeLabeling
rng = np.random.default_rng(0)
X = [{'node_features': rng.normal(size=(4, 3)), 'edge_features': np.ones((3, 1)),
      'parents': np.arange(-1, 3)} for _ in range(6)]
Y = [rng.integers(0, 3, size=4) for _ in range(6)]
fw = FrankWolfeLearner(TreeLabeling(3), C=1.0, tol=1e-3, random_state=0).fit(X, Y)
print(repr(fw.objective_), repr(fw.duality_gap_), fw.converged_)
"""


@pytest.mark.slow   # about 15 s: a fresh process without numba
def test_fit_without_numba_certifies_the_same_optimum():
    """A fit in a process where numba cannot be imported: no ImportError, the plain Python
    kernels certify the same optimum (the compiled ones sum the unary scores in another
    order, so the iterates may differ by rounding)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", FIT], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rng = np.random.default_rng(0)
    X = [{"node_features": rng.normal(size=(4, 3)), "edge_features": np.ones((3, 1)),
          "parents": np.arange(-1, 3)} for _ in range(6)]
    Y = [rng.integers(0, 3, size=4) for _ in range(6)]
    fw = FrankWolfeLearner(TreeLabeling(3), C=1.0, tol=1e-3, random_state=0).fit(X, Y)
    obj, gap, converged = out.stdout.split()
    assert converged == "True" and fw.converged_
    assert abs(float(obj) - fw.objective_) <= float(gap) + fw.duality_gap_


def test_tree_labeling_inference_uses_it():
    rng = np.random.default_rng(2)
    model = TreeLabeling(4)
    x = model.check_x({"node_features": rng.normal(size=(5, 2)),
                       "edge_features": np.ones((4, 1)), "parents": np.arange(-1, 4)})
    s = rng.normal(size=model.n_parts(x))
    y = model.inference(x, s)
    yy, _ = ms.max_sum(x, s[:20].reshape(5, 4), s[20:].reshape(4, 4, 4), backend="numpy")
    assert np.array_equal(y, yy)
    np.testing.assert_array_equal(model.inference_parts(x, s), model.encode(x, y))
