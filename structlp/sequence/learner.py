"""Softmax-margin learning with a rational or tropical task loss (L-BFGS, exact gradients)."""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike

from ..utils.lbfgs import minimize_lbfgs
from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import check_bool, check_choice, check_scalar, check_sequence_of_examples
from ..base import BaseEstimator
from ..exceptions import ConvergenceWarning, InvalidInputError, NotFittedError
from ._checks import check_lengths
from .features import MarkovFeatures
from .losses import SequenceLoss
from .softmax_margin import METHODS, CompiledExample, _check_loss_features, compile_example
from .viterbi import viterbi

__all__ = ["SoftmaxMarginLearner"]


class SoftmaxMarginLearner(BaseEstimator):
    r"""Linear sequence model trained with the softmax-margin objective of the task loss.

    Solves

    .. math::

        \min_{w \in \mathbb{R}^d}\; \frac{1}{m} \sum_{i=1}^m \log \sum_{y \in \Delta^{l_i}}
        \exp\big(L(y, y_i) - w \cdot (\Psi(x_i, y_i) - \Psi(x_i, y))\big)
        + \frac{\mathrm{reg}}{2} \|w\|^2

    with L-BFGS (``scipy.optimize.minimize``) and exact gradients.  The
    objective is convex in ``w``.  With ``loss=ZeroLoss()`` this is a
    (L2-regularized) linear-chain CRF.  Prediction is Viterbi:
    ``argmax_y w . Psi(x, y)``.

    Parameters
    ----------
    loss : SequenceLoss
        Task loss ``L(y, y_i)`` (``EditDistance``, ``SmithWaterman``, ``NGramLoss``,
        ``HammingLoss``, ``ZeroLoss``).
    features : MarkovFeatures
        Feature map ``Psi`` of Markov order q over the alphabet ``{0..k-1}``.
    reg : float > 0
        L2 regularization strength (``C = 1 / reg`` in the CLI's convention).
    max_iter : int >= 1
        L-BFGS iterations.
    tol : float > 0
        L-BFGS tolerances: ``gtol = tol`` (projected gradient) and
        ``ftol = 1e-4 * tol`` (relative decrease).
    method : {"automata", "naive"}
        Gradient computation (``"naive"`` enumerates ``k**l`` outputs).
    max_states : int
        Largest allowed layer of a loss automaton.
    verbose : int >= 0, default=0
        1: one log line per L-BFGS iteration (objective, time).
    callback : callable or None, default=None
        ``callback(info)`` after every L-BFGS iteration (``info``: ``iteration``,
        ``objective``, ``time``); returning True stops the fit (``converged_`` False).
    warm_start : bool, default=False
        A refit starts L-BFGS from the previous fit's ``coef_`` when its shape is
        ``(features.n_features,)`` (e.g. after changing ``reg``, or on more data);
        otherwise, or before any fit, from ``w = 0``.  The objective is strictly
        convex, so the optimum is the same; only the iterations to reach it differ.

    Attributes
    ----------
    coef_ : array, shape (d,)
    n_iter_ : int
    objective_ : float
        Final value of the regularized objective.
    converged_ : bool
    automaton_info_ : list of dict
        Size of the loss automaton ``B`` and lattice ``C`` of each training example.

    Examples
    --------
    Sequences of 8 labels from a planted model, trained on the edit distance:

    >>> from structlp.datasets import make_sequences
    >>> from structlp.sequence import EditDistance, SoftmaxMarginLearner
    >>> X, Y, _, feats = make_sequences(n_samples=40, length=8, n_labels=4, n_inputs=4,
    ...                                 window=2, noise=0.3, random_state=0)
    >>> model = SoftmaxMarginLearner(loss=EditDistance(), features=feats, reg=0.01)
    >>> model = model.fit(X[:30], Y[:30])
    >>> model.score(X[30:], Y[30:])                # minus the mean edit distance
    -1.6
    """

    def __init__(self, loss: SequenceLoss, features: MarkovFeatures, reg: float = 1e-2,
                 max_iter: int = 100, tol: float = 1e-5, method: str = "automata",
                 max_states: int = 500_000, verbose: int = 0,
                 callback: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 warm_start: bool = False) -> None:
        self.loss = loss
        self.features = features
        self.reg = reg
        self.max_iter = max_iter
        self.tol = tol
        self.method = method
        self.max_states = max_states
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def _validate_params(self):
        owner = "SoftmaxMarginLearner"
        _check_loss_features(self.loss, self.features)
        check_scalar(self.reg, "reg", low=0, low_inclusive=False, owner=owner)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1, owner=owner)
        check_scalar(self.tol, "tol", low=0, low_inclusive=False, owner=owner)
        check_choice(self.method, "method", METHODS, owner=owner)
        check_scalar(self.max_states, "max_states", kind=numbers.Integral, low=1, owner=owner)
        check_bool(self.warm_start, "warm_start", owner=owner)
        return check_verbose(self.verbose, owner), check_callback(self.callback, owner)

    def objective(self, w: np.ndarray,
                  examples: Sequence[CompiledExample]) -> Tuple[float, np.ndarray]:
        """Regularized objective and gradient at ``w`` for compiled examples."""
        value, grad = 0.0, np.zeros_like(w)
        for ex in examples:
            v, g = ex.value_and_grad(w)
            value += v
            grad += g
        m = len(examples)
        return value / m + 0.5 * self.reg * w @ w, grad / m + self.reg * w

    def fit(self, X: Sequence[Any], Y: Sequence[ArrayLike]) -> "SoftmaxMarginLearner":
        """Fit ``coef_`` on inputs ``X`` (list of m inputs) and outputs ``Y`` (list of int arrays).

        The loss automaton and lattice of each example are built once and
        reused at every L-BFGS iteration.  Returns self.
        """
        verbose, callback = self._validate_params()
        X = check_sequence_of_examples(X, "X")
        Y = check_sequence_of_examples(Y, "Y")
        if len(X) != len(Y):
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(X)} and {len(Y)}.")
        examples = [compile_example(x, y, self.loss, self.features, self.method,
                                    max_states=self.max_states) for x, y in zip(X, Y)]
        w0 = np.zeros(self.features.n_features)
        previous = getattr(self, "coef_", None) if self.warm_start else None
        if isinstance(previous, np.ndarray) and previous.shape == w0.shape:
            w0 = np.array(previous, dtype=float)
        res = minimize_lbfgs(self.objective, w0, args=(examples,),
                             options={"maxiter": self.max_iter, "gtol": self.tol,
                                      "ftol": 1e-4 * self.tol},
                             progress=Progress(self, verbose, callback, total=self.max_iter))
        if not res["success"] and not res["stopped"] and res["nit"] >= self.max_iter:
            warnings.warn(f"SoftmaxMarginLearner: L-BFGS stopped after max_iter={self.max_iter} "
                          f"iterations ({res['message']}); raise max_iter or tol.",
                          ConvergenceWarning, stacklevel=3)
        self.coef_ = res["x"]
        self.n_iter_ = res["nit"]
        self.objective_ = res["fun"]
        self.converged_ = res["success"]
        self.automaton_info_ = [ex.automaton_info for ex in examples]
        return self

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError("This SoftmaxMarginLearner is not fitted yet; call fit first.")

    def predict(self, X: Sequence[Any],
                lengths: Optional[Sequence[Optional[int]]] = None) -> List[np.ndarray]:
        """Viterbi outputs ``argmax_y coef_ . Psi(x, y)``; a list of int arrays.

        ``lengths`` (list of int) gives the output lengths; default
        ``features.output_length(x)`` (``len(x)``).
        """
        self._check_fitted()
        X = check_sequence_of_examples(X, "X")
        lengths = check_lengths(lengths, len(X))
        return [viterbi(self.coef_, x, self.features, length=n) for x, n in zip(X, lengths)]

    def score(self, X: Sequence[Any], Y: Sequence[ArrayLike],
              loss: Optional[SequenceLoss] = None) -> float:
        """Minus the mean task loss of the predictions (higher is better).

        ``loss`` defaults to the training loss; outputs are predicted with the
        lengths of ``Y``.
        """
        loss = self.loss if loss is None else loss
        if not isinstance(loss, SequenceLoss):
            raise InvalidInputError(f"loss must be a SequenceLoss; got {loss!r}.")
        Y = check_sequence_of_examples(Y, "Y")
        preds = self.predict(X, lengths=[len(y) for y in Y])
        k = self.features.alphabet_size
        return -float(np.mean([loss(p, y, alphabet_size=k) for p, y in zip(preds, Y)]))

