"""Sphinx configuration of structlp's documentation (``python -m sphinx -W -b html docs OUT``)."""

import os
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "_ext"))

import structlp  # noqa: E402

project = "structlp"
author = "the structlp developers"
copyright = "the structlp developers"
release = version = structlp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",   # one page per public name (docs/api.rst lists them)
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
    "gallery",          # docs/_ext/gallery.py: a thumbnail card per tutorial
    "benchmark_tables", # docs/_ext/benchmark_tables.py: tables from benchmarks/results/*.json
    "structlp_site",    # docs/_ext/structlp_site.py: guide links, tutorials' download link and run time
    "structlp_xref",    # docs/_ext/structlp_xref.py: structlp's names where they are defined
]

# The tutorials live in notebooks/ (committed with outputs cleared) and are executed here, at
# build time, so the pages show their outputs and plots. Sphinx reads only its source folder,
# so docs/notebooks is a link to them (a copy where links are not possible); the notebooks run
# in their own folder, which is what their relative paths (../problems/...) expect.
NOTEBOOKS = HERE / "notebooks"
if NOTEBOOKS.is_symlink() or NOTEBOOKS.is_file():
    NOTEBOOKS.unlink()
elif NOTEBOOKS.exists():
    shutil.rmtree(NOTEBOOKS)
try:
    NOTEBOOKS.symlink_to(Path("..") / "notebooks", target_is_directory=True)
except OSError:
    NOTEBOOKS.mkdir()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy(nb, NOTEBOOKS / nb.name)
    for folder in ("problems",):                # what the notebooks open by relative path
        if not (HERE / folder).exists():
            shutil.copytree(ROOT / folder, HERE / folder)

# the notebook kernels import structlp from this checkout, as the build does
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
nb_execution_mode = "cache"          # executed when changed; a fresh build executes them all
# the cache of executed notebooks belongs to this checkout (myst-nb's default, beside the
# output folder, would share results between checkouts that build into the same parent)
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 300           # seconds per cell
nb_execution_raise_on_error = True   # a failing tutorial fails the build
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True      # $$...$$ inside a paragraph is display math too
myst_heading_anchors = 3

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "problems"]

autodoc_default_options = {"members": True, "inherited-members": False,
                           "member-order": "bysource"}
autodoc_typehints = "none"         # signatures that read: names and defaults; the numpydoc
autodoc_typehints_format = "short" # Parameters sections give every type
autodoc_preserve_defaults = True   # defaults as written in the source
autosummary_generate = True        # docs/generated/: a stub page per name of docs/api.rst
autosummary_imported_members = False
templates_path = ["_templates"]
autodoc_type_aliases = {"ArrayLike": "numpy.typing.ArrayLike"}
python_use_unqualified_type_names = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# ``sphinx -n`` (CI runs it with -W): every cross-reference to structlp's own names must
# resolve. Names of other libraries are not checked (the build has no network for
# intersphinx); they are matched here by their package or by being builtins.
_EXTERNAL = (r"(numpy|np|scipy|sp|cvxpy|cp|sklearn|networkx|nx|joblib|dask|distributed|"
             r"highspy|numba|torch|jax|matplotlib|pandas|tqdm|threadpoolctl|pathlib|typing|"
             r"collections|os|io|re|abc|concurrent|contextlib|datetime|enum|builtins|"
             r"types|zipfile|pickle|json)(\..*)?")
_BUILTIN = (r"(int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|None|"
            r"callable|Callable|Any|Optional|Union|Sequence|Iterable|Iterator|Mapping|"
            r"ArrayLike|NDArray|Path|Generator|RandomState|Exception|ValueError|TypeError|"
            r"KeyError|RuntimeError|UserWarning|RuntimeWarning|Warning|OSError|"
            r"KeyboardInterrupt|TimeoutError|NotImplementedError|ImportError|array-like|"
            r"array_like|ndarray|sparse matrix|optional|default)")
nitpick_ignore_regex = [(r"py:.*", _EXTERNAL), (r"py:.*", _BUILTIN)]

html_theme = "furo"
# the site documents the checkout it is built from: most of it is newer than the release
html_title = f"structlp {release} + unreleased"
html_theme_options = {
    "announcement": ("Development version: what the changelog lists under “Unreleased” "
                     f"is not in release {release}."),
}
html_static_path = ["_static"]
html_css_files = ["gallery.css"]
copybutton_prompt_text = r">>> |\.\.\. |\$ "   # copied code leaves prompts and outputs out
copybutton_prompt_is_regexp = True


def _tidy_signature(app, what, name, obj, options, signature, return_annotation):
    """Show ``ArrayLike`` for numpy.typing.ArrayLike (Sphinx prints an alias inside a Union
    as ``TypeAliasForwardRef('numpy.typing.ArrayLike')``); leave other signatures alone."""
    texts = (signature or "", return_annotation or "")
    if not any("TypeAliasForwardRef" in t or "numpy.typing." in t for t in texts):
        return None

    def tidy(text):
        if not text:
            return text
        text = re.sub(r"TypeAliasForwardRef\('([\w.]+)'\)", r"\1", text)
        return re.sub(r"numpy\.typing\.(\w+)", r"\1", text)
    return tidy(signature), tidy(return_annotation)


# A signature longer than this, its "class" and full name included (about three lines of the
# API pages at 1280 px), shows its leading parameters and then "…": the Parameters section
# lists every one with its default.
SIGNATURE_CHARS = 220


def _split_parameters(text):
    """The top-level comma-separated items of a parameter list (defaults may hold commas
    inside brackets or quotes)."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def _short_signature(app, what, name, obj, options, signature, return_annotation):
    """Signatures that read: a class or function with many keyword parameters (the learners
    have about twenty) shows those that fit in :data:`SIGNATURE_CHARS`, then "…".  (One
    handler with :func:`_tidy_signature`: Sphinx takes the first handler's answer.)"""
    tidied = _tidy_signature(app, what, name, obj, options, signature, return_annotation)
    if tidied is not None:
        signature, return_annotation = tidied
    budget = SIGNATURE_CHARS - len(f"{what} {name}")
    if not signature or len(signature) <= budget or what not in (
            "class", "function", "method", "exception"):
        return tidied
    # the cut signature is shown as written (Sphinx no longer parses it): quotes as Python's
    items = [re.sub(r'^(\w+=)"([^"\'\\]*)"$', r"\1'\2'", item)
             for item in _split_parameters(signature[1:-1])]
    kept = []
    for item in items:
        if kept and len(", ".join(kept + [item])) + 5 > budget:
            break
        kept.append(item)
    if len(kept) == len(items):
        return tidied
    return "(" + ", ".join(kept + ["…"]) + ")", return_annotation


_LITERALS = re.compile(r"(``.*?``|:\w+:`[^`]*`|`[^`]*`_?)")
_TRAILING = re.compile(r"(?<![\w`*:|<.\\/-])([A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]_)(?![\w`*(])")
_BARS = re.compile(r"(?<![\\`|])\|(\w+)\|(?![_`|])")


def _plain_prose(app, what, name, obj, options, lines):
    """Docstring prose that reStructuredText would misread, shown as the author meant it:
    a bare attribute name such as ``coef_`` (a hyperlink reference to reST) becomes a
    literal, and ``|T_i|`` (a substitution to reST) keeps its bars. Literals, roles, math
    and literal blocks, and doctest lines are left alone. Runs after numpydoc."""
    block = None                      # indentation of the math or literal block we are in
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if block is not None:
            if stripped and indent <= block:
                block = None
            else:
                continue
        if stripped.startswith((">>>", "...")):
            continue
        if stripped.startswith(".. math::") or line.rstrip().endswith("::"):
            block = indent
        if stripped.startswith(".. "):
            continue
        parts = _LITERALS.split(line)
        for j in range(0, len(parts), 2):           # even parts are outside literals/roles
            parts[j] = _BARS.sub(r"\\|\1\\|", _TRAILING.sub(r"``\1``", parts[j]))
        lines[i] = "".join(parts)


def _summary_keeps_literals():
    """autosummary's one-line summaries end at the first ". ": not inside a ``literal``
    (``w . Psi(x, y)`` would be cut in two, an unterminated literal)."""
    from sphinx.ext import autosummary

    original = autosummary.extract_summary
    if getattr(original, "keeps_literals", False):
        return
    guard = "\u2024"                    # ONE DOT LEADER, put back after the cut

    def extract_summary(doc, document):
        doc = [re.sub(r"``.*?``", lambda m: m.group(0).replace(". ", guard + " "), line)
               for line in doc]
        return original(doc, document).replace(guard, ".")
    extract_summary.keeps_literals = True
    autosummary.extract_summary = extract_summary


def setup(app):
    _summary_keeps_literals()
    app.connect("autodoc-process-signature", _short_signature, priority=400)
    app.connect("autodoc-process-docstring", _plain_prose, priority=600)
