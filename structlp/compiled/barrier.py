"""A barrier for compiled kernels that run on several threads of one process: :func:`wait`.

Threads that run one compiled kernel each (without the GIL) and meet many times a second
(``FrankWolfeLearner(n_jobs=K)``: a CoCoA+ round of a few dozen blocks each) cannot
afford to return to Python at each meeting: a lock hand-off and the GIL cost about as much
as a round's work.  :func:`wait` lets them meet inside the compiled code: thread ``p``
publishes the number of meetings it has reached in ``sync[8 p]`` (one cache line per
thread) and spins until every thread has published as many.  Compiled, the loads and
stores are atomic (acquire and release: what one thread wrote before a meeting, the others
read after it, on any CPU), and a thread that has waited a while gives its core away
(``sched_yield`` on POSIX), then sleeps between looks (``usleep``): on a machine with fewer
free cores than threads, a thread whose partner is not running does not hold a core the
partner could run on.  ``sync[8 K]``, the last entry, is an abort flag: set by any thread
(or by Python), it makes every waiting thread return False.

In Python (the kernels' fallback) the same functions read and write the array directly.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict

_STATE: Dict[str, bool] = {}
#: int64 slots per thread in the ``sync`` array (a cache line: threads do not share one)
STRIDE = 8
#: spins before a waiting thread starts giving its core away (``sched_yield``), and
#: before it sleeps between looks (``usleep(NAP)``, microseconds)
SPINS = 2000
SLEEPS = 20000
NAP = 50


def load(a: Any, i: int) -> int:
    """``a[i]`` (an int64 array), read atomically with acquire ordering when compiled."""
    return int(a[i])


def store(a: Any, i: int, v: int) -> None:
    """``a[i] = v`` (an int64 array), written atomically with release ordering when
    compiled."""
    a[i] = v


def relax(spins: Any) -> None:
    """Give the core away for a moment after ``spins`` looks: ``sched_yield``, past
    :data:`SLEEPS` a sleep of :data:`NAP` microseconds (Python: ``time.sleep(0)``)."""
    time.sleep(0)


def wait(sync: Any, p: int, K: int, gen: int) -> bool:
    """Thread ``p`` of ``K`` reaches meeting ``gen`` (1, 2, ... within one launch, the
    array zeroed before it): returns True once all ``K`` have reached it, False if the
    abort flag ``sync[STRIDE * K]`` (the last entry) is set meanwhile.  ``sync``: int64
    (``STRIDE K + 1``,), :func:`new_sync`."""
    store(sync, STRIDE * p, gen)
    for q in range(K):
        spins = 0
        while load(sync, STRIDE * q) < gen:
            if load(sync, STRIDE * K) != 0:
                return False
            spins += 1
            if spins > SPINS:
                relax(spins)
    return True


def new_sync(K: int) -> Any:
    """A zeroed ``sync`` array for ``K`` threads (their slots and the abort flag)."""
    import numpy as np
    return np.zeros(STRIDE * K + 1, dtype=np.int64)


def register() -> None:
    """Make :func:`load`, :func:`store`, :func:`relax` and :func:`wait` numba functions
    (once; call it only where numba imports)."""
    if _STATE.get("registered"):
        return
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload, register_jitable

    def pointer(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        aty = signature.args[0]
        array = context.make_array(aty)(context, builder, args[0])
        return cgutils.get_item_pointer(context, builder, aty, array, [args[1]],
                                        wraparound=False)

    @intrinsic
    def _load(typingctx: Any, a: Any, i: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.load_atomic(pointer(context, builder, signature, args),
                                       ordering="acquire", align=8)
        return types.int64(a, types.intp), codegen

    @intrinsic
    def _store(typingctx: Any, a: Any, i: Any, v: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            builder.store_atomic(args[2], pointer(context, builder, signature, args),
                                 ordering="release", align=8)
            return context.get_dummy_value()
        return types.void(a, types.intp, types.int64), codegen

    @overload(load)
    def _load_impl(a: Any, i: Any) -> Any:
        def impl(a: Any, i: Any) -> int:
            return _load(a, i)  # type: ignore[call-arg]
        return impl

    @overload(store)
    def _store_impl(a: Any, i: Any, v: Any) -> Any:
        def impl(a: Any, i: Any, v: Any) -> None:
            _store(a, i, v)  # type: ignore[call-arg]
        return impl

    if os.name == "posix":
        sched_yield: Any = types.ExternalFunction("sched_yield", types.int32())
        usleep: Any = types.ExternalFunction("usleep", types.int32(types.uint32))

        def _relax(spins: Any) -> None:
            if spins > SLEEPS:
                usleep(NAP)
            else:
                sched_yield()
    else:  # pragma: no cover - Windows: spin only
        def _relax(spins: Any) -> None:
            pass

    @overload(relax)
    def _relax_impl(spins: Any) -> Any:   # (the same parameters as _relax's, for numba)
        return _relax

    register_jitable(wait)
    _STATE["registered"] = True
