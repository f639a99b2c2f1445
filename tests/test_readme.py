"""Every ```python block of README.md runs as a standalone program.

Blocks fenced ```text, ```pycon, ```bash or bare are fragments and are not run.
Each block runs in a fresh interpreter, from an empty folder, with this checkout first on
the path, so it can use nothing but what it builds itself.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks():
    text = README.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        blocks.append(pytest.param(m.group(1), id=f"README.md:{line}"))
    return blocks


def test_readme_has_python_blocks():
    assert len(python_blocks()) >= 2      # the complete example and a declared model


@pytest.mark.parametrize("code", python_blocks())
def test_readme_python_block_runs(code, tmp_path):
    if "sklearn" in code:
        pytest.importorskip("sklearn")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, f"README block failed:\n{code}\n--- stderr ---\n{r.stderr}"
