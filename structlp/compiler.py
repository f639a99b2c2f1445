"""Compile a whole training set into one convex program.

:func:`prepare` validates a training set against a model and returns it in part
form (:class:`~structlp.formulations.TrainingData`); :func:`compile_primal`
builds the joint max-margin QP

.. math::

    \\min_{w, \\xi, z}\\; \\tfrac12\\|w\\|^2 + C\\sum_i \\xi_i
    \\quad\\text{s.t. the formulation's constraints on } (w, \\xi, z)

as one :class:`cvxpy.Problem` from stacked sparse matrices (one cvxpy
constraint per block of the formulation, never one per part or example).
``xi_i`` at the optimum is the structured hinge loss
``max_y [w.f_i(y) + loss_i(y)] - w.f_i(y_i)``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

import numpy as np
import scipy.sparse as sp

from .utils.validation import check_scale, check_sequence_of_examples
from .exceptions import (DeclarationError, InvalidInputError, InvalidOutputError, StructlpError,
                         naming)
from .formulations import LinearBlocks, TrainingData
from .part_features import MatrixFeatures

if TYPE_CHECKING:
    import cvxpy as cp

    from .model import StructuredModel


def prepare(model: StructuredModel, X: Sequence[Any], Y: Sequence[Any],
            need_polytopes: bool = True, operators: bool = False) -> TrainingData:
    """Validate ``X``, ``Y`` against ``model`` and return their part form.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples
    Y : list of m outputs
    need_polytopes : bool
        Build (and check every y against) the output polytopes.
    operators : bool
        ``TrainingData.Phi`` holds each example's
        :meth:`~structlp.model.StructuredModel.feature_operator` (a
        :class:`~structlp.part_features.PartFeatures`, possibly factored, checked against
        the explicit features on the first example) instead of the explicit
        matrices: what the first-order learners use.

    Returns
    -------
    TrainingData

    Notes
    -----
    A model with a vectorised ``prepare_batch(X, Y, need_polytopes=, operators=)`` (the
    built-in :class:`~structlp.structures.TreeLabeling` and
    :class:`~structlp.structures.BipartiteMatching`) prepares the whole set from packed
    arrays; it returns the data, or the index of the first example its checks cannot
    accept, whose refusal the per-example hooks then word (or which they accept: then every
    example goes through them), or None (not applicable).  Example ``X[0]`` always goes
    through the hooks first.
    """
    X = check_sequence_of_examples(X, "X")
    Y = check_sequence_of_examples(Y, "Y")
    if len(X) != len(Y):
        raise InvalidInputError(
            f"X and Y must have the same number of examples; got {len(X)} and {len(Y)}.")
    batch = getattr(model, "prepare_batch", None)
    if BATCH and batch is not None:
        # the first example through the per-example hooks: the model's parameters and X[0]
        # refused with their own messages before any array is made
        prepare_examples(model, X, Y, [0], need_polytopes, operators, scale=False)
        got = batch(X, Y, need_polytopes=need_polytopes, operators=operators)
        if isinstance(got, TrainingData):
            return got
        if isinstance(got, (int, np.integer)) and not isinstance(got, bool) \
                and 0 <= got < len(X):
            # the first example the vectorised checks suspect: its error (naming it) comes
            # from the per-example hooks; a suspicion they do not share (an input the
            # vectorised code does not handle) falls back to them for every example
            prepare_examples(model, X, Y, sorted({0, int(got)}), need_polytopes, operators,
                             scale=False)
    return prepare_examples(model, X, Y, range(len(X)), need_polytopes, operators)


#: Whether :func:`prepare` uses a model's vectorised ``prepare_batch`` (tests switch it off
#: to compare both paths).
BATCH = True


def prepare_examples(model: StructuredModel, X: Sequence[Any], Y: Sequence[Any],
                     indices: Any, need_polytopes: bool = True, operators: bool = False,
                     scale: bool = True) -> TrainingData:
    """:func:`prepare` of the examples ``X[i], Y[i]`` for ``i`` in ``indices`` (increasing),
    one at a time through the model's hooks, each named by its index in ``X``: the
    reference for a model's ``prepare_batch``, whose refusals it words.  ``scale``: the
    scale check of the whole set (:func:`~structlp.utils.validation.check_scale`; its
    errors name positions, so only with every example)."""
    from .model import FIRST_CHECKS
    Phis, polys, ds, Xs = [], [], [], []
    # with operators, the loss coefficients and true outputs are kept by their nonzeros
    # from the start (m dense part vectors are never held at once)
    cs: Any
    mus: Any
    cs, mus = (SparseVectors(), SparseVectors()) if operators else ([], [])
    cache = PolytopeCache(model)
    n_features: Any = None
    for i in indices:
        x, y = X[i], Y[i]
        step = "check_x"             # the hook running, named if it raises
        try:
            x = model.check_x(x)
            step = "features"
            Phi = (model.checked_feature_operator(x, name=f"features of X[{i}]", verify=i == 0)
                   if operators else model.checked_features(x, name=f"features of X[{i}]"))
            check_parts_and_features(model, i, Phi.shape)
            if n_features is None:
                n_features = Phi.shape[1]
            elif Phi.shape[1] != n_features:
                raise InvalidInputError(
                    f"X[{i}] has {Phi.shape[1]} features per part; X[0] has {n_features}.")
            step = "polytope"
            poly = cache.get(x, i, Phi.shape[0]) if need_polytopes else None
            step = "encode"
            mu = model.checked_output(x, y, poly if poly is not None else _box(Phi.shape[0]),
                                      name=f"Y[{i}]")
            step = model.loss_hook() or "loss_coefficients"
            c, d = model.checked_loss(x, y, mu, i, poly, first=i < FIRST_CHECKS)
            if i < FIRST_CHECKS:
                step = "inference"
                probe_decoder(model, x, i, poly)
        except Exception as exc:
            err = hook_error(model, exc, step, i)
            if err is exc:
                raise
            raise err from (None if isinstance(exc, StructlpError) else exc)
        Phis.append(Phi)
        polys.append(poly)
        cs.append(c)
        ds.append(float(d))
        mus.append(mu)
        Xs.append(x)
    # features whose squares would overflow float64
    bounds = check_scale(Phis, cs, ds) if scale else None
    return TrainingData(Phis, polys, cs, np.array(ds), mus, Xs,
                        Y, int(n_features), bounds)  # type: ignore[arg-type]  # Y: any sequence


def own_hooks(model: StructuredModel, cls: type, names: Sequence[str]) -> bool:
    """Whether every hook in ``names`` of ``model`` is ``cls``'s own definition: a subclass
    (or an instance) that overrides one is prepared example by example, through its hooks
    (the lowest override wins), never by ``cls``'s vectorised ``prepare_batch``."""
    kind = type(model)
    mine = getattr(model, "__dict__", {})
    return isinstance(model, cls) and all(
        getattr(kind, h, None) is getattr(cls, h, None) and not callable(mine.get(h))
        for h in names)


def first_false(ok: np.ndarray) -> int:
    """The index of the first False of a boolean array, or its length when all are True."""
    return int(np.argmin(ok)) if ok.size and not ok.all() else len(ok)


#: The fit-time probe of a user decoder (:func:`probe_decoder`) skips polytopes of more
#: columns (parts and auxiliary variables) than this.
PROBE_MAX_COLUMNS = 5000


def probe_decoder(model: StructuredModel, x: Any, i: int, polytope: Any) -> None:
    """Spot check of a decoder of the model's own on example ``X[i]`` (the learners check
    its outputs against the truth, which a decoder that ignores its scores can tie):
    for random scores (seeded by ``i``) its output must score as much as the optimum of
    the inference LP over ``polytope`` when that optimum is an output (a fractional one
    says nothing of the decoder).  Skipped without a polytope, a decoder of the model's
    own, or with ``check_inference = False``, and for polytopes of more than
    :data:`PROBE_MAX_COLUMNS` columns (an LP too long for a check).

    Raises
    ------
    OracleError
        Naming the hook, the example and both values.
    """
    hook = model.decoder_hook()
    if polytope is None or hook is None or not model.check_inference \
            or polytope.n_columns > PROBE_MAX_COLUMNS:
        return
    from .exceptions import OracleError
    from .inference import solve_stacked_lp
    from .model import ORACLE_RTOL
    s = np.random.default_rng(i).standard_normal(polytope.n_parts)
    mu = model.checked_inference_parts(x, s, index=i, polytope=polytope)
    if mu is None:
        return
    lp = np.asarray(solve_stacked_lp([polytope], [s])[0], dtype=float)
    best = np.rint(lp)
    if np.abs(lp - best).max(initial=0.0) > 1e-6:
        return
    got, want = float(s @ mu), float(s @ best)
    if got < want - ORACLE_RTOL * (float(np.abs(s) @ mu) + float(np.abs(s) @ best)):
        raise OracleError(
            f"{type(model).__name__}.{hook}(x, scores) on X[{i}] returned an output scoring "
            f"{got:.6g} for random scores, where the inference LP over the declared polytope "
            f"finds an output scoring {want:.6g}: the decoder does not maximize its scores. "
            "A decoder must return argmax_y scores . mu(y) for any real scores.")


def check_parts_and_features(model: StructuredModel, i: int, shape: Tuple[int, ...]) -> None:
    """Refuse example ``X[i]`` whose part features have ``shape`` (L, d) with no part or
    no feature (``InvalidInputError`` naming the example)."""
    if shape[0] == 0:
        raise InvalidInputError(
            f"X[{i}] has no parts ({type(model).__name__}.n_parts(X[{i}]) = 0): every example "
            "needs at least one part (drop the examples without any).")
    if shape[1] == 0:
        raise InvalidInputError(
            f"X[{i}] has no features: its part features have shape {tuple(shape)}; every "
            "part needs at least one feature.")


def hook_error(model: StructuredModel, exc: BaseException, hook: str, i: int) -> BaseException:
    """The error to raise for ``exc``, raised while the model's ``hook`` handled example
    ``i``: a structlp error with ``X[i]`` (``Y[i]`` for ``encode``) prefixed unless its
    message names the example already; any other exception (a bug or an unexpected
    input in the model's own code) as a structlp error naming the hook and the example
    (:class:`~structlp.InvalidInputError` from ``check_x``,
    :class:`~structlp.InvalidOutputError` from ``encode``,
    :class:`~structlp.DeclarationError` from the other hooks; chain it to ``exc``);
    ``MemoryError`` and ``RecursionError`` as they are."""
    who = f"{'Y' if hook == 'encode' else 'X'}[{i}]"
    if isinstance(exc, StructlpError):
        return exc if f"X[{i}]" in str(exc) else naming(exc, who)
    if isinstance(exc, (MemoryError, RecursionError)) or not isinstance(exc, Exception):
        return exc
    kind = {"check_x": InvalidInputError, "encode": InvalidOutputError}.get(hook, DeclarationError)
    return kind(f"{type(model).__name__}.{hook} raised {type(exc).__name__} on {who}: {exc}")


class PolytopeCache:
    """Each example's checked output polytope, built (and checked bounded) once per
    :meth:`~structlp.model.StructuredModel.polytope_key`.

    A key that is not hashable, or that two examples with different numbers of parts
    share, is a :class:`~structlp.DeclarationError` naming ``polytope_key`` and the
    examples.
    """

    def __init__(self, model: StructuredModel) -> None:
        self.model = model
        self.polytopes: Dict[Any, Any] = {}

    def get(self, x: Any, i: int, n_parts: int) -> Any:
        """The polytope of the checked example ``x`` (``X[i]``, of ``n_parts`` parts)."""
        cls = type(self.model).__name__
        key = self.model.polytope_key(x)
        try:
            hit = self.polytopes.get(key) if key is not None else None
        except TypeError:
            raise DeclarationError(
                f"{cls}.polytope_key(X[{i}]) must return a hashable value or None; got "
                f"{type(key).__name__} {key!r}.") from None
        if hit is not None:
            poly, j = hit
            if poly.n_parts != n_parts:
                raise DeclarationError(
                    f"{cls}.polytope_key gives X[{i}] the key {key!r} of X[{j}], but X[{i}] "
                    f"has {n_parts} parts and the polytope of X[{j}] {poly.n_parts}: equal "
                    "keys must mean equal polytopes (return a key that tells them apart, "
                    "or None).")
            return poly
        poly = self.model.checked_polytope(x)
        if poly.n_parts != n_parts:
            raise DeclarationError(
                f"The polytope of X[{i}] has {poly.n_parts} parts but its features have "
                f"{n_parts} rows.")
        poly.check_bounded()
        if key is not None:
            self.polytopes[key] = (poly, i)
        return poly


def needs_polytopes(model: StructuredModel) -> bool:
    """Whether ``model``'s outputs live in declared output polytopes that the learners
    build (and check outputs against): the models that offer the min-max formulation;
    certificate-only models validate their outputs in ``encode``."""
    return "minmax" in tuple(getattr(model, "formulations", ("minmax",)))


class SparseVectors(Sequence):
    """A list of 1-D float vectors kept by their nonzeros; item ``i`` is the dense
    vector, made afresh (so that m dense part vectors are never held at once:
    ``prepare(..., operators=True)`` stores ``c`` and ``mu_true`` so).

    Made empty and grown by :meth:`append`, or all at once from packed arrays
    (:meth:`packed`: one index and one value array for all vectors, no array per vector)."""

    def __init__(self, vectors: Any = ()) -> None:
        self._idx: List[np.ndarray] = []
        self._val: List[np.ndarray] = []
        self._len: List[int] = []
        self._packed: Any = None          # (idx, val, offsets (m + 1,), sizes (m,))
        for v in vectors:
            self.append(v)

    @classmethod
    def packed(cls, idx: np.ndarray, val: np.ndarray, counts: np.ndarray,
               sizes: np.ndarray) -> "SparseVectors":
        """The vectors whose nonzeros are ``idx[o_i:o_i + counts[i]]`` (positions, increasing)
        and ``val[...]`` (their values), of lengths ``sizes``, with ``o = cumsum(counts)``."""
        out = cls()
        off = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        sizes = np.asarray(sizes, dtype=np.int64)
        small = sizes.size == 0 or int(sizes.max()) < 2 ** 31
        out._packed = (np.asarray(idx, dtype=np.int32 if small else np.int64),
                       np.asarray(val, dtype=float), off, sizes)
        return out

    def _unpack(self) -> None:
        """Packed storage to per-vector arrays (before an :meth:`append`)."""
        if self._packed is not None:
            n = len(self)
            pairs = [self.nonzeros(i) for i in range(n)]
            self._idx = [p[0] for p in pairs]
            self._val = [p[1] for p in pairs]
            self._len = [int(v) for v in self._packed[3]]
            self._packed = None

    def append(self, v: Any) -> None:
        self._unpack()
        v = np.asarray(v, dtype=float)
        idx = np.flatnonzero(v != 0)
        self._idx.append(idx.astype(np.int32) if v.size < 2 ** 31 else idx)
        self._val.append(v[idx])
        self._len.append(v.size)

    def __len__(self):
        return len(self._packed[3]) if self._packed is not None else len(self._len)

    def concatenated(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All vectors' nonzeros in one array each, ``(idx, vals, offsets)``: vector ``i``'s
        at ``offsets[i]:offsets[i + 1]`` (m + 1,) (the packed storage itself when packed:
        no array per vector is made)."""
        if self._packed is not None:
            idx, val, off, _ = self._packed
            return idx, val, off
        off = np.zeros(len(self._idx) + 1, dtype=np.int64)
        np.cumsum([a.size for a in self._idx], out=off[1:])
        if not self._idx:
            return np.zeros(0, dtype=np.int64), np.zeros(0), off
        return np.concatenate(self._idx), np.concatenate(self._val), off

    def sizes(self) -> List[int]:
        """Each vector's length."""
        return self._packed[3].tolist() if self._packed is not None else list(self._len)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        idx, val = self.nonzeros(i)
        v = np.zeros(self._packed[3][i] if self._packed is not None else self._len[i])
        v[idx] = val
        return v

    def nonzeros(self, i: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(idx, vals)`` of vector ``i``."""
        if self._packed is None:
            return self._idx[i], self._val[i]
        idx, val, off, _ = self._packed
        i = range(len(off) - 1)[i]            # negative indices, and out of range refused
        b, e = off[i], off[i + 1]
        return idx[b:e], val[b:e]


@functools.lru_cache(maxsize=64)
def _box(L):
    """The unit box of ``L`` parts (outputs are checked against it; one per size)."""
    from .polytope import Polytope
    return Polytope(n_parts=L)


@dataclass
class CompiledQP:
    """The joint QP and the handles needed to read its solution.

    Attributes
    ----------
    problem : cvxpy.Problem
    w : cvxpy.Variable, shape (d,)
    xi : cvxpy.Variable, shape (m,)
    aux : dict of cvxpy.Variable
    """

    problem: cp.Problem
    w: cp.Variable
    xi: cp.Variable
    aux: dict


def compile_primal(blocks: LinearBlocks, n_features: int, n_examples: int, C: Any,
                   features: Any = None) -> CompiledQP:
    """Build ``min 1/2 |w|^2 + C sum(xi)`` subject to ``blocks`` as one cvxpy Problem.

    ``features`` (sparse, (total parts, d)) is needed when a block has a
    ``"parts"`` term ``M``, which stands for ``(M @ features) @ w``.
    """
    import cvxpy as cp      # lazily: only the joint QP builds a cvxpy problem
    w = cp.Variable(n_features, name="w")
    xi = cp.Variable(n_examples, name="xi")
    variables = {"w": w, "xi": xi}
    for name, (size, nonneg) in blocks.aux.items():
        if size:
            variables[name] = cp.Variable(size, name=name, nonneg=nonneg)

    def linear(terms):
        expr = 0
        for name, M in terms.items():
            if name == "parts":
                if features is None:
                    raise ValueError("compile_primal needs features for a 'parts' term.")
                M, name = sp.csr_array(M) @ features, "w"
            if name in variables and M.shape[1] and M.nnz:
                expr = expr + sp.csr_array(M) @ variables[name]
        return expr

    constraints = []
    for terms, rhs in blocks.ineq:
        if len(rhs):
            constraints.append(linear(terms) >= rhs)
    for terms, rhs in blocks.eq:
        if len(rhs):
            constraints.append(linear(terms) == rhs)
    objective = cp.Minimize(0.5 * cp.sum_squares(w) + C * cp.sum(xi))
    problem = cp.Problem(objective, constraints)
    aux = {k: v for k, v in variables.items() if k not in ("w", "xi")}
    return CompiledQP(problem, w, xi, aux)


def matvec(A: Any, x: np.ndarray) -> np.ndarray:
    """``A @ x`` for a dense or sparse matrix as a flat float array (``ndarray.dot`` is
    several times faster than ``@`` on the small matrices of one example)."""
    v = A.dot(x)
    return v if type(v) is np.ndarray and v.ndim == 1 else np.asarray(v, dtype=float).ravel()


def transposes(Phis: Sequence[Any]) -> List[Any]:
    """``Phi_i^T`` of every example, made once (a sparse ``.T`` is a new matrix object at
    every call; CSR keeps the products with it fast).  For a
    :class:`~structlp.part_features.PartFeatures` it is its adjoint (``.dot(mu)`` is
    the joint feature ``Phi_i^T mu``), the stored transpose of a wrapped matrix."""
    return [P.matrix_T if isinstance(P, MatrixFeatures)
            else P.T.tocsr() if sp.issparse(P) else P.T for P in Phis]


def stacked_scores(Phis: Sequence[Any], w: np.ndarray) -> List[np.ndarray]:
    """Part scores ``Phi_i w`` for every example, as a list of (L_i,) arrays."""
    return [matvec(P, w) for P in Phis]
