"""The documentation: its code runs and prints the outputs the pages show, its API page
covers the public names, its benchmark tables come from valid JSON, and the README stays an
introduction.

The Sphinx build itself (tutorials executed, warnings as errors) is a CI step
(``python -m sphinx -W ... docs OUT``), not a test.
"""

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import check_printed, code_blocks, run_block

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
SLOW_PAGES = {"parallel.md", "agm.md", "dask.md"}     # worker processes; an AGM QP: longer checks



def guide_blocks():
    out = []
    for page in sorted((DOCS / "guide").glob("*.md")):
        for line, code, shown in code_blocks(page):
            marks = [pytest.mark.slow] if page.name in SLOW_PAGES else []
            out.append(pytest.param(code, shown, id=f"{page.name}:{line}", marks=marks))
    return out


def test_guide_has_python_blocks():
    assert len(guide_blocks()) >= 10


@pytest.mark.parametrize("code, shown", guide_blocks())
def test_guide_python_block_runs(code, shown, tmp_path):
    """Every ```python block of the guide runs as a standalone program (a fragment that
    cannot run is fenced ```text) and prints the ```output block that follows it (nothing
    when none follows; tests/test_readme.py says how values compare)."""
    if "sklearn" in code:
        pytest.importorskip("sklearn")
    if "n_jobs=" in code:
        pytest.importorskip("joblib")
    check_printed(shown, run_block(code, tmp_path), "guide block")


# ------------------------------------------------------------------ the API page

API = (DOCS / "api.rst").read_text()
# a name has its own page when it is a line of an ``autosummary`` list (``   structlp.X``);
# an ``.. autoclass::``-style entry documents it on the API page itself
DOCUMENTED = (set(re.findall(r"^\.\. auto\w+:: ([\w.]+)", API, re.M))
              | set(re.findall(r"^ {3}(structlp(?:\.\w+)+)[ \t]*$", API, re.M)))
PACKAGES = ["structlp", "structlp.structures", "structlp.agm", "structlp.sequence",
            "structlp.datasets"]


def public_names():
    out = []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if type(obj).__name__ == "module":
                continue
            out.append(pytest.param(pkg, name, id=f"{pkg}.{name}"))
    return out


@pytest.mark.parametrize("pkg, name", public_names())
def test_api_page_documents_every_exported_name(pkg, name):
    """Each name of a public package's __all__ is on the API page, under that package or
    under another public path to the same object."""
    obj = getattr(importlib.import_module(pkg), name)
    paths = [d for d in DOCUMENTED if d.rsplit(".", 1)[-1] == name]
    found = []
    for path in paths:
        mod, _, attr = path.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(mod), attr) is obj)
        except (ImportError, AttributeError):
            found.append(False)
    assert any(found), f"{pkg}.{name} is not on docs/api.rst"


@pytest.mark.parametrize("name", ["save", "load", "clone", "make_scorer", "PartTransformer",
                                  "installed_solvers"])
def test_api_page_has_the_top_level_tools(name):
    assert f"structlp.{name}" in DOCUMENTED


@pytest.mark.parametrize("module, minimum", [("structlp.kernels", 3),
                                             ("structlp.certificates", 5),
                                             ("structlp.formulations", 1),
                                             ("structlp.parallel", 1)])
def test_api_page_covers_the_public_modules(module, minimum):
    assert sum(d.startswith(module + ".") for d in DOCUMENTED) >= minimum


def test_api_page_names_no_private_module():
    private = [d for d in DOCUMENTED if any(p.startswith("_") for p in d.split("."))]
    assert not private, f"private names on the API page: {private}"
    assert not re.search(r"structlp(\.\w+)*\._", API)


def test_every_documented_name_imports():
    """A stale entry would be a Sphinx warning; this says which one without building."""
    missing = []
    for path in DOCUMENTED:
        mod, _, attr = path.rpartition(".")
        try:
            getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            try:
                importlib.import_module(path)
            except ImportError:
                missing.append(path)
    assert not missing


# ------------------------------------------------------------------ benchmark JSON

sys.path.insert(0, str(ROOT / "benchmarks"))
report = importlib.import_module("report")
RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


def test_benchmark_results_exist():
    assert len(RESULTS) >= 1


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_benchmark_result_follows_the_schema(path):
    data = report.load_one(path)
    assert data["floor"]["name"] and data["machine"]["cpu"] and data["date"]
    assert any(c.get("ratio") for t in data["tables"] for c in t["columns"]), \
        f"{path.name} states no ratio to its floor"
    head, rows = report.cells(data["tables"][0])
    assert rows and all(len(r) == len(head) for r in rows)


def minimal():
    return {"schema": 1, "name": "x", "title": "X", "description": "d", "date": "2026-01-01",
            "machine": {"cpu": "cpu", "cores": 2},
            "floor": {"name": "f", "description": "g"},
            "tables": [{"columns": [{"key": "a", "label": "A", "ratio": True}],
                        "rows": [{"a": 1.5}, {}]}]}


def test_schema_accepts_a_minimal_file():
    data = report.validate(minimal())
    assert report.cells(data["tables"][0]) == (["A"], [["1.5×"], ["–"]])


@pytest.mark.parametrize("damage, message", [
    (lambda d: d.pop("floor"), "'floor'"),
    (lambda d: d.update(schema=2), "'schema' must be 1"),
    (lambda d: d["machine"].update(cores="two"), "machine['cores'] must be int"),
    (lambda d: d["tables"][0]["columns"][0].pop("label"), "'label'"),
    (lambda d: d.update(tables=[]), "'tables' is empty"),
])
def test_schema_rejects_a_broken_file_naming_it(damage, message, tmp_path):
    data = minimal()
    damage(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(report.SchemaError, match=re.escape(message)) as err:
        report.load_one(path)
    assert "broken.json" in str(err.value)


def test_write_records_machine_date_and_floor(tmp_path):
    path = tmp_path / "out.json"
    report.write(path, name="t", title="T", description="d", floor=("raw", "the raw solver"),
                 tables=[{"columns": [{"key": "r", "label": "r", "ratio": True}],
                          "rows": [{"r": 2.0}]}], command="python x.py")
    data = report.load_one(path)
    assert data["machine"]["cores"] == os.cpu_count()
    assert data["floor"] == {"name": "raw", "description": "the raw solver"}
    assert data["date"].endswith("+00:00")


# ------------------------------------------------------------------ the README

def test_readme_is_an_introduction():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 210
    assert max(len(line) for line in lines) <= 400
    code = "\n".join(m.group(1) for m in FENCE.finditer("\n".join(lines) + "\n"))
    ast.parse(code)


def test_every_notebook_is_a_tutorial():
    """Every notebook in notebooks/ is on the tutorials page, in its gallery and its toctree
    (a tutorial left out would fail the -W build)."""
    page = (DOCS / "tutorials.md").read_text()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert page.count(f"notebooks/{nb.stem}\n") == 2, nb.name
