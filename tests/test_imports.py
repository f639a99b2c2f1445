"""Import laziness: ``import structlp`` and the built-in structures do not load POT or networkx.

Each check runs in a fresh interpreter (``sys.modules`` of this one is shared by the suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import structlp

HEAVY = ("ot", "networkx", "cvxpy", "numba", "sklearn", "structlp.agm.model",
         "structlp.agm.recovery")


def loaded_after(code):
    """The HEAVY modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps([m for m in {HEAVY!r} " \
            "if m in sys.modules]))"
    root = str(Path(structlp.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", ["import structlp", "import structlp.structures",
                                  "import structlp.agm"])
def test_package_imports_load_nothing_heavy(code):
    assert loaded_after(code) == set()


@pytest.mark.parametrize("name", ["TreeLabeling", "BipartiteMatching", "SpanningTree"])
def test_structures_do_not_load_pot_or_networkx(name):
    loaded = loaded_after(f"from structlp.structures import {name}\n"
                          "from structlp import FrankWolfeLearner, CuttingPlaneLearner")
    assert not loaded & {"ot", "networkx", "sklearn", "structlp.agm.model",
                         "structlp.agm.recovery"}


def test_a_compiled_chain_fit_never_loads_cvxpy():
    """Frank-Wolfe on a chain runs compiled kernels only: no cvxpy problem, so no cvxpy
    import (about a second of CPU and 60 MB of a fresh process); the joint QP still loads
    it."""
    fit = ("from structlp import FrankWolfeLearner\n"
           "from structlp.datasets import make_tree_labeling\n"
           "X, Y, _, model = make_tree_labeling(n_samples=20, random_state=0)\n"
           "FrankWolfeLearner(model, C=1.0, max_iter=20).fit(X, Y).predict(X)")
    loaded = loaded_after(fit)
    assert "cvxpy" not in loaded
    # compiled kernels: built ahead of time (no numba), or numba's JIT
    import structlp.compiled
    assert ("numba" in loaded) == (structlp.compiled.status() != "ahead of time")
    assert "cvxpy" in loaded_after(fit.replace("FrankWolfeLearner", "MaxMarginLearner")
                                   .replace(", max_iter=20", ""))


def test_default_solvers_are_the_same_before_and_after_cvxpy_loads():
    root = str(Path(structlp.__file__).resolve().parents[1])
    probe = ("import sys\nfrom structlp.solvers import check_solver\n"
             "before = [check_solver(None), check_solver(None, kind='LP')]\n"
             "assert 'cvxpy' not in sys.modules\nimport cvxpy\n"
             "print(before == [check_solver(None), check_solver(None, kind='LP')], before)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=root), check=True)
    assert out.stdout.startswith("True"), out.stdout


def test_lazy_names_resolve_to_their_modules():
    import structlp.agm as agm
    import structlp.structures as structures
    from structlp.agm.model import AdversarialGraphicalModel
    from structlp.structures.tree_labeling import TreeLabeling
    assert agm.AdversarialGraphicalModel is AdversarialGraphicalModel
    assert structures.TreeLabeling is TreeLabeling
    for mod in (structlp, agm, structures):
        assert set(mod.__all__) <= set(dir(mod))
        assert all(getattr(mod, n) is not None for n in mod.__all__)
    assert agm.inner.__name__ == "structlp.agm.inner"


@pytest.mark.parametrize("mod", ["structlp", "structlp.agm", "structlp.structures"])
def test_unknown_name_is_an_attribute_error(mod):
    import importlib
    with pytest.raises(AttributeError, match=f"module '{mod}' has no attribute 'nope'"):
        getattr(importlib.import_module(mod), "nope")
