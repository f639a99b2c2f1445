"""Facial emotion intensity (Fathony et al. 2018, §4.1, Table 1): AGM vs CRF vs SSVM on CK+ chains.

Each of the 167 CK+ sequences is a chain of frames with 25 PCA'd Haar features
and an intensity label (neutral < increasing < apex).  Features as the authors
built them: node ``[x_t; 1]``, edge ``[|x_t - x_{t-1}|; 1]``, each in the block
of the sequence's emotion class.  Six metrics (zero-one, absolute, squared;
unweighted and weighted by position), the authors' 20 random splits (first 120
train, last 47 test), the regularization chosen per model and metric by k-fold
cross-validation on the first split's training set (``cv`` folds, default 3),
Wilcoxon signed-rank test at alpha = 0.05.  ``reg`` is the ``lambda`` of
``lambda/2 |theta|^2 + mean_i loss_i``.  AGM and SSVM predict by max-sum on the
potentials, the CRF by the Bayes decision for the metric, as in the paper.

Two protocols (option ``protocol``):

- ``"exact"`` (default): every model solved to optimality.  The class blocks
  never interact (a sequence only touches its class's block and the L2
  regularizer is separable), so each model is six independent per-class
  problems with the joint program's optimum.  AGM and SSVM by n-slack cutting
  planes (``exact_solver="cutting_plane"``, default: the AGM's
  ``method="cutting_plane"`` with each sequence's inner LP as the oracle, the
  SSVM's :class:`~structlp.CuttingPlaneLearner` with max-sum), stopped at a
  certified gap of ``CP_TOL`` = 1e-8 on ``reg/2 |theta|^2 + mean loss``, or by
  one Clarabel QP per class (``exact_solver="qp"``, the previous release); the
  CRF by L-BFGS.  The grid starts at 10^-1..10^1 and is extended by a
  decade on a side whenever a (model, metric)'s best value sits on that edge,
  until every chosen value is interior (the output lists the extensions).
- ``"paper"``: the authors' code (rizalzaf/drgm, main_emotion_cv.jl and
  crf_emotion_cv.jl): their grid 1e-1..1e-5 and 0, AdaGrad (step 0.1, one
  example per step, the last iterate) on the joint 6-block model, 50 passes in
  cross-validation and 100 passes in the final fits; AGM (structlp's
  ``method="subgradient"``, exact inner LP per example) from theta = -0.5, the
  CRF from theta ~ U(-0.5, 0.5), as their code does.  Their code has no SSVM
  and the paper does not say how it was trained: here the same AdaGrad on the
  SSVM hinge (loss-augmented max-sum) from theta = -0.5.  The authors
  validated on one 70/30 split; here, as the paper's text says, by k-fold
  cross-validation.  Ties go to the larger lambda (their ``indmin`` order).

Where the time goes (exact protocol; CPU seconds measured in the run's tasks,
which report fit / prediction / solver seconds per model and phase).  The whole
20-split run (``-o splits=20 -o n_jobs=2``, idle machine): 395 s wall (6 min 35 s),
787 CPU-s; the cross-validation 131 s wall (fit CPU: AGM 175, SSVM 59, CRF 19), the
final fits AGM 374, CRF 70, SSVM 68 CPU-s: 72 per-class fits per split (6
metrics x 2 models x 6 classes), an AGM class fit 0.52 CPU-s on average, an SSVM
one 0.10.  The same run with ``exact_solver="qp"`` (the previous release's
Clarabel QPs), measured in the same session: 988 s wall, 1,969 CPU-s (CV 321 s wall;
final fits AGM 754, SSVM 502, CRF 60 CPU-s), so 2.5x the wall time; the chosen regs, the
21 grid extensions and the table are the same, and 358 of the 360 per-split test
losses are equal (the other two, zero-one unweighted for AGM and SSVM on one split
each, differ by 0.0015 and 0.0016: predictions at a near-tie, where the two
solvers' coefficients, equal to about 1e-4 relative, differ).  On the largest class (29
sequences, 555 frames) an AGM cutting plane takes 15-25 rounds and 0.7-1.4 CPU-s
(300-490 vertices in its master) where Clarabel took 2.2-2.9; in an AGM task 42 %
of the time is HiGHS's dual simplex (0.74 ms per hot-started LP), 24 % the
master's active-set method, the rest building the polytopes and the sparse
products.  The SSVM's cutting plane is 7x faster than its QP in the final fits (68
against 502 CPU-s; max-sum costs microseconds).  ``benchmarks/bench_agm_emotion.py``
times both routes on one split in one run and checks their test losses equal; the
tests check the same objectives (1e-7) and coefficients per class.

Why the QPs were slow (``exact_solver="qp"``; ``benchmarks/bench_agm_emotion.py
--kkt``, the largest class): the KKT matrix of the AGM QP has dimension 14,365
and 193,601 nonzeros in its constraint matrix, 89 % of them the coupling of the
312 shared parameters (SSVM: 10,480 and 92 %); its LDL factor has 1.22 M
nonzeros and costs 0.30 GFlop per iteration under a minimum-degree ordering, and
1.31 M / 0.32 GFlop when the parameters are eliminated last, so the ordering was
already at that floor: each local column of the factor fills with about 90 of
the parameters, whatever the formulation (the chain's dual as Bellman
inequalities, the part scores as variables, ``v`` free: the same cost; HiGHS's
QP solver and QDLDL slower).  The cutting planes never form that matrix: their
master QP has one row per vertex found and the parameters enter only through
its Gram matrix.  Kept for the QP route: Clarabel with faer's supernodal LDL and
without iterative refinement (``FAST_CLARABEL``), one solver thread per worker,
the SSVM's :class:`ChainLabeling` (no multipliers for the implied bounds mu <= 1),
the AGM's inner polytopes built once per distinct (shape, node losses) and its
verification as one LP on them.  For both routes: tasks longest first, and a
grid search that only evaluates the decades it needs.

What the runs show.  Exact protocol, 20 splits (3-fold CV, the grid extended 21
times until every chosen value is interior: AGM 1-100, SSVM 10-100, CRF 0.1-10):
average loss AGM 0.354, CRF 0.340, SSVM 0.365, best or not significantly worse
(Wilcoxon) on 2 / 5 / 1 metrics of 6 (paper 0.33 / 0.35 / 0.35 and 4 / 2 / 2).
Paper protocol with its own 3-fold CV over the authors' grid (AdaGrad, 50
passes in the CV, 100 in the final fits), 20 splits: the CV picks lambda 0-1e-4
for AGM and SSVM and 0.01-0.1 for the CRF; average loss AGM 0.369, CRF 0.357,
SSVM 0.364, best or not significantly worse on 4 / 6 / 5 metrics (with lambda =
1e-3 fixed: AGM 0.379, CRF 0.347, SSVM 0.375; 0 / 6 / 1).  So the paper's
ranking does not appear under early stopping either: the CRF has the best
average under both protocols, and AGM does better solved exactly (0.354) than
early-stopped (0.369), as does the CRF (0.340 against 0.357; the SSVM 0.365
against 0.364).  That run: 2,208 CPU-s, 4,459 s wall (CV 1,314 s), n_jobs
2 under ``nice -n 19`` beside two other jobs (load 6-9).

Skip-chains (``edges="skip2"``) at the chain's cross-validated regs (``regs``
option, so that only the graph differs), paired with the chain on the same
splits (:func:`compare`): the CRF's loss falls on every metric over 10 splits
(average 0.331 -> 0.300, -0.015 to -0.045 per metric, Wilcoxon p 0.002-0.004);
on split 1 (the one split run for the QP models: its AGM and SSVM fits cost
444 CPU-s on skip-chains against 85 on the chain, the clique QPs being about 5x
the chain's) the AGM's falls on 6 of 6 metrics (average 0.325 -> 0.281) and the
SSVM's on 5 of 6 (0.338 -> 0.311).  The full skip-chain exact protocol with its
own CV (``-o edges=skip2 -o splits=20``, cutting planes: 1,058 s wall, 1,997 CPU-s,
idle machine) then confirms it for all three: average loss AGM 0.304, CRF 0.308,
SSVM 0.302 (chain 0.354 / 0.340 / 0.365), best or not significantly worse on
3 / 3 / 3 metrics, and paired with the chain run every model's loss falls on
every metric (at least 17 of 20 splits each, Wilcoxon p <= 4.8e-4).

The data (research use only) are read from ``data_path`` (option), else
``$STRUCTLP_CK_PATH``, else ``../shared/data/ck_emotion``; never copied here.
Run: ``structlp run problems/emotion_intensity.py -o splits=20
[-o protocol=paper] [-o edges=skip2] [-o n_jobs=2] [-o verbose=1]
[-o models='["CRF"]'] [-o regs='{"CRF": [0.1, 0.1, 0.1, 10, 1, 1]}']`` (tasks = one
model fitted on one split or fold, run in forked worker processes).
"""

from __future__ import annotations

import resource
import time
from collections import namedtuple

import numpy as np

import structlp
from structlp.utils import Progress, check_verbose
from structlp.agm import AdversarialGraphicalModel, JunctionTreeCRF, TreeCRF
from structlp.agm.crf import tree_marginals
from structlp.agm.data import emotion_examples, load_ck_emotion
from structlp.agm.game import check_loss
from structlp.graphical.junction import GraphExample, check_graph_example, jt_marginals, jt_max_sum
from structlp.graphical.trees import check_tree_example, max_sum, potentials
from structlp.structures import JunctionTreeLabeling, TreeLabeling

DESCRIPTION = __doc__.split("\n\n")[0]

METRICS = [("zero_one", False), ("absolute", False), ("squared", False),
           ("zero_one", True), ("absolute", True), ("squared", True)]
#: Table 1 of the paper (as read in ../shared/DESIGN.md): AGM, CRF, SSVM.
PAPER = {("zero_one", False): (0.34, 0.32, 0.37), ("absolute", False): (0.33, 0.34, 0.40),
         ("squared", False): (0.38, 0.38, 0.40), ("zero_one", True): (0.28, 0.32, 0.29),
         ("absolute", True): (0.29, 0.36, 0.29), ("squared", True): (0.36, 0.40, 0.33),
         "average": (0.33, 0.35, 0.35)}
#: The paper's bold marks, from its prose (AGM beats CRF on absolute, weighted
#: zero-one and weighted absolute, ties it on squared, loses on zero-one; beats SSVM on
#: absolute, squared and weighted zero-one, ties on weighted absolute, loses on
#: weighted squared): 4 / 2 / 2 as in its "# bold" row.
PAPER_BOLD = {("zero_one", False): {"CRF"}, ("absolute", False): {"AGM"},
              ("squared", False): {"AGM", "CRF"}, ("zero_one", True): {"AGM"},
              ("absolute", True): {"AGM", "SSVM"}, ("squared", True): {"SSVM"}}
MODELS = ("AGM", "CRF", "SSVM")
#: The authors' grid (their code's order: ties go to the first, the largest lambda).
PAPER_GRID = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 0.0)
#: AdaGrad passes of the authors' code: in cross-validation, in the final fits.
PAPER_PASSES = {"cv": 50, "final": 100}
EXACT_GRID = (0.1, 1.0, 10.0)
#: Graph of a sequence (option ``edges``): the chain, or the chain plus skip edges
#: (t, t + 2) with their own parameters (junction tree of width 2; AGM, SSVM and CRF
#: then run on the junction tree).
EDGES = ("chain", "skip2")
#: Training sequences of a split (the authors' 120; the rest are the test set).
N_TRAIN = 120
#: Extension of the exact grid stops at these (a decade at a time).
EXACT_LIMITS = (1e-6, 1e6)

#: Clarabel with faer's supernodal LDL (one thread per worker process) and without
#: iterative refinement of its KKT solves: on these QPs (the dense 312-parameter block
#: makes every KKT factor dense-ish) faer's BLAS-3 kernels beat the default QDLDL by
#: about 25 % and skipping refinement saves 20-30 %; optimal values within 2e-6
#: relative of the defaults.  A QP that then fails is solved again with Clarabel's
#: defaults (QDLDL, refinement on).
FAST_CLARABEL = {"direct_solve_method": "faer", "iterative_refinement_enable": False}
#: How the exact protocol solves AGM and SSVM (option ``exact_solver``): "cutting_plane"
#: (n-slack cutting planes to a certified gap of CP_TOL; the AGM's oracle is each
#: sequence's inner LP, the SSVM's max-sum) or "qp" (one Clarabel QP per class).
EXACT_SOLVERS = ("cutting_plane", "qp")
EXACT_SOLVER = "cutting_plane"
#: The cutting planes stop when no example's loss exceeds its master bound by more than
#: this (loss units): the objective reg/2 |theta|^2 + mean loss is then within CP_TOL
#: of its minimum.
CP_TOL = 1e-8
CP_MAX_ITER = 2000

def metric_name(loss, weighted):
    return f"{loss.replace('_', '-')}, {'weighted' if weighted else 'unweighted'}"


def sequence_loss(y_pred, y_true, loss, weighted):
    """Weighted average per-node loss of one sequence (weights = position if weighted)."""
    d = np.abs(np.asarray(y_pred) - np.asarray(y_true)).astype(float)
    per = (d > 0).astype(float) if loss == "zero_one" else (d if loss == "absolute" else d ** 2)
    w = np.arange(1, len(d) + 1, dtype=float) if weighted else np.ones(len(d))
    return float(np.sum(w * per) / np.sum(w))


def _weights(n, weighted):
    w = np.arange(1, n + 1, dtype=float) if weighted else np.ones(n)
    return w / w.sum()


class PerClass:
    """Train one estimator per emotion class (exact block decomposition) and predict."""

    def __init__(self, make):
        self.make = make

    def fit(self, X, Y, Z):
        self.models = {}
        m = len(X)
        for z in np.unique(Z):
            idx = np.flatnonzero(Z == z)
            self.models[z] = self.make(len(idx), m).fit([X[i] for i in idx], [Y[i] for i in idx])
        return self

    def predict(self, X, Z, **kw):
        out = [None] * len(X)
        for z, model in self.models.items():
            idx = np.flatnonzero(Z == z)
            if len(idx):
                for i, p in zip(idx, model.predict([X[i] for i in idx], **kw)):
                    out[i] = p
        return out

    def solver_seconds(self):
        """Seconds spent inside the QP solver (Clarabel's own count), over the classes."""
        stats = [getattr(getattr(mdl, "problem_", None), "solver_stats", None)
                 for mdl in self.models.values()]
        return float(sum(st.solve_time or 0.0 for st in stats if st is not None))


# ------------------------------------------------------------------ exact models
def _agm(loss, weighted, reg, solver, solver_opts=None, exact_solver=EXACT_SOLVER):
    # per-class objective reg/2 |theta_z|^2 + (1/m) sum_{i in z} f_i  <=>  reg * m / m_z
    route = (dict(method="cutting_plane", tol=CP_TOL) if exact_solver == "cutting_plane"
             else dict(method="qp", solver=solver, solver_opts=solver_opts))
    return lambda m_z, m: AdversarialGraphicalModel(
        3, loss=loss, node_weights="position" if weighted else None, normalize_weights=True,
        reg=reg * m / m_z, **route)


class ChainLabeling(TreeLabeling):
    """TreeLabeling whose polytope records that every marginal is at most 1 (the same polytope).

    Node marginals sum to 1 and an edge marginal ``Q_e[a, b]`` is at most its parent's
    ``r[a]`` (``sum_b Q_e[a, b] = r[a]``, ``Q >= 0``), so the explicit bounds ``mu <= 1``
    are all implied.  :meth:`~structlp.polytope.Polytope.implied_upper_bounds` scans
    single rows and sees it for the node parts only, so the dualized QP would keep one
    multiplier per edge part (4,734 of 8,786 variables on the largest class); with the
    implied bounds recorded they are dropped: the same LP, the same QP optimum (within
    the solver's tolerance: 2e-8 relative on the objective), about a third less
    Clarabel time on these QPs.
    """

    def polytope(self, x):
        P = super().polytope(x)
        P._implied_ub = np.ones(P.n_columns)   # the cache implied_upper_bounds fills
        return P


def _ssvm(loss, weighted, reg, solver, solver_opts=None, loopy=False,
          exact_solver=EXACT_SOLVER):
    # 1/2 |w|^2 + C sum xi with C = 1 / (reg m): the same scaling as reg/2 |w|^2 + mean xi
    # (skip-chain examples: the labelling over the clique polytope of the junction tree);
    # the cutting plane's tol is in loss units: its gap C m tol is tol in that scaling
    structure = JunctionTreeLabeling if loopy else ChainLabeling

    def labelling():
        return structure(3, loss=loss, node_weights="position" if weighted else None,
                         normalize_weights=True)
    if exact_solver == "cutting_plane":
        return lambda m_z, m: structlp.CuttingPlaneLearner(
            labelling(), C=1.0 / (reg * m), tol=CP_TOL, max_iter=CP_MAX_ITER)
    return lambda m_z, m: structlp.MaxMarginLearner(
        labelling(), C=1.0 / (reg * m), solver=solver, solver_opts=solver_opts)


def _crf(reg, loopy=False):
    crf = JunctionTreeCRF if loopy else TreeCRF
    return lambda m_z, m: crf(3, reg=reg * m / m_z, max_iter=300)


def _make(model, key, reg, solver, opts, loopy=False, exact_solver=EXACT_SOLVER):
    return (_agm(*key, reg, solver, opts, exact_solver) if model == "AGM"
            else _ssvm(*key, reg, solver, opts, loopy, exact_solver))


# ------------------------------------------------------------------ paper protocol
def _decode(ex, b, B):
    """Max-sum labelling: on the chain, or on the junction tree of a skip-chain."""
    return (jt_max_sum if isinstance(ex, GraphExample) else max_sum)(ex, b, B)[0]


def _marginals(ex, b, B):
    """Node (n, k) and edge (E, k, k) marginals by sum-product (chain or junction tree)."""
    if isinstance(ex, GraphExample):
        return jt_marginals(ex, b, B)[2:]
    return tree_marginals(ex, b, B)[1:]


def _one_hot(ex, y, k):
    Zv = np.eye(k)[y]
    Ze = np.zeros((len(ex.edge_child), k, k))
    Ze[np.arange(len(ex.edge_child)), y[ex.edge_parent], y[ex.edge_child]] = 1.0
    return Zv, Ze


def _feature_gradient(ex, R, Q, y, k):
    """``Phi(x, (R, Q)) - Phi(x, y)``: expected minus empirical features, flat like theta."""
    Zv, Ze = _one_hot(ex, y, k)
    gv = (R - Zv).T @ ex.node_features
    ge = np.einsum("eab,ef->abf", Q - Ze, ex.edge_features)
    return np.concatenate([gv.ravel(), ge.ravel()])


def adagrad(grad, theta, m, reg, passes, rng, lr=0.1, eps=1e-8):
    """The authors' AdaGrad: one example per step, ``passes`` random-order passes.

    ``grad(i, theta)`` is example ``i``'s (sub)gradient of its loss; the step uses
    it plus ``reg * theta``; returns the last iterate (as their code does).
    """
    G = np.zeros_like(theta)
    for _ in range(passes):
        for i in rng.permutation(m):
            g = grad(i, theta) + reg * theta
            G += g * g
            theta = theta - lr / (np.sqrt(G) + eps) * g
    return theta


def _paper_fit(model, key, reg, exs, Ys, passes, seed):
    """Fit one model by the authors' stochastic protocol on the joint 6-block features."""
    k = 3
    D = 3 * exs[0].node_features.shape[1] + 9 * exs[0].edge_features.shape[1]
    rng = np.random.default_rng(seed)
    if model == "AGM":
        loss, weighted = key
        return AdversarialGraphicalModel(
            k, loss=loss, node_weights="position" if weighted else None, normalize_weights=True,
            reg=reg, method="subgradient", inner="lp", max_epochs=passes, learning_rate=0.1,
            batch_size=1, average=False, init=-0.5, random_state=seed).fit(exs, Ys).coef_
    if model == "CRF":
        def grad(i, theta):
            ex, y = exs[i], Ys[i]
            R, Q = _marginals(ex, *potentials(ex, theta, k))
            return _feature_gradient(ex, R, Q, y, k)
        return adagrad(grad, rng.uniform(-0.5, 0.5, D), len(exs), reg, passes, rng)
    L = check_loss(key[0], k)[1]

    def grad(i, theta):                          # SSVM hinge: loss-augmented max-sum
        ex, y = exs[i], Ys[i]
        b, B = potentials(ex, theta, k)
        w = _weights(ex.n_nodes, key[1])
        y_star = _decode(ex, b + w[:, None] * L[:, y].T, B)
        R, Q = _one_hot(ex, y_star, k)
        return _feature_gradient(ex, R, Q, y, k)
    return adagrad(grad, np.full(D, -0.5), len(exs), reg, passes, rng)


def _paper_predict(model, theta, exs, key):
    k = 3
    pots = [potentials(ex, theta, k) for ex in exs]
    if model != "CRF":
        return [_decode(ex, b, B) for ex, (b, B) in zip(exs, pots)]
    L = check_loss(key[0], k)[1]
    return [np.argmin(_marginals(ex, b, B)[0] @ L.T, axis=1) for ex, (b, B) in zip(exs, pots)]


# ------------------------------------------------------------------ tasks
# One task = one model (and one metric for AGM / SSVM) fitted on a train set and
# scored on a test set; tasks are independent, so they run in a process pool.
_DATA = {}
#: A task: ``phase`` is "cv" or "final", ``tag`` the fold or split index.
Job = namedtuple("Job", "model key reg train test phase tag")


def _evaluate(pred, Y, loss, weighted):
    return float(np.mean([sequence_loss(p, y, loss, weighted) for p, y in zip(pred, Y)]))


def _task(job):
    """Run one task; returns (job, {metric key: mean test loss}, timing dict)."""
    model, key, reg, train, test = job[:5]
    Y, Z, cfg = _DATA["Y"], _DATA["Z"], _DATA["cfg"]
    Ytr, Yte = [Y[i] for i in train], [Y[i] for i in test]
    keys = METRICS if model == "CRF" else [key]
    t0, c0 = time.perf_counter(), time.process_time()
    solver_s, n_fits = 0.0, 1
    if cfg["protocol"] == "paper":
        X = _DATA["X_joint"]
        theta = _paper_fit(model, key, reg, [X[i] for i in train], Ytr,
                           PAPER_PASSES[job.phase], cfg["seed"])
        t1, c1 = time.perf_counter(), time.process_time()
        exs = [X[i] for i in test]
        out = {k: _evaluate(_paper_predict(model, theta, exs, k), Yte, *k) for k in keys}
    else:
        X = _DATA["X"]
        Xtr, Ztr, Xte, Zte = [X[i] for i in train], Z[train], [X[i] for i in test], Z[test]
        if model == "CRF":
            fitted = PerClass(_crf(reg, cfg.get("edges", "chain") != "chain")).fit(Xtr, Ytr, Ztr)
        else:
            solver = cfg["solver"]
            qp = cfg.get("exact_solver", EXACT_SOLVER) == "qp"
            clarabel = qp and (solver is None or str(solver).upper() == "CLARABEL")
            opts = dict(FAST_CLARABEL) if clarabel else None
            if clarabel and cfg["n_jobs"] > 1:
                opts["max_threads"] = 1   # one solver thread per worker process
            try:
                fitted = (_fit_with_fallback(model, key, reg, solver, opts, clarabel,
                                             Xtr, Ytr, Ztr) if qp else
                          PerClass(_make(model, key, reg, None, None,
                                         cfg.get("edges", "chain") != "chain",
                                         "cutting_plane")).fit(Xtr, Ytr, Ztr))
            except structlp.SolverError:
                if job.phase != "cv":
                    raise
                # a CV value the solver cannot reach (e.g. reg = 1e4: theta ~ 0, badly
                # scaled): it counts as the worst value and stops the grid's extension
                return job, {key: float("inf")}, {
                    "fit": time.perf_counter() - t0, "fit_cpu": time.process_time() - c0,
                    "predict": 0.0, "predict_cpu": 0.0, "solver": 0.0, "fits": 0}
            solver_s = fitted.solver_seconds()
        n_fits = len(fitted.models)
        t1, c1 = time.perf_counter(), time.process_time()
        out = {k: _evaluate(fitted.predict(Xte, Zte, **({"loss": k[0]} if model == "CRF" else {})),
                            Yte, *k) for k in keys}
    t2, c2 = time.perf_counter(), time.process_time()
    timing = {"fit": t1 - t0, "fit_cpu": c1 - c0, "predict": t2 - t1, "predict_cpu": c2 - c1,
              "solver": solver_s, "fits": n_fits}
    return job, out, timing


def _fit_with_fallback(model, key, reg, solver, opts, clarabel, X, Y, Z):
    loopy = _DATA["cfg"].get("edges", "chain") != "chain"
    try:
        return PerClass(_make(model, key, reg, solver, opts, loopy, "qp")).fit(X, Y, Z)
    except structlp.SolverError:
        if not clarabel:
            raise
        # without iterative refinement Clarabel may stop short: redo with its defaults
        opts = {k: v for k, v in opts.items() if k not in FAST_CLARABEL}
        return PerClass(_make(model, key, reg, solver, opts, loopy, "qp")).fit(X, Y, Z)


def _run_tasks(jobs, n_jobs, progress):
    """Run tasks (n_jobs=1: in order; else in a pool of forked workers, longest first)."""
    def report(r):
        job, out, tm = r
        where = f"fold {job.tag + 1}" if job.phase == "cv" else f"split {job.tag + 1}"
        progress.message(f"[{where}] {job.model} reg={job.reg:g} (fit {tm['fit']:.1f} s, "
                     f"cpu {tm['fit_cpu']:.1f} s): "
                     + ", ".join(f"{metric_name(*k)} {v:.4f}" for k, v in out.items()))
        return r

    if n_jobs == 1 or len(jobs) <= 1:
        return [report(_task(j)) for j in jobs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed
    # by split / fold; within it the long tasks first (AGM and SSVM fit 6 QPs each)
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].tag, jobs[i].model == "CRF"))
    out = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context("fork")) as pool:
        futures = {pool.submit(_task, jobs[i]): i for i in order}
        for f in as_completed(futures):
            out[futures[f]] = report(f.result())
    return out


def _jobs(train, test, regs, phase, tag):
    """The tasks of one train/test partition; ``regs[(model, key)]`` are the regs to use
    (the models run are those of ``regs``'s keys)."""
    crf = sorted({r for (n, k), rs in regs.items() if n == "CRF" for r in rs})
    jobs = [Job("CRF", None, r, train, test, phase, tag) for r in crf]
    for model in ("AGM", "SSVM"):
        jobs += [Job(model, k, r, train, test, phase, tag) for k in METRICS
                 if (model, k) in regs for r in regs[(model, k)]]
    return jobs


def _folds(train, n_folds):
    parts = np.array_split(np.asarray(train), n_folds)
    return [(np.concatenate(parts[:f] + parts[f + 1:]), parts[f]) for f in range(n_folds)]


def cross_validate(train, grid, n_folds, n_jobs, extend, timings, progress, models=MODELS):
    """Choose reg per (model, metric) by k-fold CV on ``train``.

    ``extend``: add a decade beyond an edge while some (model, metric)'s best
    value is on it (exact protocol).  Returns ({(model, key): reg}, CV losses,
    list of extension notes).
    """
    folds = _folds(train, n_folds)
    scores = {}                    # (model, key) -> {reg: [fold losses]}
    todo = {(n, k): list(grid) for n in models for k in METRICS}
    notes = []
    while any(todo.values()):
        jobs = []
        for f, (fit_ids, val_ids) in enumerate(folds):
            regs = {mk: todo[mk] for mk in todo}
            jobs += _jobs(fit_ids, val_ids, regs, "cv", f)
        for job, out, tm in _run_tasks(jobs, n_jobs, progress):
            timings.append((job, tm))
            for k, v in out.items():
                scores.setdefault((job.model, k), {}).setdefault(job.reg, []).append(v)
        todo = {mk: [] for mk in todo}
        if not extend:
            break
        for mk, by_reg in scores.items():
            best = _best(by_reg)
            regs = sorted(by_reg)
            failed = [r for r, v in by_reg.items() if not np.all(np.isfinite(v))]
            if failed and not any(f"{mk[0]}/{metric_name(*mk[1])}: solver" in n for n in notes):
                notes.append(f"{mk[0]}/{metric_name(*mk[1])}: solver failed at reg "
                             f"{', '.join(f'{r:g}' for r in sorted(failed))} (counted as worst)")
            if best == regs[-1] and best * 10 <= EXACT_LIMITS[1]:
                todo[mk] = [best * 10]
            elif best == regs[0] and best / 10 >= EXACT_LIMITS[0]:
                todo[mk] = [best / 10]
            if todo[mk]:
                notes.append(f"{mk[0]}/{metric_name(*mk[1])}: best {best:g} on the grid's edge, "
                             f"tried {todo[mk][0]:g}")
                progress.message("grid extended: " + notes[-1])
    chosen = {mk: _best(by_reg) for mk, by_reg in scores.items()}
    cv_loss = {mk: {r: float(np.mean(v)) for r, v in by_reg.items()}
               for mk, by_reg in scores.items()}
    return chosen, cv_loss, notes


def _best(by_reg):
    """The reg of least mean CV loss; ties go to the larger reg."""
    regs = sorted(by_reg, reverse=True)
    means = [np.mean(by_reg[r]) for r in regs]
    return regs[int(np.argmin(means))]


def _check_models(models):
    """``models`` option: a subset of MODELS (default all), in MODELS's order."""
    if models is None:
        return MODELS
    names = [models] if isinstance(models, str) else models
    if (not isinstance(names, (list, tuple)) or not names
            or any(m not in MODELS for m in names)):
        raise structlp.InvalidParameterError(
            f"models must be a non-empty list of {MODELS}; got {models!r}.")
    return tuple(m for m in MODELS if m in names)


def _check_regs(regs, models, protocol):
    """``regs`` option: fixed regs, {model: one value or one per metric}, for every model run.

    Returns {(model, metric key): reg}, or None when ``regs`` is None (CV chooses).
    """
    if regs is None:
        return None
    expect = (f"a mapping from each model run ({', '.join(models)}) to one regularization "
              f"value or a list of {len(METRICS)} (one per metric, in the table's order)")
    if not isinstance(regs, dict) or set(regs) != set(models):
        raise structlp.InvalidParameterError(f"regs must be {expect}; got {regs!r}.")
    zero_ok = protocol == "paper"
    chosen = {}
    for n in models:
        try:
            v = np.atleast_1d(np.asarray(regs[n], dtype=float))
        except (TypeError, ValueError):
            v = np.array([np.nan])
        if (v.ndim != 1 or len(v) not in (1, len(METRICS)) or not np.all(np.isfinite(v))
                or np.any(v < 0) or (not zero_ok and np.any(v == 0))):
            raise structlp.InvalidParameterError(
                f"regs must be {expect}, {'non-negative' if zero_ok else 'positive'} "
                f"(protocol={protocol!r}); got {regs[n]!r} for {n}.")
        v = np.broadcast_to(v, len(METRICS))
        chosen.update({(n, k): float(r) for k, r in zip(METRICS, v)})
    return chosen


def _check_options(protocol, splits, n_jobs, cv, grid, reg_grid, edges="chain"):
    if protocol not in ("exact", "paper"):
        raise structlp.InvalidParameterError(
            f"protocol must be 'exact' or 'paper'; got {protocol!r}.")
    if edges not in EDGES:
        raise structlp.InvalidParameterError(
            f"edges must be one of {EDGES} (the chain, or the chain plus the skip edges "
            f"(t, t + 2)); got {edges!r}.")
    for name, v, lo, hi in (("splits", splits, 1, 20), ("n_jobs", n_jobs, 1, None),
                            ("cv", cv, 1, 40)):
        if (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo
                or (hi is not None and v > hi)):
            rng = f"in {lo}..{hi}" if hi else f">= {lo}"
            raise structlp.InvalidParameterError(f"{name} must be an integer {rng}; got {v!r}.")
    zero_ok = protocol == "paper"
    if not grid or any(not np.isfinite(r) or r < 0 or (r == 0 and not zero_ok) for r in grid):
        raise structlp.InvalidParameterError(
            f"reg_grid must hold {'non-negative' if zero_ok else 'positive'} regularization "
            f"values (protocol={protocol!r}); got {reg_grid!r}.")


def run(solver=None, C=None, seed=0, splits=1, data_path=None, protocol="exact", cv=3,
        reg_grid=None, n_jobs=2, verbose=0, edges="chain", models=None, regs=None,
        exact_solver=EXACT_SOLVER, **options):
    """Run the experiment on ``splits`` of the authors' 20 splits (in order).

    Options: ``protocol`` ("exact" or "paper", see the module docstring),
    ``splits`` (1..20), ``cv`` (folds of the cross-validation on split 1's
    training set; 1 = no selection, the first grid value), ``reg_grid``
    (default: 10^-1..10^1 extended as needed for "exact", the authors'
    1e-1..1e-5 and 0 for "paper"; one value = no selection; ``C`` given fixes
    reg = C), ``data_path`` (default ``$STRUCTLP_CK_PATH`` or
    ../shared/data/ck_emotion), ``n_jobs`` (forked worker processes, each task
    being one model fitted on one split or fold; Clarabel then runs one
    thread per worker), ``seed`` (AdaGrad's order and the CRF's start in the
    paper protocol), ``verbose`` (0, or >= 1: one log line per finished task
    and per grid extension, through :class:`structlp.utils.Progress`), ``edges``
    ("chain", default, or "skip2": skip-chain examples with the edges (t, t + 2)
    too, their features ``[|x_{t+2} - x_t|; 1]`` with their own parameters; the
    AGM then runs on the junction tree (width 2), the SSVM on
    :class:`~structlp.structures.JunctionTreeLabeling`, the CRF is
    :class:`~structlp.agm.JunctionTreeCRF`), ``models`` (a list of "AGM", "CRF",
    "SSVM": the models to run, default all), ``regs`` (fixed regs, no cross-validation:
    ``{model: reg or [one reg per metric]}`` for every model run, e.g. another run's
    chosen values, for a paired comparison at equal regularization), ``exact_solver``
    (exact protocol: "cutting_plane", default, or "qp", the Clarabel QPs of the
    previous release; ``solver`` names the QP solver of "qp" and is refused otherwise).

    """
    from scipy.stats import wilcoxon
    if options:
        raise structlp.InvalidParameterError(
            f"Unknown option(s) {sorted(options)} of emotion_intensity; known: protocol, "
            "splits, cv, reg_grid, data_path, n_jobs, seed, verbose, edges, models, regs, "
            "exact_solver.")
    if exact_solver not in EXACT_SOLVERS:
        raise structlp.InvalidParameterError(
            f"exact_solver must be one of {EXACT_SOLVERS}; got {exact_solver!r}.")
    if solver is not None and exact_solver != "qp":
        raise structlp.InvalidParameterError(
            f"solver={solver!r} names a QP solver: it applies with exact_solver='qp' only "
            f"(exact_solver={exact_solver!r} uses the built-in cutting planes).")
    verbose = check_verbose(verbose, owner="emotion_intensity")
    if reg_grid is None:
        reg_grid = PAPER_GRID if protocol == "paper" else EXACT_GRID
    try:
        grid = [float(C)] if C is not None else [float(r) for r in np.atleast_1d(reg_grid)]
    except (TypeError, ValueError):
        grid = []
    _check_options(protocol, splits, n_jobs, cv, grid, reg_grid, edges)
    models = _check_models(models)
    fixed = _check_regs(regs, models, protocol)
    progress = Progress("emotion_intensity", verbose=verbose)
    t0 = time.perf_counter()
    ru0 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    D = load_ck_emotion(data_path)
    n_split = int(splits)
    check = check_tree_example if edges == "chain" else (lambda x: check_graph_example(x, 3))
    _DATA.update(X=emotion_examples(D["frames"], np.zeros(len(D["frames"]), dtype=int),
                                    n_classes=1, edges=edges),
                 X_joint=[check(x) for x in
                          emotion_examples(D["frames"], D["emotion"], n_classes=6,
                                           edges=edges)],
                 Y=D["labels"], Z=D["emotion"],
                 cfg={"protocol": protocol, "solver": solver, "seed": int(seed),
                      "n_jobs": int(n_jobs), "edges": edges, "exact_solver": exact_solver})
    first = D["splits"][0]
    timings, notes, cv_loss = [], [], {}
    if fixed is not None:
        chosen = fixed
    elif len(grid) == 1 or cv == 1:
        chosen = {(n, key): grid[0] for n in models for key in METRICS}
    else:
        chosen, cv_loss, notes = cross_validate(first[:N_TRAIN], grid, int(cv), int(n_jobs),
                                                protocol == "exact", timings, progress, models)
        progress.message("chosen: " + ", ".join(f"{n}/{metric_name(*k)} {chosen[(n, k)]:g}"
                                            for n in models for k in METRICS))
    t_val = time.perf_counter() - t0
    jobs = []
    for s in range(n_split):
        ids = D["splits"][s]
        jobs += _jobs(ids[:N_TRAIN], ids[N_TRAIN:], {mk: [r] for mk, r in chosen.items()}, "final", s)
    results = {(n, key): [None] * n_split for n in models for key in METRICS}
    for job, out, tm in _run_tasks(jobs, n_jobs, progress):
        timings.append((job, tm))
        for k, v in out.items():
            if chosen[(job.model, k)] == job.reg:
                results[(job.model, k)][job.tag] = v
    progress.close()
    elapsed = time.perf_counter() - t0
    ru1 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(ru0, ru1))
    return _report(results, chosen, cv_loss, notes, timings, protocol, grid, n_split, cv,
                   n_jobs, elapsed, t_val, cpu, wilcoxon, edges, models, fixed is not None)


def _marks(results, key, n_split, wilcoxon, models=MODELS):
    """Best mean, or not significantly worse than it (Wilcoxon signed-rank, alpha 0.05)."""
    means = {n: float(np.mean(results[(n, key)])) for n in models}
    best = min(means, key=means.get)
    marks = {}
    for n in models:
        ok = n == best
        if not ok and n_split >= 5:
            a, b = np.array(results[(n, key)]), np.array(results[(best, key)])
            ok = bool(np.allclose(a, b)) or wilcoxon(a, b).pvalue >= 0.05
        marks[n] = ok
    return means, marks


def compare(a, b, labels=("a", "b")):
    """Paired comparison of two runs' results (``run``'s dicts or their ``--json`` files).

    Per model both ran and per metric: the two means over the splits both ran (the
    first ``min(splits)``), their difference ``b - a`` and the Wilcoxon signed-rank
    p-value of the per-split differences (5 splits or more).  E.g. the chain against
    skip-chains at the same regs (``-o regs=...``).  Returns the lines of a table.
    """
    from scipy.stats import wilcoxon
    n = min(a["splits"], b["splits"])
    models = [m for m in MODELS if m in a["table"][metric_name(*METRICS[0])]
              and m in b["table"][metric_name(*METRICS[0])]]
    w = max(8, *map(len, labels))
    lines = [f"{labels[0]} vs {labels[1]}: mean test loss over splits 1..{n}, difference "
             f"{labels[1]} - {labels[0]}, Wilcoxon p of the paired per-split differences",
             f"{'model':<5} {'loss metric':<22} {labels[0]:>{w}} {labels[1]:>{w}} {'diff':>8} "
             f"{'p':>7}"]
    for m in models:
        for key in METRICS:
            x = np.array(a["table"][metric_name(*key)][m]["per_split"][:n], dtype=float)
            y = np.array(b["table"][metric_name(*key)][m]["per_split"][:n], dtype=float)
            p = (wilcoxon(x, y).pvalue if n >= 5 and not np.allclose(x, y) else float("nan"))
            lines.append(f"{m:<5} {metric_name(*key):<22} {x.mean():{w}.3f} {y.mean():{w}.3f} "
                         f"{y.mean() - x.mean():+8.3f} {p:7.3f}")
    return lines


def _report(results, chosen, cv_loss, notes, timings, protocol, grid, n_split, cv, n_jobs,
            elapsed, t_val, cpu, wilcoxon, edges="chain", models=MODELS, fixed=False):
    paper = {key: dict(zip(MODELS, PAPER[key])) for key in PAPER}
    head = " ".join(f"{n:>7}" for n in models)
    lines = [f"Emotion intensity (CK+), protocol={protocol}, edges={edges}, mean test loss "
             f"over {n_split} split(s); * = best or not significantly worse (Wilcoxon, "
             "alpha=0.05)",
             f"{'loss metric':<22} {head}   | paper: {' '.join(f'{n:<5}' for n in models)}"
             f" | ours - paper: {' '.join(f'{n:>6}' for n in models)}"]
    table, bold_count, agree = {}, {n: 0 for n in models}, 0
    for key in METRICS:
        means, marks = _marks(results, key, n_split, wilcoxon, models)
        for n in models:
            bold_count[n] += marks[n]
        agree += {n for n in models if marks[n]} == PAPER_BOLD[key] & set(models)
        table[metric_name(*key)] = {n: {"mean": means[n], "best": marks[n],
                                        "per_split": results[(n, key)],
                                        "reg": chosen[(n, key)], "paper": paper[key][n],
                                        "paper_best": n in PAPER_BOLD[key]}
                                    for n in models}
        cells = " ".join(f"{means[n]:6.3f}{'*' if marks[n] else ' '}" for n in models)
        pap = " ".join(f"{paper[key][n]:.2f}{'*' if n in PAPER_BOLD[key] else ' '}"
                       for n in models)
        diff = " ".join(f"{means[n] - paper[key][n]:+6.3f}" for n in models)
        lines.append(f"{metric_name(*key):<22} {cells}  | {pap}  | {diff}")
    avg = {n: float(np.mean([table[metric_name(*k)][n]["mean"] for k in METRICS])) for n in models}
    lines.append(f"{'average':<22} " + " ".join(f"{avg[n]:6.3f} " for n in models)
                 + " | " + " ".join(f"{paper['average'][n]:.2f} " for n in models) + "  | "
                 + " ".join(f"{avg[n] - paper['average'][n]:+6.3f}" for n in models))
    lines.append(f"{'# best':<22} " + " ".join(f"{bold_count[n]:6d} " for n in models)
                 + " | " + "     ".join(str({"AGM": 4, "CRF": 2, "SSVM": 2}[n]) for n in models))
    lines.append(f"best-or-tied sets equal to the paper's on {agree} of 6 metrics")
    if n_split < 5:
        lines.append("(fewer than 5 splits: no significance test, only the best is marked)")
    per_model = "; ".join(f"{n} " + ", ".join(f"{chosen[(n, k)]:g}" for k in METRICS)
                          for n in models)
    if fixed:
        lines.append("reg fixed by the regs option (no cross-validation): " + per_model)
    elif len(grid) == 1 or cv == 1:     # no selection was made: say so, not "chosen by CV"
        lines.append(f"reg fixed at {grid[0]:g} (no cross-validation: "
                     + ("a single reg value" if len(grid) == 1 else "cv=1") + "): " + per_model)
    else:
        lines.append(f"reg chosen by {cv}-fold CV on split 1's training set from {grid}"
                     + (" (extended as needed)" if protocol == "exact" else "") + ": "
                     + per_model)
    lines += [f"  grid extension: {note}" for note in notes]
    # runtime breakdown: per phase and model, wall / CPU seconds summed over tasks
    lines.append(f"wall {elapsed:.0f} s (CV {t_val:.0f} s), CPU {cpu:.0f} s (all processes) "
                 f"with n_jobs={n_jobs}; per phase and model (task seconds summed):")
    breakdown = {}
    for job, tm in timings:
        b = breakdown.setdefault((job.phase, job.model), dict.fromkeys(tm, 0.0) | {"tasks": 0})
        b["tasks"] += 1
        for k, v in tm.items():
            b[k] += v
    for (phase, model), b in sorted(breakdown.items()):
        per_fit = b["fit"] / max(b["fits"], 1)
        lines.append(f"  {phase:<5} {model:<4}: {b['tasks']:4d} tasks, {int(b['fits']):4d} fits, "
                     f"fit {b['fit']:7.1f} s (cpu {b['fit_cpu']:7.1f}, solver {b['solver']:7.1f}; "
                     f"{per_fit:.2f} s per fit), predict {b['predict']:5.1f} s")
    return {"report": "\n".join(lines), "table": table, "average": avg, "splits": n_split,
            "protocol": protocol, "edges": edges, "seconds": elapsed, "cv_seconds": t_val, "cpu_seconds": cpu,
            "grid_extensions": notes, "paper_agreement": agree,
            "breakdown": {f"{p}/{m}": b for (p, m), b in breakdown.items()},
            "cv_loss": {f"{n}/{metric_name(*k)}": {str(r): v for r, v in d.items()}
                        for (n, k), d in cv_loss.items()},
            "reg": {f"{n}/{metric_name(*k)}": chosen[(n, k)] for n in models for k in METRICS},
            "models": list(models),
            "paper": {metric_name(*k): PAPER[k] for k in METRICS}}
