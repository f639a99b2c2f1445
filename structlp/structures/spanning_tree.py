"""Spanning trees, learned through their optimality certificate (Taskar et al. 2005, §5)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from ..certificates import GraphStructure, n_components, spanning_tree_rows
from ..exceptions import InvalidInputError, InvalidOutputError


class SpanningTree(GraphStructure):
    """Spanning trees of an undirected graph, trained with ``formulation="certificate"``.

    Inference is the maximum spanning tree

    .. math::

        \\max_{T \\text{ spanning tree of } G} \\sum_{e \\in T} s_e ,

    which has no compact LP.  Its optimality has a compact certificate: ``T``
    is a maximum spanning tree iff for every non-tree edge ``e'`` and every
    tree edge ``e`` on the tree path joining the ends of ``e'``, ``s_e >= s_e'``
    (cutting ``e`` splits the tree, and ``e'`` crosses the cut).  With
    ``s = Phi w + c`` (loss-augmented scores) these are linear inequalities in
    ``w``, one per (non-tree edge, path edge) pair: at most ``(L - n + 1)(n - 1)``
    rows, no auxiliary variables.  The certificate is exact.

    An example ``x`` is an array (n, n, d) of symmetric edge features of the
    complete graph on ``n >= 2`` nodes, or a pair ``(features, mask)`` whose
    boolean symmetric (n, n) ``mask`` restricts it to a sparse, connected graph.
    An output ``y`` is the 0/1 symmetric (n, n) adjacency of a spanning tree.
    Parts are the edges ``j < k`` (row-major); the loss is the number of true
    tree edges missing from ``y``.

    Notes
    -----
    Prediction uses :func:`scipy.sparse.csgraph.minimum_spanning_tree` on
    shifted negated scores (all spanning trees have ``n - 1`` edges, so a
    shift does not change the optimum).

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_spanning_tree
    >>> X, Y, w, model = make_spanning_tree(n_samples=10, n_nodes=5, random_state=0)
    >>> learner = structlp.MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    >>> int(learner.predict(X[:1])[0].sum()) // 2      # n_nodes - 1 tree edges
    4
    """

    formulations = ("certificate",)

    def check_x(self, x):
        g = super().check_x(x)
        if g is not x and n_components(g.n_nodes, g.u, g.v) > 1:
            raise InvalidInputError(
                f"The graph of x is disconnected ({n_components(g.n_nodes, g.u, g.v)} "
                "connected components in its mask): it has no spanning tree.")
        return g

    def _check_structure(self, g, mu):
        n = g.n_nodes
        on = mu > 0.5
        k = int(on.sum())
        comps = n_components(n, g.u[on], g.v[on])
        if k != n - 1 or comps != 1:
            what = ("contains a cycle" if k >= n or (k == n - 1 and comps > 1)
                    else f"is disconnected ({comps} components)")
            raise InvalidOutputError(
                f"y is not a spanning tree of the {n}-node graph: it has {k} edges "
                f"(a spanning tree has {n - 1}) and {what}.")

    def inference(self, x, scores):
        g = self.check_x(x)
        s = np.asarray(scores, dtype=float)
        cost = s.max() - s + 1.0  # > 0: csgraph treats 0 as "no edge"
        A = sp.csr_array((cost, (g.u, g.v)), shape=(g.n_nodes, g.n_nodes))
        T = sp.coo_array(minimum_spanning_tree(A))
        y = np.zeros((g.n_nodes, g.n_nodes), dtype=int)
        y[T.row, T.col] = 1
        y[T.col, T.row] = 1
        return y

    def certificate_rows(self, x, mu_true):
        g = self.check_x(x)
        Gs, _ = spanning_tree_rows(g.n_nodes, g.u, g.v, np.asarray(mu_true) > 0.5)
        return Gs, sp.csr_array((Gs.shape[0], 0))
