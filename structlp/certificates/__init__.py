"""Certificate formulations (Taskar et al. 2005, §5) and the graph helpers they share.

For some output spaces (spanning trees, non-bipartite perfect matchings) no
compact LP describes loss-augmented inference, so the min-max formulation does
not apply.  The *optimality of the true output* still has a compact
certificate: linear constraints, jointly in the weights ``w`` and auxiliary
variables ``nu_i``, that hold iff (or, for general matchings, only if... see
below) ``y_i`` maximizes the loss-augmented scores

.. math::

    s_i(w) = \\Phi_i w + c_i \\qquad (\\text{shape } (L_i,)),

where ``loss_i(mu) = d_i + c_i . mu``.  Every structure supplies the sparse
matrices ``G^s_i`` (rows × parts) and ``G^nu_i`` (rows × auxiliary variables)
through ``certificate_rows(x, mu_true)``: the rows
``G^s_i s + G^nu_i nu_i >= 0`` hold for some ``nu_i`` only if ``y_i``
maximizes ``s . mu`` (or, as a :class:`CertificateRows`, rows over the
certificate's own parts ``t = P_i s``, e.g. the edges of a graph copy).
Training puts a slack on the (certificate) part scores
(:class:`Certificate`, ``slack="two_sided"`` by default) and is, for
``P_i = I``, the single QP

.. math::

    \\min_{w,\\zeta\\ge 0,\\nu}\\; \\tfrac12\\|w\\|^2 + C\\sum_i \\mathbf 1^T\\zeta_i
    \\quad\\text{s.t.}\\quad G^s_i(\\Phi_i w + c_i + D_i\\zeta_i) + G^\\nu_i \\nu_i \\ge 0
    \\quad\\forall i,

whose slack ``1^T zeta_i`` (``1^T zeta_i / k_i`` over certificate parts of
multiplicity ``k_i``) bounds the structured hinge of example ``i`` from
above (see :class:`Certificate` for the proof, for ``slack="part"`` and for
the paper's ``slack="shared"``, which does not and collapses to ``w = 0``
under label noise).

* **Spanning tree** (:func:`spanning_tree_rows`): for every non-tree edge ``e'``
  and every tree edge ``e`` on the tree path joining the ends of ``e'``,
  ``s_e - s_e' >= 0``.  No auxiliary variables.  Exact.
* **Matching and perfect matching** (:func:`odd_set_rows`; the default of
  :class:`~structlp.structures.Matching`, ``certificate="odd_sets"`` of
  :class:`~structlp.structures.PerfectMatching`): Edmonds' odd-set certificate.  Node potentials ``pi`` and potentials
  ``z_S >= 0`` of the odd sets on which the matching is tight, with
  ``pi_j + pi_k + sum_{S ni j,k} z_S >= s_jk`` for every edge, equality on the
  matching (and, for matchings, ``pi >= 0``, zero at unmatched nodes, through
  score-0 *unmatched-node parts*): LP duality over Edmonds' matching polytope,
  so **exact on every graph**.  Its size grows with the number of tight odd
  sets, ``sum_j C(m, j)(n - 2j)`` for a matching of ``m`` pairs (70 for a
  perfect matching of 10 nodes, whose complementary sets are one constraint),
  bounded by a budget (``max_odd_sets``) beyond which it is sufficient only.
* **Perfect matching** (:func:`alternating_cycle_rows`, Taskar Eq. 13,
  ``certificate="alternating_cycle"``): edge
  lengths ``l_e = s_e`` on the matching ``M``, ``l_e = -s_e`` off it, and node
  potentials ``d0_j, d1_j`` with ``l_jk >= d0_k - d1_j, l_jk >= d0_j - d1_k``
  for ``jk`` not in ``M`` and ``l_jk >= d1_k - d0_j, l_jk >= d1_j - d0_k`` for
  ``jk`` in ``M``.  Potentials exist iff the *state graph* (node ``j`` in state
  0 or 1 = the last edge was off / on ``M``) has no negative cycle, i.e. iff
  no **closed alternating walk** has negative length.  On bipartite graphs
  every closed alternating walk splits into alternating cycles, so the
  certificate is exact (Edmonds).  **On general graphs it is sufficient but
  not necessary**: a closed alternating walk may run around an odd cycle
  twice, and such a walk can be negative while ``M`` is optimal
  (:func:`odd_cycle_counterexample` builds one).  The certificate QP is then
  a conservative program: its feasible set of ``w`` is a subset of the exact
  one, so with vanishing slacks its objective is >= the exact objective.
* **Matching** (not necessarily perfect, ``certificate="alternating_cycle"``):
  the graph-copy reduction (:func:`graph_copy`): copy the graph, join each
  node to its copy by a zero-score edge, mirror the matching and match
  unmatched nodes to their copies; then the perfect-matching certificate on
  the copy graph, whose edges (node-to-copy edges included) are the
  certificate's parts (:class:`CertificateRows`).

Exact min-max alternatives: :class:`~structlp.structures.BipartiteMatching`
(``formulation="minmax"``; its certificate with the per-part slacks gives
the same ``w`` on any data, see :class:`Certificate`) and
:class:`~structlp.structures.SpanningTree` (``formulation="minmax"`` through a
compact extended formulation).  :class:`~structlp.learners.cutting_plane.CuttingPlaneLearner`
solves the exact problem for every structure.
"""

from .alternating_cycle import (alternating_cycle_rows, graph_copy, odd_cycle_counterexample,
                                potentials_exist)
from .base import SLACKS, Certificate, CertificateRows, check_slack, sign_rows, slack_columns
from .graphs import (SYMMETRY_RTOL, Graph, GraphStructure, check_adjacency, check_graph,
                     degrees, n_components)
from .odd_sets import MAX_ODD_SETS, n_tight_odd_sets, odd_set_rows, tight_odd_sets
from .spanning_tree import spanning_tree_rows

__all__ = ["Certificate", "CertificateRows", "Graph", "GraphStructure", "MAX_ODD_SETS",
           "SLACKS", "SYMMETRY_RTOL", "alternating_cycle_rows", "check_adjacency",
           "check_graph", "check_slack", "degrees", "graph_copy", "n_components",
           "n_tight_odd_sets", "odd_cycle_counterexample", "odd_set_rows", "potentials_exist",
           "sign_rows", "slack_columns", "spanning_tree_rows", "tight_odd_sets"]
