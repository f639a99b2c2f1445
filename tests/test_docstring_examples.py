"""The Examples sections of the public docstrings run and print what they show."""

import doctest
import importlib

import pytest

MODULES = ["structlp.model",
           "structlp.learners.joint_qp",
           "structlp.learners.frank_wolfe",
           "structlp.learners.cutting_plane",
           "structlp.learners.subgradient",
           "structlp.polytope",
           "structlp.structures.bipartite_matching",
           "structlp.structures.tree_labeling",
           "structlp.structures.spanning_tree",
           "structlp.structures.perfect_matching",
           "structlp.structures.matching",
           "structlp.structures.semi_markov",
           "structlp.datasets.synthetic",
           "structlp.model_selection",
           "structlp.solvers",
           "structlp.structures.junction_tree_labeling",
           "structlp.structures._graph",
           "structlp.structures.multilabel",
           "structlp.structures.arborescence",
           "structlp.part_features",
           "structlp.agm.crf",
           "structlp.agm.game",
           "structlp.agm.recovery",
           "structlp.agm.synthetic",
           "structlp.graphical.junction",
           "structlp.graphical.losses",
           "structlp.graphical.trees",
           "structlp.sequence.automata",
           "structlp.sequence.features",
           "structlp.sequence.losses",
           "structlp.sequence.softmax_margin",
           "structlp.sequence.viterbi",
           "structlp.inference",
           "structlp.inference.kbest",
           "structlp.layers.batch",
           "structlp.layers.losses",
           "structlp.layers.projection",
           "structlp.layers.record",
           "structlp.layers.torch",
           "structlp.layers.jax",
           "structlp.certificates.alternating_cycle",
           "structlp.certificates.base",
           "structlp.certificates.graphs",
           "structlp.certificates.odd_sets",
           "structlp.certificates.spanning_tree",
           "structlp.formulations",
           "structlp.kernels",
           "structlp.compiled",
           "structlp.datasets.conll05",
           "structlp.datasets.conll05_features",
           "structlp.datasets.pystruct_data",
           "structlp.datasets.real",
           "structlp.persistence",
           "structlp.utils.progress",
           "structlp.utils.validation",
           "structlp.exceptions",
           "structlp.parallel",
           "structlp.agm.game_model"]

# the adapters' examples need their framework (the torch and jax extras)
NEEDS = {"structlp.layers.torch": "torch", "structlp.layers.record": "torch",
         "structlp.layers.jax": "jax"}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    # run as a reader's code would: classes an example defines belong to no structlp
    # module (structlp trusts its own decoders and checks the users')
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE,
                             extraglobs={"__name__": "__doctest__"})
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
