"""fy_loss and spo_plus against their definitions, by enumerating every output."""

import numpy as np
import pytest
from layer_cases import CASES, CRF_CASES, case, hull_projection

from structlp.layers import fy_loss, fy_loss_batch, spo_plus, spo_plus_batch


def setup(name, seed=0):
    model, x, outs, M = case(name, seed)
    rng = np.random.default_rng(100 + seed)
    theta = rng.normal(size=M.shape[1])
    t = int(rng.integers(len(outs)))
    return model, x, outs, M, theta, outs[t], M[t]


def exact_projection(M, theta):
    """The projection, polished: cvxpy's support, then the affine least squares on it."""
    mu0 = hull_projection(M, theta)
    on_face = np.isclose(M @ (theta - mu0), (theta - mu0) @ mu0, atol=1e-6)
    S = M[on_face]                             # the optimal face's vertices
    K = np.block([[S @ S.T, np.ones((len(S), 1))], [np.ones((1, len(S))), np.zeros((1, 1))]])
    a = np.linalg.lstsq(K, np.append(S @ theta, 1.0), rcond=None)[0][:-1]
    return a @ S


@pytest.mark.parametrize("name", CASES)
def test_sparsemap_loss_is_its_definition(name):
    model, x, _, M, theta, y, mu_y = setup(name)
    mu = exact_projection(M, theta)
    want = theta @ mu - 0.5 * mu @ mu + 0.5 * mu_y @ mu_y - theta @ mu_y
    res = fy_loss(model, x, theta, y, kind="sparsemap")
    loss, grad = res
    assert abs(loss - want) < 1e-9 and np.abs(grad - (mu - mu_y)).max() < 1e-9
    assert res.certified and res.gap <= res.projection.threshold
    assert np.array_equal(res.prediction, res.projection.mu)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("kind", ["hinge", "perceptron"])
def test_hinge_and_perceptron_are_their_definitions(name, kind):
    model, x, outs, M, theta, y, mu_y = setup(name, 1)
    task = np.array([model.task_loss(x, y, o) for o in outs]) if kind == "hinge" \
        else np.zeros(len(outs))
    vals = M @ theta + task
    best = int(np.argmax(vals))
    loss, grad = fy_loss(model, x, theta, y, kind=kind)
    assert abs(loss - (vals[best] - theta @ mu_y)) < 1e-9
    assert np.array_equal(grad, M[best] - mu_y)
    assert loss >= 0


@pytest.mark.parametrize("name", CRF_CASES)
def test_crf_is_its_definition(name):
    model, x, outs, M, theta, y, mu_y = setup(name, 5)
    s = M @ theta
    top = s.max()
    logz = top + np.log(np.exp(s - top).sum())
    p = np.exp(s - logz)
    res = fy_loss(model, x, theta, y, kind="crf")
    assert abs(res.loss - (logz - theta @ mu_y)) < 1e-9
    assert np.abs(res.grad - (p @ M - mu_y)).max() < 1e-9
    assert res.certified and res.gap is None


@pytest.mark.parametrize("name", ["matching", "chain", "choosek"])
def test_perturbed_is_its_definition_on_the_same_draws(name):
    model, x, outs, M, theta, y, mu_y = setup(name, 2)
    res = fy_loss(model, x, theta, y, kind="perturbed", n_samples=50, sigma=0.5,
                  random_state=7)
    Z = np.random.default_rng(7).standard_normal((50, M.shape[1]))
    vals = (theta + 0.5 * Z) @ M.T                        # (samples, outputs)
    arg = vals.argmax(axis=1)
    assert abs(res.loss - (vals.max(axis=1).mean() - theta @ mu_y)) < 1e-9
    assert np.abs(res.grad - (M[arg].mean(axis=0) - mu_y)).max() < 1e-9
    assert abs(res.stderr - vals.max(axis=1).std(ddof=1) / np.sqrt(50)) < 1e-12
    assert not res.certified and res.gap is None


def test_perturbed_is_within_its_monte_carlo_error():
    model, x, outs, M, theta, y, mu_y = setup("matching", 3)
    Z = np.random.default_rng(123).standard_normal((200_000, M.shape[1]))
    vals = (theta + Z) @ M.T
    F = vals.max(axis=1).mean()                            # F_1(theta), error ~ 2e-3
    G = np.bincount(vals.argmax(axis=1), minlength=len(M)) @ M / len(Z)
    res = fy_loss(model, x, theta, y, kind="perturbed", n_samples=400, random_state=0)
    assert abs(res.loss - (F - theta @ mu_y)) < 4 * res.stderr
    assert np.all(np.abs(res.grad - (G - mu_y)) <= 4 * res.grad_stderr + 1e-2)


@pytest.mark.parametrize("name", CASES)
def test_spo_plus_is_its_definition(name):
    model, x, outs, M, c, _, _ = setup(name, 4)
    c_hat = np.random.default_rng(5).normal(size=c.size)
    w = M[np.argmin(M @ c)]                                 # w*(c)
    loss = np.max(M @ (c - 2 * c_hat)) + 2 * c_hat @ w - c @ w
    sub = 2 * (w - M[np.argmin(M @ (2 * c_hat - c))])
    got, grad = spo_plus(model, x, c_hat, c)
    assert abs(got - loss) < 1e-9 and np.array_equal(grad, sub)
    t = int(np.argmin(M @ c))
    assert spo_plus(model, x, c_hat, c, w=outs[t]).loss == pytest.approx(loss, abs=1e-12)
    assert spo_plus(model, x, c_hat, c, w=M[t]).loss == pytest.approx(loss, abs=1e-12)
    # a convex upper bound of the regret c . w*(c_hat) - c . w*(c)
    assert got >= c @ M[np.argmin(M @ c_hat)] - c @ w - 1e-12


@pytest.mark.parametrize("kind", ["sparsemap", "hinge", "perceptron", "perturbed"])
def test_batch_is_the_examples_one_by_one(kind):
    model, x, outs, M, _, _, _ = setup("matching")
    rng = np.random.default_rng(0)
    thetas = rng.normal(size=(4, M.shape[1]))
    Y = [outs[i] for i in rng.integers(len(outs), size=4)]
    opts = {"random_state": 3} if kind == "perturbed" else {}
    res = fy_loss_batch(model, [x] * 4, thetas, Y, kind=kind, **opts)
    res2 = fy_loss_batch(model, [x] * 4, list(thetas), Y, kind=kind, n_jobs=2, **opts)
    assert res.grads.shape == (4, M.shape[1]) and isinstance(res2.grads, list)
    assert np.array_equal(res.losses, res2.losses)
    if kind != "perturbed":
        for i in range(4):
            one = fy_loss(model, x, thetas[i], Y[i], kind=kind)
            assert one.loss == res.losses[i] and np.array_equal(one.grad, res.grads[i])
    assert (res.gaps is not None) == (kind == "sparsemap")
    assert (res.stderr is not None) == (kind == "perturbed")
    losses, grads = spo_plus_batch(model, [x] * 4, thetas, thetas[::-1])
    assert np.allclose(losses, [spo_plus(model, x, a, b).loss
                                for a, b in zip(thetas, thetas[::-1])])
