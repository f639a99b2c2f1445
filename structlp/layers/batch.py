"""The structured layers over lists of examples (one model, m examples).

``thetas`` is a list of m part-score vectors (``thetas[i]`` of length
``model.n_parts(X[i])``) or a 2-D array (m, L) when every example has ``L`` parts; a 2-D
array whose width is not some example's part count is refused naming that example (a
batch never mixes examples of different sizes silently).  ``n_jobs`` runs the examples on
a thread pool; it pays only when the model's oracle releases the GIL for most of its time
(the active-set loop itself is Python and NumPy on small arrays): see the guide.
"""

from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from ..exceptions import InvalidInputError, StructlpError, naming
from ..utils.validation import (check_bool, check_part_scores, check_scalar,
                                check_sequence_of_examples)
from .losses import LossResult, check_kind_options, example_loss, example_spo
from .oracle import ExampleOracle, check_model, check_n_parts, encode_solution
from .projection import DEFAULT_MAX_ITER, DEFAULT_TOL, check_options, project


class BatchLossResult(tuple):
    """``(losses, grads)`` of a batch, with the per-example certificates as attributes.

    Attributes
    ----------
    losses : ndarray, shape (m,)
    grads : list of m arrays (L_i,), or an array (m, L) when the scores came as one
    gaps : ndarray, shape (m,), or None
        The projections' Frank-Wolfe gaps (``"sparsemap"``); None for kinds computed exactly.
    certified : ndarray of bool, shape (m,)
    stderr : ndarray, shape (m,), or None
        Monte-Carlo standard errors of the losses (``"perturbed"``).
    results : list of m LossResult

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import BatchLossResult, fy_loss_batch
    >>> thetas = np.array([[1.0, 0.6, 0.0, 0.8], [0.0, 1.0, 1.0, 0.0]])
    >>> res = fy_loss_batch(BipartiteMatching(), [np.zeros((2, 2, 1))] * 2, thetas, [np.eye(2)] * 2)
    >>> isinstance(res, BatchLossResult), res.losses.round(6).tolist(), res.certified.tolist()
    (True, [0.08, 2.0], [True, True])
    """

    losses: np.ndarray
    grads: Any
    gaps: Optional[np.ndarray]
    certified: np.ndarray
    stderr: Optional[np.ndarray]
    results: List[LossResult]

    def __new__(cls, results: List[LossResult], stacked: bool) -> "BatchLossResult":
        losses = np.array([r.loss for r in results])
        grads: Any = [r.grad for r in results]
        if stacked:
            grads = np.vstack(grads) if grads else np.zeros((0, 0))
        self = super().__new__(cls, (losses, grads))
        self.losses, self.grads, self.results = losses, grads, results
        gaps = [r.gap for r in results]
        self.gaps = None if any(g is None for g in gaps) else np.array(gaps, dtype=float)
        self.certified = np.array([r.certified for r in results], dtype=bool)
        errs = [r.stderr for r in results]
        self.stderr = None if any(e is None for e in errs) else np.array(errs, dtype=float)
        return self

    @property
    def mean_loss(self) -> float:
        """The mean of :attr:`losses`."""
        return float(self.losses.mean()) if self.losses.size else 0.0


def check_batch(model: Any, X: Any, thetas: Any, owner: str, name: str = "thetas"
                ) -> Tuple[List[Any], List[np.ndarray], bool]:
    """Checked examples, their checked score vectors, and whether ``thetas`` was 2-D."""
    check_model(model, owner)
    X = check_sequence_of_examples(X, "X")
    m = len(X)
    stacked = not isinstance(thetas, (list, tuple))
    if stacked:
        arr = np.asarray(thetas)
        if arr.ndim != 2:
            raise InvalidInputError(
                f"{name} must be a list of m part-score vectors or a 2-D array (m, L); got an "
                f"array of shape {arr.shape}.")
        rows: Sequence[Any] = list(arr)
    else:
        rows = thetas
    if len(rows) != m:
        raise InvalidInputError(
            f"{name} must have one row per example: {m} examples, {len(rows)} rows.")
    Xc, out = [], []
    for i, (x, th) in enumerate(zip(X, rows)):
        try:
            x = model.check_x(x)
        except StructlpError as exc:
            raise naming(exc, f"X[{i}]") from None
        L = check_n_parts(model, x, f"X[{i}]")
        if stacked and L != arr.shape[1]:
            raise InvalidInputError(
                f"{name} is a 2-D array of rows of {arr.shape[1]} part scores, but X[{i}] has "
                f"{L} parts (model.n_parts): a 2-D batch needs examples of equal part counts; "
                "pass a list of score vectors for examples of different sizes.")
        Xc.append(x)
        out.append(check_part_scores(th, L, f"{name}[{i}]"))
    return Xc, out, stacked


def score_rows(thetas: Any, sizes: List[int], name: str) -> List[np.ndarray]:
    """``thetas`` (a list or a 2-D array) as checked vectors of the given sizes."""
    rows = thetas if isinstance(thetas, (list, tuple)) else list(np.asarray(thetas))
    if len(rows) != len(sizes):
        raise InvalidInputError(
            f"{name} must have one row per example: {len(sizes)} examples, {len(rows)} rows.")
    return [check_part_scores(t, L, f"{name}[{i}]") for i, (t, L) in enumerate(zip(rows, sizes))]


def run(fn: Callable[[int], Any], m: int, n_jobs: Optional[int]) -> List[Any]:
    """``[fn(i) for i in range(m)]``, on ``n_jobs`` threads when asked (errors name X[i])."""
    def one(i: int) -> Any:
        try:
            return fn(i)
        except StructlpError as exc:
            raise naming(exc, f"X[{i}]") from None
    if n_jobs is None or n_jobs == 1 or m < 2:
        return [one(i) for i in range(m)]
    with ThreadPoolExecutor(max_workers=min(n_jobs, m)) as pool:
        return list(pool.map(one, range(m)))


def check_n_jobs(n_jobs: Any, owner: str) -> Optional[int]:
    if n_jobs is None:
        return None
    n = check_scalar(n_jobs, "n_jobs", kind=numbers.Integral, owner=owner)
    if n == -1:
        import os
        return os.cpu_count() or 1
    if n < 1:
        from ..exceptions import InvalidParameterError
        raise InvalidParameterError(
            f"The 'n_jobs' parameter of {owner} must be None, -1 or an int >= 1; got {n}.")
    return n


def sparsemap_batch(model: Any, X: Any, thetas: Any, tol: float = DEFAULT_TOL,
                    max_iter: int = DEFAULT_MAX_ITER, with_vjp: bool = False,
                    n_jobs: Optional[int] = None) -> Any:
    """:func:`~structlp.layers.sparsemap` of every example of a batch.

    Solves ``mu_i* = argmin_{mu in conv Y(x_i)} 1/2 |mu - theta_i|^2`` for i = 1..m.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples
    thetas : list of m arrays (L_i,), or an array (m, L) (every example of ``L`` parts)
    tol, max_iter : as :func:`~structlp.layers.sparsemap`
    with_vjp : bool
        Also return the m vector-Jacobian products.
    n_jobs : int, optional
        Threads (None or 1: serial).

    Returns
    -------
    results : list of m SparseMAPResult
    vjps : list of m callables, only with ``with_vjp``

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import sparsemap_batch
    >>> X = [np.zeros((2, 2, 1))] * 2
    >>> thetas = np.array([[1.0, 0.6, 0.0, 0.8], [0.0, 1.0, 1.0, 0.0]])
    >>> results = sparsemap_batch(BipartiteMatching(), X, thetas)
    >>> [r.mu.round(3).tolist() for r in results], [r.certified for r in results]
    ([[0.8, 0.2, 0.2, 0.8], [0.0, 1.0, 1.0, 0.0]], [True, True])
    """
    owner = "sparsemap_batch"
    tol, max_iter = check_options(tol, max_iter, owner)
    with_vjp = check_bool(with_vjp, "with_vjp", owner=owner)
    n_jobs = check_n_jobs(n_jobs, owner)
    Xc, ths, _ = check_batch(model, X, thetas, owner)

    def one(i: int) -> Any:
        return project(ExampleOracle(model, Xc[i], ths[i].size), ths[i], tol, max_iter,
                       with_vjp)
    out = run(one, len(Xc), n_jobs)
    if with_vjp:
        return [r for r, _ in out], [v for _, v in out]
    return out


def fy_loss_batch(model: Any, X: Any, thetas: Any, Y: Any, kind: str = "sparsemap",
                  n_jobs: Optional[int] = None, **opts: Any) -> BatchLossResult:
    """:func:`~structlp.layers.fy_loss` of every example of a batch.

    Computes ``L(theta_i; y_i)`` and ``grad_i = mu_hat(theta_i) - mu(y_i)`` for i = 1..m.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples
    thetas : list of m arrays (L_i,), or an array (m, L)
    Y : list of m outputs
    kind, **opts : as :func:`~structlp.layers.fy_loss`
        ``random_state`` (``"perturbed"``) seeds one generator per example, drawn from it
        in order, so that the answer does not depend on ``n_jobs``.
    n_jobs : int, optional

    Returns
    -------
    BatchLossResult
        Unpacks as ``(losses (m,), grads)``, ``grads`` a list of (L_i,) arrays, or an
        array (m, L) when ``thetas`` was 2-D; ``gaps``, ``certified``, ``stderr``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import fy_loss_batch
    >>> X, Y = [np.zeros((2, 2, 1))] * 2, [np.eye(2)] * 2
    >>> thetas = np.array([[1.0, 0.6, 0.0, 0.8], [0.0, 1.0, 1.0, 0.0]])
    >>> losses, grads = fy_loss_batch(BipartiteMatching(), X, thetas, Y, kind="hinge")
    >>> losses.round(6).tolist(), grads.shape
    ([0.8, 4.0], (2, 4))
    """
    owner = "fy_loss_batch"
    opts = check_kind_options(kind, opts, owner)
    n_jobs = check_n_jobs(n_jobs, owner)
    Xc, ths, stacked = check_batch(model, X, thetas, owner)
    Y = check_sequence_of_examples(Y, "Y")
    if len(Y) != len(Xc):
        raise InvalidInputError(f"Y must have one output per example: {len(Xc)} examples, "
                                f"{len(Y)} outputs.")
    per = [opts] * len(Xc)
    if kind == "perturbed":
        seeds = opts["random_state"].integers(0, 2 ** 63 - 1, size=len(Xc))
        per = [dict(opts, random_state=np.random.default_rng(int(s))) for s in seeds]

    def one(i: int) -> LossResult:
        oracle = ExampleOracle(model, Xc[i], ths[i].size)
        mu_y = oracle.encode_output(Y[i], f"Y[{i}]")
        return example_loss(oracle, ths[i], Y[i], mu_y, kind, per[i])
    return BatchLossResult(run(one, len(Xc), n_jobs), stacked)


def spo_plus_batch(model: Any, X: Any, c_hats: Any, cs: Any, W: Any = None,
                   n_jobs: Optional[int] = None) -> BatchLossResult:
    """:func:`~structlp.layers.spo_plus` of every example of a batch.

    ``c_hats`` and ``cs``: lists of m cost vectors or arrays (m, L); ``W``: the m true
    optimal solutions ``w*(c_i)`` when known (outputs, or their 0/1 part vectors).  Returns
    ``(losses, grads)``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers import spo_plus_batch
    >>> X = [np.zeros((2, 2, 1))] * 2
    >>> # true costs (minimised)
    >>> cs = np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]])
    >>> c_hats = np.array([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    >>> losses, grads = spo_plus_batch(BipartiteMatching(), X, c_hats, cs)
    >>> # the second prediction favours the costly assignment
    >>> losses.tolist()
    [0.0, 6.0]
    """
    owner = "spo_plus_batch"
    n_jobs = check_n_jobs(n_jobs, owner)
    Xc, chs, stacked = check_batch(model, X, c_hats, owner, "c_hats")
    cc = score_rows(cs, [c.size for c in chs], "cs")
    if W is not None:
        W = list(W) if not isinstance(W, np.ndarray) else list(W)
        if len(W) != len(Xc):
            raise InvalidInputError(f"W must have one output per example: {len(Xc)} "
                                    f"examples, {len(W)} outputs.")

    def one(i: int) -> LossResult:
        oracle = ExampleOracle(model, Xc[i], chs[i].size)
        w = None if W is None else encode_solution(oracle, W[i], f"W[{i}]")
        return example_spo(oracle, chs[i], cc[i], w)
    return BatchLossResult(run(one, len(Xc), n_jobs), stacked)


