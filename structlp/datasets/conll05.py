"""CoNLL-2005 semantic role labelling data (Carreras & Marquez 2005), read from a path.

The release's test sets (``test.wsj``: WSJ section 23, ``test.brown``: Brown
corpus) are for research use only and are never copied into this repository:
:func:`load_conll05` reads them from ``path``, else the environment variable
``STRUCTLP_CONLL05_PATH``, else ``../shared/data/conll05_srl`` relative to the
current working directory.  Each set is a folder ``test.SET`` with one gzipped
column file per annotation layer (``words``, ``props``, ``synt.cha``, ...), one
line per token and a blank line after each sentence (the release README).

This module holds the reader of the column format, the parse trees of the
Charniak column (Start-End format, e.g. ``(S1(S(NP*`` ... ``*))``), the
Xue & Palmer (2004) pruning of a tree for one target verb and the role
labelling of the pruned tree as in Fathony et al. (2018, Section 4.2).  The
features and the loss matrix are in :mod:`structlp.datasets.conll05_features`.

Tree nodes are the constituents of the parse, preterminals included (one per
word, labelled with its part of speech); a span is ``(start, end)`` with ``end``
exclusive.
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from ..exceptions import DataNotFoundError, InvalidInputError  # noqa: F401
from .files import open_regular, read_lines

#: Environment variable naming the data directory.
ENV_VAR = "STRUCTLP_CONLL05_PATH"
#: Default data directory, relative to the current working directory (a checkout's root).
DEFAULT_PATH = Path("..") / "shared" / "data" / "conll05_srl"
#: The test sets of the release.
SETS = ("test.wsj", "test.brown")
#: The nine classes of Fathony et al. (2018, Section 4.2): outside, the verb, the three
#: most common numbered arguments and their references, and every other role merged.
LABELS = ("O", "V", "A0", "A1", "A2", "R-A0", "R-A1", "R-A2", "R")
#: Layers read by :func:`load_conll05`.
LAYERS = ("words", "props", "synt.cha")


# ------------------------------------------------------------------ trees
@dataclass(eq=False)
class ParseTree:
    """A constituency tree over the words of a sentence.

    Node ``j`` has ``labels[j]`` (phrase type, or the part of speech for a
    preterminal), the word span ``spans[j] = (start, end)`` (end exclusive),
    ``parents[j]`` (-1 at the root) and ``children[j]`` (left to right).
    ``leaf_of[w]`` is the preterminal of word ``w``; ``heads[j]`` the word index of
    the node's lexical head (Collins' head rules).
    """

    labels: List[str]
    spans: List[Tuple[int, int]]
    parents: List[int]
    children: List[List[int]] = field(default_factory=list)
    leaf_of: List[int] = field(default_factory=list)
    heads: List[int] = field(default_factory=list)

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    def is_leaf(self, j: int) -> bool:
        return not self.children[j]

    def path_to_root(self, j: int) -> List[int]:
        out = [j]
        while self.parents[out[-1]] >= 0:
            out.append(self.parents[out[-1]])
        return out


_OPEN = re.compile(r"\(([^()*\s]+)")


def parse_start_end(pos: Sequence[str], column: Sequence[str], name: str = "tree") -> ParseTree:
    """Build a :class:`ParseTree` from a Start-End column and the words' POS tags.

    Each word's tag is ``STARTS*ENDS``: ``(LABEL`` opens a constituent at the word,
    ``*`` is the word (its preterminal, labelled with its POS), each ``)`` closes
    the innermost open constituent.  Brackets must balance, with one root.
    """
    if len(pos) != len(column):
        raise InvalidInputError(f"{name}: {len(pos)} POS tags for {len(column)} tree tags.")
    labels: List[str] = []
    spans: List[List[int]] = []
    parents: List[int] = []
    stack: List[int] = []
    leaf_of = []

    def new(label, start, parent):
        labels.append(label)
        spans.append([start, start + 1])
        parents.append(parent)
        return len(labels) - 1

    for w, (p, tag) in enumerate(zip(pos, column)):
        star = tag.find("*")
        if star < 0 or tag.count("*") != 1:
            raise InvalidInputError(f"{name}: word {w} has tree tag {tag!r}, not STARTS*ENDS.")
        starts, ends = tag[:star], tag[star + 1:]
        opened = _OPEN.findall(starts)
        if "".join(f"({x}" for x in opened) != starts or set(ends) - {")"}:
            raise InvalidInputError(f"{name}: word {w} has tree tag {tag!r}, not STARTS*ENDS.")
        for lab in opened:
            if not stack and labels:
                raise InvalidInputError(f"{name}: a second root opens at word {w}.")
            stack.append(new(lab, w, stack[-1] if stack else -1))
        if not stack:
            raise InvalidInputError(f"{name}: word {w} lies outside every constituent.")
        leaf_of.append(new(p, w, stack[-1]))
        for _ in ends:
            if not stack:
                raise InvalidInputError(f"{name}: an unmatched ')' at word {w}.")
            spans[stack.pop()][1] = w + 1
    if stack:
        raise InvalidInputError(f"{name}: {len(stack)} constituent(s) left open at the end.")
    children: List[List[int]] = [[] for _ in labels]
    for j, par in enumerate(parents):
        if par >= 0:
            children[par].append(j)
    tree = ParseTree(labels, [(int(s[0]), int(s[1])) for s in spans], parents, children, leaf_of)
    tree.heads = head_words(tree)
    return tree


# Collins (1999) head rules as in the common "ModCollins" table: direction and priority
# list per phrase type ("left": scan the children from the left for the first label of the
# list, then the next label...; "right": from the right).  AUX (the Charniak parser's tag
# for auxiliaries) counts as a verb.
_HEAD_RULES = {
    "ADJP": ("left", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
    "ADVP": ("right", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
    "CONJP": ("right", "CC RB IN"), "FRAG": ("right", ""), "INTJ": ("left", ""),
    "LST": ("right", "LS :"),
    "NAC": ("left", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
    "PP": ("right", "IN TO VBG VBN RP FW"), "PRN": ("left", ""), "PRT": ("right", "RP"),
    "QP": ("left", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
    "RRC": ("right", "VP NP ADVP ADJP PP"), "S": ("left", "TO IN VP S SBAR ADJP UCP NP"),
    "SBAR": ("left", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
    "SBARQ": ("left", "SQ S SINV SBARQ FRAG"),
    "SINV": ("left", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
    "SQ": ("left", "VBZ VBD VBP VB MD AUX VP SQ"), "UCP": ("right", ""),
    "VP": ("left", "TO VBD VBN MD VBZ VB VBG VBP AUX AUXG VP ADJP NN NNS NP"),
    "WHADJP": ("left", "CC WRB JJ ADJP"), "WHADVP": ("right", "CC WRB"),
    "WHNP": ("left", "WDT WP WP$ WHADJP WHPP WHNP"), "WHPP": ("right", "IN TO FW"),
    "X": ("right", ""), "S1": ("left", ""),
}


def _head_child(labels: List[str], kids: List[int], label: str) -> int:
    labs = [labels[c] for c in kids]
    if label in ("NP", "NX", "NML"):           # Collins' special NP rule
        if labs[-1] == "POS":
            return kids[-1]
        for group, direction in (("NN NNP NNPS NNS NX POS JJR", "right"), ("NP", "left"),
                                 ("$ ADJP PRN", "right"), ("CD", "right"),
                                 ("JJ JJS RB QP", "right")):
            order = list(range(len(kids))) if direction == "left" \
                else list(range(len(kids) - 1, -1, -1))
            wanted = set(group.split())
            for i in order:
                if labs[i] in wanted:
                    return kids[i]
        return kids[-1]
    direction, prio = _HEAD_RULES.get(label, ("left", ""))
    order = list(range(len(kids))) if direction == "left" else list(range(len(kids) - 1, -1, -1))
    for want in prio.split():
        for i in order:
            if labs[i] == want:
                return kids[i]
    return kids[order[0]]


def head_words(tree: ParseTree) -> List[int]:
    """Word index of each node's lexical head (Collins' head rules, bottom up)."""
    heads = [tree.spans[j][0] if not tree.children[j] else -1 for j in range(tree.n_nodes)]
    # children before parents: process by decreasing depth
    depth = [len(tree.path_to_root(j)) for j in range(tree.n_nodes)]
    for j in sorted(range(tree.n_nodes), key=lambda j: -depth[j]):
        kids = tree.children[j]
        if kids:
            heads[j] = heads[_head_child(tree.labels, kids, tree.labels[j])]
    return heads


# ------------------------------------------------------------------ propositions
def parse_props(column: Sequence[str], name: str = "props") -> List[Tuple[str, int, int]]:
    """Arguments ``(label, start, end)`` (end exclusive) of one proposition column."""
    args, open_ = [], []
    for w, tag in enumerate(column):
        star = tag.find("*")
        if star < 0:
            raise InvalidInputError(f"{name}: word {w} has tag {tag!r}, not STARTS*ENDS.")
        for lab in _OPEN.findall(tag[:star]):
            open_.append((lab, w))
        for _ in tag[star + 1:]:
            if not open_:
                raise InvalidInputError(f"{name}: an unmatched ')' at word {w}.")
            lab, s = open_.pop()
            args.append((lab, s, w + 1))
    if open_:
        raise InvalidInputError(f"{name}: argument(s) {[a for a, _ in open_]} left open.")
    return sorted(args, key=lambda a: a[1])


def role_class(role: str) -> str:
    """The paper's nine-class label of a CoNLL role (``A0``.. kept, the others ``R``)."""
    return role if role in LABELS[1:8] else "R"


# ------------------------------------------------------------------ reading
def conll05_path(path: Union[None, str, os.PathLike] = None, sets: Sequence[str] = SETS) -> Path:
    """The data directory (``path``, ``$STRUCTLP_CONLL05_PATH`` or the default); checked.

    Raises
    ------
    DataNotFoundError
        Naming the directory looked at, the missing files and the variable.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InvalidInputError(
            f"path must be a path (str or os.PathLike); got {type(path).__name__}.")
    source = ("path" if path is not None
              else f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the default path")
    root = Path(path if path is not None else os.environ.get(ENV_VAR) or DEFAULT_PATH)
    missing = [str(_layer_file(root, s, lay).relative_to(root)) for s in sets for lay in LAYERS
               if not _layer_file(root, s, lay).exists()]
    if missing:
        what = "does not exist" if not root.is_dir() else f"lacks {missing[:3]}"
        raise DataNotFoundError(
            f"CoNLL-2005 data not found: {root} ({source}) {what}. Give path=... (problem "
            f"option -o data_path=...) or set the environment variable {ENV_VAR} to the "
            "folder holding test.wsj/ and test.brown/ of the release; the data (research "
            "use only) are not shipped with structlp.")
    return root


def _layer_file(root: Path, set_name: str, layer: str) -> Path:
    return root / set_name / layer / f"{set_name}.{layer}.gz"


def read_column_file(file: Union[str, os.PathLike]) -> List[List[List[str]]]:
    """Sentences of a (gzipped) column file: per sentence, per token, its columns.

    Raises
    ------
    InvalidInputError
        When the file is not a regular file (a FIFO, a device, a directory) or a ``.gz``
        file is not a complete gzip stream (naming the file and the last line read).
    """
    return _read_columns(file)[0]


def _read_columns(file: Union[str, os.PathLike]) -> Tuple[List[List[List[str]]], List[int]]:
    """:func:`read_column_file`, with the line number of each sentence's first token."""
    import zlib
    sentences: List[List[List[str]]] = []
    firsts: List[int] = []
    current: List[List[str]] = []
    number = 0
    with open_regular(file, "CoNLL-2005 column file") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if str(file).endswith(".gz") else raw
        try:
            for number, line in read_lines(file, encoding="latin-1", fh=stream):
                cols = line.split()
                if cols:
                    if not current:
                        firsts.append(number)
                    current.append(cols)
                elif current:
                    sentences.append(current)
                    current = []
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidInputError(f"{file}: not a readable gzip file after line {number} "
                                    f"({exc or type(exc).__name__}).") from None
    if current:
        sentences.append(current)
    return sentences, firsts


@dataclass(eq=False)
class Sentence:
    """One sentence: words, POS tags (Charniak's), the parse tree and the propositions.

    ``props`` lists per target verb a dict ``{"verb": word index, "lemma": str,
    "args": [(role, start, end), ...]}`` (the gold arguments, V included).
    """

    words: List[str]
    pos: List[str]
    tree: ParseTree
    props: List[Dict[str, Any]]


def read_set(root: Union[str, os.PathLike], set_name: str) -> List[Sentence]:
    """Read one test set (``"test.wsj"`` or ``"test.brown"``) of the release.

    Raises
    ------
    InvalidInputError
        A layer file that is not a regular file or not a readable gzip stream, layers that
        disagree, or a malformed line (the message names the file and the line).
    """
    root = Path(root)
    files = {lay: _layer_file(root, set_name, lay) for lay in LAYERS}
    (words, w_at), (props, p_at), (synt, s_at) = (_read_columns(files[lay]) for lay in LAYERS)
    if not len(words) == len(props) == len(synt):
        raise InvalidInputError(
            f"{set_name}: the layers have {len(words)}, {len(props)} and {len(synt)} sentences "
            "(words, props, synt.cha).")
    out = []
    for s, (W, P, T) in enumerate(zip(words, props, synt)):
        where = (f"{set_name} sentence {s} ({files['synt.cha']}, line {s_at[s]}; "
                 f"{files['props']}, line {p_at[s]})")
        if not len(W) == len(P) == len(T):
            raise InvalidInputError(
                f"{set_name} sentence {s}: the layers have {len(W)}, {len(P)} and {len(T)} "
                f"tokens ({files['words']}, line {w_at[s]}; {files['props']}, line "
                f"{p_at[s]}; {files['synt.cha']}, line {s_at[s]}).")
        for t, row in enumerate(T):
            if len(row) != 2:
                raise InvalidInputError(
                    f"{files['synt.cha']}, line {s_at[s] + t}: {len(row)} columns; expected "
                    "2 (the POS tag and the tree tag).")
        pos = [row[0] for row in T]
        tree = parse_start_end(pos, [row[1] for row in T], where)
        verbs = [w for w, row in enumerate(P) if row[0] != "-"]
        n_cols = len(P[0]) - 1
        for t, row in enumerate(P):
            if len(row) != n_cols + 1:
                raise InvalidInputError(
                    f"{files['props']}, line {p_at[s] + t}: {len(row)} columns; the "
                    f"sentence's first line has {n_cols + 1}.")
        if len(verbs) != n_cols:
            raise InvalidInputError(
                f"{where}: {len(verbs)} target verbs for {n_cols} proposition columns.")
        plist = []
        for c, v in enumerate(verbs):
            args = parse_props([row[c + 1] for row in P], f"{where} proposition {c}")
            plist.append({"verb": v, "lemma": P[v][0], "args": args})
        out.append(Sentence([row[0] for row in W], pos, tree, plist))
    return out


def load_conll05(path: Union[None, str, os.PathLike] = None,
                 sets: Sequence[str] = SETS) -> Dict[str, List[Sentence]]:
    """Read the CoNLL-2005 test sets: ``{set name: [Sentence, ...]}``.

    Parameters
    ----------
    path : str, os.PathLike or None
        The release folder (holding ``test.wsj/`` and ``test.brown/``); default
        ``$STRUCTLP_CONLL05_PATH``, else ``../shared/data/conll05_srl``.
    sets : sequence of {"test.wsj", "test.brown"}

    Returns
    -------
    dict
        Per set the list of :class:`Sentence` (words, Charniak POS and tree,
        propositions with their gold arguments).

    Raises
    ------
    DataNotFoundError
        When the folder or a layer file is missing (the message names the path).

    Examples
    --------
    >>> from structlp.datasets import load_conll05
    >>> data = load_conll05()                     # doctest: +SKIP
    >>> [(name, len(sents)) for name, sents in data.items()]      # doctest: +SKIP
    [('test.wsj', 2416), ('test.brown', 426)]
    """
    bad = [s for s in sets if s not in SETS]
    if isinstance(sets, str) or bad:
        raise InvalidInputError(f"sets must be a list of {SETS}; got {sets!r}.")
    root = conll05_path(path, sets)
    return {s: read_set(root, s) for s in sets}


def argument_counts(sentences: Sequence[Sentence]) -> Dict[str, int]:
    """Number of argument phrases per CoNLL role (V included) over the propositions."""
    counts: Dict[str, int] = {}
    for s in sentences:
        for p in s.props:
            for role, _, _ in p["args"]:
                counts[role] = counts.get(role, 0) + 1
    return dict(sorted(counts.items()))


# ------------------------------------------------------------------ pruning and labels
def xue_palmer_prune(tree: ParseTree, verb: int) -> Tuple[List[int], List[int]]:
    """Prune ``tree`` for the target verb at word ``verb`` (Xue & Palmer 2004).

    Keeps the verb's preterminal, the nodes on its path to the root, the
    siblings of every node on that path, and the children of each such sibling
    that is a PP.  Returns ``(nodes, parents)``: the kept tree nodes in preorder
    (the root first) and each one's parent as an index into ``nodes`` (-1 at
    the root); the parent of a kept node is its parent in the tree.
    """
    if not 0 <= verb < len(tree.leaf_of):
        raise InvalidInputError(f"verb must be a word index in 0..{len(tree.leaf_of) - 1}; "
                                f"got {verb!r}.")
    keep = set()
    path = tree.path_to_root(tree.leaf_of[verb])
    keep.update(path)
    for cur in path[:-1]:
        for sib in tree.children[tree.parents[cur]]:
            if sib != cur:
                keep.add(sib)
                if tree.labels[sib] == "PP":
                    keep.update(tree.children[sib])
    nodes: List[int] = []
    stack = [path[-1]]
    while stack:                                     # preorder, left to right
        j = stack.pop()
        nodes.append(j)
        stack.extend(c for c in reversed(tree.children[j]) if c in keep)
    index = {j: i for i, j in enumerate(nodes)}
    parents = [index.get(tree.parents[j], -1) for j in nodes]
    return nodes, parents


def label_pruned(tree: ParseTree, nodes: Sequence[int], parents: Sequence[int], verb: int,
                 args: Sequence[Tuple[str, int, int]]) -> np.ndarray:
    """Class indices (into :data:`LABELS`) of the pruned tree's nodes for one proposition.

    The verb's preterminal is ``V``; a node whose span equals a gold argument's
    span takes that argument's class (:func:`role_class`), unless it contains the
    verb or lies below a node already labelled (a child of an argument); every
    other node is ``O``.
    """
    spans: Dict[Any, Any] = {}
    for role, s, e in args:
        if role != "V":
            spans.setdefault((s, e), role_class(role))
    vleaf = tree.leaf_of[verb]
    y = np.zeros(len(nodes), dtype=np.int64)
    for i, j in enumerate(nodes):                   # preorder: parents come first
        if j == vleaf:
            y[i] = LABELS.index("V")
            continue
        s, e = tree.spans[j]
        if s <= verb < e or (parents[i] >= 0 and y[parents[i]] != 0):
            continue
        lab = spans.get((s, e))
        if lab is not None:
            y[i] = LABELS.index(lab)
    return y


def pruning_recall(sentences: Sequence[Sentence]) -> Tuple[int, int]:
    """``(found, total)``: gold non-V arguments whose span is a node of the pruned tree
    and labelled there, over all propositions (the ceiling of a labeller on these trees)."""
    found = total = 0
    for sent in sentences:
        for p in sent.props:
            nodes, parents = xue_palmer_prune(sent.tree, p["verb"])
            y = label_pruned(sent.tree, nodes, parents, p["verb"], p["args"])
            have = {sent.tree.spans[j] for j, lab in zip(nodes, y) if lab not in (0, 1)}
            for role, s, e in p["args"]:
                if role != "V":
                    total += 1
                    found += (s, e) in have
    return found, total
