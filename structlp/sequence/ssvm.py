"""Structured SVM for sequences with rational and tropical losses.

Solves

.. math::

    \\min_w\\; \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m \\max_{y\\in\\Delta^{l_i}}
    \\big[L(y, y_i) - w\\cdot(\\Psi(x_i, y_i) - \\Psi(x_i, y))\\big]

by n-slack cutting planes: the separation oracle is the loss-augmented Viterbi
pass over ``C = A o B`` (:func:`~structlp.sequence.viterbi.loss_augmented_viterbi`),
exact for edit distance, Smith–Waterman and n-gram losses, so the structured
hinge is taken with the loss the task is judged by; the master QP over the
working sets is one cvxpy problem built from stacked matrices.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import check_bool, check_scalar, check_sequence_of_examples
from ..base import BaseEstimator
from ..exceptions import ConvergenceWarning, InvalidInputError
from ..learners.master import single_threaded_blas, solve_master_dual
from ..solvers import check_solver, check_solver_opts, solve
from ._checks import check_lengths
from .automata import Lattice
from .features import MarkovFeatures, gram_index
from .losses import SequenceLoss
from .softmax_margin import CompiledExample, _check_loss_features, compile_example
from .viterbi import viterbi


class SequenceSSVM(BaseEstimator):
    """Structured SVM over sequences, trained with the task loss (see module docstring).

    Parameters
    ----------
    loss : SequenceLoss
        e.g. ``EditDistance()``, ``SmithWaterman()``, ``NGramLoss()``, ``HammingLoss()``.
    features : MarkovFeatures
        e.g. ``BigramFeatures(k)`` or ``StackedFeatures([...])``.
    C : float > 0
    tol : float > 0
        Stop when no example's hinge exceeds its slack by more than ``tol``.
    max_iter : int >= 1
        Passes over the training set.
    solver, solver_opts :
        The master QP's solver: None (default) solves it in its dual by the cutting planes'
        active-set master (:func:`structlp.learners.master.solve_master_dual`, the one
        :class:`~structlp.CuttingPlaneLearner` uses); a cvxpy solver name (e.g.
        ``"CLARABEL"``) solves it as a cvxpy problem, ``solver_opts`` passed untouched.
    verbose : int >= 0, default=0
        1: one log line per round (master objective, violated examples, working set).
    callback : callable or None, default=None
        ``callback(info)`` after every round (``iteration``, ``time``,
        ``master_objective``, ``violated``, ``constraints``, with ``coef_`` set to the
        round's ``w``); returning True stops the fit (``converged_`` False, no warning;
        ``objective_`` is then exact at that ``w``).
    warm_start : bool, default=False
        A refit starts from the previous fit's working set (the loss-augmented
        outputs found for each example, in this process): their constraints are
        rebuilt on the new data, so they are valid constraints of the new problem
        whatever changed (``C``, the features' inputs, the loss), and the first
        master QP starts near the previous optimum.  Used when the number of
        examples, their lengths and the alphabet match; otherwise, or after
        unpickling, the fit starts from an empty working set (``w = 0``).

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    objective_ : float
        ``1/2 |w|^2 + C sum_i hinge_i(w)`` at ``coef_``, hinges by exact
        loss-augmented Viterbi.
    slack_ : ndarray, shape (m,)
        The exact structured hinge of each example at ``coef_``.
    n_iter_ : int
    converged_ : bool
    n_constraints_ : int
        Size of the working sets at the end.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.datasets import make_sequences
    >>> from structlp.sequence import EditDistance, SequenceSSVM
    >>> X, Y, _, feats = make_sequences(n_samples=40, length=8, n_labels=4, n_inputs=4,
    ...                                 window=2, noise=0.3, random_state=0)
    >>> ssvm = SequenceSSVM(loss=EditDistance(), features=feats, C=1.0).fit(X[:30], Y[:30])
    >>> pred = ssvm.predict(X[30:])                # loss-free Viterbi
    >>> print(f"{np.mean([np.mean(p != y) for p, y in zip(pred, Y[30:])]):.4f}")
    0.2125
    """

    def __init__(self, loss: SequenceLoss, features: MarkovFeatures, C: float = 1.0,
                 tol: float = 1e-4, max_iter: int = 50, solver: Optional[str] = None,
                 solver_opts: Optional[Dict[str, Any]] = None, verbose: int = 0,
                 callback: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 warm_start: bool = False) -> None:
        self.loss = loss
        self.features = features
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.solver = solver
        self.solver_opts = solver_opts
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start

    def _check_params(self):
        name = type(self).__name__
        _check_loss_features(self.loss, self.features)
        C = check_scalar(self.C, "C", low=0, low_inclusive=False, owner=name)
        tol = check_scalar(self.tol, "tol", low=0, low_inclusive=False, owner=name)
        max_iter = check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                owner=name)
        check_bool(self.warm_start, "warm_start", owner=name)
        return (C, tol, max_iter, check_solver(self.solver, owner=name),
                check_solver_opts(self.solver_opts, owner=name))

    def _hinges(self, examples, w):
        """Loss-augmented maximizers, their feature differences, and exact hinges."""
        outputs, diffs, hinges = [], [], []
        for ex in examples:
            y_hat, best = cast(Lattice, ex.lattice).best_path(ex.thetas(w))
            outputs.append(y_hat)
            diffs.append(self._difference(ex, y_hat))
            hinges.append(best - float(w @ ex.psi_true))
        return outputs, diffs, np.array(hinges)

    def _difference(self, ex, y):
        """``Psi(x_i, y_i) - Psi(x_i, y)`` from the example's position tables."""
        k, q = self.features.alphabet_size, self.features.order
        return ex.psi_true - sum(ex.tables[t][gram_index(y, t, k, q)] for t in range(ex.length))

    def _warm_outputs(self, examples):
        """The previous working set ``[(i, y), ...]`` when ``warm_start`` and it fits."""
        previous = getattr(self, "_warm", None) if self.warm_start else None
        k = self.features.alphabet_size
        if previous is None or any(
                i >= len(examples) or len(y) != examples[i].length or y.max() >= k
                for i, y in previous):
            return []
        return previous

    def fit(self, X: Sequence[Any], Y: Sequence[ArrayLike]) -> "SequenceSSVM":
        """Train by n-slack cutting planes.

        Parameters
        ----------
        X : list of m inputs (as ``features`` reads them; None for BigramFeatures)
        Y : list of m int sequences over ``{0..k-1}``

        Returns
        -------
        self
        """
        C, tol, max_iter, solver, opts = self._check_params()
        X = check_sequence_of_examples(X, "X")
        Y = check_sequence_of_examples(Y, "Y")
        name = type(self).__name__
        progress = Progress(self, check_verbose(self.verbose, name),
                            check_callback(self.callback, name), total=max_iter)
        if len(X) != len(Y) or len(Y) == 0:
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(X)} and {len(Y)}.")
        examples = []
        for x, y in zip(X, Y):
            examples.append(compile_example(x, y, self.loss, self.features, "automata"))
        d = self.features.n_features
        m = len(examples)
        w = np.zeros(d)
        # working sets: w.(Psi_i - Psi_y) >= L(y, y_i) - xi_i for the outputs y found
        found: List[Tuple[int, np.ndarray]] = []
        rows, owner, offsets = [], [], []
        k = self.features.alphabet_size
        for i, y in self._warm_outputs(examples):
            found.append((i, y))
            rows.append(self._difference(examples[i], y))
            owner.append(i)
            offsets.append(self.loss(y, examples[i].y_true, alphabet_size=k))
        xi = np.zeros(m)
        if rows:
            w, xi, _ = _master(rows, owner, offsets, m, d, C, solver, opts)
        converged = stopped = False
        it = 0
        for it in range(1, max_iter + 1):
            outputs, diffs, hinges = self._hinges(examples, w)
            violated = np.flatnonzero(hinges > xi + tol)
            if len(violated) == 0:
                converged = True
                break
            for i in violated:
                # the constraint's loss term: hinge + w.diff = L(y_hat, y_i)
                found.append((int(i), outputs[i]))
                rows.append(diffs[i])
                owner.append(i)
                offsets.append(hinges[i] + float(w @ diffs[i]))
            w, xi, value = _master(rows, owner, offsets, m, d, C, solver, opts)
            self.coef_ = w       # the round's iterate (for callbacks)
            if progress.update(iteration=it, master_objective=value,
                               violated=len(violated), constraints=len(rows)):
                stopped = True
                break
        progress.close()
        if not converged and not stopped:
            warnings.warn(
                f"SequenceSSVM stopped after max_iter={max_iter} passes with an example "
                f"violated by more than tol={tol:g}; raise max_iter or tol.", ConvergenceWarning,
                stacklevel=2)
        _, _, hinges = self._hinges(examples, w)
        self._warm = found if self.warm_start else None
        self.coef_ = w
        self.slack_ = np.maximum(hinges, 0.0)
        self.objective_ = float(0.5 * w @ w + C * self.slack_.sum())
        self.n_iter_ = it
        self.converged_ = converged
        self.n_constraints_ = len(rows)
        return self

    def predict(self, X: Sequence[Any],
                lengths: Optional[Sequence[Optional[int]]] = None) -> List[np.ndarray]:
        """Viterbi decoding ``argmax_y w . Psi(x, y)`` of each input.

        ``lengths`` gives the output lengths when the features do not fix them
        (e.g. ``BigramFeatures``, whose inputs are None).
        """
        self._check_fitted()
        X = check_sequence_of_examples(X, "X")
        lengths = check_lengths(lengths, len(X))
        return [viterbi(self.coef_, x, self.features, length=n) for x, n in zip(X, lengths)]


def _master(rows, owner, offsets, m, d, C, solver, opts):
    """The master QP over the working sets: ``(w, xi, objective)``.

    ``min_w 1/2 |w|^2 + C sum_i xi_i`` s.t. ``D_t . w + xi_{owner_t} >= offset_t`` and
    ``xi >= 0``: by default in its dual, by the cutting planes' active-set master
    (:func:`structlp.learners.master.solve_master_dual`, with one zero row per example
    for ``xi_i >= 0``); with a named ``solver``, as a cvxpy problem."""
    D = np.vstack(rows)
    if solver is None:
        # the zero rows (g = 0, b = 0) of every example carry xi_i >= 0
        G_rows = np.vstack([np.zeros((m, d)), D])
        b = np.concatenate([np.zeros(m), np.asarray(offsets, dtype=float)])
        group = np.concatenate([np.arange(m), np.asarray(owner, dtype=np.int64)])
        with single_threaded_blas():
            alpha, grad, _, _ = solve_master_dual(G_rows @ G_rows.T, b, group, np.full(m, C),
                                                  tol=1e-12 * max(1.0, float(np.abs(b).max())))
        w = G_rows.T @ alpha
        # xi_i: the largest violation of example i's rows at w (>= 0 by its zero row)
        viol = b - G_rows @ w
        xi = np.zeros(m)
        np.maximum.at(xi, group, viol)
        return w, xi, float(0.5 * w @ w + C * xi.sum())
    wv, xv = cp.Variable(d), cp.Variable(m, nonneg=True)
    S = np.zeros((len(owner), m))
    S[np.arange(len(owner)), owner] = 1.0
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(wv) + C * cp.sum(xv)),
                         [D @ wv + S @ xv >= np.array(offsets)])
    solve(problem, solver, opts, what="the SequenceSSVM master QP")
    return (np.asarray(wv.value, dtype=float), np.asarray(xv.value, dtype=float),
            float(problem.value))
