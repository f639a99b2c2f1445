"""pystruct's three latent gallery examples, reproduced with structlp's LatentSSVM.

The examples (pystruct 0.3.2, ``examples/``) and their published script output (the
pystruct.github.io gallery):

* ``plot_latent_node.py`` ("Latent Variable Hierarchical CRF"): 20 4 x 4 binary images,
  each a 2 x 2 box at one of four places, 4 pixels re-drawn at random
  (``make_simple_2x2(seed=1)``); a hidden node per 2 x 2 patch joined to its four pixels.
  Published training accuracy: binary grid CRF 0.903125, with the latent nodes 1.000000.
* ``plot_latent_crf.py`` ("Latent Dynamics CRF"): 20 8 x 8 images of one cross with 5
  pixels re-drawn (``generate_crosses(n_samples=20, noise=5, n_crosses=1,
  total_size=8)``), half for training (an unseeded split in pystruct; ``random_state=0``
  here), a grid CRF whose label 1 has two states.  Published: training 1.000000, test
  0.995313.
* ``plot_latent_svm_as_crf.py`` ("Latent SVM for odd vs. even digit classification"):
  scikit-learn's digits, odd against even, half for training (unseeded in pystruct;
  ``random_state=0`` here), 5 states per label.  Published: binary SVM train 0.94 / test
  0.91; latent SVM train 1.00 / test 0.99.

The data generators are pystruct's (``pystruct/datasets/synthetic_grids.py``, BSD-3,
(c) 2013 Andreas C. Mueller), reimplemented below with the same legacy numpy random stream,
so the images are pystruct's.  pystruct itself is not run: it does not install on Python
3.11 with numpy 2 (its Cython extensions and ``np.int``/``np.float``, removed in numpy 1.24,
in its examples and datasets), so the comparison is with its published accuracies; its
published output has no timings for these examples.

For each example the script fits structlp's LatentSSVM (Frank–Wolfe convex steps to a
relative gap of 1e-2, as pystruct's digits example asks of its n-slack SSVM; ``--n-init``
random starts (default 1), except digits: one start from pystruct's k-means initialization
of the states and 2 CCCP steps, pystruct's ``latent_iter=2``; one BLAS thread) ``--repeat`` times and reports the median CPU seconds
(``time.process_time``), the accuracies (node accuracy ``1 - Hamming / n``, pystruct's
``score``), the CCCP steps and the latent objective, beside the non-latent model fitted by
FrankWolfeLearner.

Run: ``python benchmarks/bench_latent.py --json benchmarks/results/latent.json
[--repeat 3] [--only node crosses digits] [--pystruct PYSTRUCT.json]`` (the raw rows go to
``results/raw/latent.json``; ``--rebuild`` remakes the JSON from them without fitting).
``PYSTRUCT.json`` is written by ``pystruct_latent_examples.py`` run in an environment where
pystruct installs (its docstring says how to make one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402  # benchmarks/report.py: the results schema

import structlp  # noqa: E402
from structlp.latent import LatentGraphLabeling, LatentSSVM  # noqa: E402
from structlp.structures import GraphLabeling, grid_edges  # noqa: E402


# ---------------------------------------------------------------- pystruct's data
def make_simple_2x2(seed=0, n_flips=4, n_samples=20):
    """pystruct.datasets.make_simple_2x2 (BSD-3, (c) 2013 Andreas C. Mueller)."""
    rs = np.random.RandomState(seed)
    X, Y = [], []
    for _ in range(n_samples):
        y = np.zeros((4, 4), dtype=int)
        j, k = 2 * rs.randint(2, size=2)
        y[j: j + 2, k: k + 2] = 1
        Y.append(y)
        x = y.copy()
        for _flip in range(n_flips):
            a, b = rs.randint(4, size=2)
            x[a, b] = rs.randint(2)
        x[x == 0] = -1
        X.append(x)
    return X, Y


def generate_crosses(n_samples=5, noise=30, total_size=10, n_crosses=2, seed=0):
    """pystruct.datasets.generate_crosses (BSD-3, (c) 2013 Andreas C. Mueller)."""
    rs = np.random.RandomState(seed)
    Y = np.zeros((n_samples, total_size, total_size), dtype=int)
    for i in range(n_samples):
        t_old, l_old = -3, -3
        for _ in range(n_crosses):
            while True:
                t, l = rs.randint(1, total_size - 3, size=2)
                if np.abs(t - t_old) > 2 or np.abs(l - l_old) > 2:
                    break
            t_old, l_old = t, l
            Y[i, t + 1, l:l + 3] = 1
            Y[i, t:t + 3, l + 1] = 1
            Y[i, t + 1, l + 1] = 1
    Y_flips = Y.copy()
    for y in Y_flips:
        flips = rs.randint(1, total_size - 1, size=[noise, 2])
        y[flips[:, 0], flips[:, 1]] = rs.randint(2, size=noise)
    X = np.zeros((n_samples, total_size, total_size, 2))
    ix, iy, iz = np.ogrid[:X.shape[0], :X.shape[1], :X.shape[2]]
    X[ix, iy, iz, Y_flips] = 1
    return X, Y


# ---------------------------------------------------------------- the three problems
def node_problem():
    """plot_latent_node: 16 pixels (feature: the noisy pixel, +-1) on the 4 x 4 grid, and 4
    hidden nodes (no features), each joined to its 2 x 2 patch; edge features tell the
    grid edges from the hidden ones (pystruct's LatentNodeCRF: separate hidden states
    and their own pairwise potentials)."""
    Xi, Yi = make_simple_2x2(seed=1)
    grid = grid_edges(4, 4)
    idx = np.arange(16).reshape(4, 4)
    hidden = [[16 + p, idx[r, c]] for p, (r0, c0) in enumerate([(0, 0), (0, 2), (2, 0), (2, 2)])
              for r in range(r0, r0 + 2) for c in range(c0, c0 + 2)]
    edges = np.vstack([grid, hidden])
    ef = np.zeros((len(edges), 2))
    ef[:len(grid), 0] = 1.0
    ef[len(grid):, 1] = 1.0
    X = [{"node_features": np.vstack([x.reshape(16, 1), np.zeros((4, 1))]).astype(float),
          "edges": edges, "edge_features": ef, "n_hidden": 4} for x in Xi]
    Y = [y.ravel() for y in Yi]
    plain = [{"node_features": x.reshape(16, 1).astype(float), "edges": grid,
              "edge_features": np.ones((len(grid), 1))} for x in Xi]
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=1, max_treewidth=6)
    return dict(X=X, Y=Y, Xt=None, Yt=None, model=model, plain=(GraphLabeling(2), plain, None),
                C=100.0, baseline_C=1.0)


def crosses_problem():
    """plot_latent_crf: 8 x 8 grid, node features the one-hot noisy pixel (2), label 1
    (the cross) with two states."""
    from sklearn.model_selection import train_test_split
    X, Y = generate_crosses(n_samples=20, noise=5, n_crosses=1, total_size=8)
    Xtr, Xte, Ytr, Yte = train_test_split(X, Y, test_size=.5, random_state=0)
    edges = grid_edges(8, 8)

    def ex(x):
        return {"node_features": x.reshape(64, 2), "edges": edges,
                "edge_features": np.ones((len(edges), 1))}

    model = LatentGraphLabeling(n_labels=2, n_states_per_label=[1, 2])
    Xs, Xts = [ex(x) for x in Xtr], [ex(x) for x in Xte]
    return dict(X=Xs, Y=[y.ravel() for y in Ytr], Xt=Xts, Yt=[y.ravel() for y in Yte],
                model=model, plain=(GraphLabeling(2), Xs, Xts), C=10.0, baseline_C=10.0)


def digits_problem():
    """plot_latent_svm_as_crf: digits, odd vs even, one node, 5 states per label."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    X, y = digits.data / digits.data.max(), digits.target % 2
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=.5, random_state=0)
    none = np.zeros((0, 2), dtype=int)

    def ex(v):
        return {"node_features": v[None, :], "edges": none, "edge_features": np.zeros((0, 0))}

    Xs, Xts = [ex(v) for v in Xtr], [ex(v) for v in Xte]
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=5)
    return dict(X=Xs, Y=[np.array([v]) for v in ytr], Xt=Xts, Yt=[np.array([v]) for v in yte],
                model=model, plain=(GraphLabeling(2), Xs, Xts), C=1.0, baseline_C=1.0,
                init=kmeans_init(Xtr, ytr, 5), max_iter=2)


def kmeans_init(X, y, per_label):
    """pystruct's initialization of LatentGraphCRF's states (``kmeans_init``, for nodes
    without edges): k-means with ``per_label`` clusters on the features of each label's
    examples; the state is ``per_label * label + cluster``."""
    from sklearn.cluster import KMeans
    states = np.zeros(len(y), dtype=int)
    for lab in np.unique(y):
        rows = np.flatnonzero(y == lab)
        km = KMeans(n_clusters=per_label, n_init=10, random_state=0).fit(X[rows])
        states[rows] = per_label * lab + km.labels_
    return [np.array([s]) for s in states]


#: The relative duality gap of each convex step (FrankWolfeLearner's tol).
TOL = 1e-2

PROBLEMS = {"node": node_problem, "crosses": crosses_problem, "digits": digits_problem}
PUBLISHED = {  # pystruct's gallery output: (train, test) accuracy, latent and non-latent
    "node": dict(latent=(1.0, None), plain=(0.903125, None),
                 example="plot_latent_node.py", what="4 x 4 boxes, hidden nodes"),
    "crosses": dict(latent=(1.0, 0.995313), plain=(None, None),
                    example="plot_latent_crf.py", what="8 x 8 crosses, latent dynamics"),
    "digits": dict(latent=(1.00, 0.99), plain=(0.94, 0.91),
                   example="plot_latent_svm_as_crf.py", what="digits odd/even, latent SVM"),
}


def accuracy(pred, Y):
    """Node accuracy over the whole set, ``1 - sum Hamming / sum n`` (pystruct's score)."""
    wrong = sum(int(np.sum(np.asarray(p) != np.asarray(y))) for p, y in zip(pred, Y))
    return 1.0 - wrong / sum(len(np.asarray(y)) for y in Y)


def run(name, n_init, repeat):
    prob = PROBLEMS[name]()
    n_init = prob.get("n_init", n_init)
    times, fits = [], []
    for _ in range(repeat):
        learner = structlp.FrankWolfeLearner(prob["model"], tol=TOL)
        clf = LatentSSVM(prob["model"], C=prob["C"], learner=learner, n_init=n_init,
                         random_state=0, max_iter=prob.get("max_iter", 20))
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", structlp.ConvergenceWarning)
            clf.fit(prob["X"], prob["Y"], init=prob.get("init"))
        times.append(time.process_time() - t0)
        fits.append(clf)
    clf = fits[-1]
    row = dict(problem=name, example=PUBLISHED[name]["example"], what=PUBLISHED[name]["what"],
               cpu=float(np.median(times)), n_init=n_init, steps=clf.n_iter_,
               objective=clf.objective_,
               train=accuracy(clf.predict(prob["X"]), prob["Y"]),
               test=None if prob["Xt"] is None else accuracy(clf.predict(prob["Xt"]), prob["Yt"]))
    plain_model, Xp, Xpt = prob["plain"]
    lin = structlp.FrankWolfeLearner(plain_model, C=prob["baseline_C"], random_state=0)
    t0 = time.process_time()
    lin.fit(Xp, prob["Y"])
    row["plain_cpu"] = time.process_time() - t0
    row["plain_train"] = accuracy(lin.predict(Xp), prob["Y"])
    row["plain_test"] = None if Xpt is None else accuracy(lin.predict(Xpt), prob["Yt"])
    pub = PUBLISHED[name]
    row["pystruct_train"], row["pystruct_test"] = pub["latent"]
    row["pystruct_plain_train"], row["pystruct_plain_test"] = pub["plain"]
    # accuracy against pystruct's: on the test set where both have one, else on training
    key = "test" if row["test"] is not None and row["pystruct_test"] is not None else "train"
    row["acc_ratio"] = row[key] / row["pystruct_" + key]
    return row


def merge_pystruct(rows, path):
    """Put pystruct's own run (``pystruct_latent_examples.py --json``) beside the rows."""
    doc = json.loads(Path(path).read_text())
    for row in rows:
        got = doc["examples"].get(row["problem"])
        if got is None:
            continue
        row["pystruct_run_cpu"] = got["cpu"]
        row["pystruct_run_train"] = got.get("train")
        row["pystruct_run_test"] = got.get("test")
        row["pystruct_inference"] = got.get("inference")
        row["cpu_ratio"] = got["cpu"] / row["cpu"]
    return doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--repeats", "--repeat", dest="repeat", type=int, default=3,
                    help="structlp fits per problem (the median CPU is kept)")
    ap.add_argument("--n-init", type=int, default=1)
    ap.add_argument("--only", nargs="*", choices=list(PROBLEMS), default=list(PROBLEMS))
    ap.add_argument("--pystruct", type=Path,
                    help="pystruct's own run (pystruct_latent_examples.py --json) to show")
    ap.add_argument("--rebuild", action="store_true",
                    help="no fit: rebuild --json from its raw rows (results/raw/) and --pystruct")
    args = ap.parse_args(argv)
    raw = None if args.json is None else args.json.parent / "raw" / args.json.name
    if args.rebuild:
        saved = json.loads(raw.read_text())
        started, rows, n_init, repeat = (saved["machine"], saved["rows"], saved["n_init"],
                                         saved["repeat"])
    else:
        started, rows, n_init, repeat = report.machine(), [], args.n_init, args.repeat
        for name in args.only:
            row = run(name, args.n_init, args.repeat)
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()},
                  flush=True)
        if raw is not None:
            raw.parent.mkdir(exist_ok=True)
            raw.write_text(json.dumps(dict(machine=started, rows=rows, n_init=n_init,
                                           repeat=repeat), indent=1) + "\n")
    notes = ["accuracy / pystruct's: the test accuracies where both have one, else the "
             "training accuracies (pystruct's published ones).",
             "crosses and digits: the train/test split is pystruct's call with random_state=0 "
             "(pystruct's examples split without a seed, so their published split is "
             "unknown)."]
    cols = [dict(key="example", label="pystruct example"), dict(key="what", label="data"),
            dict(key="train", label="structlp train acc.", format=".4f"),
            dict(key="test", label="structlp test acc.", format=".4f"),
            dict(key="pystruct_train", label="pystruct published train", format=".4f"),
            dict(key="pystruct_test", label="pystruct published test", format=".4f"),
            dict(key="acc_ratio", label="accuracy / pystruct's", ratio=True),
            dict(key="cpu", label="structlp fit", unit="CPU s", format=".3g"),
            dict(key="steps", label="CCCP steps"),
            dict(key="plain_train", label="non-latent train acc.", format=".4f"),
            dict(key="plain_test", label="non-latent test acc.", format=".4f"),
            dict(key="pystruct_plain_train", label="pystruct non-latent train", format=".4f"),
            dict(key="pystruct_plain_test", label="pystruct non-latent test", format=".4f")]
    runs_note = f"structlp: median of {repeat} fits" if repeat > 1 else "structlp: one fit"
    if args.pystruct:
        doc = merge_pystruct(rows, args.pystruct)
        n_py = doc.get("repeat")
        runs_note += ("; pystruct: " + ("the number of its runs is not recorded (its script's "
                                        "default is one)" if n_py is None else
                                        f"median of {n_py} fits" if n_py > 1 else "one fit"))
        cols[7:7] = [dict(key="pystruct_run_train", label="pystruct run here: train",
                          format=".4f"),
                     dict(key="pystruct_run_test", label="pystruct run here: test",
                          format=".4f"),
                     dict(key="pystruct_run_cpu", label="pystruct fit", unit="CPU s",
                          format=".3g"),
                     dict(key="cpu_ratio", label="pystruct CPU / structlp CPU", ratio=True,
                          plot=True)]
        notes.append(
            f"pystruct 0.3.2 run on this machine (Python {doc['python']}, numpy "
            f"{doc['numpy']}, load {[round(v, 2) for v in doc['load']]} at its start) by "
            "benchmarks/pystruct_latent_examples.py with the examples' learners and "
            "settings, n_jobs=1; no ad3 (it does not build), so the grid models' inference "
            "is pystruct's fallback (" + ", ".join(
                f"{r['problem']}: {r.get('pystruct_inference')}" for r in rows) + ").")
    if args.json:
        report.write(
            args.json, name="latent", title="Latent SSVM: pystruct's latent gallery examples",
            description=(
                "LatentSSVM (CCCP, Frank-Wolfe convex steps to a relative gap of 1e-2, "
                f"{n_init} random start(s); digits: one start from pystruct's k-means "
                "initialization and 2 CCCP steps, as pystruct's latent_iter=2; one BLAS "
                "thread) on pystruct's three "
                "latent examples with pystruct's data generators; median CPU seconds of "
                f"{repeat} fits. The non-latent columns: the same graph without hidden "
                "states or nodes, by FrankWolfeLearner."),
            floor=("pystruct",
                   "pystruct's published gallery accuracies and, with --pystruct, pystruct "
                   "0.3.2 run on this machine"),
            tables=[dict(columns=cols, rows=rows)], started=started,
            modules=("numpy", "scipy", "sklearn"), notes=notes, runs=repeat,
            runs_note=runs_note)


if __name__ == "__main__":
    main()
