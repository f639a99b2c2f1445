"""Bipartite matchings with degree constraints (Taskar et al. 2005, Eq. 1)."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Callable, Hashable, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from ..utils.validation import check_finite_array, check_scalar
from ..exceptions import InvalidInputError, InvalidParameterError
from ..model import StructuredModel
from ..polytope import Polytope

if TYPE_CHECKING:
    from ..certificates import CertificateRows


class BipartiteMatching(StructuredModel):
    """Assignments of rows to columns: every column gets exactly ``R`` rows, every
    row at most ``P`` columns.

    An example ``x`` is an array of shape (n_rows, n_cols, d): the features of
    edge (j, k) are ``x[j, k]``.  An output ``y`` is a 0/1 array of shape
    (n_rows, n_cols).  Parts are the edges in row-major order.  The output
    polytope (Taskar et al. 2005, Eq. 1)

    .. math::

        \\sum_j \\mu_{jk} = R\\;\\forall k,\\qquad \\sum_k \\mu_{jk} \\le P\\;\\forall j,
        \\qquad 0 \\le \\mu \\le 1

    is integral (its constraint matrix is totally unimodular).  The loss is the
    Hamming loss of the paper, the number of true edges missing from ``y``:
    ``R n_cols - sum(y * y_true)``; with ``edge_weights`` each missing true edge
    costs its weight instead of 1.

    Parameters
    ----------
    R : int >= 1
        Rows per column (e.g. reviewers per paper).
    P : int >= 1
        Maximum columns per row (e.g. papers per reviewer).
    edge_weights : None, array of shape (n_rows, n_cols), or callable
        Per-edge loss weights; a callable is called as ``edge_weights(x, y_true)``.

    Formulations: ``"minmax"`` (the dualized LP, any ``R``, ``P``) and, for
    ``R == P == 1``, ``"certificate"``: the alternating-cycle certificate of
    Taskar et al. (2005), Eq. 13, on the bipartite graph rows + columns, with
    ``n_rows - n_cols`` dummy columns joined to every row by zero-score edges so
    that the assignment becomes a perfect matching (unmatched rows take the
    dummies).  The graph stays bipartite, so the certificate is exact: with
    vanishing slacks it gives the same ``w`` as ``"minmax"``.

    Notes
    -----
    Prediction uses :func:`scipy.optimize.linear_sum_assignment` when
    ``R == P == 1`` and the inference LP otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> model = BipartiteMatching()               # an assignment (R = P = 1)
    >>> x = np.zeros((4, 4, 1))                    # 4 rows, 4 columns, 1 feature per edge
    >>> model.inference(model.check_x(x), np.arange(16.0))   # best assignment for edge scores
    array([[0, 0, 0, 1],
           [0, 0, 1, 0],
           [0, 1, 0, 0],
           [1, 0, 0, 0]])

    Training data with a planted model: :func:`structlp.datasets.make_bipartite_matching`.
    """

    formulations = ("minmax", "certificate")

    def __init__(self, R: int = 1, P: int = 1,
                 edge_weights: Union[None, ArrayLike, Callable[..., Any]] = None) -> None:
        self.R = R
        self.P = P
        self.edge_weights = edge_weights

    def _params(self):
        R = check_scalar(self.R, "R", kind=numbers.Integral, low=1, owner="BipartiteMatching")
        P = check_scalar(self.P, "P", kind=numbers.Integral, low=1, owner="BipartiteMatching")
        return R, P

    def check_x(self, x: Any) -> Any:
        x = check_finite_array(x, "x (edge features)", ndim=3)
        R, P = self._params()
        n_rows, n_cols, d = x.shape
        if n_rows == 0 or n_cols == 0 or d == 0:
            raise InvalidInputError(
                f"x must have shape (n_rows, n_cols, d) with every size >= 1; got {x.shape}.")
        if R > n_rows or P * n_rows < R * n_cols:
            raise InvalidInputError(
                f"No assignment exists for x of shape {x.shape} with R={R}, P={P}: each of "
                f"{n_cols} columns needs {R} of {n_rows} rows and each row takes at most {P}.")
        return x

    def n_parts(self, x: Any) -> int:
        return x.shape[0] * x.shape[1]

    #: The hooks :meth:`prepare_batch` computes at once: a subclass (or instance) that
    #: overrides any of them is prepared example by example (the lowest override wins).
    BATCH_HOOKS = ("check_x", "n_parts", "features", "feature_operator", "polytope",
                   "polytope_key", "encode", "loss", "loss_coefficients", "inference",
                   "inference_parts", "checked_output", "checked_loss", "checked_features",
                   "checked_feature_operator", "checked_polytope", "loss_hook",
                   "decoder_hook", "_params", "_weights", "prepare_batch")

    def prepare_batch(self, X: Any, Y: Any, need_polytopes: bool = True,
                      operators: bool = False) -> Any:
        """What :func:`structlp.compiler.prepare` computes through the hooks, for all
        examples at once from their stacked edge features and assignments (the checks as
        array operations): the :class:`~structlp.formulations.TrainingData`; or the index
        of the first example the vectorised checks cannot accept (``prepare`` words its
        refusal through the hooks); or None where it does not apply (edge weights,
        examples of several shapes, a subclass overriding one of :attr:`BATCH_HOOKS`)."""
        from ..compiler import own_hooks
        from ._batch import prepare_matchings
        if not own_hooks(self, BipartiteMatching, self.BATCH_HOOKS):
            return None
        return prepare_matchings(self, list(X), list(Y), need_polytopes, operators)

    def features(self, x: Any) -> Any:
        return x.reshape(-1, x.shape[2])

    def polytope_key(self, x: Any) -> Optional[Hashable]:
        return (x.shape[0], x.shape[1])

    def polytope(self, x: Any) -> Polytope:
        R, P = self._params()
        n_rows, n_cols = x.shape[:2]
        E = sp.kron(sp.csr_array(np.ones((1, n_rows))), sp.eye_array(n_cols), format="csr")
        A = sp.kron(sp.eye_array(n_rows), sp.csr_array(np.ones((1, n_cols))), format="csr")
        return Polytope(A=A, b=np.full(n_rows, float(P)), E=E, e=np.full(n_cols, float(R)),
                        lb=0.0, ub=1.0)

    def encode(self, x: Any, y: Any) -> np.ndarray:
        y = check_finite_array(y, "y", shape=x.shape[:2])
        return y.ravel()

    def decode(self, x: Any, mu: np.ndarray) -> Any:
        return np.rint(mu).astype(int).reshape(x.shape[:2])

    def _weights(self, x, y_true):
        ew = self.edge_weights
        if ew is None:
            return None
        if callable(ew):
            ew = ew(x, y_true)
        ew = check_finite_array(ew, "edge_weights", shape=x.shape[:2])
        if np.any(ew < 0):
            raise InvalidParameterError("edge_weights must be >= 0.")
        return ew.ravel()

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        mu_true = self.encode(x, y_true)
        wts = self._weights(x, y_true)
        if wts is not None:
            mu_true = mu_true * wts
        return -mu_true, float(mu_true.sum())

    def formulation(self, name: str) -> Any:
        """The ``"certificate"`` formulation (requires ``R == P == 1``)."""
        from ..certificates import Certificate
        R, P = self._params()
        if name != "certificate":
            raise KeyError(name)
        if R != 1 or P != 1:
            raise InvalidParameterError(
                f"formulation='certificate' of BipartiteMatching needs R == P == 1 (a "
                f"matching); got R={R}, P={P}. Use formulation='minmax'.")
        return Certificate(self, needs_polytopes=True)  # y checked against the polytope

    def certificate_rows(self, x: Any, mu_true: np.ndarray) -> CertificateRows:
        """Alternating-cycle rows of the assignment ``mu_true`` (see the class docstring).

        Returns
        -------
        Gs : sparse (2E, n_rows * n_cols); Gd : sparse (2E, 4 n_rows - 1)
            with ``E = n_rows * n_rows`` edges of the padded bipartite graph.
        """
        from ..certificates import alternating_cycle_rows
        nr, nc = x.shape[:2]
        Y = np.asarray(mu_true).reshape(nr, nc) > 0.5
        j, k = np.meshgrid(np.arange(nr), np.arange(nr), indexing="ij")  # all columns + dummies
        j, k = j.ravel(), k.ravel()  # type: ignore[assignment]  # 2-D grids to 1-D
        real = k < nc
        part = np.where(real, j * nc + np.minimum(k, nc - 1), -1)
        in_M = np.zeros((nr, nr), dtype=bool)
        in_M[:, :nc] = Y
        free = np.flatnonzero(~Y.any(axis=1))
        in_M[free, nc + np.arange(len(free))] = True
        return alternating_cycle_rows(2 * nr, j, nr + k, in_M.ravel(), part, nr * nc)

    def inference(self, x: Any, scores: np.ndarray) -> Any:
        R, P = self._params()
        if R != 1 or P != 1:
            return None
        return self._assignment(x, scores).reshape(x.shape[:2]).astype(int)

    def inference_parts(self, x: Any, scores: np.ndarray) -> Optional[np.ndarray]:
        if not (self.R == 1 and self.P == 1):   # b-matchings: the inference LP
            return None
        return self._assignment(x, scores)

    def k_best(self, x: Any, scores: np.ndarray, k: int) -> Tuple[List[Any], np.ndarray]:
        """The ``k`` best assignments (:func:`structlp.inference.k_best`): Murty's algorithm
        for ``R = P = 1`` (the columns' rows as the variables, one
        :func:`scipy.optimize.linear_sum_assignment` per subproblem with barred entries at
        minus infinity), Lawler-Murty over the inference LP otherwise."""
        from ..inference.kbest import lawler, lawler_murty_lp, oracle_branch
        if not (self.R == 1 and self.P == 1):
            return lawler_murty_lp(self, x, scores, k)
        n_rows, n_cols = x.shape[:2]
        S0 = np.asarray(scores, dtype=float).reshape(n_rows, n_cols)

        def solve(y, j, F):                  # y[c]: the row of column c
            S = S0.copy()
            for c in range(j):
                keep = S[y[c], c]
                S[:, c] = -np.inf
                S[y[c], c] = keep
            S[list(F), j] = -np.inf
            try:
                rows, cols = linear_sum_assignment(S, maximize=True)
            except ValueError:               # no assignment left in this subproblem
                return None
            yy = np.empty(n_cols, dtype=np.int64)
            yy[cols] = rows
            return yy, float(S0[rows, cols].sum())

        found = lawler(solve(np.zeros(n_cols, dtype=np.int64), 0, frozenset()),
                       oracle_branch(solve, n_cols), k)
        outputs = []
        for y, _ in found:
            Y = np.zeros((n_rows, n_cols), dtype=int)
            Y[y, np.arange(n_cols)] = 1
            outputs.append(Y)
        return outputs, np.array([float(S0[y, np.arange(n_cols)].sum()) for y, _ in found])

    @staticmethod
    def _assignment(x, scores):
        """The maximum-score assignment (Hungarian algorithm) as a 0/1 part vector."""
        n_rows, n_cols = x.shape[:2]
        S = np.asarray(scores, dtype=float).reshape(n_rows, n_cols)
        rows, cols = linear_sum_assignment(S, maximize=True)
        mu = np.zeros(n_rows * n_cols)
        mu[rows * n_cols + cols] = 1.0
        return mu
