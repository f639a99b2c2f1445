"""Exceptions raised by structlp.

Every error a user can cause is one of these (or a plain ``ValueError`` /
``TypeError`` raised by the same validation helpers); solver failures are
wrapped into :class:`SolverError` so that no cvxpy traceback reaches the user.
"""


class StructlpError(Exception):
    """Base class of every structlp exception."""


class InvalidParameterError(StructlpError, ValueError):
    """A constructor or method argument has the wrong value or type."""


class InvalidInputError(StructlpError, ValueError):
    """Data passed to fit/predict (X, Y, features) is malformed."""


class InvalidOutputError(InvalidInputError):
    """A given output y is not a vertex of the declared output polytope."""


class DeclarationError(StructlpError, ValueError):
    """A structured model's declaration (polytope, loss, features) is unusable."""


class OracleError(DeclarationError):
    """A model's own decoder (its ``inference`` or ``inference_parts`` hook) returned an
    output that is not a maximizer: outside the declared output polytope, not a 0/1 part
    vector, or scoring below the example's true output on the scores it was given (a
    negative hinge).  The message names the example and the hook; structlp's built-in
    decoders are not checked, and a model whose class sets ``check_inference = False``
    opts out."""


class SolverError(StructlpError, RuntimeError):
    """A convex solver failed, or ended infeasible, unbounded or inaccurate."""


class NotFittedError(StructlpError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (a ``ValueError`` and an ``AttributeError``,
    as scikit-learn's ``NotFittedError``)."""


class FractionalSolutionError(SolverError):
    """An inference LP returned a fractional point where an output was expected."""


class ConvergenceWarning(UserWarning):
    """An iterative learner or solver stopped (``max_iter``, a time limit, loose solver
    tolerances) before reaching the requested accuracy; the message names the remedy."""


class RelaxationWarning(UserWarning):
    """A learner trained the LP relaxation of a declared output polytope that is not
    integral (a fractional vertex beat every output at the optimum), not its outputs; the
    message names the examples and the remedy."""


class PersistenceError(StructlpError, ValueError):
    """A model file cannot be saved or loaded safely: a value that is not plain data, a
    file that is not structlp's, of a newer format, tampered with (checksum mismatch, a
    pickle inside), or naming a class that is not allowed."""


class DataNotFoundError(InvalidInputError, FileNotFoundError):
    """A data set's folder (or one of its files) is missing: the research-use data sets
    (CK+ emotion, CoNLL-2005) are read from a path and never shipped.  Both a structlp error
    (so the command line reports it in one line) and a :class:`FileNotFoundError`."""


def naming(exc: StructlpError, label: str) -> StructlpError:
    """``exc`` with ``label`` (an example, ``"X[3]"``) prefixed to its message, unless the
    message names it already; ``exc`` itself when its class takes other arguments."""
    if label in str(exc):
        return exc
    try:
        return type(exc)(f"{label}: {exc}")
    except Exception:  # pragma: no cover - an exception class with other arguments
        return exc
