"""The Examples sections of the headline classes and functions the API pages show run and
print what they show (the modules' other examples run in tests/test_docstring_examples.py)."""

import doctest
import importlib

import pytest

HEADLINE = ["structlp.agm.model.AdversarialGraphicalModel",
            "structlp.sequence.learner.SoftmaxMarginLearner",
            "structlp.sequence.ssvm.SequenceSSVM",
            "structlp.persistence.save", "structlp.persistence.load"]


@pytest.mark.parametrize("path", HEADLINE)
def test_headline_example_runs(path):
    module, _, name = path.rpartition(".")
    obj = getattr(importlib.import_module(module), name)
    assert "Examples\n" in obj.__doc__, f"{path} has no Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(obj, name, globs={})
    assert tests and tests[0].examples
    for test in tests:
        runner.run(test)
    assert runner.failures == 0
