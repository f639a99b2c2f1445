"""General graphs through junction trees (Fathony et al. 2018, §3.2.4).

A *graph example* ``x`` is a dict with ``node_features`` (n, d_v), ``edges`` (E, 2)
(edge ``e`` joins ``u = edges[e, 0]`` and ``v = edges[e, 1]``; the graph must be
connected, without self-loops or duplicate edges) and ``edge_features`` (E, d_e).

The parameters are those of :mod:`structlp.graphical.trees`: node potential
``b[i, a] = theta_v[a] . node_features[i]``, edge potential
``B[e, a, c] = theta_e[a, c] . edge_features[e]`` with ``a = y_u``, ``c = y_v``.
The *pairwise parts* (the layout of a tree's part vector) are the node
indicators ``mu[i, a]`` (n k) and the edge indicators ``mu[e, a, c]`` (E k^2).

A junction tree of the graph (a tree decomposition by networkx's min-fill-in
and min-degree heuristics, the narrower of the two; subset bags contracted) has
cliques ``C_1..C_m`` of at most ``w + 1`` nodes, ``w`` its width.  The
*clique parts* are the joint tables ``mu_C(y_C)`` (``k^{|C|}`` entries each,
C-order over the clique's sorted nodes).  The clique-marginal polytope

.. math::

    \\sum_{y_C} \\mu_C(y_C) = 1,\\qquad
    \\sum_{y_C \\sim s} \\mu_C(y_C) = \\sum_{y_D \\sim s} \\mu_D(y_D)
    \\;\\text{for each tree edge } (C, D) \\text{ and separator labelling } s,
    \\qquad \\mu \\ge 0,

is the marginal polytope of the graph (local consistency is exact on a junction tree).
Each node and each edge is assigned to one clique holding it; the sparse 0/1 matrix
``P`` (pairwise parts x clique parts) marginalizes clique tables to the pairwise parts,
so clique scores are ``P^T s`` for pairwise scores ``s`` and clique features ``P^T
Phi``. Max-sum and sum-product run on the junction tree in O(m k^{w+1}).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

from typing import Any, Dict, Optional, Tuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ..utils.validation import check_finite_array, check_scalar
from ..exceptions import InvalidInputError
from ..utils.numeric import logsumexp, max_over
from ..polytope import Polytope
from .trees import TreeExample, check_parents, check_scores, check_tree_example

#: Default bound on the junction tree's width (clique tables of k^(w+1) entries).
MAX_TREEWIDTH = 8


@dataclass(eq=False)
class GraphExample:
    """A validated graph example with its junction tree (see the module docstring)."""

    node_features: np.ndarray
    edge_features: np.ndarray
    edges: np.ndarray             # (E, 2)
    cliques: list                 # sorted int arrays, one per clique
    clique_parent: np.ndarray     # (m,), -1 at the root clique
    clique_order: np.ndarray      # BFS order from the root clique
    width: int                    # max clique size - 1
    width_lower_bound: int        # minor-min-width lower bound of the treewidth
    _tables: dict = field(default_factory=dict, repr=False)

    @property
    def n_nodes(self):
        return self.node_features.shape[0]

    @property
    def n_edges(self):
        return self.edges.shape[0]

    @property
    def edge_parent(self):
        return self.edges[:, 0]

    @property
    def edge_child(self):
        return self.edges[:, 1]

    @property
    def width_exact(self):
        """Whether ``width`` is proven to be the treewidth (it meets the lower bound)."""
        return self.width == self.width_lower_bound

    def key(self):
        """Hashable key of the graph (equal keys, equal polytopes)."""
        return ("graph", self.n_nodes, self.edges.tobytes())

    def tables(self, k):
        """The clique tables for ``k`` labels (cached): a :class:`CliqueTables`."""
        if k not in self._tables:
            self._tables[k] = CliqueTables(self, k)
        return self._tables[k]


# ---------------------------------------------------------------- validation
def check_edges(edges, n, name="edges", connected=True):
    """Validate an edge list of an ``n``-node graph; return it as int array (E, 2).

    Parameters
    ----------
    edges : array-like (E, 2) of node indices
    n : int
    name : str
        The argument's name in error messages.
    connected : bool, default True
        Also require a connected graph (the junction-tree examples; the local-polytope
        structures take any graph).

    Raises
    ------
    InvalidInputError
        For a wrong shape, non-integers, node indices out of range, self-loops,
        duplicate edges (either orientation) or, with ``connected``, a graph that is not
        connected, naming ``name`` and the first culprit.
    """
    raw = np.asarray(edges)
    if raw.size == 0:
        raw = raw.reshape(0, 2)
    if raw.ndim != 2 or raw.shape[1] != 2:
        raise InvalidInputError(f"{name} must be an int array of shape (E, 2); got {raw.shape}.")
    if not (np.issubdtype(raw.dtype, np.integer)
            or (np.issubdtype(raw.dtype, np.floating) and np.all(np.isfinite(raw))
                and np.all(raw == np.round(raw)))):
        raise InvalidInputError(f"{name} must contain integer node indices; got {raw.dtype}.")
    E = raw.astype(np.int64)
    bad = np.flatnonzero((E < 0).any(axis=1) | (E >= n).any(axis=1))
    if len(bad):
        raise InvalidInputError(
            f"{name}[{bad[0]}] = {E[bad[0]].tolist()} has a node index outside 0..{n - 1}.")
    loops = np.flatnonzero(E[:, 0] == E[:, 1])
    if len(loops):
        raise InvalidInputError(
            f"{name}[{loops[0]}] = {E[loops[0]].tolist()} is a self-loop; a graph example "
            "has no self-loops (put node terms in node_features).")
    und = np.sort(E, axis=1)
    key = und[:, 0] * n + und[:, 1]
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    if np.any(counts > 1):
        dup = und[first[counts > 1][0]].tolist()
        where = np.flatnonzero((und == dup).all(axis=1)).tolist()
        raise InvalidInputError(
            f"{name} has duplicate edges: {dup} appears at rows {where} (in either "
            "orientation); merge their features into one edge.")
    if connected and n:
        import networkx as nx
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_edges_from(E.tolist())
        if not nx.is_connected(G):
            comps = [sorted(c) for c in nx.connected_components(G)]
            raise InvalidInputError(
                f"The graph of {name} is not connected: {len(comps)} components "
                f"(e.g. {comps[0][:5]} and {comps[1][:5]}); give each component as its own "
                "example.")
    return E


def check_graph_example(x: Any, n_labels: Optional[int] = None, max_treewidth: int = MAX_TREEWIDTH,
                        name: str = "x", connected: bool = True) -> GraphExample:
    """Validate one graph example (a dict or a :class:`GraphExample`); build its junction tree.

    Parameters
    ----------
    x : dict with ``node_features`` (n, d_v), ``edges`` (E, 2), ``edge_features`` (E, d_e)
    n_labels : int or None
        For the error message of the ``max_treewidth`` guard (clique size k^(w+1)).
    max_treewidth : int
        Refuse a junction tree wider than this before any clique table is built.
    name : str
        The example's name in error messages.
    connected : bool, default True
        Require a connected graph (the adversarial models); False takes any graph, whose
        junction tree joins its components' by empty separators (:func:`junction_tree`).

    Returns
    -------
    GraphExample

    Raises
    ------
    InvalidInputError
        Bad keys, shapes, edges (see :func:`check_edges`) or a width above
        ``max_treewidth``.

    Examples
    --------
    >>> from structlp.agm import check_graph_example, skip_chain
    >>> check_graph_example(skip_chain([[0.0]] * 4, [[1.0]] * 3)).width   # of its junction tree
    2
    """
    if isinstance(x, GraphExample):
        _check_width(x.width, x.width_lower_bound, n_labels, max_treewidth, name)
        return x
    if not isinstance(x, dict):
        raise InvalidInputError(
            f"{name} must be a dict with keys 'node_features', 'edges' and 'edge_features'; "
            f"got {type(x).__name__}.")
    missing = [key for key in ("node_features", "edges", "edge_features") if key not in x]
    if missing:
        raise InvalidInputError(f"{name} is missing the key(s) {missing}.")
    V = check_finite_array(x["node_features"], f"{name}['node_features']", ndim=2)
    n = V.shape[0]
    if n == 0:
        raise InvalidInputError(f"{name}['node_features'] must have at least one row (node).")
    E = check_edges(x["edges"], n, f"{name}['edges']", connected=connected)
    Ef = check_finite_array(x["edge_features"], f"{name}['edge_features']")
    if Ef.ndim == 1 and Ef.size == 0:
        Ef = Ef.reshape(0, 0)
    if Ef.ndim != 2 or Ef.shape[0] != len(E):
        raise InvalidInputError(
            f"{name}['edge_features'] must have shape (n_edges, d_e) = ({len(E)}, d_e), one "
            f"row per row of {name}['edges']; got {Ef.shape}.")
    cliques, parent, order, width, lower = junction_tree(n, E)
    _check_width(width, lower, n_labels, max_treewidth, name)
    return GraphExample(V, Ef, E, cliques, parent, order, width, lower)


def _check_width(width, lower, k, max_treewidth, name):
    max_treewidth = check_scalar(max_treewidth, "max_treewidth", kind=numbers.Integral, low=0)
    if width > max_treewidth:
        kind = "the treewidth" if width == lower else f"an upper bound (lower bound {lower})"
        size = (f"k^(w+1) = {k}^{width + 1} = {k ** (width + 1)} entries"
                if k is not None else f"k^{width + 1} entries for k labels")
        raise InvalidInputError(
            f"The junction tree of {name} has width w = {width} ({kind}), above "
            f"max_treewidth={max_treewidth}: each of its largest cliques would need a table "
            f"of {size}. Raise max_treewidth if that fits, or use a graph of lower treewidth.")


def junction_tree(n, edges):
    """A junction tree of the graph ``(range(n), edges)``.

    The narrower of networkx's ``treewidth_min_fill_in`` and
    ``treewidth_min_degree`` tree decompositions, with every bag that is a subset
    of a neighbouring bag contracted into it.  A graph that is not connected gets one
    such tree per connected component, their bags joined into one tree by links with
    empty separators (the components are independent; the width is the largest of
    theirs).

    Returns
    -------
    cliques : list of sorted int arrays
    parent : int array (m,), -1 at the root (the clique holding node 0)
    order : int array (m,), BFS order from the root
    width : int, max clique size - 1 (an upper bound of the treewidth)
    lower : int, the minor-min-width lower bound of the treewidth (``width ==
        lower`` proves ``width`` is the treewidth)
    """
    import networkx as nx
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(np.asarray(edges).tolist())
    components = sorted((sorted(c) for c in nx.connected_components(G)), key=lambda c: c[0])
    T = nx.Graph()
    first = None
    for comp in components:
        Tc = _component_tree(G.subgraph(comp))
        T.add_nodes_from(Tc.nodes)
        T.add_edges_from(Tc.edges)
        bag = min(Tc.nodes, key=lambda c: sorted(c))
        if first is None:
            first = bag
        else:
            T.add_edge(first, bag)          # an empty separator: independent components
    bags = sorted(T.nodes, key=lambda c: (0 not in c, sorted(c)))
    index = {c: i for i, c in enumerate(bags)}
    parent = np.full(len(bags), -1, dtype=np.int64)
    order = [0]
    for u, v in nx.bfs_edges(T, bags[0]):
        parent[index[v]] = index[u]
        order.append(index[v])
    cliques = [np.array(sorted(c), dtype=np.int64) for c in bags]
    width = max(len(c) for c in cliques) - 1
    return cliques, parent, np.array(order, dtype=np.int64), width, minor_min_width(G)


def _component_tree(G):
    """A tree decomposition (bags: frozensets) of the connected graph ``G``."""
    import networkx as nx
    from networkx.algorithms.approximation import treewidth_min_degree, treewidth_min_fill_in
    if G.number_of_edges() == 0:
        T = nx.Graph()
        T.add_node(frozenset(G.nodes))
        return T
    T = min((h(G)[1] for h in (treewidth_min_fill_in, treewidth_min_degree)),
            key=lambda t: (max(len(c) for c in t.nodes), t.number_of_nodes()))
    return _contract_subset_bags(T)


def _contract_subset_bags(T):
    T = T.copy()
    changed = True
    while changed:
        changed = False
        for a, b in list(T.edges):
            small, big = (a, b) if len(a) <= len(b) else (b, a)
            if small <= big:
                for c in list(T.neighbors(small)):
                    if c != big:
                        T.add_edge(big, c)
                T.remove_node(small)
                changed = True
                break
    return T


def minor_min_width(G):
    """The minor-min-width lower bound of the treewidth (Gogate & Dechter 2004).

    Repeatedly take a vertex of minimum degree, record its degree, and contract
    it into its neighbour of minimum degree; the largest recorded degree is a
    lower bound of the treewidth.
    """
    adj = {v: set(G.neighbors(v)) for v in G.nodes}
    lower = 0
    while len(adj) > 1:
        v = min(adj, key=lambda u: len(adj[u]))
        lower = max(lower, len(adj[v]))
        if not adj[v]:
            del adj[v]
            continue
        u = min(adj[v], key=lambda t: len(adj[t]))
        for t in adj[v]:
            adj[t].discard(v)
            if t != u:
                adj[t].add(u)
                adj[u].add(t)
        del adj[v]
    return lower


def check_example(x, n_labels=None, max_treewidth=MAX_TREEWIDTH, name="x"):
    """A tree example (dict with ``parents`` / TreeExample) or a graph example, validated.

    Returns
    -------
    TreeExample or GraphExample
    """
    if isinstance(x, TreeExample) or (isinstance(x, dict) and "parents" in x
                                      and "edges" not in x):
        return check_tree_example(x, name)
    return check_graph_example(x, n_labels, max_treewidth, name)


def as_tree(gx):
    """The tree fast path of a graph example, or None.

    A graph example whose edges ``(u, v)`` form a tree directed away from one root
    (every node but the root has exactly one incoming edge) is the tree example
    with ``parents[v] = u`` and its edge features in the tree's edge order; its
    potentials and part vectors are the graph's (up to that edge order).
    """
    n = gx.n_nodes
    if gx.n_edges != n - 1:
        return None
    child = gx.edges[:, 1]
    if len(np.unique(child)) != n - 1:
        return None
    parents = np.full(n, -1, dtype=np.int64)
    parents[child] = gx.edges[:, 0]
    try:
        check_parents(parents)
    except InvalidInputError:
        return None
    perm = np.argsort(child, kind="stable")
    return check_tree_example({"node_features": gx.node_features,
                               "edge_features": gx.edge_features[perm], "parents": parents})


def tree_as_graph(x):
    """A tree example as a graph example dict (edges ``(parent, child)`` in the tree's order)."""
    ex = check_tree_example(x)
    return {"node_features": ex.node_features, "edge_features": ex.edge_features,
            "edges": np.column_stack([ex.edge_parent, ex.edge_child])}


def graph(node_features: ArrayLike, edges: ArrayLike, edge_features: ArrayLike
          ) -> Dict[str, Any]:
    """A graph example dict ``{node_features, edges, edge_features}``.

    Examples
    --------
    >>> from structlp.agm import graph
    >>> sorted(graph([[0.0], [1.0]], [[0, 1]], [[1.0]]))     # two nodes, one edge
    ['edge_features', 'edges', 'node_features']
    """
    return {"node_features": node_features, "edges": edges, "edge_features": edge_features}


def skip_chain(node_features: ArrayLike, edge_features: ArrayLike,
               skip_features: Optional[ArrayLike] = None, skip: int = 2) -> Dict[str, Any]:
    """A chain with extra skip edges ``(t, t + skip)``, as a graph example dict.

    Parameters
    ----------
    node_features : array (n, d_v)
    edge_features : array (n - 1, d_e), the chain edges ``(t, t + 1)``
    skip_features : array (n - skip, d_s) or None
        Features of the skip edges (default: a constant 1, d_s = 1).
    skip : int >= 2

    Returns
    -------
    dict
        Edges: the chain's, then the skip edges; edge features
        ``[edge_features, 0]`` and ``[0, skip_features]`` (the skip edges get their
        own parameters), shape (n - 1 + max(n - skip, 0), d_e + d_s).

    Examples
    --------
    >>> from structlp.agm import skip_chain
    >>> skip_chain([[0.0]] * 4, [[1.0]] * 3)["edges"].tolist()   # the chain, then (t, t + 2)
    [[0, 1], [1, 2], [2, 3], [0, 2], [1, 3]]
    """
    V = check_finite_array(node_features, "node_features", ndim=2)
    Ef = check_finite_array(edge_features, "edge_features")
    if Ef.ndim == 1:                          # one feature per chain edge
        Ef = Ef.reshape(len(Ef), 1 if len(Ef) else 0)
    if Ef.ndim != 2 or len(Ef) != max(len(V) - 1, 0):
        raise InvalidInputError(
            f"edge_features must have shape (n - 1, d_e) = ({max(len(V) - 1, 0)}, d_e), one "
            f"row per chain edge; got {Ef.shape}.")
    skip = check_scalar(skip, "skip", kind=numbers.Integral, low=2, owner="skip_chain")
    n = len(V)
    m = max(n - skip, 0)
    S = (np.ones((m, 1)) if skip_features is None
         else check_finite_array(skip_features, "skip_features"))
    if S.ndim != 2 or S.shape[0] != m:
        raise InvalidInputError(
            f"skip_features must have shape (n - skip, d_s) = ({m}, d_s); got {S.shape}.")
    t = np.arange(n)
    edges = np.vstack([np.column_stack([t[:-1], t[1:]]),
                       np.column_stack([t[:m], t[:m] + skip])]).astype(np.int64)
    F = np.zeros((len(edges), Ef.shape[1] + S.shape[1]))
    F[:n - 1, :Ef.shape[1]] = Ef
    F[n - 1:, Ef.shape[1]:] = S
    return graph(V, edges, F)


# ---------------------------------------------------------------- clique tables
class CliqueTables:
    """Clique tables of a graph example for ``k`` labels.

    Attributes
    ----------
    offsets : int array (m + 1,), clique ``c``'s entries are ``offsets[c]:offsets[c+1]``
    configs : list of int arrays (k^|C|, |C|), the labelling of each entry
    P : sparse (n k + E k^2, n_parts), pairwise parts = ``P @ clique parts``
    n_parts : int
    """

    def __init__(self, gx, k):
        n, m = gx.n_nodes, len(gx.cliques)
        sizes = np.array([len(c) for c in gx.cliques])
        self.k = k
        self.offsets = np.concatenate([[0], np.cumsum(k ** sizes)]).astype(np.int64)
        self.n_parts = int(self.offsets[-1])
        self.configs = [np.indices((k,) * s).reshape(s, -1).T for s in sizes]
        members = [set(c.tolist()) for c in gx.cliques]
        by_size = np.argsort(sizes, kind="stable")
        self.node_clique = np.array(
            [next(c for c in by_size if i in members[c]) for i in range(n)], dtype=np.int64)
        self.edge_clique = np.array(
            [next(c for c in by_size if u in members[c] and v in members[c])
             for u, v in gx.edges.tolist()], dtype=np.int64)
        rows, cols = [], []
        for i, c in enumerate(self.node_clique):
            pos = int(np.searchsorted(gx.cliques[c], i))
            rows.append(i * k + self.configs[c][:, pos])
            cols.append(np.arange(self.offsets[c], self.offsets[c + 1]))
        for e, ((u, v), c) in enumerate(zip(gx.edges.tolist(), self.edge_clique)):
            pu, pv = np.searchsorted(gx.cliques[c], [u, v])
            cf = self.configs[c]
            rows.append(n * k + e * k * k + cf[:, pu] * k + cf[:, pv])
            cols.append(np.arange(self.offsets[c], self.offsets[c + 1]))
        n_pair = n * k + gx.n_edges * k * k
        r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        cc = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        self.P = sp.csr_array((np.ones(len(r)), (r, cc)), shape=(n_pair, self.n_parts))
        self.PT = sp.csr_array(self.P.T)
        # separator bookkeeping (positions of the separator in the clique and its parent)
        self.sep_in_self, self.sep_in_parent, self.sep = [], [], []
        for c in range(m):
            p = gx.clique_parent[c]
            if p < 0:
                s = np.zeros(0, dtype=np.int64)
                self.sep_in_self.append(s); self.sep_in_parent.append(s); self.sep.append(s)
                continue
            s = np.intersect1d(gx.cliques[c], gx.cliques[p])
            self.sep.append(s)
            self.sep_in_self.append(np.searchsorted(gx.cliques[c], s))
            self.sep_in_parent.append(np.searchsorted(gx.cliques[p], s))
        # per clique: the axes summed/maximized out towards the parent (and from the
        # parent), and the broadcast shapes of a separator table in the clique / parent
        size = [len(c) for c in gx.cliques]
        self.out_self = [tuple(sorted(set(range(size[c])) - set(self.sep_in_self[c].tolist())))
                         for c in range(m)]
        self.out_parent = [tuple(sorted(set(range(size[p])) - set(self.sep_in_parent[c].tolist())))
                           if p >= 0 else () for c, p in enumerate(gx.clique_parent)]
        self.shape_self = [_sep_shape(self.sep_in_self[c], size[c], k) for c in range(m)]
        self.shape_parent = [_sep_shape(self.sep_in_parent[c], size[p], k) if p >= 0 else ()
                             for c, p in enumerate(gx.clique_parent)]
        self.sep_set = [set(x.tolist()) for x in self.sep_in_self]

    def split(self, mu):
        """Clique tables of a clique-part vector: list of arrays of shape (k,)*|C|."""
        k = self.k
        return [mu[a:b].reshape((k,) * len(cf[0])) for a, b, cf in
                zip(self.offsets[:-1], self.offsets[1:], self.configs)]


def clique_scores(gx, b, B):
    """Clique-part scores ``P^T s`` of node potentials b (n, k) and edge potentials B (E, k, k)."""
    T = gx.tables(b.shape[1])
    return T.PT @ np.concatenate([np.ravel(b), np.ravel(B)])


def encode_cliques(gx, y, k):
    """Clique-part vector of a labelling ``y`` (one 1 per clique)."""
    T = gx.tables(k)
    mu = np.zeros(T.n_parts)
    for c, C in enumerate(gx.cliques):
        mu[T.offsets[c] + np.ravel_multi_index(tuple(y[C]), (k,) * len(C))] = 1.0
    return mu


def encode_pairwise(ex, y, k):
    """Pairwise part vector (n k + E k^2,) of a labelling ``y`` (graph or tree example)."""
    n, m = ex.n_nodes, len(ex.edge_child)
    mu_v = np.zeros((n, k))
    mu_v[np.arange(n), y] = 1.0
    mu_e = np.zeros((m, k, k))
    mu_e[np.arange(m), y[ex.edge_parent], y[ex.edge_child]] = 1.0
    return np.concatenate([mu_v.ravel(), mu_e.ravel()])


def pairwise_marginals(gx, mu, k):
    """Node (n, k) and edge (E, k, k) marginals of a clique-part vector ``mu``."""
    s = gx.tables(k).P @ mu
    n = gx.n_nodes
    return s[:n * k].reshape(n, k), s[n * k:].reshape(-1, k, k)


def clique_polytope_rows(gx, k):
    """Equality rows ``E mu = e`` of the clique-marginal polytope (normalization, separators)."""
    T = gx.tables(k)
    m = len(gx.cliques)
    rows = [np.repeat(np.arange(m), np.diff(T.offsets))]
    cols = [np.arange(T.n_parts)]
    vals = [np.ones(T.n_parts)]
    r0 = m
    for c in range(m):
        p = gx.clique_parent[c]
        if p < 0:
            continue
        ns = len(T.sep[c])
        shape = (k,) * ns
        for cl, pos, sign in ((c, T.sep_in_self[c], 1.0), (p, T.sep_in_parent[c], -1.0)):
            idx = (np.ravel_multi_index(tuple(T.configs[cl][:, pos].T), shape)
                   if ns else np.zeros(len(T.configs[cl]), dtype=np.int64))
            rows.append(r0 + idx)
            cols.append(np.arange(T.offsets[cl], T.offsets[cl + 1]))
            vals.append(np.full(len(idx), sign))
        r0 += k ** ns
    E = sp.csr_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(r0, T.n_parts))
    e = np.zeros(r0)
    e[:m] = 1.0
    return E, e


def clique_polytope(gx, k):
    """The clique-marginal polytope of ``gx`` (the graph's marginal polytope)."""
    E, e = clique_polytope_rows(gx, k)
    return Polytope(E=E, e=e, lb=0.0, ub=1.0)


# ---------------------------------------------------------------- message passing
def _sep_shape(sep_pos, size, k):
    """Broadcast shape of a separator table inside a clique of ``size`` nodes."""
    shape = [1] * size
    for p in sep_pos:
        shape[p] = k
    return tuple(shape)


def _collect(gx, tables, T, reduce):
    """Upward pass: each clique's table plus its children's messages (reduce = max or lse)."""
    belief = [t.copy() for t in tables]
    msgs = [None] * len(tables)
    for c in gx.clique_order[::-1]:
        p = gx.clique_parent[c]
        if p < 0:
            continue
        msgs[c] = reduce(belief[c], T.out_self[c]).reshape(T.shape_parent[c])
        belief[p] += msgs[c]
    return belief, msgs


def jt_max_sum(gx: GraphExample, b: ArrayLike, B: ArrayLike) -> Tuple[np.ndarray, float]:
    """Highest-scoring labelling of a graph by max-sum on its junction tree.

    Solves ``max_y sum_i b[i, y_i] + sum_e B[e, y_u(e), y_v(e)]`` exactly, in
    O(m k^{w+1}).

    Parameters
    ----------
    gx : GraphExample; b : ndarray (n, k); B : ndarray (E, k, k)

    Returns
    -------
    y : ndarray (n,) of ints; score : float

    Examples
    --------
    >>> import numpy as np
    >>> from structlp.agm import check_graph_example, jt_max_sum, skip_chain
    >>> gx = check_graph_example(skip_chain([[0.0]] * 4, [[1.0]] * 3))     # 4 nodes, 5 edges
    >>> b, B = np.array([[1.0, 0.0]] + [[0.0, 0.4]] * 3), np.tile(np.eye(2), (5, 1, 1))
    >>> y, score = jt_max_sum(gx, b, B)
    >>> y, round(score, 2)     # edges score 1 where their ends agree: all ones (1.2 + 5) win
    (array([1, 1, 1, 1]), 6.2)
    """
    if not isinstance(gx, GraphExample):
        raise InvalidInputError(
            "gx of jt_max_sum must be a GraphExample (from check_graph_example); got "
            f"{type(gx).__name__}.")
    b, B = check_scores(b, B, gx.n_nodes, gx.n_edges, "jt_max_sum")
    return jt_max_sum_cliques(gx, clique_scores(gx, b, B), np.shape(b)[1])


def jt_max_sum_cliques(gx, scores, k):
    """:func:`jt_max_sum` for clique-part scores ``scores`` (n_parts,) directly."""
    T = gx.tables(k)
    belief, _ = _collect(gx, T.split(np.asarray(scores, dtype=float)), T, max_over)
    y = np.full(gx.n_nodes, -1, dtype=np.int64)
    root = gx.clique_order[0]
    y[gx.cliques[root]] = np.unravel_index(int(np.argmax(belief[root])), belief[root].shape)
    best = float(belief[root].max())
    for c in gx.clique_order[1:]:
        C = gx.cliques[c]
        sep = T.sep_set[c]
        sub = belief[c][tuple(int(y[v]) if j in sep else slice(None) for j, v in enumerate(C))]
        free = T.out_self[c]
        if free:
            y[C[list(free)]] = np.unravel_index(int(np.argmax(sub)), sub.shape)
    return y, best


def jt_marginals(gx, b, B):
    """Sum-product on the junction tree (log space).

    Computes ``log Z = log sum_y exp(sum_i b[i, y_i] + sum_e B[e, y_u, y_v])`` and
    the clique marginals of the Gibbs distribution.

    Returns
    -------
    log_Z : float
    mu : ndarray (n_parts,), the clique marginals (clique parts)
    node : ndarray (n, k); edge : ndarray (E, k, k)
        The node and edge marginals ``P mu``.
    """
    k = b.shape[1]
    log_Z, mu = jt_marginals_cliques(gx, clique_scores(gx, b, B), k)
    node, edge = pairwise_marginals(gx, mu, k)
    return log_Z, mu, node, edge


def jt_marginals_cliques(gx, scores, k):
    """Sum-product on the junction tree for clique-part scores ``scores`` (n_parts,).

    Returns
    -------
    log_Z : float
        ``log sum_y exp(scores . mu(y))``.
    mu : ndarray (n_parts,)
        The clique marginals, the gradient of ``log_Z``.
    """
    T = gx.tables(k)
    belief, msgs = _collect(gx, T.split(np.asarray(scores, dtype=float)), T, logsumexp)
    root = gx.clique_order[0]
    log_Z = float(logsumexp(belief[root], tuple(range(belief[root].ndim))))
    full = list(belief)
    for c in gx.clique_order[1:]:
        outside = full[gx.clique_parent[c]] - msgs[c]
        full[c] = belief[c] + logsumexp(outside, T.out_parent[c]).reshape(T.shape_self[c])
    return log_Z, np.concatenate([np.exp(f - log_Z).ravel() for f in full])


def graph_score(ex, b, B, y):
    """Score ``sum_i b[i, y_i] + sum_e B[e, y_u, y_v]`` of a labelling (graph or tree)."""
    y = np.asarray(y)
    m = len(ex.edge_child)
    return float(b[np.arange(len(y)), y].sum()
                 + B[np.arange(m), y[ex.edge_parent], y[ex.edge_child]].sum())
