"""Distributed tests of blasmp_array.io: from_dask, to_dask (both routes), zarr / npy / HDF5
round trips across grids and blocks, stores of foreign chunkings (Dask, sharded, zarr v2,
compressed), bounded host staging, bad input (every rank raises the same error), overwrite
protection and failure atomicity of the parallel writers.

Every case builds its data from a seeded NumPy matrix known on every rank (with -0.0 and NaN
payloads, so the checks are bit for bit), checks each rank's local matrix against the slice
its layout assigns it, and makes every rank agree on the outcome with one reduction. Local
matrices of the readers are NaN-poisoned by the allocator (tests/mpi/conftest.py).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import tracemalloc

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")


def _available(*modules: str) -> bool:
    """Whether ``modules`` import, agreed by every rank (so all ranks skip alike)."""
    here = all(importlib.util.find_spec(m) is not None for m in modules)
    return bool(COMM.allreduce(here, op=MPI.LAND))


if not _available("dask", "zarr"):
    pytest.skip("dask and zarr are not installed (extra 'dask')", allow_module_level=True)

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import zarr  # noqa: E402

from blasmp_array import io as bio  # noqa: E402
from blasmp_array.io import _common, _dask, _npy, _staging, _zarr, _zarr_chunks  # noqa: E402

HAVE_H5PY = _available("h5py")
ON_GPU = BACKEND == "gpu"
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
GRID_SHAPES = list(dict.fromkeys([(1, SIZE), (SIZE, 1), bm.square_grid_shape(SIZE)]))

_grids: dict[tuple[int, int], bm.ProcessGrid] = {}


def grid_of(shape: tuple[int, int]) -> bm.ProcessGrid:
    """Grids are collective to create: make each shape once (same order on every rank)."""
    if shape not in _grids:
        _grids[shape] = bm.ProcessGrid(*shape, backend=BACKEND)
    return _grids[shape]


@pytest.fixture(params=GRID_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def grid(request):
    return grid_of(request.param)


@pytest.fixture
def square():
    """The near-square grid, for the tests that need not run on every grid shape."""
    return grid_of(bm.square_grid_shape(SIZE))


def grid_at(i: int) -> bm.ProcessGrid:
    return grid_of(GRID_SHAPES[i % len(GRID_SHAPES)])


@pytest.fixture
def shared_dir():
    """A directory every rank agrees on: made on rank 0, its path broadcast."""
    path = COMM.bcast(tempfile.mkdtemp(prefix="blasmp-test-io-") if RANK == 0 else None)
    yield path
    COMM.Barrier()
    if RANK == 0:
        shutil.rmtree(path, ignore_errors=True)


def matrix(shape, dtype, seed=0):
    """Seeded matrix with a NaN and a -0.0 payload (bit-for-bit checks see them)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(dtype)
    if a.size >= 2:
        a.flat[0] = np.nan
        a.flat[-1] = -0.0
    return a


def same_bits(x, y) -> bool:
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


def same_values(x, y) -> bool:
    """Equal values, signed zeros and NaN positions; a NaN's payload may differ (a converting
    copy on the GPU writes the canonical NaN where NumPy keeps the payload)."""
    x, y = np.asarray(x), np.asarray(y)
    return (
        x.shape == y.shape
        and x.dtype == y.dtype
        and np.array_equal(x, y, equal_nan=True)
        and np.array_equal(np.signbit(x.real), np.signbit(y.real))
    )


def assert_holds(
    A: bm.BlockCyclicArray, a: np.ndarray, block=None, grid_shape=None, *, converted=False
) -> None:
    """Every rank: A's local matrix is bit for bit a's slice of A's layout (agreed by all);
    ``converted``: A was made by a dtype conversion, whose NaN payloads are not kept."""
    lay = A.layout
    ok = A.shape == a.shape and A.dtype == a.dtype
    ok = ok and (block is None or A.block == tuple(block))
    ok = ok and (grid_shape is None or A.grid.shape == tuple(grid_shape))
    if ok:
        rows, cols = lay.local_rows(A.grid.myrow), lay.local_cols(A.grid.mycol)
        same = same_values if converted else same_bits
        ok = same(A.backend.asnumpy(A.local), a[np.ix_(rows, cols)])
    bad = COMM.allgather(None if ok else RANK)
    assert all(r is None for r in bad), (
        f"wrong local matrix on ranks {[r for r in bad if r is not None]}"
    )


def sampled(cases, name):
    """``(case, dtype)`` params: each case with one dtype by default (cycling, so every dtype
    is covered); the rest of the case x dtype product under ``full_sweep``."""
    params = []
    for i, case in enumerate(cases):
        for j, dt in enumerate(DTYPES):
            marks = () if j == i % len(DTYPES) else (pytest.mark.full_sweep,)
            ident = f"{name}{i}-{np.dtype(dt).name}"
            params.append(pytest.param(case, dt, marks=marks, id=ident))
    return params


def build(a, grid, block):
    return bm.from_numpy(a, block=block, grid=grid)


def listing(path):
    """The directory's entries, seen by every rank between two barriers (collective: a rank
    running ahead into the next write would otherwise show its temporary store)."""
    COMM.Barrier()
    names = sorted(os.listdir(path))
    COMM.Barrier()
    return names


# -- from_dask -------------------------------------------------------------------------------
# (shape, block, dask chunks): finer, coarser, misaligned, irregular, block larger than matrix
FROM_DASK_CASES = [
    ((37, 29), (4, 3), (2, 1)),  # chunks finer than blocks
    ((37, 29), (4, 3), (16, 12)),  # coarser, aligned
    ((37, 29), (4, 3), (5, 7)),  # misaligned
    ((70, 41), (64, 64), (9, 11)),  # few large blocks, small chunks
    ((20, 33), (1, 1), (6, 33)),  # 1x1 blocks
    ((13, 70), (5, 2), ((10, 3), (1, 30, 39))),  # irregular chunks
    ((10, 8), (100, 100), (3, 3)),  # block larger than the matrix
    ((1, 17), (3, 3), (1, 5)),
    ((0, 5), (3, 3), (1, 5)),  # empty
]


@pytest.mark.parametrize("case,dtype", sampled(FROM_DASK_CASES, "case"))
def test_from_dask_any_chunking(grid, case, dtype):
    shape, block, chunks = case
    a = matrix(shape, dtype, seed=len(str(case)))
    x = da.from_array(a, chunks=chunks)
    A = bm.from_dask(x, block=block, grid=grid)
    assert_holds(A, a, block, grid.shape)


@pytest.mark.parametrize("batched", [False, True], ids=["streamed", "batched"])
def test_from_dask_batches_and_lazy_graph(grid, monkeypatch, batched):
    """A lazy graph, the pieces written by their tasks (host-resident local matrices) or in
    tiny batches (several computes per rank, the device path); result equals compute()."""
    x = da.random.default_rng(7).standard_normal((30, 26), chunks=(7, 13)) * 2 - 1
    a = x.compute()
    if batched:
        monkeypatch.setattr(_dask, "host_resident", lambda backend: False)
    A = bio.from_dask(x, block=(4, 5), grid=grid, batch_bytes=2 * 4 * 5 * 8)
    assert_holds(A, a, (4, 5))


def test_from_dask_dtype_conversion_and_default_grid():
    x = da.from_array(np.arange(35, dtype=np.int64).reshape(5, 7), chunks=3)
    A = bm.from_dask(x, block=2, dtype=np.float32, backend=BACKEND)
    assert_holds(A, np.arange(35, dtype=np.float32).reshape(5, 7), (2, 2))


def test_from_dask_argument_errors(square):
    x = da.zeros((4, 4), chunks=2)
    with pytest.raises(TypeError, match="dask.array.Array"):
        bm.from_dask(np.zeros((4, 4)), block=2, grid=square)
    with pytest.raises(ValueError, match="2-D"):
        bm.from_dask(da.zeros((2, 2, 2), chunks=1), block=2, grid=square)
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        bm.from_dask(x[x[:, 0] > 0], block=2, grid=square)
    with pytest.raises(TypeError, match="dtype="):
        bm.from_dask(da.zeros((4, 4), chunks=2, dtype=np.uint8), block=2, grid=square)
    with pytest.raises(ValueError, match="block"):
        bm.from_dask(x, block=0, grid=square)
    with pytest.raises(ValueError, match="batch_bytes"):
        bm.from_dask(x, block=2, grid=square, batch_bytes=0)


def test_from_dask_failing_chunk_fails_every_rank(grid):
    """A chunk that raises on compute (only some ranks need it) fails the call on all ranks."""

    def boom(block):
        raise RuntimeError("injected chunk failure")

    x = da.zeros((12, 12), chunks=6).map_blocks(
        lambda b, block_info=None: boom(b) if block_info[0]["chunk-location"] == (1, 1) else b,
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    with pytest.raises(bio.DistributedIOError, match="from_dask"):
        bm.from_dask(x, block=3, grid=grid)


@pytest.mark.skipif(not _available("cupy"), reason="CuPy is not installed")
def test_from_dask_cupy_chunks(square):
    import cupy

    a = matrix((23, 19), np.float64)
    x = da.from_array(a, chunks=(5, 4)).map_blocks(cupy.asarray)
    A = bm.from_dask(x, block=(3, 4), grid=square)
    assert_holds(A, a, (3, 4))


def on_rank0(fn):
    """Run ``fn`` on rank 0 (e.g. write a foreign store), then wait for it on every rank."""
    if RANK == 0:
        fn()
    COMM.Barrier()


def chunk_file(path, key):
    return os.path.join(path, *key.split("/"))


# -- to_dask ---------------------------------------------------------------------------------
@pytest.mark.parametrize("via", ["auto", "memory", "zarr"])
def test_to_dask_routes(square, shared_dir, via):
    a = matrix((31, 22), np.complex64)
    A = build(a, square, (4, 6))
    y = A.to_dask(via=via, tmpdir=shared_dir)
    ok = y.dtype == a.dtype and y.shape == a.shape and same_bits(y.compute(), a)
    # chunks in whole blocks; 'block' gives one chunk per block
    ok = ok and all(c % b == 0 for cs, b in zip(y.chunks, (4, 6), strict=True) for c in cs[:-1])
    yb = A.to_dask(via=via, chunks="block", tmpdir=shared_dir)
    ok = ok and yb.chunksize == (4, 6) and same_bits(yb.compute(), a)
    # the transposed view goes through too
    yt = A.T.to_dask(via=via, chunks=(5, 5), tmpdir=shared_dir)
    ok = ok and yt.chunksize == (5, 5) and same_bits(yt.compute(), a.T)
    # independent of A: a later change of A is not seen
    A[0:2, 0:2] = 7
    ok = ok and same_bits(y.compute(), a)
    assert COMM.allreduce(ok, op=MPI.LAND)


def test_to_dask_auto_route(square, monkeypatch):
    """'auto' gathers in memory on one process, and on several when the copies fit."""
    from blasmp_array.io import _dask

    a = matrix((12, 9), np.float64)
    A = build(a, square, 4)
    routes = []
    monkeypatch.setattr(_dask, "_via_zarr", lambda *args: routes.append("zarr") or "zarr")
    y = A.to_dask()
    assert not routes and same_bits(y.compute(), a)
    monkeypatch.setattr(_dask, "MEMORY_FRACTION", 0.0)  # nothing fits
    y = A.to_dask()
    assert routes == ([] if SIZE == 1 else ["zarr"])


def test_to_dask_argument_errors(square):
    A = build(matrix((4, 4), np.float64), square, 2)
    with pytest.raises(ValueError, match="via"):
        A.to_dask(via="disk")
    with pytest.raises(TypeError, match="tmpdir"):
        A.to_dask(tmpdir=3)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bio.to_dask(np.zeros((2, 2)))


# -- zarr ------------------------------------------------------------------------------------
ZARR_CASES = [
    # (shape, write grid index, write block, read grid index, read block); grids change
    ((37, 29), 0, (8, 6), 1, (5, 7)),
    ((24, 24), 1, (4, 4), 2, None),  # read with the store's chunks
    ((70, 41), 2, (64, 8), 0, 3),
    ((13, 1), 0, (2, 1), 2, (100, 100)),
]


@pytest.mark.parametrize("case,dtype", sampled(ZARR_CASES, "case"))
def test_zarr_round_trip_across_layouts(shared_dir, case, dtype):
    shape, wgrid, wblock, rgrid, rblock = case
    a = matrix(shape, dtype, seed=3)
    A = build(a, grid_at(wgrid), wblock)
    path = os.path.join(shared_dir, "a.zarr")
    A.to_zarr(path)
    z = zarr.open_array(path, mode="r")
    assert z.chunks == wblock and z.shape == shape and z.dtype == a.dtype
    assert z.compressors == ()  # the default: no compression (docs/io.md)
    assert z.attrs[_zarr.MARK]["complete"] is True
    assert z.nchunks_initialized == z.nchunks  # every chunk written
    dst = grid_at(rgrid)
    B = bm.from_zarr(path, block=rblock, grid=dst)
    expect_block = wblock if rblock is None else bm.creation.normalize_block(rblock)
    assert_holds(B, a, expect_block, dst.shape)
    assert listing(shared_dir) == ["a.zarr"]  # no temporary store left behind


@pytest.mark.parametrize("method", ["chunks", "direct"])
def test_from_zarr_methods(shared_dir, method):
    a = matrix((30, 26), np.complex128, seed=9)
    path = os.path.join(shared_dir, "a.zarr")
    build(a, grid_at(0), (7, 5)).to_zarr(path)
    for i, block in enumerate([(3, 4), (7, 5), (40, 40)]):
        dst = grid_at(i + 1)
        assert_holds(bm.from_zarr(path, block, dst, method=method), a, block, dst.shape)
    with pytest.raises(ValueError, match="method"):
        bm.from_zarr(path, method="fast")


def test_zarr_codecs_and_format(square, shared_dir):
    """The compressors pass through (and Dask reads the store); zarr format 2 works; a bad
    codec or format raises the same error on every rank before anything is written."""
    a = matrix((20, 15), np.float32, 13)
    A = build(a, square, (6, 4))
    blosc = zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    for name, kwargs in (("b.zarr", {"compressors": blosc}), ("v2.zarr", {"zarr_format": 2})):
        path = os.path.join(shared_dir, name)
        A.to_zarr(path, **kwargs)
        assert COMM.allreduce(same_bits(da.from_zarr(path).compute(), a), op=MPI.LAND)
        assert_holds(bm.from_zarr(path, block=(5, 5), grid=square), a, (5, 5))
    cname = zarr.open_array(os.path.join(shared_dir, "b.zarr")).compressors[0].cname
    assert str(getattr(cname, "value", cname)) == "lz4"  # an enum or a str, by zarr version
    assert zarr.open_array(os.path.join(shared_dir, "v2.zarr")).metadata.zarr_format == 2
    with pytest.raises(TypeError, match="compressors"):
        A.to_zarr(os.path.join(shared_dir, "c.zarr"), compressors=object())
    with pytest.raises(ValueError, match="zarr_format"):
        A.to_zarr(os.path.join(shared_dir, "c.zarr"), zarr_format=1)
    assert listing(shared_dir) == ["b.zarr", "v2.zarr"]


def _foreign_stores(a, path):
    """Rank 0: the same matrix as other writers store it (any chunking, codecs, formats)."""
    stores = {}
    # Dask, chunks not aligned with any block, zstd (zarr's default codec); a chunk of zeros
    # equal to the fill value is not written (write_empty_chunks=False) and reads as 0
    a = a.copy()
    a[5:10, 7:14] = 0.0
    stores["dask"] = (os.path.join(path, "dask.zarr"), a, "c/1/1")
    da.from_array(a, chunks=(5, 7)).to_zarr(stores["dask"][0])
    # zarr with shards (several chunks in one stored object)
    p = os.path.join(path, "sharded.zarr")
    z = zarr.create_array(p, shape=a.shape, chunks=(4, 6), shards=(8, 12), dtype=a.dtype)
    z[...] = a
    stores["sharded"] = (p, a, None)
    # zarr format 2, blosc, irregular last chunks
    p = os.path.join(path, "v2.zarr")
    z = zarr.create_array(
        p, shape=a.shape, chunks=(9, 11), dtype=a.dtype, zarr_format=2, compressors=None
    )
    z[...] = a
    stores["v2"] = (p, a, None)
    return stores


@pytest.mark.parametrize("kind", ["dask", "sharded", "v2"])
def test_from_zarr_foreign_chunkings(grid, shared_dir, kind):
    a = matrix((23, 31), np.float64, 14)
    stores = COMM.bcast(_foreign_stores(a, shared_dir) if RANK == 0 else None)
    path, expect, skipped = stores[kind]
    if skipped is not None:  # the writer skipped this chunk: it reads as the fill value
        assert not os.path.exists(chunk_file(path, skipped))
    for block in [(4, 3), (11, 16), None]:
        B = bm.from_zarr(path, block=block, grid=grid)
        assert_holds(B, expect, grid_shape=grid.shape)
    assert_holds(bm.from_zarr(zarr.open_array(path, mode="r"), block=3, grid=grid), expect)


def test_from_zarr_dtype_conversion(square, shared_dir):
    a = np.arange(7 * 9, dtype=np.int64).reshape(7, 9)
    path = os.path.join(shared_dir, "i.zarr")
    on_rank0(lambda: zarr.create_array(path, data=a, chunks=(4, 4)))
    assert_holds(bm.from_zarr(path, 3, square), a)  # int64 is held as it is
    path8 = os.path.join(shared_dir, "u8.zarr")
    on_rank0(lambda: zarr.create_array(path8, data=a.astype(np.uint8), chunks=(4, 4)))
    with pytest.raises(TypeError, match="dtype="):
        bm.from_zarr(path8, grid=square)
    assert_holds(bm.from_zarr(path8, 3, square, dtype=np.int32), a.astype(np.int32))
    assert_holds(bm.from_zarr(path, 3, square, dtype=np.complex64), a.astype(np.complex64))
    b = matrix((9, 6), np.float32)
    build(b, square, 2).to_zarr(os.path.join(shared_dir, "f.zarr"))
    B = bm.from_zarr(os.path.join(shared_dir, "f.zarr"), 4, square, dtype=np.float64)
    assert_holds(B, b.astype(np.float64), (4, 4), converted=True)


def test_zarr_view_and_path_forms(square, shared_dir):
    from pathlib import Path

    a = matrix((9, 14), np.float64)
    A = build(a, square, 3)
    A.T.to_zarr(Path(shared_dir) / "t.zarr")
    bio.to_zarr(A, "file://" + os.path.join(shared_dir, "u.zarr"))
    assert_holds(bm.from_zarr(Path(shared_dir) / "t.zarr", grid=square), a.T, (3, 3))
    assert_holds(bm.from_zarr(os.path.join(shared_dir, "u.zarr"), grid=square), a, (3, 3))
    with pytest.raises(ValueError, match="filesystem path"):
        A.to_zarr("s3://bucket/a.zarr")
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bio.to_zarr(a, os.path.join(shared_dir, "v.zarr"))
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bio.to_npy(a, os.path.join(shared_dir, "v.npy"))


def test_zarr_chunks_equal_to_the_fill_value(square, shared_dir):
    """Whole blocks of -0.0 (equal to the fill value 0, so zarr skips them unless every writer
    asks for empty chunks to be written), +0.0 and NaN survive bit for bit."""
    a = matrix((12, 12), np.float64, 10)
    a[:4, :4] = -0.0
    a[4:8, :4] = 0.0
    a[:4, 4:8] = np.nan
    path = os.path.join(shared_dir, "a.zarr")
    build(a, square, 4).to_zarr(path)
    assert_holds(bm.from_zarr(path, grid=square), a, (4, 4))
    assert COMM.allreduce(same_bits(zarr.open_array(path, mode="r")[...], a), op=MPI.LAND)


def test_zarr_store_objects(square, shared_dir):
    a = matrix((10, 7), np.complex64, 11)
    A = build(a, square, 3)
    path = os.path.join(shared_dir, "s.zarr")
    A.to_zarr(zarr.storage.LocalStore(path))
    assert_holds(bm.from_zarr(zarr.storage.LocalStore(path), grid=square), a, (3, 3))
    assert_holds(bm.from_zarr(zarr.open_array(path, mode="r"), grid=square), a, (3, 3))
    with pytest.raises(ValueError, match="read-only"):
        A.to_zarr(zarr.storage.LocalStore(path, read_only=True), overwrite=True)
    # stores that are not one directory are refused on every rank, before any write
    with pytest.raises(TypeError, match="publish by a rename"):
        A.to_zarr(zarr.storage.MemoryStore())
    zip_path = os.path.join(shared_dir, f"rank{RANK}.zip")
    with pytest.raises(TypeError, match="ZipStore"):
        A.to_zarr(zarr.storage.ZipStore(zip_path, mode="w"))
    COMM.Barrier()
    assert not [name for name in listing(shared_dir) if name.startswith(".")]
    if os.path.exists(zip_path):
        os.remove(zip_path)


def test_from_zarr_component_of_a_group(square, shared_dir):
    a = matrix((11, 13), np.float32, 12)
    path = os.path.join(shared_dir, "g.zarr")

    def write():
        z = (
            zarr.open_group(path, mode="w")
            .create_group("grp")
            .create_array("m", shape=a.shape, chunks=(4, 5), dtype=a.dtype)
        )
        z[...] = a

    on_rank0(write)
    assert_holds(bm.from_zarr(path, grid=square, component="grp/m"), a, (4, 5))
    assert_holds(bm.from_zarr(path, (3, 2), square, component="grp/m"), a, (3, 2))
    with pytest.raises(ValueError, match="component="):
        bm.from_zarr(path, grid=square)
    with pytest.raises(FileNotFoundError, match="grp/x"):
        bm.from_zarr(path, grid=square, component="grp/x")


def test_zarr_overwrite_protection(square, shared_dir):
    path = os.path.join(shared_dir, "a.zarr")
    a, b = matrix((11, 9), np.float64, 1), matrix((11, 9), np.float64, 2)
    build(a, square, 2).to_zarr(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        build(b, square, 2).to_zarr(path)
    assert_holds(bm.from_zarr(path, grid=square), a)
    build(b, square, (3, 4)).to_zarr(path, overwrite=True, progress=True)
    assert_holds(bm.from_zarr(path, grid=square), b, (3, 4))
    assert listing(shared_dir) == ["a.zarr"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build(b, square, 2).to_zarr(os.path.join(shared_dir, "missing", "a.zarr"))
    # a destination that is not a zarr store is never replaced, even with overwrite=True
    other = os.path.join(shared_dir, "data")
    on_rank0(lambda: os.makedirs(os.path.join(other, "keep")))
    with pytest.raises(FileExistsError, match="not a zarr store"):
        build(b, square, 2).to_zarr(other, overwrite=True)
    assert listing(other) == ["keep"]


def _held_by_all(n: int, block: int) -> int:
    """``n``, or more: a length in which every process of any grid of the job's ranks holds at
    least two blocks of ``block`` (so that a failure injected on the last rank runs)."""
    return max(n, 2 * block * SIZE)


def _fail_on_last_rank(monkeypatch, module, name, wrap):
    """Replace ``module.name`` with ``wrap(real)`` on the last rank."""
    if RANK == SIZE - 1:
        monkeypatch.setattr(module, name, wrap(getattr(module, name)))


def _zarr_write_fails_after_one_chunk(real):
    async def failing(arr, host, pieces, limit, bar):
        await real(arr, host, list(pieces)[:1], limit, bar)
        raise OSError("injected write failure")

    return failing


@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
def test_zarr_failure_mid_write_publishes_nothing(square, shared_dir, monkeypatch, existing):
    path = os.path.join(shared_dir, "a.zarr")
    n = _held_by_all(24, 4)
    old = matrix((n, n), np.float32, 5)
    if existing:
        build(old, square, 4).to_zarr(path)
    A = build(matrix((n, n), np.float32, 6), square, 4)
    _fail_on_last_rank(monkeypatch, _zarr_chunks, "write_pieces", _zarr_write_fails_after_one_chunk)
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError: injected"):
        A.to_zarr(path, overwrite=existing)
    monkeypatch.undo()
    assert listing(shared_dir) == (["a.zarr"] if existing else [])
    if existing:
        assert_holds(bm.from_zarr(path, grid=square), old)  # the old store is intact


def test_staged_failure_publishes_nothing(square, shared_dir, monkeypatch):
    """The device path (host bands, writes on a helper thread), run on the CPU, fails cleanly:
    every rank raises, nothing is published, nothing keeps writing."""
    A = build(matrix((_held_by_all(40, 4), _held_by_all(24, 4)), np.float64, 7), square, 4)
    monkeypatch.setattr(_staging, "host_resident", lambda backend: False)
    monkeypatch.setattr(_staging, "STAGING_BYTES", 1)  # one block row per band
    _fail_on_last_rank(monkeypatch, _zarr_chunks, "write_pieces", _zarr_write_fails_after_one_chunk)
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError: injected"):
        A.to_zarr(os.path.join(shared_dir, "a.zarr"))
    assert listing(shared_dir) == []


@pytest.mark.parametrize("shape", [(0, 5), (3, 0)])
def test_empty_matrices(square, shared_dir, shape):
    a = np.zeros(shape)
    A = build(a, square, 2)
    A.to_zarr(os.path.join(shared_dir, "e.zarr"))
    assert_holds(bm.from_zarr(os.path.join(shared_dir, "e.zarr"), grid=square), a, (2, 2))
    if HAVE_H5PY:
        bio.to_hdf5(A, os.path.join(shared_dir, "e.h5"), "m")
        assert_holds(bm.from_hdf5(os.path.join(shared_dir, "e.h5"), "m", 3, square), a)
    for via in ("memory", "zarr"):
        y = A.to_dask(via=via, tmpdir=shared_dir)
        assert COMM.allreduce(same_bits(y.compute(), a), op=MPI.LAND)


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
def test_from_zarr_missing_wrong_shape_wrong_dtype(square, shared_dir):
    with pytest.raises(FileNotFoundError, match="nope.zarr"):
        bm.from_zarr(os.path.join(shared_dir, "nope.zarr"), grid=square)
    p3, ps = os.path.join(shared_dir, "3d.zarr"), os.path.join(shared_dir, "s.zarr")

    def write():
        zarr.create_array(p3, shape=(2, 3, 4), dtype=np.float64)
        zarr.create_array(ps, shape=(2, 3), dtype=np.dtype("U3"))

    on_rank0(write)
    with pytest.raises(ValueError, match="2-D"):
        bm.from_zarr(p3, grid=square)
    with pytest.raises(TypeError, match="U3"):
        bm.from_zarr(ps, grid=square, dtype=np.float64)
    with pytest.raises(ValueError, match="block"):
        bm.from_zarr(p3, block=0, grid=square)


def test_from_zarr_half_written_store(square, shared_dir):
    """A store whose writer did not finish (marked incomplete, as under its temporary name)
    raises on every rank; so does a complete blasmp_array store with a chunk deleted."""
    a = matrix((12, 10), np.float64, 3)
    path = os.path.join(shared_dir, "a.zarr")
    build(a, square, (4, 5)).to_zarr(path)

    def damage():
        z = zarr.open_array(path, mode="r+")
        os.remove(chunk_file(path, z.metadata.encode_chunk_key((1, 1))))

    on_rank0(damage)
    with pytest.raises(FileNotFoundError, match=r"chunk 'c/1/1' .* is missing"):
        bm.from_zarr(path, grid=square)

    def unfinish():
        z = zarr.open_array(path, mode="r+")
        z.update_attributes({_zarr.MARK: {**z.attrs[_zarr.MARK], "complete": False}})

    on_rank0(unfinish)
    with pytest.raises(ValueError, match="half-written"):
        bm.from_zarr(path, grid=square)


def test_from_zarr_corrupt_chunk(square, shared_dir):
    a = matrix((12, 10), np.float64, 3)
    path = os.path.join(shared_dir, "a.zarr")
    build(a, square, (4, 5)).to_zarr(path)

    def truncate():
        with open(chunk_file(path, "c/2/0"), "r+b") as f:
            f.truncate(17)

    on_rank0(truncate)
    with pytest.raises(bio.DistributedIOError, match=r"reading chunk \(2, 0\) \(key 'c/2/0'\)"):
        bm.from_zarr(path, grid=square)


def test_permission_denied_everywhere(square, shared_dir, monkeypatch):
    """No write permission (simulated: the tests may run as root) raises PermissionError on
    every rank before anything is written; so does an unreadable store."""
    A = build(matrix((6, 6), np.float64), square, 2)
    if RANK == 0:  # only rank 0 looks at the destination
        monkeypatch.setattr(_common.os, "access", lambda path, mode: False)
    for write in (
        lambda: A.to_zarr(os.path.join(shared_dir, "a.zarr")),
        lambda: A.to_npy(os.path.join(shared_dir, "a.npy")),
    ):
        with pytest.raises(PermissionError, match="no permission"):
            write()
    monkeypatch.undo()
    assert listing(shared_dir) == []
    path = os.path.join(shared_dir, "a.zarr")
    A.to_zarr(path)
    if RANK == 0:

        def denied(*args, **kwargs):
            raise PermissionError(13, "Permission denied", path)

        monkeypatch.setattr(zarr, "open_array", denied)
    with pytest.raises(PermissionError, match="Permission denied"):
        bm.from_zarr(path, grid=square)


def test_a_left_over_temporary_store_does_not_matter(square, shared_dir):
    """A writer killed mid-write leaves its hidden temporary store; the next writer publishes
    beside it, and reading the leftover raises (it is marked incomplete)."""
    a = matrix((8, 8), np.float64)
    path = os.path.join(shared_dir, "a.zarr")
    left = os.path.join(shared_dir, ".a.zarr.tmp-deadbeef")

    def leftover():
        z = zarr.create_array(left, shape=a.shape, chunks=(4, 4), dtype=a.dtype)
        z.update_attributes({_zarr.MARK: {"writer": "killed", "complete": False}})

    on_rank0(leftover)
    build(a, square, 4).to_zarr(path)
    assert_holds(bm.from_zarr(path, grid=square), a)
    with pytest.raises(ValueError, match="half-written"):
        bm.from_zarr(left, grid=square)


# -- bounded staging ---------------------------------------------------------------------------
def _peak_extra(fn):
    """Run ``fn``; the most memory (bytes, traced allocations of every thread) it held at once
    beyond what was allocated before, and its result."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        return tracemalloc.get_traced_memory()[1] - before, result
    finally:
        tracemalloc.stop()


@pytest.mark.skipif(ON_GPU, reason="measures host staging of host-resident local matrices")
@pytest.mark.parametrize("staged", [False, True], ids=["in-place", "bands"])
def test_bounded_staging(square, shared_dir, monkeypatch, staged):
    """Writers and readers hold at most a few chunks (or two staging bands) beyond the local
    matrix. ``bands`` runs the device path (host bands, a helper thread) on the CPU."""
    a = matrix((512, 384), np.float64, 21)
    block = (32, 32)
    chunk = 32 * 32 * 8
    A = build(a, square, block)
    local = A.local.nbytes
    monkeypatch.setattr(_zarr_chunks, "IN_FLIGHT_BYTES", 2 * chunk)
    allowance = 8 * chunk + 192 * 1024  # a few chunks, plus zarr's and the event loop's objects
    if staged:
        band = 2 * block[0] * A.local.shape[1] * 8
        monkeypatch.setattr(_staging, "host_resident", lambda backend: False)
        monkeypatch.setattr(_staging, "STAGING_BYTES", band)
        allowance += 3 * band
    paths = {k: os.path.join(shared_dir, f"a.{k}") for k in ("zarr", "npy", "h5")}
    writers = {
        "zarr": lambda: A.to_zarr(paths["zarr"], overwrite=True),
        "npy": lambda: A.to_npy(paths["npy"], overwrite=True),
    }
    readers = {
        "zarr": lambda: bm.from_zarr(paths["zarr"], block, square),
        "npy": lambda: bm.from_npy(paths["npy"], block, square),
    }
    if not staged:  # the CPU path of from_dask: each piece written by its task
        x = da.from_array(a, chunks=(128, 128))
        readers["dask"] = lambda: bm.from_dask(x, block, square)
    if HAVE_H5PY:
        writers["h5"] = lambda: bio.to_hdf5(A, paths["h5"], "m", overwrite=True)
        readers["h5"] = lambda: bm.from_hdf5(paths["h5"], "m", block, square)
    for write in writers.values():  # once first: imports and caches are not staging
        write()
    report = {}
    for kind, write in writers.items():
        report[f"to_{kind}"], _ = _peak_extra(write)
    for kind, read in readers.items():
        extra, B = _peak_extra(read)
        report[f"from_{kind}"] = extra - local  # the result's own local matrix is expected
        assert_holds(B, a, block)
    # Dask: each thread holds a source chunk and its piece; plus the graph's bookkeeping
    threads = dask.config.get("num_workers", None) or os.cpu_count()
    bound = {"from_dask": 2 * threads * 128 * 128 * 8 + 512 * 1024}
    over = COMM.allgather({k: v for k, v in report.items() if v > bound.get(k, allowance)})
    assert not any(over), f"peak extra bytes over {allowance} (local {local}): {over}"


# -- npy -------------------------------------------------------------------------------------
NPY_CASES = [
    # (shape, write grid index, write block, read grid index, read block)
    ((37, 29), 0, (4, 3), 1, (5, 7)),
    ((20, 33), 1, 1, 2, 64),
    ((8, 70), 2, (3, 64), 0, (2, 2)),
]


@pytest.mark.parametrize("case,dtype", sampled(NPY_CASES, "case"))
def test_npy_round_trip_across_layouts(shared_dir, case, dtype):
    shape, wgrid, wblock, rgrid, rblock = case
    a = matrix(shape, dtype, seed=4)
    path = os.path.join(shared_dir, "a.npy")
    build(a, grid_at(wgrid), wblock).to_npy(path)
    ok = same_bits(np.load(path), a)
    assert COMM.allreduce(ok, op=MPI.LAND)
    dst = grid_at(rgrid)
    assert_holds(bm.from_npy(path, block=rblock, grid=dst), a, grid_shape=dst.shape)
    assert listing(shared_dir) == ["a.npy"]


def test_npy_fortran_order_empty_and_errors(square, shared_dir):
    a = matrix((13, 10), np.complex128)
    f_path, e_path = os.path.join(shared_dir, "f.npy"), os.path.join(shared_dir, "e.npy")
    v_path, o_path = os.path.join(shared_dir, "v.npy"), os.path.join(shared_dir, "o.npy")
    t_path, x_path = os.path.join(shared_dir, "t.npy"), os.path.join(shared_dir, "x.npy")

    def write():
        np.save(f_path, np.asfortranarray(a))
        np.save(v_path, np.zeros(3))
        np.save(o_path, np.array([[None, 1]], dtype=object), allow_pickle=True)
        np.save(t_path, a)
        with open(t_path, "r+b") as f:  # a writer that did not finish
            f.truncate(os.path.getsize(t_path) - 16)
        with open(x_path, "wb") as f:
            f.write(b"not an npy file at all")

    on_rank0(write)
    assert_holds(bm.from_npy(f_path, block=(2, 3), grid=square), a, (2, 3))
    assert_holds(bm.from_npy(f_path, 4, square, dtype=np.complex64), a.astype(np.complex64))
    build(np.zeros((0, 4)), square, 2).to_npy(e_path)
    assert_holds(bm.from_npy(e_path, grid=square), np.zeros((0, 4)))
    v = bm.from_npy(v_path, grid=square)  # a 1-D file is a vector
    assert v.ndim == 1 and np.array_equal(v.to_numpy(), np.zeros(3))
    with pytest.raises(TypeError, match="object"):
        bm.from_npy(o_path, grid=square)
    with pytest.raises(ValueError, match="truncated"):
        bm.from_npy(t_path, grid=square)
    with pytest.raises(ValueError, match="not a .npy file"):
        bm.from_npy(x_path, grid=square)
    with pytest.raises(FileNotFoundError, match="nope.npy"):
        bm.from_npy(os.path.join(shared_dir, "nope.npy"), grid=square)
    with pytest.raises(TypeError, match="path"):
        bm.from_npy(3, grid=square)


def test_npy_overwrite_and_failure(square, shared_dir, monkeypatch):
    path = os.path.join(shared_dir, "a.npy")
    n = _held_by_all(12, 2)
    a, b = matrix((n, n), np.float64, 1), matrix((n, n), np.float64, 2)
    build(a, square, 2).to_npy(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        build(b, square, 2).to_npy(path)

    def fails(real):
        def failing(*args, **kwargs):
            raise OSError("injected write failure")

        return failing

    _fail_on_last_rank(monkeypatch, _npy, "_write_rect", fails)
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError"):
        build(b, square, 2).to_npy(path, overwrite=True)
    monkeypatch.undo()
    assert listing(shared_dir) == ["a.npy"]
    assert COMM.allreduce(same_bits(np.load(path), a), op=MPI.LAND)
    build(b, square, 3).to_npy(path, overwrite=True, progress=True)
    assert COMM.allreduce(same_bits(np.load(path), b), op=MPI.LAND)
    with pytest.raises(FileExistsError, match="is a directory"):
        build(b, square, 3).to_npy(shared_dir, overwrite=True)


# -- HDF5 ------------------------------------------------------------------------------------
needs_h5py = pytest.mark.skipif(not HAVE_H5PY, reason="h5py is not installed")


@needs_h5py
@pytest.mark.parametrize(
    "h5chunks,compression,dtype,rgrid",
    [
        (None, None, np.float32, 0),
        ((5, 4), None, np.complex128, 2),
        ((7, 16), "gzip", np.float64, 1),
    ],
    ids=["contiguous", "chunked", "gzip"],
)
def test_from_hdf5_any_layout(shared_dir, h5chunks, compression, dtype, rgrid):
    import h5py

    a = matrix((29, 17), dtype, seed=8)
    path = os.path.join(shared_dir, "a.h5")

    def write():
        with h5py.File(path, "w") as f:
            f.create_dataset("grp/m", data=a, chunks=h5chunks, compression=compression)

    on_rank0(write)
    dst = grid_at(rgrid)
    for block in [(3, 5), (1, 1), (40, 40)]:
        assert_holds(bm.from_hdf5(path, "grp/m", block=block, grid=dst), a, block, dst.shape)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    assert_holds(bm.from_hdf5(path, "grp/m", 4, dst, dtype=wide), a.astype(wide))


@needs_h5py
@pytest.mark.parametrize("case,dtype", sampled(NPY_CASES, "case"))
def test_hdf5_round_trip_across_layouts(shared_dir, case, dtype):
    import h5py

    shape, wgrid, wblock, rgrid, rblock = case
    a = matrix(shape, dtype, seed=4)
    path = os.path.join(shared_dir, "a.h5")
    bio.to_hdf5(build(a, grid_at(wgrid), wblock), path, "g/m")
    with h5py.File(path, "r") as f:
        ok = same_bits(f["g/m"][...], a)
    assert COMM.allreduce(ok, op=MPI.LAND)
    dst = grid_at(rgrid)
    assert_holds(bm.from_hdf5(path, "/g/m", block=rblock, grid=dst), a, grid_shape=dst.shape)
    assert listing(shared_dir) == ["a.h5"]


@needs_h5py
def test_hdf5_errors_overwrite_and_failure(square, shared_dir, monkeypatch):
    import h5py

    path = os.path.join(shared_dir, "a.h5")
    shape = (10, _held_by_all(12, 3))
    a, b = matrix(shape, np.float64, 1), matrix(shape, np.float64, 2)

    def write():
        with h5py.File(path, "w") as f:
            f.create_dataset("cube", data=np.zeros((2, 2, 2)))
            f.create_dataset("text", data=np.array([[b"ab"]]))
            f.create_group("grp")

    on_rank0(write)
    with pytest.raises(KeyError, match="nope"):
        bm.from_hdf5(path, "nope", grid=square)
    with pytest.raises(ValueError, match="2-D"):
        bm.from_hdf5(path, "cube", grid=square)
    with pytest.raises(TypeError, match="not numbers"):
        bm.from_hdf5(path, "text", grid=square)
    with pytest.raises(ValueError, match="not a dataset"):
        bm.from_hdf5(path, "grp", grid=square)
    with pytest.raises(FileNotFoundError):
        bm.from_hdf5(os.path.join(shared_dir, "nope.h5"), "m", grid=square)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        bio.to_hdf5(build(a, square, 2), path, "m")
    with pytest.raises(ValueError, match="dataset"):
        bio.to_hdf5(build(a, square, 2), path, "", overwrite=True)
    bio.to_hdf5(build(a, square, 2), path, "m", overwrite=True, progress=True)

    def fails(real):
        def failing(*args, **kwargs):
            raise OSError("injected write failure")

        return failing

    # the rectangles of the memory-map writer that .npy and HDF5 share (_npy.write_map)
    _fail_on_last_rank(monkeypatch, _npy, "copy_rects", fails)
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError"):
        bio.to_hdf5(build(b, square, 3), path, "m", overwrite=True)
    monkeypatch.undo()
    assert listing(shared_dir) == ["a.h5"]
    assert_holds(bm.from_hdf5(path, "m", 2, square), a)


# -- the device path (GPU node) ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs BLASMP_BACKEND=gpu")
def test_gpu_bands_round_trip(square, shared_dir, monkeypatch):
    """On the device: several staging bands per rank, device copies beside the I/O."""
    a = matrix((300, 200), np.float64, 30)
    A = build(a, square, (16, 24))
    monkeypatch.setattr(_staging, "STAGING_BYTES", 3 * 16 * 200 * 8)
    for kind in ("zarr", "npy") + (("h5",) if HAVE_H5PY else ()):
        path = os.path.join(shared_dir, f"a.{kind}")
        if kind == "zarr":
            A.to_zarr(path)
            B = bm.from_zarr(path, (20, 8), square)
        elif kind == "npy":
            A.to_npy(path)
            B = bm.from_npy(path, (20, 8), square)
        else:
            bio.to_hdf5(A, path, "m")
            B = bm.from_hdf5(path, "m", (20, 8), square)
        assert type(B.local).__module__.startswith("cupy")
        assert_holds(B, a, (20, 8))
    y = A.to_dask()
    assert COMM.allreduce(same_bits(y.compute(), a), op=MPI.LAND)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_integer_and_bool_round_trips(grid, shared_dir, dtype):
    """int32, int64 and bool matrices keep their dtype and values through every writer and
    reader (zarr, npy, HDF5, Dask), across a change of block."""
    a = (np.arange(35 * 22).reshape(35, 22) * 7 % 11 - 5).astype(dtype)
    A = bm.from_numpy(a, block=(4, 5), grid=grid)
    name = np.dtype(dtype).name
    A.to_zarr(os.path.join(shared_dir, f"{name}.zarr"))
    assert_holds(bm.from_zarr(os.path.join(shared_dir, f"{name}.zarr"), block=(3, 3), grid=grid), a)
    A.to_npy(os.path.join(shared_dir, f"{name}.npy"))
    assert_holds(bm.from_npy(os.path.join(shared_dir, f"{name}.npy"), grid=grid), a)
    got = A.to_dask().compute()
    assert got.dtype == a.dtype and np.array_equal(got, a)
    assert_holds(bm.from_dask(da.from_array(a, chunks=(7, 9)), grid=grid), a)
    if HAVE_H5PY:
        bio.to_hdf5(A, os.path.join(shared_dir, f"{name}.h5"), "x")
        assert_holds(bm.from_hdf5(os.path.join(shared_dir, f"{name}.h5"), "x", grid=grid), a)


@pytest.mark.parametrize("n", [0, 1, 37])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int32, np.bool_], ids=str)
def test_vector_round_trips(grid, shared_dir, n, dtype):
    """Vectors (1-D arrays) through every writer and reader: the files are 1-D (NumPy, zarr,
    h5py and Dask read them as such), and what comes back is a vector with the values."""
    x = (np.arange(n) * 5 % 7 - 3).astype(dtype)
    v = bm.from_numpy(x, block=4, grid=grid)
    stem = os.path.join(shared_dir, f"v{n}{np.dtype(dtype).name}")

    def check(y, block=None):
        ok = y.ndim == 1 and y.shape == (n,) and y.dtype == x.dtype
        ok = ok and (block is None or y.block == (block,))
        assert ok and np.array_equal(y.to_numpy(), x), (y.shape, y.dtype)

    v.to_zarr(stem + ".zarr")
    if RANK == 0:
        stored_zarr = zarr.open_array(stem + ".zarr", mode="r")
        assert stored_zarr.shape == (n,) and stored_zarr.chunks == (4,)
        assert np.array_equal(stored_zarr[...], x)
    check(bm.from_zarr(stem + ".zarr", grid=grid), block=4)
    check(bm.from_zarr(stem + ".zarr", block=3, grid=grid), block=3)
    np.save(stem, v)  # -> stem.npy, through to_npy
    if RANK == 0:
        assert np.array_equal(np.load(stem + ".npy"), x) and np.load(stem + ".npy").ndim == 1
    check(bm.from_npy(stem + ".npy", block=5, grid=grid), block=5)
    got = v.to_dask()
    assert got.ndim == 1 and np.array_equal(got.compute(), x)
    check(bm.from_dask(da.from_array(x, chunks=3), block=2, grid=grid), block=2)
    if HAVE_H5PY:
        bio.to_hdf5(v, stem + ".h5", "x")
        check(bm.from_hdf5(stem + ".h5", "x", grid=grid))
    with pytest.raises(FileExistsError):
        v.to_zarr(stem + ".zarr")  # the writers' rules hold for vectors: on every rank


def test_vector_read_errors_on_every_rank(square, shared_dir):
    missing = os.path.join(shared_dir, "none.npy")
    with pytest.raises(FileNotFoundError):
        bm.from_npy(missing, grid=square)
    path = os.path.join(shared_dir, "c.npy")
    on_rank0(lambda: np.save(path, np.array(["a", "b"])))
    with pytest.raises(TypeError, match="not numbers"):
        bm.from_npy(path, grid=square)
    path3 = os.path.join(shared_dir, "three.npy")
    on_rank0(lambda: np.save(path3, np.zeros((2, 2, 2))))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        bm.from_npy(path3, grid=square)
