"""Features of pruned CoNLL-2005 trees (after Cohn & Blunsom 2005) and the cost-sensitive loss.

For each proposition the parse tree pruned after Xue & Palmer
(:func:`structlp.datasets.conll05.xue_palmer_prune`) becomes a tree example
``{"node_features": (n, d_v), "edge_features": (n - 1, d_e), "parents": (n,)}``
(:mod:`structlp.graphical.trees`) and its labelling (:func:`label_pruned`) over the nine
classes :data:`~structlp.datasets.conll05.LABELS`.

Node features (dense; the categorical ones one-hot over the values seen at least
``min_count`` times in the sentences given to :meth:`SRLFeatures.fit`, at most
``max_values`` each, plus one "other" column): a bias; the phrase type; the head
word (lower-cased) and its POS; the path from the constituent to the verb
(labels joined by ``^`` going up and ``v`` going down); the position (before the
verb, after it, or containing it); the voice (passive: the verb is a VBN preceded
by a form of *be* or *get* within three words, adverbs skipped) alone and with the
position; the verb's lemma; the constituent's length (``log(1 + words)`` and
four buckets); the sub-categorisation (the rule expanding the verb's parent, e.g.
``VP>VBD NP PP``); and the node's role in the pruning (the verb, on its path to
the root, a sibling of a path node, a child of a PP sibling).

Edge features (parent -> child): a bias, the child's role in the pruning (4), the
parent's phrase type among S, VP, PP, NP, SBAR or other (6), and the child's
position before or after the verb (2).

The vocabularies come from the input side only (words, POS, trees, the target
verbs), never from the labels, so they may be fitted on any inputs.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..exceptions import InvalidParameterError
from .conll05 import LABELS, ParseTree, Sentence, label_pruned, xue_palmer_prune

#: Categorical node features and the most values kept of each (one-hot).
CATEGORICAL = {"phrase": 30, "head_word": 60, "head_pos": 25, "path": 40, "lemma": 20,
               "subcat": 20}
_BE = frozenset("be is are was were been being am 's 're get gets got gotten getting".split())
_ADVERBS = frozenset("RB RBR RBS".split())
_PARENT_TYPES = ("S", "VP", "PP", "NP", "SBAR")
#: Node kinds in the pruned tree.
KINDS = ("verb", "path", "sibling", "pp_child")


def is_passive(sent: Sentence, verb: int) -> bool:
    """The verb is a past participle (VBN) after a form of *be* / *get* (adverbs skipped)."""
    if sent.pos[verb] != "VBN":
        return False
    w, seen = verb - 1, 0
    while w >= 0 and seen < 3:
        if sent.pos[w] in _ADVERBS:
            w -= 1
            continue
        if sent.words[w].lower() in _BE:
            return True
        w, seen = w - 1, seen + 1
    return False


def tree_path(tree: ParseTree, node: int, target: int) -> str:
    """Labels from ``node`` up to the lowest common ancestor and down to ``target``."""
    up = tree.path_to_root(node)
    down = tree.path_to_root(target)
    common = next(j for j in up if j in set(down))
    a = up[:up.index(common) + 1]
    b = down[:down.index(common)][::-1]
    return "^".join(tree.labels[j] for j in a) + "".join("v" + tree.labels[j] for j in b)


def subcat(tree: ParseTree, verb: int) -> str:
    par = tree.parents[tree.leaf_of[verb]]
    if par < 0:
        return "-"
    return tree.labels[par] + ">" + " ".join(tree.labels[c] for c in tree.children[par])


def node_kinds(tree: ParseTree, nodes: Sequence[int], verb: int) -> List[str]:
    path = set(tree.path_to_root(tree.leaf_of[verb]))
    out = []
    for j in nodes:
        if j == tree.leaf_of[verb]:
            out.append("verb")
        elif j in path:
            out.append("path")
        elif tree.parents[j] in path:
            out.append("sibling")
        else:
            out.append("pp_child")
    return out


def _raw_values(sent: Sentence, prop: Dict[str, Any], nodes: Sequence[int]
                ) -> Dict[str, List[str]]:
    tree, v = sent.tree, prop["verb"]
    vleaf = tree.leaf_of[v]
    n = len(nodes)
    return {"phrase": [tree.labels[j] for j in nodes],
            "head_word": [sent.words[tree.heads[j]].lower() for j in nodes],
            "head_pos": [sent.pos[tree.heads[j]] for j in nodes],
            "path": [tree_path(tree, j, vleaf) for j in nodes],
            "lemma": [prop["lemma"].lower()] * n,
            "subcat": [subcat(tree, v)] * n}


class SRLFeatures:
    """Vocabularies of the categorical features and the map proposition -> tree example.

    Parameters
    ----------
    min_count : int >= 1, default 3
        A value of a categorical feature gets its own column when it occurs at
        least this often (over the nodes of the fitted sentences' pruned trees).
    max_values : dict or None
        Most columns per categorical feature (default :data:`CATEGORICAL`).

    Attributes
    ----------
    vocab_ : dict
        Per categorical feature the list of values with a column (the last
        column of each block is "other").
    n_node_features_, n_edge_features_ : int

    Examples
    --------
    >>> from structlp.datasets import SRLFeatures, load_conll05
    >>> sentences = load_conll05(sets=["test.brown"])["test.brown"]   # doctest: +SKIP
    >>> feats = SRLFeatures(min_count=3).fit(sentences[:50])          # doctest: +SKIP
    >>> sent = next(s for s in sentences if s.props)                 # doctest: +SKIP
    >>> x, y = feats.transform_one(sent, sent.props[0])               # doctest: +SKIP
    >>> x["node_features"].shape[1] == feats.n_node_features_         # doctest: +SKIP
    True
    """

    def __init__(self, min_count: int = 3, max_values: Optional[Dict[str, int]] = None) -> None:
        self.min_count = min_count
        self.max_values = max_values

    def fit(self, sentences: Sequence[Sentence]) -> "SRLFeatures":
        """Collect the vocabularies from the pruned trees of every proposition (inputs only)."""
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, int) \
                or self.min_count < 1:
            raise InvalidParameterError(
                f"min_count must be an integer >= 1; got {self.min_count!r}.")
        caps = dict(CATEGORICAL if self.max_values is None else self.max_values)
        if set(caps) != set(CATEGORICAL):
            raise InvalidParameterError(
                f"max_values must give a count for each of {sorted(CATEGORICAL)}; got "
                f"{self.max_values!r}.")
        counts: Dict[str, Counter] = {f: Counter() for f in CATEGORICAL}
        for sent in sentences:
            for prop in sent.props:
                nodes, _ = xue_palmer_prune(sent.tree, prop["verb"])
                for f, vals in _raw_values(sent, prop, nodes).items():
                    counts[f].update(vals)
        self.vocab_ = {f: [v for v, c in counts[f].most_common(caps[f]) if c >= self.min_count]
                       for f in CATEGORICAL}
        self._index = {f: {v: i for i, v in enumerate(vals)} for f, vals in self.vocab_.items()}
        self.n_node_features_ = (1 + sum(len(v) + 1 for v in self.vocab_.values()) + 3 + 3
                                 + 5 + len(KINDS))
        self.n_edge_features_ = 1 + len(KINDS) + len(_PARENT_TYPES) + 1 + 2
        return self

    def transform_one(self, sent: Sentence, prop: Dict[str, Any]
                      ) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        """The tree example and labelling of one proposition of ``sent``."""
        tree, v = sent.tree, prop["verb"]
        nodes, parents = xue_palmer_prune(tree, v)
        y = label_pruned(tree, nodes, parents, v, prop["args"])
        n = len(nodes)
        V = np.zeros((n, self.n_node_features_))
        V[:, 0] = 1.0
        col = 1
        for f, vals in _raw_values(sent, prop, nodes).items():
            idx = self._index[f]
            other = len(idx)
            V[np.arange(n), [col + idx.get(x, other) for x in vals]] = 1.0
            col += other + 1
        passive = is_passive(sent, v)
        kinds = node_kinds(tree, nodes, v)
        for i, j in enumerate(nodes):
            s, e = tree.spans[j]
            pos = 2 if s <= v < e else (0 if e <= v else 1)      # before, after, contains
            V[i, col + pos] = 1.0
            if passive:
                V[i, col + 3] = 1.0
                if pos < 2:
                    V[i, col + 4 + pos] = 1.0
            length = e - s
            V[i, col + 6] = math.log1p(length)
            V[i, col + 7 + min(3, int(math.log2(length)))] = 1.0   # 1, 2-3, 4-7, 8+
            V[i, col + 11 + KINDS.index(kinds[i])] = 1.0
        E = np.zeros((n - 1, self.n_edge_features_))
        e_ = 0
        for i, p in enumerate(parents):
            if p < 0:
                continue
            E[e_, 0] = 1.0
            E[e_, 1 + KINDS.index(kinds[i])] = 1.0
            plab = tree.labels[nodes[p]]
            t = _PARENT_TYPES.index(plab) if plab in _PARENT_TYPES else len(_PARENT_TYPES)
            E[e_, 1 + len(KINDS) + t] = 1.0
            s, e = tree.spans[nodes[i]]
            if e <= v:
                E[e_, -2] = 1.0
            elif s > v:
                E[e_, -1] = 1.0
            e_ += 1
        # the tree examples' edges follow the child order: edge of node i = i-th non-root
        return {"node_features": V, "edge_features": E, "parents": np.asarray(parents)}, y

    def transform(self, sentences: Sequence[Sentence]
                  ) -> Tuple[List[Dict[str, np.ndarray]], List[np.ndarray], np.ndarray]:
        """Tree examples, labellings and the sentence index of every proposition."""
        X, Y, sid = [], [], []
        for s, sent in enumerate(sentences):
            for prop in sent.props:
                x, y = self.transform_one(sent, prop)
                X.append(x)
                Y.append(y)
                sid.append(s)
        return X, Y, np.asarray(sid, dtype=np.int64)


def ordinal_loss_matrix(seed: int = 0, n_labels: int = len(LABELS)
                        ) -> Tuple[np.ndarray, List[int]]:
    """The cost-sensitive loss of Fathony et al. (2018, §4.2): ordinal over a random order.

    The labels are put in a random order (``numpy.random.default_rng(seed)
    .permutation``); the loss of predicting ``a`` when the truth is ``b`` is
    ``|rank(a) - rank(b)| / (n_labels - 1)``, in [0, 1] (0 on the diagonal).

    Returns
    -------
    L : ndarray (n_labels, n_labels)
    order : list of int
        The labels from first to last rank.

    Examples
    --------
    >>> from structlp.datasets import ordinal_loss_matrix
    >>> L, order = ordinal_loss_matrix(seed=0, n_labels=4)
    >>> order
    [2, 0, 1, 3]
    >>> (L * 3).round().astype(int)         # |rank(a) - rank(b)|
    array([[0, 1, 1, 2],
           [1, 0, 2, 1],
           [1, 2, 0, 3],
           [2, 1, 3, 0]])
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameterError(f"seed must be a non-negative integer; got {seed!r}.")
    order = [int(a) for a in np.random.default_rng(int(seed)).permutation(n_labels)]
    rank = np.empty(n_labels)
    rank[order] = np.arange(n_labels)
    return np.abs(rank[:, None] - rank[None, :]) / (n_labels - 1), order
