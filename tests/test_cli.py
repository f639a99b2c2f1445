"""The structlp command line."""

import json
import subprocess
import sys
from pathlib import Path

from structlp.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_solvers_lists_installed(capsys):
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    assert "CLARABEL" in out and "QP and LP" in out


def test_run_reviewer_assignment_writes_json(tmp_path, capsys):
    path = tmp_path / "out.json"
    rc = main(["run", str(ROOT / "problems" / "reviewer_assignment.py"), "--solver", "ECOS",
               "--C", "2", "--seed", "3", "--json", str(path),
               "-o", "n_train=6", "-o", "n_test=4"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "learned (structlp)" in out and "solver ECOS" in out
    res = json.loads(path.read_text())
    assert res["solver"] == "ECOS" and res["C"] == 2.0
    assert res["config"]["n_train"] == 6
    learned, planted, count = res["results"]
    # the planted weights are the best linear model; learning beats the word count
    assert planted["weights"] == "planted weights"
    assert learned["train_hamming"] <= count["train_hamming"]


def test_missing_problem_file(capsys):
    assert main(["run", "no/such/file.py"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_bad_solver_is_a_clean_error(capsys):
    rc = main(["run", str(ROOT / "problems" / "reviewer_assignment.py"), "--solver", "NOPE",
               "-o", "n_train=2", "-o", "n_test=1"])
    assert rc == 2
    assert "'solver' parameter" in capsys.readouterr().err


def test_console_script_entry_point():
    out = subprocess.run([sys.executable, "-m", "structlp.cli", "solvers"], capture_output=True,
                         text=True, check=True).stdout
    assert "CLARABEL" in out
