"""``.. benchmark-tables:: FOLDER`` and ``.. benchmark-summary:: FILE``: the benchmarks page,
generated from the JSON files of ``benchmarks/results/``.

``benchmark-tables`` renders one section per ``*.json`` file of FOLDER (relative to the
documentation's source folder, default ``../benchmarks/results``): the files must follow the
schema of ``benchmarks/report.py`` (which also formats the cells); a file that does not is a
build warning naming the file and what is wrong (an error under ``-W``). Each table is shown
with its label columns (text) first and its ratio columns right after them, so the ratios
stay in view on a narrow screen; text is left-aligned, numbers right-aligned; a NaN reads
"not reached". Each table gets a plot drawn from the same rows (inline SVG, matplotlib):

* a numeric first column (a size such as ``m`` or ``l``) with at least three rows: its
  timing columns (those sharing the first unit found) against it, on log axes when they
  span more than a factor 30;
* otherwise, when the table has a ratio column and at least two rows: a bar per row of its
  first ratio column, with the floor (1×) marked.

A column with ``"plot": true`` is plotted in preference (timing columns against the size,
or the ratio of the bars).

``benchmark-summary`` renders the headline numbers of the page from a YAML list (see
``docs/_data/benchmark_summary.yaml``): each item names a file, a table, a row (by the values
of some of its cells) and a column, optionally divided by another cell, and a sentence.
Every file is a dependency of the page, so a new or changed result rebuilds it.
"""

import io
import math
import re
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


_OPTION = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)")


def _text(text):
    """Text nodes, a command-line option (``--pystruct``) as a literal: docutils' smart
    quotes would print its two hyphens as an en dash."""
    out = []
    for i, piece in enumerate(_OPTION.split(text)):
        if piece:
            out.append(nodes.literal(text=piece) if i % 2 else nodes.Text(piece))
    return out


def _para(*children, classes=()):
    p = nodes.paragraph(classes=list(classes))
    for c in children:
        if isinstance(c, str):
            p.extend(_text(c))
        else:
            p += c
    return p


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_text_column(table, col):
    values = [r.get(col["key"]) for r in table["rows"] if r.get(col["key"]) is not None]
    return bool(values) and all(isinstance(v, str) for v in values)


def ordered_columns(table):
    """Label (text) columns of the table's leading run first, then the ratio columns, then
    the rest, each group in the file's order."""
    cols = table["columns"]
    lead = []
    for col in cols:
        if col.get("ratio") or not _is_text_column(table, col):
            break
        lead.append(col)
    if not lead and cols and not cols[0].get("ratio"):
        lead = [cols[0]]                      # a numeric first column (m, l) is the label
    ratios = []
    labels = [c["label"] for c in cols if c.get("ratio")]
    for i, col in enumerate(cols):
        if col.get("ratio") and col not in lead:
            if col["label"].startswith("/") and i > 0:   # "/ primal" says of what, once moved
                col = dict(col, label=f"{cols[i - 1]['label']} {col['label']}")
            elif labels.count(col["label"]) > 1 and i > 0:   # "this / previous" three times
                of = re.sub(r"^\w+: ", "", cols[i - 1]["label"])
                col = dict(col, label=f"{col['label']} ({of})")
            ratios.append(col)
    keys = {c["key"] for c in lead + ratios}
    rest = [c for c in cols if c["key"] not in keys]
    return lead + ratios + rest


def label_columns(table):
    """The leading text columns that name a row (at most two)."""
    out = []
    for col in table["columns"]:
        if col.get("ratio") or not _is_text_column(table, col):
            break
        out.append(col)
    return out[:2]


def _table(report, table):
    cols = ordered_columns(table)
    head, rows = report.cells(dict(table, columns=cols))
    tab = nodes.table(classes=["sl-bench"])
    group = nodes.tgroup(cols=len(head))
    tab += group
    for _ in head:
        group += nodes.colspec(colwidth=1)
    thead = nodes.thead()
    group += thead
    hrow = nodes.row()
    for h, col in zip(head, cols):
        hrow += nodes.entry("", nodes.paragraph(text=h),
                            classes=["sl-ratio" if col.get("ratio") else "sl-head"])
    thead += hrow
    body = nodes.tbody()
    group += body
    for raw, r in zip(table["rows"], rows):
        row = nodes.row()
        for text, col in zip(r, cols):
            para = nodes.paragraph()
            para += nodes.strong(text=text) if col.get("ratio") else nodes.Text(text)
            number = _is_number(raw.get(col["key"]))
            row += nodes.entry("", para, classes=["sl-num" if number else "sl-text"]
                               + (["sl-ratio"] if col.get("ratio") else []))
        body += row
    return tab


def _label(table, row):
    texts = [str(row.get(c["key"])) for c in label_columns(table)
             if row.get(c["key"]) is not None]
    if not texts and table["columns"]:           # a numeric first column: "samples 10"
        first = table["columns"][0]
        texts = [f"{first['label']} {row.get(first['key'])}"]
    return ", ".join(texts)


def plot_svg(table):
    """An inline SVG plot of the table's rows (see the module docstring), or None."""
    cols, rows = table["columns"], table["rows"]
    if not cols or len(rows) < 2:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = cols[0]
    xs = [r.get(first["key"]) for r in rows]
    fig = None
    chosen = [c for c in cols if c.get("plot")]
    if len(rows) >= 3 and all(_is_number(x) for x in xs):
        unit = next((c.get("unit") for c in (chosen or cols[1:]) if c.get("unit")), None)
        ys = [c for c in (chosen or cols[1:])
              if unit and c.get("unit") == unit and not c.get("ratio")]
        ys = [c for c in ys if sum(_is_number(r.get(c["key"])) for r in rows) >= 2][:4]
        if ys:
            fig, ax = plt.subplots(figsize=(5.2, 2.8))
            values = []
            for c in ys:
                pts = [(r[first["key"]], r[c["key"]]) for r in rows
                       if _is_number(r.get(c["key"])) and not math.isnan(r[c["key"]])]
                values += [p[1] for p in pts if p[1] > 0]
                ax.plot(*zip(*pts), "o-", label=c["label"], ms=3)
            if values and max(values) / max(min(values), 1e-300) > 30:
                ax.set_yscale("log")
            if max(xs) / max(min(xs), 1e-300) > 30:
                ax.set_xscale("log")
            ax.set_xlabel(first["label"])
            ax.set_ylabel(unit)
            ax.legend(fontsize=7, frameon=False)
    if fig is None:
        ratio = next((c for c in chosen if c.get("ratio")),
                     next((c for c in cols if c.get("ratio")), None))
        if ratio is None:
            return None
        pts = [(_label(table, r), r.get(ratio["key"])) for r in rows]
        pts = [(lab, v) for lab, v in pts if _is_number(v) and not math.isnan(v)]
        if len(pts) < 2:
            return None
        fig, ax = plt.subplots(figsize=(5.2, 0.45 * len(pts) + 0.9))
        labels = [lab if len(lab) <= 48 else lab[:46] + "…" for lab, _ in pts]
        ax.barh(range(len(pts)), [v for _, v in pts], color="#4c72b0")
        ax.set_yticks(range(len(pts)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="k", lw=0.8)
        if max(v for _, v in pts) / max(min(v for _, v in pts), 1e-300) > 30:
            ax.set_xscale("log")
        ax.set_xlabel(f"{ratio['label']} (1× = the floor)")
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def _plot(table, title):
    try:
        svg = plot_svg(table)
    except Exception as exc:          # noqa: BLE001 - a plot never breaks the page
        logger.warning(f"benchmark-tables: no plot for {title!r}: {exc}")
        return None
    if svg is None:
        return None
    return nodes.raw("", f'<figure class="sl-bench-plot" role="img" aria-label="{title}">'
                         f"{svg}</figure>", format="html")


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
            section += _para(nodes.strong(text="Runs per figure: "), report.runs(data) + ".")
            for table in data["tables"]:
                if table.get("caption"):
                    section += _para(table["caption"], classes=["sl-caption"])
                if table.get("runs") or table.get("runs_note"):
                    section += _para(nodes.strong(text="Runs per figure: "),
                                     report.runs(data, table) + ".", classes=["sl-caption"])
                plot = _plot(table, table.get("caption") or data["title"])
                if plot is not None:
                    section += plot
                container = nodes.container(classes=["sl-bench-scroll"])
                container += _table(report, table)
                section += container
                for note in report.speedup_notes(data, table):
                    section += _para(note, classes=["sl-speedup-note"])
            for note in data.get("notes", []):
                section += _para(note)
            if data.get("command"):
                section += _para(nodes.strong(text="Command: "),
                                 nodes.literal(text=data["command"]),
                                 f" (file {path.name}).")
            out.append(section)
        return out


def _cell(data, spec, where):
    table = data["tables"][spec.get("table", 0)]
    match = spec.get("row", {})
    hits = [r for r in table["rows"] if all(r.get(k) == v for k, v in match.items())]
    if len(hits) != 1:
        raise ValueError(f"{where}: {len(hits)} rows match {match}")
    return hits[0].get(spec["column"])


class BenchmarkSummary(Directive):
    required_arguments = 1

    def run(self):
        import yaml
        env = self.state.document.settings.env
        report = _report(env.srcdir)
        path = Path(env.srcdir) / self.arguments[0]
        env.note_dependency(str(path))
        folder = Path(env.srcdir) / ".." / "benchmarks" / "results"
        items = nodes.bullet_list(classes=["sl-bench-summary"])
        for i, spec in enumerate(yaml.safe_load(path.read_text())):
            where = f"{path.name}[{i}]"
            try:
                data = report.load_one(folder / f"{spec['file']}.json")
                env.note_dependency(str(folder / f"{spec['file']}.json"))
                value = _cell(data, spec, where)
                if spec.get("over"):
                    value = value / _cell(data, dict(spec["over"]), where)
                if spec.get("invert"):
                    value = 1 / value
            except Exception as exc:      # noqa: BLE001 - a missing file, row or key
                logger.warning(f"benchmark-summary: {where}: {exc}",
                               location=(env.docname, self.lineno))
                continue
            text = f"{value:.3g}×" if value < 100 else f"{value:,.0f}×"
            load = (data["machine"].get("load") or [None])[0]
            para = nodes.paragraph()
            para += nodes.strong(text=text)
            para += nodes.Text(" " + spec["text"] + " (")
            ref = nodes.reference("", data["title"], internal=True,
                                  refid=nodes.make_id("bench-" + data["name"]))
            para += ref
            n = report.runs_count(data, data["tables"][spec.get("table", 0)])
            para += nodes.Text(("; a single run" if n == 1 else f"; {n} runs" if n
                                else "; runs not stated")
                               + (f"; load {load:.3g}" if load is not None else "") + ").")
            items += nodes.list_item("", para)
        return [items]


def setup(app):
    app.add_directive("benchmark-tables", BenchmarkTables)
    app.add_directive("benchmark-summary", BenchmarkSummary)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
