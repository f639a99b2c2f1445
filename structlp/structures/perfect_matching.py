"""Perfect matchings of general graphs, learned through alternating-cycle certificates."""

from __future__ import annotations

import numbers
from typing import Any, List, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_choice, check_scalar
from ..certificates import (MAX_ODD_SETS, CertificateRows, GraphStructure,
                            alternating_cycle_rows, degrees, graph_copy, odd_set_rows)
from ..exceptions import InvalidInputError, InvalidOutputError

#: The certificates of the matching structures (each structure's default is its __init__'s).
MATCHING_CERTIFICATES = ("alternating_cycle", "odd_sets")


def max_weight_matching(g: Any, scores: ArrayLike, perfect: bool) -> Optional[np.ndarray]:
    """Maximum-weight (perfect) matching of graph ``g`` by networkx's blossom algorithm.

    Returns the (n, n) 0/1 adjacency, or None when ``perfect`` and no perfect
    matching exists.
    """
    import networkx as nx
    s = np.asarray(scores, dtype=float)
    G = nx.Graph()
    G.add_nodes_from(range(g.n_nodes))
    if perfect:
        # a constant shift changes every perfect matching by the same amount
        wts = s - (s.min() if len(s) else 0.0) + 1.0
        keep = np.ones(len(s), dtype=bool)
    else:
        wts, keep = s, s > 0
    G.add_weighted_edges_from(zip(g.u[keep].tolist(), g.v[keep].tolist(), wts[keep].tolist()))
    M = nx.max_weight_matching(G, maxcardinality=perfect)
    if perfect and 2 * len(M) != g.n_nodes:
        return None
    y = np.zeros((g.n_nodes, g.n_nodes), dtype=int)
    for a, b in M:
        y[a, b] = y[b, a] = 1
    return y


def k_best_matchings(g: Any, scores: ArrayLike, k: int, perfect: bool
                     ) -> Tuple[List[np.ndarray], np.ndarray]:
    """The ``k`` best (perfect) matchings of graph ``g``: Lawler's partitioning over the
    edges (each fixed in or out), each subproblem one blossom algorithm
    (:func:`networkx.max_weight_matching`) on the graph without the fixed-in edges'
    endpoints and the fixed-out edges.

    Returns
    -------
    Y : list of at most k (n, n) 0/1 adjacencies; values : ndarray, non-increasing
    """
    import networkx as nx
    from ..inference.kbest import lawler, oracle_branch
    s = np.asarray(scores, dtype=float)
    L, n = len(s), g.n_nodes
    u, v = np.asarray(g.u), np.asarray(g.v)
    index = {(int(min(a, b)), int(max(a, b))): e for e, (a, b) in enumerate(zip(u, v))}

    def solve(y, j, F):
        val = np.asarray(y[:j + 1], dtype=float).copy()
        if F:
            if len(F) == 2:
                return None
            val[j] = 1.0 - next(iter(F))
        else:
            val = val[:j]
        inc = np.flatnonzero(val == 1.0)
        used = np.concatenate([u[inc], v[inc]])
        if len(np.unique(used)) < len(used):          # the fixed-in edges share a node
            return None
        free = np.arange(len(val), L)
        free = free[~np.isin(u[free], used) & ~np.isin(v[free], used)]
        if not perfect:
            free = free[s[free] > 0]
        G = nx.Graph()
        G.add_nodes_from(np.setdiff1d(np.arange(n), used).tolist())
        w = s[free] - (s.min() - 1.0 if perfect and L else 0.0)
        G.add_weighted_edges_from(zip(u[free].tolist(), v[free].tolist(), w.tolist()))
        M = nx.max_weight_matching(G, maxcardinality=perfect)
        if perfect and 2 * (len(M) + len(inc)) != n:
            return None
        mu = np.zeros(L)
        mu[inc] = 1.0
        for a, b in M:
            mu[index[(min(a, b), max(a, b))]] = 1.0
        return mu, float(s @ mu)

    found = lawler(solve(np.zeros(L), 0, frozenset()), oracle_branch(solve, L), k)
    Y = []
    for mu, _ in found:
        A = np.zeros((n, n), dtype=int)
        on = mu > 0.5
        A[u[on], v[on]] = A[v[on], u[on]] = 1
        Y.append(A)
    return Y, np.array([float(s @ mu) for mu, _ in found])


def matching_certificate_rows(model: Any, g: Any, mu_true: np.ndarray,
                              perfect: bool) -> CertificateRows:
    """The certificate rows of a (perfect) matching ``mu_true`` of graph ``g``, as
    ``model.certificate`` and ``model.max_odd_sets`` ask (validated here)."""
    owner = type(model).__name__
    kind = check_choice(model.certificate, "certificate", MATCHING_CERTIFICATES, owner)
    budget = check_scalar(model.max_odd_sets, "max_odd_sets", kind=numbers.Integral, low=0,
                          owner=owner)
    in_M = np.asarray(mu_true) > 0.5
    if kind == "odd_sets":
        return odd_set_rows(g.n_nodes, g.u, g.v, in_M, perfect, budget)
    if perfect:
        return alternating_cycle_rows(g.n_nodes, g.u, g.v, in_M, np.arange(g.n_edges),
                                      g.n_edges)
    U, V, part, in_M2 = graph_copy(g.n_nodes, g.u, g.v, in_M)
    return alternating_cycle_rows(2 * g.n_nodes, U, V, in_M2, part, g.n_edges)


class PerfectMatching(GraphStructure):
    """Perfect matchings of an undirected (general) graph, ``formulation="certificate"``.

    Inference is the maximum-weight perfect matching
    ``max_{M perfect matching} sum_{e in M} s_e`` (Edmonds' blossom algorithm;
    no compact LP).  Training uses an optimality certificate of the true
    matching (:class:`~structlp.certificates.Certificate`), by ``certificate``:

    * ``"alternating_cycle"`` (default): Taskar et al. (2005), Eq. 13, with
      edge lengths ``l_e = s_e`` on ``M`` and ``l_e = -s_e`` off ``M`` and free
      node potentials ``d0, d1`` (n each),

      .. math::

          l_{jk} \\ge d^0_k - d^1_j,\\; l_{jk} \\ge d^0_j - d^1_k \\;(jk \\notin M),\\qquad
          l_{jk} \\ge d^1_k - d^0_j,\\; l_{jk} \\ge d^1_j - d^0_k \\;(jk \\in M),

      two rows per edge and ``2n - 1`` auxiliary variables per example.
      **Sufficient but not necessary on non-bipartite graphs** (the paper's
      claim is stronger than its proof): feasible potentials exist iff no
      *closed alternating walk* has negative length, and on general graphs a
      walk can go around an odd cycle twice: e.g. two triangles
      ``{1,2,3}``, ``{0,4,5}`` joined by the matched edge ``0-1``,
      ``M = {01, 23, 45}`` of score 0, the other triangle edges of score 1,
      all other edges -10: ``M`` is the unique optimum, but the walk
      ``0-1-2-3-1-0-4-5-0`` has length -4, so this certificate rejects it
      (:func:`structlp.certificates.odd_cycle_counterexample`; the odd-set
      certificate accepts it).  About 1% of optimal perfect matchings of
      random complete 6-node graphs are rejected, and the certificate QP is
      conservative: on separable planted data its objective was 20-40%
      above the exact one, where the odd-set QP equals it.
    * ``"odd_sets"``: **Edmonds' odd-set certificate, exact on every graph**
      (:func:`~structlp.certificates.odd_set_rows`).  With node potentials
      ``pi`` (n,) and potentials ``z_S >= 0`` of the odd sets ``S`` on which
      ``M`` is tight (``|S| = 2j + 1`` nodes holding ``j`` pairs of ``M``),

      .. math::

          \\pi_j + \\pi_k + \\sum_{S \\ni j,k} z_S \\ge s_{jk}\\;\\forall jk,
          \\qquad \\text{with equality for } jk \\in M,

      which hold for some ``(pi, z)`` iff ``M`` is optimal (LP duality over
      Edmonds' perfect-matching polytope and complementary slackness).  ``S``
      and ``V - S`` give one constraint here, so only the sets without node 0
      and of fewer than ``n - 1`` nodes enter: ``sum_j C(m - 1, j)(n - 2j - 1)``
      sets for ``n = 2m`` nodes, 6 (n = 6), 70 (n = 10), 1,008 (n = 16); per
      example ``E - m + Z`` rows and ``m + Z`` auxiliary variables (``E``
      edges, ``Z`` sets; the equalities are eliminated).  Sets enter by
      increasing size within ``max_odd_sets`` (default 5,000: all of them up
      to n = 18); with fewer the rows remain sufficient (the slack still
      bounds the hinge) but not necessary.  Not the default: its primal QPs
      solved on every training set tried, but its kernelized dual ended
      ``optimal_inaccurate`` in CLARABEL (duality gap stalled at about 2e-8
      against the 1e-8 asked) on 14 of 64 noisy RBF fits (n = 8, 10) and on
      2 of 6 disulfide grid points, where the alternating cycles solved all.

    With the default per-part slacks (``slack="two_sided"`` or ``"part"``)
    each example's slack bounds its structured hinge, so the objective is
    >= the exact max-margin objective (:class:`~structlp.learners.cutting_plane.CuttingPlaneLearner`)
    on any data; a certificate's exactness makes the bound feasible with less
    slack but does not make it equal the hinge (only square bipartite
    assignments are that).  How far above the optimum the exact objective at the
    certificate's ``w`` lands is measured by ``benchmarks/bench_certificates.py``
    (the documentation's benchmarks page).

    Parameters
    ----------
    certificate : {"alternating_cycle", "odd_sets"}, default "alternating_cycle"
        The certificate of ``formulation="certificate"`` (checked at fit time).
    max_odd_sets : int >= 0, default 5000
        Budget of tight odd sets per example (``"odd_sets"``); 0 leaves only
        the degree constraints (the fractional-matching relaxation).

    An example ``x`` is an array (n, n, d) of symmetric edge features, ``n``
    even, or a pair ``(features, mask)`` (boolean symmetric (n, n) mask of a
    graph that has a perfect matching).  An output ``y`` is the 0/1 symmetric
    (n, n) adjacency of a perfect matching.  Parts are the edges ``j < k``; the
    loss is the number of true edges missing from ``y``.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_perfect_matching
    >>> X, Y, w, model = make_perfect_matching(n_samples=10, n_nodes=6, random_state=0)
    >>> learner = structlp.MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    >>> learner.predict(X[:1])[0].sum(axis=0).tolist()   # every node matched once
    [1, 1, 1, 1, 1, 1]
    """

    formulations = ("certificate",)

    def __init__(self, certificate: str = "alternating_cycle",
                 max_odd_sets: int = MAX_ODD_SETS) -> None:
        self.certificate = certificate
        self.max_odd_sets = max_odd_sets

    def check_x(self, x: Any) -> Any:
        g = super().check_x(x)
        if g is x:
            return g
        n = g.n_nodes
        if n % 2:
            raise InvalidInputError(
                f"x of PerfectMatching has an odd number of nodes ({n}): no perfect matching "
                "exists.")
        complete = g.n_edges == n * (n - 1) // 2
        if not complete and max_weight_matching(g, np.zeros(g.n_edges), perfect=True) is None:
            raise InvalidInputError(
                "The graph of x (its mask) has no perfect matching.")
        return g

    def _check_structure(self, g, mu):
        deg = degrees(g, mu)
        if np.any(deg != 1):
            j = int(np.flatnonzero(deg != 1)[0])
            raise InvalidOutputError(
                f"y is not a perfect matching: node {j} has degree {deg[j]} (every node of a "
                "perfect matching has degree 1).")

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        return max_weight_matching(self.check_x(x), scores, perfect=True)

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best perfect matchings: Lawler over the edges, the blossom algorithm
        per subproblem (:func:`structlp.inference.k_best`)."""
        return k_best_matchings(self.check_x(x), scores, k, perfect=True)

    def certificate_rows(self, x: Any, mu_true: np.ndarray) -> CertificateRows:
        g = self.check_x(x)
        return matching_certificate_rows(self, g, mu_true, perfect=True)
