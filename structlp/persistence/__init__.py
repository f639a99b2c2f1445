"""Safe persistence of estimators and models: plain data, never code.

:func:`save` writes an estimator (fitted or not) or a model object to one file;
:func:`load` reads it back without executing anything from the file: no pickle,
only JSON and numpy arrays read with ``allow_pickle=False``, and only classes
on an allow-list are instantiated.  :func:`clone` makes an unfitted copy with
deep-copied parameters.

Both work by introspection, for every class that follows the estimator
convention (``__init__`` stores its arguments unchanged under their own names;
learned attributes end in ``_``): an object is its class's import path, its
constructor parameters (recursively) and its attributes ending in ``_``.  The
compiled cvxpy problem (``problem_``) and private (``_``-prefixed) caches are
not saved.

File format (version :data:`FORMAT_VERSION`)
--------------------------------------------
A zip archive with exactly these members:

``structlp.json``
    UTF-8 JSON metadata::

        {"format": "structlp", "format_version": 1, "structlp_version": "0.1.0",
         "class": "<import path of the saved object's class>",
         "fitted": {"<attribute>": "<type name>", ...},
         "arrays": {"arrays/0.npy": {"sha256": "...", "dtype": "<f8", "shape": [3]}, ...},
         "root": <node>}

    A node is a JSON ``null``, ``true``/``false``, integer, string or finite number,
    or an object with a ``"type"`` key:

    - ``{"type": "float", "value": "nan" | "inf" | "-inf"}``;
    - ``{"type": "list" | "tuple", "items": [<node>, ...]}``;
    - ``{"type": "dict", "items": [[<key node>, <value node>], ...]}``;
    - ``{"type": "ndarray" | "scalar", "file": "arrays/<n>.npy"}`` (a numpy array, or
      a numpy scalar stored as a 0-d array);
    - ``{"type": "sparse", "format": "csr" | "csc" | ..., "container": "array" |
      "matrix", "shape": [r, c], "data": <node>, "indices": <node>, "indptr": <node>}``
      (a scipy.sparse matrix by its CSR arrays);
    - ``{"type": "object", "class": "<module>.<qualname>", "params": {<name>: <node>},
      "attributes": {<name>: <node>}}`` (constructor parameters, attributes ending in
      ``_``).

``arrays/<n>.npy``
    One numpy array each, in ``.npy`` format (``numpy.save(..., allow_pickle=False)``).

``SHA256``
    The hexadecimal SHA-256 of ``structlp.json``; every array's SHA-256 is in the
    metadata.  (These checksums detect corruption, not forgery: anyone can recompute
    them.  Safety against a crafted file comes from the rules below, not from them.)  A file whose checksums do not match, that has other members (a
    pickle), an object array, an unknown node type, a class that is not allowed,
    parameters the class does not take, or a newer ``format_version`` is refused
    with :class:`~structlp.exceptions.PersistenceError`.

Writing
-------
:func:`save` writes to a temporary file beside the target, flushes and fsyncs it and
renames it over the target: a kill, a crash or a full disk during a save leaves the
previous file intact (and a failed save raises PersistenceError).

Reading, bounded
----------------
:func:`load` knows every size before it allocates it.  It reads regular files only
(never a device, a FIFO or a directory, also not through a symlink); refuses more than
``MAX_MEMBERS`` members, duplicate member names, members expanding to more than
``max_bytes`` in total (default 1 GiB, and at most 100 times the file size above
64 MiB: a zip bomb), a ``.npy`` header whose dtype or shape differ from the metadata or
whose size differs from its member, complex, record or object dtypes, an array
referenced more than once, metadata nested more than :data:`MAX_DEPTH` levels deep
(found by a linear scan before the JSON is parsed, so no parser recursion is involved),
fitted attributes that cannot be what the class stores (a ``coef_`` that is not a finite
real vector of ``n_features_in_`` entries), and size-like hyper-parameters larger than
the saved weights allow (a structure's ``n_labels`` above ``len(coef_)``, an AGM or CRF
whose ``n_labels`` and ``n_features_in_`` do not give ``len(coef_)`` weights, a sequence
feature map whose ``n_features`` is not ``len(coef_)``): a file cannot make ``predict``
allocate what its arrays do not imply.  An unfitted model has no weights to pin its
hyper-parameters down; its ``fit`` sizes its work by them (and by the training data).
Each refusal is a :class:`~structlp.exceptions.PersistenceError` naming the cause.

The checksums are not keyed.  A keyed checksum (an HMAC with a secret the user keeps)
would tell a file one wrote from a forged one, but it is not offered: loading is safe for
any file by the rules above (nothing executes, every size is bounded, every array is
checked against what its attribute may hold), and a key would add a secret to manage
without making an untrusted file any safer to read.  Sign or store files out of band
where their origin matters.

Runtime parameters
------------------
The parameters in :data:`RUNTIME_PARAMS` (``backend`` and ``client``: where a fit sends
the training data, ``n_jobs``, ``callback``) describe the machine and the session, not the
model:
:func:`save` does not write them and :func:`load` ignores them in a file (the loaded
estimator gets the constructor defaults) unless ``load(path, runtime_params=True)``.

Classes
-------
structlp's own estimators, models, polytopes, sequence losses and feature maps
are allowed.  A user-declared class (e.g. a :class:`~structlp.StructuredModel`
subclass) is saved by import path and its ``__init__`` parameters and is loaded
only when passed, ``load(path, classes=[MyModel])``, or named,
``load(path, allowed=["mypackage.models.MyModel"])`` (then imported).
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import inspect
import io
import json
import math
import os
import re
import zipfile
import zlib
from typing import IO, Any, Dict, Optional, Sequence, Union, cast

import numpy as np
import scipy.sparse as sp

from ..exceptions import PersistenceError
from ..utils.fingerprint import fingerprint  # noqa: F401  (here in 0.1.0)
from . import _archive
from ._classes import LIBRARY_CLASSES, library_class, library_classes  # noqa: F401
from ._checks import check_attributes as _check_attributes
from ._checks import check_depth as _check_depth
from ._checks import check_references as _check_references
from ._checks import check_sizes as _check_sizes
from ._checks import MAX_DEPTH  # noqa: F401  (documented limit)
from ._archive import MAX_BYTES, MAX_MEMBERS  # noqa: F401  (documented limits)
from ._archive import atomic_write  # noqa: F401  (also used by the CLI for --json)

#: Version of the file format written by :func:`save`; :func:`load` reads this and older.
FORMAT_VERSION = 1
_META, _SUM = "structlp.json", "SHA256"
_ATTR = re.compile(r"^[A-Za-z][A-Za-z0-9_]*_$")
_SPARSE_FORMATS = ("csr", "csc", "coo", "bsr", "dia", "dok", "lil")
#: Constructor parameters that describe the session, not the model: not written by
#: :func:`save`, not restored by :func:`load` unless ``runtime_params=True``.
RUNTIME_PARAMS = ("backend", "client", "n_jobs", "callback")


# ---------------------------------------------------------------- introspection
def _path(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _init_names(cls):
    sig = inspect.signature(cls.__init__)
    return [p.name for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def init_params(obj: Any) -> Dict[str, Any]:
    """The constructor parameters of ``obj``, read back by name.

    From ``get_params()`` when the object has it, else from the attribute of the same
    name (or the ``_params`` dict some objects keep of their raw arguments).

    Raises
    ------
    PersistenceError
        When a parameter is not stored on the object (the class does not follow the
        convention that ``__init__`` stores its arguments under their own names).
    """
    names = _init_names(type(obj))
    if callable(getattr(obj, "get_params", None)):
        got = obj.get_params()
        if set(names) <= set(got):
            return {n: got[n] for n in names}
    raw = getattr(obj, "_params", None)
    out = {}
    for n in names:
        if isinstance(raw, dict) and n in raw:
            out[n] = raw[n]
        elif n in vars(obj):
            out[n] = vars(obj)[n]
        else:
            raise PersistenceError(
                f"Cannot save {type(obj).__name__}: its constructor parameter {n!r} is not "
                f"stored as an attribute {n!r} (structlp saves an object as its constructor "
                "parameters; store each argument unchanged under its own name in __init__).")
    return out


def fitted_attributes(obj: Any) -> Dict[str, Any]:
    """The learned state of ``obj``: attributes ending in ``_`` (not private ones), without
    the transient ones (``problem_``: the compiled cvxpy problem and its solver objects)."""
    skip = set(getattr(type(obj), "_transient", ("problem_",)))
    return {k: v for k, v in vars(obj).items()
            if _ATTR.match(k) and k not in skip}


def _persistable_bases():
    from ..base import BaseEstimator
    from ..model import StructuredModel
    from ..polytope import Polytope
    from ..sequence.features import MarkovFeatures
    from ..sequence.learner import SoftmaxMarginLearner
    from ..sequence.losses import SequenceLoss
    return (BaseEstimator, StructuredModel, Polytope, SequenceLoss, MarkovFeatures,
            SoftmaxMarginLearner)


def _subclasses(cls):
    out, todo = set(), [cls]
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(c.__subclasses__())
    return out


def _is_persistable(obj):
    return isinstance(obj, _persistable_bases())


def _is_persistable_class(cls):
    return issubclass(cls, _persistable_bases())


def clone(estimator: Any) -> Any:
    """An unfitted copy of ``estimator``: the same class, its parameters deep-copied.

    A clone never shares a parameter object (e.g. the ``model``) with the original.
    scikit-learn's ``sklearn.base.clone`` also works on structlp estimators.

    Parameters
    ----------
    estimator : structlp estimator or model object

    Returns
    -------
    A new instance, ``type(estimator)(**deepcopy(estimator.get_params()))``.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=5, n_rows=3, random_state=0)
    >>> fitted = structlp.FrankWolfeLearner(model, C=0.5).fit(X, Y)
    >>> copy = structlp.clone(fitted)
    >>> # same parameters, not fitted
    >>> copy.get_params()["C"], hasattr(copy, "coef_")
    (0.5, False)
    """
    if isinstance(estimator, type) or not hasattr(estimator, "__dict__"):
        raise PersistenceError(
            f"clone expects a structlp estimator or model instance; got "
            f"{type(estimator).__name__}.")
    return type(estimator)(**copy.deepcopy(init_params(estimator)))


# ---------------------------------------------------------------- save
class _Writer:
    def __init__(self):
        self.arrays = {}

    def array(self, a, kind="ndarray"):
        if a.dtype.hasobject:
            raise PersistenceError(
                "Cannot save an object array (it could only be stored as a pickle); "
                "store numbers, or lists of arrays.")
        name = f"arrays/{len(self.arrays)}.npy"
        self.arrays[name] = a
        return {"type": kind, "file": name}

    def node(self, v, where):
        if isinstance(v, np.generic):   # before str/float: numpy scalars keep their type
            return self.array(np.asarray(v), kind="scalar")
        if v is None or type(v) in (bool, int, str):
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"type": "float", "value": repr(v)}
        if isinstance(v, np.ndarray):
            return self.array(v)
        if sp.issparse(v):
            A = v.tocsr()
            return {"type": "sparse", "format": v.format,
                    "container": "array" if isinstance(v, sp.sparray) else "matrix",
                    "shape": [int(n) for n in A.shape], "data": self.array(A.data),
                    "indices": self.array(A.indices), "indptr": self.array(A.indptr)}
        if isinstance(v, (list, tuple)):
            return {"type": type(v).__name__ if type(v) in (list, tuple) else "list",
                    "items": [self.node(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if isinstance(v, dict):
            return {"type": "dict", "items": [[self.node(k, f"{where} key"),
                                               self.node(x, f"{where}[{k!r}]")]
                                              for k, x in v.items()]}
        if _is_persistable(v) and not isinstance(v, type):
            return self.obj(v, where)
        kind = "a callable (code, not data)" if callable(v) else f"a {type(v).__name__}"
        raise PersistenceError(
            f"Cannot save {where}: it is {kind}. structlp saves numbers, strings, arrays, "
            "sparse matrices, lists/tuples/dicts of these, and structlp estimators or models.")

    def obj(self, o, where):
        cls = type(o)
        if "<locals>" in cls.__qualname__:
            raise PersistenceError(
                f"Cannot save {where}: its class {cls.__qualname__} is defined inside a "
                "function; define it at module level so that it has an import path.")
        params = {k: v for k, v in init_params(o).items() if k not in RUNTIME_PARAMS}
        return {"type": "object", "class": _path(cls),
                "params": {k: self.node(v, f"{cls.__name__}.{k}") for k, v in params.items()},
                "attributes": {k: self.node(v, f"{cls.__name__}.{k}")
                               for k, v in fitted_attributes(o).items()}}


def save(estimator: Any, path: Union[str, "os.PathLike[str]", IO[bytes]]) -> None:
    """Save an estimator (fitted or not) or a model object to ``path`` as plain data.

    The file is a zip of JSON metadata and ``.npy`` arrays (format in this module's
    docstring); loading it with :func:`load` executes nothing from the file.  The
    compiled problem (``problem_``), solver objects and private caches are not saved.

    Parameters
    ----------
    estimator : structlp estimator or model object
        Any object that follows the estimator convention (a user-declared model
        class too).
    path : str, os.PathLike or writable binary file object
        A path is written atomically (temporary file, fsync, rename): if the save fails
        or is killed, a previous file at ``path`` is left intact.

    Raises
    ------
    PersistenceError
        When the file cannot be written (full disk, no permission: the previous file
        is unchanged), or when some parameter or fitted attribute is not plain data (a callable kernel,
        a lambda, an open file...): the message names it.

    Examples
    --------
    >>> import io, structlp; from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=10, n_rows=4, random_state=0)
    >>> learner, buffer = structlp.MaxMarginLearner(model).fit(X, Y), io.BytesIO()
    >>> structlp.save(learner, buffer)          # or a path such as "learner.structlp"
    >>> copy = structlp.load(io.BytesIO(buffer.getvalue()))
    >>> bool((copy.coef_ == learner.coef_).all() and (copy.predict(X)[0] == learner.predict(X)[0]).all())
    True
    """
    from ..utils.version import __version__
    if not _is_persistable(estimator) or isinstance(estimator, type):
        raise PersistenceError(
            f"save expects a structlp estimator or model object; got "
            f"{type(estimator).__name__}.")
    w = _Writer()
    root = w.obj(estimator, type(estimator).__name__)
    blobs = {}
    for name, a in w.arrays.items():
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        blobs[name] = buf.getvalue()
    meta = {"format": "structlp", "format_version": FORMAT_VERSION,
            "structlp_version": __version__, "class": root["class"],
            "fitted": {k: type(v).__name__ for k, v in fitted_attributes(estimator).items()},
            "arrays": {n: {"sha256": hashlib.sha256(b).hexdigest(),
                           "dtype": w.arrays[n].dtype.str, "shape": list(w.arrays[n].shape)}
                       for n, b in blobs.items()},
            "root": root}
    text = json.dumps(meta, indent=1, allow_nan=False).encode("utf-8")

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr(_META, text)
            z.writestr(_SUM, hashlib.sha256(text).hexdigest())
            for name, b in blobs.items():
                z.writestr(name, b)

    if hasattr(path, "write"):
        write(path)
    else:
        _archive.atomic_write(os.fspath(path), write)


# ---------------------------------------------------------------- load
class _Reader:
    def __init__(self, arrays, resolve, runtime_params=False):
        self.arrays, self.resolve = arrays, resolve
        self.runtime_params, self.used = runtime_params, set()

    def node(self, n):
        if n is None or isinstance(n, (bool, int, float, str)):
            return n
        if isinstance(n, list) or not isinstance(n, dict) or "type" not in n:
            raise PersistenceError(f"Refusing a malformed file: unexpected node {str(n)[:80]}.")
        kind = n["type"]
        if kind == "float" and n.get("value") in ("nan", "inf", "-inf"):
            return float(n["value"])
        if kind in ("list", "tuple"):
            items = [self.node(x) for x in self._list(n, "items")]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            out = {}
            for pair in self._list(n, "items"):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise PersistenceError("Refusing a malformed file: a dict item is not a pair.")
                key = self.node(pair[0])
                try:
                    out[key] = self.node(pair[1])
                except TypeError:
                    raise PersistenceError("Refusing a malformed file: an unhashable dict key.") \
                        from None
            return out
        if kind in ("ndarray", "scalar"):
            name = n.get("file")
            if not isinstance(name, str) or name not in self.arrays:
                raise PersistenceError(f"Refusing a malformed file: no array {name!r}.")
            if name in self.used:
                raise PersistenceError(
                    f"Refusing the file: the array {name!r} is referenced more than once "
                    "(structlp.save writes each array once).")
            self.used.add(name)
            a = self.arrays[name]
            return a[()] if kind == "scalar" else a
        if kind == "sparse":
            fmt, container = n.get("format"), n.get("container")
            if fmt not in _SPARSE_FORMATS or container not in ("array", "matrix"):
                raise PersistenceError(f"Refusing a malformed file: sparse format {fmt!r}.")
            make = sp.csr_array if container == "array" else sp.csr_matrix
            try:
                A = make((self.node(n["data"]), self.node(n["indices"]), self.node(n["indptr"])),
                         shape=tuple(int(s) for s in n["shape"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise PersistenceError(f"Refusing a malformed file: bad sparse matrix ({exc}).") \
                    from None
            return A.asformat(fmt)
        if kind == "object":
            return self.obj(n)
        raise PersistenceError(f"Refusing a malformed file: unknown node type {kind!r}.")

    @staticmethod
    def _list(n, key):
        v = n.get(key)
        if not isinstance(v, list):
            raise PersistenceError(f"Refusing a malformed file: {key!r} is not a list.")
        return v

    def obj(self, n):
        cls = self.resolve(n.get("class"))
        params, attrs = n.get("params"), n.get("attributes", {})
        if not isinstance(params, dict) or not isinstance(attrs, dict):
            raise PersistenceError("Refusing a malformed file: params/attributes not a mapping.")
        names = set(_init_names(cls))
        unknown = sorted(set(params) - names)
        if unknown:
            raise PersistenceError(
                f"Refusing the file: {cls.__name__} takes no parameters {unknown} (the file "
                "was edited, or written by an incompatible version of the class).")
        bad = sorted(k for k in attrs if not _ATTR.match(str(k)))
        if bad:
            raise PersistenceError(
                f"Refusing the file: {bad} are not fitted-attribute names (they must end in '_').")
        if not self.runtime_params:
            params = {k: v for k, v in params.items() if k not in RUNTIME_PARAMS}
        try:
            obj = cls(**{k: self.node(v) for k, v in params.items()})
        except PersistenceError:
            raise
        except Exception as exc:  # the class refused its saved parameters
            raise PersistenceError(
                f"Refusing the file: {cls.__name__} rejects the saved parameters ({exc}).") \
                from None
        for k, v in attrs.items():
            obj.__dict__[k] = self.node(v)
        _check_attributes(obj)
        _check_sizes(obj)
        return obj


def _resolver(classes, allowed):
    given = {}
    for c in classes or ():
        if not isinstance(c, type):
            raise PersistenceError(f"classes must be a list of classes; got {c!r}.")
        given[_path(c)] = c
    by_name = {}
    for c in given.values():
        by_name.setdefault(c.__qualname__, []).append(c)
    allowed = set(allowed or ())
    for a in allowed:
        if not isinstance(a, str):
            raise PersistenceError(f"allowed must be a list of import paths (str); got {a!r}.")

    def resolve(path):
        if not isinstance(path, str):
            raise PersistenceError(f"Refusing a malformed file: class {path!r}.")
        if path in given:
            return given[path]
        known = library_class(path)
        if known is not None:
            return known
        qual = path.rsplit(".", 1)[-1]
        if len(by_name.get(qual, ())) == 1:  # the user's own class, saved from another module
            return by_name[qual][0]
        if path in allowed:
            module, _, name = path.rpartition(".")
            try:
                obj = importlib.import_module(module)
                for part in name.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError) as exc:
                raise PersistenceError(f"Cannot import the allowed class {path!r}: {exc}.") \
                    from None
            if not isinstance(obj, type):
                raise PersistenceError(f"The allowed name {path!r} is not a class.")
            return obj
        raise PersistenceError(
            f"Refusing to load class {path!r}: it is not one of structlp's classes. If you "
            f"trust this file, pass the class, load(path, classes=[{qual}]), or allow its "
            f"import path, load(path, allowed=[{path!r}]).")
    return resolve


#: What zipfile / zlib raise for a corrupted or truncated archive.
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError,
               OSError)


def load(path: Union[str, "os.PathLike[str]", IO[bytes]], classes: Optional[Sequence[type]] = None,
         allowed: Optional[Sequence[str]] = None, *, max_bytes: Optional[int] = None,
         runtime_params: bool = False) -> Any:
    """Load an estimator or model saved by :func:`save`; executes nothing from the file.

    Parameters
    ----------
    path : str, os.PathLike or readable binary file object
    classes : list of classes, optional
        User-declared classes the file may contain (matched by import path, or by name).
    allowed : list of str, optional
        Import paths of further classes that may be imported and instantiated.
    max_bytes : int, optional
        Bound on the total uncompressed size of the file's members; by default 1 GiB
        and at most 100 times the file size above 64 MiB (zip bombs are refused).
        Pass a larger bound to load a trusted file that exceeds it.
    runtime_params : bool, default=False
        Also restore :data:`RUNTIME_PARAMS` (``backend``, ``n_jobs``, ``callback``)
        from the file; by default they get their constructor defaults, so that a file
        cannot choose where the next fit sends its training data.

    Returns
    -------
    The estimator or model, with its fitted attributes: it predicts as the saved one.

    Raises
    ------
    PersistenceError
        When the file is not a regular file, not a structlp file, is of a newer
        format, exceeds the size bounds, was tampered with (checksum mismatch, extra or
        duplicate members such as a pickle, object arrays, arrays that differ from
        their declaration) or names a class that is neither structlp's nor
        passed/allowed.

    Examples
    --------
    A round trip is in :func:`save`'s example.

    >>> import io, structlp; buffer = io.BytesIO()
    >>> structlp.save(structlp.MaxMarginLearner(structlp.structures.Matching(), C=2.0), buffer)
    >>> structlp.load(io.BytesIO(buffer.getvalue())).C
    2.0
    """
    if max_bytes is not None and (not isinstance(max_bytes, (int, np.integer))
                                  or isinstance(max_bytes, bool) or max_bytes < 1):
        raise PersistenceError(f"max_bytes must be a positive integer; got {max_bytes!r}.")
    if hasattr(path, "read"):
        f, owned = path, False
    else:
        f, owned = _archive.open_regular(os.fspath(path)), True
    try:
        z = _archive.open_archive(f, path, max_bytes)
        with z:
            return _load_archive(z, path, classes, allowed, runtime_params, max_bytes)
    except PersistenceError:
        raise
    except _UNREADABLE as exc:          # a damaged member header, a truncated stream
        raise PersistenceError(
            f"Refusing {path!r}: the structlp file is corrupted or truncated "
            f"({type(exc).__name__}: {exc}).") from None
    finally:
        if owned:
            cast(IO[bytes], f).close()


def _load_archive(z, path, classes, allowed, runtime_params, max_bytes):
    names = set(z.namelist())
    if _META not in names or _SUM not in names:
        raise PersistenceError(
            f"{path!r} is not a structlp file: it lacks {_META!r} or {_SUM!r}.")
    bound = min(_archive.MAX_META_BYTES, _archive.limit(0, max_bytes))
    try:
        text = _archive.read_member(z, _META, path, bound)
    except _UNREADABLE as exc:
        raise PersistenceError(
            f"Refusing {path!r}: its member {_META!r} cannot be read; the structlp "
            f"file is corrupted or truncated ({type(exc).__name__}: {exc}).") from None
    stated = _archive.read_member(z, _SUM, path, 1024).decode("ascii", "replace").strip()
    if stated != hashlib.sha256(text).hexdigest():
        raise PersistenceError(
            f"Refusing {path!r}: the checksum of its metadata does not match (the file "
            "was modified or corrupted).")
    _check_depth(text, path)
    try:
        meta = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PersistenceError(f"Refusing {path!r}: its metadata is not JSON that structlp "
                               f"reads ({type(exc).__name__}).") from None
    if not isinstance(meta, dict) or meta.get("format") != "structlp":
        raise PersistenceError(f"{path!r} is not a structlp file.")
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PersistenceError(f"Refusing {path!r}: bad format_version {version!r}.")
    if version > FORMAT_VERSION:
        raise PersistenceError(
            f"{path!r} has format version {version} (written by structlp "
            f"{meta.get('structlp_version')}); this structlp reads versions up to "
            f"{FORMAT_VERSION}. Upgrade structlp to load it.")
    listed = meta.get("arrays")
    if not isinstance(listed, dict):
        raise PersistenceError(f"Refusing {path!r}: malformed array list.")
    extra = sorted(names - {_META, _SUM} - set(listed))
    if extra:
        raise PersistenceError(
            f"Refusing {path!r}: it has members that structlp does not write {extra} "
            "(e.g. a pickle).")
    _check_references(meta.get("root"), path)
    arrays = {}
    for name, info in listed.items():
        if name not in names or not isinstance(info, dict):
            raise PersistenceError(f"Refusing {path!r}: array {name!r} is missing.")
        try:
            arrays[name] = _archive.read_npy(z, name, info, path)
        except PersistenceError:
            raise
        except _UNREADABLE as exc:
            raise PersistenceError(
                f"Refusing {path!r}: its member {name!r} cannot be read; the structlp "
                f"file is corrupted or truncated ({type(exc).__name__}: {exc}).") \
                from None
    root = meta.get("root")
    if not isinstance(root, dict) or root.get("type") != "object":
        raise PersistenceError(f"Refusing {path!r}: its root is not an object.")
    try:
        return _Reader(arrays, _resolver(classes, allowed), runtime_params).node(root)
    except RecursionError:
        raise PersistenceError(f"Refusing {path!r}: its metadata is nested too deeply.") \
            from None
