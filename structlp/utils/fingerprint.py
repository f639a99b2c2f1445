"""Content digests: has the data (or a model's declaration) changed since the last fit?

One function, :func:`fingerprint`, answers for any plain data (numbers, strings, arrays,
sparse matrices, lists, tuples, dicts, classes and structlp objects by their attributes).
The learners use it to decide what a refit may reuse: the joint QP its compiled problem,
the cutting plane its working set (:func:`training_fingerprint`), Frank–Wolfe its dual
blocks (:func:`output_fingerprint`).
"""

from __future__ import annotations

import hashlib
import numbers
from typing import Any, Optional

import numpy as np
import scipy.sparse as sp


class _NoFingerprint(Exception):
    pass


def _is_structlp_object(obj: Any) -> bool:
    return any(c.__module__.split(".")[0] == "structlp" for c in type(obj).__mro__[:-1])


def _feed(h, obj, depth):
    if depth > 64:
        raise _NoFingerprint
    if obj is None or isinstance(obj, (bool, numbers.Number, str, bytes, np.generic)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        h.update(f"nd{obj.dtype.str}{obj.shape};".encode())
        if obj.dtype.hasobject:
            for v in obj.flat:
                _feed(h, v, depth + 1)
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
    elif sp.issparse(obj):
        A = obj.tocsr()
        h.update(f"sp{obj.format}{A.shape};".encode())
        for a in (A.data, A.indices, A.indptr):
            _feed(h, a, depth + 1)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}{len(obj)}[".encode())
        for v in obj:
            _feed(h, v, depth + 1)
        h.update(b"]")
    elif isinstance(obj, dict):
        h.update(f"dict{len(obj)}{{".encode())
        for k, v in obj.items():
            _feed(h, k, depth + 1)
            _feed(h, v, depth + 1)
        h.update(b"}")
    elif isinstance(obj, type):
        h.update(f"class:{obj.__module__}.{obj.__qualname__};".encode())
    elif _is_structlp_object(obj):
        h.update(f"object:{type(obj).__module__}.{type(obj).__qualname__}".encode())
        _feed(h, vars(obj), depth + 1)
    else:
        raise _NoFingerprint


def fingerprint(obj: Any) -> Optional[str]:
    """A digest of the content of ``obj`` (numbers, strings, arrays, sparse matrices,
    lists/tuples/dicts of these, classes, structlp objects by their attributes), or None
    when some part of it has no well-defined content (then callers must not reuse anything
    computed from it)."""
    h = hashlib.blake2b(digest_size=20)
    try:
        _feed(h, obj, 0)
    except _NoFingerprint:
        return None
    return h.hexdigest()


def training_fingerprint(data: Any) -> Optional[str]:
    """The digest of a training set in part form (:class:`~structlp.formulations.TrainingData`):
    equal digests, the same cutting planes are valid.

    Explicit part features enter as they are; a factored operator by its part scores and
    joint features at fixed random vectors (equal linear maps, almost surely)."""
    from ..part_features import MatrixFeatures
    rng = np.random.default_rng(0)
    w_probe = rng.normal(size=data.n_features)
    parts = []
    for P in data.Phi:
        P = P.matrix if isinstance(P, MatrixFeatures) else P
        if sp.issparse(P) or isinstance(P, np.ndarray):
            parts.append(P)
        else:
            parts.append((P.scores(w_probe), P.joint(rng.normal(size=P.shape[0]))))
    return fingerprint((data.n_examples, data.n_features, parts, list(data.c),
                        list(data.mu_true), [float(d) for d in data.d]))


def output_fingerprint(model: Any, data: Any) -> Optional[str]:
    """What a Frank–Wolfe dual state depends on: the model and each example's part count and
    true output (the blocks' outputs are vertices of the same polytopes, whatever the
    features)."""
    mu = data.mu_true
    if hasattr(mu, "concatenated"):      # kept by their nonzeros: no dense vector made
        idx, _, off = mu.concatenated()
        sizes = np.asarray(mu.sizes(), dtype=np.int64)
    else:
        support = [np.flatnonzero(t) for t in mu]
        idx = np.concatenate(support) if support else np.zeros(0, dtype=np.int64)
        off = np.concatenate(([0], np.cumsum([len(a) for a in support])))
        sizes = np.array([int(np.size(t)) for t in mu], dtype=np.int64)
    # all supports in one array and their offsets: one array to digest, not one per example
    return fingerprint((repr(model), data.n_features, np.asarray(idx, dtype=np.int64),
                        np.asarray(off, dtype=np.int64), sizes))
