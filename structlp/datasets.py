"""Real data sets used by the problems, notebooks and benchmarks.

Each loader reads files installed by a system package or shipped beside the
checkout, and raises :class:`~structlp.exceptions.InvalidInputError` naming what
to install when they are absent.  Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .exceptions import InvalidInputError, InvalidParameterError

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


def disulfide_pair_features(nodes):
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


def load_disulfide(path=None, max_bonds=5):
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
