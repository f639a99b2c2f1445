"""Checks of a loaded structlp file beyond its format: each array referenced once, fitted
attributes that the class can hold, size-like hyper-parameters that the saved arrays pin
down, and metadata nested no deeper than :data:`MAX_DEPTH` (see
:mod:`structlp.persistence`)."""

from __future__ import annotations

import numpy as np

from ..exceptions import PersistenceError


def check_references(root, path):
    """Refuse, before any array is read, a metadata tree that references an array twice."""
    seen, todo = set(), [root]
    while todo:
        n = todo.pop()
        if isinstance(n, list):
            todo.extend(n)
        elif isinstance(n, dict):
            if n.get("type") in ("ndarray", "scalar") and isinstance(n.get("file"), str):
                if n["file"] in seen:
                    raise PersistenceError(
                        f"Refusing {path!r}: the array {n['file']!r} is referenced more than "
                        "once (structlp.save writes each array once).")
                seen.add(n["file"])
            todo.extend(n.values())


def check_attributes(obj):
    """Refuse fitted attributes that the class cannot hold: ``coef_`` a finite real
    vector (of ``n_features_in_`` entries for a linear learner), ``n_features_in_`` a
    non-negative integer."""
    from ..base import StructuredPredictorMixin
    if not isinstance(obj, StructuredPredictorMixin):
        return
    state = vars(obj)
    name = type(obj).__name__
    if "n_features_in_" in state:
        n = state["n_features_in_"]
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
            raise PersistenceError(f"Refusing the file: {name}.n_features_in_ is {n!r}, not "
                                   "a non-negative integer.")
    if "coef_" in state:
        w = state["coef_"]
        if not isinstance(w, np.ndarray) or w.dtype.kind not in "biuf" or w.ndim != 1 \
                or not np.all(np.isfinite(w)):
            what = (f"an array of dtype {w.dtype} and shape {w.shape}"
                    if isinstance(w, np.ndarray) else type(w).__name__)
            raise PersistenceError(f"Refusing the file: {name}.coef_ is {what}; a fitted "
                                   "coef_ is a finite real vector.")
        linear = getattr(type(obj), "_scores", None) is StructuredPredictorMixin._scores
        n = state.get("n_features_in_")
        if linear and n is not None and w.shape != (int(n),):
            raise PersistenceError(
                f"Refusing the file: {name}.coef_ has shape {w.shape} but n_features_in_ is "
                f"{n}; the file was modified.")


#: Deepest nesting of arrays and objects that a structlp file's metadata may have (JSON
#: levels; :func:`structlp.save` writes about two per level of nested lists or objects).
MAX_DEPTH = 500
_CHUNK = 1 << 20


def json_depth(text: bytes, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of the JSON ``text`` (arrays and objects; brackets inside strings
    do not count), computed in one linear pass over chunks of 1 MB (no recursion, a few MB
    of temporaries), stopping as soon as it exceeds ``limit``."""
    depth = deepest = 0
    inside, run = 0, 0          # in a string at the chunk's start; backslashes ending it
    for start in range(0, len(text), _CHUNK):
        a = np.frombuffer(text, np.uint8, count=min(_CHUNK, len(text) - start), offset=start)
        pos = np.arange(a.size)
        backslash = a == 92
        last_other = np.maximum.accumulate(np.where(backslash, -1, pos))
        ending = np.where(last_other < 0, pos + 1 + run, pos - last_other)  # run ending at i
        before = np.concatenate(([run], ending[:-1]))
        quote = (a == 34) & (before % 2 == 0)             # an unescaped quote
        in_string = (inside + np.cumsum(quote)) % 2 == 1  # after each position
        step = ((a == 91) | (a == 123)).astype(np.int64) - ((a == 93) | (a == 125))
        step[in_string | quote] = 0
        level = depth + np.cumsum(step)
        if level.size:
            deepest = max(deepest, int(level.max()))
            depth, inside, run = int(level[-1]), int(in_string[-1]), int(ending[-1])
        if deepest > limit:
            break
    return deepest


def check_depth(text: bytes, path) -> None:
    """Refuse metadata nested deeper than :data:`MAX_DEPTH` before it is parsed: the JSON
    parser and the loader would otherwise recurse once per level."""
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise PersistenceError(
            f"Refusing {path!r}: its metadata is malformed, nested too deeply (more than "
            f"{MAX_DEPTH} levels: at least {depth}); structlp.save never writes such a file.")


def _library(obj) -> bool:
    from ._classes import LIBRARY_CLASSES
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}" in LIBRARY_CLASSES


def _count(v):
    """``v`` as a Python int when it is an integer (not a bool), else None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


#: Structures whose weights are one block per label and one per pair of labels.
_BLOCKS = ("TreeLabeling", "GraphLabeling", "JunctionTreeLabeling")


def check_sizes(obj):
    """Refuse size-like hyper-parameters larger than the saved weights allow, so that a
    file cannot make ``predict`` allocate what its arrays do not imply:

    * a learner's built-in structure (``model.n_labels``): every label has at least one
      weight, so ``1 <= n_labels <= len(coef_)``; a semi-Markov model's every (label,
      length) has one, so ``n_labels * max_length <= len(coef_)``; for the labelings of
      trees, graphs and junction trees (``n_labels d_v + n_labels**2 d_e`` weights)
      ``n_labels`` divides ``len(coef_)``;
    * the AGM and CRF estimators (``n_labels`` with ``n_features_in_ = (d_v, d_e)``):
      ``len(coef_) == n_labels d_v + n_labels**2 d_e`` exactly;
    * a sequence learner's feature map: ``len(coef_) == features.n_features`` (which the
      map computes from ``alphabet_size``, ``n_inputs``, ``window``, ...).

    Only structlp's own classes are checked (a user's class may share weights between
    labels); an unfitted object has no weights to check against.
    """
    w = vars(obj).get("coef_")
    if not isinstance(w, np.ndarray) or w.ndim != 1:
        return
    n, name = int(w.size), type(obj).__name__
    model = vars(obj).get("model")
    if model is not None and _library(model):
        k = _count(getattr(model, "n_labels", None))
        if k is not None and not 1 <= k <= n:
            raise PersistenceError(
                f"Refusing the file: {name}.model.n_labels is {k}, but coef_ has {n} "
                f"weights and {type(model).__name__} gives every label at least one; the "
                "file was modified.")
        m = _count(getattr(model, "max_length", None))   # SemiMarkov: a weight per (label, length)
        if k is not None and m is not None and not 1 <= k * m <= n:
            raise PersistenceError(
                f"Refusing the file: {name}.model.max_length is {m}, but coef_ has {n} "
                f"weights and {type(model).__name__} gives every (label, length) one "
                f"(n_labels * max_length = {k * m}); the file was modified.")
        if k is not None and type(model).__name__ in _BLOCKS and n % k:
            raise PersistenceError(
                f"Refusing the file: {name}.model.n_labels is {k}, but coef_ has {n} "
                f"weights, not a multiple of it ({type(model).__name__} has n_labels d_v + "
                "n_labels**2 d_e); the file was modified.")
    dims = vars(obj).get("n_features_in_")
    k = _count(vars(obj).get("n_labels"))
    if _library(obj) and k is not None and isinstance(dims, (tuple, list)) and len(dims) == 2:
        d_v, d_e = _count(dims[0]), _count(dims[1])
        if d_v is None or d_e is None or d_v < 0 or d_e < 0 \
                or k * d_v + k * k * d_e != n:
            raise PersistenceError(
                f"Refusing the file: {name} has n_labels {k} and n_features_in_ "
                f"{tuple(dims)}, which make n_labels * d_v + n_labels**2 * d_e weights, but "
                f"coef_ has {n}; the file was modified.")
    features = vars(obj).get("features")
    if features is not None and _library(features):
        m = _count(getattr(features, "n_features", None))
        if m is not None and m != n:
            raise PersistenceError(
                f"Refusing the file: {name}.features ({features!r}) has {m} features, but "
                f"coef_ has {n} weights; the file was modified.")
