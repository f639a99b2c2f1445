"""Adversarial graphical models (Fathony et al., NeurIPS 2018) on trees and low-treewidth graphs.

* :func:`game_value` — the node game (Eq. 8) with closed forms for the zero-one,
  absolute and squared losses; :func:`recover_pairwise` — Eq. 9 by optimal transport.
* :class:`AdversarialGraphicalModel` — learning by the paper's stochastic
  subgradient method or by one exact QP; prediction by max-sum and Eq. 10; on
  tree examples and, through junction trees (§3.2.4), on graph examples.
* :class:`TreeCRF`, :class:`JunctionTreeCRF` — the log-linear baselines.
* :func:`graph`, :func:`skip_chain`, :func:`check_graph_example`,
  :func:`jt_max_sum` — graph examples and their junction trees
  (:mod:`structlp.graphical.junction`); :func:`make_loopy_data` — planted loopy data.

The graph helpers (:func:`chain`, :func:`graph`, :func:`skip_chain`, :func:`max_sum`,
:func:`jt_max_sum`, ...) are defined in :mod:`structlp.graphical` and re-exported here.  The
names are imported on first use (PEP 562), so that ``import structlp.agm`` loads neither POT
(optimal transport) nor networkx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..utils.lazy import attach

__all__ = ["game_value", "zero_one_game", "absolute_game", "squared_game", "loss_matrix",
           "recover_pairwise", "AdversarialGraphicalModel", "TreeCRF", "chain",
           "check_parents", "check_tree_example", "max_sum", "JunctionTreeCRF",
           "check_graph_example", "graph", "jt_max_sum", "skip_chain", "make_loopy_data"]

__getattr__, __dir__ = attach(__name__, {
    "JunctionTreeCRF": "crf", "TreeCRF": "crf",
    "absolute_game": "game", "game_value": "game", "loss_matrix": "game",
    "squared_game": "game", "zero_one_game": "game",
    "check_graph_example": ".graphical.junction", "graph": ".graphical.junction",
    "jt_max_sum": ".graphical.junction", "skip_chain": ".graphical.junction",
    "make_loopy_data": "synthetic",
    "AdversarialGraphicalModel": "model",
    "recover_pairwise": "recovery",
    "chain": ".graphical.trees", "check_parents": ".graphical.trees",
    "check_tree_example": ".graphical.trees", "max_sum": ".graphical.trees",
}, submodules=("data", "inner", "polytopes"))

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .crf import JunctionTreeCRF, TreeCRF
    from .game import absolute_game, game_value, loss_matrix, squared_game, zero_one_game
    from ..graphical.junction import check_graph_example, graph, jt_max_sum, skip_chain
    from .model import AdversarialGraphicalModel
    from .recovery import recover_pairwise
    from .synthetic import make_loopy_data
    from ..graphical.trees import chain, check_parents, check_tree_example, max_sum
