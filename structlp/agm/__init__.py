"""Adversarial graphical models (Fathony et al., NeurIPS 2018) on tree-structured data.

* :func:`game_value` — the node game (Eq. 8) with closed forms for the zero-one,
  absolute and squared losses; :func:`recover_pairwise` — Eq. 9 by optimal transport.
* :class:`AdversarialGraphicalModel` — learning by the paper's stochastic
  subgradient method or by one exact QP; prediction by max-sum and Eq. 10.
* :class:`TreeCRF` — the log-linear baseline on the same data.
"""

from .crf import TreeCRF
from .game import absolute_game, game_value, loss_matrix, squared_game, zero_one_game
from .model import AdversarialGraphicalModel
from .recovery import recover_pairwise
from .trees import chain, check_parents, check_tree_example, max_sum

__all__ = ["game_value", "zero_one_game", "absolute_game", "squared_game", "loss_matrix",
           "recover_pairwise", "AdversarialGraphicalModel", "TreeCRF", "chain",
           "check_parents", "check_tree_example", "max_sum"]
