"""LatentSSVM against brute force: completions, the latent objective, its monotone
decrease, a problem no linear model fits, restarts and the refusals of bad input."""

import warnings

import numpy as np
import pytest

import structlp
from structlp import (CuttingPlaneLearner, DeclarationError, FrankWolfeLearner,
                      InvalidOutputError, InvalidParameterError, MaxMarginLearner,
                      StructuredModel, SubgradientLearner)
from structlp.latent import LatentGraphLabeling, LatentSSVM
from structlp.structures import GraphLabeling

from latent_oracles import (LatentMulticlass, LPCompletion, all_outputs, brute_completion,
                            brute_objective, node_example, small_graph, xor_data)


def _graph_data(seed, m=6):
    rng = np.random.default_rng(seed)
    X = [small_graph(rng) for _ in range(m)]
    Y = [rng.integers(2, size=3) for _ in range(m)]
    return X, Y


# ---------------------------------------------------------------- completion
@pytest.mark.parametrize("cls", [LatentGraphLabeling, LPCompletion])
def test_completion_equals_brute_force(cls):
    model = cls(n_labels=2, n_states_per_label=2)
    rng = np.random.default_rng(0)
    for trial in range(6):
        x = model.check_x(small_graph(rng, hidden=trial % 2 == 0))
        y = rng.integers(2, size=x.n_visible)
        scores = rng.standard_normal(model.n_parts(x))
        if cls is LatentGraphLabeling:
            mu = model.complete(x, scores, y)
        else:       # the restricted inference LP, through the estimator's machinery
            clf = LatentSSVM(model)
            clf.coef_, clf.n_features_in_ = np.zeros(1), 1
            from structlp.latent.cccp import _Examples
            mu = _Examples(model, [x], [y]).complete_scores(0, scores)
        assert np.array_equal(model.label(x, model.decode(x, mu)), y)
        assert float(scores @ mu) == pytest.approx(brute_completion(model, x, scores, y),
                                                   abs=1e-9)


def test_lp_completion_of_a_declared_model_equals_enumeration():
    model = LatentMulticlass((0, 1, 0, 2, 1))
    from structlp.latent.cccp import _Examples
    rng = np.random.default_rng(1)
    X = [rng.standard_normal(3) for _ in range(5)]
    Y = [0, 1, 2, 0, 1]
    data = _Examples(model, X, Y)
    for i in range(5):
        s = rng.standard_normal(5)
        mu = data.complete_scores(i, s)
        best = max(s[k] for k, lab in enumerate(model.state_label) if lab == Y[i])
        assert float(s @ mu) == pytest.approx(best, abs=1e-12)


# ---------------------------------------------------------------- objective
@pytest.mark.parametrize("learner", [None, MaxMarginLearner, CuttingPlaneLearner])
def test_objective_equals_brute_force_and_never_increases(learner):
    X, Y = _graph_data(3)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    clf = LatentSSVM(model, C=2.0, learner=learner, n_init=2, random_state=0).fit(X, Y)
    want = brute_objective(model, X, Y, clf.coef_, 2.0)
    assert clf.objective_ == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert clf.objective_ == clf.objective_history_[-1]
    for run in clf.restarts_:
        assert np.all(np.diff(run["objective_history"]) <= 0)
    assert clf.n_iter_ == len(clf.history_) >= 1
    assert clf.objective_ == min(r["objective"] for r in clf.restarts_)


def test_objective_never_increases_with_loose_convex_steps():
    # a loose learner (relative gap 0.2) is where a step could raise J: the step is not taken
    X, Y = xor_data(40, seed=5)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    loose = FrankWolfeLearner(model, tol=0.2, max_iter=3)
    clf = LatentSSVM(model, C=5.0, learner=loose, n_init=3, random_state=2, max_iter=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", structlp.ConvergenceWarning)
        clf.fit(X, Y)
    for run in clf.restarts_:
        hist = run["objective_history"]
        assert len(hist) >= 1 and np.all(np.diff(hist) <= 0)
    assert max(run["n_iter"] for run in clf.restarts_) >= 2
    assert {run["stop"] for run in clf.restarts_} <= {"fixed point", "tol", "no decrease",
                                                      "max_iter"}


def test_a_step_that_raises_the_objective_is_not_taken():
    # one epoch of subgradient per convex step: far from its optimum, so a step can raise J
    X, Y = xor_data(40, seed=5)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    crude = SubgradientLearner(model, max_iter=1)
    clf = LatentSSVM(model, C=5.0, learner=crude, n_init=6, random_state=0, max_iter=30,
                     tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", structlp.ConvergenceWarning)
        clf.fit(X, Y)
    stops = [run["stop"] for run in clf.restarts_]
    assert "no decrease" in stops
    for run in clf.restarts_:
        assert np.all(np.diff(run["objective_history"]) <= 0)
    assert clf.objective_ == pytest.approx(brute_objective(model, X, Y, clf.coef_, 5.0),
                                           rel=1e-9)
    assert clf.objective_ == pytest.approx(brute_objective(model, X, Y, clf.coef_, 5.0),
                                           rel=1e-9)


def test_declared_model_objective_by_enumeration():
    model = LatentMulticlass((0, 0, 1, 1))
    rng = np.random.default_rng(4)
    X = [rng.standard_normal(3) for _ in range(12)]
    Y = [int(v) for v in rng.integers(2, size=12)]
    clf = LatentSSVM(model, C=1.0, n_init=2, random_state=1).fit(X, Y)
    w = clf.coef_
    J = 0.5 * w @ w
    for x, y in zip(X, Y):
        s = model.features(x) @ w
        aug = max(s[k] + (lab != y) for k, lab in enumerate(model.state_label))
        comp = max(s[k] for k, lab in enumerate(model.state_label) if lab == y)
        J += aug - comp
    assert clf.objective_ == pytest.approx(J, rel=1e-9)
    assert np.all(np.diff(clf.objective_history_) <= 0)
    assert all(p in (0, 1) for p in clf.predict(X))


# ---------------------------------------------------------------- what latent buys
def test_xor_needs_the_latent_states():
    X, Y = xor_data(80, seed=0)
    Xt, Yt = xor_data(200, seed=1)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    clf = LatentSSVM(model, C=10.0, n_init=3, random_state=0).fit(X, Y)
    acc = np.mean([p[0] == y[0] for p, y in zip(clf.predict(Xt), Yt)])
    assert acc >= 0.95                     # 0.98
    assert any(len(r["objective_history"]) >= 2 for r in clf.restarts_)
    assert all(np.all(np.diff(r["objective_history"]) <= 0) for r in clf.restarts_)
    linear = GraphLabeling(2)
    for lin in (FrankWolfeLearner(linear, C=10.0, random_state=0),
                MaxMarginLearner(linear, C=10.0)):
        lin.fit(X, Y)
        acc_lin = np.mean([p[0] == y[0] for p, y in zip(lin.predict(Xt), Yt)])
        assert acc_lin <= 0.8              # 0.52 for both
    # a piecewise-linear rule: at least three convex regions (states) are needed
    H = clf.predict_latent(Xt)
    assert len({int(h[0]) for h in H}) >= 3


# ---------------------------------------------------------------- restarts
def test_restarts_are_deterministic():
    X, Y = xor_data(30, seed=3)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    a = LatentSSVM(model, C=3.0, n_init=3, random_state=7).fit(X, Y)
    b = LatentSSVM(model, C=3.0, n_init=3, random_state=7).fit(X, Y)
    assert np.array_equal(a.coef_, b.coef_)
    assert a.objective_history_ == b.objective_history_
    assert [r["objective"] for r in a.restarts_] == [r["objective"] for r in b.restarts_]
    c = LatentSSVM(model, C=3.0, n_init=3, random_state=8).fit(X, Y)
    assert [r["objective"] for r in c.restarts_] != [r["objective"] for r in a.restarts_]


def test_learner_instance_keeps_its_settings_and_warm_starts_subgradient():
    X, Y = xor_data(30, seed=3)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    inner = SubgradientLearner(LatentGraphLabeling(2), C=99.0, max_iter=30, random_state=0)
    clf = LatentSSVM(model, C=3.0, learner=inner, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", structlp.ConvergenceWarning)
        clf.fit(X, Y)
    assert clf.learner_.C == 3.0 and repr(clf.learner_.model) == repr(model)
    assert clf.learner_.warm_start is True and clf.learner_.max_iter == 30
    assert inner.C == 99.0 and not hasattr(inner, "coef_")   # the instance given is untouched
    assert np.all(np.diff(clf.objective_history_) <= 0)


# ---------------------------------------------------------------- bad input
class _Conflicting(LatentMulticlass):
    """observe contradicts the polytope for the label 1: no output satisfies it."""

    def observe(self, x, mu, y):
        if y == 1:
            return [mu[2] == 1, mu[3] == 1]
        return super().observe(x, mu, y)


def test_observe_no_output_names_the_example():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal(2) for _ in range(5)]
    Y = [0, 0, 0, 1, 0]
    with pytest.raises(InvalidOutputError,
                       match=r"Y\[3\]: no output of X\[3\] satisfies the constraints "
                             r"_Conflicting\.observe"):
        LatentSSVM(_Conflicting(), random_state=0).fit(X, Y)


class _Bounds(LatentMulticlass):
    def observe(self, x, mu, y):
        return [mu[0] >= 2] if y == 1 else super().observe(x, mu, y)


def test_observe_contradicting_bounds_names_the_example():
    X = [np.ones(2)] * 3
    with pytest.raises(InvalidOutputError, match=r"Y\[2\]: no output of X\[2\].*part 0"):
        LatentSSVM(_Bounds(), random_state=0).fit(X, [0, 0, 1])


def test_label_out_of_range_names_the_example():
    X, Y = xor_data(5, seed=0)
    Y[2] = np.array([2])
    with pytest.raises(InvalidOutputError, match=r"Y\[2\].*label 2 at node 0, out of range"):
        LatentSSVM(LatentGraphLabeling(2), random_state=0).fit(X, Y)


class _HammingEverywhere(LatentMulticlass):
    """The default Hamming loss over all the parts: it depends on the state."""

    loss_coefficients = StructuredModel.loss_coefficients


def test_loss_depending_on_the_latent_part_is_refused():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal(2) for _ in range(4)]
    with pytest.raises(DeclarationError, match=r"depends on the latent part: on X\[0\]"):
        LatentSSVM(_HammingEverywhere(), random_state=0).fit(X, [0, 1, 0, 1])


class _Loose(LatentMulticlass):
    """observe lets every state through: completions may carry another label."""

    def observe(self, x, mu, y):
        return [mu >= 0]


def test_observe_inconsistent_with_label_is_refused():
    rng = np.random.default_rng(0)
    X = [rng.standard_normal(2) for _ in range(4)]
    with pytest.raises(DeclarationError, match=r"The completion of X\[\d\].*has the label"):
        LatentSSVM(_Loose(), random_state=0).fit(X, [0, 1, 0, 1])


class _ObserveFails(LatentMulticlass):
    def observe(self, x, mu, y):
        raise KeyError("no such label")


class _CompleteFails(LatentMulticlass):
    def complete(self, x, scores, y):
        raise ZeroDivisionError("broken completion")


def test_latent_hooks_that_raise_are_named_with_the_example():
    """A latent hook's own exception becomes structlp's error naming the hook and the
    example (observe: DeclarationError; complete: OracleError)."""
    from structlp import OracleError
    rng = np.random.default_rng(0)
    X = [rng.standard_normal(2) for _ in range(4)]
    with pytest.raises(DeclarationError,
                       match=r"_ObserveFails\.observe\(x, mu, y\) raised KeyError on X\[\d\], "
                             r"Y\[\d\]: 'no such label'"):
        LatentSSVM(_ObserveFails(), random_state=0).fit(X, [0, 1, 0, 1])
    with pytest.raises(OracleError,
                       match=r"_CompleteFails\.complete\(x, scores, y\) raised "
                             r"ZeroDivisionError on X\[\d\], Y\[\d\]: broken completion"):
        LatentSSVM(_CompleteFails(), random_state=0).fit(X, [0, 1, 0, 1])


@pytest.mark.parametrize("bad", ["frank_wolfe", GraphLabeling, GraphLabeling(2), object()])
def test_learner_of_a_wrong_type_is_refused(bad):
    X, Y = xor_data(5, seed=0)
    with pytest.raises(InvalidParameterError, match="The 'learner' parameter of LatentSSVM"):
        LatentSSVM(LatentGraphLabeling(2), learner=bad).fit(X, Y)


def test_sharded_learner_is_refused():
    from structlp import ShardedFrankWolfeLearner
    X, Y = xor_data(5, seed=0)
    with pytest.raises(InvalidParameterError, match="ShardedFrankWolfeLearner"):
        LatentSSVM(LatentGraphLabeling(2), learner=ShardedFrankWolfeLearner).fit(X, Y)


def test_model_without_latent_hooks_is_refused():
    X, Y = xor_data(5, seed=0)
    with pytest.raises(DeclarationError, match=r"not a latent model.*observe\(x, mu, y\)"):
        LatentSSVM(GraphLabeling(2)).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="n_init"):
        LatentSSVM(LatentGraphLabeling(2), n_init=0).fit(X, Y)


def test_model_parameters_are_checked():
    with pytest.raises(InvalidParameterError, match="n_states_per_label"):
        LatentGraphLabeling(2, n_states_per_label=[1, 2, 3]).state_labels()
    with pytest.raises(InvalidParameterError, match="n_states_per_label"):
        LatentGraphLabeling(1, n_states_per_label=1).state_labels()
    x = node_example([1.0, 2.0])
    x["n_hidden"] = 1
    with pytest.raises(structlp.InvalidInputError, match="n_hidden"):
        LatentGraphLabeling(2).check_x(x)


def test_predict_before_fit_and_score():
    X, Y = xor_data(20, seed=0)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    with pytest.raises(structlp.NotFittedError):
        LatentSSVM(model).predict(X)
    clf = LatentSSVM(model, C=10.0, n_init=3, random_state=0).fit(X, Y)
    err = np.mean([p[0] != y[0] for p, y in zip(clf.predict(X), Y)])
    assert clf.loss(X, Y) == pytest.approx(err)
    assert clf.score(X, Y) == pytest.approx(-err)
    H = clf.complete(X, Y)
    assert all(model.label(model.check_x(x), h)[0] == y[0] for x, h, y in zip(X, H, Y))


# ---------------------------------------------------------------- init and the edgeless oracle
def test_init_starts_the_first_restart_and_is_checked():
    X, Y = xor_data(40, seed=2)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    # the clusters themselves as the initial states: CCCP starts at a good point
    pts = np.array([x["node_features"][0, :2] for x in X])
    quad = np.where(Y_flat(Y) == 0, (pts[:, 0] < 0).astype(int), 2 + (pts[:, 0] < 0))
    init = [np.array([q]) for q in quad]
    clf = LatentSSVM(model, C=10.0, random_state=0).fit(X, Y, init=init)
    assert np.mean([p[0] == y[0] for p, y in zip(clf.predict(X), Y)]) == 1.0
    bad = list(init)
    bad[2] = np.array([3 - 2 * int(Y[2][0])])       # a state of the other label
    with pytest.raises(InvalidOutputError, match=r"init\[2\] has the label \[\d\], not Y\[2\]"):
        LatentSSVM(model, random_state=0).fit(X, Y, init=bad)
    with pytest.raises(structlp.InvalidInputError, match="init must have one output per"):
        LatentSSVM(model, random_state=0).fit(X, Y, init=init[:3])


def Y_flat(Y):
    return np.array([int(y[0]) for y in Y])


def test_edgeless_oracle_is_the_best_state_of_each_node():
    model = LatentGraphLabeling(n_labels=3, n_states_per_label=[1, 2, 2])
    rng = np.random.default_rng(5)
    x = model.check_x({"node_features": rng.standard_normal((3, 2)),
                       "edges": np.zeros((0, 2), int), "edge_features": np.zeros((0, 0))})
    for _ in range(5):
        s = rng.standard_normal(model.n_parts(x))
        mu = model.inference_parts(x, s)
        best = max(float(s @ m) for _, m in all_outputs(model, x))
        assert float(s @ mu) == pytest.approx(best, abs=1e-12)
        y = rng.integers(3, size=3)
        assert float(s @ model.complete(x, s, y)) == pytest.approx(
            brute_completion(model, x, s, y), abs=1e-12)


@pytest.mark.parametrize("name", ["structlp.latent.cccp", "structlp.latent.models"])
def test_docstring_examples(name):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------- persistence
def test_save_and_load_in_a_fresh_process(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    X, Y = xor_data(30, seed=3)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    fitted = LatentSSVM(model, C=3.0, random_state=0).fit(X, Y)
    path = tmp_path / "latent.structlp"
    structlp.save(fitted, path)
    np.save(tmp_path / "pred.npy", np.array([np.asarray(p) for p in fitted.predict(X)]))
    import pickle
    with open(tmp_path / "X.pkl", "wb") as f:
        pickle.dump(X, f)
    code = (
        "import pickle, sys, numpy as np, structlp\n"
        f"d = {str(tmp_path)!r}\n"
        "est = structlp.load(d + '/latent.structlp')\n"
        "X = pickle.load(open(d + '/X.pkl', 'rb'))\n"
        "want = np.load(d + '/pred.npy')\n"
        "got = np.array([np.asarray(p) for p in est.predict(X)])\n"
        "print(type(est).__name__, np.array_equal(got, want))\n")
    root = str(Path(structlp.__file__).resolve().parent.parent)
    env = {**__import__("os").environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["LatentSSVM", "True"]
