"""Unit and property tests of the pure block-cyclic index maps (blasmp_array.layout); no MPI."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array.layout import (
    CACHED_INDICES,
    BlockCyclicLayout,
    g2l,
    l2g,
    local_indices,
    numroc,
    owner,
)
from blasmp_array.ops.engine._vectors import put_local, take_local

# a dimension: length n (0 and ragged included), block nb (1 and > n included), nprocs, src
dims = st.integers(0, 60).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.integers(1, max(1, n) + 5),
        st.integers(1, 7),
    ).flatmap(lambda t: st.tuples(*map(st.just, t), st.integers(0, t[2] - 1)))
)


def _layout(rows: tuple, cols: tuple) -> BlockCyclicLayout:
    (m, mb, pr, rsrc), (n, nb, pc, csrc) = rows, cols
    return BlockCyclicLayout((m, n), (mb, nb), (pr, pc), (rsrc, csrc))


# -- one dimension ---------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(dims)
def test_numroc_sums_to_n(dim):
    n, nb, p, src = dim
    counts = [numroc(n, nb, i, p, src) for i in range(p)]
    assert sum(counts) == n
    assert all(c >= 0 for c in counts)
    # balanced to within one block
    assert max(counts) - min(counts) <= nb


@settings(max_examples=150, deadline=None)
@given(dims)
def test_local_indices_partition_range(dim):
    n, nb, p, src = dim
    parts = [local_indices(n, nb, i, p, src) for i in range(p)]
    for i, idx in enumerate(parts):
        assert idx.size == numroc(n, nb, i, p, src)
        assert np.all(np.diff(idx) > 0), "local order is increasing global order"
        # every index maps back: owner, local position and l2g agree
        for il, gi in enumerate(idx):
            assert owner(int(gi), nb, p, src) == i
            assert g2l(int(gi), nb, p) == il
            assert l2g(il, nb, i, p, src) == gi
    together = np.sort(np.concatenate(parts)) if parts else np.array([])
    assert np.array_equal(together, np.arange(n))


@settings(max_examples=150, deadline=None)
@given(dims)
def test_local_views_take_and_put_the_indexed_elements(dim):
    """take_local / put_local (strided views) are v[local_indices] and v[local_indices] = / +=."""
    n, nb, p, src = dim
    v = np.arange(n, dtype=np.float64) * 3 + 1
    for i in range(p):
        idx = local_indices(n, nb, i, p, src)
        got = take_local(v, nb, i, p, src)
        assert np.array_equal(got, v[idx])
        part = np.arange(idx.size, dtype=np.float64) - 7.5
        w = np.full(n, np.nan)
        put_local(w, part, nb, i, p, src)
        want = np.full(n, np.nan)
        want[idx] = part
        assert np.array_equal(w, want, equal_nan=True)
        put_local(w, part, nb, i, p, src, add=True)
        want[idx] += part
        assert np.array_equal(w, want, equal_nan=True)


def test_local_indices_are_read_only_and_the_same_when_cached():
    """The cached maps cannot be changed by a caller; long maps are built, not cached."""
    short = local_indices(1000, 7, 1, 3, 2)
    assert not short.flags.writeable
    with pytest.raises(ValueError):
        short[0] = -1
    assert np.array_equal(short, local_indices(1000, 7, 1, 3, 2))
    n = CACHED_INDICES + 1
    long = local_indices(n, 64, 0, 2)
    assert not long.flags.writeable and long is not local_indices(n, 64, 0, 2)
    assert long.size == numroc(n, 64, 0, 2)


@settings(max_examples=200, deadline=None)
@given(dims)
def test_blocks_are_whole_except_the_last(dim):
    n, nb, p, src = dim
    for i in range(p):
        idx = local_indices(n, nb, i, p, src)
        # every owned block is contiguous in global indices, with nb entries except the last
        blocks = idx // nb
        for b in np.unique(blocks):
            members = idx[blocks == b]
            assert np.array_equal(members, np.arange(b * nb, min(n, (b + 1) * nb)))
            assert owner(int(b * nb), nb, p, src) == i


def test_numroc_known_values():
    # ScaLAPACK NUMROC: n=10, nb=3, 2 processes: blocks 0,2 -> p0 (3+3=6 with last ragged 1)
    assert [numroc(10, 3, i, 2) for i in range(2)] == [6, 4]
    assert [numroc(10, 3, i, 2, 1) for i in range(2)] == [4, 6]
    assert [numroc(5, 8, i, 3) for i in range(3)] == [5, 0, 0]  # block larger than n
    assert [numroc(5, 1, i, 2) for i in range(2)] == [3, 2]  # block 1 = cyclic
    assert [numroc(0, 4, i, 3) for i in range(3)] == [0, 0, 0]
    with pytest.raises(ValueError, match="positive"):
        numroc(5, 0, 0, 1)


# -- two dimensions --------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(dims, dims)
def test_every_element_has_exactly_one_owner(rows, cols):
    lay = _layout(rows, cols)
    m, n = lay.shape
    pr, pc = lay.grid_shape
    count = np.zeros((m, n), dtype=int)
    for p in range(pr):
        for q in range(pc):
            r, c = lay.local_rows(p), lay.local_cols(q)
            assert lay.local_shape(p, q) == (r.size, c.size)
            count[np.ix_(r, c)] += 1
            for il in range(0, r.size, max(1, r.size // 3)):
                for jl in range(0, c.size, max(1, c.size // 3)):
                    i, j = lay.local_to_global(p, q, il, jl)
                    assert (i, j) == (r[il], c[jl])
                    assert lay.global_to_local(i, j) == ((p, q), (il, jl))
                    assert lay.owner_of(i, j) == (p, q)
    assert np.all(count == 1)
    mr, mc = lay.max_local_shape()
    assert all(
        lay.local_shape(p, q)[0] <= mr and lay.local_shape(p, q)[1] <= mc
        for p in range(pr)
        for q in range(pc)
    )


@settings(max_examples=60, deadline=None)
@given(dims, dims)
def test_blocks_land_where_block_owner_says(rows, cols):
    lay = _layout(rows, cols)
    nbr, nbc = lay.nblocks
    mb, nb = lay.block
    for bi in range(nbr):
        for bj in range(nbc):
            p, q = lay.block_owner(bi, bj)
            h, w = lay.block_extent(bi, bj)
            assert 0 < h <= mb and 0 < w <= nb
            il, jl = lay.local_offset(bi, bj)
            # the block's first element sits at the block's local offset on its owner
            assert lay.global_to_local(bi * mb, bj * nb) == ((p, q), (il, jl))
            assert bi in lay.local_block_rows(p) and bj in lay.local_block_cols(q)


@settings(max_examples=100, deadline=None)
@given(dims, dims)
def test_transposed_layout_swaps_everything(rows, cols):
    lay = _layout(rows, cols)
    t = lay.transposed()
    assert t.shape == lay.shape[::-1] and t.block == lay.block[::-1]
    assert t.grid_shape == lay.grid_shape[::-1] and t.src == lay.src[::-1]
    pr, pc = lay.grid_shape
    for p in range(pr):
        for q in range(pc):
            assert t.local_shape(q, p) == lay.local_shape(p, q)[::-1]
    assert t.transposed() == lay


def test_ragged_and_mb_ne_nb_example():
    lay = BlockCyclicLayout((7, 11), (2, 3), (2, 3))
    assert lay.nblocks == (4, 4)
    assert lay.block_extent(3, 3) == (1, 2)
    assert lay.local_rows(0).tolist() == [0, 1, 4, 5]
    assert lay.local_rows(1).tolist() == [2, 3, 6]
    assert lay.local_cols(0).tolist() == [0, 1, 2, 9, 10]
    assert lay.local_cols(2).tolist() == [6, 7, 8]
    assert lay.local_shape(1, 0) == (3, 5)
    assert lay.global_to_local(6, 10) == ((1, 0), (2, 4))


def test_block_larger_than_matrix_lives_on_source():
    lay = BlockCyclicLayout((5, 4), (64, 64), (2, 2), src=(1, 0))
    assert lay.local_shape(1, 0) == (5, 4)
    assert lay.local_shape(0, 0) == (0, 4)
    assert lay.local_shape(1, 1) == (5, 0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(shape=(-1, 3), block=(2, 2), grid_shape=(1, 1)), "non-negative"),
        (dict(shape=(3, 3), block=(0, 2), grid_shape=(1, 1)), "positive"),
        (dict(shape=(3, 3), block=(2, 2), grid_shape=(0, 1)), "positive"),
        (dict(shape=(3, 3), block=(2, 2), grid_shape=(2, 2), src=(2, 0)), "outside"),
    ],
)
def test_invalid_layouts_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BlockCyclicLayout(**kwargs)
