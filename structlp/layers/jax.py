"""JAX adapters of the structured layers (the optional extra ``structlp[jax]``).

The same layers as :mod:`structlp.layers.torch`, as ``jax.custom_vjp`` functions whose
forward and backward passes call the NumPy core through ``jax.pure_callback``: they work
under ``jax.jit`` (and ``jax.vmap``, one example at a time) and on any model structlp
knows.  Arrays are converted at the boundary (float64 NumPy; results in the input's
dtype: enable ``jax_enable_x64`` for double precision).

* :func:`sparsemap` ``(model, x, theta)`` or ``(model, X, thetas)`` with a 2-D ``thetas``;
* :func:`fy_loss` ``(model, X, thetas, Y, kind)``: the mean loss, ``thetas`` a 2-D array
  or a list of 1-D arrays;
* :func:`spo_plus` ``(model, X, c_hats, cs)``: the mean SPO+ loss.

The backward pass of :func:`sparsemap` reuses the forward's active sets (kept for the
last few score arrays seen) and solves the projection again only when they are gone.  The
certificates of the last forward that ran: :func:`last_certificates`.  Only reverse-mode
differentiation (``jax.grad``, ``jax.vjp``) is defined, as for any ``custom_vjp``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError:                                      # pragma: no cover - the extra
    raise ImportError(
        "structlp.layers.jax needs JAX, an optional dependency: install the extra with "
        "pip install 'structlp[jax]' (or install jax and jaxlib).") from None

from .batch import fy_loss_batch, sparsemap_batch, spo_plus_batch
from .projection import DEFAULT_MAX_ITER, DEFAULT_TOL, sparsemap as core_sparsemap
from .record import Certificates, Recorder

_RECORD = Recorder()
#: Active sets kept per layer call for the backward pass (score arrays).
KEEP = 8

__all__ = ["sparsemap", "fy_loss", "spo_plus", "last_certificates", "Certificates"]


def last_certificates() -> Optional[Certificates]:
    """The :class:`~structlp.layers.record.Certificates` of the last forward pass of a layer
    of this module that ran (None before the first).

    Examples
    --------
    >>> import numpy as np, jax.numpy as jnp
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.jax import last_certificates, sparsemap
    >>> mu = sparsemap(BipartiteMatching(), [np.zeros((2, 2, 1))], jnp.array([[1.0, 0.6, 0.0, 0.8]]))
    >>> cert = last_certificates()
    >>> cert.layer, cert.certified.tolist()
    ('sparsemap', [True])
    """
    return _RECORD.read()


def host(a: Any) -> np.ndarray:
    """A callback's argument as a float64 NumPy array (integer and complex arrays kept as
    they are, for the core's checks to name)."""
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def check_array(a: Any, name: str) -> Any:
    if not hasattr(a, "shape") or not hasattr(a, "dtype"):
        raise TypeError(f"{name} must be a JAX (or NumPy) array; got {type(a).__name__}.")
    if not jnp.issubdtype(a.dtype, jnp.floating):
        from ..exceptions import InvalidInputError
        raise InvalidInputError(
            f"{name} must hold floating-point part scores; got dtype {a.dtype}.")
    return a


def sparsemap(model: Any, X: Any, theta: Any, tol: float = DEFAULT_TOL,
              max_iter: int = DEFAULT_MAX_ITER) -> Any:
    """The SparseMAP projection ``argmin_{mu in conv Y(x)} 1/2 |mu - theta|^2``, differentiable.

    Parameters
    ----------
    model : StructuredModel
    X : one example (with a 1-D ``theta``) or a list of m examples (with ``theta`` (m, L))
    theta : jax array, shape (L,) or (m, L)
    tol, max_iter : as :func:`structlp.layers.sparsemap`

    Returns
    -------
    jax array, the shape and dtype of ``theta``

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.jax import sparsemap
    >>> f = jax.jit(lambda t: sparsemap(BipartiteMatching(), np.zeros((2, 2, 1)), t)[0])
    >>> theta = jnp.array([1.0, 0.6, 0.0, 0.8])
    >>> round(float(f(theta)), 3), np.round(np.asarray(jax.grad(f)(theta)), 3).tolist()
    (0.8, [0.25, -0.25, -0.25, 0.25])
    """
    theta = check_array(theta, "theta")
    single = theta.ndim == 1
    if single:
        Xs = [X]
    elif theta.ndim == 2:
        if not isinstance(X, (list, tuple)):
            raise TypeError("With a 2-D theta (one row per example), X must be a list of the "
                            f"examples; got {type(X).__name__}.")
        Xs = list(X)
    else:
        raise ValueError(f"theta must be 1-D (one example) or 2-D (one row per example); got "
                         f"shape {theta.shape}.")
    kept: "OrderedDict[bytes, List[Callable[[Any], np.ndarray]]]" = OrderedDict()

    def solve(th: np.ndarray) -> Tuple[np.ndarray, List[Any]]:
        if single:
            res, vjp = core_sparsemap(  # type: ignore[misc]  # a pair with with_vjp
                model, Xs[0], th, tol=tol, max_iter=max_iter,
                with_vjp=True)
            results, vjps = [res], [vjp]
        else:
            results, vjps = sparsemap_batch(model, Xs, th, tol=tol, max_iter=max_iter,
                                            with_vjp=True)
        _RECORD.write(Certificates.of_projections(results))
        kept[th.tobytes()] = vjps
        while len(kept) > KEEP:
            kept.popitem(last=False)
        mu = results[0].mu if single else np.vstack([r.mu for r in results])
        return mu, vjps

    def forward_cb(th: Any) -> np.ndarray:
        dtype = np.asarray(th).dtype
        return solve(host(th))[0].astype(dtype)

    def backward_cb(th: Any, g: Any) -> np.ndarray:
        dtype = np.asarray(g).dtype
        th = host(th)
        vjps = kept.get(th.tobytes())
        if vjps is None:
            vjps = solve(th)[1]
        g = host(g)
        out = vjps[0](g) if single else np.vstack([v(gi) for v, gi in zip(vjps, g)])
        return out.astype(dtype)

    @jax.custom_vjp
    def project(th: Any) -> Any:
        return jax.pure_callback(forward_cb, jax.ShapeDtypeStruct(th.shape, th.dtype), th,
                                 vmap_method="sequential")

    def fwd(th: Any) -> Tuple[Any, Any]:
        return project(th), th

    def bwd(th: Any, g: Any) -> Tuple[Any]:
        return (jax.pure_callback(backward_cb, jax.ShapeDtypeStruct(th.shape, th.dtype),
                                  th, g, vmap_method="sequential"),)

    project.defvjp(fwd, bwd)
    return project(theta)


def mean_loss(thetas: Any, X: Any, name: str,
              compute: Callable[[Any], Tuple[float, Any]]) -> Any:
    """A differentiable mean loss over a batch whose per-example gradients ``compute``
    returns with the loss (``compute(arrays) -> (mean loss, grads / m)``)."""
    if not isinstance(X, (list, tuple)):
        raise TypeError(f"X must be a list of examples; got {type(X).__name__}.")
    stacked = not isinstance(thetas, (list, tuple))
    if stacked:
        thetas = check_array(thetas, name)
        if thetas.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array (one row per example) or a list of "
                             f"1-D arrays; got shape {thetas.shape}.")
    else:
        thetas = [check_array(t, f"{name}[{i}]") for i, t in enumerate(thetas)]
    leaves = [thetas] if stacked else list(thetas)
    dtype = leaves[0].dtype

    def callback(*arrays: Any) -> Tuple[Any, ...]:
        loss, grads = compute(arrays[0] if stacked else [host(a) for a in arrays])
        return (np.asarray(loss, dtype=dtype),) + tuple(
            np.asarray(g, dtype=a.dtype) for g, a in zip(grads, arrays))

    shapes = (jax.ShapeDtypeStruct((), dtype),) + tuple(
        jax.ShapeDtypeStruct(t.shape, t.dtype) for t in leaves)

    @jax.custom_vjp
    def f(*ts: Any) -> Any:
        return jax.pure_callback(callback, shapes, *ts, vmap_method="sequential")[0]

    def fwd(*ts: Any) -> Tuple[Any, Any]:
        out = jax.pure_callback(callback, shapes, *ts, vmap_method="sequential")
        return out[0], out[1:]

    def bwd(grads: Any, g: Any) -> Tuple[Any, ...]:
        return tuple(g * gr for gr in grads)

    f.defvjp(fwd, bwd)
    return f(*leaves)


def fy_loss(model: Any, X: Any, thetas: Any, Y: Any, kind: str = "sparsemap",
            **opts: Any) -> Any:
    """The mean Fenchel-Young loss ``1/m sum_i L(theta_i; y_i)`` of a batch, differentiable.

    ``thetas``: a 2-D array (m, L) or a list of m 1-D arrays; ``kind`` and the options as
    :func:`structlp.layers.fy_loss`.  The gradient with respect to ``theta_i`` is
    ``(mu_hat_i - mu(y_i)) / m``.  (With ``random_state`` an int, ``"perturbed"`` draws the
    same perturbations at every call.)

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.jax import fy_loss
    >>> f = lambda t: fy_loss(BipartiteMatching(), [np.zeros((2, 2, 1))], t, [np.eye(2)])
    >>> thetas = jnp.array([[1.0, 0.6, 0.0, 0.8]])
    >>> np.asarray(jax.jit(jax.grad(f))(thetas)).astype(float).round(3).tolist()
    [[-0.2, 0.2, 0.2, -0.2]]
    """
    def compute(arrays: Any) -> Tuple[float, Any]:
        res = fy_loss_batch(model, X, host(arrays) if not isinstance(arrays, list)
                            else arrays, Y, kind, **opts)
        _RECORD.write(Certificates.of_losses("fy_loss", kind, res))
        m = len(X)
        grads = [res.grads / m] if not isinstance(arrays, list) else [g / m
                                                                      for g in res.grads]
        return res.mean_loss, grads
    return mean_loss(thetas, X, "thetas", compute)


def spo_plus(model: Any, X: Any, c_hats: Any, cs: Any, W: Any = None,
             n_jobs: Optional[int] = None) -> Any:
    """The mean SPO+ loss of predicted costs ``c_hats`` (differentiable) against true costs
    ``cs`` (not differentiated), costs minimised; see :func:`structlp.layers.spo_plus`.

    Examples
    --------
    >>> import numpy as np, jax, jax.numpy as jnp
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.jax import spo_plus
    >>> c = np.array([[1.0, 0.0, 0.0, 1.0]])
    >>> def f(c_hat):
    ...     return spo_plus(BipartiteMatching(), [np.zeros((2, 2, 1))], c_hat, c)
    >>> value, grad = jax.value_and_grad(f)(jnp.array([[0.0, 1.0, 1.0, 0.0]]))
    >>> float(value), np.asarray(grad).tolist()
    (6.0, [[-2.0, 2.0, 2.0, -2.0]])
    """
    cs_np = np.asarray(cs, dtype=float) if not isinstance(cs, (list, tuple)) else \
        [np.asarray(c, dtype=float) for c in cs]

    def compute(arrays: Any) -> Tuple[float, Any]:
        res = spo_plus_batch(model, X, host(arrays) if not isinstance(arrays, list)
                             else arrays, cs_np, W, n_jobs)
        _RECORD.write(Certificates.of_losses("spo_plus", None, res))
        m = len(X)
        grads = [res.grads / m] if not isinstance(arrays, list) else [g / m
                                                                      for g in res.grads]
        return res.mean_loss, grads
    return mean_loss(c_hats, X, "c_hats", compute)
