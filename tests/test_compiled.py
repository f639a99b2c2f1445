"""Kernels built ahead of time (``structlp._kernels`` and, on x86-64, ``_kernels_v3``,
:mod:`structlp.compiled`): the same results as numba's JIT compiling the same functions,
used only when built from the installed sources (the x86-64-v3 build only where the CPU
has it), and a fresh process that has them imports no numba.

Where the extensions are installed (the wheel's test run) the tests use them; in a source
checkout the slow test builds them into a temporary folder (about 40 s each) and loads
them."""

import importlib.util
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import structlp.compiled as compiled
from structlp import ConvergenceWarning, FrankWolfeLearner
from structlp.graphical import dual_decomposition as dd
from structlp.graphical import maxsum, roof_duality
from structlp.learners import _fw_kernels, _fw_rounds, _fw_trees
from structlp.structures import BipartiteMatching, TreeLabeling
from structlp.structures import _semi_markov_dp as semi_markov
from structlp.structures._graph import Decomposition, _forest_potentials
from structlp.structures.graph_labeling import GraphLabeling, grid_edges, grid_example

ROOT = Path(__file__).resolve().parents[1]
STATUSES = {"ahead of time", "not built", "stale", "disabled"}


def test_status_is_one_of_the_documented_values():
    assert compiled.status() in STATUSES


def test_the_source_hash_follows_every_kernel_source(tmp_path):
    package = Path(compiled.__file__).resolve().parents[1]
    modules = sorted({m for m, _, _ in compiled.KERNELS.values()} | set(compiled._HELPER_MODULES))
    for module in modules:
        rel = Path(*module.split(".")[1:]).with_suffix(".py")
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((package / rel).read_bytes())
    h = compiled.source_hash(tmp_path)
    assert h == compiled.source_hash() and 0 <= h < 2 ** 62
    for module in modules:
        rel = Path(*module.split(".")[1:]).with_suffix(".py")
        text = (tmp_path / rel).read_bytes()
        (tmp_path / rel).write_bytes(text + b"\n")
        assert compiled.source_hash(tmp_path) != h
        (tmp_path / rel).write_bytes(text)


def test_a_module_built_from_other_sources_is_not_used(monkeypatch):
    fake = types.ModuleType("structlp._kernels")
    fake.max_sum = print
    fake.source_hash = lambda: compiled.source_hash() ^ 1
    monkeypatch.setitem(sys.modules, "structlp._kernels", fake)
    monkeypatch.setattr(compiled, "_has_v3", lambda: False)     # the fake, not the v3 build
    monkeypatch.setattr(compiled, "_state", {})
    assert compiled.status() == "stale" and compiled.aot("max_sum") is None
    fake.source_hash = compiled.source_hash
    monkeypatch.setattr(compiled, "_state", {})
    assert compiled.status() == "ahead of time" and compiled.aot("max_sum") is not None


def test_the_compiled_functions_refuse_arguments_of_other_types(monkeypatch):
    """A compiled function reads its arguments' memory as its signature says: the check in
    front of it refuses anything else (an int32 or strided array would be read wrongly)."""
    calls = []
    fake = types.ModuleType("structlp._kernels")
    fake.max_sum = lambda *a: calls.append(a) or "ran"
    fake.source_hash = compiled.source_hash
    monkeypatch.setitem(sys.modules, "structlp._kernels", fake)
    monkeypatch.setattr(compiled, "_has_v3", lambda: False)     # the fake, not the v3 build
    monkeypatch.setattr(compiled, "_state", {})
    kernel = compiled.aot("max_sum")
    o, p = np.arange(3), np.arange(-1, 2)
    b, B = np.zeros((3, 2)), np.zeros((2, 2, 2))
    assert kernel(o, p, p, b, B) == "ran"
    for bad, what in ((o.astype(np.int32), "int32"), (np.arange(6)[::2], "not C-contiguous"),
                      (o[None], "shape"), (list(o), "list")):
        with pytest.raises(TypeError, match=f"max_sum: argument 0 .*{what}"):
            kernel(bad, p, p, b, B)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        kernel(o, p, p, b)
    assert len(calls) == 1


def test_the_public_max_sum_takes_any_integer_arrays():
    rng = np.random.default_rng(3)
    order, parents, edge_of = np.arange(4), np.array([-1, 0, 1, 1]), np.array([-1, 0, 1, 2])
    b, B = rng.normal(size=(4, 3)), rng.normal(size=(3, 3, 3))
    ref = maxsum.tree_max_sum(order, parents, edge_of, b, B)
    for dtype in (np.int32, np.int16):
        y, v = maxsum.tree_max_sum(order.astype(dtype), parents.astype(dtype),
                                   edge_of.astype(dtype), b, B)
        np.testing.assert_array_equal(y, ref[0])
        assert v == ref[1]


def _fake_build(name, source_hash):
    module = types.ModuleType("structlp." + name)
    module.max_sum = lambda *a: name
    module.source_hash = source_hash
    return module


@pytest.mark.parametrize("has_v3, mode, v3_built, expected", [
    (True, "1", True, "x86-64-v3"), (False, "1", True, "baseline"),
    (True, "generic", True, "baseline"), (True, "1", False, "baseline")])
def test_the_x86_64_v3_build_is_used_where_the_cpu_has_it(monkeypatch, has_v3, mode, v3_built,
                                                          expected):
    monkeypatch.setitem(sys.modules, "structlp._kernels",
                        _fake_build("_kernels", compiled.source_hash))
    monkeypatch.setitem(sys.modules, "structlp._kernels_v3",
                        _fake_build("_kernels_v3", compiled.source_hash) if v3_built else None)
    monkeypatch.setattr(compiled, "_has_v3", lambda: has_v3)
    monkeypatch.setenv("STRUCTLP_AOT", mode)
    monkeypatch.setattr(compiled, "_state", {})
    assert compiled.status() == "ahead of time" and compiled.target() == expected
    o, p, b, B = np.arange(3), np.arange(-1, 2), np.zeros((3, 2)), np.zeros((2, 2, 2))
    assert compiled.aot("max_sum")(o, p, p, b, B) == (
        "_kernels_v3" if expected == "x86-64-v3" else "_kernels")


def test_a_stale_x86_64_v3_build_is_not_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "structlp._kernels",
                        _fake_build("_kernels", compiled.source_hash))
    monkeypatch.setitem(sys.modules, "structlp._kernels_v3",
                        _fake_build("_kernels_v3", lambda: compiled.source_hash() ^ 1))
    monkeypatch.setattr(compiled, "_has_v3", lambda: True)
    monkeypatch.setenv("STRUCTLP_AOT", "1")
    monkeypatch.setattr(compiled, "_state", {})
    assert compiled.status() == "stale" and compiled.target() is None
    assert compiled.aot("max_sum") is None


def test_the_cpu_check_agrees_with_llvm():
    """``structlp.compiled._cpu`` (compiled with the wheel) against LLVM's own reading of
    the CPU: x86-64-v3 is AVX, AVX2, BMI1, BMI2, F16C, FMA, LZCNT and MOVBE."""
    cpu = pytest.importorskip("structlp.compiled._cpu",
                              reason="the CPU check is compiled only into the wheel")
    llvm = pytest.importorskip("llvmlite.binding")
    features = llvm.get_host_cpu_features()
    wanted = ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
    assert cpu.x86_64_v3() == all(features.get(f, False) for f in wanted)


def test_the_build_targets(monkeypatch):
    from structlp.compiled import build
    monkeypatch.delenv("STRUCTLP_AOT_CPU", raising=False)
    monkeypatch.setattr(build.platform, "machine", lambda: "x86_64")
    assert build.targets() == {"_kernels": "", "_kernels_v3": "x86-64-v3"}
    monkeypatch.setattr(build.platform, "machine", lambda: "aarch64")
    assert build.targets() == {"_kernels": ""}
    monkeypatch.setenv("STRUCTLP_AOT_CPU", "host")
    assert build.targets() == {"_kernels": "host"}


def test_the_prefetch_hint_changes_no_result():
    """The hint is a no-op in Python, and compiled it is an instruction that never faults:
    even for indexes past the end of the array."""
    from structlp.compiled.prefetch import prefetch, register
    a = np.arange(10.0)
    assert prefetch(a, 10 ** 6) is None
    numba = compiled.numba_module()
    if numba is None:
        pytest.skip("numba does not import")
    register()

    @numba.njit
    def total(a, G):
        t = 0.0
        for i in range(a.shape[0]):
            prefetch(a, i + 8)
            prefetch(G, 4 * i + 1000)
            t += a[i] * G[i % 3, i % 4]
        return t

    G = np.arange(12.0).reshape(3, 4)
    assert total(a, G) == sum(a[i] * G[i % 3, i % 4] for i in range(10))


def test_switched_off_by_the_environment():
    env = dict(os.environ, STRUCTLP_AOT="0",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + sys.path))
    out = subprocess.run([sys.executable, "-c", "import structlp.compiled as c; "
                          "print(c.status())"], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "disabled"


# ---------------------------------------------------------------- the built kernels

def _load(path, name):
    spec = importlib.util.spec_from_file_location("structlp." + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built_here(tmp_path_factory):
    """The extension modules built from this checkout into a temporary folder (both
    builds where the machine has them: about 40 s each), loaded: {name: module}."""
    tmp_dir = tmp_path_factory.mktemp("kernels")
    out = subprocess.run([sys.executable, "-m", "structlp.compiled.build", str(tmp_dir)],
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return {p.name.split(".")[0]: p for p in Path(tmp_dir).glob("_kernels*")}


def _runnable(name):
    """Whether this machine runs the build ``name`` (x86-64-v3 needs AVX2 and FMA)."""
    if name != compiled.V3_MODULE:
        return True
    llvm = pytest.importorskip("llvmlite.binding")
    features = llvm.get_host_cpu_features()
    return all(features.get(f, False) for f in ("avx", "avx2", "bmi", "bmi2", "f16c", "fma",
                                                 "lzcnt", "movbe"))


@pytest.fixture(params=["_kernels", compiled.V3_MODULE])
def built(request):
    """An ahead-of-time build (each of the two): the installed one, or (slow) one built
    here."""
    name = request.param
    if not _runnable(name):
        pytest.skip(f"this CPU cannot run {name}")
    if compiled.status() == "ahead of time":
        try:
            module = importlib.import_module("structlp." + name)
        except ImportError:
            pytest.skip(f"{name} is not installed")
    elif request.node.get_closest_marker("slow") is None:
        pytest.skip("no kernels built ahead of time here (a source checkout); the slow "
                    "test builds them")
    else:
        paths = request.getfixturevalue("built_here")
        if name not in paths:
            pytest.skip(f"{name} is not built on this platform")
        module = _load(paths[name], name)
    assert module.source_hash() == compiled.source_hash()
    return module


def _use(monkeypatch, module):
    """Make the learners use ``module`` (None: numba's JIT)."""
    state = ({"module": module, "status": "ahead of time"} if module is not None
             else {"module": None, "status": "disabled"})
    monkeypatch.setattr(compiled, "_state", state)
    monkeypatch.setattr(_fw_kernels, "_COMPILED", {})
    monkeypatch.setattr(_fw_trees, "_CACHE", {})
    monkeypatch.setattr(_fw_rounds, "_CACHE", {k: v for k, v in _fw_rounds._CACHE.items()
                                               if k == "jitable"})


def _fit(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, Y)


def _compare(built, monkeypatch):
    rng = np.random.default_rng(0)
    jit = {"max_sum": maxsum._jit(), "dual_decomposition": dd._jit(),
           "dinic": roof_duality._jit()}
    # max-sum on random trees: bit-identical labellings and values
    for n in (1, 2, 7, 30):
        parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
        depth = np.zeros(n, dtype=int)
        for i in range(1, n):
            depth[i] = depth[parents[i]] + 1
        order = np.argsort(depth, kind="stable").astype(np.int64)
        edge_of = np.r_[-1, np.arange(n - 1)].astype(np.int64)
        b, B = rng.normal(size=(n, 4)), rng.normal(size=(max(n - 1, 0), 4, 4))
        a1 = built.max_sum(order, parents, edge_of, b, B)
        a2 = jit["max_sum"](order, parents, edge_of, b, B)
        np.testing.assert_array_equal(a1[0], a2[0])
        assert a1[1:] == a2[1:]
    # dual decomposition and Dinic's maximum flow on grids
    for r, c, k in ((3, 4, 3), (5, 5, 2), (6, 4, 4)):
        dec = Decomposition.of(r * c, grid_edges(r, c))
        b, B = rng.normal(size=(r * c, k)), rng.normal(size=(len(dec.edges), k, k))
        Bts = np.stack([_forest_potentials(f, B, k) for f in dec.forests])
        args = (*dec.stacked(), Bts, b, B, np.ascontiguousarray(dec.edges[:, 0]),
                np.ascontiguousarray(dec.edges[:, 1]), 300, 6, 1.0 + np.abs(b).sum())
        y1, c1, i1 = built.dual_decomposition(*args)
        y2, c2, i2 = jit["dual_decomposition"](*args)
        np.testing.assert_array_equal(y1, y2)
        assert (c1, i1) == (c2, i2)
        if k == 2:
            g = dec.flow_graph()
            cap = rng.uniform(0, 1, size=len(g.head))
            f1, s1 = built.dinic(g.start, g.head, g.rev, cap.copy(), 2 * r * c,
                                 2 * r * c + 1, 1e-15)
            f2, s2 = jit["dinic"](g.start, g.head, g.rev, cap.copy(), 2 * r * c,
                                  2 * r * c + 1, 1e-15)
            assert f1 == f2
            np.testing.assert_array_equal(s1, s2)
    # the semi-Markov dynamic programs: the same segmentations, marginals and samples
    for T, L, K in ((1, 1, 2), (7, 3, 3), (20, 5, 4)):
        s = rng.normal(size=semi_markov.n_parts_of(T, L, K))
        U = rng.random((30, 2 * T + 1))
        for name in ("viterbi", "marginals", "sample"):
            fn = getattr(semi_markov, "_sm_" + name)
            a1 = getattr(built, "semi_markov_" + name)(s, T, L, K, *([U] if name == "sample"
                                                                     else []))
            semi_markov._jit_helpers()
            a2 = compiled.jit(fn)(s, T, L, K, *([U] if name == "sample" else []))
            for u, v in zip(*((a1, a2) if isinstance(a1, tuple) else ((a1,), (a2,)))):
                np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)
    # whole fits: Frank-Wolfe's pool kernels (matchings), its tree kernels (chains) and
    # the loopy oracles (a binary grid)
    X = [rng.normal(size=(4, 4, 3)) for _ in range(8)]
    w0 = rng.normal(size=3)
    Y = [BipartiteMatching().inference(x, (x @ w0).ravel() + 0.3 * rng.normal(size=16))
         for x in X]
    chains = [{"node_features": rng.normal(size=(6, 5)), "edge_features": np.ones((5, 1)),
               "parents": np.arange(-1, 5)} for _ in range(10)]
    labels = [rng.integers(0, 3, size=6) for _ in range(10)]
    grids = [grid_example(rng.normal(size=(5, 6, 2))) for _ in range(4)]
    pixels = [rng.integers(0, 2, size=30) for _ in range(4)]
    fits = {}
    for name, module in (("aot", built), ("jit", None)):
        _use(monkeypatch, module)
        fits[name] = [
            _fit(FrankWolfeLearner(BipartiteMatching(), C=1.0, tol=1e-5, max_iter=1000,
                                   random_state=0), X, Y),
            _fit(FrankWolfeLearner(TreeLabeling(3), C=1.0, tol=1e-5, max_iter=1000,
                                   random_state=0), chains, labels),
            _fit(FrankWolfeLearner(GraphLabeling(2, mode="relaxed"), C=1.0, tol=1e-5,
                                   max_iter=1000, random_state=0), grids, pixels),
            # two threads meeting inside the compiled rounds (_fw_rounds)
            _fit(FrankWolfeLearner(TreeLabeling(3), C=1.0, tol=1e-5, max_iter=1000,
                                   random_state=0, n_jobs=2), chains, labels)]
    for exact, a, j in zip((True, False, True, False), fits["aot"], fits["jit"]):
        assert a.converged_ and j.converged_
        if exact:
            np.testing.assert_array_equal(a.coef_, j.coef_)
            assert (a.objective_, a.n_iter_) == (j.objective_, j.n_iter_)
        else:
            # the tree kernels sum unary scores under fastmath, which vectorizes differently
            # for the generic CPU and the host's: the same certified optimum (w is unique:
            # ||w - w*||^2 <= 2 gap), not the same iterates
            assert abs(a.objective_ - j.objective_) <= a.duality_gap_ + j.duality_gap_
            assert (np.linalg.norm(a.coef_ - j.coef_)
                    <= np.sqrt(2 * a.duality_gap_) + np.sqrt(2 * j.duality_gap_))


def test_the_built_kernels_equal_numba_jit(built, monkeypatch):
    _compare(built, monkeypatch)


@pytest.mark.slow    # builds the extension modules here (about 40 s each)
def test_the_kernels_built_from_this_checkout_equal_numba_jit(built, monkeypatch):
    _compare(built, monkeypatch)


FRESH = """
import sys, numpy as np
import structlp.compiled as c
from structlp import FrankWolfeLearner
from structlp.structures import TreeLabeling
from structlp.structures.graph_labeling import GraphLabeling, grid_example
rng = np.random.default_rng(0)
X = [{'node_features': rng.normal(size=(5, 3)), 'edge_features': np.ones((4, 1)),
      'parents': np.arange(-1, 4)} for _ in range(6)]
Y = [rng.integers(0, 3, size=5) for _ in range(6)]
FrankWolfeLearner(TreeLabeling(3), C=1.0, tol=1e-3, random_state=0).fit(X, Y)
G = [grid_example(rng.normal(size=(4, 4, 2))) for _ in range(3)]
P = [rng.integers(0, 2, size=16) for _ in range(3)]
FrankWolfeLearner(GraphLabeling(2, mode='relaxed'), C=1.0, tol=1e-3, random_state=0).fit(G, P)
print(c.status(), 'numba' in sys.modules, 'llvmlite' in sys.modules)
"""


def test_a_fresh_process_with_built_kernels_imports_no_numba(tmp_path):
    if compiled.status() != "ahead of time":
        pytest.skip("no kernels built ahead of time here (a source checkout)")
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [str(Path(compiled.__file__).resolve().parents[2])] + sys.path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-5:] == ["ahead", "of", "time", "False", "False"]


def _written(module, fn_name, seen):
    """Positions of the parameters that ``module.fn_name`` (or a structlp helper it passes
    them to) assigns into by subscript."""
    import ast
    import importlib
    import inspect
    import textwrap

    def base(t):
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        return t

    key = (module.__name__, fn_name)
    if key in seen:
        return seen[key]
    seen[key] = set()
    fn = getattr(module, fn_name)
    fn = getattr(fn, "py_func", fn)
    f = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    params = [a.arg for a in f.args.args]
    out = set()
    for node in ast.walk(f):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AugAssign) else [])
        for t in targets:
            for sub in (t.elts if isinstance(t, ast.Tuple) else [t]):
                b = base(sub)
                if isinstance(sub, ast.Subscript) and isinstance(b, ast.Name) and b.id in params:
                    out.add(params.index(b.id))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            obj = getattr(module, node.func.id, None)
            obj = getattr(obj, "py_func", obj)
            if obj is not None and str(getattr(obj, "__module__", "")).startswith("structlp"):
                inner = _written(importlib.import_module(obj.__module__), obj.__name__, seen)
                for j, a in enumerate(node.args):
                    b = base(a)
                    if j in inner and isinstance(b, ast.Name) and b.id in params:
                        out.add(params.index(b.id))
    seen[key] = out
    return out


def test_the_table_of_written_arguments_follows_the_kernels_sources():
    """aot refuses a read-only array where a kernel writes: the table it reads must name
    every argument the kernel's source (or a helper it calls) assigns into."""
    import importlib
    import inspect

    for name, (module, fn, _) in compiled.KERNELS.items():
        mod = importlib.import_module(module)
        params = list(inspect.signature(getattr(mod, fn)).parameters)
        written = tuple(params[i] for i in sorted(_written(mod, fn, {})))
        assert compiled.WRITES[name] == written, name


def test_aot_names_the_kernels_and_refuses_others(monkeypatch):
    from structlp.exceptions import InvalidParameterError

    monkeypatch.setattr(compiled, "_state", {})
    for bad, error, what in (("nope", InvalidParameterError, "no compiled kernel is named"),
                             (3, TypeError, "must be a str")):
        with pytest.raises(error, match=what):
            compiled.aot(bad)
    with pytest.raises(InvalidParameterError, match="fn must be the kernel's own function"):
        compiled.kernel("max_sum", print)
    for internal in sorted(set(compiled.KERNELS) - set(compiled.VALUE_CHECKS)):
        with pytest.raises(InvalidParameterError, match="internal to structlp's learners"):
            compiled.aot(internal)                   # no check could vouch for their values
    assert sorted(compiled.VALUE_CHECKS) == ["dinic", "dual_decomposition", "max_sum",
                                             "semi_markov_marginals", "semi_markov_sample",
                                             "semi_markov_viterbi"]
