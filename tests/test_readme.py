"""Every ```python block of README.md runs as a standalone program and prints what the
README shows.

Blocks fenced ```text, ```pycon, ```bash or bare are fragments and are not run.
Each block runs in a fresh interpreter, from an empty folder, with this checkout first on
the path, so it can use nothing but what it builds itself.

A block's printed output is the ```output block that follows it (only blank lines
between); a block without one must print nothing.  The comparison (:func:`check_printed`)
is exact on text and integers; a float matches when the printed value rounds to the digits
shown (within half a unit of the last digit shown, and within 0.1%), so the docs show floats
to the digits that are reproducible; ``...`` stands for any text (a value that differs from
run to run).
The guide's blocks are checked the same way (tests/test_docs.py).
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
OUTPUT = re.compile(r"[ \t]*\n(?:[ \t]*\n)*```output[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_TOKEN = re.compile(rf"(?P<num>(?<![\w.]){NUMBER}(?![\w]))|(?P<any>\.\.\.)|(?P<space>\s+)")


def code_blocks(path):
    """``(line, code, shown output or None)`` of every ```python block of ``path``."""
    text = Path(path).read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        shown = OUTPUT.match(text, m.end())
        out.append((line, m.group(1), shown.group(1) if shown else None))
    return out


def _tolerance(shown):
    """Half a unit of the last digit shown, at most 0.1% of the value (0 for an integer:
    exact), so that a value shown to few digits ("0.1") still pins the printed one."""
    if not re.search(r"[.eE]", shown):
        return 0.0
    mantissa, _, exp = shown.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    half_unit = 0.5 * 10.0 ** (int(exp or 0) - decimals) * (1 + 1e-9)
    return min(half_unit, 1e-3 * abs(float(shown)))


def check_printed(shown, printed, where="the block"):
    """Assert that ``printed`` (a program's standard output) is what the docs show."""
    if shown is None:
        assert printed.strip() == "", (
            f"{where} prints output that the docs do not show (add an ```output block):\n"
            f"{printed}")
        return
    pattern, numbers, pos = [], [], 0
    text = shown.strip()
    for m in _TOKEN.finditer(text):
        pattern.append(re.escape(text[pos:m.start()]))
        if m.group("num"):
            pattern.append(f"({NUMBER})")
            numbers.append(m.group("num"))
        elif m.group("any"):
            pattern.append(".*?")
        else:
            pattern.append(r"\s+")
        pos = m.end()
    pattern.append(re.escape(text[pos:]))
    got = re.fullmatch("".join(pattern), printed.strip(), re.S)
    message = f"{where} printed\n{printed}\nbut the docs show\n{shown}"
    assert got is not None, message
    for want, value in zip(numbers, got.groups()):
        assert abs(float(value) - float(want)) <= _tolerance(want) + 1e-12 * abs(float(want)), \
            f"{value} is not the {want} shown: {message}"


def run_block(code, tmp_path):
    """Run ``code`` in a fresh interpreter from ``tmp_path``; return its standard output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, f"block failed:\n{code}\n--- stderr ---\n{r.stderr}"
    return r.stdout


def python_blocks():
    return [pytest.param(code, shown, id=f"README.md:{line}")
            for line, code, shown in code_blocks(README)]


def test_readme_has_python_blocks():
    assert len(python_blocks()) >= 2      # the complete example and a declared model


@pytest.mark.parametrize("code, shown", python_blocks())
def test_readme_python_block_runs(code, shown, tmp_path):
    if "sklearn" in code:
        pytest.importorskip("sklearn")
    check_printed(shown, run_block(code, tmp_path), "README block")


@pytest.mark.parametrize("shown, printed, ok", [
    ("(6,) 100.520 CLARABEL\nloss: 1.6", "(6,) 100.51998027519133 CLARABEL\nloss: 1.6", True),
    ("(6,) 100.520 CLARABEL", "(6,) 100.52098027519133 CLARABEL", False),   # 1e-5 off
    ("(6,) 100.520 CLARABEL", "(6,) 100.51998 ECOS", False),                  # other text
    ("(6,) 100.520 CLARABEL", "(7,) 100.51998 CLARABEL", False),              # an integer
    ("AGM 0.25\nCRF 0.283333", "AGM 0.25000000000000006\nCRF 0.2833333333333333", True),
    ("AGM 0.25", "AGM 0.275", False),                                         # 10% off
    ("loss: 0.1", "loss: 0.11", False),                     # 10% off, shown to one digit
    ("loss: 0.1", "loss: 0.1", True), ("loss: 0.0", "loss: 0.0", True),
    ("[array([1, 0, 1]), array([0., 1.])] 0.0333333",
     "[array([1, 0, 1]), array([0., 1.])] 0.03333333333333333", True),
    ("[array([1, 0, 1])]", "[array([1, 1, 1])]", False),
    ("[0. 1.]", "[1. 1.]", False),
    ("... 8", "34.5088045810658 8", True),                                   # any value
    ("-0.145833 1.5e-05", "-0.14583333333333334 1.5e-05", True),
    ("-0.145833", "0.14583333333333334", False),
    (None, "", True), (None, "anything\n", False),
])
def test_printed_output_comparison(shown, printed, ok):
    """The comparison itself can fail: a wrong value, text or integer is caught."""
    if ok:
        check_printed(shown, printed)
    else:
        with pytest.raises(AssertionError):
            check_printed(shown, printed)
