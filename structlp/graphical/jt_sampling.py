"""Exact samples of the Gibbs distribution of a junction tree (forward filtering-backward
sampling on the cliques).

For clique-part scores ``s`` of a graph example (:class:`~structlp.graphical.junction.GraphExample`)
the distribution is ``p(y) ∝ exp(sum_C s_C(y_C))``.  The upward sum-product pass of
:func:`~structlp.graphical.junction.jt_marginals_cliques` gives each clique's table times
its subtree's messages; the root clique's labelling is drawn from its normalized table,
then every other clique's free nodes (those outside its separator) from its table at the
separator labels already drawn, in the junction tree's breadth-first order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..utils.numeric import logsumexp
from .junction import _collect
from .trees import draw


def jt_sample(gx: Any, scores: np.ndarray, k: int, n: int, rng: np.random.Generator
              ) -> np.ndarray:
    """``n`` exact samples of ``p(y) ∝ exp(scores . mu(y))`` on a junction tree.

    Parameters
    ----------
    gx : GraphExample
    scores : ndarray (n_parts,), the clique-part scores
    k : int, the number of labels
    n : int, the number of samples
    rng : numpy.random.Generator

    Returns
    -------
    Y : int array (n, n_nodes)
    """
    T = gx.tables(k)
    belief, _ = _collect(gx, T.split(np.asarray(scores, dtype=float)), T, logsumexp)
    Y = np.full((n, gx.n_nodes), -1, dtype=np.int64)
    for t, c in enumerate(gx.clique_order):
        C = gx.cliques[c]
        sep = sorted(T.sep_set[c]) if t else []
        free = list(T.out_self[c]) if t else list(range(len(C)))
        table = np.moveaxis(belief[c], sep, list(range(len(sep))))
        if sep:
            sub = table[tuple(Y[:, C[j]] for j in sep)]               # (n, k, ..., k)
        else:
            sub = np.broadcast_to(table, (n,) + table.shape)
        if not free:
            continue
        flat = draw(sub.reshape(n, -1), rng)
        Y[:, C[free]] = np.stack(np.unravel_index(flat, (k,) * len(free)), axis=1)
    return Y
