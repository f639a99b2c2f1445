"""Build-time only: compile :data:`structlp.compiled.KERNELS` ahead of time (numba.pycc).

``setup.py`` calls :func:`compile_into` to put the extension module ``structlp._kernels``
into the built package, compiled for the generic CPU of the platform's family, and on
x86-64 also ``structlp._kernels_v3``, compiled for the x86-64-v3 level (AVX2, FMA: SIMD
twice as wide; used where ``structlp.compiled._cpu`` says the CPU has it).  It needs
numba, scipy (numba's BLAS) and a C compiler at build time (``pyproject.toml``'s build
requirements), not at run time.  ``STRUCTLP_AOT_CPU=NAME`` (an LLVM CPU name, ``host``
for the building machine's) builds ``_kernels`` for that CPU instead, and no second
module.  ``python -m structlp.compiled.build DIR`` writes the modules into ``DIR`` (for a
source checkout: ``python -m structlp.compiled.build structlp``).

The kernels call one another and their helpers as numba functions: each module's own JIT
set-up binds them before the kernels are exported, as for the JIT.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from . import KERNELS, V3_MODULE, source_hash

#: The kernel modules whose kernels call helpers, and the function that binds those
#: helpers to numba functions (max-sum and Dinic call none).
_SETUP = {"structlp.graphical.dual_decomposition": "_jit",
          "structlp.learners._fw_kernels": "_jit_helpers",
          "structlp.learners._fw_rounds": "_jit_helpers",
          "structlp.learners._fw_trees": "_jit_helpers",
          "structlp.structures._semi_markov_dp": "_jit_helpers"}


def targets() -> Dict[str, str]:
    """The modules to build, and the LLVM CPU of each (``''``: the family's generic)."""
    cpu = os.environ.get("STRUCTLP_AOT_CPU", "")
    if cpu:
        return {"_kernels": cpu}
    out = {"_kernels": ""}
    if platform.machine().lower() in ("x86_64", "amd64"):
        out[V3_MODULE] = "x86-64-v3"
    return out


def _cc(name: str = "_kernels", cpu: str = "") -> Any:
    from numba.pycc import CC

    cc = CC(name, source_module=sys.modules[__name__])
    cc.target_cpu = cpu
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


def compile_into(directory: str, modules: Optional[Dict[str, str]] = None) -> None:
    """Compile the extension modules ``modules`` (name -> LLVM CPU; default
    :func:`targets`) into ``directory`` (the package's)."""
    from numba.pycc import compiler
    flags = compiler.Flags
    setattr(compiler, "Flags", _ReleasingGil(flags))
    try:
        for name, cpu in (targets() if modules is None else modules).items():
            cc = _cc(name, cpu)
            cc.output_dir = str(directory)
            cc.compile()
    finally:
        setattr(compiler, "Flags", flags)


def _ReleasingGil(flags: Any) -> Any:
    """numba.pycc's compilation flags with ``release_gil`` set: the exported kernels release
    the GIL while they run, as the JIT's do (``nogil=True``), so that threads run them on
    several cores (``FrankWolfeLearner(n_jobs=2)`` on chains and trees).  (pycc makes its
    flags itself, with the GIL kept, and has no option for it.)"""
    class Flags(flags):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True
    return Flags


def main(argv: Any = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    compile_into(args[0] if args else str(Path(__file__).resolve().parents[1]))


if __name__ == "__main__":
    main()
