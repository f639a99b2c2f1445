"""The dualized loss-augmented bound equals the primal LP value, example by example."""

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

from oracles import brute_force_hinge, enumerate_bmatchings
from structlp.compiler import prepare
from structlp.formulations import MinMax
from structlp.inference import loss_augmented
from structlp.structures import BipartiteMatching


def dual_hinge(data, w, solver, opts):
    """min over the dual variables of the per-example bound, for a fixed w."""
    blocks = MinMax().blocks(data)
    xi = cp.Variable(data.n_examples)
    var = {"w": cp.Constant(w), "xi": xi}
    Phi = data.stacked_features()
    for name, (size, nonneg) in blocks.aux.items():
        var[name] = cp.Variable(size, nonneg=nonneg)
    cons = []
    for group, op in ((blocks.ineq, ">="), (blocks.eq, "==")):
        for terms, rhs in group:
            expr = sum((sp.csr_array(M) @ Phi @ w if k == "parts" else sp.csr_array(M) @ var[k])
                       for k, M in terms.items() if M.shape[1])
            cons.append(expr >= rhs if op == ">=" else expr == rhs)
    cp.Problem(cp.Minimize(cp.sum(xi)), cons).solve(solver=solver, **opts)
    return xi.value


@pytest.mark.parametrize("R, P, weighted", [(1, 1, False), (2, 2, False), (2, 3, True)])
def test_dual_bound_equals_primal_loss_augmented_value(solver, R, P, weighted, rng):
    name, opts, tol = solver
    n_rows, n_cols, d = 4, 3, 3
    ew = (lambda x, y: 0.5 + np.abs(x[..., 0])) if weighted else None
    model = BipartiteMatching(R=R, P=P, edge_weights=ew)
    outputs = enumerate_bmatchings(n_rows, n_cols, R, P)
    X = [rng.normal(size=(n_rows, n_cols, d)) for _ in range(5)]
    Y = [outputs[i] for i in rng.choice(len(outputs), size=5)]
    data = prepare(model, X, Y)
    w = rng.normal(size=d)
    bound = dual_hinge(data, w, name, opts)
    _, lp_hinge = loss_augmented(model, data, w)
    enum = [brute_force_hinge(x, y, w, outputs, lambda yy, x=x, y=y: model.task_loss(x, y, yy))
            for x, y in zip(X, Y)]
    np.testing.assert_allclose(lp_hinge, enum, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(bound, enum, rtol=tol, atol=tol)
