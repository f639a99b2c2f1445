"""The certificate formulation: the rows a structure supplies (:class:`CertificateRows`)
and the slacks that turn them into one QP (:class:`Certificate`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..exceptions import InvalidParameterError
from ..formulations import LinearBlocks, TrainingData, block_diag

if TYPE_CHECKING:  # pragma: no cover
    pass


# ------------------------------------------------------------- certificate rows
@dataclass(eq=False)
class CertificateRows:
    """A certificate over its own parts: rows ``Gt t + Gnu nu >= 0``, ``t = lift @ s``.

    A certificate may prove the optimality of an output of a *larger* structure
    than the model's (the graph copy of a matching, the padded square
    assignment of a rectangular one): its *certificate parts* (edges of that
    structure) score ``t = lift @ s`` from the model's part scores ``s``.  The
    contract, with ``T_i = t_true`` the certified output: for every model
    output ``y`` there is a 0/1 certificate output ``T(y)`` with
    ``lift^T T(y) = multiplicity * y`` (so ``t . T(y) = k s . y``,
    ``k = multiplicity``) and ``T(y_i) = T_i``; rows that hold for some ``nu``
    prove that ``T_i`` maximizes ``t . T`` over the certificate outputs.
    :class:`Certificate` puts its slacks on the certificate parts at cost
    ``1 / k`` each (see there for the hinge bound).

    Iterating gives ``(Gs, Gnu)`` with ``Gs = Gt @ lift`` (rows x model parts),
    the plain form of ``certificate_rows``, which a structure may return
    instead (``lift`` the identity, ``t_true = mu_true``, ``k = 1``).

    Attributes
    ----------
    Gt : sparse (R, Q); Gnu : sparse (R, n_aux); lift : sparse (Q, L)
    t_true : ndarray (Q,) of 0/1; multiplicity : int

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.certificates import CertificateRows, potentials_exist
    >>> from structlp.datasets import make_spanning_tree
    >>> X, Y, w, model = make_spanning_tree(n_samples=1, n_nodes=4, random_state=0)
    >>> x = model.check_x(X[0])
    >>> mu = model.encode(x, Y[0])
    >>> rows = CertificateRows.of(model.certificate_rows(x, mu), mu)
    >>> rows.Gs.shape                                  # (rows, parts)
    (7, 6)
    >>> # the planted scores: Y[0] is optimal
    >>> s = model.features(x) @ w
    >>> potentials_exist(rows.Gs, rows.Gnu, s)
    True
    """

    Gt: sp.csr_array
    Gnu: sp.csr_array
    lift: sp.csr_array
    t_true: np.ndarray
    multiplicity: int = 1

    @property
    def Gs(self) -> sp.csr_array:
        """Rows in the model's part scores, sparse (R, L)."""
        return sp.csr_array(self.Gt @ self.lift)

    def __iter__(self) -> Iterator[sp.csr_array]:
        return iter((self.Gs, self.Gnu))

    @classmethod
    def of(cls, rows: Any, mu_true: ArrayLike) -> "CertificateRows":
        """``rows`` as returned by ``certificate_rows``: a CertificateRows or ``(Gs, Gnu)``."""
        if isinstance(rows, cls):
            return rows
        Gs, Gnu = rows
        Gs = sp.csr_array(Gs)
        return cls(Gs, sp.csr_array(Gnu), sp.eye_array(Gs.shape[1], format="csr"),
                   np.asarray(mu_true, dtype=float), 1)


# ------------------------------------------------------------- the formulation
#: The slacks of the certificate formulation, the default first.
SLACKS = ("two_sided", "part", "shared")


def check_slack(slack: Any, owner: Optional[str] = None) -> str:
    """Validate a certificate ``slack`` value (None means the default ``"two_sided"``)."""
    if slack is None:
        return SLACKS[0]
    if not isinstance(slack, str) or slack not in SLACKS:
        where = f" of {owner}" if owner else ""
        raise InvalidParameterError(
            f"The 'slack' parameter{where} must be one of {list(SLACKS)} (or None for the "
            f"default {SLACKS[0]!r}); got {slack!r}.")
    return slack


def slack_columns(t_true: Sequence[np.ndarray], slack: str,
                  multiplicity: Optional[Sequence[int]] = None) -> Tuple[sp.csr_array, sp.csr_array]:
    """Part-to-slack map of the per-part slacks of all examples.

    Parameters
    ----------
    t_true : list of m 0/1 arrays, shape (Q_i,)
        The certified output of each example over its certificate parts.
    slack : {"two_sided", "part"}
    multiplicity : sequence of m ints, optional (default 1)
        ``k_i`` of each example's certificate (:class:`CertificateRows`).

    Returns
    -------
    D : sparse (sum Q_i, Z)
        Column ``z`` adds ``+zeta_z`` to a true part's score, ``-zeta_z`` to another
        part's (``"two_sided"``: one column per part; ``"part"``: one per true part).
    S : sparse (m, Z)
        Row ``i`` sums the slacks of example ``i``, each weighted ``1 / k_i``.
    """
    mu = np.concatenate(t_true) if len(t_true) else np.zeros(0)
    example = np.repeat(np.arange(len(t_true)), [len(t) for t in t_true])
    k = np.ones(len(t_true)) if multiplicity is None else np.asarray(multiplicity, float)
    parts = np.flatnonzero(mu > 0.5) if slack == "part" else np.arange(len(mu))
    sign = np.where(mu[parts] > 0.5, 1.0, -1.0)
    Z = len(parts)
    D = sp.csr_array((sign, (parts, np.arange(Z))), shape=(len(mu), Z))
    S = sp.csr_array((1.0 / k[example[parts]], (example[parts], np.arange(Z))),
                     shape=(len(t_true), Z))
    return D, S


def sign_rows(Gt: sp.csr_array, Gnu: sp.csr_array) -> Tuple[np.ndarray, np.ndarray]:
    """The rows ``nu_k >= 0`` among certificate rows ``Gt t + Gnu nu >= 0``.

    Returns
    -------
    rows : bool array (R,)
        Rows with no score term and one positive auxiliary coefficient.
    columns : bool array (n_aux,)
        The auxiliary variables those rows make non-negative.
    """
    Gt, Gnu = sp.csr_array(Gt), sp.csr_array(Gnu)
    rows = (np.diff(Gt.indptr) == 0) & (np.diff(Gnu.indptr) == 1)
    first = Gnu.indptr[:-1][rows]
    rows[np.flatnonzero(rows)] = Gnu.data[first] > 0
    columns = np.zeros(Gnu.shape[1], dtype=bool)
    columns[Gnu.indices[Gnu.indptr[:-1][rows]]] = True
    return rows, columns


class Certificate:
    """``formulation="certificate"``: the optimality certificate of each true output.

    With ``s_i = Phi_i w + c_i`` the loss-augmented part scores of example
    ``i`` and ``model.certificate_rows(x_i, mu_true_i)`` its certificate
    (:class:`CertificateRows`: rows ``G^t_i t_i + G^nu_i nu_i >= 0`` over
    certificate parts ``t_i = P_i s_i``, ``P_i`` the ``lift``, that, when they
    hold for some ``nu_i``, prove that the certified output ``T_i`` -- and so
    ``y_i`` -- is optimal; or a plain pair ``(G^s_i, G^nu_i)``, ``P_i = I``),
    the training QP is, by ``slack``:

    * ``"two_sided"`` (default): a slack on every certificate part, added to
      the certified parts' scores and subtracted from the others',

      .. math::

          \\min\\; \\tfrac12\\|w\\|^2 + C\\sum_i \\frac{1}{k_i}\\sum_q \\zeta_{iq}
          \\quad\\text{s.t.}\\quad
          G^t_i(P_i(\\Phi_i w + c_i) + D_i\\zeta_i) + G^\\nu_i\\nu_i \\ge 0,\\;\\zeta\\ge 0,

      ``D_i = diag(2 T_i - 1)`` (shape (Q_i, Q_i)), ``k_i`` the certificate's
      ``multiplicity`` (1, or 2 for the graph copy of a matching, which counts
      every part twice);
    * ``"part"``: the same with a slack on the certified parts only (``D_i``
      is (Q_i, |T_i|), +1 at each certified part);
    * ``"shared"``: one slack per example added to every row,
      ``G^s_i s_i + G^nu_i nu_i + xi_i 1 >= 0`` — Taskar et al.'s relaxation.

    **What the slacks bound.**  For ``"two_sided"`` and ``"part"``, feasible rows
    mean (the certificate is sufficient) that ``T_i`` is optimal for the shifted
    certificate scores ``t' = t + D zeta``.  For any model output ``y``, with
    ``T(y)`` its 0/1 certificate output (``P^T T(y) = k y``, so
    ``t . T(y) = k s . y``),
    ``k (s.y - s.y_i) = (t'.T(y) - t'.T_i) + sum_{q in T_i} zeta_q (1 - T(y)_q)
    + sum_{q not in T_i} zeta_q T(y)_q <= sum_q zeta_q``, so
    ``xi_i = sum_q zeta_iq / k_i >= max_y s.y - s.y_i = hinge_i(w)`` (the
    structured hinge, when the loss of ``y_i`` is 0): the QP's objective
    bounds the exact max-margin objective from above, whatever the data.  At
    ``w = 0`` the bound is the whole loss, so there is no free collapse.

    Slack on *every* certificate part matters where the certificate has parts
    of its own: the node-to-copy edges of the graph copy (a matching's
    unmatched nodes) and the dummy columns of a padded rectangular assignment
    are parts of the certified perfect matching; without a slack there, the
    conservative (general-graph) certificate had to be met through the model
    parts alone, and the exact objective at the certificate's ``w`` was up to
    9.5% above the optimum on noisy 6-node matchings (1.6% with them, and
    5.5% on 4-node ones; with the odd-set certificate and its unmatched-node
    parts 0.3% and 0.24%, ``tests/test_certificates_slack.py``); rectangular
    assignments became exact (their padded square graph is bipartite).  Tying the slacks of a part's ``k``
    copies together (one ``zeta_p`` at cost 1 per model part, no slack on the
    certificate's own parts) is a special case, so the untied program's
    optimum is never higher.

    It is exact (``xi_i = hinge_i``) for square bipartite assignments
    (:class:`~structlp.structures.BipartiteMatching`, both slacks): with
    ``(u, v)`` an optimal dual of the assignment LP for ``s``, the slack
    ``zeta_rc = u_r + v_c - s_rc >= 0`` on the true edges makes ``(u, v)``
    dual feasible for ``s'`` with ``s'.y_i = sum u + sum v``, so ``y_i`` is
    optimal for ``s'`` (the certificate is exact on bipartite graphs) and
    ``sum zeta = sum u + sum v - s.y_i = hinge_i``.  Elsewhere the slack can
    exceed the hinge even with an exact certificate (odd sets, spanning
    trees): one perturbation must make ``y_i`` optimal against every output
    at once; a conservative certificate (alternating cycles on general
    graphs) adds to that.  For spanning trees ``"part"`` charges one
    attractive non-tree edge once per tree edge on its path and can exceed
    the hinge several times over (it collapses to ``w = 0`` on noisy trees),
    ``"two_sided"`` stays close.  ``"shared"`` is *not* a bound of the hinge:
    at ``w = 0`` every row has the same value, ``xi_i = 1`` (trees) or
    ``1/2`` (matchings) satisfies them all while the hinge is the whole
    Hamming loss, so under label noise the QP returns ``w = 0`` for every
    ``C``; it is kept for comparison.

    Blocks: ``"two_sided"``/``"part"`` add a non-negative auxiliary ``zeta``
    and the equality ``xi = S zeta`` (``slack_`` is then
    ``sum_q zeta_iq / k_i``); in the kernelized dual this becomes the box
    ``(D^T G^T alpha)_z <= C / k_i`` on the row multipliers.  Output
    polytopes are not built (``needs_polytopes=False``, the default) and the
    structure's ``encode`` validates every ``y``; a structure that has a
    polytope too (BipartiteMatching) passes ``needs_polytopes=True``.

    Examples
    --------
    >>> import structlp
    >>> from structlp.certificates import Certificate
    >>> from structlp.datasets import make_spanning_tree
    >>> X, Y, _, model = make_spanning_tree(n_samples=5, n_nodes=5, random_state=0)
    >>> f = structlp.formulations.get_formulation("certificate", model)
    >>> isinstance(f, Certificate), f.slacks
    (True, ('two_sided', 'part', 'shared'))
    >>> cert = structlp.MaxMarginLearner(model, C=1.0, formulation="certificate").fit(X, Y)
    >>> exact = structlp.MaxMarginLearner(model, C=1.0).fit(X, Y)         # "minmax"
    >>> # the two formulations agree on trees
    >>> print(f"{cert.objective_:.4f} {exact.objective_:.4f}")
    5.5394 5.5394
    """

    name = "certificate"
    slacks = SLACKS

    def __init__(self, model: Any, needs_polytopes: bool = False, slack: Any = "two_sided",
                 owner: Optional[str] = None) -> None:
        self.model = model
        self.needs_polytopes = needs_polytopes
        self.slack = check_slack(slack, owner)

    def with_slack(self, slack: Any, owner: Optional[str] = None) -> Certificate:
        """The same formulation with another ``slack`` (``owner`` names the caller in errors)."""
        return Certificate(self.model, self.needs_polytopes, slack, owner)

    def rows(self, data: TrainingData) -> List[CertificateRows]:
        """Per-example :class:`CertificateRows`."""
        return [CertificateRows.of(self.model.certificate_rows(x, mu), mu)
                for x, mu in zip(data.X, data.mu_true)]

    def blocks(self, data: TrainingData) -> LinearBlocks:
        m = data.n_examples
        certs = self.rows(data)
        Gt = sp.csr_array(block_diag([r.Gt for r in certs]))
        Gd = sp.csr_array(block_diag([r.Gnu for r in certs]))
        example = np.repeat(np.arange(m), [r.Gt.shape[0] for r in certs])
        # a row that only says nu_k >= 0 (the odd-set potentials) is the sign of nu_k:
        # nu_k becomes a non-negative variable and the row goes (no slack, no multiplier)
        sign, positive = sign_rows(Gt, Gd)
        Gt, Gd, example = Gt[~sign], Gd[~sign], example[~sign]
        n_rows = np.bincount(example, minlength=m)
        Gs = sp.csr_array(Gt @ block_diag([r.lift for r in certs]))
        c = np.concatenate(data.c)
        R = int(n_rows.sum())
        rhs = -np.asarray(Gs @ c).ravel()
        nu = {"nu": sp.csr_array(Gd[:, np.flatnonzero(~positive)])}
        blocks = LinearBlocks(aux={"nu": (nu["nu"].shape[1], False)})
        if positive.any():
            nu["nu_pos"] = sp.csr_array(Gd[:, np.flatnonzero(positive)])
            blocks.aux["nu_pos"] = (nu["nu_pos"].shape[1], True)
        # "parts": Gs stands for (Gs @ Phi) @ w, so the kernelized dual applies too
        if self.slack == "shared":
            # xi_i enters every row on the scores (rows on the auxiliary variables alone
            # are no optimality conditions of the scores and take none)
            scored = np.diff(Gt.indptr) > 0
            Xi = sp.csr_array((scored.astype(float), (np.arange(R), example)), shape=(R, m))
            if R:
                blocks.ineq.append(({"parts": Gs, "xi": Xi, **nu}, rhs))
            blocks.ineq.append(({"xi": sp.eye_array(m, format="csr")}, np.zeros(m)))
            return blocks
        D, S = slack_columns([r.t_true for r in certs], self.slack,
                             [r.multiplicity for r in certs])
        blocks.aux["zeta"] = (D.shape[1], True)
        if R:
            blocks.ineq.append(({"parts": Gs, "zeta": sp.csr_array(Gt @ D), **nu}, rhs))
        blocks.eq.append(({"xi": sp.eye_array(m, format="csr"), "zeta": -S}, np.zeros(m)))
        return blocks
