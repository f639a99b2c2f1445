"""Built-in structured models.

The names below are imported on first use (PEP 562): ``structlp.structures.TreeLabeling``
loads only its own module (not the adversarial graphical models, POT or networkx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils.lazy import attach

__all__ = ["BipartiteMatching", "JunctionTreeLabeling", "Matching", "PerfectMatching",
           "SpanningTree", "TreeLabeling"]

__getattr__, __dir__ = attach(__name__, {
    "BipartiteMatching": "bipartite_matching",
    "JunctionTreeLabeling": "junction_tree_labeling",
    "Matching": "matching",
    "PerfectMatching": "perfect_matching",
    "SpanningTree": "spanning_tree",
    "TreeLabeling": "tree_labeling",
})

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .bipartite_matching import BipartiteMatching
    from .junction_tree_labeling import JunctionTreeLabeling
    from .matching import Matching
    from .perfect_matching import PerfectMatching
    from .spanning_tree import SpanningTree
    from .tree_labeling import TreeLabeling
