"""Internal utilities shared by structlp's packages: argument validation
(:mod:`~structlp.utils.validation`), progress reporting (:mod:`~structlp.utils.progress`),
lazy imports (:mod:`~structlp.utils.lazy`), L-BFGS (:mod:`~structlp.utils.lbfgs`), numerics
(:mod:`~structlp.utils.numeric`), the bounds a polytope's rows imply
(:mod:`~structlp.utils.polyhedra`), data fingerprints (:mod:`~structlp.utils.fingerprint`) and
the aliases of the import paths of earlier releases (:mod:`~structlp.utils.compat`).

:class:`Progress` (with :func:`check_verbose` and :func:`check_callback`) is public: the
problems and user scripts report progress through it, on the ``structlp`` loggers.  The other
modules are structlp's own plumbing: their names may change between releases.
"""

from .progress import Progress, check_callback, check_verbose

__all__ = ["Progress", "check_callback", "check_verbose"]
