"""The adversary's polytopes: a marginal polytope plus the node games' epigraph.

The AGM's inner problem (Fathony et al. 2018, Eq. 7) maximizes over the marginals of the
adversary's distribution and one value per node game; these are its feasible sets, on trees
(the local polytope, :func:`game_polytope`) and on junction trees (the clique polytope,
:func:`clique_game_polytope`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..graphical.junction import (GraphExample, clique_polytope_rows, encode_cliques,
                                  encode_pairwise)
from ..graphical.trees import local_polytope_rows, part_features
from ..polytope import Polytope


def game_polytope(ex, k, node_losses):
    """Local polytope plus the game epigraph: parts ``(mu, v)`` with ``v_i <= (L_i r_i)_j``.

    Parameters
    ----------
    node_losses : ndarray (n, k, k), the (weighted, non-negative) loss matrix of each node
    """
    E, e = local_polytope_rows(ex, k)
    n = ex.n_nodes
    # the node marginals are the first n k parts
    return game_epigraph(E, e, sp.eye_array(n * k, E.shape[1], format="csr"), node_losses)


def game_epigraph(E, e, R, node_losses):
    """A marginal polytope ``{mu >= 0 : E mu = e}`` plus the node games' epigraph.

    Parts ``(mu, v)`` with ``v_i <= (L_i r_i)_j`` for every node ``i`` and label ``j``,
    where ``r = R mu`` stacks the node marginals (rows ``i k .. i k + k - 1``); ``v_i`` is
    boxed in ``[0, max L_i]``.  Shared by the tree (local) and junction-tree (clique)
    polytopes.

    Parameters
    ----------
    E : sparse (n_eq, L); e : ndarray (n_eq,)
    R : sparse (n k, L), the node marginals of the parts
    node_losses : ndarray (n, k, k)
    """
    n, k = node_losses.shape[0], node_losses.shape[1]
    L_parts = E.shape[1]
    # block diagonal of the n (k, k) loss matrices, from the nonzeros by index arithmetic
    i, j, b = np.nonzero(node_losses)
    Lblock = sp.csr_array((node_losses[i, j, b], (i * k + j, i * k + b)), shape=(n * k, n * k))
    A = sp.hstack([-(Lblock @ R), sp.kron(sp.eye_array(n), np.ones((k, 1)))], format="csr")
    E = sp.hstack([E, sp.csr_array((E.shape[0], n))], format="csr")
    vmax = node_losses.reshape(n, -1).max(axis=1)
    lb = np.zeros(L_parts + n)
    ub = np.concatenate([np.ones(L_parts), np.maximum(vmax, 0.0)])
    return Polytope(A=A, b=np.zeros(n * k), E=E, e=e, lb=lb, ub=ub)


def clique_game_polytope(gx, k, node_losses):
    """Clique polytope plus the game epigraph: parts ``(mu, v)``, ``v_i <= (L_i r_i)_j``.

    ``r_i`` is node ``i``'s marginal (rows ``i k .. i k + k - 1`` of ``P mu``).

    Parameters
    ----------
    node_losses : ndarray (n, k, k)
    """
    E, e = clique_polytope_rows(gx, k)
    return game_epigraph(E, e, gx.tables(k).P[:gx.n_nodes * k], node_losses)


def lp_encode(ex, y, k):
    """Part vector of ``y`` in the inner LP's layout (pairwise for trees, cliques for graphs)."""
    return encode_cliques(ex, y, k) if isinstance(ex, GraphExample) else encode_pairwise(ex, y, k)


def lp_features(ex, k):
    """Feature matrix of the inner LP's marginal parts (pairwise for trees, ``P^T Phi`` for graphs)."""
    F = part_features(ex, k)
    return ex.tables(k).PT @ F if isinstance(ex, GraphExample) else F


def marginal_rows(ex, k):
    """Equality rows of the marginal polytope of ``ex`` and the node-part selector.

    Returns ``(E, e, N)`` with ``N`` (n_parts, n k) the sparse map from node
    marginals' coefficients to the parts (identity on the node parts of a tree,
    ``P^T`` restricted to node rows for a graph).
    """
    n = ex.n_nodes
    if isinstance(ex, GraphExample):
        E, e = clique_polytope_rows(ex, k)
        return E, e, sp.csr_array(ex.tables(k).PT[:, :n * k])
    E, e = local_polytope_rows(ex, k)
    return E, e, sp.eye_array(E.shape[1], n * k, format="csr")
