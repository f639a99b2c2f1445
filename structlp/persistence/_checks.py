"""Checks of a loaded structlp file beyond its format: each array referenced once, and
fitted attributes that the class can hold (see :mod:`structlp.persistence`)."""

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
