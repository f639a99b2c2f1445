"""Argument checks shared by every public entry point.

Each helper raises :class:`~structlp.exceptions.InvalidParameterError` or
:class:`~structlp.exceptions.InvalidInputError` with a message in the
scikit-learn style: it names the argument, what was expected and what came.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..exceptions import InvalidInputError, InvalidParameterError, SolverError


def _owner(owner):
    return f" of {owner}" if owner else ""


def check_scalar(value: Any, name: str, *, kind: Any = numbers.Real,
                 low: Optional[float] = None, high: Optional[float] = None,
                 low_inclusive: bool = True, high_inclusive: bool = True,
                 owner: Optional[str] = None) -> Any:
    """Check that ``value`` is a scalar of ``kind`` inside the given interval.

    Returns the value converted to ``float`` (``kind=Real``) or ``int``
    (``kind=Integral``).
    """
    def fail():
        what = "an int" if kind is numbers.Integral else "a float"
        bounds = []
        if low is not None:
            bounds.append(f"{'>=' if low_inclusive else '>'} {low}")
        if high is not None:
            bounds.append(f"{'<=' if high_inclusive else '<'} {high}")
        expected = what + (" " + " and ".join(bounds) if bounds else "")
        return InvalidParameterError(
            f"The {name!r} parameter{_owner(owner)} must be {expected}. Got {value!r} instead.")

    if isinstance(value, bool) or not isinstance(value, kind):
        raise fail()
    if kind is numbers.Real and not math.isfinite(value):
        raise fail()
    if low is not None and (value < low or (not low_inclusive and value == low)):
        raise fail()
    if high is not None and (value > high or (not high_inclusive and value == high)):
        raise fail()
    return int(value) if kind is numbers.Integral else float(value)


def check_bool(value: Any, name: str, owner: Optional[str] = None) -> bool:
    """Check that ``value`` is a bool (Python or numpy); return it as ``bool``."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(
            f"The {name!r} parameter{_owner(owner)} must be a bool; got {value!r}.")
    return bool(value)


def check_random_state(random_state: Any, owner: Optional[str] = None) -> np.random.Generator:
    """Check ``random_state`` (None, an int >= 0 or a numpy Generator); return a Generator."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool) \
            and int(random_state) >= 0:
        return np.random.default_rng(int(random_state))
    raise InvalidParameterError(
        f"The 'random_state' parameter{_owner(owner)} must be None, an int >= 0 or a "
        f"numpy.random.Generator. Got {random_state!r} instead.")


def check_choice(value: Any, name: str, choices: Sequence[Any],
                 owner: Optional[str] = None) -> Any:
    """Check that ``value`` is one of ``choices``."""
    if value not in choices:
        raise InvalidParameterError(
            f"The {name!r} parameter{_owner(owner)} must be one of "
            f"{sorted(map(str, choices))}. Got {value!r} instead.")
    return value


def _first_non_real(values):
    """``[v]`` for the first entry of an object array that is not a real number, or ``[]``."""
    for v in values:
        if not isinstance(v, (numbers.Real, np.bool_)):
            return [v]
    return []


def check_real(a: Any, name: str) -> None:
    """Raise :class:`InvalidInputError` unless ``a`` holds real numbers (ints, floats, bools).

    numpy would silently drop the imaginary part of a complex array and parse
    numeric strings (``np.asarray(["1"], dtype=float)``); both are refused here,
    with the argument's name.  Ragged nestings are left to the conversion that
    follows (its error is reported there).
    """
    bad: List[Any] = []
    if sp.issparse(a):
        dtype = a.dtype
    else:
        try:
            raw = a if isinstance(a, np.ndarray) else np.asarray(a)
        except (TypeError, ValueError):
            return
        dtype = raw.dtype
        bad = _first_non_real(raw.ravel()) if dtype.kind == "O" else []
    kind = dtype.kind
    if kind == "c" or (bad and isinstance(bad[0], (complex, np.complexfloating))):
        raise InvalidInputError(
            f"{name} must be real; got complex values (numpy would drop the imaginary part). "
            "Pass the real part (np.real) or split it into features explicitly.")
    if kind in "USV" or bad:
        what = repr(bad[0]) if bad else f"dtype {dtype}"
        raise InvalidInputError(
            f"{name} must be a numeric array; got non-numeric entries ({what[:60]}). "
            "Convert strings to numbers yourself (e.g. np.asarray(x, dtype=float)).")
    if kind in "mM":
        raise InvalidInputError(f"{name} must be a numeric array; got dtype {dtype}.")


def check_finite_array(a: Any, name: str, *, ndim: Optional[int] = None,
                       shape: Optional[Tuple[int, ...]] = None, dtype: Any = float,
                       allow_sparse: bool = False) -> Any:
    """Convert ``a`` to an array, checking realness, dimension, shape and finiteness.

    ``shape`` may contain ``None`` for free dimensions.  Sparse matrices are
    kept sparse when ``allow_sparse`` is true.  Complex values and strings are
    refused (:func:`check_real`).
    """
    check_real(a, name)
    if allow_sparse and sp.issparse(a):
        arr = sp.csr_array(a, dtype=dtype)
        data = arr.data
    else:
        try:
            arr = np.asarray(a, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"{name} must be a numeric array; could not convert it ({exc}).") from None
        data = arr
    if ndim is not None and arr.ndim != ndim:
        raise InvalidInputError(
            f"{name} must be a {ndim}-dimensional array; got an array of shape {arr.shape}.")
    if shape is not None:
        if len(shape) != arr.ndim or any(
                s is not None and s != t for s, t in zip(shape, arr.shape)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
            raise InvalidInputError(f"{name} must have shape {want}; got {arr.shape}.")
    if data.dtype.kind in "fc" and not np.isfinite(data).all():
        raise InvalidInputError(f"{name} contains NaN or infinite values.")
    return arr


def check_part_scores(scores: Any, n_parts: int, name: str = "scores", *,
                      allow_int: bool = False, context: str = "") -> np.ndarray:
    """``scores`` as a contiguous float64 vector of ``n_parts`` finite part scores.

    The one check of an example's part scores (``model.n_parts(x)`` of them) for every
    public function that takes them: the structured layers (which refuse integer and
    boolean arrays: the gradient of an integer tensor does not exist, and such an array
    is most often a part vector passed by mistake) and the inference functions (which
    take integer scores as numbers, ``allow_int=True``).  ``context`` ends the shape
    error (``"(model.n_parts(x) = 8 for TreeLabeling)"`` by default).

    Raises
    ------
    InvalidInputError
        Naming ``name``: complex or non-numeric entries, integer or boolean ones unless
        ``allow_int``, the wrong shape, NaN or inf.
    """
    if type(scores) is np.ndarray and scores.dtype == np.float64 and scores.shape == (n_parts,):
        if not np.isfinite(scores).all():
            raise InvalidInputError(f"{name} contains NaN or infinite values.")
        return np.ascontiguousarray(scores)
    check_real(scores, name)
    if not allow_int:
        kind = getattr(scores, "dtype", None)
        kind = kind.kind if isinstance(kind, np.dtype) else np.asarray(scores).dtype.kind
        if kind in "iub":
            raise InvalidInputError(
                f"{name} must hold floating-point part scores; got "
                f"{'boolean' if kind == 'b' else 'integer'} values "
                f"(dtype {np.asarray(scores).dtype}). Convert them (np.asarray({name}, "
                "dtype=float)) if they are scores.")
    s = check_finite_array(scores, name)
    if s.shape != (n_parts,):
        raise InvalidInputError(
            f"{name} must have shape ({n_parts},), one score per part of the example "
            f"{context or f'(model.n_parts(x) = {n_parts})'}; got shape {s.shape}.")
    return np.ascontiguousarray(s, dtype=float)


def check_binary(a: Any, name: str, tol: float = 1e-8) -> np.ndarray:
    """Check that every entry of ``a`` is 0 or 1 (within ``tol``); return it as floats."""
    arr = check_finite_array(a, name)
    if arr.size and not np.all((np.abs(arr) <= tol) | (np.abs(arr - 1) <= tol)):
        bad = arr[~((np.abs(arr) <= tol) | (np.abs(arr - 1) <= tol))]
        raise InvalidInputError(
            f"{name} must contain only 0 and 1; got value {bad.flat[0]!r}.")
    return np.round(arr)


def check_sequence_of_examples(X: Any, name: str = "X") -> List[Any]:
    """Check that ``X`` is a non-empty list-like of examples and return it as a list."""
    if isinstance(X, (str, bytes)) or not hasattr(X, "__len__"):
        raise InvalidInputError(
            f"{name} must be a sequence (list) of examples; got {type(X).__name__}.")
    X = list(X)
    if len(X) == 0:
        raise InvalidInputError(f"{name} must contain at least one example; got 0.")
    return X


def check_not_dask_collection(X: Any, owner: str) -> None:
    """Refuse a dask Bag (or a list of ``dask.delayed`` partitions) given to a learner that
    takes in-memory lists: the error names :class:`~structlp.ShardedFrankWolfeLearner`,
    which trains on such data (dask is not imported to check)."""
    def lazy(v: Any) -> Optional[str]:
        kind = type(v)
        if kind.__module__.split(".")[0] == "dask" and kind.__name__ in ("Bag", "Delayed"):
            return f"a dask {kind.__name__}"
        return None

    what = lazy(X)
    if what is None and isinstance(X, (list, tuple)) and len(X) and lazy(X[0]):
        what = f"a list of dask {type(X[0]).__name__} partitions"
    if what is not None:
        raise InvalidInputError(
            f"{owner}.fit takes the examples and outputs as in-memory lists, fit(X, Y); X is "
            f"{what}. For data held as a dask Bag of (x, y) pairs (or a list of "
            "dask.delayed partitions) use ShardedFrankWolfeLearner(model, ...).fit(bag), "
            "which trains with each partition kept on its worker.")


def check_fit_args(X: Any, Y: Any, owner: str) -> None:
    """The arguments of a learner's ``fit(X, Y)``: a dask collection is refused naming
    :class:`~structlp.ShardedFrankWolfeLearner` (:func:`check_not_dask_collection`), and a
    missing ``Y`` is a TypeError saying what ``fit`` takes."""
    check_not_dask_collection(X, owner)
    if Y is None:
        raise TypeError(f"{owner}.fit() missing the outputs Y: call fit(X, Y) with a list "
                        "of m examples and a list of their m outputs.")


#: The largest value a training objective's bound may reach (float64 overflows at
#: 1.8e308: eight orders of magnitude are left for the sums and products on the way).
SCALE_LIMIT = 1e300


def _safe_norm(v: np.ndarray) -> float:
    """``|v|_2`` without overflow in the squares (inf when an entry is not finite)."""
    v = np.asarray(v, dtype=float).ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        n = float(np.sqrt(v.dot(v)))              # one pass where the squares do not overflow
    if 0.0 < n < 1e150 or (n == 0.0 and not np.any(v)):
        return n
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if not math.isfinite(top):
        return math.inf
    return top * float(np.linalg.norm(v / top)) if top > 0 else 0.0


def row_norm_sums(M: Any, starts: Any, sq: Optional[np.ndarray] = None) -> np.ndarray:
    """The sum of the rows' 2-norms of each segment of rows of ``M`` (dense (R, d) or
    scipy.sparse): segment ``s`` is rows ``starts[s]`` to ``starts[s + 1] - 1`` (the last
    to the end), ``starts`` non-decreasing; shape (len(starts),).  The squares are summed
    in one pass; rows whose squares overflow are normed again by scaling (inf for a row
    that is not finite).  Summed in row order, so a segment's sum does not depend on the
    rows around it.  ``sq``: the rows' sums of squares of a dense ``M``, when at hand.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.utils.validation import row_norm_sums
    >>> M = np.array([[3.0, 4.0], [0.0, 1.0], [6.0, 8.0]])
    >>> row_norm_sums(M, np.array([0, 2]))       # rows 0-1: 5 + 1; row 2: 10
    array([ 6., 10.])
    """
    starts = np.asarray(starts, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        if sq is not None:
            A: Any = M
        elif sp.issparse(M):
            A = sp.csr_array(M, dtype=float)
            sq = np.asarray(A.multiply(A).sum(axis=1), dtype=float).ravel()
        else:
            A = np.asarray(M, dtype=float)
            sq = np.einsum("ij,ij->i", A, A)
        rn = np.sqrt(sq)
    for r in np.flatnonzero(~(rn < 1e150)):       # overflowed (or not finite)
        row = A[[r]].toarray() if sp.issparse(A) else A[r]
        rn[r] = _safe_norm(row)
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(rn))))
    return np.bincount(seg, weights=rn, minlength=len(starts))


def _joint_bound(P: Any) -> float:
    """``G >= |Phi^T delta|_2`` for every ``delta`` in ``[-1, 1]^L``: the sum of the row
    norms of an explicit matrix (:func:`row_norm_sums`), or of a factored operator that
    computes it (its ``norm_bound()``); for other factored operators (no entries to read)
    the larger of ``|Phi^T 1|`` and ``sqrt(L) |Phi^T r|`` for fixed random signs ``r`` (an
    estimate of the same sum, within a small factor)."""
    M = getattr(P, "matrix", P)
    if sp.issparse(M) or isinstance(M, np.ndarray):
        return float(row_norm_sums(M, [0])[0])
    bound = getattr(P, "norm_bound", None)
    if bound is not None:
        return float(bound())
    L = int(P.shape[0])
    ones, r = _probes(L)
    with np.errstate(over="ignore", invalid="ignore"):
        return max(_safe_norm(P.joint(ones)), math.sqrt(L) * _safe_norm(P.joint(r)))


@functools.lru_cache(maxsize=64)
def _probes(L: int) -> Tuple[np.ndarray, np.ndarray]:
    """``(ones, fixed random signs)`` of length ``L`` (read-only, made once per size)."""
    ones = np.ones(L)
    r = np.where(np.random.default_rng(0).random(L) < 0.5, -1.0, 1.0)
    ones.flags.writeable = r.flags.writeable = False
    return ones, r


def check_scale(Phis: Sequence[Any], cs: Sequence[Any], ds: Sequence[float],
                C: Optional[float] = None, owner: Optional[str] = None,
                bounds: Optional[Tuple[np.ndarray, np.ndarray]] = None
                ) -> Tuple[np.ndarray, np.ndarray]:
    """Refuse a training set (and ``C``) whose objective cannot be represented in float64.

    With ``G_i`` the largest norm of a joint-feature difference ``Phi_i^T (mu - mu')``
    of example ``i`` (at most the sum of its parts' feature norms) and ``Lambda_i =
    |d_i| + |c_i|_1`` its largest loss, every iterate of the first-order learners and the
    optimum have ``|w| <= W = C sum_i G_i`` (``w`` is ``C`` times a sum of one joint
    difference per example), so the objective ``1/2 |w|^2 + C sum_i hinge_i(w)`` stays
    below ``F = W^2 / 2 + C sum_i (Lambda_i + G_i W)``.  Without ``C`` the features and
    losses alone are checked (``G_i^2`` and ``Lambda_i`` at most :data:`SCALE_LIMIT`:
    what the Gram products of any learner compute); with ``C``, ``F`` too.  Cost: one
    pass over the feature matrices (two products of a factored operator per example),
    none when ``bounds``, the ``(G, Lambda)`` this function returned for the same data,
    are given.

    Returns
    -------
    (G, Lambda) : two arrays of shape (m,)

    Raises
    ------
    InvalidInputError
        Naming the example whose features (or losses) are too large and their magnitude.
    InvalidParameterError
        Naming ``C`` and the bound it would imply, when the data alone are fine.
    """
    if bounds is not None:
        G, Lam = bounds
    else:
        G = np.array([_joint_bound(P) for P in Phis], dtype=float)
        nonzeros = getattr(cs, "nonzeros", None)          # SparseVectors: by their nonzeros
        Lam = np.array([abs(float(d)) + float(np.abs(
            nonzeros(i)[1] if nonzeros is not None else np.asarray(cs[i], dtype=float)).sum())
            for i, d in enumerate(ds)], dtype=float)
    root = math.sqrt(SCALE_LIMIT)
    if G.size and not G.max() <= root:
        i = int(np.argmax(~(G <= root)))          # the first example over the limit
        raise InvalidInputError(
            f"The features of X[{i}] are too large for float64: their parts' feature norms "
            f"sum to {G[i]:.3g}, whose square (a Gram product of the training problem) "
            f"exceeds {SCALE_LIMIT:.0e}. Scale the features down (e.g. standardize them).")
    if Lam.size and not Lam.max() <= SCALE_LIMIT:
        i = int(np.argmax(~(Lam <= SCALE_LIMIT)))
        raise InvalidInputError(
            f"The loss of X[{i}] can reach {Lam[i]:.3g}, more than {SCALE_LIMIT:.0e}: the "
            "training objective would overflow float64. Scale the loss down.")
    if C is None:
        return G, Lam
    with np.errstate(over="ignore", invalid="ignore"):
        W = C * float(G.sum())
        F = 0.5 * W * W + C * float(Lam.sum() + G.sum() * W)
    if not F <= SCALE_LIMIT:
        i = int(np.argmax(G)) if G.size else 0
        raise InvalidParameterError(
            f"The 'C' parameter{_owner(owner)} is too large for this training set: with "
            f"C={C:.3g}, the features (largest in X[{i}], norms summing to {G[i]:.3g} "
            f"there; {G.sum():.3g} over all examples) and losses up to {Lam.max():.3g}, "
            f"the weights may reach |w| = {W:.3g} and the objective 1/2|w|^2 + "
            f"C*sum(hinge) {F:.3g}: they would overflow float64 (safe up to "
            f"{SCALE_LIMIT:.0e}). Lower C or scale the features down.")
    return G, Lam


def check_objective(objective: float, w: np.ndarray, C: float, owner: str) -> None:
    """Raise :class:`~structlp.exceptions.SolverError` when a fit ends with a non-finite
    objective or weights (a learner never reports them without an error)."""
    if not (math.isfinite(objective) and np.all(np.isfinite(w))):
        raise SolverError(
            f"{owner} cannot represent this problem in double precision: with C={C:g} the "
            f"objective or the weights overflow (objective {float(objective):g}). Lower C or "
            "scale the features down.")
