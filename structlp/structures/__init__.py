"""Built-in structured models.

The names below are imported on first use (PEP 562): ``structlp.structures.TreeLabeling``
loads only its own module (not the adversarial graphical models, POT or networkx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils.lazy import attach

__all__ = ["Arborescence", "BipartiteMatching", "GraphLabeling", "JunctionTreeLabeling",
           "Matching", "MultiLabel", "PerfectMatching", "SemiMarkov", "SpanningTree",
           "TreeLabeling", "arc_index", "check_heads", "check_segments", "chow_liu_tree",
           "flow_polytope", "grid_edges", "grid_example", "segment_polytope"]

__getattr__, __dir__ = attach(__name__, {
    "Arborescence": "arborescence", "arc_index": "arborescence", "check_heads": "arborescence",
    "flow_polytope": "arborescence",
    "GraphLabeling": "graph_labeling", "grid_edges": "graph_labeling",
    "grid_example": "graph_labeling",
    "MultiLabel": "multilabel", "chow_liu_tree": "multilabel",
    "BipartiteMatching": "bipartite_matching",
    "JunctionTreeLabeling": "junction_tree_labeling",
    "Matching": "matching",
    "PerfectMatching": "perfect_matching",
    "SemiMarkov": "semi_markov", "check_segments": "semi_markov",
    "segment_polytope": "semi_markov",
    "SpanningTree": "spanning_tree",
    "TreeLabeling": "tree_labeling",
})

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .arborescence import Arborescence, arc_index, check_heads, flow_polytope
    from .graph_labeling import GraphLabeling, grid_edges, grid_example
    from .multilabel import MultiLabel, chow_liu_tree
    from .bipartite_matching import BipartiteMatching
    from .junction_tree_labeling import JunctionTreeLabeling
    from .matching import Matching
    from .perfect_matching import PerfectMatching
    from .semi_markov import SemiMarkov, check_segments, segment_polytope
    from .spanning_tree import SpanningTree
    from .tree_labeling import TreeLabeling
