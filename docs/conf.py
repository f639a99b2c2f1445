"""Sphinx configuration of structlp's documentation (``sphinx-build -W -b html docs docs/_build``)."""

import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import structlp  # noqa: E402

project = "structlp"
author = "the structlp developers"
copyright = "the structlp developers"
release = version = structlp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
]

# the notebooks are rendered as committed (outputs cleared), never executed here;
# they are copied in at build time because Sphinx reads only its source folder
NOTEBOOKS = HERE / "notebooks"
if NOTEBOOKS.exists():
    shutil.rmtree(NOTEBOOKS)
NOTEBOOKS.mkdir()
for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy(nb, NOTEBOOKS / nb.name)
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

autodoc_default_options = {"members": True, "inherited-members": False,
                           "member-order": "bysource"}
autodoc_typehints = "signature"    # annotations in the signatures; numpydoc explains them
autodoc_typehints_format = "short"
autodoc_type_aliases = {"ArrayLike": "numpy.typing.ArrayLike"}
python_use_unqualified_type_names = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"structlp {release}"


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


def setup(app):
    app.connect("autodoc-process-signature", _tidy_signature, priority=400)
