"""structlp: structured prediction as convex programs.

Declare a structured model (:class:`StructuredModel`: parts, features, output
polytope, loss), and :class:`MaxMarginLearner` compiles a whole training set
into one convex QP, solves it with any installed cvxpy solver, and predicts.

The names below are imported on first use (PEP 562), so that ``import structlp``
does not load cvxpy until a learner or a model is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .utils.compat import install_aliases
from .utils.lazy import attach
from .exceptions import (ConvergenceWarning, DataNotFoundError, DeclarationError,
                         FractionalSolutionError, InvalidInputError, InvalidOutputError,
                         InvalidParameterError, NotFittedError, OracleError, PersistenceError,
                         RelaxationWarning, SolverError, StructlpError)

from .utils.version import __version__

#: public name -> submodule defining it (imported on first access)
_LAZY = {
    "CuttingPlaneLearner": "learners",
    "FrankWolfeLearner": "learners",
    "MaxMarginLearner": "learners",
    "StructuredModel": "model",
    "BackendError": "parallel",
    "Polytope": "polytope",
    "installed_solvers": "solvers",
    "SubgradientLearner": "learners",
    "ShardedFrankWolfeLearner": "learners",
    "make_scorer": "model_selection",
    "PartTransformer": "model_selection",
    "save": "persistence",
    "load": "persistence",
    "clone": "persistence",
    "maximize": "inference",
    "LatentSSVM": "latent",
}
#: subpackages and modules reachable as ``structlp.NAME`` without an explicit import
_SUBMODULES = ("structures", "agm", "sequence", "datasets", "certificates", "formulations",
               "compiler", "inference", "kernels", "dual", "solvers", "polytope", "model",
               "learners", "graphical", "utils", "parallel", "cli", "model_selection",
               "exceptions", "persistence", "part_features")

__all__ = [
    "MaxMarginLearner", "CuttingPlaneLearner", "FrankWolfeLearner", "SubgradientLearner",
    "ShardedFrankWolfeLearner", "StructuredModel", "BackendError", "Polytope", "structures",
    "installed_solvers",
    "StructlpError", "InvalidParameterError", "InvalidInputError", "InvalidOutputError",
    "DeclarationError", "OracleError", "SolverError", "FractionalSolutionError", "NotFittedError",
    "ConvergenceWarning", "RelaxationWarning", "PersistenceError", "DataNotFoundError", "save",
    "load", "clone",
    "make_scorer", "PartTransformer", "maximize", "LatentSSVM",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import structures
    from .learners import (CuttingPlaneLearner, FrankWolfeLearner, MaxMarginLearner,
                           ShardedFrankWolfeLearner, SubgradientLearner)
    from .model import StructuredModel
    from .model_selection import PartTransformer, make_scorer
    from .parallel import BackendError
    from .persistence import clone, load, save
    from .polytope import Polytope
    from .solvers import installed_solvers
    from .inference import maximize
    from .latent import LatentSSVM


__getattr__, __dir__ = attach(__name__, _LAZY, _SUBMODULES)
install_aliases()
