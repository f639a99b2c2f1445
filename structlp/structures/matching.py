"""Matchings (not necessarily perfect) of general graphs, via the graph-copy reduction."""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from ..certificates import MAX_ODD_SETS, CertificateRows, GraphStructure, degrees
from ..exceptions import InvalidOutputError
from .perfect_matching import k_best_matchings, matching_certificate_rows, max_weight_matching


class Matching(GraphStructure):
    """Matchings of an undirected graph (every node has degree <= 1), ``formulation="certificate"``.

    Inference is the maximum-weight matching ``max_{M matching} sum_{e in M} s_e``
    (blossom algorithm; the empty matching is allowed, so edges of negative
    score are never chosen).  Training certifies the true matching
    (:class:`~structlp.certificates.Certificate`), by ``certificate``:

    * ``"odd_sets"`` (default): Edmonds' odd-set certificate, **exact on every
      graph** (:func:`~structlp.certificates.odd_set_rows`; see
      :class:`PerfectMatching`), with one *unmatched-node part* ``r_j`` per
      node (score 0: ``x(delta(j)) + r_j = 1``), so that ``pi_j >= t_{r_j}``
      with equality where ``M`` leaves ``j`` unmatched.  The certificate's
      parts are the edges and these ``n`` node parts, each with its own slack
      (multiplicity 1).  On noisy random training sets (8 examples, C = 1; 30
      sets at n = 4, 5, 20 at n = 6) the exact objective at the two-sided
      certificate's ``w`` was at most 0.24%, 0.60% and 0.31% above the
      optimum (``tests/test_certificates_slack.py``); without the node parts
      it was up to 5.6% (n = 4).
    * ``"alternating_cycle"``: the graph-copy reduction of Taskar et al.
      (2005), §5: copy the graph (nodes ``n..2n-1``), join every node ``j``
      to its copy ``j + n`` by an edge of score 0 (zero features, zero loss),
      mirror the matching in the copy and match every unmatched node to its
      copy; matchings of the graph then correspond to perfect matchings of
      the copy graph of twice the score, and the alternating-cycle
      certificate of :class:`PerfectMatching` on the copy graph
      (``2 (2L + n)`` rows, ``4n - 1`` potentials per example) certifies the
      matching.  The copy graph is not bipartite in general, so this
      certificate is sufficient but not necessary.  Its parts are the copy
      graph's edges (multiplicity 2: each edge of the graph is there twice),
      the node-to-copy edges included, each with a slack at cost 1/2.  On the
      same noisy sets the exact objective at its ``w`` was up to 5.5%, 5.1%
      and 1.6% above the optimum (n = 4, 5, 6).

    Parameters
    ----------
    certificate : {"odd_sets", "alternating_cycle"}, default "odd_sets"
        The certificate of ``formulation="certificate"`` (checked at fit time).
    max_odd_sets : int >= 0, default 5000
        Budget of tight odd sets per example (``"odd_sets"``; see
        :class:`PerfectMatching`).

    An example ``x`` is an array (n, n, d) of symmetric edge features, or a
    pair ``(features, mask)``; an output ``y`` is the 0/1 symmetric (n, n)
    adjacency of a matching.  The loss is the number of true edges missing.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_matching
    >>> X, Y, w, model = make_matching(n_samples=10, n_nodes=6, random_state=0)
    >>> learner = structlp.CuttingPlaneLearner(model, C=1.0).fit(X, Y)
    >>> bool(learner.predict(X[:1])[0].sum(axis=0).max() <= 1)   # no node matched twice
    True
    """

    formulations = ("certificate",)

    def __init__(self, certificate: str = "odd_sets", max_odd_sets: int = MAX_ODD_SETS) -> None:
        self.certificate = certificate
        self.max_odd_sets = max_odd_sets

    def _check_structure(self, g, mu):
        deg = degrees(g, mu)
        if np.any(deg > 1):
            j = int(np.flatnonzero(deg > 1)[0])
            raise InvalidOutputError(
                f"y is not a matching: node {j} has degree {deg[j]} (at most 1 allowed).")

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        return max_weight_matching(self.check_x(x), scores, perfect=False)

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[np.ndarray], np.ndarray]:
        """The ``k`` best matchings: Lawler over the edges, the blossom algorithm per
        subproblem (:func:`structlp.inference.k_best`)."""
        return k_best_matchings(self.check_x(x), scores, k, perfect=False)

    def certificate_rows(self, x: Any, mu_true: np.ndarray) -> CertificateRows:
        g = self.check_x(x)
        return matching_certificate_rows(self, g, mu_true, perfect=False)
