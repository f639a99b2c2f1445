"""Reviewer–paper assignment (Taskar et al. 2005, §2), learned from past conferences.

Each conference has reviewers and papers described by bags of words.  The
features of the pair (reviewer j, paper k) are the words in both bags (one
indicator per vocabulary word, Taskar's ``f_d(x_jk) = 1(word d in both)``) plus
their cosine similarity.  A hidden "expertise" score — planted word weights
times the overlap, plus Gaussian noise — decides the true assignment: every
paper gets ``R`` reviewers, every reviewer at most ``P`` papers.  A
:class:`~structlp.structures.BipartiteMatching` model is trained by one joint
QP on past conferences and evaluated on held-out ones against two references:
the planted weights themselves (the best a linear model can do; the noise is
not learnable) and the untrained "count the shared words" rule.

Run it with ``structlp run problems/reviewer_assignment.py``.
"""

from __future__ import annotations

import time

import numpy as np

import structlp
from structlp.structures import BipartiteMatching

DESCRIPTION = __doc__.split("\n\n")[0]

DEFAULTS = dict(n_train=100, n_test=50, n_reviewers=12, n_papers=10, R=2, P=2,
                n_words=40, n_topics=5, words_per_doc=12, noise=0.5)


def make_conference(rng, planted, n_reviewers, n_papers, n_words, n_topics,
                    words_per_doc, noise, R, P, topic_of_word):
    """One synthetic conference: edge features x (n_reviewers, n_papers, d) and the
    true assignment y (n_reviewers, n_papers)."""

    def bag(n_docs, conc):
        topics = rng.dirichlet(np.full(n_topics, conc), size=n_docs)  # (n_docs, n_topics)
        p_word = topics[:, topic_of_word] + 0.02
        p_word /= p_word.sum(axis=1, keepdims=True)
        bags = np.zeros((n_docs, n_words), dtype=bool)
        for i in range(n_docs):
            bags[i, rng.choice(n_words, size=words_per_doc, replace=False, p=p_word[i])] = True
        return bags

    rev, pap = bag(n_reviewers, 0.3), bag(n_papers, 0.3)
    overlap = (rev[:, None, :] & pap[None, :, :]).astype(float)  # (n_rev, n_pap, n_words)
    cosine = overlap.sum(-1) / words_per_doc
    x = np.concatenate([overlap, cosine[..., None]], axis=-1)
    expertise = x @ planted + noise * rng.normal(size=(n_reviewers, n_papers))
    truth = BipartiteMatching(R=R, P=P)
    (y,), _ = _best(truth, [x], [expertise.ravel()])
    return x, y


def _best(model, X, scores):
    return structlp.maximize(model, X, scores)


def generate(seed=0, **overrides):
    """Training and test conferences, plus the planted weights."""
    cfg = dict(DEFAULTS, **overrides)
    rng = np.random.default_rng(seed)
    n_words = cfg["n_words"]
    topic_of_word = rng.integers(cfg["n_topics"], size=n_words)
    # informative words get large weights, a few frequent "stop words" none
    planted = np.concatenate([rng.gamma(2.0, 1.0, size=n_words) * (rng.random(n_words) > 0.25),
                              [1.0]])
    keys = ("n_reviewers", "n_papers", "n_words", "n_topics", "words_per_doc", "noise", "R", "P")
    conf = [make_conference(rng, planted, topic_of_word=topic_of_word,
                            **{k: cfg[k] for k in keys})
            for _ in range(cfg["n_train"] + cfg["n_test"])]
    X, Y = [c[0] for c in conf], [c[1] for c in conf]
    n = cfg["n_train"]
    return (X[:n], Y[:n]), (X[n:], Y[n:]), planted, cfg


def _evaluate(model, X, Y, pred):
    losses = np.array([model.task_loss(x, y, p) for x, y, p in zip(X, Y, pred)])
    exact = np.mean([np.array_equal(y, p) for y, p in zip(Y, pred)])
    return float(losses.mean()), float(exact)


def run(solver=None, C=None, seed=0, verbose=0, **overrides):
    """Train on past conferences, evaluate on held-out ones; return results."""
    from structlp.utils import Progress, check_verbose
    progress = Progress("reviewer_assignment", check_verbose(verbose))
    C = 1.0 if C is None else C
    (Xtr, Ytr), (Xte, Yte), planted, cfg = generate(seed, **overrides)
    model = BipartiteMatching(R=cfg["R"], P=cfg["P"])
    learner = structlp.MaxMarginLearner(model, C=C, solver=solver)
    progress.message(f"fitting one QP on {len(Xtr)} conferences")
    t0 = time.perf_counter()
    learner.fit(Xtr, Ytr)
    fit_s = time.perf_counter() - t0
    progress.message(f"fitted in {fit_s:.2f} s; evaluating")
    max_loss = cfg["R"] * cfg["n_papers"]
    rows = []
    for name, w in (("learned (structlp)", learner.coef_), ("planted weights", planted),
                    ("shared-word count", np.r_[np.ones(cfg["n_words"]), 0.0])):
        pred_tr, _ = _best(model, Xtr, [(x @ w).ravel() for x in Xtr])
        pred_te, _ = _best(model, Xte, [(x @ w).ravel() for x in Xte])
        tr, tr_ex = _evaluate(model, Xtr, Ytr, pred_tr)
        te, te_ex = _evaluate(model, Xte, Yte, pred_te)
        rows.append(dict(weights=name, train_hamming=tr, test_hamming=te,
                         test_hamming_fraction=te / max_loss, train_exact=tr_ex,
                         test_exact=te_ex))
    lines = [f"reviewer assignment: {cfg['n_train']} training / {cfg['n_test']} test conferences, "
             f"{cfg['n_reviewers']} reviewers x {cfg['n_papers']} papers, R={cfg['R']}, "
             f"P={cfg['P']}, {cfg['n_words']} words, noise {cfg['noise']}",
             f"solver {learner.solver_}, C={C}, objective {learner.objective_:.6g}, "
             f"fit {fit_s:.2f} s (build {learner.fit_time_['build']:.2f} s, "
             f"solve {learner.fit_time_['solve']:.2f} s)",
             "",
             f"{'weights':<20} {'train Hamming':>14} {'test Hamming':>13} {'test frac':>10} "
             f"{'test exact':>11}"]
    for r in rows:
        lines.append(f"{r['weights']:<20} {r['train_hamming']:>14.3f} {r['test_hamming']:>13.3f} "
                     f"{r['test_hamming_fraction']:>10.3f} {r['test_exact']:>11.2f}")
    lines.append(f"(Hamming = true reviewer-paper edges missing per conference, out of {max_loss})")
    return dict(report="\n".join(lines), config=cfg, solver=learner.solver_, C=C,
                objective=learner.objective_, fit_seconds=fit_s, results=rows,
                coef=learner.coef_)


if __name__ == "__main__":
    print(run()["report"])
