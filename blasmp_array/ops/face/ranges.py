"""Vectors of evenly spaced values: :func:`arange` and :func:`linspace`, NumPy's.

Each rank computes the elements it stores from their global indices (``start + i * step``, as
NumPy fills them), so construction needs no communication beyond the allocation; the values
are the same whatever the grid and block.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ...array import BlockCyclicArray, _vector_block, check_array_dtype
from ...creation import DEFAULT_BLOCK, _check_grid
from ...grid import ProcessGrid
from ..engine._vectors import new_vector

__all__ = ["arange", "linspace"]


def _fill(x: BlockCyclicArray, values_of: Any) -> BlockCyclicArray:
    """Write ``values_of(global indices)`` (host) into this rank's elements of the vector."""
    data = x._data
    if data.size:
        rows = x.layout.local_rows(x.grid.myrow)
        data[:, 0] = x.grid.backend.asarray(np.asarray(values_of(rows)).astype(x.dtype))
    return x


def arange(
    start: Any,
    stop: Any = None,
    step: Any = None,
    dtype: Any = None,
    *,
    block: int | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """Evenly spaced values in ``[start, stop)`` as a distributed vector (``np.arange``).

    Parameters
    ----------
    start, stop, step : number
        As NumPy's: ``arange(n)`` is ``0 .. n-1``; ``step`` defaults to 1.
    dtype : dtype, optional
        NumPy's choice by default (int64 for integer arguments, float64 for floats); one of
        the array dtypes.
    block : int, optional
        Elements per block (default ``DEFAULT_BLOCK[0]``).
    grid : ProcessGrid, optional
        Default :func:`blasmp_array.creation.default_grid`.

    Returns
    -------
    BlockCyclicArray
        A vector of ``ceil((stop - start) / step)`` elements, ``start + i * step``.
    """
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if not isinstance(v, int | float | np.integer | np.floating) or isinstance(v, bool):
            raise TypeError(f"arange: {name} must be a real number, got {v!r}")
    if step == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    dt = np.arange(start, start + step, step).dtype if dtype is None else np.dtype(dtype)
    check_array_dtype(dt)
    n = max(0, math.ceil((stop - start) / step))
    g = _check_grid(grid)
    x = new_vector(n, _vector_block(block, DEFAULT_BLOCK[0]), g, dt)
    if dt.kind in "iub":
        first, delta = operator.index(int(start)), int(step)
        return _fill(x, lambda i: first + i * delta)
    return _fill(x, lambda i: start + i.astype(np.float64) * step)


def linspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    retstep: bool = False,
    dtype: Any = None,
    *,
    block: int | None = None,
    grid: ProcessGrid | None = None,
) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` as a distributed vector
    (``np.linspace``, its formula element by element: ``start + i * step``, the last value
    ``stop`` exactly when ``endpoint``; integer dtypes round towards minus infinity).

    Parameters
    ----------
    start, stop : number
    num : int
        Number of values (non-negative).
    endpoint : bool
        Include ``stop`` (default).
    retstep : bool
        Return ``(vector, step)``.
    dtype : dtype, optional
        float64 by default (complex128 for complex bounds).
    block, grid
        As :func:`arange`.

    Returns
    -------
    BlockCyclicArray or (BlockCyclicArray, float)
    """
    if not isinstance(num, int | np.integer) or isinstance(num, bool) or num < 0:
        raise ValueError(f"linspace: num must be a non-negative integer, got {num!r}")
    num = int(num)
    div = (num - 1) if endpoint else num
    probe = np.linspace(np.asarray(start), np.asarray(stop), 2, endpoint=endpoint, retstep=False)
    work = probe.dtype  # NumPy's computation dtype
    dt = work if dtype is None else np.dtype(dtype)
    check_array_dtype(dt)
    delta = np.asarray(stop, work) - np.asarray(start, work)
    step = delta / div if div > 0 else np.nan * delta
    g = _check_grid(grid)
    x = new_vector(num, _vector_block(block, DEFAULT_BLOCK[0]), g, dt)

    def values(i: np.ndarray) -> np.ndarray:
        y = i.astype(work)
        if div > 0:
            y = y * step if np.all(step != 0) else y / div * delta
        else:
            y = y * delta
        y = y + np.asarray(start, work)
        if endpoint and num > 1:
            y[i == num - 1] = stop
        if dt.kind in "iu":
            y = np.floor(y)
        return y

    _fill(x, values)
    return (x, step) if retstep else x
