"""The index plans of blasmp_array.io (no MPI): runs, chunk parts, staging bands, the HDF5
hyperslab patterns and the bounded chunk workers, against brute force on every layout of a
small sweep."""

from __future__ import annotations

import asyncio
import itertools

import numpy as np
import pytest

from blasmp_array.io import _hdf5, _plan, _zarr_chunks
from blasmp_array.layout import BlockCyclicLayout

LAYOUTS = [
    BlockCyclicLayout((m, n), (mb, nb), (pr, pc))
    for (m, n), (mb, nb), (pr, pc) in itertools.product(
        [(37, 29), (1, 17), (0, 5), (64, 64)], [(4, 3), (1, 1), (100, 7)], [(1, 1), (2, 3), (4, 1)]
    )
]


def _expand(sel, start=0):
    return np.arange(sel.start, sel.stop) + start if isinstance(sel, slice) else sel + start


@pytest.mark.parametrize("lay", LAYOUTS, ids=str)
def test_runs_cover_the_local_indices(lay):
    for p in range(lay.grid_shape[0]):
        idx = lay.local_rows(p)
        runs = _plan.runs(idx)
        assert np.array_equal(
            np.concatenate([np.arange(r.span.start, r.span.stop) for r in runs] or [[]]), idx
        )
        assert np.array_equal(
            np.concatenate([np.arange(r.local.start, r.local.stop) for r in runs] or [[]]),
            np.arange(idx.size),
        )
        # maximal: no two runs touch
        assert all(a.span.stop < b.span.start for a, b in itertools.pairwise(runs))
        if lay.grid_shape[0] == 1 and idx.size:
            assert len(runs) == 1


@pytest.mark.parametrize("chunks", [(5,), (1,), (3, 30, 4), (100,)])
@pytest.mark.parametrize("lay", LAYOUTS, ids=str)
def test_chunk_parts_partition_the_indices(lay, chunks):
    n = lay.shape[0]
    sizes = [c for c in itertools.islice(itertools.cycle(chunks), n + 1)]
    cut = np.cumsum(sizes)
    sizes = sizes[: int(np.searchsorted(cut, n)) + 1]
    sizes[-1] -= int(np.sum(sizes)) - n
    bounds = _plan.chunk_bounds([s for s in sizes if s > 0])
    for p in range(lay.grid_shape[0]):
        idx = lay.local_rows(p)
        parts = _plan.chunk_parts(idx, bounds)
        got = np.concatenate([_expand(part.select) for part in parts] or [[]])
        assert np.array_equal(got, idx)
        for part in parts:
            sel = _expand(part.select)
            assert bounds[part.chunk] <= sel.min() and sel.max() < bounds[part.chunk + 1]
            assert np.array_equal(idx[part.local], sel)


@pytest.mark.parametrize("lay", LAYOUTS, ids=str)
def test_bands_are_whole_block_rows_under_the_budget(lay):
    for p, q in itertools.product(range(lay.grid_shape[0]), range(lay.grid_shape[1])):
        ml, nl = lay.local_shape(p, q)
        for budget in (1, 8 * lay.block[0] * max(nl, 1) * 2, 1 << 40):
            bands = _plan.bands(lay, p, q, 8, budget)
            if ml == 0 or nl == 0:
                assert bands == []
                continue
            assert bands[0].start == 0 and bands[-1].stop == ml
            assert all(a.stop == b.start for a, b in itertools.pairwise(bands))
            assert all(b.start % lay.block[0] == 0 for b in bands)
            per_row = lay.block[0] * nl * 8
            assert all((b.stop - b.start) * nl * 8 <= max(budget, per_row) for b in bands)


@pytest.mark.parametrize("lay", LAYOUTS, ids=str)
def test_hdf5_terms_describe_the_indices(lay):
    for p in range(lay.grid_shape[0]):
        idx = lay.local_rows(p)
        terms = _hdf5._terms(idx)
        got = [
            start + k * stride + i
            for start, stride, count, block in terms
            for k in range(count)
            for i in range(block)
        ]
        assert got == idx.tolist()
        assert len(terms) <= 2 or lay.grid_shape[0] == 1


def test_bounded_workers_stop_after_a_failure():
    started, done = [], []

    async def fn(i):
        started.append(i)
        await asyncio.sleep(0.001 * (i % 3))
        if i == 5:
            raise OSError("chunk 5")
        done.append(i)

    with pytest.raises(OSError, match="chunk 5"):
        asyncio.run(_zarr_chunks._bounded(range(100), fn, 4))
    # every call that started has finished; none started after the failure was seen
    assert set(started) == set(done) | {5}
    assert len(started) < 20


def test_in_flight_limit():
    assert _zarr_chunks.limit_for(1) == _zarr_chunks.CONCURRENCY
    assert _zarr_chunks.limit_for(_zarr_chunks.IN_FLIGHT_BYTES // 2) == 2
    assert _zarr_chunks.limit_for(10 * _zarr_chunks.IN_FLIGHT_BYTES) == 1
