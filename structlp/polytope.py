"""Output spaces in H-form.

A :class:`Polytope` is the set

.. math::

    P = \\{\\mu \\in \\mathbb{R}^L : A\\mu \\le b,\\; E\\mu = e,\\; l \\le \\mu \\le u\\}

of part-indicator vectors ``mu`` (one entry per part of an output).  It is
either given by matrices (:meth:`Polytope.from_matrices`) or extracted from
cvxpy constraints on a 1-D variable (:meth:`Polytope.from_cvxpy`); rows of the
inequality system with a single non-zero coefficient become bounds.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from .utils.polyhedra import check_linked, one_line
from .utils.validation import check_finite_array, check_real, check_scalar
from .exceptions import DeclarationError, InvalidInputError, InvalidOutputError

#: Feasibility tolerance used when checking that a given output lies in a polytope.
FEASIBILITY_TOL = 1e-7


def _dense_matrix(M, name):
    try:
        return check_finite_array(M, name, ndim=2)
    except InvalidInputError as exc:
        raise DeclarationError(f"The polytope's {exc}") from None


def _as_csr(M, n_cols, name):
    if M is None:
        return sp.csr_array((0, n_cols))
    if sp.issparse(M):
        check_real(M, name)
        M = sp.csr_array(M, dtype=float)
    else:
        M = sp.csr_array(_dense_matrix(M, name))
    if M.shape[1] != n_cols:
        raise DeclarationError(
            f"{name} must have {n_cols} columns (one per part); got shape {M.shape}.")
    if not np.all(np.isfinite(M.data)):
        raise DeclarationError(f"{name} contains NaN or infinite values.")
    return M


def _as_vec(v, n, name, default=0.0, allow_inf=False):
    if v is None:
        return np.full(n, default, dtype=float)
    try:
        check_real(v, name)
        v = np.asarray(v, dtype=float)
    except (InvalidInputError, TypeError, ValueError) as exc:
        raise DeclarationError(f"The polytope's {name} must be a real vector ({exc}).") from None
    v = np.broadcast_to(v, (n,)).copy() if v.ndim == 0 else v
    if v.shape != (n,):
        raise DeclarationError(f"{name} must have shape ({n},); got {v.shape}.")
    if np.any(np.isnan(v)) or (not allow_inf and not np.all(np.isfinite(v))):
        raise DeclarationError(f"{name} contains NaN{'' if allow_inf else ' or infinite'} values.")
    return v


def _aux_attribute_bounds(v, first, lb, ub):
    """Bounds of variable ``v`` (``mu`` when ``first`` is 0, else an auxiliary one) from its
    cvxpy attributes (columns from ``first``)."""
    attrs = v.attributes
    bad = [a for a in ("boolean", "integer", "PSD", "NSD", "symmetric", "diag", "hermitian",
                       "complex", "imag", "sparsity") if attrs.get(a)]
    if bad:
        what = "auxiliary variable" if first else "part-indicator variable"
        raise DeclarationError(
            f"The {what} {v.name()!r} has the attribute {bad[0]!r}; a {what} of a polytope "
            "must be a plain real Variable (optionally nonneg, nonpos or with bounds): the "
            "outputs are the polytope's 0/1 vertices, integrality is not declared by an "
            "attribute; write other restrictions as constraints.")
    cols = slice(first, first + v.size)
    if attrs.get("nonneg") or attrs.get("pos"):
        lb[cols] = 0.0
    if attrs.get("nonpos") or attrs.get("neg"):
        ub[cols] = 0.0
    bounds = attrs.get("bounds")
    if bounds is not None:
        lo, hi = bounds
        if lo is not None:
            lb[cols] = np.maximum(lb[cols], np.ravel(np.broadcast_to(lo, v.shape), order="F"))
        if hi is not None:
            ub[cols] = np.minimum(ub[cols], np.ravel(np.broadcast_to(hi, v.shape), order="F"))


class Polytope:
    """An output polytope ``{mu : A mu <= b, E mu = e, lb <= mu <= ub}``.

    Parameters
    ----------
    A : sparse or dense array, shape (n_ineq, n_parts), optional
    b : array, shape (n_ineq,), optional
    E : sparse or dense array, shape (n_eq, n_parts), optional
    e : array, shape (n_eq,), optional
    lb, ub : float or array, shape (n_parts,), optional
        Bounds; ``-inf``/``inf`` mean unbounded.  Defaults: 0 and 1, the
        usual box of part indicators.
    n_parts : int, optional
        Needed only when neither A nor E is given.
    n_aux : int >= 0, default=0
        Auxiliary variables of an *extended formulation*: the last ``n_aux``
        columns of ``A``, ``E``, ``lb``, ``ub`` are variables ``f`` with score 0,
        and the output space is the projection
        ``{mu : exists f, (mu, f) in P}`` (e.g. the spanning-tree polytope).
    lift : callable or None
        With ``n_aux``: ``lift(mu) -> (n_parts + n_aux,)`` point of ``P`` above a
        0/1 output ``mu`` (or None when there is none), used to check outputs;
        without it :meth:`check_output` solves a feasibility LP.

    Attributes
    ----------
    A, E : scipy.sparse.csr_array, shape (n, n_columns)
    b, e : ndarray; lb, ub : ndarray, shape (n_columns,)
    n_parts : int
        Scored parts (``n_columns = n_parts + n_aux``).
    n_aux : int

    Examples
    --------
    The assignments of 2 rows to 2 columns (parts: the 4 edges, row-major):

    >>> import numpy as np
    >>> from structlp import Polytope
    >>> E = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]])
    >>> P = Polytope(E=E, e=np.ones(4))
    >>> P.n_parts, P.contains(np.array([1., 0., 0., 1.])), P.contains(np.array([1., 1., 0., 0.]))
    (4, True, False)

    The same polytope from cvxpy constraints:

    >>> import cvxpy as cp
    >>> mu = cp.Variable(4)
    >>> Q = Polytope.from_cvxpy(mu, [E @ mu == 1, mu >= 0, mu <= 1])
    >>> Q.n_parts, Q.n_eq
    (4, 4)
    """

    _implied_ub: np.ndarray      # cached by implied_upper_bounds
    #: ``(name, first column, shape)`` of each auxiliary cvxpy variable (from_cvxpy)
    aux_names: list = []

    def __init__(self, A: Any = None, b: Optional[ArrayLike] = None, E: Any = None,
                 e: Optional[ArrayLike] = None, lb: Any = 0.0, ub: Any = 1.0,
                 n_parts: Optional[int] = None, n_aux: int = 0,
                 lift: Optional[Callable[[np.ndarray], Optional[np.ndarray]]] = None) -> None:
        self.n_aux = int(n_aux)
        self.lift = lift
        if n_parts is None:
            for M, name in ((A, "A"), (E, "E")):
                if M is not None:
                    n_parts = (M if sp.issparse(M) else _dense_matrix(M, name)).shape[1] \
                        - self.n_aux
                    break
            else:
                if np.ndim(lb) == 1:
                    n_parts = len(lb)
                else:
                    raise DeclarationError(
                        "Polytope needs n_parts when neither A nor E is given.")
        else:
            n_parts = check_scalar(n_parts, "n_parts", kind=numbers.Integral, low=0,
                                   owner="Polytope")
        self.n_parts = int(n_parts)
        self.n_columns = self.n_parts + self.n_aux
        self.A = _as_csr(A, self.n_columns, "A")
        self.E = _as_csr(E, self.n_columns, "E")
        self.b = _as_vec(b, self.A.shape[0], "b") if self.A.shape[0] or b is not None \
            else np.zeros(0)
        self.e = _as_vec(e, self.E.shape[0], "e") if self.E.shape[0] or e is not None \
            else np.zeros(0)
        self.lb = _as_vec(lb, self.n_columns, "lb", allow_inf=True)
        self.ub = _as_vec(ub, self.n_columns, "ub", allow_inf=True)
        if np.any(self.lb == np.inf) or np.any(self.ub == -np.inf):
            raise DeclarationError("Polytope bounds must satisfy lb < inf and ub > -inf.")
        if np.any(self.lb > self.ub):
            j = int(np.argmax(self.lb > self.ub))
            raise DeclarationError(
                f"The declared polytope is infeasible: part {j} has lower bound "
                f"{self.lb[j]} above its upper bound {self.ub[j]}.")

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_matrices(cls, A: Any = None, b: Optional[ArrayLike] = None, E: Any = None,
                      e: Optional[ArrayLike] = None, lb: ArrayLike = 0.0, ub: ArrayLike = 1.0,
                      n_parts: Optional[int] = None) -> "Polytope":
        """Build from matrices; same arguments as the constructor."""
        return cls(A, b, E, e, lb, ub, n_parts)

    @classmethod
    def from_cvxpy(cls, mu: Any, constraints: Sequence[Any]) -> "Polytope":
        """Extract the H-form of affine cvxpy constraints on the 1-D variable ``mu``.

        Parameters
        ----------
        mu : cvxpy.Variable, shape (n_parts,)
        constraints : list of cvxpy constraints
            Each must be an equality or inequality between affine expressions
            of ``mu`` and, optionally, *auxiliary* cvxpy Variables (flows, hull
            weights: an extended formulation).  Rows ``a * v_j <= c`` with a
            single non-zero coefficient become bounds; when no constraint bounds
            a column from below or above, it is unbounded on that side.

        Returns
        -------
        Polytope
            With ``n_aux`` the total size of the auxiliary variables, in order of
            first appearance in ``constraints``; each variable's entries are
            columns ``n_parts + offset + j`` (``j`` its column-major flat index, as
            cvxpy vectorizes).  ``nonneg``/``nonpos``/``bounds`` attributes (of
            ``mu`` too) become bounds.  The output space is the projection on
            ``mu``; training outputs are completed to feasible points by a
            feasibility LP (:meth:`check_output`).  Each row remembers the
            constraint it comes from: a violation names it.

        Raises
        ------
        DeclarationError
            For a constraint that is not affine, not a comparison, or has
            Parameters; when no constraint involves ``mu``; for an auxiliary
            variable that no chain of constraints links to ``mu`` (it restricts
            no output); for a variable with an attribute other than bounds
            (``boolean``, ``integer``...).
        """
        import cvxpy as cp      # lazily: the learners' fast paths never import cvxpy
        if not isinstance(mu, cp.Variable) or mu.ndim != 1:
            raise DeclarationError(
                "The part-indicator variable must be a 1-D cvxpy.Variable; got "
                f"{type(mu).__name__} of shape {getattr(mu, 'shape', None)}.")
        if isinstance(constraints, cp.constraints.constraint.Constraint):
            constraints = [constraints]
        L = mu.size
        aux: List[Any] = []              # auxiliary variables, by first appearance
        con_vars = []
        for k, con in enumerate(constraints):
            if not isinstance(con, cp.constraints.constraint.Constraint):
                raise DeclarationError(
                    f"Constraint {k} is a {type(con).__name__}, not a cvxpy constraint (write "
                    "comparisons such as A @ mu <= b).")
            con_vars.append(con.variables())
            for v in con_vars[-1]:
                if v.id != mu.id and all(v.id != a.id for a in aux):
                    aux.append(v)
        check_linked(mu, aux, con_vars)
        start = {}
        col = L
        for v in aux:
            start[v.id] = col
            col += v.size
        n_cols = col
        lb_attr = np.full(n_cols, -np.inf)
        ub_attr = np.full(n_cols, np.inf)
        for v in [mu] + aux:
            _aux_attribute_bounds(v, start.get(v.id, 0), lb_attr, ub_attr)
        ineq_rows: List[Any] = []
        ineq_rhs: List[Any] = []
        eq_rows: List[Any] = []
        eq_rhs: List[Any] = []
        origin: dict = {"ineq": [], "eq": []}   # (constraint, entry) of every row
        variables = [mu] + aux
        saved = [v.value for v in variables]
        for v in variables:
            v.value = np.zeros(v.shape)
        try:
            for k, con in enumerate(constraints):
                if isinstance(con, (cp.constraints.Inequality, cp.constraints.NonPos)):
                    target, kind = (ineq_rows, ineq_rhs), "ineq"
                elif isinstance(con, (cp.constraints.Equality, cp.constraints.Zero)):
                    target, kind = (eq_rows, eq_rhs), "eq"
                else:
                    raise DeclarationError(
                        f"Constraint {k} ({con}) is a {type(con).__name__}; a polytope "
                        "takes only affine equalities and inequalities.")
                expr = con.expr  # constraint reads expr <= 0 or expr == 0
                if not expr.is_affine():
                    raise DeclarationError(f"Constraint {k} ({con}) is not affine in its variables.")
                if expr.parameters():
                    raise DeclarationError(
                        f"Constraint {k} ({con}) has cvxpy Parameters; give numbers.")
                offset = np.ravel(np.asarray(expr.value, dtype=float), order="F")
                grads = expr.grad if expr.variables() else {}
                blocks = []
                for v in expr.variables():
                    g = grads.get(v)
                    if g is None or isinstance(g, int):
                        continue
                    g = g if sp.issparse(g) else np.reshape(np.asarray(g, dtype=float),
                                                            (v.size, offset.size))
                    g = sp.coo_array(sp.csc_array(g).T)          # (rows, v.size)
                    first = 0 if v.id == mu.id else start[v.id]
                    blocks.append((g.row, g.col + first, g.data))
                rows = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0, int)
                cols = np.concatenate([b[1] for b in blocks]) if blocks else np.zeros(0, int)
                vals = np.concatenate([b[2] for b in blocks]) if blocks else np.zeros(0)
                jac = sp.csr_array((vals, (rows, cols)), shape=(offset.size, n_cols))
                target[0].append(jac)
                target[1].append(-offset)
                origin[kind].append(np.stack([np.full(offset.size, k), np.arange(offset.size)]))
        finally:
            for v, val in zip(variables, saved):
                v.value = val
        A = sp.vstack(ineq_rows, format="csr") if ineq_rows else sp.csr_array((0, n_cols))
        b = np.concatenate(ineq_rhs) if ineq_rhs else np.zeros(0)
        E = sp.vstack(eq_rows, format="csr") if eq_rows else sp.csr_array((0, n_cols))
        e = np.concatenate(eq_rhs) if eq_rhs else np.zeros(0)
        rows_origin = [np.hstack(origin[kind]) if origin[kind] else np.zeros((2, 0), int)
                       for kind in ("ineq", "eq")]
        poly = cls._with_bounds_split(A, b, E, e, n_aux=n_cols - L, lb=lb_attr, ub=ub_attr,
                                      origin=rows_origin)
        poly.aux_names = [(v.name(), start[v.id], v.shape) for v in aux]
        many = len(constraints) > 1000      # then the constraints are named by index only
        poly._constraint_text = [f"#{k}" if many else one_line(str(con))
                                 for k, con in enumerate(constraints)]
        poly._constraint_shape = [tuple(con.shape) for con in constraints]
        return poly

    @classmethod
    def _with_bounds_split(cls, A, b, E, e, n_aux=0, lb=None, ub=None, origin=None):
        """Move single-coefficient inequality rows into bounds (tightening ``lb``/``ub``,
        default unbounded); drop empty rows.  ``origin``: the (constraint, entry) pair of
        every row of ``A`` and ``E`` (2 x rows arrays), kept for the rows and bounds that
        remain (violations name them)."""
        L = A.shape[1]
        A = sp.csr_array(A)
        A.eliminate_zeros()
        nnz = np.diff(A.indptr)
        empty = nnz == 0
        if np.any(b[empty] < -FEASIBILITY_TOL):
            raise DeclarationError(
                "The declared polytope is infeasible: a constraint reads 0 <= "
                f"{b[empty].min():g}.")
        single = nnz == 1
        lb = np.full(L, -np.inf) if lb is None else np.array(lb, dtype=float)
        ub = np.full(L, np.inf) if ub is None else np.array(ub, dtype=float)
        rows = np.flatnonzero(single)
        cols = A.indices[A.indptr[rows]]
        coef = A.data[A.indptr[rows]]
        val = b[rows] / coef
        up = coef > 0
        np.minimum.at(ub, cols[up], val[up])
        np.maximum.at(lb, cols[~up], val[~up])
        keep = ~(single | empty)
        E = sp.csr_array(E)
        E.eliminate_zeros()
        eq_empty = np.diff(E.indptr) == 0
        if np.any(np.abs(e[eq_empty]) > FEASIBILITY_TOL):
            raise DeclarationError("The declared polytope is infeasible: a constraint "
                                   f"reads 0 == {e[eq_empty][np.abs(e[eq_empty]) > 0][0]:g}.")
        poly = cls(A[keep], b[keep], E[~eq_empty], e[~eq_empty], lb, ub, n_parts=L - n_aux,
                   n_aux=n_aux)
        if origin is not None:
            bound_of = {}
            for side, limit, mask in (("ub", ub, up), ("lb", lb, ~up)):
                src = np.full((2, L), -1)
                hit = val[mask] == limit[cols[mask]]     # the row that gave the final bound
                src[:, cols[mask][hit]] = origin[0][:, rows[mask][hit]]
                bound_of[side] = src
            poly._origin = {"ineq": origin[0][:, keep], "eq": origin[1][:, ~eq_empty],
                            **bound_of}
        return poly

    # ------------------------------------------------------------------ queries
    @property
    def n_ineq(self) -> int:
        return self.A.shape[0]

    @property
    def n_eq(self) -> int:
        return self.E.shape[0]

    def implied_upper_bounds(self) -> np.ndarray:
        """Upper bounds on each part implied by the rows of ``A`` and ``E``.

        A row ``sum_j a_j mu_j <= b`` (or ``== b``) whose coefficients are all
        non-negative, over parts whose lower bounds are all non-negative,
        implies ``mu_j <= b / a_j``.  Returns an array (n_parts,) with ``inf``
        where no row bounds a part.  Used to drop redundant explicit bounds
        (which slow interior-point solvers on the dualized program): derived from
        the rows and the lower bounds only, never from the upper bounds it drops.
        :meth:`implied_bounds` gives the tightest bounds the whole system implies.
        """
        if getattr(self, "_implied_ub", None) is not None:
            return self._implied_ub
        bound = np.full(self.n_columns, np.inf)
        for M, rhs in ((self.A, self.b), (self.E, self.e)):
            if M.shape[0] == 0:
                continue
            coo = sp.coo_array(M)
            bad = (coo.data < 0) | (self.lb[coo.col] < 0)
            row_bad = np.zeros(M.shape[0], dtype=bool)
            row_bad[coo.row[bad]] = True
            keep = ~row_bad[coo.row] & (coo.data > 0)
            np.minimum.at(bound, coo.col[keep], rhs[coo.row[keep]] / coo.data[keep])
        self._implied_ub = bound  # polytopes are not modified after construction
        return bound

    def nonredundant_ub(self) -> np.ndarray:
        """``ub`` with the bounds already implied by other rows set to ``inf``."""
        return np.where(self.implied_upper_bounds() <= self.ub, np.inf, self.ub)

    def implied_bounds(self) -> Tuple[np.ndarray, np.ndarray]:
        """Bounds ``(lo, hi)`` of every column implied by all the constraints.

        The explicit bounds tightened by bound propagation through the rows of ``A`` and
        ``E`` (``f >= 0, f <= mu, mu <= 1`` bounds ``f`` by 1), then, for each column side
        still infinite, the optimum of one LP maximizing it (HiGHS), propagated again
        (``structlp.utils.polyhedra.implied_bounds``).  ``inf`` remains only where the
        polytope is truly unbounded (or when it is empty).  Computed once per polytope
        (the learners share one per :meth:`~structlp.StructuredModel.polytope_key`).

        Returns
        -------
        lo, hi : ndarray, shape (n_columns,)
        """
        cached = getattr(self, "_bounds", None)
        if cached is None:
            from .utils.polyhedra import implied_bounds
            cached = self._bounds = implied_bounds(self.A, self.b, self.E, self.e,
                                                   self.lb, self.ub)
        return cached[0], cached[1]

    def check_bounded(self) -> None:
        """Raise :class:`DeclarationError` unless the polytope is bounded.

        Every column (parts and auxiliary variables) must be bounded, by its explicit
        bounds or through the other constraints (:meth:`implied_bounds`: bound
        propagation, then an LP for what propagation leaves open), so only a truly
        unbounded polytope is refused; the error names a column that is unbounded.
        """
        if getattr(self, "_bounded", False):
            return
        if np.isfinite(self.lb).all() and np.isfinite(self.ub).all():
            self._bounded = True          # the usual case: explicit bounds, nothing to solve
            return
        lo, hi = self.implied_bounds()
        crossed = np.flatnonzero(lo > hi + FEASIBILITY_TOL)
        if self._bounds[2] or len(crossed):
            why = (f": its constraints imply {lo[crossed[0]]:g} <= "
                   f"{self.column_name(int(crossed[0]))} <= {hi[crossed[0]]:g}"
                   if len(crossed) else "")
            raise DeclarationError(
                "The declared output polytope is infeasible (empty): no point satisfies its "
                f"constraints{why}.")
        for side, vals in (("lower", lo), ("upper", hi)):
            bad = np.flatnonzero(~np.isfinite(vals))
            if len(bad):
                what = self.column_name(int(bad[0]))
                more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
                hint = ("mu >= 0 and mu <= 1" if bad[0] < self.n_parts else
                        "f >= 0 and f <= 1 (or the largest value it can take)")
                raise DeclarationError(
                    f"The declared output polytope must be bounded, but {what}{more} has "
                    f"no finite {side} bound: neither its bounds nor the other constraints "
                    f"limit it ({'maximizing' if side == 'upper' else 'minimizing'} it over "
                    f"the polytope is unbounded); add bounds such as {hint}.")
        self._bounded = True

    def column_name(self, j: int) -> str:
        """A readable name of column ``j``: ``part j`` or an entry of an auxiliary variable."""
        if j < self.n_parts:
            return f"part {j}"
        for name, first, shape in self.aux_names:
            size = int(np.prod(shape))
            if first <= j < first + size:
                idx = np.unravel_index(j - first, shape, order="F") if shape else ()
                return f"entry {tuple(int(i) for i in idx)} of the auxiliary variable {name!r}"
        return f"auxiliary column {j - self.n_parts}"

    def in_unit_box(self) -> bool:
        """Whether the polytope lies inside ``[0, 1]^n_parts`` (by its :meth:`implied_bounds`)."""
        inside = getattr(self, "_in_unit_box", None)     # computed once per polytope
        if inside is None:
            k = self.n_parts
            ub = np.minimum(self.ub, self.implied_upper_bounds())[:k]
            inside = bool(np.all(self.lb[:k] >= 0) and np.all(ub <= 1))    # cheap test first
            if not inside:
                lo, hi = self.implied_bounds()
                inside = bool(np.all(lo[:k] >= -FEASIBILITY_TOL)
                              and np.all(hi[:k] <= 1 + FEASIBILITY_TOL))
            self._in_unit_box = inside
        return inside

    def is_empty(self, solver: Optional[str] = None) -> bool:
        """Whether no point satisfies the constraints (a feasibility LP)."""
        import cvxpy as cp
        from .solvers import check_solver, silence_highs_banner
        mu = cp.Variable(self.n_columns)
        cons = []
        if self.n_ineq:
            cons.append(self.A @ mu <= self.b)
        if self.n_eq:
            cons.append(self.E @ mu == self.e)
        fl, fu = np.isfinite(self.lb), np.isfinite(self.ub)
        if fl.any():
            cons.append(mu[fl] >= self.lb[fl])
        if fu.any():
            cons.append(mu[fu] <= self.ub[fu])
        prob = cp.Problem(cp.Minimize(0), cons)
        solver = check_solver(solver, kind="LP")
        silence_highs_banner(solver)
        prob.solve(solver=solver)
        return prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)

    def violation(self, mu: ArrayLike) -> float:
        """Largest constraint violation of ``mu`` (0 when feasible)."""
        return self.worst_violation(mu)[0]

    def worst_violation(self, mu: ArrayLike, parts_only: bool = False) -> Tuple[float, str]:
        """The largest constraint violation of ``mu`` (0 when feasible) and which constraint.

        With ``parts_only``, ``mu`` holds the parts only (n_parts,) and only the rows
        and bounds without auxiliary columns are checked.

        Returns
        -------
        amount : float
        constraint : str
            The violated row, by kind (inequality row of ``A``, equality row of ``E``,
            lower or upper bound of a column) and index, and for a polytope declared by
            :meth:`from_cvxpy` the cvxpy constraint it comes from ("" when feasible).
        """
        mu = np.asarray(mu, dtype=float)
        k = self.n_parts
        if parts_only:
            mu = np.concatenate([mu, np.zeros(self.n_aux)])
        checks: List[Tuple[np.ndarray, str, Any]] = []
        if self.A.shape[0]:
            checks.append((self.A @ mu - self.b, "ineq", self.A))
        if self.E.shape[0]:
            checks.append((np.abs(self.E @ mu - self.e), "eq", self.E))
        checks += [(self.lb - mu, "lb", None), (mu - self.ub, "ub", None)]
        best, where = 0.0, ""
        for r, kind, M in checks:
            idx = None
            if parts_only:      # the rows without auxiliary columns, the parts' bounds
                idx = np.arange(k) if M is None else \
                    np.flatnonzero(np.diff(sp.csr_array(M[:, k:]).indptr) == 0)
                r = r[idx]
            if len(r) and r.max() > best:
                j = int(np.argmax(r))
                best, where = float(r[j]), self._row_name(kind, j if idx is None else int(idx[j]))
        return best, where

    def _row_name(self, kind, i):
        """Readable name of row ``i`` of ``kind`` ("ineq", "eq", "lb", "ub")."""
        if kind == "ineq":
            text = f"inequality row {i} (A[{i}] @ mu <= b[{i}] = {self.b[i] + 0.0:g})"
        elif kind == "eq":
            text = f"equality row {i} (E[{i}] @ mu == e[{i}] = {self.e[i] + 0.0:g})"
        else:
            bound = self.lb[i] if kind == "lb" else self.ub[i]
            text = (f"the {'lower' if kind == 'lb' else 'upper'} bound of "
                    f"{self.column_name(i)} ({'>=' if kind == 'lb' else '<='} {bound + 0.0:g})")
        origin = getattr(self, "_origin", None)
        if origin is not None:
            k, entry = origin[kind][0][i], origin[kind][1][i]
            if k >= 0:
                con = self._constraint_text[k]
                shape = self._constraint_shape[k]
                at = (f", entry {tuple(int(t) for t in np.unravel_index(entry, shape, order='F'))}"
                      if int(np.prod(shape)) > 1 else "")
                text += f", from constraint {k} `{con}`{at}"
            elif kind in ("lb", "ub") and i >= self.n_parts:
                text += ", from the variable's attributes"
        return text

    def contains(self, mu: ArrayLike, tol: float = FEASIBILITY_TOL) -> bool:
        """Whether ``mu`` satisfies every constraint within ``tol``."""
        return self.violation(mu) <= tol

    def check_output(self, mu: ArrayLike, name: str = "y") -> np.ndarray:
        """Check that ``mu`` is a 0/1 point of the polytope (hence one of its vertices).

        A 0/1 point of a polytope contained in the unit box is a vertex of the
        box and so of the polytope; when the polytope is not inside the box the
        rank of the active constraints is checked as well.

        Raises
        ------
        InvalidOutputError
        """
        mu = np.asarray(mu, dtype=float)
        if mu.shape != (self.n_parts,):
            raise InvalidOutputError(
                f"{name} encodes to {mu.shape} part indicators; expected ({self.n_parts},).")
        if not ((mu == 0) | (mu == 1)).all():
            raise InvalidOutputError(f"{name} must be a 0/1 output; it has entries not in {{0, 1}}.")
        if self.n_aux:
            return self._check_projection(mu, name)
        viol, which = self.worst_violation(mu)
        if viol > FEASIBILITY_TOL:
            if self.is_empty():
                raise DeclarationError(
                    "The declared output polytope is infeasible (empty): no output satisfies "
                    f"its constraints, so {name} cannot be one of its vertices.")
            raise InvalidOutputError(
                f"{name} is not a vertex of the declared output polytope: it violates "
                f"{which} by {viol:g}.")
        if self.in_unit_box():
            return mu
        active = [sp.csr_array(self.E)]
        if self.n_ineq:
            act = np.abs(self.A @ mu - self.b) <= FEASIBILITY_TOL
            active.append(self.A[act])
        tight = (np.abs(mu - self.lb) <= FEASIBILITY_TOL) | (np.abs(mu - self.ub) <= FEASIBILITY_TOL)
        active.append(sp.csr_array(sp.eye_array(self.n_parts).tocsr()[tight]))
        M = sp.vstack(active).toarray()
        if M.shape[0] == 0 or np.linalg.matrix_rank(M) < self.n_parts:
            raise InvalidOutputError(
                f"{name} is a point of the declared output polytope but not one of its vertices.")
        return mu

    def _check_projection(self, mu, name):
        """Check a 0/1 ``mu`` against the projection of an extended formulation."""
        full = self.lift(mu) if self.lift is not None else self._lift_lp(mu)
        if full is None or self.violation(full) > FEASIBILITY_TOL \
                or np.any(np.asarray(full)[:self.n_parts] != mu):
            viol, which = self.worst_violation(mu, parts_only=True)
            if viol > FEASIBILITY_TOL:
                raise InvalidOutputError(
                    f"{name} is not an output of the declared extended polytope: it violates "
                    f"{which} by {viol:g}.")
            raise InvalidOutputError(
                f"{name} is not an output of the declared extended polytope: no auxiliary "
                "variables complete it to a feasible point.")
        return mu  # 0/1 points of a projection inside the unit box are its vertices

    def _lift_lp(self, mu):
        """A feasible ``(mu, f)`` for fixed ``mu`` by an LP (HiGHS), or None; cached per
        distinct ``mu`` (training sets repeat outputs)."""
        cache = self.__dict__.setdefault("_lifts", {})
        key = np.asarray(mu, dtype=float).tobytes()
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            cache[key] = self._solve_lift(mu)
        return cache[key]

    def _solve_lift(self, mu):
        from scipy.optimize import linprog
        k = self.n_parts
        A, E = sp.csc_array(self.A), sp.csc_array(self.E)
        bounds = list(zip(np.where(np.isfinite(self.lb[k:]), self.lb[k:], None),
                          np.where(np.isfinite(self.ub[k:]), self.ub[k:], None)))
        res = linprog(np.zeros(self.n_aux),
                      A_ub=A[:, k:] if self.n_ineq else None,
                      b_ub=self.b - A[:, :k] @ mu if self.n_ineq else None,
                      A_eq=E[:, k:] if self.n_eq else None,
                      b_eq=self.e - E[:, :k] @ mu if self.n_eq else None,
                      bounds=bounds, method="highs")
        return np.concatenate([mu, res.x]) if res.status == 0 else None

    def __repr__(self) -> str:
        aux = f", n_aux={self.n_aux}" if self.n_aux else ""
        return (f"Polytope(n_parts={self.n_parts}{aux}, n_ineq={self.n_ineq}, n_eq={self.n_eq}, "
                f"lb in [{self.lb.min():g}, {self.lb.max():g}], "
                f"ub in [{self.ub.min():g}, {self.ub.max():g}])")


def check_output_encoding(mu: Any, n_parts: int, name: str = "y") -> np.ndarray:
    """Raise :class:`InvalidInputError` unless ``mu`` is a finite vector of length n_parts."""
    mu = check_finite_array(mu, name)
    if mu.shape != (n_parts,):
        raise InvalidInputError(f"{name} must encode to ({n_parts},) parts; got {mu.shape}.")
    return mu
