"""Built-in structured models."""

from .bipartite_matching import BipartiteMatching
from .junction_tree_labeling import JunctionTreeLabeling
from .matching import Matching
from .perfect_matching import PerfectMatching
from .spanning_tree import SpanningTree
from .tree_labeling import TreeLabeling

__all__ = ["BipartiteMatching", "JunctionTreeLabeling", "Matching", "PerfectMatching", "SpanningTree", "TreeLabeling"]
