"""The log-partition function and marginals behind the ``"crf"`` Fenchel-Young loss.

.. math::

    \\log Z(\\theta) = \\log \\sum_{\\mu \\in \\mathcal Y(x)} e^{\\theta \\cdot \\mu},
    \\qquad \\nabla \\log Z(\\theta) = \\mathbb E_{p_\\theta}[\\mu] \\ (\\text{the marginals}),

computed exactly by :func:`structlp.inference.log_partition` where the model's structure
allows it (chains and trees, junction trees); elsewhere (a matching, a spanning tree, a
declared polytope) it is #P-hard in general and the error names the alternatives.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..exceptions import InvalidParameterError

ALTERNATIVES = ("kind='sparsemap' (the projection: exact, sparse, certified) or "
                "kind='perturbed' (Monte-Carlo marginals of perturbed MAP outputs)")


def log_partition_of(model: Any, x: Any, theta: np.ndarray) -> Tuple[float, np.ndarray]:
    """``(log Z(theta), marginals (L,))`` of a checked example, or an
    :class:`~structlp.InvalidParameterError` naming the alternatives."""
    from .. import inference
    fn = getattr(inference, "log_partition", None)
    if fn is None:         # pragma: no cover - until structlp.inference.log_partition lands
        raise InvalidParameterError(
            "kind='crf' needs structlp.inference.log_partition, not available in this "
            f"version; use {ALTERNATIVES}.")
    try:
        logz, marg = fn(model, x, theta)
    except NotImplementedError as exc:
        raise InvalidParameterError(
            f"kind='crf' needs the log-partition function of {type(model).__name__}, which "
            f"structlp computes exactly only for chains, trees and junction trees ({exc}); "
            f"use {ALTERNATIVES}.") from None
    return float(logz), np.asarray(marg, dtype=float)
