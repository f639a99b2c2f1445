"""PyTorch adapters of the structured layers (the optional extra ``structlp[torch]``).

Tensors are converted at the boundary (to float64 NumPy on the CPU; results go back in the
input's dtype and device) and the NumPy core of :mod:`structlp.layers` does the work, so
every model structlp knows (built-in or declared) is a layer:

* :func:`sparsemap` ``(model, x, theta)``: the SparseMAP projection as a differentiable
  tensor (exact Jacobian on the active face); ``(model, X, thetas)`` with a 2-D tensor
  (m, L) projects each row;
* :func:`fy_loss` ``(model, X, thetas, Y, kind)``: the mean Fenchel-Young loss of a batch
  as a differentiable scalar;
* :func:`spo_plus` ``(model, X, c_hats, cs)``: the mean SPO+ loss.

The certificates of the last forward (gaps, certified flags, Monte-Carlo errors) are read
by :func:`last_certificates`.  Double backward is not supported.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

try:
    import torch
except ImportError:                                      # pragma: no cover - the extra
    raise ImportError(
        "structlp.layers.torch needs PyTorch, an optional dependency: install the extra "
        "with pip install 'structlp[torch]' (or install torch itself).") from None

from .batch import fy_loss_batch, sparsemap_batch, spo_plus_batch
from .projection import DEFAULT_MAX_ITER, DEFAULT_TOL, sparsemap as core_sparsemap
from .record import Certificates, Recorder

_RECORD = Recorder()

__all__ = ["sparsemap", "fy_loss", "spo_plus", "last_certificates", "Certificates"]


def last_certificates() -> Optional[Certificates]:
    """The :class:`~structlp.layers.record.Certificates` of the last forward pass of a layer
    of this module (None before the first).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.torch import last_certificates, sparsemap
    >>> thetas = torch.tensor([[1.0, 0.6, 0.0, 0.8]], dtype=torch.float64)
    >>> mu = sparsemap(BipartiteMatching(), [np.zeros((2, 2, 1))], thetas)
    >>> cert = last_certificates()
    >>> cert.layer, cert.certified.tolist(), bool(cert.gaps[0] < 1e-9)
    ('sparsemap', [True], True)
    """
    return _RECORD.read()


def to_numpy(t: Any, name: str) -> np.ndarray:
    """A tensor (or array-like) as a float64 NumPy array, detached, on the CPU.  Integer,
    boolean and complex tensors are left to the core's checks (which name ``name``)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.is_complex() or not t.is_floating_point():
            return t.cpu().numpy()
        return t.to(device="cpu", dtype=torch.float64).numpy()
    return np.asarray(t)


def check_tensor(t: Any, name: str) -> "torch.Tensor":
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}.")
    return t


class SparseMAPFunction(torch.autograd.Function):
    """``theta -> mu*`` for one example (1-D) or a batch (2-D), with its exact VJP."""

    @staticmethod
    def forward(ctx: Any, theta: "torch.Tensor", model: Any, X: List[Any], tol: float,
                max_iter: int) -> "torch.Tensor":
        arr = to_numpy(theta, "theta")
        if theta.dim() == 1:
            res, vjp = core_sparsemap(  # type: ignore[misc]  # a pair with with_vjp
                model, X[0], arr, tol=tol, max_iter=max_iter,
                with_vjp=True)
            results, vjps, mu = [res], [vjp], res.mu
        else:
            results, vjps = sparsemap_batch(model, X, arr, tol=tol, max_iter=max_iter,
                                            with_vjp=True)
            mu = np.vstack([r.mu for r in results])
        _RECORD.write(Certificates.of_projections(results))
        ctx.vjps = vjps
        return torch.from_numpy(np.ascontiguousarray(mu)).to(dtype=theta.dtype,
                                                              device=theta.device)

    @staticmethod
    def backward(ctx: Any, grad: "torch.Tensor") -> Tuple[Any, ...]:
        g = to_numpy(grad, "grad")
        if g.ndim == 1:
            out = ctx.vjps[0](g)
        else:
            out = np.vstack([v(gi) for v, gi in zip(ctx.vjps, g)])
        return (torch.from_numpy(out).to(dtype=grad.dtype, device=grad.device),
                None, None, None, None)


def sparsemap(model: Any, X: Any, theta: "torch.Tensor", tol: float = DEFAULT_TOL,
              max_iter: int = DEFAULT_MAX_ITER) -> "torch.Tensor":
    """The SparseMAP projection ``argmin_{mu in conv Y(x)} 1/2 |mu - theta|^2``, differentiable.

    Parameters
    ----------
    model : StructuredModel
    X : one example (with a 1-D ``theta``) or a list of m examples (with a 2-D ``theta``
        (m, L), every example of ``L`` parts)
    theta : torch.Tensor, shape (L,) or (m, L)
        Part scores (floating point); the result has its dtype and device.
    tol, max_iter : as :func:`structlp.layers.sparsemap`

    Returns
    -------
    torch.Tensor, the shape of ``theta``
        The projections; backward applies the exact Jacobian of each on its active face.
        The gaps: :func:`last_certificates`.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.torch import sparsemap, last_certificates
    >>> theta = torch.tensor([1.0, 0.6, 0.0, 0.8], dtype=torch.float64, requires_grad=True)
    >>> mu = sparsemap(BipartiteMatching(), np.zeros((2, 2, 1)), theta)
    >>> mu.detach().numpy().round(3).tolist(), last_certificates().all_certified
    ([0.8, 0.2, 0.2, 0.8], True)
    >>> mu[0].backward(); theta.grad.numpy().round(3).tolist()
    [0.25, -0.25, -0.25, 0.25]
    """
    theta = check_tensor(theta, "theta")
    if theta.dim() == 1:
        X = [X]
    elif theta.dim() != 2:
        raise ValueError(f"theta must be a 1-D tensor (one example) or a 2-D tensor (one row "
                         f"per example); got shape {tuple(theta.shape)}.")
    elif not isinstance(X, (list, tuple)):
        raise TypeError("With a 2-D theta (one row per example), X must be a list of the "
                        f"examples; got {type(X).__name__}.")
    return SparseMAPFunction.apply(theta, model, list(X), tol, max_iter)


class BatchLossFunction(torch.autograd.Function):
    """The mean of per-example losses whose gradients the core computed in the forward."""

    @staticmethod
    def forward(ctx: Any, compute: Any, *thetas: "torch.Tensor") -> "torch.Tensor":
        arrays = [to_numpy(t, "thetas") for t in thetas]
        grads, loss = compute(arrays)
        ctx.grads = grads
        ref = thetas[0]
        return torch.tensor(loss, dtype=ref.dtype, device=ref.device)

    @staticmethod
    def backward(ctx: Any, grad: "torch.Tensor") -> Tuple[Any, ...]:
        return (None,) + tuple(grad * torch.from_numpy(g).to(dtype=grad.dtype,
                                                              device=grad.device)
                               for g in ctx.grads)


def batch_inputs(X: Any, thetas: Any, name: str) -> Tuple[List[Any], Tuple[Any, ...], bool]:
    """(examples, input tensors, whether one 2-D tensor) of a batched loss."""
    if isinstance(thetas, torch.Tensor):
        if thetas.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor (one row per example) or a list of "
                             f"1-D tensors; got shape {tuple(thetas.shape)}.")
        ts: Tuple[Any, ...] = (thetas,)
        stacked = True
    elif isinstance(thetas, (list, tuple)) and thetas:
        ts = tuple(check_tensor(t, f"{name}[{i}]") for i, t in enumerate(thetas))
        stacked = False
    else:
        raise TypeError(f"{name} must be a 2-D tensor or a non-empty list of 1-D tensors; "
                        f"got {type(thetas).__name__}.")
    if not isinstance(X, (list, tuple)):
        raise TypeError(f"X must be a list of examples; got {type(X).__name__}.")
    return list(X), ts, stacked


def fy_loss(model: Any, X: Any, thetas: Any, Y: Any, kind: str = "sparsemap",
            **opts: Any) -> "torch.Tensor":
    """The mean Fenchel-Young loss ``1/m sum_i L(theta_i; y_i)`` of a batch, differentiable.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples
    thetas : torch.Tensor (m, L), or a list of m 1-D tensors (L_i,)
    Y : list of m outputs
    kind, **opts : as :func:`structlp.layers.fy_loss` (and ``n_jobs``)

    Returns
    -------
    torch.Tensor, a scalar
        Its gradient with respect to ``theta_i`` is ``(mu_hat_i - mu(y_i)) / m``.  The
        per-example certificates: :func:`last_certificates`.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.torch import fy_loss
    >>> thetas = torch.tensor([[1.0, 0.6, 0.0, 0.8]], dtype=torch.float64,
    ...                       requires_grad=True)
    >>> loss = fy_loss(BipartiteMatching(), [np.zeros((2, 2, 1))], thetas, [np.eye(2)])
    >>> loss.backward(); round(loss.item(), 6), thetas.grad.numpy().round(3).tolist()
    (0.08, [[-0.2, 0.2, 0.2, -0.2]])
    """
    X, ts, stacked = batch_inputs(X, thetas, "thetas")

    def compute(arrays: List[np.ndarray]) -> Tuple[List[np.ndarray], float]:
        res = fy_loss_batch(model, X, arrays[0] if stacked else arrays, Y, kind, **opts)
        _RECORD.write(Certificates.of_losses("fy_loss", kind, res))
        m = len(X)
        grads = [res.grads / m] if stacked else [g / m for g in res.grads]
        return grads, res.mean_loss
    return BatchLossFunction.apply(compute, *ts)


def spo_plus(model: Any, X: Any, c_hats: Any, cs: Any, W: Any = None,
             n_jobs: Optional[int] = None) -> "torch.Tensor":
    """The mean SPO+ loss of predicted costs ``c_hats`` (differentiable) against true costs
    ``cs`` (arrays or tensors, not differentiated), costs minimised; see
    :func:`structlp.layers.spo_plus`.  ``W``: the true optimal outputs when known.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.torch import spo_plus
    >>> # true costs: the swap is free
    >>> c = np.array([[1.0, 0.0, 0.0, 1.0]])
    >>> c_hat = torch.tensor([[0.0, 1.0, 1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    >>> loss = spo_plus(BipartiteMatching(), [np.zeros((2, 2, 1))], c_hat, c)
    >>> loss.backward()
    >>> loss.item(), c_hat.grad.numpy().tolist()
    (6.0, [[-2.0, 2.0, 2.0, -2.0]])
    """
    X, ts, stacked = batch_inputs(X, c_hats, "c_hats")
    cs = to_numpy(cs, "cs") if isinstance(cs, torch.Tensor) else \
        [to_numpy(c, f"cs[{i}]") for i, c in enumerate(cs)]

    def compute(arrays: List[np.ndarray]) -> Tuple[List[np.ndarray], float]:
        res = spo_plus_batch(model, X, arrays[0] if stacked else arrays, cs, W, n_jobs)
        _RECORD.write(Certificates.of_losses("spo_plus", None, res))
        m = len(X)
        grads = [res.grads / m] if stacked else [g / m for g in res.grads]
        return grads, res.mean_loss
    return BatchLossFunction.apply(compute, *ts)
