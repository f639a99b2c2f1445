"""Public names of a package imported on first access (PEP 562).

A package's ``__init__`` declares which submodule defines each public name and calls
:func:`attach`; ``import package`` then loads none of them, and ``package.NAME`` (or
``from package import NAME``) imports only the submodule that defines ``NAME``.  This keeps
the heavy optional libraries (POT, networkx, cvxpy) out of a process that does not use them.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Dict, Iterable, List, Tuple


def attach(package: str, names: Dict[str, str], submodules: Iterable[str] = ()
           ) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict
        Public name -> the submodule (relative, e.g. ``"game"``) that defines it.
    submodules : iterable of str
        More submodules reachable as ``package.SUB`` without an explicit import (those
        named in ``names`` are).
    """
    subs = frozenset(names.values()) | frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(f".{names[name]}", package), name)
        elif name in subs:
            value = importlib.import_module(f".{name}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> List[str]:
        return sorted(set(vars(sys.modules[package])) | set(names) | subs)

    return __getattr__, __dir__
