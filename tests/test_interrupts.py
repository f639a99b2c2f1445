"""Solver calls.  Ctrl-C means stop: an interrupt during a solver call ends the fit with
KeyboardInterrupt (also in SCS, ECOS and OSQP, which catch SIGINT themselves and would end in
a SolverError or lose it), whatever thread receives it, the learner left as before.  And
solver_opts holds option names: anything else is refused before any solve."""

import re
import signal
import sys
import threading
import time

from cvxpy.reductions.solvers.solving_chain import SolvingChain
import numpy as np
import pytest

from structlp import MaxMarginLearner
from structlp.datasets import make_bipartite_matching
from structlp.solvers import installed_solvers

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "pthread_kill"),
                                reason="POSIX signals")


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["SCS", "ECOS", "CLARABEL"])
def test_ctrl_c_inside_a_solver_stops_the_fit(solver, monkeypatch):
    if solver not in installed_solvers():
        pytest.skip(f"{solver} is not installed")
    X, Y, _, model = make_bipartite_matching(n_samples=60, n_rows=8, n_features=20,
                                             noise=0.5, random_state=0)
    opts = {"SCS": {"max_iters": 3000, "eps_abs": 1e-14, "eps_rel": 1e-14},
            "ECOS": {"max_iters": 200, "abstol": 1e-14, "reltol": 1e-14, "feastol": 1e-14},
            "CLARABEL": {}}[solver]
    est = MaxMarginLearner(model, C=1.0).fit(X[:5], Y[:5])
    before = {k: v.copy() for k, v in vars(est).items()
              if k.endswith("_") and isinstance(v, np.ndarray)}
    est.set_params(solver=solver, solver_opts=opts)
    real, sent, pressers = SolvingChain.solve_via_data, [], []

    def solve_under_ctrl_c(self, *args, **kwargs):
        # Ctrl-C while the solver runs (SCS and ECOS install their own SIGINT handler for
        # the call): a thread presses it every few milliseconds from the moment the solver
        # is entered until it returns, and at least once, whatever the machine's speed
        done = threading.Event()

        def press():
            while True:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                sent.append(1)
                if done.wait(0.005):
                    return

        presser = threading.Thread(target=press, daemon=True)
        pressers.append((done, presser))
        presser.start()
        try:
            return real(self, *args, **kwargs)
        finally:
            done.set()
            presser.join()

    monkeypatch.setattr(SolvingChain, "solve_via_data", solve_under_ctrl_c)
    # Python's Ctrl-C handler, also when pytest runs with SIGINT ignored (a background job)
    original = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            est.fit(X, Y)
    finally:
        # a press still in flight when the interrupt unwound the call must not reach pytest
        signal.signal(signal.SIGINT, lambda *_: None)
        try:
            for done, presser in pressers:
                done.set()
                presser.join()
            time.sleep(0.05)
        finally:
            signal.signal(signal.SIGINT, original)
    assert sent
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(est, k), v)


# A fresh process (the test's own SIGINT handling and threads stay out of it): a thread
# that does not block SIGINT runs beside the fit, as a timer, a progress bar or a BLAS pool
# would, and Ctrl-C is sent to the process (not to a thread), as a terminal sends it.  The
# presses start once the solver runs with its own SIGINT handler installed (when it
# installs one) and go on until the solver returns.
_CTRL_C_SCRIPT = r"""
import ctypes, os, signal, sys, threading, time
import numpy as np
from cvxpy.reductions.solvers.solving_chain import SolvingChain
from structlp import MaxMarginLearner
from structlp.datasets import make_bipartite_matching

solver = sys.argv[1]
opts = {"SCS": {"max_iters": 4000, "eps_abs": 1e-14, "eps_rel": 1e-14},
        "ECOS": {"max_iters": 400, "abstol": 1e-14, "reltol": 1e-14, "feastol": 1e-14},
        "OSQP": {"max_iter": 6000, "eps_abs": 1e-14, "eps_rel": 1e-14, "polishing": False},
        "CLARABEL": {}}[solver]
X, Y, _, model = make_bipartite_matching(n_samples=400, n_rows=8, n_features=20, noise=0.5,
                                         random_state=0)
est = MaxMarginLearner(model, C=1.0).fit(X[:5], Y[:5])
before = {k: np.copy(v) for k, v in vars(est).items() if k.endswith("_")
          and isinstance(v, np.ndarray)}
est.set_params(solver=solver, solver_opts=opts)
other = threading.Event()
threading.Thread(target=other.wait, daemon=True).start()      # SIGINT not blocked there
libc = ctypes.CDLL(None)

def handler_address():
    buf = ctypes.create_string_buffer(512)
    libc.sigaction(int(signal.SIGINT), None, buf)
    return buf.raw[:ctypes.sizeof(ctypes.c_void_p)]

python_handler = handler_address()
real, sent, in_solver = SolvingChain.solve_via_data, [], []

def solve_under_ctrl_c(self, *args, **kwargs):
    done = threading.Event()

    def press():
        t0 = time.monotonic()
        while handler_address() == python_handler and time.monotonic() - t0 < 0.3:
            time.sleep(0.0005)                   # until the solver installs its handler
        in_solver.append(handler_address() != python_handler)
        if done.wait(0.02):
            return
        while True:
            os.kill(os.getpid(), signal.SIGINT)  # to the process, as Ctrl-C
            sent.append(1)
            if done.wait(0.005):
                return

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    try:
        return real(self, *args, **kwargs)
    finally:
        done.set()
        presser.join()

SolvingChain.solve_via_data = solve_under_ctrl_c
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    est.fit(X, Y)
    outcome = "returned normally"
except KeyboardInterrupt:
    outcome = "KeyboardInterrupt"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
signal.signal(signal.SIGINT, signal.SIG_IGN)
unchanged = all(np.array_equal(getattr(est, k), v) for k, v in before.items())
print(outcome, "| presses:", len(sent), "| solver handler seen:", in_solver,
      "| unchanged:", unchanged)
"""


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["SCS", "ECOS", "OSQP", "CLARABEL"])
def test_ctrl_c_to_the_process_with_another_thread_stops_the_fit(solver):
    """Ctrl-C while the solver runs, with another thread in the process: the fit ends in
    KeyboardInterrupt (not a SolverError, not a normal return) and the learner keeps the
    attributes of its previous fit."""
    import os
    import subprocess
    from pathlib import Path

    if solver not in installed_solvers():
        pytest.skip(f"{solver} is not installed")
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_SCRIPT, solver], env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and out, proc.stderr[-3000:]
    assert out[-1].startswith("KeyboardInterrupt | presses:"), out[-1]
    assert "presses: 0 " not in out[-1] and out[-1].endswith("unchanged: True"), out[-1]


@pytest.mark.parametrize("opts", [{1: 2}, {None: 1}, {"max_iters": 10, (1,): 2}])
def test_solver_opts_keys_must_be_option_names(opts):
    """cvxpy passes solver_opts as keyword arguments: a key that is not a str is refused,
    naming solver_opts and the key, by every learner (also one whose model never calls a
    solver) and by structlp.maximize."""
    import structlp
    from structlp import (CuttingPlaneLearner, FrankWolfeLearner, InvalidParameterError,
                          SubgradientLearner)
    X, Y, _, model = make_bipartite_matching(n_samples=3, n_rows=3, random_state=0)
    bad = next(k for k in opts if not isinstance(k, str))
    match = f"'solver_opts' parameter.*key {re.escape(repr(bad))}"
    for cls in (MaxMarginLearner, CuttingPlaneLearner, FrankWolfeLearner, SubgradientLearner):
        with pytest.raises(InvalidParameterError, match=match):
            cls(model, solver_opts=opts).fit(X, Y)
    with pytest.raises(InvalidParameterError, match=match):
        structlp.maximize(model, X, [np.zeros(9)] * 3, solver_opts=opts)
