"""Vectors made and taken apart: the layout of a new vector, a vector from a replicated host
vector, and the column faces of vector operands.

A vector of length ``n`` is stored as an ``n x 1`` column, its rows in blocks of ``b`` over the
process rows of process column 0 (ScaLAPACK's layout of a vector; see
:mod:`blasmp_array.array`). Results that are vectors of a matrix's rows (``A @ x``,
``A.sum(axis=1)``) take the matrix's row block, results along its columns (``x @ A``,
``A.sum(axis=0)``) its column block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray, as_vector
from ...grid import ProcessGrid
from ...layout import BlockCyclicLayout

__all__ = ["vector_layout", "from_host", "new_vector", "column"]


def vector_layout(n: int, b: int, grid: ProcessGrid) -> BlockCyclicLayout:
    """The layout of a new vector of length ``n``: an ``n x 1`` column in blocks of ``b``."""
    return BlockCyclicLayout((n, 1), (max(1, b), 1), grid.shape)


def new_vector(n: int, b: int, grid: ProcessGrid, dtype: Any, fill: Any = None) -> BlockCyclicArray:
    """A new vector (collective: symmetric memory on the GPU), uninitialised unless ``fill``."""
    return as_vector(new_array(vector_layout(n, b, grid), grid, dtype, fill=fill))


def from_host(v: Any, b: int, grid: ProcessGrid, dtype: Any = None) -> BlockCyclicArray:
    """The vector of the 1-D host array ``v``, the same on every rank (a reduction's result):
    each rank uploads only the elements it stores, no communication."""
    v = np.asarray(v)
    out = new_vector(v.shape[0], b, grid, v.dtype if dtype is None else dtype)
    data = out._data
    if data.size:
        mine = v if grid.size == 1 else v[out.layout.local_rows(grid.myrow)]
        data[:, 0] = grid.backend.asarray(mine.astype(data.dtype, copy=False))
    return out


def column(x: BlockCyclicArray) -> BlockCyclicArray:
    """The 2-D face an operator works on: a vector's ``n x 1`` column face, a matrix itself."""
    return x._column
