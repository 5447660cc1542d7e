"""The pure parts of ``ops/_recursive.py``: split points, leaves and the INFO decoding."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blasmp_array.ops import _recursive as recursive


@given(n=st.integers(1, 5000), base=st.integers(1, 600))
def test_leaves_tile_the_diagonal(n, base):
    offs = recursive.leaves(n, base)
    ends = offs[1:] + [n]
    assert offs[0] == 0 and offs == sorted(offs)
    sizes = [e - o for o, e in zip(offs, ends, strict=True)]
    assert all(0 < s <= base for s in sizes), (n, base, sizes)
    if n > base:
        h = recursive.split_point(n, base)
        assert 0 < h < n and h % base == 0


@pytest.mark.parametrize("n,base", [(20, 4), (20, 7), (5, 8), (1000, 64)])
def test_first_failure_names_the_global_order(n, base):
    offs = recursive.leaves(n, base)
    info = np.zeros(len(offs), np.int32)
    assert recursive.first_failure(info, n, base) == n + 1
    for i, off in enumerate(offs):
        info[:] = 0
        info[i] = 1
        if i + 1 < len(offs):
            info[i + 1] = 2  # a later (garbage) failure must not win
        assert recursive.first_failure(info, n, base) == off + 1
