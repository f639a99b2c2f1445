"""Helpers of :class:`~structlp.polytope.Polytope`: the bounds its rows imply, and the checks of
a cvxpy declaration.

Bounds of the columns of ``{A x <= b, E x = e, lb <= x <= ub}`` implied by its rows:

:func:`propagate_bounds` tightens the explicit bounds by activity-based bound propagation
(each row bounds a column once all its other columns are bounded); :func:`implied_bounds`
adds one LP (HiGHS) per column side that propagation leaves infinite, re-propagating after
each, so that a side stays infinite only when the polytope is truly unbounded there.
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..exceptions import DeclarationError

#: Rounds of propagation at most (each costs one pass over the nonzeros).
MAX_ROUNDS = 50


def _row_form(A, b, E, e):
    """The inequality rows ``G x <= h`` of ``A x <= b`` and ``E x = e`` (both signs)."""
    G = sp.vstack([sp.csr_array(A), sp.csr_array(E), -sp.csr_array(E)], format="coo")
    h = np.concatenate([b, e, -e])
    keep = G.data != 0
    return G.row[keep], G.col[keep], G.data[keep], h


def propagate_bounds(A, b, E, e, lb, ub) -> Tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: ``lb``, ``ub`` tightened by bound propagation through the rows.

    A row ``sum_k a_k x_k <= h`` gives ``a_j x_j <= h - sum_{k != j} min(a_k x_k)``
    whenever the other terms are bounded below; equalities count as two rows.  Valid
    bounds only (never tighter than the polytope), possibly looser than the exact ones.
    """
    lo = np.array(lb, dtype=float)
    hi = np.array(ub, dtype=float)
    rows, cols, vals, h = _row_form(A, b, E, e)
    if len(vals) == 0:
        return lo, hi
    n_rows = len(h)
    pos = vals > 0
    for _ in range(MAX_ROUNDS):
        # smallest value of each term a_k x_k over the current box
        term = np.where(pos, vals * lo[cols], vals * hi[cols])
        inf = ~np.isfinite(term)
        n_inf = np.bincount(rows, weights=inf, minlength=n_rows)
        fin_sum = np.bincount(rows, weights=np.where(inf, 0.0, term), minlength=n_rows)
        # the others' smallest sum: finite when no other term is infinite
        others = np.where(inf, fin_sum[rows], fin_sum[rows] - term)
        ok = n_inf[rows] - inf == 0
        bound = (h[rows] - others) / vals
        changed = False
        up = ok & pos
        if up.any():
            new_hi = hi.copy()
            np.minimum.at(new_hi, cols[up], bound[up])
            changed |= bool(np.any(new_hi < hi - 1e-9 * (1 + np.abs(np.where(
                np.isfinite(hi), hi, 0.0)))))
            hi = new_hi
        down = ok & ~pos
        if down.any():
            new_lo = lo.copy()
            np.maximum.at(new_lo, cols[down], bound[down])
            changed |= bool(np.any(new_lo > lo + 1e-9 * (1 + np.abs(np.where(
                np.isfinite(lo), lo, 0.0)))))
            lo = new_lo
        if not changed:
            break
    return lo, hi


def implied_bounds(A, b, E, e, lb, ub) -> Tuple[np.ndarray, np.ndarray, bool]:
    """``(lo, hi, empty)``: the bounds of every column implied by the whole system.

    Bound propagation first (:func:`propagate_bounds`); each column side it leaves infinite
    is then maximized by an LP (HiGHS through :func:`scipy.optimize.linprog`), and the
    finite optimum propagated again.  ``inf`` remains only where the LP is unbounded;
    ``empty`` is True when an LP found the system infeasible (then nothing is bounded
    and the caller reports the empty polytope).
    """
    from scipy.optimize import linprog
    lo, hi = propagate_bounds(A, b, E, e, lb, ub)
    A, E = sp.csr_array(A), sp.csr_array(E)
    tried = set()
    while True:
        todo = [(j, side) for side, vals in ((1, hi), (-1, lo))
                for j in np.flatnonzero(~np.isfinite(vals)) if (int(j), side) not in tried]
        if not todo:
            return lo, hi, False
        j, side = int(todo[0][0]), todo[0][1]
        tried.add((j, side))
        c = np.zeros(len(lo))
        c[j] = -side                       # linprog minimizes: maximize side * x_j
        bounds = [(a if np.isfinite(a) else None, z if np.isfinite(z) else None)
                  for a, z in zip(lo, hi)]

        def lp(cost):
            return linprog(cost, A_ub=A if A.shape[0] else None, b_ub=b if A.shape[0] else None,
                           A_eq=E if E.shape[0] else None, b_eq=e if E.shape[0] else None,
                           bounds=bounds, method="highs")

        res = lp(c)
        # HiGHS's presolve may call an unbounded LP infeasible: a feasibility LP decides
        if res.status == 2 and lp(np.zeros(len(lo))).status == 2:
            return lo, hi, True
        if res.status != 0:                # unbounded (or HiGHS could not tell): unbounded
            continue
        if side == 1:
            hi[j] = res.x[j]
        else:
            lo[j] = res.x[j]
        lo, hi = propagate_bounds(A, b, E, e, lo, hi)


def one_line(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_linked(mu: Any, aux: Sequence[Any], con_vars: Sequence[Any]) -> None:
    """Refuse cvxpy constraints that never involve ``mu``, and auxiliary variables that no
    chain of constraints links to ``mu``: they restrict no output (they only make the
    polytope empty or unbounded): usually a constraint written on the wrong variable.

    ``aux``: the other variables; ``con_vars``: the variables of each constraint.

    Raises
    ------
    DeclarationError
        Naming the variable and its constraints.
    """
    parent = {mu.id: mu.id}

    def root(i):
        while parent.setdefault(i, i) != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for variables in con_vars:
        for v in variables[1:]:
            parent[root(v.id)] = root(variables[0].id)
    if all(v.id != mu.id for variables in con_vars for v in variables):
        others = f" (they involve only {aux[0].name()!r}" + (" and others)" if len(aux) > 1
                                                               else ")") if aux else ""
        raise DeclarationError(
            f"None of the {len(con_vars)} constraints involves the part-indicator variable "
            f"{mu.name()!r}{others}, so the output polytope leaves every part unconstrained "
            "and unbounded; write the constraints on mu (e.g. mu >= 0, mu <= 1, "
            "A @ mu <= b).")
    for v in aux:
        if root(v.id) != root(mu.id):
            ks = [k for k, variables in enumerate(con_vars) if any(u.id == v.id
                                                                  for u in variables)]
            raise DeclarationError(
                f"The variable {v.name()!r} of constraint(s) {ks} is not linked to the "
                f"part-indicator variable {mu.name()!r}: no constraint involves it together "
                "with mu, directly or through other auxiliary variables, so it restricts no "
                "output. Write those constraints on mu, or link the variable to mu.")
