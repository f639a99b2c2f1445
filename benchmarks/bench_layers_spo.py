"""SPO+ on PyEPO's shortest-path benchmark: structlp.layers.spo_plus against PyEPO's SPOPlus.

Data: PyEPO's generator (``pyepo.data.shortestpath.genData``): a 5 x 5 grid, 40 edges
(right and down) from the top-left to the bottom-right corner, 5 features, edge costs a
polynomial of degree 2, 4 or 6 in the features with multiplicative noise of half-width 0.5;
``--n`` (1,000) training and 1,000 test instances, drawn together (seed 135) and split.

Both sides train the same linear model (``torch.nn.Linear(5, 40)``, the same initial
weights) with Adam (learning rate 1e-2), batches of 32 in the same shuffled order, for
``--epochs`` epochs, on the SPO+ loss of Elmachtoub & Grigas,
``max_w (c - 2 c_hat) . w + 2 c_hat . w*(c) - c . w*(c)``, costs *minimised* over the paths:

* PyEPO: ``pyepo.func.SPOPlus`` with its OR-Tools model ``shortestPathModel((5, 5))``
  (GLOP, one LP per instance, one process), the true solutions precomputed by its
  ``optDataset`` (outside the timed epochs);
* structlp: :func:`structlp.layers.spo_plus_batch` on :class:`GridShortestPath` below, a
  model a user declares in a few lines (parts: the edges; polytope: flow conservation;
  decoder: a dynamic program over the grid, which is a DAG), its gradient fed back into the
  network (the true solutions recomputed by its decoder at each call).

Reported per degree: the median seconds per epoch of each side (training only), and of the
loss alone (its forward and backward passes), their ratios,
and each trained model's normalised regret on the test set (``pyepo.metric.regret``: the
sum over instances of ``c . w*(c_hat) - z*(c)`` over the sum of ``|z*(c)|``, with PyEPO's
solver for both).  Run ``python benchmarks/bench_layers_spo.py [--quick]
[--json benchmarks/results/layers_spo.json]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from structlp import Polytope, StructuredModel  # noqa: E402

GRID = (5, 5)
N_FEATURES = 5


def grid_arcs(rows, cols):
    """The arcs (tail, head) of the grid in PyEPO's order: for each row, its rightward arcs,
    then (but for the last row) its downward arcs; node ``v = i * cols + j``."""
    arcs = []
    for i in range(rows):
        arcs += [(i * cols + j, i * cols + j + 1) for j in range(cols - 1)]
        if i < rows - 1:
            arcs += [(i * cols + j, (i + 1) * cols + j) for j in range(cols)]
    return arcs


class GridShortestPath(StructuredModel):
    """Paths from the top-left to the bottom-right corner of a ``rows x cols`` grid whose
    arcs go right or down; one part per arc (PyEPO's order, :func:`grid_arcs`).

    The polytope is flow conservation (one unit out of the source, into the sink, balance
    elsewhere, ``0 <= mu <= 1``), integral since the incidence matrix is totally unimodular.
    ``inference`` maximises ``scores . mu`` by a dynamic program over the nodes in
    row-major order (a topological order).  An example ``x`` is a feature vector (d,); the
    part features are ``x`` on the part's own block (``features`` is (L, L d)).
    """

    check_inference = False    # the dynamic program is tested against networkx

    def __init__(self, rows=5, cols=5):
        self.rows = rows
        self.cols = cols

    def arcs(self):
        return grid_arcs(self.rows, self.cols)

    def n_parts(self, x):
        return (self.rows - 1) * self.cols + (self.cols - 1) * self.rows

    def features(self, x):
        return sp.kron(sp.identity(self.n_parts(x)), np.atleast_2d(np.asarray(x, float)),
                       format="csr")

    def polytope_key(self, x):
        return (self.rows, self.cols)

    def polytope(self, x):
        arcs = self.arcs()
        n = self.rows * self.cols
        E = np.zeros((n, len(arcs)))
        for p, (u, v) in enumerate(arcs):
            E[u, p] -= 1.0
            E[v, p] += 1.0
        e = np.zeros(n)
        e[0], e[-1] = -1.0, 1.0
        return Polytope(E=E, e=e, lb=0.0, ub=1.0)

    def inference(self, x, scores):
        plan = self.__dict__.get("plan_")
        if plan is None or plan[0] != (self.rows, self.cols):
            plan = self.__dict__["plan_"] = ((self.rows, self.cols), self.dp_plan())
        order, n_arcs, tail = plan[1]
        s = scores.tolist()
        best = [0.0] * (self.rows * self.cols)
        via = [-1] * len(best)
        for v, arcs_in in order:          # row-major order is topological here
            b, arg = -np.inf, -1
            for p, u in arcs_in:
                value = best[u] + s[p]
                if value > b:
                    b, arg = value, p
            best[v], via[v] = b, arg
        mu = np.zeros(n_arcs, dtype=int)
        v = len(best) - 1
        while v:
            mu[via[v]] = 1
            v = tail[via[v]]
        return mu

    def inference_parts(self, x, scores):    # the output is its part vector: no encoding
        return self.inference(x, scores)

    def dp_plan(self):
        """(node, its incoming arcs (part, tail)) in row-major order but the source; the
        number of arcs; each arc's tail."""
        arcs = self.arcs()
        incoming = [[] for _ in range(self.rows * self.cols)]
        for p, (u, v) in enumerate(arcs):
            incoming[v].append((p, u))
        return ([(v, tuple(incoming[v])) for v in range(1, len(incoming))], len(arcs),
                [u for u, _ in arcs])


def make_data(n, deg, seed):
    from pyepo.data.shortestpath import genData
    return genData(n, N_FEATURES, GRID, deg=deg, noise_width=0.5, seed=seed)


def loaders(optmodel, x, c, batch, seed):
    import torch
    from pyepo.data.dataset import optDataset
    from torch.utils.data import DataLoader
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = optDataset(optmodel, x, c)
    g = torch.Generator().manual_seed(seed)
    return data, DataLoader(data, batch_size=batch, shuffle=True, generator=g)


def train(side, net, loader, epochs, optmodel, model):
    """Train ``net`` for ``epochs``; return the seconds of each epoch, and of the loss in
    each epoch (its forward and backward passes, the linear layer's backward included)."""
    import torch
    from pyepo.func import SPOPlus
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    spop = SPOPlus(optmodel, processes=1) if side == "pyepo" else None
    if side == "structlp":
        from structlp.layers import spo_plus_batch
    times, in_loss = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        t_loss = 0.0
        for x, c, w, z in loader:
            cp = net(x)
            opt.zero_grad()
            t1 = time.perf_counter()
            if side == "pyepo":
                spop(cp, c, w, z).backward()
            else:
                _, grads = spo_plus_batch(model, list(x.numpy()), cp.detach().numpy().astype(float),
                                          c.numpy().astype(float))
                cp.backward(torch.tensor(grads / len(grads), dtype=cp.dtype))
            t_loss += time.perf_counter() - t1
            opt.step()
        times.append(time.perf_counter() - t0)
        in_loss.append(t_loss)
    return times, in_loss


def run_degree(deg, n, epochs, seed=0):
    import torch
    from pyepo.metric import regret
    from pyepo.model.ort import shortestPathModel
    optmodel = shortestPathModel(GRID)
    model = GridShortestPath(*GRID)
    x, c = make_data(n + 1000, deg, 135)    # one draw (one cost map B), then split
    x, c, xt, ct = x[:n], c[:n], x[n:], c[n:]
    _, test_loader = loaders(optmodel, xt, ct, 32, seed)
    out = {"deg": deg}
    torch.manual_seed(seed)
    init = torch.nn.Linear(N_FEATURES, len(model.arcs())).state_dict()
    for side in ("pyepo", "structlp"):
        _, loader = loaders(optmodel, x, c, 32, seed)
        net = torch.nn.Linear(N_FEATURES, len(model.arcs()))
        net.load_state_dict(init)
        times, in_loss = train(side, net, loader, epochs, optmodel, model)
        out[side] = statistics.median(times)
        out[side + "_loss"] = statistics.median(in_loss)
        out[side + "_regret"] = float(regret(net, optmodel, test_loader))
        out[side + "_weights"] = net.weight.detach().numpy().copy()
    out["ratio"] = out["pyepo"] / out["structlp"]
    out["ratio_loss"] = out["pyepo_loss"] / out["structlp_loss"]
    out["dweights"] = float(np.abs(out.pop("pyepo_weights") - out.pop("structlp_weights")).max())
    return out


def main(argv=None):
    import report
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--degrees", type=int, nargs="+", default=[2, 4, 6])
    ap.add_argument("--repeats", type=int, default=1,
                    help="training runs per degree (the timings: medians over the runs)")
    ap.add_argument("--quick", action="store_true", help="n = 100, 2 epochs, degree 4")
    ap.add_argument("--json", help="write the results (benchmarks/report.py schema) here")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.epochs, args.degrees = 100, 2, [4]
    started = report.machine()
    import torch
    torch.set_num_threads(1)
    rows = []
    for deg in args.degrees:
        runs = [run_degree(deg, args.n, args.epochs) for _ in range(args.repeats)]
        row = dict(runs[0])      # the same steps every run: regrets and weights agree
        for key in ("pyepo", "structlp", "pyepo_loss", "structlp_loss"):
            row[key] = statistics.median(r[key] for r in runs)
        row["ratio"] = row["pyepo"] / row["structlp"]
        row["ratio_loss"] = row["pyepo_loss"] / row["structlp_loss"]
        rows.append(row)
        print(rows[-1])
    worst = min(r["ratio"] for r in rows)
    worst_loss = min(r["ratio_loss"] for r in rows)
    shared = statistics.median(r["structlp"] - r["structlp_loss"] for r in rows)
    within = all(r["structlp_regret"] <= r["pyepo_regret"] + 1e-3 for r in rows)
    notes = [
        f"Load average at the start: {started['load']} (2 shared cores: timings are noisy; "
        "the ratios are measured in the same run).",
        f"Training set n = {args.n}, {args.epochs} epochs, batches of 32; the test set "
        "1,000 instances. Both sides start from the same weights and see the same batches, "
        "so with exact solvers on both sides they take the same steps: the last column is "
        "the largest difference of the final weights.",
        "The loss columns time the SPO+ loss alone, forward and backward (PyEPO: SPOPlus "
        "and its backward; structlp: spo_plus_batch and the backward of its gradient), the "
        "true solutions given to PyEPO (precomputed by its optDataset) and recomputed by "
        "structlp. The rest of an epoch, the same on both sides (the DataLoader, the linear "
        f"layer, Adam), takes about {shared:.2f} s here. PyTorch runs one thread.",
        f"Goal: at least 10x faster per epoch than PyEPO's SPOPlus: {worst:.1f}x at worst "
        f"({'met' if worst >= 10 else 'not met'}); the loss alone {worst_loss:.1f}x at worst; "
        f"normalised regret within PyEPO's (+1e-3): {'met' if within else 'not met'}.",
    ]
    for n_ in notes:
        print(n_)
    if args.json:
        cols = [{"key": "deg", "label": "degree"},
                {"key": "pyepo", "label": "PyEPO, per epoch", "unit": "s"},
                {"key": "structlp", "label": "structlp, per epoch", "unit": "s"},
                {"key": "ratio", "label": "epoch: PyEPO / structlp", "ratio": True},
                {"key": "pyepo_loss", "label": "PyEPO's loss, per epoch", "unit": "s"},
                {"key": "structlp_loss", "label": "structlp's loss, per epoch", "unit": "s"},
                {"key": "ratio_loss", "label": "loss: PyEPO / structlp", "ratio": True},
                {"key": "pyepo_regret", "label": "PyEPO's regret", "format": ".4f"},
                {"key": "structlp_regret", "label": "structlp's regret", "format": ".4f"},
                {"key": "dweights", "label": "largest difference of the final weights",
                 "format": ".1e"}]
        report.write(
            args.json, name="layers_spo",
            title="Structured layers: SPO+ on PyEPO's shortest paths against PyEPO",
            description=("Decision-focused learning on PyEPO's shortest-path benchmark (5 x 5 "
                         f"grid, 40 edges, noise 0.5, n = {args.n}): a linear model trained "
                         "by SPO+ with Adam, the same initial weights and batches on both "
                         "sides; seconds per epoch (medians) and the normalised regret on "
                         "1,000 test instances."),
            floor=("PyEPO SPOPlus", "pyepo.func.SPOPlus with its OR-Tools shortest-path "
                   "model, one LP per instance, one process"),
            tables=[{"columns": cols, "rows": rows}], notes=notes, started=started,
            modules=("torch", "pyepo"), runs=args.repeats * args.epochs,
            runs_note=(f"the median over {args.epochs} epochs" + (
                f" of each of {args.repeats} training runs, then over the runs"
                if args.repeats > 1 else " of one training run per side")))
    return rows


if __name__ == "__main__":
    main()
