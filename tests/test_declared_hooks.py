"""A declared model's hooks are honoured or refused, never bypassed (issue 37).

* an overridden ``loss`` on a built-in structure is the loss every learner trains with
  (checked against the optimum of the max-margin QP over the enumerated outputs);
* a user loss non-zero at the truth, negative somewhere, or disagreeing with its own
  ``loss_coefficients`` is a DeclarationError;
* a user decoder that does not maximize its scores, or returns an output outside the
  declared polytope, is an OracleError naming the example and the hook, in every learner
  and in ``predict``; structlp's own decoders are never checked;
* the errors of a bad training set name the example, the hook or the argument.
"""

import itertools
import warnings

import cvxpy as cp
import numpy as np
import pytest

import structlp
from oracles import ChooseK, ChooseKDecoded, enumerated_qp
from structlp import (CuttingPlaneLearner, DeclarationError, FrankWolfeLearner,
                      InvalidInputError, InvalidOutputError, MaxMarginLearner, OracleError,
                      StructuredModel, SubgradientLearner)
from structlp.model import FIRST_CHECKS
from structlp.model import StructuredModel as _Base
from structlp.structures import BipartiteMatching

# ---------------------------------------------------------------- a ranking loss


class NDCGRanking(BipartiteMatching):
    """Items (rows) to positions (columns); the loss is 1 - NDCG with linear gains, the
    relevance of an item being the gain of its true position: affine in the assignment,
    0 at the truth (the ideal ranking) and >= 0 elsewhere (rearrangement), not Hamming."""

    def loss(self, x, y_true, mu):
        n = x.shape[0]
        gain = np.arange(n, 0, -1, dtype=float)            # position j: n - j
        disc = 1.0 / np.log2(np.arange(n) + 2.0)
        rel = np.asarray(y_true, dtype=float) @ gain       # item r: the gain of its position
        return 1.0 - (np.outer(rel, disc).ravel() @ mu) / float(gain @ disc)


def ndcg_loss(y_true, y):
    """1 - NDCG computed directly from the two permutation matrices (the oracle)."""
    n = y_true.shape[0]
    gain = np.arange(n, 0, -1, dtype=float)
    disc = 1.0 / np.log2(np.arange(n) + 2.0)
    rel = y_true @ gain
    dcg = sum(rel[r] * disc[j] for r, j in zip(*np.nonzero(y)))
    return 1.0 - dcg / float(gain @ disc)


def permutations(n):
    return [np.eye(n, dtype=int)[list(p)] for p in itertools.permutations(range(n))]


def ranking_data(rng, m=6, n=3, d=2):
    X = [rng.normal(size=(n, n, d)) for _ in range(m)]
    Y = [permutations(n)[k] for k in rng.integers(0, 6, size=m)]   # noisy: not separable
    return X, Y


def enumerated_objective(X, Y, w, C, loss):
    """``1/2 |w|^2 + C sum_i max_y [w.f_i(y) + loss_i(y) - w.f_i(y_i)]`` by enumeration."""
    total = 0.0
    for x, yt in zip(X, Y):
        S = x @ w
        total += max(float(np.sum(S * y)) + loss(yt, y) for y in permutations(x.shape[0])) \
            - float(np.sum(S * yt))
    return 0.5 * float(w @ w) + C * total


def enumerated_optimum(X, Y, C, loss):
    outs = permutations(X[0].shape[0])
    return enumerated_qp([x.reshape(-1, x.shape[2]) for x in X], [y.ravel() for y in Y],
                         [np.array([o.ravel() for o in outs])] * len(X),
                         [np.array([loss(y, o) for o in outs]) for y in Y], C)


def test_overridden_loss_of_a_builtin_is_read(rng):
    X, Y = ranking_data(rng)
    model = NDCGRanking()
    for x, y in zip(X, Y):
        for o in permutations(3):
            assert np.isclose(model.task_loss(x, y, o), ndcg_loss(y, o), atol=1e-12)
    c, _ = model.loss_coefficients(X[0], Y[0])
    assert not np.allclose(c, -Y[0].ravel())                       # not Hamming


@pytest.mark.parametrize("make", [
    lambda: MaxMarginLearner(NDCGRanking(), C=1.0),
    lambda: MaxMarginLearner(NDCGRanking(), C=1.0, formulation="certificate"),
    lambda: FrankWolfeLearner(NDCGRanking(), C=1.0, tol=1e-7, max_iter=5000, random_state=0),
    lambda: CuttingPlaneLearner(NDCGRanking(), C=1.0, tol=1e-7),
    lambda: CuttingPlaneLearner(NDCGRanking(), C=1.0, tol=1e-7, one_slack=False),
], ids=["joint-qp", "certificate", "frank-wolfe", "cutting-plane", "n-slack"])
def test_every_learner_trains_with_the_overridden_loss(rng, make):
    X, Y = ranking_data(rng)
    C = 1.0
    best = enumerated_optimum(X, Y, C, ndcg_loss)
    hamming = enumerated_optimum(X, Y, C, lambda yt, y: float(np.sum(yt * (1 - y))))
    assert abs(best - hamming) > 0.1 * best          # the two losses train differently
    est = make().fit(X, Y)
    at_w = enumerated_objective(X, Y, est.coef_, C, ndcg_loss)
    assert at_w == pytest.approx(best, rel=1e-5, abs=1e-7)
    assert est.objective_ == pytest.approx(best, rel=1e-5, abs=1e-7)
    want = np.mean([ndcg_loss(y, p) for y, p in zip(Y, est.predict(X))])
    assert est.loss(X, Y) == pytest.approx(want, abs=1e-12)


def test_overridden_inference_of_a_builtin_is_called(rng):
    """An ``inference`` overridden below BipartiteMatching.inference_parts is the oracle
    of the first-order learners (it was bypassed): a count of its calls, and the fit
    equals the built-in's (the override is the same Hungarian algorithm)."""

    class Counted(BipartiteMatching):
        calls = 0

        def inference(self, x, scores):
            type(self).calls += 1
            return super().inference(x, scores)

    X, Y = ranking_data(rng)
    ours = FrankWolfeLearner(Counted(), C=1.0, max_iter=20, random_state=0).fit(X, Y)
    assert Counted.calls >= ours.n_oracle_calls_ >= len(X)
    ref = FrankWolfeLearner(BipartiteMatching(), C=1.0, max_iter=20, random_state=0).fit(X, Y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-12)


# ---------------------------------------------------------------- losses refused
FastChooseK = ChooseKDecoded


def choose_data(rng, m=8, n=6, d=3, k=2):
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, d)) for _ in range(m)]
    Y = [FastChooseK(k).inference(x, x @ w0 + 0.5 * rng.normal(size=n)) for x in X]
    return X, Y


def _with_loss(base, loss):
    return type("Declared", (base,), {"loss": lambda self, x, y, mu: loss(np.asarray(y), mu)})


@pytest.mark.parametrize("base", [ChooseK, FastChooseK], ids=["lp", "decoder"])
@pytest.mark.parametrize("learner", [MaxMarginLearner, FrankWolfeLearner, CuttingPlaneLearner])
def test_loss_nonzero_at_the_truth_is_refused(rng, base, learner):
    X, Y = choose_data(rng)
    model = _with_loss(base, lambda y, mu: 1.0 + y.sum() - y @ mu)()    # Hamming + 1
    with pytest.raises(DeclarationError, match=r"loss.*X\[0\].*is 1 at the true output Y\[0\]"):
        learner(model).fit(X, Y)


@pytest.mark.parametrize("base", [ChooseK, FastChooseK], ids=["lp", "decoder"])
@pytest.mark.parametrize("learner", [MaxMarginLearner, FrankWolfeLearner, CuttingPlaneLearner])
def test_negative_loss_is_refused(rng, base, learner):
    X, Y = choose_data(rng)
    # 0 at the truth, -1 for each true item missed: the least loss over the outputs is -2
    model = _with_loss(base, lambda y, mu: -(y.sum() - y @ mu))()
    with pytest.raises(DeclarationError, match=r"loss.*X\[0\].*is negative, -2, at an output"):
        learner(model).fit(X, Y)


def test_loss_negative_only_on_a_later_example_is_refused(rng):
    X, Y = choose_data(rng)

    class Late(FastChooseK):                 # Hamming on X[0], -Hamming from X[1] on
        def loss(self, x, y, mu):
            y = np.asarray(y, dtype=float)
            sign = 1.0 if x is X[0] else -1.0
            return sign * (y.sum() - y @ mu)

    with pytest.raises(DeclarationError, match=r"X\[1\].*negative"):
        MaxMarginLearner(Late()).fit(X, Y)


class BothHooks(FastChooseK):
    """Defines loss and loss_coefficients: Hamming in both, or not (``scale``)."""

    scale = 1.0

    def loss(self, x, y_true, mu):
        y = np.asarray(y_true, dtype=float)
        return y.sum() - y @ mu

    def loss_coefficients(self, x, y_true):
        y = np.asarray(y_true, dtype=float)
        return -self.scale * y, self.scale * float(y.sum())


def test_loss_and_loss_coefficients_must_agree(rng):
    X, Y = choose_data(rng)
    MaxMarginLearner(BothHooks()).fit(X, Y)            # the same loss: accepted
    twice = type("Twice", (BothHooks,), {"scale": 2.0})
    with pytest.raises(DeclarationError, match=r"both loss and loss_coefficients.*disagree on "
                                               r"X\[0\]"):
        MaxMarginLearner(twice()).fit(X, Y)


def test_lowest_hook_wins():
    """The hook defined lowest in the class hierarchy is the one used."""

    class A(BipartiteMatching):
        def loss(self, x, y_true, mu):
            return 0 * mu[0]

    class B(A):
        def loss_coefficients(self, x, y_true):
            return np.zeros(self.n_parts(x)), 0.0

    class C(B):
        def inference(self, x, scores):
            return None

    assert A.loss_coefficients is _Base.loss_coefficients
    assert B.loss_coefficients is not _Base.loss_coefficients
    assert C.inference_parts is _Base.inference_parts
    assert BipartiteMatching.inference_parts is not _Base.inference_parts
    assert A().loss_hook() == "loss" and B().loss_hook() == "loss_coefficients"
    assert BipartiteMatching().loss_hook() is None and BipartiteMatching().decoder_hook() is None
    assert C().decoder_hook() == "inference" and FastChooseK().decoder_hook() == "inference"


# ---------------------------------------------------------------- decoders checked
class IgnoresScores(FastChooseK):
    """Always the first k items, whatever the scores: not a maximizer."""

    def inference(self, x, scores):
        y = np.zeros(len(scores), dtype=int)
        y[:self.k] = 1
        return y


class OneTooMany(FastChooseK):
    """The best k + 1 items: outside the declared polytope (sum(mu) == k)."""

    def inference(self, x, scores):
        y = np.zeros(len(scores), dtype=int)
        y[np.argsort(-scores)[:self.k + 1]] = 1
        return y


def later(bad, after=FIRST_CHECKS):
    """``bad``'s decoder after the first ``after`` calls, the exact one before: a bug the
    fit-time probe of the first examples does not see, left to the per-call checks."""
    def inference(self, x, scores):
        self.calls = getattr(self, "calls", 0) + 1
        base = bad if self.calls > after else bad.__mro__[1]
        return base.inference(self, x, scores)
    return type("Later" + bad.__name__, (bad,), {"inference": inference})


FIRST_ORDER = [
    lambda m: FrankWolfeLearner(m, max_iter=30, random_state=0),
    lambda m: FrankWolfeLearner(m, max_iter=30, batch_size=4, random_state=0),
    lambda m: SubgradientLearner(m, max_iter=30, random_state=0),
    lambda m: CuttingPlaneLearner(m, max_iter=30),
    lambda m: CuttingPlaneLearner(m, max_iter=30, one_slack=False),
]
FIRST_ORDER_IDS = ["fw", "fw-batch", "subgradient", "cutting-plane", "n-slack"]
ALL = FIRST_ORDER + [lambda m: MaxMarginLearner(m)]
ALL_IDS = FIRST_ORDER_IDS + ["joint-qp"]


@pytest.mark.parametrize("make", ALL, ids=ALL_IDS)
def test_decoder_that_ignores_its_scores_is_caught_by_the_probe(rng, make):
    X, Y = choose_data(rng)
    with pytest.raises(OracleError, match=r"IgnoresScores\.inference\(x, scores\) on X\[0\] "
                                          r"returned an output scoring .* for random scores, "
                                          r"where the inference LP .* finds an output scoring"):
        make(IgnoresScores()).fit(X, Y)


@pytest.mark.parametrize("make", ALL, ids=ALL_IDS)
def test_decoder_outside_the_polytope_is_caught_by_the_probe(rng, make):
    X, Y = choose_data(rng)
    with pytest.raises(OracleError, match=r"OneTooMany\.inference\(x, scores\) on X\[0\] is not "
                                          r"a vertex of the declared output polytope"):
        make(OneTooMany()).fit(X, Y)


@pytest.mark.parametrize("make", FIRST_ORDER, ids=FIRST_ORDER_IDS)
def test_decoder_below_the_truth_is_an_oracle_error_in_every_learner(rng, make):
    X, Y = choose_data(rng)
    with pytest.raises(OracleError, match=r"LaterIgnoresScores\.inference\(x, scores\) on "
                                          r"X\[\d+\] returned an output scoring .* less than the "
                                          r"true output Y\[\d+\]"):
        make(later(IgnoresScores)()).fit(X, Y)


@pytest.mark.parametrize("make", FIRST_ORDER, ids=FIRST_ORDER_IDS)
def test_decoder_outside_the_polytope_is_an_oracle_error_in_every_learner(rng, make):
    X, Y = choose_data(rng)
    with pytest.raises(OracleError, match=r"LaterOneTooMany\.inference\(x, scores\) on "
                                          r"X\[\d+\] is not a vertex of the declared output "
                                          r"polytope"):
        make(later(OneTooMany)()).fit(X, Y)


def test_decoder_raising_names_the_example_and_the_hook(rng):
    X, Y = choose_data(rng)

    class Raising(FastChooseK):
        def inference(self, x, scores):
            if x is X[5]:
                raise ValueError("no solution found")
            return super().inference(x, scores)

    with pytest.raises(OracleError, match=r"Raising\.inference\(x, scores\) on X\[5\] raised "
                                          r"ValueError: no solution found"):
        FrankWolfeLearner(Raising(), max_iter=3).fit(X, Y)


def test_predict_checks_the_decoder_output(rng):
    X, Y = choose_data(rng)
    est = MaxMarginLearner(FastChooseK()).fit(X, Y)
    bad = OneTooMany()
    est.model = bad
    with pytest.raises(OracleError, match=r"OneTooMany\.inference\(x, scores\) on X\[0\]"):
        est.predict(X)
    bad.check_inference = False                  # the switch: its outputs are trusted
    assert all(p.sum() == 3 for p in est.predict(X))


def test_maximize_checks_the_decoder_output(rng):
    """structlp.maximize (public exact inference) checks a declared decoder as predict does."""
    X, _ = choose_data(rng)
    scores = [x @ rng.normal(size=x.shape[1]) for x in X[:3]]
    with pytest.raises(OracleError, match=r"OneTooMany\.inference\(x, scores\) on X\[0\]"):
        structlp.maximize(OneTooMany(), X[:3], scores)
    _, mus = structlp.maximize(FastChooseK(), X[:3], scores)
    for s, mu in zip(scores, mus):                     # the sort decoder against enumeration
        best = max(itertools.combinations(range(len(s)), int(mu.sum())),
                   key=lambda c: s[list(c)].sum())
        assert set(np.flatnonzero(mu)) == set(best)
    trusted = type("Trusted", (OneTooMany,), {"check_inference": False})
    assert all(mu.sum() == 3 for mu in structlp.maximize(trusted(), X[:3], scores)[1])


def test_switch_turns_the_checks_off(rng):
    X, Y = choose_data(rng)
    for bad in (IgnoresScores, OneTooMany):
        trusted = type("Trusted", (bad,), {"check_inference": False})
        for make in ALL:                                        # trained as told
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make(trusted()).fit(X, Y)


def test_hinge_losses_check_the_decoder(rng):
    X, Y = choose_data(rng)
    est = FrankWolfeLearner(FastChooseK(), max_iter=100, tol=1e-3, random_state=0).fit(X, Y)
    est.model = later(IgnoresScores)()
    with pytest.raises(OracleError, match=r"IgnoresScores\.inference.*X\[\d+\].*less than"):
        est.hinge_losses(X, Y)


def test_overridden_inference_of_a_builtin_is_checked(rng):
    """A BipartiteMatching subclass whose ``inference`` minimizes the scores: it was
    bypassed by the built-in inference_parts (and trusted); now it is called, and refused."""

    class Worst(BipartiteMatching):
        def inference(self, x, scores):
            return super().inference(x, -scores)

    X, Y = ranking_data(rng)
    with pytest.raises(OracleError, match=r"Worst\.inference\(x, scores\) on X\[\d+\]"):
        FrankWolfeLearner(Worst(), max_iter=30, random_state=0).fit(X, Y)


def test_builtin_decoders_are_not_checked(rng, monkeypatch):
    calls = []
    monkeypatch.setattr(_Base, "check_decoded", lambda *a, **k: calls.append(1))
    X, Y = ranking_data(rng)
    est = FrankWolfeLearner(BipartiteMatching(), max_iter=5, random_state=0).fit(X, Y)
    CuttingPlaneLearner(BipartiteMatching(), max_iter=5).fit(X, Y)
    est.predict(X)
    assert calls == []


# ---------------------------------------------------------------- an extended formulation
class Segment(StructuredModel):
    """A contiguous run of positions (a segment), by an extended formulation: start and
    end indicators, ``mu_j = sum_{i<=j} s_i - sum_{i<j} e_i`` (an interval matrix)."""

    def n_parts(self, x):
        return x.shape[0]

    def features(self, x):
        return x

    def constraints(self, x, mu):
        n = x.shape[0]
        s, e = cp.Variable(n), cp.Variable(n)
        low = np.tril(np.ones((n, n)))
        return [mu == low @ s - (low - np.eye(n)) @ e, cp.sum(s) == 1, cp.sum(e) == 1,
                s >= 0, e >= 0, mu >= 0, mu <= 1]

    def polytope_key(self, x):
        return x.shape[0]

    def inference(self, x, scores):            # the best non-empty segment (Kadane)
        best, arg, run, start = -np.inf, (0, 1), 0.0, 0
        for j, v in enumerate(scores):
            if run <= 0:
                run, start = 0.0, j
            run += v
            if run > best:
                best, arg = run, (start, j + 1)
        y = np.zeros(len(scores), dtype=int)
        y[arg[0]:arg[1]] = 1
        return y


class Gapped(Segment):
    """The best segment and, apart from it, the best position left: a segment with a gap."""

    def inference(self, x, scores):
        y = super().inference(x, scores)
        rest = np.flatnonzero(y == 0)
        far = rest[np.abs(rest - np.flatnonzero(y)[0]) > 1]
        if len(far):
            y[far[np.argmax(np.asarray(scores)[far])]] = 1
        return y


def segment_data(rng, m=6, n=6, d=3):
    w0 = rng.normal(size=d)
    X = [rng.normal(size=(n, d)) for _ in range(m)]
    return X, [Segment().inference(x, x @ w0) for x in X]


def test_segment_model_trains(rng):
    X, Y = segment_data(rng)
    est = FrankWolfeLearner(Segment(), max_iter=50, random_state=0).fit(X, Y)
    assert est.objective_ >= 0


@pytest.mark.parametrize("make", FIRST_ORDER[:1] + FIRST_ORDER[2:4], ids=["fw", "sg", "cp"])
def test_segment_with_a_gap_is_an_oracle_error(rng, make):
    X, Y = segment_data(rng)
    with pytest.raises(OracleError, match=r"LaterGapped\.inference\(x, scores\) on X\[\d+\] is "
                                          r"not an output of the declared extended polytope"):
        make(later(Gapped)()).fit(X, Y)


def test_segment_with_a_gap_in_fit_and_predict(rng):
    X, Y = segment_data(rng)
    with pytest.raises(OracleError, match=r"Gapped\.inference\(x, scores\) on X\[0\] is not an "
                                          r"output of the declared extended polytope"):
        MaxMarginLearner(Gapped()).fit(X, Y)
    est = MaxMarginLearner(Segment()).fit(X, Y)
    est.model = Gapped()
    with pytest.raises(OracleError, match=r"Gapped\.inference\(x, scores\) on X\[\d+\] is not"):
        est.predict(X)


# ---------------------------------------------------------------- errors name the culprit
class Empty(ChooseK):
    pass


def test_example_without_parts_is_named(rng):
    X, Y = choose_data(rng)
    for learner in (MaxMarginLearner, FrankWolfeLearner):
        with pytest.raises(InvalidInputError, match=r"X\[2\] has no parts"):
            learner(Empty()).fit(X[:2] + [np.zeros((0, 3))] + X[2:],
                                 Y[:2] + [np.zeros(0)] + Y[2:])
    est = MaxMarginLearner(ChooseK()).fit(X, Y)
    with pytest.raises(InvalidInputError, match=r"X\[1\] has no parts"):
        est.predict([X[0], np.zeros((0, 3))])


def test_example_without_features_is_named_not_the_next(rng):
    X, Y = choose_data(rng)
    with pytest.raises(InvalidInputError, match=r"X\[0\] has no features"):
        MaxMarginLearner(ChooseK()).fit([np.zeros((6, 0))] + X, Y[:1] + Y)


class RaisingEncode(ChooseK):
    def encode(self, x, y):
        table = {(0, j, 0): float(v) for j, v in enumerate(np.asarray(y)[:-1])}
        return np.array([table[(0, j, 0)] for j in range(len(y))])


def test_exception_in_encode_names_the_example_and_the_hook(rng):
    X, Y = choose_data(rng)
    with pytest.raises(InvalidOutputError, match=r"RaisingEncode\.encode raised KeyError on "
                                                 r"Y\[0\]: \(0, 5, 0\)"):
        MaxMarginLearner(RaisingEncode()).fit(X, Y)


def test_exception_in_features_names_the_example(rng):
    X, Y = choose_data(rng)

    class Raising(ChooseK):
        def features(self, x):
            if x is X[3]:
                raise IndexError("index 9 is out of bounds")
            return x

    with pytest.raises(DeclarationError, match=r"Raising\.features raised IndexError on X\[3\]"):
        FrankWolfeLearner(Raising()).fit(X, Y)


def test_exception_in_loss_names_the_example_and_the_hook(rng):
    X, Y = choose_data(rng)

    class Raising(ChooseK):
        def loss(self, x, y_true, mu):
            if x is X[4]:
                raise ZeroDivisionError("division by zero")
            return np.sum(y_true) - np.asarray(y_true, dtype=float) @ mu

    with pytest.raises(DeclarationError, match=r"Raising\.loss raised ZeroDivisionError on "
                                               r"X\[4\]: division by zero"):
        CuttingPlaneLearner(Raising()).fit(X, Y)


def test_builtin_nan_message_names_the_example(rng):
    X = [rng.normal(size=(3, 3, 2)) for _ in range(3)]
    X[1][0, 0, 0] = np.nan
    Y = [np.eye(3, dtype=int)] * 3
    with pytest.raises(InvalidInputError, match=r"^X\[1\]: x \(edge features\) contains NaN"):
        MaxMarginLearner(BipartiteMatching()).fit(X, Y)
    est = MaxMarginLearner(BipartiteMatching()).fit(X[:1], Y[:1])
    with pytest.raises(InvalidInputError, match=r"^X\[1\]: x \(edge features\) contains NaN"):
        est.predict(X)


def test_wrong_polytope_key_is_named(rng):
    class SameKey(ChooseK):
        def polytope_key(self, x):
            return "one"

    X = [rng.normal(size=(5, 3)), rng.normal(size=(6, 3))]
    Y = [np.array([1, 1, 0, 0, 0]), np.array([0, 1, 1, 0, 0, 0])]
    for learner in (MaxMarginLearner, FrankWolfeLearner, CuttingPlaneLearner):
        with pytest.raises(DeclarationError, match=r"SameKey\.polytope_key gives X\[1\] the key "
                                                   r"'one' of X\[0\]"):
            learner(SameKey()).fit(X, Y)

    class Unhashable(ChooseK):
        def polytope_key(self, x):
            return [x.shape[0]]

    with pytest.raises(DeclarationError, match=r"Unhashable\.polytope_key\(X\[0\]\) must return "
                                               "a hashable value"):
        MaxMarginLearner(Unhashable()).fit(X, Y)


def test_oracle_error_is_public():
    import structlp
    assert "OracleError" in structlp.__all__
    assert issubclass(OracleError, DeclarationError)


# ---------------------------------------------------------------- the sharded learner
def test_sharded_learner_checks_the_decoder(rng):
    """The oracle of each partition (on its dask worker) checks the decoder; an error
    names the partition, the example in it and the hook."""
    distributed = pytest.importorskip("distributed")
    db = pytest.importorskip("dask.bag")
    from structlp import ShardedFrankWolfeLearner
    X, Y = choose_data(rng, m=12)
    bag = db.from_sequence(list(zip(X, Y)), npartitions=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        with pytest.raises(OracleError, match=r"Partition \d of X: IgnoresScores\.inference\(x, "
                                              r"scores\) on X\[0\] .* for random scores"):
            ShardedFrankWolfeLearner(IgnoresScores(), client=client, max_iter=5).fit(bag)
        with pytest.raises(OracleError, match=r"Partition \d of X: LaterIgnoresScores\.inference"
                                              r"\(x, scores\) on X\[\d+\] returned an output "
                                              r"scoring .* less than the true output"):
            ShardedFrankWolfeLearner(later(IgnoresScores)(), client=client,
                                     max_iter=30).fit(bag)
