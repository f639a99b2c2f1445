"""The built documentation, as a reader sees it: a full ``sphinx -W -n`` build (the
tutorials and the landing page's example executed), then its HTML checked. Slow (a build
takes minutes); ``STRUCTLP_DOCS_HTML=DIR`` checks an existing build instead."""

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if os.environ.get("STRUCTLP_DOCS_HTML"):
        return Path(os.environ["STRUCTLP_DOCS_HTML"])
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_nb")
    out = tmp_path_factory.mktemp("html")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q",
                          "-b", "html", str(DOCS), str(out)], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=1800)
    assert run.returncode == 0, f"sphinx -W -n failed:\n{run.stderr[-4000:]}"
    return out


def text(path):
    return path.read_text(encoding="utf-8")


def test_landing_page_shows_an_executed_output_and_a_figure(site):
    page = text(site / "index.html")
    outputs = re.findall(r'<div class="cell_output.*?</div>\s*</div>', page, re.S)
    assert any("test Hamming loss per example" in o for o in outputs), "no executed output"
    assert re.search(r'<img[^>]+src="[^"]+\.png"', page), "no figure"
    for guide in sorted((DOCS / "guide").glob("*.md")):      # links to every guide page
        assert f'href="guide/{guide.stem}.html"' in page, guide.name


def test_benchmarks_page_has_a_plot_per_results_file(site):
    page = text(site / "benchmarks.html")
    n_files = len(list((ROOT / "benchmarks" / "results").glob("*.json")))
    sections = re.split(r'<section id="bench-', page)[1:]
    assert len(sections) == n_files
    for section in sections:
        assert '<figure class="sl-bench-plot"' in section and "<svg" in section, section[:60]


def test_every_public_name_has_its_own_page(site):
    api = text(DOCS / "api.rst")
    names = re.findall(r"^ {3}(structlp(?:\.\w+)+)[ \t]*$", api, re.M)
    assert len(names) > 150
    missing = [n for n in names if not (site / "generated" / f"{n}.html").is_file()]
    assert not missing
    assert "KERNELS" not in text(site / "api.html")           # build internals are not listed


def signatures(page):
    """The text of each object signature of an API page (name and parameters)."""
    for sig in re.findall(r'<dt class="sig sig-object py"[^>]*>(.*?)</dt>', page, re.S):
        plain = html.unescape(re.sub(r"<[^>]+>", "", sig))
        yield re.sub(r"\s+", " ", plain.replace("¶", "").replace("[source]", "")).strip()


def test_signatures_read(site):
    """No class or function signature runs past about three lines at 1280 px (long ones end
    in "…"; the Parameters section lists every parameter)."""
    long = [(p.name, len(s)) for p in (site / "generated").glob("*.html")
            for s in signatures(text(p)) if len(s) > 230 and "=" not in s.split("(")[0]]
    assert not long


def test_public_classes_and_functions_have_examples(site):
    """Every class and function page of the API shows an example (data attributes and
    modules excepted)."""
    missing = []
    for p in (site / "generated").glob("*.html"):
        page = text(p)
        if not re.search(r'<dl class="py (class|function|exception)">', page):
            continue
        if "Examples" not in page or "&gt;&gt;&gt;" not in page:
            missing.append(p.stem)
    assert not missing


def html_files(site):
    return [p for p in site.rglob("*.html") if "_modules" not in p.parts]


def test_no_solver_banner_in_any_output(site):
    hits = [p.name for p in html_files(site) if "Running HiGHS" in text(p)]
    assert not hits


def test_no_nan_in_a_table(site):
    bad = []
    for p in html_files(site):
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", text(p), re.S):
            value = html.unescape(re.sub(r"<[^>]+>", "", cell)).strip().lower()
            if value in ("nan", "-nan", "nan×"):
                bad.append(p.name)
    assert not bad


def test_tutorials_have_a_download_link_and_their_run_time(site):
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = text(site / "notebooks" / f"{nb.stem}.html")
        assert re.search(rf'href="[^"]*{nb.stem}\.ipynb"', page), nb.name
        assert re.search(r"it ran in \d+\.\d s", page), nb.name
        assert not re.search(r"is not installed .*skipping", page), nb.name


def test_user_pages_show_no_machine_paths_or_issue_numbers(site):
    for p in html_files(site):
        if "generated" in p.parts:      # API pages state the code's own default paths
            continue
        page = text(p)
        assert "../shared" not in page and "/work/" not in page, p.name
        assert not re.search(r"issue #\d", page, re.I), p.name


def test_benchmarks_page_states_runs_and_explains_the_parallel_row(site):
    page = text(site / "benchmarks.html")
    sections = re.split(r'<section id="bench-', page)[1:]
    for section in sections:
        assert "Runs per figure:" in section, section[:60]
    assert re.search(r'class="sl-speedup-note">n_jobs=\d+: .*could make the fit at most', page)
    words = html.unescape(re.sub(r"<[^>]+>", " ", page))
    # a command-line option whose hyphens smart quotes made an en dash ("–pystruct")
    assert not re.search(r"(^|[\s(])–[a-z]{3,}", words, re.M)
    assert "<!-- ? -->" not in page          # every plotted bar labelled (SVG keeps its text)
