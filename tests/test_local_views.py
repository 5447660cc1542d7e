"""Tests of blasmp_array._local_views: a process's local matrix as strided views of the global
matrix, against the element-wise index maps of blasmp_array.layout (no MPI)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array._local_views import (
    as_local_view,
    block_runs,
    clip_runs,
    col_ranges,
    local_view,
    whole_view,
)
from blasmp_array.layout import BlockCyclicLayout, local_indices, numroc

# a dimension: length n (0 and ragged included), block nb (1 and > n included), nprocs, src
dims = st.integers(0, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(1, max(1, n) + 4), st.integers(1, 5)).flatmap(
        lambda t: st.tuples(*map(st.just, t), st.integers(0, t[2] - 1))
    )
)


def _indices(runs) -> np.ndarray:
    """The global indices of runs, in local order (checking their local positions)."""
    out = []
    for r in runs:
        assert r.count >= 1 and r.length >= 1
        for i in range(r.count):
            assert r.local + i * r.length == len(out)
            out.extend(range(r.start + i * r.step, r.start + i * r.step + r.length))
    return np.asarray(out, dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(dims)
def test_block_runs_are_the_owned_indices(dim):
    n, nb, p, src = dim
    for iproc in range(p):
        runs = block_runs(n, nb, iproc, p, src)
        assert len(runs) <= 2
        np.testing.assert_array_equal(_indices(runs), local_indices(n, nb, iproc, p, src))
        assert sum(r.size for r in runs) == numroc(n, nb, iproc, p, src)


@settings(max_examples=300, deadline=None)
@given(dims, st.data())
def test_clip_runs_keeps_a_local_range(dim, data):
    n, nb, p, src = dim
    iproc = data.draw(st.integers(0, p - 1))
    runs = block_runs(n, nb, iproc, p, src)
    owned = local_indices(n, nb, iproc, p, src)
    lo = data.draw(st.integers(0, owned.size))
    hi = data.draw(st.integers(lo, owned.size))
    clipped = clip_runs(runs, lo, hi)
    assert len(clipped) <= 3 * len(runs)
    got = []
    for r in clipped:
        for i in range(r.count):
            assert r.local + i * r.length == lo + len(got)  # consecutive local positions
            got.extend(range(r.start + i * r.step, r.start + i * r.step + r.length))
    np.testing.assert_array_equal(np.asarray(got, dtype=np.int64), owned[lo:hi])


def _layouts():
    yield BlockCyclicLayout((13, 11), (3, 2), (2, 3))
    yield BlockCyclicLayout((70, 33), (64, 5), (3, 2), (1, 1))
    yield BlockCyclicLayout((9, 4), (100, 100), (2, 2), (1, 0))
    yield BlockCyclicLayout((7, 5), (1, 1), (1, 1))
    yield BlockCyclicLayout((20, 17), (3, 8), (4, 1), (3, 0))
    yield BlockCyclicLayout((0, 5), (2, 2), (2, 1))
    yield BlockCyclicLayout((6, 0), (2, 3), (1, 2))


def _globals(shape, dtype=np.float64):
    """The same matrix as C-ordered, Fortran-ordered, strided, negatively strided and
    broadcast (read-only) arrays."""
    m, n = shape
    a = np.arange(m * n, dtype=dtype).reshape(m, n) + 1
    big = np.zeros((2 * m + 1, 3 * n + 2), dtype=dtype)
    big[1::2, 2::3] = a
    yield a
    yield np.asfortranarray(a)
    yield big[1::2, 2::3]
    flipped = a[::-1, ::-1].copy()
    yield flipped[::-1, ::-1]
    if m and n:
        yield np.broadcast_to(a[:1], (m, n)) * 0 + a  # a fresh copy, for symmetry
        yield np.broadcast_to(a[0], (m, n))


@pytest.mark.parametrize("layout", list(_layouts()), ids=str)
def test_read_and_write_match_fancy_indexing(layout):
    pr, pc = layout.grid_shape
    for g in _globals(layout.shape):
        for prow in range(pr):
            for pcol in range(pc):
                ref = g[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]
                view = local_view(g, layout, prow, pcol)
                assert view.shape == ref.shape == layout.local_shape(prow, pcol)
                got = np.full(ref.shape, np.nan)
                view.read(0, ref.shape[0], got)
                np.testing.assert_array_equal(got, ref)
                # every row range, into a buffer of just those rows
                for lo in range(ref.shape[0] + 1):
                    for hi in range(lo, ref.shape[0] + 1, 3):
                        part = np.full((hi - lo, ref.shape[1]), np.nan)
                        view.read(lo, hi, part)
                        np.testing.assert_array_equal(part, ref[lo:hi])
                assert view.col_ranges == col_ranges(layout, pcol)
        if not g.flags.writeable:
            continue
        # writing every process's local matrix back rebuilds the global matrix
        back = np.full(layout.shape, np.nan)
        for prow in range(pr):
            for pcol in range(pc):
                ref = g[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]
                view = local_view(back, layout, prow, pcol)
                mid = ref.shape[0] // 2
                view.write(0, mid, ref[:mid].copy())
                view.write(mid, ref.shape[0], ref[mid:].copy())
        np.testing.assert_array_equal(back, g)


@pytest.mark.parametrize("layout", list(_layouts()), ids=str)
def test_views_list_a_row_range_and_column_run_in_row_major_order(layout):
    # the order of the elements of views(lo, hi, j) is that of local[lo:hi, c0:c1].ravel()
    g = np.arange(layout.shape[0] * layout.shape[1]).reshape(layout.shape)
    pr, pc = layout.grid_shape
    for prow in range(pr):
        for pcol in range(pc):
            ref = g[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]
            view = local_view(g, layout, prow, pcol)
            for lo, hi in ((0, ref.shape[0]), (1, ref.shape[0] - 1), (2, 3)):
                if not 0 <= lo <= hi <= ref.shape[0]:
                    continue
                for j, (c0, c1) in enumerate(view.col_ranges):
                    flat = [v.ravel() for v in view.views(lo, hi, j)]
                    got = np.concatenate(flat) if flat else np.empty(0, g.dtype)
                    np.testing.assert_array_equal(got, ref[lo:hi, c0:c1].ravel())
                    assert all(np.shares_memory(v, g) for v in view.views(lo, hi, j) if v.size)


def test_casting_and_conjugation():
    layout = BlockCyclicLayout((5, 6), (2, 4), (2, 2))
    a = np.arange(30).reshape(5, 6)  # int64, converted while copying
    view = local_view(a, layout, 1, 0)
    got = np.empty(view.shape, np.complex64)
    view.read(0, view.shape[0], got)
    np.testing.assert_array_equal(got, a[np.ix_(layout.local_rows(1), layout.local_cols(0))])
    z = np.zeros((5, 6), np.complex128)
    local = (1 + 2j) * np.ones(view.shape)
    local_view(z, layout, 1, 0).write(0, view.shape[0], local, conjugate=True)
    np.testing.assert_array_equal(z[np.ix_(layout.local_rows(1), layout.local_cols(0))], 1 - 2j)
    assert np.count_nonzero(z) == local.size


def test_whole_view_and_errors():
    a = np.arange(12.0).reshape(3, 4)
    v = whole_view(a)
    assert v.shape == (3, 4) and v.col_ranges == ((0, 4),)
    assert as_local_view(a).shape == (3, 4) and as_local_view(v) is v
    out = np.empty((2, 4))
    v.read(1, 3, out)
    np.testing.assert_array_equal(out, a[1:3])
    with pytest.raises(ValueError, match="need a"):
        v.read(0, 2, np.empty((3, 4)))
    with pytest.raises(ValueError, match="global"):
        local_view(a, BlockCyclicLayout((4, 4), (2, 2), (1, 1)), 0, 0)
    with pytest.raises(TypeError, match="2-D"):
        as_local_view(np.zeros(3))
