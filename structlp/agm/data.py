"""The CK+ facial emotion-intensity data of Fathony et al. (2018), read from a path.

The data are for research use only (CK+ terms; DOC-Toolbox README) and are never
copied into this repository: :func:`load_ck_emotion` reads them from
``data_path``, else the environment variable ``STRUCTLP_CK_PATH``, else
``../shared/data/ck_emotion`` relative to the current working directory.  The directory holds
``ck.mat`` (167 sequences: ``X`` (25, T) features, ``H`` (T,) intensities 1..3,
``Y`` emotion class 1..6) and ``ids_random.mat`` (MAT v7.3 / HDF5, ``ids``
(20, 167): the authors' random permutations, 1-based; the first 120 train).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..datasets.files import open_regular
from ..exceptions import DataNotFoundError, InvalidInputError  # noqa: F401

#: Environment variable naming the data directory.
ENV_VAR = "STRUCTLP_CK_PATH"
#: Default data directory, relative to the current working directory (a checkout's root), not
#: to this file: an installed package lives in site-packages, where no data are.
DEFAULT_PATH = Path("..") / "shared" / "data" / "ck_emotion"


def ck_path(data_path=None):
    """The data directory (``data_path``, ``$STRUCTLP_CK_PATH`` or the default); checked.

    Raises
    ------
    DataNotFoundError
        Naming the directory looked at, the missing files and ``STRUCTLP_CK_PATH``.
    """
    if data_path is not None and not isinstance(data_path, (str, os.PathLike)):
        raise InvalidInputError(
            f"data_path must be a path (str or os.PathLike); got {type(data_path).__name__}.")
    source = ("data_path" if data_path is not None
              else f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the default path")
    path = Path(data_path if data_path is not None else os.environ.get(ENV_VAR) or DEFAULT_PATH)
    missing = [f for f in ("ck.mat", "ids_random.mat") if not (path / f).exists()]
    if missing:
        what = "does not exist" if not path.is_dir() else f"lacks {missing}"
        raise DataNotFoundError(
            f"CK+ emotion data not found: {path} ({source}) {what}. Give data_path=... "
            f"(problem option -o data_path=...) or set the environment variable {ENV_VAR} to "
            "the directory holding ck.mat and ids_random.mat; the data (research use only) "
            "are not shipped with structlp.")
    return path


def _read_ids(path):
    try:
        import h5py
    except ImportError:
        h5py = None
    import scipy.io
    try:
        with open_regular(path, "CK+ file") as fh:
            if h5py is not None:
                with h5py.File(fh, "r") as f:
                    ids = np.array(f["ids"])
            else:
                ids = scipy.io.loadmat(fh)["ids"]
        ids = np.asarray(ids, dtype=np.int64)
    except NotImplementedError:
        raise ImportError(f"{path} is a MAT v7.3 (HDF5) file: install h5py "
                          "(pip install h5py) to read it.") from None
    except (OSError, ValueError, TypeError, KeyError, IndexError) as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"{path} is not the CK+ splits file (a MAT v7.3 file with "
                                f"an integer array 'ids' (20, 167)): {exc}") from None
    if ids.ndim != 2 or 20 not in ids.shape:
        raise InvalidInputError(f"{path}: 'ids' has shape {ids.shape}; expected (20, n).")
    if ids.shape[0] != 20:
        ids = ids.T
    return ids - 1


def load_ck_emotion(data_path=None):
    """Load the CK+ emotion-intensity sequences and the authors' 20 splits.

    Returns
    -------
    dict with
        ``frames`` : list of 167 arrays (T_i, 25);
        ``labels`` : list of 167 int arrays (T_i,), intensities 0..2 (neutral <
        increasing < apex; the paper's 1..3 minus one);
        ``emotion`` : int array (167,), classes 0..5;
        ``splits`` : int array (20, 167), 0-based permutations (first 120 train).
    """
    import scipy.io
    path = ck_path(data_path)
    file = path / "ck.mat"
    try:
        with open_regular(file, "CK+ file") as fh:
            raw = scipy.io.loadmat(fh)
    except InvalidInputError:
        raise
    except Exception as exc:     # scipy raises ValueError, TypeError, OSError... on garbage
        raise InvalidInputError(f"{file} is not a readable MAT file ({type(exc).__name__}: "
                                f"{exc}).") from None
    if "data" not in raw:
        raise InvalidInputError(f"{file} has no 'data' variable.")
    frames, labels, emotion = [], [], []
    for i, rec in enumerate(np.asarray(raw["data"]).ravel()):
        try:
            x = np.asarray(rec["X"][0, 0], dtype=float).T
            h = np.asarray(rec["H"][0, 0], dtype=np.int64).ravel() - 1
            z = int(np.asarray(rec["Y"][0, 0]).ravel()[0]) - 1
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise InvalidInputError(f"{file}: sequence {i} of 'data' is not a record of X "
                                    f"(25, T), H (T,) and Y ({type(exc).__name__}: {exc}).") \
                from None
        if x.ndim != 2 or len(h) != len(x) or not np.isfinite(x).all() \
                or not ((h >= 0) & (h <= 2)).all() or not 0 <= z <= 5:
            raise InvalidInputError(
                f"{file}: sequence {i} of 'data' is malformed: X {x.T.shape} (finite), H of "
                f"{len(h)} intensities in 1..3 (one per frame), Y in 1..6 expected.")
        if frames and x.shape[1] != frames[0].shape[1]:
            raise InvalidInputError(f"{file}: sequence {i} has {x.shape[1]} features per "
                                    f"frame; sequence 0 has {frames[0].shape[1]}.")
        frames.append(x)
        labels.append(h)
        emotion.append(z)
    splits = _read_ids(path / "ids_random.mat")
    if len(frames) == 0 or splits.shape[1] != len(frames) \
            or any(sorted(row) != list(range(len(frames))) for row in splits.tolist()):
        raise InvalidInputError(
            f"{path / 'ids_random.mat'}: each row of 'ids' must be a permutation of 1..n for "
            f"the {len(frames)} sequences of ck.mat; it is not.")
    return {"frames": frames, "labels": labels, "emotion": np.array(emotion),
            "splits": splits}


def emotion_examples(frames, emotion, n_classes=6, edges="chain"):
    """Chain (or skip-chain) examples with the authors' features, each in its emotion's block.

    Node feature of frame t: ``[x_t; 1]``; edge feature (t-1 -> t):
    ``[|x_t - x_{t-1}|; 1]``; both placed in block ``emotion`` of ``n_classes``
    blocks (size ``n_classes * (d + 1)``).  With ``edges="skip2"`` the examples are
    graph examples (:func:`structlp.graphical.junction.skip_chain`, treewidth 2) with
    the skip edges ``(t, t + 2)`` too, their features ``[|x_{t+2} - x_t|; 1]`` in
    the same block but in their own columns (edge features of size
    ``2 n_classes (d + 1)``: chain edges first half, skip edges second half).

    Parameters
    ----------
    frames : list of arrays (T_i, d); emotion : int array (m,)
    n_classes : int
    edges : {"chain", "skip2"}

    Returns
    -------
    list of tree example dicts ("chain") or graph example dicts ("skip2")
    """
    from ..utils.validation import check_choice
    from ..graphical.junction import skip_chain
    check_choice(edges, "edges", ("chain", "skip2"), owner="emotion_examples")
    out = []
    for F, z in zip(frames, emotion):
        T, d = F.shape
        V = _in_block(F, z, n_classes)
        Ef = _in_block(np.abs(np.diff(F, axis=0)), z, n_classes)
        if edges == "chain":
            out.append({"node_features": V, "edge_features": Ef,
                        "parents": np.arange(-1, T - 1)})
        else:
            S = _in_block(np.abs(F[2:] - F[:-2]), z, n_classes)
            out.append(skip_chain(V, Ef, skip_features=S, skip=2))
    return out


def _in_block(F, z, n_classes):
    """Rows ``[F; 1]`` placed in block ``z`` of ``n_classes`` blocks of size d + 1."""
    T, d = F.shape
    out = np.zeros((T, n_classes * (d + 1)))
    out[:, z * (d + 1):z * (d + 1) + d] = F
    out[:, z * (d + 1) + d] = 1.0
    return out
