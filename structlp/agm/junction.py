"""Moved: the junction-tree helpers are in :mod:`structlp.graphical.junction` (imported here so
that the import paths of structlp 0.1.0 keep working)."""

import warnings

from ..graphical.junction import (  # noqa: F401
    CliqueTables, GraphExample, MAX_TREEWIDTH, as_tree, check_edges, check_example,
    check_graph_example, clique_polytope, clique_polytope_rows, clique_scores,
    encode_cliques, encode_pairwise, graph, graph_score, jt_marginals, jt_max_sum,
    jt_max_sum_cliques, junction_tree, minor_min_width, pairwise_marginals, skip_chain,
    tree_as_graph)
from .polytopes import clique_game_polytope  # noqa: F401

warnings.warn("structlp.agm.junction is now structlp.graphical.junction and "
              "structlp.agm.polytopes; the old import path will be removed in a future release.",
              DeprecationWarning, stacklevel=2)
