"""Random matrices that are the same for every grid and block size.

The global matrix is cut into fixed :data:`SEED_TILE` x :data:`SEED_TILE` *seed tiles*
(ragged at the bottom and right edges). Seed tile ``(ti, tj)`` is drawn, in row-major order, by
``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ti, tj)))``, so its values
depend only on ``seed``, the matrix shape and ``(ti, tj)``: never on the grid, the block size or
the number of processes. Each process generates only the seed tiles that meet its local rows
and columns, one at a time, and copies their intersection into its local matrix.

Values are generated in float64 and rounded to float32/complex64 when asked for, so a float32
matrix is the rounding of the float64 matrix of the same seed. Complex matrices take the real
parts and then the imaginary parts from the same tile generator.

The generator is NumPy's default (PCG64) behind ``SeedSequence``; the stream of a given seed is
therefore stable as long as NumPy keeps it stable (NumPy's policy for ``Generator``).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ._alloc import new_array
from .array import BlockCyclicArray, check_dtype
from .creation import _check_grid, normalize_block, normalize_shape
from .grid import ProcessGrid
from .layout import BlockCyclicLayout

__all__ = ["SEED_TILE", "standard_normal", "uniform", "random"]

#: Side of the seed tiles (fixed: changing it changes every random matrix).
SEED_TILE = 256


def _check_seed(seed: Any, grid: ProcessGrid) -> int | tuple[int, ...]:
    if seed is None:
        # one seed for all ranks: drawn from OS entropy on rank 0
        entropy = np.random.SeedSequence().entropy if grid.rank == 0 else None
        return int(grid.backend.bcast(entropy, root=0))
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool | np.bool_):
        if seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return int(seed)
    if (
        isinstance(seed, tuple | list)
        and seed
        and all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and int(s) >= 0
            for s in seed
        )
    ):
        return tuple(int(s) for s in seed)
    raise TypeError(f"seed must be None, a non-negative int or a sequence of them, got {seed!r}")


def _generate(
    shape: Any,
    seed: Any,
    block: Any,
    grid: ProcessGrid | None,
    dtype: Any,
    draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray],
) -> BlockCyclicArray:
    """Fill a new array tile by tile; ``draw(rng, tile_shape)`` gives float64 values."""
    shape = normalize_shape(shape)
    blk = normalize_block(block)
    dt = check_dtype(dtype)
    g = _check_grid(grid)
    seed = _check_seed(seed, g)
    layout = BlockCyclicLayout(shape, blk, g.shape)
    out = new_array(layout, g, dt)
    if out._data.size == 0:
        return out
    backend = g.backend
    rows = layout.local_rows(g.myrow)  # increasing global indices
    cols = layout.local_cols(g.mycol)
    m, n = shape
    complex_ = dt.kind == "c"
    for ti in np.unique(rows // SEED_TILE):
        r0 = int(ti) * SEED_TILE
        # local rows lo:hi fall into seed tile row ti
        lo, hi = np.searchsorted(rows, [r0, r0 + SEED_TILE])
        tile_rows = rows[lo:hi] - r0
        for tj in np.unique(cols // SEED_TILE):
            c0 = int(tj) * SEED_TILE
            clo, chi = np.searchsorted(cols, [c0, c0 + SEED_TILE])
            tile_cols = cols[clo:chi] - c0
            tshape = (min(SEED_TILE, m - r0), min(SEED_TILE, n - c0))
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(ti), int(tj))))
            tile: np.ndarray = draw(rng, tshape)
            if complex_:
                tile = tile + 1j * draw(rng, tshape)
            piece = tile[np.ix_(tile_rows, tile_cols)].astype(dt)
            out._data[lo:hi, clo:chi] = backend.asarray(piece)
    return out


def standard_normal(
    shape: tuple[int, int],
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
) -> BlockCyclicArray:
    """A matrix of independent standard normal samples, identical for any grid and block.

    For complex dtypes each entry is a standard complex normal ``(x + i y) / sqrt(2)`` with
    ``x, y`` independent standard normals, so ``E|z|^2 = 1``.

    Parameters
    ----------
    shape : (int, int)
        Global shape.
    seed : int or sequence of int, optional
        Non-negative. ``None`` draws a seed from OS entropy on rank 0 and broadcasts it.
    block, grid, dtype
        As :func:`blasmp_array.empty`.

    Returns
    -------
    BlockCyclicArray
    """
    dt = check_dtype(dtype)
    scale = 1.0 / np.sqrt(2.0) if dt.kind == "c" else 1.0

    def draw(rng: np.random.Generator, tshape: tuple[int, int]) -> np.ndarray:
        return rng.standard_normal(tshape) * scale

    return _generate(shape, seed, block, grid, dt, draw)


def uniform(
    shape: tuple[int, int],
    low: float = 0.0,
    high: float = 1.0,
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
) -> BlockCyclicArray:
    """A matrix of independent samples uniform in ``[low, high)``, identical for any grid.

    For complex dtypes the real and imaginary parts are independent, each uniform in
    ``[low, high)``. Other parameters as :func:`standard_normal`.
    """
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, numbers.Real) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite real number, got {v!r}")
    if not low <= high:
        raise ValueError(f"uniform needs low <= high, got low={low}, high={high}")

    def draw(rng: np.random.Generator, tshape: tuple[int, int]) -> np.ndarray:
        return rng.uniform(float(low), float(high), tshape)

    return _generate(shape, seed, block, grid, dtype, draw)


def random(
    shape: tuple[int, int],
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
) -> BlockCyclicArray:
    """Uniform samples in ``[0, 1)`` (``uniform(shape, 0.0, 1.0, ...)``)."""
    return uniform(shape, 0.0, 1.0, seed=seed, block=block, grid=grid, dtype=dtype)
