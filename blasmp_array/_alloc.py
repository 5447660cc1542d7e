"""The one allocator of distributed arrays: the local tiles of every fresh array come from here.

Constructors (``creation.py``, ``random.py``, ``io/``), redistribution and every operator's
result call :func:`new_array`. It sits just above ``array`` (it imports only ``layout`` and
``array``), so that ``creation`` and ``io`` below ``ops``, and ``ops`` itself, can all import it
without a cycle.

Poisoning (a test hook): with :data:`_DEBUG_FILL` set (e.g. to NaN), every fresh floating or
complex array allocated without an explicit ``fill`` is filled with it, so an element an
operator or exchange fails to write shows up in the result. Results that must start at zero
(SYRK's, a TRSM with ``alpha == 0``) therefore ask for ``fill=0`` explicitly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import BlockCyclicArray
from .grid import ProcessGrid
from .layout import BlockCyclicLayout

__all__ = ["new_array", "scratch"]

#: Test hook: when not None, the local tiles of every fresh array of a floating or complex
#: dtype allocated without ``fill`` are filled with this value (e.g. ``float('nan')``).
_DEBUG_FILL: Any = None


def new_array(
    layout: BlockCyclicLayout, grid: ProcessGrid, dtype: Any, fill: Any = None
) -> BlockCyclicArray:
    """A new array of ``layout`` on ``grid`` (collective: symmetric memory on the GPU backend).

    Parameters
    ----------
    layout : BlockCyclicLayout
        Global shape, block and grid shape (``grid.shape``) of the result.
    grid : ProcessGrid
    dtype : dtype
    fill : scalar, optional
        Value of every element (written on the host thread, before anything is enqueued);
        uninitialised if omitted (or :data:`_DEBUG_FILL` when that is set).
    """
    if layout.grid_shape != grid.shape:
        raise ValueError(f"layout grid {layout.grid_shape} differs from grid {grid.shape}")
    data = grid.backend.empty(layout.local_shape(grid.myrow, grid.mycol), np.dtype(dtype))
    _fill(data, fill)
    return BlockCyclicArray._of(data, layout, grid)  # the local shape is the layout's


def scratch(xp: Any, shape: tuple[int, ...], dtype: Any, order: str = "C") -> Any:
    """A fresh local work array of the array module ``xp`` that its user must write whole
    (a factored matrix, a panel buffer): uninitialised, or :data:`_DEBUG_FILL` when that is
    set, as :func:`new_array`'s tiles (written on the host thread, before anything is
    enqueued)."""
    out = xp.empty(shape, np.dtype(dtype), order=order)
    _fill(out, None)
    return out


def _fill(data: Any, fill: Any) -> None:
    """``data[...] = fill``; with no ``fill``, :data:`_DEBUG_FILL` for floating and complex
    dtypes when that is set (the poisoning rule of both allocators)."""
    if fill is None and _DEBUG_FILL is not None and data.dtype.kind in "fc":
        fill = _DEBUG_FILL
    if fill is not None:
        data[...] = fill
