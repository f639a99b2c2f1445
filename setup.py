"""Builds the wheel's compiled kernels (``structlp._kernels``, and on x86-64 also
``structlp._kernels_v3`` with the CPU check ``structlp.compiled._cpu``) ahead of time.

Everything else about the package is in ``pyproject.toml``.  When the kernels cannot be
compiled here (no numba or no C compiler at build time, or ``STRUCTLP_AOT=0``), the wheel
is built without them and numba's JIT compiles them on first use instead
(:mod:`structlp.compiled`); the CPU check is optional in the same way.
"""

import os
import sys
import types
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def compile_kernels(package_dir):
    """Compile the kernels into ``package_dir`` (the built package); False on failure."""
    if "structlp" not in sys.modules:
        # the kernel modules without the package's own __init__ (and its run-time
        # dependencies, which the build environment does not have)
        package = types.ModuleType("structlp")
        package.__path__ = [str(HERE / "structlp")]
        sys.modules["structlp"] = package
    try:
        from structlp.compiled.build import compile_into
        compile_into(package_dir)
    except Exception as exc:  # noqa: BLE001 - any failure: a wheel without them
        print(f"structlp: the compiled kernels are not built ({type(exc).__name__}: {exc}); "
              "numba's JIT will compile them on first use.", file=sys.stderr)
        return False
    return True


class BuildPyWithKernels(build_py):
    """``build_py``, then the kernels compiled into the built package."""

    def run(self):
        super().run()
        if os.environ.get("STRUCTLP_AOT", "1") != "0":
            compile_kernels(os.path.join(self.build_lib, "structlp"))


class PlatformDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform and Python."""

    def has_ext_modules(self):
        return True


CPU_CHECK = Extension("structlp.compiled._cpu", ["structlp/compiled/_cpu.c"], optional=True)

setup(cmdclass={"build_py": BuildPyWithKernels}, distclass=PlatformDistribution,
      ext_modules=[] if os.environ.get("STRUCTLP_AOT", "1") == "0" else [CPU_CHECK])
