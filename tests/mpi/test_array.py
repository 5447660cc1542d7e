"""Distributed tests of array construction: from_numpy/to_numpy round trips, constructors and
argument validation (run on every rank under mpiexec)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array import creation
from blasmp_array.backends import _staging

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

# (shape, block): block 1, 3, 64, larger than the matrix, mb != nb, ragged, empty dimensions
CASES = [
    ((7, 5), 1),
    ((13, 11), 3),
    ((70, 33), (64, 5)),
    ((9, 4), (100, 100)),
    ((20, 17), (3, 8)),
    ((1, 1), 1),
    ((0, 5), 2),
    ((6, 0), (2, 3)),
]


def _matrix(shape, dtype, seed=0):
    """The same test matrix on every rank (seeded), with distinct entries."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _same_on_all_ranks(comm, value) -> bool:
    """True when ``value`` (an array or scalar) is bitwise identical on every rank."""
    mine = np.ascontiguousarray(value).tobytes()
    return all(x == mine for x in comm.allgather(mine))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip_every_rank(grid, dtype):
    for shape, block in CASES:
        a = _matrix(shape, dtype)
        A = bm.from_numpy(a, block=block, grid=grid)
        assert A.shape == shape and A.dtype == np.dtype(dtype)
        mb, nb = (block, block) if isinstance(block, int) else block
        assert A.block == (mb, nb) and A.grid is grid
        # the local matrix is exactly the owned rows/columns, C-ordered
        rows = A.layout.local_rows(grid.myrow)
        cols = A.layout.local_cols(grid.mycol)
        assert A.local.flags.c_contiguous
        np.testing.assert_array_equal(A.backend.asnumpy(A.local), a[np.ix_(rows, cols)])
        b = A.to_numpy()
        assert b.dtype == a.dtype and b.shape == shape
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
def test_roundtrip_from_root(grid, comm, dtype):
    roots = sorted({0, comm.size - 1})
    for k, (shape, block) in enumerate(CASES):
        root = roots[k % len(roots)]
        a = _matrix(shape, dtype, seed=k)
        A = bm.from_numpy(a if comm.rank == root else None, block=block, grid=grid, root=root)
        assert A.shape == shape and A.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(A.to_numpy(), a)
        g = A.to_numpy(root=root)
        if comm.rank == root:
            np.testing.assert_array_equal(g, a)
        else:
            assert g is None


@pytest.mark.parametrize("route", ["host", "device"])
def test_roundtrip_in_many_chunks(grid, comm, monkeypatch, route):
    # one row per staging chunk and per panel: many messages, panels and exchanges
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 8)
    monkeypatch.setattr(creation, "PANEL_BYTES", 8)
    monkeypatch.setitem(creation.ROUTE, grid.backend.name, route)
    a = _matrix((23, 19), np.float64, seed=5)
    A = bm.from_numpy(a if comm.rank == 0 else None, block=(4, 3), grid=grid, root=0)
    np.testing.assert_array_equal(A.to_numpy(), a)
    out = A.to_numpy(root=comm.size - 1)
    if comm.rank == comm.size - 1:
        np.testing.assert_array_equal(out, a)
    else:
        assert out is None


def test_from_numpy_converts_dtype(grid):
    a = np.arange(12).reshape(3, 4)
    A = bm.from_numpy(a, block=2, grid=grid, dtype=np.complex64)
    assert A.dtype == np.complex64
    np.testing.assert_array_equal(A.to_numpy(), a.astype(np.complex64))
    # non-contiguous input
    b = np.arange(80.0).reshape(8, 10)[::2, ::3]
    np.testing.assert_array_equal(bm.from_numpy(b, block=(2, 1), grid=grid).to_numpy(), b)


def test_to_numpy_of_views(grid):
    a = _matrix((9, 14), np.complex128)
    A = bm.from_numpy(a, block=(2, 5), grid=grid)
    np.testing.assert_array_equal(A.conj().to_numpy(), a.conj())
    np.testing.assert_array_equal(A.T.to_numpy(), a.T)
    np.testing.assert_array_equal(A.H.to_numpy(), a.conj().T)


# -- constructors --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_constant_constructors(grid, dtype):
    shape, block = (11, 7), (3, 2)
    for fn, ref in ((bm.zeros, np.zeros), (bm.ones, np.ones)):
        A = fn(shape, dtype=dtype, block=block, grid=grid)
        assert A.dtype == np.dtype(dtype) and A.block == block
        np.testing.assert_array_equal(A.to_numpy(), ref(shape, dtype=dtype))
    E = bm.empty(shape, dtype=dtype, block=block, grid=grid)
    assert E.shape == shape and E.dtype == np.dtype(dtype)
    assert E.local.shape == E.layout.local_shape(*grid.coords)
    F = bm.full(shape, 2.5, dtype=dtype, block=block, grid=grid)
    np.testing.assert_array_equal(F.to_numpy(), np.full(shape, 2.5, dtype=dtype))


def test_full_default_dtypes(grid):
    assert bm.full((3, 2), 1, grid=grid).dtype == np.float64
    assert bm.full((3, 2), 1.5, grid=grid).dtype == np.float64
    assert bm.full((3, 2), 1 + 2j, grid=grid).dtype == np.complex128
    assert bm.full((3, 2), np.float32(2), grid=grid).dtype == np.float32
    with pytest.raises(TypeError, match="complex"):
        bm.full((3, 2), 1j, dtype=np.float64, grid=grid)
    with pytest.raises(TypeError, match="scalar"):
        bm.full((3, 2), [1.0, 2.0], grid=grid)


@pytest.mark.parametrize(
    "n, m, k, block",
    [
        (7, None, 0, 2),
        (5, 9, 2, (2, 3)),
        (9, 4, -3, 1),
        (6, 6, 10, 4),
        (8, 3, 0, (64, 64)),
    ],
)
def test_eye(grid, n, m, k, block):
    E = bm.eye(n, m, k=k, dtype=np.float32, block=block, grid=grid)
    np.testing.assert_array_equal(E.to_numpy(), np.eye(n, m, k=k, dtype=np.float32))


def test_like_constructors(grid):
    A = bm.from_numpy(_matrix((10, 6), np.float32), block=(3, 4), grid=grid)
    for fn, ref in ((bm.zeros_like, 0), (bm.ones_like, 1)):
        Z = fn(A)
        assert Z.layout == A.layout and Z.grid is A.grid and Z.dtype == A.dtype
        np.testing.assert_array_equal(Z.to_numpy(), np.full((10, 6), ref, np.float32))
    F = bm.full_like(A, 3, dtype=np.complex128)
    assert F.dtype == np.complex128 and F.layout == A.layout
    np.testing.assert_array_equal(F.to_numpy(), np.full((10, 6), 3, np.complex128))
    E = bm.empty_like(A.T)  # a view: the shape and block of A.T
    assert E.shape == (6, 10) and E.block == (4, 3) and E.grid is A.grid
    with pytest.raises(ValueError, match="shape"):
        bm.zeros_like(A, shape=(3, 3))
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bm.zeros_like(np.zeros((2, 2)))


def test_defaults_block_and_grid(comm):
    A = bm.zeros((5, 300))
    assert A.block == bm.creation.DEFAULT_BLOCK == (256, 256)
    assert A.grid is bm.creation.default_grid()
    assert A.grid.shape == bm.square_grid_shape(comm.size)
    B = bm.ones((4, 4), block=7)
    assert B.block == (7, 7)


# -- validation: every rank raises the same error before any collective ------------------------
@pytest.fixture(scope="module")
def grid1():
    """One grid for the validation tests (they need no grid sweep)."""
    return bm.creation.default_grid()


@pytest.mark.parametrize("block", [0, -1, (2, 0), (2,), (1, 2, 3), 2.5, "a", True, (2, None)])
def test_bad_block(grid1, block):
    with pytest.raises(ValueError, match="block"):
        bm.zeros((4, 4), block=block, grid=grid1)
    with pytest.raises(ValueError, match="block"):
        bm.from_numpy(np.zeros((4, 4)), block=block, grid=grid1)


@pytest.mark.parametrize("shape", [(2, 3, 4), (-1, 2), (2.0, 3), "ab", -3, (2.0,)])
def test_bad_shape(grid1, shape):
    with pytest.raises(ValueError, match="shape"):
        bm.zeros(shape, grid=grid1)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.int16, "U3"])
def test_bad_dtype(grid1, dtype):
    with pytest.raises(TypeError, match="float32, float64, complex64, complex128"):
        bm.zeros((2, 2), dtype=dtype, grid=grid1)
    with pytest.raises(TypeError, match="float32, float64, complex64, complex128"):
        bm.from_numpy(np.zeros((2, 2), dtype=dtype), grid=grid1)


def test_from_numpy_bad_input(grid, comm):
    with pytest.raises(ValueError, match="2-D"):
        bm.from_numpy(np.zeros((2, 3, 4)), grid=grid)
    with pytest.raises(TypeError, match="None"):
        bm.from_numpy(None, grid=grid)
    A = bm.zeros((2, 2), grid=grid)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bm.from_numpy(A, grid=grid)
    with pytest.raises(TypeError, match="ProcessGrid"):
        bm.from_numpy(np.zeros((2, 2)), grid=(1, comm.size))
    for root in (-1, comm.size, 0.0):
        with pytest.raises(ValueError, match="root"):
            bm.from_numpy(np.zeros((2, 2)), grid=grid, root=root)


def test_from_root_error_raised_on_every_rank(grid, comm):
    # only the root sees the (bad) array; every rank must raise the same error
    root = comm.size - 1
    bad = np.zeros((2, 3, 4)) if comm.rank == root else None
    with pytest.raises(ValueError, match="2-D"):
        bm.from_numpy(bad, grid=grid, root=root)
    bad = np.zeros((2, 3), dtype=np.float16) if comm.rank == root else None
    with pytest.raises(TypeError, match="float16"):
        bm.from_numpy(bad, grid=grid, root=root)
    # and the grid still works afterwards
    a = _matrix((3, 4), np.float64)
    A = bm.from_numpy(a if comm.rank == root else None, grid=grid, root=root, block=2)
    np.testing.assert_array_equal(A.to_numpy(), a)


def test_grid_not_matching_communicator(comm):
    with pytest.raises(ValueError, match="processes"):
        bm.ProcessGrid(3, 5)
    with pytest.raises(ValueError, match="positive"):
        bm.ProcessGrid(0, comm.size)
    if comm.size > 1:
        with pytest.raises(ValueError, match="divide"):
            bm.ProcessGrid(comm.size + 1)


def test_no_implicit_conversion(grid):
    A = bm.ones((3, 3), block=2, grid=grid)
    with pytest.raises(TypeError, match="to_numpy"):
        np.asarray(A)
    with pytest.raises(TypeError, match="to_numpy"):
        np.array(A)
    scipy_linalg = pytest.importorskip("scipy.linalg")
    with pytest.raises(TypeError, match="blasmp_array.linalg"):
        scipy_linalg.solve(A, A)  # SciPy converts; the message names the distributed solve
    with pytest.raises(TypeError, match="ambiguous"):
        bool(A)
    with pytest.raises(TypeError, match="ambiguous"):
        if A == A:
            pass
    assert len(A) == 3 and A.ndim == 2 and A.size == 9
    assert "BlockCyclicArray(shape=(3, 3)" in repr(A)


def test_gather_rejects_bad_root(grid, comm):
    A = bm.ones((3, 3), grid=grid)
    with pytest.raises(ValueError, match="root"):
        A.to_numpy(root=comm.size)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        bm.creation.gather(np.ones((2, 2)))


def test_results_identical_on_all_ranks(grid, comm):
    a = _matrix((12, 9), np.complex64)
    A = bm.from_numpy(a if comm.rank == 0 else None, block=(5, 2), grid=grid, root=0)
    assert _same_on_all_ranks(comm, A.to_numpy())
    assert MPI.COMM_WORLD.allreduce(A.local.size) == a.size
