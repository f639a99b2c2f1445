"""Checks of the arrays handed to the compiled graph kernels (max-sum, dual decomposition,
maximum flow): the kernels index with them unchecked, so an index out of range, a short
array, a repeated entry in a permutation or a cycle in a tree reads or writes outside an
array.  Every check is a few O(n) numpy operations, and the checks of a tree's index
arrays are remembered by content (a data set has few distinct trees), so a repeated tree
costs a lookup.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..exceptions import InvalidInputError

_CHECKED_TREES: Dict[bytes, bool] = {}     # index arrays' bytes -> checked
_CHECKED_IDS: Dict[Tuple[int, int, int], Any] = {}   # ids of checked immutable arrays


def int_array(a: Any, name: str, owner: str, ndim: int) -> np.ndarray:
    """``a`` as a C-contiguous int64 array of ``ndim`` dimensions (any integer dtype;
    refused otherwise, naming ``name`` and ``owner``)."""
    if type(a) is np.ndarray and a.dtype == np.int64 and a.ndim == ndim \
            and a.flags.c_contiguous:
        return a
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        raise InvalidInputError(f"{owner}: {name} must be an array of integers; got "
                                f"dtype {arr.dtype}.")
    if arr.ndim != ndim:
        raise InvalidInputError(f"{owner}: {name} must have {ndim} dimension(s); got shape "
                                f"{arr.shape}.")
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise InvalidInputError(f"{owner}: {name} has an entry {arr.max()}, too large for "
                                "an index.")
    return np.ascontiguousarray(arr, dtype=np.int64)


def edge_pairs(edges: Any, owner: str) -> np.ndarray:
    """``edges`` as an int64 array of shape (n_edges, 2) (an empty list gives (0, 2)), or
    an InvalidInputError naming ``owner``."""
    edges = np.asarray(edges)
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    edges = int_array(edges, "edges", owner, 2)
    if edges.shape[1] != 2:
        raise InvalidInputError(f"{owner}: edges must have shape (n_edges, 2); got "
                                f"{edges.shape}.")
    return edges


def float_array(a: Any, name: str, owner: str, shape: Tuple[Any, ...],
                finite: bool = True) -> np.ndarray:
    """``a`` as a C-contiguous float64 array of ``shape`` (None: any size there), finite
    unless ``finite`` is False (for kernels that report non-finite scores themselves)."""
    if type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous:
        arr = a
    else:
        arr = np.asarray(a)
        if arr.dtype.kind not in "biuf":
            raise InvalidInputError(f"{owner}: {name} must be a real array; got dtype "
                                    f"{arr.dtype}.")
    got = arr.shape
    bad = len(got) != len(shape)
    if not bad and got != shape:
        for want_i, got_i in zip(shape, got):
            if want_i is not None and want_i != got_i:
                bad = True
                break
    if bad:
        want = "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
        raise InvalidInputError(f"{owner}: {name} must have shape {want}; got {got}.")
    if arr is not a:
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    if finite and not np.isfinite(arr).all():
        raise InvalidInputError(f"{owner}: {name} must be finite; got NaN or infinite "
                                "values.")
    return arr


def check_range(a: np.ndarray, low: int, high: int, name: str, owner: str) -> None:
    """Every entry of ``a`` in ``low..high`` (refused naming the first one out of range)."""
    if a.size:
        bad = np.flatnonzero((a < low) | (a > high))
        if len(bad):
            i = np.unravel_index(bad[0], a.shape)
            at = ", ".join(str(int(j)) for j in i)
            raise InvalidInputError(f"{owner}: {name}[{at}] = {a[i]} is out of range "
                                    f"{low}..{high}.")


def check_tree(order: np.ndarray, parents: np.ndarray, edge_of: np.ndarray, n: int,
               owner: str, which: str = "") -> None:
    """Check one tree's index arrays (int64, shape (n,), n >= 1) for max-sum.

    ``order`` must be a permutation of ``0..n-1`` starting at the root, listing every node
    after its parent (a breadth- or depth-first order); ``parents`` has -1 at the root only
    and node indices elsewhere (so no cycle); ``edge_of`` has -1 at the root and a
    permutation of the edge indices ``0..n-2`` at the other nodes.
    """
    if len(order) != n or len(parents) != n or len(edge_of) != n:
        raise InvalidInputError(
            f"{owner}: order, parents and edge_of{which} must have one entry per node "
            f"({n}, the rows of b); got lengths {len(order)}, {len(parents)}, "
            f"{len(edge_of)}.")
    hit = _CHECKED_IDS.get((id(order), id(parents), id(edge_of)))
    if hit is not None and hit[0] is order and hit[1] is parents and hit[2] is edge_of:
        return                          # the same immutable arrays, checked before
    key = b"".join((order.tobytes(), parents.tobytes(), edge_of.tobytes()))
    if key in _CHECKED_TREES:
        _remember(order, parents, edge_of)
        return
    check_range(order, 0, n - 1, "order" + which, owner)
    count = np.bincount(order, minlength=n)
    if np.any(count != 1):
        j = int(np.flatnonzero(count != 1)[0])
        raise InvalidInputError(
            f"{owner}: order{which} must be a permutation of the nodes 0..{n - 1}; node {j} "
            f"appears {count[j]} times.")
    check_range(parents, -1, n - 1, "parents" + which, owner)
    root = int(order[0])
    roots = np.flatnonzero(parents == -1)
    if len(roots) != 1 or roots[0] != root:
        raise InvalidInputError(
            f"{owner}: parents{which} must have -1 at the root order[0] = {root} and nowhere "
            f"else; got -1 at nodes {roots[:5].tolist()}.")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    rest = order[1:]
    late = np.flatnonzero(pos[parents[rest]] >= np.arange(1, n))
    if len(late):
        j = int(rest[late[0]])
        raise InvalidInputError(
            f"{owner}: order{which} must list every node after its parent (parents must be "
            f"a tree: no cycle); node {j} comes at position {pos[j]}, its parent "
            f"{parents[j]} at {pos[parents[j]]}.")
    if edge_of[root] != -1:
        raise InvalidInputError(
            f"{owner}: edge_of{which} must be -1 at the root {root}; got {edge_of[root]}.")
    bad = np.flatnonzero((edge_of[rest] < 0) | (edge_of[rest] > n - 2))
    if len(bad):
        j = int(rest[bad[0]])
        raise InvalidInputError(
            f"{owner}: edge_of{which}[{j}] = {edge_of[j]} is not an edge index 0..{n - 2} "
            f"(node {j} is not the root).")
    used = np.bincount(edge_of[rest], minlength=max(n - 1, 0))
    if np.any(used != 1):
        e = int(np.flatnonzero(used != 1)[0])
        raise InvalidInputError(
            f"{owner}: edge_of{which} must give each non-root node its own edge 0..{n - 2}; "
            f"edge {e} is given to {used[e]} nodes.")
    if len(_CHECKED_TREES) > 4096:
        _CHECKED_TREES.clear()
    _CHECKED_TREES[key] = True
    _remember(order, parents, edge_of)


def immutable(a: Any) -> bool:
    """Whether no one can write into ``a``'s memory: an array over a bytes object (its
    writeable flag cannot be set back)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, bytes)


def frozen(a: Any, dtype: Any = np.int64) -> np.ndarray:
    """``a`` as a C-contiguous array over immutable memory (a copy unless it is already):
    no one can write into it, so the graph kernels' checks of its content are remembered
    by identity (a decomposition's trees and edges, a tree example's shape arrays)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    if immutable(a):
        return a
    return np.frombuffer(a.tobytes(), dtype=dtype).reshape(a.shape)


def _remember(order, parents, edge_of):
    """Remember checked immutable arrays by identity (a lookup, no copy, next time)."""
    if immutable(order) and immutable(parents) and immutable(edge_of):
        if len(_CHECKED_IDS) > 4096:
            _CHECKED_IDS.clear()
        _CHECKED_IDS[(id(order), id(parents), id(edge_of))] = (order, parents, edge_of)
