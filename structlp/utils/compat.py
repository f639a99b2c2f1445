"""The import paths of earlier releases, kept working.

structlp 0.1.0 had a flat package: ``structlp.learner``, ``structlp.frank_wolfe``,
``structlp.cutting_plane``, ``structlp.subgradient``, ``structlp.maxsum`` and the private
``structlp._validation``, ``structlp._progress``, ``structlp._lazy``, ``structlp._lbfgs``.
Those modules now live in :mod:`structlp.learners`, :mod:`structlp.graphical` and
:mod:`structlp.utils`.  :func:`install_aliases` (called by ``import structlp``) puts a finder
on :data:`sys.meta_path` that answers an old module path with the module that replaced it
(the same module object, so ``structlp.frank_wolfe.FrankWolfeLearner is
structlp.FrankWolfeLearner``), after a :class:`DeprecationWarning` naming the new path.

:data:`MODULE_ALIASES` is also the table :func:`structlp.load` uses for the class paths
written into files by earlier releases (:func:`current_path`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import FrameType
from typing import Dict, Optional

#: old module path -> the module that replaced it
MODULE_ALIASES: Dict[str, str] = {
    "structlp.learner": "structlp.learners.joint_qp",
    "structlp.frank_wolfe": "structlp.learners.frank_wolfe",
    "structlp.cutting_plane": "structlp.learners.cutting_plane",
    "structlp.subgradient": "structlp.learners.subgradient",
    "structlp.maxsum": "structlp.graphical.maxsum",
    "structlp._validation": "structlp.utils.validation",
    "structlp._progress": "structlp.utils.progress",
    "structlp._lazy": "structlp.utils.lazy",
    "structlp._lbfgs": "structlp.utils.lbfgs",
}

#: old class path -> current class path, for classes that moved within a module's split
CLASS_ALIASES: Dict[str, str] = {
    "structlp.certificates.GraphStructure": "structlp.certificates.graphs.GraphStructure",
}


def current_path(path: str) -> str:
    """The current import path of a class path written by an earlier release (or ``path``)."""
    if path in CLASS_ALIASES:
        return CLASS_ALIASES[path]
    module, _, name = path.rpartition(".")
    if module in MODULE_ALIASES:
        return f"{MODULE_ALIASES[module]}.{name}"
    return path


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the code doing the import."""
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and ("importlib" in frame.f_code.co_filename
                                 or frame.f_code.co_filename == __file__):
        frame, level = frame.f_back, level + 1
    return level


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target
        self.spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} is now {self.target}; the old import path will be "
                      "removed in a future release.", DeprecationWarning,
                      stacklevel=_caller_level())
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        # the import system has set the alias's spec on the real module: put its own back
        if self.spec is not None:
            module.__spec__ = self.spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MODULE_ALIASES:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(MODULE_ALIASES[fullname]))
        return None


def install_aliases() -> None:
    """Answer the old module paths (idempotent)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
