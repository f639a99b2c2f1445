"""Cross-references to structlp's names that ``sphinx -n`` cannot resolve by itself.

A docstring often names an object where it is defined (``structlp.datasets.real.load_ocr_letters``,
or ``SolverError`` inside ``structlp.solvers``) while the API reference documents it under its
public path (``structlp.datasets.load_ocr_letters``, ``structlp.SolverError``). For every
reference Sphinx finds no target for, this extension imports the name — as written, then
relative to the module and class the reference sits in, then relative to the module that
defines the documented object (the docstring's own module) — and

* links it to the page of the public name that is the *same object*, when there is one;
* shows it as code without a link when it is a real structlp object that is not public
  (a private module, a constant an implementation note mentions): no warning;
* leaves it unresolved otherwise — a name that does not exist (a typo, a renamed function)
  stays a warning, an error under ``-W -n``.

References to other libraries are not handled here (``nitpick_ignore_regex`` in conf.py).
"""

import importlib
import re
import sys

from sphinx.util.nodes import make_refnode

_DOCSTRING_OF = re.compile(r"docstring of ([\w.]+)")


def _lookup(path):
    """The object named by a dotted path (modules imported as needed), or raise LookupError."""
    parts = path.split(".")
    if parts[0] != "structlp":
        raise LookupError(path)
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise LookupError(path) from None
        return _plain(obj)
    raise LookupError(path)


def _plain(obj):
    """The function behind a bound method (a classmethod is bound anew at every access)."""
    return getattr(obj, "__func__", obj)


def _defining_module(source):
    """The module that defines the object a docstring belongs to (``docstring of X``)."""
    match = _DOCSTRING_OF.search(source or "")
    if not match:
        return None
    parts = match.group(1).split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            importlib.import_module(name)
            return name
        except ImportError:
            continue
    return None


def _candidates(node):
    target = node["reftarget"].lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    out = [target]
    for base in filter(None, [module and cls and f"{module}.{cls}", module,
                              _defining_module(node.source)]):
        out.append(f"{base}.{target}")
    defining = _defining_module(node.source)
    match = _DOCSTRING_OF.search(node.source or "")
    if defining and match:                       # Class.method inside the class's module
        owner = match.group(1)
        while owner and owner != defining:
            out.append(f"{owner}.{target}")
            owner = owner.rpartition(".")[0]
    return out


def _unique_anywhere(target):
    """The one object of that name in structlp's imported modules (a reference written in
    a summary line of the API index has no module around it), or raise LookupError."""
    head, _, rest = target.partition(".")
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "structlp" or name.startswith("structlp.")):
            continue
        obj = vars(module).get(head)
        if obj is None:
            continue
        try:
            for attr in filter(None, rest.split(".")):
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        obj = _plain(obj)
        found[id(obj)] = obj
    if len(found) != 1:
        raise LookupError(target)
    return next(iter(found.values()))


def _documented(env):
    """id(object) -> (docname, node_id, name) for every documented structlp object."""
    cache = env.app.__dict__.setdefault("_structlp_documented", {})
    domain = env.get_domain("py")
    if cache.get("n") != len(domain.objects):
        table = {}
        for name, entry in domain.objects.items():
            if not name.startswith("structlp"):
                continue
            try:
                obj = _lookup(name)
            except LookupError:
                continue
            table.setdefault(id(obj), (entry.docname, entry.node_id, name))
        cache.update(n=len(domain.objects), table=table)
    return cache["table"]


def _resolve(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    lookups = [(_lookup, path) for path in _candidates(node)] + [(_unique_anywhere, target)]
    for lookup, path in lookups:
        try:
            obj = lookup(path)
        except Exception:                        # noqa: BLE001 - not found, or an import fails
            continue
        hit = _documented(env).get(id(obj))
        if hit is not None:
            docname, node_id, name = hit
            return make_refnode(app.builder, node["refdoc"], docname, node_id, contnode, name)
        return contnode                          # a real structlp object, not public
    return None


def setup(app):
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
