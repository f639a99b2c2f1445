"""``.. benchmark-tables:: FOLDER``: one section per benchmark JSON file in FOLDER.

FOLDER is relative to the documentation's source folder (default ``../benchmarks/results``).
Each ``*.json`` file there must follow the schema of ``benchmarks/report.py`` (which also
formats the cells); a file that does not is a build warning naming the file and what is
wrong (an error under ``-W``). Every file is a dependency of the page, so a new or changed
result rebuilds it.
"""

import sys
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _report(srcdir):
    bench = (Path(srcdir) / ".." / "benchmarks").resolve()
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    import report   # benchmarks/report.py: the schema, validation and cell formatting
    return report


def _para(*children, classes=()):
    p = nodes.paragraph(classes=list(classes))
    for c in children:
        p += nodes.Text(c) if isinstance(c, str) else c
    return p


def _table(report, table):
    head, rows = report.cells(table)
    ratio = [bool(c.get("ratio")) for c in table["columns"]]
    tab = nodes.table(classes=["sl-bench"])
    group = nodes.tgroup(cols=len(head))
    tab += group
    for _ in head:
        group += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    group += thead
    hrow = nodes.row()
    for h in head:
        hrow += nodes.entry("", nodes.paragraph(text=h))
    thead += hrow
    body = nodes.tbody()
    group += body
    for r in rows:
        row = nodes.row()
        for text, is_ratio in zip(r, ratio):
            para = nodes.paragraph()
            para += nodes.strong(text=text) if is_ratio else nodes.Text(text)
            row += nodes.entry("", para, classes=["sl-num"])
        body += row
    return tab


class BenchmarkTables(Directive):
    optional_arguments = 1
    option_spec = {"level": directives.unchanged}

    def run(self):
        env = self.state.document.settings.env
        report = _report(env.srcdir)
        folder = (Path(env.srcdir) / (self.arguments[0] if self.arguments
                                      else "../benchmarks/results")).resolve()
        env.note_dependency(str(Path(report.__file__).resolve()))
        out = []
        files = sorted(folder.glob("*.json"))
        if not files:
            logger.warning(f"benchmark-tables: no JSON file in {folder.name}/",
                           location=(env.docname, self.lineno))
        for path in files:
            env.note_dependency(str(path))
            try:
                data = report.load_one(path)
            except (report.SchemaError, OSError) as exc:
                logger.warning(f"benchmark-tables: {exc}", location=(env.docname, self.lineno))
                continue
            section = nodes.section(ids=[nodes.make_id("bench-" + data["name"])])
            section += nodes.title(text=data["title"])
            section += _para(data["description"])
            section += _para(nodes.strong(text="Floor: "),
                             f"{data['floor']['name']} — {data['floor']['description']}.")
            section += _para(nodes.strong(text="Machine: "), report.machine_line(data) + ".")
            for table in data["tables"]:
                if table.get("caption"):
                    section += _para(table["caption"], classes=["sl-caption"])
                section += _table(report, table)
            for note in data.get("notes", []):
                section += _para(note)
            if data.get("command"):
                section += _para(nodes.strong(text="Command: "),
                                 nodes.literal(text=data["command"]),
                                 f" (file {path.name}).")
            out.append(section)
        return out


def setup(app):
    app.add_directive("benchmark-tables", BenchmarkTables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
