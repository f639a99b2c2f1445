"""The PyTorch and JAX adapters: gradients against finite differences (gradcheck,
check_grads), the NumPy core's values, dtypes, certificates and refusals."""

import doctest
import importlib

import numpy as np
import pytest
from layer_cases import case

from structlp import InvalidInputError
from structlp.layers import fy_loss_batch, sparsemap, spo_plus_batch


def batch(name="matching", m=3, seed=0):
    model, x, outs, M = case(name, seed)
    rng = np.random.default_rng(seed)
    thetas = rng.normal(size=(m, M.shape[1]))
    Y = [outs[i] for i in rng.integers(len(outs), size=m)]
    return model, [x] * m, thetas, Y


@pytest.mark.parametrize("module", ["torch", "jax"])
def test_adapter_docstrings(module):
    pytest.importorskip(module)
    mod = importlib.import_module(f"structlp.layers.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------ torch

@pytest.mark.parametrize("name", ["matching", "chain", "choosek"])
def test_torch_gradcheck(name):
    torch = pytest.importorskip("torch")
    from structlp.layers.torch import fy_loss, last_certificates, sparsemap as tsm, spo_plus
    model, X, thetas, Y = batch(name)
    t = torch.tensor(thetas, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: tsm(model, X, a), (t,), atol=1e-6)
    assert torch.autograd.gradcheck(lambda a: tsm(model, X[0], a), (t[0].detach().clone()
                                                                    .requires_grad_(),))
    assert last_certificates().all_certified and last_certificates().gaps.shape == (1,)
    for kind in ("sparsemap", "hinge", "perceptron") + (("crf",) if name == "chain" else ()):
        assert torch.autograd.gradcheck(lambda a: fy_loss(model, X, a, Y, kind=kind), (t,))
        loss = fy_loss(model, X, list(t), Y, kind=kind)       # a list of 1-D tensors
        ref = fy_loss_batch(model, X, thetas, Y, kind=kind)
        assert loss.item() == pytest.approx(ref.mean_loss, abs=1e-12)
        assert last_certificates().kind == kind
    c = torch.tensor(thetas[::-1].copy())
    assert torch.autograd.gradcheck(lambda a: spo_plus(model, X, a, c), (t,))
    assert spo_plus(model, X, t, c).item() == pytest.approx(
        spo_plus_batch(model, X, thetas, thetas[::-1]).mean_loss)


def test_torch_values_dtype_and_gradient_are_the_cores():
    torch = pytest.importorskip("torch")
    from structlp.layers.torch import fy_loss, sparsemap as tsm
    model, X, thetas, Y = batch("chain")
    t = torch.tensor(thetas, dtype=torch.float32, requires_grad=True)
    mu = tsm(model, X, t)
    assert mu.dtype == torch.float32 and mu.shape == t.shape
    g = np.random.default_rng(1).normal(size=thetas.shape)
    mu.backward(torch.tensor(g, dtype=torch.float32))
    for i in range(len(X)):
        res, vjp = sparsemap(model, X[i], thetas[i].astype(np.float32).astype(float),
                             with_vjp=True)
        assert np.allclose(mu[i].detach().numpy(), res.mu, atol=1e-6)
        assert np.allclose(t.grad[i].numpy(), vjp(g[i]), atol=1e-5)
    t.grad = None
    loss = fy_loss(model, X, t, Y, kind="perturbed", n_samples=20, random_state=0)
    loss.backward()
    ref = fy_loss_batch(model, X, thetas.astype(np.float32).astype(float), Y,
                        kind="perturbed", n_samples=20, random_state=0)
    assert np.allclose(t.grad.numpy(), ref.grads / len(X), atol=1e-6)


def test_torch_refusals():
    torch = pytest.importorskip("torch")
    from structlp.layers.torch import fy_loss, sparsemap as tsm
    model, X, thetas, Y = batch("matching")
    with pytest.raises(InvalidInputError, match="thetas\\[0\\] must hold floating-point"):
        fy_loss(model, X, torch.zeros((3, 16), dtype=torch.int64), Y)
    with pytest.raises(InvalidInputError, match="theta contains NaN"):
        tsm(model, X[0], torch.full((16,), float("nan")))
    with pytest.raises(InvalidInputError, match="theta must have shape \\(16,\\)"):
        tsm(model, X[0], torch.zeros(15))
    with pytest.raises(InvalidInputError, match="X\\[1\\] has 9 parts"):
        tsm(model, [X[0], np.zeros((3, 3, 1))], torch.zeros((2, 16)))


# ------------------------------------------------------------------ jax

@pytest.mark.parametrize("name", ["matching", "chain", "choosek"])
def test_jax_check_grads_under_jit(name):
    jax = pytest.importorskip("jax")
    from jax.test_util import check_grads

    from structlp.layers.jax import fy_loss, last_certificates, sparsemap as jsm, spo_plus
    model, X, thetas, Y = batch(name)
    with jax.enable_x64(True):
        t = jax.numpy.asarray(thetas)
        f = jax.jit(lambda a: jsm(model, X, a))
        check_grads(f, (t,), order=1, modes=["rev"], eps=1e-6)
        assert np.allclose(np.asarray(f(t)), [sparsemap(model, x, th).mu
                                              for x, th in zip(X, thetas)], atol=1e-12)
        assert last_certificates().all_certified
        check_grads(lambda a: jsm(model, X[0], a), (t[0],), order=1, modes=["rev"], eps=1e-6)
        for kind in ("sparsemap", "hinge", "perceptron") + (("crf",) if name == "chain" else ()):
            g = jax.jit(lambda a: fy_loss(model, X, a, Y, kind=kind))
            check_grads(g, (t,), order=1, modes=["rev"], eps=1e-6)
            ref = fy_loss_batch(model, X, thetas, Y, kind=kind)
            assert float(g(t)) == pytest.approx(ref.mean_loss, abs=1e-12)
            grad = jax.grad(lambda a: fy_loss(model, X, a, Y, kind=kind))(list(t))
            assert np.allclose(np.vstack(grad), ref.grads / len(X), atol=1e-12)
        c = thetas[::-1].copy()
        check_grads(lambda a: spo_plus(model, X, a, c), (t,), order=1, modes=["rev"],
                    eps=1e-6)


def test_jax_float32_and_vmap():
    jax = pytest.importorskip("jax")
    from structlp.layers.jax import sparsemap as jsm
    model, X, thetas, _ = batch("matching")
    t = jax.numpy.asarray(thetas, dtype=jax.numpy.float32)
    out = jax.vmap(lambda a: jsm(model, X[0], a))(t)
    assert out.dtype == jax.numpy.float32 and out.shape == t.shape
    assert np.allclose(np.asarray(out), jsm(model, X, t), atol=1e-6)
    with pytest.raises(InvalidInputError, match="theta must hold floating-point"):
        jsm(model, X[0], jax.numpy.zeros(16, dtype=jax.numpy.int32))


def run_python(code):
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env)


def test_the_core_imports_no_framework_and_a_missing_one_is_named():
    out = run_python("import sys, structlp.layers\n"
                     "print([m for m in ('torch', 'jax', 'cvxpy') if m in sys.modules])")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    for mod, extra in (("torch", "structlp[torch]"), ("jax", "structlp[jax]")):
        out = run_python(f"import sys; sys.modules[{mod!r}] = None\n"
                         f"import structlp.layers.{mod}")
        assert out.returncode != 0
        assert "ImportError" in out.stderr and extra in out.stderr, out.stderr
