"""TreeFeatures.stack: the part features of several tree or graph examples as one
operator, checked against the explicit matrices stacked."""

import numpy as np
import pytest
import scipy.sparse as sp

from structlp.part_features import PartFeatures
from structlp.structures import TreeLabeling
from structlp.structures.graph_labeling import GraphLabeling, grid_example
from structlp.structures.tree_labeling import TreeFeatures


def tree_example(rng, n, dv=3, de=2, sparse=False, chain=True):
    parents = np.arange(-1, n - 1) if chain else \
        np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    V = rng.normal(size=(n, dv))
    return {"node_features": sp.csr_array(V) if sparse else V,
            "edge_features": rng.normal(size=(n - 1, de)), "parents": parents}


def instance(kind, rng, m=7):
    """(model, checked examples): chains, trees (dense or sparse node features) or loopy
    grids, with sizes from 1 node up."""
    if kind == "graph":
        model = GraphLabeling(3, mode="relaxed")
        X = [grid_example(rng.normal(size=(2, 3, 2)), rng.normal(size=(7, 2)))
             for _ in range(m)]
    else:
        model = TreeLabeling(3)
        X = [tree_example(rng, int(n), sparse=kind == "sparse chain", chain=kind != "tree")
             for n in rng.integers(1, 6, size=m)]
    return model, [model.check_x(x) for x in X]


def dense(P):
    return np.asarray(P.toarray() if sp.issparse(P) else P)


@pytest.mark.parametrize("kind", ["chain", "tree", "sparse chain", "graph"])
def test_stacked_tree_features_equal_explicit_matrices(kind, rng):
    """TreeFeatures.stack: every part of every example is one row of the explicit
    matrices stacked, with the same scores and joint features."""
    model, cxs = instance(kind, rng)
    st = TreeFeatures.stack([model.feature_operator(cx) for cx in cxs])
    Phis = [dense(model.features(cx)) for cx in cxs]
    ex = np.concatenate([np.full(len(P), i) for i, P in enumerate(Phis)])
    j = np.concatenate([np.arange(len(P)) for P in Phis])
    rows = st.rows(ex, j)
    assert st.shape == (sum(len(P) for P in Phis), Phis[0].shape[1])
    np.testing.assert_array_equal(np.sort(rows), np.arange(st.shape[0]))   # a bijection
    Phi = np.empty(st.shape)
    Phi[rows] = np.vstack(Phis)
    np.testing.assert_allclose(st.toarray(), Phi, rtol=0, atol=1e-12)
    w, mu = rng.normal(size=st.shape[1]), rng.normal(size=st.shape[0])
    np.testing.assert_allclose(st.scores(w), Phi @ w, rtol=0, atol=1e-12)
    some = rng.integers(0, st.shape[0], size=40)
    np.testing.assert_allclose(st.scores_at(w, some), (Phi @ w)[some], rtol=0, atol=1e-12)
    np.testing.assert_allclose(st.joint(mu), Phi.T @ mu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(st.joint_sparse(some, mu[:40]), Phi[some].T @ mu[:40],
                               rtol=0, atol=1e-12)


def test_tree_features_stack_refuses_mixed_operators(rng):
    a = TreeFeatures(TreeLabeling(3).check_x(tree_example(rng, 3)), 3)
    b = TreeFeatures(TreeLabeling(4).check_x(tree_example(rng, 3)), 4)
    c = TreeFeatures(TreeLabeling(3).check_x(tree_example(rng, 3, dv=2)), 3)
    assert TreeFeatures.stack([a, b]) is None and TreeFeatures.stack([a, c]) is None
    assert TreeFeatures.stack([]) is None and PartFeatures.stack([a]) is None
    assert TreeFeatures.stack([a, a]).shape == (2 * a.shape[0], a.shape[1])
