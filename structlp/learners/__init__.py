"""The max-margin learners: one joint QP, Frank–Wolfe, cutting planes, subgradient.

* :class:`MaxMarginLearner` (:mod:`~structlp.learners.joint_qp`): the whole training set
  as one convex QP (Taskar et al. 2005), primal or kernelized dual, solved by a cvxpy solver.
* :class:`FrankWolfeLearner` (:mod:`~structlp.learners.frank_wolfe`): block-coordinate
  Frank–Wolfe on the dual with a certified duality gap, one oracle call per step.
* :class:`CuttingPlaneLearner` (:mod:`~structlp.learners.cutting_plane`): one-slack and
  n-slack cutting planes over a dual active-set master (:mod:`~structlp.learners.master`).
* :class:`SubgradientLearner` (:mod:`~structlp.learners.subgradient`): stochastic
  subgradient descent on the structured hinge.
* :class:`ShardedFrankWolfeLearner` (:mod:`~structlp.learners.sharded`): Frank–Wolfe on a
  training set sharded across a dask cluster, each worker holding only its partitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils.lazy import attach

__all__ = ["MaxMarginLearner", "FrankWolfeLearner", "CuttingPlaneLearner", "SubgradientLearner",
           "ShardedFrankWolfeLearner"]

__getattr__, __dir__ = attach(__name__, {
    "MaxMarginLearner": "joint_qp",
    "FrankWolfeLearner": "frank_wolfe",
    "CuttingPlaneLearner": "cutting_plane",
    "SubgradientLearner": "subgradient",
    "ShardedFrankWolfeLearner": "sharded",
}, submodules=("master",))

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .cutting_plane import CuttingPlaneLearner
    from .frank_wolfe import FrankWolfeLearner
    from .joint_qp import MaxMarginLearner
    from .sharded import ShardedFrankWolfeLearner
    from .subgradient import SubgradientLearner
