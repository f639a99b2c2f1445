"""Ctrl-C means stop: an interrupt during a solver call ends the fit with KeyboardInterrupt
(also in SCS and ECOS, which catch SIGINT themselves and would end in a SolverError), the
learner left as before."""

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
