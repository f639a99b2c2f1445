"""utils.fingerprint: output_fingerprint reads sparse-kept true outputs without making them
dense, with the digest of the dense path; it changes when an output changes."""

import numpy as np

from structlp.compiler import prepare
from structlp.datasets import make_tree_labeling
from structlp.utils.fingerprint import output_fingerprint


class _Dense:
    def __init__(self, data):
        self.mu_true, self.n_features = list(data.mu_true), data.n_features


def test_sparse_and_dense_true_outputs_have_one_digest():
    X, Y, _, model = make_tree_labeling(n_samples=12, random_state=0)
    data = prepare(model, X, Y, operators=True)
    assert hasattr(data.mu_true, "concatenated")      # the sparse path is the one taken
    digest = output_fingerprint(model, data)
    assert digest == output_fingerprint(model, _Dense(data))
    Y2 = [np.array(y) for y in Y]
    Y2[5][0] = (Y2[5][0] + 1) % model.n_labels
    assert output_fingerprint(model, prepare(model, X, Y2, operators=True)) != digest
