"""The Examples sections of structlp.layers run and print what they show."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["structlp.layers.projection", "structlp.layers.losses"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
