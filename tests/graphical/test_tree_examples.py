"""Tree examples share the checked structure of equal parent arrays, and the check still
refuses every bad array (also after a good one of the same length)."""

import numpy as np
import pytest

from structlp.exceptions import InvalidInputError
from structlp.graphical.trees import check_tree_example


def _example(parents):
    n = len(parents)
    return {"node_features": np.ones((n, 2)), "edge_features": np.ones((n - 1, 1)),
            "parents": parents}


def test_equal_parent_arrays_share_one_read_only_structure():
    a = check_tree_example(_example(np.arange(-1, 4)))
    b = check_tree_example(_example(np.arange(-1, 4)))
    for name in ("parents", "order", "edge_child", "edge_of"):
        assert getattr(a, name) is getattr(b, name)
        assert not getattr(a, name).flags.writeable
    c = check_tree_example(_example(np.array([-1, 0, 1, 2, 3], dtype=np.int32)))
    np.testing.assert_array_equal(c.order, a.order)
    user = np.array([1, -1, 1, 2, 2])
    d = check_tree_example(_example(user))
    np.testing.assert_array_equal(d.order, [1, 0, 2, 3, 4])
    user[0] = -1                         # the user's array stays theirs
    assert d.parents[0] == 1


@pytest.mark.parametrize("parents, match", [([-1, 0, 1, 2, 2, 7], "parent 7"),
                                            ([-1, 0, 1, 2, 5, 4], "cycle"),
                                            ([-1, -1, 1, 2, 3, 4], "one root"),
                                            ([-1, 0, 2, 2, 3, 4], "own parent")])
def test_bad_arrays_are_refused_after_a_good_one_of_their_length(parents, match):
    check_tree_example(_example(np.arange(-1, 5)))
    with pytest.raises(InvalidInputError, match=match):
        check_tree_example(_example(np.array(parents)))
