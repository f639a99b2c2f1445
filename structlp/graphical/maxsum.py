"""Exact max-sum (Viterbi) on trees and chains: a numba kernel with an identical numpy path.

For node scores ``b`` (n, k) and edge scores ``B`` (n - 1, k, k) (parent label,
child label) of a tree given by its parent array,

.. math::

    \\max_{y \\in \\{0..k-1\\}^n}\\; \\sum_i b[i, y_i]
        + \\sum_{e} B[e, y_{\\mathrm{parent}(e)}, y_{\\mathrm{child}(e)}] ,

solved by dynamic programming from the leaves to the root (messages) and back
(backtracking), in O(n k^2).  This is the loss-augmented oracle of
:class:`~structlp.structures.TreeLabeling` and of the adversarial tree models.

Two implementations give bit-identical labellings and values:

* a kernel compiled with numba (a dependency of structlp), used when numba imports;
* a numpy path (one vectorized step per node), used otherwise.

Both visit the nodes in the same order, add the same terms in the same order
and break ties the same way (the smallest label, as :func:`numpy.argmax`), so
that the learners' iterates do not depend on whether numba is installed.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Tuple

import numpy as np

from ..compiled import jit, kernel
from ..exceptions import InvalidInputError
from ._kernel_args import check_tree, float_array, int_array

def _importable(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    return importlib.util.find_spec(name) is not None


#: Implementations available here ("numba": the compiled kernel, built ahead of time or
#: by numba's JIT).
BACKENDS = (("numba", "numpy") if _importable("structlp._kernels") or _importable("numba")
            else ("numpy",))


def _max_sum_numpy(order, parents, edge_of, b, B):
    if not (np.isfinite(b).all() and np.isfinite(B).all()):
        return None, np.nan, False
    n, k = b.shape
    msg = b.copy()                       # node score plus the messages of its children
    back = np.zeros((n, k), dtype=np.int64)
    for t in range(n - 1, 0, -1):        # reverse BFS order: leaves first, root excluded
        j = order[t]
        M = B[edge_of[j]] + msg[j][None, :]          # (parent label, child label)
        arg = M.argmax(axis=1)
        back[j] = arg
        msg[parents[j]] += M[np.arange(k), arg]
    y = np.empty(n, dtype=np.int64)
    root = order[0]
    y[root] = int(msg[root].argmax())
    for t in range(1, n):
        j = order[t]
        y[j] = back[j, y[parents[j]]]
    return y, float(msg[root, y[root]]), True


def _max_sum_kernel(order, parents, edge_of, b, B):  # compiled by numba when available
    n, k = b.shape
    msg = b.copy()
    back = np.zeros((n, k), dtype=np.int64)
    nan = 0.0                            # stays 0 unless a score is NaN or infinite
    for t in range(n - 1, 0, -1):
        j = order[t]
        e = edge_of[j]
        p = parents[j]
        for a in range(k):
            best = B[e, a, 0] + msg[j, 0]
            arg = 0
            for c in range(1, k):
                v = B[e, a, c] + msg[j, c]
                nan += v * 0.0
                if v > best:             # strict: the first maximum, as numpy.argmax
                    best = v
                    arg = c
            back[j, a] = arg
            msg[p, a] += best
    y = np.empty(n, dtype=np.int64)
    root = order[0]
    r = 0
    for a in range(k):
        nan += msg[root, a] * 0.0
        if msg[root, a] > msg[root, r]:
            r = a
    y[root] = r
    for t in range(1, n):
        j = order[t]
        y[j] = back[j, y[parents[j]]]
    return y, msg[root, r], nan == 0.0


def _jit():
    """The kernel compiled by numba's JIT (on first use, cached on disk), or None."""
    return jit(_max_sum_kernel)


def _numba_kernel():
    """The compiled kernel: built ahead of time (:mod:`structlp.compiled`), else numba's
    JIT; None without either."""
    return kernel("max_sum", _max_sum_kernel, _jit)


def tree_max_sum(order: np.ndarray, parents: np.ndarray, edge_of: np.ndarray, b: np.ndarray,
                 B: np.ndarray, backend: str = "auto") -> Tuple[np.ndarray, float]:
    """Highest-scoring labelling of a tree (max-sum / Viterbi).

    Solves ``max_y sum_i b[i, y_i] + sum_j B[edge_of[j], y_parents[j], y_j]``
    (the sum over the non-root nodes ``j``).

    Parameters
    ----------
    order : int array (n,)
        The nodes in breadth-first order from the root (``order[0]`` is the root).
    parents : int array (n,)
        Parent of each node (-1 at the root).
    edge_of : int array (n,)
        Index in ``B`` of the edge joining each node to its parent (-1 at the root).
    b : float array (n, k)
        Node scores.
    B : float array (n - 1, k, k)
        Edge scores, ``B[e, parent label, child label]``.
    backend : {"auto", "numba", "numpy"}
        "auto": numba when installed, else numpy (the same results).

    Returns
    -------
    y : int array (n,)
        The maximizer; ties go to the smallest label (``numpy.argmax``'s rule)
        at the root and at every backtracking step.
    value : float
        Its score.

    Raises
    ------
    InvalidInputError
        An argument that is not as described (named in the message): index arrays of
        another length than ``b``'s rows or not of integers, ``order`` not a permutation
        listing each node after its parent, ``parents`` not a tree (a cycle, an index out
        of range, another root), ``edge_of`` not one edge per non-root node, ``k = 0``
        labels, ``B`` of another shape, scores not finite.  Checked before the compiled
        kernel runs (a repeated tree is checked once).
    """
    order, parents, edge_of, b, B = _checked_args(order, parents, edge_of, b, B)
    if backend == "auto":
        kernel = _numba_kernel() or _max_sum_numpy
    elif backend == "numba":
        kernel = _numba_kernel()
        if kernel is None:
            raise InvalidInputError("backend='numba' needs numba, which could not be imported (pip install numba).")
    elif backend == "numpy":
        kernel = _max_sum_numpy
    else:
        raise InvalidInputError(
            f"backend must be 'auto', 'numba' or 'numpy'; got {backend!r}.")
    y, value, finite = kernel(order, parents, edge_of, b, B)
    if not finite:
        raise InvalidInputError("max-sum scores must be finite; got NaN or infinite values.")
    return y, float(value)


def _checked_args(order: Any, parents: Any, edge_of: Any, b: Any,
                       B: Any) -> Tuple[np.ndarray, ...]:
    """:func:`tree_max_sum`'s arguments checked and as its kernel takes them (C-contiguous
    int64 and float64 arrays); raises InvalidInputError naming the first bad one."""
    owner = "tree_max_sum"
    b = float_array(b, "b (node scores)", owner, (None, None), finite=False)
    n, k = b.shape
    if n == 0 or k == 0:
        raise InvalidInputError(f"{owner}: b (node scores) must have shape (n_nodes, "
                                f"n_labels) with n_nodes >= 1 and n_labels >= 1; got {b.shape}.")
    B = float_array(B, "B (edge scores)", owner, (n - 1, k, k), finite=False)
    order = int_array(order, "order", owner, 1)
    parents = int_array(parents, "parents", owner, 1)
    edge_of = int_array(edge_of, "edge_of", owner, 1)
    check_tree(order, parents, edge_of, n, owner)
    return order, parents, edge_of, b, B


def _check_kernel_args(order, parents, edge_of, b, B):
    """The value check of the compiled kernel's arguments (:func:`structlp.compiled.aot`)."""
    _checked_args(order, parents, edge_of, b, B)


def max_sum(ex: Any, b: np.ndarray, B: np.ndarray,
            backend: str = "auto") -> Tuple[np.ndarray, float]:
    """:func:`tree_max_sum` of a :class:`~structlp.graphical.trees.TreeExample`.

    Returns
    -------
    y : int array (n,); value : float
    """
    if not all(hasattr(ex, a) for a in ("order", "parents", "edge_of")):
        raise InvalidInputError(
            "max_sum: ex must be a TreeExample (structlp.graphical.trees.check_tree_example), "
            f"with order, parents and edge_of; got {type(ex).__name__}.")
    return tree_max_sum(ex.order, ex.parents, ex.edge_of, b, B, backend=backend)
