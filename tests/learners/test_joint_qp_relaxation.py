"""MaxMarginLearner on declared polytopes: a non-integral one is detected and reported (the
relaxation is trained, never silently), and a flow model bounded only through its constraints
trains to the optimum found by enumerating its outputs."""

import itertools
import warnings

import cvxpy as cp
import numpy as np
import pytest

from structlp import MaxMarginLearner, RelaxationWarning, StructuredModel

# two triangles: the matchings of an odd cycle, whose degree polytope is not integral
TRIANGLES = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)]


def _is_matching(m):
    return all(sum(m[k] for k, e in enumerate(TRIANGLES) if v in e) <= 1 for v in range(6))


MATCHINGS = [np.array(m, float) for m in itertools.product([0, 1], repeat=6) if _is_matching(m)]


class TriangleMatching(StructuredModel):
    """Matchings of two triangles declared by the degree constraints (not integral)."""

    def n_parts(self, x):
        return len(TRIANGLES)

    def features(self, x):
        return x

    def constraints(self, x, mu):
        return [mu >= 0, mu <= 1] + [sum(mu[k] for k, e in enumerate(TRIANGLES) if v in e) <= 1
                                     for v in range(6)]

    def polytope_key(self, x):
        return 0


class TriangleMatchingWithDecoder(TriangleMatching):
    """The same polytope with an exact decoder (enumeration) as its inference hook."""

    def inference(self, x, scores):
        return MATCHINGS[int(np.argmax([scores @ m for m in MATCHINGS]))]


class TriangleMatchingDecliningHook(TriangleMatching):
    """An inference hook that always declines (None: use the inference LP)."""

    def inference(self, x, scores):
        return None


# a DAG from 0 to 3; an output is a set of arcs containing a path from 0 to 3, declared by a
# unit flow f <= mu: f has no explicit upper bound (it is bounded through f <= mu <= 1)
ARCS = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]


def _has_path(m):
    reach, grew = {0}, True
    while grew:
        new = {h for (t, h), on in zip(ARCS, m) if on and t in reach}
        grew = not new <= reach
        reach |= new
    return 3 in reach


PATH_SETS = [np.array(m, float) for m in itertools.product([0, 1], repeat=len(ARCS))
             if _has_path(m)]


class FlowPaths(StructuredModel):
    def n_parts(self, x):
        return len(ARCS)

    def features(self, x):
        return x

    def constraints(self, x, mu):
        f = cp.Variable(len(ARCS), name="f")
        cons = [mu >= 0, mu <= 1, f >= 0, f <= mu]
        for v in range(4):
            out = sum(f[k] for k, (t, _) in enumerate(ARCS) if t == v)
            inc = sum(f[k] for k, (_, h) in enumerate(ARCS) if h == v)
            cons.append(out - inc == (v == 0) - (v == 3))
        return cons

    def polytope_key(self, x):
        return 0


def enumerated_optimum(X, Y, C, outputs):
    """The max-margin objective with the hinge as a max over the enumerated outputs."""
    d = X[0].shape[1]
    w, xi = cp.Variable(d), cp.Variable(len(X))
    O = np.array(outputs)
    cons = [xi[i] >= ((O - y) @ x) @ w + y.sum() - O @ y for i, (x, y) in enumerate(zip(X, Y))]
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi)), cons)
    problem.solve(solver="CLARABEL")
    return problem.value


def exact_hinges(X, Y, w, outputs):
    return np.array([max((x @ w) @ (o - y) + y.sum() - y @ o for o in outputs)
                     for x, y in zip(X, Y)])


def planted(outputs, n, d, seed, noise=0.3, shift=0.8):
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=d) + 0.5
    X = [rng.normal(size=(len(outputs[0]), d)) + shift for _ in range(n)]
    Y = []
    for x in X:
        s = x @ w0 + rng.normal(scale=noise, size=len(outputs[0]))
        Y.append(outputs[int(np.argmax([s @ o for o in outputs]))])
    return X, Y


@pytest.mark.parametrize("model_cls", [TriangleMatching, TriangleMatchingWithDecoder,
                                       TriangleMatchingDecliningHook])
@pytest.mark.parametrize("dual", [False, True])
def test_non_integral_polytope_is_reported_as_a_relaxation(model_cls, dual):
    X, Y = planted(MATCHINGS, 30, 3, seed=0)
    C = 10.0
    true_optimum = enumerated_optimum(X, Y, C, MATCHINGS)
    with pytest.warns(RelaxationWarning, match="LP relaxation of .*TriangleMatching") as rec:
        learner = MaxMarginLearner(model_cls(), C=C, dual=dual).fit(X, Y)
    assert rec[0].filename == __file__           # the warning points at the fit call
    v = learner.verification_
    assert v["ok"] is False
    # the relaxation's optimum is above the optimum over the outputs
    assert learner.objective_ > true_optimum * (1 + 1e-3)
    # recomputed: the exact objective of coef_ (enumeration), between the two optima
    w = learner.coef_
    hinge = exact_hinges(X, Y, w, MATCHINGS)
    assert v["recomputed"] == pytest.approx(0.5 * w @ w + C * hinge.sum(), rel=1e-6)
    assert true_optimum * (1 - 1e-6) <= v["recomputed"] < learner.objective_
    # the examples named are those whose relaxed hinge exceeds the enumerated one
    flagged = v["relaxation"]["examples"]
    assert flagged and set(flagged) == set(np.flatnonzero(learner.slack_ - hinge > 1e-4))
    np.testing.assert_allclose(v["relaxation"]["exact_hinge"], hinge[flagged], atol=1e-6)
    np.testing.assert_allclose(v["relaxation"]["relaxed_hinge"], learner.slack_[flagged],
                               atol=1e-5)


def test_integral_declared_polytope_without_decoder_is_verified():
    """The inference LP of an integral polytope is integral at the optimum: no warning, and
    the objective recomputed with the exact hinge (formerly None for LP-oracle models)."""
    X, Y = planted(PATH_SETS, 20, 3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RelaxationWarning)
        learner = MaxMarginLearner(FlowPaths(), C=1.0).fit(X, Y)
    v = learner.verification_
    assert v["ok"] and v["relaxation"] is None
    assert v["recomputed"] == pytest.approx(learner.objective_, rel=1e-6)


@pytest.mark.parametrize("dual", [False, True])
def test_flow_model_bounded_through_its_constraints_trains_to_the_enumerated_optimum(dual):
    X, Y = planted(PATH_SETS, 20, 3, seed=2)
    C = 1.0
    learner = MaxMarginLearner(FlowPaths(), C=C, dual=dual).fit(X, Y)
    assert learner.objective_ == pytest.approx(enumerated_optimum(X, Y, C, PATH_SETS), rel=1e-5)
    assert learner.verification_["ok"]
    w = learner.coef_
    np.testing.assert_allclose(learner.slack_, exact_hinges(X, Y, w, PATH_SETS), atol=1e-5)
