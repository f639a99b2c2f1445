"""The perturbed Fenchel-Young loss on OCR chains: structlp.layers against optax.perturbations.

Berthet et al. (2020): with Gaussian noise ``Z`` on every part score,

    y_sigma(theta) = E[ argmax_{mu in Y(x)} (theta + sigma Z) . mu ],
    loss = E[ max_mu (theta + sigma Z) . mu ] - theta . mu(y),   grad = y_sigma(theta) - mu(y),

each expectation estimated from ``n_samples`` draws.  Data: the batch of
``bench_layers_ocr.py`` (the first ``--batch`` (128) OCR words of fold 1 with at least two
letters, scored by a random linear model; parts: 26 labels per letter, 26 x 26 per edge).

* structlp: :func:`structlp.layers.fy_loss_batch` with ``kind="perturbed"`` on
  :class:`structlp.structures.TreeLabeling` (its compiled max-sum per sample), loss and
  gradient;
* optax: ``optax.perturbations.make_perturbed_fun`` (Gaussian noise, ``optax.perturbations.Normal``)
  around a Viterbi decoder written in JAX (``lax.scan``, the part vector in structlp's
  layout), ``jax.jit`` of the whole batch (the words grouped by length, each group one
  ``vmap``), compiled before timing; the gradient ``y_sigma - mu(y)`` is its forward pass.

Both at the same ``--samples`` (10 and 100) and ``sigma`` (1.0); medians of ``--repeats``.
Each estimate of ``y_sigma`` is compared with optax's at 1,000 samples (the Monte Carlo error
of both shrinks as ``1/sqrt(n_samples)``).  Run ``python benchmarks/bench_layers_perturbed.py
[--quick] [--json benchmarks/results/layers_perturbed.json]``.
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
SIGMA = 1.0
REF_SAMPLES = 1000     # the reference estimate of y_sigma (optax)


def jax_viterbi(n):
    """A jitted-ready function: part scores of an n-letter chain -> the part vector of its
    best labelling (structlp's layout: node one-hots, then edge one-hots [parent, child])."""
    import jax
    import jax.numpy as jnp

    def decode(theta):
        node = theta[:n * K].reshape(n, K)
        edge = theta[n * K:].reshape(n - 1, K, K)

        def step(v, inputs):
            e, s = inputs
            cand = v[:, None] + e                  # [previous label, label]
            return cand.max(axis=0) + s, cand.argmax(axis=0)

        v, back = jax.lax.scan(step, node[0], (edge, node[1:]))
        last = jnp.argmax(v)

        def trace(label, bp):
            prev = bp[label]
            return prev, prev

        _, labels = jax.lax.scan(trace, last, back, reverse=True)
        labels = jnp.concatenate([labels, last[None]])
        onehot = jax.nn.one_hot(labels, K, dtype=theta.dtype)
        pair = onehot[:-1, :, None] * onehot[1:, None, :]
        return jnp.concatenate([onehot.ravel(), pair.ravel()])

    return decode


_COMPILED = {}


def optax_batch(lengths, samples):
    """The jitted perturbed decoder of the whole batch (compiled once per sample count)."""
    import jax
    from optax.perturbations import Normal, make_perturbed_fun
    key = (tuple(lengths), samples)
    if key not in _COMPILED:
        groups = sorted(set(lengths))
        fns = {n: jax.vmap(make_perturbed_fun(jax_viterbi(n), num_samples=samples,
                                              sigma=SIGMA, noise=Normal()))
               for n in groups}

        @jax.jit
        def batch(key, stacks):
            keys = jax.random.split(key, len(stacks))
            return {n: fns[n](jax.random.split(k, s.shape[0]), s)
                    for k, (n, s) in zip(keys, sorted(stacks.items()))}
        _COMPILED[key] = batch
    return _COMPILED[key]


def optax_side(thetas, lengths, samples, repeats, seed=0):
    """(median seconds, the estimates of y_sigma of each repeat, per word) for optax's
    perturbed decoder; compiled before timing."""
    import jax
    import jax.numpy as jnp
    groups = {}
    for b, n in enumerate(lengths):
        groups.setdefault(n, []).append(b)
    stacks = {n: jnp.asarray(np.stack([thetas[b] for b in idx])) for n, idx in groups.items()}
    batch = optax_batch(lengths, samples)
    jax.block_until_ready(batch(jax.random.key(seed), stacks))          # compile
    times, runs = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(batch(jax.random.key(seed + 1 + r), stacks))
        times.append(time.perf_counter() - t0)
        est = [None] * len(thetas)
        for n, idx in groups.items():
            arr = np.asarray(out[n])
            for j, b in enumerate(idx):
                est[b] = arr[j]
        runs.append(est)
    return statistics.median(times), runs


def structlp_side(model, X, Y, thetas, samples, repeats, seed=0):
    from structlp.layers import fy_loss_batch
    fy_loss_batch(model, X[:1], thetas[:1], Y[:1], "perturbed", n_samples=2)   # kernels loaded
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        _, grads = fy_loss_batch(model, X, thetas, Y, "perturbed", n_samples=samples,
                                 sigma=SIGMA, random_state=seed + r)
        times.append(time.perf_counter() - t0)
    est = [g + model.encode(model.check_x(x), y) for g, x, y in zip(grads, X, Y)]
    return statistics.median(times), est


def main(argv=None):
    import jax
    jax.config.update("jax_enable_x64", True)
    import report
    from bench_layers_ocr import make_batch
    from structlp.structures import TreeLabeling
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--samples", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="16 words, 10 samples, 2 repeats")
    ap.add_argument("--json", help="write the results (benchmarks/report.py schema) here")
    args = ap.parse_args(argv)
    if args.quick:
        args.batch, args.samples, args.repeats = 16, [10], 2
    started = report.machine()
    X, Y, thetas, _ = make_batch(args.batch)
    lengths = [len(y) for y in Y]
    model = TreeLabeling(K)
    # the reference: optax's estimate at REF_SAMPLES, as the mean of runs of 100 samples
    # (one run of all of them does not fit in memory)
    n_ref = REF_SAMPLES if not args.quick else 200
    _, runs = optax_side(thetas, lengths, 100, n_ref // 100, seed=99)
    ref = [np.mean([r[b] for r in runs], axis=0) for b in range(len(thetas))]

    def err(est):          # mean over words of the largest error of a node marginal
        return float(np.mean([np.abs(e[:n * K] - r[:n * K]).max()
                              for e, r, n in zip(est, ref, lengths)]))

    rows = []
    for s in args.samples:
        t_opt, runs = optax_side(thetas, lengths, s, args.repeats)
        e_opt = runs[-1]
        t_sl, e_sl = structlp_side(model, X, Y, thetas, s, args.repeats)
        rows.append({"samples": s, "optax": t_opt, "structlp": t_sl,
                     "ratio": t_opt / t_sl, "err_optax": err(e_opt), "err_structlp": err(e_sl)})
        print(rows[-1])
    notes = [
        f"Load average at the start: {started['load']} (2 shared cores: timings are noisy; "
        "the ratios are measured in the same run).",
        f"{args.batch} words, {sum(lengths)} letters; sigma = {SIGMA}. The error columns are "
        "the mean over words of the largest error of a letter's estimated marginal against "
        f"optax's estimate at {REF_SAMPLES if not args.quick else 200:,} samples: both "
        "sides estimate the same expectation.",
        "optax's decoder is written in JAX and compiled for the batch (each word length "
        "its own vmap); structlp calls its compiled max-sum oracle once per sample.",
    ]
    if args.json:
        cols = [{"key": "samples", "label": "samples"},
                {"key": "optax", "label": "optax (jit)", "unit": "s"},
                {"key": "structlp", "label": "structlp", "unit": "s"},
                {"key": "ratio", "label": "optax / structlp", "ratio": True},
                {"key": "err_optax", "label": "optax's error", "format": ".3f"},
                {"key": "err_structlp", "label": "structlp's error", "format": ".3f"}]
        report.write(
            args.json, name="layers_perturbed",
            title="Structured layers: the perturbed Fenchel-Young loss against optax",
            description=(f"Loss and gradient of the perturbed Fenchel-Young loss (Gaussian "
                         f"noise, sigma {SIGMA}) on a batch of {args.batch} OCR words (chains "
                         "of 26 labels), at the same number of samples; medians of "
                         f"{args.repeats} repeats, float64."),
            floor=("optax.perturbations", "make_perturbed_fun around a Viterbi decoder "
                   "in JAX, jit-compiled for the batch (compilation not timed)"),
            tables=[{"columns": cols, "rows": rows}], notes=notes, started=started,
            modules=("jax", "optax"), runs=args.repeats, runs_note="median")
    for n in notes:
        print(n)
    return rows


if __name__ == "__main__":
    main()
