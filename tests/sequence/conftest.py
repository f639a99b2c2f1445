"""Make the independent oracles in seq_oracles.py importable from the sequence tests."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
