"""The compiled kernels, ahead of time when the wheel has them, else by numba's JIT.

Each kernel is one plain Python function, where its idea lives (max-sum in
:mod:`structlp.graphical.maxsum`, the block-coordinate Frank-Wolfe epochs in
``structlp.learners._fw_trees``, ...).  It runs in one of three ways, the same code each
time:

1. **ahead of time**: building the wheel compiles every kernel of :data:`KERNELS` with
   numba's ahead-of-time compiler (``numba.pycc``) into the extension module
   ``structlp._kernels`` (:mod:`structlp.compiled.build`).  Importing it takes milliseconds
   and imports neither numba nor LLVM: a fresh process pays no JIT start-up (numba's
   import and the loading of its cached kernels, about 1.3 CPU s and 100 MB), and the
   first fit after installing compiles nothing.  It is used when it was built from the
   installed kernels' sources (a hash of those files, checked at import);
2. **numba's JIT** (``cache=True``) when the extension is absent (a source checkout, an
   install that could not compile it) or stale, or when ``STRUCTLP_AOT=0``;
3. **plain Python/numpy** where numba cannot be imported (each module's own fallback).

The ahead-of-time and JIT kernels are the same LLVM compilation of the same function.
The JIT compiles for the machine it runs on; the wheel holds two builds on x86-64: one for
the generic CPU of the family (``structlp._kernels``) and one for the x86-64-v3 level
(``structlp._kernels_v3``: AVX2 and FMA, SIMD twice as wide), used where the CPU has it
(a check compiled with the wheel, ``structlp.compiled._cpu``; :func:`target` says which
is in use, ``STRUCTLP_AOT=generic`` keeps to the first; ``STRUCTLP_AOT_CPU=host`` at build
time builds one module for the building machine's CPU).  Their signatures are fixed
(:data:`KERNELS`): int64 and float64, C-contiguous arrays, as the call sites pass them.

Compiled code indexes without bounds checks: the public functions in front of the kernels
check their arrays' values first (indices in range, permutations, trees, shapes), and
:func:`aot` checks types, the writability of the arrays a kernel writes (:data:`WRITES`)
and the values (:data:`VALUE_CHECKS`); it hands out the graph kernels only (the learners'
kernels, which trust a learner's own state, are reached through their private functions:
:func:`ahead_of_time`).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

import numpy as np

#: exported name -> (module, function, numba signature)
KERNELS: Dict[str, Tuple[str, str, str]] = {
    "max_sum": (
        "structlp.graphical.maxsum", "_max_sum_kernel",
        "Tuple((int64[::1], float64, boolean))(int64[::1], int64[::1], int64[::1], "
        "float64[:, ::1], float64[:, :, ::1])"),
    "dual_decomposition": (
        "structlp.graphical.dual_decomposition", "_dd_kernel",
        "Tuple((int64[::1], boolean, int64))(int64[:, ::1], int64[:, ::1], int64[:, ::1], "
        "float64[:, :, :, ::1], float64[:, ::1], float64[:, :, ::1], int64[::1], int64[::1], "
        "int64, int64, float64)"),
    "dinic": (
        "structlp.graphical.roof_duality", "_dinic",
        "Tuple((float64, int64[::1]))(int64[::1], int64[::1], int64[::1], float64[::1], "
        "int64, int64, float64)"),
    "psi_step": (
        "structlp.learners._fw_kernels", "_psi_step",
        "Tuple((float64, float64, int64))(int64, float64[::1], float64[::1], int64[::1], "
        "float64[::1], float64[::1], float64, boolean, int64, int64[:, ::1], int64[::1], "
        "float64[:, ::1], int64[:, ::1], float64[:, ::1], int64[::1], float64[::1], "
        "float64[::1], int64[::1], int64[::1])"),
    "psi_pass": (
        "structlp.learners._fw_kernels", "_psi_pass",
        "float64(float64[::1], float64, float64, int64[:, ::1], int64[::1], float64[:, ::1], "
        "int64[:, ::1], float64[:, ::1], int64[::1], float64[::1], float64[::1], int64[::1], "
        "int64[::1])"),
    "pairwise_steps": (
        "structlp.learners._fw_kernels", "_pairwise_steps",
        "Tuple((float64, int64))(float64[::1], float64[:, ::1], float64[::1], float64[::1], "
        "int64, int64, float64, int64, float64)"),
    "tree_epoch": (
        "structlp.learners._fw_trees", "_tree_epoch",
        "Tuple((float64, int64))(int64[::1], int64, float64[::1], float64, int64, "
        "float64, float64[::1], int64, int64, int64, float64[:, ::1], float64[:, ::1], "
        "int64[::1], int64[::1], int64[::1], int64[::1], float64[:, ::1], float64[::1], "
        "int64[::1], float64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], int64[::1], int64[:, ::1], float64[::1], float64[::1], "
        "float64[::1], float64[:, ::1], float64[:, ::1], int64[:, ::1], int64[::1], "
        "float64[::1], float64[::1], float64[:, ::1])"),
    "tree_cache_passes": (
        "structlp.learners._fw_trees", "_tree_cache_passes",
        "float64(float64[::1], float64, float64, float64, float64, float64, int64, int64, "
        "float64, float64, float64[::1], int64, int64, int64, float64[:, ::1], "
        "float64[:, ::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], int64[:, ::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], "
        "int64[::1])"),
    "tree_check": (
        "structlp.learners._fw_trees", "_tree_check",
        "void(float64[::1], float64, float64[::1], float64[::1], float64[::1], int64, "
        "int64, int64, float64[:, ::1], float64[:, ::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], float64[:, ::1], int64[::1], int64[::1], int64[::1], "
        "int64[:, ::1], float64[::1], float64[:, ::1], float64[:, ::1], int64[:, ::1], "
        "int64[::1])"),
    "tree_primal": (
        "structlp.learners._fw_trees", "_tree_primal",
        "float64(float64, float64[::1], float64[::1], int64, int64, int64, "
        "float64[:, ::1], float64[:, ::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[:, ::1], "
        "float64[::1], float64[::1], boolean, float64[::1], int64[::1], float64[::1], "
        "int64[::1], float64[::1])"),
    "tree_rounds": (
        "structlp.learners._fw_rounds", "_tree_rounds",
        "int64(int64, int64, int64, boolean, int64[::1], float64[::1], float64[::1], "
        "float64[:, ::1], float64[:, ::1], int64[::1], int64[::1], int64[::1], float64, "
        "int64, float64[::1], int64, int64, int64, float64[:, ::1], float64[:, ::1], "
        "int64[::1], int64[::1], int64[::1], int64[::1], float64[:, ::1], float64[::1], "
        "int64[::1], float64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[::1], int64[::1], int64[::1], int64[:, ::1], float64[::1], float64[::1], "
        "float64[::1], float64[:, ::1], float64[:, ::1], int64[:, ::1], int64[::1], "
        "float64[::1], float64[::1], float64[:, ::1])"),
    "tree_pass_rounds": (
        "structlp.learners._fw_rounds", "_tree_pass_rounds",
        "int64(int64, int64, boolean, int64[::1], float64[::1], float64[::1], "
        "float64[:, ::1], float64[:, ::1], float64, int64, float64, float64, int64, "
        "float64[::1], int64, int64, int64, float64[:, ::1], float64[:, ::1], int64[::1], "
        "int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], "
        "int64[:, ::1], float64[::1], float64[::1], float64[::1], float64[::1], "
        "float64[::1], float64[:, ::1], float64[:, ::1], int64[::1])"),
    "combine": (
        "structlp.learners._fw_rounds", "_combine",
        "void(int64, float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], float64)"),
    "semi_markov_viterbi": (
        "structlp.structures._semi_markov_dp", "_sm_viterbi",
        "Tuple((int64[::1], float64, boolean))(float64[::1], int64, int64, int64)"),
    "semi_markov_marginals": (
        "structlp.structures._semi_markov_dp", "_sm_marginals",
        "Tuple((float64[::1], float64, boolean))(float64[::1], int64, int64, int64)"),
    "semi_markov_sample": (
        "structlp.structures._semi_markov_dp", "_sm_sample",
        "int64[:, ::1](float64[::1], int64, int64, int64, float64[:, ::1])"),
}

#: The arguments each kernel writes into (a read-only array there is refused: the compiled
#: code would write into memory it must not).  Kept equal to what the kernels' sources
#: assign by a test that reads them.
WRITES: Dict[str, Tuple[str, ...]] = {
    "max_sum": (),
    "dual_decomposition": (),
    "dinic": ("cap",),
    "psi_step": ("rows", "n", "psi", "idx", "val", "nnz", "alpha", "lv", "free", "nfree"),
    "psi_pass": ("rows", "n", "alpha", "free", "nfree"),
    "pairwise_steps": ("act", "alpha"),
    "tree_epoch": ("w", "g_est", "ns", "so", "go", "cap", "top", "Y", "alpha", "lv", "G", "S",
                   "msg", "back", "ybuf", "act", "before", "coef"),
    "tree_cache_passes": ("w", "hg", "ns", "Y", "alpha", "lv", "G", "act", "before", "coef",
                          "SC", "out"),
    "tree_check": ("hinge", "g_est", "S", "msg", "back", "ybuf"),
    "tree_primal": ("w", "alpha", "Kn", "Ke", "G"),
    "tree_rounds": ("sync", "st", "W", "WL", "stats", "pos", "g_est", "ns", "so", "go", "cap",
                    "top", "Y", "alpha", "lv", "G", "S", "msg", "back", "ybuf", "act", "before",
                    "coef"),
    "tree_pass_rounds": ("sync", "st", "W", "WL", "stats", "hg", "ns", "Y", "alpha", "lv", "G",
                         "act", "before", "coef", "SC"),
    "combine": ("W", "st"),
    "semi_markov_viterbi": (),
    "semi_markov_marginals": (),
    "semi_markov_sample": (),
}

#: kernel -> (module, function): the check of its arguments' values (indices in range,
#: permutations, trees, graphs) that :func:`aot` runs before the compiled code, as the
#: public function around the kernel does.  The learners' kernels take a learner's own
#: state (dozens of arrays it built and sized) and have no such check.
VALUE_CHECKS: Dict[str, Tuple[str, str]] = {
    "max_sum": ("structlp.graphical.maxsum", "_check_kernel_args"),
    "dual_decomposition": ("structlp.graphical.dual_decomposition", "_check_kernel_args"),
    "dinic": ("structlp.graphical.roof_duality", "_check_kernel_args"),
    "semi_markov_viterbi": ("structlp.structures._semi_markov_dp", "_check_kernel_args"),
    "semi_markov_marginals": ("structlp.structures._semi_markov_dp", "_check_kernel_args"),
    "semi_markov_sample": ("structlp.structures._semi_markov_dp", "_check_kernel_args"),
}

#: the wheel's second build of the kernels, for x86-64-v3 CPUs (:func:`target`)
V3_MODULE = "_kernels_v3"
#: modules the kernels compile in without exporting a kernel of their own
_HELPER_MODULES = ("structlp.compiled.prefetch", "structlp.compiled.barrier")
_PACKAGE = Path(__file__).resolve().parents[1]
_state: Dict[str, Any] = {}
_UNSET: Any = object()
_numba: Any = _UNSET         # numba, imported on first use (None: it does not import)
_JITTED: Dict[Any, Any] = {}


def numba_module() -> Any:
    """numba, imported when first needed (not at import: it costs about 0.5 CPU s, and the
    kernels built ahead of time do not need it), or None when it does not import."""
    global _numba
    if _numba is _UNSET:
        try:
            import numba
        except ImportError:  # pragma: no cover - exercised by forcing the fallback in the tests
            _numba = None
        else:
            _numba = numba
    return _numba


def jit(fn: Callable[..., Any]) -> Optional[Callable[..., Any]]:
    """``fn`` compiled by numba's JIT (on first use, cached on disk; one dispatcher per
    function), or None when numba does not import."""
    if fn not in _JITTED:
        numba = numba_module()
        if numba is None:
            return None
        _JITTED[fn] = numba.njit(cache=True, nogil=True)(fn)
    return _JITTED[fn]


def kernel(name: str, fn: Callable[..., Any],
           jitted: Optional[Callable[[], Any]] = None) -> Optional[Callable[..., Any]]:
    """The kernel ``name`` of :data:`KERNELS` built ahead of time, else ``fn`` (its Python
    function) compiled by numba's JIT (``jitted()`` when given); None without either.

    For the module that defines the kernel, whose public function has checked the
    arguments' values: the ahead-of-time kernel returned here checks their types, shapes
    and writability only (:func:`aot` also checks their values).

    Raises
    ------
    InvalidParameterError
        ``name`` is not a kernel, or ``fn`` is not its Python function.
    """
    built = ahead_of_time(name, fn)
    if built is not None:
        return built
    return jitted() if jitted is not None else jit(fn)


def kernel_set(fns: Dict[str, Callable[..., Any]],
               jit_helpers: Callable[[], bool]) -> Optional[Dict[str, Callable[..., Any]]]:
    """The kernels ``fns`` (name -> Python function, each named as its kernel of
    :data:`KERNELS` with a leading underscore), compiled as one set: all built ahead of time
    when the wheel has them, else by numba's JIT (on first use, cached on disk) after
    ``jit_helpers()`` bound the numba functions they call; None when it returns False
    (numba does not import).  For the modules whose kernels run together (the tree
    Frank–Wolfe's)."""
    built = {name: ahead_of_time(name.lstrip("_"), fn) for name, fn in fns.items()}
    if all(f is not None for f in built.values()):
        return cast(Dict[str, Callable[..., Any]], built)
    if jit_helpers():
        return {name: jit(fn) or fn for name, fn in fns.items()}
    return None


def ahead_of_time(name: str, fn: Callable[..., Any]) -> Optional[Callable[..., Any]]:
    """The kernel ``name`` built ahead of time, behind the checks of its arguments' types,
    shapes and writability (not of their values), or None when the wheel has no such build.

    For the module that defines the kernel, which passes the kernel's own Python function
    ``fn`` (a private function: the learners' kernels, which take a learner's own state and
    trust its values, are reached only so; :func:`aot` does not hand them out).

    Raises
    ------
    InvalidParameterError
        ``name`` is not a kernel, or ``fn`` is not its Python function.
    """
    module, fn_name, _ = _spec(name)
    if getattr(fn, "py_func", fn) is not getattr(importlib.import_module(module), fn_name):
        from ..exceptions import InvalidParameterError
        raise InvalidParameterError(
            f"kernel({name!r}, fn): fn must be the kernel's own function {module}.{fn_name}; "
            f"got {getattr(fn, '__qualname__', type(fn).__name__)}.")
    return _typed(name)


def _spec(name: Any) -> Tuple[str, str, str]:
    if not isinstance(name, str):
        raise TypeError(f"the kernel name must be a str; got {type(name).__name__}.")
    if name not in KERNELS:
        from ..exceptions import InvalidParameterError
        raise InvalidParameterError(
            f"no compiled kernel is named {name!r}; the kernels are {sorted(KERNELS)}.")
    return KERNELS[name]


def source_hash(root: Optional[Path] = None) -> int:
    """A 62-bit hash of the kernels' source files (and of :data:`KERNELS`): what the
    extension module was built from."""
    root = _PACKAGE if root is None else root
    h = hashlib.sha256(repr(sorted(KERNELS.items())).encode())
    for module in sorted({m for m, _, _ in KERNELS.values()} | set(_HELPER_MODULES)):
        rel = Path(*module.split(".")[1:]).with_suffix(".py")
        h.update(rel.as_posix().encode())
        h.update((root / rel).read_bytes())
    return int.from_bytes(h.digest()[:8], "little") >> 2


def status() -> str:
    """Where the kernels come from: ``"ahead of time"``, ``"disabled"`` (``STRUCTLP_AOT=0``),
    ``"not built"`` or ``"stale"`` (then numba's JIT compiles them, or Python runs them).

    Examples
    --------
    >>> from structlp import compiled
    >>> compiled.status() in ("ahead of time", "disabled", "not built", "stale")
    True
    """
    _module()
    return _state["status"]


def target() -> Optional[str]:
    """The build of the kernels in use: ``"x86-64-v3"`` (the wheel's second build, for
    CPUs with AVX2 and FMA), ``"baseline"`` (``structlp._kernels``: the generic CPU of the
    family, or the CPU named by ``STRUCTLP_AOT_CPU`` at build time), or None when they were
    not built ahead of time.  ``STRUCTLP_AOT=generic`` keeps to the baseline.

    Examples
    --------
    >>> from structlp import compiled
    >>> compiled.target() in ("x86-64-v3", "baseline", None)
    True
    """
    _module()
    return _state["target"]


def _has_v3() -> bool:
    """Whether the CPU runs x86-64-v3 code (False without the compiled check)."""
    try:
        from . import _cpu  # type: ignore[attr-defined]
    except ImportError:
        return False
    return bool(_cpu.x86_64_v3())


def _module() -> Any:
    if "module" not in _state:
        module, why, target = None, "ahead of time", None
        mode = os.environ.get("STRUCTLP_AOT", "1")
        if mode == "0":
            why = "disabled"
        else:
            names = ([V3_MODULE] if mode != "generic" and _has_v3() else []) + ["_kernels"]
            for name in names:
                try:
                    module = importlib.import_module("structlp." + name)
                except ImportError:
                    continue
                target = "x86-64-v3" if name == V3_MODULE else "baseline"
                break
            if module is None:
                why = "not built"
            else:
                try:
                    fresh = module.source_hash() == source_hash()
                except OSError:                       # sources not installed: trust it
                    fresh = True
                if not fresh:
                    module, why, target = None, "stale", None
        _state["module"], _state["status"], _state["target"] = module, why, target
    return _state["module"]


def aot(name: str) -> Optional[Callable[..., Any]]:
    """The ahead-of-time compiled kernel ``name`` (a key of :data:`KERNELS`), or None.

    The compiled function trusts its arguments (an int32 or a strided array where its
    signature says a C-contiguous int64 one reads the wrong memory; an index out of range
    reads or writes outside an array), so it is returned behind checks of every argument:

    * against the signature: dtype, number of dimensions, C-contiguity (a mismatch raises
      TypeError naming the kernel and the argument; arrays are never copied);
    * writability of the arrays it writes into (:data:`WRITES`; a read-only array, such as
      a read-only memory map, raises TypeError);
    * the values, for the graph kernels (:data:`VALUE_CHECKS`: ``max_sum``,
      ``dual_decomposition``, ``dinic``, the ``semi_markov_*`` dynamic programs): indices
      in range, permutations, trees, shapes that agree (InvalidInputError), as their
      public functions check them.

    The learners' kernels (``psi_*``, ``pairwise_steps``, ``tree_*``) take a learner's
    internal state, whose values no check could vouch for: ``aot`` refuses them (the
    learners reach them through their own private functions, :func:`ahead_of_time`).

    Raises
    ------
    TypeError
        ``name`` not a str.
    InvalidParameterError
        ``name`` not a kernel of :data:`KERNELS`, or one of the learners' internal kernels.
    """
    _spec(name)
    if name not in VALUE_CHECKS:
        from ..exceptions import InvalidParameterError
        raise InvalidParameterError(
            f"aot({name!r}): {name!r} is a kernel internal to structlp's learners; it takes "
            "a learner's own state and trusts its values, so aot() does not hand it out. "
            f"The kernels aot() gives, behind checks of every argument, are "
            f"{sorted(VALUE_CHECKS)}.")
    checked = _state.setdefault("checked", {})
    if name not in checked:
        typed = _typed(name)
        value_check = None
        if typed is not None and name in VALUE_CHECKS:
            module, fn = VALUE_CHECKS[name]
            value_check = getattr(importlib.import_module(module), fn)
        checked[name] = None if typed is None else _with_value_check(name, typed, value_check)
    return checked[name]


def _typed(name: str) -> Optional[Callable[..., Any]]:
    """The ahead-of-time kernel ``name`` behind the check of its arguments' types and
    writability (not of their values), or None."""
    typed = _state.setdefault("typed", {})
    if name not in typed:
        module = _module()
        typed[name] = (None if module is None else
                       _checked(name, getattr(module, name), KERNELS[name][2]))
    return typed[name]


def _with_value_check(name: str, typed: Callable[..., Any],
                      value_check: Optional[Callable[..., Any]]) -> Callable[..., Any]:
    def kernel(*args: Any) -> Any:
        typed.check(*args)  # type: ignore[attr-defined]  # types first: values read them
        if value_check is not None:
            value_check(*args)
        return typed(*args)

    kernel.__name__ = name
    kernel.__doc__ = typed.__doc__
    return kernel


def _arguments(signature: str) -> List[Tuple[str, Any, int]]:
    """``[(kind, dtype, ndim)]`` of a signature string of :data:`KERNELS`."""
    inner = signature[signature.index(")(") + 2:-1] if ")(" in signature else \
        signature[signature.index("(") + 1:-1]
    out: List[Tuple[str, Any, int]] = []
    depth, cur, parts = 0, "", []
    for ch in inner:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    for tok in parts:
        if "[" in tok:
            out.append(("array", np.dtype(tok[:tok.index("[")]), tok.count(",") + 1))
        else:
            out.append(({"int64": "int", "float64": "float", "boolean": "bool"}[tok], None, 0))
    return out


def _checked(name: str, fn: Callable[..., Any], signature: str) -> Callable[..., Any]:
    specs = _arguments(signature)
    scalar = {"int": int, "float": float, "bool": bool}
    module, fn_name, _ = KERNELS[name]
    try:
        params = list(inspect.signature(getattr(importlib.import_module(module),
                                                fn_name)).parameters)
    except (ImportError, AttributeError, ValueError, TypeError):  # pragma: no cover
        params = [str(i) for i in range(len(specs))]
    written = {params.index(p) for p in WRITES[name] if p in params}

    def convert(args: Any) -> List[Any]:
        if len(args) != len(specs):
            raise TypeError(f"compiled kernel {name} takes {len(specs)} arguments; got "
                            f"{len(args)}.")
        conv = []
        for i, (a, (kind, dtype, ndim)) in enumerate(zip(args, specs)):
            if kind == "array":
                if not (isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == ndim
                        and a.flags.c_contiguous):
                    got = (f"{a.dtype} array of shape {a.shape}"
                           f"{'' if a.flags.c_contiguous else ', not C-contiguous'}"
                           if isinstance(a, np.ndarray) else type(a).__name__)
                    raise TypeError(f"compiled kernel {name}: argument {i} must be a "
                                    f"C-contiguous {dtype} array with {ndim} dimension(s); "
                                    f"got {got}.")
                if i in written and not a.flags.writeable:
                    raise TypeError(f"compiled kernel {name}: argument {i} ({params[i]}) is "
                                    "written into by the kernel and must be a writable array; "
                                    "got a read-only one (copy it first).")
                conv.append(a)
            else:
                if isinstance(a, np.ndarray) or not isinstance(
                        a, (int, float, bool, np.integer, np.floating, np.bool_)):
                    raise TypeError(f"compiled kernel {name}: argument {i} ({params[i]}) must "
                                    f"be a {kind} scalar; got {type(a).__name__}.")
                conv.append(scalar[kind](a))
        return conv

    def check(*args: Any) -> None:
        convert(args)

    def kernel(*args: Any) -> Any:
        return fn(*convert(args))

    kernel.check = check  # type: ignore[attr-defined]
    kernel.__name__ = name
    kernel.__doc__ = f"The compiled kernel {name} ({signature}), its arguments checked."
    return kernel
