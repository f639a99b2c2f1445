"""Exceptions raised by structlp.

Every error a user can cause is one of these (or a plain ``ValueError`` /
``TypeError`` raised by the same validation helpers); solver failures are
wrapped into :class:`SolverError` so that no cvxpy traceback reaches the user.
"""


class StructlpError(Exception):
    """Base class of every structlp exception.

    Examples
    --------
    >>> import structlp
    >>> from structlp.structures import BipartiteMatching
    >>> # one except clause for all of structlp's errors
    >>> try:
    ...     structlp.MaxMarginLearner(BipartiteMatching(), C=-1.0).fit([], [])
    ... except structlp.StructlpError as e:
    ...     print(type(e).__name__, isinstance(e, ValueError))
    InvalidParameterError True
    """


class InvalidParameterError(StructlpError, ValueError):
    """A constructor or method argument has the wrong value or type.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=2, n_rows=2, random_state=0)
    >>> try:
    ...     structlp.FrankWolfeLearner(model, C=-1.0).fit(X, Y)
    ... except structlp.InvalidParameterError as e:
    ...     print(e)
    The 'C' parameter of FrankWolfeLearner must be a float > 0. Got -1.0 instead.
    """


class InvalidInputError(StructlpError, ValueError):
    """Data passed to fit/predict (X, Y, features) is malformed.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=2, n_rows=2, random_state=0)
    >>> try:
    ...     structlp.FrankWolfeLearner(model).fit(X, Y[:1])         # one output for two inputs
    ... except structlp.InvalidInputError as e:
    ...     print(e)
    X and Y must have the same number of examples; got 2 and 1.
    """


class InvalidOutputError(InvalidInputError):
    """A given output y is not a vertex of the declared output polytope.

    Examples
    --------
    >>> import numpy as np
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=2, n_rows=2, random_state=0)
    >>> try:
    ...     structlp.FrankWolfeLearner(model).fit(X, [Y[0], np.ones((2, 2))])   # not an assignment
    ... except structlp.InvalidOutputError as e:
    ...     print(type(e).__name__)
    InvalidOutputError
    """


class DeclarationError(StructlpError, ValueError):
    """A structured model's declaration (polytope, loss, features) is unusable.

    Examples
    --------
    >>> import numpy as np
    >>> import structlp
    >>> # declares parts but no features
    >>> class NoFeatures(structlp.StructuredModel):
    ...     def n_parts(self, x):
    ...         return 2
    >>> try:
    ...     structlp.FrankWolfeLearner(NoFeatures()).fit([np.zeros(2)], [np.array([1.0, 0.0])])
    ... except structlp.DeclarationError as e:
    ...     print(type(e).__name__)
    DeclarationError
    """


class OracleError(DeclarationError):
    """A model's own decoder (its ``inference`` or ``inference_parts`` hook) returned an
    output that is not a maximizer: outside the declared output polytope, not a 0/1 part
    vector, or scoring below the example's true output on the scores it was given (a
    negative hinge).  The message names the example and the hook; structlp's built-in
    decoders are not checked, and a model whose class sets ``check_inference = False``
    opts out.

    Examples
    --------
    >>> import numpy as np
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> from structlp.structures import BipartiteMatching
    >>> # returns no assignment at all
    >>> class BadDecoder(BipartiteMatching):
    ...     def inference(self, x, scores):
    ...         return np.ones((x.shape[0], x.shape[0]))
    >>> X, Y, _, _ = make_bipartite_matching(n_samples=4, n_rows=3, random_state=0)
    >>> try:
    ...     structlp.FrankWolfeLearner(BadDecoder(), random_state=0).fit(X, Y)
    ... except structlp.OracleError as e:
    ...     print(type(e).__name__)
    OracleError
    """


class SolverError(StructlpError, RuntimeError):
    """A convex solver failed, or ended infeasible, unbounded or inaccurate.

    Examples
    --------
    >>> import cvxpy as cp
    >>> import structlp
    >>> from structlp.solvers import solve
    >>> x = cp.Variable()
    >>> try:
    ...     solve(cp.Problem(cp.Minimize(x), [x >= 1, x <= 0]), "CLARABEL", what="an empty LP")
    ... except structlp.SolverError as e:
    ...     print(type(e).__name__)
    SolverError
    """


class NotFittedError(StructlpError, ValueError, AttributeError):
    """An estimator was used before ``fit`` (a ``ValueError`` and an ``AttributeError``,
    as scikit-learn's ``NotFittedError``).

    Examples
    --------
    >>> import structlp
    >>> from structlp.structures import BipartiteMatching
    >>> try:
    ...     structlp.FrankWolfeLearner(BipartiteMatching()).predict([])
    ... except structlp.NotFittedError as e:
    ...     print(type(e).__name__, isinstance(e, AttributeError))
    NotFittedError True
    """


class FractionalSolutionError(SolverError):
    """An inference LP returned a fractional point where an output was expected.

    Examples
    --------
    >>> import numpy as np
    >>> import structlp
    >>> # a polytope with a fractional vertex
    >>> class HalfIntegral(structlp.StructuredModel):
    ...     def n_parts(self, x):
    ...         return 3
    ...     def features(self, x):
    ...         return np.eye(3)
    ...     def constraints(self, x, mu):
    ...         return [mu >= 0, mu <= 1, mu[0] + mu[1] <= 1, mu[1] + mu[2] <= 1, mu[0] + mu[2] <= 1]
    >>> try:
    ...     structlp.maximize(HalfIntegral(), [np.zeros(1)], [np.ones(3)])   # optimum (1/2, 1/2, 1/2)
    ... except structlp.FractionalSolutionError as e:
    ...     print(type(e).__name__, isinstance(e, structlp.SolverError))
    FractionalSolutionError True
    """


class ConvergenceWarning(UserWarning):
    """An iterative learner or solver stopped (``max_iter``, a time limit, loose solver
    tolerances) before reaching the requested accuracy; the message names the remedy.

    Examples
    --------
    >>> import warnings
    >>> import structlp
    >>> from structlp.datasets import make_bipartite_matching
    >>> X, Y, _, model = make_bipartite_matching(n_samples=20, n_rows=4, noise=1.0, random_state=0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     fw = structlp.FrankWolfeLearner(model, max_iter=1, tol=1e-12, random_state=0).fit(X, Y)
    >>> fw.converged_, [w.category.__name__ for w in caught]
    (False, ['ConvergenceWarning'])
    """


class RelaxationWarning(UserWarning):
    """A learner trained the LP relaxation of a declared output polytope that is not
    integral (a fractional vertex beat every output at the optimum), not its outputs; the
    message names the examples and the remedy.

    Examples
    --------
    Turned into an error, to refuse a model trained on a relaxation:

    >>> import warnings
    >>> import structlp
    >>> issubclass(structlp.RelaxationWarning, UserWarning)
    True
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", structlp.RelaxationWarning)
    ...     # a fit here raises RelaxationWarning instead of warning
    """


class PersistenceError(StructlpError, ValueError):
    """A model file cannot be saved or loaded safely: a value that is not plain data, a
    file that is not structlp's, of a newer format, tampered with (checksum mismatch, a
    pickle inside), or naming a class that is not allowed.

    Examples
    --------
    >>> import io
    >>> import structlp
    >>> try:
    ...     structlp.load(io.BytesIO(b"not a structlp file"))
    ... except structlp.PersistenceError as e:
    ...     print(type(e).__name__)
    PersistenceError
    """


class DataNotFoundError(InvalidInputError, FileNotFoundError):
    """A data set's folder (or one of its files) is missing: the research-use data sets
    (CK+ emotion, CoNLL-2005) are read from a path and never shipped.  Both a structlp error
    (so the command line reports it in one line) and a :class:`FileNotFoundError`.

    Examples
    --------
    >>> import structlp
    >>> from structlp.datasets import load_conll05
    >>> try:
    ...     load_conll05(path="no-such-folder")
    ... except structlp.DataNotFoundError as e:
    ...     print(type(e).__name__)
    DataNotFoundError
    """


def naming(exc: StructlpError, label: str) -> StructlpError:
    """``exc`` with ``label`` (an example, ``"X[3]"``) prefixed to its message, unless the
    message names it already; ``exc`` itself when its class takes other arguments."""
    if label in str(exc):
        return exc
    try:
        return type(exc)(f"{label}: {exc}")
    except Exception:  # pragma: no cover - an exception class with other arguments
        return exc
