"""Shared fixtures: every solver-dependent test runs once per installed solver.

The tests mirror the package (tests/learners/, tests/certificates/, tests/agm/, ...); the
shared oracles (oracles.py here, agm/*_oracles.py, sequence/seq_oracles.py) and the helpers
some test modules share are importable from every folder.
"""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import structlp

_HERE = Path(__file__).resolve().parent
_FOLDERS = [p for p in _HERE.iterdir()
            if p.is_dir() and not p.name.startswith(("_", ".")) and p.name != "fixtures"]
for _folder in [_HERE, *sorted(_FOLDERS)]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

#: Per-solver options that make first-order solvers accurate enough to compare,
#: and the relative tolerance each solver is held to.
SOLVER_SETTINGS = {
    "CLARABEL": ({}, 1e-6),
    "ECOS": ({}, 1e-6),
    "SCS": ({"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}, 1e-4),
    "OSQP": ({"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iter": 400_000, "polishing": True}, 1e-4),
}
INSTALLED = [s for s in SOLVER_SETTINGS if s in structlp.installed_solvers()]

#: ../shared/data beside the checkout (overridable for other layouts).
SHARED_DATA = Path(os.environ.get(
    "STRUCTLP_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(params=INSTALLED)
def solver(request):
    """(name, solver_opts, relative tolerance) for each installed QP solver."""
    opts, tol = SOLVER_SETTINGS[request.param]
    return request.param, dict(opts), tol


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def no_aot(monkeypatch):
    """The kernels built ahead of time switched off (numba's JIT or Python runs them)."""
    import structlp.compiled as compiled
    monkeypatch.setattr(compiled, "_state", {"module": None, "status": "disabled"})
