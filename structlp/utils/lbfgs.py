"""L-BFGS (``scipy.optimize.minimize``, method L-BFGS-B) with per-iteration progress.

Every L-BFGS learner of the library (the softmax-margin learner, the tree and
junction-tree CRFs) reports each iteration through :class:`~structlp.utils.progress.Progress`
(``iteration``, ``objective``, ``time``) and stops when the user's callback returns True.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
from scipy.optimize import minimize

from .progress import Progress


class _Stop(Exception):
    """Raised inside scipy's callback to end the iterations (works with every scipy)."""


def minimize_lbfgs(fun: Callable, x0: np.ndarray, args: Tuple = (),
                   options: Optional[Dict[str, Any]] = None,
                   progress: Optional[Progress] = None) -> Dict[str, Any]:
    """Minimize ``fun(x, *args) -> (value, gradient)`` by L-BFGS-B from ``x0``.

    Returns a dict ``x, fun, nit, success, message, stopped`` (``stopped``: the
    callback of ``progress`` asked to stop; ``success`` is then False).
    """
    last: Dict[str, Any] = {}

    def f(x, *a):
        value, grad = fun(x, *a)
        last["x"], last["f"] = np.array(x, copy=True), float(value)
        return value, grad

    state = {"nit": 0, "x": np.asarray(x0, dtype=float), "f": None}

    def report(xk):
        state["nit"] += 1
        xk = np.array(xk, copy=True)
        value = last["f"] if np.array_equal(last.get("x"), xk) else float(fun(xk, *args)[0])
        state["x"], state["f"] = xk, value
        if progress.update(iteration=state["nit"], objective=value):
            raise _Stop

    watched = progress is not None and (progress.verbose or progress.callback is not None)
    try:
        res = minimize(f, x0, args=args, jac=True, method="L-BFGS-B", options=options,
                       callback=report if watched else None)
    except _Stop:
        return {"x": state["x"], "fun": state["f"], "nit": state["nit"], "success": False,
                "message": "stopped by the callback", "stopped": True}
    finally:
        if progress is not None:
            progress.close()
    return {"x": res.x, "fun": float(res.fun), "nit": int(res.nit), "success": bool(res.success),
            "message": str(res.message), "stopped": False}
