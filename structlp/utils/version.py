"""structlp's version (``structlp.__version__``), in a module of its own so that the modules
that record it (saved files, the CLI) need not import the package's ``__init__``."""

__version__ = "0.1.0"
