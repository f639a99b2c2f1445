"""The spanning-tree certificate (Taskar et al. 2005, §5.1): every non-tree edge is no
better than each tree edge on the path joining its ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Tuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order


if TYPE_CHECKING:  # pragma: no cover
    pass


def spanning_tree_rows(n: int, u: np.ndarray, v: np.ndarray,
                       in_tree: np.ndarray) -> Tuple[sp.csr_array, Any]:
    """Certificate rows of a spanning tree: ``s_e - s_e' >= 0`` for each non-tree
    edge ``e'`` and each tree edge ``e`` on the tree path joining its ends.

    Parameters
    ----------
    n : int
        Number of nodes.
    u, v : int arrays, shape (L,)
        Edge end points; edge ``e`` is part ``e``.
    in_tree : bool array, shape (L,)
        The tree (must be a spanning tree).

    Returns
    -------
    Gs : sparse (R, L)
        Row ``r`` has +1 at its tree edge and -1 at its non-tree edge.
    pairs : int array, shape (R, 2)
        (tree edge, non-tree edge) of each row.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import spanning_tree_rows
    >>> u, v = np.array([0, 0, 1]), np.array([1, 2, 2])           # a triangle
    >>> Gs, pairs = spanning_tree_rows(3, u, v, np.array([True, True, False]))
    >>> Gs.toarray(), pairs          # s_01 >= s_12 and s_02 >= s_12
    (array([[ 1.,  0., -1.],
           [ 0.,  1., -1.]]), array([[0, 2],
           [1, 2]]))
    """
    in_tree = np.asarray(in_tree, dtype=bool)
    L = len(u)
    te = np.flatnonzero(in_tree)
    ne = np.flatnonzero(~in_tree)
    T = sp.csr_array((np.ones(len(te)), (u[te], v[te])), shape=(n, n))
    order, pred = breadth_first_order(T, 0, directed=False, return_predecessors=True)
    # anc[j, c]: the tree edge (c, pred[c]) lies on the path from j to the root
    anc = np.zeros((n, n), dtype=bool)
    for j in order[1:]:
        anc[j] = anc[pred[j]]
        anc[j, j] = True
    edge_of_child = np.full(n, -1, dtype=np.int64)
    child = np.where(pred[u[te]] == v[te], u[te], v[te])
    edge_of_child[child] = te
    on_path = anc[u[ne]] ^ anc[v[ne]]  # (n_nontree, n): tree path of each non-tree edge
    r, c = np.nonzero(on_path)
    pairs = np.column_stack([edge_of_child[c], ne[r]])
    R = len(pairs)
    rows = np.repeat(np.arange(R), 2)
    cols = pairs.ravel()
    vals = np.tile([1.0, -1.0], R)
    return sp.csr_array((vals, (rows, cols)), shape=(R, L)), pairs
