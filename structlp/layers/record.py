"""The certificates of the last forward pass of a PyTorch or JAX structured layer.

The adapters return tensors (a projection, a mean loss), which carry no certificate; each
forward records its examples' certificates here, read back by
``structlp.layers.torch.last_certificates()`` (or the JAX module's), e.g. after
``loss = fy_loss(...)`` in a training loop.  Under ``jax.jit`` the record is written when
the compiled function runs (its host callback), not when it is traced.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, List, Optional

import numpy as np


@dataclasses.dataclass
class Certificates:
    """What the last forward certified, one entry per example.

    Attributes
    ----------
    layer : str
        ``"sparsemap"``, ``"fy_loss"`` or ``"spo_plus"``.
    kind : str or None
        The loss kind (``fy_loss``).
    certified : ndarray of bool, shape (m,)
        Every projection under its gap threshold (sparsemap), the exact kinds True, the
        Monte-Carlo kind False.
    gaps : ndarray, shape (m,), or None
        The projections' Frank-Wolfe gaps (sparsemap, kind ``"sparsemap"``); None where no
        gap exists (exact oracle calls, exact marginals, Monte-Carlo estimates).
    n_iter : ndarray of int, shape (m,), or None
        Active-set iterations of each projection.
    stderr : ndarray, shape (m,), or None
        Monte-Carlo standard errors of the losses (kind ``"perturbed"``).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from structlp.structures import BipartiteMatching
    >>> from structlp.layers.torch import fy_loss, last_certificates
    >>> thetas = torch.tensor([[1.0, 0.6, 0.0, 0.8]], dtype=torch.float64, requires_grad=True)
    >>> loss = fy_loss(BipartiteMatching(), [np.zeros((2, 2, 1))], thetas, [np.eye(2)])
    >>> cert = last_certificates()                    # a Certificates record
    >>> cert.layer, cert.kind, cert.certified.tolist()
    ('fy_loss', 'sparsemap', [True])
    """

    layer: str
    kind: Optional[str]
    certified: np.ndarray
    gaps: Optional[np.ndarray] = None
    n_iter: Optional[np.ndarray] = None
    stderr: Optional[np.ndarray] = None

    @property
    def all_certified(self) -> bool:
        """Whether every example was certified."""
        return bool(np.all(self.certified))

    @classmethod
    def of_projections(cls, results: List[Any]) -> "Certificates":
        return cls("sparsemap", None, np.array([r.certified for r in results], dtype=bool),
                   np.array([r.gap for r in results], dtype=float),
                   np.array([r.n_iter for r in results], dtype=int))

    @classmethod
    def of_losses(cls, layer: str, kind: Optional[str], batch: Any) -> "Certificates":
        n_iter = None
        if kind == "sparsemap":
            n_iter = np.array([r.projection.n_iter for r in batch.results], dtype=int)
        return cls(layer, kind, batch.certified, batch.gaps, n_iter, batch.stderr)


class Recorder:
    """The last :class:`Certificates` written (one record per adapter module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Optional[Certificates] = None

    def write(self, rec: Certificates) -> None:
        with self._lock:
            self._last = rec

    def read(self) -> Optional[Certificates]:
        with self._lock:
            return self._last
