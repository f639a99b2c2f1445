"""The estimator contract (scikit-learn conventions, without scikit-learn).

``__init__`` only stores its arguments; ``get_params``/``set_params`` read and
write them by name; ``fit`` returns ``self``; learned attributes end in ``_``.
"""

from __future__ import annotations

import inspect
import numbers

from ._validation import check_scalar
from .exceptions import InvalidParameterError, NotFittedError


class BaseEstimator:
    """Parameter handling shared by structlp's learners."""

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep=True):
        """The constructor arguments, by name."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor arguments by name; returns self."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise InvalidParameterError(
                    f"Invalid parameter {name!r} for {type(self).__name__}; valid "
                    f"parameters are {valid}.")
            setattr(self, name, value)
        return self

    def _check_model_C_solver(self):
        """Validate the shared ``model``, ``C``, ``solver`` and ``solver_opts`` parameters.

        Returns
        -------
        C : float, solver : str, solver_opts : dict
        """
        from .model import StructuredModel
        from .solvers import check_solver, check_solver_opts
        name = type(self).__name__
        if not isinstance(self.model, StructuredModel):
            raise InvalidParameterError(
                f"The 'model' parameter of {name} must be a structlp StructuredModel; "
                f"got {type(self.model).__name__}.")
        C = check_scalar(self.C, "C", kind=numbers.Real, low=0, low_inclusive=False, owner=name)
        return C, check_solver(self.solver, owner=name), check_solver_opts(self.solver_opts,
                                                                           owner=name)

    def _check_fitted(self, attribute="coef_"):
        if not hasattr(self, attribute):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit first.")

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
