"""SemiMarkov: segmentations against brute-force enumeration.

Oracles: every segmentation of a short sequence enumerated (compositions of T times
labellings) and scored directly from the weights (no part layout involved); an
independent QP with one constraint per enumerated output (cvxpy); the HiGHS LP over the
flow polytope; the enumerated Gibbs distribution for the log-partition function,
marginals, k-best lists and samples (chi-square).
"""

import itertools

import numpy as np
import pytest
from scipy import stats

import structlp
from oracles import enumerated_qp
from structlp import FrankWolfeLearner, MaxMarginLearner
from structlp.exceptions import InvalidInputError, InvalidOutputError, InvalidParameterError
from structlp.inference import solve_stacked_lp
from structlp.structures import SemiMarkov, check_segments, segment_polytope
from structlp.structures import _semi_markov_dp as dp


def compositions(T, L):
    """Every tuple of segment lengths in 1..L summing to T."""
    if T == 0:
        yield ()
        return
    for l in range(1, min(L, T) + 1):
        for rest in compositions(T - l, L):
            yield (l,) + rest


def segmentations(T, L, K):
    out = []
    for lengths in compositions(T, L):
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        for labels in itertools.product(range(K), repeat=len(lengths)):
            out.append([(int(s), int(e), c) for s, e, c in zip(bounds[:-1], bounds[1:], labels)])
    return out


def direct_score(x, w, y, K, Lmax):
    """The score of the segmentation y read off the weights (W, V, A) directly."""
    d = x.shape[1]
    W = w[:K * d].reshape(K, d)
    V = w[K * d:K * d + K * Lmax].reshape(K, Lmax)
    A = w[K * d + K * Lmax:].reshape(K, K)
    total = sum(W[c] @ x[s:e].sum(0) + V[c, e - s - 1] for s, e, c in y)
    return total + sum(A[a[2], b[2]] for a, b in zip(y[:-1], y[1:]))


def hamming(T, y, z):
    lab = np.zeros((2, T), dtype=int)
    for row, seg in zip(lab, (y, z)):
        for s, e, c in seg:
            row[s:e] = c
    return int((lab[0] != lab[1]).sum())


def make_data(rng, m, T, d, K, Lmax, noise=1.0):
    model = SemiMarkov(K, Lmax)
    X = [rng.normal(size=(T, d)) for _ in range(m)]
    w = rng.normal(size=model.n_features(X[0]))
    Y = [model.inference(x, model.features(x) @ w + noise * rng.normal(size=model.n_parts(x)))
         for x in X]
    return X, Y, model


SIZES = [(1, 1, 2), (3, 2, 2), (5, 3, 2), (4, 4, 3), (5, 1, 3), (6, 2, 1)]


@pytest.mark.parametrize("T, Lmax, K", SIZES)
def test_parts_features_and_loss_equal_the_direct_definitions(T, Lmax, K, rng):
    model = SemiMarkov(K, Lmax)
    x = rng.normal(size=(T, 3))
    w = rng.normal(size=model.n_features(x))
    Phi = model.features(x)
    outs = segmentations(T, Lmax, K)
    truth = outs[int(rng.integers(len(outs)))]
    c, d = model.loss_coefficients(x, truth)
    P = model.polytope(x)
    for y in outs:
        mu = model.encode(x, y)
        assert model.decode(x, mu) == y
        assert P.contains(mu)
        assert mu @ (Phi @ w) == pytest.approx(direct_score(x, w, y, K, Lmax), abs=1e-10)
        assert d + c @ mu == hamming(T, truth, y)
    # the factored operator gives the matrix's numbers
    op = model.feature_operator(x)
    np.testing.assert_allclose(op.toarray(), Phi.toarray(), atol=1e-12)
    mu = rng.random(model.n_parts(x))
    np.testing.assert_allclose(op.scores(w), Phi @ w, atol=1e-12)
    np.testing.assert_allclose(op.joint(mu), Phi.T @ mu, atol=1e-12)
    np.testing.assert_allclose(op.T.dot(mu), Phi.T @ mu, atol=1e-12)     # the matrix spelling
    assert op.shape == Phi.shape and op.T.shape == Phi.shape[::-1]
    for nnz in (0, 1, 3, 2 * model.n_parts(x)):     # the sparse path, repeated indices add
        idx = rng.integers(0, model.n_parts(x), size=nnz)
        vals = rng.normal(size=nnz)
        want = Phi.T @ np.bincount(idx, vals, minlength=model.n_parts(x))
        np.testing.assert_allclose(op.joint_sparse(idx, vals), want, atol=1e-12)


@pytest.mark.parametrize("T, Lmax, K", SIZES)
def test_decoder_and_flow_lp_equal_brute_force(T, Lmax, K, rng):
    model = SemiMarkov(K, Lmax)
    x = rng.normal(size=(T, 2))
    outs = segmentations(T, Lmax, K)
    M = np.array([model.encode(x, y) for y in outs])
    P = model.polytope(x)
    for _ in range(5):
        s = rng.normal(size=model.n_parts(x))
        best = int(np.argmax(M @ s))
        assert model.inference(x, s) == outs[best]
        np.testing.assert_array_equal(model.inference_parts(x, s), M[best])
        parts, value = dp.semi_markov_viterbi(s, T, min(T, Lmax), K)
        assert value == pytest.approx(M[best] @ s, abs=1e-12)
        # the Python fallback (what runs without numba) finds the same output
        p2, v2, finite = dp._sm_viterbi(s, T, min(T, Lmax), K)
        assert finite and sorted(p2) == sorted(parts) and v2 == pytest.approx(value, abs=1e-12)
        lp = solve_stacked_lp([P], [s])[0]             # the flow polytope is integral
        np.testing.assert_allclose(lp, M[best], atol=1e-7)


def test_the_decoder_with_loss_is_loss_augmented_viterbi(rng):
    T, Lmax, K = 6, 3, 2
    model = SemiMarkov(K, Lmax)
    x = rng.normal(size=(T, 2))
    w = rng.normal(size=model.n_features(x))
    outs = segmentations(T, Lmax, K)
    truth = outs[7]
    c, d = model.loss_coefficients(x, truth)
    got = model.inference(x, model.features(x) @ w + c)
    want = max(outs, key=lambda y: direct_score(x, w, y, K, Lmax) + hamming(T, truth, y))
    assert got == want


def _exact_qp(model, X, Y, C):
    T = X[0].shape[0]
    outs = [np.array([model.encode(x, y) for y in segmentations(T, model.max_length,
                                                                model.n_labels)]) for x in X]
    losses = [np.array([hamming(T, yt, y) for y in segmentations(T, model.max_length,
                                                                  model.n_labels)]) for yt in Y]
    mts = [model.encode(x, y) for x, y in zip(X, Y)]
    return enumerated_qp([model.features(x).toarray() for x in X], mts, outs, losses, C)


def test_joint_qp_equals_enumerated_qp_and_frank_wolfe_reaches_it(rng):
    X, Y, model = make_data(rng, m=6, T=5, d=2, K=2, Lmax=3)
    exact = _exact_qp(model, X, Y, C=1.0)
    qp = MaxMarginLearner(model, C=1.0).fit(X, Y)
    np.testing.assert_allclose(qp.objective_, exact, rtol=1e-6)
    fw = FrankWolfeLearner(model, C=1.0, tol=1e-5, max_iter=5000, random_state=0).fit(X, Y)
    assert fw.converged_
    assert exact * (1 - 1e-6) <= fw.objective_ <= exact + fw.duality_gap_ + 1e-7
    for a, b in zip(qp.predict(X), X):
        check_segments(a, b.shape[0], 2, 3)


def test_log_partition_and_marginals_equal_enumeration(rng):
    for T, Lmax, K in SIZES:
        model = SemiMarkov(K, Lmax)
        x = rng.normal(size=(T, 2))
        M = np.array([model.encode(x, y) for y in segmentations(T, Lmax, K)])
        s = 2.0 * rng.normal(size=model.n_parts(x))
        v = M @ s
        p = np.exp(v - v.max())
        logz, mu = model.log_partition(x, s)
        assert logz == pytest.approx(np.log(p.sum()) + v.max(), abs=1e-9)
        np.testing.assert_allclose(mu, (p / p.sum()) @ M, atol=1e-9)
        mu2, logz2, _ = dp._sm_marginals(s, T, min(T, Lmax), K)        # Python fallback
        np.testing.assert_allclose(mu2, mu, atol=1e-12)


def test_k_best_equals_the_enumerated_top_k(rng):
    for T, Lmax, K in SIZES:
        model = SemiMarkov(K, Lmax)
        x = rng.normal(size=(T, 2))
        outs = segmentations(T, Lmax, K)
        M = np.array([model.encode(x, y) for y in outs])
        s = rng.normal(size=model.n_parts(x))
        want = np.sort(M @ s)[::-1]
        for k in (1, 3, len(outs) + 2):
            got, values = model.k_best(x, s, k)
            assert len(got) == min(k, len(outs))
            scores = np.array([model.score(x, s, y) for y in got])
            np.testing.assert_allclose(scores, want[:len(got)], atol=1e-9)
            np.testing.assert_allclose(values, scores, atol=1e-12)
            assert len({tuple(y) for y in got}) == len(got)          # distinct outputs
    # ties: all outputs score 0, any order, each once
    got, _ = model.k_best(x, np.zeros(model.n_parts(x)), 4)
    assert len({tuple(y) for y in got}) == 4


def test_samples_follow_the_enumerated_distribution(rng):
    T, Lmax, K = 4, 2, 2
    model = SemiMarkov(K, Lmax)
    x = rng.normal(size=(T, 2))
    outs = segmentations(T, Lmax, K)
    index = {tuple(y): i for i, y in enumerate(outs)}
    s = rng.normal(size=model.n_parts(x))
    v = np.array([model.score(x, s, y) for y in outs])
    p = np.exp(v - v.max())
    p /= p.sum()
    n = 20000
    samples = model.sample(x, s, n, np.random.default_rng(0))
    counts = np.bincount([index[tuple(y)] for y in samples], minlength=len(outs))
    assert stats.chisquare(counts, n * p).pvalue > 1e-3
    # a wrong distribution (uniform) is rejected by the same test
    assert stats.chisquare(counts, np.full(len(outs), n / len(outs))).pvalue < 1e-6
    # the Python fallback draws the same samples from the same uniforms
    U = np.random.default_rng(1).random((50, 2 * T + 1))
    np.testing.assert_array_equal(dp._sm_sample(s, T, Lmax, K, U),
                                  dp._compiled(dp._sm_sample)(s, T, Lmax, K, U))


def test_the_public_inference_functions_use_the_hooks(rng):
    from structlp.inference import k_best, log_partition, marginals, sample
    model = SemiMarkov(2, 2)
    x = rng.normal(size=(4, 1))
    s = rng.normal(size=model.n_parts(x))
    outs = segmentations(4, 2, 2)
    v = np.array([model.score(x, s, y) for y in outs])
    logz, mu = log_partition(model, x, s)
    assert logz == pytest.approx(np.log(np.exp(v).sum()), abs=1e-9)
    np.testing.assert_array_equal(marginals(model, x, s), mu)
    Y, values = k_best(model, x, s, 3)
    assert Y[0] == outs[int(np.argmax(v))]
    np.testing.assert_allclose(values, np.sort(v)[::-1][:3], atol=1e-9)
    ys = sample(model, x, s, n=5, random_state=0)
    assert len(ys) == 5 and all(tuple(y) in {tuple(o) for o in outs} for y in ys)


def test_saved_and_loaded_learner_predicts_the_same(rng, tmp_path):
    X, Y, model = make_data(rng, m=5, T=6, d=3, K=3, Lmax=3)
    est = FrankWolfeLearner(model, C=1.0, tol=1e-3, random_state=0).fit(X, Y)
    structlp.save(est, tmp_path / "sm.structlp")
    loaded = structlp.load(tmp_path / "sm.structlp")
    assert type(loaded.model) is SemiMarkov
    assert (loaded.model.n_labels, loaded.model.max_length) == (3, 3)
    np.testing.assert_array_equal(loaded.coef_, est.coef_)
    assert loaded.predict(X) == est.predict(X)
    # a file whose max_length the weights cannot back (a predict would allocate by it)
    import hashlib
    import json
    import zipfile
    with zipfile.ZipFile(tmp_path / "sm.structlp") as z:
        content = {n: z.read(n) for n in z.namelist()}
    for m, refused in ((len(est.coef_) // 3, False), (len(est.coef_) // 3 + 1, True),
                       (10 ** 12, True)):
        meta = json.loads(content["structlp.json"])
        meta["root"]["params"]["model"]["params"]["max_length"] = m
        data = json.dumps(meta).encode()
        forged = dict(content, **{"structlp.json": data,
                                  "SHA256": hashlib.sha256(data).hexdigest().encode()})
        with zipfile.ZipFile(tmp_path / "forged.structlp", "w") as z:
            for n, b in forged.items():
                z.writestr(n, b)
        if refused:
            with pytest.raises(structlp.PersistenceError, match=f"max_length is {m}"):
                structlp.load(tmp_path / "forged.structlp")
        else:
            assert structlp.load(tmp_path / "forged.structlp").model.max_length == m


def test_segments_longer_than_the_sequence_allows_are_not_parts(rng):
    model = SemiMarkov(2, 10)                        # max_length > T: L = T
    x = rng.normal(size=(3, 2))
    assert model.n_parts(x) == dp.n_parts_of(3, 3, 2)
    assert model.n_features(x) == 2 * 2 + 2 * 10 + 4      # the length block keeps its size
    assert model.inference(x, np.r_[np.zeros(11), 5.0, np.zeros(8)]) == [(0, 3, 1)]


@pytest.mark.parametrize("y, match", [
    ([(0, 3, 0), (2, 5, 1)], r"\(0, 3, 0\) and \(2, 5, 1\) overlap"),
    ([(0, 2, 0), (3, 5, 1)], r"leave a gap: positions 2..2"),
    ([(1, 3, 0), (3, 5, 1)], r"leaves a gap: positions 0..0"),
    ([(0, 2, 0), (2, 4, 1)], r"leaves a gap: positions 4..4"),
    ([(0, 2, 0), (2, 6, 1)], r"more than max_length=3"),
    ([(0, 2, 0), (2, 5, 2)], r"the label 2, not in 0..1"),
    ([(0, 2, -1), (2, 5, 0)], r"the label -1"),
    ([(0, 2, 0), (2, 2, 0), (2, 5, 1)], r"\(2, 2, 0\) is empty"),
    ([(-1, 2, 0), (2, 5, 1)], r"starts before position 0"),
    ([(0, 3, 0), (3, 6, 1)], r"ends after the sequence of T=5"),
    ([], r"got no segment"),
    ([(0, 5)], r"shape \(1, 2\)"),
    ([(0, 2.5, 0), (2.5, 5, 1)], r"not integers"),
])
def test_bad_segmentations_are_refused(y, match):
    model = SemiMarkov(2, 3)
    x = np.zeros((5, 2))
    with pytest.raises(InvalidOutputError, match=match):
        model.encode(x, y)
    with pytest.raises(InvalidOutputError, match=match):
        MaxMarginLearner(model).fit([x, x], [[(0, 3, 0), (3, 5, 1)], y])


def test_unsorted_segments_are_accepted():
    model = SemiMarkov(2, 3)
    x = np.zeros((5, 1))
    y = [(2, 5, 1), (0, 2, 0)]
    assert model.decode(x, model.encode(x, y)) == sorted(y)


@pytest.mark.parametrize("params, match", [
    ((0, 3), "'n_labels' parameter of SemiMarkov must be an int >= 1"),
    ((2.0, 3), "'n_labels' parameter of SemiMarkov must be an int"),
    ((2, 0), "'max_length' parameter of SemiMarkov must be an int >= 1"),
    ((2, None), "'max_length' parameter of SemiMarkov must be an int"),
    ((True, 2), "'n_labels' parameter"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        MaxMarginLearner(SemiMarkov(*params)).fit([np.zeros((3, 1))], [[(0, 3, 0)]])


@pytest.mark.parametrize("x, match", [
    (np.zeros(4), "2-dimensional"),
    (np.zeros((0, 2)), "T >= 1"),
    (np.array([[0.0, np.nan]]), "NaN"),
])
def test_bad_examples_are_named(x, match):
    with pytest.raises(InvalidInputError, match=match):
        SemiMarkov(2, 2).check_x(x)


def test_bad_scores_and_sizes_are_named():
    with pytest.raises(InvalidInputError, match=r"shape \(10,\)"):
        dp.semi_markov_viterbi(np.zeros(3), 2, 2, 2)
    for fn in (dp.semi_markov_marginals, dp.semi_markov_viterbi, dp.semi_markov_k_best):
        for bad in (np.inf, -np.inf, np.nan):
            for j in range(10):                # every part: the kernel reads each one
                s = np.zeros(10)
                s[j] = bad
                with pytest.raises(InvalidInputError, match="must be finite"):
                    fn(s, 2, 2, 2, *([3] if fn is dp.semi_markov_k_best else []))
    with pytest.raises(InvalidInputError, match="L .* at most T = 2"):
        dp.semi_markov_viterbi(np.zeros(10), 2, 3, 2)
    with pytest.raises(InvalidParameterError, match="'L' parameter of segment_polytope"):
        segment_polytope(3, 4, 2)
    with pytest.raises(InvalidInputError, match=r"shape \(10,\)"):
        SemiMarkov(2, 2).inference(np.zeros((2, 1)), np.zeros(9))
