"""The k best outputs of an example: Lawler-Murty partitioning, and its structured cases.

For part scores ``s`` (L,) the k-best problem lists the ``k`` outputs of largest score
``s . mu(y)`` in non-increasing order (ties in any order).  Every algorithm here is an
instance of the partitioning of Murty (1968) and Lawler (1972): an output is an
assignment ``y = (y_0, ..., y_{n-1})`` of categorical variables; the best output of a
subproblem (variables ``< t`` fixed, variable ``t`` barred from a set ``F`` of values,
the rest free) is found by an oracle, and the rest of that subproblem splits into the
disjoint subproblems ``(y_0..y_{j-1} fixed, y_j != y*_j)`` for ``j >= t`` (``j = t``:
``F`` grows by ``y*_t``).  The subproblems wait in a heap ordered by their best scores;
each pop is the next output.  :func:`lawler` takes the oracle as a branching function,
so that a structure may evaluate the children of a subproblem faster than one oracle call
each (trees: :func:`structlp.graphical.kbest.tree_k_best`).

A model offers its own k-best through an optional hook

``k_best(x, scores, k) -> (outputs: list, values: (k',) array)``
    the ``k' = min(k, |Y(x)|)`` best outputs (as ``model.decode`` gives them) and their
    scores, non-increasing.

Built in: :class:`~structlp.structures.TreeLabeling` (chains and trees: the children of a
subproblem valued in O(k) each from max-marginal messages, after Nilsson and Goldberger
2001), :class:`~structlp.structures.JunctionTreeLabeling` (max-sum on the junction tree
as the oracle), :class:`~structlp.structures.BipartiteMatching` with ``R = P = 1``
(Murty's algorithm, :func:`scipy.optimize.linear_sum_assignment` per subproblem) and
:class:`~structlp.structures.Arborescence` (Lawler over Chu-Liu-Edmonds: barred arcs
removed, fixed heads as the only arcs into their words), :class:`~structlp.structures.Matching`
and :class:`~structlp.structures.PerfectMatching` (Lawler over the edges, the blossom
algorithm per subproblem).  Any other model gets
:func:`lawler_murty_lp`: the variables are the parts (0/1), and each subproblem is the
inference LP over the model's polytope with the fixed parts' bounds set to 0 or 1.
"""

from __future__ import annotations

import heapq
import numbers
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

import numpy as np

from ..exceptions import FractionalSolutionError, InvalidParameterError, OracleError, SolverError
from .distribution import check_example_scores

if TYPE_CHECKING:  # pragma: no cover
    from ..model import StructuredModel

#: A child subproblem: (its best score, the variable t it bars values of, the barred
#: values F, its solution or what decodes to it).
Child = Tuple[float, int, frozenset, Any]


def lawler(root: Optional[Tuple[Any, float]], branch: Callable[[np.ndarray, int, frozenset],
                                                              Iterable[Child]],
           k: int, decode: Optional[Callable[[Any], np.ndarray]] = None
           ) -> List[Tuple[np.ndarray, float]]:
    """The k best assignments by Lawler-Murty partitioning (see the module docstring).

    Parameters
    ----------
    root : (solution, value) or None
        The best assignment of the whole problem (None: no assignment at all).
    branch : callable ``(y, t, F) -> iterable of (value, t_j, F_j, solution_j)``
        The feasible children of the subproblem ``(y_<t fixed, y_t not in F)`` whose best
        assignment is ``y``: one per ``j >= t`` at most (:func:`oracle_branch` builds it
        from an oracle).
    k : int >= 1
    decode : callable, optional
        ``solution -> y`` (int array), for children whose solutions are built lazily.

    Returns
    -------
    list of at most k (y, value), values non-increasing

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.inference.kbest import lawler, oracle_branch
    >>> # y_j in {0, 1}, value sum_j s[j, y_j]
    >>> s = np.array([[0.0, 2.0], [1.0, 0.5], [0.3, 0.0]])
    >>> # best y* with y*_<j = y_<j and y*_j not in F
    >>> def solve(y, j, F):
    ...     z = [int(v) for v in y[:j]]
    ...     rest = [int(np.argmax(s[t])) for t in range(j + 1, 3)]
    ...     free = [a for a in range(2) if a not in F]
    ...     if not free:
    ...         return None
    ...     a = max(free, key=lambda a: s[j, a])
    ...     y_new = np.array(z + [a] + rest)
    ...     return y_new, float(s[np.arange(3), y_new].sum())
    >>> y0 = np.argmax(s, axis=1)
    >>> best = lawler((y0, float(s.max(axis=1).sum())), oracle_branch(solve, 3), k=3)
    >>> [(y.tolist(), round(v, 2)) for y, v in best]
    [([1, 0, 0], 3.3), ([1, 0, 1], 3.0), ([1, 1, 0], 2.8)]
    >>> sorted(itertools.product(range(2), repeat=3), key=lambda y: -s[np.arange(3), list(y)].sum())[:3]
    [(1, 0, 0), (1, 0, 1), (1, 1, 0)]
    """
    if root is None:
        return []
    heap: list = [(-float(root[1]), 0, 0, frozenset(), root[0])]
    out: List[Tuple[np.ndarray, float]] = []
    count = 1
    while heap and len(out) < k:
        neg, _, t, F, sol = heapq.heappop(heap)
        y = decode(sol) if decode is not None else sol
        out.append((y, -neg))
        if len(out) == k:
            break
        for value, tj, Fj, solj in branch(y, t, F):
            heapq.heappush(heap, (-float(value), count, tj, Fj, solj))
            count += 1
    return out


def oracle_branch(solve: Callable[[np.ndarray, int, frozenset], Optional[Tuple[np.ndarray, float]]],
                  n_vars: int) -> Callable[[np.ndarray, int, frozenset], Iterable[Child]]:
    """The branching function of :func:`lawler` from an oracle ``solve(y, j, F) -> (y*,
    value) or None``: the best assignment with ``y*_<j = y_<j`` and ``y*_j not in F``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.inference.kbest import lawler, oracle_branch
    >>> # value s[0, y_0] + s[1, y_1]
    >>> s = np.array([[0.0, 2.0], [1.0, 0.5]])
    >>> # y*_<j = y_<j, y*_j not in F
    >>> def solve(y, j, F):
    ...     free = [a for a in range(2) if a not in F]
    ...     if not free:
    ...         return None
    ...     head = [int(v) for v in y[:j]] + [max(free, key=lambda a: s[j, a])]
    ...     y_new = np.array(head + [int(np.argmax(s[t])) for t in range(j + 1, 2)])
    ...     return y_new, float(s[[0, 1], y_new].sum())
    >>> branch = oracle_branch(solve, n_vars=2)
    >>> [(y.tolist(), v) for y, v in lawler((np.array([1, 0]), 3.0), branch, k=4)]
    [([1, 0], 3.0), ([1, 1], 2.5), ([0, 0], 1.0), ([0, 1], 0.5)]
    """
    def branch(y, t, F):
        for j in range(t, n_vars):
            Fj = F | {y[j]} if j == t else frozenset((y[j],))
            r = solve(y, j, Fj)
            if r is not None:
                yield r[1], j, Fj, r[0]
    return branch


def lawler_murty_lp(model: "StructuredModel", x: Any, scores: np.ndarray, k: int,
                    polytope: Any = None) -> Tuple[List[Any], np.ndarray]:
    """The k best outputs of any model whose output polytope is integral: Lawler-Murty
    partitioning over the parts, each subproblem the inference LP with fixed parts.

    The variables are the L parts (values 0/1); a subproblem fixes some parts by their
    bounds (``lb = ub = 0`` or ``1``), which keeps it a face of the output polytope, so an
    integral polytope stays integral.  Each LP's answer is checked to be 0/1.  Up to
    ``k L`` LPs (HiGHS, one model whose bounds change): for small examples, or models
    without a faster ``k_best`` hook.

    Parameters
    ----------
    model : StructuredModel; x : a checked example; scores : array (L,); k : int >= 1
    polytope : Polytope, optional (default ``model.checked_polytope(x)``)

    Returns
    -------
    outputs : list of at most k outputs; values : ndarray, non-increasing

    Raises
    ------
    FractionalSolutionError
        A subproblem's LP answer is fractional: the polytope (or a face of it) is not
        integral, and the list would not be the k best outputs.

    Examples
    --------
    >>> import itertools
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.inference.kbest import lawler_murty_lp
    >>> model = BipartiteMatching()
    >>> x = model.check_x(np.zeros((3, 3, 1)))
    >>> # parts (i, j), row-major
    >>> scores = np.random.default_rng(0).normal(size=9)
    >>> outputs, values = lawler_murty_lp(model, x, scores, k=3)
    >>> values.round(3).tolist()
    [1.692, 1.533, 1.434]
    >>> sorted((round(float(scores[[0, 3, 6] + np.array(p)].sum()), 3)
    ...         for p in itertools.permutations(range(3))), reverse=True)[:3]   # brute force
    [1.692, 1.533, 1.434]
    """
    from ..exceptions import DeclarationError
    from . import INTEGRALITY_TOL, _HighsLP
    name = type(model).__name__
    try:
        poly = polytope if polytope is not None else model.checked_polytope(x)
    except DeclarationError as exc:
        raise DeclarationError(
            f"k_best: {name} defines no k_best(x, scores, k) hook, and Lawler-Murty "
            f"partitioning over its inference LP needs an output polytope: {exc}") from None
    poly.check_bounded()
    L = poly.n_parts
    lp = _HighsLP(poly)
    lb0, ub0 = np.asarray(poly.lb, float)[:L], np.asarray(poly.ub, float)[:L]
    idx = np.arange(L, dtype=np.int32)

    def solve(y, j, F):
        lb, ub = lb0.copy(), ub0.copy()
        lb[:j] = ub[:j] = y[:j]
        if F:                                   # part j barred from the values in F
            allowed = [v for v in (0.0, 1.0) if v not in F]
            if not allowed:
                return None
            lb[j] = ub[j] = allowed[0]
        if np.any(lb < lb0 - 1e-12) or np.any(ub > ub0 + 1e-12):
            return None
        lp.h.changeColsBounds(L, idx, lb, ub)
        try:
            mu = lp.solve(scores)
        except SolverError as exc:
            if "nfeasible" in str(exc):
                return None
            raise
        r = np.rint(mu)
        if len(mu) and float(np.max(np.abs(mu - r))) > INTEGRALITY_TOL:
            raise FractionalSolutionError(
                f"k_best: the inference LP of {name} with {j + 1} parts fixed has a "
                f"fractional solution (an entry {float(np.max(np.abs(mu - r))):.3g} away from "
                "0/1): its output polytope is not integral, so Lawler-Murty partitioning over "
                f"the LP cannot list the k best outputs. Define {name}.k_best(x, scores, k) "
                "(an exact k-best algorithm of the structure).")
        return r + 0.0, float(scores @ r)

    root = solve(np.zeros(L), 0, frozenset())   # nothing fixed
    found = lawler(root, oracle_branch(solve, L), k)
    return [model.decode(x, mu) for mu, _ in found], np.array([v for _, v in found])


def k_best(model: "StructuredModel", x: Any, scores: Any, k: int) -> Tuple[List[Any], np.ndarray]:
    """The ``k`` highest-scoring outputs of an example, in non-increasing score.

    .. math::

        y^{(1)}, \\dots, y^{(k)}:\\quad s \\cdot \\mu(y^{(1)}) \\ge \\dots \\ge
        s \\cdot \\mu(y^{(k)}) \\ge s \\cdot \\mu(y) \\;\\; \\forall y \\notin
        \\{y^{(1)}, \\dots, y^{(k)}\\},

    by the model's ``k_best(x, scores, k)`` hook where it has one (chains and trees,
    junction trees, assignments, arborescences, semi-Markov segmentations: see
    :mod:`structlp.inference.kbest`),
    else by Lawler-Murty partitioning over its inference LP (:func:`lawler_murty_lp`;
    exact when the output polytope is integral, which is checked on every LP answer).

    Parameters
    ----------
    model : StructuredModel
    x : an example of ``model``
    scores : array, shape (L,)
        The example's part scores, ``L = model.n_parts(x)``.
    k : int >= 1

    Returns
    -------
    outputs : list of ``min(k, number of outputs)`` outputs (as ``model.decode`` gives them)
    values : ndarray, their scores ``s . mu(y)``, non-increasing (ties in any order)

    Raises
    ------
    InvalidParameterError
        ``k`` not an int >= 1.
    InvalidInputError
        ``scores`` of the wrong shape or not finite.
    FractionalSolutionError
        The LP fallback met a fractional vertex (a polytope that is not integral).

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.inference import k_best
    >>> from structlp.structures import BipartiteMatching
    >>> x = np.zeros((3, 3, 1))                          # assign 3 rows to 3 columns
    >>> s = np.array([3.0, 0, 0, 0, 2, 0, 0, 0, 1])      # the diagonal scores 6
    >>> Y, values = k_best(BipartiteMatching(), x, s, k=3)
    >>> values.tolist(), Y[0].tolist()
    ([6.0, 3.0, 2.0], [[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    """
    xc, s = check_example_scores(model, x, scores, "k_best")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise InvalidParameterError(
            f"The 'k' parameter of k_best must be an int >= 1 (the number of outputs to "
            f"list); got {k!r}.")
    hook = getattr(model, "k_best", None)
    if hook is None:
        outputs, values = lawler_murty_lp(model, xc, s, int(k))
        return list(outputs), np.asarray(values, dtype=float)
    outputs, values = hook(xc, s, int(k))
    outputs, values = list(outputs), np.asarray(values, dtype=float)
    tol = 1e-9 * max(1.0, float(np.max(np.abs(values), initial=0.0)))
    if values.shape != (len(outputs),) or not 1 <= len(outputs) <= k \
            or not np.all(np.isfinite(values)) or np.any(np.diff(values) > tol):
        raise OracleError(
            f"{type(model).__name__}.k_best(x, scores, k) must return between 1 and k = {k} "
            "outputs and their finite scores, non-increasing; got "
            f"{len(outputs)} outputs and scores {values[:6].tolist()}.")
    return outputs, values
