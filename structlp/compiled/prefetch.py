"""A cache hint for the compiled kernels: :func:`prefetch`.

Block-coordinate kernels visit their examples in a random order, so each example's data
(its feature rows, losses, active outputs) are cache misses, taken one after another.
Asking for the next example's cache lines while the current one is computed overlaps
those misses with the work.  In Python (the kernels' fallback) the hint does nothing; in a
kernel compiled by numba (ahead of time or by its JIT) it is one ``llvm.prefetch``
instruction, which never faults, so an index past the end of an array is harmless.
"""

from __future__ import annotations

from typing import Any, Dict

_STATE: Dict[str, bool] = {}


def prefetch(a: Any, i: int) -> None:
    """Hint that the cache line of ``a.flat[i]`` (``a`` a C-contiguous array) will be read
    soon.  Does nothing in Python; compiled, one prefetch instruction (see
    :func:`register`)."""
    return None


def register() -> None:
    """Make :func:`prefetch` a numba function (once; call it only where numba imports)."""
    if _STATE.get("registered"):
        return
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    @intrinsic
    def _llvm_prefetch(typingctx: Any, a: Any, i: Any) -> Any:   # (a, i) in a kernel
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array = context.make_array(signature.args[0])(context, builder, args[0])
            byte_ptr = ir.IntType(8).as_pointer()
            ptr = builder.bitcast(builder.gep(array.data, [args[1]]), byte_ptr)
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]),
                "llvm.prefetch.p0i8")
            # read, high temporal locality, data cache
            builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3),
                              ir.Constant(i32, 1)])
            return context.get_dummy_value()
        return types.void(a, types.intp), codegen

    @overload(prefetch)
    def _prefetch_impl(a: Any, i: Any) -> Any:
        def impl(a: Any, i: Any) -> None:
            _llvm_prefetch(a, i)  # type: ignore[call-arg]
        return impl

    _STATE["registered"] = True
