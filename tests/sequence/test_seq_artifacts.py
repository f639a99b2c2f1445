"""The problem file, the benchmark and the notebook of structlp.sequence run end to end."""

import importlib.util
import json
import pathlib

import numpy as np
import pytest

from structlp.sequence.automata import unique_rows

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_unique_rows_matches_numpy():
    rng = np.random.default_rng(0)
    for _ in range(100):
        a = rng.integers(0, rng.integers(1, 40), (rng.integers(1, 200), rng.integers(1, 30)))
        a[rng.random(a.shape) < 0.1] = 1 << 40
        rows, first, inverse = unique_rows(a)
        expected = np.unique(a, axis=0)
        assert len(rows) == len(expected)
        assert np.array_equal(rows[inverse], a) and np.array_equal(a[first], rows)


@pytest.mark.filterwarnings("ignore:SoftmaxMarginLearner:UserWarning")
def test_problem_file_small_run_is_json_serializable():
    problem = _load(ROOT / "problems" / "sequence_alignment.py")
    assert isinstance(problem.DESCRIPTION, str) and problem.DESCRIPTION
    out = problem.run(seed=1, length=6, n_train=10, n_val=10, n_test=10, repeats=1,
                      regs=[0.1], max_iter=15, solver="ignored")
    json.dumps(out)
    assert "edit-distance softmax-margin" in out["report"]
    assert set(out["summary"]) == {"CRF (no loss)", "Hamming softmax-margin",
                                   "edit-distance softmax-margin"}
    out_c = problem.run(seed=1, C=10.0, length=5, n_train=6, n_val=4, n_test=6, repeats=1,
                        max_iter=5)
    assert out_c["settings"]["regs"] == [0.1]


def test_benchmark_quick_run():
    bench = _load(ROOT / "benchmarks" / "bench_sequence.py")
    res = bench.run(max_l=5, naive_max=4, trials=1, budget=10.0)
    text = bench.report(res)
    assert "bigram" in text and "naive/auto" in text
    for r in res["edit"]["rows"]:
        if "max_rel_err" in r:
            assert r["max_rel_err"] < 1e-9


# notebooks/05_sequence_losses.ipynb is executed by tests/test_notebooks.py with the others
