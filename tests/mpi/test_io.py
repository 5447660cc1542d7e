"""Distributed tests of blasmp_array.io: from_dask, to_dask, zarr / npy / HDF5 round trips,
overwrite protection and failure atomicity of the parallel writers.

Every case builds its data from a seeded NumPy matrix known on every rank (with -0.0 and NaN
payloads, so the checks are bit for bit), checks each rank's local matrix against the slice
its layout assigns it, and makes every rank agree on the outcome with one reduction. Local
matrices of the readers are poisoned with NaN before they are filled.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile

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

import dask.array as da  # noqa: E402
import zarr  # noqa: E402

from blasmp_array import io as bio  # noqa: E402
from blasmp_array.io import _dask, _npy, _zarr  # noqa: E402

HAVE_H5PY = _available("h5py")
ZARR_MAJOR = int(zarr.__version__.split(".")[0])  # 2 and 3 store and create arrays differently
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


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    """Readers allocate through new_array: fill it with NaN so unwritten elements show up."""
    real = _dask.new_array

    def poisoned(*args, **kwargs):
        out = real(*args, **kwargs)
        out._data[...] = np.nan
        return out

    monkeypatch.setattr(_dask, "new_array", poisoned)
    monkeypatch.setattr(_npy, "new_array", poisoned)


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


def assert_holds(A: bm.BlockCyclicArray, a: np.ndarray, block=None, grid_shape=None) -> None:
    """Every rank: A's local matrix is bit for bit a's slice of A's layout (agreed by all)."""
    lay = A.layout
    ok = A.shape == a.shape and A.dtype == a.dtype
    ok = ok and (block is None or A.block == tuple(block))
    ok = ok and (grid_shape is None or A.grid.shape == tuple(grid_shape))
    if ok:
        rows, cols = lay.local_rows(A.grid.myrow), lay.local_cols(A.grid.mycol)
        ok = same_bits(A.backend.asnumpy(A.local), a[np.ix_(rows, cols)])
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
    return sorted(os.listdir(path))


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


def test_from_dask_batches_and_lazy_graph(grid):
    """Tiny batches (several computes per rank) over a lazy graph; result equals compute()."""
    x = da.random.default_rng(7).standard_normal((30, 26), chunks=(7, 13)) * 2 - 1
    a = x.compute()
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
        bm.from_dask(da.zeros((4, 4), chunks=2, dtype=np.int32), block=2, grid=square)
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


# -- to_dask ---------------------------------------------------------------------------------
def test_to_dask(square, shared_dir):
    a = matrix((31, 22), np.complex64)
    A = build(a, square, (4, 6))
    y = A.to_dask(tmpdir=shared_dir)
    ok = y.chunksize == (4, 6) and y.dtype == a.dtype and same_bits(y.compute(), a)
    # the transposed view goes through too
    yt = A.T.to_dask(tmpdir=shared_dir)
    ok = ok and same_bits(yt.compute(), a.T)
    assert COMM.allreduce(ok, op=MPI.LAND)


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


def _directory_store(path):
    """zarr's store of a local directory: LocalStore (zarr-python 3), DirectoryStore (2)."""
    if ZARR_MAJOR >= 3:
        return zarr.storage.LocalStore(path)
    return zarr.storage.DirectoryStore(path)


@pytest.mark.filterwarnings("ignore:The NestedDirectoryStore is deprecated:FutureWarning")
def test_zarr_store_objects(square, shared_dir):
    a = matrix((10, 7), np.complex64, 11)
    A = build(a, square, 3)
    path = os.path.join(shared_dir, "s.zarr")
    A.to_zarr(_directory_store(path))
    assert_holds(bm.from_zarr(_directory_store(path), grid=square), a, (3, 3))
    assert_holds(bm.from_zarr(zarr.open_array(path, mode="r"), grid=square), a, (3, 3))
    if ZARR_MAJOR < 3:
        # the nested store's '/' chunk keys are kept: a chunk file lies at <store>/0/0
        nested = os.path.join(shared_dir, "n.zarr")
        A.to_zarr(zarr.storage.NestedDirectoryStore(nested))
        assert os.path.isfile(os.path.join(nested, "0", "0"))
        read = zarr.open_array(zarr.storage.NestedDirectoryStore(nested), mode="r")[...]
        assert COMM.allreduce(same_bits(read, a), op=MPI.LAND)
        assert_holds(bm.from_zarr(nested, grid=square), a, (3, 3))
    else:
        with pytest.raises(ValueError, match="read-only"):
            A.to_zarr(zarr.storage.LocalStore(path, read_only=True), overwrite=True)
    # stores that are not one directory are refused on every rank, before any write
    with pytest.raises(TypeError, match="publish by a rename"):
        A.to_zarr(zarr.storage.MemoryStore())
    zip_path = os.path.join(shared_dir, f"rank{RANK}.zip")
    zip_store = zarr.storage.ZipStore(zip_path, mode="w")
    with pytest.raises(TypeError, match="ZipStore"):
        A.to_zarr(zip_store)
    if ZARR_MAJOR < 3:
        zip_store.close()  # zarr-python 2 opens the file at once; 3 only on first use
    COMM.Barrier()
    assert not [name for name in listing(shared_dir) if name.startswith(".")]
    if os.path.exists(zip_path):
        os.remove(zip_path)


def test_from_zarr_component_of_a_group(square, shared_dir):
    a = matrix((11, 13), np.float32, 12)
    path = os.path.join(shared_dir, "g.zarr")
    if RANK == 0:
        sub = zarr.open_group(path, mode="w").create_group("grp")
        create = sub.create_array if ZARR_MAJOR >= 3 else sub.create_dataset
        z = create("m", shape=a.shape, chunks=(4, 5), dtype=a.dtype)
        z[...] = a
    COMM.Barrier()
    assert_holds(bm.from_zarr(path, grid=square, component="grp/m"), a, (4, 5))
    assert_holds(bm.from_zarr(path, (3, 2), square, component="grp/m"), a, (3, 2))


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
    with pytest.raises(FileNotFoundError):
        build(b, square, 2).to_zarr(os.path.join(shared_dir, "missing", "a.zarr"))


def _fail_on_last_rank(monkeypatch, module, name):
    """Make ``module.name`` raise on the last rank after its first call."""
    if RANK != SIZE - 1:
        return
    real, calls = getattr(module, name), []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError("injected write failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)


@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
def test_zarr_failure_mid_write_publishes_nothing(square, shared_dir, monkeypatch, existing):
    path = os.path.join(shared_dir, "a.zarr")
    old = matrix((24, 24), np.float32, 5)
    if existing:
        build(old, square, 4).to_zarr(path)
    # 6 x 6 blocks: every rank owns at least two
    A = build(matrix((24, 24), np.float32, 6), square, 4)
    _fail_on_last_rank(monkeypatch, _zarr, "_write_tile")
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError"):
        A.to_zarr(path, overwrite=existing)
    monkeypatch.undo()
    assert listing(shared_dir) == (["a.zarr"] if existing else [])
    if existing:
        assert_holds(bm.from_zarr(path, grid=square), old)  # the old store is intact


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
    if RANK == 0:
        np.save(f_path, np.asfortranarray(a))
        np.save(os.path.join(shared_dir, "v.npy"), np.zeros(3))
    COMM.Barrier()
    assert_holds(bm.from_npy(f_path, block=(2, 3), grid=square), a, (2, 3))
    build(np.zeros((0, 4)), square, 2).to_npy(e_path)
    assert_holds(bm.from_npy(e_path, grid=square), np.zeros((0, 4)))
    with pytest.raises(ValueError, match="2-D"):
        bm.from_npy(os.path.join(shared_dir, "v.npy"), grid=square)
    with pytest.raises(bio.DistributedIOError, match="FileNotFoundError"):
        bm.from_npy(os.path.join(shared_dir, "nope.npy"), grid=square)


def test_npy_overwrite_and_failure(square, shared_dir, monkeypatch):
    path = os.path.join(shared_dir, "a.npy")
    a, b = matrix((12, 12), np.float64, 1), matrix((12, 12), np.float64, 2)
    build(a, square, 2).to_npy(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        build(b, square, 2).to_npy(path)
    # batches are whole local matrices here: fail the first write on the last rank
    if RANK == SIZE - 1:

        def failing(*args, **kwargs):
            raise OSError("injected write failure")

        monkeypatch.setattr(_npy, "_write_batch", failing)
    with pytest.raises(bio.DistributedIOError, match=f"rank {SIZE - 1}: OSError"):
        build(b, square, 2).to_npy(path, overwrite=True)
    monkeypatch.undo()
    assert listing(shared_dir) == ["a.npy"]
    assert COMM.allreduce(same_bits(np.load(path), a), op=MPI.LAND)
    build(b, square, 3).to_npy(path, overwrite=True, progress=True)
    assert COMM.allreduce(same_bits(np.load(path), b), op=MPI.LAND)


# -- HDF5 ------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_H5PY, reason="h5py is not installed")
@pytest.mark.parametrize(
    "h5chunks,dtype,rgrid",
    [(None, np.float32, 0), ((5, 4), np.complex128, 2)],
    ids=["contiguous", "chunked"],
)
def test_hdf5_round_trip(shared_dir, h5chunks, dtype, rgrid):
    import h5py

    a = matrix((29, 17), dtype, seed=8)
    path = os.path.join(shared_dir, "a.h5")
    if RANK == 0:
        with h5py.File(path, "w") as f:
            f.create_dataset("grp/m", data=a, chunks=h5chunks)
    COMM.Barrier()
    dst = grid_at(rgrid)
    assert_holds(bm.from_hdf5(path, "grp/m", block=(3, 5), grid=dst), a, (3, 5), dst.shape)
    with pytest.raises(KeyError):
        bm.from_hdf5(path, "nope", grid=dst)
