"""The package's layout rules, checked on the source (so that they hold for the next change):

* at most 16 modules directly in ``structlp/``; no module over 700 lines;
* ``structlp.structures`` and ``structlp.graphical`` import nothing from ``structlp.agm``
  (the built-in structures depend on the shared graph code, never on the adversarial models);
* no private name (``_x``) and no private module is imported from another package.
"""

import ast
from pathlib import Path

import structlp

PKG = Path(structlp.__file__).resolve().parent


def modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield path, ".".join(parts), is_pkg


def imports(path, name, is_pkg):
    """(imported module, imported names) of every ``from ... import`` in a file."""
    tree = ast.parse(path.read_text(), str(path))
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base[:len(base) - node.level + 1]
                target = ".".join(parent + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def package_of(module):
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and (PKG / parts[1]).is_dir()) \
        else parts[0]


def test_root_modules_and_module_sizes():
    root = [p for p in PKG.glob("*.py")]
    assert len(root) <= 16, sorted(p.name for p in root)
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}


def test_structures_and_graphical_do_not_import_agm():
    bad = []
    for path, name, is_pkg in modules():
        if name.startswith(("structlp.structures", "structlp.graphical")):
            for target, _ in imports(path, name, is_pkg):
                if target == "structlp.agm" or target.startswith("structlp.agm."):
                    bad.append((name, target))
    assert bad == []


def test_no_private_name_imported_across_packages():
    bad = []
    for path, name, is_pkg in modules():
        if name.startswith("structlp.utils.compat"):
            continue
        here = package_of(name if not is_pkg else name + ".__init__")
        for target, names in imports(path, name, is_pkg):
            if not target.startswith("structlp") or target == "structlp.__future__":
                continue
            there = package_of(target) if target != "structlp" else "structlp"
            if there == here:
                continue
            private_module = any(p.startswith("_") for p in target.split(".")[1:])
            private_names = [n for n in names if n.startswith("_") and not n.endswith("__")]
            if private_module or private_names:
                bad.append((name, target, private_names))
    assert bad == []
