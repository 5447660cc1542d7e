"""The leaves of the recursive local potrf (ops.lapack._recursive_potrf): a property test."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blasmp_array.ops.lapack._recursive_potrf import leaf_offsets


@given(
    n=st.integers(0, 5000),
    leaf=st.integers(1, 600),
    align=st.sampled_from([1, 2, 64, 256]),
    halve=st.booleans(),
)
def test_leaves_tile_the_matrix(n, leaf, align, halve):
    """The leaves cover 0..n in order, none larger than ``leaf``; blocked: all but the last
    exactly ``leaf``."""
    leaves = leaf_offsets(n, leaf, align, halve)
    assert sum(m for _, m in leaves) == n
    pos = 0
    for off, m in leaves:
        assert off == pos and 1 <= m <= leaf
        pos += m
    if not halve:
        assert all(m == leaf for _, m in leaves[:-1])
