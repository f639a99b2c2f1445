"""structlp: structured prediction as convex programs.

Declare a structured model (:class:`StructuredModel`: parts, features, output
polytope, loss), and :class:`MaxMarginLearner` compiles a whole training set
into one convex QP, solves it with any installed cvxpy solver, and predicts.
"""

from . import structures
from .exceptions import (ConvergenceWarning, DeclarationError, FractionalSolutionError,
                         InvalidInputError, InvalidOutputError, InvalidParameterError, NotFittedError,
                         PersistenceError, SolverError, StructlpError)
from .cutting_plane import CuttingPlaneLearner
from .frank_wolfe import FrankWolfeLearner
from .learner import MaxMarginLearner
from .model import StructuredModel
from .parallel import BackendError
from .persistence import clone, load, save
from .polytope import Polytope
from .solvers import installed_solvers
from .subgradient import SubgradientLearner

__version__ = "0.1.0"

__all__ = [
    "MaxMarginLearner", "CuttingPlaneLearner", "FrankWolfeLearner", "SubgradientLearner",
    "StructuredModel", "BackendError", "Polytope", "structures", "installed_solvers",
    "StructlpError", "InvalidParameterError", "InvalidInputError", "InvalidOutputError",
    "DeclarationError", "SolverError", "FractionalSolutionError", "NotFittedError",
    "ConvergenceWarning", "PersistenceError", "save", "load", "clone",
]
