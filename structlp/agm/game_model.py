"""The AGM's inner game as a :class:`~structlp.StructuredModel`: every max-margin learner
trains the adversarial graphical model through it.

An example's AGM loss (Fathony et al. 2018, Eq. 6 inside Eq. 5) is

.. math::

    h_i(\\theta) = \\max_{x\\in P_i}\\; (\\Phi_i\\theta + c_i)\\cdot x - \\psi_i\\cdot\\theta,

over the parts ``x = (mu, v)``: the marginals ``mu`` of the adversary's distribution (local
on trees, clique marginals on junction trees) and one value ``v_j <= (L_j r_j)_a`` per node
game (:func:`~structlp.agm.polytopes.game_polytope`); ``Phi_i`` the marginals' features
(zero on ``v``), ``c_i`` one on ``v`` and zero elsewhere, ``psi_i`` the true labelling's
features.  That is the structured hinge of :class:`~structlp.StructuredModel` with outputs
the polytope's vertices (fractional marginals included), the loss ``c_i . x`` and the
truth at ``v = 0``, where its loss and hinge are zero.  So with ``C = 1 / (reg m)``

.. math::

    \\frac{\\lambda}{2}\\|\\theta\\|^2 + \\frac1m\\sum_i h_i(\\theta)
    = \\lambda\\Big(\\tfrac12\\|\\theta\\|^2 + C\\sum_i h_i(\\theta)\\Big),

the objective of :class:`~structlp.MaxMarginLearner` (which then dualizes the inner LPs:
the QP of ``method="qp"``) and :class:`~structlp.FrankWolfeLearner` (``method="frank_wolfe"``),
times ``reg``.  Its oracle is the exact inner LP (HiGHS, hot-started per example).  Its
outputs are fractional, which the structured-model contract otherwise excludes: it is a
model for training the AGM with these two learners (the cutting-plane learners identify
outputs by their 0/1 pattern; the AGM's own ``method="cutting_plane"`` keeps vertices),
not for predicting with them.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

import numpy as np
import scipy.sparse as sp

from ..exceptions import InvalidInputError
from ..model import StructuredModel
from ..polytope import Polytope
from .inner import InnerLP, inner_polytope
from .polytopes import lp_encode, lp_features, marginal_rows


class GameExample:
    """One AGM training example: a checked tree or graph example and its node losses.

    Parameters
    ----------
    example : TreeExample or GraphExample (as :func:`~structlp.agm.model.check_tree_dataset`
        returns them)
    node_losses : ndarray (n, k, k), each node's weighted non-negative loss matrix
    polytope : Polytope, optional
        Its :func:`~structlp.agm.inner.inner_polytope`, when already built (examples of one
        shape and node losses can share one: :func:`~structlp.agm.inner.shared_inner_polytopes`);
        else built on first use.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import chain, check_tree_example, loss_matrix
    >>> from structlp.agm.game_model import GameExample
    >>> # 3 nodes
    >>> ex = check_tree_example(chain(np.zeros((3, 1)), np.ones((2, 1))))
    >>> # (n, k, k)
    >>> losses = np.tile(loss_matrix("zero_one", 2), (3, 1, 1))
    >>> g = GameExample(ex, losses)
    >>> g.node_losses.shape
    (3, 2, 2)
    """

    def __init__(self, example: Any, node_losses: np.ndarray,
                 polytope: Optional[Polytope] = None) -> None:
        self.example = example
        self.node_losses = np.asarray(node_losses, dtype=float)
        self.key = (example.key(), self.node_losses.tobytes())
        self.polytope = polytope
        self._features: Any = None
        self._lp: Optional[InnerLP] = None

    def __getstate__(self):      # the HiGHS instance is not picklable: rebuilt on demand
        return (self.example, self.node_losses, self.polytope)

    def __setstate__(self, state):
        self.__init__(*state)


class AdversarialGame(StructuredModel):
    """The AGM's inner game (Eq. 6) as a structured model (see the module docstring).

    Parts ``(mu, v)`` of :func:`~structlp.agm.inner.inner_polytope`; an example is a
    :class:`GameExample`, an output the labelling (n,) of its nodes (encoded with
    ``v = 0``).

    Parameters
    ----------
    n_labels : int

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import chain, check_tree_example, loss_matrix
    >>> from structlp.agm.game_model import AdversarialGame, GameExample
    >>> ex = check_tree_example(chain(np.zeros((3, 1)), np.ones((2, 1))))
    >>> model = AdversarialGame(n_labels=2)
    >>> x = model.check_x(GameExample(ex, np.tile(loss_matrix("zero_one", 2), (3, 1, 1))))
    >>> # the parts (mu, v) and their features
    >>> model.n_parts(x), model.features(x).shape
    (17, (17, 6))
    >>> # a labelling as node marginals first
    >>> model.encode(x, np.array([0, 1, 0]))[:6]
    array([1., 0., 0., 1., 1., 0.])
    """

    #: every oracle call is an LP: the learners keep the active vertices' joint features
    costly_inference = True

    def __init__(self, n_labels: int) -> None:
        self.n_labels = n_labels

    def check_x(self, x: Any) -> GameExample:
        if not isinstance(x, GameExample):
            raise InvalidInputError(
                f"{type(self).__name__} takes GameExample examples (a checked tree or graph "
                f"example and its node losses); got {type(x).__name__}.")
        return x

    def n_parts(self, x: GameExample) -> int:
        return self.features(x).shape[0]

    def features(self, x: GameExample) -> Any:
        if x._features is None:
            F = lp_features(x.example, self.n_labels)
            n = x.example.n_nodes
            x._features = sp.vstack([F, sp.csr_array((n, F.shape[1]))], format="csr")
        return x._features

    def polytope(self, x: GameExample) -> Polytope:
        if x.polytope is None:     # one per example: the learners' check and its LP share it
            x.polytope = inner_polytope(x.example, self.n_labels, x.node_losses)
        return x.polytope

    def polytope_key(self, x: GameExample) -> Hashable:
        return x.key

    def loss_coefficients(self, x: GameExample, y_true: Any):
        n = x.example.n_nodes
        c = np.zeros(self.n_parts(x))
        c[-n:] = 1.0
        return c, 0.0

    def encode(self, x: GameExample, y: Any) -> np.ndarray:
        mu = lp_encode(x.example, np.asarray(y), self.n_labels)
        return np.concatenate([mu, np.zeros(x.example.n_nodes)])

    def decode(self, x: GameExample, mu: np.ndarray) -> np.ndarray:
        n, k = x.example.n_nodes, self.n_labels
        # the node marginals lead the parts on trees; graph examples map parts to them
        N = marginal_rows(x.example, k)[2]
        return np.asarray(N.T @ mu[:N.shape[0]]).reshape(n, k).argmax(axis=1)

    def inference_parts(self, x: GameExample, scores: np.ndarray) -> np.ndarray:
        """The inner LP's optimal vertex for part scores ``scores`` (exact, HiGHS; each
        example keeps its instance and hot-starts from its last basis)."""
        lp = x._lp
        if lp is None:
            lp = x._lp = InnerLP(x.example, self.n_labels, x.node_losses,
                                 polytope=self.polytope(x))
        _, v = lp.solve_costs(np.asarray(scores, dtype=float))
        return np.clip(v, lp.bounds[0], lp.bounds[1])
