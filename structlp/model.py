"""Structured models: what an output is, how its parts are scored, and the task loss.

An output of example ``x`` is a 0/1 vector ``mu`` of part indicators (one entry
per part: an edge of a matching, a (node, label) pair, ...).  Part ``p`` has a
feature vector ``phi_p`` (a row of ``features(x)``), so that the score of an
output is ``w . f(x, y) = (Phi w) . mu``.  The set of outputs is the vertex set of
an output polytope (:class:`~structlp.polytope.Polytope`), and the task loss is
affine in the indicators, ``loss(y) = d + c . mu``.

To declare a new structured model, subclass :class:`StructuredModel` in one file
and define

* :meth:`~StructuredModel.n_parts` and :meth:`~StructuredModel.features`,
* :meth:`~StructuredModel.constraints` (cvxpy constraints on the part-indicator
  variable) **or** :meth:`~StructuredModel.polytope` (matrices),
* optionally :meth:`~StructuredModel.loss` (an affine cvxpy expression; the
  default is the Hamming loss: the number of true parts missing from ``y``),
  :meth:`~StructuredModel.encode`/:meth:`~StructuredModel.decode` (default: the
  output *is* the 0/1 vector), a combinatorial fast path
  :meth:`~StructuredModel.inference`, and the part features in factored form,
  :meth:`~StructuredModel.feature_operator` (a
  :class:`~structlp.part_features.PartFeatures`: the first-order learners only
  need ``Phi w`` and ``Phi^T mu``).

Nothing else is needed for min-max training (:class:`~structlp.MaxMarginLearner`)
and LP prediction.
"""

from __future__ import annotations

import weakref
from typing import Any, Hashable, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from .utils.validation import check_finite_array
from .exceptions import (DeclarationError, InvalidInputError, InvalidOutputError, OracleError,
                         StructlpError, naming)
from .part_features import MatrixFeatures, PartFeatures
from .polytope import Polytope


class StructuredModel:
    """Base class of structured models: the extension point of structlp.

    A model says, for one example ``x`` at a time, what its outputs are, how
    they are scored and what a mistake costs.  An output ``y`` is encoded as a
    0/1 vector ``mu`` of *part* indicators (shape (L,), ``L = n_parts(x)``);
    part ``p`` has a feature vector ``phi_p``, row ``p`` of ``features(x)``
    (shape (L, d)), so that with weights ``w`` (d,)

    .. math::

        \\text{score}(x, y) = w \\cdot f(x, y) = (\\Phi w) \\cdot \\mu(y),
        \\qquad \\mathcal Y(x) = \\text{vertices of }
        P(x) = \\{\\mu : A\\mu \\le b,\\ E\\mu = e,\\ l \\le \\mu \\le u\\},

    and the task loss is affine in the indicators, ``loss(y) = d + c . mu``.
    Training solves ``min 1/2 |w|^2 + C sum_i max_y [w.f_i(y) + loss_i(y) -
    w.f_i(y_i)]``; prediction is ``argmax_y (Phi w) . mu(y)``.

    Subclasses store their hyper-parameters unchanged in ``__init__`` (as
    scikit-learn estimators do: their repr and persistence read them back) and
    define the hooks below; nothing else is needed for training by every
    learner and for prediction.

    **Required**

    ``n_parts(x) -> int``
        The number of parts ``L`` of example ``x``.
    ``features(x) -> array or sparse matrix, shape (L, d)``
        Part features; ``d`` is the same for every example.
    ``constraints(x, mu) -> list of cvxpy constraints`` **or** ``polytope(x) -> Polytope``
        The output polytope: affine constraints on the cvxpy Variable ``mu`` of
        shape (L,) (use ``cvxpy.reshape(mu, shape, order="C")`` for a 2-D
        view), from which :class:`~structlp.Polytope` extracts ``(A, b, E, e,
        lb, ub)``; or those matrices directly.  Other cvxpy Variables created in
        ``constraints`` are auxiliary (an extended formulation: the outputs are
        the projection on ``mu``; :meth:`~structlp.Polytope.from_cvxpy`).  It must be bounded and its
        vertices must be the outputs (integral); a fractional inference
        optimum raises :class:`~structlp.FractionalSolutionError`.

    **Optional**

    ``loss(x, y_true, mu) -> cvxpy expression``
        The task loss of output ``mu`` against ``y_true``, affine in ``mu``
        (default: Hamming, ``sum(mu_true) - mu_true . mu``, the number of true
        parts missing).  ``x`` is the checked example, ``y_true`` the true output
        as given to ``fit`` (not encoded: ``self.encode(x, y_true)`` gives its part
        vector), ``mu`` the cvxpy Variable of shape (L,).  Read once per example as ``(c, d)`` by
        :meth:`loss_coefficients`, which a subclass may override instead.
    ``encode(x, y) -> (L,) 0/1 array`` and ``decode(x, mu) -> y``
        Between an output as the user holds it and its part vector (default:
        the output *is* the vector; ``decode`` rounds to ints).  Training
        outputs are encoded and checked to be vertices of their polytope.
    ``inference(x, scores) -> y or None``
        An exact combinatorial decoder of ``argmax_y scores . mu(y)`` for part
        scores (L,) (Hungarian, max-sum, a spanning-tree algorithm...); None
        means "use the inference LP".  The first-order learners call it once
        per example per epoch, so a model without it pays one LP per call.
    ``inference_parts(x, scores) -> (L,) array or None``
        The decoder's maximizer as its part vector (default:
        ``encode(x, inference(x, scores))``); override only for speed.
    ``polytope_key(x) -> hashable or None``
        Equal keys mean equal polytopes: examples with the same key share one
        polytope, built and checked once (default None: no sharing).  For a
        model whose polytope depends only on the size of ``x``, returning that
        size makes a fit several times faster.
    ``check_x(x) -> x``
        Validate (and convert) one example, raising
        :class:`~structlp.InvalidInputError` naming what is wrong; the
        converted example is what the other hooks receive.
    ``costly_inference`` (class attribute)
        True when :meth:`inference_parts` solves an LP or costs as much (default
        False); the first-order learners then trade memory (each active output's
        joint features, ``d`` floats) for steps without oracle calls.
    ``formulations`` (class attribute)
        The names of the formulations the model supports (default
        ``("minmax",)``, LP duality; graph structures add ``"certificate"``).

    ``check_inference`` (class attribute)
        Whether the outputs of the model's own decoder are checked (default True;
        see :attr:`check_inference`).

    Whatever hook a subclass overrides wins: a ``loss`` overridden below a class
    that defines ``loss_coefficients`` (a built-in structure) is the loss every
    learner trains with, and an ``inference`` overridden below ``inference_parts``
    is the decoder they call.  A model that defines both ``loss`` and
    ``loss_coefficients`` has them compared on the first examples of a fit, and a
    user-declared loss must be 0 at each true output and never negative (checked
    on the first examples): otherwise :class:`~structlp.DeclarationError`.

    Helpers (not to override): :meth:`task_loss`, :meth:`checked_features`,
    :meth:`checked_output`, :meth:`checked_loss`, :meth:`checked_inference`,
    :meth:`checked_inference_parts`.

    Examples
    --------
    Choose exactly ``k`` of ``n`` items; an example is an (n, d) array of item
    features and an output a 0/1 vector with ``k`` ones:

    >>> import cvxpy as cp
    >>> import numpy as np
    >>> from structlp import StructuredModel, MaxMarginLearner
    >>> class ChooseK(StructuredModel):
    ...     def __init__(self, k=2):
    ...         self.k = k
    ...     def n_parts(self, x):
    ...         return x.shape[0]
    ...     def features(self, x):
    ...         return x
    ...     def constraints(self, x, mu):
    ...         return [cp.sum(mu) == self.k, mu >= 0, mu <= 1]
    ...     def inference(self, x, scores):          # optional exact decoder
    ...         y = np.zeros(len(scores), dtype=int)
    ...         y[np.argsort(-scores)[:self.k]] = 1
    ...         return y
    ...     def polytope_key(self, x):               # optional: one polytope per size
    ...         return x.shape[0]
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal(3)
    >>> X = [rng.standard_normal((6, 3)) for _ in range(20)]
    >>> Y = [ChooseK(2).inference(x, x @ w) for x in X]
    >>> learner = MaxMarginLearner(ChooseK(2), C=10.0).fit(X, Y)
    >>> [int(y.sum()) for y in learner.predict(X[:3])]
    [2, 2, 2]
    """

    #: Formulations this model supports, by name (see :mod:`structlp.formulations`).
    formulations: tuple = ("minmax",)
    #: True when the model's decoder (:meth:`inference_parts`) solves a linear program or
    #: costs as much: the first-order learners then keep each active output's joint
    #: features, so that their steps without an oracle call stay far cheaper than one.
    #: Models without a decoder (the inference LP) count as such.
    costly_inference: bool = False
    #: Whether the outputs of the model's own decoder (:meth:`inference` or
    #: :meth:`inference_parts`, when the model defines one) are checked at every call
    #: made by a learner or by ``predict``: encoded into the declared output polytope,
    #: and, in training, scoring at least as much as the example's true output on the
    #: same scores (so that no hinge is negative).  A failure is an
    #: :class:`~structlp.OracleError` naming the example and the hook.  Set it to False
    #: in the class body of a model whose decoder is trusted (a compiled decoder already
    #: tested); its outputs are then only checked to be 0/1 vectors of the right size.
    #: structlp's built-in decoders are never checked.
    check_inference: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The lowest definition of a hook wins: a subclass that overrides :meth:`loss`
        below a class defining :meth:`loss_coefficients` (a built-in structure) gets the
        coefficients read from its ``loss``, and one that overrides :meth:`inference`
        below a class defining :meth:`inference_parts` gets the part vectors of its
        ``inference`` (so that every learner, ``predict`` and ``task_loss`` use the
        hook the user wrote)."""
        super().__init_subclass__(**kwargs)
        for hook, derived in (("loss", "loss_coefficients"), ("inference", "inference_parts"),
                              ("inference", "encoded_inference")):
            mro = cls.__mro__
            where = [next(k for k, c in enumerate(mro) if name in c.__dict__)
                     for name in (hook, derived)]
            if mro[where[1]] is not StructuredModel and where[0] < where[1]:
                setattr(cls, derived, StructuredModel.__dict__[derived])

    # ------------------------------------------------------------ required
    def n_parts(self, x: Any) -> int:
        """Number of parts ``L`` of example ``x``."""
        raise DeclarationError(f"{type(self).__name__} must define n_parts(x), the number "
                               "of parts of example x.")

    def features(self, x: Any) -> Any:
        """Part features of ``x``: array or sparse matrix of shape (n_parts, n_features)."""
        raise DeclarationError(f"{type(self).__name__} must define features(x), an array "
                               "(n_parts, n_features) of part features.")

    def constraints(self, x: Any, mu: Any) -> Sequence[Any]:
        """Output polytope of ``x`` as a list of affine cvxpy constraints on ``mu``.

        ``mu`` is a cvxpy Variable of shape (n_parts,); for a 2-D view use
        ``cvxpy.reshape(mu, shape, order="C")``.  Override this or :meth:`polytope`.
        """
        raise DeclarationError(
            f"{type(self).__name__} must define constraints(x, mu) (cvxpy constraints) or "
            "polytope(x) (a structlp.Polytope): it declares no output polytope.")

    # ------------------------------------------------------------ optional
    def polytope(self, x: Any) -> Polytope:
        """The output polytope of ``x`` (default: extracted from :meth:`constraints`)."""
        import cvxpy as cp      # lazily: models with a polytope() never need cvxpy
        mu = cp.Variable(self.n_parts(x), name="mu")
        cons = self.constraints(x, mu)
        if not isinstance(cons, (list, tuple)):
            cons = [cons]
        return Polytope.from_cvxpy(mu, list(cons))

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        """Hashable key such that equal keys mean equal polytopes, or None (no caching)."""
        return None

    def loss(self, x: Any, y_true: Any, mu: Any) -> Any:
        """Task loss of output ``mu`` against ``y_true``: an affine cvxpy expression.

        ``x`` is the example as :meth:`check_x` returned it, ``y_true`` the true
        output as the user gave it (not encoded), ``mu`` a cvxpy Variable (n_parts,).
        Default: Hamming loss, the number of true parts missing from the output,
        ``sum(mu_true) - mu_true . mu``.
        """
        mu_true = self.encode(x, y_true)
        return float(mu_true.sum()) - mu_true @ mu

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        """The loss as ``(c, d)`` with ``loss(mu) = d + c . mu``.

        Returns
        -------
        c : ndarray, shape (n_parts,)
        d : float
        """
        L = self.n_parts(x)
        if type(self).loss is StructuredModel.loss:
            mu_true = self.encode(x, y_true)
            return -mu_true, float(mu_true.sum())
        import cvxpy as cp      # lazily: built-in losses never need cvxpy
        mu = cp.Variable(L, name="mu")
        expr = self.loss(x, y_true, mu)
        expr = cp.Constant(expr) if not isinstance(expr, cp.Expression) else expr
        if expr.size != 1 or not expr.is_affine() or expr.parameters():
            raise DeclarationError(
                f"{type(self).__name__}.loss must return a scalar affine cvxpy expression "
                f"of mu; got {expr}.")
        if any(v.id != mu.id for v in expr.variables()):
            raise DeclarationError(f"{type(self).__name__}.loss involves variables other than mu.")
        saved = mu.value
        mu.value = np.zeros(L)
        d = float(np.asarray(expr.value).ravel()[0])
        g = expr.grad.get(mu) if expr.variables() else None
        mu.value = saved
        c = np.zeros(L) if g is None or isinstance(g, int) else np.asarray(
            sp.csc_array(g).toarray() if sp.issparse(g) else g, dtype=float).ravel()
        return c, d

    def encode(self, x: Any, y: Any) -> np.ndarray:
        """The 0/1 part-indicator vector (n_parts,) of output ``y`` (default: ``y`` itself)."""
        return check_finite_array(y, "y").ravel()

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        """The output for an integral indicator vector ``mu`` (default: ``mu`` as ints)."""
        return np.rint(mu).astype(int)

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        """Combinatorial fast path for ``argmax_{y} scores . mu(y)``, or None.

        Parameters
        ----------
        scores : ndarray, shape (n_parts,)

        Returns
        -------
        y or None
            None means: no fast path, use the inference LP.
        """
        return None

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        """The fast path's maximizer as its part vector, or None.

        ``encode(x, inference(x, scores))`` as floats (n_parts,), which is what
        the learners' oracles need.  Override it only for speed: a model whose
        :meth:`inference` output needs no validation can build the part vector
        directly (the built-in structures do).

        Parameters
        ----------
        x : a checked example
        scores : ndarray, shape (n_parts,)

        Returns
        -------
        ndarray, shape (n_parts,), of 0/1 floats, or None (no fast path)
        """
        y = self.inference(x, scores)
        return None if y is None else self.encoded_inference(x, y, len(scores))

    def encoded_inference(self, x: Any, y: Any, n_parts: int) -> np.ndarray:
        """The part vector of the output ``y`` of :meth:`inference`; a user-declared hook's
        output is checked (encodable, finite, 0/1, ``n_parts`` entries)."""
        if is_builtin(self, "inference"):
            return np.asarray(self.encode(x, y), dtype=float)
        try:
            mu = self.encode(x, y)
        except Exception as exc:
            why = str(exc) if isinstance(exc, StructlpError) else f"{type(exc).__name__}: {exc}"
            raise OracleError(f"{type(self).__name__}.inference(x, scores) returned an output "
                              f"that encode(x, y) refuses: {why}") from exc
        return self.check_parts(mu, n_parts, "inference")

    def feature_operator(self, x: Any) -> PartFeatures:
        """The part features of ``x`` as an operator (the first-order learners use it).

        Default: :meth:`features` wrapped as
        :class:`~structlp.part_features.MatrixFeatures`.  Override it to compute the
        part scores ``Phi w`` (n_parts,) and the joint features ``Phi^T mu``
        (n_features,) without the matrix; the numbers must be those of
        :meth:`features` (the learners check it on the first example).

        Returns
        -------
        PartFeatures of shape (n_parts, n_features)
        """
        return MatrixFeatures(self.checked_features(x))

    def check_x(self, x: Any) -> Any:
        """Validate one example; return it (possibly converted)."""
        return x

    # ------------------------------------------------------------ helpers
    def task_loss(self, x: Any, y_true: Any, y_pred: Any) -> float:
        """The task loss of ``y_pred`` against ``y_true`` (a float)."""
        c, d = self.loss_coefficients(x, y_true)
        return float(d + c @ self.encode(x, y_pred))

    def loss_hook(self) -> Optional[str]:
        """The name of the model's own loss hook (``"loss"`` or ``"loss_coefficients"``),
        or None when the loss is structlp's (the default Hamming loss, a built-in
        structure's): the hook whose results :meth:`checked_loss` verifies."""
        if type(self).loss_coefficients is StructuredModel.loss_coefficients:
            return None if is_builtin(self, "loss") else "loss"
        return None if is_builtin(self, "loss_coefficients") else "loss_coefficients"

    def checked_loss(self, x: Any, y_true: Any, mu_true: np.ndarray, index: int = 0,
                     polytope: Optional[Polytope] = None,
                     first: bool = False) -> Tuple[np.ndarray, float]:
        """:meth:`loss_coefficients` validated for example ``index``.

        Always: a finite ``c`` of one entry per part and a finite ``d``.  For a loss the
        user declared (:meth:`loss_hook`): the loss is 0 at the true output
        ``mu_true`` (to rounding, relative :data:`LOSS_RTOL`); and with ``first`` (the
        learners pass it for the first :data:`FIRST_CHECKS` examples) its minimum over
        the outputs is not negative (the outputs minimizing it are found by the model's
        decoder on the scores ``-c``, or by the inference LP over ``polytope`` when the
        model has no decoder), and a model that defines both ``loss`` and
        ``loss_coefficients`` gets the same coefficients from both.

        Returns
        -------
        c : ndarray, shape (n_parts,)
        d : float

        Raises
        ------
        DeclarationError
            Naming the hook, the example and the value found.
        """
        cls = type(self).__name__
        c, d = self.loss_coefficients(x, y_true)
        c = np.asarray(c, dtype=float)
        L = len(mu_true)
        if c.shape != (L,) or not np.all(np.isfinite(c)) or np.ndim(d) or not np.isfinite(d):
            raise DeclarationError(
                f"{cls}.loss_coefficients must give a finite c of shape ({L},) and a finite "
                f"scalar d; got c of shape {c.shape}, d={d!r} for X[{index}].")
        d = float(d)
        hook = self.loss_hook()
        if hook is None:
            return c, d
        what = f"{cls}.{hook}(x, y_true, ...) of X[{index}]"
        at = d + float(c @ mu_true)
        if abs(at) > LOSS_RTOL * max(1.0, abs(d) + float(np.abs(c) @ np.abs(mu_true))):
            raise DeclarationError(
                f"The task loss {what} is {at:.6g} at the true output Y[{index}] itself; a "
                "task loss must be 0 at the truth and >= 0 at every output (otherwise the "
                "hinge and the learned weights are wrong).")
        if first:
            if type(self).loss is not StructuredModel.loss and \
                    type(self).loss_coefficients is not StructuredModel.loss_coefficients:
                c2, d2 = StructuredModel.loss_coefficients(self, x, y_true)
                scale = LOSS_RTOL * max(1.0, abs(d), float(np.abs(c).max(initial=0.0)))
                if abs(d2 - d) > scale or np.abs(c2 - c).max(initial=0.0) > scale:
                    k = int(np.argmax(np.abs(c2 - c))) if L else 0
                    raise DeclarationError(
                        f"{cls} defines both loss and loss_coefficients and they disagree on "
                        f"X[{index}]: loss gives d={d2:.6g} and c[{k}]={c2[k]:.6g} where "
                        f"loss_coefficients gives d={d:.6g} and c[{k}]={c[k]:.6g}. The "
                        "learners use loss_coefficients; make them the same loss, or "
                        "define only one of them.")
            low = self._least_loss(x, c, d, mu_true, index, polytope)
            if low is not None and low < -LOSS_RTOL * max(1.0, abs(d) + float(np.abs(c).sum())):
                raise DeclarationError(
                    f"The task loss {what} is negative, {low:.6g}, at an output of "
                    f"X[{index}]; a task loss must be >= 0 at every output (and 0 at the "
                    "truth): a negative loss rewards mistakes and makes the hinge negative.")
        return c, d

    def _least_loss(self, x, c, d, mu_true, index, polytope):
        """The least loss ``d + c . mu`` over the outputs of ``x``: by the model's decoder
        (checked), or by the inference LP over ``polytope``; None when neither is at hand
        or the LP's optimum is fractional (a relaxation: not the outputs' minimum)."""
        nz = np.flatnonzero(mu_true)
        mu = self.checked_inference_parts(x, -c, index=index, polytope=polytope,
                                          truth=(nz, mu_true[nz]))
        if mu is None and polytope is not None:
            from .inference import solve_stacked_lp
            mu = np.asarray(solve_stacked_lp([polytope], [-c])[0], dtype=float)
        if mu is None or np.abs(mu - np.rint(mu)).max(initial=0.0) > 1e-6:
            return None
        return d + float(c @ np.rint(mu))

    def checked_features(self, x: Any, name: str = "features(x)") -> Any:
        """:meth:`features` validated: finite, shape (n_parts, n_features)."""
        Phi = self.features(x)
        Phi = check_finite_array(Phi, name, ndim=2, allow_sparse=True)
        L = self.n_parts(x)
        if Phi.shape[0] != L:
            raise DeclarationError(
                f"{type(self).__name__}.features(x) must have one row per part "
                f"({L}); got shape {Phi.shape}.")
        return Phi

    def checked_feature_operator(self, x: Any, name: str = "features(x)",
                                 verify: bool = False) -> PartFeatures:
        """:meth:`feature_operator` validated: a PartFeatures of shape (n_parts, d).

        With ``verify`` (and an overridden :meth:`feature_operator`), its shape, scores
        and joint features are also compared with the explicit :meth:`features` of
        this example (random ``w`` and ``mu``, relative 1e-8).

        Raises
        ------
        DeclarationError
            Naming ``feature_operator`` and what disagrees.
        """
        cls = type(self).__name__
        if type(self).feature_operator is StructuredModel.feature_operator:
            return MatrixFeatures(self.checked_features(x, name=name))
        op = self.feature_operator(x)
        if not isinstance(op, PartFeatures):
            raise DeclarationError(
                f"{cls}.feature_operator(x) must return a structlp.part_features.PartFeatures; "
                f"got {type(op).__name__}.")
        L = self.n_parts(x)
        shape = tuple(op.shape)
        if len(shape) != 2 or shape[0] != L:
            raise DeclarationError(
                f"{cls}.feature_operator(x) must have shape (n_parts, n_features) with "
                f"n_parts = {L}; got shape {shape}.")
        if verify:
            Phi = self.checked_features(x, name=name)
            if Phi.shape != shape:
                raise DeclarationError(
                    f"{cls}.feature_operator(x) has shape {shape} but {cls}.features(x) has "
                    f"shape {Phi.shape}; they must describe the same matrix.")
            rng = np.random.default_rng(0)
            w, mu = rng.normal(size=shape[1]), rng.normal(size=L)
            for what, got, want in (("scores(w)", op.scores(w), Phi @ w),
                                    ("joint(mu)", op.joint(mu), Phi.T @ mu)):
                got = np.asarray(got, dtype=float)
                want = np.asarray(want, dtype=float).ravel()
                if got.shape != want.shape or not np.allclose(
                        got, want, rtol=1e-8, atol=1e-8 * max(1.0, np.abs(want).max(
                            initial=0.0))):
                    raise DeclarationError(
                        f"{cls}.feature_operator(x).{what} differs from the product with "
                        f"{cls}.features(x) (shape {got.shape}, expected {want.shape}); the "
                        "factored features must be the explicit ones.")
        return op

    def checked_polytope(self, x: Any) -> Polytope:
        """:meth:`polytope` validated: a :class:`~structlp.polytope.Polytope` of ``n_parts(x)``
        parts."""
        poly = self.polytope(x)
        if not isinstance(poly, Polytope):
            raise DeclarationError(
                f"{type(self).__name__}.polytope(x) must return a structlp.Polytope; got "
                f"{type(poly).__name__}.")
        return poly

    def decoder_hook(self) -> Optional[str]:
        """The name of the model's own decoder (``"inference"`` or ``"inference_parts"``),
        whose outputs the learners check; None when the decoder is structlp's (a built-in
        structure's, trusted) or there is none (the inference LP)."""
        if type(self).inference_parts is StructuredModel.inference_parts:
            return None if is_builtin(self, "inference") else "inference"
        return None if is_builtin(self, "inference_parts") else "inference_parts"

    def checked_inference_parts(self, x: Any, scores: np.ndarray, index: Optional[int] = None,
                                polytope: Optional[Polytope] = None,
                                truth: Optional[Tuple[np.ndarray, np.ndarray]] = None
                                ) -> Optional[np.ndarray]:
        """:meth:`inference_parts`, its output checked when the decoder is the model's own.

        Parameters
        ----------
        x : a checked example
        scores : ndarray, shape (n_parts,)
            The (loss-augmented) part scores given to the decoder.
        index : int, optional
            The example's index (``X[index]`` is named in errors).
        polytope : Polytope, optional
            The output must be one of its points (to its feasibility tolerance).
        truth : (idx, vals), optional
            The example's true output by its nonzeros: the output must score at least as
            much on ``scores`` (relative :data:`ORACLE_RTOL`): no hinge is negative.

        Returns
        -------
        None (no fast path: use the inference LP), or a 0/1 ndarray of shape (n_parts,)

        Raises
        ------
        OracleError
            A NaN, a fraction or the wrong number of parts (always), or, unless the
            class sets ``check_inference = False``, an output outside ``polytope`` or
            scoring below ``truth``; naming the hook and ``X[index]``.
        """
        user = self.decoder_hook()
        if user is None:
            return self.inference_parts(x, scores)
        try:
            mu = self.inference_parts(x, scores)
        except StructlpError as exc:      # from encoded_inference: add the example
            raise _at_example(exc, index) from None
        except (MemoryError, RecursionError):
            raise
        except Exception as exc:
            raise OracleError(f"{_where(self, user, index)} raised {type(exc).__name__}: "
                              f"{exc}") from exc
        if mu is None:
            return None
        return self.check_decoded(mu, scores, user, index, polytope, truth)

    def checked_inference(self, x: Any, scores: np.ndarray, index: Optional[int] = None,
                          polytope: Optional[Polytope] = None) -> Tuple[Any, Any]:
        """:meth:`inference` and the part vector of its output, checked as by
        :meth:`checked_inference_parts` when the hook is the model's own (what
        ``predict`` uses); ``(None, None)`` when it has no fast path."""
        y = self.inference(x, scores)
        if y is None:
            return None, None
        if is_builtin(self, "inference"):
            return y, self.encoded_inference(x, y, len(scores))
        try:
            mu = self.encoded_inference(x, y, len(scores))
        except OracleError as exc:
            raise _at_example(exc, index) from None
        return y, self.check_decoded(mu, scores, "inference", index, polytope)

    def check_decoded(self, mu: Any, scores: np.ndarray, hook: str,
                      index: Optional[int] = None, polytope: Optional[Polytope] = None,
                      truth: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
        """Check a part vector returned by the model's decoder ``hook`` for ``scores`` (see
        :meth:`checked_inference_parts`); return it as floats.  A part vector once found
        in ``polytope`` is remembered (per polytope, as long as it lives), so that a
        learner's repeated outputs are checked against the polytope once."""
        mu = self.check_parts(mu, len(scores), hook, index)
        if not self.check_inference:
            return mu
        if polytope is not None:
            seen = _IN_POLYTOPE.get(polytope)
            if seen is None:
                seen = _IN_POLYTOPE[polytope] = set()
            key = mu.tobytes()
            if key not in seen:
                try:
                    polytope.check_output(mu, name=f"The output of {_where(self, hook, index)}")
                except InvalidOutputError as exc:
                    raise OracleError(
                        f"{exc} A decoder must return an output of the declared polytope "
                        "(constraints or polytope).") from None
                if len(seen) < 4096:
                    seen.add(key)
        if truth is not None:
            idx, val = truth
            s = scores if type(scores) is np.ndarray else np.asarray(scores, dtype=float)
            got, want = float(s.dot(mu)), float(s[idx].dot(val))
            if got < want and got < want - ORACLE_RTOL * max(1e-300, float(np.abs(s).dot(
                    mu)) + float(np.abs(s[idx]).dot(np.abs(val)))):
                at = f"Y[{index}]" if index is not None else "the true output"
                raise OracleError(
                    f"{_where(self, hook, index)} returned an output scoring {got:.6g} on the "
                    f"scores it was given, less than the true output {at} ({want:.6g}): it "
                    f"does not maximize its scores, and the hinge would be negative "
                    f"({got - want:.4g}). A decoder must return argmax_y scores . mu(y) for "
                    "the scores it receives.")
        return mu

    def check_parts(self, mu: Any, n_parts: int, hook: str,
                    index: Optional[int] = None) -> np.ndarray:
        """Check a part vector produced by a model hook (``hook`` and ``X[index]`` are named
        in the error, an :class:`~structlp.OracleError`): finite, 0/1, ``n_parts`` entries."""
        if type(mu) is not np.ndarray or mu.dtype != np.float64:
            try:
                mu = check_finite_array(mu, f"The output of {_where(self, hook, index)}")
            except InvalidInputError as exc:
                raise OracleError(f"{exc} (its part vector must be finite).") from None
        if mu.shape != (n_parts,):
            raise OracleError(
                f"The output of {_where(self, hook, index)} encodes to {mu.shape} part "
                f"indicators; expected ({n_parts},), one per part.")
        bad = (mu != 0) & (mu != 1)          # (NaN and infinities too)
        if bad.any():
            raise OracleError(
                f"The output of {_where(self, hook, index)} must be a finite 0/1 part vector "
                f"(an output); got entry {mu[bad][0]!r}.")
        return mu

    def checked_output(self, x: Any, y: Any, polytope: Polytope,
                       name: str = "y") -> np.ndarray:
        """Encode ``y`` and check it is a vertex of ``polytope``; return the encoding."""
        try:
            mu = self.encode(x, y)
        except (ValueError, TypeError, IndexError) as exc:
            raise InvalidOutputError(f"{name} could not be encoded as an output: {exc}") from None
        mu = np.asarray(mu, dtype=float)
        if mu.ndim != 1 or not np.isfinite(mu).all():
            raise InvalidOutputError(f"{name} must encode to a finite 1-D vector; got {mu.shape}.")
        return polytope.check_output(mu, name=name)

    def __repr__(self) -> str:
        params = getattr(self, "__dict__", {})
        inner = ", ".join(f"{k}={v!r}" for k, v in params.items() if not k.startswith("_"))
        return f"{type(self).__name__}({inner})"



#: A user-declared loss must be 0 at the truth and >= 0 elsewhere to this relative rounding
#: (of the loss's magnitude).
LOSS_RTOL = 1e-9
#: The checks made once per training set (a user loss: both hooks agree, no negative
#: value; a user decoder: as good as the inference LP on random scores) run on its first
#: this many examples.
FIRST_CHECKS = 3
#: A user decoder's output may score below the true output by this share of their
#: magnitudes (rounding, float32 decoders), never more.
ORACLE_RTOL = 1e-6


#: Polytope -> the part vectors (bytes) of a decoder's outputs found in it.
_IN_POLYTOPE: "weakref.WeakKeyDictionary[Polytope, set]" = weakref.WeakKeyDictionary()


def is_builtin(model, hook):
    """Whether ``model``'s ``hook`` method is structlp's own (trusted, not re-checked)."""
    return getattr(getattr(type(model), hook), "__module__", "").startswith("structlp.")


def _where(model, hook, index):
    """``Model.hook(x, scores)``, with the example when known (for error messages)."""
    on = f" on X[{index}]" if index is not None else ""
    return f"{type(model).__name__}.{hook}(x, scores){on}"


def _at_example(exc, index):
    """``exc`` (a structlp error) with ``X[index]`` prefixed, unless it names it already."""
    return exc if index is None else naming(exc, f"X[{index}]")
