"""Adversarial graphical models on trees (Fathony et al. 2018): learning and prediction."""

from __future__ import annotations

import numbers
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..utils.progress import Progress, check_callback, check_verbose
from ..utils.validation import (check_bool, check_choice, check_random_state, check_scalar,
                           check_sequence_of_examples)
from ..base import BaseEstimator
from ..exceptions import InvalidInputError, InvalidParameterError
from ..formulations import block_diag
from ..solvers import check_solver, check_solver_opts, solve, verify_solution
from ..graphical.losses import check_loss
from ..graphical.junction import (MAX_TREEWIDTH, GraphExample, as_tree, check_example,
                                  clique_scores, graph_score, jt_max_sum)
from ..graphical.trees import (check_labels, check_tree_example, max_sum,
                               node_weights_of, potentials, split_theta)
from .inner import inner_lp, inner_lp_total, shared_inner_polytopes  # noqa: F401  (here in 0.1.0)
from .polytopes import lp_encode, lp_features, marginal_rows  # noqa: F401  (here in 0.1.0)
from . import routes


def check_tree_dataset(X, Y, n_labels, owner, graphs=False, max_treewidth=MAX_TREEWIDTH):
    """Validate a list of tree examples (and labellings); return them checked.

    With ``graphs=True`` graph examples (dicts with ``edges``; see
    :mod:`structlp.graphical.junction`) are accepted too: those whose edges form a tree
    directed away from a root become tree examples (the tree fast path), the others
    :class:`~structlp.graphical.junction.GraphExample` with their junction tree.
    """
    X = check_sequence_of_examples(X, "X")
    if graphs:
        exs = [check_example(x, n_labels, max_treewidth, f"X[{i}]") for i, x in enumerate(X)]
        exs = [(as_tree(ex) or ex) if isinstance(ex, GraphExample) else ex for ex in exs]
    else:
        exs = [check_tree_example(x, f"X[{i}]") for i, x in enumerate(X)]
    d_v = exs[0].node_features.shape[1]
    # edge feature size from the first example with an edge (a one-node tree has none,
    # wherever it comes in the list)
    d_e = next((ex.edge_features.shape[1] for ex in exs if len(ex.edge_child)),
               exs[0].edge_features.shape[1])
    for i, ex in enumerate(exs):
        if ex.node_features.shape[1] != d_v or (len(ex.edge_child) and ex.edge_features.shape[1] != d_e):
            raise InvalidInputError(
                f"X[{i}] has (node, edge) feature sizes ({ex.node_features.shape[1]}, "
                f"{ex.edge_features.shape[1]}); the others have ({d_v}, {d_e}).")
        if len(ex.edge_child) == 0 and ex.edge_features.shape[1] != d_e:
            ex.edge_features = np.zeros((0, d_e))
    if Y is None:
        return exs, None, d_v, d_e
    Y = check_sequence_of_examples(Y, "Y")
    if len(Y) != len(exs):
        raise InvalidInputError(
            f"X and Y must have the same number of examples; got {len(exs)} and {len(Y)}.")
    Ys = [check_labels(y, ex.n_nodes, n_labels, f"Y[{i}]") for i, (ex, y) in enumerate(zip(exs, Y))]
    return exs, Ys, d_v, d_e


class AdversarialGraphicalModel(BaseEstimator):
    """Adversarial graphical model on trees and low-treewidth graphs (Fathony et al. 2018, Eq. 5).

    Learns ``theta`` by

    .. math::

        \\min_\\theta\\; \\frac{\\lambda}{2}\\|\\theta\\|^2 + \\frac1m \\sum_{i=1}^m \\Big[
        \\max_{Q\\in\\mathcal M(x_i)} \\min_{p\\in\\Delta}
        \\sum_j p_j^T L_j r_j + \\theta\\cdot\\Phi(x_i, Q) \\Big] - \\theta\\cdot\\Phi(x_i, y_i),

    where ``M(x_i)`` is the local marginal polytope of the tree (node marginals
    ``r_j``, edge marginals ``Q``), ``L_j = w_j L`` the node's weighted loss matrix
    and ``Phi(x, Q)`` the expected features.  ``m`` is the number of examples and
    ``lambda`` is ``reg``.

    A graph example (dict with ``edges``; :mod:`structlp.graphical.junction`) that is
    not a tree directed away from a root is handled by its junction tree (§3.2.4):
    ``M(x_i)`` becomes the clique-marginal polytope (exact on a junction tree),
    ``r_j`` and ``Q`` its node and edge marginals; the QP dualizes that LP, the
    subgradient method solves it (``inner="lp"``; ``"dual_decomposition"`` falls
    back to the LP on such graphs), prediction is max-sum on the junction tree.
    The cost per example is O(m_cliques k^(w+1)) for width ``w``.

    Parameters
    ----------
    n_labels : int >= 2
    loss : {"zero_one", "absolute", "squared"} or array (n_labels, n_labels), default "zero_one"
        Non-negative loss matrix ``L[j, b]`` (prediction ``j``, label ``b``).
    node_weights : None, "position", callable or None
        Per-node loss weights: None (all 1), "position" (1..n along the node
        index) or a callable ``x -> (n,)`` array.
    normalize_weights : bool, default False
        Divide each example's node weights by their sum (the loss of a
        labelling becomes a weighted average, as in the paper's experiments).
    reg : float >= 0, default 1e-2
        ``lambda``.
    method : {"subgradient", "qp", "cutting_plane", "frank_wolfe"}
        "subgradient": the paper's stochastic algorithm (AdaGrad on theta; per
        example the inner max-min by Eq. 7 dual decomposition + Eq. 9 recovery,
        ``inner="dual_decomposition"``, or by one exact LP, ``inner="lp"``).
        "qp": the whole objective as one QP, dualizing each example's inner LP
        over ``(Q, r, v)`` (exact; needs ``reg > 0`` to be bounded in general).
        "cutting_plane": the same optimum by the n-slack cutting plane of the
        max-margin learners (Tsochantaridis et al. 2005), each example's inner LP as
        the oracle and its optimal vertex as the cut; ``objective_`` is within ``tol``
        of the minimum, certified by ``lower_bound_``.  An example found within ``tol``
        in the last round is skipped until a round that solves every LP (every fourth,
        and the one in which it may stop).  Needs ``reg > 0``; its master keeps a dense
        Gram matrix over the vertices in use (memory quadratic in their number).
        "frank_wolfe": the same optimum by block-coordinate Frank–Wolfe
        (:class:`~structlp.FrankWolfeLearner` on :class:`~structlp.agm.game_model.AdversarialGame`,
        ``C = 1 / (reg m)``), with a certified duality gap: it stops when
        ``objective_ - lower_bound_ <= tol * objective_``.  Needs ``reg > 0``; memory
        linear in the examples: the route for thousands of examples.
        Which to choose, and how each works: :doc:`/guide/agm`.
    inner : {"lp", "dual_decomposition"}, default "lp"
        Inner solver of the subgradient method: "lp" keeps each example's LP in a
        HiGHS instance and hot-starts it from the previous basis (an epoch costs
        time linear in the number of examples, but about quadratic in one
        example's cliques: the simplex needs O(cliques) pivots of O(cliques) work
        each); dual decomposition (closed-form node games) falls back to the LP for
        an example when its certified gap exceeds ``inner_tol``.
    max_epochs : int, default 100
    learning_rate : float > 0, default 0.1
        AdaGrad step.
    batch_size : int >= 1, default 1
    average : bool, default True
        Return the average of the iterates of the second half of the epochs.
    inner_tol : float > 0, default 1e-6
    init : float or array (k * d_v + k**2 * d_e,), default 0.0
        Starting ``theta`` of the subgradient method (a constant fills every
        entry; the authors' code starts from -0.5).
    warm_start : bool, default False
        When True and the model is fitted with a ``coef_`` of the same length, a
        re-fit of the subgradient method starts from ``coef_`` instead of ``init``
        and continues AdaGrad from its sums of squared gradients ``adagrad_sum_``
        (small steps, as at the end of the previous fit).  A re-fit of
        ``method="cutting_plane"`` starts from the previous fit's working set of
        vertices for every example the two training sets share (the same tree, node
        losses, features and labels, wherever it stands in the set), their weights
        scaled to the new ``reg`` and size: down a regularization path on one training
        set, or across overlapping training sets (cross-validation folds), the same
        certified optimum in fewer rounds; the other examples, and a training set with
        none in common, start afresh.  For ``method="qp"`` and ``"frank_wolfe"`` it has
        no effect.
    random_state : int or None
    solver, solver_opts
        cvxpy QP solver for ``method="qp"`` (default CLARABEL) and its options;
        predict_proba uses an LP solver (HiGHS by default).
    max_treewidth : int, default 8
        Refuse graph examples whose junction tree is wider (an error giving the
        width and the clique table size k^(w+1), before anything is allocated).
    verbose : int >= 0, default 0
        1: one log line per epoch of the subgradient method (epoch, norm of the epoch's
        step ``|theta_end - theta_start|``, time), per round of the cutting plane, or
        the compile and solve times of the QP (``method="qp"``).
    callback : callable or None, default None
        Subgradient method: ``callback(info)`` after every epoch (``iteration``,
        ``step_norm``, ``updates``, ``time``); returning True stops the fit after that
        epoch (the average then covers the second-half iterates done so far, or is the
        last iterate).  Cutting plane: after every round's LPs (``iteration``,
        ``objective``, ``lower_bound``, ``max_violation``, ``n_constraints``, ``time``);
        In a round that skips examples ``objective`` is an upper bound (each skipped
        LP's value bounded from its last solve); ``objective_`` is always exact.
        True stops there.  Frank–Wolfe: after every epoch (``iteration``,
        ``gap_estimate``, and at exact checks ``objective`` and ``duality_gap``, in the
        objective's units, ``time``); True stops there (the last ``theta`` is then
        certified by an exact pass).  Not called by ``method="qp"``.
    tol : float > 0 or None, default None
        ``method="cutting_plane"``: stop when no example's inner maximum exceeds its
        master bound by more than ``tol`` (loss units; the objective is then within
        ``tol`` of the minimum); None: 1e-8.  ``method="frank_wolfe"``: stop when the
        certified duality gap is at most ``tol`` times the objective; None: 1e-4.
    max_iter : int >= 1, default 1000
        ``method="cutting_plane"``: the most rounds; ``"frank_wolfe"``: the most epochs
        (then a ConvergenceWarning).

    Attributes
    ----------
    coef_ : ndarray (n_labels * d_v + n_labels**2 * d_e,)
    theta_node_ : ndarray (n_labels, d_v)
    theta_edge_ : ndarray (n_labels, n_labels, d_e)
    objective_ : float
        The regularized AGM objective at ``coef_``: computed exactly (one LP per
        example) after the subgradient method and in the cutting plane's last round;
        the QP's optimal value for "qp".
    n_iter_ : int
        Stochastic updates (subgradient), rounds (cutting_plane), epochs
        (frank_wolfe) or 1 (qp).
    lower_bound_ : float
        ``method="cutting_plane"``: the last master QP's dual value;
        ``"frank_wolfe"``: the dual objective; a lower bound on the minimum
        (``objective_ - lower_bound_`` is the certified gap).
    converged_ : bool
        ``method="cutting_plane"`` or ``"frank_wolfe"``: whether it stopped at ``tol``
        (not ``max_iter`` or the callback).
    n_constraints_ : int
        ``method="cutting_plane"``: the vertices in the final master QP.
    adagrad_sum_ : ndarray (n_params,)
        AdaGrad's sums of squared gradients at the end of the subgradient method
        (where a ``warm_start`` re-fit resumes).
    inner_stats_ : dict
        Inner solves, fallbacks to the LP and mean dual-decomposition iterations.
    fit_time_ : float

    Examples
    --------
    Chains of 5 nodes with 3 labels, trained by the exact QP:

    >>> import numpy as np
    >>> from structlp.agm import AdversarialGraphicalModel, make_loopy_data
    >>> _, X, Y = make_loopy_data("skip_chain", n_examples=40, n_nodes=5, random_state=0)
    >>> agm = AdversarialGraphicalModel(3, reg=0.1, method="qp").fit(X[:20], Y[:20])
    >>> print(f"{agm.objective_:.4f}")
    1.6994
    >>> pred = agm.predict(X[20:])                 # max-sum on each example's graph
    >>> print(len(pred), pred[0].shape)
    20 (5,)
    >>> print(f"{np.mean([np.mean(p != y) for p, y in zip(pred, Y[20:])]):.2f}")
    0.23
    """

    # set by the QP route (agm.routes.fit_qp)
    problem_: Any
    solver_: Any
    qp_objective_: float

    def __init__(self, n_labels: int, loss: Union[str, ArrayLike] = "zero_one",
                 node_weights: Union[None, str, Callable[..., Any]] = None,
                 normalize_weights: bool = False, reg: float = 1e-2,
                 method: str = "subgradient", inner: str = "lp", max_epochs: int = 100,
                 learning_rate: float = 0.1, batch_size: int = 1, average: bool = True,
                 inner_tol: float = 1e-6, random_state: Optional[int] = None,
                 solver: Optional[str] = None, solver_opts: Optional[Dict[str, Any]] = None,
                 max_treewidth: int = MAX_TREEWIDTH, init: Union[float, ArrayLike] = 0.0,
                 verbose: int = 0, callback: Optional[Callable[..., Any]] = None,
                 warm_start: bool = False, tol: Optional[float] = None, max_iter: int = 1000) -> None:
        self.n_labels = n_labels
        self.loss = loss
        self.node_weights = node_weights
        self.normalize_weights = normalize_weights
        self.reg = reg
        self.method = method
        self.inner = inner
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.average = average
        self.inner_tol = inner_tol
        self.random_state = random_state
        self.solver = solver
        self.solver_opts = solver_opts
        self.max_treewidth = max_treewidth
        self.init = init
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start
        self.tol = tol
        self.max_iter = max_iter

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        name = type(self).__name__
        k = check_scalar(self.n_labels, "n_labels", kind=numbers.Integral, low=2, owner=name)
        loss_name, L = check_loss(self.loss, k, owner=name)
        check_scalar(self.reg, "reg", kind=numbers.Real, low=0, owner=name)
        check_choice(self.method, "method", ("subgradient", "qp", "cutting_plane",
                                             "frank_wolfe"), owner=name)
        if self.tol is not None:
            check_scalar(self.tol, "tol", kind=numbers.Real, low=0, low_inclusive=False,
                         owner=name)
        check_scalar(self.max_iter, "max_iter", kind=numbers.Integral, low=1, owner=name)
        if self.method in ("cutting_plane", "frank_wolfe") and not float(self.reg) > 0:
            raise InvalidParameterError(
                f"The 'reg' parameter of {name} must be > 0 with method={self.method!r} "
                f"(its master QPs are bounded only by the regularizer); got {self.reg!r}.")
        check_choice(self.inner, "inner", ("lp", "dual_decomposition"), owner=name)
        check_scalar(self.max_epochs, "max_epochs", kind=numbers.Integral, low=1, owner=name)
        check_scalar(self.learning_rate, "learning_rate", kind=numbers.Real, low=0,
                     low_inclusive=False, owner=name)
        check_scalar(self.batch_size, "batch_size", kind=numbers.Integral, low=1, owner=name)
        check_scalar(self.inner_tol, "inner_tol", kind=numbers.Real, low=0, low_inclusive=False,
                     owner=name)
        check_bool(self.normalize_weights, "normalize_weights", owner=name)
        check_bool(self.average, "average", owner=name)
        check_bool(self.warm_start, "warm_start", owner=name)
        check_random_state(self.random_state, owner=name)
        check_scalar(self.max_treewidth, "max_treewidth", kind=numbers.Integral, low=0, owner=name)
        check_verbose(self.verbose, name)
        check_callback(self.callback, name)
        if not (self.node_weights is None or self.node_weights == "position"
                or callable(self.node_weights)):
            raise InvalidParameterError(
                f"The 'node_weights' parameter of {name} must be None, 'position' or a "
                f"callable x -> (n,) weights; got {self.node_weights!r}.")
        return k, loss_name, L

    def _weights(self, ex):
        return node_weights_of(ex, self.node_weights, bool(self.normalize_weights))

    def _dataset(self, X, Y, k):
        return check_tree_dataset(X, Y, k, type(self).__name__, graphs=True,
                                  max_treewidth=self.max_treewidth)

    # ------------------------------------------------------------------ fit
    def fit(self, X: Sequence[Any], Y: Sequence[ArrayLike]) -> "AdversarialGraphicalModel":
        """Learn ``theta`` from tree examples ``X`` and labellings ``Y``.

        Parameters
        ----------
        X : list of m tree or graph examples (dicts; see :mod:`structlp.graphical.trees`
            and :mod:`structlp.graphical.junction`)
        Y : list of m int arrays (n_i,), labels in 0..n_labels-1

        Returns
        -------
        self
        """
        k, loss_name, L = self._check_params()
        t0 = time.perf_counter()
        exs, Ys, d_v, d_e = self._dataset(X, Y, k)
        W = [self._weights(ex) for ex in exs]
        NL = [w[:, None, None] * L[None] for w in W]
        self.n_features_in_ = (d_v, d_e)
        self.inner_stats_ = {"solves": 0, "lp_fallbacks": 0, "dd_iterations": 0}
        qp = self.method == "qp"
        # the routes whose last pass is exact and certified against a lower bound
        cutting = self.method in ("cutting_plane", "frank_wolfe")
        progress = Progress(self, check_verbose(self.verbose), None if qp else self.callback,
                            total=None if qp else int(self.max_iter if cutting
                                                      else self.max_epochs))
        try:
            if qp:
                polytopes: List[Any] = []
                theta = routes.fit_qp(self, exs, Ys, NL, k, d_v, d_e, progress, polytopes)
                self.n_iter_ = 1
            elif self.method == "cutting_plane":
                theta = routes.fit_cutting_plane(self, exs, Ys, NL, k, d_v, d_e, progress)
            elif self.method == "frank_wolfe":
                theta = routes.fit_frank_wolfe(self, exs, Ys, NL, k, progress)
            else:
                theta, lps = routes.fit_subgradient(self, exs, Ys, W, NL, k, d_v, d_e, loss_name, L,
                                                   progress)
        finally:
            progress.close()
        self._set_theta(theta, k, d_v, d_e)
        if qp:
            # verified, not trusted: the QP's slacks bound each example's inner max-min from
            # above at any feasible point, so its value may not undercut the objective of
            # its own theta re-evaluated exactly (one LP per example)
            exact = self._objective(theta, exs, Ys, NL, k, polytopes=polytopes)
            self.verification_ = verify_solution(
                self.problem_, self.solver_, "the AGM training QP", self.qp_objective_,
                recomputed=exact)
            self.objective_ = self.qp_objective_
        elif not cutting:                        # the cutting plane's last pass is exact
            self.objective_ = self._objective(theta, exs, Ys, NL, k, lps)
        self.fit_time_ = time.perf_counter() - t0
        return self

    def _set_theta(self, theta, k, d_v, d_e):
        self.coef_ = np.asarray(theta, dtype=float)
        self.theta_node_, self.theta_edge_ = split_theta(self.coef_, d_v, d_e, k)

    def _objective(self, theta, exs, Ys, NL, k, lps=None, polytopes=None):
        if polytopes:                  # the QP's own polytopes: all inner LPs in one solve
            pots = [potentials(ex, theta, k) for ex in exs]
            total = inner_lp_total(exs, pots, polytopes) - sum(
                graph_score(ex, b, B, y) for ex, (b, B), y in zip(exs, pots, Ys))
            return float(0.5 * float(self.reg) * theta @ theta + total / len(exs))
        total = 0.0
        for i, (ex, y, nl) in enumerate(zip(exs, Ys, NL)):
            b, B = potentials(ex, theta, k)
            val = (lps[i].solve(b, B)[0] if lps is not None and i in lps
                   else inner_lp(ex, b, B, nl)[0])
            total += val - graph_score(ex, b, B, y)
        return float(0.5 * float(self.reg) * theta @ theta + total / len(exs))

    def objective(self, X: Sequence[Any], Y: Sequence[ArrayLike],
                  theta: Optional[ArrayLike] = None) -> float:
        """The regularized AGM objective of ``theta`` (default ``coef_``) on ``(X, Y)``, exactly."""
        k, _, L = self._check_params()
        if theta is None:
            self._check_fitted()
            theta = self.coef_
        exs, Ys, _, _ = self._dataset(X, Y, k)
        NL = [self._weights(ex)[:, None, None] * L[None] for ex in exs]
        return self._objective(np.asarray(theta, dtype=float), exs, Ys, NL, k)

    def _checked(self, X):
        self._check_fitted()
        k = self._check_params()[0]
        exs, _, d_v, d_e = self._dataset(X, None, k)
        if (d_v, d_e) != tuple(self.n_features_in_) and not (
                d_v == self.n_features_in_[0] and all(len(ex.edge_child) == 0 for ex in exs)):
            raise InvalidInputError(
                f"X has (node, edge) feature sizes ({d_v}, {d_e}); the model was fitted with "
                f"{tuple(self.n_features_in_)}.")
        return exs, k

    def decision_potentials(self, X: Sequence[Any]) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Node potentials (n, k) and edge potentials (E, k, k) of each example.

        (A graph example that is a tree directed from a root has its edges in the
        tree's order: by child node.)
        """
        exs, k = self._checked(X)
        return [potentials(ex, self.coef_, k) for ex in exs]

    def predict(self, X: Sequence[Any]) -> List[np.ndarray]:
        """The highest-potential labelling of each example, by max-sum on its (junction) tree.

        Solves ``argmax_y theta . Phi(x, y)``.

        Returns
        -------
        list of int arrays (n_i,)
        """
        exs, k = self._checked(X)
        return [(jt_max_sum if isinstance(ex, GraphExample) else max_sum)(
            ex, *potentials(ex, self.coef_, k))[0] for ex in exs]

    def predict_proba(self, X: Sequence[Any]) -> List[np.ndarray]:
        """The predictor's node marginals of Eq. 10, one LP for all examples.

        Solves, for every example,

        .. math::

            \\min_{p_j\\in\\Delta} \\max_{Q\\in\\mathcal M(x)}
            \\sum_j p_j^T L_j r_j + \\theta\\cdot\\Phi(x, Q),

        with the inner max replaced by its LP dual over the local marginal
        polytope ``{E mu = e, mu >= 0}`` (a graph example: its clique-marginal
        polytope): ``min e.nu  s.t.  E^T nu >= Phi theta + M p``.

        Returns
        -------
        list of ndarrays (n_i, n_labels), each row a distribution
        """
        exs, k = self._checked(X)
        _, _, L = self._check_params()
        Es, es, scores, Ms, sizes = [], [], [], [], []
        for ex in exs:
            n = ex.n_nodes
            E, e, Nsel = marginal_rows(ex, k)
            b, B = potentials(ex, self.coef_, k)
            Lw = self._weights(ex)[:, None, None] * L[None]
            # node part (i, b) gets sum_j p[i, j] L_i[j, b]
            rows = np.repeat(np.arange(n * k), k)             # (i, b) repeated over j
            i_idx = rows // k
            b_idx = rows % k
            j_idx = np.tile(np.arange(k), n * k)
            M = Nsel @ sp.csr_array((Lw[i_idx, j_idx, b_idx], (rows, i_idx * k + j_idx)),
                                    shape=(n * k, n * k))
            Es.append(E); es.append(e); Ms.append(sp.csr_array(M)); sizes.append(n)
            scores.append(clique_scores(ex, b, B) if isinstance(ex, GraphExample)
                          else np.concatenate([b.ravel(), B.ravel()]))
        E = block_diag(Es)
        M = block_diag(Ms)
        s = np.concatenate(scores)
        e = np.concatenate(es)
        N = int(sum(sizes))
        p = cp.Variable(N * k, nonneg=True, name="p")
        nu = cp.Variable(E.shape[0], name="nu")
        S = sp.kron(sp.eye_array(N), sp.csr_array(np.ones((1, k))), format="csr")
        prob = cp.Problem(cp.Minimize(e @ nu), [sp.csr_array(E.T) @ nu - M @ p >= s, S @ p == 1])
        solve(prob, check_solver(None, kind="LP") if self.solver is None
              else check_solver(self.solver), check_solver_opts(self.solver_opts),
              what="the prediction LP (Eq. 10)")
        P = np.clip(np.asarray(p.value, dtype=float).reshape(N, k), 0, None)
        P /= P.sum(axis=1, keepdims=True)
        return np.split(P, np.cumsum(sizes)[:-1])
