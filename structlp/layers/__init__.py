"""Structured layers: losses and projections, with their gradients, of part scores.

A network (or any other model) produces ``theta``, one example's part scores (length
``model.n_parts(x)``, in the model's part order), for any
:class:`~structlp.StructuredModel`; these functions return what a training loop needs,
each with its certificate:

* :func:`sparsemap`: the projection of ``theta`` onto the hull of the outputs (a sparse
  mixture of outputs), its Frank-Wolfe gap and, on request, its vector-Jacobian product;
* :func:`fy_loss`: the Fenchel-Young losses ``"sparsemap"``, ``"hinge"``,
  ``"perceptron"``, ``"crf"`` and ``"perturbed"`` with their gradients;
* :func:`spo_plus`: the SPO+ loss of a predicted cost vector (decision-focused learning);
* the same over lists of examples: :func:`sparsemap_batch`, :func:`fy_loss_batch`,
  :func:`spo_plus_batch`.

The NumPy functions need nothing beyond structlp's dependencies; PyTorch and JAX
adapters live in :mod:`structlp.layers.torch` and :mod:`structlp.layers.jax` (optional
extras, imported on use), whose last forward's certificates are kept in a
:class:`~structlp.layers.record.Certificates` record (``last_certificates()``).

What is certified: a projection by its Frank-Wolfe gap (``gap``, ``certified``); the
``"hinge"``, ``"perceptron"``, ``"crf"`` losses and SPO+ are exact (one or two calls of an
exact oracle, or exact marginals: no gap exists, ``gap`` is None); ``"perturbed"`` is a
Monte-Carlo estimate with its standard errors.
"""

from .batch import BatchLossResult, fy_loss_batch, sparsemap_batch, spo_plus_batch
from .losses import KINDS, LossResult, fy_loss, spo_plus
from .projection import SparseMAPResult, sparsemap

__all__ = ["sparsemap", "fy_loss", "spo_plus", "sparsemap_batch", "fy_loss_batch",
           "spo_plus_batch", "SparseMAPResult", "LossResult", "BatchLossResult", "KINDS"]
