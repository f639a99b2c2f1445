"""Recovery of the adversary's pairwise marginals (Fathony et al. 2018, Eq. 9).

Given the adversary's node marginals of a parent ``r_parent`` (k1,) and a child
``r_child`` (k2,) and the edge potentials ``B`` (k1, k2), the pairwise marginal is

.. math::

    Q^* = \\arg\\max_{Q \\ge 0} \\langle Q, B\\rangle
    \\quad\\text{s.t.}\\quad Q 1 = r_{parent},\\; Q^T 1 = r_{child},

an optimal-transport problem with cost ``-B``.
"""

from __future__ import annotations

import numbers
import warnings

from typing import Any, Dict, Optional

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike

from ..utils.validation import check_choice, check_finite_array, check_scalar
from ..exceptions import InvalidInputError, SolverError
from ..solvers import check_solver, check_solver_opts, solve

#: How far from 1 the sum of a given marginal may be before it is rejected (and how far
#: the marginals of a Sinkhorn plan may be from the given ones).
MARGINAL_TOL = 1e-6
#: Iterations of Sinkhorn (POT's ``numItermax``) before its plan is checked.
SINKHORN_MAX_ITER = 20000


def _check_marginal(r, name):
    r = check_finite_array(r, name, ndim=1)
    if r.size == 0:
        raise InvalidInputError(f"{name} must have at least one entry.")
    if np.any(r < -MARGINAL_TOL):
        raise InvalidInputError(f"{name} must be a distribution; it has entry {r.min():g} < 0.")
    if abs(r.sum() - 1) > MARGINAL_TOL:
        raise InvalidInputError(f"{name} must be a distribution summing to 1; it sums to {r.sum():g}.")
    r = np.clip(r, 0, None)
    return r / r.sum()


def _emd_c():
    """POT's network-simplex kernel ``emd_c`` (skips ``ot.emd``'s Python overhead), or None."""
    try:
        from ot.lp.emd_wrap import emd_c
        a = np.array([0.5, 0.5])
        G, _, _, _, code = emd_c(a, a, np.ascontiguousarray(1.0 - np.eye(2)), 100000, 1)
        return emd_c if code == 1 and np.allclose(G, np.diag(a)) else None
    except Exception:            # a POT version with another private signature
        return None


_EMD_C = _emd_c()


def emd_max(r_parent, r_child, B):
    """Exact maximizer by POT's network simplex (no checks; inputs are distributions)."""
    M = np.ascontiguousarray(B.max() - B, dtype=float)  # cost >= 0; a shift keeps the argmax
    a = np.ascontiguousarray(r_parent, dtype=float)
    b = np.ascontiguousarray(r_child, dtype=float)
    b = b * (a.sum() / b.sum())
    if _EMD_C is not None:
        G, _, _, _, code = _EMD_C(a, b, M, 100000, 1)
        if code == 1:            # optimal
            return np.asarray(G, dtype=float)
    import ot
    return np.asarray(ot.emd(a, b, M), dtype=float)


def recover_pairwise(r_parent: ArrayLike, r_child: ArrayLike, B: ArrayLike, method: str = "emd",
                     reg: float = 1e-2, solver: Optional[str] = None,
                     solver_opts: Optional[Dict[str, Any]] = None) -> np.ndarray:
    """The adversary's pairwise marginal for an edge (Fathony et al. 2018, Eq. 9).

    Solves

    .. math::

        \\max_{Q\\ge 0}\\; \\langle Q, B\\rangle
        \\quad\\text{s.t.}\\quad Q 1 = r_{parent},\\quad Q^T 1 = r_{child}.

    Parameters
    ----------
    r_parent : array, shape (k1,)
        Node marginal of the parent (a distribution).
    r_child : array, shape (k2,)
        Node marginal of the child (a distribution).
    B : array, shape (k1, k2)
        Edge potentials, ``B[a, b]`` for parent label ``a`` and child label ``b``.
    method : {"emd", "lp", "sinkhorn"}
        "emd": POT's exact network simplex (``ot.emd`` with cost ``-B``);
        "lp": the same LP in cvxpy; "sinkhorn": entropic optimal transport
        (``ot.sinkhorn``), **approximate**: it maximizes
        ``<Q, B> + reg * H(Q)`` (with B rescaled to [0, 1] internally), so its Q
        is dense and its objective slightly below the exact maximum.
    reg : float > 0
        Entropic regularization for "sinkhorn".
    solver, solver_opts
        cvxpy LP solver (default HiGHS) for "lp".

    Returns
    -------
    Q : ndarray, shape (k1, k2)
        Row sums ``r_parent`` and column sums ``r_child``.

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import recover_pairwise
    >>> B = np.array([[1.0, 0.0], [0.0, 1.0]])          # rewards agreement
    >>> Q = recover_pairwise([0.5, 0.5], [0.7, 0.3], B)
    >>> Q, Q.sum(axis=1), Q.sum(axis=0)
    (array([[0.5, 0. ],
           [0.2, 0.3]]), array([0.5, 0.5]), array([0.7, 0.3]))
    """
    check_choice(method, "method", ("emd", "lp", "sinkhorn"), owner="recover_pairwise")
    rp = _check_marginal(r_parent, "r_parent")
    rc = _check_marginal(r_child, "r_child")
    B = np.asarray(check_finite_array(B, "B", shape=(rp.size, rc.size)))
    if method == "emd":
        return emd_max(rp, rc, B)
    if method == "lp":
        plan = cp.Variable((rp.size, rc.size), nonneg=True, name="Q")
        prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(B, plan))),
                          [cp.sum(plan, axis=1) == rp, cp.sum(plan, axis=0) == rc])
        solve(prob, check_solver(solver, kind="LP"),
              check_solver_opts(solver_opts, "recover_pairwise"), what="the recovery LP")
        return np.clip(np.asarray(plan.value, dtype=float), 0, None)
    reg = check_scalar(reg, "reg", kind=numbers.Real, low=0, low_inclusive=False,
                       owner="recover_pairwise")
    import ot
    span = float(B.max() - B.min()) or 1.0
    M = (B.max() - B) / span
    with warnings.catch_warnings():     # POT's "did not converge": checked below instead
        warnings.filterwarnings("ignore", message="Sinkhorn did not converge")
        Q = np.asarray(ot.sinkhorn(rp, rc, M, reg, method="sinkhorn_log",
                                   numItermax=SINKHORN_MAX_ITER, stopThr=1e-10), dtype=float)
    if not np.all(np.isfinite(Q)):
        raise SolverError("Sinkhorn diverged in recover_pairwise; increase 'reg'.")
    off = max(np.abs(Q.sum(axis=1) - rp).max(), np.abs(Q.sum(axis=0) - rc).max())
    if off > MARGINAL_TOL:
        raise SolverError(
            f"Sinkhorn in recover_pairwise(method='sinkhorn', reg={reg:g}) did not converge in "
            f"numItermax={SINKHORN_MAX_ITER} iterations: the plan's marginals are off by "
            f"{off:.3g} > {MARGINAL_TOL:g}. Increase 'reg' (e.g. 1e-2), or use method='emd' "
            "(exact).")
    return Q


def recover_cliques(gx, R, B):
    """Eq. 9 on a junction tree: the adversary's clique marginals for given node marginals.

    Solves the multi-marginal transport LP

    .. math::

        \\max_{\\mu \\in \\mathcal M(G)} \\sum_e \\langle Q_e(\\mu), B_e\\rangle
        \\quad\\text{s.t.}\\quad r_i(\\mu) = R_i \\;\\; \\forall i

    over the clique-marginal polytope of the graph example ``gx``
    (:mod:`structlp.graphical.junction`), by HiGHS.  Always feasible (the product of
    the ``R_i`` is a joint distribution with these marginals); on a tree it is
    Eq. 9 for every edge at once.

    Parameters
    ----------
    gx : GraphExample; R : ndarray (n, k), rows distributions; B : ndarray (E, k, k)

    Returns
    -------
    Q : ndarray (E, k, k), the edge marginals of the optimal clique marginals
    """
    from scipy.optimize import linprog
    import scipy.sparse as sp
    from ..graphical.junction import clique_polytope_rows, clique_scores, pairwise_marginals
    n, k = R.shape
    T = gx.tables(k)
    E, e = clique_polytope_rows(gx, k)
    c = clique_scores(gx, np.zeros((n, k)), B)
    res = linprog(-c, A_eq=sp.vstack([E, T.P[:n * k]], format="csr"),
                  b_eq=np.concatenate([e, np.ravel(R)]), bounds=(0, None), method="highs")
    if res.status != 0:
        raise SolverError(f"HiGHS failed on the clique recovery LP: {res.message}")
    return pairwise_marginals(gx, np.clip(res.x, 0, None), k)[1]
