"""Chain layers on a batch of OCR words: structlp.layers against torch-struct's LinearChainCRF.

Data: the first ``--batch`` (128) words of OCR fold 1 with at least two letters (Taskar's
OCR letters, :func:`structlp.datasets.load_ocr_letters`), each a chain of 26 labels scored
by a random linear model (seeded): node scores ``pixels @ W^T`` (``W`` 26 x 128, entries
N(0, 0.1^2)) and one random transition matrix ``B`` (26 x 26, N(0, 0.5^2)) on every edge;
float64 on both sides.  For :class:`structlp.structures.TreeLabeling` the part scores are the
node scores (n x 26) followed by the edge scores ((n-1) x 26 x 26); torch-struct takes the
same scores folded into its edge potentials ``phi(t, z_{t+1}, z_t)`` (each node's score on
the edge that enters it, the first node's on the first edge), the batch padded to the
longest word with ``lengths``.

Timed, medians over ``--repeats`` (the whole batch each time):

* torch-struct: the log-partition (``dist.partition``, forward) and the marginals
  (``dist.marginals``: the log-partition and its backward pass);
* structlp ``"crf"``: :func:`structlp.layers.fy_loss_batch` with ``kind="crf"`` (the CRF loss,
  log-partition minus the true output's score, and its gradient, marginals minus the true
  output: forward and backward in one call); the marginals are the gradient plus the true
  output's part vector, compared with torch-struct's to 1e-9;
* structlp ``"sparsemap"``: :func:`structlp.layers.sparsemap_batch` with its VJP applied to a
  random cotangent (no peer computes this projection: its row is there for scale).

Run ``python benchmarks/bench_layers_ocr.py [--quick]
[--json benchmarks/results/layers_ocr.json]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

K = 26


def make_batch(batch, seed=0):
    """(X, Y, thetas, cotangents): chain examples of TreeLabeling, their label sequences,
    their part scores and random cotangents."""
    from structlp.datasets import load_ocr_letters
    d = load_ocr_letters(download=False)
    idx = [i for i in np.flatnonzero(d["folds"] == 1) if len(d["labels"][i]) >= 2][:batch]
    rng = np.random.default_rng(seed)
    W = 0.1 * rng.standard_normal((K, 128))
    B = 0.5 * rng.standard_normal((K, K))
    X, Y, thetas, cots = [], [], [], []
    for i in idx:
        px = np.asarray(d["data"][i], dtype=float)
        n = len(px)
        X.append({"node_features": px, "edge_features": np.ones((n - 1, 1)),
                  "parents": np.arange(-1, n - 1)})
        Y.append(np.asarray(d["labels"][i]))
        theta = np.concatenate([(px @ W.T).ravel(), np.tile(B.ravel(), n - 1)])
        thetas.append(theta)
        cots.append(rng.standard_normal(theta.size))
    return X, Y, thetas, cots


def split(theta, n):
    """Node (n, K) and edge (n-1, K, K) scores of a chain's part vector."""
    return theta[:n * K].reshape(n, K), theta[n * K:].reshape(n - 1, K, K)


def torch_potentials(thetas, lengths):
    """torch-struct's edge potentials phi[b, t, z_{t+1}, z_t], padded to the longest word."""
    import torch
    N = max(lengths)
    pot = np.zeros((len(thetas), N - 1, K, K))
    for b, (theta, n) in enumerate(zip(thetas, lengths)):
        node, edge = split(theta, n)
        e = edge + node[1:, None, :]          # [t, z_t, z_{t+1}] + score of node t+1
        e[0] += node[0][:, None]              # the first node's score on the first edge
        pot[b, :n - 1] = e.transpose(0, 2, 1)
    return torch.tensor(pot, dtype=torch.float64)


def torchstruct_side(thetas, lengths, repeats):
    import warnings

    import torch
    warnings.filterwarnings("ignore", message=".*arg_constraints.*")
    from torch_struct import LinearChainCRF
    pot = torch_potentials(thetas, lengths)
    L = torch.tensor(lengths)
    fwd, both = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with torch.no_grad():
            LinearChainCRF(pot, lengths=L).partition
        fwd.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        marg = LinearChainCRF(pot, lengths=L).marginals
        both.append(time.perf_counter() - t0)
    marg = marg.detach().numpy()
    out = []                                  # back to structlp's part order
    for b, n in enumerate(lengths):
        m = marg[b, :n - 1].transpose(0, 2, 1)             # [t, z_t, z_{t+1}]
        nodes = np.concatenate([m[:1].sum(axis=2), m.sum(axis=1)])
        out.append(np.concatenate([nodes.ravel(), m.ravel()]))
    return {"forward": statistics.median(fwd), "both": statistics.median(both),
            "marginals": out, "threads": torch.get_num_threads()}


def structlp_crf(model, X, Y, thetas, repeats):
    from structlp.layers import fy_loss_batch
    fy_loss_batch(model, X[:1], thetas[:1], Y[:1], "crf")            # kernels loaded
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _, grads = fy_loss_batch(model, X, thetas, Y, "crf")
        times.append(time.perf_counter() - t0)
    marg = [g + model.encode(model.check_x(x), y) for g, x, y in zip(grads, X, Y)]
    return {"both": statistics.median(times), "marginals": marg}


def structlp_sparsemap(model, X, thetas, cots, repeats):
    from structlp.layers import sparsemap_batch
    sparsemap_batch(model, X[:1], thetas[:1])                         # kernels loaded
    fwd, both = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = sparsemap_batch(model, X, thetas)
        fwd.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _, vjps = sparsemap_batch(model, X, thetas, with_vjp=True)
        for vjp, g in zip(vjps, cots):
            vjp(g)
        both.append(time.perf_counter() - t0)
    return {"forward": statistics.median(fwd), "both": statistics.median(both),
            "support": float(np.mean([len(r.weights) for r in res])),
            "certified": all(r.certified for r in res), "max_gap": max(r.gap for r in res)}


def main(argv=None):
    import report
    from structlp.structures import TreeLabeling
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="16 words, 2 repeats")
    ap.add_argument("--json", help="write the results (benchmarks/report.py schema) here")
    args = ap.parse_args(argv)
    if args.quick:
        args.batch, args.repeats = 16, 2
    started = report.machine()
    X, Y, thetas, cots = make_batch(args.batch)
    lengths = [len(y) for y in Y]
    model = TreeLabeling(K)
    peer = torchstruct_side(thetas, lengths, args.repeats)
    from structlp.exceptions import InvalidParameterError
    try:
        crf = structlp_crf(model, X, Y, thetas, args.repeats)
        diff = max(float(np.abs(a - b).max())
                   for a, b in zip(crf["marginals"], peer["marginals"]))
        r_crf = peer["both"] / crf["both"]
    except InvalidParameterError as exc:      # a structlp without exact chain marginals
        print("crf:", exc)
        crf, diff, r_crf = {"both": None}, float("nan"), float("nan")
    sm = structlp_sparsemap(model, X, thetas, cots, args.repeats)
    rows = [
        {"side": f"torch-struct LinearChainCRF ({peer['threads']} threads)",
         "forward": peer["forward"], "both": peer["both"], "ratio": 1.0},
        {"side": 'structlp fy_loss_batch "crf" (loss and gradient)', "both": crf["both"],
         "ratio": None if crf["both"] is None else r_crf,
         "diff": None if crf["both"] is None else diff},
        {"side": "structlp sparsemap_batch (+ VJP)", "forward": sm["forward"],
         "both": sm["both"], "ratio": peer["both"] / sm["both"]},
    ]
    for r in rows:
        print(r)
    notes = [
        f"Load average at the start: {started['load']} (2 shared cores: timings are noisy; "
        "the ratios are measured in the same run).",
        f"{args.batch} words of {min(lengths)} to {max(lengths)} letters "
        f"({sum(lengths)} letters). Largest difference of the marginals, structlp's CRF "
        f"against torch-struct's: {diff:.1e}.",
        f"SparseMAP: {sm['support']:.1f} labellings in the support on average, every "
        f"projection certified: {sm['certified']} (largest gap {sm['max_gap']:.1e}).",
        f"Goal: at least 20x faster than torch-struct's marginals on the CPU: "
        f"{r_crf:.1f}x for the CRF ({'met' if r_crf >= 20 else 'not met'}), "
        f"{rows[2]['ratio']:.1f}x for SparseMAP; equal marginals to 1e-9: "
        f"{'met' if diff <= 1e-9 else 'not met'}.",
    ]
    for n in notes:
        print(n)
    if args.json:
        cols = [{"key": "side", "label": "implementation"},
                {"key": "forward", "label": "forward", "unit": "s"},
                {"key": "both", "label": "forward + backward", "unit": "s"},
                {"key": "ratio", "label": "torch-struct / this", "ratio": True},
                {"key": "diff", "label": "largest difference of the marginals (to torch-struct's)",
                 "format": ".1e"}]
        report.write(
            args.json, name="layers_ocr",
            title="Structured layers: chain CRF and SparseMAP on OCR words against torch-struct",
            description=(f"A batch of {args.batch} OCR words (fold 1, chains of 26 labels) "
                         "scored by a random linear model, float64 on the CPU; medians of "
                         f"{args.repeats} repeats. torch-struct's forward is the "
                         "log-partition, its forward + backward the marginals; structlp's "
                         "CRF loss returns the loss and its gradient (marginals minus the "
                         "truth) in one call."),
            floor=("torch-struct LinearChainCRF", "its marginals (log-partition and "
                   "backward) on the same scores, padded batch with lengths"),
            tables=[{"columns": cols, "rows": rows}], notes=notes, started=started,
            modules=("torch", "torch_struct"), runs=args.repeats, runs_note="median")
    return rows


if __name__ == "__main__":
    main()
