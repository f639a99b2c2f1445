"""Semantic role labelling on parse trees (Fathony et al. 2018, §4.2, Table 2): AGM vs CRF vs SSVM.

Each proposition of the CoNLL-2005 test sets (test.wsj: 2,416 sentences, 5,267
propositions; test.brown: 426 / 804) is the Charniak parse tree pruned after Xue &
Palmer (2004), its nodes labelled with nine classes (A0, A1, A2, R-A0, R-A1, R-A2,
the other roles merged into R, outside O, the verb V), with node and parent-child
edge features after Cohn & Blunsom (2005) (:mod:`structlp.datasets.conll05` and
:mod:`structlp.datasets.conll05_features`).  The loss is the paper's cost-sensitive
matrix: ordinal over a random order of the nine labels (``loss_seed``), scaled to
[0, 1]; a proposition's loss is the mean over its tree's nodes, a split's the mean
over its test propositions.  ``reg`` is the ``lambda`` of
``lambda/2 |theta|^2 + mean_i loss_i`` for every model.

Models: AGM exact (``AdversarialGraphicalModel(method="cutting_plane")``, certified
gap ``CP_TOL``), AGM stochastic (``"AGM-SG"``: the paper's AdaGrad subgradient method,
exact inner LP, ``epochs`` passes, iterate averaging), the CRF (:class:`TreeCRF`,
L-BFGS; Bayes decision for the loss matrix) and the SSVM (:class:`~structlp.FrankWolfeLearner`
on :class:`TreeLabeling`, the same loss: the objective of the n-slack cutting plane, its
certified duality gap brought to at most ``CP_TOL`` in the loss units of ``reg``, by
:func:`fit_model`).

Protocol (the release has no training data here): two experiments, each of
``splits`` train/test splits, every model trained on the same ``n_train``
propositions of test.wsj per split, drawn at random (``seed``):

- ``brown`` (out of domain): train on a sample of test.wsj, test on all of test.brown;
- ``wsj`` (in domain): ``splits``-fold partition of test.wsj's sentences; train on a
  sample of the other folds' propositions, test on every proposition of the fold.

``n_train="all"`` is the data's full scale: brown trains on all of test.wsj (one split:
every sample would be the same), each wsj fold on every proposition of the other folds.
Time is what sets ``n_train`` (default 200; the SRL guide gives the measured run
times): the exact AGM solves one inner LP per training tree and round (a pruned tree has
18 nodes on average, so 9 x 18 node and 81 x 17 edge marginals), tens of rounds per fit,
and its master QP grows with the vertices kept; cross-validation chooses smaller ``reg``
(more rounds, more vertices) on larger training sets.

The feature vocabularies (frequent head words, paths, ...) come from the inputs of
all of test.wsj (no labels).  The regularization of each model is chosen once, by
``cv``-fold cross-validation (folds of sentences) on the first experiment's first
training set, from ``reg_grid`` extended a decade at a time until every choice is
interior, and used in both experiments (both train on samples of test.wsj of one
size).  Each fold fits a model's grid as one regularization path, from the largest
``reg`` down, each fit warm-started from the last (the AGM's working set of vertices,
the CRF's and the SSVM's solutions; AGM-SG afresh); one task holds a model's folds, so
the grid is extended there, each path going on from its last state
(:func:`cross_validate`).  Cross-validation and final fits share one pool of ``n_jobs``
workers: a model's final fits start as soon as its reg is chosen, those of the AGM, the
CRF and the SSVM as one chain from the largest training set (each other fit that shares
half of its examples with it starts from the last one's state: at ``n_train="all"``
all of them).  A
model is marked ``*`` when it has the best mean or is not significantly worse than it
(Wilcoxon signed-rank on the per-split losses, alpha = 0.05; with fewer than 6 splits no
difference can be significant; an experiment of one split pairs the losses of its test
propositions instead).

The data (research use only) are read from ``data_path`` (option), else
``$STRUCTLP_CONLL05_PATH``, else ``../shared/data/conll05_srl``; never copied here.
Run: ``structlp run problems/srl_conll05.py [-o n_train=200] [-o splits=6] [-o cv=2]
[-o n_jobs=2] [-o models='["AGM", "CRF"]'] [-o verbose=1]``.
"""

from __future__ import annotations

import resource
import time
from collections import namedtuple

import numpy as np

import structlp
from structlp.utils import Progress, check_verbose
from structlp.agm import AdversarialGraphicalModel, TreeCRF
from structlp.datasets.conll05 import LABELS, load_conll05, pruning_recall
from structlp.datasets.conll05_features import SRLFeatures, ordinal_loss_matrix
from structlp.learners.master import single_threaded_blas
from structlp.structures import TreeLabeling

DESCRIPTION = __doc__.split("\n\n")[0]
#: Words the CLI passes for an option besides integers: ``-o n_train=all``.
OPTION_WORDS = {"n_train": ("all",)}

MODELS = ("AGM", "AGM-SG", "CRF", "SSVM")
#: Table 2 of the paper: average cost-sensitive loss (AGM, CRF, SSVM).
PAPER = {"AGM": 0.14, "CRF": 0.19, "SSVM": 0.14}
EXPERIMENTS = ("brown", "wsj")
GRID = (0.1, 1.0, 10.0)
GRID_LIMITS = (1e-5, 1e3)
CP_TOL = 1e-4
#: Models whose fit down a regularization path (cross-validation) starts from the last
#: reg's state: their fits are certified (AGM, SSVM) or converged (CRF), so the start
#: changes only the path.  AGM-SG runs a fixed number of epochs from its start: afresh.
WARM_PATH = ("AGM", "CRF", "SSVM")
CP_MAX_ITER = 1000
#: The SSVM's first relative duality gap (then tightened until the gap is at most CP_TOL).
FW_TOL = 1e-3
FW_MAX_ITER = 5000

_DATA = {}
Job = namedtuple("Job", "model reg train test phase tag")


def _make(model, reg, m, cfg):
    L = cfg["L"]
    if model == "AGM":
        # (warm_start: it keeps its working set for a next fit down a path or a chain)
        return AdversarialGraphicalModel(len(LABELS), loss=L, normalize_weights=True, reg=reg,
                                         method="cutting_plane", tol=CP_TOL,
                                         max_iter=CP_MAX_ITER, warm_start=True)
    if model == "AGM-SG":
        return AdversarialGraphicalModel(len(LABELS), loss=L, normalize_weights=True, reg=reg,
                                         method="subgradient", inner="lp",
                                         max_epochs=cfg["epochs"], random_state=cfg["seed"])
    if model == "CRF":
        return TreeCRF(len(LABELS), loss=L, reg=reg, max_iter=300)
    # 1/2 |w|^2 + C sum xi with C = 1 / (reg m): reg/2 |w|^2 + mean xi
    return structlp.FrankWolfeLearner(
        TreeLabeling(len(LABELS), loss=L, normalize_weights=True), C=1.0 / (reg * m),
        tol=FW_TOL, max_iter=FW_MAX_ITER, random_state=cfg["seed"])


def fit_model(model, reg, X, Y, cfg, previous=None):
    """The model ``model`` (a name of MODELS) at ``reg`` fitted on ``(X, Y)``.

    ``previous``: the same model fitted on the same data at another reg; models of
    ``WARM_PATH`` start from its state (``warm_start``), the others afresh.
    The SSVM (Frank-Wolfe) certifies a relative duality gap ``FW_TOL``; if that gap,
    in the units of ``reg/2 |w|^2 + mean xi``, exceeds ``CP_TOL``, the fit continues from
    its dual state (``warm_start``) with the relative gap that brings it to ``CP_TOL``.
    """
    if previous is not None and model in WARM_PATH:
        est = previous.set_params(warm_start=True, **(
            {"C": 1.0 / (reg * len(X)), "tol": FW_TOL} if model == "SSVM" else {"reg": reg}))
    else:
        est = _make(model, reg, len(X), cfg)
    est.fit(X, Y)
    if model == "SSVM" and reg * est.duality_gap_ > CP_TOL:
        est.set_params(warm_start=True, tol=0.5 * CP_TOL / (reg * est.objective_)).fit(X, Y)
    return est


def proposition_losses(pred, Y, L):
    """Each proposition's mean node loss ``L[pred, true]`` (ndarray (n,))."""
    return np.array([L[p, y].mean() for p, y in zip(pred, Y)])


def mean_loss(pred, Y, L):
    """Mean over propositions of the mean node loss ``L[pred, true]``."""
    return float(np.mean(proposition_losses(pred, Y, L)))


def _fit_and_score(job, previous=None):
    """Fit ``job`` (one reg; ``previous``: see :func:`fit_model`) and score it on its test
    set: the fitted model and ``(job, losses, timings)``."""
    X, Y, cfg = _DATA["X"], _DATA["Y"], _DATA["cfg"]
    t0, c0 = time.perf_counter(), time.process_time()
    with single_threaded_blas():  # the fits' systems are small; workers share the cores
        model = fit_model(job.model, job.reg, [X[i] for i in job.train],
                          [Y[i] for i in job.train], cfg, previous=previous)
    t1, c1 = time.perf_counter(), time.process_time()
    pred = model.predict([X[i] for i in job.test])
    losses = proposition_losses(pred, [Y[i] for i in job.test], cfg["L"])
    t2 = time.perf_counter()
    if "progress" in _DATA:         # from the worker, as each fit ends
        _DATA["progress"].message(
            f"[{job.phase} {job.tag}] {job.model} reg={job.reg:g}: loss {losses.mean():.4f} "
            f"(fit {t1 - t0:.1f} s, cpu {c1 - c0:.1f} s)")
    return model, (job, losses, {"fit": t1 - t0, "fit_cpu": c1 - c0, "predict": t2 - t1})


def _extend(by_reg):
    """The reg the grid rule tries next for ``{reg: losses}`` (its best on an edge: a
    decade beyond it, within ``GRID_LIMITS``), or None."""
    best, regs = _best(by_reg), sorted(by_reg)
    if best == regs[-1] and best * 10 <= GRID_LIMITS[1]:
        return best * 10
    if best == regs[0] and best / 10 >= GRID_LIMITS[0]:
        return best / 10
    return None


#: Models whose fitted state serves a fit on other examples as well: the AGM's working set
#: keeps the rows of every example it was fitted on.  Its CV folds share one estimator,
#: and its final fits start from it.
CARRY = ("AGM",)


def _cv_task(task):
    """The CV fits of one model on some folds, ``task = (job, finals)``: a list of
    ``(job, losses, timings)``, the final fits' after the CV's.

    ``job.train`` holds the folds, ``(fold, fit ids, validation ids)``; ``job.reg`` is a
    reg (fitted cold on each fold), or a path: a tuple of regs fitted from the largest down
    on each fold, each fit from that fold's last one (models of ``WARM_PATH``; one state
    for all folds, models of ``CARRY``).  With ``job.tag`` true the path is then extended
    by the grid rule on these folds' mean losses (:func:`_extend`: below, on down the path;
    above, cold) until their best is interior: with every fold in one task, the whole grid
    rule, each fold's state kept in memory throughout.  ``finals`` (every fold here): the
    model's final jobs, fitted at the reg chosen as one chain (:func:`_chain_task`) from
    the CV's last state."""
    job, finals = task
    path = isinstance(job.reg, tuple)
    todo = sorted(job.reg, reverse=True) if path else [job.reg]
    state, scores, out = {}, {}, []
    while todo:
        reg = todo.pop(0)
        for fold, fit, val in job.train:
            # warm below the regs fitted (on this fold; on any, a state all folds share)
            key = None if job.model in CARRY else fold
            mine = [r for r, v in scores.items() if key is None or fold in v]
            below = bool(mine) and (reg < min(mine) or (key is None and reg == min(mine)))
            state[key], res = _fit_and_score(Job(job.model, reg, fit, val, job.phase, fold),
                                              state.get(key) if below else None)
            scores.setdefault(reg, {})[fold] = float(res[1].mean())
            out.append(res)
        if path and job.tag and not todo:
            nxt = _extend({r: list(v.values()) for r, v in scores.items()})
            todo = [] if nxt is None else [nxt]
    if finals:
        reg = _best({r: list(v.values()) for r, v in scores.items()})
        if "progress" in _DATA:
            _DATA["progress"].message(f"chosen: {job.model} {reg:g}")
        out += _chain_task([j._replace(reg=reg) for j in finals], start=state[key])
    return out


def _chain_task(jobs, start=None):
    """Final fits of one model (models of ``WARM_PATH``), in turn, each from the last
    one's state (the first from ``start``, when given): the first has the largest
    training set, and each other shares at least half of its examples (at full scale,
    all of them); the AGM's working set holds the rows of every example fitted so far.
    A list of ``(job, losses, timings)``."""
    out, est = [], start
    for job in jobs:
        est, res = _fit_and_score(job, est)
        out.append(res)
    return out


def _one_task(job):
    return [_fit_and_score(job)[1]]


class _Inline:
    """The pool of ``n_jobs=1``: a task runs when it is submitted."""

    def submit(self, fn, arg):
        from concurrent.futures import Future
        f = Future()
        try:
            f.set_result(fn(arg))
        except BaseException as e:      # (re-raised by result(), as a pool's would be)
            f.set_exception(e)
        return f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


#: The order in which tasks of equal kind start: the longest fits first, so that the
#: cores end together.
COST = {"AGM": 0, "AGM-SG": 1, "CRF": 2, "SSVM": 3}


def _fold_groups(n_models, n_folds, n_jobs):
    """How many tasks share each model's CV folds: one (every fold's path in one task,
    the grid rule decided in it) unless there are more workers than models."""
    return max(1, min(n_folds, n_jobs // max(n_models, 1)))


def _schedule(ready, models, cv, finals, n_jobs, progress, timings):
    """Cross-validation and final fits in one pool, each model's final fits started as
    soon as its reg is chosen (no core idles between the phases).

    ``ready``: ``{model: reg}`` of the models not cross-validated (their final fits start
    at once); ``models``: the models cross-validated on ``cv``, ``(folds, grid, tag)``
    with ``folds`` a list of ``(fit ids, validation ids)``; ``finals(model, reg)``: that
    model's final jobs (None: no final fits).  Returns ``chosen, cv_loss, notes,
    results``: the CV's choices and mean losses, and the final fits' ``(job, losses,
    timings)``."""
    from concurrent.futures import FIRST_COMPLETED, wait
    chosen, results, notes = {}, [], []
    scores = {m: {} for m in models}            # {model: {reg: {fold: loss}}}
    pending, inside = {}, set()

    def submit(pool, tasks):
        # tasks: (kind, function, argument); the longest kinds of fit first
        def model(t):
            a = t[2] if isinstance(t[2], Job) else t[2][0]   # a job, (job, finals), jobs
            return a.model
        for t in sorted(tasks, key=lambda t: COST[model(t)]):
            pending[pool.submit(t[1], t[2])] = (t[0], model(t))

    def plan(m, reg):
        # a model of WARM_PATH fits the largest training set first, then, each from the
        # last one's state, those that share at least half of its examples (one chain);
        # the others (and every fit of another model) afresh: (chain, the others)
        jobs = sorted(finals(m, reg), key=lambda j: -len(j.train))
        root = set(np.asarray(jobs[0].train).tolist())
        near = [m in WARM_PATH and 2 * len(root.intersection(np.asarray(j.train).tolist()))
                >= len(j.train) for j in jobs]
        chain = [j for j, ok in zip(jobs, near) if ok]
        return (chain, [j for j, ok in zip(jobs, near) if not ok]) if len(chain) > 1 \
            else ([], jobs)

    def final_tasks(m, reg):
        progress.message(f"chosen: {m} {reg:g}")
        chain, rest = plan(m, reg)
        return ([("final", _chain_task, chain)] if chain else []) + [
            ("final", _one_task, j) for j in rest]

    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    _DATA["progress"] = progress        # (the workers, forked, report each fit)
    pool = (_Inline() if n_jobs == 1 else
            ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context("fork")))
    with pool:
        tasks = [t for m, reg in ready.items() for t in final_tasks(m, reg)] if finals else []
        if models:
            folds, grid, tag = cv
            n_folds = len(folds)
            parts = np.array_split(np.arange(n_folds), _fold_groups(len(models), n_folds,
                                                                     n_jobs))
            groups = [tuple((int(f), folds[f][0], folds[f][1]) for f in p) for p in parts]
            # with every fold in one task, a warm model's final fits follow its CV there,
            # from its last state (their reg a placeholder until the CV chooses)
            inside = {m for m in models if finals is not None and len(groups) == 1
                      and m in WARM_PATH}
            tasks += [("cv", _cv_task, (Job(m, tuple(grid), g, None, f"cv-{tag}", True),
                                        sum(plan(m, 0.0), []) if m in inside else None))
                      for m in models for g in groups]
            tried = {m: set(grid) for m in models}   # the regs the grid rule has tried
        submit(pool, tasks)
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in done:
                what, m = pending.pop(fut)
                for r in fut.result():
                    timings.append((r[0].phase, r[0].model, r[2]))
                    if not r[0].phase.startswith("cv-"):
                        results.append(r)
                    else:
                        scores[m].setdefault(r[0].reg, {}).setdefault(r[0].tag,
                                                                      float(r[1].mean()))
                if what != "cv" or any(w == "cv" and mm == m for w, mm in pending.values()):
                    continue
                # every CV task of m has ended: extend the grid, or choose and go on
                # (a task's own extension beyond them counts once the rule reaches it)
                done_regs = {r: list(v.values()) for r, v in scores[m].items()
                             if len(v) == n_folds and r in tried[m]}
                nxt = _extend(done_regs)
                while nxt is not None:
                    notes.append(f"{tag}/{m}: best {_best(done_regs):g} on the grid's edge, "
                                 f"tried {nxt:g}")
                    if len(scores[m].get(nxt, {})) < n_folds:
                        break
                    tried[m].add(nxt)
                    done_regs[nxt] = list(scores[m][nxt].values())
                    nxt = _extend(done_regs)
                if nxt is not None:
                    progress.message("grid extended: " + notes[-1])
                    lack = [tuple(x for x in g if x[0] not in scores[m].get(nxt, {}))
                            for g in groups]
                    regs = _path_to(nxt, tried[m], m)
                    tried[m].add(nxt)
                    submit(pool, [("cv", _cv_task, (Job(m, regs, g, None, f"cv-{tag}", False),
                                                    None)) for g in lack if g])
                    continue
                chosen[m] = _best(done_regs)
                if finals is not None and m not in inside:
                    submit(pool, final_tasks(m, chosen[m]))
    cv_loss = {m: {r: float(np.mean(list(v.values()))) for r, v in scores[m].items()
                   if len(v) == len(cv[0]) and r in tried[m]} for m in models}
    return chosen, cv_loss, notes, results


def _group_folds(ids, sid, n_folds, rng):
    """Folds of the propositions ``ids`` that keep each sentence in one fold."""
    sents = np.unique(sid[ids])
    rng.shuffle(sents)
    parts = np.array_split(sents, n_folds)
    fold_of = {s: f for f, p in enumerate(parts) for s in p}
    which = np.array([fold_of[s] for s in sid[ids]])
    return [(ids[which != f], ids[which == f]) for f in range(n_folds)]


def cross_validate(train, sid, grid, n_folds, models, n_jobs, progress, timings, tag, rng):
    """Choose reg per model by ``n_folds``-fold CV (folds of sentences) on ``train``.

    The grid is extended by a decade beyond an edge while a model's best value (least
    mean loss over the folds) is on it (within ``GRID_LIMITS``).  Each model walks the
    grid as one regularization path per fold, from the largest reg down, warm-started,
    every fold in one task while there are no more workers than models
    (:func:`_cv_task`: the extension decided there, each fold's state kept).  With more
    workers, the folds are shared among tasks that each extend by their own folds' losses;
    what a fold then lacks is fitted in another round (below the grid's top, again as a
    path: :func:`_path_to`).  A reg counts once every fold has it, so the choice is that
    of extending the grid one decade at a time.  Returns ({model: reg}, {model: {reg:
    mean loss}}, notes).
    """
    folds = _group_folds(np.asarray(train), sid, n_folds, rng)
    chosen, cv_loss, notes, _ = _schedule({}, models, (folds, grid, tag), None, n_jobs,
                                          progress, timings)
    return chosen, cv_loss, notes


def _path_to(reg, tried, model):
    """What a fold fits to add ``reg`` to a model's CV (``tried``: the regs tried so far):
    below the largest, for a model of ``WARM_PATH``, the path down to it through them
    (warm fits at the larger regs cost less than one cold fit at a small reg); else
    ``reg`` alone."""
    if model not in WARM_PATH or reg > max(tried):
        return reg
    return tuple(sorted({r for r in tried if r > reg} | {reg}, reverse=True))


def _best(by_reg):
    """The reg of least mean CV loss; ties go to the larger reg."""
    regs = sorted(by_reg, reverse=True)
    return regs[int(np.argmin([np.mean(by_reg[r]) for r in regs]))]


def make_splits(sid_wsj, n_wsj, n_brown, n_train, splits, seed):
    """Train/test proposition indices (into wsj + brown) of both experiments.

    ``n_train=None`` (the option ``"all"``) trains on every proposition of the pool: all
    of test.wsj for brown (one split: every split would be the same), every other fold's
    propositions for wsj."""
    rng = np.random.default_rng(seed)
    wsj = np.arange(n_wsj)
    n_train = n_wsj if n_train is None else n_train
    brown = ([(wsj, n_wsj + np.arange(n_brown))] if n_train >= n_wsj else
             [(np.sort(rng.choice(wsj, n_train, replace=False)), n_wsj + np.arange(n_brown))
              for _ in range(splits)])
    sents = np.unique(sid_wsj)
    rng.shuffle(sents)
    fold_of = np.empty(sents.max() + 1, dtype=int)
    for f, part in enumerate(np.array_split(sents, splits)):
        fold_of[part] = f
    which = fold_of[sid_wsj]
    folds = []
    for f in range(splits):
        pool = wsj[which != f]
        folds.append((np.sort(rng.choice(pool, min(n_train, len(pool)), replace=False)),
                      wsj[which == f]))
    return {"brown": brown, "wsj": folds}


def _check(name, v, lo, hi=None):
    words = OPTION_WORDS.get(name, ())
    if isinstance(v, str) and v in words:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo \
            or (hi is not None and v > hi):
        rng = f"in {lo}..{hi}" if hi else f">= {lo}"
        also = "".join(f" or {w!r}" for w in words)
        raise structlp.InvalidParameterError(
            f"{name} must be an integer {rng}{also}; got {v!r}.")


def run(solver=None, C=None, seed=0, data_path=None, n_train=200, splits=6, cv=2,
        reg_grid=GRID, n_jobs=2, loss_seed=0, epochs=10, models=None, experiments=EXPERIMENTS,
        regs=None, verbose=0):
    """Run both experiments (see the module docstring) and return the table.

    Options: ``data_path`` (default ``$STRUCTLP_CONLL05_PATH`` or
    ../shared/data/conll05_srl), ``n_train`` (training propositions per split, or
    ``"all"``),
    ``splits`` (per experiment; the wsj experiment's number of folds, >= 2),
    ``cv`` (folds of the reg selection; 1 = the first grid value), ``reg_grid``,
    ``n_jobs`` (forked workers), ``seed`` (samples and folds), ``loss_seed`` (the
    random order of the labels), ``epochs`` (AGM-SG), ``models``, ``experiments``,
    ``regs`` (``{model: reg}``: those models' regularization given, not cross-validated).
    ``C`` fixes reg = C for every model (no selection); ``solver`` is refused.
    """
    from scipy.stats import wilcoxon
    if solver is not None:
        raise structlp.InvalidParameterError(
            "srl_conll05 uses the built-in cutting plane, Frank-Wolfe and L-BFGS; "
            f"solver={solver!r} does not apply.")
    for name, v, lo, hi in (("n_train", n_train, 6, None), ("splits", splits, 2, 50),
                            ("cv", cv, 1, 10), ("n_jobs", n_jobs, 1, None),
                            ("epochs", epochs, 1, None), ("loss_seed", loss_seed, 0, None)):
        _check(name, v, lo, hi)
    names = [models] if isinstance(models, str) else models
    if names is not None and (not isinstance(names, (list, tuple)) or not names
                              or any(m not in MODELS for m in names)):
        raise structlp.InvalidParameterError(
            f"models must be a non-empty list of {MODELS}; got {models!r}.")
    models = MODELS if names is None else tuple(m for m in MODELS if m in names)
    if isinstance(experiments, str) or not experiments or set(experiments) - set(EXPERIMENTS):
        raise structlp.InvalidParameterError(
            f"experiments must be a non-empty list of {EXPERIMENTS}; got {experiments!r}.")
    try:
        grid = [float(C)] if C is not None else sorted(float(r) for r in np.atleast_1d(reg_grid))
    except (TypeError, ValueError):
        grid = []
    if not grid or any(not (np.isfinite(r) and r > 0) for r in grid):
        raise structlp.InvalidParameterError(
            f"reg_grid must hold positive regularization values; got {reg_grid!r}.")
    given = {} if regs is None else regs
    if not isinstance(given, dict) or set(given) - set(MODELS) or any(
            isinstance(r, bool) or not isinstance(r, (int, float)) or not np.isfinite(r)
            or r <= 0 for r in given.values()):
        raise structlp.InvalidParameterError(
            f"regs must map model names of {MODELS} to positive numbers; got {regs!r}.")
    progress = Progress("srl_conll05", verbose=check_verbose(verbose, owner="srl_conll05"))
    t0 = time.perf_counter()
    ru0 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    D = load_conll05(data_path)
    feats = SRLFeatures().fit(D["test.wsj"])
    Xw, Yw, sid = feats.transform(D["test.wsj"])
    Xb, Yb, _ = feats.transform(D["test.brown"])
    L, order = ordinal_loss_matrix(int(loss_seed))
    _DATA.update(X=Xw + Xb, Y=Yw + Yb, cfg={"L": L, "epochs": int(epochs), "seed": int(seed)})
    split_ids = make_splits(sid, len(Xw), len(Xb), None if n_train == "all" else int(n_train),
                            int(splits), int(seed))
    rng = np.random.default_rng(int(seed) + 1)
    timings, out = [], {}
    # one selection for both experiments: both train on samples of test.wsj of one size
    selected = tuple(m for m in models if m not in given)
    chosen = {m: float(given[m]) for m in models if m in given}
    cv_spec = None
    if C is not None or cv == 1 or len(grid) == 1 or not selected:
        chosen.update({m: grid[0] for m in selected})
    else:
        cv_spec = (_group_folds(np.asarray(split_ids[experiments[0]][0][0]), sid, int(cv), rng),
                   grid, experiments[0])
    for exp in experiments:
        out[exp] = {"per_split": {m: [None] * len(split_ids[exp]) for m in models},
                    "per_proposition": {m: [None] * len(split_ids[exp]) for m in models},
                    "reg": chosen, "n_test": [len(te) for _, te in split_ids[exp]],
                    "n_train": [len(tr) for tr, _ in split_ids[exp]]}

    def finals(m, reg):
        # both experiments' fits of model m (one pool: no core idles between them)
        return [Job(m, reg, tr, te, exp, s) for exp in experiments
                for s, (tr, te) in enumerate(split_ids[exp])]

    cv_chosen, cv_loss, notes, results = _schedule(
        {m: chosen[m] for m in models if m in chosen}, selected if cv_spec else (), cv_spec,
        finals, int(n_jobs), progress, timings)
    chosen.update(cv_chosen)
    for job, losses, tm in results:
        out[job.phase]["per_split"][job.model][job.tag] = float(losses.mean())
        out[job.phase]["per_proposition"][job.model][job.tag] = losses
    progress.close()
    elapsed = time.perf_counter() - t0
    ru1 = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(ru0, ru1))
    recall = {s: pruning_recall(D[s]) for s in D}
    return _report(out, models, order, feats, recall, timings, elapsed, cpu, n_train,
                   int(splits), cv, grid, wilcoxon, chosen, cv_loss, notes, experiments[0],
                   given)


def marks(per, models, wilcoxon, items=None):
    """Means and marks: best mean, or not significantly worse (Wilcoxon, alpha 0.05).

    The test pairs the per-split losses ``per``; with one split it pairs the test
    propositions' losses ``items`` (``{model: [ndarray]}``, the same propositions for
    every model) instead."""
    means = {m: float(np.mean(per[m])) for m in models}
    best = min(means, key=means.get)
    single = items is not None and len(per[best]) == 1
    ok = {}
    for m in models:
        a, b = ((items[m][0], items[best][0]) if single
                else (np.asarray(per[m]), np.asarray(per[best])))
        ok[m] = bool(m == best or np.allclose(a, b) or wilcoxon(a, b).pvalue >= 0.05)
    return means, ok


def _report(out, models, order, feats, recall, timings, elapsed, cpu, n_train, splits, cv,
            grid, wilcoxon, chosen, cv_loss, notes, cv_exp, given):
    sizes = sorted({n for r in out.values() for n in r["n_train"]})
    lines = ["Semantic role labelling (CoNLL-2005 test sets), mean cost-sensitive loss over "
             f"the splits, {sizes[0]}-{sizes[-1]} training propositions per split "
             f"(n_train={n_train}); * = best or not significantly worse (Wilcoxon on the "
             "splits' losses, on the propositions' with one split; alpha=0.05)",
             f"{'experiment':<22} " + " ".join(f"{m:>8}" for m in models)
             + "   | paper (Table 2): AGM 0.14, CRF 0.19, SSVM 0.14"]
    table = {}
    for exp, r in out.items():
        means, ok = marks(r["per_split"], models, wilcoxon, r["per_proposition"])
        table[exp] = {m: {"mean": means[m], "best": ok[m], "per_split": r["per_split"][m],
                          "reg": r["reg"][m]} for m in models}
        if len(r["n_test"]) == 1:       # one split: its propositions' losses (for tests)
            for m in models:
                table[exp][m]["per_proposition"] = r["per_proposition"][m][0].tolist()
        name = ("train wsj, test brown" if exp == "brown" else "wsj folds (in domain)")
        lines.append(f"{name:<22} " + " ".join(f"{means[m]:7.4f}{'*' if ok[m] else ' '}"
                                               for m in models))
        rank = sorted(models, key=means.get)
        lines.append(f"  ranking: {' < '.join(rank)}; {len(r['n_test'])} split(s), test "
                     f"propositions per split {min(r['n_test'])}-{max(r['n_test'])}, "
                     f"training {min(r['n_train'])}-{max(r['n_train'])}")
    lines.append(f"label order of the ordinal loss: {[LABELS[a] for a in order]}")
    lines.append(f"features: {feats.n_node_features_} per node, {feats.n_edge_features_} per "
                 "edge; pruning keeps " + ", ".join(f"{s} {a}/{b} ({a / b:.1%})"
                                                    for s, (a, b) in recall.items())
                 + " of the gold arguments as labelled nodes")
    if given:
        lines.append("reg given (option regs), not cross-validated: "
                     + ", ".join(f"{m} {chosen[m]:g}" for m in models if m in given))
    if cv_loss:
        lines.append(f"reg chosen by {cv}-fold CV (folds of sentences) on the {cv_exp} "
                     f"experiment's first training set from {grid} (extended as needed), "
                     "used in both experiments: " + ", ".join(f"{m} {chosen[m]:g}"
                                                             for m in cv_loss))
        lines += [f"  grid extension: {n}" for n in notes]
        for m in cv_loss:
            lines.append(f"  CV loss {m}: " + ", ".join(f"{r:g}: {v:.4f}"
                                                       for r, v in sorted(cv_loss[m].items())))
    elif len(given) < len(models):
        lines.append(f"reg fixed at {grid[0]:g} (no cross-validation)")
    lines.append(f"wall {elapsed:.0f} s, CPU {cpu:.0f} s (all processes); per phase and model:")
    agg = {}
    for phase, m, tm in timings:
        a = agg.setdefault((phase, m), [0, 0.0, 0.0])
        a[0] += 1
        a[1] += tm["fit"]
        a[2] += tm["fit_cpu"]
    for (phase, m), (n, w, c) in sorted(agg.items()):
        lines.append(f"  {phase:<9} {m:<6}: {n:3d} fits, fit {w:7.1f} s (cpu {c:7.1f})")
    return {"report": "\n".join(lines), "table": table, "paper": PAPER, "seconds": elapsed,
            "cpu_seconds": cpu, "label_order": [LABELS[a] for a in order],
            "pruning_recall": recall, "n_train": n_train, "splits": splits,
            "reg": chosen, "grid_extensions": notes,
            "cv_loss": {m: {str(k): v for k, v in d.items()} for m, d in cv_loss.items()},
            "breakdown": {f"{p}/{m}": v for (p, m), v in agg.items()}}
