"""MaxMarginLearner on bipartite matchings: fits, slacks, solvers, estimator contract."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from oracles import brute_force_hinge, enumerate_bmatchings
from structlp import MaxMarginLearner, NotFittedError
from structlp.structures import BipartiteMatching


def planted_assignments(rng, m, n_rows, n_cols, d, R=1, P=1):
    """Random edge features and the outputs a planted w0 picks (separable data)."""
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n_rows, n_cols, d)) for _ in range(m)]
    outputs = enumerate_bmatchings(n_rows, n_cols, R, P) if (R, P) != (1, 1) else None
    Y = []
    for x in X:
        S = x @ w0
        if outputs is None:
            r, c = linear_sum_assignment(S, maximize=True)
            y = np.zeros((n_rows, n_cols), dtype=int)
            y[r, c] = 1
        else:
            y = outputs[int(np.argmax([np.sum(S * o) for o in outputs]))]
        Y.append(y)
    return X, Y, w0


@pytest.mark.parametrize("R, P", [(1, 1), (2, 2)])
def test_separable_fit_reproduces_training_outputs(R, P, rng):
    X, Y, _ = planted_assignments(rng, 12, 4, 3, 4, R, P)
    learner = MaxMarginLearner(BipartiteMatching(R=R, P=P), C=100.0)
    assert learner.fit(X, Y) is learner
    for y, p in zip(Y, learner.predict(X)):
        np.testing.assert_array_equal(p, y)
    assert learner.loss(X, Y) == 0.0 and learner.score(X, Y) == 0.0


@pytest.mark.parametrize("R, P", [(1, 1), (2, 3)])
def test_slack_equals_hinge_recomputed_by_enumeration(R, P, rng):
    X, Y, _ = planted_assignments(rng, 10, 4, 3, 3, R, P)
    # flip some outputs so that the data are not separable
    outputs = enumerate_bmatchings(4, 3, R, P)
    Y = [outputs[rng.integers(len(outputs))] if i % 3 == 0 else y for i, y in enumerate(Y)]
    model = BipartiteMatching(R=R, P=P)
    learner = MaxMarginLearner(model, C=2.0).fit(X, Y)
    w = learner.coef_
    enum = [brute_force_hinge(x, y, w, outputs, lambda o, x=x, y=y: model.task_loss(x, y, o))
            for x, y in zip(X, Y)]
    np.testing.assert_allclose(learner.slack_, enum, rtol=1e-6, atol=1e-6)
    assert np.max(enum) > 0.1  # non-trivial slacks
    # objective = 1/2 |w|^2 + C sum(xi), recomputed from the enumerated hinge
    np.testing.assert_allclose(learner.objective_, 0.5 * w @ w + 2.0 * np.sum(enum), rtol=1e-6)
    np.testing.assert_allclose(learner.hinge_losses(X, Y), enum, rtol=1e-6, atol=1e-6)


def test_every_solver_reaches_the_same_objective(solver, rng):
    name, opts, tol = solver
    X, Y, _ = planted_assignments(rng, 15, 5, 5, 4)
    Y = [y if i % 4 else y[::-1] for i, y in enumerate(Y)]  # some noise
    ref = MaxMarginLearner(BipartiteMatching(), C=1.0, solver="CLARABEL").fit(X, Y)
    got = MaxMarginLearner(BipartiteMatching(), C=1.0, solver=name, solver_opts=opts).fit(X, Y)
    assert got.solver_ == name
    assert abs(got.objective_ - ref.objective_) <= max(tol, 1e-6) * abs(ref.objective_)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=100 * tol * np.abs(ref.coef_).max())


def test_fitted_attributes_and_problem(rng):
    X, Y, _ = planted_assignments(rng, 6, 4, 4, 3)
    learner = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    assert learner.coef_.shape == (3,)
    assert learner.slack_.shape == (6,)
    assert learner.solver_ == "CLARABEL"
    assert learner.problem_.status == "optimal"
    assert np.isclose(learner.problem_.value, learner.objective_)
    assert learner.n_features_in_ == 3
    assert set(learner.fit_time_) == {"prepare", "build", "solve", "canonicalize", "solver",
                                      "verify", "total"}


def test_weighted_hamming_changes_the_program(rng):
    X, Y, _ = planted_assignments(rng, 8, 4, 4, 3)
    Y = [y[::-1] if i % 2 else y for i, y in enumerate(Y)]
    plain = MaxMarginLearner(BipartiteMatching(), C=1.0).fit(X, Y)
    heavy = MaxMarginLearner(BipartiteMatching(edge_weights=np.full((4, 4), 3.0)), C=1.0).fit(X, Y)
    # tripling the loss of every edge is not a rescaling of w: objectives differ
    assert heavy.objective_ > plain.objective_ + 1e-3


def test_estimator_contract():
    model = BipartiteMatching()
    learner = MaxMarginLearner(model, C=3.0, solver="ECOS")
    assert learner.get_params() == {"C": 3.0, "formulation": "minmax", "model": model,
                                    "solver": "ECOS", "solver_opts": None, "dual": False,
                                    "kernel": "linear", "gamma": None, "degree": 3,
                                    "coef0": 1.0, "kernel_tol": 1e-8, "max_rank": None,
                                    "slack": None, "verbose": 0}
    assert learner.set_params(C=0.5) is learner and learner.C == 0.5
    assert not hasattr(learner, "coef_")
    with pytest.raises(NotFittedError, match="not fitted"):
        learner.predict([np.zeros((2, 2, 3))])
    with pytest.raises(ValueError, match="Invalid parameter 'alpha'"):
        learner.set_params(alpha=1.0)
    assert "MaxMarginLearner(" in repr(learner)


def test_predict_on_new_shapes_and_general_degrees(rng):
    X, Y, w0 = planted_assignments(rng, 10, 4, 3, 3, 2, 2)
    learner = MaxMarginLearner(BipartiteMatching(R=2, P=2), C=100.0).fit(X, Y)
    Xn, Yn, _ = planted_assignments(np.random.default_rng(1), 3, 4, 3, 3, 2, 2)
    pred = learner.predict(Xn)
    outputs = enumerate_bmatchings(4, 3, 2, 2)
    for x, p in zip(Xn, pred):
        S = x @ learner.coef_
        best = outputs[int(np.argmax([np.sum(S * o) for o in outputs]))]
        np.testing.assert_array_equal(p, best)


# ------------------------------------------------------------------ verified solves
def noisy_assignments(rng, m=10, n=4, d=3):
    X, Y, _ = planted_assignments(rng, m, n, n, d)
    for i in range(0, m, 3):   # flip some outputs: slacks are non-zero
        Y[i] = Y[i][rng.permutation(n)]
    return X, Y


@pytest.mark.parametrize("dual", [False, True])
def test_verification_recomputes_the_objective_by_exact_inference(dual, rng):
    """With a tight solver the objective recomputed from the solution with the exact hinge
    (an independent oracle: the Hungarian algorithm) equals objective_."""
    import warnings
    from structlp import ConvergenceWarning
    X, Y = noisy_assignments(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = MaxMarginLearner(BipartiteMatching(), C=2.0, dual=dual).fit(X, Y)
    v = fit.verification_
    assert v["ok"] and v["violation"] < 1e-6
    assert v["recomputed"] == pytest.approx(fit.objective_, rel=1e-6)
    w = fit.coef_
    assert v["recomputed"] == pytest.approx(0.5 * w @ w + 2.0 * fit.hinge_losses(X, Y).sum(),
                                            rel=1e-6)


@pytest.mark.parametrize("solver, opts", [("SCS", {"eps": 0.1}),
                                          ("OSQP", {"eps_abs": 0.1, "eps_rel": 0.1})])
@pytest.mark.parametrize("dual", [False, True])
def test_loose_solver_tolerances_are_caught(solver, opts, dual, rng):
    from structlp import ConvergenceWarning, installed_solvers
    if solver not in installed_solvers():
        pytest.skip(f"{solver} is not installed")
    X, Y = noisy_assignments(rng, m=12)
    with pytest.warns(ConvergenceWarning, match=rf"Solver {solver} reported 'optimal'.*"
                                                r"Tighten them in solver_opts"):
        fit = MaxMarginLearner(BipartiteMatching(), solver=solver, solver_opts=opts,
                               dual=dual).fit(X, Y)
    assert not fit.verification_["ok"]
    exact = MaxMarginLearner(BipartiteMatching(), dual=dual).fit(X, Y).objective_
    # the recomputed objective is a true upper bound of the optimum, the reported one is not
    assert fit.verification_["recomputed"] >= exact * (1 - 1e-6)


@pytest.mark.parametrize("C, scale", [(1e300, 1.0), (1.0, 1e300), (1e12, 1.0)])
def test_badly_scaled_qp_says_so(C, scale, rng):
    from structlp import InvalidInputError, SolverError
    X, Y = noisy_assignments(rng)
    if scale > 1e150:      # features whose squares overflow: refused before the QP
        with pytest.raises(InvalidInputError, match=r"features of X\[0\] are too large"):
            MaxMarginLearner(BipartiteMatching(), C=C).fit([x * scale for x in X], Y)
        return
    with pytest.raises(SolverError, match=r"badly scaled \(C = .*largest \|feature\|.*rescale"):
        MaxMarginLearner(BipartiteMatching(), C=C).fit([x * scale for x in X], Y)


def test_hinge_losses_checks_the_feature_dimension(rng):
    from structlp import InvalidInputError
    X, Y = noisy_assignments(rng)
    fit = MaxMarginLearner(BipartiteMatching()).fit(X, Y)
    with pytest.raises(InvalidInputError, match="4 features per part.*fitted with 3"):
        fit.hinge_losses([np.concatenate([x, x[..., :1]], axis=-1) for x in X], Y)


# ------------------------------------------------------------------ C as a Parameter
@pytest.mark.parametrize("dual", [False, True])
def test_refit_with_new_C_reuses_the_compiled_qp(dual, rng):
    import pickle
    X, Y = noisy_assignments(rng)
    fit = MaxMarginLearner(BipartiteMatching(), C=1.0, dual=dual).fit(X, Y)
    assert not fit.reused_compiled_
    problem = fit.problem_
    for C in (0.3, 5.0):
        fit.set_params(C=C).fit(X, Y)
        assert fit.reused_compiled_ and fit.problem_ is problem
        fresh = MaxMarginLearner(BipartiteMatching(), C=C, dual=dual).fit(X, Y)
        assert fit.objective_ == pytest.approx(fresh.objective_, rel=1e-7)
        np.testing.assert_allclose(fit.slack_, fresh.slack_, atol=1e-6)
        if not dual:
            np.testing.assert_allclose(fit.coef_, fresh.coef_, atol=1e-6)
    # same content in new objects: reused; content changed in place: recompiled
    fit.fit([x.copy() for x in X], [y.copy() for y in Y])
    assert fit.reused_compiled_
    X[0][0, 0, 0] += 1.0
    fit.fit(X, Y)
    assert not fit.reused_compiled_ and fit.problem_ is not problem
    fit.set_params(formulation="certificate").fit(X, Y)
    assert not fit.reused_compiled_
    # the compiled problem never travels in a pickle
    state = pickle.loads(pickle.dumps(fit)).__dict__
    assert "_compiled" not in state and "problem_" not in state


def test_verbose_logs_compile_and_solve(rng, caplog):
    import logging
    X, Y = noisy_assignments(rng)
    with caplog.at_level(logging.INFO, logger="structlp"):
        fit = MaxMarginLearner(BipartiteMatching(), verbose=1).fit(X, Y)
        fit.set_params(C=2.0).fit(X, Y)
    text = caplog.text
    assert "MaxMarginLearner: compiled the QP of 10 examples" in text
    assert "solved the training QP with CLARABEL" in text
    assert "reused the compiled QP" in text
    with pytest.raises(Exception, match="'verbose'"):
        MaxMarginLearner(BipartiteMatching(), verbose=-1).fit(X, Y)
