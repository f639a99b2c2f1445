"""Property-based fuzz suite (issue 14): every public entry point, valid and mutated input.

Each public callable exported from ``structlp``, ``structlp.structures``,
``structlp.agm`` and ``structlp.sequence`` has an entry in :data:`REGISTRY`.  An
entry draws (with hypothesis) either a random valid tiny problem, whose answer is
checked against an independent oracle (brute-force enumeration, the textbook
dynamic programs of ``tests/sequence/seq_oracles.py``, the primal objective
recomputed from ``coef_`` with brute-force hinge losses), or a random mutation of
one (shapes, dtypes incl. complex/str/object, NaN/inf, ragged, empty,
out-of-range labels/symbols, unknown keywords, bad hyper-parameters).  Every
outcome must be

* a correct answer, for valid input (an invalid input that is accepted fails:
  "silent acceptance"), or
* a structlp error, ``ValueError`` or ``TypeError`` whose message names the
  argument (any other exception type fails: "unexpected exception").

The default run is bounded (``examples`` per entry, a few hundred in all, well
under a minute); ``pytest -m slow tests/test_fuzz.py`` runs the same entries with
:data:`SLOW_FACTOR` times as many examples.  Both are derandomized (the same
cases on every run, so CI is reproducible); ``STRUCTLP_FUZZ_RANDOM=1`` draws new
cases each run, for exploring.  The count of cases per entry point
(valid / refused) is printed at the end of the module (in pytest's terminal
summary, also without ``-s``).

How to register a new export
----------------------------
:func:`test_every_export_has_an_entry` fails for an exported name without an
entry.  Add one to :data:`REGISTRY`, keyed ``"module.Name"``::

    def _my_export(draw):
        x = draw(st.integers(1, 5))                     # a random valid input...
        if draw(st.booleans()):                          # ...or a mutation of it
            return Case(lambda: my_export(-x), names=("x",))   # must raise naming 'x'
        return Case(lambda: my_export(x), check=lambda out: _eq(out, oracle(x)))

    REGISTRY["structlp.my_export"] = Entry(_my_export, examples=10)

``Case(call)`` runs ``call()``; with ``check`` the input is valid and
``check(result)`` asserts the answer; without it the call must raise a structlp
error / ValueError / TypeError whose message contains one of ``names`` as a
word.  Helpers: :func:`_mutated_array` (a random bad version of an array, with
the names its error must mention), :func:`_bad_scalar`, the ``_*_problem``
generators of tiny valid problems with their oracles.  Exception and warning
classes exported in ``__all__`` are covered automatically by
:func:`_exception_entry` (e.g. a new ``PersistenceError``).  Keep ``examples``
small for entries that solve a QP (each case costs ~0.1 s).

Sketches for exports being added elsewhere: ``structlp.save``/``load`` — fit a
tiny learner with :func:`_learner_entry`'s problems, save to ``tmp_path``-like
``tempfile`` path, load, ``check`` equal ``predict``; mutations: a path in a
missing directory, a file that is not a structlp archive (names ``path``).
``structlp.clone`` — clone of a random learner has equal ``get_params()`` and is
unfitted.  ``datasets.make_*`` — draw the size arguments, ``check`` the shapes and
that a learner accepts the data; mutations via :func:`_bad_scalar` (names the
size argument).  A junction-tree AGM class — reuse :func:`_tree_learner_entry`.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structlp
import structlp.agm as agm
import structlp.sequence as seq
import structlp.structures as structures
from oracles import (enumerate_bmatchings, enumerate_matchings, enumerate_perfect_matchings,
                     enumerate_spanning_trees)
from structlp import ConvergenceWarning, StructlpError
from structlp.compiler import prepare

_spec = importlib.util.spec_from_file_location(
    "_fuzz_seq_oracles", Path(__file__).parent / "sequence" / "seq_oracles.py")
seq_oracles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seq_oracles)

MODULES = {"structlp": structlp, "structlp.structures": structures, "structlp.agm": agm,
           "structlp.sequence": seq}
#: Errors a bad input may raise (their message must name the argument).
ALLOWED = (StructlpError, ValueError, TypeError)
#: Example multiplier of the slow run.
SLOW_FACTOR = 20
COUNTS = defaultdict(Counter)


@dataclass
class Case:
    """One call: ``check`` given means valid input (``check(result)`` asserts the answer);
    otherwise the call must raise an ALLOWED error naming one of ``names``."""

    call: Callable[[], Any]
    check: Optional[Callable[[Any], None]] = None
    names: tuple = ()
    #: with ``check``: a refusal naming one of ``names`` is also a correct outcome (an
    #: input at the edge of float64, which a learner may fit or refuse)
    may_refuse: bool = False


@dataclass
class Entry:
    draw_case: Callable[[Callable], Case]
    examples: int = 10


def _names_in(msg, names):
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", msg)
               for n in names)


def run_case(key, case):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out = case.call()
    except ALLOWED as exc:
        if case.check is not None and not case.may_refuse:
            raise AssertionError(f"{key}: valid input refused: {type(exc).__name__}: {exc}")
        assert _names_in(str(exc), case.names), (
            f"{key}: the message of {type(exc).__name__} names none of {case.names}: {exc}")
        COUNTS[key]["refused"] += 1
        return
    assert case.check is not None, f"{key}: invalid input silently accepted (names {case.names})"
    case.check(out)
    COUNTS[key]["valid"] += 1


# ----------------------------------------------------------------------------- mutations
def _bad_scalar(draw, kind="positive"):
    """A value no positive float / int >= 1 / bool parameter accepts."""
    pool = {"positive": [0, -1, -0.5, np.inf, np.nan, "1", True, None, [1.0], 1j],
            "int": [0, -1, 2.5, np.inf, "3", True, None, 1j],
            "bool": ["no", "yes", 0, 1, None, 0.0, "False"]}[kind]
    return draw(st.sampled_from(pool))


def _mutated_array(draw, a, nan_at=None, allow=()):
    """A random invalid version of the numeric array ``a`` (never valid for its use)."""
    a = np.asarray(a, dtype=float)
    kinds = ["complex", "str", "object", "nan", "inf", "ndim", "empty", "ragged", "datetime"]
    kind = draw(st.sampled_from([k for k in kinds if k not in allow]))
    idx = nan_at if nan_at is not None else (0,) * a.ndim
    if a.size == 0 and kind in ("object", "nan", "inf", "empty", "datetime"):
        kind = "complex"
    if kind == "complex":
        return a + 0.5j
    if kind == "str":
        return a.astype(str)
    if kind == "datetime":
        return np.full(a.shape, np.datetime64("2020-01-01")).tolist()
    if kind == "object":
        b = a.astype(object)
        b[idx] = draw(st.sampled_from([None, "x", 1 + 2j]))
        return b
    if kind in ("nan", "inf"):
        b = a.copy()
        b[idx] = np.nan if kind == "nan" else -np.inf
        return b
    if kind == "ndim":
        return a[..., None] if draw(st.booleans()) or a.ndim == 1 else a.reshape(-1)
    if kind == "empty":
        return np.zeros((0,) * a.ndim)
    rows = [list(r) for r in a.reshape(a.shape[0], -1)] if a.ndim > 1 and a.shape[0] else [[1.0]]
    return rows + [rows[0] + [1.0]]           # rows of different lengths


def _seed(draw):
    return np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))


def _close(a, b, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- tiny problems
@dataclass
class Problem:
    """A model, one example (x, y) and the list of every output's part vector (the oracle)."""

    model: Any
    x: Any
    y: Any
    outputs: Callable      # checked x -> list of (L,) 0/1 arrays
    nan_at: tuple          # where a NaN in x is on a part (not an ignored entry)
    y_bad: Callable        # draw -> an invalid y


def _sym(rng, n, d):
    x = rng.normal(size=(n, n, d))
    return x + x.transpose(1, 0, 2)


def _adjacency(n, pairs):
    y = np.zeros((n, n), dtype=int)
    for a, b in pairs:
        y[a, b] = y[b, a] = 1
    return y


def _graph_parts(g, pairs):
    mu = np.zeros(len(g.u))
    for a, b in pairs:
        mu[g.index[a, b]] = 1
    return mu


def _y_bad_matrix(y, allow=()):
    def bad(draw):
        kind = draw(st.sampled_from(["array", "fraction", "range"]))
        if kind == "fraction":
            return y * 0.5 + 0.25
        if kind == "range":
            return y + 2
        return _mutated_array(draw, y, allow=allow)
    return bad


def _bipartite_problem(draw):
    rng = _seed(draw)
    n, d = draw(st.integers(2, 3)), draw(st.integers(1, 2))
    y = np.eye(n, dtype=int)[rng.permutation(n)]
    return Problem(structures.BipartiteMatching(), rng.normal(size=(n, n, d)), y,
                   lambda g: [b.ravel().astype(float) for b in enumerate_bmatchings(n, n, 1, 1)],
                   (0, 1, 0), _y_bad_matrix(y))


def _graph_problem(draw, kind):
    rng = _seed(draw)
    n = 4 if kind == "perfect" else draw(st.integers(3, 4))
    x = _sym(rng, n, draw(st.integers(1, 2)))
    edges = [(a, b) for a in range(n) for b in range(a + 1, n)]
    if kind == "tree":
        perm = rng.permutation(n)
        pairs = [(min(perm[i], perm[rng.integers(i)]), max(perm[i], perm[rng.integers(i)]))
                 for i in range(1, n)]
        pairs = [(int(perm[i]), int(perm[rng.integers(i)])) for i in range(1, n)]
        model = structures.SpanningTree()
        outputs = lambda g: [m.astype(float) for m in enumerate_spanning_trees(n, g.u, g.v)]
    elif kind == "perfect":
        pairs = enumerate_perfect_matchings(range(n))[rng.integers(3)]
        model = structures.PerfectMatching()
        outputs = lambda g: [_graph_parts(g, m) for m in enumerate_perfect_matchings(range(n))]
    else:
        all_m = enumerate_matchings(n, edges)
        pairs = all_m[rng.integers(len(all_m))]
        model = structures.Matching()
        outputs = lambda g: [_graph_parts(g, m) for m in enumerate_matchings(n, edges)]
    y = _adjacency(n, pairs)
    return Problem(model, x, y, outputs, (0, 1, 0), _y_bad_matrix(y, allow=("nan",)
                                                                     if False else ()))


def _tree_example(rng, n, d_v=2, d_e=1):
    par = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    return {"node_features": rng.normal(size=(n, d_v)),
            "edge_features": rng.normal(size=(n - 1, d_e)), "parents": par}


def _bad_labels(draw, y, k, allow=("ragged",)):
    """A random invalid version of the label vector ``y`` over ``0..k-1``: a label out of
    range or negative, fractional, one label too many, or a mutated array."""
    kind = draw(st.sampled_from(["range", "negative", "fraction", "length", "array"]))
    if kind == "range":
        return y + k
    if kind == "negative":
        return y - k
    if kind == "fraction":
        return y + 0.5
    if kind == "length":
        return np.append(y, 0)
    return _mutated_array(draw, y, allow=allow)


def _tree_problem(draw):
    rng = _seed(draw)
    n, k = draw(st.integers(2, 3)), draw(st.integers(2, 3))
    model = structures.TreeLabeling(k, loss=draw(st.sampled_from(["zero_one", "absolute"])))
    y = rng.integers(0, k, n)

    def outputs(ex):
        return [model.encode(ex, np.array(lab)) for lab in itertools.product(range(k), repeat=n)]

    def y_bad(draw):
        return _bad_labels(draw, y, k)
    return Problem(model, _tree_example(rng, n), y, outputs, (0, 0), y_bad)


PROBLEMS = {"BipartiteMatching": _bipartite_problem,
            "Matching": lambda d: _graph_problem(d, "matching"),
            "PerfectMatching": lambda d: _graph_problem(d, "perfect"),
            "SpanningTree": lambda d: _graph_problem(d, "tree"),
            "TreeLabeling": _tree_problem}


def _like(x, rng):
    """Another example with the shapes of ``x`` (new random features)."""
    if isinstance(x, dict):
        return {**x, "node_features": rng.normal(size=np.shape(x["node_features"])),
                "edge_features": rng.normal(size=np.shape(x["edge_features"]))}
    new = rng.normal(size=x.shape)
    return new + new.transpose(1, 0, 2) if np.allclose(x, x.transpose(1, 0, 2)) else new


def _argmax(outputs, s):
    vals = [float(s @ mu) for mu in outputs]
    return outputs[int(np.argmax(vals))]


def _assert_best(mu, outputs, s, tol=1e-7):
    """``mu`` maximizes ``s . mu`` over ``outputs``; equal to the brute-force argmax when that
    is unique (learned scores can tie, e.g. all zero when the optimum is ``w = 0``)."""
    vals = np.array([float(s @ o) for o in outputs])
    best, scale = vals.max(), tol * (1.0 + np.abs(vals).max())
    assert float(s @ np.asarray(mu, dtype=float)) >= best - scale, (mu, vals)
    if np.sum(vals >= best - scale) == 1:
        _close(mu, outputs[int(np.argmax(vals))])


def _mutated_x(draw, p):
    if isinstance(p.x, dict):
        key = draw(st.sampled_from(["node_features", "edge_features", "parents", "missing"]))
        x = dict(p.x)
        if key == "missing":
            del x["parents"]
            return x, ("x", "X[0]", "parents")
        if key == "parents":
            par = np.asarray(p.x["parents"])          # same length: only parents is wrong
            x["parents"] = draw(st.sampled_from([np.zeros_like(par), np.append(par[:-1], 99),
                                                 par + 0.5, np.full(len(par), -1)
                                                 if len(par) > 1 else par[None]]))
            return x, ("parents",)
        rows = len(p.x[key])                     # a "ragged" one-row array is a valid (1, d)
        # a one-node tree may give its (absent) edge features as [] or (0, d_e)
        one_node = key == "edge_features" and len(p.x["parents"]) == 1
        allow = (("ragged",) if rows <= 1 else ()) + \
            (("empty", "ndim") if rows == 0 or one_node else ())
        x[key] = _mutated_array(draw, p.x[key], allow=allow)
        return x, (key,)
    return _mutated_array(draw, p.x, nan_at=p.nan_at), ("x", "X")


def _structure_entry(name):
    def draw_case(draw):
        p = PROBLEMS[name](draw)
        mode = draw(st.sampled_from(["valid", "valid", "x", "y", "param"]))
        if mode == "x":
            x, names = _mutated_x(draw, p)
            return Case(lambda: p.model.features(p.model.check_x(x)), names=names)
        if mode == "y":
            y = p.y_bad(draw)          # checked where outputs enter: prepare (encode + polytope)
            need = "minmax" in p.model.formulations
            return Case(lambda: prepare(p.model, [p.x], [y], need_polytopes=need),
                        names=("y", "Y[0]"))
        if mode == "param":
            params = {"BipartiteMatching": ["R", "P"],
                      "TreeLabeling": ["n_labels", "loss", "normalize_weights"]}.get(name)
            if params is None:      # no hyper-parameters: a wrong keyword
                return Case(lambda: type(p.model)(bogus=1), names=("bogus", "arguments"))
            param = draw(st.sampled_from(params))
            bad = _bad_scalar(draw, "bool" if param == "normalize_weights" else "int")
            if param == "loss":
                bad = draw(st.sampled_from(["hinge", -np.ones((2, 2)), np.ones((5, 5))]))
            model = type(p.model)(**{**_params(p.model), param: bad})
            return Case(lambda: model.features(model.check_x(p.x)), names=(param, "loss matrix"))
        rng = _seed(draw)

        def call():
            g = p.model.check_x(p.x)
            s = rng.normal(size=p.model.n_parts(g))
            mu = p.model.inference_parts(g, s)
            if mu is None:
                mu = p.model.encode(g, p.model.inference(g, s))
            return g, s, mu, p.model.encode(g, p.y)

        def check(out):
            g, s, mu, mu_y = out
            outs = p.outputs(g)
            _close(mu, _argmax(outs, s))
            assert any(np.array_equal(mu_y, o) for o in outs)
        return Case(call, check)
    return Entry(draw_case, examples=12)


def _params(model):
    import inspect
    return {k: getattr(model, k) for k in inspect.signature(type(model)).parameters}


# ----------------------------------------------------------------------------- learners
def _primal(model, X, Y, w, C, outputs):
    """``1/2 |w|^2 + C sum_i hinge_i(w)`` with brute-force hinges (losses from the model's
    Hamming-type part loss ``d + c . mu``)."""
    total = 0.0
    for x, y in zip(X, Y):
        g = model.check_x(x)
        s = np.asarray(model.features(g) @ w).ravel()
        c, d = model.loss_coefficients(g, y)
        mt = model.encode(g, y)
        # score difference plus loss: exactly 0 at the truth (s . mu + d + c . mu - s . mt
        # rounds to about 1e-16, which C = 1e20 makes a hinge of 1e4, of either sign)
        total += max(float(s @ mu - s @ mt) + float(d + c @ mu) for mu in outputs(g))
    return 0.5 * float(w @ w) + C * total


LEARNER_PARAMS = {
    "MaxMarginLearner": {"C": "positive", "solver": "solver", "solver_opts": "opts",
                         "dual": "bool", "formulation": "choice"},
    "CuttingPlaneLearner": {"C": "positive", "tol": "positive", "max_iter": "int",
                            "one_slack": "bool", "solver_opts": "opts", "warm_start": "bool"},
    "FrankWolfeLearner": {"C": "positive", "tol": "positive", "max_iter": "int",
                          "pairwise": "bool", "random_state": "seed", "batch_size": "int",
                          "warm_start": "bool"},
    "SubgradientLearner": {"C": "positive", "tol": "positive", "max_iter": "int",
                           "averaging": "bool", "random_state": "seed", "batch_size": "int",
                           "warm_start": "bool"},
}


def _bad_param(draw, kind):
    if kind in ("positive", "int", "bool"):
        return _bad_scalar(draw, kind)
    return draw(st.sampled_from({"solver": ["NOPE", 3, ""], "opts": [["verbose"], "x", 3],
                                 "choice": ["magic", None, 1], "seed": [-1, 1.5, "0"]}[kind]))


def _learner_entry(name, structures_=("BipartiteMatching", "TreeLabeling"), exact=True,
                   modes=None, examples=6):
    cls = getattr(structlp, name)

    def draw_case(draw):
        struct = draw(st.sampled_from(structures_))
        probs = [PROBLEMS[struct](draw)]
        model, X, Y = probs[0].model, [probs[0].x], [probs[0].y]
        if draw(st.booleans()):           # a second example of the same shape
            X.append(_like(probs[0].x, _seed(draw)))
            Y.append(probs[0].y)
        C = draw(st.sampled_from([0.1, 1.0, 10.0]))
        opts = {} if name == "MaxMarginLearner" else {"max_iter": 60}
        mode = draw(st.sampled_from(modes or [
            "valid", "valid", "valid", "param", "keyword", "x", "y", "length", "unfitted",
            "scale", "choose_k"]))
        if mode == "scale":
            return _scale_case(draw, cls, probs[0], X, Y, C, opts, exact)
        if mode == "choose_k":
            return _choose_k_case(draw, cls, opts)
        if mode == "param":
            param = draw(st.sampled_from(sorted(LEARNER_PARAMS[name])))
            bad = _bad_param(draw, LEARNER_PARAMS[name][param])
            est = cls(model, **{**opts, "C": C, param: bad})
            return Case(lambda: est.fit(X, Y), names=(param,))
        if mode == "x":
            xb, names = _mutated_x(draw, probs[0])
            return Case(lambda: cls(model, C=C, **opts).fit([xb] + X[1:], Y),
                        names=names + ("X[0]",))
        if mode == "y":
            yb = probs[0].y_bad(draw)
            return Case(lambda: cls(model, C=C, **opts).fit(X, [yb] + Y[1:]),
                        names=("y", "Y[0]", "y_true"))
        if mode == "length":
            return Case(lambda: cls(model, C=C, **opts).fit(X, Y + Y), names=("X", "Y"))
        if mode == "unfitted":
            return Case(lambda: cls(model, C=C, **opts).predict(X), names=("fit",))
        if mode == "keyword":
            def call():
                return cls(model, C=C, **opts).fit(X, Y).predict(X, bogus=1)
            return Case(call, names=("bogus",))

        def call():
            est = cls(model, C=C, **opts).fit(X, Y)
            return est, est.predict(X), est.decision_scores(X)

        def check(out):
            est, pred, scores = out
            for x, p, s in zip(X, pred, scores):
                g = model.check_x(x)
                _assert_best(model.encode(g, p), probs[0].outputs(g), s)
            if exact:
                primal = _primal(model, X, Y, est.coef_, C, probs[0].outputs)
                _close(est.objective_, primal, rtol=1e-4, atol=1e-5)
        return Case(call, check)
    return Entry(draw_case, examples=examples)


def _check_exact(model, X, Y, C, outputs, exact):
    """``check`` of a fit: finite ``objective_``, equal to the brute-force objective at
    ``coef_`` when ``exact``."""
    def check(est):
        assert np.isfinite(est.objective_) and np.all(np.isfinite(est.coef_)), est.objective_
        if exact:
            _close(est.objective_, _primal(model, X, Y, est.coef_, C, outputs),
                   rtol=1e-4, atol=1e-5)
    return check


def _scale_case(draw, cls, p, X, Y, C, opts, exact):
    """Features or C at the edge of float64 (issue 37: a hang, NaN or inf objectives):
    refused by name (``X[i]``, ``C``), or fitted with a finite objective equal to the
    brute-force one at ``coef_``; never a hang, never a non-finite objective."""
    e = draw(st.sampled_from([300, 20, 160, 100, 307, 50, 200, 140, 151]))
    # the joint QP's conic solvers stop far below float64's range: a SolverError naming
    # C and the features (their scale) is its correct outcome there
    qp = cls.__name__ == "MaxMarginLearner"
    if draw(st.booleans()):                          # the features times 10^e
        def scaled(x):
            if isinstance(x, dict):
                return {**x, "node_features": np.asarray(x["node_features"]) * 10.0 ** e}
            return np.asarray(x) * 10.0 ** e
        Xs = [scaled(x) for x in X]
        # from 1e160 on the squares overflow: refused, naming the example
        return Case(lambda: cls(p.model, C=C, **opts).fit(Xs, Y),
                    None if e >= 160 else _check_exact(p.model, Xs, Y, C, p.outputs,
                                                       exact and e <= 100),
                    names=tuple(f"X[{i}]" for i in range(len(X))) + ("features",) * qp,
                    may_refuse=e > 140 or qp)
    big = 10.0 ** e                                  # C = 10^e: refused from 1e160 on
    return Case(lambda: cls(p.model, C=big, **opts).fit(X, Y),
                None if e >= 160 else _check_exact(p.model, X, Y, big, p.outputs,
                                                   exact and e <= 20),
                names=("C",), may_refuse=e > 140 or qp)


def _choose_k_case(draw, cls, opts):
    """The StructuredModel docstring's ChooseK, with its decoder or with the inference LP,
    at C = 1e8 (issue 37: FrankWolfeLearner reported objective_ = 13.81 where the objective
    at its coef_ was 20.50): ``objective_`` is the brute-force objective at ``coef_``."""
    import cvxpy as cp
    k = 2

    class ChooseK(structlp.StructuredModel):
        def n_parts(self, x):
            return x.shape[0]

        def features(self, x):
            return x

        def constraints(self, x, mu):
            return [cp.sum(mu) == k, mu >= 0, mu <= 1]

        def polytope_key(self, x):
            return x.shape[0]

    class ChooseKDecoded(ChooseK):
        def inference(self, x, scores):
            y = np.zeros(len(scores), dtype=int)
            y[np.argsort(-scores)[:k]] = 1
            return y

    rng = _seed(draw)
    n, d, m = draw(st.integers(3, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    X = [rng.normal(size=(n, d)) for _ in range(m)]
    Y = [np.isin(np.arange(n), rng.choice(n, k, replace=False)).astype(int) for _ in X]
    model = draw(st.sampled_from([ChooseK, ChooseKDecoded]))()
    C = draw(st.sampled_from([1.0, 1e4, 1e8]))

    def outputs(x):
        return [np.isin(np.arange(n), S).astype(float)
                for S in itertools.combinations(range(n), k)]

    def check(est):
        _close(est.objective_, _primal(model, X, Y, est.coef_, C, outputs), rtol=1e-6,
               atol=1e-8)
    if cls.__name__ == "MaxMarginLearner":       # a QP solver's tolerance: not exact at 1e8
        C = 1.0
    return Case(lambda: cls(model, C=C, **opts).fit(X, Y), check)


def _polytope(draw):
    rng = _seed(draw)
    n = draw(st.integers(1, 4))
    A = rng.normal(size=(draw(st.integers(1, 3)), n))
    b = np.abs(rng.normal(size=A.shape[0])) + 0.1
    mode = draw(st.sampled_from(["valid", "valid", "A", "b", "n_parts", "lb"]))
    if mode == "A":
        return Case(lambda: structlp.Polytope(A=_mutated_array(draw, A), b=b), names=("A", "b"))
    if mode == "b":
        bb = draw(st.sampled_from([np.append(b, 1.0), b + 0.5j, np.full_like(b, np.nan),
                                   b.astype(str)]))
        return Case(lambda: structlp.Polytope(A=A, b=bb), names=("b",))
    if mode == "n_parts":
        bad = draw(st.sampled_from([-1, 2.5, np.inf, "3", True, 1j]))
        return Case(lambda: structlp.Polytope(n_parts=bad),
                    names=("n_parts",))
    if mode == "lb":
        return Case(lambda: structlp.Polytope(A=A, b=b, lb=np.ones(n), ub=np.zeros(n)),
                    names=("lower bound",))
    dense = draw(st.booleans())
    mu = (rng.random(n) < 0.5).astype(float)

    def check(P):
        assert P.n_parts == n
        assert P.contains(mu) == bool(np.all(A @ mu <= b + 1e-7))
    return Case(lambda: structlp.Polytope(A=A.tolist() if dense else A, b=b), check)


def _structured_model(draw):
    rng = _seed(draw)
    L = draw(st.integers(2, 4))

    class Pick(structlp.StructuredModel):
        def n_parts(self, x):
            return L

        def features(self, x):
            return x

        def constraints(self, x, mu):
            import cvxpy as cp
            return [cp.sum(mu) == 1, mu >= 0, mu <= 1]

    class Broken(Pick):
        def inference(self, x, scores):
            return draw(st.sampled_from([np.full(L, np.nan), np.ones(L + 1), np.full(L, 0.5)]))

    X = [rng.normal(size=(L, 2)) for _ in range(2)]
    Y = [np.eye(L, dtype=int)[rng.integers(L)] for _ in X]
    if draw(st.booleans()):
        return Case(lambda: structlp.CuttingPlaneLearner(Broken(), max_iter=5).fit(X, Y),
                    names=("Broken.inference",))

    def check(est):
        for x, p, s in zip(X, est.predict(X), est.decision_scores(X)):
            assert p.sum() == 1 and s[int(np.argmax(p))] >= s.max() - 1e-6   # LP tolerance
    return Case(lambda: structlp.CuttingPlaneLearner(Pick(), max_iter=30).fit(X, Y), check)


def _installed_solvers(draw):
    if draw(st.booleans()):
        return Case(lambda: structlp.installed_solvers(draw(st.integers())), names=("positional",
                                                                                    "argument"))
    return Case(structlp.installed_solvers, lambda out: (
        isinstance(out, list) and "CLARABEL" in out) or pytest.fail(str(out)))


def _maximize(draw):
    """``structlp.maximize``: the best output under random scores equals the brute-force
    argmax over every output; bad scores (wrong length, NaN, complex, not one per example)
    are refused naming ``scores``."""
    name = draw(st.sampled_from(sorted(PROBLEMS)))
    p = PROBLEMS[name](draw)
    rng = _seed(draw)
    g = p.model.check_x(p.x)
    s = rng.normal(size=p.model.n_parts(g))
    mode = draw(st.sampled_from(["valid", "valid", "length", "mutated", "count", "X"]))
    if mode == "length":
        return Case(lambda: structlp.maximize(p.model, [p.x], [np.append(s, 0.0)]),
                    names=("scores[0]",))
    if mode == "mutated":
        bad = _mutated_array(draw, s, allow=("ndim",) if s.size == 1 else ())
        return Case(lambda: structlp.maximize(p.model, [p.x], [bad]), names=("scores[0]",))
    if mode == "count":
        return Case(lambda: structlp.maximize(p.model, [p.x], [s, s]), names=("scores",))
    if mode == "X":
        return Case(lambda: structlp.maximize(p.model, p.x if name != "TreeLabeling" else 3, [s]),
                    names=("X", "x", "scores", "examples"))

    def check(out):
        outputs, mus = out
        _assert_best(mus[0], p.outputs(g), s)
        np.testing.assert_array_equal(p.model.encode(g, outputs[0]), mus[0])
    return Case(lambda: structlp.maximize(p.model, [p.x], [s]), check)


_DASK_CLIENT = []


def _dask_client():
    """One in-process dask cluster (threads, no worker processes) for the whole suite."""
    if not _DASK_CLIENT:
        distributed = pytest.importorskip("distributed")
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                           dashboard_address=None)
        _DASK_CLIENT.append(distributed.Client(cluster, set_as_default=False))
    return _DASK_CLIENT[0]


def _sharded(draw):
    """``ShardedFrankWolfeLearner`` on a dask bag: ``objective_`` is the exact objective of
    ``coef_`` (brute-force hinges over every output), its dual value is below it, and its
    predictions are the brute-force argmax; bad parameters, items that are not ``(x, y)``
    pairs and a missing client are refused by name."""
    db = pytest.importorskip("dask.bag")
    struct = draw(st.sampled_from(["BipartiteMatching", "TreeLabeling"]))
    p = PROBLEMS[struct](draw)
    model, X, Y = p.model, [p.x, _like(p.x, _seed(draw))], [p.y, p.y]
    C = draw(st.sampled_from([0.1, 1.0]))
    mode = draw(st.sampled_from(["valid", "valid", "param", "items", "y", "client"]))
    cls = structlp.ShardedFrankWolfeLearner
    bag = db.from_sequence(list(zip(X, Y)), npartitions=2)
    if mode == "client":
        return Case(lambda: cls(model, C=C, client="tcp://127.0.0.1:1").fit(bag),
                    names=("client",))
    client = _dask_client()
    if mode == "param":
        param = draw(st.sampled_from(["C", "tol", "max_iter", "local_epochs"]))
        bad = _bad_scalar(draw, "int" if param in ("max_iter", "local_epochs") else "positive")
        return Case(lambda: cls(model, client=client, **{"C": C, param: bad}).fit(bag),
                    names=(param,))
    if mode == "items":
        return Case(lambda: cls(model, client=client, C=C).fit(
            db.from_sequence(X, npartitions=2)), names=("X", "pair"))
    if mode == "y":
        return Case(lambda: cls(model, client=client, C=C).fit(bag, Y), names=("y",))

    def call():
        est = cls(model, client=client, C=C, tol=1e-6, max_iter=200, random_state=0).fit(bag)
        return est, est.predict(X), est.decision_scores(X)

    def check(out):
        est, pred, scores = out
        for x, yp, s in zip(X, pred, scores):
            g = model.check_x(x)
            _assert_best(model.encode(g, yp), p.outputs(g), s)
        primal = _primal(model, X, Y, est.coef_, C, p.outputs)
        _close(est.objective_, primal, rtol=1e-6, atol=1e-8)
        assert est.dual_objective_ <= est.objective_ + 1e-9
    return Case(call, check)


def _exception_entry(cls):
    def draw_case(draw):
        msg = draw(st.text(min_size=1, max_size=20))

        def check(exc):
            assert str(exc) == msg and issubclass(cls, Exception)
            if issubclass(cls, Warning):
                assert issubclass(cls, UserWarning)
            elif cls is not structlp.BackendError:
                assert issubclass(cls, StructlpError)
        return Case(lambda: cls(msg), check)
    return Entry(draw_case, examples=3)


# ----------------------------------------------------------------------------- AGM
def _game_entry(fn, loss):
    def draw_case(draw):
        rng = _seed(draw)
        k = draw(st.integers(2, 4))
        a = rng.normal(size=k)
        w = draw(st.sampled_from([0.5, 1.0, 2.0]))
        mode = draw(st.sampled_from(["valid", "valid", "a", "weight"]))
        call_fn = (lambda a_, w_: fn(a_, w_)) if fn is not agm.game_value else (
            lambda a_, w_: agm.game_value(a_, loss, w_))
        if mode == "a":
            return Case(lambda: call_fn(_mutated_array(draw, a, allow=("ndim",)), w),
                        names=("a",))
        if mode == "weight":
            return Case(lambda: call_fn(a, draw(st.sampled_from([-1.0, np.nan, "1", 1j]))),
                        names=("weight",))

        def check(out):
            value, r = out[0], out[1]
            L = w * agm.loss_matrix(loss, k)
            # oracle: the value of the adversary's strategy r against the best predictor
            # and the brute-force maximum over a fine grid of the 2-simplex (k = 2)
            assert np.all(r >= -1e-9) and abs(r.sum() - 1) < 1e-7
            _close(value, a @ r + (L @ r).min(), atol=1e-6)
            for q in np.eye(k):
                assert value >= a @ q + (L @ q).min() - 1e-7
        return Case(lambda: call_fn(a, w), check)
    return Entry(draw_case, examples=12)


def _loss_matrix(draw):
    k = draw(st.integers(1, 5))
    name = draw(st.sampled_from(agm.game.NAMED_LOSSES))
    if draw(st.booleans()):
        return Case(lambda: agm.loss_matrix(name, _bad_scalar(draw, "int")), names=("n_labels",))
    oracle = {"zero_one": lambda i, j: float(i != j), "absolute": lambda i, j: abs(i - j),
              "squared": lambda i, j: (i - j) ** 2}[name]
    return Case(lambda: agm.loss_matrix(name, k),
                lambda L: _close(L, [[oracle(i, j) for j in range(k)] for i in range(k)]))


def _recover_pairwise(draw):
    rng = _seed(draw)
    k1, k2 = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rp, rc, B = rng.dirichlet(np.ones(k1)), rng.dirichlet(np.ones(k2)), rng.normal(size=(k1, k2))
    method = draw(st.sampled_from(["emd", "lp"]))
    mode = draw(st.sampled_from(["valid", "valid", "r_parent", "B", "method"]))
    if mode == "r_parent":
        bad = draw(st.sampled_from([rp * 2, -rp, rp + 0.5j, np.array([]), rp.astype(str)]))
        return Case(lambda: agm.recover_pairwise(bad, rc, B, method), names=("r_parent",))
    if mode == "B":
        return Case(lambda: agm.recover_pairwise(rp, rc, _mutated_array(draw, B), method),
                    names=("B",))
    if mode == "method":
        return Case(lambda: agm.recover_pairwise(rp, rc, B, "magic"), names=("method",))
    # oracle: enumerate the vertices' value bound via scipy's LP
    from scipy.optimize import linprog

    def check(Q):
        A_eq = np.vstack([np.kron(np.eye(k1), np.ones(k2)), np.kron(np.ones(k1), np.eye(k2))])
        res = linprog(-B.ravel(), A_eq=A_eq, b_eq=np.concatenate([rp, rc]), bounds=(0, None))
        _close(Q.sum(axis=1), rp, atol=1e-6)
        _close(Q.sum(axis=0), rc, atol=1e-6)
        _close(np.sum(Q * B), -res.fun, atol=1e-6)
    return Case(lambda: agm.recover_pairwise(rp, rc, B, method), check)


def _tree_learner_entry(cls):
    def draw_case(draw):
        rng = _seed(draw)
        k = draw(st.integers(2, 3))
        X = [_tree_example(rng, draw(st.integers(1, 3))) for _ in range(draw(st.integers(1, 2)))]
        Y = [rng.integers(0, k, len(x["parents"])) for x in X]
        quick = {"max_epochs": 3} if cls is agm.AdversarialGraphicalModel else {"max_iter": 30}
        mode = draw(st.sampled_from(["valid", "valid", "param", "x", "y", "unfitted"]))
        if mode == "param":
            params = (["n_labels", "reg", "max_epochs", "random_state", "average", "method",
                       "normalize_weights", "batch_size", "warm_start"]
                      if cls is agm.AdversarialGraphicalModel
                      else ["n_labels", "reg", "max_iter", "loss", "warm_start"])
            param = draw(st.sampled_from(params))
            kind = {"average": "bool", "normalize_weights": "bool", "max_epochs": "int",
                    "warm_start": "bool",
                    "max_iter": "int", "batch_size": "int", "n_labels": "int"}.get(param,
                                                                                   "positive")
            bad = {"random_state": -1, "method": "magic", "loss": "hinge",
                   "reg": draw(st.sampled_from([-1.0, np.nan, "1", None]))}.get(
                param, _bad_scalar(draw, kind))
            return Case(lambda: cls(**{"n_labels": k, **quick, param: bad}).fit(X, Y),
                        names=(param,))
        if mode == "x":
            p = Problem(None, X[0], Y[0], None, (0, 0), None)
            xb, names = _mutated_x(draw, p)
            return Case(lambda: cls(k, **quick).fit([xb] + X[1:], Y), names=names + ("X[0]",))
        if mode == "y":
            yb = draw(st.sampled_from([Y[0] + k, Y[0] - k, Y[0] + 0.5, np.append(Y[0], 0),
                                       Y[0] + 0j]))
            return Case(lambda: cls(k, **quick).fit(X, [yb] + Y[1:]), names=("Y[0]",))
        if mode == "unfitted":
            return Case(lambda: cls(k).predict(X), names=("fit",))

        def check(est):
            pred = est.predict(X)
            for x, p in zip(X, pred):
                assert p.shape == (len(x["parents"]),) and p.min() >= 0 and p.max() < k
            if cls is agm.TreeCRF:
                for P in est.predict_proba(X):
                    _close(P.sum(axis=1), np.ones(len(P)))
        return Case(lambda: cls(k, **quick).fit(X, Y), check)
    return Entry(draw_case, examples=6)


def _chain(draw):
    rng = _seed(draw)
    n = draw(st.integers(1, 4))
    V, E = rng.normal(size=(n, 2)), rng.normal(size=(n - 1, 1))

    def check(x):
        ex = agm.check_tree_example(x)
        assert ex.parents.tolist() == list(range(-1, n - 1))
    if draw(st.booleans()) and n > 1:
        x = agm.chain(_mutated_array(draw, V), E)
        return Case(lambda: agm.check_tree_example(x), names=("node_features", "x"))
    return Case(lambda: agm.chain(V, E), check)


def _check_parents(draw):
    rng = _seed(draw)
    n = draw(st.integers(1, 5))
    par = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
    perm = rng.permutation(n)
    inv = np.argsort(perm)
    par = np.array([-1 if par[perm[j]] < 0 else inv[par[perm[j]]] for j in range(n)])
    mode = draw(st.sampled_from(["valid", "valid", "cycle", "roots", "range", "dtype"]))
    if mode != "valid":
        bad = {"cycle": np.where(par == -1, 0 if n > 1 else -2, par),
               "roots": np.full(n + 1, -1), "range": np.append(par, n + 5),
               "dtype": draw(st.sampled_from([par + 0.5, par.astype(str), par + 0j, [],
                                              [[-1]]]))}[mode]
        return Case(lambda: agm.check_parents(bad), names=("parents",))

    def check(out):
        p, order = out
        assert sorted(order.tolist()) == list(range(n)) and order[0] == int(np.argmin(par))
        pos = {int(j): i for i, j in enumerate(order)}
        assert all(pos[int(p[j])] < pos[j] for j in range(n) if p[j] >= 0)
    return Case(lambda: agm.check_parents(par), check)


def _check_tree_example(draw):
    rng = _seed(draw)
    x = _tree_example(rng, draw(st.integers(1, 4)))
    if draw(st.booleans()):
        xb, names = _mutated_x(draw, Problem(None, x, None, None, (0, 0), None))
        return Case(lambda: agm.check_tree_example(xb), names=names)
    return Case(lambda: agm.check_tree_example(x),
                lambda ex: _close(ex.node_features, x["node_features"]))


def _max_sum(draw):
    from agm_oracles import brute_force_argmax
    rng = _seed(draw)
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    ex = agm.check_tree_example(_tree_example(rng, n))
    b, B = rng.normal(size=(n, k)), rng.normal(size=(n - 1, k, k))
    mode = draw(st.sampled_from(["valid", "valid", "b", "B", "ex", "labels"]))
    if mode == "b":
        return Case(lambda: agm.max_sum(ex, _mutated_array(draw, b), B), names=("b",))
    if mode == "labels":       # node and edge tables of different label counts (issue 37)
        other = draw(st.sampled_from([kk for kk in (1, 2, 3, 4) if kk != k]))
        return Case(lambda: agm.max_sum(ex, b, rng.normal(size=(n - 1, other, other))),
                    names=(f"b has {k} labels",))
    if mode == "B":
        bad = draw(st.sampled_from([B[..., :1] if k > 1 else B[:, :, :0], B + 0.5j,
                                    np.full((n, k, k), np.nan)]))
        return Case(lambda: agm.max_sum(ex, b, bad), names=("B",))
    if mode == "ex":
        return Case(lambda: agm.max_sum(draw(st.sampled_from(["tree", 3, None])), b, B),
                    names=("ex",))

    def check(out):
        y, val = out
        _, best = brute_force_argmax(ex, b, B)
        _close(val, best)
    return Case(lambda: agm.max_sum(ex, b, B), check)


# ----------------------------------------------------------------------------- sequence
SEQ_LOSSES = {
    "EditDistance": (seq.EditDistance, seq_oracles.edit_distance, ["sub", "ins", "dele"]),
    "SmithWaterman": (seq.SmithWaterman, seq_oracles.sw_loss, ["match", "mismatch", "gap"]),
    "NGramLoss": (seq.NGramLoss, seq_oracles.ngram_loss, ["n", "smoothing"]),
    "HammingLoss": (seq.HammingLoss, seq_oracles.hamming, []),
    "ZeroLoss": (seq.ZeroLoss, lambda y, r: 0.0, []),
}


def _bad_sequence(draw, y, k):
    return draw(st.sampled_from([np.append(y, k), np.append(y, -1), np.asarray(y) + 0.5,
                                 [], np.asarray(y)[None, :].repeat(2, 0), np.asarray(y) + 0j,
                                 np.asarray(y).astype(str)]))


def _seq_loss_entry(name):
    cls, oracle, params = SEQ_LOSSES[name]

    def draw_case(draw):
        rng = _seed(draw)
        k, l = draw(st.integers(2, 3)), draw(st.integers(1, 4))
        m = l if name == "HammingLoss" else draw(st.integers(1, 4))
        y, ref = rng.integers(0, k, l), rng.integers(0, k, m)
        mode = draw(st.sampled_from(["valid", "valid", "param", "y", "values"]))
        if mode == "param":
            if not params:
                return Case(lambda: cls(bogus=1), names=("bogus",))
            param = draw(st.sampled_from(params))
            bad = draw(st.sampled_from([np.nan, "1", True, None]
                                       + ([-1] if param not in ("mismatch", "gap") else [5])
                                       + ([0.5] if param != "smoothing" else [0.0])))
            return Case(lambda: cls(**{param: bad}), names=(param,))
        if mode == "y":
            return Case(lambda: cls()(_bad_sequence(draw, y, k), ref, alphabet_size=k),
                        names=("y",))
        if mode == "values":
            return Case(lambda: cls().values(np.asarray(_bad_sequence(draw, y, k))[None], ref,
                                             alphabet_size=k), names=("Y",))
        Y = rng.integers(0, k, (3, l))

        def check(out):
            v, vs = out
            _close(v, oracle(list(y), list(ref)))
            _close(vs, [oracle(list(r), list(ref)) for r in Y])
        return Case(lambda: (cls()(y, ref, alphabet_size=k), cls().values(Y, ref, k)), check)
    return Entry(draw_case, examples=12)


def _sequence_loss_base(draw):
    if draw(st.booleans()):
        return Case(lambda: seq.SequenceLoss()([0, 1], [0, 1]), names=("dynamic_program",
                                                                      "SequenceLoss"))
    return Case(lambda: isinstance(seq.EditDistance(), seq.SequenceLoss), lambda ok: ok or
                pytest.fail("EditDistance is not a SequenceLoss"))


def _psi_bigram(k):
    return lambda y: seq_oracles.bigram_counts(list(y), k)


def _features_entry(name):
    def draw_case(draw):
        rng = _seed(draw)
        k, l = draw(st.integers(2, 3)), draw(st.integers(1, 4))
        y = rng.integers(0, k, l)
        if name == "BigramFeatures":
            f, x, oracle = seq.BigramFeatures(k), None, _psi_bigram(k)(y)
            bad = lambda: seq.BigramFeatures(_bad_scalar(draw, "int"))
            names = ("alphabet_size",)
        elif name == "EmissionFeatures":
            V = draw(st.integers(1, 3))
            f, x = seq.EmissionFeatures(k, V), rng.integers(0, V, l)
            oracle = np.zeros(f.n_features)
            for s in range(l):
                oracle[(x[s]) * k + y[s]] += 1
            if draw(st.booleans()):
                return Case(lambda: f.joint_feature(_bad_sequence(draw, x, V), y), names=("x",))
            bad = lambda: seq.EmissionFeatures(k, _bad_scalar(draw, "int"))
            names = ("n_inputs",)
        elif name == "FunctionFeatures":
            f = seq.FunctionFeatures(lambda x, z, s: np.array([z[-1] == 0, len(z)], float), k,
                                     2, 2)
            x, oracle = None, np.array([float(np.sum(y == 0)), float(min(l, 1) + 2 * (l - 1))])
            bad = lambda: seq.FunctionFeatures(draw(st.sampled_from([None, 3, "psi"])), k, 2, 2)
            names = ("psi",)
        elif name == "StackedFeatures":
            f = seq.StackedFeatures([seq.BigramFeatures(k), seq.BigramFeatures(k)])
            x, oracle = None, np.tile(_psi_bigram(k)(y), 2)
            bad = lambda: seq.StackedFeatures(draw(st.sampled_from(
                [[], [3], [seq.BigramFeatures(k), seq.BigramFeatures(k + 1)]])))
            names = ("parts", "StackedFeatures")
        else:   # MarkovFeatures, the base class: used through a subclass
            f, x, oracle = seq.BigramFeatures(k), None, _psi_bigram(k)(y)
            bad = lambda: seq.MarkovFeatures().tables(None, 2)
            names = ()
            if draw(st.booleans()):
                return Case(lambda: isinstance(f, seq.MarkovFeatures), lambda ok: ok or
                            pytest.fail("not a MarkovFeatures"))
        mode = draw(st.sampled_from(["valid", "valid", "param", "y"]))
        if mode == "param" and names:
            return Case(bad, names=names)
        if mode == "y":
            return Case(lambda: f.joint_feature(x, _bad_sequence(draw, y, k)), names=("y",))
        return Case(lambda: f.joint_feature(x, y), lambda psi: _close(psi, oracle))
    return Entry(draw_case, examples=10)


def _seq_setup(draw, max_l=4):
    rng = _seed(draw)
    k, l = draw(st.integers(2, 3)), draw(st.integers(1, max_l))
    feats = seq.BigramFeatures(k)
    name = draw(st.sampled_from(sorted(SEQ_LOSSES)))
    loss = SEQ_LOSSES[name][0]()
    return rng, k, l, feats, loss, SEQ_LOSSES[name][1], rng.integers(0, k, l)


def _softmax_margin(draw, fn=None):
    rng, k, l, feats, loss, oracle, y = _seq_setup(draw)
    w = rng.normal(size=feats.n_features)
    method = draw(st.sampled_from(["automata", "naive"]))
    mode = draw(st.sampled_from(["valid", "valid", "w", "y_true", "method", "loss"]))
    call = fn or (lambda *a: seq.softmax_margin(*a, method=method))
    if mode == "w":
        wb = draw(st.sampled_from([w[:-1], w + 0.5j, w.astype(str), np.full_like(w, np.nan)]))
        return Case(lambda: call(wb, None, y, loss, feats), names=("w",))
    if mode == "y_true":
        return Case(lambda: call(w, None, _bad_sequence(draw, y, k), loss, feats),
                    names=("y_true",))
    if mode == "method":
        return Case(lambda: seq.softmax_margin(w, None, y, loss, feats, method="magic"),
                    names=("method",))
    if mode == "loss":
        return Case(lambda: call(w, None, y, "edit", feats), names=("loss",))
    v, g = seq_oracles.brute_force_softmax_margin(w, _psi_bigram(k), y, k, oracle)
    return Case(lambda: call(w, None, y, loss, feats),
                lambda out: (_close(out[0], v), _close(out[1], g, atol=1e-7)))


def _compile_example(draw, direct=False):
    rng, k, l, feats, loss, oracle, y = _seq_setup(draw)
    w = rng.normal(size=feats.n_features)
    if not direct and draw(st.booleans()):
        return Case(lambda: seq.compile_example(None, _bad_sequence(draw, y, k), loss, feats),
                    names=("y_true",))
    make = seq.CompiledExample if direct else seq.compile_example
    v, g = seq_oracles.brute_force_softmax_margin(w, _psi_bigram(k), y, k, oracle)
    return Case(lambda: make(None, y, loss, feats).value_and_grad(w),
                lambda out: (_close(out[0], v), _close(out[1], g, atol=1e-7)))


def _build_loss_automaton(draw, what="automaton"):
    rng, k, l, feats, loss, oracle, y = _seq_setup(draw)
    if isinstance(loss, seq.HammingLoss):
        length = l
    else:
        length = draw(st.integers(1, 4))
    mode = draw(st.sampled_from(["valid", "valid", "y_ref", "length", "alphabet_size",
                                 "max_states", "loss"]))
    if mode == "y_ref":
        return Case(lambda: seq.build_loss_automaton(loss, _bad_sequence(draw, y, k), length, k),
                    names=("y_ref",))
    if mode in ("length", "alphabet_size", "max_states"):
        args = {"length": length, "alphabet_size": k, "max_states": 10 ** 6}
        args[mode] = _bad_scalar(draw, "int")
        return Case(lambda: seq.build_loss_automaton(loss, y, **args), names=(mode,))
    if mode == "loss":
        return Case(lambda: seq.build_loss_automaton("edit", y, length, k), names=("loss",))
    Ys = list(itertools.product(range(k), repeat=length))
    if what == "automaton":
        return Case(lambda: seq.build_loss_automaton(loss, y, length, k),
                    lambda B: _close([B.log_weight(z) for z in Ys],
                                     [oracle(list(z), list(y)) for z in Ys]))
    theta = [rng.normal(size=k ** min(2, t + 1)) for t in range(length)]

    def check(out):
        z_best, val = out
        scores = [oracle(list(z), list(y)) + sum(theta[t][
            (z[t - 1] * k + z[t]) if t else z[0]] for t in range(length)) for z in Ys]
        _close(val, max(scores))
    return Case(lambda: seq.Lattice(seq.build_loss_automaton(loss, y, length, k), k, 2)
                .best_path(theta), check)


def _brute_viterbi(w, k, l, loss=None, y_true=None):
    best, arg = -np.inf, None
    for z in itertools.product(range(k), repeat=l):
        s = float(w @ seq_oracles.bigram_counts(list(z), k)) + (
            loss(list(z), list(y_true)) if loss else 0.0)
        if s > best:
            best, arg = s, np.array(z)
    return arg, best


def _viterbi_entry(kind):
    def draw_case(draw):
        rng, k, l, feats, loss, oracle, y = _seq_setup(draw)
        w = rng.normal(size=feats.n_features)
        mode = draw(st.sampled_from(["valid", "valid", "w", "second", "features"]))
        fn = {"viterbi": lambda w_, a: seq.viterbi(w_, None, feats, length=a),
              "loss_augmented_viterbi": lambda w_, a: seq.loss_augmented_viterbi(
                  w_, None, a, loss, feats),
              "structured_hinge": lambda w_, a: seq.structured_hinge(w_, None, a, loss, feats)
              }[kind]
        second = l if kind == "viterbi" else y
        if mode == "w":
            wb = draw(st.sampled_from([w[:-1], w + 0.5j, w.astype(str)]))
            return Case(lambda: fn(wb, second), names=("w",))
        if mode == "second":
            bad = (_bad_scalar(draw, "int") if kind == "viterbi"
                   else _bad_sequence(draw, y, k))
            return Case(lambda: fn(w, bad), names=("length",) if kind == "viterbi"
                        else ("y_true",))
        if mode == "features":
            return Case(lambda: seq.viterbi(w, None, "bigram", length=l), names=("features",))
        if kind == "viterbi":
            z, _ = _brute_viterbi(w, k, l)
            return Case(lambda: fn(w, second), lambda out: np.testing.assert_array_equal(out, z))
        _, best = _brute_viterbi(w, k, l, oracle, y)
        true = float(w @ seq_oracles.bigram_counts(list(y), k))
        if kind == "loss_augmented_viterbi":
            return Case(lambda: fn(w, second), lambda out: _close(out[1], best))
        return Case(lambda: fn(w, second), lambda out: _close(out[0], best - true))
    return Entry(draw_case, examples=10)


def _seq_learner_entry(cls):
    def draw_case(draw):
        rng, k, l, feats, loss, oracle, _ = _seq_setup(draw, max_l=3)
        Y = [rng.integers(0, k, l) for _ in range(draw(st.integers(1, 2)))]
        X = [None] * len(Y)
        quick = {"max_iter": 30}
        mode = draw(st.sampled_from(["valid", "valid", "param", "y", "lengths", "unfitted"]))
        if mode == "param":
            param = draw(st.sampled_from(["max_iter", "tol", "warm_start"] + (
                ["C"] if cls is seq.SequenceSSVM else ["reg", "method"])))
            bad = "magic" if param == "method" else _bad_scalar(
                draw, {"max_iter": "int", "warm_start": "bool"}.get(param, "positive"))
            return Case(lambda: cls(loss, feats, **{**quick, param: bad}).fit(X, Y),
                        names=(param,))
        if mode == "y":
            return Case(lambda: cls(loss, feats, **quick).fit(X, [_bad_sequence(draw, Y[0], k)]
                                                              + Y[1:]), names=("y_true", "Y"))
        if mode == "lengths":
            return Case(lambda: cls(loss, feats, **quick).fit(X, Y).predict(
                X, lengths=[l] * (len(X) + 1)), names=("lengths",))
        if mode == "unfitted":
            return Case(lambda: cls(loss, feats).predict(X, lengths=[l] * len(X)),
                        names=("fit",))

        def check(est):
            pred = est.predict(X, lengths=[l] * len(X))
            for p in pred:
                z, _ = _brute_viterbi(est.coef_, k, l)
                np.testing.assert_array_equal(p, z)
            if cls is seq.SequenceSSVM:       # objective with brute-force hinges at coef_
                hinge = [_brute_viterbi(est.coef_, k, l, oracle, y)[1]
                         - float(est.coef_ @ seq_oracles.bigram_counts(list(y), k)) for y in Y]
                _close(est.objective_, 0.5 * est.coef_ @ est.coef_ + est.C * sum(hinge),
                       rtol=1e-6, atol=1e-6)
            else:                             # the regularized mean softmax margin at coef_
                vals = [seq_oracles.brute_force_softmax_margin(est.coef_, _psi_bigram(k), y, k,
                                                               oracle)[0] for y in Y]
                _close(est.objective_, np.mean(vals) + 0.5 * est.reg * est.coef_ @ est.coef_)
        return Case(lambda: cls(loss, feats, **quick).fit(X, Y), check)
    return Entry(draw_case, examples=6)


# ----------------------------------------------------------------------------- junction trees
def _random_graph(rng, n, d_v=2, d_e=1):
    """A random connected graph example dict: a random spanning tree plus random extra edges,
    each edge in a random orientation, in a random order."""
    tree = [(int(rng.integers(0, j)), j) for j in range(1, n)]
    extra = [(a, b) for a in range(n) for b in range(a + 1, n)
             if (a, b) not in tree and rng.random() < 0.5]
    edges = [(u, v) if rng.random() < 0.5 else (v, u) for u, v in tree + extra]
    edges = np.array([edges[i] for i in rng.permutation(len(edges))], dtype=np.int64)
    return agm.graph(rng.normal(size=(n, d_v)), edges.reshape(-1, 2),
                     rng.normal(size=(len(edges), d_e)))


def _mutated_graph(draw, x):
    """A random invalid version of the graph example ``x``, with the names its error must
    mention."""
    n, E = len(x["node_features"]), np.asarray(x["edges"])
    kind = draw(st.sampled_from(["node_features", "edge_features", "edges", "missing", "type"]))
    x = dict(x)
    if kind == "missing":
        del x[draw(st.sampled_from(["node_features", "edges", "edge_features"]))]
        return x, ("x", "X[0]")
    if kind == "type":
        return draw(st.sampled_from([None, 3, "graph", [x]])), ("x", "X[0]")
    if kind == "edges":
        bad = {"range": np.vstack([E, [[0, n + 3]]]), "loop": np.vstack([E, [[0, 0]]]),
               "duplicate": np.vstack([E, E[:1, ::-1]]), "float": E + 0.5,
               "shape": E.reshape(-1), "complex": E + 1j}
        bad = bad[draw(st.sampled_from(sorted(bad) if len(E) else ["range", "loop"]))]
        if len(bad) != len(E) and np.ndim(bad) == 2:       # keep the feature rows consistent
            x["edge_features"] = np.vstack([x["edge_features"], x["edge_features"][:1]])
        x["edges"] = bad
        return x, ("edges",)
    if kind == "edge_features":
        Ef = np.asarray(x["edge_features"])
        if len(Ef) == 0 or draw(st.booleans()):      # a row count that is not n_edges
            x["edge_features"] = Ef[:-1] if len(Ef) else np.ones((1, Ef.shape[1]))
        else:
            x["edge_features"] = _mutated_array(draw, Ef, allow=("empty", "ragged")
                                                if len(Ef) == 1 else ())
        return x, ("edge_features",)
    x["node_features"] = _mutated_array(draw, x["node_features"],
                                        allow=("ragged",) if n == 1 else ())
    return x, ("node_features", "edges")


def _disconnected(rng, n):
    x = _random_graph(rng, n)
    keep = np.all(x["edges"] != n - 1, axis=1)         # isolate the last node
    return agm.graph(x["node_features"], x["edges"][keep], x["edge_features"][keep])


def _graph_entry(draw):
    rng = _seed(draw)
    n = draw(st.integers(1, 4))
    x = _random_graph(rng, n)
    if draw(st.booleans()):
        xb, names = _mutated_graph(draw, agm.graph(*[x[k] for k in (
            "node_features", "edges", "edge_features")]))
        return Case(lambda: agm.check_graph_example(xb), names=names)

    def check(out):
        assert out is not x and sorted(out) == ["edge_features", "edges", "node_features"]
        assert all(out[k] is x[k] for k in out)
    return Case(lambda: agm.graph(x["node_features"], x["edges"], x["edge_features"]), check)


def _check_graph_example(draw):
    from agm_graph_oracles import exact_treewidth
    rng = _seed(draw)
    n = draw(st.integers(1, 5))
    x = _random_graph(rng, n)
    mode = draw(st.sampled_from(["valid", "valid", "x", "disconnected", "max_treewidth"]))
    if mode == "x":
        xb, names = _mutated_graph(draw, x)
        return Case(lambda: agm.check_graph_example(xb), names=names)
    if mode == "disconnected" and n > 1:
        return Case(lambda: agm.check_graph_example(_disconnected(rng, n)), names=("edges",))
    tw = exact_treewidth(n, x["edges"].tolist())
    if mode == "max_treewidth":
        bad = draw(st.sampled_from([-1, 1.5, "2", None] + ([tw - 1] if tw else [])))
        return Case(lambda: agm.check_graph_example(x, 3, max_treewidth=bad),
                    names=("max_treewidth",))

    def check(gx):
        members = [set(c.tolist()) for c in gx.cliques]
        assert set().union(*members) == set(range(n))
        assert all(any({u, v} <= c for c in members) for u, v in x["edges"].tolist())
        for v in range(n):            # running intersection: the cliques holding v, a subtree
            holding = [c for c in range(len(members)) if v in members[c]]
            assert sum(gx.clique_parent[c] not in holding for c in holding) == 1
        assert gx.width_lower_bound <= tw <= gx.width == max(map(len, members)) - 1
        _close(gx.node_features, x["node_features"])
    return Case(lambda: agm.check_graph_example(x), check)


def _brute_graph_argmax(x, b, B):
    """max over all k^n labellings of sum_i b[i, y_i] + sum_e B[e, y_u, y_v], by loops."""
    n, k = b.shape
    best = -np.inf
    for y in itertools.product(range(k), repeat=n):
        s = sum(b[i, y[i]] for i in range(n)) + sum(
            B[e, y[u], y[v]] for e, (u, v) in enumerate(np.asarray(x["edges"]).tolist()))
        best = max(best, s)
    return best


def _jt_max_sum(draw):
    rng = _seed(draw)
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    x = _random_graph(rng, n)
    gx = agm.check_graph_example(x)
    E = len(x["edges"])
    b, B = rng.normal(size=(n, k)), rng.normal(size=(E, k, k))
    mode = draw(st.sampled_from(["valid", "valid", "b", "B", "gx"]))
    if mode == "b":
        bad = draw(st.sampled_from([b[:-1], b[:, :0], b + 0.5j, np.full_like(b, np.nan),
                                    b.ravel(), b.astype(str)]))
        return Case(lambda: agm.jt_max_sum(gx, bad, B), names=("b",))
    if mode == "B":
        bad = draw(st.sampled_from([np.zeros((E + 1, k, k)), B + 0.5j, B[..., :0] if k > 1
                                    else np.zeros((E, 2, 2))] + ([np.full((E, k, k), np.inf),
                                                                   B.reshape(E, -1)] if E else [])))
        return Case(lambda: agm.jt_max_sum(gx, b, bad), names=("B",))
    if mode == "gx":
        return Case(lambda: agm.jt_max_sum(draw(st.sampled_from([x, None, "gx"])), b, B),
                    names=("gx",))

    def check(out):
        y, val = out
        best = _brute_graph_argmax(x, b, B)
        _close(val, best)
        _close(sum(b[i, y[i]] for i in range(n)) + sum(
            B[e, y[u], y[v]] for e, (u, v) in enumerate(x["edges"].tolist())), best)
    return Case(lambda: agm.jt_max_sum(gx, b, B), check)


def _skip_chain(draw):
    rng = _seed(draw)
    n, skip = draw(st.integers(1, 5)), draw(st.integers(2, 3))
    V, Ef = rng.normal(size=(n, 2)), rng.normal(size=(n - 1, 2))
    m = max(n - skip, 0)
    S = None if draw(st.booleans()) else rng.normal(size=(m, 1))
    mode = draw(st.sampled_from(["valid", "valid", "skip", "skip_features", "edge_features",
                                 "node_features"]))
    if mode == "skip":
        return Case(lambda: agm.skip_chain(V, Ef, S, skip=_bad_scalar(draw, "int")),
                    names=("skip",))
    if mode == "skip_features":
        bad = draw(st.sampled_from([np.ones((m + 1, 1)), np.ones(m + 1), np.full((m, 1), np.nan)
                                    if m else np.ones((2, 2)), np.ones((max(m, 1), 1)) + 1j]))
        return Case(lambda: agm.skip_chain(V, Ef, bad, skip=skip), names=("skip_features",))
    if mode == "edge_features":
        bad = draw(st.sampled_from([np.ones((n, 2)), np.ones((n - 1, 2)) + 1j,
                                    np.ones((n + 1, 2, 2)), np.full((n - 1, 2), "a")]))
        return Case(lambda: agm.skip_chain(V, bad, S, skip=skip), names=("edge_features",))
    if mode == "node_features":
        return Case(lambda: agm.skip_chain(_mutated_array(draw, V, allow=("empty", "ragged")),
                                           Ef, S),
                    names=("node_features",))
    Sv = np.ones((m, 1)) if S is None else S
    want_edges = [[t, t + 1] for t in range(n - 1)] + [[t, t + skip] for t in range(m)]
    want_F = np.zeros((n - 1 + m, 3))
    for t in range(n - 1):
        want_F[t, :2] = Ef[t]
    for t in range(m):
        want_F[n - 1 + t, 2] = Sv[t, 0]

    def check(x):
        assert np.asarray(x["edges"]).reshape(-1, 2).tolist() == want_edges
        _close(x["edge_features"], want_F)
        _close(x["node_features"], V)
        agm.check_graph_example(x)                 # a valid graph example
    return Case(lambda: agm.skip_chain(V, Ef, S, skip=skip), check)


def _make_loopy_data(draw):
    """Oracle: the documented generative model replayed from the same seed, its argmax by
    enumeration over all k^n labellings (not by the junction tree)."""
    structure = draw(st.sampled_from(["cycle", "skip_chain", "grid"]))
    n = draw(st.sampled_from([4, 6] if structure == "grid" else [3, 4, 5]))
    m, k, d = draw(st.integers(1, 2)), 2, draw(st.integers(1, 2))
    c, sigma, seed = draw(st.sampled_from([0.0, 1.5])), draw(st.sampled_from([0.0, 0.5])), \
        draw(st.integers(0, 100))
    args = dict(structure=structure, n_examples=m, n_nodes=n, n_labels=k, n_features=d,
                coupling=c, noise=sigma, random_state=seed)
    if draw(st.booleans()):
        param = draw(st.sampled_from(["structure", "n_examples", "n_nodes", "n_labels",
                                      "n_features", "coupling", "noise"]))
        bad = {"structure": draw(st.sampled_from(["torus", 3, None])),
               "coupling": draw(st.sampled_from([-1.0, np.nan, "1"])),
               "noise": draw(st.sampled_from([-0.5, np.inf, None]))}.get(
            param, _bad_scalar(draw, "int"))
        if param == "n_nodes" and structure == "grid" and draw(st.booleans()):
            bad = 5                                     # a grid needs an even n_nodes
        return Case(lambda: agm.make_loopy_data(**{**args, param: bad}), names=(param,))
    t = np.arange(n)
    if structure == "cycle":
        planted = [(i, (i + 1) % n) for i in range(n)]
    elif structure == "skip_chain":
        planted = [(i, i + 2) for i in range(n - 2)]
    else:
        h = n // 2
        planted = [(r * h + j, r * h + j + 1) for r in range(2) for j in range(h - 1)] + \
            [(j, h + j) for j in range(h)]
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(k, d))
    want = []
    for _ in range(m):
        F = rng.normal(size=(n, d))
        b = F @ theta.T + sigma * rng.gumbel(size=(n, k))
        scores = {y: sum(b[i, y[i]] for i in t) + c * sum(y[u] == y[v] for u, v in planted)
                  for y in itertools.product(range(k), repeat=n)}
        want.append((F, np.array(max(scores, key=scores.get))))

    def check(out):
        X, Xc, Y = out
        assert len(X) == len(Xc) == len(Y) == m
        for x, xc, y, (F, y_best) in zip(X, Xc, Y, want):
            _close(x["node_features"], np.hstack([F, np.ones((n, 1))]))
            np.testing.assert_array_equal(y, y_best)
            und = {tuple(sorted(e)) for e in x["edges"].tolist()}
            assert {tuple(sorted(e)) for e in planted} <= und
            chain = xc["edges"].tolist()                  # a Hamiltonian path, directed along
            assert len(chain) == n - 1 and all(chain[i][1] == chain[i + 1][0]
                                               for i in range(n - 2))
            assert sorted({v for e in chain for v in e}) == list(range(n))
            assert {tuple(sorted(e)) for e in chain} <= und
    return Case(lambda: agm.make_loopy_data(**args), check)


def _jt_labeling(draw):
    from agm_graph_oracles import joint_features, labellings
    rng = _seed(draw)
    n, k = draw(st.integers(1, 4)), draw(st.integers(2, 3))
    loss = draw(st.sampled_from(["zero_one", "absolute", "squared"]))
    model = structures.JunctionTreeLabeling(k, loss=loss)
    x = _random_graph(rng, n)
    y = rng.integers(0, k, n)
    mode = draw(st.sampled_from(["valid", "valid", "valid", "x", "y", "param"]))
    if mode == "x":
        xb, names = _mutated_graph(draw, x)
        return Case(lambda: model.features(model.check_x(xb)), names=names)
    if mode == "y":
        bad = draw(st.sampled_from([y + k, y - k, y + 0.5, np.append(y, 0), y + 0j,
                                    y.astype(str)]))
        return Case(lambda: model.encode(model.check_x(x), bad), names=("y",))
    if mode == "param":
        param = draw(st.sampled_from(["n_labels", "loss", "node_weights", "normalize_weights",
                                      "max_treewidth"]))
        bad = {"loss": draw(st.sampled_from(["hinge", -np.ones((k, k)), np.ones((k + 1,) * 2)])),
               "node_weights": draw(st.sampled_from(["uniform", 3])),
               "normalize_weights": _bad_scalar(draw, "bool"),
               "max_treewidth": draw(st.sampled_from([-1, 1.5, "8"]))}.get(
            param, _bad_scalar(draw, "int"))
        est = structures.JunctionTreeLabeling(**{**_params(model), param: bad})
        return Case(lambda: est.features(est.check_x(x)), names=(param, "loss matrix"))
    s_seed = int(rng.integers(2 ** 31))

    def call():
        g = model.check_x(x)
        s = np.random.default_rng(s_seed).normal(size=model.n_parts(g))
        return g, s, model.inference_parts(g, s), model.inference(g, s)

    def check(out):
        g, s, mu, y_hat = out
        Ys, Phi = joint_features(x, k)               # Phi(x, y) of every labelling, by loops
        enc = np.array([model.encode(g, z) for z in Ys])
        best = int(np.argmax(enc @ s))
        _close(mu, enc[best])
        np.testing.assert_array_equal(y_hat, Ys[best])
        Phi_model = model.features(g)
        _close(enc @ (Phi_model.toarray() if hasattr(Phi_model, "toarray") else Phi_model), Phi)
        L = agm.loss_matrix(loss, k)
        c, d = model.loss_coefficients(g, y)
        _close(enc @ c + d, [sum(L[z[i], y[i]] for i in range(n)) for z in Ys])
        assert model.polytope(g).contains(model.encode(g, y))
        assert len(Ys) == len(labellings(n, k))
    return Case(call, check)


def _jt_crf(draw):
    from agm_graph_oracles import joint_features
    from scipy.special import logsumexp
    rng = _seed(draw)
    k = 2
    X = [_random_graph(rng, draw(st.integers(1, 4))) for _ in range(draw(st.integers(1, 2)))]
    Y = [rng.integers(0, k, len(x["node_features"])) for x in X]
    reg = draw(st.sampled_from([0.1, 1.0]))
    quick = {"max_iter": 50, "reg": reg}
    mode = draw(st.sampled_from(["valid", "valid", "param", "x", "y", "unfitted"]))
    if mode == "param":
        param = draw(st.sampled_from(["n_labels", "reg", "max_iter", "loss", "max_treewidth",
                                      "warm_start"]))
        bad = {"loss": "hinge", "reg": draw(st.sampled_from([-1.0, np.nan, "1", None])),
               "max_treewidth": draw(st.sampled_from([-1, 1.5, "8"])),
               "warm_start": _bad_scalar(draw, "bool")}.get(
            param, _bad_scalar(draw, "int"))
        return Case(lambda: agm.JunctionTreeCRF(**{"n_labels": k, **quick, param: bad}).fit(X, Y),
                    names=(param,))
    if mode == "x":
        xb, names = _mutated_graph(draw, X[0])
        return Case(lambda: agm.JunctionTreeCRF(k, **quick).fit([xb] + X[1:], Y),
                    names=names + ("X[0]",))
    if mode == "y":
        yb = draw(st.sampled_from([Y[0] + k, Y[0] - k, Y[0] + 0.5, np.append(Y[0], 0),
                                   Y[0] + 0j]))
        return Case(lambda: agm.JunctionTreeCRF(k, **quick).fit(X, [yb] + Y[1:]),
                    names=("Y[0]",))
    if mode == "unfitted":
        return Case(lambda: agm.JunctionTreeCRF(k).predict_proba(X), names=("fit",))

    def call():
        est = agm.JunctionTreeCRF(k, **quick).fit(X, Y)
        return est, est.predict_proba(X), est.predict(X)

    def check(out):
        est, probas, preds = out
        theta, nll = est.coef_, 0.0
        for x, y, P, p in zip(X, Y, probas, preds):
            Ys, F = joint_features(x, k)             # brute force: every labelling
            sc = F @ theta
            logZ = logsumexp(sc)
            nll += logZ - sc[int(np.flatnonzero((Ys == y).all(axis=1))[0])]
            w = np.exp(sc - logZ)
            marg = np.stack([np.bincount(Ys[:, i], w, minlength=k) for i in range(len(y))])
            _close(P, marg, atol=1e-9)
            np.testing.assert_array_equal(p, np.argmax(marg, axis=1))   # zero-one: the mode
        _close(est.objective_, nll / len(X) + 0.5 * reg * theta @ theta, rtol=1e-8)
    return Case(call, check)


# ----------------------------------------------------------------------------- persistence
def _fitted_estimator(draw):
    """A tiny estimator, fitted or not, with examples it predicts on."""
    rng = _seed(draw)
    kind = draw(st.sampled_from(["TreeCRF", "JunctionTreeCRF", "FrankWolfe", "unfitted"]))
    X = [_tree_example(rng, draw(st.integers(1, 3))) for _ in range(2)]
    Y = [rng.integers(0, 2, len(x["parents"])) for x in X]
    if kind == "TreeCRF":
        return agm.TreeCRF(2, reg=0.5, max_iter=20).fit(X, Y), X
    if kind == "JunctionTreeCRF":
        X = [_random_graph(rng, draw(st.integers(1, 3))) for _ in range(2)]
        Y = [rng.integers(0, 2, len(x["node_features"])) for x in X]
        return agm.JunctionTreeCRF(2, reg=0.5, max_iter=20).fit(X, Y), X
    model = structures.TreeLabeling(2, loss=draw(st.sampled_from(["zero_one", "absolute"])))
    est = structlp.FrankWolfeLearner(model, C=draw(st.sampled_from([0.5, 2.0])), max_iter=20,
                                     random_state=0)
    return (est if kind == "unfitted" else est.fit(X, Y)), X


def _same_state(a, b):
    assert type(a) is type(b)
    from structlp.persistence import init_params
    pa, pb = init_params(a), init_params(b)
    assert sorted(pa) == sorted(pb)
    for name in pa:
        if hasattr(pa[name], "__dict__") and not callable(pa[name]):
            _same_state(pa[name], pb[name])
        else:
            assert repr(pa[name]) == repr(pb[name]), name


def _tampered(draw, data):
    import io
    import zipfile
    src = zipfile.ZipFile(io.BytesIO(data))
    members = {n: src.read(n) for n in src.namelist()}
    how = draw(st.sampled_from(["metadata", "array", "pickle", "truncate", "garbage",
                                "bitflip"]))
    if how == "bitflip":                           # one byte of a member's stored data
        info = src.getinfo(draw(st.sampled_from(sorted(members))))
        off = info.header_offset                   # local header: 30 bytes, name, extra
        start = off + 30 + sum(int.from_bytes(data[off + i:off + i + 2], "little")
                               for i in (26, 28))
        if info.compress_size == 0:
            return data[:len(data) // 2]
        pos = start + draw(st.integers(0, 2 ** 20)) % info.compress_size   # sizes vary (times)
        return data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1:]
    if how == "truncate":
        return data[:len(data) // 2]
    if how == "garbage":
        return b"\x80\x04K\x01." + data[6:]            # a pickle header, not a zip
    if how == "metadata":
        members["structlp.json"] = members["structlp.json"].replace(b'"format_version": 1',
                                                                    b'"format_version": 1 ')
    elif how == "array":
        arrays = sorted(n for n in members if n.startswith("arrays/"))
        if not arrays:
            return data[:len(data) // 2]
        name = arrays[draw(st.integers(0, 2 ** 20)) % len(arrays)]
        members[name] = members[name][:-1] + bytes([members[name][-1] ^ 1])
    else:
        members["model.pkl"] = b"\x80\x04K\x01."
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n, b in members.items():
            z.writestr(n, b)
    return out.getvalue()


def _same_members(data, original):
    """Whether the zip ``data`` still holds exactly the members (names and contents) of
    ``original``: a tampering that changes no member's content is not a corruption."""
    import io
    import zipfile
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z, zipfile.ZipFile(io.BytesIO(original)) as o:
            return (sorted(z.namelist()) == sorted(o.namelist())
                    and all(z.read(n) == o.read(n) for n in o.namelist()))
    except Exception:                                       # unreadable: changed
        return False


def _save_load(draw):
    import io
    est, X = _fitted_estimator(draw)
    buf = io.BytesIO()
    mode = draw(st.sampled_from(["valid", "valid", "tampered", "object", "unsavable"]))
    if mode == "object":
        bad = draw(st.sampled_from([3, "est", None, type(est), np.ones(2)]))
        return Case(lambda: structlp.save(bad, buf), names=("save",))
    if mode == "unsavable":                       # a parameter that is code, not data
        est = structlp.FrankWolfeLearner(structures.TreeLabeling(2), C=lambda: 1.0)
        return Case(lambda: structlp.save(est, buf), names=("FrankWolfeLearner.C",))
    structlp.save(est, buf)
    saved = buf.getvalue()
    if mode == "tampered":
        saved = _tampered(draw, saved)
        if not _same_members(saved, buf.getvalue()):
            return Case(lambda: structlp.load(io.BytesIO(saved)),
                        names=("checksum", "members", "structlp file", "corrupted"))
        # else: a flip that leaves every member's content intact (e.g. the final-block bit of
        # a one-block deflate stream): the file is still valid and must load as the original
    fitted = any(k.endswith("_") for k in vars(est))

    def call():
        return structlp.load(io.BytesIO(saved))

    def check(new):
        _same_state(est, new)
        assert new is not est
        if fitted:
            for a, b in zip(est.predict(X), new.predict(X)):
                np.testing.assert_array_equal(a, b)
            _close(new.coef_, est.coef_, rtol=0, atol=0)
        else:
            assert not any(k.endswith("_") for k in vars(new))
    return Case(call, check)


def _clone(draw):
    est, X = _fitted_estimator(draw)
    if draw(st.booleans()):
        bad = draw(st.sampled_from([3, None, type(est), "est"]))
        return Case(lambda: structlp.clone(bad), names=("clone",))

    def check(new):
        assert new is not est
        _same_state(est, new)
        assert not any(k.endswith("_") and not k.startswith("_") for k in vars(new))
        for name, v in vars(new).items():                         # no shared model object
            if hasattr(v, "__dict__"):
                assert v is not getattr(est, name)
    return Case(lambda: structlp.clone(est), check)


# ----------------------------------------------------------------------------- model selection
class _Fixed:
    """A stand-in fitted estimator: predicts fixed outputs, and its own task loss."""

    def __init__(self, pred, task):
        self.pred, self.task = pred, task

    def predict(self, X):
        return self.pred

    def loss(self, X, Y):
        return self.task


def _make_scorer(draw):
    rng = _seed(draw)
    loss = draw(st.sampled_from(["hamming", "zero_one", "task", "callable"]))
    gib = draw(st.booleans())
    m, k = draw(st.integers(1, 3)), draw(st.integers(2, 3))
    Y = [rng.integers(0, k, draw(st.integers(1, 3))) for _ in range(m)]
    P = [np.where(rng.random(len(y)) < 0.5, y, (y + 1) % k) for y in Y]
    mode = draw(st.sampled_from(["valid", "valid", "loss", "greater_is_better", "Y"]))
    if mode == "loss":
        return Case(lambda: structlp.make_scorer(draw(st.sampled_from(["magic", 3, None, ["a"]]))),
                    names=("loss",))
    if mode == "greater_is_better":
        return Case(lambda: structlp.make_scorer("hamming", _bad_scalar(draw, "bool")),
                    names=("greater_is_better",))
    if mode == "Y" and loss != "task":
        bad = draw(st.sampled_from([Y + Y[:1], Y[:-1] if m > 1 else [], "Y", 3]))
        return Case(lambda: structlp.make_scorer(loss if loss != "callable" else
                                                 (lambda a, b: 0.0))(_Fixed(P, 0.0), None, bad),
                    names=("X", "Y"))
    task = float(rng.random())
    by_hand = {"hamming": np.mean([np.mean(y != p) for y, p in zip(Y, P)]),
               "zero_one": np.mean([float(np.any(y != p)) for y, p in zip(Y, P)]),
               "task": task,
               "callable": np.mean([float(np.sum(np.abs(y - p))) for y, p in zip(Y, P)])}[loss]
    fn = (lambda a, b: float(np.sum(np.abs(a - b)))) if loss == "callable" else loss
    est, X = _Fixed(P, task), None
    if loss == "task" and draw(st.booleans()):           # a real learner's task loss
        model = structures.TreeLabeling(k, loss="absolute")
        X = [_tree_example(rng, len(y)) for y in Y]
        est = structlp.FrankWolfeLearner(model, max_iter=10, random_state=0).fit(X, Y)
        by_hand = np.mean([np.sum(np.abs(p - y)) for p, y in zip(est.predict(X), Y)])
    return Case(lambda: structlp.make_scorer(fn, gib)(est, X, Y),
                lambda s: _close(s, by_hand if gib else -by_hand))


class _Affine:
    """A transformer (fit/transform on 2-D arrays) without scikit-learn: F -> (F - mean) A."""

    def __init__(self, A):
        self.A = A

    def fit(self, F):
        self.mean_ = F.mean(axis=0)
        return self

    def transform(self, F):
        return (F - self.mean_) @ self.A


def _part_transformer(draw):
    rng = _seed(draw)
    d, d_out = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    X = [rng.normal(size=tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2))))
                    + (d,)) for _ in range(draw(st.integers(1, 3)))]
    feats = list(X)
    if draw(st.booleans()):
        X[0] = (X[0], "mask")                     # a (features, extra) tuple example
    use_sklearn = draw(st.booleans()) and importlib.util.find_spec("sklearn") is not None
    if use_sklearn:
        from sklearn.preprocessing import StandardScaler
        tr, d_out = StandardScaler(), d
    else:
        tr = _Affine(rng.normal(size=(d, d_out)))
    mode = draw(st.sampled_from(["valid", "valid", "transformer", "X", "d", "unfitted"]))
    if mode == "transformer":
        return Case(lambda: structlp.PartTransformer(draw(st.sampled_from(
            [None, 3, "scaler", np.mean]))).fit(X), names=("transformer",))
    if mode == "X":
        bad = draw(st.sampled_from([np.ones(3), feats[-1] + 1j, np.full((2, d), "a"), 3, None]))
        return Case(lambda: structlp.PartTransformer(tr).fit(X[:-1] + [bad]),
                    names=(f"X[{len(X) - 1}]",))
    if mode == "d":
        other = [rng.normal(size=(2, d + 1))]
        if draw(st.booleans()):
            return Case(lambda: structlp.PartTransformer(tr).fit(X + other), names=("X",))
        return Case(lambda: structlp.PartTransformer(tr).fit(X).transform(other),
                    names=("X[0]",))
    if mode == "unfitted":
        return Case(lambda: structlp.PartTransformer(tr).transform(X), names=("fit",))
    F = np.concatenate([f.reshape(-1, d) for f in feats])     # by hand: stack, fit, map
    mean = F.mean(axis=0)
    scale = F.std(axis=0)
    scale[scale == 0] = 1.0

    def by_hand(f):
        g = (f.reshape(-1, d) - mean) / scale if use_sklearn else (f.reshape(-1, d) - mean) @ tr.A
        return g.reshape(f.shape[:-1] + (d_out,))

    def call():
        pt = structlp.PartTransformer(tr)
        return pt, pt.fit_transform(X)

    def check(out):
        pt, Z = out
        assert pt.transformer is tr and pt.transformer_ is not tr and pt.n_features_in_ == d
        assert not hasattr(tr, "mean_")            # the given transformer is never modified
        for x, f, z in zip(X, feats, Z):
            if isinstance(x, tuple):
                assert isinstance(z, tuple) and z[1:] == x[1:]
                z = z[0]
            _close(z, by_hand(f), atol=1e-10)
    return Case(call, check)



# ----------------------------------------------------------------------------- graph structures
# Arborescence, GraphLabeling, MultiLabel and their helpers.  Oracles: every output of a
# tiny instance enumerated, its part vector built here from the documented part order
# (not with the model's encode), the best one under random scores, and the max-margin
# primal recomputed from ``coef_`` with brute-force hinges and losses counted on labels.
def _heads_tree(h, root):
    """Whether the head vector ``h`` (with ``h[root] = -1``) is an arborescence."""
    n = len(h)
    if h[root] != -1:
        return False
    others = [m for m in range(n) if m != root]
    if any(not 0 <= h[m] < n or h[m] == m for m in others):
        return False
    for m in others:
        v, seen = m, set()
        while v != root:
            if v in seen:
                return False
            seen.add(v)
            v = h[v]
    return True


def _all_heads(n, root):
    """Every arborescence of the complete digraph on ``n`` nodes rooted at ``root``."""
    from oracles import enumerate_arborescences
    return enumerate_arborescences(n, root)


def _arcs(n, root):
    return [(h, m) for h in range(n) for m in range(n) if h != m and m != root]


def _arb_parts(h, n, root):
    return np.array([float(h[m] == a) for a, m in _arcs(n, root)])


def _gl_parts(y, n, edges, k):
    mu = np.zeros(n * k + len(edges) * k * k)
    mu[np.arange(n) * k + np.asarray(y)] = 1.0
    for e, (u, v) in enumerate(edges):
        mu[n * k + e * k * k + y[u] * k + y[v]] = 1.0
    return mu


def _ml_parts(y, edges):
    y = np.asarray(y, dtype=float)
    return np.concatenate([y, [y[a] * y[b] for a, b in edges]])


@dataclass
class _Instance:
    """A tiny valid example with its enumerated outputs ``(y, parts, loss_to)``."""

    model: Any
    x: Any
    y: Any
    outputs: list             # list of (y, part vector)
    loss: Callable            # (y, y_true) -> the model's loss, counted on labels
    x_bad: Callable           # draw -> (invalid x, names)
    y_bad: Callable           # draw -> invalid y
    param_bad: Callable       # draw -> (invalid model, names)
    like: Callable            # rng -> another valid x of the same shapes


def _arborescence_instance(draw):
    rng = _seed(draw)
    n, d = draw(st.integers(2, 4)), draw(st.integers(1, 2))
    root = draw(st.integers(0, n - 1))
    model = structures.Arborescence(root=root)
    outs = [(h, _arb_parts(h, n, root)) for h in _all_heads(n, root)]
    y = outs[int(rng.integers(len(outs)))][0]

    def x_bad(draw):
        kind = draw(st.sampled_from(["array", "square", "one"]))
        x = rng.normal(size=(n, n, d))
        if kind == "square":
            return rng.normal(size=(n, n + 1, d)), ("x",)
        if kind == "one":
            return rng.normal(size=(1, 1, d)), ("x",)
        return _mutated_array(draw, x, nan_at=(0, 1, 0)), ("x",)

    def y_bad(draw):
        kinds = ["length", "root", "range", "self", "fraction", "array"]
        if n >= 3:
            kinds.append("cycle")
        kind = draw(st.sampled_from(kinds))
        h = y.copy()
        m = (root + 1) % n
        if kind == "length":
            return np.append(h, 0)
        if kind == "root":
            h[root] = m
            return h
        if kind == "range":
            h[m] = draw(st.sampled_from([n, -1, -2]))
            return h
        if kind == "self":
            h[m] = m
            return h
        if kind == "fraction":
            return h + 0.5
        if kind == "cycle":                       # two non-root words heading each other
            a, b = [j for j in range(n) if j != root][:2]
            h[a], h[b] = b, a
            return h
        return _mutated_array(draw, h, allow=("ragged",))

    def param_bad(draw):
        bad = draw(st.sampled_from([-1, n, 1.5, "0", None, np.nan]))
        return structures.Arborescence(root=bad), ("root",)
    return _Instance(model, rng.normal(size=(n, n, d)), y, outs,
                     lambda a, b: float(np.sum(np.asarray(a) != np.asarray(b))),
                     x_bad, y_bad, param_bad, lambda r: r.normal(size=(n, n, d)))


def _random_tree_edges(rng, n):
    perm = rng.permutation(n)
    return [(int(perm[i]), int(perm[rng.integers(i)])) for i in range(1, n)]


def _graph_labeling_instance(draw):
    """A forest (any mode: the local polytope is exact) or a loopy graph with
    ``mode="exact"`` (junction tree): the two cases where inference is exact, so the
    brute-force argmax is the oracle.  Loopy graphs with ``mode="relaxed"`` are an LP
    relaxation and are not checked against it."""
    rng = _seed(draw)
    n, k = draw(st.integers(1, 4)), draw(st.integers(2, 3))
    if n >= 3 and k ** n <= 27 and draw(st.booleans()):
        edges = [(i, (i + 1) % n) for i in range(n)]          # a cycle
        if n == 4 and draw(st.booleans()):
            edges.append((0, 2))                               # with a chord
        mode = "exact"
    else:
        edges = _random_tree_edges(rng, n)
        if n >= 3 and draw(st.booleans()):
            edges = edges[:-1]                                 # a forest
        mode = draw(st.sampled_from(["auto", "relaxed", "exact"]))
    if edges and draw(st.booleans()):
        edges = [(b, a) for a, b in edges]
    loss = draw(st.sampled_from(["zero_one", "absolute"]))
    model = structures.GraphLabeling(k, mode=mode, loss=loss)
    d_v, d_e = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    E = np.array(edges, dtype=np.int64).reshape(-1, 2)

    def make(r):
        return {"node_features": r.normal(size=(n, d_v)), "edges": E.copy(),
                "edge_features": r.normal(size=(len(E), d_e))}
    outs = [(np.array(lab), _gl_parts(lab, n, E, k))
            for lab in itertools.product(range(k), repeat=n)]
    y = outs[int(rng.integers(len(outs)))][0]
    x = make(rng)

    def x_bad(draw):
        kinds = ["missing", "type", "range", "node_features", "edge_rows"]
        if n >= 2:
            kinds += ["loop", "fraction"]
        if len(E):
            kinds += ["duplicate", "edge_features"]
        kind = draw(st.sampled_from(kinds))
        xb = dict(x)
        if kind == "missing":
            del xb[draw(st.sampled_from(["edges", "node_features", "edge_features"]))]
            return xb, ("x",)
        if kind == "type":
            return list(x.values()), ("x",)
        if kind == "node_features":
            xb["node_features"] = _mutated_array(draw, x["node_features"],
                                                 allow=("ragged",) if n == 1 else ())
            return xb, ("node_features",)
        if kind == "edge_features":
            xb["edge_features"] = _mutated_array(draw, x["edge_features"],
                                                 allow=("ragged",) if len(E) == 1 else ())
            return xb, ("edge_features",)
        if kind == "edge_rows":
            xb["edge_features"] = rng.normal(size=(len(E) + 1, d_e))
            return xb, ("edge_features",)
        new = {"range": [0, n], "loop": [1, 1], "fraction": [0.5, 1]}
        if kind == "duplicate":
            a, b = E[0]
            row = [b, a] if draw(st.booleans()) else [a, b]
        else:
            row = new[kind]
        xb["edges"] = np.vstack([E, [row]]) if kind != "fraction" else np.vstack(
            [E.astype(float), [row]])
        xb["edge_features"] = rng.normal(size=(len(E) + 1, d_e))
        return xb, ("edges",)

    def y_bad(draw):
        return _bad_labels(draw, y, k, allow=("ragged",) if n == 1 else ())

    def param_bad(draw):
        param = draw(st.sampled_from(["n_labels", "mode", "loss", "max_treewidth"]))
        bad = {"n_labels": [1, 0, 2.5, "2", None], "mode": ["magic", None, 1],
               "loss": ["hinge", -np.ones((k, k)), np.ones((k + 1, k + 1))],
               "max_treewidth": [0, -1, 1.5, "2"]}[param]
        args = {"n_labels": k, "mode": mode, "loss": loss, "max_treewidth": 4}
        args[param] = draw(st.sampled_from(bad))
        return structures.GraphLabeling(**args), (param, "loss matrix")

    def lossf(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return float(np.sum(np.abs(a - b)) if loss == "absolute" else np.sum(a != b))
    return _Instance(model, x, y, outs, lossf, x_bad, y_bad, param_bad, make)


def _multilabel_instance(draw):
    """Label forests (the local polytope is exact) and loopy label graphs of at most
    ``max_exact_labels`` labels (the hull of the enumerated outputs): inference exact."""
    rng = _seed(draw)
    L, d = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    kind = draw(st.sampled_from([None, "full", "chain", "tree", "list"]))
    if kind is None:
        E = []
    elif kind == "full":
        E = list(itertools.combinations(range(L), 2))
    elif kind == "chain":
        E = [(j, j + 1) for j in range(L - 1)]
    else:
        E = _random_tree_edges(rng, L) if kind == "tree" else [
            p for p in itertools.combinations(range(L), 2) if rng.random() < 0.6]
    edges = kind if kind in ("full", "chain") else (None if kind is None else
                                                    np.array(E, dtype=np.int64).reshape(-1, 2))
    model = structures.MultiLabel(L, edges=edges)
    outs = [(np.array(lab), _ml_parts(lab, E)) for lab in itertools.product((0, 1), repeat=L)]
    y = outs[int(rng.integers(len(outs)))][0]

    def x_bad(draw):
        return _mutated_array(draw, rng.normal(size=d), allow=()), ("x",)

    def y_bad(draw):
        kind = draw(st.sampled_from(["two", "negative", "fraction", "length", "array"]))
        if kind == "two":
            return y + 2
        if kind == "negative":
            return np.where(np.arange(L) == 0, -1, y)
        if kind == "fraction":
            return y * 0.5 + 0.25
        if kind == "length":
            return np.append(y, 0)
        return _mutated_array(draw, y, allow=("ragged",) if L == 1 else ())

    def param_bad(draw):
        param = draw(st.sampled_from(["n_labels", "edges", "max_exact_labels"]))
        if param == "n_labels":
            return structures.MultiLabel(draw(st.sampled_from([0, -1, 1.5, "2", None])),
                                         edges=None), ("n_labels",)
        if param == "max_exact_labels":               # only read on loopy label graphs
            bad = draw(st.sampled_from([-1, 1.5, "3", None, 21]))
            return structures.MultiLabel(3, "full", max_exact_labels=bad), ("max_exact_labels",)
        Lb = max(L, 2)
        bad = draw(st.sampled_from(["tree", "all", [[0, 0]], [[0, Lb]], [[0, 1], [1, 0]],
                                    [[0.5, 1]], [0, 1], np.nan]))
        return structures.MultiLabel(Lb, edges=bad), ("edges",)
    return _Instance(model, rng.normal(size=d), y, outs,
                     lambda a, b: float(np.sum(np.asarray(a) != np.asarray(b))),
                     x_bad, y_bad, param_bad, lambda r: r.normal(size=d))


def _new_structure_entry(make_instance, fit_every=4):
    """Inference = the brute-force argmax over the enumerated outputs; encode = the part
    vector built here; a fit (joint QP) whose objective is the enumerated primal."""
    def draw_case(draw):
        p = make_instance(draw)
        mode = draw(st.sampled_from(["valid", "valid", "x", "y", "param"] +
                                    ["fit"] * (draw(st.integers(0, fit_every - 1)) == 0)))
        if mode == "x":
            xb, names = p.x_bad(draw)
            return Case(lambda: p.model.features(p.model.check_x(xb)), names=names)
        if mode == "y":
            yb = p.y_bad(draw)
            return Case(lambda: prepare(p.model, [p.x], [yb], need_polytopes=True),
                        names=("y", "Y[0]"))
        if mode == "param":
            model, names = p.param_bad(draw)
            return Case(lambda: model.polytope(model.check_x(p.x)), names=names)
        rng = _seed(draw)
        if mode == "fit":
            X, Y = [p.x], [p.y]
            if draw(st.booleans()):
                X.append(p.like(rng))
                Y.append(p.outputs[int(rng.integers(len(p.outputs)))][0])
            C = draw(st.sampled_from([0.1, 1.0, 10.0]))

            def fit():
                est = structlp.MaxMarginLearner(p.model, C=C).fit(X, Y)
                return est, est.predict(X), est.decision_scores(X)

            def check_fit(out):
                est, pred, scores = out
                w = np.asarray(est.coef_, dtype=float)
                total = 0.0
                for x, yt, yp, s in zip(X, Y, pred, scores):
                    g = p.model.check_x(x)
                    sc = np.asarray(p.model.features(g) @ w).ravel()
                    _close(s, sc, atol=1e-7)
                    truth = next(mu for yy, mu in p.outputs if np.array_equal(yy, yt))
                    total += max(float(sc @ mu) + p.loss(yy, yt) for yy, mu in p.outputs) \
                        - float(sc @ truth)
                    best = max(float(sc @ mu) for _, mu in p.outputs)
                    got = next(mu for yy, mu in p.outputs if np.array_equal(yy, yp))
                    assert float(sc @ got) >= best - 1e-7 * (1 + abs(best)), (yp, best)
                _close(est.objective_, 0.5 * float(w @ w) + C * total, rtol=1e-4, atol=1e-5)
            return Case(fit, check_fit)

        def call():
            g = p.model.check_x(p.x)
            s = rng.normal(size=p.model.n_parts(g))
            mu = p.model.inference_parts(g, s)
            y_hat = p.model.inference(g, s)
            return s, mu, y_hat, p.model.encode(g, p.y), p.model.features(g)

        def check(out):
            s, mu, y_hat, mu_y, F = out
            vals = [float(s @ m) for _, m in p.outputs]
            best = p.outputs[int(np.argmax(vals))]
            np.testing.assert_array_equal(np.asarray(y_hat), best[0])
            if mu is not None:
                _close(mu, best[1])
            _close(mu_y, next(m for yy, m in p.outputs if np.array_equal(yy, p.y)))
            assert np.shape(F)[0] == len(s)
        return Case(call, check)
    return Entry(draw_case, examples=12)


def _check_heads(draw):
    rng = _seed(draw)
    n = draw(st.integers(1, 4))
    root = draw(st.integers(0, n - 1))
    name = draw(st.sampled_from(["y", "heads"]))
    kind = draw(st.sampled_from(["tree", "any", "bad"]))
    if kind != "bad":                                       # a tree, or any vector
        trees = _all_heads(n, root)
        h = trees[int(rng.integers(len(trees)))].copy() if kind == "tree" else \
            rng.integers(-1, n + 1, n)
        if draw(st.booleans()):
            h[root] = -1
        h = h.astype(draw(st.sampled_from([np.int64, np.int32, float])))
    else:
        kind = draw(st.sampled_from(["length", "fraction", "array"]))
        h0 = _all_heads(n, root)[0]
        h = {"length": lambda: np.append(h0, 0), "fraction": lambda: h0 + 0.5,
             "array": lambda: _mutated_array(draw, h0, allow=("ragged",) if n == 1 else ())
             }[kind]()
        return Case(lambda: structures.check_heads(h, n, root, name), names=(name,))
    if not _heads_tree(list(h.astype(int)), root):
        return Case(lambda: structures.check_heads(h, n, root, name), names=(name,))

    def check(out):
        np.testing.assert_array_equal(out, h.astype(int))
        assert out.dtype == np.int64
    return Case(lambda: structures.check_heads(h, n, root, name), check)


def _arc_index(draw):
    if draw(st.booleans()):
        n, root, names = draw(st.sampled_from([(0, 0, "n"), (-1, 0, "n"), (2.5, 0, "n"),
                                               ("3", 0, "n"), (None, 0, "n"), (3, 3, "root"),
                                               (3, -1, "root"), (3, 1.5, "root"),
                                               (3, "0", "root")]))
        return Case(lambda: structures.arc_index(n, root), names=(names,))
    n = draw(st.integers(1, 5))
    root = draw(st.integers(0, n - 1))

    def check(out):
        heads, mods, index = out
        arcs = _arcs(n, root)
        assert list(zip(heads.tolist(), mods.tolist())) == arcs
        want = np.full((n, n), -1)
        for j, (a, m) in enumerate(arcs):
            want[a, m] = j
        np.testing.assert_array_equal(index, want)
    return Case(lambda: structures.arc_index(n, root), check)


def _flow_polytope(draw):
    from scipy.optimize import linprog
    if draw(st.booleans()):
        n, root, names = draw(st.sampled_from([(1, 0, "n"), (-1, 0, "n"), (2.5, 0, "n"),
                                               ([3], 0, "n"), (3, 3, "root"), (3, -1, "root"),
                                               (3, [0], "root"), (3, "0", "root")]))
        return Case(lambda: structures.flow_polytope(n, root), names=(names,))
    rng = _seed(draw)
    n = draw(st.integers(2, 4))
    root = draw(st.integers(0, n - 1))
    s = rng.normal(size=(n - 1) ** 2)

    def check(P):
        A = P.A.toarray() if P.A is not None else np.zeros((0, P.n_parts + P.n_aux))
        E = P.E.toarray()
        outs = [_arb_parts(h, n, root) for h in _all_heads(n, root)]
        for mu in outs:                                # every arborescence lifts inside
            z = P.lift(mu)
            assert np.all(A @ z <= P.b + 1e-9) and np.allclose(E @ z, P.e)
            assert np.all(z >= -1e-12) and np.all(z <= 1 + 1e-12)
        c = -np.concatenate([s, np.zeros(P.n_aux)])    # the LP optimum is the best tree
        res = linprog(c, A_ub=A, b_ub=P.b, A_eq=E, b_eq=P.e, bounds=(0, 1), method="highs")
        assert res.status == 0
        _close(-res.fun, max(float(s @ mu) for mu in outs), atol=1e-7)
        assert P.n_parts == (n - 1) ** 2 and P.n_aux == (n - 1) ** 3
    return Case(lambda: structures.flow_polytope(n, root), check)


def _grid_pairs(r, c):
    return [(i * c + j, i * c + j + 1) for i in range(r) for j in range(c - 1)] + \
        [(i * c + j, (i + 1) * c + j) for i in range(r - 1) for j in range(c)]


def _grid_edges(draw):
    if draw(st.booleans()):
        r, c, name = draw(st.sampled_from([(0, 2, "rows"), (-1, 2, "rows"), (2.5, 2, "rows"),
                                           ("2", 2, "rows"), (None, 2, "rows"),
                                           (2, 0, "cols"), (2, -3, "cols"), (2, 1.5, "cols"),
                                           (2, "3", "cols")]))
        return Case(lambda: structures.grid_edges(r, c), names=(name,))
    r, c = draw(st.integers(1, 4)), draw(st.integers(1, 4))

    def check(out):
        assert out.dtype == np.int64
        assert [tuple(e) for e in out.tolist()] == _grid_pairs(r, c)
        for a, b in out.tolist():                   # 4-neighbours, by coordinates
            assert abs(a // c - b // c) + abs(a % c - b % c) == 1
    return Case(lambda: structures.grid_edges(r, c), check)


def _grid_example(draw):
    rng = _seed(draw)
    r, c, d = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    img = rng.normal(size=(r, c, d))
    E = len(_grid_pairs(r, c))
    ef = rng.normal(size=(E, 2)) if draw(st.booleans()) else None
    mode = draw(st.sampled_from(["valid", "valid", "2d", "node", "edge"]))
    if mode == "node":
        bad = _mutated_array(draw, img, allow=("ragged", "ndim", "empty"))
        bad = draw(st.sampled_from([bad, img[0, 0], img[..., None]]))
        return Case(lambda: structures.grid_example(bad, ef), names=("node_features",))
    if mode == "edge":
        ok = rng.normal(size=(E, 2))
        bad = draw(st.sampled_from(["rows", "array"]))
        bad = rng.normal(size=(E + 1, 2)) if bad == "rows" else _mutated_array(
            draw, ok, allow=("ragged",) if E <= 1 else ())
        return Case(lambda: structures.grid_example(img, bad), names=("edge_features",))
    if mode == "2d":
        img = img[..., 0]

    def check(x):
        V = img.reshape(r * c, -1)
        _close(x["node_features"], V)
        assert [tuple(e) for e in np.asarray(x["edges"]).tolist()] == _grid_pairs(r, c)
        n_h = r * (c - 1)
        want = ef if ef is not None else np.array([[1.0, 0.0]] * n_h + [[0.0, 1.0]] *
                                                   (E - n_h)).reshape(E, 2)
        _close(x["edge_features"], want)
        structures.GraphLabeling(2).check_x(x)        # a valid GraphLabeling example
    return Case(lambda: structures.grid_example(img, ef), check)


def _mutual_information(Y, a, b):
    mi = 0.0
    for u in (0, 1):
        for v in (0, 1):
            p = np.mean((Y[:, a] == u) & (Y[:, b] == v))
            if p > 0:
                mi += p * np.log(p / (np.mean(Y[:, a] == u) * np.mean(Y[:, b] == v)))
    return mi


def _chow_liu_tree(draw):
    rng = _seed(draw)
    m, L = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    Y = (rng.random((m, L)) < rng.random(L)).astype(draw(st.sampled_from([int, float, bool])))
    if draw(st.sampled_from([False, False, True])):
        kind = draw(st.sampled_from(["two", "fraction", "negative", "ndim", "array", "none"]))
        bad = {"two": lambda: Y + 2, "fraction": lambda: Y * 0.5 + 0.25,
               "negative": lambda: -np.ones((m, L)), "ndim": lambda: Y.ravel(),
               "none": lambda: np.zeros((0, L)),
               "array": lambda: _mutated_array(draw, Y, allow=("ragged",) if m == 1 else ())
               }[kind]()
        return Case(lambda: structures.chow_liu_tree(bad), names=("Y",))
    Yf = Y.astype(float)
    mi = {(a, b): _mutual_information(Yf, a, b) for a, b in itertools.combinations(range(L), 2)}

    def check(T):
        T = np.asarray(T)
        assert T.shape == (L - 1, 2) and np.issubdtype(T.dtype, np.integer)
        pairs = sorted(tuple(sorted(e)) for e in T.tolist())
        trees = _spanning_pairs(L) if L > 1 else [[]]
        assert pairs in [sorted(t) for t in trees], pairs
        best = max(sum(mi[e] for e in tree) for tree in trees)
        _close(sum(mi[e] for e in pairs), best, atol=1e-9)
    return Case(lambda: structures.chow_liu_tree(Y), check)


def _spanning_pairs(n):
    """Every spanning tree of the complete graph on ``n`` nodes, as sorted node pairs."""
    pairs = list(itertools.combinations(range(n), 2))
    u, v = np.array([a for a, _ in pairs], dtype=int), np.array([b for _, b in pairs], dtype=int)
    return [[pairs[j] for j in np.flatnonzero(t)] for t in enumerate_spanning_trees(n, u, v)]


# ----------------------------------------------------------------------------- the registry
REGISTRY = {
    "structlp.MaxMarginLearner": _learner_entry("MaxMarginLearner"),
    "structlp.CuttingPlaneLearner": _learner_entry("CuttingPlaneLearner",
                                                   tuple(PROBLEMS), exact=True),
    "structlp.FrankWolfeLearner": _learner_entry("FrankWolfeLearner"),
    "structlp.SubgradientLearner": _learner_entry("SubgradientLearner"),
    "structlp.ShardedFrankWolfeLearner": Entry(_sharded, examples=6),
    "structlp.StructuredModel": Entry(_structured_model, examples=4),
    "structlp.Polytope": Entry(_polytope, examples=15),
    "structlp.installed_solvers": Entry(_installed_solvers, examples=3),
    "structlp.maximize": Entry(_maximize, examples=20),
    "structlp.agm.game_value": _game_entry(agm.game_value, "zero_one"),
    "structlp.agm.zero_one_game": _game_entry(agm.zero_one_game, "zero_one"),
    "structlp.agm.absolute_game": _game_entry(agm.absolute_game, "absolute"),
    "structlp.agm.squared_game": _game_entry(agm.squared_game, "squared"),
    "structlp.agm.loss_matrix": Entry(_loss_matrix, examples=10),
    "structlp.agm.recover_pairwise": Entry(_recover_pairwise, examples=10),
    "structlp.agm.AdversarialGraphicalModel": _tree_learner_entry(agm.AdversarialGraphicalModel),
    "structlp.agm.TreeCRF": _tree_learner_entry(agm.TreeCRF),
    "structlp.agm.chain": Entry(_chain, examples=8),
    "structlp.agm.check_parents": Entry(_check_parents, examples=15),
    "structlp.agm.check_tree_example": Entry(_check_tree_example, examples=12),
    "structlp.agm.max_sum": Entry(_max_sum, examples=15),
    "structlp.sequence.SequenceLoss": Entry(_sequence_loss_base, examples=3),
    "structlp.sequence.softmax_margin": Entry(_softmax_margin, examples=12),
    "structlp.sequence.compile_example": Entry(_compile_example, examples=8),
    "structlp.sequence.CompiledExample": Entry(lambda d: _compile_example(d, direct=True),
                                               examples=5),
    "structlp.sequence.build_loss_automaton": Entry(_build_loss_automaton, examples=12),
    "structlp.sequence.LossAutomaton": Entry(_build_loss_automaton, examples=5),
    "structlp.sequence.Lattice": Entry(lambda d: _build_loss_automaton(d, "lattice"),
                                       examples=8),
    "structlp.sequence.SequenceSSVM": _seq_learner_entry(seq.SequenceSSVM),
    "structlp.sequence.SoftmaxMarginLearner": _seq_learner_entry(seq.SoftmaxMarginLearner),
}
REGISTRY.update({
    "structlp.agm.graph": Entry(_graph_entry, examples=8),
    "structlp.agm.check_graph_example": Entry(_check_graph_example, examples=25),
    "structlp.agm.jt_max_sum": Entry(_jt_max_sum, examples=25),
    "structlp.agm.skip_chain": Entry(_skip_chain, examples=20),
    "structlp.agm.make_loopy_data": Entry(_make_loopy_data, examples=15),
    "structlp.agm.JunctionTreeCRF": Entry(_jt_crf, examples=16),
    "structlp.structures.JunctionTreeLabeling": Entry(_jt_labeling, examples=20),
    "structlp.save": Entry(_save_load, examples=12),
    "structlp.load": Entry(_save_load, examples=12),
    "structlp.clone": Entry(_clone, examples=10),
    "structlp.make_scorer": Entry(_make_scorer, examples=20),
    "structlp.PartTransformer": Entry(_part_transformer, examples=20),
})
REGISTRY.update({f"structlp.structures.{n}": _structure_entry(n) for n in PROBLEMS})
REGISTRY.update({f"structlp.sequence.{n}": _seq_loss_entry(n) for n in SEQ_LOSSES})
REGISTRY.update({f"structlp.sequence.{n}": _features_entry(n) for n in (
    "MarkovFeatures", "BigramFeatures", "EmissionFeatures", "FunctionFeatures",
    "StackedFeatures")})
REGISTRY.update({f"structlp.sequence.{n}": _viterbi_entry(n) for n in (
    "viterbi", "loss_augmented_viterbi", "structured_hinge")})
REGISTRY.update({f"{mod}.{n}": _exception_entry(getattr(m, n))
                 for mod, m in MODULES.items() for n in m.__all__
                 if isinstance(getattr(m, n), type) and issubclass(getattr(m, n), BaseException)})

REGISTRY.update({
    "structlp.structures.Arborescence": _new_structure_entry(_arborescence_instance),
    "structlp.structures.GraphLabeling": _new_structure_entry(_graph_labeling_instance),
    "structlp.structures.MultiLabel": _new_structure_entry(_multilabel_instance),
    "structlp.structures.check_heads": Entry(_check_heads, examples=25),
    "structlp.structures.arc_index": Entry(_arc_index, examples=15),
    "structlp.structures.flow_polytope": Entry(_flow_polytope, examples=10),
    "structlp.structures.grid_edges": Entry(_grid_edges, examples=15),
    "structlp.structures.grid_example": Entry(_grid_example, examples=15),
    "structlp.structures.chow_liu_tree": Entry(_chow_liu_tree, examples=15),
})

def _segmentations(T, K, L):
    """Every segmentation of ``0..T-1`` into labelled segments of 1..L positions."""
    if T == 0:
        return [[]]
    out = []
    for first in range(1, min(L, T) + 1):
        for rest in _segmentations(T - first, K, L):
            for c in range(K):
                out.append([(0, first, c)] + [(a + first, b + first, r) for a, b, r in rest])
    return out


def _semi_markov_instance(draw):
    """Segmentations enumerated here; their part vectors by the structure's ``encode``
    (checked against the definition of the parts in tests/structures/test_semi_markov.py)."""
    rng = _seed(draw)
    T, K, L, d = draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), 2
    model = structures.SemiMarkov(K, L)
    x = rng.normal(size=(T, d))
    segs = _segmentations(T, K, L)
    outs = [(sg, model.encode(x, sg)) for sg in segs]
    y = segs[int(rng.integers(len(segs)))]

    def labels(sg):
        return np.concatenate([[c] * (b - a) for a, b, c in sg])

    def x_bad(draw):
        kind = draw(st.sampled_from(["array", "empty", "ndim"]))
        if kind == "empty":
            return np.zeros((0, d)), ("x",)
        if kind == "ndim":
            return rng.normal(size=T), ("x",)
        return _mutated_array(draw, x, nan_at=(0, 0)), ("x",)

    def y_bad(draw):
        kinds = ["label", "negative", "gap", "past", "fraction"]
        if T >= 2:
            kinds.append("overlap")
        if T > L:
            kinds.append("long")
        kind = draw(st.sampled_from(kinds))
        sg = [list(t) for t in y]
        if kind == "label":
            sg[0][2] = K
        elif kind == "negative":
            sg[0][2] = -1
        elif kind == "gap":
            sg[0][0] = 1 if sg[0][1] > 1 else sg[0][0]
            sg = sg if sg[0][0] == 1 else sg[1:] or [[0, 0, 0]]
        elif kind == "past":
            sg[-1][1] = T + 1
        elif kind == "fraction":
            return np.asarray(sg, dtype=float) + 0.5
        elif kind == "overlap":
            sg = [[0, T, 0], [0, 1, 0]]
        else:
            sg = [[0, T, 0]]
        return sg

    def param_bad(draw):
        name = draw(st.sampled_from(["n_labels", "max_length"]))
        bad = draw(st.sampled_from([0, -1, 1.5, "2", None, np.nan]))
        args = {"n_labels": K, "max_length": L, name: bad}
        return structures.SemiMarkov(**args), (name,)
    return _Instance(model, x, y, outs,
                     lambda a, b: float(np.sum(labels(a) != labels(b))),
                     x_bad, y_bad, param_bad, lambda r: r.normal(size=(T, d)))


def _check_segments(draw):
    rng = _seed(draw)
    T, K, L = draw(st.integers(1, 5)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    segs = _segmentations(T, K, L)
    y = segs[int(rng.integers(len(segs)))]
    if draw(st.booleans()):
        order = rng.permutation(len(y))
        given = [y[i] for i in order]

        def check(out):
            np.testing.assert_array_equal(np.asarray(out)[np.argsort(np.asarray(out)[:, 0])],
                                          np.asarray(y))
        return Case(lambda: structures.check_segments(given, T, K, L), check)
    kind = draw(st.sampled_from(["label", "cover", "array"]))
    if kind == "label":
        bad = [(a, b, K) for a, b, _ in y]
    elif kind == "cover":
        bad = y[:-1] if len(y) > 1 else [(0, T + 1, 0)]
    else:
        bad = _mutated_array(draw, np.asarray(y, dtype=float), allow=("ragged",))
    return Case(lambda: structures.check_segments(bad, T, K, L), names=("y",))


def _segment_polytope(draw):
    from scipy.optimize import linprog
    if draw(st.booleans()):
        T, L, K, name = draw(st.sampled_from([(0, 1, 1, "T"), (2, 0, 1, "L"), (2, 1, 0, "K"),
                                              (2.5, 1, 1, "T"), (2, 3, 1, "L"),
                                              ("2", 1, 1, "T")]))
        return Case(lambda: structures.segment_polytope(T, L, K), names=(name, "max_length"))
    rng = _seed(draw)
    T, K = draw(st.integers(1, 4)), draw(st.integers(1, 2))
    L = draw(st.integers(1, T))
    model = structures.SemiMarkov(K, L)
    x = np.zeros((T, 1))
    outs = [model.encode(x, sg) for sg in _segmentations(T, K, L)]
    s = rng.normal(size=len(outs[0]))

    def check(P):
        E = P.E.toarray()
        for mu in outs:
            assert np.allclose(E @ mu, P.e)
        res = linprog(-s, A_eq=E, b_eq=P.e, bounds=(0, 1), method="highs")
        assert res.status == 0
        _close(-res.fun, max(float(s @ mu) for mu in outs), atol=1e-7)
    return Case(lambda: structures.segment_polytope(T, L, K), check)


def _latent_ssvm(draw):
    from structlp.latent import LatentGraphLabeling, LatentSSVM
    rng = _seed(draw)
    model = LatentGraphLabeling(n_labels=2, n_states_per_label=2)
    none = np.zeros((0, 2), dtype=int)
    X = [{"node_features": rng.normal(size=(1, 2)), "edges": none,
          "edge_features": np.zeros((0, 1))} for _ in range(6)]
    Y = [np.array([int(rng.integers(2))]) for _ in range(6)]
    if draw(st.booleans()):
        name = draw(st.sampled_from(["C", "n_init", "max_iter", "learner"]))
        bad = {"C": _bad_scalar(draw, "positive"), "n_init": _bad_scalar(draw, "int"),
               "max_iter": _bad_scalar(draw, "int"),
               "learner": draw(st.sampled_from(["FW", 3, object()]))}[name]
        return Case(lambda: LatentSSVM(model, **{name: bad}).fit(X, Y), names=(name,))

    def fit():
        return LatentSSVM(model, C=1.0, random_state=0, max_iter=3).fit(X, Y)

    def check(est):
        h = est.objective_history_
        assert all(b <= a + 1e-9 * (1 + abs(a)) for a, b in zip(h, h[1:])), h
        pred = est.predict(X)
        assert len(pred) == len(X) and all(int(p[0]) in (0, 1) for p in pred)
    return Case(fit, check)


REGISTRY.update({
    "structlp.structures.SemiMarkov": _new_structure_entry(_semi_markov_instance),
    "structlp.structures.check_segments": Entry(_check_segments, examples=20),
    "structlp.structures.segment_polytope": Entry(_segment_polytope, examples=10),
    "structlp.LatentSSVM": Entry(_latent_ssvm, examples=6),
})


def _exports():
    return sorted(f"{mod}.{n}" for mod, m in MODULES.items() for n in m.__all__
                  if callable(getattr(m, n)))


# ----------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module", autouse=True)
def _report_counts(request):
    yield
    if not COUNTS:
        return
    lines = [f"fuzz cases per entry point ({sum(sum(c.values()) for c in COUNTS.values())} in "
             "all): valid (oracle-checked) / refused (clear error)"]
    for key in sorted(COUNTS):
        lines.append(f"  {key:<48} {COUNTS[key]['valid']:>5} / {COUNTS[key]['refused']:<5}")
    plugins = request.config.pluginmanager
    reporter, capture = plugins.getplugin("terminalreporter"), plugins.getplugin("capturemanager")
    if reporter is None or capture is None:                 # pragma: no cover
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():             # shown without -s as well
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


def test_every_export_has_an_entry():
    missing = [name for name in _exports() if name not in REGISTRY]
    assert not missing, (f"exported without a fuzz entry: {missing}; add one to REGISTRY in "
                         "tests/test_fuzz.py (see its docstring)")
    stale = sorted(set(REGISTRY) - set(_exports()))
    assert not stale, f"fuzz entries for names no longer exported: {stale}"


def _fuzz(key, factor, entry=None):
    entry = REGISTRY[key] if entry is None else entry

    @settings(max_examples=entry.examples * factor, deadline=None, database=None,
              derandomize=not os.environ.get("STRUCTLP_FUZZ_RANDOM"),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(st.data())
    def run(data):
        run_case(key, entry.draw_case(data.draw))
    run()


_READER = """
import sys, numpy as np, structlp
for path in sys.argv[1:]:
    est = structlp.load(path + ".structlp")
    X = np.load(path + ".X.npy", allow_pickle=True)   # the test's own examples, trusted
    out = est.predict(list(X)) if any(k.endswith("_") for k in vars(est)) else []
    np.savez(path + ".out.npz", *[np.asarray(o) for o in out])
    print(path, type(est).__name__, repr(est))
"""


def test_save_load_round_trip_across_processes(tmp_path):
    """A file saved here loads in a fresh interpreter (which imported nothing else) and
    predicts exactly the same outputs there."""
    import subprocess
    import sys
    rng = np.random.default_rng(7)
    X = [_tree_example(rng, n) for n in (1, 3, 2)]
    Y = [rng.integers(0, 2, len(x["parents"])) for x in X]
    G = [_random_graph(rng, n) for n in (2, 3)]
    YG = [rng.integers(0, 2, len(g["node_features"])) for g in G]
    model = structures.TreeLabeling(2, loss="absolute")
    cases = {"tree_crf": (agm.TreeCRF(2, reg=0.5, max_iter=20).fit(X, Y), X),
             "junction_crf": (agm.JunctionTreeCRF(2, reg=0.5, max_iter=20).fit(G, YG), G),
             "frank_wolfe": (structlp.FrankWolfeLearner(model, C=2.0, max_iter=20,
                                                        random_state=0).fit(X, Y), X),
             "unfitted": (structlp.CuttingPlaneLearner(model, C=0.5), X)}
    paths = []
    for name, (est, ex) in cases.items():
        path = str(tmp_path / name)
        structlp.save(est, path + ".structlp")
        arr = np.empty(len(ex), dtype=object)
        arr[:] = ex
        np.save(path + ".X.npy", arr, allow_pickle=True)
        paths.append(path)
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", _READER, *paths], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(root)))
    assert r.returncode == 0, r.stderr[-3000:]
    for (name, (est, ex)), path in zip(cases.items(), paths):
        assert f"{path} {type(est).__name__} {est!r}" in r.stdout
        got = np.load(path + ".out.npz")
        if name == "unfitted":
            assert len(got.files) == 0
            continue
        for k, expect in enumerate(est.predict(ex)):
            np.testing.assert_array_equal(got[f"arr_{k}"], np.asarray(expect))


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_fuzz(key):
    _fuzz(key, 1)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_fuzz_slow(key):
    _fuzz(key, SLOW_FACTOR)


#: The fuzz cases of issue 37 for every learner, drawn more often than in the registry's
#: entries: features and C at the edge of float64 (refused by name, or a finite objective
#: equal to the brute-force one), and ChooseK with and without its decoder at C up to 1e8
#: (``objective_`` the brute-force objective at ``coef_``).
SCALE_ENTRIES = {
    name: _learner_entry(name, tuple(PROBLEMS) if name == "CuttingPlaneLearner" else
                         ("BipartiteMatching", "TreeLabeling"), modes=("scale", "scale", "choose_k"),
                         examples=16)
    for name in ("CuttingPlaneLearner", "FrankWolfeLearner", "SubgradientLearner",
                 "MaxMarginLearner")}


@pytest.mark.parametrize("name", sorted(SCALE_ENTRIES))
def test_fuzz_scales_and_exact_objective(name):
    _fuzz(f"structlp.{name}", 1, SCALE_ENTRIES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCALE_ENTRIES))
def test_fuzz_scales_and_exact_objective_slow(name):
    _fuzz(f"structlp.{name}", SLOW_FACTOR, SCALE_ENTRIES[name])
