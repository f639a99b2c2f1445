"""Part features as an operator: what the learners need of ``Phi_i``, without the matrix.

A learner touches the part features ``Phi_i`` (L_i, d) of example ``i`` only
through two products:

* the **part scores** ``Phi_i w`` (L_i,) of a weight vector ``w`` (d,);
* the **joint feature** ``Phi_i^T mu`` (d,) of a part vector ``mu`` (L_i,); for
  an output (a 0/1 vertex) that is its feature vector ``psi(x_i, y)``.

:class:`PartFeatures` is that pair of products.  A model supplies one per
example through :meth:`~structlp.model.StructuredModel.feature_operator`; the
default wraps the explicit matrix of :meth:`~structlp.model.StructuredModel.features`
(:class:`MatrixFeatures`), and a model with structure can compute the same
numbers in factored form (e.g.
:class:`~structlp.structures.tree_labeling.TreeFeatures`: a node-score and an
edge-score tensor, never the ``L_i x d`` matrix).  The joint QP always compiles the
explicit matrix; the first-order learners (Frank–Wolfe, subgradient, cutting
plane) use the operator.

For code written against matrices, an operator also answers ``P.dot(w)``
(the scores), ``P.T.dot(mu)`` (the joint feature) and ``P.shape``, so
:func:`structlp.compiler.matvec` and :func:`structlp.compiler.transposes` accept
it unchanged.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp


class PartFeatures:
    """The part features ``Phi`` (L, d) of one example, as a linear operator.

    Subclasses set ``shape = (L, d)`` and implement :meth:`scores` and
    :meth:`joint`; :meth:`joint_sparse` may be overridden for speed.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.part_features import PartFeatures
    >>> class Scaled(PartFeatures):          # Phi = diag(a) @ B, never formed
    ...     def __init__(self, a, B):
    ...         self.a, self.B = np.asarray(a, float), np.asarray(B, float)
    ...         self.shape = self.B.shape
    ...     def scores(self, w):
    ...         return self.a * (self.B @ w)
    ...     def joint(self, mu):
    ...         return self.B.T @ (self.a * mu)
    >>> Phi = Scaled([1.0, 2.0, 3.0], np.eye(3, 2))
    >>> Phi.scores(np.array([1.0, 1.0])), Phi.joint(np.array([0.0, 1.0, 0.0]))
    (array([1., 2., 0.]), array([0., 2.]))
    >>> Phi.toarray()
    array([[1., 0.],
           [0., 2.],
           [0., 0.]])
    """

    shape: Tuple[int, ...] = (0, 0)

    def scores(self, w: np.ndarray) -> np.ndarray:
        """Part scores ``Phi w``.

        Parameters
        ----------
        w : ndarray, shape (d,)

        Returns
        -------
        ndarray, shape (L,)
            A fresh array: the learners add the loss coefficients to it in place.
        """
        raise NotImplementedError(f"{type(self).__name__} must define scores(w).")

    def joint(self, mu: np.ndarray) -> np.ndarray:
        """Joint feature ``Phi^T mu``.

        Parameters
        ----------
        mu : ndarray, shape (L,)

        Returns
        -------
        ndarray, shape (d,)
        """
        raise NotImplementedError(f"{type(self).__name__} must define joint(mu).")

    def joint_sparse(self, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """``Phi^T mu`` for ``mu`` given by its nonzeros ``mu[idx] = vals`` (repeated
        indices add up)."""
        return self.joint(np.bincount(idx, vals, minlength=self.shape[0]))

    def scores_at(self, w: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The part scores ``(Phi w)[idx]`` of some parts only (indices may repeat).

        The default computes all the scores; an operator that can score single parts
        cheaply (e.g. a stacked one, see :meth:`stack`) overrides it.

        Parameters
        ----------
        w : ndarray, shape (d,)
        idx : ndarray of int, shape (p,)

        Returns
        -------
        ndarray, shape (p,)
        """
        return self.scores(w)[np.asarray(idx, dtype=np.int64)]

    @classmethod
    def stack(cls, ops: Sequence["PartFeatures"]) -> Optional["StackedFeatures"]:
        """The part features of several examples as one operator, or None.

        See :class:`StackedFeatures`.  The default, None, means that this class has no
        stacked form: learners then call the operators one by one.

        Parameters
        ----------
        ops : sequence of instances of ``cls`` with the same number of features

        Returns
        -------
        StackedFeatures or None
        """
        return None

    # matrix-like spelling, for code written against Phi and Phi^T
    def dot(self, w: np.ndarray) -> np.ndarray:
        return self.scores(w)

    @property
    def T(self) -> "_Adjoint":
        return _Adjoint(self)

    def toarray(self) -> np.ndarray:
        """The explicit matrix (L, d), dense: ``Phi^T`` of the unit vectors (for tests)."""
        return np.stack([self.joint(e) for e in np.eye(self.shape[0])]) if self.shape[0] \
            else np.zeros(self.shape)


class _Adjoint:
    """``Phi^T`` of a :class:`PartFeatures`: ``.dot(mu)`` is the joint feature."""

    __slots__ = ("op",)

    def __init__(self, op: PartFeatures) -> None:
        self.op = op

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.op.shape[::-1]

    def dot(self, mu: np.ndarray) -> np.ndarray:
        return self.op.joint(mu)


class StackedFeatures(PartFeatures):
    """The part features of several examples as one operator (:meth:`PartFeatures.stack`).

    Its shape is ``(sum_i L_i, d)``: every part of every example is one row, in an order
    of the operator's own (:meth:`rows` maps parts of examples to rows), so that a
    learner scores any parts of any examples (:meth:`scores_at`) and forms the joint
    feature of part counts spread over the examples (:meth:`joint_sparse`) in a few
    products instead of one call per example.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.datasets import make_tree_labeling
    >>> from structlp.part_features import StackedFeatures
    >>> X, Y, w, model = make_tree_labeling(n_samples=2, n_nodes=3, random_state=0)
    >>> # one operator per example
    >>> ops = [model.feature_operator(model.check_x(x)) for x in X]
    >>> # one for both
    >>> S = type(ops[0]).stack(ops)
    >>> isinstance(S, StackedFeatures), ops[0].shape, S.shape
    (True, (27, 21), (54, 21))
    >>> # part 2 of example 1, part 1 of example 0
    >>> rows = S.rows(np.array([1, 0]), np.array([2, 1]))
    >>> np.allclose(S.scores_at(w, rows), [ops[1].scores(w)[2], ops[0].scores(w)[1]])
    True
    """

    def rows(self, ex: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The rows of the parts ``idx[t]`` of the examples ``ex[t]``.

        Parameters
        ----------
        ex : ndarray of int, shape (p,)
            Positions of the examples in the sequence that was stacked.
        idx : ndarray of int, shape (p,)
            Part indices within each example.

        Returns
        -------
        ndarray of int64, shape (p,)
        """
        raise NotImplementedError(f"{type(self).__name__} must define rows(ex, idx).")


class MatrixFeatures(PartFeatures):
    """The explicit part features: a dense array or a sparse matrix ``Phi`` (L, d).

    ``Phi^T`` is made once (CSR when sparse), so that both products are one
    ``ndarray.dot`` / sparse product each.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.part_features import MatrixFeatures
    >>> # L = 3 parts, d = 2 features
    >>> Phi = MatrixFeatures(np.arange(6.0).reshape(3, 2))
    >>> Phi.shape, Phi.scores(np.array([1.0, -1.0]))            # Phi w
    ((3, 2), array([-1., -1., -1.]))
    >>> Phi.joint(np.array([1.0, 0.0, 1.0]))                    # Phi^T mu
    array([4., 6.])
    >>> # the same mu by its nonzeros
    >>> Phi.joint_sparse(np.array([0, 2]), np.array([1.0, 1.0]))
    array([4., 6.])
    """

    __slots__ = ("matrix", "matrix_T", "shape")

    def __init__(self, Phi: Any) -> None:
        self.matrix = Phi
        self.matrix_T = Phi.T.tocsr() if sp.issparse(Phi) else Phi.T
        self.shape = tuple(int(s) for s in Phi.shape)

    def scores(self, w: np.ndarray) -> np.ndarray:
        v = self.matrix.dot(w)
        return v if type(v) is np.ndarray and v.ndim == 1 else np.asarray(v, float).ravel()

    def joint(self, mu: np.ndarray) -> np.ndarray:
        v = self.matrix_T.dot(mu)
        return v if type(v) is np.ndarray and v.ndim == 1 else np.asarray(v, float).ravel()

    def toarray(self) -> np.ndarray:
        return self.matrix.toarray() if sp.issparse(self.matrix) else np.asarray(self.matrix)
