"""Rational and tropical sequence losses with exact softmax-margin gradients.

Implements Cortes, Kuznetsov, Mohri, Storcheus and Yang, "Efficient gradient
computation for structured output learning with rational and tropical losses"
(NeurIPS 2018): outputs are sequences ``y in Delta^l`` over ``Delta = {0..k-1}``,
features are Markov of order ``q`` and the task loss (edit distance,
Smith-Waterman, n-gram) enters the softmax-margin objective

    F_i(w) = log sum_y exp(L(y, y_i) - w . (Psi(x_i, y_i) - Psi(x_i, y)))

whose exact gradient is computed with weighted automata (``method="automata"``)
or by enumeration (``method="naive"``).
"""

from .automata import AutomatonTooLargeError, Lattice, LossAutomaton, build_loss_automaton
from .features import (BigramFeatures, EmissionFeatures, FunctionFeatures, MarkovFeatures,
                       StackedFeatures)
from .learner import SoftmaxMarginLearner
from .losses import EditDistance, HammingLoss, NGramLoss, SequenceLoss, SmithWaterman, ZeroLoss
from .softmax_margin import CompiledExample, compile_example, softmax_margin
from .ssvm import SequenceSSVM
from .viterbi import loss_augmented_viterbi, structured_hinge, viterbi

__all__ = [
    "SequenceLoss", "EditDistance", "SmithWaterman", "NGramLoss", "HammingLoss", "ZeroLoss",
    "MarkovFeatures", "BigramFeatures", "EmissionFeatures", "FunctionFeatures",
    "StackedFeatures", "SequenceSSVM",
    "softmax_margin", "compile_example", "CompiledExample",
    "LossAutomaton", "build_loss_automaton", "Lattice", "AutomatonTooLargeError",
    "viterbi", "loss_augmented_viterbi", "structured_hinge",
    "SoftmaxMarginLearner",
]
