"""The three fit routes of :class:`~structlp.agm.AdversarialGraphicalModel`.

* :func:`fit_subgradient`: the paper's stochastic subgradient method (Fathony et al. 2018,
  Algorithm 1), each example's inner game solved by an LP (hot-started HiGHS) or by dual
  decomposition;
* :func:`fit_cutting_plane`: the n-slack cutting plane over the adversary's vertices, the
  master solved in its dual (:func:`structlp.learners.master.solve_master_dual`);
* :func:`fit_frank_wolfe`: block-coordinate Frank–Wolfe on the same objective, the inner
  game as a structured model (:mod:`structlp.agm.game_model`);
* :func:`fit_qp`: the whole training set as one QP (the inner LPs dualized).

Each takes the estimator (its parameters) and the checked data, and returns ``theta``.
"""

from __future__ import annotations

import numbers
import time
import warnings

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from ..exceptions import ConvergenceWarning, InvalidParameterError
from ..formulations import block_diag
from ..solvers import check_solver, check_solver_opts, solve
from ..utils.fingerprint import fingerprint
from ..graphical.junction import GraphExample
from ..graphical.trees import n_params, split_theta
from .inner import (InnerLP, inner_dual_decomposition, inner_junction_decomposition,
                    shared_inner_polytopes)
from .polytopes import lp_encode, lp_features

#: The cutting plane's vertex rows left at weight 0 for this many consecutive rounds leave
#: its master (the master stays a relaxation: its value a lower bound).
INACTIVE_ROUNDS = 5
#: While the cutting plane's largest violation exceeds ``TIGHT_BELOW * tol`` its master is
#: solved only to ``MASTER_SHARE`` of that violation; below, and before it may stop, to
#: ``1e-3 tol`` (any weights of the master's dual give a lower bound: only the path changes).
MASTER_SHARE = 5e-2
TIGHT_BELOW = 20.0
#: Shrinking: an example whose LP left it within tol of its slack in ``CALM_ROUNDS``
#: rounds in a row is not solved again until a round that solves every LP: each
#: ``FULL_EVERY``-th round, and the round in which the cutting plane may stop (it stops
#: only on every example's exact violation).
CALM_ROUNDS = 1
FULL_EVERY = 4
#: The Frank-Wolfe route's passes without oracle per epoch (at most) and pairwise steps
#: inside a block after each oracle call: its oracle is an LP, so steps among the vertices
#: already found pay more than for a combinatorial oracle (FrankWolfeLearner's defaults
#: are 100 and 3).
FW_CACHE_PASSES = 300
FW_INNER_STEPS = 10
#: The inner LPs of this many examples keep their HiGHS instances between solves (about
#: 0.9 MB each on the pruned SRL trees); the others keep their optimal basis only and
#: build the instance at each solve (memory for the data's full scale, LPs about a fifth
#: slower).
WARM_LPS = 1500
#: The cutting plane keeps its master's Gram matrix dense (with spare capacity) while it
#: takes at most this many bytes; beyond, the master takes its products with the sparse
#: vertex rows instead (``structlp.learners.master.RowGram``, memory ``O(nnz)``).
DENSE_GRAM_BYTES = 2 ** 30


def fit_subgradient(est, exs, Ys, W, NL, k, d_v, d_e, loss_name, L, progress):
    rng = np.random.default_rng(est.random_state)
    D = n_params(d_v, d_e, k)
    theta, warm = _initial_theta(est, D)
    prev_G = getattr(est, "adagrad_sum_", None)
    # a warm start continues AdaGrad: with fresh squared-gradient sums its first steps
    # would move every coordinate by learning_rate, away from the previous solution
    G = (prev_G.copy() if warm and isinstance(prev_G, np.ndarray) and prev_G.shape == (D,)
         else np.zeros(D))
    avg, n_avg = np.zeros(D), 0
    m = len(exs)
    bs = min(int(est.batch_size), m)
    lr, reg = float(est.learning_rate), float(est.reg)
    Z = [(np.eye(k)[y], _edge_onehot(ex, y, k)) for ex, y in zip(exs, Ys)]
    U = [None] * m
    polys = {}
    n_epochs = int(est.max_epochs)
    it = 0
    for epoch in range(n_epochs):
        start_theta = theta
        perm = rng.permutation(m)
        for start in range(0, m, bs):
            batch = perm[start:start + bs]
            gv = np.zeros((k, d_v))
            ge = np.zeros((k, k, d_e))
            for i in batch:
                ex = exs[i]
                tv, te = split_theta(theta, d_v, d_e, k)
                b = ex.node_features @ tv.T
                B = (ex.edge_features @ te.reshape(k * k, d_e).T).reshape(-1, k, k)
                R, Q = _inner(est, i, ex, b, B, loss_name, W[i], L, NL[i], U, polys)
                gv += (R - Z[i][0]).T @ ex.node_features
                ge += np.einsum("eab,ef->abf", Q - Z[i][1], ex.edge_features)
            g = np.concatenate([gv.ravel(), ge.ravel()]) / len(batch) + reg * theta
            G += g * g
            theta = theta - lr / (np.sqrt(G) + 1e-8) * g
            it += 1
            if est.average and epoch >= n_epochs // 2:
                n_avg += 1
                avg += (theta - avg) / n_avg
        if progress.update(iteration=epoch + 1, step_norm=float(np.linalg.norm(
                theta - start_theta)), updates=it):
            break
    est.n_iter_ = it
    est.adagrad_sum_ = G
    st = est.inner_stats_
    if st["solves"]:
        st["dd_iterations"] = st["dd_iterations"] / st["solves"]
    return (avg if (est.average and n_avg) else theta), polys

def _initial_theta(est, D):
    prev = getattr(est, "coef_", None)
    if est.warm_start and isinstance(prev, np.ndarray) and prev.shape == (D,):
        return prev.copy(), True            # warm start: the previous fit's theta
    init = None
    if isinstance(est.init, (numbers.Real, np.ndarray, list, tuple)) and not isinstance(
            est.init, bool):
        try:
            init = np.asarray(est.init, dtype=float)
        except (TypeError, ValueError):     # e.g. a list of strings
            init = None
    if init is None or init.shape not in ((), (D,)) or not np.all(np.isfinite(init)):
        raise InvalidParameterError(
            f"The 'init' parameter of {type(est).__name__} must be a finite number or an "
            f"array of shape ({D},) (the length of theta); got {est.init!r}.")
    return (np.full(D, float(init)) if init.shape == () else init.copy()), False

def _inner(est, i, ex, b, B, loss_name, w, L, nl, U, polys):
    st = est.inner_stats_
    st["solves"] += 1
    if est.inner == "dual_decomposition":
        dd = (inner_junction_decomposition if isinstance(ex, GraphExample)
              else inner_dual_decomposition)
        val, R, Q, u, ok, n_it = dd(ex, b, B, loss_name, w, L, nl, u0=U[i],
                                    tol=float(est.inner_tol))
        U[i] = u
        st["dd_iterations"] += n_it
        if ok:
            return R, Q
        st["lp_fallbacks"] += 1
    if i not in polys:
        polys[i] = InnerLP(ex, b.shape[1], nl, keep_solver=len(polys) < WARM_LPS)
    _, R, Q = polys[i].solve(b, B)
    return R, Q

def fit_cutting_plane(est, exs, Ys, NL, k, d_v, d_e, progress):
    # Example i's loss h_i(theta) = max_{x in P_i} (Phi_i theta + c_i) . x - psi_i . theta
    # is a maximum of affine functions of theta, one per vertex x of its inner polytope
    # (c_i = 1 on the v columns): the n-slack cutting plane of the max-margin learners
    # applies, with the inner LP as the oracle and the vertex x as the "output".  In the
    # scaling 1/2 |theta|^2 + C sum xi (C = 1 / (reg m)) a vertex x of example i is the
    # master row  g . theta + xi_i >= b  with g = psi_i - Phi_i^T x, b = c_i . x.
    from ..learners.master import RowGram, single_threaded_blas, solve_master_dual
    m, reg = len(exs), float(est.reg)
    tol = 1e-8 if est.tol is None else float(est.tol)
    C = 1.0 / (reg * m)
    D = n_params(d_v, d_e, k)
    Fs = [lp_features(ex, k) for ex in exs]
    F_all = sp.vstack(Fs, format="csr")
    cuts = np.concatenate([[0], np.cumsum([F.shape[0] for F in Fs])])
    truths = [lp_encode(ex, y, k) for ex, y in zip(exs, Ys)]
    Psi = sp.csr_array(np.vstack([F.T @ t for F, t in zip(Fs, truths)]))
    # A warm start keeps the last fit's rows of every example that is in this training set
    # too: its rows are cuts of this fit if its shape, node losses, part features and truth
    # are the same (its key), wherever it stands in the set.
    keys = ([fingerprint((k, D, ex.key(), nl, F, t))
             for ex, nl, F, t in zip(exs, NL, Fs, truths)] if est.warm_start else None)
    del Fs, truths                          # F_all holds them (a copy each: freed)
    lps = [InnerLP(ex, k, nl, polytope=P, keep_solver=i < WARM_LPS) for i, (ex, nl, P)
           in enumerate(zip(exs, NL, shared_inner_polytopes(exs, NL, k)))]
    ones = [np.ones(ex.n_nodes) for ex in exs]
    # An example not solved this round has its LP value bounded: at most its value at its
    # last solve plus, per block of parts that is a distribution (a node's labels, an
    # edge's pairs, a clique's table), the largest change of a part's score since.
    blocks = [_simplex_sizes(ex, k) for ex in exs]
    block0 = np.concatenate([[0], np.cumsum(np.concatenate(blocks))[:-1]])
    ex_block0 = np.concatenate([[0], np.cumsum([len(q) for q in blocks])[:-1]])
    value_at, s_at = np.zeros(m), np.zeros(F_all.shape[0])
    X = [None] * m
    calm = np.zeros(m, dtype=np.int64)
    n_solves = 0

    def solve_lps(which, s):
        # the LPs of the examples `which` at the part scores s (values, vertices, scores)
        nonlocal n_solves
        for i in np.flatnonzero(which):
            rows = slice(cuts[i], cuts[i + 1])
            value_at[i], X[i] = lps[i].solve_costs(np.concatenate([s[rows], ones[i]]))
            s_at[rows] = s[rows]
        n_solves += int(which.sum())

    def violations(s, psi, which):
        # every example's violation: exact where solved at s, else its bound
        bound = value_at + np.add.reduceat(np.maximum.reduceat(s - s_at, block0),
                                           ex_block0)
        v = bound - psi - xi
        calm[which] = np.where(v[which] <= tol, calm[which] + 1, 0)
        return bound - psi, v

    def solve_rest(todo, s, psi):
        # the LPs skipped this round: every example's violation exact
        solve_lps(~todo, s)
        return (np.ones(m, dtype=bool),) + violations(s, psi, ~todo)

    prev = (_start_rows(getattr(est, "_warm_rows", None), keys)
            if keys is not None and None not in keys else None)
    # the working set: row t of example group[t]; rows 0..m-1 are the truths (the
    # adversary playing y_i: g = 0, b = 0), so every group starts with a row.  The rows
    # g are sparse (a vertex's features minus the truth's, a few percent of theta's
    # coordinates on SRL): R is kept sparse, its Gram matrix dense (with spare capacity)
    # while it fits in DENSE_GRAM_BYTES, else not at all (`Gram` None)
    R = sp.csr_array((m, D)) if prev is None else prev["R"]
    T = R.shape[0]
    size = max(4 * m, T + m, 64)
    b, group = np.zeros(size), np.zeros(size, dtype=np.int64)
    group[:m] = np.arange(m)
    Gram = np.zeros((size, size)) if 8 * size * size <= DENSE_GRAM_BYTES else None
    cap = np.full(m, C)
    alpha = cap.copy()
    if prev is not None:
        b[:T], group[:T], alpha = prev["b"], prev["group"], prev["share"] * C
        if Gram is not None:
            Gram[:T, :T] = (R @ R.T).toarray()
    idle = np.zeros(size, dtype=np.int64)       # rounds each row has spent at weight 0

    def master(alpha, master_tol):
        # the master's weights, theta, the slacks and the lower bound
        alpha, grad, dual, _ = solve_master_dual(
            RowGram(R, dense=None if Gram is None else Gram[:T, :T]), b[:T], group[:T], cap,
            alpha=alpha, tol=master_tol)
        xi = np.full(m, -np.inf)
        np.maximum.at(xi, group[:T], grad)
        return alpha, R.T @ alpha, xi, reg * dual

    theta, xi, lower = np.zeros(D), np.zeros(m), 0.0
    converged = False
    master_tight = True      # the last master was solved to 1e-3 tol (none yet: its value 0)
    it = n_dropped = 0
    with single_threaded_blas():
        if prev is not None:
            alpha, theta, xi, lower = master(alpha, 1e-3 * tol)
        for it in range(1, int(est.max_iter) + 1):
            s, psi = F_all @ theta, Psi @ theta
            todo = (np.ones(m, dtype=bool) if (it - 1) % FULL_EVERY == 0
                    else calm < CALM_ROUNDS)
            solve_lps(todo, s)
            hinge, viol = violations(s, psi, todo)
            worst = float(viol[todo].max(initial=0.0))      # of the examples solved
            if not todo.all() and (it == int(est.max_iter)
                                   or (worst <= tol and master_tight)):
                todo, hinge, viol = solve_rest(todo, s, psi)   # it may stop: every LP
                worst = float(viol.max())
            # (the objective is an upper bound in a round that skips examples)
            objective = 0.5 * reg * theta @ theta + hinge.mean()
            stop = progress.update(iteration=it, objective=float(objective),
                                   lower_bound=lower, max_violation=worst,
                                   n_constraints=T - m)
            if stop and not todo.all():
                todo, hinge, viol = solve_rest(todo, s, psi)
                worst = float(viol.max())
                objective = 0.5 * reg * theta @ theta + hinge.mean()
            tight = worst <= TIGHT_BELOW * tol
            if todo.all() and worst <= tol and master_tight:
                converged = True
                break
            if stop or it == int(est.max_iter):
                break
            # (none when every violation is within tol but the last master was loose: it
            # is then solved again to 1e-3 tol, and the next round's LPs decide)
            new = np.flatnonzero((viol > tol) & todo)
            # the new rows in one product: the vertices' marginal parts times Phi
            lens = cuts[new + 1] - cuts[new]
            cols = np.concatenate([np.arange(cuts[i], cuts[i + 1]) for i in new]
                                  + [np.zeros(0, dtype=np.int64)])
            vals = np.concatenate([X[i][:cuts[i + 1] - cuts[i]] for i in new] + [np.zeros(0)])
            S = sp.csr_array((vals, (np.repeat(np.arange(len(new)), lens), cols)),
                             shape=(len(new), F_all.shape[0]))
            g = sp.csr_array(Psi[new] - S @ F_all)
            bv = np.array([X[i][cuts[i + 1] - cuts[i]:].sum() for i in new], dtype=float)
            T1 = T + len(new)
            if T1 > len(b):
                grow = max(T1, len(b) + len(b) // 2)    # (by half: the copy is the peak)
                b, group = np.pad(b, (0, grow - len(b))), np.pad(group, (0, grow - len(group)))
                idle = np.pad(idle, (0, grow - len(idle)))
                if Gram is not None and 8 * grow * grow <= DENSE_GRAM_BYTES:
                    G2 = np.zeros((grow, grow))
                    G2[:T, :T] = Gram[:T, :T]
                    Gram = G2
                else:       # too large to hold: the master takes its products with R
                    Gram = None
            R = sp.vstack([R, g], format="csr")
            b[T:T1], group[T:T1], idle[T:T1] = bv, new, 0
            if Gram is not None:
                cross = R @ g.toarray().T   # sparse times dense: the dense block at once
                Gram[:T1, T:T1] = cross
                Gram[T:T1, :T1] = cross.T
            T = T1
            alpha = np.concatenate([alpha, np.zeros(len(new))])
            master_tol = 1e-3 * tol if tight else max(1e-3 * tol,
                                                      MASTER_SHARE * worst)
            master_tight = master_tol <= 1e-3 * tol
            alpha, theta, xi, lower = master(alpha, master_tol)
            # rows idle for INACTIVE_ROUNDS rounds leave the master (never the truths):
            # a relaxation, so its value stays a lower bound; a row the oracle finds again
            # comes back
            idle[:T] = np.where(alpha > 0.0, 0, idle[:T] + 1)
            # (taken out together, once they are a tenth of the rows or their room is
            # needed: each removal copies the Gram matrix)
            drop = idle[:T] >= INACTIVE_ROUNDS
            drop[:m] = False
            n_drop = int(drop.sum())
            if n_drop and (10 * n_drop >= T or T + m > len(b)):
                keep = np.flatnonzero(~drop)
                T = len(keep)
                R = R[keep]
                b[:T], group[:T], idle[:T] = b[keep], group[keep], idle[keep]
                for j, r in enumerate(keep if Gram is not None else ()):
                    Gram[j, :T] = Gram[r, keep]     # in place (keep[j] >= j): no new array
                alpha = alpha[keep]
                n_dropped += n_drop
    if not converged and it == int(est.max_iter):
        warnings.warn(
            f"{type(est).__name__} (method='cutting_plane') stopped after max_iter="
            f"{int(est.max_iter)} rounds with an example's loss {float(viol.max()):.3g} "
            f"above its cutting-plane bound (tol={tol:g}); raise max_iter or tol.",
            ConvergenceWarning, stacklevel=3)
    est._warm_rows = (None if keys is None or None in keys else _kept_rows(
        dict(keys=keys, R=R, b=b[:T].copy(), group=group[:T].copy(), share=alpha / C),
        getattr(est, "_warm_rows", None)))
    est.n_iter_ = it
    est.converged_ = converged
    est.objective_ = float(objective)
    est.lower_bound_ = float(min(lower, objective))
    est.n_constraints_ = T - m
    est.inner_stats_["dropped_rows"] = n_dropped
    est.inner_stats_["solves"] = n_solves
    return theta


# The warm start's store: ``keys`` (one per example), the rows ``R`` with their ``b`` and
# ``group`` (rows 0..len(keys)-1 the examples' truths, in the order of ``keys``), and each
# row's weight as a share of its example's cap, ``share``.

def _gather(store, which, first=0):
    """The store's rows of its examples ``which`` (indices into its keys), renumbered to
    the examples ``first, first + 1, ...``: the truths' shares, then the vertex rows as
    ``(rows of R, new group, b, share)``."""
    m0 = len(store["keys"])
    vert = m0 + np.argsort(store["group"][m0:], kind="stable")
    start = np.searchsorted(store["group"][vert], np.arange(m0 + 1))
    take = [vert[start[j]:start[j + 1]] for j in which]
    group = np.concatenate([np.zeros(0, dtype=np.int64)] +
                           [np.full(len(t), first + i) for i, t in enumerate(take)])
    take = np.concatenate([np.zeros(0, dtype=np.int64)] + take)
    return (store["share"][np.asarray(which, dtype=np.int64)],
            (store["R"][take], group, store["b"][take], store["share"][take]))


def _stack(m, D, truth_share, parts):
    """A store's arrays from its truths' shares and vertex-row parts (see :func:`_gather`)."""
    return dict(R=sp.vstack([sp.csr_array((m, D))] + [p[0] for p in parts], format="csr"),
                group=np.concatenate([np.arange(m)] + [p[1] for p in parts]),
                b=np.concatenate([np.zeros(m)] + [p[2] for p in parts]),
                share=np.concatenate([truth_share] + [p[3] for p in parts]))


def _start_rows(kept, keys):
    """The working set a warm start begins with: for each example of this fit (``keys``)
    that the store ``kept`` holds, its rows there (its truth row's weight among them, a
    repeated example's rows for each copy); the other examples start from their truth
    row alone, at their cap.  ``{"R", "b", "group", "share"}``, or None when the store
    holds none of them."""
    if kept is None:
        return None
    where = {}
    for j, key in enumerate(kept["keys"]):
        where.setdefault(key, j)
    src = np.array([where.get(key, -1) for key in keys], dtype=np.int64)
    found = np.flatnonzero(src >= 0)
    if not len(found):
        return None
    share = np.ones(len(keys))
    share[found], (R, group, b, s) = _gather(kept, src[found])
    return _stack(len(keys), kept["R"].shape[1], share, [(R, found[group], b, s)])


def _kept_rows(last, older):
    """The store after a fit: its rows (``last``), and from the store before it
    (``older``) the rows of the examples it did not have, so that a fit on any mix of
    the examples seen since ``warm_start`` was set starts warm (while the number of
    parameters stays the same: rows of another parameter space are dropped)."""
    if older is None or older["R"].shape[1] != last["R"].shape[1]:
        return last
    have = set(last["keys"])
    extra, seen = [], set()
    for j, key in enumerate(older["keys"]):
        if key not in have and key not in seen:
            seen.add(key)
            extra.append(j)
    m = len(last["keys"])
    if not extra:
        return last
    share, part = _gather(older, extra, first=m)
    mine = (last["R"][m:], last["group"][m:], last["b"][m:], last["share"][m:])
    out = _stack(m + len(extra), last["R"].shape[1],
                 np.concatenate([last["share"][:m], share]), [mine, part])
    out["keys"] = last["keys"] + [older["keys"][j] for j in extra]
    return out


def _simplex_sizes(ex, k):
    """Sizes of the consecutive blocks of ``ex``'s inner-LP marginal parts that each hold
    a distribution: a node's ``k`` labels and an edge's ``k^2`` pairs on a tree, a
    clique's table on a junction tree."""
    if isinstance(ex, GraphExample):
        return np.diff(ex.tables(k).offsets)
    n = ex.n_nodes
    return np.concatenate([np.full(n, k), np.full(n - 1, k * k)]).astype(np.int64)

def fit_frank_wolfe(est, exs, Ys, NL, k, progress):
    # The same objective as the cutting plane, divided by reg: 1/2 |theta|^2 + C sum h_i
    # with C = 1 / (reg m), each h_i the structured hinge of the inner game
    # (agm.game_model), trained by FrankWolfeLearner (its certified duality gap; the
    # inner LP as the oracle).
    from ..learners.frank_wolfe import FrankWolfeLearner
    from .game_model import AdversarialGame, GameExample
    reg, max_iter = float(est.reg), int(est.max_iter)
    tol = 1e-4 if est.tol is None else float(est.tol)

    def report(info):
        scaled = {key: (reg * v if key in ("objective", "duality_gap", "gap_estimate") else v)
                  for key, v in info.items() if key != "time"}
        return progress.update(**scaled)

    fw = FrankWolfeLearner(AdversarialGame(k), C=1.0 / (reg * len(exs)), tol=tol,
                           max_iter=max_iter, random_state=est.random_state, callback=report,
                           cache_passes=FW_CACHE_PASSES, inner_steps=FW_INNER_STEPS)
    games = [GameExample(ex, nl, polytope=P)
             for ex, nl, P in zip(exs, NL, shared_inner_polytopes(exs, NL, k))]
    with warnings.catch_warnings():
        # the learner's max_iter warning names FrankWolfeLearner: the AGM's own is issued below
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        fw.fit(games, Ys)
    if not fw.converged_ and fw.n_iter_ >= max_iter:
        warnings.warn(
            f"{type(est).__name__} (method='frank_wolfe') stopped after max_iter="
            f"{max_iter} epochs at a relative duality gap "
            f"{fw.duality_gap_ / fw.objective_:.3g} above tol={tol:g}; raise "
            "max_iter or tol.", ConvergenceWarning, stacklevel=3)
    est.n_iter_ = fw.n_iter_
    est.converged_ = bool(fw.converged_)
    est.objective_ = reg * float(fw.objective_)
    est.lower_bound_ = reg * float(fw.dual_objective_)
    est.inner_stats_["solves"] = int(fw.n_oracle_calls_)
    return np.asarray(fw.coef_, dtype=float)

def fit_qp(est, exs, Ys, NL, k, d_v, d_e, progress, polytopes):
    name = type(est).__name__
    solver = check_solver(est.solver, owner=name)
    opts = check_solver_opts(est.solver_opts, owner=name)
    # Per example, the inner LP over parts mu = (node marginals, edge marginals, v) is
    #   max (Phi theta + c) . mu  s.t.  A mu <= 0, E mu = e, mu >= 0     (c = 1 on v)
    # (the box bounds of game_polytope are implied by these rows), with LP dual
    #   min e . nu  s.t.  A^T lam + E^T nu >= Phi theta + c,  lam >= 0.
    t0 = time.perf_counter()
    Phis, As, Es, es, cs, psis = [], [], [], [], [], []
    polytopes += shared_inner_polytopes(exs, NL, k)   # kept for the exact re-evaluation
    for ex, y, P in zip(exs, Ys, polytopes):
        F = lp_features(ex, k)
        n = ex.n_nodes
        Phis.append(sp.vstack([F, sp.csr_array((n, F.shape[1]))], format="csr"))
        As.append(P.A); Es.append(P.E); es.append(P.e)
        cs.append(np.concatenate([np.zeros(F.shape[0]), np.ones(n)]))
        psis.append(F.T @ lp_encode(ex, y, k))
    D = n_params(d_v, d_e, k)
    m = len(exs)
    Phi = sp.vstack(Phis, format="csr")
    A = block_diag(As)
    E = block_diag(Es)
    Se = sp.csr_array((np.concatenate(es), np.concatenate([np.arange(len(x)) for x in es])
                       + np.repeat(np.cumsum([0] + [len(x) for x in es[:-1]]),
                                   [len(x) for x in es]),
                       np.concatenate([[0], np.cumsum([len(x) for x in es])])),
                      shape=(m, E.shape[0]))
    Psi = np.vstack(psis)
    theta = cp.Variable(D, name="theta")
    xi = cp.Variable(m, name="xi")
    lam = cp.Variable(A.shape[0], nonneg=True, name="lam")
    nu = cp.Variable(E.shape[0], name="nu")
    cons = [xi + Psi @ theta - Se @ nu >= 0,
            sp.csr_array(A.T) @ lam + sp.csr_array(E.T) @ nu - Phi @ theta
            >= np.concatenate(cs)]
    obj = cp.Minimize(0.5 * float(est.reg) * cp.sum_squares(theta) + cp.sum(xi) / m)
    prob = cp.Problem(obj, cons)
    progress.message(f"compiled the QP of {m} examples, {Phi.shape[0]} parts, {D} "
                     f"parameters in {time.perf_counter() - t0:.3g} s")
    solve_s = solve(prob, solver, opts, what="the AGM training QP",
                    hints={cp.UNBOUNDED: " With reg=0 the AGM objective can be unbounded; "
                                         "use reg > 0."})
    progress.message(f"solved the AGM training QP with {solver} in {solve_s:.3g} s")
    est.problem_ = prob
    est.solver_ = solver
    est.qp_objective_ = float(prob.value)
    return np.asarray(theta.value, dtype=float)

# ------------------------------------------------------------------ predict


def _edge_onehot(ex, y, k):
    m = len(ex.edge_child)
    Z = np.zeros((m, k, k))
    Z[np.arange(m), y[ex.edge_parent], y[ex.edge_child]] = 1.0
    return Z
