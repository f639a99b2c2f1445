"""The estimator contract (scikit-learn conventions, without scikit-learn).

``__init__`` only stores its arguments; ``get_params``/``set_params`` read and
write them by name (``name__sub`` reaches a parameter of a nested estimator);
``fit`` returns ``self``; learned attributes end in ``_``.

scikit-learn is never imported here unless it is already importable and asked
for: :meth:`BaseEstimator.__sklearn_tags__` (the protocol of scikit-learn >= 1.6)
builds its ``Tags`` lazily, and ``_more_tags``/``_get_tags`` serve older
versions, so that ``clone``, ``cross_val_score``, ``GridSearchCV`` and
``Pipeline`` accept structlp's learners.  A structured predictor is neither a
classifier nor a regressor (``is_classifier`` and ``is_regressor`` are False,
and integer ``cv`` means plain, unstratified K-fold).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from .utils.validation import check_scalar, check_sequence_of_examples
from .compiler import stacked_scores
from .exceptions import InvalidInputError, InvalidParameterError, NotFittedError, StructlpError


def _fitted_names(obj):
    """Names of the learned state of ``obj``: attributes ending in ``_`` and private
    (``_``-prefixed) ones that are not constructor parameters."""
    params = set(obj._param_names())
    return [k for k in vars(obj) if k not in params and (k.endswith("_") or k.startswith("_"))]


def _atomic_fit(fit):
    """Wrap ``fit`` so that a fit that raises leaves the estimator exactly as before: the
    same attribute objects, with the same content (arrays changed in place are put back)."""
    @functools.wraps(fit)
    def fit_or_restore(self, *args, **kwargs):
        before = {k: getattr(self, k) for k in _fitted_names(self)}
        contents = {k: v.copy() for k, v in before.items() if isinstance(v, np.ndarray)}
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            for k in _fitted_names(self):
                if k not in before:
                    delattr(self, k)
            self.__dict__.update(before)
            for k, v in contents.items():
                if not np.array_equal(before[k], v, equal_nan=v.dtype.kind in "fc"):
                    before[k][...] = v
            raise
    fit_or_restore._structlp_atomic = True
    return fit_or_restore


#: scikit-learn's tag defaults before 1.6 (``_get_tags`` must return every key).
_LEGACY_TAG_DEFAULTS: Dict[str, Any] = {
    "array_api_support": False, "non_deterministic": False, "requires_positive_X": False,
    "requires_positive_y": False, "X_types": ["2darray"], "poor_score": False,
    "no_validation": False, "multioutput": False, "allow_nan": False, "stateless": False,
    "multilabel": False, "_skip_test": False, "_xfail_checks": False,
    "multioutput_only": False, "binary_only": False, "requires_fit": True,
    "preserves_dtype": [np.float64], "requires_y": False, "pairwise": False,
}


def _differs(value: Any, default: Any) -> bool:
    """Whether a parameter value differs from its default (for the repr)."""
    if value is default:
        return False
    if isinstance(value, numbers.Number) and isinstance(default, numbers.Number) \
            and not isinstance(value, bool) and not isinstance(default, bool):
        return not bool(value == default)
    if isinstance(default, (str, bytes, bool, tuple, type(None))) \
            and type(value) is type(default):
        try:
            return not bool(value == default)
        except (TypeError, ValueError):
            return True
    return True


class BaseEstimator:
    """Parameter handling shared by structlp's learners.

    Fitted state is plain data (see :mod:`structlp.persistence`): ``fit`` of every
    subclass is atomic (a fit that raises restores the attributes ending in ``_``
    as they were), and pickling or deep-copying drops the compiled cvxpy problem
    ``problem_`` and private (``_``-prefixed) caches, which hold solver objects.
    """

    #: Attributes never pickled, deep-copied or saved (solver objects).
    _transient = ("problem_",)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        fit = cls.__dict__.get("fit")
        if fit is not None and not getattr(fit, "_structlp_atomic", False):
            cls.fit = _atomic_fit(fit)

    def __getstate__(self):
        params = set(self._param_names())
        return {k: v for k, v in self.__dict__.items()
                if k not in self._transient and (k in params or not k.startswith("_"))}

    def __setstate__(self, state):
        self.__dict__.update(state)

    #: Neither "classifier" nor "regressor": a structured predictor (scikit-learn < 1.6).
    _estimator_type = None

    @classmethod
    def _param_names(cls) -> List[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor arguments, by name.

        With ``deep=True`` a parameter that is itself an estimator (it has
        ``get_params``, e.g. a scikit-learn transformer) also contributes its
        parameters as ``name__sub``, as scikit-learn does.
        """
        params = {name: getattr(self, name) for name in self._param_names()}
        if deep:
            for name, value in list(params.items()):
                if hasattr(value, "get_params") and not isinstance(value, type):
                    for sub, v in value.get_params().items():
                        params[f"{name}__{sub}"] = v
        return params

    def set_params(self, **params: Any) -> "BaseEstimator":
        """Set constructor arguments by name (``name__sub`` for a nested estimator); returns self."""
        valid = self._param_names()
        nested: Dict[str, Dict[str, Any]] = {}
        for name, value in params.items():
            head, sep, sub = name.partition("__")
            if head not in valid:
                raise InvalidParameterError(
                    f"Invalid parameter {head!r} for {type(self).__name__}; valid "
                    f"parameters are {valid}.")
            if sep:
                nested.setdefault(head, {})[sub] = value
            else:
                setattr(self, name, value)
        for head, sub_params in nested.items():
            inner = getattr(self, head)
            if not hasattr(inner, "set_params"):
                raise InvalidParameterError(
                    f"Parameter {head!r} of {type(self).__name__} is a "
                    f"{type(inner).__name__}, which has no parameters to set; got "
                    f"{sorted(head + '__' + k for k in sub_params)}.")
            inner.set_params(**sub_params)
        return self

    # ------------------------------------------------------------ scikit-learn tags
    def __sklearn_tags__(self) -> Any:
        """Estimator tags for scikit-learn >= 1.6 (built only when scikit-learn is imported).

        A structured predictor: no estimator type, ``y`` required, inputs are
        lists of examples (not 2-D arrays) that structlp validates itself.
        """
        from sklearn.utils import InputTags, Tags, TargetTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=True),
                    transformer_tags=None, regressor_tags=None, classifier_tags=None,
                    input_tags=InputTags(two_d_array=False), requires_fit=True,
                    no_validation=True)

    def _more_tags(self) -> Dict[str, Any]:
        """Estimator tags for scikit-learn < 1.6."""
        return {"requires_y": True, "no_validation": True}

    def _get_tags(self) -> Dict[str, Any]:
        """All tags, defaults included, for scikit-learn < 1.6."""
        return {**_LEGACY_TAG_DEFAULTS, **self._more_tags()}

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

    def __repr__(self) -> str:
        """The class and the parameters that differ from their defaults (as scikit-learn)."""
        sig = inspect.signature(type(self).__init__).parameters
        params = self.get_params(deep=False)
        args = ", ".join(
            f"{k}={params[k]!r}" for k in sig if k in params
            and (sig[k].default is inspect.Parameter.empty or _differs(params[k], sig[k].default)))
        return f"{type(self).__name__}({args})"


class StructuredPredictorMixin:
    """Prediction shared by the learners: part scores, then the model's inference.

    A learner provides ``model``, ``n_features_in_`` and its fitted weights;
    ``_scores`` (linear ``Phi_i w`` by default) may be overridden, e.g. by a
    kernel expansion, and receives the keyword arguments of the public methods.
    """

    # provided by the learner (and BaseEstimator)
    model: Any
    n_features_in_: int
    coef_: np.ndarray
    _check_fitted: Callable[..., None]

    def _fitted_attr(self):
        return "coef_"

    def _checked_X(self, X):
        """Validate examples against the model and the fitted feature count."""
        from .compiler import check_parts_and_features, hook_error
        X = check_sequence_of_examples(X, "X")
        Xc, Phis = [], []
        for i, x in enumerate(X):
            step = "check_x"
            try:
                x = self.model.check_x(x)
                step = "features"
                Phi = self.model.checked_features(x, name=f"features of X[{i}]")
                check_parts_and_features(self.model, i, Phi.shape)
            except Exception as exc:
                err = hook_error(self.model, exc, step, i)
                if err is exc:
                    raise
                raise err from (None if isinstance(exc, StructlpError) else exc)
            if Phi.shape[1] != self.n_features_in_:
                raise InvalidInputError(
                    f"X[{i}] has {Phi.shape[1]} features per part; the learner was fitted "
                    f"with {self.n_features_in_}.")
            Xc.append(x)
            Phis.append(Phi)
        return Xc, Phis

    def _check_feature_count(self, data):
        """Refuse training-form data whose feature count differs from the fitted one."""
        if data.n_features != self.n_features_in_:
            raise InvalidInputError(
                f"X has {data.n_features} features per part; the learner was fitted with "
                f"{self.n_features_in_}.")
        return data

    def _scores(self, Phis):
        return stacked_scores(Phis, self.coef_)

    def _check_keywords(self, method, kwargs):
        """Refuse the keywords ``_scores`` does not take, as Python refuses a bad keyword."""
        accepted = [p for p in inspect.signature(self._scores).parameters if p != "Phis"]
        for key in kwargs:
            if key not in accepted:
                takes = f"it accepts {accepted}" if accepted else "it takes no keyword arguments"
                raise TypeError(f"{type(self).__name__}.{method}() got an unexpected keyword "
                                f"argument {key!r}; {takes}.")

    def decision_scores(self, X: Sequence[Any], **kwargs: Any) -> List[np.ndarray]:
        """Part scores of every example: list of (L_i,) arrays (``Phi_i w``)."""
        self._check_keywords("decision_scores", kwargs)
        self._check_fitted(self._fitted_attr())
        _, Phis = self._checked_X(X)
        return self._scores(Phis, **kwargs)

    def decision_function(self, X: Sequence[Any], **kwargs: Any) -> List[np.ndarray]:
        """Alias of :meth:`decision_scores` (scikit-learn's name): list of (L_i,) part scores."""
        return self.decision_scores(X, **kwargs)

    def predict(self, X: Sequence[Any], **kwargs: Any) -> List[Any]:
        """The highest-scoring output of each example.

        Uses the model's combinatorial fast path where it has one, otherwise the
        inference LP ``max_{mu in P_i} s_i . mu`` for all examples at once, with
        ``s_i`` the part scores (:meth:`decision_scores`).  The outputs of a decoder
        declared by the model (not structlp's) are checked against the declared
        polytope (:class:`~structlp.OracleError` naming the example and the hook;
        ``check_inference = False`` on the model's class turns it off).

        Parameters
        ----------
        X : list of m examples

        Returns
        -------
        list of m outputs
        """
        from .inference import maximize_checked
        self._check_keywords("predict", kwargs)
        self._check_fitted(self._fitted_attr())
        X, Phis = self._checked_X(X)
        return maximize_checked(self.model, X, self._scores(Phis, **kwargs))[0]

    def loss(self, X: Sequence[Any], Y: Sequence[Any], **kwargs: Any) -> float:
        """Mean task loss of the predictions on ``(X, Y)``."""
        self._check_keywords("loss", kwargs)
        Y = check_sequence_of_examples(Y, "Y")
        pred = self.predict(X, **kwargs)
        if len(pred) != len(Y):
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(pred)} and {len(Y)}.")
        X = [self.model.check_x(x) for x in X]
        return float(np.mean([self.model.task_loss(x, y, p) for x, y, p in zip(X, Y, pred)]))

    def score(self, X: Sequence[Any], Y: Sequence[Any], **kwargs: Any) -> float:
        """Negated mean task loss on ``(X, Y)`` (higher is better, as scikit-learn expects)."""
        return -self.loss(X, Y, **kwargs)
