"""The CK+ emotion-intensity experiment (problems/emotion_intensity.py) end to end.

The data are research-use only and never shipped: the tests that need them skip
when ``../shared/data/ck_emotion`` (or ``$STRUCTLP_CK_PATH``) is absent.
"""

import itertools
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from structlp.agm import AdversarialGraphicalModel
from structlp.agm.crf import tree_marginals
from structlp.agm.data import DataNotFoundError, ck_path, emotion_examples, load_ck_emotion
from structlp.graphical.trees import check_tree_example, potentials, score
from structlp.cli import load_problem, main
from structlp.exceptions import InvalidInputError, InvalidParameterError, StructlpError

PROBLEM = Path(__file__).resolve().parents[2] / "problems" / "emotion_intensity.py"


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
    with pytest.raises(StructlpError, match="protocol must be 'exact' or 'paper'"):
        run(protocol="early", data_path=tmp_path)
    with pytest.raises(StructlpError, match="cv must be an integer"):
        run(cv=0, data_path=tmp_path)
    with pytest.raises(StructlpError, match="positive regularization.*exact"):
        run(reg_grid=[0.0, 1.0], data_path=tmp_path)      # reg = 0: the exact QP is unbounded
    with pytest.raises(StructlpError, match="verbose"):
        run(verbose="loud", data_path=tmp_path)
    with pytest.raises(StructlpError, match="exact_solver must be one of"):
        run(exact_solver="ipm", data_path=tmp_path)
    with pytest.raises(StructlpError, match="applies with exact_solver='qp' only"):
        run(solver="ECOS", data_path=tmp_path)
    with pytest.raises(DataNotFoundError):                 # a QP solver for the QP route
        run(solver="ECOS", exact_solver="qp", data_path=tmp_path)
    with pytest.raises(DataNotFoundError):                 # 0 is in the authors' grid
        run(protocol="paper", reg_grid=[0.1, 0.0], data_path=tmp_path)


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
@pytest.mark.data
def test_ck_data_shapes():
    D = load_ck_emotion()
    assert len(D["frames"]) == len(D["labels"]) == 167
    assert all(f.shape[1] == 25 and len(f) == len(y) for f, y in zip(D["frames"], D["labels"]))
    assert set(np.concatenate(D["labels"])) <= {0, 1, 2}
    assert D["splits"].shape == (20, 167)
    for perm in D["splits"]:
        np.testing.assert_array_equal(np.sort(perm), np.arange(167))


@needs_ck
@pytest.mark.data
@pytest.mark.slow
def test_emotion_experiment_one_split(tmp_path, capsys):
    """``structlp run problems/emotion_intensity.py -o splits=1`` end to end (the CI run).

    One regularization value (no selection), so that CI fits 12 models x 6
    classes once (a few minutes) rather than for every fold and grid value.
    """
    out = tmp_path / "emotion.json"
    assert main(["run", str(PROBLEM), "-o", "splits=1", "-o", "reg_grid=[0.01]",
                 "--json", str(out)]) == 0
    report = capsys.readouterr().out
    assert "zero-one, unweighted" in report and "paper: AGM" in report
    res = json.loads(out.read_text())
    assert res["splits"] == 1 and res["protocol"] == "exact"
    for metric, row in res["table"].items():
        bound = 4.0 if metric.startswith("squared") else 1.0
        for model in ("AGM", "CRF", "SSVM"):
            assert 0.0 <= row[model]["mean"] <= bound
            assert row[model]["per_split"] == [row[model]["mean"]]
            assert row[model]["reg"] == 0.01
    # every model beats always predicting "neutral" on the (unweighted) zero-one loss
    D = load_ck_emotion()
    test = D["splits"][0][120:]
    # and its losses are those of the joint models, recomputed (one metric: the joint QPs
    # on 120 sequences take about 30 s each; the subset tests below recompute all 18)
    _assert_recomputed(res, D, D["splits"][0][:120], test, 0, atol=1e-9,
                       metrics=("zero-one, unweighted",))
    trivial = np.mean([np.mean(D["labels"][i] != 0) for i in test])
    for model in ("AGM", "CRF", "SSVM"):
        assert res["table"]["zero-one, unweighted"][model]["mean"] < trivial


def _ck_subset(E, monkeypatch):
    """5 sequences per emotion class, class-interleaved: 24 train (4 per class), 6 test.

    Every fold of a 2-fold CV and every split then holds each class in its
    training part (the per-class models need it).
    """
    D = load_ck_emotion()
    order = np.concatenate([np.flatnonzero(D["emotion"] == z)[:5]
                            for z in range(6)]).reshape(6, 5).T.ravel()
    sub = {"frames": [D["frames"][i] for i in order],
           "labels": [D["labels"][i] for i in order], "emotion": D["emotion"][order],
           "splits": np.tile(np.arange(30), (20, 1))}
    monkeypatch.setattr(E, "load_ck_emotion", lambda path=None: sub)
    monkeypatch.setattr(E, "N_TRAIN", 24)
    return sub


_METRIC_KEYS = {"zero-one, unweighted": ("zero_one", False),
                "absolute, unweighted": ("absolute", False),
                "squared, unweighted": ("squared", False),
                "zero-one, weighted": ("zero_one", True),
                "absolute, weighted": ("absolute", True),
                "squared, weighted": ("squared", True)}


def _mean_loss(pred, Y, loss, weighted):
    """The metric, written out here (not the problem's): per sequence the position-weighted
    (or plain) mean of the per-frame loss, then the mean over sequences."""
    vals = []
    for p, y in zip(pred, Y):
        d = np.abs(np.asarray(p, dtype=float) - np.asarray(y, dtype=float))
        per = {"zero_one": (d > 0).astype(float), "absolute": d, "squared": d ** 2}[loss]
        w = np.arange(1.0, len(d) + 1) if weighted else np.ones(len(d))
        vals.append(float(w @ per / w.sum()))
    return float(np.mean(vals))


def _recomputed(D, train, test, reg_of, metrics, models=("AGM", "CRF", "SSVM"),
                edges="chain"):
    """The exact protocol's test losses by an independent route: each model fit once on the
    joint 6-block features (the problem fits one model per emotion class), the AGM and the
    SSVM by one Clarabel QP each (the problem: cutting planes), the CRF by L-BFGS to a
    tighter tolerance; the losses by :func:`_mean_loss`.  ``reg_of(model, metric)`` is the
    reg of ``reg/2 |theta|^2 + mean loss``; returns ``{(model, metric): loss}``."""
    import structlp
    from structlp.agm import JunctionTreeCRF, TreeCRF
    from structlp.structures import JunctionTreeLabeling, TreeLabeling
    X = emotion_examples(D["frames"], D["emotion"], n_classes=6, edges=edges)
    Xtr, Ytr = [X[i] for i in train], [D["labels"][i] for i in train]
    Xte, Yte = [X[i] for i in test], [D["labels"][i] for i in test]
    labelling = TreeLabeling if edges == "chain" else JunctionTreeLabeling
    out, crfs = {}, {}
    for metric in metrics:
        loss, weighted = _METRIC_KEYS[metric]
        nw = "position" if weighted else None
        for model in models:
            reg = reg_of(model, metric)
            if model == "CRF":
                if reg not in crfs:
                    crfs[reg] = (TreeCRF if edges == "chain" else JunctionTreeCRF)(
                        3, reg=reg, max_iter=3000).fit(Xtr, Ytr)
                pred = crfs[reg].predict(Xte, loss=loss)
            elif model == "AGM":
                pred = AdversarialGraphicalModel(
                    3, loss=loss, node_weights=nw, normalize_weights=True, reg=reg,
                    method="qp", solver="CLARABEL").fit(Xtr, Ytr).predict(Xte)
            else:
                pred = structlp.MaxMarginLearner(
                    labelling(3, loss=loss, node_weights=nw, normalize_weights=True),
                    C=1.0 / (reg * len(train)), solver="CLARABEL").fit(Xtr, Ytr).predict(Xte)
            out[(model, metric)] = _mean_loss(pred, Yte, loss, weighted)
    return out


def _assert_recomputed(res, D, train, test, split, atol, metrics=tuple(_METRIC_KEYS),
                       edges="chain"):
    """Each (model, metric) test loss of split ``split`` equals the recomputation at the
    reg the run chose, to ``atol``."""
    models = tuple(res["models"]) if "models" in res else ("AGM", "CRF", "SSVM")
    ref = _recomputed(D, train, test, lambda model, metric: res["reg"][f"{model}/{metric}"],
                      metrics, models, edges)
    for (model, metric), want in ref.items():
        got = res["table"][metric][model]["per_split"][split]
        assert abs(got - want) <= atol, (model, metric, got, want)


def _check_result(res, protocol, n_split):
    assert res["protocol"] == protocol and res["splits"] == n_split
    assert set(res["table"]) == {"zero-one, unweighted", "absolute, unweighted",
                                 "squared, unweighted", "zero-one, weighted",
                                 "absolute, weighted", "squared, weighted"}
    for metric, row in res["table"].items():
        bound = 4.0 if metric.startswith("squared") else 1.0
        for model in ("AGM", "CRF", "SSVM"):
            assert all(0.0 <= v <= bound for v in row[model]["per_split"])
            assert row[model]["paper"] > 0
    for key in ("final/AGM", "final/CRF", "final/SSVM"):
        assert res["breakdown"][key]["tasks"] >= 1 and res["breakdown"][key]["fit"] > 0
    assert res["cpu_seconds"] > 0 and "ours - paper" in res["report"]


@needs_ck
@pytest.mark.data
@pytest.mark.slow
def test_exact_protocol_smoke_with_cv_and_progress(monkeypatch, caplog):
    """The exact protocol on a CK+ subset: 2-fold CV, one split; progress lines logged.

    About 35 seconds (some 300 small per-class fits, by cutting planes), hence
    slow-marked; the grid extension itself is checked without data below.
    """
    E = load_problem(PROBLEM)
    sub = _ck_subset(E, monkeypatch)
    monkeypatch.setattr(E, "EXACT_LIMITS", (1.0, 100.0))   # extend at most to 100
    with caplog.at_level(logging.INFO, logger="structlp"):
        res = E.run(splits=1, cv=2, reg_grid=[1.0, 10.0], n_jobs=1, verbose=1)
    _check_result(res, "exact", 1)
    # the 18 test losses: those of the joint models at the chosen regs, recomputed
    _assert_recomputed(res, sub, np.arange(24), np.arange(24, 30), 0, atol=1e-9)
    assert set(res["reg"].values()) <= {1.0, 10.0, 100.0}
    for cv_loss in res["cv_loss"].values():          # every value tried, on both folds
        assert {"1.0", "10.0"} <= set(cv_loss)
    text = caplog.text
    assert "[fold 1] AGM reg=" in text and "[fold 2] SSVM reg=" in text
    assert "[split 1] CRF reg=" in text and "chosen:" in text


@pytest.mark.slow   # about 12 s
@needs_ck
@pytest.mark.data
def test_paper_protocol_smoke(monkeypatch):
    """The paper protocol on a CK+ subset (2 and 3 AdaGrad passes instead of 50 and 100)."""
    E = load_problem(PROBLEM)
    sub = _ck_subset(E, monkeypatch)
    monkeypatch.setattr(E, "PAPER_PASSES", {"cv": 2, "final": 3})
    res = E.run(splits=2, protocol="paper", cv=2, reg_grid=[0.1, 0.0], n_jobs=1)
    _check_result(res, "paper", 2)
    assert set(res["reg"].values()) <= {0.1, 0.0} and not res["grid_extensions"]
    # the AGM's losses (both splits are the subset's 24/6 partition) recomputed from the
    # public estimator with the protocol's settings (the authors' AdaGrad of the CRF and
    # SSVM lives in the problem file; its update is checked by the tests below)
    X = emotion_examples(sub["frames"], sub["emotion"], n_classes=6)
    Yl = sub["labels"]
    for metric, (loss, weighted) in _METRIC_KEYS.items():
        agm = AdversarialGraphicalModel(
            3, loss=loss, node_weights="position" if weighted else None,
            normalize_weights=True, reg=res["reg"][f"AGM/{metric}"], method="subgradient",
            inner="lp", max_epochs=3, learning_rate=0.1, batch_size=1, average=False,
            init=-0.5, random_state=0).fit(X[:24], Yl[:24])
        want = _mean_loss(agm.predict(X[24:]), Yl[24:], loss, weighted)
        for got in res["table"][metric]["AGM"]["per_split"]:
            assert abs(got - want) <= 1e-9, (metric, got, want)
    a = E.run(splits=1, protocol="paper", reg_grid=[0.0], n_jobs=1)      # same seed: same run
    b = E.run(splits=1, protocol="paper", reg_grid=[0.0], n_jobs=1)
    assert a["table"] == b["table"]


def _fake_task(best):
    """A stand-in for one task: validation loss |log10 reg - log10 best[model]|."""
    def task(job):
        keys = E_METRICS if job.model == "CRF" else [job.key]
        loss = abs(np.log10(job.reg) - np.log10(best[job.model]))
        return job, {k: loss for k in keys}, {"fit": 0.0, "fit_cpu": 0.0, "predict": 0.0,
                                              "predict_cpu": 0.0, "solver": 0.0, "fits": 1}
    return task


E_METRICS = load_problem(PROBLEM).METRICS


def test_cross_validation_extends_the_grid_past_its_edges(monkeypatch):
    """A best value on an edge of the grid gets the next decade tried, until interior."""
    E = load_problem(PROBLEM)
    best = {"AGM": 1e3, "SSVM": 1e-3, "CRF": 1.0}
    monkeypatch.setattr(E, "_task", _fake_task(best))
    progress = E.Progress("test", verbose=0)
    timings = []
    chosen, cv_loss, notes = E.cross_validate(np.arange(12), [0.1, 1.0, 10.0], 3, 1, True,
                                              timings, progress)
    for (model, _), reg in chosen.items():
        assert reg == pytest.approx(best[model])
        regs = sorted(cv_loss[(model, _)])
        assert regs[0] < reg < regs[-1]                          # interior
    assert any("AGM/" in n and "best 100 on the grid's edge, tried 1000" in n for n in notes)
    assert any("SSVM/" in n and "tried 0.001" in n for n in notes)
    assert not any(n.startswith("CRF/") for n in notes)
    # the paper protocol does not extend: its best may sit on the edge
    chosen, _, notes = E.cross_validate(np.arange(12), [0.1, 1.0, 10.0], 3, 1, False, [],
                                        progress)
    assert chosen[("AGM", E_METRICS[0])] == 10.0 and not notes


def test_ties_go_to_the_larger_regularization():
    E = load_problem(PROBLEM)
    assert E._best({0.0: [0.3, 0.3], 1e-3: [0.2, 0.4], 1e-1: [0.25, 0.35]}) == 1e-1
    assert E._best({0.0: [0.1], 1e-1: [0.2]}) == 0.0


def test_paper_gradients_against_finite_differences_and_enumeration():
    """The CRF and SSVM per-example (sub)gradients of the paper protocol, by independent oracles.

    CRF: the gradient of ``log Z - theta . Phi(x, y)`` equals central differences.
    SSVM: the loss-augmented labelling equals enumeration of all 3^4 labellings, and
    the returned vector is ``Phi(x, y*) - Phi(x, y)``.
    """
    from agm_oracles import random_tree_data
    E = load_problem(PROBLEM)
    rng = np.random.default_rng(3)
    X, Y = random_tree_data(rng, 1, 4, k=3, chain=True)
    ex, y, k = check_tree_example(X[0]), Y[0], 3
    D = 3 * 3 + 9 * 2
    theta = rng.normal(size=D)

    def crf_loss(t):
        b, B = potentials(ex, t, k)
        return tree_marginals(ex, b, B)[0] - score(ex, b, B, y)

    _, R, Q = tree_marginals(ex, *potentials(ex, theta, k))
    g = E._feature_gradient(ex, R, Q, y, k)
    h = 1e-6
    fd = np.array([(crf_loss(theta + h * e) - crf_loss(theta - h * e)) / (2 * h)
                   for e in np.eye(D)])
    np.testing.assert_allclose(g, fd, atol=1e-6)

    from structlp.agm.game import check_loss
    for loss, weighted in itertools.product(("zero_one", "absolute", "squared"), (False, True)):
        L = check_loss(loss, k)[1]
        w = E._weights(ex.n_nodes, weighted)
        b, B = potentials(ex, theta, k)
        best = max(itertools.product(range(k), repeat=ex.n_nodes),
                   key=lambda z: score(ex, b, B, np.array(z))
                   + float(np.sum(w * L[np.array(z), y])))
        captured = {}

        def fake_adagrad(grad, theta0, m, reg, passes, rng_):
            captured["g"] = grad(0, theta)
            return theta0

        orig = E.adagrad
        E.adagrad = fake_adagrad
        try:
            E._paper_fit("SSVM", (loss, weighted), 0.0, [ex], [y], 1, 0)
        finally:
            E.adagrad = orig
        R, Q = E._one_hot(ex, np.array(best), k)
        np.testing.assert_allclose(captured["g"], E._feature_gradient(ex, R, Q, y, k))


def test_adagrad_is_the_authors_update():
    """One pass on one example: theta - lr g / (|g| + eps) per coordinate, g incl. reg theta."""
    E = load_problem(PROBLEM)
    theta0 = np.array([1.0, -2.0, 0.5])
    c = np.array([0.3, -0.1, 0.0])
    out = E.adagrad(lambda i, t: c.copy(), theta0, 1, 0.5, 1, np.random.default_rng(0))
    g = c + 0.5 * theta0
    np.testing.assert_allclose(out, theta0 - 0.1 * g / (np.abs(g) + 1e-8))


def test_agm_init_starts_the_subgradient_method():
    from agm_oracles import random_tree_data
    rng = np.random.default_rng(1)
    X, Y = random_tree_data(rng, 3, 4, k=3, chain=True)
    D = 3 * 3 + 9 * 2
    kw = dict(method="subgradient", max_epochs=1, learning_rate=1e-9, average=False,
              random_state=0)
    m = AdversarialGraphicalModel(3, init=-0.5, **kw).fit(X, Y)
    np.testing.assert_allclose(m.coef_, -0.5, atol=1e-6)
    start = rng.normal(size=D)
    m = AdversarialGraphicalModel(3, init=start, **kw).fit(X, Y)
    np.testing.assert_allclose(m.coef_, start, atol=1e-6)
    assert m.get_params()["init"] is start
    for bad in (np.zeros(D + 1), "zeros", np.nan, ["a"] * D, [["x"]], True):
        with pytest.raises(InvalidParameterError, match="'init'.*shape \\(27,\\)"):
            AdversarialGraphicalModel(3, init=bad, **kw).fit(X, Y)


def _two_class_problem(monkeypatch, exact_solver="qp"):
    """The problem module on 8 random chains of two "emotion classes" (no CK+ data)."""
    from agm_oracles import random_tree_data
    E = load_problem(PROBLEM)
    X, Y = random_tree_data(np.random.default_rng(0), 8, 5, k=3, chain=True)
    monkeypatch.setattr(E, "_DATA", {"X": X, "Y": Y, "Z": np.array([0, 1] * 4),
                                     "cfg": {"protocol": "exact", "solver": None, "seed": 0,
                                             "n_jobs": 1, "exact_solver": exact_solver}})
    return E, X, Y


@pytest.mark.parametrize("reg", [0.03, 1.0])
def test_cutting_planes_and_qps_give_the_same_models(monkeypatch, reg):
    """exact_solver: the cutting planes (default) and the Clarabel QPs reach one optimum per
    class: the same objectives (1e-7), the same coefficients and the same test losses."""
    import structlp
    E, X, Y = _two_class_problem(monkeypatch, "cutting_plane")
    train, test, Z = np.arange(6), np.arange(6, 8), E._DATA["Z"]
    for model in ("AGM", "SSVM"):
        for key in E.METRICS:
            fits = {es: E.PerClass(E._make(model, key, reg, None, None, exact_solver=es)).fit(
                [X[i] for i in train], [Y[i] for i in train], Z[train])
                for es in E.EXACT_SOLVERS}
            for z, cpl in fits["cutting_plane"].models.items():
                qp = fits["qp"].models[z]
                assert isinstance(cpl, AdversarialGraphicalModel if model == "AGM"
                                  else structlp.CuttingPlaneLearner)
                assert cpl.converged_
                assert cpl.objective_ == pytest.approx(qp.objective_, rel=1e-7)
                np.testing.assert_allclose(cpl.coef_, qp.coef_, atol=1e-4)
            out = {}
            for es in E.EXACT_SOLVERS:
                E._DATA["cfg"]["exact_solver"] = es
                out[es] = E._task(E.Job(model, key, reg, train, test, "final", 0))[1]
            assert out["cutting_plane"] == out["qp"]


def test_fast_solver_settings_fall_back_to_defaults(monkeypatch):
    """A task whose fast Clarabel settings fail is redone with Clarabel's defaults."""
    E, X, Y = _two_class_problem(monkeypatch)
    train, test = np.arange(6), np.arange(6, 8)
    key = ("absolute", True)
    ref = E._task(E.Job("AGM", key, 0.1, train, test, "final", 0))[1]
    monkeypatch.setattr(E, "FAST_CLARABEL", {"max_iter": 1})      # always stops short
    for model in ("AGM", "SSVM"):
        out = E._task(E.Job(model, key, 0.1, train, test, "final", 0))[1]
        assert 0.0 <= out[key] <= 2.0
        if model == "AGM":
            assert out == ref
    with pytest.raises(StructlpError):      # the fast settings alone do fail here
        E._make("AGM", key, 0.1, None, {"max_iter": 1}, exact_solver="qp")(6, 6).fit(
            X[:6], Y[:6])


def test_a_cv_value_the_solver_cannot_reach_counts_as_worst(monkeypatch):
    """In CV a failed QP is the worst value (noted, no further extension); in a final fit it raises."""
    from structlp.exceptions import SolverError
    E, X, Y = _two_class_problem(monkeypatch)
    real = E._fit_with_fallback

    def failing(model, key, reg, *args):
        if reg >= 100:
            raise SolverError("Solver CLARABEL ended with status 'optimal_inaccurate'.")
        return real(model, key, reg, *args)

    monkeypatch.setattr(E, "_fit_with_fallback", failing)
    key, train, test = ("zero_one", False), np.arange(6), np.arange(6, 8)
    _, out, tm = E._task(E.Job("AGM", key, 100.0, train, test, "cv", 0))
    assert out == {key: float("inf")} and tm["fits"] == 0
    with pytest.raises(SolverError):
        E._task(E.Job("SSVM", key, 100.0, train, test, "final", 0))
    monkeypatch.setattr(E, "METRICS", [key])
    chosen, cv_loss, notes = E.cross_validate(np.arange(8), [1.0, 100.0], 2, 1, True, [],
                                              E.Progress("test", verbose=0))
    assert chosen[("AGM", key)] <= 1.0 and cv_loss[("AGM", key)][100.0] == float("inf")
    assert any(n.startswith("AGM/zero-one, unweighted: solver failed at reg 100") for n in notes)


def test_summary_says_fixed_reg_without_selection():
    """One reg value (or cv=1): the summary says the value was fixed, not "chosen by CV"."""
    from scipy.stats import wilcoxon
    E = load_problem(PROBLEM)
    results = {(n, k): [0.3] for n in E.MODELS for k in E.METRICS}
    args = ([], [], "exact")
    for grid, cv, fixed in (([0.01], 3, True), ([0.1, 1.0], 1, True), ([0.1, 1.0], 3, False)):
        chosen = {(n, k): grid[0] for n in E.MODELS for k in E.METRICS}
        report = E._report(results, chosen, {}, *args, grid, 1, cv, 1, 1.0, 0.0, 1.0,
                           wilcoxon)["report"]
        assert ("reg fixed at 0.01" in report or "reg fixed at 0.1" in report) == fixed
        assert ("chosen by" in report) != fixed


def _skip_chain_problem(monkeypatch, protocol="exact"):
    """The problem module on 8 random skip-chains (edges t -> t+1 and t -> t+2), 2 classes."""
    from structlp.agm import skip_chain
    E = load_problem(PROBLEM)
    rng = np.random.default_rng(3)
    X, Y = [], []
    for _ in range(8):
        n = int(rng.integers(4, 7))
        X.append(skip_chain(rng.normal(size=(n, 2)), rng.normal(size=(n - 1, 2)),
                            skip_features=rng.normal(size=(n - 2, 2))))
        Y.append(rng.integers(0, 3, n))
    monkeypatch.setattr(E, "_DATA", {"X": X, "Y": Y, "Z": np.array([0, 1] * 4),
                                     "X_joint": [E.check_graph_example(x, 3) for x in X],
                                     "cfg": {"protocol": protocol, "solver": None, "seed": 0,
                                             "n_jobs": 1, "edges": "skip2"}})
    return E, X, Y


def test_skip_chain_option_runs_the_junction_tree_models(monkeypatch):
    """edges="skip2": AGM on the junction tree, SSVM on JunctionTreeLabeling, JunctionTreeCRF."""
    from structlp.agm import JunctionTreeCRF
    from structlp.structures import JunctionTreeLabeling
    E, X, Y = _skip_chain_problem(monkeypatch)
    train, test = np.arange(6), np.arange(6, 8)
    key = ("absolute", True)
    for model in ("AGM", "SSVM", "CRF"):
        _, out, tm = E._task(E.Job(model, key if model != "CRF" else None, 1.0, train, test,
                                   "final", 0))
        assert tm["fits"] == 2 and all(0.0 <= v <= 2.0 for v in out.values())
    ssvm = E._make("SSVM", key, 1.0, None, None, loopy=True)(6, 6)
    assert isinstance(ssvm.model, JunctionTreeLabeling)
    assert isinstance(E._crf(1.0, loopy=True)(6, 6), JunctionTreeCRF)
    # the AGM's predictions are max-sum on the junction tree: equal to enumeration
    agm = E._make("AGM", key, 1.0, None, None, loopy=True)(6, 6).fit(X[:6], Y[:6])
    from structlp.graphical.junction import graph_score
    for x, y_hat in zip(X[6:], agm.predict(X[6:])):
        ex = E.check_graph_example(x, 3)
        b, B = E.potentials(ex, agm.coef_, 3)
        best = max(graph_score(ex, b, B, np.array(y))
                   for y in itertools.product(range(3), repeat=ex.n_nodes))
        assert graph_score(ex, b, B, y_hat) == pytest.approx(best, abs=1e-9)


def test_skip_chain_option_paper_protocol(monkeypatch):
    """The paper protocol's AdaGrad runs on skip-chains too (junction-tree max-sum / marginals)."""
    E, X, Y = _skip_chain_problem(monkeypatch, protocol="paper")
    monkeypatch.setattr(E, "PAPER_PASSES", {"cv": 1, "final": 2})
    train, test = np.arange(6), np.arange(6, 8)
    for model in ("AGM", "SSVM", "CRF"):
        key = None if model == "CRF" else ("zero_one", False)
        out = E._task(E.Job(model, key, 0.1, train, test, "final", 0))[1]
        assert all(0.0 <= v <= 4.0 for v in out.values())


def test_edges_option_is_validated(tmp_path):
    run = load_problem(PROBLEM).run
    with pytest.raises(StructlpError, match="edges must be one of"):
        run(edges="grid", data_path=tmp_path)
    with pytest.raises(DataNotFoundError):               # a valid value reaches the data
        run(edges="skip2", data_path=tmp_path)


@needs_ck
@pytest.mark.data
@pytest.mark.slow
def test_skip_chain_option_on_a_ck_subset(monkeypatch):
    """``-o edges=skip2`` end to end on a CK+ subset (one reg value, one split)."""
    E = load_problem(PROBLEM)
    sub = _ck_subset(E, monkeypatch)
    res = E.run(splits=1, reg_grid=[10.0], n_jobs=1, edges="skip2")
    _check_result(res, "exact", 1)
    assert res["edges"] == "skip2" and "edges=skip2" in res["report"]
    # two of the losses recomputed (the joint junction-tree QPs take 10 s each)
    _assert_recomputed(res, sub, np.arange(24), np.arange(24, 30), 0, atol=1e-9,
                       metrics=("zero-one, unweighted", "squared, weighted"), edges="skip2")


def test_chain_labeling_is_tree_labeling_without_the_redundant_bounds(rng):
    """The SSVM's ChainLabeling: the same polytope and QP optimum as TreeLabeling, fewer variables."""
    import structlp
    from agm_oracles import random_tree_data
    from structlp.structures import TreeLabeling
    E = load_problem(PROBLEM)
    X, Y = random_tree_data(rng, 5, 5, k=3, chain=True)
    fits = {}
    for cls in (TreeLabeling, E.ChainLabeling):
        model = cls(3, loss="absolute", node_weights="position", normalize_weights=True)
        fits[cls] = structlp.MaxMarginLearner(model, C=0.5).fit(X, Y)
        P = model.polytope(model.check_x(X[0]))
        Q = TreeLabeling(3).polytope(model.check_x(X[0]))
        assert (P.E != Q.E).nnz == 0 and np.array_equal(P.e, Q.e) and np.array_equal(P.ub, Q.ub)
    a, b = fits[TreeLabeling], fits[E.ChainLabeling]
    assert b.problem_.value == pytest.approx(a.problem_.value, rel=1e-6)
    np.testing.assert_allclose(b.coef_, a.coef_, atol=1e-5)
    assert (sum(v.size for v in b.problem_.variables())
            < sum(v.size for v in a.problem_.variables()))
    assert all(np.array_equal(p, q) for p, q in zip(b.predict(X), a.predict(X)))


def test_models_and_regs_options_are_validated(tmp_path):
    run = load_problem(PROBLEM).run
    for bad in (["X"], [], 3, ["CRF", "HMM"]):
        with pytest.raises(InvalidParameterError, match="models must be a non-empty list"):
            run(models=bad, data_path=tmp_path)
    for models, bad in ((["CRF"], {"AGM": 1.0}), (None, {"CRF": 1.0}), (["CRF"], [1.0]),
                        (["CRF"], {"CRF": [1.0, 2.0]}), (["CRF"], {"CRF": "a"}),
                        (["CRF"], {"CRF": -1.0})):
        with pytest.raises(InvalidParameterError, match="regs must be a mapping"):
            run(models=models, regs=bad, data_path=tmp_path)
    with pytest.raises(InvalidParameterError, match="positive.*exact"):
        run(models=["CRF"], regs={"CRF": 0.0}, data_path=tmp_path)
    with pytest.raises(DataNotFoundError):          # 0 is valid in the paper protocol
        run(protocol="paper", models=["CRF"], regs={"CRF": 0.0}, data_path=tmp_path)


@needs_ck
@pytest.mark.data
def test_fixed_regs_run_only_the_models_asked_without_cv(monkeypatch):
    """``regs`` fixes every (model, metric)'s reg (no CV task); ``models`` runs a subset."""
    E = load_problem(PROBLEM)
    _ck_subset(E, monkeypatch)
    jobs = []

    def task(job):
        jobs.append(job)
        return _fake_task({"AGM": 1.0, "CRF": 1.0, "SSVM": 1.0})(job)
    monkeypatch.setattr(E, "_task", task)
    regs = {"CRF": [0.1, 0.1, 0.1, 10.0, 1.0, 1.0], "AGM": 10.0}
    res = E.run(splits=5, models=["CRF", "AGM"], regs=regs, n_jobs=1)
    assert {j.phase for j in jobs} == {"final"} and {j.model for j in jobs} == {"CRF", "AGM"}
    assert sorted({j.reg for j in jobs if j.model == "CRF"}) == [0.1, 1.0, 10.0]
    assert res["models"] == ["AGM", "CRF"] and "SSVM" not in res["report"]
    assert res["reg"]["CRF/zero-one, weighted"] == 10.0 and res["reg"]["AGM/squared, weighted"] == 10.0
    assert "reg fixed by the regs option" in res["report"]
    for row in res["table"].values():
        assert set(row) == {"AGM", "CRF"} and len(row["CRF"]["per_split"]) == 5


def test_compare_pairs_two_runs_by_split():
    """``compare``: the means over the common splits, b - a, and the paired Wilcoxon p."""
    from scipy.stats import wilcoxon
    E = load_problem(PROBLEM)
    rng = np.random.default_rng(0)

    def result(n, models, shift):
        return {"splits": n, "table": {E.metric_name(*k): {
            m: {"per_split": list(0.3 + shift + 0.01 * np.arange(n) + 0.001 * rng.random(n))}
            for m in models} for k in E.METRICS}}
    a, b = result(7, ("AGM", "CRF"), 0.0), result(6, ("CRF",), 0.05)
    lines = E.compare(a, b, labels=("chain", "skip2"))
    assert len(lines) == 2 + len(E.METRICS) and "splits 1..6" in lines[0]  # CRF only
    x = np.array(a["table"]["zero-one, unweighted"]["CRF"]["per_split"][:6])
    y = np.array(b["table"]["zero-one, unweighted"]["CRF"]["per_split"])
    cells = lines[2].split()
    assert cells[0] == "CRF" and float(cells[-2]) == pytest.approx(y.mean() - x.mean(), abs=1e-3)
    assert float(cells[-1]) == pytest.approx(wilcoxon(x, y).pvalue, abs=1e-3)
