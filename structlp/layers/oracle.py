"""One example's MAP oracle and the argument checks shared by the structured layers.

For part scores ``s`` (shape (L,), ``L = model.n_parts(x)``) the oracle returns

.. math::

    v(s) \\in \\arg\\max_{\\mu \\in \\mathcal Y(x)} s \\cdot \\mu,

a 0/1 part vector: by the model's decoder when it has one (a user-declared decoder's
outputs are checked as every learner checks them), else by the inference LP over the
declared polytope (:func:`structlp.inference.maximize_checked`, whose fractional optima
are refused).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional, Tuple

import numpy as np

from ..compiler import PolytopeCache, needs_polytopes
from ..exceptions import InvalidInputError, InvalidOutputError, InvalidParameterError
from ..inference import maximize_checked
from ..model import StructuredModel
from ..utils.validation import check_part_scores

#: model -> (its parameters' signature, PolytopeCache): each declared polytope built once
#: per ``polytope_key`` while the model's parameters stay the same
_CACHES: "weakref.WeakKeyDictionary[Any, Tuple[Any, PolytopeCache]]" = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def polytope_cache(model: StructuredModel) -> Optional[PolytopeCache]:
    """The polytope cache kept for ``model`` as long as it lives and its parameters (its
    ``__dict__``: values, or the identity of non-scalar ones) stay the same; None when the
    model cannot be weakly referenced or hashed (its polytopes are then built per call)."""
    sig = tuple((k, v if isinstance(v, (bool, int, float, str, type(None))) else id(v))
                for k, v in sorted(getattr(model, "__dict__", {}).items()))
    try:
        entry = _CACHES.get(model)
        if entry is None or entry[0] != sig:      # new, or its parameters were changed
            with _LOCK:
                entry = _CACHES[model] = (sig, PolytopeCache(model))
        return entry[1]
    except TypeError:
        return None


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` of two float vectors; long ones by ``np.einsum`` (a single-threaded loop):
    a multi-threaded BLAS dot, which NumPy calls above a few thousand entries, costs
    milliseconds on a loaded machine where this costs microseconds."""
    if a.size <= 4096:
        return float(a @ b)
    return float(np.einsum("i,i->", a, b))


def check_model(model: Any, owner: str) -> StructuredModel:
    """Refuse anything but a :class:`~structlp.StructuredModel`."""
    if not isinstance(model, StructuredModel):
        raise InvalidParameterError(
            f"The 'model' argument of {owner} must be a structlp.StructuredModel (a built-in "
            f"structure or a declared model); got {type(model).__name__}.")
    return model


def check_n_parts(model: StructuredModel, x: Any, name: str = "x") -> int:
    L = model.n_parts(x)
    try:
        L = int(L)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"{type(model).__name__}.n_parts({name}) must return an int; got {L!r}.") from None
    return L


class ExampleOracle:
    """``argmax_{mu in Y(x)} s . mu`` for one checked example ``x``, as a 0/1 float vector.

    Parameters
    ----------
    model : StructuredModel
    x : a checked example (``model.check_x(x)``)
    n_parts : int

    Attributes
    ----------
    n_calls : int
        Calls so far.
    uses_lp : bool
        Whether the last call solved the inference LP (no decoder for this example).
    """

    def __init__(self, model: StructuredModel, x: Any, n_parts: int) -> None:
        self.model, self.x, self.L = model, x, n_parts
        self.hook = model.decoder_hook()
        self.check_poly = (self.hook is not None and bool(model.check_inference)
                           and needs_polytopes(model))
        self._poly: Any = None
        self.n_calls = 0
        self.uses_lp = False

    def polytope(self) -> Any:
        """The example's declared polytope (checked, bounded; cached per polytope_key)."""
        if self._poly is None:
            cache = polytope_cache(self.model)
            if cache is None:
                cache = PolytopeCache(self.model)
            self._poly = cache.get(self.x, 0, self.L)
        return self._poly

    def __call__(self, s: np.ndarray,
                 truth: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
        self.n_calls += 1
        model = self.model
        if self.hook is None:                    # structlp's own decoder, or none
            mu = None if self.uses_lp else model.inference_parts(self.x, s)
        else:
            mu = model.checked_inference_parts(
                self.x, s, polytope=self.polytope() if self.check_poly else None,
                truth=truth)
        if mu is None:
            self.uses_lp = True
            _, mus = maximize_checked(model, [self.x], [s], polytopes=[self.polytope()])
            mu = mus[0]
        if type(mu) is not np.ndarray or mu.dtype != np.float64:
            mu = np.asarray(mu, dtype=float)
        return mu

    def encode_output(self, y: Any, name: str = "y") -> np.ndarray:
        """The part vector of the output ``y`` of this example, checked to be a vertex of its
        declared polytope.

        Raises
        ------
        InvalidOutputError
            Naming ``name``: ``y`` cannot be encoded, or is not an output of ``x``.
        """
        try:
            return self.model.checked_output(self.x, y, self.polytope(), name=name)
        except InvalidOutputError as exc:
            raise InvalidOutputError(f"{exc} ({name} must be an output of x.)") from None


def encode_solution(oracle: "ExampleOracle", w: Any, name: str = "w") -> np.ndarray:
    """A known optimal solution ``w``: an output as the model holds outputs, or directly its
    0/1 part vector of shape (L,); checked to be a vertex of the example's polytope."""
    arr = np.asarray(w) if not isinstance(w, (dict, str)) else None
    if arr is not None and arr.shape == (oracle.L,) and arr.dtype.kind in "biuf" and \
            np.all((arr == 0) | (arr == 1)):
        try:
            return oracle.polytope().check_output(arr.astype(float), name=name)
        except InvalidOutputError as exc:
            raise InvalidOutputError(f"{exc} ({name} must be an output of x.)") from None
    return oracle.encode_output(w, name)


def prepare_example(model: StructuredModel, x: Any, theta: Any, name: str = "theta",
                    x_name: str = "x") -> Tuple[Any, np.ndarray, ExampleOracle]:
    """Check ``x`` (``model.check_x``) and ``theta``; return them and the example's oracle."""
    x = model.check_x(x)
    L = check_n_parts(model, x, x_name)
    theta = check_part_scores(theta, L, name)
    return x, theta, ExampleOracle(model, x, L)

