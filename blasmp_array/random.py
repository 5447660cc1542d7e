"""Random matrices that are the same for every grid, block size and number of processes.

Every element is a function of the seed and its global position only: a counter-based
generator (Philox4x64-10, the algorithm of NumPy's ``np.random.Philox``) keyed by
``SeedSequence(seed)`` is evaluated at a counter made of the element's *seed tile*
``(i // SEED_TILE, j // SEED_TILE)`` and its position inside it. So a seed gives the same matrix
on any grid, with any block size and any number of processes, and a leading ``m x n`` submatrix
of a larger matrix equals the ``m x n`` matrix of the same seed. Each process computes only its
own elements, in place: NumPy code on the CPU backend, one CUDA kernel on the GPU backend.
Uniform values are bit-identical between the backends; normal values agree to within a few
units in the last place (each backend's ``log1p``, ``sin`` and ``cos``).

The exact construction (counters, lanes, transforms) is stated in ``docs/random.md`` and in
:mod:`blasmp_array._philox`; these streams differ from those of earlier versions of the library
(which drew PCG64 seed tiles on the host).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ._alloc import new_array
from ._philox import SEED_TILE, philox_key
from ._progress import progress_bar
from .array import BlockCyclicArray, _vector_block, as_vector, check_dtype
from .creation import DEFAULT_BLOCK, _check_grid, _vector_length, normalize_block, normalize_shape
from .grid import ProcessGrid
from .layout import BlockCyclicLayout

__all__ = ["SEED_TILE", "standard_normal", "uniform", "random"]


def _check_seed(seed: Any, grid: ProcessGrid) -> int | tuple[int, ...]:
    """The seed as an int or a tuple of ints; ``None`` draws one on rank 0 and broadcasts it
    (collective: called after every other argument is checked)."""
    if seed is None:
        entropy = np.random.SeedSequence().entropy if grid.rank == 0 else None
        return int(grid.backend.bcast(entropy, root=0))
    if _is_int(seed):
        if seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return int(seed)
    if isinstance(seed, tuple | list) and seed and all(_is_int(s) and s >= 0 for s in seed):
        return tuple(int(s) for s in seed)
    raise TypeError(
        f"seed must be None, a non-negative int or a non-empty sequence of them, got {seed!r}"
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _check_bounds(low: Any, high: Any) -> tuple[float, float]:
    for name, v in (("low", low), ("high", high)):
        if (
            not isinstance(v, numbers.Real)
            or isinstance(v, bool | np.bool_)
            or not np.isfinite(float(v))
        ):
            raise ValueError(f"{name} must be a finite real number, got {v!r}")
    lo, hi = float(low), float(high)
    if not lo <= hi:
        raise ValueError(f"uniform needs low <= high, got low={lo}, high={hi}")
    if not np.isfinite(hi - lo):
        raise ValueError(
            f"uniform needs a finite high - low, got low={lo}, high={hi} (the width overflows "
            "float64); draw in a narrower interval and scale"
        )
    return lo, hi


def _generate(
    shape: Any,
    seed: Any,
    block: Any,
    grid: ProcessGrid | None,
    dtype: Any,
    dist: str,
    low: float,
    high: float,
    progress: Any,
) -> BlockCyclicArray:
    """Check the arguments (identically on every rank), allocate, and fill in place."""
    n = _vector_length(shape)
    if n is not None:
        return _generate_vector(n, seed, block, grid, dtype, dist, low, high, progress)
    shape = normalize_shape(shape)
    blk = normalize_block(block)
    dt = check_dtype(dtype)
    g = _check_grid(grid)
    if not isinstance(progress, bool | np.bool_):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    key = philox_key(_check_seed(seed, g))
    layout = BlockCyclicLayout(shape, blk, g.shape)
    out = new_array(layout, g, dt)
    coords = (g.myrow, g.mycol)
    fill = g.backend.random_fill
    if not progress:
        fill(out._data, layout, coords, key, dist, low, high)
        return out
    # one step per seed-tile row of the local rows (at least one call on every rank: the
    # backend's first fill is collective)
    chunks = _tile_row_chunks(layout, g.myrow) or [(0, 0)]
    bar = progress_bar(True, g.rank, len(chunks), f"random.{dist} (rank 0)", unit="tile row")
    try:
        for chunk in chunks:
            fill(out._data, layout, coords, key, dist, low, high, local_rows=chunk)
            bar.update(1)
    finally:
        bar.close()
    return out


def _generate_vector(
    n: int,
    seed: Any,
    block: Any,
    grid: ProcessGrid | None,
    dtype: Any,
    dist: str,
    low: float,
    high: float,
    progress: Any,
) -> BlockCyclicArray:
    """A vector of length ``n``: the first row of the ``1 x n`` matrix of the same seed.

    The vector is stored as its ``n x 1`` column (``as_vector``); that column's local part,
    read as one row, is the local part of the row's layout (the column's layout transposed, on
    the transposed grid coordinates), so one fill over consecutive seed-tile positions
    generates it (a column of a matrix would take one value of every 256 drawn).
    """
    vb = _vector_block(block, DEFAULT_BLOCK[0])
    dt = check_dtype(dtype)
    g = _check_grid(grid)
    if not isinstance(progress, bool | np.bool_):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    key = philox_key(_check_seed(seed, g))
    layout = BlockCyclicLayout((n, 1), (vb, 1), g.shape)
    column = new_array(layout, g, dt)
    row_layout, row_coords = layout.transposed(), (g.mycol, g.myrow)
    row = column._data.reshape(row_layout.local_shape(*row_coords))  # a view: contiguous
    g.backend.random_fill(row, row_layout, row_coords, key, dist, low, high)
    return as_vector(column)


def _tile_row_chunks(layout: BlockCyclicLayout, prow: int) -> list[tuple[int, int]]:
    """Local row ranges ``(r0, r1)`` of process row ``prow``, one per seed-tile row met."""
    tiles = layout.local_rows(prow) // SEED_TILE
    cuts = [0, *(np.flatnonzero(np.diff(tiles)) + 1).tolist(), tiles.size]
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def standard_normal(
    shape: int | tuple[int, ...],
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
    progress: bool = False,
) -> BlockCyclicArray:
    """A matrix of independent standard normal samples, identical for any grid and block.

    Like NumPy's ``Generator.standard_normal``, but from a counter-based generator keyed by
    the seed and the global position (Box-Muller on Philox4x64-10 uniforms; see
    ``docs/random.md``), so the matrix does not depend on the layout. The GPU backend's
    values agree with the CPU backend's to within a few units in the last place.

    For complex dtypes each entry is a standard complex normal ``(x + i y) / sqrt(2)`` with
    ``x, y`` independent standard normals, so ``E|z|^2 = 1``.

    Parameters
    ----------
    shape : (int, int), or int or (int,) for a vector
        Global shape ``(m, n)``. A vector of length ``n`` holds the first row of the ``1 x n``
        matrix of the same seed (stored, as every vector, as an ``n x 1`` column).
    seed : int or sequence of int, optional
        Non-negative. The same seed gives the same matrix for every grid, block and number of
        processes. ``None`` (default) draws a seed from OS entropy on rank 0 and broadcasts it.
    block : int or (int, int), optional
        Block shape ``(mb, nb)``; an int means square blocks. Default
        :data:`~blasmp_array.creation.DEFAULT_BLOCK`.
    grid : ProcessGrid, optional
        Default :func:`~blasmp_array.creation.default_grid`.
    dtype : dtype, optional
        float32, float64 (default), complex64 or complex128. Values are computed in float64;
        single precision holds the float64 values rounded to nearest.
    progress : bool, optional
        Show a progress bar on rank 0 when stdout is a terminal (tqdm or rich, if installed).
        Default False.

    Returns
    -------
    BlockCyclicArray
        A new ``shape`` matrix (collective over the grid's processes).

    Raises
    ------
    ValueError
        Negative seed or dimension, or a bad block.
    TypeError
        A seed that is not an int or a sequence of ints, an unsupported dtype.
    """
    return _generate(shape, seed, block, grid, dtype, "normal", 0.0, 1.0, progress)


def uniform(
    shape: int | tuple[int, ...],
    low: float = 0.0,
    high: float = 1.0,
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
    progress: bool = False,
) -> BlockCyclicArray:
    """A matrix of independent samples uniform in ``[low, high)``, identical for any grid.

    Each value is ``low + (high - low) * u`` with ``u = k * 2**-53`` for a random 53-bit
    integer ``k`` (NumPy's ``Generator.random``), rounded after the product and after the sum,
    bit-identical on the CPU and GPU backends. As with NumPy's ``uniform``, rounding can give
    ``high`` itself, and a float32/complex64 value (the float64 value rounded) can round up to
    ``high``. For complex dtypes the real and imaginary parts are independent, each uniform
    in ``[low, high)``.

    Parameters
    ----------
    shape : (int, int), or int or (int,) for a vector
        Global shape ``(m, n)``. A vector of length ``n`` holds the first row of the ``1 x n``
        matrix of the same seed (stored, as every vector, as an ``n x 1`` column).
    low, high : float
        Finite bounds, ``low <= high``.
    seed : int or sequence of int, optional
        Non-negative. The same seed gives the same matrix for every grid, block and number of
        processes. ``None`` (default) draws a seed from OS entropy on rank 0 and broadcasts it.
    block : int or (int, int), optional
        Block shape ``(mb, nb)``; an int means square blocks. Default
        :data:`~blasmp_array.creation.DEFAULT_BLOCK`.
    grid : ProcessGrid, optional
        Default :func:`~blasmp_array.creation.default_grid`.
    dtype : dtype, optional
        float32, float64 (default), complex64 or complex128. Values are computed in float64;
        single precision holds the float64 values rounded to nearest.
    progress : bool, optional
        Show a progress bar on rank 0 when stdout is a terminal (tqdm or rich, if installed).
        Default False.

    Returns
    -------
    BlockCyclicArray
        A new ``shape`` matrix (collective over the grid's processes).

    Raises
    ------
    ValueError
        Negative seed or dimension, bad block, ``low > high`` or a non-finite bound.
    TypeError
        A seed that is not an int or a sequence of ints, an unsupported dtype.
    """
    lo, hi = _check_bounds(low, high)
    return _generate(shape, seed, block, grid, dtype, "uniform", lo, hi, progress)


def random(
    shape: int | tuple[int, ...],
    seed: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    dtype: Any = np.float64,
    progress: bool = False,
) -> BlockCyclicArray:
    """Uniform samples in ``[0, 1)``: ``uniform(shape, 0.0, 1.0, ...)``, the same values.

    Like NumPy's ``Generator.random``: ``k * 2**-53`` for a random 53-bit integer ``k``,
    bit-identical on the CPU and GPU backends (float32 values, rounded, can equal 1.0).

    Parameters
    ----------
    shape : (int, int), or int or (int,) for a vector
        Global shape ``(m, n)``. A vector of length ``n`` holds the first row of the ``1 x n``
        matrix of the same seed (stored, as every vector, as an ``n x 1`` column).
    seed : int or sequence of int, optional
        Non-negative. The same seed gives the same matrix for every grid, block and number of
        processes. ``None`` (default) draws a seed from OS entropy on rank 0 and broadcasts it.
    block : int or (int, int), optional
        Block shape ``(mb, nb)``; an int means square blocks. Default
        :data:`~blasmp_array.creation.DEFAULT_BLOCK`.
    grid : ProcessGrid, optional
        Default :func:`~blasmp_array.creation.default_grid`.
    dtype : dtype, optional
        float32, float64 (default), complex64 or complex128. Values are computed in float64;
        single precision holds the float64 values rounded to nearest.
    progress : bool, optional
        Show a progress bar on rank 0 when stdout is a terminal (tqdm or rich, if installed).
        Default False.

    Returns
    -------
    BlockCyclicArray
        A new ``shape`` matrix (collective over the grid's processes).

    Raises
    ------
    ValueError
        Negative seed or dimension, or a bad block.
    TypeError
        A seed that is not an int or a sequence of ints, an unsupported dtype.
    """
    return _generate(shape, seed, block, grid, dtype, "uniform", 0.0, 1.0, progress)
