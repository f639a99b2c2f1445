"""The table of structlp's classes that :func:`structlp.load` may instantiate."""

from __future__ import annotations

import importlib
from typing import Dict, Optional

from ..utils.compat import current_path


#: Every class of structlp's that :func:`load` instantiates, by import path: a fixed table, so
#: that loading never depends on what the process happens to have imported.  (A test walks
#: the package and checks that this table lists every persistable class it defines.)
LIBRARY_CLASSES = (
    "structlp.agm.crf.JunctionTreeCRF",
    "structlp.agm.crf.TreeCRF",
    "structlp.agm.game_model.AdversarialGame",
    "structlp.agm.model.AdversarialGraphicalModel",
    "structlp.base.BaseEstimator",
    "structlp.certificates.graphs.GraphStructure",
    "structlp.learners.cutting_plane.CuttingPlaneLearner",
    "structlp.learners.frank_wolfe.FrankWolfeLearner",
    "structlp.learners.joint_qp.MaxMarginLearner",
    "structlp.learners.sharded.ShardedFrankWolfeLearner",
    "structlp.learners.subgradient.SubgradientLearner",
    "structlp.latent.cccp.LatentSSVM",
    "structlp.latent.models.LatentGraphLabeling",
    "structlp.model.StructuredModel",
    "structlp.model_selection.PartTransformer",
    "structlp.polytope.Polytope",
    "structlp.sequence.features.BigramFeatures",
    "structlp.sequence.features.EmissionFeatures",
    "structlp.sequence.features.FunctionFeatures",
    "structlp.sequence.features.MarkovFeatures",
    "structlp.sequence.features.StackedFeatures",
    "structlp.sequence.learner.SoftmaxMarginLearner",
    "structlp.sequence.losses.EditDistance",
    "structlp.sequence.losses.HammingLoss",
    "structlp.sequence.losses.NGramLoss",
    "structlp.sequence.losses.SequenceLoss",
    "structlp.sequence.losses.SmithWaterman",
    "structlp.sequence.losses.ZeroLoss",
    "structlp.sequence.ssvm.SequenceSSVM",
    "structlp.structures.arborescence.Arborescence",
    "structlp.structures.bipartite_matching.BipartiteMatching",
    "structlp.structures.graph_labeling.GraphLabeling",
    "structlp.structures.junction_tree_labeling.JunctionTreeLabeling",
    "structlp.structures.matching.Matching",
    "structlp.structures.multilabel.MultiLabel",
    "structlp.structures.perfect_matching.PerfectMatching",
    "structlp.structures.semi_markov.SemiMarkov",
    "structlp.structures.spanning_tree.SpanningTree",
    "structlp.structures.tree_labeling.TreeLabeling",
)


def _import_class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def library_class(path: str) -> Optional[type]:
    """The structlp class saved under ``path`` (its current import path, or one written by
    an earlier release, :data:`structlp.utils.compat.MODULE_ALIASES`), or None."""
    current = current_path(path)
    return _import_class(current) if current in LIBRARY_CLASSES else None


def library_classes() -> Dict[str, type]:
    """The allow-list: import path -> class, for every estimator, model, polytope,
    sequence loss and feature map defined in structlp (:data:`LIBRARY_CLASSES`)."""
    return {path: _import_class(path) for path in LIBRARY_CLASSES}
