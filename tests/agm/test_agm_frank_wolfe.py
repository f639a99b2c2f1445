"""AGM by block-coordinate Frank–Wolfe on the inner game as a structured model
(``method="frank_wolfe"``, :mod:`structlp.agm.game_model`): the same optimum as the joint QP
and the cutting plane, on trees and junction trees, with a certified gap."""

import numpy as np
import pytest

import structlp
from structlp.agm import AdversarialGraphicalModel
from structlp.agm.game import loss_matrix
from structlp.agm.game_model import AdversarialGame, GameExample
from structlp.agm.model import check_tree_dataset
from structlp.exceptions import InvalidInputError, InvalidParameterError

from agm_oracles import random_tree_data


@pytest.mark.parametrize("chain,loss,weights", [(True, "zero_one", None),
                                                (False, "absolute", "position"),
                                                (False, "squared", None)])
@pytest.mark.parametrize("reg", [0.5, 0.03])
def test_frank_wolfe_reaches_the_qp_optimum(rng, chain, loss, weights, reg):
    """The QP's optimum (an interior-point solve of one problem) within the certified gap;
    objective_ is the exact re-evaluation (one LP per example, to HiGHS's tolerances); the minimizers agree."""
    X, Y = random_tree_data(rng, 8, 5, chain=chain)
    kw = dict(loss=loss, reg=reg, node_weights=weights, normalize_weights=weights is not None)
    qp = AdversarialGraphicalModel(3, method="qp", **kw).fit(X, Y)
    fw = AdversarialGraphicalModel(3, method="frank_wolfe", tol=1e-7, random_state=0,
                                   **kw).fit(X, Y)
    assert fw.converged_ and fw.n_iter_ < 1000
    # (two HiGHS solves of each inner LP: equal to its tolerances, about 1e-8)
    assert fw.objective_ == pytest.approx(fw.objective(X, Y), rel=1e-7)
    gap = fw.objective_ - fw.lower_bound_
    assert 0 <= gap <= 1e-7 * fw.objective_
    # the QP's optimum lies in [lower_bound_, objective_] (to the QP's own accuracy)
    assert fw.lower_bound_ - 1e-7 <= qp.objective_ <= fw.objective_ + 1e-7
    # strongly convex: |dtheta|^2 <= 2 (gap + the QP's error) / reg
    np.testing.assert_allclose(fw.coef_, qp.coef_, atol=3 * np.sqrt(2e-7 / reg))
    assert fw.inner_stats_["solves"] >= len(X) * fw.n_iter_


def test_frank_wolfe_on_junction_trees_and_against_the_cutting_plane(rng):
    """Graph examples (a 4-cycle, handled by its junction tree) and trees mixed: the cutting
    plane's certified optimum, the same predictions."""
    from structlp.agm import graph
    X, Y = random_tree_data(rng, 5, 4, chain=False)
    for _ in range(4):
        X.append(graph(rng.standard_normal((4, X[0]["node_features"].shape[1])),
                       [(0, 1), (1, 2), (2, 3), (3, 0)],
                       rng.standard_normal((4, 2))))
        Y.append(rng.integers(0, 3, 4))
    cpl = AdversarialGraphicalModel(3, loss="absolute", reg=0.2, method="cutting_plane",
                                    tol=1e-9).fit(X, Y)
    fw = AdversarialGraphicalModel(3, loss="absolute", reg=0.2, method="frank_wolfe",
                                   tol=1e-8, random_state=1).fit(X, Y)
    assert fw.lower_bound_ - 1e-8 <= cpl.objective_ <= fw.objective_ + 1e-8
    assert cpl.lower_bound_ - 1e-8 <= fw.objective_
    assert [list(p) for p in fw.predict(X)] == [list(p) for p in cpl.predict(X)]


def test_the_game_model_with_every_max_margin_learner(rng):
    """AdversarialGame is a structured model: MaxMarginLearner (the inner LPs dualized) and
    FrankWolfeLearner reach reg times AGM's optimum."""
    k, reg = 3, 0.3
    X, Y = random_tree_data(rng, 6, 4, chain=False)
    L = loss_matrix("absolute", k)
    ref = AdversarialGraphicalModel(k, loss="absolute", reg=reg, method="qp").fit(X, Y)
    exs, Ys, _, _ = check_tree_dataset(X, Y, k, "test")
    G = [GameExample(ex, np.broadcast_to(L, (ex.n_nodes, k, k))) for ex in exs]
    C = 1.0 / (reg * len(G))
    for learner in (structlp.MaxMarginLearner(AdversarialGame(k), C=C),
                    structlp.FrankWolfeLearner(AdversarialGame(k), C=C, tol=1e-8,
                                               random_state=0)):
        learner.fit(G, Ys)
        assert reg * learner.objective_ == pytest.approx(ref.objective_, rel=1e-6)
        np.testing.assert_allclose(learner.coef_, ref.coef_, atol=1e-3)
    # the truth is a vertex at v = 0, the oracle returns fractional vertices in the box
    model = AdversarialGame(k)
    mu = model.encode(G[0], Ys[0])
    assert set(np.unique(mu)) <= {0.0, 1.0} and not mu[-exs[0].n_nodes:].any()
    x = model.inference_parts(G[0], rng.standard_normal(len(mu)) * 5)
    P = model.polytope(G[0])
    assert P.violation(x) <= 1e-8 and np.all((x >= P.lb) & (x <= P.ub))
    assert list(model.decode(G[0], mu)) == list(Ys[0])
    with pytest.raises(InvalidInputError, match="GameExample"):
        model.check_x(X[0])


def test_frank_wolfe_callback_max_iter_and_parameters(rng):
    X, Y = random_tree_data(rng, 5, 4, chain=True)
    seen = []
    fw = AdversarialGraphicalModel(3, reg=0.2, method="frank_wolfe", tol=1e-6, random_state=0,
                                   callback=seen.append).fit(X, Y)
    assert [s["iteration"] for s in seen] == list(range(1, len(seen) + 1))
    last = seen[-1]       # the exact check, in the AGM objective's units
    assert last["objective"] == pytest.approx(fw.objective_, rel=1e-12)
    assert last["duality_gap"] == pytest.approx(fw.objective_ - fw.lower_bound_, rel=1e-9)
    with pytest.warns(structlp.ConvergenceWarning, match="max_iter=2"):
        short = AdversarialGraphicalModel(3, reg=0.2, method="frank_wolfe", tol=1e-9,
                                          max_iter=2).fit(X, Y)
    assert not short.converged_ and short.n_iter_ == 2
    assert short.objective_ == pytest.approx(short.objective(X, Y), rel=1e-7)
    assert short.lower_bound_ <= fw.objective_ + 1e-9 and short.objective_ >= fw.lower_bound_
    with pytest.raises(InvalidParameterError, match="'reg'.*> 0 with method='frank_wolfe'"):
        AdversarialGraphicalModel(3, reg=0.0, method="frank_wolfe").fit(X, Y)
    with pytest.raises(InvalidParameterError, match="'tol'"):
        AdversarialGraphicalModel(3, method="frank_wolfe", tol=-1.0).fit(X, Y)
