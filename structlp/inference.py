"""Inference: the best output of every example, by fast path or by one stacked LP.

For scores ``s_i`` (shape (L_i,)) the inference problem of example ``i`` is

.. math::

    \\max_{\\mu \\in P_i} s_i \\cdot \\mu ,

an LP whose optimum is attained at a vertex, i.e. an output, when ``P_i`` is
integral.  Examples whose model offers a combinatorial fast path
(:meth:`~structlp.model.StructuredModel.inference`) use it; the others are solved
together as one block-diagonal LP (a simplex solver, HiGHS, is preferred: it
returns vertices).  A fractional LP solution raises
:class:`~structlp.exceptions.FractionalSolutionError` instead of being rounded
silently.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .compiler import stacked_scores
from .exceptions import FractionalSolutionError
from .formulations import block_diag
from .solvers import check_solver, solve

#: Largest distance to {0, 1} accepted for an LP solution read as an output.
INTEGRALITY_TOL = 1e-5


def solve_stacked_lp(polytopes, scores, solver=None, solver_opts=None):
    """Solve ``max s_i . mu_i, mu_i in P_i`` for all i as one LP.

    Parameters
    ----------
    polytopes : list of Polytope
    scores : list of (L_i,) arrays

    Returns
    -------
    list of (L_i,) arrays
        The LP solutions (not rounded).
    """
    solver = check_solver(solver, kind="LP")
    for p in polytopes:
        p.check_bounded()
    A = block_diag([p.A for p in polytopes])
    E = block_diag([p.E for p in polytopes])
    b = np.concatenate([p.b for p in polytopes])
    e = np.concatenate([p.e for p in polytopes])
    lb = np.concatenate([p.lb for p in polytopes])
    ub = np.concatenate([p.ub for p in polytopes])
    # auxiliary columns of extended formulations (Polytope.n_aux) score 0
    s = np.concatenate([np.pad(sc, (0, p.n_columns - len(sc))) for p, sc in zip(polytopes, scores)])
    mu = cp.Variable(len(s), name="mu")
    cons = []
    if A.shape[0]:
        cons.append(sp.csr_array(A) @ mu <= b)
    if E.shape[0]:
        cons.append(sp.csr_array(E) @ mu == e)
    fl, fu = np.flatnonzero(np.isfinite(lb)), np.flatnonzero(np.isfinite(ub))
    if len(fl):
        cons.append(mu[fl] >= lb[fl])
    if len(fu):
        cons.append(mu[fu] <= ub[fu])
    problem = cp.Problem(cp.Maximize(s @ mu), cons)
    solve(problem, solver, solver_opts, what="the inference LP",
          hints={cp.INFEASIBLE: " A declared output polytope is empty.",
                 cp.UNBOUNDED: " A declared output polytope is unbounded; give every "
                               "part finite bounds."})
    sizes = np.cumsum([p.n_columns for p in polytopes])[:-1]
    return [v[:p.n_parts] for p, v in zip(polytopes, np.split(np.asarray(mu.value, dtype=float),
                                                               sizes))]


def _check_integral(model, i, sol):
    """``sol`` rounded to 0/1, or FractionalSolutionError."""
    r = np.rint(sol)
    gap = float(np.max(np.abs(sol - r))) if len(sol) else 0.0
    if gap > INTEGRALITY_TOL:
        raise FractionalSolutionError(
            f"The inference LP of example {i} has a fractional solution (an entry "
            f"{gap:.3g} away from 0/1): the output polytope of "
            f"{type(model).__name__} is not integral for these scores. Define "
            "inference(x, scores) for an exact combinatorial decoder.")
    return r


def argmax_parts(model, X, scores, polytopes=None, solver=None, solver_opts=None):
    """The best output of every example as its 0/1 part vector.

    As :func:`maximize` without decoding: each example's fast path
    (:meth:`~structlp.model.StructuredModel.inference_parts`), one LP for the others.

    Returns
    -------
    list of m 0/1 arrays, shape (L_i,)
    """
    mus = [model.inference_parts(x, s) for x, s in zip(X, scores)]
    pending = [i for i, mu in enumerate(mus) if mu is None]
    if pending:
        polys = [polytopes[i] if polytopes is not None else model.polytope(X[i])
                 for i in pending]
        sols = solve_stacked_lp(polys, [scores[i] for i in pending], solver, solver_opts)
        for i, sol in zip(pending, sols):
            mus[i] = _check_integral(model, i, sol)
    return mus


def maximize(model, X, scores, polytopes=None, solver=None, solver_opts=None):
    """The best output of every example for the given part scores.

    Parameters
    ----------
    model : StructuredModel
    X : list of m examples (already checked by ``model.check_x``)
    scores : list of m arrays, shape (L_i,)
    polytopes : list of Polytope, optional
        Built from the model when needed and not given.

    Returns
    -------
    outputs : list of m outputs (as ``model.decode`` gives them)
    mus : list of m 0/1 arrays, shape (L_i,)
    """
    outputs, mus = [None] * len(X), [None] * len(X)
    pending = []
    for i, (x, s) in enumerate(zip(X, scores)):
        y = model.inference(x, s)
        if y is None:
            pending.append(i)
        else:
            outputs[i] = y
            mus[i] = model.encoded_inference(x, y, len(s))
    if pending:
        polys = [polytopes[i] if polytopes is not None else model.checked_polytope(X[i])
                 for i in pending]
        sols = solve_stacked_lp(polys, [scores[i] for i in pending], solver, solver_opts)
        for i, sol in zip(pending, sols):
            r = _check_integral(model, i, sol)
            outputs[i] = model.decode(X[i], r)
            mus[i] = r
    return outputs, mus


def loss_augmented(model, data, w=None, solver=None, solver_opts=None, scores=None,
                   polytopes=None, return_mus=False):
    """Loss-augmented inference and the structured hinge loss of every example.

    Solves ``max_y w.f_i(y) + loss_i(y)`` and returns the maximizers and
    ``hinge_i = max_y [w.f_i(y) + loss_i(y)] - w.f_i(y_i)``.

    Parameters
    ----------
    model : StructuredModel
    data : TrainingData
    w : array, shape (d,), optional
        Weights; the part scores are ``Phi_i w``.
    scores : list of (L_i,) arrays, optional
        Part scores given directly (e.g. a kernel expansion) instead of ``w``.
    polytopes : list of Polytope, optional
        Defaults to ``data.polytopes`` (built from the model where missing).
    return_mus : bool
        Also return the maximizers as 0/1 part vectors.

    Returns
    -------
    outputs : list of m outputs
    hinge : ndarray, shape (m,)
    mus : list of m (L_i,) arrays, only with ``return_mus``
    """
    base = scores if scores is not None else stacked_scores(data.Phi, w)
    aug = [s + c for s, c in zip(base, data.c)]
    polys = polytopes if polytopes is not None else data.polytopes
    if polys is not None and any(p is None for p in polys):
        polys = None
    outputs, mus = maximize(model, data.X, aug, polys, solver, solver_opts)
    hinge = np.array([a @ mu + d - s @ mt for a, mu, d, s, mt
                      in zip(aug, mus, data.d, base, data.mu_true)])
    return (outputs, hinge, mus) if return_mus else (outputs, hinge)


def check_oracle_solver(model, data, polytopes=None, solver=None, owner=None):
    """Placeholder: filled in with the LP-oracle checks."""
    return None
