"""Formulations: how "max over the outputs" becomes convex constraints.

A formulation turns the loss-augmented inference problem of every training
example into linear constraints on the weights ``w`` (shape (d,)), the slacks
``xi`` (shape (m,)) and auxiliary variables of its own.  It returns them as
:class:`LinearBlocks`: stacked sparse matrices for the whole training set, so that
the compiler builds one cvxpy constraint per block, never one per part.

:class:`MinMax` (``formulation="minmax"``) is Taskar et al. (2005) §4: for an
output polytope ``P_i = {A mu <= b, E mu = e, lb <= mu <= ub}``, LP duality
gives

.. math::

    \\max_{\\mu\\in P_i} (\\Phi_i w + c_i)\\cdot\\mu + d_i
    = \\min_{\\lambda,\\pi\\ge0,\\nu} b\\cdot\\lambda + e\\cdot\\nu + u\\cdot\\pi - l\\cdot r
    \\quad\\text{s.t.}\\quad r = A^T\\lambda + E^T\\nu + \\pi - (\\Phi_i w + c_i) \\ge 0,

(``r`` restricted to parts with a finite lower bound ``l``; it is 0 where
``l = -inf``, and ``pi`` exists only where ``u`` is finite), jointly linear in
``(w, lambda, nu, pi)``.  Certificate formulations (spanning trees, matchings)
come from the structures that define them.  An *extended* polytope
(``Polytope.n_aux > 0``, e.g. the spanning-tree polytope through directed
flows) is dualized the same way, its auxiliary variables being parts of score
0: the program stays one QP and its kernelized dual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import scipy.sparse as sp

from .exceptions import InvalidParameterError
from .polytope import Polytope


def _per_polytope(polys, method):
    """``method(p)`` for each polytope, computed once per distinct object."""
    cache = {}
    return [cache[id(p)] if id(p) in cache else cache.setdefault(id(p), method(p))
            for p in polys]


@dataclass
class TrainingData:
    """A training set in part form, stacked.

    Attributes
    ----------
    Phi : sequence of (L_i, d) arrays or sparse matrices (or feature operators)
    polytopes : list of Polytope (None for certificate formulations)
    c : sequence of (L_i,) arrays; d : (m,) array — the loss ``d_i + c_i . mu``
    mu_true : sequence of (L_i,) 0/1 arrays
    X, Y : the checked examples, the outputs as given

    The sequences are lists, or (from a model's vectorised ``prepare_batch``) sequences
    whose items are made on access from packed arrays
    (:class:`~structlp.compiler.SparseVectors` for ``c`` and ``mu_true``).

    Examples
    --------
    >>> from structlp.compiler import prepare
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=3, n_rows=3, random_state=0)
    >>> data = prepare(model, X, Y)
    >>> type(data).__name__, data.n_examples, data.n_parts.tolist(), data.n_features
    ('TrainingData', 3, [9, 9, 9], 5)
    >>> data.mu_true[0]                # the first true assignment as a part vector
    array([0., 1., 0., 1., 0., 0., 0., 0., 1.])
    """

    Phi: Sequence[Any]
    polytopes: list
    c: Sequence[Any]
    d: np.ndarray
    mu_true: Sequence[Any]
    X: Sequence[Any]
    Y: Sequence[Any]
    n_features: int
    #: ``(G, Lambda)`` of :func:`~structlp.utils.validation.check_scale` (each example's
    #: joint-feature and loss bounds), computed once by ``prepare`` for the learners' check
    #: of ``C``
    scale_bounds: Any = None

    @property
    def n_examples(self) -> int:
        return len(self.Phi)

    @property
    def n_parts(self) -> np.ndarray:
        return np.array([P.shape[0] for P in self.Phi])

    def stacked_features(self) -> sp.csr_array:
        """All part features stacked: sparse (sum L_i, d)."""
        if not any(sp.issparse(P) for P in self.Phi):
            return sp.csr_array(np.vstack(self.Phi))
        return sp.vstack([sp.csr_array(P) for P in self.Phi], format="csr")

    def example_of_part(self) -> np.ndarray:
        """Index of the example each stacked part belongs to, shape (sum L_i,)."""
        return np.repeat(np.arange(self.n_examples), self.n_parts)


@dataclass
class LinearBlocks:
    """Linear constraints of a formulation, as stacked sparse blocks.

    Each constraint is ``sum_v M[v] @ v  (>= or ==)  rhs`` where ``v`` names a
    variable: ``"w"``, ``"xi"`` or one of ``aux`` (name -> (size, nonneg)).  The
    key ``"parts"`` is special: ``M["parts"]`` has one column per stacked part
    and stands for ``(M["parts"] @ Phi) @ w``.  Formulations that write their
    dependence on ``w`` this way (through part features only) get the
    kernelized dual for free (:mod:`structlp.dual`).
    """

    aux: dict = field(default_factory=dict)
    ineq: list = field(default_factory=list)
    eq: list = field(default_factory=list)


def block_diag(mats: Sequence[Any]) -> sp.csr_array:
    """Block-diagonal CSR matrix of ``mats`` (fast when the same matrix repeats)."""
    cache = {}
    rows, cols, vals = [], [], []
    r0 = c0 = 0
    for M in mats:
        key = id(M)
        if key not in cache:
            coo = sp.coo_array(M)
            cache[key] = (coo.row, coo.col, coo.data)
        r, c, v = cache[key]
        rows.append(r + r0)
        cols.append(c + c0)
        vals.append(v)
        r0 += M.shape[0]
        c0 += M.shape[1]
    if not mats:
        return sp.csr_array((0, 0))
    return sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                        shape=(r0, c0))


def _block_rows(values, sizes):
    """Sparse (m, sum sizes) matrix whose row i holds ``values`` of block i."""
    m = len(sizes)
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    return sp.csr_array((np.asarray(values, dtype=float), np.arange(indptr[-1]), indptr),
                        shape=(m, int(indptr[-1])))


class MinMax:
    """Dualized loss-augmented inference (Taskar et al. 2005, §4); see module docstring.

    Examples
    --------
    >>> from structlp.compiler import prepare
    >>> from structlp.datasets import make_bipartite_matching
    >>> from structlp.formulations import MinMax
    >>> X, Y, _, model = make_bipartite_matching(n_samples=3, n_rows=3, random_state=0)
    >>> # the QP's linear constraints
    >>> blocks = MinMax().blocks(prepare(model, X, Y))
    >>> sorted(blocks.aux), len(blocks.ineq), len(blocks.eq)
    (['lam', 'nu', 'pi'], 2, 0)
    """

    name = "minmax"
    slacks = ()  # xi is the exact structured hinge: no choice of slack

    def blocks(self, data: TrainingData) -> LinearBlocks:
        polys = data.polytopes
        m = data.n_examples
        # auxiliary columns of extended formulations (Polytope.n_aux) are parts of
        # score 0 and loss 0: built like parts, then dropped from the "parts" terms
        n_aux = [getattr(p, "n_aux", 0) for p in polys]
        Ls = data.n_parts + np.array(n_aux, dtype=int)
        c = np.concatenate([np.pad(ci, (0, k)) for ci, k in zip(data.c, n_aux)])
        mu_true = np.concatenate([np.pad(mi, (0, k)) for mi, k in zip(data.mu_true, n_aux)])
        real = np.concatenate([np.pad(np.ones(len(ci), dtype=bool), (0, k))
                               for ci, k in zip(data.c, n_aux)])
        # block-diagonal constraint matrices over all examples
        A = block_diag([p.A for p in polys])
        E = block_diag([p.E for p in polys])
        lb = np.concatenate([p.lb for p in polys])
        # explicit upper bounds implied by other rows are dropped: same polytope,
        # fewer dual variables, and a much better conditioned program
        ub = np.concatenate(_per_polytope(polys, Polytope.nonredundant_ub))
        fin_ub = np.isfinite(ub)
        fin_lb = np.isfinite(lb)
        n_parts = int(Ls.sum())
        pi_cols = np.flatnonzero(fin_ub)
        Pi = sp.csr_array((np.ones(len(pi_cols)), (pi_cols, np.arange(len(pi_cols)))),
                          shape=(n_parts, len(pi_cols)))
        # r = A^T lam + E^T nu + Pi pi - Phi w - c
        AT, ET = sp.csr_array(A.T), sp.csr_array(E.T)
        # per-example rows:  y_i^T Phi_i w + xi_i - b.lam - e.nu - u.pi + l.r >= d_i
        S_parts = _block_rows(np.ones(n_parts), Ls)
        n_ineq = [p.n_ineq for p in polys]
        n_eq = [p.n_eq for p in polys]
        n_pi = [int(np.count_nonzero(np.isfinite(u)))
                for u in np.split(ub, np.cumsum(Ls)[:-1])]
        Bl = _block_rows(np.concatenate([p.b for p in polys]), n_ineq)
        Be = _block_rows(np.concatenate([p.e for p in polys]), n_eq)
        Bu = _block_rows(ub[fin_ub], n_pi)
        lbz = np.where(fin_lb, lb, 0.0)
        Sl = sp.csr_array(S_parts.multiply(lbz[None, :]))
        St = sp.csr_array(S_parts.multiply(mu_true[None, :]))
        ex = {
            "parts": sp.csr_array((St - Sl)[:, real]),
            "xi": sp.eye_array(m, format="csr"),
            "lam": -Bl + sp.csr_array(Sl @ AT),
            "nu": -Be + sp.csr_array(Sl @ ET),
            "pi": -Bu + sp.csr_array(Sl @ Pi),
        }
        rhs_ex = data.d + Sl @ c
        blocks = LinearBlocks(aux={"lam": (A.shape[0], True), "nu": (E.shape[0], False),
                                   "pi": (len(pi_cols), True)})
        blocks.ineq.append((ex, rhs_ex))
        for rows, target in ((np.flatnonzero(fin_lb), blocks.ineq),
                             (np.flatnonzero(~fin_lb), blocks.eq)):
            if len(rows) == 0:
                continue
            sel = sp.csr_array((-np.ones(len(rows)), (np.arange(len(rows)), rows)),
                               shape=(len(rows), n_parts))
            target.append(({"lam": AT[rows], "nu": ET[rows], "pi": Pi[rows],
                            "parts": sp.csr_array(sel[:, real])}, c[rows]))
        return blocks


FORMULATIONS = {"minmax": MinMax}


def get_formulation(name: str, model: Any, owner: Optional[str] = None,
                    slack: Optional[str] = None) -> Any:
    """The formulation object for ``name``, checking that ``model`` supports it.

    ``slack`` (None: the formulation's default) selects the slack of a
    formulation that has a choice (``Certificate.slacks``); giving one to a
    formulation without (``"minmax"``, whose ``xi`` is the exact structured
    hinge) is an error.

    Examples
    --------
    >>> from structlp.formulations import get_formulation
    >>> from structlp.structures import SpanningTree
    >>> type(get_formulation("minmax", SpanningTree())).__name__
    'MinMax'
    >>> type(get_formulation("certificate", SpanningTree())).__name__
    'Certificate'
    """
    supported = tuple(getattr(model, "formulations", ("minmax",)))
    where = f" of {owner}" if owner else ""
    if not isinstance(name, str) or name not in supported:
        why = (f" {type(model).__name__} has no compact LP (or extended formulation) of its "
               "output polytope, so there is no min-max QP: use formulation='certificate', "
               "or CuttingPlaneLearner / FrankWolfeLearner for the exact hinge."
               if name == "minmax" else "")
        raise InvalidParameterError(
            f"The 'formulation' parameter{where} must be one of {list(supported)} for "
            f"{type(model).__name__}; got {name!r}.{why}")
    form: Any = FORMULATIONS[name]() if name in FORMULATIONS else model.formulation(name)
    if slack is None:
        return form
    if not getattr(form, "slacks", ()):
        raise InvalidParameterError(
            f"The 'slack' parameter{where} applies only to formulation='certificate' (slacks "
            f"'two_sided', 'part', 'shared'); formulation={name!r} has its own exact slack. "
            f"Leave slack=None; got slack={slack!r}.")
    return form.with_slack(slack, owner=owner)
