"""The kernelized dual of the joint max-margin QP, for any formulation.

A formulation gives the primal constraints as :class:`~structlp.formulations.LinearBlocks`
in ``w`` (through part features: ``M_parts @ Phi @ w``), the slacks ``xi`` and
auxiliary variables ``z``:

.. math::

    \\min_{w,\\xi,z}\\; \\tfrac12\\|w\\|^2 + C\\,1^T\\xi \\quad\\text{s.t.}\\quad
    G_p\\Phi w + G_\\xi\\xi + G_z z \\ge h,\\;\\;
    H_p\\Phi w + H_\\xi\\xi + H_z z = k,\\;\\; z_{\\text{nonneg}} \\ge 0 .

With multipliers ``alpha >= 0`` and ``beta`` its Lagrange dual is

.. math::

    \\max_{\\alpha\\ge0,\\beta}\\; h^T\\alpha + k^T\\beta - \\tfrac12 u^T K u,\\quad
    u = G_p^T\\alpha + H_p^T\\beta,

subject to ``G_xi^T alpha + H_xi^T beta = C 1`` and ``G_z^T alpha + H_z^T beta``
``= 0`` on free ``z`` (``<= 0`` on non-negative ``z``), where ``K = Phi Phi^T``
is the kernel between training parts.  The primal weights are
``w = Phi^T u``, so the score of a new part is ``sum_p u_p k(phi_p, phi)``:
any kernel works.  For the min-max formulation ``u`` is ``C (y_i - m_i)`` of
Taskar's marginal dual; for certificates it is the dual of Eq. 15 with the box
the slacks add.  ``K`` enters only through a factor ``G`` with ``K ≈ G G^T``
(:mod:`structlp.kernels`): the program carries ``|G^T u|^2`` with an auxiliary
``t = G^T u``, never a dense quadratic form.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .exceptions import InvalidParameterError
from .formulations import LinearBlocks


@dataclass
class CompiledDual:
    """The dual QP and the handles to read its solution.

    Attributes
    ----------
    problem : cvxpy.Problem  (a minimization of the negated dual objective)
    u : cvxpy.Expression, shape (n_parts,) — the part coefficients
    xi_constraint : cvxpy constraint whose multipliers are the slacks
    """

    problem: cp.Problem
    u: cp.Expression
    xi_constraint: object

    @property
    def objective(self):
        """The dual objective (= the primal optimum at strong duality)."""
        return -float(self.problem.value)


def _stack(groups, key, n_cols):
    mats = [sp.csr_array(terms[key]) if key in terms else None for terms, _ in groups]
    rows = [len(rhs) for _, rhs in groups]
    out = [M if M is not None else sp.csr_array((r, n_cols)) for M, r in zip(mats, rows)]
    return sp.vstack(out, format="csr") if out else sp.csr_array((0, n_cols))


def compile_dual(blocks: LinearBlocks, n_parts, n_examples, C, factor, formulation_name=""):
    """Build the dual QP of the formulation's blocks.

    Parameters
    ----------
    blocks : LinearBlocks
        Every dependence on ``w`` must be a ``"parts"`` term.
    n_parts, n_examples : int
    C : float
    factor : ndarray or sparse, shape (n_parts, rank)
        ``G`` with ``K ≈ G G^T``.
    """
    for terms, _ in blocks.ineq + blocks.eq:
        if "w" in terms:
            raise InvalidParameterError(
                f"The {formulation_name or 'chosen'} formulation writes w directly, not "
                "through part features, so it has no kernelized dual; use dual=False.")
    ineq = [(t, r) for t, r in blocks.ineq if len(r)]
    eq = [(t, r) for t, r in blocks.eq if len(r)]
    n_a = sum(len(r) for _, r in ineq)
    n_b = sum(len(r) for _, r in eq)
    alpha = cp.Variable(n_a, nonneg=True, name="alpha") if n_a else None
    beta = cp.Variable(n_b, name="beta") if n_b else None

    def combo(key, n_cols):
        """G_key^T alpha + H_key^T beta as a cvxpy expression."""
        expr = 0
        if n_a:
            M = _stack(ineq, key, n_cols)
            if M.nnz:
                expr = expr + sp.csr_array(M.T) @ alpha
        if n_b:
            M = _stack(eq, key, n_cols)
            if M.nnz:
                expr = expr + sp.csr_array(M.T) @ beta
        return expr

    u = combo("parts", n_parts)
    if isinstance(u, int):
        u = cp.Constant(np.zeros(n_parts))
    G = factor
    rank = G.shape[1]
    t = cp.Variable(rank, name="t")
    constraints = [t == (sp.csr_array(G.T) if sp.issparse(G) else np.asarray(G).T) @ u]
    xi_con = combo("xi", n_examples) == C * np.ones(n_examples)
    constraints.append(xi_con)
    for name, (size, nonneg) in blocks.aux.items():
        if not size:
            continue
        expr = combo(name, size)
        if isinstance(expr, int):
            continue
        constraints.append(expr <= 0 if nonneg else expr == 0)
    h = np.concatenate([r for _, r in ineq]) if n_a else np.zeros(0)
    k = np.concatenate([r for _, r in eq]) if n_b else np.zeros(0)
    lin = 0
    if alpha is not None:
        lin = lin + h @ alpha
    if beta is not None:
        lin = lin + k @ beta
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(t) - lin), constraints)
    return CompiledDual(problem, u, xi_con)
