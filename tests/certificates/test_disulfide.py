"""The DISULFIND connectivity loader and the disulfide problem file."""

import os
from pathlib import Path

import numpy as np
import pytest

from structlp import InvalidInputError, InvalidParameterError, MaxMarginLearner
from structlp.cli import load_problem
from structlp.datasets import DISULFIDE_DIR, disulfide_pair_features, load_disulfide
from structlp.structures import PerfectMatching



@pytest.fixture
def disulfide_data():
    """Skip without the data, except in CI (``CI=true``), which installs them: there their
    absence is a failure, not a skip."""
    if not (DISULFIDE_DIR / "dataset").is_file():
        why = (f"disulfinder-data is not installed ({DISULFIDE_DIR} has no 'dataset'; "
               "apt-get install disulfinder-data)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why}; CI=true and CI installs it, so the tests that need it fail")
        pytest.skip(why)


needs_data = pytest.mark.usefixtures("disulfide_data")

PROBLEM = Path(__file__).resolve().parents[2] / "problems" / "disulfide_connectivity.py"


def test_missing_data_names_the_package(tmp_path):
    with pytest.raises(InvalidInputError, match="disulfinder-data"):
        load_disulfide(tmp_path)


def test_bad_max_bonds():
    with pytest.raises(InvalidParameterError, match="'max_bonds'"):
        load_disulfide(max_bonds=1)


def test_malformed_graph_file(tmp_path):
    (tmp_path / "dataset").write_text("P.2\n")
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "P.2").write_text("node 1 2 3\n")
    with pytest.raises(InvalidInputError,
                       match=r"P\.2, line 1: a node vector of 3 numbers; expected 102"):
        load_disulfide(tmp_path)
    (tmp_path / "dataset").write_text("P.2\nQ.2\n")
    with pytest.raises(InvalidInputError):
        load_disulfide(tmp_path)


def test_pair_features_symmetric(rng):
    nodes = rng.random((6, 102))
    F = disulfide_pair_features(nodes)
    assert F.shape == (6, 6, 320)
    np.testing.assert_array_equal(F, F.transpose(1, 0, 2))
    # swapping the roles of two cysteines' vectors permutes the features accordingly
    perm = [1, 0, 2, 3, 4, 5]
    G = disulfide_pair_features(nodes[perm])
    np.testing.assert_allclose(G[0, 2, :310], F[1, 2, :310])


@needs_data
def test_load_disulfide():
    D = load_disulfide()
    assert len(D["X"]) == 521
    np.testing.assert_array_equal(np.bincount(D["K"])[2:], [171, 185, 114, 51])
    model = PerfectMatching()
    for x, y, k in zip(D["X"][::25], D["Y"][::25], D["K"][::25]):
        assert x.shape == (2 * k, 2 * k, 320) and y.sum() == 2 * k
        model.encode(model.check_x(x), y)  # a perfect matching of the 2K cysteines


@needs_data
def test_small_fit_beats_chance():
    D = load_disulfide(max_bonds=3)
    idx = np.random.default_rng(0).permutation(len(D["X"]))
    tr, te = idx[:120], idx[120:]
    est = MaxMarginLearner(PerfectMatching(), C=0.1, formulation="certificate")
    est.fit([D["X"][i] for i in tr], [D["Y"][i] for i in tr])
    pred = est.predict([D["X"][i] for i in te])
    prec = np.mean([(p * D["Y"][i]).sum() / (2 * D["K"][i]) for p, i in zip(pred, te)])
    chance = np.mean([1 / (2 * D["K"][i] - 1) for i in te])
    assert prec > chance + 0.05


@needs_data
@pytest.mark.slow
def test_problem_file_runs():
    mod = load_problem(PROBLEM)
    assert isinstance(mod.DESCRIPTION, str)
    out = mod.run(folds=2, max_train=80, learner="both", Cs=(0.01, 0.1))
    assert "precision" in out["report"] and "bootstrap" in out["report"]
    assert [r["K"] for r in out["results"]] == [2, 3, 4, 5] and out["overall"]["K"] == "all"
    assert out["learners"] == ["two_sided", "pairs"]
    for f in out["fits"]["two_sided"]:
        assert f["C"] in f["C_grid"] and {0.01, 0.1} <= set(f["C_grid"])
    import json
    json.dumps(out)


def _problem():
    return load_problem(PROBLEM)


@pytest.mark.slow   # about 10 s
@needs_data
def test_rbf_and_pair_baseline_run_small():
    out = _problem().run(kernel="rbf", learner="both", folds=2, max_train=40, max_rank=20,
                         sigmas=(0.5, 1.0), C=1.0, n_boot=200, n_jobs=1)
    assert "two_sided" in out["report"] and "peak memory" in out["report"]
    assert "resamples of proteins / of families" in out["report"]
    for r in out["results"] + [out["overall"]]:
        for key in ("precision", "accuracy", "two_sided_precision", "pairs_precision", "two_sided_accuracy",
                    "pairs_accuracy"):
            assert 0.0 <= r[key] <= 1.0
        est, lo, hi = r["two_sided_minus_pairs_protein_ci"]
        assert lo <= est <= hi
    for name in ("two_sided", "pairs"):
        for f in out["fits"][name]:
            # the sigma grid only (C fixed), extended when the best is on an edge
            grid = f["sigma_grid"]
            assert f["C_grid"] == [1.0] and 0.5 in grid and 1.0 in grid
            assert f["sigma"] in grid and f["rank"] <= 20
            assert len(f["validation"]) == len(grid) <= 2 + _problem().MAX_EXTEND
            assert grid == sorted(grid)
            if f["sigma"] in (grid[0], grid[-1]):      # on an edge only when fully extended
                assert len(grid) == 2 + _problem().MAX_EXTEND


@pytest.mark.slow   # about 20 s: worker processes
@needs_data
def test_parallel_run_equals_serial():
    """n_jobs=2 (forked workers over learners x folds) gives the serial run's results."""
    kw = dict(kernel="rbf", learner="both", folds=2, max_train=30, max_rank=10,
              sigmas=(0.5, 1.0), Cs=(0.3, 1.0), n_boot=100)
    a = _problem().run(n_jobs=1, **kw)
    b = _problem().run(n_jobs=2, **kw)
    assert a["per_protein"] == b["per_protein"]
    for name in a["fits"]:
        for fa, fb in zip(a["fits"][name], b["fits"][name]):
            assert fa["validation"] == fb["validation"]
            assert (fa["C"], fa["sigma"], fa["objective"]) == (fb["C"], fb["sigma"],
                                                                fb["objective"])


def test_grid_extension():
    """_extend: the best point of a grid, the grid extended geometrically while the
    best is on an edge (at most MAX_EXTEND points), never when it is interior."""
    mod = _problem()
    calls = []

    def peak_at(p):
        def score(x):
            calls.append(x)
            return -abs(np.log(x / p))
        return score

    best, grid = mod._extend([0.1, 1.0, 10.0], peak_at(1.0))
    assert best == 1.0 and grid == [0.1, 1.0, 10.0] and len(calls) == 3
    best, grid = mod._extend([0.1, 1.0, 10.0], peak_at(300.0))
    assert np.allclose(grid, [0.1, 1.0, 10.0, 100.0, 1000.0]) and np.isclose(best, 100.0)
    best, grid = mod._extend([0.1, 1.0, 10.0], peak_at(1e-9))
    assert len(grid) == 3 + mod.MAX_EXTEND and best == grid[0]  # still on the edge: capped
    assert mod._extend([2.0], peak_at(1.0)) == (2.0, [2.0])


def test_bootstrap_interval(rng):
    """The paired bootstrap: a constant difference has a zero-width interval; resampling
    by families gives a wider interval than by proteins when families are homogeneous."""
    mod = _problem()
    n_bonds = np.full(40, 3.0)
    est, lo, hi = mod.bootstrap(np.ones(40), n_bonds, np.arange(40), 500, rng)
    assert est == lo == hi == 1 / 3
    diff = np.repeat(rng.normal(size=8), 5)                 # 8 families of 5 alike proteins
    _, lo_p, hi_p = mod.bootstrap(diff, n_bonds, np.arange(40), 2000, rng)
    _, lo_f, hi_f = mod.bootstrap(diff, n_bonds, np.repeat(np.arange(8), 5), 2000, rng)
    assert hi_f - lo_f > 1.5 * (hi_p - lo_p)


def test_selection_keeps_families_together():
    """The inner split of select() holds out whole families (no ortholog on both sides)."""
    mod = _problem()
    names = [f"F{j // 3}_S{j % 3}" for j in range(30)]
    inner = mod.family_folds(names, 4, np.random.default_rng(0))
    fam = np.array([n.split("_")[0] for n in names])
    for f in np.unique(fam):
        assert len(set(inner[fam == f])) == 1


def test_pair_baseline_is_a_per_pair_svm(rng):
    """The baseline's structured hinge splits into one binary hinge per pair."""
    mod = _problem()
    model = mod.IndependentPairs()
    x = rng.normal(size=(4, 4, 3))
    x = x + x.transpose(1, 0, 2)
    y = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
    est = MaxMarginLearner(model, C=1.0).fit([x], [y])
    s = est.decision_scores([x])[0]
    label = model.encode(model.check_x(x), y)
    per_pair = np.maximum(0.0, 1.0 - (2 * label - 1) * s)  # binary SVM hinge, labels +-1
    assert np.isclose(est.slack_[0], per_pair.sum(), atol=1e-6)
    assert per_pair.sum() > 0.1  # not trivially zero


def test_problem_rejects_bad_options():
    mod = _problem()
    with pytest.raises(InvalidParameterError, match="'kernel' option"):
        mod.run(kernel="sigmoid")
    with pytest.raises(InvalidParameterError, match="'learner' option"):
        mod.run(learner="svm")
    with pytest.raises(InvalidParameterError, match=r"'slack' option.*'two_sided'.*got 'one'"):
        mod.run(slack="one")
    with pytest.raises(InvalidParameterError,
                       match=r"'certificate' option.*'alternating_cycle', 'odd_sets'.*got 'blossom'"):
        mod.run(certificate="blossom")
    with pytest.raises(InvalidParameterError, match="exact .*no kernel"):
        mod.run(learner="exact", kernel="rbf")
    with pytest.raises(InvalidParameterError, match="'n_jobs' option.*got 0"):
        mod.run(n_jobs=0)


def test_selection_skips_a_grid_point_the_solver_cannot_solve(monkeypatch):
    """A fit that ends in SolverError (e.g. 'optimal_inaccurate' at an extreme C) scores
    -inf in the selection and is never chosen; the others are compared as usual."""
    import structlp
    mod = _problem()

    class Fake:
        def __init__(self, C):
            self.C = C

        def set_params(self, C):
            self.C = C
            return self

        def fit(self, X, Y):
            if self.C == 3.0:
                raise structlp.SolverError("optimal_inaccurate")
            return self

        def predict(self, X):   # right on every protein at C = 1 only
            return [np.eye(2)[::-1] * (self.C == 1.0) for _ in X]

    monkeypatch.setattr(mod, "_estimator", lambda name, kernel, g, C, *a: Fake(C))
    names = [f"F{j}_S" for j in range(12)]
    Y = [np.eye(2)[::-1] for _ in names]
    C, sigma, scores, C_grid, _ = mod.select("two_sided", "linear", [None] * 12, Y, names,
                                             (0.3, 1.0, 3.0), (None,), None, None, 10, 0)
    assert C == 1.0 and scores[(3.0, None)] == -np.inf and scores[(1.0, None)] == 1.0
    assert C_grid == [0.3, 1.0, 3.0]
