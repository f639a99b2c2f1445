"""HiGHS prints a banner ("Running HiGHS ...") from C++ on file descriptor 1 when a process
makes its first ``highspy.Highs``, whatever its options. None of structlp's own LP solves
may show it: not on stdout, not on stderr (where a notebook would show it too)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("highspy")
ROOT = Path(__file__).resolve().parents[2]

PATHS = {
    # structlp's compiled inference LP (highspy directly)
    "direct": """
        from structlp.inference import solve_stacked_lp
        from structlp.structures import GraphLabeling, grid_example
        model = GraphLabeling(2, mode="relaxed")
        x = model.check_x(grid_example(np.random.default_rng(0).normal(size=(2, 2, 1))))
        P = model.polytope(x)
        mu = solve_stacked_lp([P], [np.random.default_rng(1).normal(size=P.n_parts)])[0]
        print("solved", mu.shape[0])
    """,
    # a cvxpy problem through structlp.solvers.solve with solver="HIGHS" (cvxpy's interface)
    "cvxpy": """
        import cvxpy as cp
        from structlp.solvers import solve
        v = cp.Variable(3)
        solve(cp.Problem(cp.Maximize(np.arange(3.0) @ v), [v >= 0, cp.sum(v) <= 1]), "HIGHS")
        print("solved", round(float(v.value[2]), 6))
    """,
    # a declared polytope's feasibility LP (Polytope.is_empty, run by the checks of a
    # declared model's polytope and of its outputs)
    "polytope": """
        import cvxpy as cp
        from structlp import Polytope
        mu = cp.Variable(3)
        P = Polytope.from_cvxpy(mu, [cp.sum(mu) == 1, mu >= 0, mu <= 1])
        print("solved", P.is_empty())
    """,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_no_highs_banner_from_structlp_solves(path, tmp_path):
    script = tmp_path / "solve.py"
    script.write_text("import numpy as np\n" + textwrap.dedent(PATHS[path]))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "solved" in run.stdout                      # the program's own output got through
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        assert "HiGHS" not in text, f"HiGHS banner on {name}: {text!r}"


def test_the_banner_exists_without_structlp(tmp_path):
    """The check above can fail: made directly, a first Highs prints the banner on fd 1."""
    run = subprocess.run([sys.executable, "-c", "import highspy; highspy.Highs()"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "HiGHS" in run.stdout + run.stderr
