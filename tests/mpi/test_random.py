"""Distributed tests of blasmp_array.random: the same matrix for every grid and block size."""

from __future__ import annotations

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.random import SEED_TILE

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


_GRIDS: dict = {}


def _cached_grid(shape, backend):
    """A grid per shape for the whole module: every ProcessGrid holds two communicators, and
    MPICH allows only about 2000 per process."""
    if (shape, backend) not in _GRIDS:
        _GRIDS[(shape, backend)] = bm.ProcessGrid(*shape, backend=backend)
    return _GRIDS[(shape, backend)]


SHAPE = (SEED_TILE + 37, SEED_TILE + 5)  # 2 x 2 seed tiles, both ragged


def _reference(shape, seed, dtype, draw):
    """The documented construction, tile by tile, in plain NumPy on one process."""
    m, n = shape
    out = np.empty(shape, dtype=np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    for ti in range(-(-m // SEED_TILE)):
        for tj in range(-(-n // SEED_TILE)):
            r0, c0 = ti * SEED_TILE, tj * SEED_TILE
            ts = (min(SEED_TILE, m - r0), min(SEED_TILE, n - c0))
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ti, tj)))
            tile = draw(rng, ts)
            if np.dtype(dtype).kind == "c":
                tile = tile + 1j * draw(rng, ts)
            out[r0 : r0 + ts[0], c0 : c0 + ts[1]] = tile
    return out.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_standard_normal_is_grid_and_block_independent(grid, comm, dtype):
    seed = 1234
    a = bm.random.standard_normal(SHAPE, seed=seed, block=(7, 64), grid=grid, dtype=dtype)
    other = _cached_grid((1, comm.size), grid.backend.name)
    b = bm.random.standard_normal(SHAPE, seed=seed, block=(300, 1), grid=other, dtype=dtype)
    ga, gb = a.to_numpy(), b.to_numpy()
    assert ga.dtype == np.dtype(dtype) and ga.shape == SHAPE
    np.testing.assert_array_equal(ga, gb)  # bit for bit
    scale = 1 / np.sqrt(2) if np.dtype(dtype).kind == "c" else 1.0
    ref = _reference(SHAPE, seed, dtype, lambda rng, s: rng.standard_normal(s) * scale)
    np.testing.assert_array_equal(ga, ref)


def test_uniform_matches_reference_and_range(grid):
    low, high = -2.0, 3.0
    a = bm.random.uniform(SHAPE, low, high, seed=7, block=5, grid=grid)
    g = a.to_numpy()
    ref = _reference(SHAPE, 7, np.float64, lambda rng, s: rng.uniform(low, high, s))
    np.testing.assert_array_equal(g, ref)
    assert g.min() >= low and g.max() < high
    c = bm.random.uniform((9, 8), 0.0, 1.0, seed=7, block=2, grid=grid, dtype=np.complex64)
    gc = c.to_numpy()
    assert np.all((gc.real >= 0) & (gc.real < 1) & (gc.imag >= 0) & (gc.imag < 1))
    r = bm.random.random((9, 8), seed=7, block=3, grid=grid)
    np.testing.assert_array_equal(r.to_numpy(), bm.random.uniform((9, 8), seed=7).to_numpy())


def test_single_precision_is_rounded_double(grid):
    d = bm.random.standard_normal((40, 30), seed=3, block=(4, 9), grid=grid).to_numpy()
    s = bm.random.standard_normal((40, 30), seed=3, block=(8, 3), grid=grid, dtype=np.float32)
    np.testing.assert_array_equal(s.to_numpy(), d.astype(np.float32))


def test_complex_normal_statistics(grid):
    # E|z|^2 = 1 and E z = 0: check the sample mean within 6 standard errors
    n = SHAPE[0] * SHAPE[1]
    z = bm.random.standard_normal(SHAPE, seed=11, block=64, grid=grid, dtype=np.complex128)
    g = z.to_numpy()
    p = np.abs(g) ** 2  # exponential(1): mean 1, std 1
    assert abs(p.mean() - 1) < 6 / np.sqrt(n)
    # real and imaginary parts: variance 1/2 each, independent
    assert abs(g.real.var() - 0.5) < 6 * np.sqrt(2 * 0.25 / n)
    assert abs(g.mean()) < 6 * np.sqrt(1 / n)


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


def test_empty_and_tiny_shapes(grid):
    for shape in ((0, 4), (3, 0), (1, 1)):
        a = bm.random.standard_normal(shape, seed=0, block=2, grid=grid)
        assert a.to_numpy().shape == shape


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(seed=-1), ValueError, "non-negative"),
        (dict(seed="x"), TypeError, "seed"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(seed=0, block=0), ValueError, "block"),
        (dict(seed=0, dtype=np.int32), TypeError, "float32"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        bm.random.standard_normal((4, 4), grid=bm.creation.default_grid(), **kwargs)


def test_bad_uniform_bounds(grid):
    with pytest.raises(ValueError, match="low <= high"):
        bm.random.uniform((4, 4), 2.0, 1.0, seed=0, grid=grid)
    with pytest.raises(ValueError, match="finite"):
        bm.random.uniform((4, 4), 0.0, np.inf, seed=0, grid=grid)
