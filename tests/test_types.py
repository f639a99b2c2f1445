"""Type hints on the public API: every public callable annotates its parameters and return.

Introspects every export of the public modules below (``__all__``, or for a module
without one the public names it defines): functions, classes (``__init__``,
``__call__`` and the public methods and properties, inherited ones included) and
fails listing each signature that leaves a parameter or the return unannotated.
mypy (run in CI) checks that the annotations agree with the code.
"""

import importlib
import inspect

import pytest

#: the public modules
MODULES = ["structlp", "structlp.structures", "structlp.sequence", "structlp.datasets",
           "structlp.agm"]


def exports(module):
    """The public names of ``module``: its ``__all__``, else the callables it defines."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and callable(v) and getattr(v, "__module__", None) == module.__name__]
    return [(n, getattr(module, n)) for n in names]


def is_structlp(obj):
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "structlp"


def members(cls):
    """(name, function) for the public methods and properties of ``cls`` defined in structlp."""
    seen = {}
    for klass in reversed(cls.__mro__):
        if not is_structlp(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") and name not in ("__init__", "__call__"):
                continue
            if isinstance(value, property):
                value = value.fget
            elif isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value):
                seen[name] = value
    return sorted(seen.items())


def missing(func):
    """The unannotated parts of ``func``'s signature ('return' for the return)."""
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    gaps = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty:
        gaps.append("return")
    return gaps


def unannotated(module_name):
    module = importlib.import_module(module_name)
    found, done = [], set()
    for name, obj in exports(module):
        if inspect.ismodule(obj) or not is_structlp(obj):
            continue
        if inspect.isclass(obj):
            items = [(f"{name}.{m}", f) for m, f in members(obj)]
        elif callable(obj):
            items = [(name, inspect.unwrap(obj))]
        else:
            continue
        for label, func in items:
            if func in done:
                continue
            done.add(func)
            gaps = missing(func)
            if gaps:
                found.append(f"{module_name}.{label}({', '.join(gaps)})")
    return found


@pytest.mark.parametrize("module_name", MODULES)
def test_public_signatures_are_annotated(module_name):
    found = unannotated(module_name)
    assert not found, (f"{len(found)} public signatures lack annotations "
                       f"(unannotated parameters, 'return' for the return):\n  "
                       + "\n  ".join(found))


def test_the_check_sees_gaps():
    """The introspection itself: an unannotated function and method are reported."""
    def f(a, b: int):
        return a

    class K:
        __module__ = "structlp.fake"

        def __init__(self, x: int) -> None:
            self.x = x

        def m(self, y) -> int:
            return y

        @property
        def p(self):
            return 1

    assert missing(f) == ["a", "return"]
    assert dict((n, missing(g)) for n, g in members(K)) == {"__init__": [], "m": ["y"],
                                                             "p": ["return"]}


def test_py_typed_marker_ships():
    from importlib import resources
    assert resources.files("structlp").joinpath("py.typed").is_file()
