"""verbose and callback of AdversarialGraphicalModel, TreeCRF and JunctionTreeCRF.

Oracles: the callback's reports against the learners' own attributes (n_iter_, objective_,
coef_ differences), an early stop against the fit with the same budget, caplog for the lines.
"""

import logging

import numpy as np
import pytest

from structlp.agm import AdversarialGraphicalModel, JunctionTreeCRF, TreeCRF
from structlp.exceptions import InvalidParameterError

from agm_graph_oracles import LOOPY, random_graph_data
from agm_oracles import random_tree_data


def _lines(caplog, name):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(name + ":")]


@pytest.fixture
def trees():
    return random_tree_data(np.random.default_rng(0), 4, 5)


@pytest.mark.parametrize("cls", [AdversarialGraphicalModel, TreeCRF, JunctionTreeCRF])
@pytest.mark.parametrize("bad", [{"verbose": -1}, {"verbose": "yes"}, {"callback": 1}])
def test_bad_progress_parameters(cls, bad, trees):
    X, Y = trees
    with pytest.raises(InvalidParameterError, match=f"'{next(iter(bad))}'"):
        cls(3, **bad).fit(X, Y)


def test_agm_subgradient_reports_every_epoch(trees, caplog):
    X, Y = trees
    infos = []
    est = AdversarialGraphicalModel(3, max_epochs=4, average=False, random_state=0, verbose=1,
                                    callback=infos.append)
    with caplog.at_level(logging.INFO, logger="structlp"):
        est.fit(X, Y)
    lines = _lines(caplog, "AdversarialGraphicalModel")
    assert len(lines) == 4 and all("step_norm" in s and "time" in s for s in lines)
    assert [i["iteration"] for i in infos] == [1, 2, 3, 4]
    assert infos[-1]["updates"] == est.n_iter_ == 4 * len(X)
    assert all(i["step_norm"] > 0 for i in infos)
    # the epoch steps add up to at least the distance travelled from theta = 0
    assert sum(i["step_norm"] for i in infos) >= np.linalg.norm(est.coef_) - 1e-12


def test_agm_callback_stops_after_the_epoch(trees):
    X, Y = trees
    seen = []

    def stop(info):
        seen.append(info["iteration"])
        return info["iteration"] == 2

    est = AdversarialGraphicalModel(3, max_epochs=6, average=False, random_state=0,
                                    callback=stop).fit(X, Y)
    assert seen == [1, 2] and est.n_iter_ == 2 * len(X)
    two = AdversarialGraphicalModel(3, max_epochs=2, average=False, random_state=0).fit(X, Y)
    np.testing.assert_array_equal(est.coef_, two.coef_)     # same iterates, same stop
    assert all(not callable(v) for k, v in vars(est).items() if k.endswith("_"))


def test_agm_qp_logs_compile_and_solve(trees, caplog):
    X, Y = trees
    called = []
    with caplog.at_level(logging.INFO, logger="structlp"):
        AdversarialGraphicalModel(3, method="qp", reg=0.1, verbose=1,
                                  callback=called.append).fit(X, Y)
    lines = _lines(caplog, "AdversarialGraphicalModel")
    assert any("compiled the QP" in s for s in lines) and any("solved" in s for s in lines)
    assert called == []                                     # no epochs in the QP


def _graphs():
    return random_graph_data(np.random.default_rng(1), LOOPY["cycle4"][0], 3, k=3)


@pytest.mark.parametrize("cls", [TreeCRF, JunctionTreeCRF])
def test_crf_reports_every_lbfgs_iteration(cls, trees, caplog):
    X, Y = trees if cls is TreeCRF else _graphs()
    infos = []
    est = cls(3, reg=0.1, verbose=1, callback=infos.append)
    with caplog.at_level(logging.INFO, logger="structlp"):
        est.fit(X, Y)
    lines = _lines(caplog, cls.__name__)
    assert len(lines) == len(infos) == est.n_iter_ > 1 and "objective" in lines[0]
    assert est.converged_
    assert infos[-1]["objective"] == pytest.approx(est.objective_, rel=1e-12)
    obj = [i["objective"] for i in infos]
    assert all(b <= a + 1e-12 for a, b in zip(obj, obj[1:]))
    silent = cls(3, reg=0.1).fit(X, Y)                      # reporting changes nothing
    np.testing.assert_array_equal(silent.coef_, est.coef_)


@pytest.mark.parametrize("cls", [TreeCRF, JunctionTreeCRF])
def test_crf_callback_stops_early(cls, trees):
    X, Y = trees if cls is TreeCRF else _graphs()
    est = cls(3, reg=0.1, callback=lambda info: info["iteration"] >= 2).fit(X, Y)
    full = cls(3, reg=0.1).fit(X, Y)
    assert est.n_iter_ == 2 and not est.converged_ and full.n_iter_ > 2
    assert est.objective_ > full.objective_
    assert all(not callable(v) for k, v in vars(est).items() if k.endswith("_"))
