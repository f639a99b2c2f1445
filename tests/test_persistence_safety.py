"""Persistence from the user's side: a save that is killed or runs out of disk never loses
the previous file, and crafted files are refused with a PersistenceError in bounded memory.

The crafted files are loaded in a child process whose address space is capped at what it
used after its imports plus 200 MB (``resource.setrlimit(RLIMIT_AS)``): a load that
tried to allocate a bomb's content would end in MemoryError there, not PersistenceError.
"""

import errno
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import structlp
from structlp import CuttingPlaneLearner, PersistenceError
from structlp.datasets import make_bipartite_matching
from structlp.persistence import _archive

ROOT = Path(__file__).resolve().parents[1]
posix = pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals and FIFOs")


def _fit(seed, n=8):
    X, Y, _, model = make_bipartite_matching(n_samples=n, n_rows=3, n_features=3, noise=0.3,
                                             random_state=seed)
    return CuttingPlaneLearner(model, C=1.0).fit(X, Y), X


@pytest.fixture(scope="module")
def two_models():
    (a, X), (b, _) = _fit(0), _fit(1)
    assert not np.allclose(a.coef_, b.coef_)
    return a, b, X


# ---------------------------------------------------------------- kill -9 during save
_KILLER = """
import os, signal, sys
import structlp
from structlp.persistence import _archive
old, new, at = sys.argv[1], sys.argv[2], sys.argv[3]
est = structlp.load(new)
real_fdopen, real_replace = os.fdopen, os.replace
class Dying:
    def __init__(self, f, limit):
        self.f, self.limit, self.n = f, limit, 0
    def write(self, b):
        if self.n + len(b) >= self.limit:
            self.f.write(b[:max(0, self.limit - self.n)]); self.f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        self.n += len(b)
        return self.f.write(b)
    def __getattr__(self, k):
        return getattr(self.f, k)
    def __enter__(self):
        return self
    def __exit__(self, *a):
        return self.f.__exit__(*a)
if at.startswith("byte"):
    _archive.os.fdopen = lambda fd, mode: Dying(real_fdopen(fd, mode), int(at[4:]))
elif at == "rename":
    def replace(a, b):
        os.kill(os.getpid(), signal.SIGKILL)
    _archive.os.replace = replace
elif at == "after":
    def replace(a, b):
        real_replace(a, b); os.kill(os.getpid(), signal.SIGKILL)
    _archive.os.replace = replace
structlp.save(est, old)
"""


@posix
@pytest.mark.slow
def test_kill_9_during_save_never_loses_the_previous_file(two_models, tmp_path):
    a, b, X = two_models
    good, other = tmp_path / "model.structlp", tmp_path / "other.structlp"
    structlp.save(a, good)
    structlp.save(b, other)
    size = other.stat().st_size
    points = ["byte0", f"byte{size // 5}", f"byte{size // 2}", f"byte{size - 1}", "rename",
              "after"]
    for at in points:
        r = subprocess.run(
            [sys.executable, "-c", _KILLER, str(good), str(other), at],
            env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
            timeout=300)
        assert r.returncode == -signal.SIGKILL, (at, r.stderr[-2000:])
        got = structlp.load(good)
        expect = b if at == "after" else a
        np.testing.assert_array_equal(got.coef_, expect.coef_)
        for x, y in zip(got.predict(X), expect.predict(X)):
            np.testing.assert_array_equal(x, y)
        structlp.save(a, good)            # the next round starts from the first model
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    # killed saves may leave their temporary file (hidden, beside the target), never a
    # damaged target
    assert {"model.structlp", "other.structlp"} <= set(leftovers)


# ---------------------------------------------------------------- full disk
def test_full_disk_leaves_the_previous_file_intact(two_models, tmp_path, monkeypatch):
    a, b, _ = two_models
    good = tmp_path / "model.structlp"
    structlp.save(a, good)
    before = good.read_bytes()
    real = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, data):
            self.n += len(data)
            if self.n > 600:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(data)

        def __getattr__(self, k):
            return getattr(self.f, k)

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(_archive.os, "fdopen", lambda fd, mode: Full(real(fd, mode)))
    with pytest.raises(PersistenceError, match="disk is full.*previous file.*unchanged"):
        structlp.save(b, good)
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.structlp"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or sys.platform != "linux",
                    reason="mounting a small tmpfs needs root on Linux")
def test_full_disk_on_a_real_small_filesystem(two_models, tmp_path):
    a, _, _ = two_models
    big, _ = _fit(2, n=8)
    big.coef_ = np.random.default_rng(0).normal(size=200_000)   # ~1.6 MB, does not fit
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        good = mnt / "model.structlp"
        structlp.save(a, good)
        before = good.read_bytes()
        with pytest.raises(PersistenceError, match="disk is full"):
            structlp.save(big, good)
        assert good.read_bytes() == before
        assert sorted(p.name for p in mnt.iterdir()) == ["model.structlp"]
        np.testing.assert_array_equal(structlp.load(good).coef_, a.coef_)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_save_keeps_the_file_mode_and_failed_saves_name_the_path(two_models, tmp_path):
    a, _, _ = two_models
    good = tmp_path / "model.structlp"
    structlp.save(a, good)
    os.chmod(good, 0o640)
    structlp.save(a, good)
    assert (good.stat().st_mode & 0o777) == 0o640
    with pytest.raises(PersistenceError, match="directory"):
        structlp.save(a, tmp_path)
    with pytest.raises(PersistenceError, match="missing"):
        structlp.save(a, tmp_path / "missing" / "model.structlp")


# ---------------------------------------------------------------- crafted files
def _content(path):
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _write(path, content, meta=None, extra=()):
    """Write members (metadata re-serialised and its checksum recomputed, as an attacker
    would), plus ``extra`` (name, bytes) pairs appended even if the name repeats."""
    if meta is not None:
        text = json.dumps(meta).encode()
        content = dict(content, **{"structlp.json": text,
                                   "SHA256": hashlib.sha256(text).hexdigest().encode()})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, b in content.items():
            z.writestr(n, b)
        for n, b in extra:
            with pytest.warns(UserWarning, match="Duplicate"):
                z.writestr(n, b)
    return path


def _npy(a):
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _coef(meta):
    """The metadata's coef_ node and its array entry."""
    node = meta["root"]["attributes"]["coef_"]
    return node, meta["arrays"][node["file"]]


def _bomb(path, base, total, level=1):
    """A structlp file whose coef_ member is ``total`` bytes of zeros (honest sizes, real
    deflate), with checksums that match."""
    content = _content(base)
    meta = json.loads(content["structlp.json"])
    node, info = _coef(meta)
    n = total // 8
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False,
                                               "shape": (n,)})
    hdr = hdr.getvalue()
    sha = hashlib.sha256(hdr)
    zeros = bytes(1 << 24)
    left = n * 8
    while left:
        sha.update(zeros[:min(left, len(zeros))])
        left -= min(left, len(zeros))
    info.update(sha256=sha.hexdigest(), shape=[n], dtype="<f8")
    text = json.dumps(meta).encode()
    content.update({"structlp.json": text, "SHA256": hashlib.sha256(text).hexdigest().encode()})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as z:
        for name, b in content.items():
            if name == node["file"]:
                with z.open(name, "w", force_zip64=True) as m:
                    m.write(hdr)
                    left = n * 8
                    while left:
                        m.write(zeros[:min(left, len(zeros))])
                        left -= min(left, len(zeros))
            else:
                z.writestr(name, b)
    return path


def _crafted(base, folder):
    """name -> path of every crafted file (each one is a real attack with valid checksums)."""
    out = {}
    content = _content(base)
    meta = json.loads(content["structlp.json"])
    node, _ = _coef(meta)

    out["bomb_200MB"] = _bomb(folder / "bomb.structlp", base, 200 << 20)

    m = json.loads(json.dumps(meta))           # one array referenced 100 times
    big = np.zeros(3_500_000)                  # 28 MB of zeros, compresses to ~30 KB
    blob = _npy(big)
    _, i = _coef(m)
    i.update(sha256=hashlib.sha256(blob).hexdigest(), shape=[big.size], dtype="<f8")
    m["root"]["attributes"]["many_"] = {"type": "list", "items": [dict(node)] * 100}
    out["references_x100"] = _write(folder / "refs.structlp", dict(content, **{node["file"]: blob}),
                                    m)

    m = json.loads(json.dumps(meta))           # a .npy header announcing 10**12 elements
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False,
                                               "shape": (10 ** 12,)})
    blob = hdr.getvalue() + bytes(24)
    _, i = _coef(m)
    i.update(sha256=hashlib.sha256(blob).hexdigest(), shape=[10 ** 12])
    out["huge_npy_shape"] = _write(folder / "shape.structlp", dict(content, **{node["file"]: blob}),
                                   m)

    m = json.loads(json.dumps(meta))           # metadata lies about the dtype
    _, i = _coef(m)
    i["dtype"] = "<f4"
    out["declared_dtype_lie"] = _write(folder / "dtype.structlp", content, m)

    m = json.loads(json.dumps(meta))           # metadata lies about the shape
    _, i = _coef(m)
    i["shape"] = [i["shape"][0] + 1]
    out["declared_shape_lie"] = _write(folder / "shapelie.structlp", content, m)

    for label, arr in (("coef_wrong_shape", np.ones(7)), ("coef_complex", np.ones(3) + 1j),
                       ("coef_not_finite", np.array([1.0, np.nan, 0.0])),
                       ("coef_matrix", np.ones((3, 1)))):
        m = json.loads(json.dumps(meta))
        blob = _npy(arr)
        _, i = _coef(m)
        i.update(sha256=hashlib.sha256(blob).hexdigest(), shape=list(arr.shape),
                 dtype=arr.dtype.str)
        out[label] = _write(folder / f"{label}.structlp", dict(content, **{node["file"]: blob}),
                            m)

    blob = _npy(np.ones(3) * 7)                # a second member of the same name, last wins
    out["duplicate_member"] = _write(folder / "dup.structlp", content, meta,
                                     extra=[(node["file"], blob)])

    z = folder / "zero.structlp"
    z.symlink_to("/dev/zero")
    out["symlink_to_dev_zero"] = z
    fifo = folder / "fifo.structlp"
    os.mkfifo(fifo)
    out["fifo"] = fifo
    out["directory"] = folder
    return out


_LOADER = """
import json, resource, sys, time, tracemalloc
import structlp
from structlp.exceptions import PersistenceError
structlp.persistence.library_classes()      # import every class a load may need
structlp.load(sys.argv[2])                  # and everything a valid load touches
def vm():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize"):
            return int(line.split()[1]) * 1024
cap = vm() + 200 * 2 ** 20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
out = {}
for name, path in json.loads(sys.argv[1]).items():
    tracemalloc.start()
    t = time.perf_counter()
    try:
        structlp.load(path)
        kind, msg = "loaded", ""
    except BaseException as exc:
        kind, msg = type(exc).__name__, str(exc)[:300]
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    out[name] = {"outcome": kind, "message": msg, "seconds": seconds, "peak_bytes": peak}
out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


def _load_in_child(files, base):
    r = subprocess.run([sys.executable, "-c", _LOADER, json.dumps({k: str(v) for k, v in
                                                                  files.items()}), str(base)],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@posix
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_crafted_files_are_refused_in_bounded_memory(two_models, tmp_path):
    a, _, _ = two_models
    base = tmp_path / "base.structlp"
    structlp.save(a, base)
    folder = tmp_path / "crafted"
    folder.mkdir()
    files = _crafted(base, folder)
    got = _load_in_child(files, base)
    print(json.dumps(got, indent=1))
    for name in files:
        assert got[name]["outcome"] == "PersistenceError", (name, got[name])
        assert got[name]["peak_bytes"] < 200 << 20, (name, got[name])


@posix
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_real_zip_bombs_are_refused_in_bounded_memory(two_models, tmp_path):
    a, _, _ = two_models
    base = tmp_path / "base.structlp"
    structlp.save(a, base)
    files = {"bomb_2GB": _bomb(tmp_path / "b2.structlp", base, 2100 << 20),
             "bomb_4GB": _bomb(tmp_path / "b4.structlp", base, 4200 << 20)}
    got = _load_in_child(files, base)
    print(json.dumps(got, indent=1))
    for name in files:
        assert got[name]["outcome"] == "PersistenceError", (name, got[name])
        assert got[name]["peak_bytes"] < 200 << 20, (name, got[name])


def test_refusal_messages_name_the_cause(two_models, tmp_path):
    a, _, _ = two_models
    base = tmp_path / "base.structlp"
    structlp.save(a, base)
    files = _crafted(base, tmp_path)
    expect = {"bomb_200MB": "max_bytes", "references_x100": "more than once",
              "huge_npy_shape": "declares|metadata", "declared_dtype_lie": "declares",
              "declared_shape_lie": "declares", "coef_wrong_shape": "shape",
              "coef_complex": "not a plain numpy array", "coef_not_finite": "finite real",
              "coef_matrix": "finite real vector", "duplicate_member": "duplicate",
              "symlink_to_dev_zero": "not a regular file", "fifo": "not a regular file",
              "directory": "not a regular file"}
    assert set(expect) == set(files)
    for name, path in files.items():
        with pytest.raises(PersistenceError, match=expect[name]):
            structlp.load(path)


def test_member_count_is_bounded_before_the_directory_is_read(two_models, tmp_path,
                                                              monkeypatch):
    a, _, _ = two_models
    path = tmp_path / "m.structlp"
    structlp.save(a, path)
    content = _content(path)
    _write(path, dict(content, **{f"pad/{i}": b"" for i in range(30)}))
    monkeypatch.setattr(_archive, "MAX_MEMBERS", 20)
    with pytest.raises(PersistenceError, match="members"):
        structlp.load(path)


def test_a_trusted_large_file_loads_with_max_bytes(two_models, tmp_path):
    a, _, _ = two_models
    a = structlp.clone(a)
    a.__dict__.update(vars(two_models[0]))
    a.extra_ = np.zeros(10_000_000)                # 80 MB of zeros: ratio far above 100
    path = tmp_path / "big.structlp"
    structlp.save(a, path)
    with pytest.raises(PersistenceError, match="max_bytes"):
        structlp.load(path)
    with pytest.raises(PersistenceError, match="max_bytes"):
        structlp.load(path, max_bytes=1000)
    assert structlp.load(path, max_bytes=100 << 20).extra_.shape == (10_000_000,)


# ---------------------------------------------------------------- runtime parameters
def test_runtime_parameters_are_not_restored(tmp_path):
    _, _, _, model = make_bipartite_matching(n_samples=4, n_rows=3, n_features=3,
                                             random_state=0)
    est = structlp.FrankWolfeLearner(model, n_jobs=2, callback=print, max_iter=2)
    path = tmp_path / "fw.structlp"
    structlp.save(est, path)                       # a callback no longer blocks a save
    meta = json.loads(_content(path)["structlp.json"])
    assert not {"backend", "n_jobs", "callback"} & set(meta["root"]["params"])
    # a file that names a scheduler address (as an attacker would write it)
    meta["root"]["params"]["backend"] = "tcp://203.0.113.1:8786"
    meta["root"]["params"]["n_jobs"] = 64
    _write(path, _content(path), meta)
    got = structlp.load(path)
    assert got.backend is None and got.n_jobs is None and got.callback is None
    opted = structlp.load(path, runtime_params=True)
    assert opted.backend == "tcp://203.0.113.1:8786" and opted.n_jobs == 64
