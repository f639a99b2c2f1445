"""SemiMarkov: the loss-augmented pass against the chain kernel, and the marginals against
torch-struct's SemiMarkovCRF (CPU, float64).

1. **Loss-augmented Viterbi over segments** (``structlp.structures.SemiMarkov``'s oracle:
   the part scores plus the Hamming loss coefficients, then the compiled pass over the
   segment DAG, ``O(T (L K + K^2))``) against the **chain kernel** (max-sum on a chain of
   ``T`` positions, ``structlp.graphical.maxsum.tree_max_sum``, ``O(T K^2)``, with the
   loss on its node scores) for the same ``T`` and ``K``.  The goal is a pass as fast per
   (position x length) as the chain kernel's per position: the table shows the time per
   pass, the time per unit of each (semi-Markov: per position x length, chain: per
   position) and their ratio (below 1: the goal is met), for the whole oracle call (the
   public functions: scores plus loss, argument checks, the part vector) and for the
   compiled passes alone.
2. **Marginals** (forward-backward over segments, :meth:`SemiMarkov.log_partition`)
   against **torch-struct** 0.5's ``SemiMarkovCRF(...).marginals`` (its log-partition by a
   parallel scan and the marginals by autograd), on the same scores: torch-struct's edge
   potentials ``edge[start, length, label, previous label]`` are the segment score plus
   the transition score, its free initial label is uniform (``log Z_ts = log Z + log K``),
   and the marginals are compared part by part (largest absolute difference; the goal is
   1e-9).  torch runs on one thread (``torch.set_num_threads(1)``), as structlp does.
   torch-struct's parallel scan multiplies ((L - 1) K)-square matrices in the log semiring
   by broadcasting, ``T ((L - 1) K)^3`` floats at once: (T, L, K) = (256, 16, 8) took over
   7 GB, so the sizes stay where it fits in memory.

Times are medians over ``--repeats`` runs, each timing a loop of calls lasting about
``--budget`` seconds (load average recorded: no timing is trustworthy on a shared machine).

    python benchmarks/bench_semi_markov.py                      # about a minute
    python benchmarks/bench_semi_markov.py --quick
    python benchmarks/bench_semi_markov.py --json benchmarks/results/semi_markov.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))                # report.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))            # this checkout
import report as bench_report  # noqa: E402
from structlp.graphical.maxsum import _numba_kernel, tree_max_sum  # noqa: E402
from structlp.structures import SemiMarkov  # noqa: E402
from structlp.structures._semi_markov_dp import (_compiled, _sm_viterbi,  # noqa: E402
                                                 segment_layout)


def per_call(fns, repeats, budget):
    """Median seconds per call of each function of ``fns`` over ``repeats`` loops of about
    ``budget`` s each, the functions' loops interleaved (a change of load hits them all)."""
    counts = []
    for fn in fns:
        fn()                                        # compile / warm up
        t0 = time.perf_counter()
        fn()
        counts.append(max(1, int(budget / max(time.perf_counter() - t0, 1e-7))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, n, out in zip(fns, counts, times):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - t0) / n)
    return [float(np.median(t)) for t in times]


def passes(sizes, repeats, budget, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for T, L, K in sizes:
        model = SemiMarkov(K, L)
        x = rng.normal(size=(T, 8))
        w = rng.normal(size=model.n_features(x))
        y = model.inference(x, model.features(x) @ w + rng.normal(size=model.n_parts(x)))
        op = model.feature_operator(x)
        c, _ = model.loss_coefficients(x, y)
        s = op.scores(w)

        def semi():                                 # the loss-augmented oracle's pass
            return model.inference_parts(x, s + c)

        # the chain kernel on T positions and K labels, loss on the node scores
        order = np.arange(T, dtype=np.int64)
        parents = np.arange(-1, T - 1, dtype=np.int64)
        edge_of = np.r_[-1, np.arange(T - 1)].astype(np.int64)
        b = rng.normal(size=(T, K))
        B = rng.normal(size=(T - 1, K, K))
        truth = rng.integers(0, K, size=T)
        loss = (np.arange(K)[None, :] != truth[:, None]).astype(float)

        def chain():
            return tree_max_sum(order, parents, edge_of, b + loss, B)

        Lf = min(L, T)
        sl = s + c
        semi_kernel = _compiled(_sm_viterbi)
        chain_kernel = _numba_kernel()
        bl = b + loss

        def semi_dp():                              # the compiled passes alone
            return semi_kernel(sl, T, Lf, K)

        def chain_dp():
            return chain_kernel(order, parents, edge_of, bl, B)

        t_semi, t_chain, k_semi, k_chain = per_call([semi, chain, semi_dp, chain_dp],
                                                    repeats, budget)
        units = int(len(segment_layout(T, Lf)[1]))               # (position, length) pairs
        rows.append({"T": T, "L": L, "K": K, "semi": t_semi, "chain": t_chain,
                     "semi_unit": t_semi / units, "chain_unit": t_chain / T,
                     "ratio": (t_semi / units) / (t_chain / T),
                     "kernel_ratio": (k_semi / units) / (k_chain / T)})
        print(f"T={T:4d} L={L:3d} K={K:3d}  semi-Markov {t_semi * 1e6:9.1f} us "
              f"({rows[-1]['semi_unit'] * 1e9:6.1f} ns per position x length)  chain "
              f"{t_chain * 1e6:8.1f} us ({rows[-1]['chain_unit'] * 1e9:6.1f} ns per position)"
              f"  ratio {rows[-1]['ratio']:.2f} (kernels alone {rows[-1]['kernel_ratio']:.2f})",
              flush=True)
    return rows


def torch_struct_edges(s, T, L, K):
    """torch-struct's potentials (1, T, L + 1, K, K) for structlp's part scores."""
    first, end, length = segment_layout(T, L)
    n_seg = len(end) * K
    edge = np.zeros((1, T, L + 1, K, K))
    seg = s[:n_seg].reshape(-1, K)
    tr = np.zeros((T, K, K))                        # tr[t, a, b], 0 at the start
    tr[1:] = s[n_seg:].reshape(T - 1, K, K)
    start = end - length
    edge[0, start, length] = seg[:, :, None] + tr[start].transpose(0, 2, 1)
    return edge


def from_torch_struct(m, T, L, K):
    """structlp's part marginals from torch-struct's (T, L + 1, K, K)."""
    first, end, length = segment_layout(T, L)
    seg = m[end - length, length].sum(axis=2)                           # (n_slots, K)
    tr = m[1:, 1:].sum(axis=1).transpose(0, 2, 1)                       # (T - 1, a, b)
    return np.concatenate([seg.ravel(), tr.ravel()])


def marginals(sizes, repeats, budget, seed=1):
    import torch
    import torch_struct
    import warnings
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", module="torch_struct")
    rng = np.random.default_rng(seed)
    rows = []
    for T, L, K in sizes:
        model = SemiMarkov(K, L)
        x = np.zeros((T, 1))
        s = rng.normal(size=model.n_parts(x))
        edge = torch_struct_edges(s, T, L, K)

        def ours():
            return model.log_partition(x, s)

        def theirs():
            lp = torch.tensor(edge, dtype=torch.float64, requires_grad=True)
            dist = torch_struct.SemiMarkovCRF(lp)
            return dist.partition.detach(), dist.marginals.detach()

        logz, mu = ours()
        Z, M = theirs()
        diff = float(np.abs(from_torch_struct(M.numpy()[0], T, L, K) - mu).max())
        dz = abs(float(Z[0]) - np.log(K) - logz)
        t_ours, t_theirs = per_call([ours, theirs], repeats, budget)
        rows.append({"T": T, "L": L, "K": K, "structlp": t_ours, "torch_struct": t_theirs,
                     "speedup": t_theirs / t_ours, "max_diff": max(diff, dz)})
        print(f"T={T:4d} L={L:3d} K={K:3d}  structlp {t_ours * 1e3:8.3f} ms  torch-struct "
              f"{t_theirs * 1e3:8.3f} ms  x{t_theirs / t_ours:6.1f}  max |diff| "
              f"{max(diff, dz):.1e}", flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=0.2, help="seconds per timed loop")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    started = bench_report.machine()
    if args.quick:
        pass_sizes = [(50, 4, 5), (200, 8, 10)]
        marg_sizes = [(32, 4, 4)]
    else:
        pass_sizes = [(50, 4, 5), (100, 10, 5), (200, 8, 10), (200, 20, 10), (500, 10, 20),
                      (500, 30, 5)]
        marg_sizes = [(32, 4, 4), (64, 4, 8), (128, 6, 6), (256, 6, 6)]
    print("1. loss-augmented pass: semi-Markov against the chain kernel")
    rows1 = passes(pass_sizes, args.repeats, args.budget)
    print("2. marginals: structlp against torch-struct SemiMarkovCRF (CPU, float64)")
    rows2 = marginals(marg_sizes, args.repeats, args.budget)
    if args.json:
        bench_report.write(
            args.json, name="semi_markov",
            title="Semi-Markov: loss-augmented Viterbi and marginals over segments",
            description=(
                "SemiMarkov's loss-augmented oracle (part scores plus the Hamming loss, then "
                "the compiled Viterbi pass over the segment DAG, O(T (L K + K^2))) against "
                "the chain kernel (max-sum on a chain of T positions, O(T K^2)): time per "
                "(position x length) against the chain's per position. Then the part "
                "marginals and log Z (forward-backward over segments) against torch-struct "
                "0.5's SemiMarkovCRF on the same scores (CPU, float64, one thread; its "
                "marginals by autograd). Medians of several timed loops."),
            floor=("the chain kernel; torch-struct",
                   "table 1 divides the semi-Markov time per (position x length) by the "
                   "chain kernel's per position (below 1: the goal is met); table 2 divides "
                   "torch-struct's time by structlp's"),
            tables=[
                {"caption": "Loss-augmented pass",
                 "columns": [{"key": "T", "label": "T"}, {"key": "L", "label": "max length"},
                             {"key": "K", "label": "labels"},
                             {"key": "semi", "label": "semi-Markov pass", "unit": "s",
                              "format": ".2e"},
                             {"key": "chain", "label": "chain pass", "unit": "s",
                              "format": ".2e"},
                             {"key": "semi_unit", "label": "per position x length",
                              "unit": "s", "format": ".2e"},
                             {"key": "chain_unit", "label": "chain per position", "unit": "s",
                              "format": ".2e"},
                             {"key": "ratio", "label": "ratio", "ratio": True},
                             {"key": "kernel_ratio", "label": "ratio, compiled passes alone",
                              "ratio": True}],
                 "rows": rows1},
                {"caption": "Marginals and log Z against torch-struct",
                 "columns": [{"key": "T", "label": "T"}, {"key": "L", "label": "max length"},
                             {"key": "K", "label": "labels"},
                             {"key": "structlp", "label": "structlp", "unit": "s",
                              "format": ".2e"},
                             {"key": "torch_struct", "label": "torch-struct", "unit": "s",
                              "format": ".2e"},
                             {"key": "speedup", "label": "torch-struct / structlp",
                              "ratio": True},
                             {"key": "max_diff", "label": "largest difference",
                              "format": ".1e"}],
                 "rows": rows2}],
            notes=[f"Load average at the start: {started.get('load')}; the machine was "
                   "shared, so absolute times are indicative, the ratios less so."],
            modules=("numba", "torch", "torch_struct"), started=started,
            runs=args.repeats, runs_note="median of the timed loops")
        print("wrote", args.json)


if __name__ == "__main__":
    main()
