"""Sphinx configuration of structlp's documentation (``sphinx-build -W -b html docs docs/_build``)."""

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
autodoc_typehints = "none"          # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"structlp {release}"
