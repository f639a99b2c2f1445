"""The CK+ emotion-intensity experiment (problems/emotion_intensity.py) end to end.

The data are research-use only and never shipped: the tests that need them skip
when ``../shared/data/ck_emotion`` (or ``$STRUCTLP_CK_PATH``) is absent.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from structlp.agm.data import DataNotFoundError, ck_path, emotion_examples, load_ck_emotion
from structlp.cli import load_problem, main
from structlp.exceptions import InvalidInputError, StructlpError

PROBLEM = Path(__file__).resolve().parents[1] / "problems" / "emotion_intensity.py"


def _have_data():
    try:
        ck_path()
    except DataNotFoundError:
        return False
    return True


needs_ck = pytest.mark.skipif(
    not _have_data(),
    reason="CK+ emotion data absent (research use only, not shipped): put ck.mat and "
           "ids_random.mat in ../shared/data/ck_emotion or set STRUCTLP_CK_PATH")


def test_missing_data_path_is_a_clear_structlp_error(tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match="CK\\+ emotion data not found") as info:
        load_ck_emotion(tmp_path / "nowhere")
    assert isinstance(info.value, StructlpError) and isinstance(info.value, FileNotFoundError)
    assert "nowhere" in str(info.value) and "STRUCTLP_CK_PATH" in str(info.value)
    (tmp_path / "ck.mat").write_bytes(b"")
    with pytest.raises(DataNotFoundError, match="ids_random.mat"):
        load_ck_emotion(tmp_path)
    monkeypatch.setenv("STRUCTLP_CK_PATH", str(tmp_path / "elsewhere"))
    with pytest.raises(DataNotFoundError, match="elsewhere.*STRUCTLP_CK_PATH"):
        load_ck_emotion()
    with pytest.raises(InvalidInputError, match="data_path must be a path"):
        load_ck_emotion(3)


def test_problem_reports_missing_data_through_the_cli(tmp_path, capsys):
    rc = main(["run", str(PROBLEM), "-o", f"data_path={json.dumps(str(tmp_path))}"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "CK+ emotion data not found" in err and "STRUCTLP_CK_PATH" in err


def test_problem_rejects_bad_options(tmp_path):
    run = load_problem(PROBLEM).run
    with pytest.raises(StructlpError, match="splits"):
        run(splits=21, data_path=tmp_path)
    with pytest.raises(StructlpError, match="reg_grid"):
        run(reg_grid=[0.1, -1.0], data_path=tmp_path)
    with pytest.raises(StructlpError, match="n_jobs"):
        run(n_jobs=0, data_path=tmp_path)
    with pytest.raises(StructlpError, match="Unknown option"):
        run(split=3, data_path=tmp_path)


def test_emotion_features_follow_the_authors():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(5, 4))
    (x,) = emotion_examples([F], np.array([2]), n_classes=3)
    V, E = x["node_features"], x["edge_features"]
    assert V.shape == (5, 15) and E.shape == (4, 15)
    np.testing.assert_array_equal(V[:, 10:14], F)
    np.testing.assert_array_equal(V[:, 14], 1.0)
    np.testing.assert_array_equal(E[:, 10:14], np.abs(np.diff(F, axis=0)))
    assert not V[:, :10].any() and not E[:, :10].any()
    np.testing.assert_array_equal(x["parents"], [-1, 0, 1, 2, 3])


@needs_ck
def test_ck_data_shapes():
    D = load_ck_emotion()
    assert len(D["frames"]) == len(D["labels"]) == 167
    assert all(f.shape[1] == 25 and len(f) == len(y) for f, y in zip(D["frames"], D["labels"]))
    assert set(np.concatenate(D["labels"])) <= {0, 1, 2}
    assert D["splits"].shape == (20, 167)
    for perm in D["splits"]:
        np.testing.assert_array_equal(np.sort(perm), np.arange(167))


@needs_ck
@pytest.mark.slow
def test_emotion_experiment_one_split(tmp_path, capsys):
    """``structlp run problems/emotion_intensity.py -o splits=1`` end to end (the CI run).

    One regularization value (no selection on the validation split), so that CI
    fits 12 models x 6 classes once (a few minutes) rather than 4 times.
    """
    out = tmp_path / "emotion.json"
    assert main(["run", str(PROBLEM), "-o", "splits=1", "-o", "reg_grid=[0.01]",
                 "--json", str(out)]) == 0
    report = capsys.readouterr().out
    assert "zero-one, unweighted" in report and "paper: AGM" in report
    res = json.loads(out.read_text())
    assert res["splits"] == 1
    for metric, row in res["table"].items():
        bound = 4.0 if metric.startswith("squared") else 1.0
        for model in ("AGM", "CRF", "SSVM"):
            assert 0.0 <= row[model]["mean"] <= bound
            assert row[model]["reg"] == 0.01
    # every model beats always predicting "neutral" on the (unweighted) zero-one loss
    D = load_ck_emotion()
    test = D["splits"][0][120:]
    trivial = np.mean([np.mean(D["labels"][i] != 0) for i in test])
    for model in ("AGM", "CRF", "SSVM"):
        assert res["table"]["zero-one, unweighted"][model]["mean"] < trivial


def test_fast_solver_settings_fall_back_to_defaults(monkeypatch):
    """A task whose fast Clarabel settings fail is redone with Clarabel's defaults."""
    from agm_oracles import random_tree_data
    E = load_problem(PROBLEM)
    rng = np.random.default_rng(0)
    X, Y = random_tree_data(rng, 8, 5, k=3, chain=True)
    monkeypatch.setattr(E, "_DATA", {"X": X, "Y": Y, "Z": np.array([0, 1] * 4), "n_jobs": 1})
    train, test = np.arange(6), np.arange(6, 8)
    key = ("absolute", True)
    ref = E._task(("AGM", key, 0.1, train, test, None, "qp", 0))[1]
    monkeypatch.setattr(E, "FAST_CLARABEL", {"max_iter": 1})      # always stops short
    for model in ("AGM", "SSVM"):
        out = E._task((model, key, 0.1, train, test, None, "qp", 0))[1]
        assert 0.0 <= out[key] <= 2.0
        if model == "AGM":
            assert out == ref
    with pytest.raises(StructlpError):      # the fast settings alone do fail here
        E._make("AGM", key, 0.1, None, "qp", {"max_iter": 1})(6, 6).fit(X[:6], Y[:6])
