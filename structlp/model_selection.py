"""scikit-learn model selection over structured examples: a scorer and a part-feature transformer.

structlp's learners take ``X`` and ``Y`` as *lists* of examples and outputs
(arrays of different shapes, tuples, dicts).  scikit-learn's ``cross_val_score``,
``GridSearchCV`` and ``Pipeline`` split such lists by index and pass them
through untouched, so two pieces are all that is missing:

* :func:`make_scorer` -- a ``scoring=`` callable: the mean task loss of the
  predictions on a list of structured outputs (sign handled, so that greater
  is better as scikit-learn expects);
* :class:`PartTransformer` -- a transformer in front of a learner in a
  ``Pipeline``: it fits any scikit-learn transformer (``StandardScaler``,
  ``PCA``...) on the part feature vectors of all examples stacked, and maps
  every example's feature array through it, keeping its shape but the last axis.

Neither imports scikit-learn.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from .utils.validation import check_bool, check_sequence_of_examples
from .base import BaseEstimator
from .exceptions import InvalidInputError, InvalidParameterError, NotFittedError

LossArg = Union[str, Callable[[Any, Any], float]]

_LOSSES = ("hamming", "task", "zero_one")


def _hamming(y_true: Any, y_pred: Any) -> float:
    a, b = np.asarray(y_true), np.asarray(y_pred)
    if a.shape != b.shape:
        raise InvalidInputError(
            f"hamming loss: an output of shape {b.shape} was predicted for a true output of "
            f"shape {a.shape}.")
    return float(np.mean(a != b)) if a.size else 0.0


def _zero_one(y_true: Any, y_pred: Any) -> float:
    a, b = np.asarray(y_true), np.asarray(y_pred)
    return float(a.shape != b.shape or bool(np.any(a != b)))


class StructuredScorer:
    """A scikit-learn scorer ``scorer(estimator, X, Y) -> float`` (made by :func:`make_scorer`)."""

    def __init__(self, loss: LossArg = "hamming", greater_is_better: bool = False) -> None:
        self.loss = loss
        self.greater_is_better = greater_is_better

    def mean_loss(self, estimator: Any, X: Sequence[Any], Y: Sequence[Any]) -> float:
        """The mean loss (unsigned) of ``estimator.predict(X)`` against ``Y``."""
        Y = check_sequence_of_examples(Y, "Y")
        if self.loss == "task":
            return float(estimator.loss(X, Y))
        pred = estimator.predict(X)
        if len(pred) != len(Y):
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(pred)} and {len(Y)}.")
        fn = self.loss if callable(self.loss) else {"hamming": _hamming,
                                                    "zero_one": _zero_one}[self.loss]
        return float(np.mean([fn(y, p) for y, p in zip(Y, pred)]))

    def __call__(self, estimator: Any, X: Sequence[Any], Y: Sequence[Any]) -> float:
        value = self.mean_loss(estimator, X, Y)
        return value if self.greater_is_better else -value

    def __repr__(self) -> str:
        loss = self.loss if isinstance(self.loss, str) else getattr(self.loss, "__name__",
                                                                    repr(self.loss))
        return f"make_scorer(loss={loss!r}, greater_is_better={self.greater_is_better})"


def make_scorer(loss: LossArg = "hamming", greater_is_better: bool = False) -> StructuredScorer:
    """A ``scoring=`` callable for scikit-learn's model selection on structured outputs.

    The scorer computes, for a fitted estimator and a list of ``m`` examples,

    .. math::

        s = \\pm \\frac1m \\sum_{i=1}^m \\ell(y_i, \\hat y_i),\\qquad
        \\hat y_i = \\text{estimator.predict}(X)[i],

    with the sign ``-`` for a loss (``greater_is_better=False``, the default),
    so that greater is better as scikit-learn expects.

    Parameters
    ----------
    loss : {"hamming", "task", "zero_one"} or callable, default="hamming"
        ``"hamming"``: the fraction of entries of the output arrays that differ
        (e.g. of the (n_rows, n_cols) 0/1 assignment, or of the (n,) labels);
        ``"zero_one"``: 1 when the output is not exactly right;
        ``"task"``: the model's own task loss (``estimator.loss(X, Y)``, e.g.
        the number of true edges missing); a callable ``loss(y_true, y_pred)
        -> float`` is averaged over the examples.
    greater_is_better : bool, default=False
        True when ``loss`` is a score (e.g. an accuracy) rather than a loss.

    Returns
    -------
    StructuredScorer
        ``scorer(estimator, X, Y) -> float``.

    Examples
    --------
    >>> import structlp
    >>> scorer = structlp.make_scorer("hamming")
    >>> scorer
    make_scorer(loss='hamming', greater_is_better=False)

    With scikit-learn::

        GridSearchCV(MaxMarginLearner(model), {"C": [0.1, 1, 10]},
                     scoring=structlp.make_scorer("hamming"), cv=3).fit(X, Y)
    """
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise InvalidParameterError(
                f"The 'loss' parameter of make_scorer must be one of {list(_LOSSES)} or a "
                f"callable loss(y_true, y_pred); got {loss!r}.")
    elif not callable(loss):
        raise InvalidParameterError(
            f"The 'loss' parameter of make_scorer must be one of {list(_LOSSES)} or a callable "
            f"loss(y_true, y_pred); got {type(loss).__name__}.")
    check_bool(greater_is_better, "greater_is_better", owner="make_scorer")
    return StructuredScorer(loss, bool(greater_is_better))


class PartTransformer(BaseEstimator):
    """Apply a scikit-learn transformer to the part feature vectors of every example.

    ``fit`` stacks the feature vectors of all examples, ``F = [x_1.reshape(-1, d); ...;
    x_m.reshape(-1, d)]`` (one row per part, e.g. per edge of a matching) and fits
    a copy of ``transformer`` on ``F``; ``transform`` maps each example ``x`` of
    shape ``(..., d)`` to ``transformer_.transform(x.reshape(-1, d))`` reshaped to
    ``(..., d')``.  Use it first in a ``Pipeline`` whose last step is a structlp
    learner.

    What an example may be:

    * an array of shape ``(..., d)`` whose last axis holds the features (e.g.
      the (n_rows, n_cols, d) edge features of :class:`~structlp.structures.BipartiteMatching`
      or the (n, n, d) ones of the graph structures);
    * a tuple whose first item is such an array (e.g. ``(features, mask)`` of a
      sparse graph); the other items are kept as they are.

    Parameters
    ----------
    transformer : object
        Has ``fit(F)`` and ``transform(F)`` on 2-D arrays (any scikit-learn
        transformer); it is copied, never modified.

    Attributes
    ----------
    transformer_ : object
        The fitted copy.
    n_features_in_ : int
        ``d``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp import PartTransformer
    >>> class Center:                       # any object with fit/transform on 2-D arrays
    ...     def fit(self, F):
    ...         self.mean_ = F.mean(axis=0)
    ...         return self
    ...     def transform(self, F):
    ...         return F - self.mean_
    >>> X = [np.ones((2, 3, 4)), np.zeros((3, 3, 4))]
    >>> [x.shape for x in PartTransformer(Center()).fit_transform(X)]
    [(2, 3, 4), (3, 3, 4)]
    """

    def __init__(self, transformer: Any) -> None:
        self.transformer = transformer

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import TransformerTags
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        tags.transformer_tags = TransformerTags()
        return tags

    def _more_tags(self) -> Dict[str, Any]:
        return {"requires_y": False, "no_validation": True}

    @staticmethod
    def _features(x: Any, i: int) -> np.ndarray:
        f = x[0] if isinstance(x, tuple) else x
        try:
            f = np.asarray(f)
            f = None if f.dtype.kind in "cSUV" else f.astype(float)   # no complex/str
        except (TypeError, ValueError):
            f = None
        if f is None or f.ndim < 2:
            raise InvalidInputError(
                f"PartTransformer: X[{i}] must be an array of shape (..., d) with the part "
                f"features on its last axis, or a tuple whose first item is one; got "
                f"{type(x).__name__}.")
        return f

    def fit(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> "PartTransformer":
        """Fit a copy of ``transformer`` on the stacked part features of ``X``; returns self."""
        if not (hasattr(self.transformer, "fit") and hasattr(self.transformer, "transform")):
            raise InvalidParameterError(
                "The 'transformer' parameter of PartTransformer must have fit and transform "
                f"methods (a scikit-learn transformer); got {type(self.transformer).__name__}.")
        X = check_sequence_of_examples(X, "X")
        feats = [self._features(x, i) for i, x in enumerate(X)]
        dims = {f.shape[-1] for f in feats}
        if len(dims) != 1:
            raise InvalidInputError(
                f"PartTransformer: every example of X needs the same number of features on its "
                f"last axis; got {sorted(dims)}.")
        d = dims.pop()
        transformer = copy.deepcopy(self.transformer)
        transformer.fit(np.concatenate([f.reshape(-1, d) for f in feats]))
        self.transformer_ = transformer
        self.n_features_in_ = d
        return self

    def transform(self, X: Sequence[Any]) -> List[Any]:
        """Every example with its part features mapped through ``transformer_``."""
        if not hasattr(self, "transformer_"):
            raise NotFittedError("This PartTransformer instance is not fitted yet; call fit "
                                 "first.")
        X = check_sequence_of_examples(X, "X")
        out = []
        for i, x in enumerate(X):
            f = self._features(x, i)
            if f.shape[-1] != self.n_features_in_:
                raise InvalidInputError(
                    f"PartTransformer: X[{i}] has {f.shape[-1]} features per part; it was "
                    f"fitted with {self.n_features_in_}.")
            g = np.asarray(self.transformer_.transform(f.reshape(-1, f.shape[-1])))
            g = g.reshape(f.shape[:-1] + (-1,))
            out.append((g,) + tuple(x[1:]) if isinstance(x, tuple) else g)
        return out

    def fit_transform(self, X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> List[Any]:
        """``fit(X).transform(X)``."""
        return self.fit(X, Y).transform(X)
