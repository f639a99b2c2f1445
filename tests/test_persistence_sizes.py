"""Persistence against crafted hyper-parameters and nesting: a file whose size-like
hyper-parameters exceed what its arrays imply (``n_labels`` 10**9 with checksums
recomputed), or whose metadata is nested 200,000 deep, is refused as malformed.

The crafted files are loaded (and, if a load succeeds, used for ``predict``) in a child
process whose address space is capped (``resource.setrlimit(RLIMIT_AS)``), so that a
regression ends in a MemoryError there and a failed test here, not in an exhausted machine.
The deep files are read in a thread with a large stack and a raised recursion limit, as
on a Python whose JSON parser is limited by the stack only: the refusal must not rely on
the parser giving up.
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import structlp
from structlp import FrankWolfeLearner, PersistenceError
from structlp.agm import AdversarialGraphicalModel, TreeCRF
from structlp.persistence import MAX_DEPTH
from structlp.persistence._checks import json_depth
from structlp.sequence import BigramFeatures, SequenceSSVM, HammingLoss
from structlp.structures import GraphLabeling, MultiLabel, TreeLabeling

ROOT = Path(__file__).resolve().parents[1]
linux = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")

#: How the child rebuilds the data each saved estimator predicts on.
DATA = """
import numpy as np
from structlp.datasets import make_tree_labeling, make_grid_blocks
def data(kind):
    if kind == "tree":
        return make_tree_labeling(n_samples=4, n_nodes=5, n_labels=3, random_state=0)[:2]
    if kind == "graph":
        return make_grid_blocks(2, noise=0.5, random_state=0)[:2]
    if kind == "multi":
        rng = np.random.default_rng(0)
        return [rng.standard_normal(4) for _ in range(6)], [rng.integers(0, 2, 3) for _ in range(6)]
    if kind == "sequence":
        rng = np.random.default_rng(0)
        return [np.zeros(5, dtype=int)] * 4, [rng.integers(0, 3, 5) for _ in range(4)]
"""


def _estimators():
    exec(DATA, ns := {})
    data = ns["data"]
    out = {}
    X, Y = data("tree")
    out["tree"] = (FrankWolfeLearner(TreeLabeling(3), max_iter=3).fit(X, Y), "tree")
    out["agm"] = (AdversarialGraphicalModel(3, max_epochs=2, random_state=0).fit(X, Y), "tree")
    out["crf"] = (TreeCRF(3, max_iter=5).fit(X, Y), "tree")
    X, Y = data("graph")
    out["graph"] = (FrankWolfeLearner(GraphLabeling(3), max_iter=2).fit(X, Y), "graph")
    X, Y = data("multi")
    out["multi"] = (FrankWolfeLearner(MultiLabel(3, edges="full"), max_iter=2).fit(X, Y),
                    "multi")
    X, Y = data("sequence")
    out["sequence"] = (SequenceSSVM(HammingLoss(), BigramFeatures(3), max_iter=3).fit(X, Y),
                       "sequence")
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sizes")
    out = {}
    for name, (est, kind) in _estimators().items():
        structlp.save(est, folder / f"{name}.structlp")
        out[name] = (folder / f"{name}.structlp", kind)
    return out


def _rewrite(src, dst, edit=None, text=None):
    """A copy of ``src`` whose metadata is edited (``edit(meta)``) or replaced (``text``),
    its checksum recomputed as an attacker would."""
    with zipfile.ZipFile(src) as z:
        content = {n: z.read(n) for n in z.namelist()}
    if text is None:
        meta = json.loads(content["structlp.json"])
        edit(meta)
        text = json.dumps(meta)
    data = text.encode()
    content.update({"structlp.json": data, "SHA256": hashlib.sha256(data).hexdigest().encode()})
    with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, b in content.items():
            z.writestr(n, b)
    return dst


def _set(*keys, value):
    def edit(meta):
        node = meta["root"]
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return edit


_CHILD = DATA + """
import json, resource, sys, threading
import structlp
def vm():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize"):
            return int(line.split()[1]) * 1024
out = {}
def work():
    structlp.persistence.library_classes()
    for path, kind in json.loads(sys.argv[2]).values():   # what a valid load and predict touch
        structlp.load(path).predict(data(kind)[0][:1])
    cap = vm() + (300 << 20)                  # this thread's stack is already mapped
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for name, (path, kind) in json.loads(sys.argv[1]).items():
        try:
            est = structlp.load(path)
        except BaseException as exc:
            out[name] = [type(exc).__name__, str(exc)[:300]]
            continue
        try:
            est.predict(data(kind)[0][:1])
            out[name] = ["loaded and predicted", ""]
        except BaseException as exc:
            out[name] = ["loaded, then " + type(exc).__name__, str(exc)[:300]]
threading.stack_size(512 << 20)     # a parser limited by the stack only, not by a counter
sys.setrecursionlimit(1_000_000)
t = threading.Thread(target=work)
t.start()
t.join()
print(json.dumps(out))
"""


def _load_in_child(files, valid):
    r = subprocess.run([sys.executable, "-c", _CHILD,
                        json.dumps({k: [str(p), kind] for k, (p, kind) in files.items()}),
                        json.dumps({k: [str(p), kind] for k, (p, kind) in valid.items()})],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _crafted(saved, folder):
    huge = 10 ** 9
    out = {}
    for name in ("tree", "graph", "multi"):
        path, kind = saved[name]
        out[f"{name}_n_labels_1e9"] = (_rewrite(path, folder / f"{name}.structlp", _set(
            "params", "model", "params", "n_labels", value=huge)), kind)
    path, kind = saved["tree"]
    out["tree_n_labels_0"] = (_rewrite(path, folder / "tree0.structlp", _set(
        "params", "model", "params", "n_labels", value=0)), kind)
    for name in ("agm", "crf"):
        path, kind = saved[name]
        out[f"{name}_n_labels_1e9"] = (_rewrite(path, folder / f"{name}.structlp", _set(
            "params", "n_labels", value=huge)), kind)
        out[f"{name}_d_v_1e9"] = (_rewrite(path, folder / f"{name}_dv.structlp", _set(
            "attributes", "n_features_in_", value={"type": "tuple", "items": [huge, 1]})), kind)
    path, kind = saved["sequence"]
    out["sequence_alphabet_1e5"] = (_rewrite(path, folder / "seq.structlp", _set(
        "params", "features", "params", "alphabet_size", value=10 ** 5)), kind)
    depth = 200_000
    with zipfile.ZipFile(saved["tree"][0]) as z:
        text = z.read("structlp.json").decode()
    deep = "[" * depth + "]" * depth
    out["deep_unused_key"] = (_rewrite(saved["tree"][0], folder / "deep1.structlp",
                                       text=text[:-1] + ', "extra": ' + deep + "}"), "tree")
    out["deep_in_fitted"] = (_rewrite(saved["tree"][0], folder / "deep2.structlp",
                                      _set("attributes", "deep_", value=0)), "tree")
    with zipfile.ZipFile(out["deep_in_fitted"][0]) as z:
        text = z.read("structlp.json").decode()
    nodes = '{"type": "list", "items": [' * (depth // 2) + "1" + "]}" * (depth // 2)
    out["deep_in_fitted"] = (_rewrite(saved["tree"][0], folder / "deep2.structlp",
                                      text=text.replace('"deep_": 0', '"deep_": ' + nodes)),
                             "tree")
    return out


@pytest.mark.skipif(os.name != "posix", reason="needs resource.setrlimit")
@linux
def test_crafted_sizes_and_nesting_are_refused_in_bounded_memory(saved, tmp_path):
    files = _crafted(saved, tmp_path)
    got = _load_in_child(files, saved)
    assert set(got) == set(files)
    for name, (outcome, message) in got.items():
        assert outcome == "PersistenceError", (name, outcome, message)
        if name.startswith("deep"):
            assert "nested too deeply (more than 500 levels" in message, (name, message)
        else:
            assert "the file was modified" in message, (name, message)
    assert "n_labels is 1000000000" in got["tree_n_labels_1e9"][1]
    assert "coef_ has" in got["agm_d_v_1e9"][1] and "1000000000" in got["crf_n_labels_1e9"][1]
    assert "features" in got["sequence_alphabet_1e5"][1]


def test_the_saved_files_themselves_load_and_predict(saved):
    """The checks refuse only what the weights rule out: every honest file loads."""
    exec(DATA, ns := {})
    for name, (path, kind) in saved.items():
        est = structlp.load(path)
        assert len(est.predict(ns["data"](kind)[0][:2])) == 2, name


def test_n_labels_at_the_bound_loads_and_one_more_is_refused(saved, tmp_path):
    """A tree labeling's ``n_labels`` may be any divisor of len(coef_); more, or a
    non-divisor, is refused."""
    path, _ = saved["tree"]
    n = len(structlp.load(path).coef_)
    ok = _rewrite(path, tmp_path / "ok.structlp", _set("params", "model", "params", "n_labels",
                                                       value=n))
    assert structlp.load(ok).model.n_labels == n
    bad = _rewrite(path, tmp_path / "bad.structlp", _set("params", "model", "params",
                                                         "n_labels", value=n + 1))
    with pytest.raises(PersistenceError, match=f"n_labels is {n + 1}, but coef_ has {n}"):
        structlp.load(bad)
    k = next(k for k in range(2, n) if n % k)         # n = k d_v + k**2 d_e for the truth
    bad = _rewrite(path, tmp_path / "nd.structlp", _set("params", "model", "params",
                                                        "n_labels", value=k))
    with pytest.raises(PersistenceError, match="not a multiple of it"):
        structlp.load(bad)


def test_depth_bound_is_exact(saved, tmp_path):
    """Nesting of MAX_DEPTH levels is accepted by the depth check (the loader then reads the
    node normally); one more level is refused before the JSON parser runs."""
    path, _ = saved["tree"]
    with zipfile.ZipFile(path) as z:
        text = z.read("structlp.json").decode()
    assert json_depth(text.encode()) < 10
    for extra, refused in ((MAX_DEPTH - 1, False), (MAX_DEPTH, True)):   # + the root object
        t = text[:-1] + ', "extra": ' + "[" * extra + "]" * extra + "}"
        assert json_depth(t.encode()) == extra + 1
        f = _rewrite(path, tmp_path / f"d{extra}.structlp", text=t)
        if refused:
            with pytest.raises(PersistenceError, match="nested too deeply"):
                structlp.load(f)
        else:
            assert structlp.load(f).coef_.shape


def _reference_depth(o):
    if isinstance(o, (list, dict)):
        items = o.values() if isinstance(o, dict) else o
        return 1 + max((_reference_depth(x) for x in items), default=0)
    return 0


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_json_depth_against_the_parsed_tree(chunk, monkeypatch):
    """The linear scan against a recursive count on the parsed JSON, with brackets, quotes
    and backslashes inside strings and keys, and chunk boundaries anywhere."""
    from structlp.persistence import _checks
    monkeypatch.setattr(_checks, "_CHUNK", chunk)
    rng = random.Random(chunk)
    atoms = ['a"[\\', "\\\\", "[{]}", '"', 'x\\"]', 1, None, 2.5, "", "\\"]

    def gen(d):
        r = rng.random()
        if d > 10 or r < 0.3:
            return rng.choice(atoms)
        if r < 0.65:
            return [gen(d + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["k", "[", '\\"{', "]"]) + str(i): gen(d + 1)
                for i in range(rng.randint(0, 3))}

    for _ in range(200):
        o = gen(0)
        assert json_depth(json.dumps(o).encode()) == _reference_depth(o)
