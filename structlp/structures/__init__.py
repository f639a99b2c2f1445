"""Built-in structured models."""

from .bipartite_matching import BipartiteMatching

__all__ = ["BipartiteMatching"]
