"""Distributed tests of blasmp_array.random: the documented matrix, bit for bit, for every grid,
block and process count; the GPU backend against the CPU values on the same rank."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array import _philox
from blasmp_array.backends import gpu_available
from blasmp_array.random import SEED_TILE

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from random_reference import key_of, reference_matrix, ulp_distance  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPE = (SEED_TILE + 37, SEED_TILE + 5)  # 2 x 2 seed tiles, both ragged
ON_GPU = os.environ.get("BLASMP_BACKEND") == "gpu" and gpu_available()
gpu = pytest.mark.skipif(not ON_GPU, reason="needs BLASMP_BACKEND=gpu and a usable GPU")

_GRIDS: dict = {}


def _cached_grid(shape, backend):
    """A grid per shape for the whole module: every ProcessGrid holds two communicators, and
    MPICH allows only about 2000 per process."""
    if (shape, backend) not in _GRIDS:
        _GRIDS[(shape, backend)] = bm.ProcessGrid(*shape, backend=backend)
    return _GRIDS[(shape, backend)]


def _make(dist, shape, dtype, **kw):
    if dist == "normal":
        return bm.random.standard_normal(shape, dtype=dtype, **kw)
    if dist == "random":
        return bm.random.random(shape, dtype=dtype, **kw)
    return bm.random.uniform(shape, -2.0, 3.5, dtype=dtype, **kw)


def _reference(dist, shape, seed, dtype):
    if dist == "normal":
        return reference_matrix(shape, seed, "normal", dtype)
    if dist == "random":
        return reference_matrix(shape, seed, "uniform", dtype)
    return reference_matrix(shape, seed, "uniform", dtype, -2.0, 3.5)


def _assert_documented(got, want, dist, grid, msg=""):
    """``got`` is the documented matrix ``want``: bit for bit, except normal values on the GPU,
    which agree with the CPU's to within :data:`NORMAL_ULPS` (each backend's own log1p, sin and
    cos)."""
    if dist == "normal" and grid.backend.name == "gpu":
        assert got.shape == want.shape and got.dtype == want.dtype, msg
        worst = float(ulp_distance(got, want).max()) if got.size else 0.0
        assert worst <= NORMAL_ULPS, f"{msg}: {worst} ulp"
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


@pytest.mark.parametrize("dist", ["normal", "uniform", "random"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_matches_the_documented_matrix(grid, dist, dtype):
    """Bit for bit the construction of tests/random_reference.py, over blocks that split seed
    tiles in every way (1, 3, 7, 100, 300, non-multiples of 4, mb != nb)."""
    ref = _reference(dist, SHAPE, 1234, dtype)
    for block in [(7, 64), (300, 1), (3, 100), (1, 7), (64, 64)]:
        a = _make(dist, SHAPE, dtype, seed=1234, block=block, grid=grid)
        g = a.to_numpy()
        assert g.dtype == np.dtype(dtype) and g.shape == SHAPE
        _assert_documented(g, ref, dist, grid, f"block {block}")


@pytest.mark.parametrize("dist", ["normal", "uniform"])
def test_same_matrix_on_every_grid_and_block(grid, comm, dist):
    """The local parts differ, the gathered matrix does not (1 x P, P x 1 and square grids)."""
    shape = (2 * SEED_TILE + 3, SEED_TILE - 1)
    a = _make(dist, shape, np.float64, seed=99, block=(5, 12), grid=grid).to_numpy()
    for gshape in [(1, comm.size), (comm.size, 1)]:
        other = _cached_grid(gshape, grid.backend.name)
        b = _make(dist, shape, np.float64, seed=99, block=(300, 3), grid=other)
        np.testing.assert_array_equal(b.to_numpy(), a)


@pytest.mark.parametrize("dist", ["normal", "uniform"])
def test_host_threads_give_the_same_matrix(grid, monkeypatch, dist):
    """The CPU backend fills its rows on its host threads: any split gives the documented
    matrix, bit for bit."""
    if grid.backend.name != "cpu":
        pytest.skip("the host threads' split is the CPU backend's")
    from blasmp_array.backends import _staging

    shape = (2 * SEED_TILE + 41, SEED_TILE + 9)
    ref = _reference(dist, shape, 77, np.complex128)
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 1)
    for threads in (1, 3, 7):
        monkeypatch.setattr(grid.backend, "_host_copier", _staging.HostCopier(threads))
        a = _make(dist, shape, np.complex128, seed=77, block=(37, 64), grid=grid)
        _assert_documented(a.to_numpy(), ref, dist, grid, f"{threads} threads")


def test_leading_submatrix_is_the_smaller_matrix(grid):
    """Values depend on the seed and the position only, not on the shape."""
    big = bm.random.standard_normal((SEED_TILE + 50, 2 * SEED_TILE + 7), seed=5, grid=grid)
    for shape in [(SEED_TILE + 1, SEED_TILE - 3), (3, 2 * SEED_TILE + 1), (1, 1)]:
        small = bm.random.standard_normal(shape, seed=5, block=(4, 9), grid=grid)
        np.testing.assert_array_equal(small.to_numpy(), big.to_numpy()[: shape[0], : shape[1]])


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0), (1, 1), (3, 2)])
def test_empty_and_tiny_shapes(grid, shape):
    for dist in ("normal", "random"):
        a = _make(dist, shape, np.complex128, seed=0, block=2, grid=grid)
        _assert_documented(a.to_numpy(), _reference(dist, shape, 0, np.complex128), dist, grid)


def test_progress_gives_the_same_matrix(grid):
    """progress=True fills the local rows one seed-tile row at a time (no bar off a terminal)."""
    shape = (2 * SEED_TILE + 9, 40)
    a = bm.random.uniform(shape, 1.0, 2.0, seed=8, block=(100, 6), grid=grid, progress=True)
    np.testing.assert_array_equal(
        a.to_numpy(), reference_matrix(shape, 8, "uniform", np.float64, 1.0, 2.0)
    )


def test_single_precision_is_rounded_double(grid):
    d = bm.random.standard_normal((40, 30), seed=3, block=(4, 9), grid=grid).to_numpy()
    s = bm.random.standard_normal((40, 30), seed=3, block=(8, 3), grid=grid, dtype=np.float32)
    np.testing.assert_array_equal(s.to_numpy(), d.astype(np.float32))


def test_statistics(grid):
    """Sample moments within 6 standard errors (a false alarm has probability ~1e-9)."""
    shape = (SEED_TILE + 200, SEED_TILE + 100)
    n = shape[0] * shape[1]
    x = bm.random.standard_normal(shape, seed=11, block=64, grid=grid).to_numpy()
    assert abs(x.mean()) < 6 / np.sqrt(n)
    assert abs(x.var() - 1) < 6 * np.sqrt(2 / n)
    assert abs(np.mean(x**4) - 3) < 6 * np.sqrt(96 / n)  # kurtosis of a normal: var(x^4) = 96
    z = bm.random.standard_normal(shape, seed=11, block=64, grid=grid, dtype=np.complex128)
    g = z.to_numpy()
    assert abs(np.mean(np.abs(g) ** 2) - 1) < 6 / np.sqrt(n)  # |z|^2 ~ exponential(1)
    assert abs(g.real.var() - 0.5) < 6 * np.sqrt(0.5 / n)
    assert abs(g.mean()) < 6 / np.sqrt(n)
    assert abs(np.mean(g.real * g.imag)) < 6 * 0.5 / np.sqrt(n)  # independent parts
    u = bm.random.uniform(shape, -1.0, 3.0, seed=12, block=(7, 30), grid=grid).to_numpy()
    assert u.min() >= -1.0 and u.max() < 3.0
    assert abs(u.mean() - 1.0) < 6 * np.sqrt(16 / 12 / n)
    # neighbours (lanes of one Philox block, adjacent tiles) are uncorrelated
    r = bm.random.random(shape, seed=13, grid=grid).to_numpy() - 0.5
    for a, b in ((r[:, :-1], r[:, 1:]), (r[:-1], r[1:])):
        assert abs(np.mean(a * b)) < 6 / 12 / np.sqrt(a.size)


def test_seeds(grid, comm):
    a = bm.random.standard_normal((20, 20), seed=1, block=3, grid=grid).to_numpy()
    b = bm.random.standard_normal((20, 20), seed=2, block=3, grid=grid).to_numpy()
    assert not np.array_equal(a, b)
    # seed=None: drawn on rank 0 and broadcast, so the gathered matrix is the same everywhere
    c = bm.random.standard_normal((20, 20), block=3, grid=grid).to_numpy()
    d = bm.random.standard_normal((20, 20), block=3, grid=grid).to_numpy()
    blobs = comm.allgather(c.tobytes())
    assert all(x == blobs[0] for x in blobs)
    assert not np.array_equal(c, d)
    e = bm.random.standard_normal((20, 20), seed=(1, 2), block=4, grid=grid).to_numpy()
    assert not np.array_equal(a, e)
    want = reference_matrix((20, 20), (1, 2), "normal", np.float64)
    _assert_documented(e, want, "normal", grid)
    f = bm.random.standard_normal((20, 20), seed=np.int64(1), block=5, grid=grid).to_numpy()
    np.testing.assert_array_equal(f, a)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(seed=-1), ValueError, "non-negative"),
        (dict(seed="x"), TypeError, "seed"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(seed=True), TypeError, "seed"),
        (dict(seed=[]), TypeError, "seed"),
        (dict(seed=[1, -2]), TypeError, "seed"),
        (dict(seed=0, block=0), ValueError, "block"),
        (dict(seed=0, dtype=np.int32), TypeError, "float32"),
        (dict(seed=0, progress="yes"), TypeError, "progress"),
    ],
)
def test_bad_arguments(comm, kwargs, exc, match):
    """The same error on every rank, before any collective."""
    with pytest.raises(exc, match=match) as info:
        bm.random.standard_normal((4, 4), grid=bm.creation.default_grid(), **kwargs)
    messages = comm.allgather(str(info.value))
    assert all(m == messages[0] for m in messages)


@pytest.mark.parametrize(
    "low, high, match",
    [
        (2.0, 1.0, "low <= high"),
        (0.0, np.inf, "finite"),
        (np.nan, 1.0, "finite"),
        ("0", 1.0, "finite"),
        (-1e308, 1e308, "width"),
    ],
)
def test_bad_uniform_bounds(grid, comm, low, high, match):
    with pytest.raises(ValueError, match=match) as info:
        bm.random.uniform((4, 4), low, high, seed=0, grid=grid)
    messages = comm.allgather(str(info.value))
    assert all(m == messages[0] for m in messages)


def test_degenerate_interval(grid):
    a = bm.random.uniform((9, 7), 2.5, 2.5, seed=1, block=2, grid=grid).to_numpy()
    assert np.all(a == 2.5)


# -- the GPU backend against the CPU's values ----------------------------------------------------
def _cpu_values(A, dist, low, high, seed):
    """What the CPU backend computes for this rank's part of A (NumPy, on this rank)."""
    g = A.grid
    layout = bm.BlockCyclicLayout(A.shape, A.block, g.shape)
    out = np.full(layout.local_shape(g.myrow, g.mycol), np.nan, A.dtype)
    rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
    _philox.fill_local(out, rows, cols, key_of(seed), dist, low, high)
    return out


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("block", [(64, 64), (7, 12), (5, 3), (1, 1), (300, 256)])
def test_gpu_uniform_is_bit_identical_to_cpu(grid, comm, dtype, block):
    import cupy

    shape = (2 * SEED_TILE + 37, SEED_TILE + 9)
    for low, high in ((0.0, 1.0), (-2.0, 3.5)):
        A = bm.random.uniform(shape, low, high, seed=77, block=block, grid=grid, dtype=dtype)
        R = bm.random.random(shape, seed=77, block=block, grid=grid, dtype=dtype)
        assert isinstance(A.local, cupy.ndarray)
        np.testing.assert_array_equal(
            cupy.asnumpy(A.local), _cpu_values(A, "uniform", low, high, 77)
        )
        if (low, high) == (0.0, 1.0):
            np.testing.assert_array_equal(cupy.asnumpy(R.local), cupy.asnumpy(A.local))


#: the largest difference allowed between the GPU's and the CPU's normal values, in units in
#: the last place: each backend's log1p (<= 1 ulp, CUDA and NumPy), sin and cos (<= 2 ulp on
#: CUDA, <= 1 in glibc), then two or three roundings of products
NORMAL_ULPS = 8


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("block", [(64, 64), (7, 12), (5, 3), (1, 1)])
def test_gpu_normal_is_within_a_few_ulps_of_cpu(grid, comm, dtype, block):
    import cupy

    shape = (2 * SEED_TILE + 37, SEED_TILE + 9)
    A = bm.random.standard_normal(shape, seed=78, block=block, grid=grid, dtype=dtype)
    got = cupy.asnumpy(A.local)
    want = _cpu_values(A, "normal", 0.0, 1.0, 78)
    worst = float(ulp_distance(got, want).max()) if got.size else 0.0
    worst = max(comm.allgather(worst))
    if comm.rank == 0:
        print(f"\nGPU vs CPU standard_normal {np.dtype(dtype).name} block {block}: max {worst} ulp")
    assert worst <= NORMAL_ULPS


@pytest.mark.gpu
@gpu
def test_gpu_fill_is_ordered_before_the_streams(grid):
    """A fresh random array read by an operator at once (the fill is on the current stream,
    which the backend's streams are ordered after)."""
    A = bm.random.standard_normal((300, 200), seed=1, block=64, grid=grid)
    B = bm.random.standard_normal((200, 100), seed=2, block=64, grid=grid)
    c = (A @ B).to_numpy()
    a, b = A.to_numpy(), B.to_numpy()
    bound = 2 * a.shape[1] * np.finfo(np.float64).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(c - a @ b) <= bound)


@pytest.mark.parametrize("dist", ["normal", "uniform", "random"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
def test_vectors_are_the_first_row_of_the_matrix(grid, dist, dtype):
    """A vector of length n is row 0 of the 1 x n matrix of the same seed, for every block."""
    n = 2 * SEED_TILE + 13
    row = _make(dist, (1, n), dtype, seed=21, block=(1, 5), grid=grid).to_numpy()[0]
    for block in [7, (64,), 300, None]:
        x = _make(dist, n, dtype, seed=21, block=block, grid=grid)
        assert x.ndim == 1 and x.shape == (n,) and x.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(x.to_numpy(), row, err_msg=f"block {block}")
    assert _make(dist, (0,), dtype, seed=21, block=3, grid=grid).to_numpy().shape == (0,)
