"""Small pieces of the site that are generated at build time.

* ``guide-links``: on the landing page, a link to every page of the user guide (the
  ``guide/`` entries of the landing page's toctree, in its order, with their titles), so a
  new guide page is listed by adding it to the toctree.
* ``reproduction-table FILE``: the reproduction page's tables from a YAML list (one row
  per paper table or figure; docs/_data/reproduction.yaml says which keys).
* On every tutorial (``notebooks/*``): under its title, a download link to the notebook
  and how long it ran when this site was built (myst-nb's execution record; a cached
  result states the run time recorded when it was executed).
"""

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes

REPRODUCTION_KEYS = ("result", "source", "paper", "structlp", "verdict", "why", "command",
                     "data", "runtime", "details")
VERDICTS = ("reproduced", "reproduced in kind", "not reproduced", "not comparable", "not run")


class guide_links(nodes.General, nodes.Element):
    """Placeholder, filled in once every page's title is known."""


class GuideLinks(Directive):
    def run(self):
        return [guide_links()]


def _fill_guide_links(app, doctree, fromdocname):
    env = app.builder.env
    for node in list(doctree.findall(guide_links)):
        pages = [d for d in env.toctree_includes.get(fromdocname, []) if d.startswith("guide/")]
        items = nodes.bullet_list(classes=["sl-guide-links"])
        for docname in pages:
            ref = nodes.reference("", "", internal=True,
                                  refuri=app.builder.get_relative_uri(fromdocname, docname))
            ref += nodes.Text(env.titles[docname].astext())
            para = nodes.paragraph()
            para += ref
            items += nodes.list_item("", para)
        node.replace_self(items)


def _table(head, rows, classes):
    """A docutils table: ``rows`` are lists of cells, each a node list or a string."""
    table = nodes.table(classes=classes)
    group = nodes.tgroup(cols=len(head))
    table += group
    for _ in head:
        group += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    group += thead
    row = nodes.row()
    for h in head:
        row += nodes.entry("", nodes.paragraph(text=h))
    thead += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            para = nodes.paragraph()
            if isinstance(cell, str):
                para += nodes.Text(cell)
            else:
                para.extend(cell)
            row += nodes.entry("", para)
        body += row
    return table


def load_reproduction(path):
    """The rows of the reproduction page, each checked for every key and a known verdict."""
    import yaml
    rows = yaml.safe_load(Path(path).read_text())
    if not isinstance(rows, list):
        raise ValueError(f"{Path(path).name}: expected a list of rows")
    for i, row in enumerate(rows):
        missing = [k for k in REPRODUCTION_KEYS if k not in row]
        if missing:
            raise ValueError(f"{Path(path).name}: row {i} ({row.get('result')!r}) misses {missing}")
        if row["verdict"] not in VERDICTS:
            raise ValueError(f"{Path(path).name}: row {i}: verdict {row['verdict']!r} is not "
                             f"one of {VERDICTS}")
    return rows


class ReproductionTable(Directive):
    required_arguments = 1

    def run(self):
        env = self.state.document.settings.env
        path = Path(env.srcdir) / self.arguments[0]
        env.note_dependency(str(path))
        rows = load_reproduction(path)

        def ref(row):
            node = addnodes.pending_xref("", refdomain="std", reftype="doc",
                                         reftarget="/" + row["details"], refexplicit=False,
                                         refdoc=env.docname)
            node += nodes.inline("", row["details"])
            return node

        def verdict(row):
            return [nodes.strong("", row["verdict"], classes=["sl-verdict"]),
                    nodes.Text(": " + row["why"])]

        def labelled(label, *content):    # the label shows where the table is one column
            return [nodes.inline("", label + ": ", classes=["sl-cell-label"]), *content]

        main = _table(["result", "paper", "structlp", "verdict"],
                      [[[nodes.strong("", row["result"]), nodes.Text(f" ({row['source']})")],
                        labelled("paper", nodes.Text(row["paper"])),
                        labelled("structlp", nodes.Text(row["structlp"])),
                        verdict(row)] for row in rows],
                      ["sl-repro", "sl-stack"])
        how = _table(["result", "command", "data", "run time", "details"],
                     [[[nodes.strong("", re.split(r",(?![^()]*\))", row["result"])[0])],
                       labelled("command", nodes.literal("", row["command"])),
                       labelled("data", nodes.Text(row["data"])),
                       labelled("run time", nodes.Text(row["runtime"])),
                       labelled("details", ref(row))] for row in rows],
                     ["sl-repro", "sl-stack"])
        section = nodes.section(ids=["how-to-run-each"])
        section += nodes.title(text="How to run each")
        section += nodes.container("", how, classes=["sl-bench-scroll"])
        return [nodes.container("", main, classes=["sl-bench-scroll"]), section]


def _notebook_header(app, doctree):
    """Download link and run time under a tutorial's title (before Sphinx collects the
    downloads of the page, so the notebook is copied into the site)."""
    env = app.env
    docname = env.docname
    if not docname.startswith("notebooks/"):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    name = docname.rsplit("/", 1)[-1] + ".ipynb"
    para = nodes.paragraph(classes=["sl-notebook-meta"])
    link = addnodes.download_reference("", "", reftarget=name, refdoc=docname,
                                       refexplicit=True, refdomain="", reftype="download")
    link += nodes.literal("", name)
    para += nodes.Text("Download the notebook: ")
    para += link
    try:
        from myst_nb.sphinx_ import NbMetadataCollector
        data = NbMetadataCollector.get_exec_data(env, docname) or {}
    except ImportError:          # pragma: no cover - myst-nb is what renders the notebooks
        data = {}
    if data.get("runtime") is not None:
        para += nodes.Text(f" · it ran in {data['runtime']:.1f} s when this site was built "
                           "(every cell, on the build machine).")
    else:
        para += nodes.Text(" · not executed in this build.")
    section.insert(1, para)


def setup(app):
    app.add_node(guide_links)
    app.add_directive("guide-links", GuideLinks)
    app.add_directive("reproduction-table", ReproductionTable)
    app.connect("doctree-resolved", _fill_guide_links)
    app.connect("doctree-read", _notebook_header, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
