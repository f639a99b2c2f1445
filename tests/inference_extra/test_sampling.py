"""Exact sampling: sample frequencies pass a chi-square test against the enumerated Gibbs
distribution (fixed seeds), on chains, trees, junction trees and arborescences; refusals."""

import numpy as np
import pytest
from scipy.stats import chisquare

from structlp.exceptions import InvalidParameterError
from structlp.graphical.trees import chain
from structlp.inference import sample
from structlp.structures import (Arborescence, BipartiteMatching, GraphLabeling,
                                 JunctionTreeLabeling, TreeLabeling)

from enum_oracles import gibbs, heads, labellings, table
from test_marginals import cycle_x, tree_x

N = 20_000


def chi_square_p(outputs, probs, draws):
    """p-value of the draws against the enumerated probabilities (bins of expected count
    below 5 pooled)."""
    key = {np.asarray(y).tobytes(): i for i, y in enumerate(outputs)}
    counts = np.bincount([key[np.asarray(y, dtype=np.asarray(outputs[0]).dtype).tobytes()]
                          for y in draws], minlength=len(outputs))
    expected = probs * len(draws)
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


CASES = [
    ("chain", lambda rng: (TreeLabeling(3), chain(rng.normal(size=(3, 2)),
                                                  rng.normal(size=(2, 2)))), labellings(3, 3)),
    ("tree", lambda rng: (TreeLabeling(2), tree_x(rng, [1, -1, 1, 0, 0])), labellings(5, 2)),
    ("junction", lambda rng: (JunctionTreeLabeling(2), cycle_x(rng, 5)), labellings(5, 2)),
    ("arborescence", lambda rng: (Arborescence(root=1), rng.normal(size=(4, 4, 2))),
     heads(4, 1)),
]


@pytest.mark.parametrize("name, make, outputs", CASES, ids=[c[0] for c in CASES])
def test_sample_frequencies_pass_chi_square(name, make, outputs):
    rng = np.random.default_rng(0)
    model, x = make(rng)
    xc = model.check_x(x)
    s = rng.normal(size=model.n_parts(xc))
    M, v = table(model, xc, outputs, s)
    _, _, probs = gibbs(M, v)
    draws = sample(model, x, s, n=N, random_state=1)
    assert len(draws) == N
    assert chi_square_p(outputs, probs, draws) > 1e-3
    # the same seed, the same draws; and the test has power: a flat distribution fails
    a, b = (sample(model, x, s, n=200, random_state=7) for _ in range(2))
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    flat = np.full(len(outputs), 1.0 / len(outputs))
    assert chi_square_p(outputs, flat, draws) < 1e-6


def test_sample_refuses_bad_n_and_structures_without_an_exact_sampler():
    model = TreeLabeling(2)
    x = chain(np.zeros((2, 1)), np.zeros((1, 1)))
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(InvalidParameterError, match="'n'|n "):
            sample(model, x, np.zeros(8), n=bad)
    rng = np.random.default_rng(0)
    loopy = GraphLabeling(2)
    xg = cycle_x(rng, 4)
    L = loopy.n_parts(loopy.check_x(xg))
    with pytest.raises(InvalidParameterError,
                       match="GraphLabeling has no exact sampler.*SparseMAP.*perturb-and-MAP"):
        sample(loopy, xg, np.zeros(L), n=3)
    with pytest.raises(InvalidParameterError, match="BipartiteMatching has no exact sampler"):
        sample(BipartiteMatching(), np.zeros((3, 3, 1)), np.zeros(9), n=3)
