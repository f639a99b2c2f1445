"""The log-partition function and marginals behind the ``"crf"`` Fenchel-Young loss.

.. math::

    \\log Z(\\theta) = \\log \\sum_{\\mu \\in \\mathcal Y(x)} e^{\\theta \\cdot \\mu},
    \\qquad \\nabla \\log Z(\\theta) = \\mathbb E_{p_\\theta}[\\mu] \\ (\\text{the marginals}),

computed exactly by the model's ``log_partition`` hook (that of
:func:`structlp.inference.log_partition`) where the structure allows it (chains and trees,
junction trees, arborescences); elsewhere (a matching, a spanning tree, a declared
polytope) it is #P-hard in general and the error names the alternatives.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..exceptions import InvalidParameterError

ALTERNATIVES = ("kind='sparsemap' (the projection: exact, sparse, certified) or "
                "kind='perturbed' (Monte-Carlo marginals of perturbed MAP outputs)")


def log_partition_of(model: Any, x: Any, theta: np.ndarray) -> Tuple[float, np.ndarray]:
    """``(log Z(theta), marginals (L,))`` of a checked example, by the model's
    ``log_partition(x, scores)`` hook (what :func:`structlp.inference.log_partition` calls,
    without checking ``x`` and ``theta`` again), or an
    :class:`~structlp.InvalidParameterError` naming the alternatives."""
    hook = getattr(model, "log_partition", None)
    if hook is None:
        raise InvalidParameterError(
            f"kind='crf' needs the log-partition function of {type(model).__name__}, which "
            "has none (exact ones exist for chains and trees (TreeLabeling), junction trees "
            "(JunctionTreeLabeling) and arborescences; on matchings and loopy graphs it is "
            f"#P-hard); use {ALTERNATIVES}.")
    logz, marg = hook(x, theta)
    return float(logz), np.asarray(marg, dtype=float)
