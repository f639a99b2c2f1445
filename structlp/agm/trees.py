"""Moved: the tree helpers are in :mod:`structlp.graphical.trees` (imported here so
that the import paths of structlp 0.1.0 keep working)."""

import warnings

from ..graphical.trees import (  # noqa: F401
    Forest, TreeExample, chain, check_labels, check_parents, check_scores,
    check_tree_example, encode, forest_marginals, local_polytope, local_polytope_rows,
    max_sum, n_params, node_weights_of, part_features, potentials, score, split_theta)
from .polytopes import game_epigraph, game_polytope  # noqa: F401

warnings.warn("structlp.agm.trees is now structlp.graphical.trees and structlp.agm.polytopes; "
              "the old import path will be removed in a future release.", DeprecationWarning, stacklevel=2)
