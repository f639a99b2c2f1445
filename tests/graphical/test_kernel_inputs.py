"""Every public function that hands arrays to a compiled graph kernel refuses bad arrays
with a clear error before the kernel runs (the kernels index unchecked: a bad index would
read or write outside an array, or crash the interpreter), and still agrees with
brute-force enumeration on valid ones.

The bad calls run in a child process: a segfault there fails the test instead of killing
pytest.  The child also stands in for the kernels built ahead of time by numba's JIT
compilations of the same functions (a module ``structlp._kernels`` of dispatchers), so
that :func:`structlp.compiled.aot` is exercised without a 40 s build.
"""

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from structlp.graphical.dual_decomposition import tree_dual_decomposition
from structlp.graphical.maxsum import BACKENDS, tree_max_sum
from structlp.graphical.roof_duality import FlowGraph, binary_lp

ROOT = Path(__file__).resolve().parents[2]

# (case name, expected exception, a fragment of its message, the statement)
CASES = [
    # tree_max_sum: order, parents, edge_of, b, B of a 3-node chain 0 - 1 - 2
    ("node index past the end", "InvalidInputError", "order[2] = 5 is out of range",
     "tree_max_sum([0, 1, 5], P, E, b, B)"),
    ("parent index 10**9", "InvalidInputError", "parents[2] = 1000000000 is out of range",
     "tree_max_sum(O, [-1, 0, 10**9], E, b, B)"),
    ("edge index 10**9", "InvalidInputError", "edge_of[2] = 1000000000 is not an edge",
     "tree_max_sum(O, P, [-1, 0, 10**9], b, B)"),
    ("short order", "InvalidInputError", "one entry per node (3",
     "tree_max_sum([0, 1], P, E, b, B)"),
    ("short parents", "InvalidInputError", "one entry per node (3",
     "tree_max_sum(O, [-1, 0], E, b, B)"),
    ("cyclic parents, no root", "InvalidInputError", "-1 at the root",
     "tree_max_sum(O, [2, 0, 1], E, b, B)"),
    ("cyclic parents under a root", "InvalidInputError", "after its parent",
     "tree_max_sum(O, [-1, 2, 1], E, b, B)"),
    ("negative edge_of", "InvalidInputError", "edge_of[1] = -1 is not an edge",
     "tree_max_sum(O, P, [-1, -1, 0], b, B)"),
    ("repeated entry in order", "InvalidInputError", "node 1 appears 2 times",
     "tree_max_sum([0, 1, 1], P, E, b, B)"),
    ("repeated edge in edge_of", "InvalidInputError", "edge 0 is given to 2 nodes",
     "tree_max_sum(O, P, [-1, 0, 0], b, B)"),
    ("zero labels", "InvalidInputError", "n_labels >= 1",
     "tree_max_sum(O, P, E, np.zeros((3, 0)), np.zeros((2, 0, 0)))"),
    ("edge tables of another leading size", "InvalidInputError", "B (edge scores) must have",
     "tree_max_sum(O, P, E, b, np.zeros((1, 2, 2)))"),
    ("float index arrays", "InvalidInputError", "order must be an array of integers",
     "tree_max_sum(np.array([0., 1, 2]), P, E, b, B)"),
    ("a tree example of garbage", "InvalidInputError", "out of range",
     "max_sum(TreeExample(b, np.zeros((2, 1)), np.array([-1, 0, 10**9]), np.arange(3), "
     "np.arange(1, 3), np.array([-1, 0, 1])), b, B)"),
    # tree_dual_decomposition on a triangle 0 - 1 - 2 - 0 (two trees)
    ("dd: an edge naming node 10**8", "InvalidInputError", "edges[2, 1] = 100000000 is out",
     "tree_dual_decomposition(*DD[:6], np.array([[0, 1], [1, 2], [2, 10**8]]), 50, 6)"),
    ("dd: graph tables of another leading size", "InvalidInputError",
     "B (edge scores) must have shape (3, 2, 2)",
     "tree_dual_decomposition(*DD[:5], DD[5][:2], DD[6], 50, 6)"),
    ("dd: tree tables of another leading size", "InvalidInputError",
     "Bts (the trees' edge scores) must have shape (2, 2, 2, 2)",
     "tree_dual_decomposition(*DD[:3], DD[3][:1], *DD[4:], 50, 6)"),
    ("dd: node scores of another size", "InvalidInputError", "(n_trees, n_nodes)",
     "tree_dual_decomposition(*DD[:4], np.zeros((5, 2)), *DD[5:], 50, 6)"),
    ("dd: a cyclic tree", "InvalidInputError", "parents[1] must have -1 at the root",
     "tree_dual_decomposition(DD[0], np.array([DD[1][0], [2, 0, 1]]), *DD[2:], 50, 6)"),
    ("dd: an edge no tree covers", "InvalidInputError", "covered 0 times",
     "tree_dual_decomposition(*DD[:3], DD[3] * [[[[1]]], [[[0]]]], *DD[4:], 50, 6)"),
    ("dd: negative max_iter", "InvalidParameterError", "max_iter must be an int >= 0",
     "tree_dual_decomposition(*DD, -1, 6)"),
    # binary_lp and its flow graph
    ("binary_lp: more edges than its flow graph", "InvalidInputError",
     "must be the edges the graph was built from",
     "binary_lp(FlowGraph(3, [[0, 1]]), b, np.zeros((3, 2, 2)), "
     "np.array([[0, 1], [1, 2], [0, 2]]))"),
    ("binary_lp: node scores of another size", "InvalidInputError",
     "b (node scores) must have shape (3, 2)",
     "binary_lp(FlowGraph(3, [[0, 1]]), np.zeros((2, 2)), np.zeros((1, 2, 2)), "
     "np.array([[0, 1]]))"),
    ("FlowGraph: an edge past the end", "InvalidInputError", "edges[0, 1] = 7 is out of range",
     "FlowGraph(3, [[0, 7]])"),
    ("FlowGraph: arrays cannot be rewritten", "ValueError", "WRITEABLE",
     "FlowGraph(3, [[0, 1]]).head.setflags(write=True)"),
    # the kernels built ahead of time, called directly
    ("aot: an unknown kernel", "InvalidParameterError", "no compiled kernel is named 'nope'",
     "aot('nope')"),
    ("aot: a kernel name not a str", "TypeError", "must be a str", "aot(3)"),
    ("aot: dinic on a read-only memory map", "TypeError", "must be a writable array",
     "aot('dinic')(G.start, G.head, G.rev, READONLY_CAP, 6, 7, 1e-12)"),
    ("aot: dinic with a node past the end", "InvalidInputError", "head[0] = 99 is out of range",
     "aot('dinic')(G.start, np.r_[99, G.head[1:]], G.rev, CAP, 6, 7, 1e-12)"),
    ("aot: dinic with unpaired reverse arcs", "InvalidInputError", "is not paired",
     "aot('dinic')(G.start, G.head, np.zeros_like(G.rev), CAP, 6, 7, 1e-12)"),
    ("aot: dinic with a terminal past the end", "InvalidInputError", "t = 70 is not a node",
     "aot('dinic')(G.start, G.head, G.rev, CAP, 6, 70, 1e-12)"),
    ("aot: max_sum with a repeated entry in order", "InvalidInputError", "appears 2 times",
     "aot('max_sum')(np.array([0, 1, 1]), P, E, b, B)"),
    ("aot: dual decomposition with an edge past the end", "InvalidInputError",
     "edges[2, 1] = 100000000 is out",
     "aot('dual_decomposition')(*DD[:6], DD[6][:, 0].copy(), np.array([1, 2, 10**8]), "
     "50, 6, 1.0)"),
]

PRELUDE = """
import json, sys, tempfile, types
import numpy as np
import structlp.compiled as compiled
from structlp.graphical import maxsum, dual_decomposition as dd, roof_duality as rd

# the kernels "built ahead of time": numba's JIT compilations of the same functions
fake = types.ModuleType("structlp._kernels")
fake.max_sum = maxsum._jit()
fake.dual_decomposition = dd._jit()
fake.dinic = rd._jit()
fake.source_hash = compiled.source_hash
sys.modules["structlp._kernels"] = fake
sys.modules["structlp._kernels_v3"] = None
compiled._state.clear()
assert compiled.status() == "ahead of time", compiled.status()

from structlp.compiled import aot
from structlp.graphical.maxsum import tree_max_sum, max_sum
from structlp.graphical.trees import TreeExample
from structlp.graphical.dual_decomposition import tree_dual_decomposition
from structlp.graphical.roof_duality import FlowGraph, binary_lp
from structlp.exceptions import InvalidInputError, InvalidParameterError

O, P, E = np.arange(3), np.array([-1, 0, 1]), np.array([-1, 0, 1])
rng = np.random.default_rng(0)
b, B = rng.normal(size=(3, 2)), rng.normal(size=(2, 2, 2))
# the triangle's two trees: 0 - 1 - 2 (edges 0, 1) and 0 - 2 closed by 0 - 1 (zero)
tri = np.array([[0, 1], [1, 2], [0, 2]])
Btri = rng.normal(size=(3, 2, 2))
orders = np.array([[0, 1, 2], [0, 1, 2]])
parents = np.array([[-1, 0, 1], [-1, 0, 0]])
edge_ofs = np.array([[-1, 0, 1], [-1, 0, 1]])
Bts = np.stack([Btri[:2], np.stack([np.zeros((2, 2)), Btri[2]])])
DD = (orders, parents, edge_ofs, Bts, b, Btri, tri)
assert tree_dual_decomposition(*DD, 50, 6)[0].shape == (3,)
G = FlowGraph(3, tri)
CAP = np.ones(len(G.head))
path = tempfile.mkdtemp() + "/cap"
CAP.tofile(path)
READONLY_CAP = np.memmap(path, dtype=np.float64, mode="r")
"""

RUNNER = """
out = []
for name, statement in json.loads(sys.argv[1]):
    print("running", name, flush=True)
    try:
        eval(statement)
    except Exception as exc:
        out.append([name, type(exc).__name__, str(exc)])
    else:
        out.append([name, None, None])
print("RESULTS " + json.dumps(out), flush=True)
"""


def _run_cases(cases):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("STRUCTLP_AOT", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(RUNNER),
         json.dumps([[c[0], c[3]] for c in cases])],
        capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120)
    last = [line for line in proc.stdout.splitlines() if line.startswith("running")]
    assert proc.returncode == 0, (
        f"the child process died (code {proc.returncode}) at: {last[-1:] or proc.stderr}")
    line = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")][-1]
    return {name: (kind, msg) for name, kind, msg in json.loads(line[len("RESULTS "):])}


def test_bad_arrays_get_a_clear_error_and_never_reach_a_kernel():
    results = _run_cases(CASES)
    wrong = []
    for name, kind, fragment, _ in CASES:
        got_kind, got_msg = results[name]
        if got_kind != kind or fragment not in got_msg:
            wrong.append((name, kind, fragment, got_kind, got_msg))
    assert wrong == []


# ------------------------------------------------------------------ valid inputs
def _random_tree(rng, n):
    """A random tree, a random topological order of it (not breadth-first in general)
    and a random numbering of its edges."""
    perm = rng.permutation(n)                  # perm[0] is the root
    parents = np.full(n, -1)
    for t in range(1, n):
        parents[perm[t]] = perm[rng.integers(0, t)]
    order = perm                               # every node after its parent
    edge_of = np.full(n, -1)
    edge_of[perm[1:]] = rng.permutation(n - 1)
    return order, parents, edge_of


def _brute(b, B, pairs):
    n, k = b.shape
    best = -np.inf
    for y in itertools.product(range(k), repeat=n):
        y = np.array(y)
        s = b[np.arange(n), y].sum() + sum(B[e, y[u], y[v]] for e, (u, v) in enumerate(pairs))
        best = max(best, s)
    return best


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_sum_on_any_valid_order_equals_enumeration(backend):
    rng = np.random.default_rng(1)
    for _ in range(30):
        n, k = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        order, parents, edge_of = _random_tree(rng, n)
        b, B = rng.normal(size=(n, k)), rng.normal(size=(n - 1, k, k))
        y, value = tree_max_sum(order, parents, edge_of, b, B, backend=backend)
        child = np.flatnonzero(parents >= 0)
        pairs = [None] * (n - 1)
        for j in child:
            pairs[edge_of[j]] = (parents[j], j)
        score = b[np.arange(n), y].sum() + sum(B[e, y[u], y[v]] for e, (u, v) in enumerate(pairs))
        assert np.isclose(value, score) and np.isclose(value, _brute(b, B, pairs))


def test_dual_decomposition_and_roof_duality_certify_only_optima():
    """On random small loopy graphs, what either method certifies as integral scores as
    the brute-force optimum."""
    from structlp.structures._graph import Decomposition, _forest_potentials

    rng = np.random.default_rng(2)
    certified = 0
    for _ in range(25):
        n = int(rng.integers(3, 7))
        pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.6]
        if not pairs:
            continue
        edges = np.array(pairs)
        for k in (2, 3):
            b = rng.normal(size=(n, k))
            B = rng.normal(size=(len(edges), k, k)) * 0.5
            opt = _brute(b, B, pairs)
            dec = Decomposition.of(n, edges)
            orders, parents, edge_ofs = dec.stacked()
            Bts = np.stack([_forest_potentials(f, B, k) for f in dec.forests])
            y, ok, _ = tree_dual_decomposition(orders, parents, edge_ofs, Bts, b, B, edges,
                                               300, 8)
            score = b[np.arange(n), y].sum() + sum(B[e, y[u], y[v]]
                                                   for e, (u, v) in enumerate(pairs))
            assert score <= opt + 1e-9
            if ok:
                certified += 1
                assert np.isclose(score, opt)
            if k == 2:
                res = binary_lp(FlowGraph(n, edges), b, B, edges)
                if res is not None and res[2] and not np.any(res[0] == 0.5):
                    certified += 1
                    yb = res[0].astype(int)
                    assert np.isclose(b[np.arange(n), yb].sum()
                                      + sum(B[e, yb[u], yb[v]] for e, (u, v) in enumerate(pairs)),
                                      opt)
    assert certified >= 10


def test_a_remembered_decomposition_still_checks_its_tables():
    """The trees of a decomposition are checked once (its arrays are immutable), but each
    call's tables still are: a table that is not the graph edge's, or a second tree
    carrying one, is refused after any number of valid calls."""
    from structlp.exceptions import InvalidInputError
    from structlp.structures._graph import Decomposition, _forest_potentials, grid_edges

    rng = np.random.default_rng(3)
    edges = grid_edges(3, 3)
    dec = Decomposition.of(9, edges)
    orders, parents, edge_ofs = dec.stacked()
    assert not orders.flags.writeable
    with pytest.raises(ValueError):
        orders.setflags(write=True)
    k = 3
    for _ in range(3):
        b, B = rng.normal(size=(9, k)), rng.normal(size=(len(edges), k, k))
        Bts = np.stack([_forest_potentials(f, B, k) for f in dec.forests])
        tree_dual_decomposition(orders, parents, edge_ofs, Bts, b, B, dec.edges, 20, 4)
    bad = Bts.copy()
    t, slot = np.argwhere(np.abs(bad).sum(axis=(2, 3)) > 0)[0]
    bad[t, slot, 0, 0] += 1.0                          # a carried table altered
    with pytest.raises(InvalidInputError, match="neither that edge's table"):
        tree_dual_decomposition(orders, parents, edge_ofs, bad, b, B, dec.edges, 20, 4)
    closing = [(t, s) for t in range(len(dec.forests))
               for s in np.flatnonzero(dec.forests[t].src < 0)]
    if closing:
        bad = Bts.copy()
        bad[closing[0]] = 1.0                          # a closing edge scoring
        with pytest.raises(InvalidInputError, match="zero"):
            tree_dual_decomposition(orders, parents, edge_ofs, bad, b, B, dec.edges, 20, 4)
    zero_B = B.copy()
    zero_B[0] = 0.0                                    # edge 0 scores nothing: valid...
    Bts0 = np.stack([_forest_potentials(f, zero_B, k) for f in dec.forests])
    tree_dual_decomposition(orders, parents, edge_ofs, Bts0, b, zero_B, dec.edges, 20, 4)
    # ...but its scores in B with no tree carrying them are refused
    with pytest.raises(InvalidInputError, match="covered 0 times"):
        tree_dual_decomposition(orders, parents, edge_ofs, Bts0, b, B, dec.edges, 20, 4)
