"""Build-time only: compile :data:`structlp.compiled.KERNELS` ahead of time (numba.pycc).

``setup.py`` calls :func:`compile_into` to put the extension module ``structlp._kernels``
into the built package; it needs numba, scipy (numba's BLAS) and a C compiler at build time
(``pyproject.toml``'s build requirements), not at run time.
``python -m structlp.compiled.build DIR`` writes the module into ``DIR`` (for a source
checkout: ``python -m structlp.compiled.build structlp``).

The kernels call one another and their helpers as numba functions: each module's own JIT
set-up binds them before the kernels are exported, as for the JIT.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

from . import KERNELS, source_hash

#: The kernel modules whose kernels call helpers, and the function that binds those
#: helpers to numba functions (max-sum and Dinic call none).
_SETUP = {"structlp.graphical.dual_decomposition": "_jit",
          "structlp.learners._fw_kernels": "_jit_helpers",
          "structlp.learners._fw_trees": "_jit_helpers"}


def _cc() -> Any:
    from numba.pycc import CC

    cc = CC("_kernels", source_module=sys.modules[__name__])
    cc.target_cpu = os.environ.get("STRUCTLP_AOT_CPU", "")     # '' = the family's generic
    for module in _SETUP:
        getattr(importlib.import_module(module), _SETUP[module])()
    for name, (module, fn, sig) in KERNELS.items():
        cc.export(name, sig)(getattr(importlib.import_module(module), fn))
    cc.export("source_hash", "int64()")(_constant(source_hash()))
    return cc


def _constant(value: int) -> Any:
    def source_hash():
        return value
    return source_hash


def compile_into(directory: str) -> None:
    """Compile the extension module ``_kernels`` into ``directory`` (the package's)."""
    cc = _cc()
    cc.output_dir = str(directory)
    cc.compile()


def main(argv: Any = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    compile_into(args[0] if args else str(Path(__file__).resolve().parents[1]))


if __name__ == "__main__":
    main()
