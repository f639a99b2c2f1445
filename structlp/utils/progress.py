"""Progress reporting shared by every learner and experiment: ``verbose``, logging, callbacks.

One convention for the whole library:

- every module logs through ``logging.getLogger(__name__)`` (loggers ``structlp.*``);
- ``verbose`` (an int >= 0, or a bool) on a learner: 0 is silent; 1 emits one INFO line per
  epoch / round / split (objective, gap, time); 2 also shows a progress bar when tqdm is
  installed and standard error is a terminal;
- ``callback`` (optional) on the iterative learners is called as ``callback(info)`` after every
  epoch or round, with ``info`` a dict of plain numbers (always ``"iteration"`` and
  ``"time"``; ``"objective"``, ``"gap"`` and others when the learner knows them). A callback
  that returns ``True`` stops the fit early (the learner then warns nothing and records
  ``converged_ = False``).

A learner uses it as::

    progress = Progress(self, verbose=self.verbose, callback=self.callback, total=max_iter)
    for epoch in ...:
        ...
        if progress.update(iteration=epoch, objective=F, gap=g):
            break                       # the callback asked to stop
    progress.close()
"""

from __future__ import annotations

import logging
import numbers
import sys
import time
from typing import Any, Callable, List, Optional

from ..exceptions import InvalidParameterError

_HANDLER: Optional[logging.Handler] = None


def get_logger(name: str) -> logging.Logger:
    """The module logger (``name`` is the module's ``__name__``)."""
    return logging.getLogger(name)


def check_verbose(verbose: Any, owner: Optional[str] = None) -> int:
    """``verbose`` as an int >= 0 (bools allowed: True is 1).

    Examples
    --------
    >>> from structlp.utils import check_verbose
    >>> check_verbose(True), check_verbose(2)
    (1, 2)
    >>> try:
    ...     check_verbose(-1, owner="MyLearner")
    ... except ValueError as e:
    ...     print(type(e).__name__)
    InvalidParameterError
    """
    if isinstance(verbose, (bool, numbers.Integral)) and not isinstance(verbose, float) \
            and int(verbose) >= 0:
        return int(verbose)
    where = f" of {owner}" if owner else ""
    raise InvalidParameterError(
        f"The 'verbose' parameter{where} must be an int >= 0 or a bool; got {verbose!r}.")


def check_callback(callback: Any, owner: Optional[str] = None) -> Optional[Callable]:
    """``callback`` is None or a callable taking one dict.

    Examples
    --------
    >>> import structlp
    >>> from structlp.utils import check_callback
    >>> check_callback(None) is None, check_callback(print) is print
    (True, True)
    >>> try:
    ...     check_callback(3, owner="MyLearner")
    ... except structlp.InvalidParameterError as e:
    ...     print(e)
    The 'callback' parameter of MyLearner must be None or a callable callback(info); got int.
    """
    if callback is None or callable(callback):
        return callback
    where = f" of {owner}" if owner else ""
    raise InvalidParameterError(
        f"The 'callback' parameter{where} must be None or a callable callback(info); "
        f"got {type(callback).__name__}.")


#: Progress bars open now (log lines are then written through tqdm, above the bars).
_OPEN_BARS: List[Any] = []


class _Handler(logging.StreamHandler):
    """Plain lines on standard error; through ``tqdm.write`` while a bar is open, so that
    the bar stays on the last line instead of being broken by the log lines."""

    def emit(self, record: logging.LogRecord) -> None:
        if _OPEN_BARS:
            try:
                _OPEN_BARS[-1].write(self.format(record), file=self.stream)
                return
            except Exception:  # pragma: no cover - fall back to the plain stream
                pass
        super().emit(record)


def ensure_handler() -> None:
    """Make INFO lines of ``structlp.*`` visible when a user asks for ``verbose`` and has
    configured no logging of their own (one stderr handler on the ``structlp`` logger)."""
    global _HANDLER
    root = logging.getLogger("structlp")
    if _HANDLER is None and not root.handlers and not logging.getLogger().handlers:
        _HANDLER = _Handler(sys.stderr)
        _HANDLER.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(_HANDLER)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class Progress:
    """Per-fit progress: log lines, an optional tqdm bar, and the user's callback.

    Parameters
    ----------
    owner : object or str
        The estimator (its class name prefixes every line) or a name.
    verbose : int
        0 silent, 1 log lines, 2 log lines and a progress bar (tqdm, on a terminal).
    callback : callable or None
        ``callback(info) -> bool | None``; returning True stops the fit.
    total : int or None
        The iteration budget (for the bar).
    logger : logging.Logger or None
        Defaults to the owner's module logger.

    Examples
    --------
    >>> from structlp.utils import Progress
    >>> seen = []
    >>> progress = Progress("MyLearner", verbose=0, callback=seen.append, total=3)
    >>> stops = [progress.update(iteration=i, objective=1.0 / (i + 1)) for i in range(3)]
    >>> progress.close()
    >>> # the callback saw every iteration
    >>> len(seen), seen[-1]["iteration"], stops
    (3, 2, [False, False, False])
    """

    def __init__(self, owner: Any, verbose: int = 0, callback: Optional[Callable] = None,
                 total: Optional[int] = None, logger: Optional[logging.Logger] = None) -> None:
        self.name = owner if isinstance(owner, str) else type(owner).__name__
        module = "structlp" if isinstance(owner, str) else type(owner).__module__
        self.logger = logger or logging.getLogger(module)
        self.verbose = int(verbose or 0)
        self.callback = callback
        self.t0 = time.perf_counter()
        self.bar = None
        if self.verbose:
            ensure_handler()
        if self.verbose >= 2 and sys.stderr.isatty():
            try:
                from tqdm.auto import tqdm
            except ImportError:    # optional dependency: plain log lines without it
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, desc=self.name, leave=False, file=sys.stderr)
                _OPEN_BARS.append(self.bar)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def update(self, **info: Any) -> bool:
        """Report one iteration; returns True when the callback asks to stop."""
        info.setdefault("time", self.elapsed())
        if self.verbose:
            line = f"{self.name}: " + ", ".join(f"{k} {_fmt(v)}" for k, v in info.items())
            if self.bar is not None:
                self.bar.update(1)
                self.bar.set_postfix({k: _fmt(v) for k, v in info.items()
                                      if k not in ("iteration", "time")}, refresh=False)
            self.logger.info(line)
        if self.callback is not None:
            return bool(self.callback(dict(info)))
        return False

    def message(self, text: str) -> None:
        """A free-form INFO line (shown when verbose)."""
        if self.verbose:
            self.logger.info(f"{self.name}: {text}")

    def close(self) -> None:
        """Close the progress bar, if any (the log lines stay)."""
        if self.bar is not None:
            if self.bar in _OPEN_BARS:
                _OPEN_BARS.remove(self.bar)
            self.bar.close()
            self.bar = None
