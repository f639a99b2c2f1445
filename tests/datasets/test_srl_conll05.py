"""CoNLL-2005 SRL: column reader, parse trees, Xue-Palmer pruning, labels, features, experiment.

The trees here are small hand-made sentences (no text of the release).  The tests
that read the release (research use only, never in the repository) skip when
``../shared/data/conll05_srl`` (or ``$STRUCTLP_CONLL05_PATH``) is absent.
"""

import gzip
import re

import numpy as np
import pytest

from structlp.datasets.conll05 import (LABELS, DataNotFoundError, Sentence,
                                       argument_counts, conll05_path, label_pruned,
                                       load_conll05, parse_props, parse_start_end,
                                       read_column_file, role_class, xue_palmer_prune)
from structlp.datasets.conll05_features import (SRLFeatures, is_passive, ordinal_loss_matrix,
                                                tree_path)
from structlp.exceptions import InvalidInputError, InvalidParameterError

try:
    conll05_path()
    HAVE_DATA = True
except DataNotFoundError:
    HAVE_DATA = False
needs_data = pytest.mark.skipif(
    not HAVE_DATA, reason="CoNLL-2005 test sets not found (../shared/data/conll05_srl or "
                          "$STRUCTLP_CONLL05_PATH); research-use data, not shipped")

L_ = {lab: i for i, lab in enumerate(LABELS)}

# "The dog put the bone in the garden ."
# (S1 (S (NP (DT The) (NN dog)) (VP (VBD put) (NP (DT the) (NN bone))
#         (PP (IN in) (NP (DT the) (NN garden)))) (. .)))
PUT_WORDS = "The dog put the bone in the garden .".split()
PUT_POS = "DT NN VBD DT NN IN DT NN .".split()
PUT_TREE = ["(S1(S(NP*", "*)", "(VP*", "(NP*", "*)", "(PP*", "(NP*", "*)))", "*))"]
# "The man who left came ."
# (S1 (S (NP (NP (DT The) (NN man)) (SBAR (WHNP (WP who)) (S (VP (VBD left)))))
#        (VP (VBD came)) (. .)))
REL_WORDS = "The man who left came .".split()
REL_POS = "DT NN WP VBD VBD .".split()
REL_TREE = ["(S1(S(NP(NP*", "*)", "(SBAR(WHNP*)", "(S(VP*))))", "(VP*)", "*))"]


def put_tree():
    return parse_start_end(PUT_POS, PUT_TREE)


def rel_tree():
    return parse_start_end(REL_POS, REL_TREE)


# ------------------------------------------------------------------ trees
def test_parse_hand_tree_spans_labels_heads():
    t = put_tree()
    assert t.labels == ["S1", "S", "NP", "DT", "NN", "VP", "VBD", "NP", "DT", "NN", "PP",
                        "IN", "NP", "DT", "NN", "."]
    assert t.spans[:3] == [(0, 9), (0, 9), (0, 2)]
    assert t.spans[5] == (2, 8) and t.spans[7] == (3, 5)
    assert t.spans[10] == (5, 8) and t.spans[12] == (6, 8)
    assert t.parents == [-1, 0, 1, 2, 2, 1, 5, 5, 7, 7, 5, 10, 10, 12, 12, 1]
    assert t.leaf_of == [3, 4, 6, 8, 9, 11, 13, 14, 15]
    # Collins heads: S -> VP -> VBD; NP -> last noun; PP -> IN
    assert [t.heads[j] for j in (0, 1, 2, 5, 7, 10, 12)] == [2, 2, 1, 2, 4, 5, 7]
    r = rel_tree()
    assert r.heads[2] == 1          # NP -> (NP The man) (SBAR ...): the inner NP's head
    assert r.heads[6] == 2          # SBAR -> WHNP first


def _random_bracketing(rng, start, n_words, depth=0):
    """A random tree over words start..start+n_words-1: (label, start, end, children)."""
    if n_words == 1 and (depth > 0 and rng.random() < 0.6):
        return ("W", start, start + 1, [])
    kids, w = [], start
    while w < start + n_words:
        size = int(rng.integers(1, start + n_words - w + 1))
        if size == n_words and rng.random() < 0.7:
            size = max(1, size - 1)
        kids.append(_random_bracketing(rng, w, size, depth + 1))
        w += size
    return (str(rng.choice(["NP", "VP", "PP", "S", "SBAR"])), start, start + n_words, kids)


def _tags(node, opens, closes):
    lab, s, e, kids = node
    if lab == "W":
        return
    opens[s] += f"({lab}"
    closes[e - 1] += ")"
    for k in kids:
        _tags(k, opens, closes)


def _spans(node, out):
    lab, s, e, kids = node
    if lab != "W":
        out.append((lab, s, e))
    for k in kids:
        _spans(k, out)


def test_parser_against_generated_bracketings():
    """Random bracketings written in Start-End format come back with their spans."""
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(1, 9))
        root = _random_bracketing(rng, 0, n)
        opens, closes = [""] * n, [""] * n
        _tags(root, opens, closes)
        # the closing brackets of constituents ending at one word: innermost first
        t = parse_start_end(["W"] * n, [o + "*" + c for o, c in zip(opens, closes)])
        want = []
        _spans(root, want)
        got = [(lab, *sp) for lab, sp in zip(t.labels, t.spans) if lab != "W"]
        assert sorted(got) == sorted(want)
        assert all(t.spans[t.leaf_of[w]] == (w, w + 1) for w in range(n))
        for j, p in enumerate(t.parents):     # parents contain their children
            if p >= 0:
                assert t.spans[p][0] <= t.spans[j][0] and t.spans[j][1] <= t.spans[p][1]


def test_xue_palmer_hand_trees():
    t = put_tree()
    nodes, parents = xue_palmer_prune(t, 2)
    # path VBD-VP-S-S1; siblings NP (object), PP and its children IN, NP; subject NP; "."
    assert nodes == [0, 1, 2, 5, 6, 7, 10, 11, 12, 15]
    assert parents == [-1, 0, 1, 1, 3, 3, 3, 6, 6, 1]
    r = rel_tree()
    nodes, parents = xue_palmer_prune(r, 3)           # "left", inside the relative clause
    assert nodes == [0, 1, 2, 3, 6, 7, 9, 10, 11, 12, 14]
    assert parents == [-1, 0, 1, 2, 2, 4, 4, 6, 7, 1, 1]
    nodes, parents = xue_palmer_prune(r, 4)           # "came"
    assert nodes == [0, 1, 2, 12, 13, 14] and parents == [-1, 0, 1, 1, 3, 1]
    with pytest.raises(InvalidInputError, match="verb"):
        xue_palmer_prune(r, 6)


def test_xue_palmer_matches_its_definition_on_random_trees():
    rng = np.random.default_rng(1)
    for _ in range(60):
        n = int(rng.integers(2, 10))
        root = _random_bracketing(rng, 0, n)
        opens, closes = [""] * n, [""] * n
        _tags(root, opens, closes)
        t = parse_start_end(["W"] * n, [o + "*" + c for o, c in zip(opens, closes)])
        v = int(rng.integers(n))
        nodes, parents = xue_palmer_prune(t, v)
        anc = set()
        j = t.leaf_of[v]
        while j >= 0:
            anc.add(j)
            j = t.parents[j]
        want = {j for j in range(t.n_nodes)
                if j in anc or (t.parents[j] in anc)
                or (t.parents[j] >= 0 and t.labels[t.parents[j]] == "PP"
                    and t.parents[j] not in anc and t.parents[t.parents[j]] in anc)}
        assert set(nodes) == want and len(nodes) == len(want)
        for i, p in enumerate(parents):
            assert (p == -1) == (i == 0)
            if p >= 0:
                assert nodes[p] == t.parents[nodes[i]] and p < i


def test_labels_hand_trees():
    t = put_tree()
    nodes, parents = xue_palmer_prune(t, 2)
    args = parse_props(["(A0*", "*)", "(V*)", "(A1*", "*)", "(A2*", "*", "*)", "*"])
    assert args == [("A0", 0, 2), ("V", 2, 3), ("A1", 3, 5), ("A2", 5, 8)]
    y = label_pruned(t, nodes, parents, 2, args)
    # S1 S NP VP VBD NP PP IN NP .   (the PP's children: O, children of an argument)
    assert [LABELS[a] for a in y] == ["O", "O", "A0", "O", "V", "A1", "A2", "O", "O", "O"]
    # AM-LOC on the PP's object only: class R there, the preposition O
    args = [("A0", 0, 2), ("V", 2, 3), ("A1", 3, 5), ("AM-LOC", 6, 8)]
    y = label_pruned(t, nodes, parents, 2, args)
    assert [LABELS[a] for a in y] == ["O", "O", "A0", "O", "V", "A1", "O", "O", "R", "O"]
    r = rel_tree()
    nodes, parents = xue_palmer_prune(r, 3)
    y = label_pruned(r, nodes, parents, 3, [("A0", 0, 2), ("R-A0", 2, 3), ("V", 3, 4)])
    assert [LABELS[a] for a in y] == ["O", "O", "O", "A0", "O", "R-A0", "O", "O", "V", "O", "O"]
    nodes, parents = xue_palmer_prune(r, 4)
    y = label_pruned(r, nodes, parents, 4, [("A0", 0, 4), ("V", 4, 5)])
    assert [LABELS[a] for a in y] == ["O", "O", "A0", "O", "V", "O"]


def test_role_classes():
    assert [role_class(r) for r in ("A0", "A1", "A2", "R-A0", "R-A1", "R-A2")] == \
        ["A0", "A1", "A2", "R-A0", "R-A1", "R-A2"]
    assert {role_class(r) for r in ("A3", "AM-TMP", "C-A1", "R-AM-LOC", "AM-MOD")} == {"R"}
    assert len(LABELS) == 9


def test_malformed_columns_are_refused():
    with pytest.raises(InvalidInputError, match="not STARTS"):
        parse_start_end(["DT"], ["(NP"])
    with pytest.raises(InvalidInputError, match="left open"):
        parse_start_end(["DT", "NN"], ["(S(NP*", "*)"])
    with pytest.raises(InvalidInputError, match="unmatched"):
        parse_start_end(["DT"], ["(NP*))"])
    with pytest.raises(InvalidInputError, match="second root"):
        parse_start_end(["DT", "NN"], ["(NP*)", "(NP*)"])
    with pytest.raises(InvalidInputError, match="POS tags"):
        parse_start_end(["DT"], ["(NP*", "*)"])
    with pytest.raises(InvalidInputError, match="left open"):
        parse_props(["(A0*", "*"])
    with pytest.raises(InvalidInputError, match="unmatched"):
        parse_props(["*)"])


def test_column_reader_and_missing_data(tmp_path):
    f = tmp_path / "x.words.gz"
    with gzip.open(f, "wt") as fh:
        fh.write("a  (NP*\nb  *)\n\nc  *\n\n")
    assert read_column_file(f) == [[["a", "(NP*"], ["b", "*)"]], [["c", "*"]]]
    with pytest.raises(DataNotFoundError, match="STRUCTLP_CONLL05_PATH"):
        load_conll05(tmp_path)
    with pytest.raises(InvalidInputError, match="path must be a path"):
        load_conll05(3)
    with pytest.raises(InvalidInputError, match="sets must be"):
        load_conll05(tmp_path, sets=["train"])


# ------------------------------------------------------------------ features and loss
def _hand_sentences():
    t, r = put_tree(), rel_tree()
    put = Sentence(PUT_WORDS, PUT_POS, t, [{"verb": 2, "lemma": "put", "args": [
        ("A0", 0, 2), ("V", 2, 3), ("A1", 3, 5), ("A2", 5, 8)]}])
    rel = Sentence(REL_WORDS, REL_POS, r, [
        {"verb": 3, "lemma": "leave", "args": [("A0", 0, 2), ("R-A0", 2, 3), ("V", 3, 4)]},
        {"verb": 4, "lemma": "come", "args": [("A0", 0, 4), ("V", 4, 5)]}])
    return [put, rel]


def test_features_on_hand_sentences():
    from structlp.graphical.trees import check_tree_example
    sents = _hand_sentences()
    F = SRLFeatures(min_count=1).fit(sents)
    X, Y, sid = F.transform(sents)
    assert list(sid) == [0, 1, 1] and [len(y) for y in Y] == [10, 11, 6]
    assert [LABELS[a] for a in Y[2]] == ["O", "O", "A0", "O", "V", "O"]
    for x, y in zip(X, Y):
        ex = check_tree_example(x)
        n = len(y)
        assert x["node_features"].shape == (n, F.n_node_features_)
        assert x["edge_features"].shape == (n - 1, F.n_edge_features_)
        # every one-hot block has exactly one 1 per node; bias 1
        assert np.all(x["node_features"][:, 0] == 1) and np.all(x["edge_features"][:, 0] == 1)
        assert ex.n_nodes == n
    # the head word "dog" (subject NP of "put") has its own column
    col = 1 + len(F.vocab_["phrase"]) + 1 + F.vocab_["head_word"].index("dog")
    assert X[0]["node_features"][2, col] == 1 and X[0]["node_features"][:, col].sum() == 1
    assert tree_path(rel_tree(), 3, 11) == "NP^NPvSBARvSvVPvVBD"
    assert tree_path(put_tree(), 2, 6) == "NP^SvVPvVBD"


def test_passive_voice():
    t = put_tree()
    s = Sentence("The bone was quickly put there .".split(),
                 "DT NN AUX RB VBN RB .".split(), t, [])
    assert is_passive(s, 4)
    s2 = Sentence(s.words, "DT NN AUX RB VBD RB .".split(), t, [])
    assert not is_passive(s2, 4)


def test_ordinal_loss_matrix():
    L, order = ordinal_loss_matrix(0)
    assert sorted(order) == list(range(9)) and L.shape == (9, 9)
    assert np.allclose(L, L.T) and np.all(np.diag(L) == 0)
    for i, a in enumerate(order):          # brute force from the order
        for j, b in enumerate(order):
            assert L[a, b] == pytest.approx(abs(i - j) / 8)
    L2, order2 = ordinal_loss_matrix(0)
    assert order2 == order and np.array_equal(L, L2)
    assert ordinal_loss_matrix(1)[1] != order
    with pytest.raises(InvalidParameterError, match="seed"):
        ordinal_loss_matrix(-1)


# ------------------------------------------------------------------ the release
@needs_data
@pytest.mark.data
def test_release_counts():
    """Sentences and propositions as the release documents them; the arguments per role
    as counted independently by a regular expression over the raw props files."""
    D = load_conll05()
    root = conll05_path()
    for name, n_sent, n_prop in (("test.wsj", 2416, 5267), ("test.brown", 426, 804)):
        S = D[name]
        assert len(S) == n_sent and sum(len(s.props) for s in S) == n_prop
        with gzip.open(root / name / "props" / f"{name}.props.gz", "rt",
                       encoding="latin-1") as fh:
            raw = fh.read()
        want = {}
        for lab in re.findall(r"\(([^()*\s]+)\*", raw):
            want[lab] = want.get(lab, 0) + 1
        assert argument_counts(S) == dict(sorted(want.items()))
        assert argument_counts(S)["V"] == n_prop
        assert all(len(s.words) == len(s.tree.leaf_of) for s in S)
    assert argument_counts(D["test.wsj"])["A0"] == 3563


# ------------------------------------------------------------------ the experiment
def _problem():
    from structlp.cli import load_problem
    return load_problem("problems/srl_conll05.py")


def test_problem_options_are_checked():
    mod = _problem()
    with pytest.raises(InvalidParameterError, match="n_train"):
        mod.run(n_train=2)
    with pytest.raises(InvalidParameterError, match="n_train must be an integer >= 6 or 'all'"):
        mod.run(n_train="every")
    for regs in ({"SVM": 1.0}, {"AGM": 0.0}, {"AGM": "1"}, [0.1]):
        with pytest.raises(InvalidParameterError, match="regs must map model names"):
            mod.run(regs=regs)
    with pytest.raises(InvalidParameterError, match="solver"):
        mod.run(solver="CLARABEL")
    with pytest.raises(InvalidParameterError, match="experiments"):
        mod.run(experiments=["train"])
    with pytest.raises(InvalidParameterError, match="reg_grid"):
        mod.run(reg_grid=[0.0])
    with pytest.raises(InvalidParameterError, match="models"):
        mod.run(models=["AGM", "SVM"])
    with pytest.raises(InvalidParameterError, match="models"):
        mod.run(models=[])


def test_problem_marks():
    from scipy.stats import wilcoxon
    mod = _problem()
    per = {"AGM": [0.1] * 8, "CRF": [0.2 + 0.01 * i for i in range(8)],
           "SSVM": [0.1 + 0.001 * (-1) ** i for i in range(8)]}
    means, ok = mod.marks(per, ("AGM", "CRF", "SSVM"), wilcoxon)
    assert min(means, key=means.get) == "AGM"
    assert ok == {"AGM": True, "CRF": False, "SSVM": True}


def test_problem_full_scale_splits():
    """n_train=None ("all"): brown is one split, all of test.wsj against all of
    test.brown; each wsj fold trains on every proposition outside it (sentences kept
    whole), and the folds' test sets partition test.wsj.  A sample size beyond the
    pool is the same."""
    mod = _problem()
    rng = np.random.default_rng(3)
    sid = np.sort(rng.integers(0, 40, 120))          # 120 propositions of 40 sentences
    for n_train in (None, 500):
        S = mod.make_splits(sid, 120, 30, n_train, 4, seed=0)
        (tr, te), = S["brown"]
        assert np.array_equal(tr, np.arange(120)) and np.array_equal(te, 120 + np.arange(30))
        assert len(S["wsj"]) == 4
        tests = np.sort(np.concatenate([te for _, te in S["wsj"]]))
        assert np.array_equal(tests, np.arange(120))
        for tr, te in S["wsj"]:
            assert np.array_equal(np.sort(np.r_[tr, te]), np.arange(120))
            assert not set(sid[tr]) & set(sid[te])
    S = mod.make_splits(sid, 120, 30, 50, 4, seed=0)   # a sample: one split per fold
    assert len(S["brown"]) == 4 and all(len(tr) == 50 for tr, _ in S["brown"])


class _Fitted:
    """A mock fitted model for the problem's scheduling tests: its fit's facts as
    attributes; it predicts itself (the mock losses read them)."""

    def __init__(self, **facts):
        self.__dict__.update(facts)

    def predict(self, X):
        return self


def _old_grid_rule(mod, loss, grid, n_folds):
    """The reg chosen by extending the grid a decade at a time (every fold fitted at
    every reg tried, cold), the CV's rule before regularization paths."""
    means, todo = {}, sorted(grid)
    while todo:
        for r in todo:
            means[r] = np.mean([loss(r, f) for f in range(n_folds)])
        regs, best = sorted(means), mod._best({r: [v] for r, v in means.items()})
        todo = ([best * 10] if best == regs[-1] and best * 10 <= mod.GRID_LIMITS[1] else
                [best / 10] if best == regs[0] and best / 10 >= mod.GRID_LIMITS[0] else [])
    return mod._best({r: [v] for r, v in means.items()}), means


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_cv_paths_choose_what_the_grid_rule_chooses(seed, shared, monkeypatch):
    """Cross-validation walks each model's grid as one warm-started path per fold and
    extends it by the grid rule: with every fold in one task (``shared=False``) there,
    each (reg, fold) fitted once; with the folds shared among tasks (more workers than
    models), each task by its own folds' losses, then what a fold lacks in another round
    (below the grid's top by a path again).  On random fold losses (a minimum per fold
    somewhere in 1e-5..1e3, noise): the same choice and the same mean losses as extending
    the grid a decade at a time with every fold, and each path fit after the first starts
    from the previous fit (the warm start)."""
    from structlp.utils import Progress
    mod = _problem()
    rng = np.random.default_rng(seed)
    n_folds = 2 + seed % 2
    centre = rng.uniform(-5.5, 3.5, n_folds)          # log10 of each fold's best reg
    noise = rng.uniform(0, 0.3, (n_folds, 40))

    def loss(reg, fold):
        x = np.log10(reg)
        return 0.1 + 0.01 * (x - centre[fold]) ** 2 + 0.002 * noise[fold, int(round(x)) + 10]

    sid = np.arange(60) // 2
    fold_of = {}
    for f, (fit, val) in enumerate(mod._group_folds(np.arange(60), sid, n_folds,
                                                    np.random.default_rng(0))):
        fold_of[tuple(fit)] = f
    calls = []

    def fit_model(model, reg, X, Y, cfg, previous=None):
        calls.append((fold_of[tuple(X)], reg, previous is not None and previous.reg))
        return _Fitted(reg=reg, fold=fold_of[tuple(X)])

    monkeypatch.setattr(mod, "fit_model", fit_model)
    if shared:
        monkeypatch.setattr(mod, "_fold_groups", lambda n_models, n_folds, n_jobs: n_folds)
    monkeypatch.setattr(mod, "proposition_losses",
                        lambda pred, Y, L: np.array([loss(pred.reg, pred.fold)]))
    monkeypatch.setattr(mod, "_DATA", {"X": list(range(60)), "Y": [0] * 60, "cfg": {"L": None}})
    grid = (0.1, 1.0, 10.0)
    chosen, cv_loss, _ = mod.cross_validate(np.arange(60), sid, grid, n_folds, ("CRF",), 1,
                                            Progress("test"), [], "brown",
                                            np.random.default_rng(0))
    best, means = _old_grid_rule(mod, loss, grid, n_folds)
    assert chosen["CRF"] == best
    assert cv_loss["CRF"] == pytest.approx(means, rel=1e-12)
    # a path's fits after its first start from the previous reg's fit (ten times larger)
    warm = [(reg, prev) for _, reg, prev in calls if prev]
    assert warm and all(prev == pytest.approx(10 * reg) for reg, prev in warm)
    if best < min(grid):        # the paths went on below the grid, warm
        assert any(reg < min(grid) for reg, _ in warm)
    # below the grid's largest reg every fit is warm (the extensions too: paths again)
    assert all(prev for _, reg, prev in calls if reg < max(grid))
    assert sum(prev is False for _, _, prev in calls) >= n_folds
    if not shared:      # the grid rule decided in the task: no fit twice, none in vain
        assert len({(f, reg) for f, reg, _ in calls}) == len(calls) == n_folds * len(means)


def test_final_fits_chain_from_the_largest_training_set(monkeypatch):
    """A model of WARM_PATH fits its largest training set first and then, in turn, every
    final fit that shares at least half of its examples with it, each from the last one's
    state (one chain); a training set apart, and every fit of AGM-SG, starts afresh.  The
    losses land with their jobs."""
    from structlp.utils import Progress
    mod = _problem()
    calls = []

    def fit_model(model, reg, X, Y, cfg, previous=None):
        calls.append((model, tuple(X), previous))
        return _Fitted(model=model, train=tuple(X))

    monkeypatch.setattr(mod, "fit_model", fit_model)
    monkeypatch.setattr(mod, "proposition_losses",
                        lambda pred, Y, L: np.array([len(pred.train) + 0.5 * (pred.model == "AGM")]))
    monkeypatch.setattr(mod, "_DATA", {"X": list(range(200)), "Y": [0] * 200,
                                       "cfg": {"L": None}})
    trains = [np.arange(10, 60), np.arange(60), np.arange(0, 45), np.arange(100, 130),
              np.arange(30, 90)]

    def finals(m, reg):
        return [mod.Job(m, reg, tr, np.arange(150, 160), "wsj", s) for s, tr in enumerate(trains)]

    _, _, _, results = mod._schedule({"AGM": 0.1, "AGM-SG": 0.1}, (), None, finals, 1,
                                     Progress("test"), [])
    agm = [(X, prev and prev.train) for m, X, prev in calls if m == "AGM"]
    chain = [tuple(range(60)), tuple(range(30, 90)), tuple(range(10, 60)), tuple(range(45))]
    # the largest first, afresh; the others that share half of it, each from the last
    assert agm[:4] == list(zip(chain, [None] + chain[:3]))
    assert agm[4:] == [(tuple(range(100, 130)), None)]  # nothing shared: afresh
    assert all(prev is None for m, _, prev in calls if m == "AGM-SG")
    got = {(j.model, j.tag): float(losses[0]) for j, losses, _ in results}
    assert got == {(m, s): len(tr) + 0.5 * (m == "AGM") for m in ("AGM", "AGM-SG")
                   for s, tr in enumerate(trains)}


def test_cv_then_final_fits_in_one_task(monkeypatch):
    """With every fold in one task, a warm model's final fits follow its CV there at the
    reg it chose, the first from the CV's last state; the AGM's folds share one state
    (each fit from the last one, whatever its fold); the CRF's each its own; AGM-SG's
    final fits start afresh in tasks of their own."""
    from structlp.utils import Progress
    mod = _problem()
    calls = []

    def fit_model(model, reg, X, Y, cfg, previous=None):
        calls.append((model, reg, tuple(X), previous))
        return _Fitted(model=model, reg=reg, train=tuple(X))

    monkeypatch.setattr(mod, "fit_model", fit_model)
    monkeypatch.setattr(mod, "proposition_losses", lambda pred, Y, L: np.array(
        [abs(np.log10(pred.reg) + 1.0) + 0.01 * (pred.train[0] == 0)]))   # best at 0.1
    monkeypatch.setattr(mod, "_DATA", {"X": list(range(200)), "Y": [0] * 200,
                                       "cfg": {"L": None}})
    folds = [(np.arange(0, 30), np.arange(30, 60)), (np.arange(30, 60), np.arange(0, 30))]

    def finals(m, reg):
        return [mod.Job(m, reg, tr, np.arange(150, 160), "wsj", s)
                for s, tr in enumerate([np.arange(60), np.arange(10, 60)])]

    chosen, cv_loss, _, results = mod._schedule(
        {}, ("AGM", "AGM-SG", "CRF"), (folds, (1.0, 10.0), "brown"), finals, 1,
        Progress("test"), [])
    assert chosen == {"AGM": 0.1, "AGM-SG": 0.1, "CRF": 0.1}
    agm = [c for c in calls if c[0] == "AGM"]
    # CV: 10, 1, 0.1 (below the grid: its best was on the edge), 0.01; each fold, in turn
    assert [(r, X[0]) for _, r, X, _ in agm[:8]] == [(r, f) for r in (10, 1, 0.1, 0.01)
                                                     for f in (0, 30)]
    assert agm[0][3] is None and all(agm[t][3].train == agm[t - 1][2] and
                                      agm[t][3].reg == agm[t - 1][1] for t in range(1, 10))
    # finals at the choice, the largest set first, from the CV's last state
    assert [(r, len(X)) for _, r, X, _ in agm[8:]] == [(0.1, 60), (0.1, 50)]
    crf = [c for c in calls if c[0] == "CRF"]
    assert [c[3] and (c[3].reg, c[3].train[0]) for c in crf[:4]] == [None, None, (10, 0),
                                                                      (10, 30)]
    assert all(c[3] is None for c in calls if c[0] == "AGM-SG" and len(c[2]) > 30)
    assert len(results) == 6 and {j.reg for j, _, _ in results} == {0.1}
    assert set(cv_loss["AGM"]) == {10.0, 1.0, 0.1, 0.01}


def test_problem_marks_one_split_pairs_propositions():
    """With one split the marks pair the test propositions' losses (Wilcoxon on 200
    pairs): a model worse on most propositions is marked down, one that differs by
    noise is not; the per-split test could mark neither."""
    from scipy.stats import wilcoxon
    mod = _problem()
    rng = np.random.default_rng(0)
    base = rng.uniform(0.0, 0.1, 200)
    items = {"AGM": [base], "CRF": [base + 0.01 + rng.normal(0, 0.005, 200)],
             "SSVM": [base + rng.normal(0, 0.005, 200)]}
    per = {m: [float(v[0].mean())] for m, v in items.items()}
    means, ok = mod.marks(per, ("AGM", "CRF", "SSVM"), wilcoxon, items)
    best = min(means, key=means.get)
    assert best in ("AGM", "SSVM") and ok["CRF"] is False and ok["AGM"] and ok["SSVM"]


@needs_data
@pytest.mark.data
@pytest.mark.slow
def test_reduced_run():
    """A few dozen propositions per split, fixed reg: every model trains and scores; with
    cross-validation, two workers give the serial run's results."""
    mod = _problem()
    res = mod.run(n_train=30, splits=2, C=0.1, n_jobs=1, epochs=2)
    given = mod.run(n_train=30, splits=2, cv=2, reg_grid=[1.0, 10.0], n_jobs=1, epochs=1,
                    models=["AGM-SG", "CRF"], experiments=["wsj"], regs={"AGM-SG": 0.5})
    assert given["reg"]["AGM-SG"] == 0.5 and str(given["reg"]["CRF"]) in given["cv_loss"]["CRF"]
    assert list(given["cv_loss"]) == ["CRF"] and "reg given (option regs)" in given["report"]
    for exp in ("brown", "wsj"):
        for m in mod.MODELS:
            losses = res["table"][exp][m]["per_split"]
            assert len(losses) == 2 and all(0 <= v <= 1 for v in losses)
    # a trained model beats predicting O everywhere on the brown test set
    L = np.array(mod.ordinal_loss_matrix(0)[0])
    Y_brown = mod._DATA["Y"][-804:]
    all_o = mod.mean_loss([np.zeros(len(y), dtype=int) for y in Y_brown], Y_brown, L)
    assert all(res["table"]["brown"][m]["mean"] < all_o for m in mod.MODELS)
    assert "paper (Table 2)" in res["report"]
    # the pool: CV and final fits on two workers, each model's in one task, give the
    # serial run's choices and losses exactly
    kw = dict(n_train=30, splits=2, cv=2, reg_grid=[1.0, 10.0], epochs=1,
              models=["AGM", "CRF"], experiments=["wsj"])
    serial, pooled = mod.run(n_jobs=1, **kw), mod.run(n_jobs=2, **kw)
    assert serial["reg"] == pooled["reg"] and serial["cv_loss"] == pooled["cv_loss"]
    for m in ("AGM", "CRF"):
        assert serial["table"]["wsj"][m]["per_split"] == pooled["table"]["wsj"][m]["per_split"]
